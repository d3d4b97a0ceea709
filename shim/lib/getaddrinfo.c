/* getaddrinfo/freeaddrinfo: a name that does not resolve yet retried
 * where the settings ask (resolve.h); then remember which destinations
 * one name resolved to, so that a failed connect() to one of them is not
 * waited on while the program still has others to try (see resolv.h). */
#include "addr.h"
#include "clock.h"
#include "real.h"
#include "resolve.h"
#include "rules.h"

#include <string.h>
#include "shim.h"

BS_API int getaddrinfo(const char *node, const char *svc, const struct addrinfo *hints,
		       struct addrinfo **res)
{
	const struct bs_config *cfg = bs_active();
	int r = cfg && node && cfg->resolve_any ? bs_resolve(cfg, node, svc, hints, res)
						  : bs_real_getaddrinfo(node, svc, hints, res);
	if (r != 0 || !res || !cfg)
		return r;
	uint64_t keys[BS_RES_KEYS], hosts[BS_RES_KEYS];
	unsigned n = 0;
	for (const struct addrinfo *ai = *res; ai && n < BS_RES_KEYS; ai = ai->ai_next) {
		if ((ai->ai_socktype != SOCK_STREAM && ai->ai_socktype != 0) ||
		    ai->ai_addrlen > sizeof(struct sockaddr_storage))
			continue;
		uint64_t k = bs_addr_key(ai->ai_addr, ai->ai_addrlen);
		if (!k)
			continue;
		hosts[n] = bs_addr_host_key(ai->ai_addr, ai->ai_addrlen);
		keys[n++] = k;
	}
	uint64_t now = bs_now();
	/* a single address leaves nowhere else to go; with no service named,
	 * the program connects each address to a port of its own (libuv) */
	if (n >= 2)
		bs_res_add(bs_res(), svc ? keys : hosts, n, now, 0, !svc);
	if (n && node && cfg->rules && cfg->rules->n) /* for [dest name:port] sections */
		bs_res_add(bs_res(), hosts, n, now, bs_name_hash(node, (unsigned)strlen(node)), 0);
	return r;
}

/* Records outlive the result: CPython, for one, frees it before connecting;
 * they expire after BS_RES_HORIZON instead. */
BS_API void freeaddrinfo(struct addrinfo *res) { bs_real_freeaddrinfo(res); }
