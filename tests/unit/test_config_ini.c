/* Unit tests for bs_config_parse_ini (config.c) on well-formed and broken INI
 * text: every key, CRLF and a BOM, empty and comment-only text, bad values
 * (previous value kept), unknown keys and sections, syntax errors, and many
 * problems in one file (each reported once, at the right line, and parsing
 * goes on). Over-long lines, NUL bytes and random junk are in
 * test_config_ini_junk.c; files on disk in test_config_files.c. */
#include "config_helpers.h"

#include "config.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char ALL_KEYS_INI[] =
	"; backoffshim test configuration\n"
	"# hash comment\n"
	"\n"
	"[backoff]\n"
	"initial_backoff = 250ms\n"
	"multiplier = 2.5 ; inline comment\n"
	"jitter=0.1\n"
	"max_backoff = 1m\n"
	"min_connect_timeout = 3s\n"
	"max_attempts = 5\n"
	"max_elapsed = 1h\n"
	"retry_on = ECONNREFUSED, EPIPE\n"
	"unix = yes\n"
	"policy = list\n"
	"jitter_mode = Equal\n"
	"delays = 100ms, 2s ,1m\n"
	"nonblocking = Off ; fall back to plain connects\n"
	"healthy_after = 0\n"
	"seed = 12345\n"
	"disable = off\n"
	"   ; indented comment\n"
	"[log]\n"
	"level = debug\n"
	"file = /var/log/bs.log ; where\n";

static void check_all_keys(const struct bs_config *c)
{
	assert_int_equal(c->policy.initial_backoff, 250 * MS);
	assert_true(c->policy.multiplier == 2.5);
	assert_true(c->policy.jitter == 0.1);
	assert_int_equal(c->policy.max_backoff, 60 * SEC);
	assert_int_equal(c->policy.min_connect_timeout, 3 * SEC);
	assert_int_equal(c->max_attempts, 5);
	assert_int_equal(c->max_elapsed, 3600 * SEC);
	assert_int_equal(bs_config_retries(c, ECONNREFUSED), 1);
	assert_int_equal(bs_config_retries(c, EPIPE), 1);
	assert_int_equal(bs_config_retries(c, ETIMEDOUT), 0);
	assert_int_equal(c->unix_sockets, 1);
	assert_int_equal(c->policy.kind, BS_POLICY_LIST);
	assert_int_equal(c->policy.jitter_mode, BS_JITTER_EQUAL);
	assert_int_equal(c->policy.ndelays, 3);
	assert_int_equal(c->policy.delays[0], 100 * MS);
	assert_int_equal(c->policy.delays[1], 2 * SEC);
	assert_int_equal(c->policy.delays[2], 60 * SEC);
	assert_int_equal(c->nonblocking, BS_NB_OFF);
	assert_int_equal(c->healthy_after, 0);
	assert_int_equal(c->seed, 12345);
	assert_int_equal(c->seed_set, 1);
	assert_int_equal(c->disable, 0);
	assert_int_equal(c->log_level, BS_LOG_DEBUG);
	assert_string_equal(c->log_file, "/var/log/bs.log");
}

static void test_all_keys(void **state)
{
	(void)state;
	struct reps rs;
	struct bs_config c = PARSE(ALL_KEYS_INI, &rs);
	assert_int_equal(rs.n, 0);
	check_all_keys(&c);
}

/* The same file with CRLF line endings, then with a UTF-8 BOM. */
static void test_crlf_and_bom(void **state)
{
	(void)state;
	static char buf[2 * sizeof ALL_KEYS_INI + 3];
	size_t n = 0;
	for (const char *p = ALL_KEYS_INI; *p; p++) {
		if (*p == '\n')
			buf[n++] = '\r';
		buf[n++] = *p;
	}
	struct reps rs;
	struct bs_config c = parse(buf, n, &rs);
	assert_int_equal(rs.n, 0);
	check_all_keys(&c);

	static const char bom[] = "\xEF\xBB\xBF[backoff]\njitter = 0.4\n";
	c = PARSE(bom, &rs);
	assert_int_equal(rs.n, 0);
	assert_true(c.policy.jitter == 0.4);

	static const char bom_comment[] = "\xEF\xBB\xBF; comment\r\n[log]\r\nlevel = off\r\n";
	c = PARSE(bom_comment, &rs);
	assert_int_equal(rs.n, 0);
	assert_int_equal(c.log_level, BS_LOG_OFF);

	/* A BOM anywhere else is junk. */
	static const char late_bom[] = "[backoff]\n\xEF\xBB\xBFjitter = 0.4\n";
	c = PARSE(late_bom, &rs);
	assert_int_equal(rs.n, 1);
	expect_report(&rs, 0, 2, "\xEF\xBB\xBFjitter", "unknown key");
	assert_true(c.policy.jitter == 0.2);
}

static void test_empty_and_comments_only(void **state)
{
	(void)state;
	const struct bs_config def = defaults();
	struct reps rs;
	struct bs_config c = parse("", 0, &rs);
	assert_int_equal(rs.n, 0);
	assert_memory_equal(&c, &def, sizeof c);
	c = PARSE("\n\n; only\n# comments\n\r\n   \n[backoff]\n[log]\n", &rs);
	assert_int_equal(rs.n, 0);
	assert_memory_equal(&c, &def, sizeof c);
}

/* A rejected value keeps the earlier one and gives one report naming the
 * origin, the line, the key, the value and the reason. */
static void test_bad_value_keeps_previous(void **state)
{
	(void)state;
	static const char *const t[][4] = {
		{"backoff", "initial_backoff", "2s", "0"},
		{"backoff", "multiplier", "2", "0.5"},
		{"backoff", "jitter", "0.5", "1.5"},
		{"backoff", "max_backoff", "10s", "10 parsecs"},
		{"backoff", "min_connect_timeout", "5s", "nan"},
		{"backoff", "max_attempts", "3", "99999999999"},
		{"backoff", "max_elapsed", "1m", "-1s"},
		{"backoff", "retry_on", "EPIPE", "EPIPE EBOGUS"},
		{"backoff", "unix", "on", "sometimes"},
		{"backoff", "nonblocking", "pace", "sometimes"},
		{"backoff", "resolve", "temporary", "always"},
		{"backoff", "healthy_after", "30s", "-1s"},
		{"backoff", "seed", "7", "seven"},
		{"backoff", "disable", "true", "2"},
		{"log", "level", "error", "verbose"},
		{"log", "file", "/tmp/a.log", ""},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		char text[256];
		int n = snprintf(text, sizeof text, "[%s]\n%s = %s\n%s = %s\n", t[i][0], t[i][1],
				 t[i][2], t[i][1], t[i][3]);
		struct reps rs;
		struct bs_config c = parse(text, (size_t)n, &rs);
		struct bs_config want = defaults();
		const char *why;
		assert_int_equal(bs_config_set(&want, t[i][0], t[i][1], t[i][2], &why), 0);
		if (rs.n != 1)
			fail_msg("%s = \"%s\": %d reports", t[i][1], t[i][3], rs.n);
		expect_report(&rs, 0, 3, t[i][1], NULL);
		assert_string_equal(rs.r[0].value, t[i][3]);
		if (memcmp(&c, &want, sizeof c) != 0)
			fail_msg("%s = \"%s\" replaced \"%s\"", t[i][1], t[i][3], t[i][2]);
	}
}

static void test_indented_line_is_no_second_value(void **state)
{
	(void)state;
	struct reps rs;
	struct bs_config c = PARSE("[backoff]\n"
				   "policy = list\n"
				   "delays = 0, 1s,\n"
				   "  2s, 3s\n"       /* inih would replace the value with this */
				   "    jitter = 0.9\n", /* and this, indented, is no key of its own */
				   &rs);
	assert_int_equal(rs.n, 2);
	expect_report(&rs, 0, 4, "delays", "indented line continues");
	expect_report(&rs, 1, 5, "delays", "indented line continues");
	assert_int_equal(c.policy.ndelays, 2);
	assert_true(c.policy.jitter == 0.2);
}

static void test_unknown_key_and_section(void **state)
{
	(void)state;
	struct reps rs;
	struct bs_config c = PARSE("[backoff]\n"
				   "bogus = 1\n"
				   "jitter = 0.3\n"
				   "[network]\n"
				   "jitter = 0.9\n"
				   "[log]\n"
				   "jitter = 0.8\n",
				   &rs);
	assert_int_equal(rs.n, 3);
	expect_report(&rs, 0, 2, "bogus", "unknown key");
	expect_report(&rs, 1, 4, NULL, "unknown section"); /* once, at its header */
	expect_report(&rs, 2, 7, "jitter", "belongs in [backoff]");
	assert_true(c.policy.jitter == 0.3);

	/* A key before any section header. */
	c = PARSE("jitter = 0.9\n[backoff]\nmultiplier = 2\n", &rs);
	assert_int_equal(rs.n, 1);
	expect_report(&rs, 0, 1, "jitter", "belongs in [backoff]");
	assert_true(c.policy.jitter == 0.2);
	assert_true(c.policy.multiplier == 2.0);
}

static void test_syntax_errors(void **state)
{
	(void)state;
	struct reps rs;
	struct bs_config c = PARSE("[backoff]\n"
				   "jitter 0.9\n"
				   "multiplier = 2\n",
				   &rs);
	assert_int_equal(rs.n, 1);
	expect_report(&rs, 0, 2, NULL, "key = value");
	assert_true(c.policy.jitter == 0.2);
	assert_true(c.policy.multiplier == 2.0);

	/* Indented junk is junk too, unless it continues a key's value
	 * (inih's multi-line values), which the key then rejects. */
	c = PARSE("  junk at the top\n"
		  "[backoff]\n"
		  "\tjunk after a header\n"
		  "jitter = 0.4\n"
		  "   continued\n"
		  "[log]\n"
		  "  more junk\n"
		  "  level = debug\n",
		  &rs);
	assert_int_equal(rs.n, 4);
	expect_report(&rs, 0, 1, NULL, "key = value");
	expect_report(&rs, 1, 3, NULL, "key = value");
	expect_report(&rs, 2, 5, "jitter", NULL);
	assert_string_equal(rs.r[2].value, "continued");
	expect_report(&rs, 3, 7, NULL, "key = value");
	assert_true(c.policy.jitter == 0.4);
	assert_int_equal(c.log_level, BS_LOG_DEBUG);

	c = PARSE("[backoff]\n"
		  "[log\n"
		  "[log = x\n"
		  "jitter = 0.7\n",
		  &rs);
	assert_int_equal(rs.n, 2);
	expect_report(&rs, 0, 2, NULL, "]");
	expect_report(&rs, 1, 3, NULL, "]");
	/* the broken header did not switch sections */
	assert_true(c.policy.jitter == 0.7);
}

/* Several problems in one file: each reported, in order, and the good lines
 * between them still applied. */
static void test_many_problems(void **state)
{
	(void)state;
	struct reps rs;
	struct bs_config c = PARSE("[backoff]\n"                /* 1 */
				   "initial_backoff = 0\n"      /* 2 bad */
				   "multiplier = 2\n"           /* 3 */
				   "bogus = 1\n"                /* 4 bad */
				   "this line has no equals\n"  /* 5 bad */
				   "jitter = 2\n"               /* 6 bad */
				   "[oops\n"                    /* 7 bad */
				   "max_attempts = 3\n"         /* 8 */
				   "[log]\n"                    /* 9 */
				   "level = loud\r\n"           /* 10 bad */
				   "file = /tmp/x.log\n"        /* 11 */
				   "[backoff]\n"                /* 12 */
				   "max_elapsed = 1e3",         /* 13 bad, no newline */
				   &rs);
	assert_int_equal(rs.n, 7);
	expect_report(&rs, 0, 2, "initial_backoff", "greater than 0");
	expect_report(&rs, 1, 4, "bogus", "unknown key");
	expect_report(&rs, 2, 5, NULL, NULL);
	expect_report(&rs, 3, 6, "jitter", NULL);
	expect_report(&rs, 4, 7, NULL, NULL);
	expect_report(&rs, 5, 10, "level", NULL);
	assert_string_equal(rs.r[5].value, "loud");
	expect_report(&rs, 6, 13, "max_elapsed", NULL);
	assert_true(c.policy.multiplier == 2.0);
	assert_int_equal(c.policy.initial_backoff, SEC);
	assert_true(c.policy.jitter == 0.2);
	assert_int_equal(c.max_attempts, 3);
	assert_int_equal(c.log_level, BS_LOG_INFO);
	assert_string_equal(c.log_file, "/tmp/x.log");
	assert_int_equal(c.max_elapsed, 300 * SEC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_keys),
		cmocka_unit_test(test_crlf_and_bom),
		cmocka_unit_test(test_empty_and_comments_only),
		cmocka_unit_test(test_bad_value_keeps_previous),
		cmocka_unit_test(test_indented_line_is_no_second_value),
		cmocka_unit_test(test_unknown_key_and_section),
		cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_many_problems),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
