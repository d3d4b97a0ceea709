/*
 * resolv: which destinations came from one name resolution, and how far the
 * program has got through them.
 *
 * Promise: atomics only, fixed size, no allocation, no syscalls. A record
 * holds up to BS_RES_KEYS destination keys from one getaddrinfo() result,
 * each untried, in flight, failed or connected. A record is consulted for
 * `horizon` ns after it was made (programs such as CPython free the result
 * before connecting), and the newest record holding a key wins. A record
 * being rewritten while read is detected by its stamp and ignored.
 */
#ifndef BS_RESOLV_H
#define BS_RESOLV_H

#include <stdatomic.h>
#include <stdint.h>

#define BS_RES_RECORDS 64
#define BS_RES_KEYS 16

enum bs_cand { BS_CAND_UNTRIED = 0, BS_CAND_INFLIGHT = 1, BS_CAND_FAILED = 2, BS_CAND_CONNECTED = 3 };

struct bs_res {
	_Atomic uint64_t stamp; /* ns when made; 0 while being written */
	_Atomic uint64_t name;  /* hash of the name resolved (0: unknown) */
	_Atomic uint64_t keys[BS_RES_KEYS];
	_Atomic uint32_t n;
	_Atomic uint32_t cand; /* 2 bits per key */
	_Atomic uint32_t any_port; /* the lookup named no service: its keys
				    * are addresses alone (port 0), and match
				    * a connect to any port (its host key) */
	_Atomic uint64_t lasts;    /* ns it is consulted for, if longer than
				    * the caller's horizon (a learned walk) */
};

struct bs_restab {
	_Atomic uint64_t next;
	struct bs_res rec[BS_RES_RECORDS];
};

/* Remember one resolution (duplicates dropped; at most BS_RES_KEYS kept),
 * naming the host name's hash (for [dest name:port] rules; 0: none).
 * any_port: the lookup named no service (getaddrinfo(host, NULL)), and keys
 * are the addresses with port 0 (bs_addr_host_key). */
void bs_res_add(struct bs_restab *t, const uint64_t *keys, unsigned n, uint64_t now,
		uint64_t name, int any_port);
/* Did a live resolution of that name yield key? */
int bs_res_name_has(struct bs_restab *t, uint64_t name, uint64_t key, uint64_t now,
		    uint64_t horizon);

/* A walk learned from the program itself: it gave up on `from` (a socket
 * whose failure the shim was hiding) and went on to `to`. A record of the
 * two, `from` failed, consulted for `lasts` ns: while `to` has not failed,
 * `from` has an alternative, as if one resolution had named both. */
void bs_res_learn_walk(struct bs_restab *t, uint64_t from, uint64_t to, uint64_t now,
		       uint64_t lasts);

/* Set the candidate state of a destination in its newest live record:
 * key, or its host key (the address with port 0; 0 if unknown) in a
 * record of a lookup that named no service. */
void bs_res_mark(struct bs_restab *t, uint64_t key, uint64_t host, enum bs_cand c, uint64_t now,
		 uint64_t horizon);

/* Does key's newest live record hold another candidate that is untried, in
 * flight or connected? Then a failure of key must not be waited on: the
 * program has somewhere else to go. */
int bs_res_has_alternative(struct bs_restab *t, uint64_t key, uint64_t host, uint64_t now,
			   uint64_t horizon);

#endif
