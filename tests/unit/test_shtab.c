/* Unit tests for shtab: the header a new table gets, every reason a
 * segment is refused, its key and its lock file's name. */
#include "unit.h"

#include <string.h>

#include "shtab.h"

static struct bs_shtab_header good_header(void)
{
	struct bs_shtab_header h;
	bs_shtab_header_init(&h);
	return h;
}

static const struct bs_shtab_stat GOOD = {1000, 1000, 0600, BS_SHTAB_SIZE};

static void test_a_new_header_passes(void **state)
{
	(void)state;
	struct bs_shtab_header h = good_header();
	assert_int_equal(h.magic, BS_SHTAB_MAGIC);
	assert_int_equal(h.layout, BS_SHTAB_LAYOUT);
	assert_true(h.table_offset >= sizeof h && h.table_offset % 4096 == 0);
	assert_int_equal(bs_shtab_check_segment(&GOOD, 1000), BS_SHTAB_OK);
	assert_int_equal(bs_shtab_check_header(&h), BS_SHTAB_OK);
	struct bs_shtab_header zero;
	memset(&zero, 0, sizeof zero);
	assert_int_equal(bs_shtab_check_header(&zero), BS_SHTAB_NEW);
	h.magic = 0; /* the fields written, the magic not yet */
	assert_int_equal(bs_shtab_check_header(&h), BS_SHTAB_NEW);
}

static void test_every_refusal(void **state)
{
	(void)state;
	struct bs_shtab_stat st = GOOD;
	assert_int_equal(bs_shtab_check_segment(&st, 1001), BS_SHTAB_OTHER_OWNER);
	st.creator = 1001; /* made by another user, then handed over */
	assert_int_equal(bs_shtab_check_segment(&st, 1000), BS_SHTAB_OTHER_OWNER);
	const mode_t open_modes[] = {0640, 0660, 0604, 0606, 0666, 0700, 0400};
	for (size_t i = 0; i < sizeof open_modes / sizeof open_modes[0]; i++) {
		st = GOOD;
		st.mode = open_modes[i];
		assert_int_equal(bs_shtab_check_segment(&st, 1000), BS_SHTAB_OPEN_TO_OTHERS);
	}
	st = GOOD;
	st.size = BS_SHTAB_SIZE - 1;
	assert_int_equal(bs_shtab_check_segment(&st, 1000), BS_SHTAB_WRONG_SIZE);
	struct bs_shtab_header h = good_header();
	h.magic ^= 1;
	assert_int_equal(bs_shtab_check_header(&h), BS_SHTAB_BAD_HEADER);
	h = good_header();
	h.layout = BS_SHTAB_LAYOUT + 1;
	assert_int_equal(bs_shtab_check_header(&h), BS_SHTAB_OTHER_LAYOUT);
	h = good_header();
	h.entry_size++;
	assert_int_equal(bs_shtab_check_header(&h), BS_SHTAB_BAD_HEADER);
	h = good_header();
	h.table_offset = 0;
	assert_int_equal(bs_shtab_check_header(&h), BS_SHTAB_BAD_HEADER);
	for (int v = BS_SHTAB_OK; v <= BS_SHTAB_OTHER_LAYOUT; v++)
		assert_true(strlen(bs_shtab_verdict_text((enum bs_shtab_verdict)v)) > 0);
}

/* One key per user, network namespace and name; never IPC_PRIVATE (0) */
static void test_key_and_lock_path(void **state)
{
	(void)state;
	int k = bs_shtab_key(1000, 4026531840ull, "");
	assert_true(k > 0);
	assert_int_equal(bs_shtab_key(1000, 4026531840ull, ""), k);
	assert_true(bs_shtab_key(1001, 4026531840ull, "") != k);
	assert_true(bs_shtab_key(1000, 4026531841ull, "") != k);
	assert_true(bs_shtab_key(1000, 4026531840ull, "/tmp/t") != k);
	for (uid_t u = 0; u < 10000; u++)
		assert_true(bs_shtab_key(u, 0, "") > 0);
	char buf[128];
	size_t n = bs_shtab_lock_path(buf, sizeof buf, "/dev/shm", 12345);
	assert_string_equal(buf, "/dev/shm/backoffshim-v3-k12345.lock");
	assert_int_equal(n, strlen(buf));
	assert_int_equal(bs_shtab_lock_path(buf, 10, "/dev/shm", 1), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_new_header_passes),
		cmocka_unit_test(test_every_refusal),
		cmocka_unit_test(test_key_and_lock_path),
	};
	return cmocka_run_group_tests_name("shtab", tests, NULL, NULL);
}
