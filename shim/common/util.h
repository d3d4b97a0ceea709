/*
 * util: small helpers for shim/common and its callers: the element count of
 * an array, the smaller of two numbers, a number's decimal digits, a
 * path's directory.
 */
#ifndef BS_UTIL_H
#define BS_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define BS_ARRAY_SIZE(a) (sizeof (a) / sizeof (a)[0])

static inline uint64_t bs_min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* v's decimal digits into p (at most 20; no NUL); returns how many. No
 * library call, so async-signal-safe. */
static inline size_t bs_u64_digits(char *p, uint64_t v)
{
	size_t n = 1;
	for (uint64_t w = v; w >= 10; w /= 10)
		n++;
	for (size_t i = n; i > 0; v /= 10)
		p[--i] = (char)('0' + v % 10);
	return n;
}

/* The directory of path into dir (cap bytes, at least 2): "." for a bare
 * name, "/" for a file in the root; cut to fit. No system call. */
static inline void bs_path_dir(const char *path, char *dir, size_t cap)
{
	const char *slash = strrchr(path, '/');
	size_t n = !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
	if (n >= cap)
		n = cap - 1;
	if (n)
		memcpy(dir, path, n);
	else
		dir[n++] = '.';
	dir[n] = '\0';
}

#endif
