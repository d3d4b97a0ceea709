/* Unit tests for config.c / config_parse.c: the built-in defaults and the
 * numeric value parsers (durations, including a seeded random check against
 * a 128-bit reference, and plain numbers). bs_config_set, uint/bool/level/
 * errno lists and errname.c are in test_config_set.c; the environment in
 * test_config_env.c; INI text in test_config_ini*.c; files and precedence in
 * test_config_files.c. */
#include "config_helpers.h"

#include "config.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* --- defaults --- */

static void test_defaults(void **state)
{
	(void)state;
	struct bs_config c;
	memset(&c, 0xa5, sizeof c);
	bs_config_defaults(&c);
	assert_int_equal(c.policy.initial_backoff, 1 * SEC);
	assert_true(c.policy.multiplier == 1.6);
	assert_true(c.policy.jitter == 0.2);
	assert_int_equal(c.policy.max_backoff, 120 * SEC);
	assert_int_equal(c.policy.min_connect_timeout, 20 * SEC);
	assert_int_equal(c.max_attempts, 0);
	assert_int_equal(c.max_elapsed, 5 * 60 * SEC);
	assert_int_equal(c.unix_sockets, 0);
	assert_int_equal(c.nonblocking, BS_NB_AUTO);
	assert_int_equal(c.resolve, BS_RESOLVE_OFF);
	assert_int_equal(c.healthy_after, 10 * SEC);
	assert_int_equal(c.disable, 0);
	assert_int_equal(c.log_level, 2);
	assert_int_equal(c.log_level, BS_LOG_INFO);
	assert_string_equal(c.log_file, "");
	assert_int_equal(c.seed_set, 0);

	static const int yes[] = {ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH, ENETUNREACH,
				  ECONNRESET, EAGAIN};
	for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
		assert_int_equal(bs_config_retries(&c, yes[i]), 1);
	/* Exactly those six bits, nothing else. */
	int bits = 0;
	for (int e = -5; e < 64 * BS_ERRSET_WORDS + 10; e++)
		bits += bs_config_retries(&c, e);
	assert_int_equal(bits, 6);
	static const int no[] = {0, -1, EACCES, EPERM, EINTR, EINPROGRESS, ENOENT,
				 EADDRINUSE, 64 * BS_ERRSET_WORDS, 100000};
	for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
		assert_int_equal(bs_config_retries(&c, no[i]), 0);
}

/* --- durations --- */

static void test_duration_ok(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		uint64_t ns;
	} ok[] = {
		{"250ms", 250 * MS}, {"1s", SEC}, {"1.5s", 1500 * MS}, {"2m", 120 * SEC},
		{"3s", 3 * SEC}, {"0.5s", 500 * MS}, {"100us", 100000}, {"1h", 3600 * SEC}, {"2d", 2 * 86400 * SEC}, {"30d", 30 * 86400 * SEC},
		{"  2s", 2 * SEC}, {"2s  ", 2 * SEC}, {"\t7ms\t", 7 * MS}, {"1 s", SEC},
		{"5min", 300 * SEC}, {"10ns", 10}, {"0", 0}, {"0.25ms", 250000},
		{"720h", 720 * 3600 * SEC}, {"2592000s", 2592000 * SEC},
		{"1.s", SEC}, {".5s", 500 * MS}, {"0.0", 0}, {" 0 ", 0}, {"1.9999999999ns", 1},
		/* big counts of small units: the limit is 30 days, not the digits */
		{"10000000000ns", 10 * SEC}, {"36000000000us", 36000 * SEC},
		{"2592000000000000ns", 2592000 * SEC}, {"2592000000ms", 2592000 * SEC},
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		uint64_t ns = 12345;
		const char *why = NULL;
		if (bs_parse_duration(ok[i].s, &ns, &why) != 0)
			fail_msg("\"%s\" rejected: %s", ok[i].s, why);
		if (ns != ok[i].ns)
			fail_msg("\"%s\" -> %llu ns, want %llu", ok[i].s,
				 (unsigned long long)ns, (unsigned long long)ok[i].ns);
	}
}

static void test_duration_rejects(void **state)
{
	(void)state;
	static const char *bad[] = {
		"", "   ", "abc", "-1s", "-0", "nan", "NaN", "inf", "infinity", "1e3",
		"1.5.2s", "5 parsecs", "1sx", "99999999999999s", "721h", "2592001s",
		"2592000.5s", "43201m", "s", ".", ".s", "1 2s", "0x10", "1,5s",
		"1S", "1D", "31d", "1s 2s", "2592000000000001ns", "2592000000.001ms",
		"100000000000000000000ns", "99999999999999999999999999999999s",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		uint64_t ns = 777;
		const char *why = NULL;
		if (bs_parse_duration(bad[i], &ns, &why) != -1)
			fail_msg("\"%s\" accepted as %llu ns", bad[i], (unsigned long long)ns);
		assert_int_equal(ns, 777);
		assert_non_null(why);
		assert_true(why[0] != '\0');
	}
}

/* A bare number could be ms or s: refused, naming both, the number as
 * written; 0 is the same in every unit. */
static void test_duration_bare_number_is_refused(void **state)
{
	(void)state;
	static const struct {
		const char *s, *why;
	} bad[] = {
		{"50", "a duration needs its unit: write 50ms or 50s"},
		{" 2.5\t", "a duration needs its unit: write 2.5ms or 2.5s"},
		{"+1", "a duration needs its unit: write +1ms or +1s"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		uint64_t ns = 777;
		const char *why = NULL;
		assert_int_equal(bs_parse_duration(bad[i].s, &ns, &why), -1);
		assert_int_equal(ns, 777);
		assert_string_equal(why, bad[i].why);
	}
	struct bs_config c;
	const char *why;
	bs_config_defaults(&c);
	assert_int_equal(bs_config_set(&c, "backoff", "initial_backoff", "50", &why), -1);
	assert_string_equal(why, "a duration needs its unit: write 50ms or 50s");
	assert_int_equal(c.policy.initial_backoff, SEC);
	assert_int_equal(bs_config_set(&c, NULL, "max_elapsed", "0", &why), 0);
	assert_int_equal(c.max_elapsed, 0);
	assert_int_equal(bs_config_set(&c, "backoff", "delays", "0, 5", &why), -1);
	assert_non_null(strstr(why, "delay '5': a duration needs its unit: write 5ms or 5s"));
}

/* Seeded random durations against a 128-bit reference: the value is
 * floor((integer + 9-digit fraction) * unit), rejected above 30 days. */
static void test_duration_random(void **state)
{
	(void)state;
	static const struct {
		const char *name;
		uint64_t ns;
	} units[] = {{"", SEC}, {"ns", 1}, {"us", 1000}, {"ms", MS}, {"s", SEC},
		     {"m", 60 * SEC}, {"min", 60 * SEC}, {"h", 3600 * SEC}};
	const unsigned __int128 max = (unsigned __int128)2592000 * SEC;
	uint64_t r = 0x243f6a8885a308d3ull;
	int accepted = 0, rejected = 0;
	for (int i = 0; i < 20000; i++) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		uint64_t ip = r % 10000000000000000ull >> (r % 54); /* all magnitudes */
		unsigned u = (unsigned)(r >> 20) % 8, nf = (unsigned)(r >> 40) % 13;
		char frac[16] = "";
		uint64_t f9 = 0;
		for (unsigned k = 0; k < nf; k++) {
			r ^= r << 13, r ^= r >> 7, r ^= r << 17;
			frac[k] = (char)('0' + r % 10);
			if (k < 9)
				f9 = f9 * 10 + r % 10;
		}
		for (unsigned k = nf; k < 9; k++)
			f9 *= 10;
		char s[64];
		snprintf(s, sizeof s, "%llu%s%s%s", (unsigned long long)ip, nf ? "." : "",
			 frac, units[u].name);
		unsigned __int128 want =
			((unsigned __int128)ip * SEC + f9) * units[u].ns / SEC;
		uint64_t got = 0;
		const char *why = NULL;
		int rc = bs_parse_duration(s, &got, &why);
		if (!*units[u].name && want) { /* a bare number */
			if (rc != -1 || !strstr(why, "ms or "))
				fail_msg("\"%s\" accepted without a unit", s);
			rejected++;
		} else if (want > max) {
			if (rc != -1)
				fail_msg("\"%s\" accepted as %llu", s, (unsigned long long)got);
			rejected++;
		} else {
			if (rc != 0)
				fail_msg("\"%s\" rejected: %s", s, why);
			if (got != (uint64_t)want)
				fail_msg("\"%s\" -> %llu, want %llu", s, (unsigned long long)got,
					 (unsigned long long)want);
			accepted++;
		}
	}
	/* both sides of the limit were exercised */
	assert_true(accepted > 1000 && rejected > 1000);
}

/* --- numbers, multiplier, jitter, durations that must be > 0 --- */

static void test_number(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		double v;
	} ok[] = {{"1.6", 1.6}, {"2", 2.0}, {"0", 0.0}, {" 1.25 ", 1.25},
		  {"+1.5", 1.5}, {".5", 0.5}, {"100", 100.0}};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		double d = -1;
		const char *why = NULL;
		if (bs_parse_number(ok[i].s, &d, &why) != 0)
			fail_msg("\"%s\" rejected: %s", ok[i].s, why);
		double diff = d - ok[i].v;
		assert_true(diff < 1e-12 && diff > -1e-12);
	}
	static const char *bad[] = {"", "nan", "NaN", "inf", "-inf", "-0.5", "-1",
				    "abc", "1.2.3", "1e2", "0x1", "1,5", "+", "+-1",
				    "1.5x", "1 5"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		double d = 42.0;
		const char *why = NULL;
		if (bs_parse_number(bad[i], &d, &why) != -1)
			fail_msg("\"%s\" accepted as %g", bad[i], d);
		assert_true(d == 42.0);
		assert_non_null(why);
	}
}

/* Each name table parses back to its own index through its parser; an
 * out-of-range value is shown as "?". */
static void test_name_tables(void **state)
{
	(void)state;
	static const struct {
		const struct bs_names *t;
		int n;
	} tabs[] = {
		{&bs_level_names, 4},
		{&bs_policy_names, 5},
		{&bs_jmode_names, 4},
		{&bs_nbmode_names, 5},
	};
	for (size_t k = 0; k < sizeof tabs / sizeof tabs[0]; k++) {
		assert_int_equal(tabs[k].t->n, tabs[k].n);
		for (int i = 0; i < tabs[k].t->n; i++) {
			int out = -1;
			const char *why = NULL;
			assert_int_equal(bs_parse_word(tabs[k].t->name[i], tabs[k].t, &out, &why), 0);
			assert_int_equal(out, i);
			assert_string_equal(bs_name_of(tabs[k].t, i), tabs[k].t->name[i]);
		}
		assert_string_equal(bs_name_of(tabs[k].t, -1), "?");
		assert_string_equal(bs_name_of(tabs[k].t, tabs[k].t->n), "?");
	}
	assert_int_equal(BS_POLICY_RESPONSIVE, 4);
	assert_string_equal(bs_name_of(&bs_policy_names, BS_POLICY_RESPONSIVE), "responsive");
	assert_string_equal(bs_name_of(&bs_jmode_names, BS_JITTER_DECORRELATED), "decorrelated");
	assert_string_equal(bs_name_of(&bs_nbmode_names, BS_NB_OFF), "off");
	assert_string_equal(bs_name_of(&bs_level_names, BS_LOG_DEBUG), "debug");
}

/* A problem names the bad entry, printably (a reason holds no control
 * byte, whatever the input: the fuzzer checks the same). */
static void test_errlist_names_the_bad_entry(void **state)
{
	(void)state;
	uint64_t set[BS_ERRSET_WORDS] = {0};
	const char *why = NULL;
	assert_int_equal(bs_parse_errlist("ECONNREFUSED, EFOO", set, &why), -1);
	assert_string_equal(why, "unknown errno name 'EFOO' (use names like ECONNREFUSED)");
	assert_int_equal(bs_parse_errlist("\x1bresive\xff", set, &why), -1);
	assert_string_equal(why, "unknown errno name '?resive?' (use names like ECONNREFUSED)");
	assert_int_equal(bs_parse_errlist("EPIPE ECONNRESET", set, &why), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_duration_ok),
		cmocka_unit_test(test_duration_rejects),
		cmocka_unit_test(test_duration_random),
		cmocka_unit_test(test_duration_bare_number_is_refused),
		cmocka_unit_test(test_number),
		cmocka_unit_test(test_name_tables),
		cmocka_unit_test(test_errlist_names_the_bad_entry),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
