/* Unit tests for bs_config_load_env (config.c), through a fake getenv: every
 * BACKOFFSHIM_* variable, each acting exactly like its INI key, look-alike
 * names ignored, and one report per bad value with the old value kept. */
#include "config_helpers.h"

#include "config.h"
#include "log.h"

#include <errno.h>
#include <string.h>

/* --- environment --- */

static const struct var ALL_ENV[] = {
	{"BACKOFFSHIM_INITIAL_BACKOFF", "3s"},
	{"BACKOFFSHIM_MULTIPLIER", "2.5"},
	{"BACKOFFSHIM_JITTER", "0.1"},
	{"BACKOFFSHIM_MAX_BACKOFF", "90s"},
	{"BACKOFFSHIM_MIN_CONNECT_TIMEOUT", "5s"},
	{"BACKOFFSHIM_MAX_ATTEMPTS", "7"},
	{"BACKOFFSHIM_MAX_ELAPSED", "10m"},
	{"BACKOFFSHIM_RETRY_ON", "EPIPE"},
	{"BACKOFFSHIM_UNIX", "on"},
	{"BACKOFFSHIM_POLICY", "list"},
	{"BACKOFFSHIM_JITTER_MODE", "full"},
	{"BACKOFFSHIM_DELAYS", "0, 10ms,3s"},
	{"BACKOFFSHIM_UP_MULTIPLIER", "2"},
	{"BACKOFFSHIM_DOWN_MULTIPLIER", "0.5"},
	{"BACKOFFSHIM_DOWN_THRESHOLD", "3"},
	{"BACKOFFSHIM_RANDOMIZATION_FACTOR", "0.1"},
	{"BACKOFFSHIM_MAX_RANDOMIZATION", "30s"},
	{"BACKOFFSHIM_NONBLOCKING", "pace"},
	{"BACKOFFSHIM_RESOLVE", "wait"},
	{"BACKOFFSHIM_HEALTHY_AFTER", "2500ms"},
	{"BACKOFFSHIM_LOG", "debug"},
	{"BACKOFFSHIM_LOG_FILE", "/tmp/bs.log"},
	{"BACKOFFSHIM_SEED", "42"},
	{"BACKOFFSHIM_DISABLE", "yes"},
	{"BACKOFFSHIM_SHARED", "/run/backoffshim/table"},
	{"BACKOFFSHIM_LOG_TIME", "off"},
	{"BACKOFFSHIM_LOG_FORMAT", "json"},
	{NULL, NULL},
};
/* The INI section and key each variable stands for. */
static const char *const ALL_KEYS[][2] = {
	{"backoff", "initial_backoff"}, {"backoff", "multiplier"}, {"backoff", "jitter"},
	{"backoff", "max_backoff"}, {"backoff", "min_connect_timeout"},
	{"backoff", "max_attempts"}, {"backoff", "max_elapsed"}, {"backoff", "retry_on"},
	{"backoff", "unix"}, {"backoff", "policy"}, {"backoff", "jitter_mode"},
	{"backoff", "delays"}, {"backoff", "up_multiplier"}, {"backoff", "down_multiplier"},
	{"backoff", "down_threshold"}, {"backoff", "randomization_factor"},
	{"backoff", "max_randomization"}, {"backoff", "nonblocking"}, {"backoff", "resolve"},
	{"backoff", "healthy_after"},
	{"log", "level"}, {"log", "file"}, {"backoff", "seed"}, {"backoff", "disable"},
	{"backoff", "shared"}, {"log", "time"}, {"log", "format"},
};
#define NVARS (sizeof ALL_KEYS / sizeof ALL_KEYS[0])
_Static_assert(NVARS == 27, "one entry per BACKOFFSHIM_* variable");
_Static_assert(sizeof ALL_ENV / sizeof ALL_ENV[0] == NVARS + 1, "ALL_ENV matches ALL_KEYS");

static void test_env_all(void **state)
{
	(void)state;
	struct reps rs = {0};
	struct bs_config c = defaults();
	use_env(ALL_ENV);
	bs_config_load_env(&c, fake_getenv, capture, &rs);
	assert_int_equal(rs.n, 0);
	assert_int_equal(c.policy.initial_backoff, 3 * SEC);
	assert_true(c.policy.multiplier == 2.5);
	assert_true(c.policy.jitter == 0.1);
	assert_int_equal(c.policy.max_backoff, 90 * SEC);
	assert_int_equal(c.policy.min_connect_timeout, 5 * SEC);
	assert_int_equal(c.max_attempts, 7);
	assert_int_equal(c.max_elapsed, 600 * SEC);
	assert_int_equal(bs_config_retries(&c, EPIPE), 1);
	assert_int_equal(bs_config_retries(&c, ECONNREFUSED), 0);
	assert_int_equal(c.unix_sockets, 1);
	assert_int_equal(c.policy.kind, BS_POLICY_LIST);
	assert_int_equal(c.policy.jitter_mode, BS_JITTER_FULL);
	assert_int_equal(c.policy.ndelays, 3);
	assert_int_equal(c.policy.delays[0], 0);
	assert_int_equal(c.policy.delays[1], 10 * MS);
	assert_int_equal(c.policy.delays[2], 3 * SEC);
	assert_true(c.policy.up_multiplier == 2.0);
	assert_true(c.policy.down_multiplier == 0.5);
	assert_int_equal(c.policy.down_threshold, 3);
	assert_true(c.policy.randomization_factor == 0.1);
	assert_int_equal(c.policy.max_randomization, 30 * SEC);
	assert_int_equal(c.nonblocking, BS_NB_PACE);
	assert_int_equal(c.resolve, BS_RESOLVE_WAIT);
	assert_int_equal(c.healthy_after, 2500 * MS);
	assert_int_equal(c.log_level, BS_LOG_DEBUG);
	assert_string_equal(c.log_file, "/tmp/bs.log");
	assert_int_equal(c.seed, 42);
	assert_int_equal(c.seed_set, 1);
	assert_int_equal(c.disable, 1);
	assert_string_equal(c.shared, "/run/backoffshim/table");
	assert_int_equal(c.log_time, 0);
	assert_int_equal(c.log_json, 1);

	/* It asks for exactly these names, each once. */
	assert_int_equal(nasked, (int)NVARS);
	for (size_t i = 0; i < NVARS; i++) {
		int found = 0;
		for (int j = 0; j < nasked; j++)
			found += strcmp(asked[j], ALL_ENV[i].name) == 0;
		if (found != 1)
			fail_msg("%s looked up %d times", ALL_ENV[i].name, found);
	}
}

/* Each variable alone changes exactly what its INI key changes. */
static void test_env_each_maps_to_key(void **state)
{
	(void)state;
	const struct bs_config def = defaults();
	for (size_t i = 0; i < NVARS; i++) {
		struct var one[2] = {ALL_ENV[i], {NULL, NULL}};
		struct reps rs = {0};
		struct bs_config got = defaults(), want = defaults();
		use_env(one);
		bs_config_load_env(&got, fake_getenv, capture, &rs);
		assert_int_equal(rs.n, 0);
		const char *why;
		assert_int_equal(bs_config_set(&want, ALL_KEYS[i][0], ALL_KEYS[i][1],
					       ALL_ENV[i].value, &why), 0);
		if (memcmp(&got, &def, sizeof got) == 0)
			fail_msg("%s changed nothing", ALL_ENV[i].name);
		if (memcmp(&got, &want, sizeof got) != 0)
			fail_msg("%s does not act like [%s] %s", ALL_ENV[i].name,
				 ALL_KEYS[i][0], ALL_KEYS[i][1]);
	}
	/* Names that only look similar are ignored. */
	static const struct var near[] = {
		{"backoffshim_jitter", "0.5"}, {"JITTER", "0.5"}, {"BACKOFFSHIM_JITTER ", "0.5"},
		{"BACKOFFSHIM_LEVEL", "debug"}, {"BACKOFFSHIM_NONBLOCK", "off"},
		{"BACKOFFSHIM_HEALTHY", "0"}, {"BACKOFFSHIM_HEALTHYAFTER", "0"}, {NULL, NULL}};
	struct reps rs = {0};
	struct bs_config c = defaults();
	use_env(near);
	bs_config_load_env(&c, fake_getenv, capture, &rs);
	assert_int_equal(rs.n, 0);
	same_config(&c, &def);
}

/* One bad value per variable: one report naming it, line 0, old value kept. */
static void test_env_bad_values(void **state)
{
	(void)state;
	static const char *bad[] = {
		"0", "0.5", "1.5", "soon", "-1s", "1e9", "nan", "ENOPE", "maybe",
		"fibonacci", "half", "1s,,2s", "0.5", "1.5", "-1", "2", "soon",
		"sometimes", "always", "-1s", "loud", "", "-3", "2", "relative/path", "sometimes", "xml",
	};
	_Static_assert(sizeof bad / sizeof bad[0] == NVARS, "one bad value per variable");
	const struct bs_config def = defaults();
	for (size_t i = 0; i < NVARS; i++) {
		struct var one[2] = {{ALL_ENV[i].name, bad[i]}, {NULL, NULL}};
		struct reps rs = {0};
		struct bs_config c = defaults();
		use_env(one);
		bs_config_load_env(&c, fake_getenv, capture, &rs);
		if (rs.n != 1)
			fail_msg("%s=\"%s\": %d reports", one[0].name, bad[i], rs.n);
		assert_string_equal(rs.r[0].origin, ALL_ENV[i].name);
		assert_int_equal(rs.r[0].line, 0);
		assert_true(rs.r[0].has_value);
		assert_string_equal(rs.r[0].value, bad[i]);
		assert_true(rs.r[0].why[0] != '\0');
		same_config(&c, &def);
	}

	/* A bad value does not stop the others. */
	static const struct var mixed[] = {
		{"BACKOFFSHIM_JITTER", "2"}, {"BACKOFFSHIM_MULTIPLIER", "3"},
		{"BACKOFFSHIM_LOG", "chatty"}, {"BACKOFFSHIM_UNIX", "1"},
		{"BACKOFFSHIM_NONBLOCKING", "sometimes"}, {"BACKOFFSHIM_HEALTHY_AFTER", " 0 "},
		{NULL, NULL}};
	struct reps rs = {0};
	struct bs_config c = defaults();
	use_env(mixed);
	bs_config_load_env(&c, fake_getenv, capture, &rs);
	assert_int_equal(rs.n, 3);
	assert_true(c.policy.jitter == 0.2);
	assert_true(c.policy.multiplier == 3.0);
	assert_int_equal(c.log_level, BS_LOG_INFO);
	assert_int_equal(c.unix_sockets, 1);
	assert_int_equal(c.nonblocking, BS_NB_AUTO); /* the default stays */
	assert_int_equal(c.healthy_after, 0);
}

/* Unknown BACKOFFSHIM_* names: one report each, with the nearest known
 * name when it is at most 3 edits away; known names and other variables
 * are not reported. */
static void test_env_unknown_names(void **state)
{
	(void)state;
	char *env[] = {
		"BACKOFFSHIM_MAX_BACKOF=30s", "BACKOFFSHIM_MAX_BACKOFF=30s",
		"BACKOFFSHIM_CONFIG=/x.ini", "BACKOFFSHIM_DEST_RULES=", "PATH=/bin",
		"backoffshim_jitter=0.5", "BACKOFFSHIM_COMPLETELY_ELSE", "BACKOFFSHIM=1",
		"BACKOFFSHIM_INTIAL_BACKOFF=1s", NULL,
	};
	struct reps rs = {0};
	assert_int_equal(bs_config_check_env_names(env, capture, &rs), 4);
	assert_int_equal(rs.n, 4);
	static const char *const want[][3] = {
		{"BACKOFFSHIM_MAX_BACKOF", "30s", "did you mean BACKOFFSHIM_MAX_BACKOFF?"},
		{"backoffshim_jitter", "0.5", "did you mean BACKOFFSHIM_JITTER?"},
		{"BACKOFFSHIM_COMPLETELY_ELSE", "", "unknown variable"},
		{"BACKOFFSHIM_INTIAL_BACKOFF", "1s", "did you mean BACKOFFSHIM_INITIAL_BACKOFF?"},
	};
	for (int i = 0; i < 4; i++) {
		assert_string_equal(rs.r[i].origin, want[i][0]);
		assert_string_equal(rs.r[i].value, want[i][1]);
		assert_non_null(strstr(rs.r[i].why, want[i][2]));
		assert_int_equal(rs.r[i].line, 0);
		assert_false(rs.r[i].has_key);
	}
	assert_string_equal(rs.r[2].why, "unknown variable");
	assert_true(bs_config_var_known("BACKOFFSHIM_LOG_FORMAT=json"));
	assert_true(bs_config_var_known("BACKOFFSHIM_DEST_RULES"));
	assert_false(bs_config_var_known("BACKOFFSHIM_LOG_FORMA=json"));
	assert_false(bs_config_var_known("backoffshim_log"));
	assert_int_equal(bs_config_check_env_names(NULL, capture, &rs), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_env_all),
		cmocka_unit_test(test_env_each_maps_to_key),
		cmocka_unit_test(test_env_bad_values),
		cmocka_unit_test(test_env_unknown_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
