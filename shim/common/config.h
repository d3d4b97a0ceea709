/*
 * config: built-in defaults, then an INI file, then BACKOFFSHIM_* variables,
 * folded into one immutable struct.
 *
 * Promise: never aborts, exits or prints by itself. Each bad input (unknown
 * section or key, garbage, out-of-range, NaN, over-long line, unreadable
 * file, binary junk) is passed to the caller's report function once, naming
 * where it came from (file:line or the variable), the key and why; that value
 * is ignored and the previous one stays. Runs at start-up, not on the
 * interposed path, so it may use stdio and the heap (freed before return).
 */
#ifndef BS_CONFIG_H
#define BS_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "policy.h"
#include "rules.h"

#define BS_DEFAULT_CONFIG "/etc/backoffshim.ini"
#define BS_ERRSET_WORDS 3 /* errno values 0..191 */

struct bs_config {
	struct bs_policy policy;
	uint32_t max_attempts;   /* per connect() call; 0 = unlimited */
	uint64_t max_elapsed;    /* ns per connect() call; 0 = unlimited */
	uint64_t retry_on[BS_ERRSET_WORDS];
	int unix_sockets;        /* act on AF_UNIX too */
	int nonblocking;         /* enum bs_nb_mode */
	int resolve;             /* enum bs_resolve: getaddrinfo retried? */
	int resolve_any;         /* resolve is on here or in a [dest] section */
	uint64_t healthy_after;  /* ns a connection must live to count as healthy */
	int disable;
	int log_level;           /* enum bs_level */
	char log_file[256];      /* "" = stderr */
	int log_time;            /* timestamps: 1, 0, or -1 (on for a log file) */
	int log_json;            /* one JSON object per line */
	char shared[256];        /* the table: "user", "off" or an absolute path */
	uint64_t seed;
	int seed_set;
	struct bs_rules *rules;  /* [dest ...] sections; NULL: not accepted */
};

/* One problem. origin is a path or a variable name; line is 0 for
 * variables and file-level problems; key/value may be NULL. */
typedef void (*bs_config_report_fn)(void *ctx, const char *origin, unsigned line,
				     const char *key, const char *value,
				     const char *why);

/* Per-destination sections (config_rules.c). Each rule keeps the keys it
 * set; bs_config_finish() gives it the global settings for the others. */
#define BS_RULES_MAX 32
#define BS_RULE_KEYS 12

struct bs_rule {
	struct bs_spec spec;
	char text[64];          /* as written */
	char origin[64];        /* file or variable it came from */
	unsigned line;
	unsigned nkv;
	struct {
		char key[24];
		char value[96];
	} kv[BS_RULE_KEYS];
	struct bs_config cfg;   /* effective settings, after bs_config_finish */
};

struct bs_rules {
	unsigned n;
	struct bs_rule r[BS_RULES_MAX];
};

/* Start a rule for "[dest SPEC]" at origin:line. Returns its index, or -1
 * (reported: bad SPEC, a duplicate of an earlier section, too many). */
int bs_rule_begin(struct bs_config *c, const char *spec, const char *origin, unsigned line,
		  bs_config_report_fn report, void *ctx);
/* A key inside rule i; checked now, applied by bs_config_finish. */
void bs_rule_key(struct bs_config *c, int i, const char *key, const char *value,
		 const char *origin, unsigned line, bs_config_report_fn report, void *ctx);
/* BACKOFFSHIM_DEST_RULES: "SPEC=key:value,key:value;SPEC=..." */
void bs_rule_env(struct bs_config *c, const char *text, bs_config_report_fn report,
		 void *ctx);
void bs_config_finish(struct bs_config *c);
/* Problems no single value has, reported after loading (and
 * bs_config_finish): max_backoff below initial_backoff, max_elapsed not
 * above the first wait (nothing is ever retried), a [dest unix:...]
 * section while unix is off. origin names the settings as a whole. */
void bs_config_check(const struct bs_config *c, const char *origin,
		     bs_config_report_fn report, void *ctx);
/* The settings for a destination: the most specific rule, or c itself. */
const struct bs_config *bs_config_for(const struct bs_config *c, const struct sockaddr *addr,
				      socklen_t len, bs_name_has_fn name_has, void *ctx);

/* getaddrinfo() failures retried on the schedule: none, EAI_AGAIN
 * (temporary), or EAI_NONAME too (wait: a name that does not exist yet). */
enum bs_resolve { BS_RESOLVE_OFF = 0, BS_RESOLVE_TEMPORARY = 1, BS_RESOLVE_WAIT = 2 };
/* What happens to non-blocking sockets. auto: defer in a client, pace in a
 * server (a process that listens); shim/lib decides which (bs_nb_mode). */
enum bs_nb_mode { BS_NB_RETRY = 0, BS_NB_PACE = 1, BS_NB_OFF = 2, BS_NB_DEFER = 3, BS_NB_AUTO = 4 };

/* Looks up a variable; the shim passes secure_getenv, tests pass a fake.
 * ctx is the one given to the loader (the report function's too). */
typedef const char *(*bs_config_getenv_fn)(void *ctx, const char *name);

/* Reads the file at path into buf (at most cap bytes; the loader asks for
 * one byte more than it accepts, so a full buffer means "too large").
 * Returns the number of bytes read (0 for /dev/null), or -1 with *why set
 * to a reason (a static string). shim/cli/readfile.h says which readers
 * there are. */
typedef long (*bs_config_read_fn)(void *ctx, const char *path, char *buf, size_t cap,
				  const char **why);

/* "cannot WHAT: " and errno err's message ("cannot open file: Permission
 * denied"), in a static buffer that the next call overwrites: the reason a
 * reader or the library's log file gives (at start-up, not on the
 * interposed path). */
const char *bs_config_cannot(const char *what, int err);

void bs_config_defaults(struct bs_config *c);

/* Apply one setting. section is "backoff" or "log" for the INI file, NULL
 * for a variable-style name (key then is e.g. "jitter" or "log_file").
 * Returns 0, or -1 with *why set to a reason (a static string). */
int bs_config_set(struct bs_config *c, const char *section, const char *key,
		  const char *value, const char **why);

#define BS_UNKNOWN_SECTION "unknown section (expected [backoff], [log] or [dest SPEC])"
#define BS_DEST_WITHOUT_SPEC "a [dest SPEC] section needs its SPEC after one space"
/* Is why one of the two problems above, whose whole section is ignored? */
int bs_config_section_problem(const char *why);

/* Parse an INI file's text (may hold NULs and junk). */
void bs_config_parse_ini(struct bs_config *c, const char *origin, const char *text,
			 size_t len, bs_config_report_fn report, void *ctx);

/* Read and parse a file; reports if it cannot be read. Returns 0 if read. */
int bs_config_load_file(struct bs_config *c, const char *path, bs_config_read_fn read_file,
			bs_config_report_fn report, void *ctx);

/* Apply every BACKOFFSHIM_* variable known. */
void bs_config_load_env(struct bs_config *c, bs_config_getenv_fn get,
			bs_config_report_fn report, void *ctx);

/* bs_config_load_env, then BACKOFFSHIM_DEST_RULES into c->rules: every
 * variable read, over what c holds. */
void bs_config_load_vars(struct bs_config *c, bs_config_getenv_fn get,
			 bs_config_report_fn report, void *ctx);

/* Is entry ("NAME" or "NAME=value") a variable the loaders read? */
int bs_config_var_known(const char *entry);
/* The variables no loader reads: each entry of env (NULL-ended "NAME=value"
 * strings, e.g. environ) whose NAME begins with BACKOFFSHIM_ (in any case)
 * and is none of the variables read gets one report: origin NAME, value
 * its value, why naming the known name nearest to it (at most 3 letters
 * added, removed or changed), if there is one. Returns how many. */
unsigned bs_config_check_env_names(char *const *env, bs_config_report_fn report, void *ctx);

/* Everything, in precedence order: defaults, file, environment; also
 * [dest ...] sections and BACKOFFSHIM_DEST_RULES into `rules` (which c
 * then points at; NULL: such sections are reported as not read here). */
void bs_config_load_rules(struct bs_config *c, struct bs_rules *rules,
			  bs_config_getenv_fn get, bs_config_read_fn read_file,
			  bs_config_report_fn report, void *ctx);

int bs_config_retries(const struct bs_config *c, int err);

/* One problem as the one stderr line the library prints for it:
 * "backoffshim[PID]: config: FILE:LINE: key = "value": why; value ignored". */
struct bs_line;
void bs_config_describe(struct bs_line *l, const char *origin, unsigned line,
			const char *key, const char *value, const char *why);

/* The one line, where the log goes (error level), that a process whose
 * config had n problems says: "config: N problems; see them with:
 * backoffshim check-config --env [FILE]" (file "/dev/null" counts as
 * none), then the log file's own problem if log_problem is not NULL. Not
 * "ignored": a clash between two settings is applied as written. --env
 * always, as a clash may need the file and a variable together. */
void bs_config_tell_problems(unsigned n, const char *file,
			     const char *log_problem);

/* The words for each enum's values, indexed by value: one table each,
 * shared by the parsers below and the command's output. */
struct bs_names {
	const char *const *name;
	int n;
	const char *expected; /* the problem when a value is none of them */
};
extern const struct bs_names bs_level_names;  /* enum bs_level */
extern const struct bs_names bs_policy_names; /* enum bs_policy_kind */
extern const struct bs_names bs_jmode_names;  /* enum bs_jitter_mode */
extern const struct bs_names bs_nbmode_names; /* enum bs_nb_mode */
extern const struct bs_names bs_resolve_names; /* enum bs_resolve */
extern const struct bs_names bs_logfmt_names; /* 0 text, 1 json */
/* v's word, or "?" if v is out of range. */
const char *bs_name_of(const struct bs_names *t, int v);

/* Value parsers, exposed for tests. Each returns 0 or -1 with *why. */
/* "250ms", "1.5s", "2m": a number and its unit (ns, us, ms, s, m, min, h,
 * d), at most 30 days. A bare number is refused ("write 50ms or 50s"),
 * but for 0, which is the same in every unit. */
int bs_parse_duration(const char *s, uint64_t *ns, const char **why);
int bs_parse_number(const char *s, double *out, const char **why);
int bs_parse_uint(const char *s, uint64_t max, uint64_t *out, const char **why);
int bs_parse_bool(const char *s, int *out, const char **why);
int bs_parse_errlist(const char *s, uint64_t set[BS_ERRSET_WORDS], const char **why);
/* One word of t (case-insensitive); *out is its index, the enum value. */
int bs_parse_word(const char *s, const struct bs_names *t, int *out, const char **why);
/* "0, 10ms, 3s": at most BS_DELAYS_MAX durations into p->delays. */
int bs_parse_delays(const char *s, struct bs_policy *p, const char **why);

#endif
