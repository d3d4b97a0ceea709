/* getaddrinfo/freeaddrinfo: remember which destinations one name resolved
 * to, so that a failed connect() to one of them is not waited on while the
 * program still has others to try (see resolv.h). */
#include "addr.h"
#include "clock.h"
#include "real.h"
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
	if (n >= 2) /* a single address leaves nowhere else to go */
		bs_res_add(bs_res(), keys, n, bs_now());
	return r;
}

/* Records outlive the result: CPython, for one, frees it before connecting;
 * they expire after BS_RES_HORIZON instead. */
__attribute__((visibility("default"))) void freeaddrinfo(struct addrinfo *res)
{
	bs_real_freeaddrinfo(res);
}
