/*
 * errname: errno values <-> their names ("ECONNREFUSED") and messages.
 *
 * Promise: pure lookups in a constant table; async-signal-safe (unlike
 * strerror). Messages match glibc's wording for the errors listed.
 */
#ifndef BS_ERRNAME_H
#define BS_ERRNAME_H

/* A getaddrinfo() error (EAI_*, negative) as an error code of its own,
 * above every errno, so that the engine, the table and the log carry it
 * like a connect's errno. */
#define BS_ERR_EAI_BASE 4096
#define BS_ERR_EAI(eai) (BS_ERR_EAI_BASE - (eai))
#define BS_ERR_IS_EAI(err) ((err) > BS_ERR_EAI_BASE && (err) < BS_ERR_EAI_BASE + 64)
#define BS_EAI_OF(err) (BS_ERR_EAI_BASE - (err))

/* 0 if name is unknown. Case-sensitive, e.g. "ETIMEDOUT". */
int bs_errno_from_name(const char *name, unsigned len);
/* NULL if unknown. */
const char *bs_errno_name(int err);
/* Never NULL: "Unknown error" for errors outside the table. */
const char *bs_errno_msg(int err);

#endif
