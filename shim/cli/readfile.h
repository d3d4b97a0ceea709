/*
 * readfile: a bs_config_read_fn (config.h) made of libc calls, for the
 * command and the unit tests (which compile this file in). Not in
 * shim/common: the library must not call its own read() and close()
 * wrappers, and passes its own reader, made of raw system calls,
 * which behaves the same way: opened without blocking (a FIFO would wait
 * for a writer), read only if a regular file, /dev/null read as empty.
 */
#ifndef BS_READFILE_H
#define BS_READFILE_H

#include <stddef.h>

/* ctx is unused. Returns the bytes read (at most cap), or -1 with *why:
 * "cannot open file: ERROR", "not a regular file" or "cannot read file:
 * ERROR" (ERROR: the errno's message, as bs_config_cannot writes it). */
long bs_read_file_libc(void *ctx, const char *path, char *buf, size_t cap, const char **why);

#endif
