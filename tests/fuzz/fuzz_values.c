/*
 * libFuzzer target: the value parsers of config_parse.c and bs_config_set.
 * The first byte picks the parser (and, for bs_config_set, the key), the rest
 * is the value. Checks what each parser promises: ranges, an untouched output
 * on failure with a printable reason, and agreement with the C library's
 * strtold/strtoull (in the C locale) on what an accepted number means.
 */
#include "fuzz.h"
#include "errname.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static const char *const keys[][2] = {
	{"backoff", "initial_backoff"}, {"backoff", "multiplier"},
	{"backoff", "jitter"}, {"backoff", "max_backoff"},
	{"backoff", "min_connect_timeout"}, {"backoff", "max_attempts"},
	{"backoff", "max_elapsed"}, {"backoff", "retry_on"},
	{"backoff", "unix"}, {"backoff", "policy"},
	{"backoff", "jitter_mode"}, {"backoff", "delays"},
	{"backoff", "up_multiplier"}, {"backoff", "down_multiplier"},
	{"backoff", "down_threshold"}, {"backoff", "randomization_factor"},
	{"backoff", "max_randomization"}, {"backoff", "nonblocking"},
	{"backoff", "healthy_after"}, {"backoff", "seed"},
	{"backoff", "disable"}, {"log", "level"},
	{"log", "file"}, {"log", "jitter"},
	{"dest", "jitter"}, {"backoff", "no_such_key"},
	{NULL, "LOG"}, {NULL, "LOG_FILE"},
	{NULL, "JITTER"}, {NULL, "max_backoff"},
	{NULL, "DELAYS"}, {NULL, "RETRY_ON"},
};
#define NKEYS (sizeof keys / sizeof keys[0])

/* The unit a duration parser accepted, in ns, from the text after the
 * number; 0 if there is none (seconds). */
static long double unit_ns(const char *u)
{
	while (*u == ' ' || *u == '\t')
		u++;
	size_t n = 0;
	while ((u[n] >= 'a' && u[n] <= 'z') || (u[n] >= 'A' && u[n] <= 'Z'))
		n++;
	static const struct {
		const char *name;
		long double ns;
	} units[] = {{"ns", 1}, {"us", 1e3L}, {"ms", 1e6L}, {"s", 1e9L}, {"m", 60e9L},
		     {"min", 60e9L}, {"h", 3600e9L}, {"d", 86400e9L}};
	if (!n)
		return 1e9L;
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (strlen(units[i].name) == n && !strncmp(units[i].name, u, n))
			return units[i].ns;
	fz_fail("duration accepted with unit %s", fz_str(u));
}

static void duration(const char *s)
{
	const char *why = NULL;
	uint64_t ns = 12345;
	if (bs_parse_duration(s, &ns, &why)) {
		fz_check_why(why);
		FZ_CHECK(ns == 12345, "failed duration wrote its output");
		return;
	}
	FZ_CHECK(ns <= FZ_MAX_DURATION, "duration %s is %llu ns, over 30 days", fz_str(s),
		 (unsigned long long)ns);
	char *end;
	long double v = strtold(s, &end);
	FZ_CHECK(end != s, "duration %s accepted, strtold reads no number", fz_str(s));
	long double mul = unit_ns(end), want = v * mul;
	/* at most 9 fraction digits count, and the rest of a ns is cut */
	long double tol = mul / 1e9L + 1 + want * 1e-15L;
	FZ_CHECK(fabsl((long double)ns - want) <= tol, "duration %s is %llu ns, strtold says %Lf",
		 fz_str(s), (unsigned long long)ns, want);
}

static void number(const char *s)
{
	const char *why = NULL;
	double d = -7;
	if (bs_parse_number(s, &d, &why)) {
		fz_check_why(why);
		FZ_CHECK(d == -7, "failed number wrote its output");
		return;
	}
	FZ_CHECK(isfinite(d) && d >= 0, "number %s is %g", fz_str(s), d);
	char *end;
	long double v = strtold(s, &end);
	FZ_CHECK(end != s && fabsl((long double)d - v) <= 1e-9L + v * 1e-15L,
		 "number %s is %.17g, strtold says %.17Lg", fz_str(s), d, v);
}

static void uintval(const char *s, uint64_t max)
{
	const char *why = NULL;
	uint64_t u = 999;
	if (bs_parse_uint(s, max, &u, &why)) {
		fz_check_why(why);
		FZ_CHECK(u == 999, "failed uint wrote its output");
		return;
	}
	FZ_CHECK(u <= max, "uint %s is %llu > %llu", fz_str(s), (unsigned long long)u,
		 (unsigned long long)max);
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	FZ_CHECK(end != s && errno == 0 && v == u, "uint %s is %llu, strtoull says %llu",
		 fz_str(s), (unsigned long long)u, v);
}

static void word(int which, const char *s)
{
	const int count[] = {2, bs_level_names.n, bs_nbmode_names.n, bs_policy_names.n,
			     bs_jmode_names.n}; /* bool, then the name tables */
	const char *why = NULL;
	int out = -5, r;
	switch (which) {
	case 0: r = bs_parse_bool(s, &out, &why); break;
	case 1: r = bs_parse_word(s, &bs_level_names, &out, &why); break;
	case 2: r = bs_parse_word(s, &bs_nbmode_names, &out, &why); break;
	case 3: r = bs_parse_word(s, &bs_policy_names, &out, &why); break;
	default: r = bs_parse_word(s, &bs_jmode_names, &out, &why); break;
	}
	if (r) {
		fz_check_why(why);
		FZ_CHECK(out == -5, "failed word parser %d wrote its output", which);
		return;
	}
	FZ_CHECK(out >= 0 && out < count[which], "word parser %d: %s gives %d", which,
		 fz_str(s), out);
}

static void errlist(const char *s)
{
	const char *why = NULL;
	uint64_t set[BS_ERRSET_WORDS] = {1, 2, 3};
	if (bs_parse_errlist(s, set, &why)) {
		fz_check_why(why);
		FZ_CHECK(set[0] == 1 && set[1] == 2 && set[2] == 3, "failed errlist wrote its output");
		return;
	}
	FZ_CHECK(!(set[0] & 1), "errno 0 accepted in %s", fz_str(s));
	FZ_CHECK(set[0] | set[1] | set[2], "empty errno set accepted from %s", fz_str(s));
	/* every errno in the set has a name that maps back to it */
	for (int e = 1; e < 64 * BS_ERRSET_WORDS; e++)
		if (set[e / 64] >> (e % 64) & 1)
			FZ_CHECK(bs_errno_from_name(bs_errno_name(e), (unsigned)strlen(bs_errno_name(e))) == e,
				 "errno %d in the set has no name", e);
}

static void delays(const char *s)
{
	const char *why = NULL;
	struct bs_policy p, orig;
	memset(&p, 0xa5, sizeof p);
	orig = p;
	if (bs_parse_delays(s, &p, &why)) {
		fz_check_why(why);
		FZ_CHECK(!memcmp(&p, &orig, sizeof p), "failed delays wrote its output");
		return;
	}
	FZ_CHECK(p.ndelays >= 1 && p.ndelays <= BS_DELAYS_MAX, "%u delays", p.ndelays);
	for (uint32_t i = 0; i < p.ndelays; i++)
		FZ_CHECK(p.delays[i] <= FZ_MAX_DURATION, "delay %u is %llu", i,
			 (unsigned long long)p.delays[i]);
}

static void set(unsigned k, const char *s)
{
	struct bs_config c, orig;
	const char *why = NULL;
	bs_config_defaults(&c);
	orig = c;
	if (bs_config_set(&c, keys[k][0], keys[k][1], s, &why)) {
		fz_check_why(why);
		FZ_CHECK(fz_same_globals(&c, &orig), "failed set of %s changed the config",
			 keys[k][1]);
		return;
	}
	fz_check_config(&c, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 4096)
		return 0;
	char *s = fz_strndup(data + 1, size - 1);
	unsigned sel = data[0];
	switch (sel % 8) {
	case 0: duration(s); break;
	case 1: number(s); break;
	case 2: uintval(s, sel & 8 ? UINT64_MAX : (sel & 16 ? 1000000000u : 65535)); break;
	case 3: word((int)(sel >> 3) % 5, s); break;
	case 4: errlist(s); break;
	case 5: delays(s); break;
	default: set((sel >> 3) % NKEYS, s); break;
	}
	free(s);
	return 0;
}
