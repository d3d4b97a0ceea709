/* Unit tests for fdtab.c under threads: four threads each track, set and
 * clear their own fds (fd % 4 == thread) many times over, all starting
 * together on a fresh table each round; then the high-water mark is 1 + the
 * highest fd and every slot holds what its thread last wrote. And readers
 * of a destination that one thread keeps re-tracking (and dup2-copying)
 * never see one destination's key with another's address. */
#include "fdtab_helpers.h"

#include "fdtab.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NTHREADS 4
#define NFDS 800 /* fds 0..799 */
#define ROUNDS 1000
#define REPS 5

static struct bs_fdtab *shared;
static pthread_barrier_t start, done;

static uint64_t key_of(int fd, int rep)
{
	return (uint64_t)fd << 8 | (uint64_t)rep;
}

static void *worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	uintptr_t bad = 0;
	for (int round = 0; round < ROUNDS; round++) {
		pthread_barrier_wait(&start);
		for (int fd = id; fd < NFDS; fd += NTHREADS) {
			struct sockaddr_in a = v4((uint16_t)fd);
			for (int rep = 0; rep < REPS; rep++) {
				bs_fd_track(shared, fd, BS_FD_CONNECTING, key_of(fd, rep),
					    (uint64_t)rep, (uint64_t)rep + 1,
					    (struct sockaddr *)&a, sizeof a);
				bad += bs_fd_state(shared, fd) != BS_FD_CONNECTING;
				bad += atomic_load(&shared->high) < (unsigned)fd + 1;
				bs_fd_set(shared, fd, fd % 2 ? BS_FD_HEALTHY : BS_FD_PROBATION,
					  (uint64_t)rep + 10);
				if (rep % 2)
					bs_fd_clear(shared, fd);
			}
			if (fd % 3 == 0)
				bs_fd_clear(shared, fd);
		}
		pthread_barrier_wait(&done);
	}
	return (void *)bad;
}

static void test_threads(void **state)
{
	(void)state;
	shared = new_tab();
	assert_int_equal(pthread_barrier_init(&start, NULL, NTHREADS + 1), 0);
	assert_int_equal(pthread_barrier_init(&done, NULL, NTHREADS + 1), 0);
	pthread_t th[NTHREADS];
	for (int i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i), 0);
	unsigned wrong = 0;
	for (int round = 0; round < ROUNDS; round++) {
		memset(shared->slots, 0, CAP * sizeof *shared->slots);
		bs_fdtab_init(shared, shared->slots, CAP); /* high back to 0 */
		pthread_barrier_wait(&start);
		pthread_barrier_wait(&done);
		wrong += high(shared) != NFDS;
		for (int fd = 0; fd < (int)CAP; fd++) {
			struct bs_fdslot *s = &shared->slots[fd];
			unsigned want = fd >= NFDS || fd % 3 == 0 ? BS_FD_NONE
					: fd % 2 ? BS_FD_HEALTHY : BS_FD_PROBATION;
			wrong += bs_fd_state(shared, fd) != want;
			if (want == BS_FD_NONE)
				continue;
			struct sockaddr_in a = v4((uint16_t)fd);
			uint64_t k;
			struct sockaddr_storage ss;
			socklen_t l;
			wrong += !bs_fd_read_dest(shared, fd, &k, &ss, &l);
			wrong += k != key_of(fd, REPS - 1);
			wrong += atomic_load(&s->since) != REPS - 1 + 10;
			wrong += atomic_load(&s->call_start) != REPS;
			wrong += l != sizeof a || memcmp(&ss, &a, sizeof a) != 0;
		}
	}
	uintptr_t bad = 0;
	for (int i = 0; i < NTHREADS; i++) {
		void *r;
		assert_int_equal(pthread_join(th[i], &r), 0);
		bad += (uintptr_t)r;
	}
	pthread_barrier_destroy(&start);
	pthread_barrier_destroy(&done);
	free_tab(shared);
	assert_int_equal(bad, 0);
	assert_int_equal(wrong, 0);
}

enum { DEST_WRITES = 200000, DEST_READERS = 2 };
static _Atomic int dest_done;

/* The address that goes with key i: IPv4 for even i, IPv6 for odd (so
 * the length changes too), the port and the last byte from i. */
static socklen_t dest_addr(uint64_t i, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof *ss);
	if (i % 2 == 0) {
		struct sockaddr_in a = v4((uint16_t)i);
		a.sin_addr.s_addr = htonl(0x0a000000u | (uint32_t)(i & 0xffffff));
		memcpy(ss, &a, sizeof a);
		return sizeof a;
	}
	struct sockaddr_in6 a = v6((uint16_t)i);
	memcpy(a.sin6_addr.s6_addr + 8, &i, 8);
	memcpy(ss, &a, sizeof a);
	return sizeof a;
}

static void *dest_writer(void *arg)
{
	(void)arg;
	for (uint64_t i = 1; i <= DEST_WRITES; i++) {
		struct sockaddr_storage ss;
		socklen_t l = dest_addr(i, &ss);
		if (i % 4 == 0) { /* as dup2 would: via another number */
			bs_fd_track(shared, 9, BS_FD_PROBATION, i, i, i, (struct sockaddr *)&ss, l);
			bs_fd_copy(shared, 9, 5);
		} else {
			bs_fd_track(shared, 5, BS_FD_CONNECTING, i, i, i, (struct sockaddr *)&ss, l);
		}
	}
	atomic_store(&dest_done, 1);
	return NULL;
}

struct dest_count {
	unsigned long reads, torn, gave_up;
};

static void *dest_reader(void *arg)
{
	struct dest_count *c = arg;
	while (!atomic_load(&dest_done)) {
		uint64_t k;
		struct sockaddr_storage got, want;
		socklen_t l;
		c->reads++;
		if (!bs_fd_read_dest(shared, 5, &k, &got, &l)) {
			c->gave_up++;
			continue;
		}
		if (k == 0)
			continue; /* not tracked yet */
		socklen_t wl = dest_addr(k, &want);
		c->torn += l != wl || memcmp(&got, &want, wl) != 0;
	}
	return NULL;
}

/* One thread re-tracks fd 5 (and copies fd 9 onto it) with ever new
 * destinations while others read it: every copy read is one destination,
 * its key with its own address and length. */
static void test_threads_consistent_dest(void **state)
{
	(void)state;
	shared = new_tab();
	atomic_store(&dest_done, 0);
	pthread_t w, r[DEST_READERS];
	struct dest_count c[DEST_READERS];
	memset(c, 0, sizeof c);
	for (int i = 0; i < DEST_READERS; i++)
		assert_int_equal(pthread_create(&r[i], NULL, dest_reader, &c[i]), 0);
	assert_int_equal(pthread_create(&w, NULL, dest_writer, NULL), 0);
	pthread_join(w, NULL);
	unsigned long reads = 0, torn = 0, gave_up = 0;
	for (int i = 0; i < DEST_READERS; i++) {
		pthread_join(r[i], NULL);
		reads += c[i].reads, torn += c[i].torn, gave_up += c[i].gave_up;
	}
	free_tab(shared);
	if (torn)
		fail_msg("%lu of %lu reads paired a key with another destination's address "
			 "(%lu gave up)", torn, reads, gave_up);
	assert_true(gave_up < reads); /* the reader does get through */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_threads_consistent_dest),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
