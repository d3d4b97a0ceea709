/* log: async-signal-safe line logger. See log.h.
 *
 * Only raw system calls: never the shim's own wrappers, never a cancellation
 * point, nothing that takes a lock. */
#include "log.h"

#include "clock.h"
#include "errname.h"
#include "units.h"
#include "util.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef RWF_NOWAIT
#define RWF_NOWAIT 0x00000008
#endif

/* How a line is written without blocking or raising SIGPIPE. */
enum kind {
	K_REG,   /* regular file: write(2) cannot stall on a reader */
	K_SOCK,  /* send(MSG_NOSIGNAL | MSG_DONTWAIT) */
	K_FIFO,  /* pipe or FIFO: pwritev2(RWF_NOWAIT), SIGPIPE guarded */
	K_OTHER, /* tty, character device...: poll(POLLOUT, 0) first, SIGPIPE guarded */
};

struct target {
	int fd;
	int known; /* identity recorded: lines may go there */
	enum kind kind;
	dev_t dev;
	ino_t ino;
	_Atomic unsigned long dropped; /* lines lost to a full target, not yet reported */
};

static enum bs_level g_level = BS_LOG_INFO;
static struct target g_out = {.fd = 2}; /* where lines go */
static bs_log_opener g_opener; /* a log file, opened per line */
static void *g_opener_ctx;
static struct bs_log_style g_style;

/* A program's name as lines give it: one printable word, at most n - 1 bytes. */
static void program_word(char *to, size_t n, const char *from)
{
	size_t i = 0;
	for (; from[i] && i < n - 1; i++)
		to[i] = from[i] <= ' ' || from[i] > '~' || from[i] == '"' || from[i] == '\\' ||
				from[i] == ':' ? '_' : from[i];
	to[i] = 0;
}

void bs_log_set_style(const struct bs_log_style *s)
{
	g_style = *s;
	program_word(g_style.program, sizeof g_style.program, s->program);
}

int bs_log_stderr_is_journal(const char *js)
{
	struct stat st;
	unsigned long long dev = 0, ino = 0;
	int seen = 0;
	if (!js)
		return 0;
	for (; *js >= '0' && *js <= '9'; js++, seen = 1)
		dev = dev * 10 + (unsigned)(*js - '0');
	if (!seen || *js++ != ':')
		return 0;
	for (seen = 0; *js >= '0' && *js <= '9'; js++, seen = 1)
		ino = ino * 10 + (unsigned)(*js - '0');
	return seen && !*js && syscall(SYS_fstat, 2, &st) == 0 &&
	       (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

static enum kind kind_of(mode_t m)
{
	return S_ISREG(m) ? K_REG : S_ISSOCK(m) ? K_SOCK : S_ISFIFO(m) ? K_FIFO : K_OTHER;
}

static void record(struct target *t, int fd)
{
	struct stat st;
	t->fd = fd;
	t->known = syscall(SYS_fstat, fd, &st) == 0;
	t->kind = t->known ? kind_of(st.st_mode) : K_OTHER;
	t->dev = t->known ? st.st_dev : 0;
	t->ino = t->known ? st.st_ino : 0;
	atomic_store(&t->dropped, 0);
}

void bs_log_setup_file(enum bs_level level, bs_log_opener open_file, void *ctx)
{
	bs_log_setup(level, -1);
	g_opener_ctx = ctx;
	g_opener = open_file;
}

void bs_log_setup(enum bs_level level, int fd)
{
	int saved = errno;
	g_level = level;
	g_opener = 0;
	record(&g_out, fd >= 0 ? fd : 2);
	errno = saved;
}

/* Still the file we were set up with? Unknown at set-up means never: a
 * program started with fd 2 closed gets that number for its own socket or
 * file. One closed later may have reused it just the same. */
static int same_target(const struct target *t)
{
	struct stat st;
	if (!t->known || syscall(SYS_fstat, t->fd, &st) != 0)
		return 0;
	return st.st_dev == t->dev && st.st_ino == t->ino;
}

int bs_log_enabled(enum bs_level level)
{
	return level != BS_LOG_OFF && level <= g_level;
}

unsigned long bs_log_dropped(void)
{
	return atomic_load(&g_out.dropped);
}

/* --- building: every byte from outside is escaped --- */

static void put_byte(struct bs_line *l, unsigned char c)
{
	static const char hex[] = "0123456789abcdef";
	char e[4] = {'\\', c == '\\' ? '\\' : 'x', hex[c >> 4], hex[c & 15]};
	size_t need = c == '\\' ? 2 : c >= 0x20 && c < 0x7f ? 1 : 4;
	if (need == 1)
		e[0] = (char)c;
	if (l->n + need > BS_LINE_MAX - 1)
		return;
	memcpy(l->buf + l->n, e, need);
	l->n += need;
}

void bs_line_mem(struct bs_line *l, const char *s, size_t n)
{
	for (size_t i = 0; i < n && l->n < BS_LINE_MAX - 1; i++)
		put_byte(l, (unsigned char)s[i]);
}

void bs_line_str(struct bs_line *l, const char *s)
{
	bs_line_mem(l, s, strlen(s));
}

void bs_line_u64(struct bs_line *l, uint64_t v)
{
	char t[20];
	bs_line_mem(l, t, bs_u64_digits(t, v)); /* (digits: nothing to escape) */
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
	bs_line_start_as(l, (uint64_t)getpid(), g_style.program);
}

void bs_line_start_as(struct bs_line *l, uint64_t pid, const char *program)
{
	l->n = 0;
	l->event = "message";
	l->dest[0] = 0;
	l->attempt = 0;
	l->wait = UINT64_MAX;
	l->err = 0;
	l->held_back = 0;
	l->pid = pid;
	program_word(l->program, sizeof l->program, program);
	bs_line_str(l, "backoffshim[");
	bs_line_u64(l, pid);
	bs_line_str(l, "]");
	if (l->program[0]) {
		bs_line_str(l, " ");
		bs_line_str(l, l->program);
	}
	bs_line_str(l, ": ");
	l->msg = l->n;
}

void bs_line_event(struct bs_line *l, const char *event)
{
	l->event = event;
}

void bs_line_fields(struct bs_line *l, const char *dest, uint32_t attempt, uint64_t wait,
		    int err)
{
	size_t i = 0;
	for (; dest && dest[i] && i < sizeof l->dest - 1; i++)
		l->dest[i] = dest[i] < ' ' || dest[i] > '~' ? '?' : dest[i]; /* (escaped when rendered) */
	l->dest[i] = 0;
	l->attempt = attempt;
	l->wait = wait;
	l->err = err;
}

/* --- rendering: the line as the style asks, into out --- */

#define OUT_MAX (BS_LINE_MAX + BS_LINE_TAIL + 512)

struct out {
	size_t n;
	char buf[OUT_MAX];
};

static void out_str(struct out *o, const char *s)
{
	while (*s && o->n < OUT_MAX - 64) /* room kept for the closing bytes */
		o->buf[o->n++] = *s++;
}

static void out_u64(struct out *o, uint64_t v, int width)
{
	char t[20];
	size_t n = bs_u64_digits(t, v);
	for (; width > (int)n; width--)
		out_str(o, "0");
	for (size_t i = 0; i < n && o->n < OUT_MAX - 64; i++)
		o->buf[o->n++] = t[i];
}

/* now as 2026-11-24T16:30:35.123Z (UTC; the civil date from the day count) */
static void out_time(struct out *o)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t secs = ts.tv_sec, days = secs / 86400, rem = secs % 86400;
	if (rem < 0)
		rem += 86400, days--;
	int64_t z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153, d = doy - (153 * mp + 2) / 5 + 1;
	int64_t m = mp < 10 ? mp + 3 : mp - 9, y = yoe + era * 400 + (m <= 2);
	out_u64(o, (uint64_t)y, 4), out_str(o, "-"), out_u64(o, (uint64_t)m, 2);
	out_str(o, "-"), out_u64(o, (uint64_t)d, 2), out_str(o, "T");
	out_u64(o, (uint64_t)(rem / 3600), 2), out_str(o, ":");
	out_u64(o, (uint64_t)(rem / 60 % 60), 2), out_str(o, ":");
	out_u64(o, (uint64_t)(rem % 60), 2), out_str(o, ".");
	out_u64(o, (uint64_t)(ts.tv_nsec / 1000000), 3), out_str(o, "Z");
}

static const char *level_name(enum bs_level level)
{
	return level == BS_LOG_ERROR ? "error" : level == BS_LOG_DEBUG ? "debug" : "info";
}

/* Room a JSON line keeps after its message: the closing quote, the
 * dropped count, '}' and '\n'. */
#define JSON_TAIL 96

/* a JSON string of printable ASCII text (the message, escaped as it was
 * added; a destination): quotes and backslashes are escaped. Cut short
 * where the line is full, the string is still closed. */
static void out_json_text(struct out *o, const char *s, size_t n)
{
	out_str(o, "\"");
	for (size_t i = 0; i < n && o->n < OUT_MAX - JSON_TAIL; i++) {
		if (s[i] == '"' || s[i] == '\\')
			o->buf[o->n++] = '\\';
		o->buf[o->n++] = s[i];
	}
	o->buf[o->n++] = '"';
}

static void render_json(struct out *o, const struct bs_line *l, enum bs_level level)
{
	out_str(o, "{\"time\":\""), out_time(o), out_str(o, "\",\"pid\":");
	out_u64(o, l->pid, 0);
	out_str(o, ",\"program\":\""), out_str(o, l->program), out_str(o, "\"");
	out_str(o, ",\"level\":\""), out_str(o, level_name(level));
	out_str(o, "\",\"event\":\""), out_str(o, l->event), out_str(o, "\"");
	if (l->dest[0])
		out_str(o, ",\"destination\":"), out_json_text(o, l->dest, strlen(l->dest));
	if (l->attempt)
		out_str(o, ",\"attempt\":"), out_u64(o, l->attempt, 0);
	if (l->wait != UINT64_MAX) { /* seconds, rounded to the millisecond as the text is */
		uint64_t ms = l->wait / 1000000ull + (l->wait % 1000000ull >= 500000ull);
		out_str(o, ",\"wait\":"), out_u64(o, ms / 1000, 0);
		out_str(o, "."), out_u64(o, ms % 1000, 3);
	}
	const char *en = l->err > 0 ? bs_errno_name(l->err) : NULL;
	if (en)
		out_str(o, ",\"error\":\""), out_str(o, en), out_str(o, "\"");
	out_str(o, ",\"message\":");
	out_json_text(o, l->buf + l->msg, l->n - l->msg);
}

static void render(struct out *o, const struct bs_line *l, enum bs_level level)
{
	static const char prio[] = {'3', '3', '6', '7'};
	o->n = 0;
	if (g_style.journal) {
		char p[4] = {'<', prio[level & 3], '>', 0};
		out_str(o, p);
	}
	if (g_style.json) {
		render_json(o, l, level);
		return; /* (emit closes the object) */
	}
	if (g_style.time)
		out_time(o), out_str(o, " ");
	for (size_t i = 0; i < l->n && o->n < OUT_MAX - 64; i++)
		o->buf[o->n++] = l->buf[i];
}

/* --- writing: one system call per line, never blocking, no SIGPIPE --- */

typedef uint64_t ksigset; /* the kernel's sigset_t: _NSIG / 8 bytes */

/* Blocks SIGPIPE in this thread around one write; if that write raised it
 * (EPIPE) and it was not pending before, it is consumed, so the program
 * neither dies of nor sees a signal its own code did not cause. */
static long guarded_write(int fd, enum kind kind, const char *buf, size_t n)
{
	const ksigset pipe_bit = 1ull << (SIGPIPE - 1);
	ksigset old = 0, pend = 0;
	int blocked = syscall(SYS_rt_sigprocmask, SIG_BLOCK, &pipe_bit, &old, sizeof old) == 0;
	int was_pending = syscall(SYS_rt_sigpending, &pend, sizeof pend) == 0 && (pend & pipe_bit);
	long r = -1;
	int tried = 0;
	if (kind == K_FIFO) {
		struct iovec v = {(void *)buf, n};
		do /* offset -1: the current position, as write(2) */
			r = syscall(SYS_pwritev2, fd, &v, 1, -1L, -1L, RWF_NOWAIT);
		while (r < 0 && errno == EINTR);
		tried = !(r < 0 && (errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL));
	}
	if (!tried) { /* ttys and the like, and old kernels' pipes */
		struct pollfd p = {fd, POLLOUT, 0};
		struct timespec zero = {0, 0};
		if (syscall(SYS_ppoll, &p, 1, &zero, NULL, 0) == 1 &&
		    (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
			do
				r = syscall(SYS_write, fd, buf, n);
			while (r < 0 && errno == EINTR);
		} else {
			errno = EAGAIN; /* (r is -1: nothing was written) */
		}
	}
	int e = errno;
	if (r < 0 && e == EPIPE && !was_pending) {
		struct timespec zero = {0, 0};
		syscall(SYS_rt_sigtimedwait, &pipe_bit, NULL, &zero, sizeof pipe_bit);
	}
	if (blocked && !(old & pipe_bit))
		syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &pipe_bit, NULL, sizeof pipe_bit);
	errno = e;
	return r;
}

static long put(int fd, enum kind kind, const char *buf, size_t n)
{
	long r;
	if (kind != K_SOCK && kind != K_REG)
		return guarded_write(fd, kind, buf, n);
	do
		r = kind == K_SOCK ? syscall(SYS_sendto, fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT, NULL, 0)
				   : syscall(SYS_write, fd, buf, n);
	while (r < 0 && errno == EINTR);
	return r;
}

/* The rendered line o, with the count of lines dropped before it (in the
 * room kept at its end), to target t. */
static void emit_out(struct target *t, struct out *o, int json)
{
	unsigned long d = atomic_exchange(&t->dropped, 0);
	if (d) {
		out_str(o, json ? ",\"dropped\":" : " (");
		out_u64(o, d, 0);
		if (!json)
			out_str(o, d == 1 ? " log line dropped)" : " log lines dropped)");
	}
	if (json)
		o->buf[o->n++] = '}';
	o->buf[o->n++] = '\n';
	long r = put(t->fd, t->kind, o->buf, o->n);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		atomic_fetch_add(&t->dropped, d + 1);
}

static void emit(struct target *t, struct bs_line *l, enum bs_level level)
{
	struct out o;
	render(&o, l, level);
	emit_out(t, &o, g_style.json);
}

void bs_line_emit_fd(struct bs_line *l, int fd)
{
	int saved = errno;
	struct target t;
	struct out o;
	record(&t, fd);
	memcpy(o.buf, l->buf, l->n); /* the command's own stderr: plain text */
	o.n = l->n;
	emit_out(&t, &o, 0);
	errno = saved;
}

/* One line to the log file, opened for it; the dropped count carries over
 * from line to line. */
static void emit_to_file(struct bs_line *l, enum bs_level level)
{
	struct target t;
	int fd = g_opener(g_opener_ctx);
	if (fd < 0) {
		atomic_fetch_add(&g_out.dropped, 1);
		return;
	}
	record(&t, fd);
	atomic_store(&t.dropped, atomic_exchange(&g_out.dropped, 0));
	emit(&t, l, level);
	atomic_fetch_add(&g_out.dropped, atomic_load(&t.dropped));
	syscall(SYS_close, fd);
}

/* Lines a loop of connects repeats (held_back: a give-up, a pass) go out
 * at most once per REPEAT_GAP for one destination and kind of line; the
 * next one that does says how many were left out. The schedule paces the
 * other lines itself (one per step). Cells by the hash of destination and
 * kind, shared when two hashes meet (then a count may be lost, never a
 * line of a new kind). */
#define REPEAT_CELLS 64
#define REPEAT_GAP (1000 * BS_NS_PER_MS)
static struct {
	_Atomic uint64_t hash, at;
	_Atomic uint32_t left_out;
} g_repeat[REPEAT_CELLS];

/* UINT32_MAX to leave l out; else how many like it were left out. */
static uint32_t repeat_check(const struct bs_line *l)
{
	uint64_t h = 1469598103934665603ull;
	for (const char *c = l->dest; *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211ull;
	for (const char *c = l->event ? l->event : ""; *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211ull;
	h |= 1;
	uint64_t now = bs_now();
	unsigned c = (unsigned)(h % REPEAT_CELLS);
	if (atomic_load(&g_repeat[c].hash) == h && now - atomic_load(&g_repeat[c].at) < REPEAT_GAP) {
		atomic_fetch_add(&g_repeat[c].left_out, 1);
		return UINT32_MAX;
	}
	int same = atomic_exchange(&g_repeat[c].hash, h) == h;
	atomic_store(&g_repeat[c].at, now);
	uint32_t n = atomic_exchange(&g_repeat[c].left_out, 0);
	return same ? n : 0;
}

void bs_line_emit(struct bs_line *l, enum bs_level level)
{
	int saved = errno;
	uint32_t left_out = bs_log_enabled(level) && l->held_back ? repeat_check(l) : 0;
	if (left_out && left_out != UINT32_MAX) {
		bs_line_str(l, " (and ");
		bs_line_u64(l, left_out);
		bs_line_str(l, " more like it left out)");
	}
	if (!bs_log_enabled(level) || left_out == UINT32_MAX)
		;
	else if (g_opener)
		emit_to_file(l, level);
	else if (same_target(&g_out))
		emit(&g_out, l, level);
	errno = saved;
}
