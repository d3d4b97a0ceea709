/* Unit tests for shtab: the header a new table gets, every reason a file
 * is refused, and the per-user file name. */
#include "unit.h"

#include <string.h>
#include <sys/stat.h>

#include "shtab.h"

static struct bs_shtab_header good_header(void)
{
	struct bs_shtab_header h;
	bs_shtab_header_init(&h);
	return h;
}

static const struct bs_shtab_stat GOOD = {1, 1000, S_IFREG | 0600, BS_SHTAB_SIZE};

static void test_a_new_header_passes(void **state)
{
	(void)state;
	struct bs_shtab_header h = good_header();
	assert_int_equal(h.magic, BS_SHTAB_MAGIC);
	assert_int_equal(h.layout, BS_SHTAB_LAYOUT);
	assert_true(h.table_offset >= sizeof h && h.table_offset % 4096 == 0);
	assert_int_equal(bs_shtab_check(&GOOD, &h, 1000, 0), BS_SHTAB_OK);
	assert_int_equal(bs_shtab_check(&GOOD, &h, 1000, 1), BS_SHTAB_OK);
}

static void test_every_refusal(void **state)
{
	(void)state;
	struct bs_shtab_header h = good_header();
	struct bs_shtab_stat st = GOOD;
	st.is_regular = 0;
	assert_int_equal(bs_shtab_check(&st, &h, 1000, 0), BS_SHTAB_NOT_REGULAR);
	st = GOOD;
	assert_int_equal(bs_shtab_check(&st, &h, 1001, 0), BS_SHTAB_OTHER_OWNER);
	/* an explicit path: the operator chose its owner and group */
	assert_int_equal(bs_shtab_check(&st, &h, 1001, 1), BS_SHTAB_OK);
	st.mode = S_IFREG | 0620;
	assert_int_equal(bs_shtab_check(&st, &h, 1000, 0), BS_SHTAB_WRITABLE_BY_OTHERS);
	assert_int_equal(bs_shtab_check(&st, &h, 1000, 1), BS_SHTAB_OK);
	st.mode = S_IFREG | 0602;
	assert_int_equal(bs_shtab_check(&st, &h, 1000, 1), BS_SHTAB_WRITABLE_BY_OTHERS);
	st = GOOD;
	st.size = BS_SHTAB_SIZE - 1;
	assert_int_equal(bs_shtab_check(&st, &h, 1000, 0), BS_SHTAB_WRONG_SIZE);
	st = GOOD;
	h.magic ^= 1;
	assert_int_equal(bs_shtab_check(&st, &h, 1000, 0), BS_SHTAB_BAD_HEADER);
	h = good_header();
	h.layout = BS_SHTAB_LAYOUT + 1;
	assert_int_equal(bs_shtab_check(&st, &h, 1000, 0), BS_SHTAB_OTHER_LAYOUT);
	h = good_header();
	h.entry_size++;
	assert_int_equal(bs_shtab_check(&st, &h, 1000, 0), BS_SHTAB_BAD_HEADER);
	h = good_header();
	h.table_offset = 0;
	assert_int_equal(bs_shtab_check(&st, &h, 1000, 0), BS_SHTAB_BAD_HEADER);
	for (int v = BS_SHTAB_OK; v <= BS_SHTAB_OTHER_LAYOUT; v++)
		assert_true(strlen(bs_shtab_verdict_text((enum bs_shtab_verdict)v)) > 0);
}

static void test_user_path(void **state)
{
	(void)state;
	char buf[128];
	size_t n = bs_shtab_user_path(buf, sizeof buf, "/dev/shm", 1000, 4026531840ull);
	assert_string_equal(buf, "/dev/shm/backoffshim-v2-u1000-n4026531840");
	assert_int_equal(n, strlen(buf));
	assert_int_equal(bs_shtab_user_path(buf, 10, "/dev/shm", 0, 0), 0);
	bs_shtab_user_path(buf, sizeof buf, "/x", 0, 0);
	assert_string_equal(buf, "/x/backoffshim-v2-u0-n0");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_new_header_passes),
		cmocka_unit_test(test_every_refusal),
		cmocka_unit_test(test_user_path),
	};
	return cmocka_run_group_tests_name("shtab", tests, NULL, NULL);
}
