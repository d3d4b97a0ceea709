/*
 * resolve: getaddrinfo() for a name that does not resolve yet. With
 * `resolve = temporary` (EAI_AGAIN) or `wait` (EAI_NONAME as well), for
 * the name's [dest NAME:PORT] / [dest NAME:*] section or globally, the
 * lookup is retried on the backoff schedule inside the call's budget, one
 * lookup in flight per name on the host; otherwise it is libc's alone.
 */
#ifndef BS_RESOLVE_H
#define BS_RESOLVE_H

#include "config.h"

#include <netdb.h>

/* getaddrinfo() as the settings say; its result and errno as libc's. */
int bs_resolve(const struct bs_config *cfg, const char *node, const char *svc,
	       const struct addrinfo *hints, struct addrinfo **res);

#endif
