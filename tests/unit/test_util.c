/* Unit tests for util: a path's directory, as the log file's and the shared
 * table's checks take it. */
#include "unit.h"

#include <string.h>

#include "util.h"

static const char *dir_of(const char *path, size_t cap)
{
	static char dir[64];
	memset(dir, 'x', sizeof dir);
	bs_path_dir(path, dir, cap);
	return dir;
}

static void test_path_dir(void **state)
{
	(void)state;
	assert_string_equal(dir_of("/var/log/app.log", 64), "/var/log");
	assert_string_equal(dir_of("/app.log", 64), "/");
	assert_string_equal(dir_of("app.log", 64), ".");
	assert_string_equal(dir_of("logs/app.log", 64), "logs");
	assert_string_equal(dir_of("/very/long/directory/x", 6), "/very"); /* cut to fit */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path_dir),
	};
	return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}
