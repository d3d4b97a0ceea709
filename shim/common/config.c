/* config: defaults -> INI file -> environment. See config.h. */
#include "config.h"
#include "errname.h"
#include "log.h"
#include "util.h"

#include <ini.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MAX_FILE (1u << 20)
#define MAX_LINE (INI_MAX_LINE - 1)

/* K_MULT: a number from 1 to 100; K_FRACTION: one from 0 to 1; K_WORD: one
 * of names. */
enum kind { K_DUR_POS, K_DUR, K_MULT, K_FRACTION, K_UINT32, K_SEED, K_ERRS, K_BOOL, K_WORD, K_PATH, K_DELAYS, K_SHARED };

static const struct key {
	const char *section, *name, *env;
	enum kind kind;
	size_t off;
	const struct bs_names *names;
} keys[] = {
#define K(sec, n, f, k, field, ...) {sec, #n, "BACKOFFSHIM_" #f, k, offsetof(struct bs_config, field), __VA_ARGS__}
#define B(n, k, f, ...) K("backoff", n, f, k, n, __VA_ARGS__)
#define P(n, k, f) K("backoff", n, f, k, policy.n, NULL)
	P(initial_backoff, K_DUR_POS, INITIAL_BACKOFF),
	P(multiplier, K_MULT, MULTIPLIER),
	P(jitter, K_FRACTION, JITTER),
	P(max_backoff, K_DUR_POS, MAX_BACKOFF),
	P(min_connect_timeout, K_DUR_POS, MIN_CONNECT_TIMEOUT),
	B(max_attempts, K_UINT32, MAX_ATTEMPTS, NULL),
	B(max_elapsed, K_DUR, MAX_ELAPSED, NULL),
	B(retry_on, K_ERRS, RETRY_ON, NULL),
	K("backoff", unix, UNIX, K_BOOL, unix_sockets, NULL),
	K("backoff", policy, POLICY, K_WORD, policy.kind, &bs_policy_names),
	K("backoff", jitter_mode, JITTER_MODE, K_WORD, policy.jitter_mode, &bs_jmode_names),
	K("backoff", delays, DELAYS, K_DELAYS, policy, NULL),
	P(up_multiplier, K_MULT, UP_MULTIPLIER),
	P(down_multiplier, K_FRACTION, DOWN_MULTIPLIER),
	P(down_threshold, K_UINT32, DOWN_THRESHOLD),
	P(randomization_factor, K_FRACTION, RANDOMIZATION_FACTOR),
	P(max_randomization, K_DUR, MAX_RANDOMIZATION),
	B(nonblocking, K_WORD, NONBLOCKING, &bs_nbmode_names),
	B(resolve, K_WORD, RESOLVE, &bs_resolve_names),
	B(healthy_after, K_DUR, HEALTHY_AFTER, NULL),
	B(seed, K_SEED, SEED, NULL),
	B(disable, K_BOOL, DISABLE, NULL),
	B(shared, K_SHARED, SHARED, NULL),
	K("log", level, LOG, K_WORD, log_level, &bs_level_names),
	K("log", file, LOG_FILE, K_PATH, log_file, NULL),
	K("log", time, LOG_TIME, K_BOOL, log_time, NULL),
	K("log", format, LOG_FORMAT, K_WORD, log_json, &bs_logfmt_names),
#undef K
#undef B
#undef P
};
#define NKEYS BS_ARRAY_SIZE(keys)

void bs_config_defaults(struct bs_config *c)
{
	memset(c, 0, sizeof *c);
	c->policy.initial_backoff = 1 * BS_NS_PER_SEC;
	c->policy.multiplier = 1.6;
	c->policy.jitter = 0.2;
	c->policy.max_backoff = 120 * BS_NS_PER_SEC;
	c->policy.min_connect_timeout = 20 * BS_NS_PER_SEC;
	c->max_elapsed = 300 * BS_NS_PER_SEC;
	const char *why;
	bs_parse_errlist("ECONNREFUSED ETIMEDOUT EHOSTUNREACH ENETUNREACH ECONNRESET EAGAIN",
			 c->retry_on, &why);
	c->log_level = BS_LOG_INFO;
	c->nonblocking = BS_NB_AUTO;
	c->policy.up_multiplier = 1.5;
	c->policy.down_multiplier = 0.9;
	c->policy.down_threshold = 10;
	c->policy.randomization_factor = 0.3;
	c->policy.max_randomization = 120 * BS_NS_PER_SEC;
	c->healthy_after = 10 * BS_NS_PER_SEC;
	strcpy(c->shared, "user");
	c->log_time = -1;
}

int bs_config_retries(const struct bs_config *c, int err)
{
	if (err <= 0 || err >= 64 * BS_ERRSET_WORDS)
		return 0;
	return (int)(c->retry_on[err / 64] >> (err % 64) & 1);
}

static int apply_path(struct bs_config *c, char *field, const char *v, const char **why)
{
	if (!*v)
		return *why = "empty path", -1;
	if (strlen(v) >= sizeof c->log_file)
		return *why = "path too long", -1;
	strcpy(field, v);
	return 0;
}

/* Each parser writes its result only if the value is good. */
static int apply(struct bs_config *c, const struct key *k, const char *v,
		 const char **why)
{
	char *field = (char *)c + k->off;
	int *int_field = (int *)(void *)field;
	uint64_t *u64_field = (uint64_t *)(void *)field, u;
	double d;
	switch (k->kind) {
	case K_DUR_POS:
		if (bs_parse_duration(v, &u, why))
			return -1;
		if (u == 0)
			return *why = "must be greater than 0", -1;
		*u64_field = u;
		return 0;
	case K_DUR:
		return bs_parse_duration(v, u64_field, why);
	case K_MULT:
	case K_FRACTION:
		if (bs_parse_number(v, &d, why))
			return -1;
		if (k->kind == K_FRACTION && d > 1.0)
			return *why = "must be between 0 and 1", -1;
		if (k->kind == K_MULT && (d < 1.0 || d > 100.0))
			return *why = "must be between 1 and 100", -1;
		*(double *)(void *)field = d;
		return 0;
	case K_UINT32:
		if (bs_parse_uint(v, 1000000000u, &u, why))
			return -1;
		*(uint32_t *)(void *)field = (uint32_t)u;
		return 0;
	case K_SEED:
		if (bs_parse_uint(v, UINT64_MAX, u64_field, why))
			return -1;
		c->seed_set = 1;
		return 0;
	case K_ERRS:
		return bs_parse_errlist(v, u64_field, why);
	case K_BOOL:
		return bs_parse_bool(v, int_field, why);
	case K_WORD:
		return bs_parse_word(v, k->names, int_field, why);
	case K_DELAYS:
		return bs_parse_delays(v, (struct bs_policy *)(void *)field, why);
	case K_PATH: /* (a relative path would name a file in each program's directory) */
		if (*v && *v != '/')
			return *why = "not an absolute path (write it from /)", -1;
		return apply_path(c, field, v, why);
	case K_SHARED:
		if (strcmp(v, "user") && strcmp(v, "off") && v[0] != '/')
			return *why = "expected user, off or an absolute path", -1;
		return apply_path(c, field, v, why);
	}
	return *why = "internal error", -1;
}

/* Is section one of the INI file's own ([backoff], [log])? */
static int section_known(const char *section)
{
	return !strcasecmp(section, "backoff") || !strcasecmp(section, "log");
}

/* Why key is not one of section's: it belongs in another section, or it
 * is no key at all. */
static const char *misplaced(const char *key)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (!strcasecmp(key, keys[i].name))
			return strcmp(keys[i].section, "log") ? "belongs in [backoff], not here"
							      : "belongs in [log], not here";
	return "unknown key";
}

int bs_config_set(struct bs_config *c, const char *section, const char *key,
		  const char *value, const char **why)
{
	for (size_t i = 0; i < NKEYS; i++) {
		const struct key *k = &keys[i];
		if (section) {
			if (strcasecmp(section, k->section) || strcasecmp(key, k->name))
				continue;
		} else if (strcasecmp(key, k->env + strlen("BACKOFFSHIM_"))) {
			continue;
		}
		return apply(c, k, value, why);
	}
	if (section && *section && !section_known(section))
		*why = BS_UNKNOWN_SECTION; /* (a key before any header has section "") */
	else
		*why = section ? misplaced(key) : "unknown key";
	return -1;
}

int bs_config_section_problem(const char *why)
{
	return !strcmp(why, BS_UNKNOWN_SECTION) || !strcmp(why, BS_DEST_WITHOUT_SPEC);
}

const char *bs_config_cannot(const char *what, int err)
{
	static char why[128];
	snprintf(why, sizeof why, "cannot %s: %s", what, bs_errno_msg(err));
	return why;
}

/* --- INI text: a line reader that counts lines and screens syntax --- */

struct ini_ctx {
	struct bs_config *c;
	const char *origin, *p, *end;
	unsigned line;
	bs_config_report_fn report;
	void *rctx;
	int have_key; /* inih holds a previous key: indented lines continue it */
	int continues; /* this line is such a continuation */
	int skip;     /* the section was reported (unknown, bad): its keys are ignored */
	int dest;     /* the [dest ...] section being read, -1 if none/bad */
};

/* The spec of a "[dest SPEC]" header s: up to the ']' that closes it,
 * after a bracketed IPv6 address's own, if any ([dest [::1]:6379]). */
static void dest_header_spec(const char *s, char spec[200])
{
	const char *b = s + 6, *q = *b == '[' ? strchr(b, ']') : b;
	const char *close = q ? strchr(*b == '[' ? q + 1 : b, ']') : NULL;
	if (!close)
		close = strrchr(s, ']');
	size_t n = (size_t)(close - b);
	while (n && (b[n - 1] == ' ' || b[n - 1] == '\t')) /* as inih trims a value */
		n--;
	memcpy(spec, s + 6, n);
	spec[n] = '\0';
}

/* The name of the section header s, as inih takes it: everything between
 * '[' and the first ']', blanks included ("[ backoff ]" is no [backoff]). */
static void header_name(const char *s, char name[64])
{
	size_t n = strcspn(s + 1, "]");
	if (n > 63)
		n = 63;
	memcpy(name, s + 1, n);
	name[n] = '\0';
}

/* "[dest]", "[dest\tx]": a destination section without its SPEC. */
static int dest_without_spec(const char *name)
{
	return !strncasecmp(name, "dest", 4) && (!name[4] || name[4] == '\t' || name[4] == ' ');
}

/* A section header s: inih forgets the previous key; a [dest ...] section
 * begins a rule. */
static void screen_section(struct ini_ctx *x, const char *s)
{
	char name[64];
	x->have_key = 0;
	x->dest = -1;
	x->skip = 0;
	if (!strncasecmp(s, "[dest ", 6)) {
		char spec[200];
		dest_header_spec(s, spec);
		x->dest = bs_rule_begin(x->c, spec, x->origin, x->line, x->report, x->rctx);
		return;
	}
	header_name(s, name);
	if (section_known(name))
		return;
	x->skip = 1;
	x->report(x->rctx, x->origin, x->line, NULL, NULL,
		  dest_without_spec(name) ? BS_DEST_WITHOUT_SPEC : BS_UNKNOWN_SECTION);
}

/* inih reports only its first syntax error; screen every line here. Like
 * inih, skip a BOM on line 1; an indented line continues the previous
 * key's value (the handler judges it) if there is one. */
static void screen_line(struct ini_ctx *x, const char *str)
{
	const char *start = str;
	if (x->line == 1 && strncmp(start, "\xEF\xBB\xBF", 3) == 0)
		start += 3;
	const char *s = start + strspn(start, " \t\r");
	if (!*s || *s == ';' || *s == '#' || *s == '\n')
		return;
	if (s > start && x->have_key) {
		x->continues = 1;
		return;
	}
	if (*s == '[' && strchr(s, ']'))
		screen_section(x, s);
	else if (*s == '[' || (!strchr(s, '=') && !strchr(s, ':')))
		x->report(x->rctx, x->origin, x->line, NULL, NULL,
			  *s == '[' ? "section header without ']'" : "not a 'key = value' line");
	else if (*s == '=' || *s == ':')
		x->report(x->rctx, x->origin, x->line, NULL, NULL, "no key before the '='");
}

/* Why the next line, len bytes, cannot be handed to inih; NULL if it can. */
static const char *unreadable_line(const struct ini_ctx *x, size_t len, int num)
{
	if (len > (size_t)MAX_LINE || len >= (size_t)num)
		return "line too long (at most 198 characters)";
	if (memchr(x->p, '\0', len))
		return "binary data in line";
	return NULL;
}

static char *reader(char *str, int num, void *stream)
{
	struct ini_ctx *x = stream;
	if (x->p >= x->end)
		return NULL;
	const char *nl = memchr(x->p, '\n', (size_t)(x->end - x->p));
	size_t len = nl ? (size_t)(nl - x->p) + 1 : (size_t)(x->end - x->p);
	x->line++;
	const char *why = unreadable_line(x, len, num);
	if (why) {
		x->report(x->rctx, x->origin, x->line, NULL, NULL, why);
		strcpy(str, "\n"); /* hand inih an empty line instead */
	} else {
		memcpy(str, x->p, len);
		str[len] = '\0';
		x->continues = 0;
		screen_line(x, str);
	}
	x->p += len;
	return str;
}

static int handler(void *user, const char *section, const char *name,
		   const char *value)
{
	struct ini_ctx *x = user;
	const char *why;
	x->have_key = *name != '\0'; /* inih continues no empty key */
	if (x->skip || !*name) /* reported with its section or its line */
		return 1;
	if (x->continues) { /* inih joined an indented line to the key above */
		x->report(x->rctx, x->origin, x->line, name, value,
			  "an indented line continues the value above; write the whole value "
			  "on one line");
		return 1;
	}
	if (!strncasecmp(section, "dest ", 5)) {
		bs_rule_key(x->c, x->dest, name, value, x->origin, x->line, x->report, x->rctx);
		return 1;
	}
	if (bs_config_set(x->c, section, name, value, &why))
		x->report(x->rctx, x->origin, x->line, name, value, why);
	return 1; /* keep going: every problem gets reported */
}

void bs_config_parse_ini(struct bs_config *c, const char *origin, const char *text,
			 size_t len, bs_config_report_fn report, void *rctx)
{
	struct ini_ctx x = {c, origin, text, text + len, 0, report, rctx, 0, 0, 0, -1};
	ini_parse_stream(reader, &x, handler, &x);
}

/* A file up to SMALL_FILE is read into a static buffer, so that the
 * library's start-up makes no allocation (malloc's mmap, brk and
 * getrandom); a larger one, or a load while another holds the buffer, into
 * the heap. */
#define SMALL_FILE (64u << 10)
static char small_buf[SMALL_FILE + 1];
static _Atomic int small_busy;

int bs_config_load_file(struct bs_config *c, const char *path, bs_config_read_fn read_file,
			bs_config_report_fn report, void *ctx)
{
	const char *why = "out of memory";
	char *buf = atomic_exchange(&small_busy, 1) ? NULL : small_buf;
	long n = buf ? read_file(ctx, path, buf, SMALL_FILE + 1, &why) : SMALL_FILE + 1;
	if (n > (long)SMALL_FILE) {
		if (buf)
			atomic_store(&small_busy, 0);
		buf = malloc(MAX_FILE + 1);
		n = buf ? read_file(ctx, path, buf, MAX_FILE + 1, &why) : -1;
	}
	if (n > (long)MAX_FILE) {
		why = "file larger than 1 MiB";
		n = -1;
	}
	if (n >= 0)
		bs_config_parse_ini(c, path, buf, (size_t)n, report, ctx);
	else
		report(ctx, path, 0, NULL, NULL, why);
	if (buf == small_buf)
		atomic_store(&small_busy, 0);
	else
		free(buf);
	return n >= 0 ? 0 : -1;
}

void bs_config_load_env(struct bs_config *c, bs_config_getenv_fn get,
			bs_config_report_fn report, void *ctx)
{
	for (size_t i = 0; i < NKEYS; i++) {
		const char *v = get(ctx, keys[i].env);
		const char *why;
		if (v && apply(c, &keys[i], v, &why))
			report(ctx, keys[i].env, 0, NULL, v, why);
	}
}

void bs_config_load_vars(struct bs_config *c, bs_config_getenv_fn get,
			 bs_config_report_fn report, void *ctx)
{
	bs_config_load_env(c, get, report, ctx);
	const char *dr = get(ctx, "BACKOFFSHIM_DEST_RULES");
	if (dr && *dr)
		bs_rule_env(c, dr, report, ctx);
}

/* The variables read besides the keys' own. */
static const char *const other_vars[] = {"BACKOFFSHIM_CONFIG", "BACKOFFSHIM_DEST_RULES"};
#define NVARS (NKEYS + BS_ARRAY_SIZE(other_vars))

static const char *var_name(size_t i)
{
	return i < NKEYS ? keys[i].env : other_vars[i - NKEYS];
}

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c + 'a' - 'A') : c;
}

/* Edits (letters added, removed or changed, case aside) from a's n bytes
 * to b; names of 64 bytes or more are too far. */
static unsigned distance(const char *a, size_t n, const char *b)
{
	size_t m = strlen(b);
	unsigned row[64];
	if (n >= 64 || m >= 64)
		return UINT_MAX;
	for (size_t j = 0; j <= m; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= n; i++) {
		unsigned diag = row[0];
		row[0] = (unsigned)i;
		for (size_t j = 1; j <= m; j++) {
			unsigned best = diag + (lower(a[i - 1]) != lower(b[j - 1]));
			diag = row[j];
			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
		}
	}
	return row[m];
}

/* The one report for the unknown variable e ("NAME=value", NAME n bytes). */
static void report_unknown_var(const char *e, size_t n, bs_config_report_fn report, void *ctx)
{
	static char why[96];
	char name[64];
	size_t best = 0;
	unsigned d = UINT_MAX;
	for (size_t i = 0; i < NVARS; i++) {
		unsigned di = distance(e, n, var_name(i));
		if (di < d)
			d = di, best = i;
	}
	if (d <= 3)
		snprintf(why, sizeof why, "unknown variable (did you mean %s?)", var_name(best));
	else
		snprintf(why, sizeof why, "unknown variable");
	snprintf(name, sizeof name, "%.*s", (int)(n < 63 ? n : 63), e);
	report(ctx, name, 0, NULL, e[n] ? e + n + 1 : "", why);
}

int bs_config_var_known(const char *entry)
{
	size_t n = strcspn(entry, "=");
	for (size_t i = 0; i < NVARS; i++)
		if (strlen(var_name(i)) == n && !strncmp(var_name(i), entry, n))
			return 1;
	return 0;
}

unsigned bs_config_check_env_names(char *const *env, bs_config_report_fn report, void *ctx)
{
	unsigned unknown = 0;
	for (; env && *env; env++) {
		size_t n = strcspn(*env, "=");
		if (n < 12 || strncasecmp(*env, "BACKOFFSHIM_", 12))
			continue;
		if (!bs_config_var_known(*env)) {
			report_unknown_var(*env, n, report, ctx);
			unknown++;
		}
	}
	return unknown;
}

void bs_config_load_rules(struct bs_config *c, struct bs_rules *rules,
			  bs_config_getenv_fn get, bs_config_read_fn read_file,
			  bs_config_report_fn report, void *ctx)
{
	bs_config_defaults(c);
	c->rules = rules;
	if (rules)
		rules->n = 0;
	const char *path = get(ctx, "BACKOFFSHIM_CONFIG");
	if (path && *path)
		bs_config_load_file(c, path, read_file, report, ctx);
	else if (access(BS_DEFAULT_CONFIG, F_OK) == 0)
		bs_config_load_file(c, BS_DEFAULT_CONFIG, read_file, report, ctx);
	bs_config_load_vars(c, get, report, ctx);
	bs_config_finish(c);
	bs_config_check(c, path && *path ? path : "settings", report, ctx);
}
