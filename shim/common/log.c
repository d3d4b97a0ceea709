/* log: async-signal-safe line logger. See log.h. */
#include "log.h"

#include <errno.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static enum bs_level g_level = BS_LOG_INFO;
static int g_fd = -1;
static dev_t g_dev;
static ino_t g_ino;
static int g_known; /* the target's identity was recorded */

void bs_log_setup(enum bs_level level, int fd)
{
	struct stat st;
	g_level = level;
	g_fd = fd;
	g_known = fstat(fd >= 0 ? fd : 2, &st) == 0;
	if (g_known) {
		g_dev = st.st_dev;
		g_ino = st.st_ino;
	}
}

/* Still the file we were set up with? A program that closed stderr may have
 * reused fd 2 for a socket of its own: a log line must never land there. */
static int same_target(int fd)
{
	struct stat st;
	if (!g_known || syscall(SYS_fstat, fd, &st) != 0)
		return !g_known;
	return st.st_dev == g_dev && st.st_ino == g_ino;
}

int bs_log_enabled(enum bs_level level)
{
	return level != BS_LOG_OFF && level <= g_level;
}

void bs_line_mem(struct bs_line *l, const char *s, size_t n)
{
	for (size_t i = 0; i < n && l->n < BS_LINE_MAX - 1; i++)
		l->buf[l->n++] = s[i];
}

void bs_line_str(struct bs_line *l, const char *s)
{
	while (*s && l->n < BS_LINE_MAX - 1)
		l->buf[l->n++] = *s++;
}

void bs_line_u64(struct bs_line *l, uint64_t v)
{
	char t[24];
	size_t i = 0;
	do {
		t[i++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (i && l->n < BS_LINE_MAX - 1)
		l->buf[l->n++] = t[--i];
}

void bs_line_dur(struct bs_line *l, uint64_t ns)
{
	if (ns < 999500000ull) {
		bs_line_u64(l, (ns + 500000) / 1000000);
		bs_line_str(l, "ms");
		return;
	}
	uint64_t cs = (ns + 5000000) / 10000000; /* centiseconds, rounded */
	bs_line_u64(l, cs / 100);
	bs_line_str(l, ".");
	bs_line_u64(l, cs / 10 % 10);
	bs_line_u64(l, cs % 10);
	bs_line_str(l, "s");
}

void bs_line_start(struct bs_line *l)
{
	l->n = 0;
	bs_line_str(l, "backoffshim[");
	bs_line_u64(l, (uint64_t)getpid());
	bs_line_str(l, "]: ");
}

void bs_line_emit_fd(struct bs_line *l, int fd)
{
	int saved = errno;
	l->buf[l->n++] = '\n'; /* room is always kept for it */
	long r;
	do /* the raw call: never the shim's own write() wrapper */
		r = syscall(SYS_write, fd, l->buf, l->n);
	while (r < 0 && errno == EINTR);
	l->n--;
	errno = saved;
}

void bs_line_emit(struct bs_line *l, enum bs_level level)
{
	int fd = g_fd >= 0 ? g_fd : 2;
	if (bs_log_enabled(level) && same_target(fd))
		bs_line_emit_fd(l, fd);
}
