/* Unit tests for table.c under threads: racing failures on one entry (none
 * lost, none counted twice), racing claims of the same keys (one entry per
 * key, each key in one slot), and claims racing with the first failure
 * recorded through them (an entry is never reset once it is visible). */
#include "table_helpers.h"

#include "table.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#define NTHREADS 8

enum { NKEYS = 256, CLAIM_ROUNDS = 8 };

struct claim_race {
	pthread_barrier_t go;
	struct bs_table *t[CLAIM_ROUNDS];
	uint64_t keys[NKEYS];
	struct bs_entry *got[CLAIM_ROUNDS][NTHREADS][NKEYS];
};

struct racer {
	pthread_t th;
	pthread_barrier_t *go;
	struct bs_entry *e;
	unsigned id, wins;
	struct claim_race *race;
};

enum { ROUNDS = 100000 };

static void run_racers(struct racer *r, void *(*fn)(void *))
{
	for (unsigned i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&r[i].th, NULL, fn, &r[i]), 0);
	for (unsigned i = 0; i < NTHREADS; i++)
		pthread_join(r[i].th, NULL);
}

static void *fail_racer(void *arg)
{
	struct racer *r = arg;
	pthread_barrier_wait(r->go);
	for (unsigned i = 0; i < ROUNDS; i++) {
		uint64_t s = atomic_load(&r->e->state);
		uint32_t f = bs_state_failures(s);
		uint64_t next = NOW + (uint64_t)(f + 1) * MS;
		r->wins += (unsigned)bs_entry_fail(r->e, s, NOW, next, f + 1, (int)r->id, NOW);
	}
	return NULL;
}

/* Racing failures on one entry: none lost, none counted twice. */
static void test_threads_fail(void **state)
{
	(void)state;
	struct bs_table *t = new_table();
	struct bs_entry *e = bs_table_claim_as(t, 99, NOW, IDLE, 0, 0, 0);
	assert_non_null(e);
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, NTHREADS);
	struct racer r[NTHREADS];
	for (unsigned i = 0; i < NTHREADS; i++)
		r[i] = (struct racer){.go = &go, .e = e, .id = i + 1};
	run_racers(r, fail_racer);
	pthread_barrier_destroy(&go);
	unsigned total = 0;
	for (unsigned i = 0; i < NTHREADS; i++)
		total += r[i].wins;
	uint64_t s = atomic_load(&e->state);
	assert_true(total >= ROUNDS); /* someone wins every round it runs alone */
	assert_int_equal(bs_state_failures(s), total);
	assert_int_equal(bs_state_next_at(s), NOW + (uint64_t)total * MS);
	free(t);
}

static void *claim_racer(void *arg)
{
	struct racer *r = arg;
	struct claim_race *c = r->race;
	/* Each round starts all threads together on a fresh table and walks the
	 * keys in the same order, so they collide on the same key at once. */
	for (unsigned round = 0; round < CLAIM_ROUNDS; round++) {
		pthread_barrier_wait(&c->go);
		for (unsigned i = 0; i < NKEYS; i++) {
			unsigned j = round & 1 ? NKEYS - 1 - i : i;
			uint64_t key = c->keys[j];
			struct bs_entry *e;
			/* the table's protocol: a slot that does not own the key
			 * after the claim means "look up again" */
			do
				e = bs_table_claim_as(c->t[round], key, NOW, IDLE, 0, 0, 0);
			while (e && !bs_table_owns(c->t[round], e, key));
			c->got[round][r->id][j] = e;
		}
	}
	return NULL;
}

/* Threads claiming the same keys agree on one entry per key, and no key ends
 * up in two slots. Each key has a bucket of its own, so no claim ever needs
 * to reclaim another key's slot: with two keys in one bucket, a thread
 * descheduled while it holds a reservation sends the others to the
 * bucket's other ways, which may then take the second key's (healthy,
 * reclaimable) way, as designed, and the check would fail. */
static void test_threads_claim(void **state)
{
	(void)state;
	struct claim_race *c = calloc(1, sizeof *c);
	assert_non_null(c);
	static unsigned char taken[BS_TABLE_BUCKETS];
	for (unsigned j = 0, i = 1000; j < NKEYS; i++) {
		unsigned b = bs_table_bucket(nth_key(i));
		if (!taken[b]) {
			taken[b] = 1;
			c->keys[j++] = nth_key(i);
		}
	}
	for (unsigned round = 0; round < CLAIM_ROUNDS; round++)
		c->t[round] = new_table();

	pthread_barrier_init(&c->go, NULL, NTHREADS);
	struct racer r[NTHREADS];
	for (unsigned i = 0; i < NTHREADS; i++)
		r[i] = (struct racer){.id = i, .race = c};
	run_racers(r, claim_racer);
	pthread_barrier_destroy(&c->go);

	for (unsigned round = 0; round < CLAIM_ROUNDS; round++) {
		struct bs_table *t = c->t[round];
		for (unsigned j = 0; j < NKEYS; j++) {
			struct bs_entry *e = bs_table_find(t, c->keys[j]);
			if (!e)
				fail_msg("round %u key %u: not found (%u copies, got %p)", round, j,
					 copies(t, c->keys[j]), (void *)c->got[round][0][j]);
			for (unsigned i = 0; i < NTHREADS; i++)
				assert_ptr_equal(c->got[round][i][j], e);
			unsigned n = copies(t, c->keys[j]);
			if (n != 1)
				fail_msg("round %u key %u: in %u slots", round, j, n);
		}
		free(t);
	}
	free(c);
}

enum { FRESH_KEYS = 512, FRESH_ROUNDS = 24 };

struct fresh_race {
	pthread_barrier_t go;
	struct bs_table *t;
	_Atomic unsigned wins[FRESH_KEYS];
};

static struct fresh_race *g_fresh;

static void *fresh_racer(void *arg)
{
	(void)arg;
	struct fresh_race *c = g_fresh;
	for (unsigned round = 0; round < FRESH_ROUNDS; round++) {
		pthread_barrier_wait(&c->go); /* the table is fresh */
		for (unsigned i = 0; i < FRESH_KEYS; i++) {
			uint64_t key = 5000 + i;
			struct bs_entry *e;
			do
				e = bs_table_claim_as(c->t, key, NOW, IDLE, 0, 0, 0);
			while (e && !bs_table_owns(c->t, e, key));
			/* "attempt 1": only one thread may move the new entry
			 * from healthy to one failure */
			if (e && bs_entry_fail(e, 0, NOW, NOW + SEC, 1, ECONNREFUSED, NOW))
				atomic_fetch_add(&c->wins[i], 1);
		}
		pthread_barrier_wait(&c->go); /* the main thread checks */
	}
	return NULL;
}

/* Eight threads start together on destinations nobody has seen: each
 * claims the entry and records the first failure through it. Exactly one
 * records "attempt 1" per destination, and that record survives: a claimer
 * never resets an entry another thread can already see. */
static void test_threads_claim_then_fail(void **state)
{
	(void)state;
	struct fresh_race *c = calloc(1, sizeof *c);
	assert_non_null(c);
	g_fresh = c;
	pthread_barrier_init(&c->go, NULL, NTHREADS + 1);
	pthread_t th[NTHREADS];
	for (unsigned i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, fresh_racer, NULL), 0);
	unsigned twice = 0, wiped = 0, missing = 0;
	for (unsigned round = 0; round < FRESH_ROUNDS; round++) {
		c->t = new_table();
		for (unsigned i = 0; i < FRESH_KEYS; i++)
			atomic_store(&c->wins[i], 0);
		pthread_barrier_wait(&c->go);
		pthread_barrier_wait(&c->go);
		for (unsigned i = 0; i < FRESH_KEYS; i++) {
			struct bs_entry *e = bs_table_find(c->t, 5000 + i);
			missing += !e;
			twice += atomic_load(&c->wins[i]) > 1;
			wiped += e && bs_state_failures(atomic_load(&e->state)) != 1;
		}
		free(c->t);
	}
	for (unsigned i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&c->go);
	free(c);
	if (twice || wiped || missing)
		fail_msg("%u destinations failed twice from healthy, %u failure records "
			 "wiped, %u missing", twice, wiped, missing);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads_fail),
		cmocka_unit_test(test_threads_claim),
		cmocka_unit_test(test_threads_claim_then_fail),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
