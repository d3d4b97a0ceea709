/*
 * sup/shared: the table the seccomp engine keeps its schedules in: the
 * user's shared table (the one the preloaded library uses, found and
 * checked the same way: shtab.h), so that a Go program and a C program of
 * the same user follow one schedule per destination; or, with
 * `shared = off` or when that table cannot be used, a private one.
 *
 * Promise: the shared table is untrusted input, as in the library: the
 * segment is used only after shtab.h's checks, and every word read from it
 * goes through table.h and attempt.h, which bound what it can make the
 * engine do. The probe the engine takes is backed by the lock file's
 * byte, as the library's are, so the library's waiters see it as held by
 * a live process.
 */
#ifndef BS_SUP_SHARED_H
#define BS_SUP_SHARED_H

#include "table.h"

struct bs_config;

/* The table (never NULL unless out of memory); *shared tells which: 1 the
 * user's, 0 a private one, or BS_SUP_TABLE_LATER: the user's does not
 * exist yet and `create` was 0, so an empty private one serves until the
 * engine first claims an entry, which asks again with `create`. */
#define BS_SUP_TABLE_LATER (-1)
struct bs_table *bs_sup_table(const struct bs_config *cfg, int create, int *shared);

/* Hold the lock byte of e's probe, as the library does (lib/shared.h):
 * a token (>= 0), BS_SUP_BUSY (another process holds it), or -1 (no lock
 * file: the probe word alone decides). */
#define BS_SUP_BUSY (-2)
int bs_sup_hold_probe(struct bs_table *t, const struct bs_entry *e);
void bs_sup_release(int token);

#endif
