/* Unit tests for log: line building, duration text, levels, one write per
 * line, errno untouched. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static int pipefd[2];

static int setup(void **state)
{
	(void)state;
	if (pipe2(pipefd, O_NONBLOCK))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	close(pipefd[0]);
	close(pipefd[1]);
	bs_log_setup(BS_LOG_INFO, -1);
	return 0;
}

static size_t drain(char *buf, size_t cap)
{
	ssize_t n = read(pipefd[0], buf, cap - 1);
	buf[n > 0 ? n : 0] = '\0';
	return n > 0 ? (size_t)n : 0;
}

static const char *dur(uint64_t ns)
{
	static struct bs_line l;
	l.n = 0;
	bs_line_dur(&l, ns);
	l.buf[l.n] = '\0';
	return l.buf;
}

static void test_durations(void **state)
{
	(void)state;
	assert_string_equal(dur(0), "0ms");
	assert_string_equal(dur(250000000ull), "250ms");
	assert_string_equal(dur(999400000ull), "999ms");
	assert_string_equal(dur(999600000ull), "1.00s");
	assert_string_equal(dur(1000000000ull), "1.00s");
	assert_string_equal(dur(2470000000ull), "2.47s");
	assert_string_equal(dur(2474999999ull), "2.47s");
	assert_string_equal(dur(2475000000ull), "2.48s");
	assert_string_equal(dur(120000000000ull), "120.00s");
	assert_string_equal(dur(1050000000ull), "1.05s");
}

static void test_line_format_and_single_write(void **state)
{
	(void)state;
	char buf[1024], want[128];
	struct bs_line l;
	bs_log_setup(BS_LOG_INFO, pipefd[1]);
	bs_line_start(&l);
	bs_line_str(&l, "connect 127.0.0.1:5432: ");
	bs_line_u64(&l, 3);
	bs_line_mem(&l, "xyz", 2);
	bs_line_emit(&l, BS_LOG_INFO);
	drain(buf, sizeof buf);
	snprintf(want, sizeof want, "backoffshim[%d]: connect 127.0.0.1:5432: 3xy\n", (int)getpid());
	assert_string_equal(buf, want);
}

static void test_levels_filter(void **state)
{
	(void)state;
	char buf[1024];
	struct bs_line l;
	bs_log_setup(BS_LOG_ERROR, pipefd[1]);
	assert_true(bs_log_enabled(BS_LOG_ERROR));
	assert_false(bs_log_enabled(BS_LOG_INFO));
	assert_false(bs_log_enabled(BS_LOG_OFF));
	bs_line_start(&l);
	bs_line_str(&l, "info");
	bs_line_emit(&l, BS_LOG_INFO);
	assert_int_equal(drain(buf, sizeof buf), 0);
	bs_line_emit(&l, BS_LOG_ERROR);
	drain(buf, sizeof buf);
	assert_non_null(strstr(buf, "info"));
	bs_log_setup(BS_LOG_OFF, pipefd[1]);
	assert_false(bs_log_enabled(BS_LOG_ERROR));
	bs_line_emit(&l, BS_LOG_ERROR);
	assert_int_equal(drain(buf, sizeof buf), 0);
	bs_log_setup(BS_LOG_DEBUG, pipefd[1]);
	assert_true(bs_log_enabled(BS_LOG_DEBUG));
}

static void test_long_lines_are_truncated_whole(void **state)
{
	(void)state;
	char buf[4096];
	struct bs_line l;
	bs_log_setup(BS_LOG_INFO, pipefd[1]);
	bs_line_start(&l);
	for (int i = 0; i < 200; i++)
		bs_line_str(&l, "abcdefgh");
	bs_line_u64(&l, 12345);
	bs_line_emit(&l, BS_LOG_INFO);
	size_t n = drain(buf, sizeof buf);
	assert_int_equal(n, BS_LINE_MAX);
	assert_int_equal(buf[n - 1], '\n');
	assert_null(memchr(buf, '\n', n - 1));
}

static void test_errno_untouched(void **state)
{
	(void)state;
	struct bs_line l;
	bs_log_setup(BS_LOG_INFO, 12345); /* a closed fd: write fails with EBADF */
	bs_line_start(&l);
	bs_line_str(&l, "x");
	errno = ECONNREFUSED;
	bs_line_emit(&l, BS_LOG_INFO);
	assert_int_equal(errno, ECONNREFUSED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_line_format_and_single_write),
		cmocka_unit_test(test_levels_filter),
		cmocka_unit_test(test_long_lines_are_truncated_whole),
		cmocka_unit_test(test_errno_untouched),
	};
	return cmocka_run_group_tests_name("log", tests, setup, teardown);
}
