/*
 * errname: errno values <-> their names ("ECONNREFUSED") and messages.
 *
 * Promise: pure lookups in a constant table; async-signal-safe (unlike
 * strerror). Messages match glibc's wording for the errors listed.
 */
#ifndef BS_ERRNAME_H
#define BS_ERRNAME_H

/* 0 if name is unknown. Case-sensitive, e.g. "ETIMEDOUT". */
int bs_errno_from_name(const char *name, unsigned len);
/* NULL if unknown. */
const char *bs_errno_name(int err);
/* Never NULL: "Unknown error" for errors outside the table. */
const char *bs_errno_msg(int err);

#endif
