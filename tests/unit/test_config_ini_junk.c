/* Unit tests for bs_config_parse_ini (config.c) on hostile INI text:
 * over-long lines, NUL bytes, and seeded random bytes between good lines and
 * on their own (good lines still apply, reports stay at lines that exist). */
#include "config_helpers.h"

#include "config.h"
#include "log.h"

#include <string.h>

static void test_long_lines(void **state)
{
	(void)state;
	char text[12000];
	struct reps rs;
	/* 198 characters is the limit: "jitter = 0.5" padded with blanks. */
	int n = snprintf(text, sizeof text, "[backoff]\n%-198s\nmultiplier = 3\n", "jitter = 0.5");
	struct bs_config c = parse(text, (size_t)n, &rs);
	assert_int_equal(rs.n, 0);
	assert_true(c.policy.jitter == 0.5);

	/* 199: reported, not applied, and the next line is line 3. */
	n = snprintf(text, sizeof text, "[backoff]\n%-199s\nmultiplier = 0\n", "jitter = 0.5");
	c = parse(text, (size_t)n, &rs);
	assert_int_equal(rs.n, 2);
	expect_report(&rs, 0, 2, NULL, "too long");
	expect_report(&rs, 1, 3, "multiplier", NULL);
	assert_true(c.policy.jitter == 0.2);

	/* Much longer, and a long comment: one report each. */
	n = snprintf(text, sizeof text, "[backoff]\njitter = 0.5%10000s\n;%300s\njitter = 0.6\n",
		     "", "");
	c = parse(text, (size_t)n, &rs);
	assert_int_equal(rs.n, 2);
	expect_report(&rs, 0, 2, NULL, "too long");
	expect_report(&rs, 1, 3, NULL, "too long");
	assert_true(c.policy.jitter == 0.6);
}

static void test_nul_bytes(void **state)
{
	(void)state;
	static const char text[] = "[backoff]\n"
				   "jitter = 0.9\0\n"
				   "\0\0\0\n"
				   "multi\0plier = 2\n"
				   "max_attempts = 4\n"
				   "[log]\0\n"
				   "level = debug\n";
	struct reps rs;
	struct bs_config c = PARSE(text, &rs);
	assert_int_equal(rs.n, 5);
	expect_report(&rs, 0, 2, NULL, "binary");
	expect_report(&rs, 1, 3, NULL, "binary");
	expect_report(&rs, 2, 4, NULL, "binary");
	expect_report(&rs, 3, 6, NULL, "binary");
	expect_report(&rs, 4, 7, "level", "belongs in [log]"); /* [log] was junk */
	assert_true(c.policy.jitter == 0.2);
	assert_true(c.policy.multiplier == 1.6);
	assert_int_equal(c.max_attempts, 4);
	assert_int_equal(c.log_level, BS_LOG_INFO);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static unsigned count_lines(const char *t, size_t len)
{
	unsigned n = 0;
	for (size_t i = 0; i < len; i++)
		n += t[i] == '\n';
	return n + (len && t[len - 1] != '\n');
}

/* Random bytes between good lines: the good lines apply, every report is at
 * a line that exists, in order, and nothing else changes. */
static void test_random_junk(void **state)
{
	(void)state;
	static const char head[] = "[backoff]\njitter = 0.3\n";
	static const char tail[] = "\n[log]\nlevel = debug\n";
	enum { JUNK = 3000 };
	static char text[sizeof head + JUNK + sizeof tail];
	for (uint64_t seed = 1; seed <= 20; seed++) {
		uint64_t s = 0x9e3779b97f4a7c15ull * seed;
		memcpy(text, head, sizeof head - 1);
		char *j = text + sizeof head - 1;
		for (int i = 0; i < JUNK; i++) {
			unsigned char b = (unsigned char)xorshift(&s);
			/* every 20th byte or so a newline, so there are many lines */
			j[i] = (char)(b % 20 == 0 ? '\n' : b);
		}
		memcpy(j + JUNK, tail, sizeof tail - 1);
		size_t len = sizeof head - 1 + JUNK + sizeof tail - 1;
		unsigned lines = count_lines(text, len);

		struct reps rs;
		struct bs_config c = parse(text, len, &rs);
		struct bs_config want = defaults();
		want.policy.jitter = 0.3;
		want.log_level = BS_LOG_DEBUG;
		if (memcmp(&c, &want, sizeof c) != 0)
			fail_msg("seed %llu: junk changed the configuration",
				 (unsigned long long)seed);
		assert_true(rs.n > 0);
		assert_true(rs.n <= (int)(sizeof rs.r / sizeof rs.r[0]));
		unsigned prev = 3;
		for (int i = 0; i < rs.n; i++) {
			assert_string_equal(rs.r[i].origin, ORIGIN);
			assert_true(rs.r[i].why[0] != '\0');
			if (rs.r[i].line < prev || rs.r[i].line > lines - 2)
				fail_msg("seed %llu: report at line %u outside %u..%u",
					 (unsigned long long)seed, rs.r[i].line, prev, lines - 2);
			prev = rs.r[i].line;
		}
	}
}

/* Pure junk: the configuration stays the defaults. */
static void test_random_only(void **state)
{
	(void)state;
	const struct bs_config def = defaults();
	static char text[4096];
	uint64_t s = 0x5eedull;
	for (size_t i = 0; i < sizeof text; i++)
		text[i] = (char)xorshift(&s);
	struct reps rs;
	struct bs_config c = parse(text, sizeof text, &rs);
	assert_memory_equal(&c, &def, sizeof c);
	assert_true(rs.n > 0);
	unsigned lines = count_lines(text, sizeof text);
	for (int i = 0; i < rs.n && i < 256; i++)
		assert_true(rs.r[i].line >= 1 && rs.r[i].line <= lines);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_long_lines),
		cmocka_unit_test(test_nul_bytes),
		cmocka_unit_test(test_random_junk),
		cmocka_unit_test(test_random_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
