/* Helpers shared by the test_config_*.c unit tests: SEC/MS shorthands, a
 * report-capturing callback, a fake getenv table (which also records every
 * name looked up), default configs and their comparison, and parsing INI
 * text with checks on its reports. All static inline: each test binary gets
 * its own copy, and the ones a file does not use cost nothing. */
#ifndef BS_CONFIG_HELPERS_H
#define BS_CONFIG_HELPERS_H

#include "unit.h"
#include "unit_time.h"

#include "config.h"
#include "readfile.h"

#include <stdio.h>
#include <string.h>

#define ORIGIN "test.ini"

/* --- captured reports --- */

struct rep {
	char origin[128], key[64], value[300], why[128];
	unsigned line;
	int has_key, has_value;
};
struct reps {
	int n;
	struct rep r[256];
};

static inline void capture(void *ctx, const char *origin, unsigned line, const char *key,
			   const char *value, const char *why)
{
	struct reps *rs = ctx;
	if (rs->n < (int)(sizeof rs->r / sizeof rs->r[0])) {
		struct rep *r = &rs->r[rs->n];
		snprintf(r->origin, sizeof r->origin, "%s", origin ? origin : "(null)");
		snprintf(r->key, sizeof r->key, "%s", key ? key : "");
		snprintf(r->value, sizeof r->value, "%s", value ? value : "");
		snprintf(r->why, sizeof r->why, "%s", why ? why : "");
		r->line = line;
		r->has_key = key != NULL;
		r->has_value = value != NULL;
	}
	rs->n++;
}

/* --- fake environment: a NULL-terminated table of name/value pairs --- */

struct var {
	const char *name, *value;
};
static const struct var *fake_env;
static char asked[64][40]; /* every name looked up, in order */
static int nasked;

static inline const char *fake_getenv(void *ctx, const char *name)
{
	(void)ctx;
	if (nasked < 64)
		snprintf(asked[nasked], sizeof asked[0], "%s", name);
	nasked++;
	for (const struct var *v = fake_env; v && v->name; v++)
		if (strcmp(v->name, name) == 0)
			return v->value;
	return NULL;
}

static inline void use_env(const struct var *env)
{
	fake_env = env;
	nasked = 0;
}

/* --- configs --- */

static inline void same_config(const struct bs_config *a, const struct bs_config *b)
{
	assert_memory_equal(a, b, sizeof *a);
}

static inline struct bs_config defaults(void)
{
	struct bs_config c;
	bs_config_defaults(&c);
	return c;
}

/* --- INI text --- */

/* Parse text (with its length, so it may hold NULs) onto the defaults. */
static inline struct bs_config parse(const char *text, size_t len, struct reps *rs)
{
	struct bs_config c = defaults();
	memset(rs, 0, sizeof *rs);
	bs_config_parse_ini(&c, ORIGIN, text, len, capture, rs);
	return c;
}
#define PARSE(lit, rs) parse((lit), sizeof(lit) - 1, (rs))

static inline void expect_report(const struct reps *rs, int i, unsigned line,
				 const char *key, const char *why_part)
{
	if (i >= rs->n)
		fail_msg("report %d missing (only %d)", i, rs->n);
	const struct rep *r = &rs->r[i];
	assert_string_equal(r->origin, ORIGIN);
	if (r->line != line)
		fail_msg("report %d (%s) at line %u, want %u", i, r->why, r->line, line);
	if (key) {
		assert_true(r->has_key);
		assert_string_equal(r->key, key);
	} else {
		assert_false(r->has_key);
	}
	assert_true(r->why[0] != '\0');
	if (why_part && !strstr(r->why, why_part))
		fail_msg("report %d: \"%s\" lacks \"%s\"", i, r->why, why_part);
}

#endif
