/* backoffshim check-config: every problem of an INI file, one per line. */
#include "cli.h"
#include "readfile.h"

#include <getopt.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char help_text[] =
	"Usage: backoffshim check-config [--env] [FILE...]\n"
	"\n"
	"Parses each FILE exactly as the library does and prints every problem on\n"
	"stdout, one per line; --env does the same for the BACKOFFSHIM_* variables\n"
	"alone, over the built-in defaults, and names each BACKOFFSHIM_* variable\n"
	"the library does not read, with the known name nearest to it. With --env\n"
	"and FILE, settings that do not fit together are judged as the library\n"
	"reads and counts them: in each FILE with the variables over it. The lines:\n"
	"  FILE:LINE: KEY = \"VALUE\": REASON\n"
	"                           a bad value (the library ignores it)\n"
	"  FILE:LINE: REASON        a bad line (syntax, too long, binary data)\n"
	"  FILE:LINE: [dest SPEC]: REASON\n"
	"                           a bad destination section (its SPEC, or the\n"
	"                           same destinations as an earlier section)\n"
	"  FILE: REASON             the file itself (cannot be read, not a regular\n"
	"                           file, too large)\n"
	"  FILE: KEY: REASON        settings that do not fit together\n"
	"  VARIABLE=\"VALUE\": REASON a bad value of a variable\n"
	"  VARIABLE: REASON         a variable the library does not read\n"
	"Control bytes, DEL and non-ASCII bytes in names and values are shown as\n"
	"\\xHH, a backslash as \\\\.\n"
	"A file without problems prints \"FILE: ok\"; the variables without\n"
	"problems, \"environment: ok\".\n"
	"\n"
	"Options:\n"
	"  --env        check the BACKOFFSHIM_* variables too (alone without FILE)\n"
	"  -h, --help   show this help\n"
	"\n"
	"Exit status: 0 if no file has a problem; 1 otherwise; 2 on a usage error.\n";

/* before, then s as the library writes outside text: control bytes, DEL
 * and bytes >= 0x80 as \xHH, a backslash as \\; at most max bytes, "..."
 * when cut; then after. */
static void put_escaped(const char *before, const char *s, size_t max, const char *after)
{
	size_t i;
	fputs(before, stdout);
	for (i = 0; s[i] && i < max; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\\')
			fputs("\\\\", stdout);
		else if (c < 0x20 || c >= 0x7f)
			printf("\\x%02x", c);
		else
			putchar(c);
	}
	if (s[i])
		fputs("...", stdout);
	fputs(after, stdout);
}

static void report(void *ctx, const char *origin, unsigned line, const char *key,
		   const char *value, const char *why)
{
	unsigned *n = ctx;
	(*n)++;
	put_escaped("", origin, 1000, "");
	if (line)
		printf(":%u", line);
	if (key) {
		put_escaped(": ", key, 60, "");
		if (value) /* the bad entry, as the library's line shows it */
			put_escaped(" = \"", value, 60, "\"");
	} else if (value && line) { /* a [dest ...] section header */
		put_escaped(": [dest ", value, 100, "]");
	} else if (value) { /* a variable's value */
		put_escaped("=\"", value, 60, "\"");
	}
	put_escaped(": ", why, 1000, "\n"); /* may quote an earlier section's spec */
}

/* A log file whose directory is missing: the library would log to stderr,
 * so the file is not OK. Checked on this machine, which should be the one
 * the file is for. (`shared = /path` is only a table's name, hashed into
 * its key: no file is made there.) */
static void check_log_dir(const struct bs_config *c, const char *origin, unsigned *problems)
{
	char dir[sizeof c->log_file];
	struct stat st;
	if (!c->log_file[0])
		return;
	bs_path_dir(c->log_file, dir, sizeof dir);
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		report(problems, origin, 0, "[log] file", c->log_file,
		       "its directory does not exist here (the library would not use it)");
}

/* One FILE, or the variables (path NULL) and the names no one reads,
 * over the defaults ([dest ...] sections are read too): its problems.
 * `together` (--env with FILEs), settings that do not fit together are
 * judged as the library reads and counts them: in each FILE with the
 * variables over it, not in the variables alone. */
static unsigned check(const char *path, int together)
{
	static struct bs_rules rules, merged_rules;
	static struct bs_config merged;
	struct bs_config cfg;
	unsigned problems = 0;
	const char *origin = path ? path : "environment";
	bs_config_defaults(&cfg);
	rules.n = 0;
	cfg.rules = &rules;
	if (!path)
		bs_config_load_vars(&cfg, bs_cli_getenv, report, &problems);
	else if (bs_config_load_file(&cfg, path, bs_read_file_libc, report, &problems) != 0)
		return problems;
	bs_config_finish(&cfg);
	if (together && path)
		bs_cli_load(&merged, &merged_rules, path, NULL, NULL);
	if (!together || path)
		bs_config_check(together ? &merged : &cfg, origin, report, &problems);
	check_log_dir(&cfg, origin, &problems);
	if (!path)
		bs_config_check_env_names(environ, report, &problems);
	return problems;
}

int bs_cmd_check_config(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"env", no_argument, NULL, 'e'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c, env = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		if (c == 'h') {
			fputs(help_text, stdout);
			return 0;
		}
		if (c != 'e')
			return bs_cli_bad_option("check-config", c, argv);
		env = 1;
	}
	if (optind >= argc && !env)
		return bs_cli_usage("check-config", "missing the file to check (or --env)");
	int together = env && optind < argc;
	int status = 0;
	for (int i = optind; i < argc + env; i++) { /* --env: the variables last */
		const char *path = i < argc ? argv[i] : NULL;
		if (check(path, together))
			status = 1;
		else
			put_escaped("", path ? path : "environment", 1000, ": ok\n");
	}
	return status;
}
