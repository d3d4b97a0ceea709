/*
 * libFuzzer target: BACKOFFSHIM_DEST_RULES through bs_rule_env (config_rules.c),
 * on top of an INI file. The input is "RULES" or "RULES\0INI": the INI part,
 * if any, is parsed first, so the environment can add to the file's
 * sections. Checks the config and rule invariants (fuzz.h), that every
 * report prints without control bytes, and that the rules never change the
 * global settings.
 */
#include "fuzz.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define VAR "BACKOFFSHIM_DEST_RULES"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct bs_rules rules;
	struct bs_config c, before;
	const uint8_t *nul = memchr(data, '\0', size);
	size_t rlen = nul ? (size_t)(nul - data) : size;
	char *text = fz_strndup(data, rlen);

	bs_config_defaults(&c);
	rules.n = 0;
	c.rules = &rules;
	if (nul) {
		const char *ini = (const char *)nul + 1;
		size_t ilen = size - rlen - 1;
		unsigned lines = 1;
		for (size_t i = 0; i < ilen; i++)
			lines += ini[i] == '\n';
		struct fz_reports frep = {"fuzz.ini", lines, 0};
		bs_config_parse_ini(&c, "fuzz.ini", ini, ilen, fz_report, &frep);
	}
	before = c;
	unsigned nfile = rules.n;

	/* every report from the variable is about the variable, with no line */
	struct fz_reports rep = {VAR, 0, 0};
	bs_rule_env(&c, text, fz_report, &rep);
	fz_check_rules(&c, 0);
	FZ_CHECK(rules.n >= nfile, "rules were dropped");
	for (unsigned i = nfile; i < rules.n; i++)
		FZ_CHECK(!strcmp(rules.r[i].origin, VAR) && rules.r[i].line == 0,
			 "rule %u from the variable names %s:%u", i, fz_str(rules.r[i].origin),
			 rules.r[i].line);
	FZ_CHECK(fz_same_globals(&c, &before), "the rules changed the global settings");
	bs_config_finish(&c);
	fz_check_config(&c, 0);
	fz_check_rules(&c, 1);
	free(text);
	return 0;
}
