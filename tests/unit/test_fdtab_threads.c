/* Unit test for fdtab.c under threads: four threads each track, set and
 * clear their own fds (fd % 4 == thread) many times over, all starting
 * together on a fresh table each round; then the high-water mark is 1 + the
 * highest fd and every slot holds what its thread last wrote. */
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
			wrong += atomic_load(&s->key) != key_of(fd, REPS - 1);
			wrong += atomic_load(&s->since) != REPS - 1 + 10;
			wrong += atomic_load(&s->call_start) != REPS;
			wrong += s->addrlen != sizeof a || memcmp(s->addr, &a, sizeof a) != 0;
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
