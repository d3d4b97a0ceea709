/* Unit tests for resolv.c: alternatives within one record as candidates are
 * marked, single-key records and unknown keys, duplicate and zero keys,
 * truncation at BS_RES_KEYS, the horizon, the newest record winning, and
 * the ring wrapping around. */
#include "unit.h"
#include "unit_time.h"

#include "policy.h"
#include "resolv.h"

#include <stdlib.h>
#include <string.h>

#define NOW (1000 * SEC)
#define HORIZON (10 * SEC)
#define A 0xa1a1ull
#define B 0xb2b2ull
#define C 0xc3c3ull
#define D 0xd4d4ull

/* Each test gets a zeroed table as its state, freed even if it fails. */
static int setup(void **state)
{
	*state = calloc(1, sizeof(struct bs_restab));
	return *state ? 0 : -1;
}

static int teardown(void **state)
{
	free(*state);
	return 0;
}

#define ADD(t, now, ...)                                                       \
	do {                                                                   \
		static const uint64_t k_[] = {__VA_ARGS__};                    \
		bs_res_add((t), k_, sizeof k_ / sizeof k_[0], (now), 0, 0);    \
	} while (0)

static int alt(struct bs_restab *t, uint64_t key)
{
	return bs_res_has_alternative(t, key, 0, NOW, HORIZON);
}

static void mark(struct bs_restab *t, uint64_t key, enum bs_cand c)
{
	bs_res_mark(t, key, 0, c, NOW, HORIZON);
}

/* The record the latest bs_res_add wrote. */
static struct bs_res *last(struct bs_restab *t)
{
	return &t->rec[(atomic_load(&t->next) - 1) % BS_RES_RECORDS];
}

static void expect_keys(const struct bs_res *r, const uint64_t *want, unsigned n)
{
	assert_int_equal(atomic_load(&r->n), n);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(atomic_load(&r->keys[i]), want[i]);
}

static void test_two_keys(void **state)
{
	struct bs_restab *t = *state;
	ADD(t, NOW, A, B);
	/* both untried */
	assert_true(alt(t, A));
	assert_true(alt(t, B));
	mark(t, A, BS_CAND_INFLIGHT);
	assert_true(alt(t, B)); /* A in flight is somewhere to go */
	mark(t, A, BS_CAND_FAILED);
	assert_false(alt(t, B));
	static const enum bs_cand live[] = {BS_CAND_UNTRIED, BS_CAND_INFLIGHT,
					    BS_CAND_CONNECTED};
	for (size_t i = 0; i < sizeof live / sizeof live[0]; i++) {
		mark(t, B, live[i]);
		if (!alt(t, A))
			fail_msg("B in state %d is no alternative", (int)live[i]);
	}
	mark(t, B, BS_CAND_FAILED);
	assert_false(alt(t, A));
	assert_false(alt(t, B));
	/* A back in play (e.g. connected meanwhile): B has somewhere to go */
	mark(t, A, BS_CAND_CONNECTED);
	assert_true(alt(t, B));
	assert_false(alt(t, A));
}

static void test_single_and_unknown(void **state)
{
	struct bs_restab *t = *state;
	assert_false(alt(t, A)); /* empty table */
	ADD(t, NOW, A);
	assert_false(alt(t, A));
	static const enum bs_cand all[] = {BS_CAND_UNTRIED, BS_CAND_INFLIGHT, BS_CAND_FAILED,
					   BS_CAND_CONNECTED};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
		mark(t, A, all[i]);
		assert_false(alt(t, A));
	}
	ADD(t, NOW + MS, B, C);
	assert_false(alt(t, D));
	assert_false(alt(t, 0));
	/* marking an unknown key changes nothing */
	static struct bs_restab copy;
	memcpy(&copy, t, sizeof *t);
	bs_res_mark(t, D, 0, BS_CAND_FAILED, NOW, HORIZON);
	bs_res_mark(t, 0, 0, BS_CAND_FAILED, NOW, HORIZON);
	assert_memory_equal(&copy, t, sizeof *t);
}

static void test_duplicates_and_zeros(void **state)
{
	struct bs_restab *t = *state;
	ADD(t, NOW, A, A, B);
	expect_keys(last(t), (const uint64_t[]){A, B}, 2);
	mark(t, B, BS_CAND_FAILED);
	assert_false(alt(t, A)); /* the second A is not an alternative */

	ADD(t, NOW + MS, C, D, C, D, C);
	expect_keys(last(t), (const uint64_t[]){C, D}, 2);

	ADD(t, NOW + 2 * MS, 0, A, 0, B, 0);
	expect_keys(last(t), (const uint64_t[]){A, B}, 2);
	assert_true(alt(t, A));
	assert_false(alt(t, 0));
	mark(t, B, BS_CAND_FAILED);
	assert_false(alt(t, A));

	ADD(t, NOW + 3 * MS, 0, 0);
	assert_int_equal(atomic_load(&last(t)->n), 0);
	bs_res_add(t, NULL, 0, NOW + 4 * MS, 0, 0);
	assert_int_equal(atomic_load(&last(t)->n), 0);
	assert_false(alt(t, 0));
}

static void test_truncated(void **state)
{
	struct bs_restab *t = *state;
	uint64_t k[BS_RES_KEYS + 4];
	for (unsigned i = 0; i < sizeof k / sizeof k[0]; i++)
		k[i] = 0x100 + i;
	bs_res_add(t, k, sizeof k / sizeof k[0], NOW, 0, 0);
	expect_keys(last(t), k, BS_RES_KEYS);
	for (unsigned i = BS_RES_KEYS; i < sizeof k / sizeof k[0]; i++)
		assert_false(alt(t, k[i])); /* not kept */
	/* every kept key has a state of its own */
	for (unsigned i = 0; i + 1 < BS_RES_KEYS; i++)
		mark(t, k[i], BS_CAND_FAILED);
	assert_true(alt(t, k[0]));
	assert_false(alt(t, k[BS_RES_KEYS - 1]));
	mark(t, k[BS_RES_KEYS - 1], BS_CAND_CONNECTED);
	assert_true(alt(t, k[BS_RES_KEYS - 2]));
	mark(t, k[BS_RES_KEYS - 1], BS_CAND_FAILED);
	assert_false(alt(t, k[0]));

	/* dropped duplicates and zeros do not use up room */
	uint64_t m[3 * BS_RES_KEYS];
	unsigned n = 0;
	for (unsigned i = 0; i < BS_RES_KEYS; i++) {
		m[n++] = 0x200 + i;
		m[n++] = 0x200;
		m[n++] = 0;
	}
	bs_res_add(t, m, n, NOW + MS, 0, 0);
	assert_int_equal(atomic_load(&last(t)->n), BS_RES_KEYS);
	assert_int_equal(atomic_load(&last(t)->keys[BS_RES_KEYS - 1]),
			 0x200 + BS_RES_KEYS - 1);
}

static void test_horizon(void **state)
{
	struct bs_restab *t = *state;
	ADD(t, NOW, A, B);
	bs_res_mark(t, A, 0, BS_CAND_FAILED, NOW, HORIZON);
	assert_true(bs_res_has_alternative(t, A, 0, NOW + HORIZON, HORIZON));
	assert_false(bs_res_has_alternative(t, A, 0, NOW + HORIZON + 1, HORIZON));
	assert_false(bs_res_has_alternative(t, A, 0, NOW + 3600 * SEC, HORIZON));
	/* a clock behind the record's stamp still sees it */
	assert_true(bs_res_has_alternative(t, A, 0, NOW - SEC, HORIZON));
	/* a mark past the horizon goes nowhere */
	bs_res_mark(t, B, 0, BS_CAND_FAILED, NOW + HORIZON + 1, HORIZON);
	assert_true(bs_res_has_alternative(t, A, 0, NOW, HORIZON));
	bs_res_mark(t, B, 0, BS_CAND_FAILED, NOW + HORIZON, HORIZON);
	assert_false(bs_res_has_alternative(t, A, 0, NOW, HORIZON));
	/* horizon 0: only at the very instant */
	ADD(t, NOW + SEC, C, D);
	assert_true(bs_res_has_alternative(t, C, 0, NOW + SEC, 0));
	assert_false(bs_res_has_alternative(t, C, 0, NOW + SEC + 1, 0));

}

static void test_newest_wins(void **state)
{
	struct bs_restab *t = *state;
	ADD(t, NOW, A, B);
	ADD(t, NOW + MS, A, C);
	bs_res_mark(t, A, 0, BS_CAND_FAILED, NOW + 2 * MS, HORIZON);
	assert_true(bs_res_has_alternative(t, A, 0, NOW + 2 * MS, HORIZON));
	bs_res_mark(t, C, 0, BS_CAND_FAILED, NOW + 2 * MS, HORIZON);
	/* B is untried, but only in the older record */
	assert_false(bs_res_has_alternative(t, A, 0, NOW + 2 * MS, HORIZON));
	/* the mark went to the newest only: in the older record A is untried */
	assert_true(bs_res_has_alternative(t, B, 0, NOW + 2 * MS, HORIZON));

	/* a newer record with A alone answers for A, though an older one
	 * still offers B (and B's record is still live) */
	ADD(t, NOW + 3 * SEC, A);
	assert_false(bs_res_has_alternative(t, A, 0, NOW + 3 * SEC, HORIZON));
	assert_true(bs_res_has_alternative(t, B, 0, NOW + 3 * SEC, HORIZON));
}

/* A lookup that named no service (getaddrinfo(host, NULL)) holds host keys:
 * a connect to any port of its addresses matches by its host key, and
 * never by its full key; a record with a service never matches a host key. */
static void test_any_port(void **state)
{
	struct bs_restab *t = *state;
	const uint64_t hosts[] = {0x1001, 0x1002};
	bs_res_add(t, hosts, 2, NOW, 0, 1);
	const uint64_t k1 = 0x5551001; /* the first address at some port */
	assert_true(bs_res_has_alternative(t, k1, 0x1001, NOW, HORIZON));
	assert_false(bs_res_has_alternative(t, k1, 0, NOW, HORIZON)); /* host unknown */
	assert_false(bs_res_has_alternative(t, 0x1001, 0x9999, NOW, HORIZON));
	bs_res_mark(t, 0x7772, 0x1002, BS_CAND_FAILED, NOW, HORIZON);
	assert_false(bs_res_has_alternative(t, k1, 0x1001, NOW, HORIZON)); /* the other failed */
	ADD(t, NOW + MS, 0x2001, 0x2002);
	assert_false(bs_res_has_alternative(t, 0x3333, 0x2001, NOW + MS, HORIZON));
	assert_true(bs_res_has_alternative(t, 0x2001, 0, NOW + MS, HORIZON));
}

static void test_ring_wraps(void **state)
{
	struct bs_restab *t = *state;
	const unsigned total = BS_RES_RECORDS + 5;
	for (unsigned i = 0; i < total; i++) {
		uint64_t k[2] = {A, 0x1000 + i};
		bs_res_add(t, k, 2, NOW + i * MS, 0, 0);
		/* the first lap's second candidates fail: a reused slot must
		 * not inherit that */
		if (i < BS_RES_RECORDS)
			bs_res_mark(t, 0x1000 + i, 0, BS_CAND_FAILED, NOW + i * MS, HORIZON);
	}
	const uint64_t now = NOW + total * MS, newest = 0x1000 + total - 1;
	/* the newest sits at slot 4, below older records in slots 5..63 */
	assert_int_equal(atomic_load(&t->rec[(total - 1) % BS_RES_RECORDS].keys[1]), newest);
	assert_true(bs_res_has_alternative(t, A, 0, now, HORIZON));
	bs_res_mark(t, A, 0, BS_CAND_FAILED, now, HORIZON);
	assert_true(bs_res_has_alternative(t, A, 0, now, HORIZON));
	bs_res_mark(t, newest, 0, BS_CAND_FAILED, now, HORIZON);
	assert_false(bs_res_has_alternative(t, A, 0, now, HORIZON));
	/* the five oldest were overwritten; the sixth is still there */
	for (unsigned i = 0; i < 5; i++)
		assert_false(bs_res_has_alternative(t, 0x1000 + i, 0, now, HORIZON));
	assert_true(bs_res_has_alternative(t, 0x1000 + 5, 0, now, HORIZON));
}

/* A learned walk: the address left has an alternative for `lasts`, past
 * the callers' horizon, while the one it went on to has not failed. */
static void test_learned_walk(void **state)
{
	struct bs_restab *t = *state;
	bs_res_learn_walk(t, A, B, NOW, 600 * SEC);
	assert_true(bs_res_has_alternative(t, A, 0, NOW + 1, HORIZON));
	assert_true(bs_res_has_alternative(t, A, 0, NOW + 300 * SEC, HORIZON));
	assert_false(bs_res_has_alternative(t, A, 0, NOW + 601 * SEC, HORIZON));
	/* B's alternative, A, has failed: B's failures are waited on */
	assert_false(bs_res_has_alternative(t, B, 0, NOW + 1, HORIZON));
	/* once B fails too, A has nowhere to go either */
	bs_res_mark(t, B, 0, BS_CAND_FAILED, NOW + 2, HORIZON);
	assert_false(bs_res_has_alternative(t, A, 0, NOW + 3, HORIZON));
	/* a new walk learns it again; an ordinary record keeps its horizon */
	bs_res_learn_walk(t, A, B, NOW + 4, 600 * SEC);
	assert_true(bs_res_has_alternative(t, A, 0, NOW + 5, HORIZON));
	uint64_t keys[2] = {C, D};
	bs_res_add(t, keys, 2, NOW, 0, 0);
	assert_false(bs_res_has_alternative(t, C, 0, NOW + HORIZON + 1, HORIZON));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_two_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_single_and_unknown, setup, teardown),
		cmocka_unit_test_setup_teardown(test_duplicates_and_zeros, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_horizon, setup, teardown),
		cmocka_unit_test_setup_teardown(test_newest_wins, setup, teardown),
		cmocka_unit_test_setup_teardown(test_any_port, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ring_wraps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_learned_walk, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
