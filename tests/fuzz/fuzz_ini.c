/*
 * libFuzzer target: an INI file's text through bs_config_parse_ini (inih
 * plus config.c's line screening, [dest ...] sections, value parsers), then
 * bs_config_finish. Checks the config and rule invariants (fuzz.h), that
 * every report names a line that exists and prints without control bytes,
 * and that [dest ...] sections never change the global settings: the same
 * text parsed without a rules table gives the same globals.
 */
#include "fuzz.h"

#include <stddef.h>
#include <stdint.h>

#define ORIGIN "fuzz.ini"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct bs_rules rules;
	struct bs_config c, plain;
	unsigned lines = 1;
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';

	struct fz_reports rep = {ORIGIN, lines, 0};
	bs_config_defaults(&c);
	rules.n = 0;
	c.rules = &rules;
	/* exactly `size` bytes, not terminated: the parser is given a length */
	bs_config_parse_ini(&c, ORIGIN, (const char *)data, size, fz_report, &rep);
	fz_check_rules(&c, 0);
	bs_config_finish(&c);
	fz_check_config(&c, 0);
	fz_check_rules(&c, 1);

	struct fz_reports rep2 = {ORIGIN, lines, 0};
	bs_config_defaults(&plain);
	bs_config_parse_ini(&plain, ORIGIN, (const char *)data, size, fz_report, &rep2);
	bs_config_finish(&plain);
	fz_check_config(&plain, 0);
	FZ_CHECK(fz_same_globals(&c, &plain),
		 "[dest] sections changed the global settings");
	return 0;
}
