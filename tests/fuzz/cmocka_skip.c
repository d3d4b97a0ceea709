/*
 * Linked into the TSan builds of the unit tests by `make sanitize` (not a
 * fuzz target): BACKOFFSHIM_CMOCKA_SKIP=PATTERN skips the cmocka tests whose
 * names match PATTERN (cmocka's * and ? wildcards). Used for the signal tests
 * of test_clock, which TSan cannot run as written: it defers signal handlers
 * to its next interceptor call and reports sa_flags of its own.
 */
#include <stdlib.h>

void cmocka_set_skip_filter(const char *pattern);

__attribute__((constructor)) static void skip_from_env(void)
{
	const char *p = getenv("BACKOFFSHIM_CMOCKA_SKIP");
	if (p && *p)
		cmocka_set_skip_filter(p);
}
