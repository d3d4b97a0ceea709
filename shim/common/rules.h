/*
 * rules: per-destination configuration sections, [dest SPEC] in the INI file
 * or BACKOFFSHIM_DEST_RULES, and which one applies to a destination.
 *
 * Promise: parsing runs at start-up (may use the heap, frees it); matching
 * is pure and allocation-free (the caller supplies how to ask "did this
 * name resolve to this destination?"). SPEC is one of
 *   127.0.0.1:6379   [::1]:6379      exact address and port
 *   10.0.0.0/8       10.0.0.0/8:5432 a prefix, any port or one port
 *   10.1.2.3         [::1]           an address, any port
 *   *:5432                           any address, one port
 *   unix:/run/app.sock               a unix socket path
 *   db.internal:5432                 the addresses that name resolved to
 *   db.internal:*                    the same, any port
 * A name lookup (getaddrinfo, as addr.h's pseudo-address) matches its
 * name's sections, then *:port.
 * The most specific match wins: exact address+port (and unix paths), then
 * a name, then longer prefixes before shorter (with a port before without),
 * then an address with any port, then *:port, then the global [backoff].
 */
#ifndef BS_RULES_H
#define BS_RULES_H

#include <stdint.h>
#include <sys/socket.h>

enum bs_spec_kind { BS_SPEC_EXACT, BS_SPEC_NAME, BS_SPEC_PREFIX, BS_SPEC_ADDR, BS_SPEC_PORT,
		    BS_SPEC_UNIX };

struct bs_spec {
	int kind;
	int family;          /* AF_INET or AF_INET6 (addresses, prefixes) */
	unsigned char addr[16];
	unsigned plen;       /* prefix length in bits */
	unsigned port;       /* 0 = any */
	uint64_t hash;       /* unix path or host name */
};

/* Parse SPEC; 0, or -1 with *why. */
int bs_spec_parse(const char *text, struct bs_spec *s, const char **why);

/* Do two specs name exactly the same destinations? */
int bs_spec_same(const struct bs_spec *a, const struct bs_spec *b);

/* How specifically s matches the destination: -1 if not at all, higher is
 * more specific. name_has(ctx, hash, key) answers name rules; it is asked
 * with the key of the destination's address with port 0. */
typedef int (*bs_name_has_fn)(void *ctx, uint64_t name_hash, uint64_t key);
int bs_spec_score(const struct bs_spec *s, const struct sockaddr *addr, socklen_t len,
		  bs_name_has_fn name_has, void *ctx);

/* The hash used for host names (case-insensitive) and unix paths. */
uint64_t bs_name_hash(const char *name, unsigned len);

#endif
