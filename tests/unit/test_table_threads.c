/* Unit tests for table.c under threads: racing failures on one entry (none
 * lost, none counted twice) and racing claims of the same keys (one entry
 * per key, each key in one slot of its own bucket). */
#include "table_helpers.h"

#include "table.h"

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
		r->wins += (unsigned)bs_entry_fail(r->e, s, next, f + 1, (int)r->id, NOW);
	}
	return NULL;
}

/* Racing failures on one entry: none lost, none counted twice. */
static void test_threads_fail(void **state)
{
	(void)state;
	struct bs_table *t = new_table();
	struct bs_entry *e = bs_table_claim(t, 99, NOW, IDLE);
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
				e = bs_table_claim(c->t[round], key, NOW, IDLE);
			while (e && !bs_table_owns(c->t[round], e, key));
			c->got[round][r->id][j] = e;
		}
	}
	return NULL;
}

/* Threads claiming the same keys agree on one entry per key, and no key ends
 * up in two slots. The keys sit in distinct buckets, so no claim ever needs
 * to reclaim another key's slot. */
static void test_threads_claim(void **state)
{
	(void)state;
	struct claim_race *c = calloc(1, sizeof *c);
	assert_non_null(c);
	pick_keys(c->keys, NKEYS, 1000, 0);
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
			assert_non_null(e);
			for (unsigned i = 0; i < NTHREADS; i++)
				assert_ptr_equal(c->got[round][i][j], e);
			/* a key only ever lives in its own bucket */
			size_t b = slot_of(t, e) / BS_TABLE_WAYS * BS_TABLE_WAYS;
			unsigned copies = 0;
			for (size_t s = b; s < b + BS_TABLE_WAYS; s++)
				copies += atomic_load(&t->keys[s]) == c->keys[j];
			if (copies != 1)
				fail_msg("round %u key %u: in %u slots", round, j, copies);
		}
		free(t);
	}
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads_fail),
		cmocka_unit_test(test_threads_claim),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
