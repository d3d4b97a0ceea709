/*
 * Shared checks for the libFuzzer targets (tests/fuzz/fuzz_*.c, make fuzz).
 *
 * Every report the parsers emit goes through fz_report(): it formats the
 * line exactly as the library prints it (bs_config_describe) and fails if the
 * line holds a control byte (< 0x20 or 0x7f) or overflows, or if the report
 * is malformed. fz_check_config() checks the invariants config.h and
 * policy.h promise for anything the parsers accept. A failed check prints
 * "FUZZ CHECK FAILED: ..." and aborts, so libFuzzer saves the input.
 */
#ifndef BS_FUZZ_H
#define BS_FUZZ_H

#include "config.h"
#include "log.h"
#include "policy.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define FZ_MAX_DURATION (30ull * 24 * 3600 * BS_NS_PER_SEC)

__attribute__((noreturn, format(printf, 1, 2))) static void fz_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("FUZZ CHECK FAILED: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	abort();
}

#define FZ_CHECK(cond, ...)                                                      \
	do {                                                                     \
		if (!(cond))                                                     \
			fz_fail(__VA_ARGS__);                                    \
	} while (0)

/* s (n bytes) with control and non-ASCII bytes as \xNN, for messages (8
 * buffers in turn: one message can show several). */
static inline const char *fz_escape(const char *s, size_t n)
{
	static char bufs[8][4 * BS_LINE_MAX + 16];
	static unsigned next;
	char *out = bufs[next++ % 8];
	size_t o = 0;
	for (size_t i = 0; i < n && o + 5 < sizeof bufs[0]; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c >= 0x7f || c == '\\')
			o += (size_t)snprintf(out + o, sizeof bufs[0] - o, "\\x%02x", c);
		else
			out[o++] = (char)c;
	}
	out[o] = '\0';
	return out;
}

static inline const char *fz_str(const char *s)
{
	return s ? fz_escape(s, strlen(s)) : "(null)";
}

/* What the caller expects of the reports of one parse. */
struct fz_reports {
	const char *origin;  /* every report's origin; NULL: any */
	unsigned max_line;   /* reports name no line past this */
	unsigned n;
};

/* Returns the offset of the first control byte in s[0..n), or -1. */
static inline long fz_find_ctrl(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f)
			return (long)i;
	}
	return -1;
}

static inline void fz_report(void *ctx, const char *origin, unsigned line, const char *key,
			     const char *value, const char *why)
{
	struct fz_reports *r = ctx;
	r->n++;
	FZ_CHECK(origin && why && *why, "report without origin or reason (origin %s, why %s)",
		 fz_str(origin), fz_str(why));
	FZ_CHECK(!r->origin || !strcmp(origin, r->origin), "report names origin %s, expected %s",
		 fz_str(origin), r->origin);
	FZ_CHECK(line <= r->max_line, "report names line %u of a %u-line text", line,
		 r->max_line);
	struct bs_line l;
	memset(&l, 0, sizeof l);
	bs_config_describe(&l, origin, line, key, value, why);
	FZ_CHECK(l.n <= BS_LINE_MAX, "report line overflows (%zu > %d)", l.n, BS_LINE_MAX);
	long at = fz_find_ctrl(l.buf, l.n);
	if (at < 0)
		return;
	/* BACKOFFSHIM_FUZZ_CTRL=warn: say so once and go on (to look for
	 * other problems while control bytes are still printed raw) */
	static int warned;
	const char *mode = getenv("BACKOFFSHIM_FUZZ_CTRL");
	int warn = mode && !strcmp(mode, "warn");
	if (warn && warned)
		return;
	fputs(warn ? "FUZZ CHECK WARNING: " : "FUZZ CHECK FAILED: ", stderr);
	fprintf(stderr,
		"CONTROL BYTE 0x%02x at offset %ld of the report line\n"
		"  line:   %s\n"
		"  origin: %s\n  line no: %u\n  key:    %s\n  value:  %s\n  why:    %s\n",
		(unsigned char)l.buf[at], at, fz_escape(l.buf, l.n), fz_str(origin), line,
		fz_str(key), fz_str(value), fz_str(why));
	if (warn) {
		warned = 1;
		return;
	}
	abort();
}

/* A why string returned by a value parser: present and printable. */
static inline void fz_check_why(const char *why)
{
	FZ_CHECK(why && *why, "a parser failed without a reason");
	long at = fz_find_ctrl(why, strlen(why));
	FZ_CHECK(at < 0, "control byte in a parser's reason: %s", fz_str(why));
}

static inline int fz_terminated(const char *s, size_t size)
{
	return memchr(s, '\0', size) != NULL;
}

/* The schedule stays finite and bounded for every accepted policy. */
static inline void fz_check_schedule(const struct bs_policy *p)
{
	uint64_t prev = 0, iv = 0;
	for (uint32_t f = 1; f <= 70; f += f < 40 ? 1 : 10) {
		double u = (double)(f % 7) / 7.0;
		uint64_t w = bs_policy_wait(p, f, prev, u);
		FZ_CHECK(w == BS_STOP || w <= 2 * FZ_MAX_DURATION,
			 "policy %d wait after %u failures is %llu ns", p->kind, f,
			 (unsigned long long)w);
		if (w != BS_STOP)
			prev = w;
		uint64_t b = bs_policy_backoff(p, f);
		FZ_CHECK(b <= p->max_backoff || b <= p->initial_backoff,
			 "backoff %llu above max_backoff %llu", (unsigned long long)b,
			 (unsigned long long)p->max_backoff);
		iv = bs_responsive_up(p, iv, u);
		/* the 10 ms floor under every wait wins over a smaller cap */
		FZ_CHECK(iv <= p->max_backoff || iv == BS_RETRY_FLOOR,
			 "responsive interval %llu above max_backoff", (unsigned long long)iv);
		FZ_CHECK(iv == 0 || iv >= BS_RETRY_FLOOR, "responsive interval %llu below the floor",
			 (unsigned long long)iv);
		FZ_CHECK(w == BS_STOP || w >= BS_RETRY_FLOOR || (w == 0 && p->kind == BS_POLICY_LIST),
			 "policy %d wait %llu below the floor", p->kind, (unsigned long long)w);
	}
	for (int k = 0; k < 5; k++) {
		uint64_t d = bs_responsive_down(p, iv, 0.5);
		FZ_CHECK(d <= iv, "responsive step down went up");
		iv = d;
	}
}

/* The invariants of one effective configuration (global or a rule's). */
static inline void fz_check_config(const struct bs_config *c, int is_rule)
{
	const struct bs_policy *p = &c->policy;
	FZ_CHECK(p->initial_backoff > 0 && p->initial_backoff <= FZ_MAX_DURATION,
		 "initial_backoff %llu", (unsigned long long)p->initial_backoff);
	FZ_CHECK(p->max_backoff > 0 && p->max_backoff <= FZ_MAX_DURATION, "max_backoff %llu",
		 (unsigned long long)p->max_backoff);
	FZ_CHECK(p->min_connect_timeout > 0 && p->min_connect_timeout <= FZ_MAX_DURATION,
		 "min_connect_timeout %llu", (unsigned long long)p->min_connect_timeout);
	FZ_CHECK(isfinite(p->multiplier) && p->multiplier >= 1.0 && p->multiplier <= 100.0,
		 "multiplier %g", p->multiplier);
	FZ_CHECK(isfinite(p->jitter) && p->jitter >= 0.0 && p->jitter <= 1.0, "jitter %g",
		 p->jitter);
	FZ_CHECK(isfinite(p->up_multiplier) && p->up_multiplier >= 1.0 &&
			 p->up_multiplier <= 100.0,
		 "up_multiplier %g", p->up_multiplier);
	FZ_CHECK(isfinite(p->down_multiplier) && p->down_multiplier >= 0.0 &&
			 p->down_multiplier <= 1.0,
		 "down_multiplier %g", p->down_multiplier);
	FZ_CHECK(isfinite(p->randomization_factor) && p->randomization_factor >= 0.0 &&
			 p->randomization_factor <= 1.0,
		 "randomization_factor %g", p->randomization_factor);
	FZ_CHECK(p->max_randomization <= FZ_MAX_DURATION, "max_randomization %llu",
		 (unsigned long long)p->max_randomization);
	FZ_CHECK(p->down_threshold <= 1000000000u, "down_threshold %u", p->down_threshold);
	FZ_CHECK(p->kind >= BS_POLICY_GRPC && p->kind <= BS_POLICY_RESPONSIVE, "policy %d",
		 p->kind);
	FZ_CHECK(p->jitter_mode >= BS_JITTER_PROPORTIONAL && p->jitter_mode <= BS_JITTER_DECORRELATED,
		 "jitter_mode %d", p->jitter_mode);
	FZ_CHECK(p->ndelays <= BS_DELAYS_MAX, "ndelays %u", p->ndelays);
	for (uint32_t i = 0; i < p->ndelays; i++)
		FZ_CHECK(p->delays[i] <= FZ_MAX_DURATION, "delay %u is %llu", i,
			 (unsigned long long)p->delays[i]);
	FZ_CHECK(c->max_attempts <= 1000000000u, "max_attempts %u", c->max_attempts);
	FZ_CHECK(c->max_elapsed <= FZ_MAX_DURATION, "max_elapsed %llu",
		 (unsigned long long)c->max_elapsed);
	FZ_CHECK(c->healthy_after <= FZ_MAX_DURATION, "healthy_after %llu",
		 (unsigned long long)c->healthy_after);
	FZ_CHECK(!(c->retry_on[0] & 1), "errno 0 in retry_on");
	FZ_CHECK(c->unix_sockets == 0 || c->unix_sockets == 1, "unix %d", c->unix_sockets);
	FZ_CHECK(c->disable == 0 || c->disable == 1, "disable %d", c->disable);
	FZ_CHECK(c->nonblocking >= BS_NB_RETRY && c->nonblocking <= BS_NB_AUTO, "nonblocking %d",
		 c->nonblocking);
	FZ_CHECK(c->log_level >= BS_LOG_OFF && c->log_level <= BS_LOG_DEBUG, "log level %d",
		 c->log_level);
	FZ_CHECK(fz_terminated(c->log_file, sizeof c->log_file), "log_file not terminated");
	FZ_CHECK(c->seed_set == 0 || c->seed_set == 1, "seed_set %d", c->seed_set);
	FZ_CHECK(c->seed_set || c->seed == 0, "seed without seed_set");
	if (is_rule)
		FZ_CHECK(c->rules == NULL, "a rule's settings point at rules");
	fz_check_schedule(p);
}

/* Rules read so far, before or after bs_config_finish (finished = 1). */
static inline void fz_check_rules(const struct bs_config *c, int finished)
{
	const struct bs_rules *rs = c->rules;
	if (!rs)
		return;
	FZ_CHECK(rs->n <= BS_RULES_MAX, "%u rules", rs->n);
	for (unsigned i = 0; i < rs->n; i++) {
		const struct bs_rule *r = &rs->r[i];
		FZ_CHECK(fz_terminated(r->text, sizeof r->text) &&
				 fz_terminated(r->origin, sizeof r->origin),
			 "rule %u text/origin not terminated", i);
		FZ_CHECK(r->nkv <= BS_RULE_KEYS, "rule %u has %u keys", i, r->nkv);
		for (unsigned k = 0; k < r->nkv; k++) {
			FZ_CHECK(fz_terminated(r->kv[k].key, sizeof r->kv[k].key) &&
					 fz_terminated(r->kv[k].value, sizeof r->kv[k].value),
				 "rule %u key %u not terminated", i, k);
			/* accepted keys are [backoff] keys that apply */
			struct bs_config scratch;
			const char *why;
			bs_config_defaults(&scratch);
			FZ_CHECK(bs_config_set(&scratch, "backoff", r->kv[k].key, r->kv[k].value,
					       &why) == 0,
				 "rule %u kept a key that does not apply: %s = %s", i,
				 fz_str(r->kv[k].key), fz_str(r->kv[k].value));
		}
		for (unsigned j = 0; j < i; j++)
			FZ_CHECK(!bs_spec_same(&rs->r[j].spec, &r->spec),
				 "rules %u and %u have the same spec", j, i);
		if (finished)
			fz_check_config(&r->cfg, 1);
	}
}

/* The global settings of a and b are the same (rules aside). */
static inline int fz_same_globals(const struct bs_config *a, const struct bs_config *b)
{
	struct bs_config x = *a, y = *b;
	x.rules = y.rules = NULL;
	return memcmp(&x, &y, sizeof x) == 0;
}

/* A NUL-terminated copy of data[0..n) in a buffer of exactly n + 1 bytes,
 * so that ASan catches a read past the terminator. */
static inline char *fz_strndup(const uint8_t *data, size_t n)
{
	char *s = malloc(n + 1);
	if (!s)
		abort();
	memcpy(s, data, n);
	s[n] = '\0';
	return s;
}

#endif
