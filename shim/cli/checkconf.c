/* backoffshim check-config: every problem of an INI file, one per line. */
#include "cli.h"

#include <getopt.h>
#include <string.h>

static const char help_text[] =
	"Usage: backoffshim check-config FILE...\n"
	"\n"
	"Parses each FILE exactly as the library does and prints every problem on\n"
	"stdout, one per line:\n"
	"  FILE:LINE: KEY: REASON   a bad value (the library ignores it)\n"
	"  FILE:LINE: REASON        a bad line (syntax, too long, binary data)\n"
	"  FILE:LINE: [dest SPEC]: REASON\n"
	"                           a bad destination section (its SPEC, or the\n"
	"                           same destinations as an earlier section)\n"
	"  FILE: REASON             the file itself (cannot be read, too large)\n"
	"A file without problems prints \"FILE: ok\".\n"
	"\n"
	"Options:\n"
	"  -h, --help   show this help\n"
	"\n"
	"Exit status: 0 if no file has a problem; 1 otherwise; 2 on a usage error.\n";

static void report(void *ctx, const char *origin, unsigned line, const char *key,
		   const char *value, const char *why)
{
	unsigned *n = ctx;
	(*n)++;
	bs_cli_printable(stdout, origin, 1000);
	if (line)
		printf(":%u", line);
	if (key) {
		fputs(": ", stdout);
		bs_cli_printable(stdout, key, 60);
	} else if (value && line) { /* a [dest ...] section header */
		fputs(": [dest ", stdout);
		bs_cli_printable(stdout, value, 100);
		fputs("]", stdout);
	}
	printf(": %s\n", why);
}

int bs_cmd_check_config(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
		if (c == 'h') {
			fputs(help_text, stdout);
			return 0;
		}
		return bs_cli_bad_option("check-config", c, argv);
	}
	if (optind >= argc)
		return bs_cli_usage("check-config", "missing the file to check");
	int status = 0;
	for (int i = optind; i < argc; i++) {
		static struct bs_rules rules; /* [dest ...] sections are read too */
		struct bs_config cfg;
		unsigned problems = 0;
		bs_config_defaults(&cfg);
		rules.n = 0;
		cfg.rules = &rules;
		bs_config_load_file(&cfg, argv[i], report, &problems);
		if (problems) {
			status = 1;
		} else {
			bs_cli_printable(stdout, argv[i], 1000);
			puts(": ok");
		}
	}
	return status;
}
