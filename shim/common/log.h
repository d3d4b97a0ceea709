/*
 * log: one line per write(2), prefixed "backoffshim[PID] PROGRAM: " (and,
 * as the style asks, an ISO-8601 UTC time and the journal's "<N>" priority),
 * or one JSON object per line.
 *
 * Promise: no stdio, no allocation, no locks; formatting happens in a
 * caller-owned stack buffer and the finished line goes out in a single
 * write-type system call, so lines from threads and processes never
 * interleave and the whole module is async-signal-safe. errno is left as it
 * was found.
 *
 * Text is escaped as it is added: bytes below 0x20, 0x7f and bytes >= 0x80
 * become \xHH and a backslash becomes \\, so a line holds only printable
 * ASCII and ends with its one '\n' whatever a file name, spec or value
 * contained.
 *
 * Writing never harms the program: nothing is written to an fd whose
 * identity (device and inode) was not recorded by bs_log_setup() or has
 * changed since; a write never blocks (a full pipe or socket drops the line,
 * and the next line that gets through says how many were dropped); it never
 * raises SIGPIPE (MSG_NOSIGNAL on sockets; elsewhere SIGPIPE is blocked in
 * the calling thread for the write and one it caused is consumed); the
 * fd's flags are never changed.
 */
#ifndef BS_LOG_H
#define BS_LOG_H

#include <stddef.h>
#include <stdint.h>

enum bs_level { BS_LOG_OFF = 0, BS_LOG_ERROR = 1, BS_LOG_INFO = 2, BS_LOG_DEBUG = 3 };

#define BS_LINE_MAX 480  /* a line's text and '\n', before the dropped note */
#define BS_LINE_TAIL 48  /* room for " (N log lines dropped)" */

struct bs_line {
	size_t n;
	size_t msg;         /* where the message starts (after the prefix) */
	const char *event;  /* JSON fields, set by bs_line_event/_fields */
	char dest[128];     /* as bs_addr_format writes it (a unix path fits) */
	uint32_t attempt;
	uint64_t wait;      /* ns, or UINT64_MAX for none */
	int err;
	int held_back;      /* a kind of line a loop of connects repeats (a give-up,
			     * a pass): one per destination and kind a second */
	uint64_t pid;       /* the process the line speaks for, and its name */
	char program[33];
	char buf[BS_LINE_MAX + BS_LINE_TAIL];
};

/* How lines look (bs_log_set_style): all off by default. */
struct bs_log_style {
	int time;        /* an ISO-8601 UTC time with milliseconds first */
	int json;        /* one JSON object per line instead of text */
	int journal;     /* "<N>" priority first: stderr is the journal */
	char program[33]; /* the program's name ("" for none); printable */
};
void bs_log_set_style(const struct bs_log_style *s);
/* Is fd 2 the journal's stream? JOURNAL_STREAM ("DEV:INO", the caller
 * reads the variable) against fd 2's identity. */
int bs_log_stderr_is_journal(const char *journal_stream);

/* Lines go to a file opened for each line by open_file(ctx) (the caller's
 * I/O: it returns an fd above 2, or -1 to drop the line) and closed after
 * it, so that no descriptor is held between lines. ctx is kept until the
 * next setup. */
typedef int (*bs_log_opener)(void *ctx);
void bs_log_setup_file(enum bs_level level, bs_log_opener open_file, void *ctx);

/* Where lines go and which ones. fd < 0 means stderr. Records the identity
 * of that fd as it is now: later writes go only to the same file (a closed
 * fd whose number was reused is never written to). */
void bs_log_setup(enum bs_level level, int fd);
int bs_log_enabled(enum bs_level level);
/* Lines dropped (target full) and not yet reported. */
unsigned long bs_log_dropped(void);

/* Start a line with the "backoffshim[PID] PROGRAM: " prefix. */
void bs_line_start(struct bs_line *l);
/* The same, for another process (the seccomp supervisor speaking for the
 * program whose connect it retries): its pid and name, made one printable
 * word as bs_log_set_style makes the program's. */
void bs_line_start_as(struct bs_line *l, uint64_t pid, const char *program);
/* The line's event and fields, for the JSON format ("retry", "give_up",
 * "connected", "reset", "config", "table", "load", "pass"...); dest may be
 * NULL, attempt 0, wait UINT64_MAX and err 0 for none. */
void bs_line_event(struct bs_line *l, const char *event);
void bs_line_fields(struct bs_line *l, const char *dest, uint32_t attempt, uint64_t wait,
		    int err);
/* Text from anywhere, escaped (see above); a line is cut at BS_LINE_MAX. */
void bs_line_str(struct bs_line *l, const char *s);
void bs_line_mem(struct bs_line *l, const char *s, size_t n);
void bs_line_u64(struct bs_line *l, uint64_t v);
/* 2470000000 -> "2.47s", 250000000 -> "250ms". */
void bs_line_dur(struct bs_line *l, uint64_t ns);

/* Finish with '\n' and write to the configured fd (if level is enabled). */
void bs_line_emit(struct bs_line *l, enum bs_level level);
/* Finish and write to a given fd regardless of level and identity (the
 * command's own stderr); still never blocks and never raises SIGPIPE. */
void bs_line_emit_fd(struct bs_line *l, int fd);

#endif
