/* Unit tests for log: line building, duration text, levels, one write per
 * line, errno untouched; escaping (no control byte ever leaves), never
 * blocking (full pipe or socket: dropped and counted), never SIGPIPE, never
 * writing to an fd not confirmed at set-up, the fd's flags untouched. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
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

/* The style: the program's name in the prefix, a UTC time, the journal's
 * priority, or one JSON object per line with the line's fields. */
/* A kind of line a loop repeats (a give-up: a program that connects in a
 * loop to a destination past its budget) goes out once a second per
 * destination; the next one says how many were left out. Another kind goes
 * out at once. */
/* One give-up line to 127.0.0.1:9, of the kind a loop repeats. */
static void emit_give_up(void)
{
	struct bs_line l;
	bs_line_start(&l);
	bs_line_event(&l, "give_up");
	bs_line_fields(&l, "127.0.0.1:9", 0, UINT64_MAX, 111);
	l.held_back = 1;
	bs_line_str(&l, "connect 127.0.0.1:9: giving up after 0 attempts");
	bs_line_emit(&l, BS_LOG_INFO);
}

static void test_repeated_lines_are_held_back(void **state)
{
	(void)state;
	char buf[4096];
	bs_log_setup(BS_LOG_INFO, pipefd[1]);
	for (int i = 0; i < 50; i++)
		emit_give_up();
	drain(buf, sizeof buf);
	assert_non_null(strstr(buf, "giving up after 0 attempts"));
	assert_null(strstr(strstr(buf, "giving up") + 1, "giving up")); /* once */
	struct bs_line o;
	bs_line_start(&o);
	bs_line_fields(&o, "127.0.0.1:9", 1, UINT64_MAX, 111);
	bs_line_str(&o, "connect 127.0.0.1:9: Connection refused (attempt 1)");
	bs_line_emit(&o, BS_LOG_INFO);
	drain(buf, sizeof buf);
	assert_non_null(strstr(buf, "(attempt 1)"));
	struct timespec ts = {1, 50 * 1000 * 1000};
	nanosleep(&ts, NULL); /* (the gap itself is what is tested) */
	emit_give_up();
	drain(buf, sizeof buf);
	assert_non_null(strstr(buf, "giving up after 0 attempts (and 49 more like it left out)"));
}

static void test_styles(void **state)
{
	(void)state;
	char buf[2048], want[256];
	struct bs_line l;
	struct bs_log_style st = {0, 0, 1, "my prog\":x"};
	bs_log_setup(BS_LOG_DEBUG, pipefd[1]);
	bs_log_set_style(&st);
	bs_line_start(&l);
	bs_line_str(&l, "hello");
	bs_line_emit(&l, BS_LOG_ERROR);
	drain(buf, sizeof buf);
	snprintf(want, sizeof want, "<3>backoffshim[%d] my_prog__x: hello\n", (int)getpid());
	assert_string_equal(buf, want);

	st.journal = 0;
	st.time = 1;
	bs_log_set_style(&st);
	bs_line_start(&l);
	bs_line_str(&l, "t");
	bs_line_emit(&l, BS_LOG_INFO);
	drain(buf, sizeof buf);
	/* 2026-11-24T16:30:35.123Z backoffshim[...] */
	assert_int_equal(strlen(buf) > 25, 1);
	assert_true(buf[4] == '-' && buf[7] == '-' && buf[10] == 'T' && buf[13] == ':' &&
		    buf[16] == ':' && buf[19] == '.' && buf[23] == 'Z' && buf[24] == ' ');
	assert_memory_equal(buf + 25, "backoffshim[", 12);

	st.time = 0;
	st.json = 1;
	strcpy(st.program, "cli");
	bs_log_set_style(&st);
	bs_line_start(&l);
	bs_line_event(&l, "retry");
	bs_line_fields(&l, "127.0.0.1:5432", 2, 1600000000ull, ECONNREFUSED);
	bs_line_str(&l, "say \"hi\" \\ \x01");
	bs_line_emit(&l, BS_LOG_INFO);
	drain(buf, sizeof buf);
	assert_memory_equal(buf, "{\"time\":\"", 9);
	snprintf(want, sizeof want, "\",\"pid\":%d,\"program\":\"cli\",\"level\":\"info\","
		 "\"event\":\"retry\",\"destination\":\"127.0.0.1:5432\",\"attempt\":2,"
		 "\"wait\":1.600,\"error\":\"ECONNREFUSED\","
		 "\"message\":\"say \\\"hi\\\" \\\\\\\\ \\\\x01\"}\n", (int)getpid());
	assert_non_null(strstr(buf, want));
	struct bs_log_style plain = {0, 0, 0, ""};
	bs_log_set_style(&plain);
}

/* Is buf one JSON object on one line whose strings are all closed? (A
 * small check of what a truncated line must keep: quotes balanced outside
 * escapes, the object closed, one newline at the end.) */
static int json_line_closed(const char *buf)
{
	size_t n = strlen(buf);
	if (n < 3 || buf[0] != '{' || buf[n - 1] != '\n' || buf[n - 2] != '}')
		return 0;
	int in_str = 0;
	for (size_t i = 0; i + 1 < n; i++) {
		if (in_str && buf[i] == '\\')
			i++;
		else if (buf[i] == '"')
			in_str = !in_str;
		else if (buf[i] == '\n' || (unsigned char)buf[i] < ' ')
			return 0;
	}
	return !in_str;
}

static void test_json_cut_short_stays_valid(void **state)
{
	(void)state;
	char buf[4096];
	struct bs_log_style st = {0, 1, 0, "p"};
	bs_log_setup(BS_LOG_INFO, pipefd[1]);
	bs_log_set_style(&st);
	for (int fill = 0; fill < 3; fill++) { /* quotes, backslashes, plain */
		const char *c = fill == 0 ? "\"" : fill == 1 ? "\\" : "x";
		struct bs_line l;
		bs_line_start(&l);
		bs_line_event(&l, "load");
		char dest[200];
		memset(dest, c[0], sizeof dest - 1);
		dest[sizeof dest - 1] = 0;
		bs_line_fields(&l, dest, 1, 12345678901ull, ECONNREFUSED);
		for (int i = 0; i < 600; i++)
			bs_line_str(&l, c);
		bs_line_emit(&l, BS_LOG_INFO);
		drain(buf, sizeof buf);
		assert_true(json_line_closed(buf));
		assert_non_null(strstr(buf, "\"wait\":12.346,")); /* rounded, as the text */
	}
	struct bs_log_style plain = {0, 0, 0, ""};
	bs_log_set_style(&plain);
}

static void test_journal_stream_matches_fd2(void **state)
{
	(void)state;
	struct stat st;
	char js[64];
	assert_int_equal(fstat(2, &st), 0);
	snprintf(js, sizeof js, "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	assert_true(bs_log_stderr_is_journal(js));
	snprintf(js, sizeof js, "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino + 1);
	assert_false(bs_log_stderr_is_journal(js));
	assert_false(bs_log_stderr_is_journal(NULL));
	assert_false(bs_log_stderr_is_journal(""));
	assert_false(bs_log_stderr_is_journal("12"));
	assert_false(bs_log_stderr_is_journal("1:2x"));
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

/* A line as it left: printable ASCII only, one '\n' at the end. */
static void assert_clean_line(const char *buf, size_t n)
{
	assert_true(n >= 1);
	assert_int_equal(buf[n - 1], '\n');
	for (size_t i = 0; i + 1 < n; i++) {
		unsigned char c = (unsigned char)buf[i];
		if (c < 0x20 || c >= 0x7f)
			fail_msg("byte 0x%02x at %zu in %.*s", c, i, (int)n, buf);
	}
}

static void test_every_byte_is_escaped(void **state)
{
	(void)state;
	char all[256], buf[4096];
	for (int i = 0; i < 255; i++)
		all[i] = (char)(i + 1);
	all[255] = '\0';
	bs_log_setup(BS_LOG_INFO, pipefd[1]);
	for (size_t from = 0; from < 255; from += 60) { /* each piece fits a line */
		struct bs_line l;
		bs_line_start(&l);
		bs_line_mem(&l, all + from, from + 60 < 255 ? 60 : 255 - from);
		bs_line_mem(&l, "\0\n\x1b\x7f\xff", 5);
		bs_line_emit(&l, BS_LOG_INFO);
		size_t n = drain(buf, sizeof buf);
		assert_clean_line(buf, n);
		assert_non_null(strstr(buf, "\\x00\\x0a\\x1b\\x7f\\xff\n"));
	}
	struct bs_line l;
	bs_line_start(&l);
	bs_line_str(&l, "a\\b\x1b[31mc\r\ne\xc3\xa9");
	bs_line_emit(&l, BS_LOG_INFO);
	drain(buf, sizeof buf);
	assert_non_null(strstr(buf, "]: a\\\\b\\x1b[31mc\\x0d\\x0ae\\xc3\\xa9\n"));
	/* Escapes near the end of a full line are cut whole. */
	bs_line_start(&l);
	for (int i = 0; i < 200; i++)
		bs_line_str(&l, "\x01\x02");
	bs_line_emit(&l, BS_LOG_INFO);
	size_t n = drain(buf, sizeof buf);
	assert_true(n <= BS_LINE_MAX);
	assert_clean_line(buf, n);
	assert_non_null(strstr(buf, "\\x01\\x02"));
	assert_int_equal(buf[n - 5], '\\');
}

static int reported;

/* A report callback: the library's line for it must be clean. */
static void describe_clean(void *ctx, const char *origin, unsigned line, const char *key,
			   const char *value, const char *why)
{
	(void)ctx;
	char buf[4096];
	struct bs_line l;
	bs_config_describe(&l, origin, line, key, value, why);
	bs_line_emit_fd(&l, pipefd[1]);
	size_t n = drain(buf, sizeof buf);
	assert_clean_line(buf, n);
	assert_non_null(strstr(buf, "\\x1b[2K") ? buf : strstr(buf, "\\x0al"));
	reported++;
}

static void test_config_lines_are_clean(void **state)
{
	(void)state;
	static const char *const nasty[] = {
		"plain", "new\nline", "esc\x1b]0;title\x07", "del\x7f", "utf8 \xc3\xa9",
		"back\\slash", "cr\rlf", "\xff\xfe", "tab\tkey",
	};
	const size_t k = sizeof nasty / sizeof nasty[0];
	char buf[4096];
	bs_log_setup(BS_LOG_INFO, pipefd[1]);
	for (size_t i = 0; i < k; i++)
		for (unsigned line = 0; line < 2; line++) {
			struct bs_line l;
			const char *o = nasty[i], *v = nasty[(i + 1) % k], *w = nasty[(i + 2) % k];
			bs_config_describe(&l, o, line, line ? nasty[(i + 3) % k] : NULL, v, w);
			bs_line_emit_fd(&l, pipefd[1]);
			assert_clean_line(buf, drain(buf, sizeof buf));
			bs_config_describe(&l, o, line, NULL, line ? v : NULL, w); /* [dest], file */
			bs_line_emit_fd(&l, pipefd[1]);
			assert_clean_line(buf, drain(buf, sizeof buf));
		}
	/* The duplicate-section reason quotes the earlier spec and origin. */
	static struct bs_rules rules;
	struct bs_config c;
	bs_config_defaults(&c);
	c.rules = &rules;
	static const char ini[] = "[dest unix:/a\x1b[2Kb]\npolicy = off\n"
				  "[dest unix:/a\x1b[2Kb]\npolicy = off\n";
	reported = 0;
	bs_config_parse_ini(&c, "dir\n/x.ini", ini, sizeof ini - 1, describe_clean, NULL);
	bs_rule_env(&c, "unix:/n\nl=policy:off;unix:/n\nl=policy:off", describe_clean, NULL);
	assert_int_equal(reported, 2);
}

/* --- never blocking: a full target drops the line and counts it --- */

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "log write blocked\n";
	if (write(2, msg, sizeof msg - 1)) {}
	_exit(3);
}

static void wait_line(void)
{
	struct bs_line l;
	bs_line_start(&l);
	bs_line_str(&l, "connect 127.0.0.1:5432: Connection refused (attempt 1), "
			"next attempt in 1.00s");
	bs_line_emit(&l, BS_LOG_INFO);
}

/* Emit until a line is dropped (bounded); returns how many went out. */
static int fill(int fd)
{
	int i;
	bs_log_setup(BS_LOG_INFO, fd);
	for (i = 0; i < 100000 && bs_log_dropped() == 0; i++)
		wait_line();
	return i;
}

static void test_full_pipe_drops_and_counts(void **state)
{
	(void)state;
	int p[2];
	char buf[1 << 16];
	assert_int_equal(pipe(p), 0); /* blocking, as a program's stderr is */
	signal(SIGALRM, on_alarm);
	alarm(10);
	int sent = fill(p[1]);
	assert_true(sent > 10 && sent < 100000);
	for (int i = 0; i < 3; i++) /* more drops while it stays full */
		wait_line();
	alarm(0);
	assert_int_equal(bs_log_dropped(), 4);
	assert_int_equal(fcntl(p[1], F_GETFL) & O_NONBLOCK, 0); /* flags untouched */
	/* Drain, then the next line says how many were lost, and only it. */
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	while (read(p[0], buf, sizeof buf) > 0) {
	}
	struct bs_line l;
	for (int i = 0; i < 2; i++) {
		bs_line_start(&l);
		bs_line_str(&l, "next");
		bs_line_emit(&l, BS_LOG_INFO);
		ssize_t n = read(p[0], buf, sizeof buf - 1);
		assert_true(n > 0);
		buf[n] = '\0';
		assert_clean_line(buf, (size_t)n);
		assert_non_null(strstr(buf, i == 0 ? ": next (4 log lines dropped)\n" : ": next\n"));
		assert_null(strstr(buf, i == 0 ? "next\n" : "dropped"));
	}
	assert_int_equal(bs_log_dropped(), 0);
	/* A full line still gets its whole note. */
	bs_log_setup(BS_LOG_INFO, p[1]);
	fill(p[1]);
	while (read(p[0], buf, sizeof buf) > 0) {
	}
	bs_line_start(&l);
	for (int i = 0; i < 100; i++)
		bs_line_str(&l, "abcdefgh");
	bs_line_emit(&l, BS_LOG_INFO);
	ssize_t n = read(p[0], buf, sizeof buf - 1);
	static const char note[] = " (1 log line dropped)\n";
	assert_int_equal(n, BS_LINE_MAX - 1 + sizeof note - 1);
	buf[n] = '\0';
	assert_string_equal(buf + BS_LINE_MAX - 1, note);
	assert_clean_line(buf, (size_t)n);
	close(p[0]);
	close(p[1]);
}

static void test_full_socket_drops_and_counts(void **state)
{
	(void)state;
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	signal(SIGALRM, on_alarm);
	alarm(10);
	int sent = fill(sv[0]);
	alarm(0);
	assert_true(sent > 10 && sent < 100000);
	assert_int_equal(bs_log_dropped(), 1);
	assert_int_equal(fcntl(sv[0], F_GETFL) & O_NONBLOCK, 0);
	close(sv[0]);
	close(sv[1]);
}

/* --- never SIGPIPE --- */

static volatile sig_atomic_t pipes;

static void on_pipe(int sig)
{
	(void)sig;
	pipes++;
}

static int pipe_pending(void)
{
	sigset_t s;
	sigpending(&s);
	return sigismember(&s, SIGPIPE);
}

static int pipe_blocked(void)
{
	sigset_t s;
	sigprocmask(SIG_BLOCK, NULL, &s);
	return sigismember(&s, SIGPIPE);
}

static void emit_to_dead(int fd)
{
	struct bs_line l;
	bs_log_setup(BS_LOG_INFO, fd);
	bs_line_start(&l);
	bs_line_str(&l, "nobody reads this");
	errno = 0;
	bs_line_emit(&l, BS_LOG_INFO);
	assert_int_equal(errno, 0);
}

static void test_no_sigpipe(void **state)
{
	(void)state;
	struct sigaction sa = {.sa_handler = on_pipe}, old;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, &old);
	int p[2], sv[2];
	assert_int_equal(pipe(p), 0);
	close(p[0]);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	close(sv[1]);

	pipes = 0;
	emit_to_dead(p[1]);
	emit_to_dead(sv[0]);
	assert_int_equal(pipes, 0);
	assert_false(pipe_pending());
	assert_false(pipe_blocked()); /* the mask is as it was */

	/* Blocked by the program: left blocked, and nothing left pending. */
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGPIPE);
	sigprocmask(SIG_BLOCK, &s, NULL);
	emit_to_dead(p[1]);
	assert_true(pipe_blocked());
	assert_false(pipe_pending());
	/* Pending already (the program's own): still pending afterwards. */
	raise(SIGPIPE);
	assert_true(pipe_pending());
	emit_to_dead(p[1]);
	assert_true(pipe_pending());
	sigprocmask(SIG_UNBLOCK, &s, NULL); /* delivered now */
	assert_int_equal(pipes, 1);

	sigaction(SIGPIPE, &old, NULL);
	close(p[1]);
	close(sv[0]);
}

/* --- only the file confirmed at set-up --- */

static void test_fd_unknown_at_setup_is_never_written(void **state)
{
	(void)state;
	char buf[1024];
	int p[2];
	assert_int_equal(pipe(p), 0);
	int fd = p[1];
	close(fd);
	bs_log_setup(BS_LOG_INFO, fd); /* closed now: unknown */
	assert_int_equal(dup2(pipefd[1], fd), fd); /* the number is reused */
	struct bs_line l;
	bs_line_start(&l);
	bs_line_str(&l, "must not arrive");
	bs_line_emit(&l, BS_LOG_INFO);
	assert_int_equal(drain(buf, sizeof buf), 0);
	/* Known at set-up, then replaced: not written either. */
	bs_log_setup(BS_LOG_INFO, fd);
	bs_line_emit(&l, BS_LOG_INFO);
	assert_true(drain(buf, sizeof buf) > 0);
	int q[2];
	assert_int_equal(pipe(q), 0);
	assert_int_equal(dup2(q[1], fd), fd);
	bs_line_emit(&l, BS_LOG_INFO);
	assert_int_equal(read(q[0], buf, 0), 0);
	fcntl(q[0], F_SETFL, O_NONBLOCK);
	assert_true(read(q[0], buf, sizeof buf) < 0);
	close(fd);
	close(p[0]);
	close(q[0]);
	close(q[1]);
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

static char g_file[] = "/tmp/bs_log_file_XXXXXX";
static int g_opens;

static int open_test_file(void *ctx)
{
	assert_ptr_equal(ctx, g_file);
	g_opens++;
	return open(g_file, O_WRONLY | O_APPEND | O_CLOEXEC);
}

static int no_file(void *ctx)
{
	(void)ctx;
	return -1;
}

/* A log file holds no descriptor between lines: the program's next fd
 * number is what it would be without the shim. */
static void test_log_file_is_opened_per_line(void **state)
{
	(void)state;
	int tmp = mkstemp(g_file);
	assert_true(tmp >= 0);
	close(tmp);
	bs_log_setup_file(BS_LOG_INFO, open_test_file, g_file);
	int before = dup(0);
	close(before);
	for (int i = 0; i < 3; i++) {
		struct bs_line l;
		bs_line_start(&l);
		bs_line_str(&l, "line");
		bs_line_emit(&l, BS_LOG_INFO);
	}
	int after = dup(0);
	close(after);
	assert_int_equal(before, after);
	assert_int_equal(g_opens, 3);
	char buf[512] = {0};
	int fd = open(g_file, O_RDONLY);
	assert_true(read(fd, buf, sizeof buf - 1) > 0);
	close(fd);
	int lines = 0;
	for (char *p = buf; (p = strstr(p, "]: line\n")); p++)
		lines++;
	assert_int_equal(lines, 3);
	/* a file that cannot be opened drops the line, counted for the next */
	bs_log_setup_file(BS_LOG_INFO, no_file, NULL);
	struct bs_line l;
	bs_line_start(&l);
	bs_line_str(&l, "lost");
	bs_line_emit(&l, BS_LOG_INFO);
	assert_int_equal(bs_log_dropped(), 1);
	unlink(g_file);
	bs_log_setup(BS_LOG_INFO, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_line_format_and_single_write),
		cmocka_unit_test(test_repeated_lines_are_held_back),
		cmocka_unit_test(test_styles),
		cmocka_unit_test(test_json_cut_short_stays_valid),
		cmocka_unit_test(test_journal_stream_matches_fd2),
		cmocka_unit_test(test_levels_filter),
		cmocka_unit_test(test_long_lines_are_truncated_whole),
		cmocka_unit_test(test_every_byte_is_escaped),
		cmocka_unit_test(test_config_lines_are_clean),
		cmocka_unit_test(test_full_pipe_drops_and_counts),
		cmocka_unit_test(test_full_socket_drops_and_counts),
		cmocka_unit_test(test_no_sigpipe),
		cmocka_unit_test(test_fd_unknown_at_setup_is_never_written),
		cmocka_unit_test(test_errno_untouched),
		cmocka_unit_test(test_log_file_is_opened_per_line),
	};
	return cmocka_run_group_tests_name("log", tests, setup, teardown);
}
