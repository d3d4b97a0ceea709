/*
 * log: one line per write(2), prefixed "backoffshim[PID]: ".
 *
 * Promise: no stdio, no allocation, no locks; formatting happens in a
 * caller-owned stack buffer and the finished line goes out in a single
 * write(2), so lines from threads and processes never interleave and the
 * whole module is async-signal-safe. errno is left as it was found.
 */
#ifndef BS_LOG_H
#define BS_LOG_H

#include <stddef.h>
#include <stdint.h>

enum bs_level { BS_LOG_OFF = 0, BS_LOG_ERROR = 1, BS_LOG_INFO = 2, BS_LOG_DEBUG = 3 };

#define BS_LINE_MAX 480

struct bs_line {
	size_t n;
	char buf[BS_LINE_MAX];
};

/* Where lines go and which ones. fd < 0 means stderr. */
void bs_log_setup(enum bs_level level, int fd);
int bs_log_enabled(enum bs_level level);

/* Start a line with the "backoffshim[PID]: " prefix. */
void bs_line_start(struct bs_line *l);
void bs_line_str(struct bs_line *l, const char *s);
void bs_line_mem(struct bs_line *l, const char *s, size_t n);
void bs_line_u64(struct bs_line *l, uint64_t v);
/* 2470000000 -> "2.47s", 250000000 -> "250ms". */
void bs_line_dur(struct bs_line *l, uint64_t ns);

/* Finish with '\n' and write to the configured fd (if level is enabled). */
void bs_line_emit(struct bs_line *l, enum bs_level level);
/* Finish and write to a given fd regardless of level (config errors). */
void bs_line_emit_fd(struct bs_line *l, int fd);

#endif
