/* Unit tests for config files on disk (config.c): bs_config_load_file errors
 * (directory, missing, over 1 MiB) and success, and bs_config_load_rules'
 * precedence defaults < file < environment, with missing and unreadable
 * BACKOFFSHIM_CONFIG files; special files (a FIFO, a character device) are
 * never read (a FIFO would block) except /dev/null, which is quietly empty. */
#include "config_helpers.h"

#include "config.h"
#include "log.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

/* --- files on disk, and their place between defaults and environment --- */

static char *write_temp(const char *text, size_t len)
{
	char *path = strdup("/tmp/bs_test_config_XXXXXX");
	assert_non_null(path);
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	return path;
}

static void drop_temp(char *path)
{
	assert_int_equal(unlink(path), 0);
	free(path);
}

static void test_precedence(void **state)
{
	(void)state;
	static const char ini[] = "[backoff]\n"
				  "initial_backoff = 2s\n"
				  "multiplier = 2\n"
				  "max_attempts = 4\n"
				  "[log]\n"
				  "level = debug\n";
	char *path = write_temp(ini, sizeof ini - 1);
	const struct var env[] = {
		{"BACKOFFSHIM_CONFIG", path}, {"BACKOFFSHIM_MULTIPLIER", "3"},
		{"BACKOFFSHIM_MAX_ATTEMPTS", "9"}, {NULL, NULL}};
	struct reps rs = {0};
	struct bs_config c;
	memset(&c, 0x5a, sizeof c); /* load starts from defaults itself */
	use_env(env);
	bs_config_load_rules(&c, NULL, fake_getenv, bs_read_file_libc, capture, &rs);
	drop_temp(path);
	assert_int_equal(rs.n, 0);
	assert_int_equal(c.policy.initial_backoff, 2 * SEC); /* file */
	assert_true(c.policy.multiplier == 3.0);             /* env over file */
	assert_int_equal(c.max_attempts, 9);                 /* env over file */
	assert_int_equal(c.log_level, BS_LOG_DEBUG);         /* file */
	assert_true(c.policy.jitter == 0.2);                 /* default */
	assert_int_equal(c.policy.max_backoff, 120 * SEC);   /* default */
	assert_int_equal(bs_config_retries(&c, ECONNREFUSED), 1);
}

static void test_missing_config_file(void **state)
{
	(void)state;
	static const struct var env[] = {
		{"BACKOFFSHIM_CONFIG", "/nonexistent/bs-test/none.ini"},
		{"BACKOFFSHIM_JITTER", "0.5"}, {NULL, NULL}};
	struct reps rs = {0};
	struct bs_config c;
	use_env(env);
	bs_config_load_rules(&c, NULL, fake_getenv, bs_read_file_libc, capture, &rs);
	assert_int_equal(rs.n, 1);
	assert_string_equal(rs.r[0].origin, "/nonexistent/bs-test/none.ini");
	assert_int_equal(rs.r[0].line, 0);
	assert_false(rs.r[0].has_key);
	assert_true(rs.r[0].why[0] != '\0');
	struct bs_config want = defaults();
	want.policy.jitter = 0.5;
	same_config(&c, &want);
}

static void test_unreadable_config_file(void **state)
{
	(void)state;
	char dir[] = "/tmp/bs_test_dir_XXXXXX";
	assert_non_null(mkdtemp(dir));
	const struct var env[] = {
		{"BACKOFFSHIM_CONFIG", dir}, {"BACKOFFSHIM_LOG", "off"}, {NULL, NULL}};
	struct reps rs = {0};
	struct bs_config c;
	use_env(env);
	bs_config_load_rules(&c, NULL, fake_getenv, bs_read_file_libc, capture, &rs);
	assert_int_equal(rmdir(dir), 0);
	assert_int_equal(rs.n, 1);
	assert_string_equal(rs.r[0].origin, dir);
	assert_int_equal(rs.r[0].line, 0);
	assert_int_equal(c.log_level, BS_LOG_OFF);
	assert_int_equal(c.policy.initial_backoff, SEC);
}

static void test_load_file_errors(void **state)
{
	(void)state;
	const struct bs_config def = defaults();
	struct bs_config c = defaults();
	struct reps rs = {0};

	char dir[] = "/tmp/bs_test_dir_XXXXXX";
	assert_non_null(mkdtemp(dir));
	assert_int_equal(bs_config_load_file(&c, dir, bs_read_file_libc, capture, &rs), -1);
	assert_int_equal(rmdir(dir), 0);
	assert_int_equal(rs.n, 1);
	assert_string_equal(rs.r[0].origin, dir);
	assert_int_equal(rs.r[0].line, 0);
	assert_true(rs.r[0].why[0] != '\0');

	assert_int_equal(bs_config_load_file(&c, "/nonexistent/bs-test.ini", bs_read_file_libc, capture, &rs), -1);
	assert_int_equal(rs.n, 2);
	assert_string_equal(rs.r[1].origin, "/nonexistent/bs-test.ini");
	assert_int_equal(rs.r[1].line, 0);
	assert_string_equal(rs.r[1].why, "cannot open file: No such file or directory");
	same_config(&c, &def);

	/* Over 1 MiB: refused as a whole, nothing applied. */
	size_t big = (1u << 20) + 1;
	char *text = malloc(big);
	assert_non_null(text);
	memset(text, '\n', big);
	static const char head[] = "[backoff]\njitter = 0.5\n";
	memcpy(text, head, sizeof head - 1);
	char *path = write_temp(text, big);
	free(text);
	int rc = bs_config_load_file(&c, path, bs_read_file_libc, capture, &rs);
	int same_origin = rs.n == 3 && strcmp(rs.r[2].origin, path) == 0;
	drop_temp(path);
	assert_int_equal(rc, -1);
	assert_int_equal(rs.n, 3);
	assert_true(same_origin);
	same_config(&c, &def);

	/* A readable file returns 0 and is applied. */
	path = write_temp(head, sizeof head - 1);
	rc = bs_config_load_file(&c, path, bs_read_file_libc, capture, &rs);
	drop_temp(path);
	assert_int_equal(rc, 0);
	assert_int_equal(rs.n, 3);
	assert_true(c.policy.jitter == 0.5);
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "reading a config file blocked\n";
	if (write(2, msg, sizeof msg - 1)) {}
	_exit(3);
}

static void test_special_files_are_not_read(void **state)
{
	(void)state;
	const struct bs_config def = defaults();
	struct bs_config c = defaults();
	struct reps rs = {0};
	char dir[] = "/tmp/bs_test_dir_XXXXXX";
	assert_non_null(mkdtemp(dir));
	char fifo[64];
	snprintf(fifo, sizeof fifo, "%s/fifo", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	signal(SIGALRM, on_alarm);
	alarm(10); /* a FIFO without a writer: open or read would wait forever */
	int rc_fifo = bs_config_load_file(&c, fifo, bs_read_file_libc, capture, &rs);
	int rc_zero = bs_config_load_file(&c, "/dev/zero", bs_read_file_libc, capture, &rs);
	int rc_null = bs_config_load_file(&c, "/dev/null", bs_read_file_libc, capture, &rs);
	int rc_dir = bs_config_load_file(&c, dir, bs_read_file_libc, capture, &rs);
	/* Through BACKOFFSHIM_CONFIG too. */
	const struct var env[] = {{"BACKOFFSHIM_CONFIG", fifo}, {NULL, NULL}};
	struct reps rs2 = {0};
	struct bs_config c2;
	use_env(env);
	bs_config_load_rules(&c2, NULL, fake_getenv, bs_read_file_libc, capture, &rs2);
	alarm(0);
	assert_int_equal(unlink(fifo), 0);
	assert_int_equal(rmdir(dir), 0);
	assert_int_equal(rc_fifo, -1);
	assert_int_equal(rc_zero, -1);
	assert_int_equal(rc_null, 0);
	assert_int_equal(rc_dir, -1);
	assert_int_equal(rs.n, 3); /* /dev/null says nothing */
	assert_string_equal(rs.r[0].origin, fifo);
	assert_string_equal(rs.r[0].why, "not a regular file");
	assert_int_equal(rs.r[0].line, 0);
	assert_false(rs.r[0].has_key || rs.r[0].has_value);
	assert_string_equal(rs.r[1].origin, "/dev/zero");
	assert_string_equal(rs.r[1].why, "not a regular file");
	assert_string_equal(rs.r[2].why, "not a regular file");
	same_config(&c, &def);
	assert_int_equal(rs2.n, 1);
	assert_string_equal(rs2.r[0].why, "not a regular file");
	same_config(&c2, &def);
}

/* Every "cannot" names the error, in glibc's words. */
static void test_cannot_names_the_error(void **state)
{
	(void)state;
	assert_string_equal(bs_config_cannot("open file", EACCES),
			    "cannot open file: Permission denied");
	static const int errs[] = {ENOENT, EACCES, ENOTDIR, EISDIR, ELOOP, ENAMETOOLONG,
				   EROFS, ENOSPC, ENXIO, EDQUOT, EIO, EPERM};
	for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
		char want[128];
		snprintf(want, sizeof want, "cannot read file: %s", strerror(errs[i]));
		assert_string_equal(bs_config_cannot("read file", errs[i]), want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_precedence),
		cmocka_unit_test(test_missing_config_file),
		cmocka_unit_test(test_unreadable_config_file),
		cmocka_unit_test(test_load_file_errors),
		cmocka_unit_test(test_special_files_are_not_read),
		cmocka_unit_test(test_cannot_names_the_error),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
