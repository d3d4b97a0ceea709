/* Helpers shared by test_fdtab.c and test_fdtab_threads.c: a zeroed table
 * of CAP slots on the heap (also as a cmocka setup/teardown pair, so a
 * failing test leaks nothing), IPv4/IPv6 addresses with a given port, and
 * the high-water mark. All static inline. */
#ifndef BS_FDTAB_HELPERS_H
#define BS_FDTAB_HELPERS_H

#include "unit.h"

#include "fdtab.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#define CAP 1024u

/* A zeroed table of CAP slots on the heap; free_tab frees both. */
static inline struct bs_fdtab *new_tab(void)
{
	struct bs_fdtab *t = calloc(1, sizeof *t);
	/* (slots are aligned to their power-of-two size, as mmap gives them) */
	struct bs_fdslot *slots = aligned_alloc(BS_FD_SLOT_SIZE, CAP * sizeof *slots);
	assert_non_null(t);
	assert_non_null(slots);
	memset(slots, 0, CAP * sizeof *slots);
	bs_fdtab_init(t, slots, CAP);
	return t;
}

static inline void free_tab(struct bs_fdtab *t)
{
	free(t->slots);
	free(t);
}

static inline int tab_setup(void **state)
{
	*state = new_tab();
	return 0;
}

static inline int tab_teardown(void **state)
{
	free_tab(*state);
	return 0;
}

static inline struct sockaddr_in v4(uint16_t port)
{
	struct sockaddr_in a;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(0x7f000001);
	return a;
}

static inline struct sockaddr_in6 v6(uint16_t port)
{
	struct sockaddr_in6 a;
	memset(&a, 0, sizeof a);
	a.sin6_family = AF_INET6;
	a.sin6_port = htons(port);
	a.sin6_addr.s6_addr[15] = 1;
	a.sin6_scope_id = 7;
	return a;
}

static inline unsigned high(struct bs_fdtab *t)
{
	return atomic_load(&t->high);
}

#endif
