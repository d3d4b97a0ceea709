/* getaddrinfo/freeaddrinfo: remember which destinations one name resolved
 * to, so that a failed connect() to one of them is not waited on while the
 * program still has others to try (see resolv.h). */
#include "addr.h"
#include "clock.h"
#include "real.h"
#include "rules.h"

#include <string.h>
#include "shim.h"

__attribute__((visibility("default"))) int getaddrinfo(const char *node, const char *svc,
						       const struct addrinfo *hints,
						       struct addrinfo **res)
{
	int r = bs_real_getaddrinfo(node, svc, hints, res);
	if (r != 0 || !res || !bs_active())
		return r;
	uint64_t keys[BS_RES_KEYS];
	unsigned n = 0;
	for (const struct addrinfo *ai = *res; ai && n < BS_RES_KEYS; ai = ai->ai_next) {
		if (ai->ai_socktype != SOCK_STREAM && ai->ai_socktype != 0)
			continue;
		uint64_t k = bs_addr_key(ai->ai_addr, ai->ai_addrlen);
		if (k)
			keys[n++] = k;
	}
	/* Names are kept for [dest name:port] rules; otherwise a single
	 * address leaves nowhere else to go and is not worth a record. */
	uint64_t name = node ? bs_name_hash(node, (unsigned)strlen(node)) : 0;
	if (n >= 2 || (n == 1 && node && bs_active()->rules && bs_active()->rules->n))
		bs_res_add_named(bs_res(), keys, n, bs_now(), name);
	return r;
}

int bs_name_has(uint64_t name, uint64_t key)
{
	return bs_res_name_has(bs_res(), name, key, bs_now(), BS_RES_HORIZON);
}

/* Records outlive the result: CPython, for one, frees it before connecting;
 * they expire after BS_RES_HORIZON instead. */
__attribute__((visibility("default"))) void freeaddrinfo(struct addrinfo *res)
{
	bs_real_freeaddrinfo(res);
}
