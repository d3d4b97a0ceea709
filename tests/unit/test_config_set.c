/* Unit tests for config.c / config_parse.c / errname.c: bs_config_set (value
 * ranges, unknown keys and sections, path length), the uint, bool, log level
 * and non-blocking mode parsers, errno lists, and the errno name/message
 * table. */
#include "config_helpers.h"

#include "config.h"
#include "errname.h"
#include "log.h"

#include <errno.h>
#include <string.h>

/* --- bs_config_set: ranges, unknown keys, paths --- */

struct set_case {
	const char *section, *key, *value;
	int ok;
};

static void run_set_cases(const struct set_case *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct bs_config c = defaults(), before = c;
		const char *why = NULL;
		int r = bs_config_set(&c, t[i].section, t[i].key, t[i].value, &why);
		if (r != (t[i].ok ? 0 : -1))
			fail_msg("[%s] %s = \"%s\": got %d (%s)", t[i].section ? t[i].section : "-",
				 t[i].key, t[i].value, r, why ? why : "");
		if (!t[i].ok) {
			assert_non_null(why);
			same_config(&c, &before);
		}
	}
}

static void test_set_ranges(void **state)
{
	(void)state;
	static const struct set_case t[] = {
		{"backoff", "jitter", "0", 1},
		{"backoff", "jitter", "1", 1},
		{"backoff", "jitter", "1.5", 0},
		{"backoff", "jitter", "1.000001", 0},
		{"backoff", "jitter", "-0.1", 0},
		{"backoff", "jitter", "nan", 0},
		{"backoff", "multiplier", "1", 1},
		{"backoff", "multiplier", "100", 1},
		{"backoff", "multiplier", "0.99", 0},
		{"backoff", "multiplier", "0", 0},
		{"backoff", "multiplier", "100.5", 0},
		{"backoff", "multiplier", "inf", 0},
		{"backoff", "multiplier", "2x", 0},
		{"backoff", "initial_backoff", "0", 0},
		{"backoff", "initial_backoff", "0s", 0},
		{"backoff", "initial_backoff", "0.1ns", 0},
		{"backoff", "initial_backoff", "1ns", 1},
		{"backoff", "max_backoff", "0ms", 0},
		{"backoff", "min_connect_timeout", "0", 0},
		{"backoff", "max_elapsed", "0", 1}, /* 0 = unlimited */
		{"backoff", "healthy_after", "0", 1}, /* 0 allowed */
		{"backoff", "healthy_after", "0s", 1},
		{"backoff", "healthy_after", "720h", 1},
		{"backoff", "healthy_after", "721h", 0},
		{"backoff", "healthy_after", "-1s", 0},
		{"backoff", "healthy_after", "soon", 0},
		{"backoff", "healthy_after", "", 0},
		{"log", "healthy_after", "1s", 0},
		{"log", "nonblocking", "off", 0},
		{NULL, "HEALTHY_AFTER", "3s", 1},
		{NULL, "nonblocking", "pace", 1},
		{"backoff", "max_attempts", "0", 1},
		{"backoff", "max_attempts", "1000000000", 1},
		{"backoff", "max_attempts", "1000000001", 0},
		{"backoff", "max_attempts", "4294967296", 0},
		{"backoff", "max_attempts", "99999999999999999999999", 0},
		{"backoff", "max_attempts", "-1", 0},
		{"backoff", "max_attempts", "3.5", 0},
		{"backoff", "max_attempts", "", 0},
		{"backoff", "seed", "18446744073709551615", 1},
		{"backoff", "seed", "18446744073709551616", 0},
		{"log", "file", "", 0},
		{"log", "level", "loud", 0},
		{NULL, "jitter", "2", 0},
		{NULL, "LOG_FILE", "/x", 1},
	};
	run_set_cases(t, sizeof t / sizeof t[0]);

	struct bs_config c = defaults();
	const char *why;
	assert_int_equal(bs_config_set(&c, "backoff", "max_attempts", "1000000000", &why), 0);
	assert_int_equal(c.max_attempts, 1000000000u);
	assert_int_equal(bs_config_set(&c, "backoff", "seed", "18446744073709551615", &why), 0);
	assert_true(c.seed == UINT64_MAX);
	assert_int_equal(c.seed_set, 1);
	assert_int_equal(bs_config_set(&c, "backoff", "jitter", "1", &why), 0);
	assert_true(c.policy.jitter == 1.0);
	assert_int_equal(bs_config_set(&c, "backoff", "healthy_after", "1.5s", &why), 0);
	assert_int_equal(c.healthy_after, 1500 * MS);
	assert_int_equal(bs_config_set(&c, "backoff", "healthy_after", "0", &why), 0);
	assert_int_equal(c.healthy_after, 0);
	assert_int_equal(bs_config_set(&c, NULL, "HEALTHY_AFTER", "2m", &why), 0);
	assert_int_equal(c.healthy_after, 120 * SEC);
}

static void test_set_unknown(void **state)
{
	(void)state;
	struct bs_config c = defaults(), before = c;
	const char *why = NULL;
	assert_int_equal(bs_config_set(&c, "backoff", "bogus", "1", &why), -1);
	assert_string_equal(why, "unknown key");
	why = NULL;
	assert_int_equal(bs_config_set(&c, "network", "jitter", "0.5", &why), -1);
	assert_non_null(strstr(why, "section"));
	/* keys live in their own section only */
	assert_int_equal(bs_config_set(&c, "log", "jitter", "0.5", &why), -1);
	assert_int_equal(bs_config_set(&c, "backoff", "level", "debug", &why), -1);
	assert_int_equal(bs_config_set(&c, NULL, "level", "debug", &why), -1);
	assert_int_equal(bs_config_set(&c, NULL, "CONFIG", "/x", &why), -1);
	same_config(&c, &before);
	/* names and sections are case-insensitive */
	assert_int_equal(bs_config_set(&c, "BackOff", "JITTER", "0.5", &why), 0);
	assert_true(c.policy.jitter == 0.5);
}

static void test_path(void **state)
{
	(void)state;
	struct bs_config c = defaults();
	const char *why;
	char p[300];
	memset(p, 'a', sizeof p);
	p[0] = '/';
	p[255] = '\0'; /* 255 characters: fits */
	assert_int_equal(bs_config_set(&c, "log", "file", p, &why), 0);
	assert_string_equal(c.log_file, p);
	p[255] = 'a';
	p[256] = '\0'; /* 256: does not */
	assert_int_equal(bs_config_set(&c, "log", "file", p, &why), -1);
	assert_int_equal(strlen(c.log_file), 255);
	/* relative: it would name a file in each program's own directory */
	static const char *const rel[] = {"relative.log", "./x.log", "../x.log", " /x"};
	for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
		assert_int_equal(bs_config_set(&c, "log", "file", rel[i], &why), -1);
		assert_string_equal(why, "not an absolute path (write it from /)");
	}
	assert_int_equal(bs_config_set(&c, NULL, "log_file", "x", &why), -1);
	assert_int_equal(strlen(c.log_file), 255);
	assert_int_equal(bs_config_set(&c, NULL, "shared", "user", &why), 0); /* (no path) */
	assert_int_equal(bs_config_set(&c, NULL, "shared", "off", &why), 0);
}

/* max_elapsed not above the first wait: reported, for the settings and for
 * a [dest] section with its own values (not for one that inherits them). */
static void test_check_budget_below_first_wait(void **state)
{
	(void)state;
	static const struct {
		const char *policy, *initial, *elapsed, *delays;
		int reported;
	} t[] = {
		{"grpc", "1s", "1s", NULL, 1},   {"grpc", "1s", "500ms", NULL, 1},
		{"grpc", "1s", "1.5s", NULL, 0}, {"grpc", "1s", "0", NULL, 0},
		{"exponential", "2s", "2s", NULL, 1}, {"responsive", "2s", "1s", NULL, 1},
		{"off", "1s", "1ms", NULL, 0},   {"list", "1s", "1ms", "0, 1s", 0},
		{"list", "1s", "1s", "2s, 3s", 1},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		struct bs_config c = defaults();
		struct reps rs = {0};
		const char *why;
		assert_int_equal(bs_config_set(&c, NULL, "policy", t[i].policy, &why), 0);
		assert_int_equal(bs_config_set(&c, NULL, "initial_backoff", t[i].initial, &why), 0);
		assert_int_equal(bs_config_set(&c, NULL, "max_elapsed", t[i].elapsed, &why), 0);
		if (t[i].delays)
			assert_int_equal(bs_config_set(&c, NULL, "delays", t[i].delays, &why), 0);
		bs_config_check(&c, "settings", capture, &rs);
		if (rs.n != t[i].reported)
			fail_msg("case %zu: %d reports", i, rs.n);
		if (rs.n) {
			assert_string_equal(rs.r[0].key, "max_elapsed");
			assert_false(rs.r[0].has_value);
			assert_non_null(strstr(rs.r[0].why, "is not above the first wait"));
		}
	}
	struct bs_config c = defaults();
	struct reps rs = {0};
	const char *why;
	assert_int_equal(bs_config_set(&c, NULL, "max_elapsed", "1s", &why), 0);
	bs_config_check(&c, "settings", capture, &rs);
	assert_int_equal(rs.n, 1);
	assert_string_equal(rs.r[0].why, "1.00s is not above the first wait 1.00s: no failed "
			    "connect is ever retried (raise max_elapsed, or lower initial_backoff)");
	/* [dest] sections: one that inherits the problem is not reported again */
	static struct bs_rules rules;
	rules.n = 0;
	c.rules = &rules;
	assert_true(bs_rule_begin(&c, "10.0.0.0/8", "x.ini", 3, capture, &rs) == 0);
	assert_true(bs_rule_begin(&c, "10.1.0.0/16", "x.ini", 5, capture, &rs) == 1);
	bs_rule_key(&c, 1, "initial_backoff", "5s", "x.ini", 6, capture, &rs);
	bs_rule_key(&c, 1, "max_elapsed", "3s", "x.ini", 7, capture, &rs);
	bs_config_finish(&c);
	rs.n = 0;
	bs_config_check(&c, "settings", capture, &rs);
	assert_int_equal(rs.n, 2);
	assert_int_equal(rs.r[1].line, 5);
	assert_non_null(strstr(rs.r[1].why, "3.00s is not above the first wait 5.00s"));
}

/* --- uint, bool, level, errno list --- */

static void test_uint(void **state)
{
	(void)state;
	uint64_t v = 9;
	const char *why;
	assert_int_equal(bs_parse_uint(" 42 ", 100, &v, &why), 0);
	assert_int_equal(v, 42);
	assert_int_equal(bs_parse_uint("100", 100, &v, &why), 0);
	assert_int_equal(v, 100);
	v = 9;
	static const char *bad[] = {"101", "", " ", "-0", "+1", "1.0", "0x1", "1 2", "abc"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		why = NULL;
		if (bs_parse_uint(bad[i], 100, &v, &why) != -1)
			fail_msg("\"%s\" accepted", bad[i]);
		assert_int_equal(v, 9);
		assert_non_null(why);
	}
}

static void test_bool(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		int v;
	} ok[] = {
		{"on", 1}, {"off", 0}, {"true", 1}, {"false", 0}, {"yes", 1}, {"no", 0},
		{"1", 1}, {"0", 0}, {"ON", 1}, {"Off", 0}, {"TRUE", 1}, {"False", 0},
		{"YeS", 1}, {"NO", 0}, {" on ", 1}, {"\toff\t", 0},
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		int b = -1;
		const char *why = NULL;
		if (bs_parse_bool(ok[i].s, &b, &why) != 0)
			fail_msg("\"%s\" rejected: %s", ok[i].s, why);
		assert_int_equal(b, ok[i].v);
	}
	static const char *bad[] = {"", "2", "-1", "maybe", "onn", "o", "n", "y",
				    "truee", "yes please", "on off", "enable"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int b = 7;
		const char *why = NULL;
		if (bs_parse_bool(bad[i], &b, &why) != -1)
			fail_msg("\"%s\" accepted", bad[i]);
		assert_int_equal(b, 7);
		assert_non_null(why);
	}
}

static void test_level(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		int v;
	} ok[] = {{"off", 0}, {"error", 1}, {"info", 2}, {"debug", 3}, {"DEBUG", 3},
		  {"Error", 1}, {" info ", 2}, {"\tdebug\t", 3}};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		struct bs_config c = defaults();
		c.log_level = -1;
		const char *why = NULL;
		if (bs_config_set(&c, "log", "level", ok[i].s, &why) != 0)
			fail_msg("level \"%s\" rejected: %s", ok[i].s, why);
		assert_int_equal(c.log_level, ok[i].v);
	}
	static const char *bad[] = {"", "verbose", "2", "infoo", "in", "info debug", "warn"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct bs_config c = defaults();
		const char *why = NULL;
		if (bs_config_set(&c, "log", "level", bad[i], &why) != -1)
			fail_msg("level \"%s\" accepted", bad[i]);
		assert_int_equal(c.log_level, BS_LOG_INFO);
		assert_non_null(why);
	}
}

static void test_nbmode(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		int v;
	} ok[] = {{"retry", BS_NB_RETRY}, {"pace", BS_NB_PACE}, {"off", BS_NB_OFF},
		  {"PACE", BS_NB_PACE}, {" off ", BS_NB_OFF}, {"Retry", BS_NB_RETRY},
		  {"defer", BS_NB_DEFER}, {"Auto", BS_NB_AUTO},
		  {"\tpace\t", BS_NB_PACE}, {"OFF", BS_NB_OFF}};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		struct bs_config c = defaults();
		c.nonblocking = -1;
		const char *why = NULL;
		if (bs_config_set(&c, "backoff", "nonblocking", ok[i].s, &why) != 0)
			fail_msg("nonblocking \"%s\" rejected: %s", ok[i].s, why);
		assert_int_equal(c.nonblocking, ok[i].v);
	}
	static const char *bad[] = {"", " ", "sometimes", "on", "no", "0", "1", "2",
				    "retr", "paced", "offf", "pace off", "retry,pace"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct bs_config c = defaults();
		c.nonblocking = BS_NB_PACE;
		const char *why = NULL;
		if (bs_config_set(&c, "backoff", "nonblocking", bad[i], &why) != -1)
			fail_msg("nonblocking \"%s\" accepted", bad[i]);
		assert_int_equal(c.nonblocking, BS_NB_PACE); /* previous kept */
		assert_non_null(why);
	}
}

static int nbits(const uint64_t s[BS_ERRSET_WORDS])
{
	int n = 0;
	for (int i = 0; i < BS_ERRSET_WORDS; i++)
		n += __builtin_popcountll(s[i]);
	return n;
}

static int has(const uint64_t s[BS_ERRSET_WORDS], int e)
{
	return (int)(s[e / 64] >> (e % 64) & 1);
}

static void test_errlist(void **state)
{
	(void)state;
	uint64_t s[BS_ERRSET_WORDS];
	const char *why;
	assert_int_equal(bs_parse_errlist("ECONNREFUSED", s, &why), 0);
	assert_int_equal(nbits(s), 1);
	assert_true(has(s, ECONNREFUSED));
	assert_int_equal(bs_parse_errlist("ECONNREFUSED,ETIMEDOUT", s, &why), 0);
	assert_int_equal(nbits(s), 2);
	assert_true(has(s, ETIMEDOUT));
	assert_int_equal(bs_parse_errlist(" ,ECONNRESET, EPIPE\tENOBUFS ,, ", s, &why), 0);
	assert_int_equal(nbits(s), 3);
	assert_true(has(s, ECONNRESET) && has(s, EPIPE) && has(s, ENOBUFS));
	assert_int_equal(bs_parse_errlist("EWOULDBLOCK", s, &why), 0);
	assert_true(has(s, EAGAIN));
	assert_int_equal(bs_parse_errlist("EPIPE EPIPE", s, &why), 0);
	assert_int_equal(nbits(s), 1);

	static const char *bad[] = {"", " ", " , ,", "EBOGUS", "econnrefused",
				    "ECONNREFUSED EBOGUS", "ECONNREFUSED;ETIMEDOUT", "111",
				    "ECONNREFUSEDX", "E"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		uint64_t t[BS_ERRSET_WORDS] = {1, 2, 3};
		why = NULL;
		if (bs_parse_errlist(bad[i], t, &why) != -1)
			fail_msg("\"%s\" accepted", bad[i]);
		assert_true(t[0] == 1 && t[1] == 2 && t[2] == 3); /* untouched */
		assert_non_null(why);
	}
	/* through config: a bad list keeps the whole previous list */
	struct bs_config c = defaults(), before = c;
	assert_int_equal(bs_config_set(&c, "backoff", "retry_on", "EPIPE EBOGUS", &why), -1);
	same_config(&c, &before);
	assert_int_equal(bs_config_set(&c, "backoff", "retry_on", "EPIPE", &why), 0);
	assert_int_equal(bs_config_retries(&c, EPIPE), 1);
	assert_int_equal(bs_config_retries(&c, ECONNREFUSED), 0);
}

static void test_errname(void **state)
{
	(void)state;
	static const char *names[] = {"ECONNREFUSED", "ETIMEDOUT", "EHOSTUNREACH",
				      "ENETUNREACH", "ECONNRESET", "EAGAIN", "EACCES",
				      "EINPROGRESS", "ENOSR"};
	static const int errs[] = {ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH, ENETUNREACH,
				   ECONNRESET, EAGAIN, EACCES, EINPROGRESS, ENOSR};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		assert_int_equal(bs_errno_from_name(names[i], (unsigned)strlen(names[i])), errs[i]);
		assert_string_equal(bs_errno_name(errs[i]), names[i]);
		assert_string_equal(bs_errno_msg(errs[i]), strerror(errs[i]));
	}
	/* The whole table: names round-trip and messages are glibc's. */
	int known = 0;
	for (int e = 0; e < 200; e++) {
		const char *name = bs_errno_name(e);
		if (!name)
			continue;
		known++;
		assert_int_equal(bs_errno_from_name(name, (unsigned)strlen(name)), e);
		if (strcmp(bs_errno_msg(e), strerror(e)) != 0)
			fail_msg("%s: \"%s\", glibc says \"%s\"", name, bs_errno_msg(e),
				 strerror(e));
	}
	assert_true(known >= 30);
	/* length-delimited: a prefix of a longer buffer */
	assert_int_equal(bs_errno_from_name("EPIPEXYZ", 5), EPIPE);
	assert_int_equal(bs_errno_from_name("EPIPE", 4), 0);
	assert_int_equal(bs_errno_from_name("", 0), 0);
	assert_null(bs_errno_name(0));
	assert_null(bs_errno_name(100000));
	assert_string_equal(bs_errno_msg(100000), "Unknown error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_set_ranges),
		cmocka_unit_test(test_set_unknown),
		cmocka_unit_test(test_path),
		cmocka_unit_test(test_check_budget_below_first_wait),
		cmocka_unit_test(test_uint),
		cmocka_unit_test(test_bool),
		cmocka_unit_test(test_level),
		cmocka_unit_test(test_nbmode),
		cmocka_unit_test(test_errlist),
		cmocka_unit_test(test_errname),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
