/* backoffshim: the command's entry point and shared helpers. See cli.h. */
#include "cli.h"
#include "readfile.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_text[] =
	"Usage: backoffshim COMMAND [ARGS...]\n"
	"\n"
	"Runs programs with libbackoffshim.so preloaded, previews the retry schedule\n"
	"a configuration gives, and checks configuration files.\n"
	"\n"
	"Commands:\n"
	"  run [OPTIONS] -- CMD [ARGS...]\n"
	"                  run CMD with the shim preloaded (exec, no fork: CMD's exit\n"
	"                  status is the command's own; fit for a container ENTRYPOINT)\n"
	"  schedule [--config F] [--dest ADDR:PORT] [-n N] [--seed S] [RUN OPTIONS]\n"
	"           [[--] CMD...]\n"
	"                  print the effective policy and the next N waits (of a\n"
	"                  run line too: CMD is not run)\n"
	"  check-config [--env] [FILE...]\n"
	"                  report every problem in FILE (--env: in the\n"
	"                  BACKOFFSHIM_* variables), one line each;\n"
	"                  exit 0 if there is none, 1 otherwise\n"
	"  status [--json | --prometheus | --watch [S]] [--table NAME | --user NAME] | --gc\n"
	"                  show the destinations backing off in the shared table\n"
	"  reset DEST | --all [--table NAME | --user NAME]\n"
	"                  clear a destination's backoff and wake every waiter\n"
	"  help [COMMAND]  this help, or COMMAND's (as COMMAND --help)\n"
	"\n"
	"Options:\n"
	"  -h, --help      show this help; 'backoffshim COMMAND --help' for a command\n"
	"  -V, --version   print the version\n"
	"\n"
	"Exit status: 2 on a usage error (run: 125); otherwise see each command's\n"
	"--help.\n";

const char *bs_cli_argv0;

int bs_cli_usage(const char *sub, const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	fprintf(stderr, "backoffshim%s%s: ", sub ? " " : "", sub ? sub : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'backoffshim%s%s --help'.\n", sub ? " " : "", sub ? sub : "");
	return BS_EXIT_USAGE;
}

int bs_cli_bad_option(const char *sub, int ret, char **argv)
{
	const char *arg = argv[optind - 1];
	if (ret == ':')
		return bs_cli_usage(sub, "option '%s' needs a value", arg);
	if (optopt && strncmp(arg, "--", 2) != 0)
		return bs_cli_usage(sub, "unknown option '-%c'", optopt);
	return bs_cli_usage(sub, "unknown option '%s'", arg);
}

void bs_cli_dur(uint64_t ns, char *buf, size_t cap)
{
	static const struct {
		uint64_t ns;
		const char *name;
	} u[] = {
		{3600 * BS_NS_PER_SEC, "h"}, {60 * BS_NS_PER_SEC, "m"}, {BS_NS_PER_SEC, "s"},
		{BS_NS_PER_MS, "ms"}, {1000, "us"}, {1, "ns"},
	};
	if (ns == 0) {
		snprintf(buf, cap, "0");
		return;
	}
	/* Hours and minutes only when exact to 3 decimals (90s -> 1.5m, but
	 * 61s stays 61s); otherwise the largest unit not above ns. */
	size_t i;
	for (i = 0; i < 2; i++)
		if (ns >= u[i].ns && ns % (u[i].ns / 1000) == 0)
			break;
	if (i == 2)
		while (ns < u[i].ns)
			i++;
	uint64_t ip, f;
	for (;;) {
		ip = ns / u[i].ns;
		f = (ns % u[i].ns * 1000 + u[i].ns / 2) / u[i].ns;
		if (f == 1000) {
			ip++;
			f = 0;
		}
		if (i <= 2 || ip < 1000)
			break;
		i--; /* 999.9996ms rounds to 1000ms: say 1s */
	}
	char frac[8] = "";
	if (f) {
		snprintf(frac, sizeof frac, ".%03u", (unsigned)f);
		for (size_t len = strlen(frac); frac[len - 1] == '0';)
			frac[--len] = '\0';
	}
	snprintf(buf, cap, "%llu%s%s", (unsigned long long)ip, frac, u[i].name);
}

const char *bs_cli_getenv(void *ctx, const char *name)
{
	(void)ctx;
	return getenv(name);
}

/* bs_cli_load's file and reporter, in the one ctx the loader passes both. */
struct load {
	const char *file;
	bs_config_report_fn report;
	void *ctx;
};

static const char *load_getenv(void *ctx, const char *name)
{
	const struct load *l = ctx;
	if (l->file && strcmp(name, "BACKOFFSHIM_CONFIG") == 0)
		return l->file;
	return getenv(name);
}

static void load_report(void *ctx, const char *origin, unsigned line, const char *key,
			const char *value, const char *why)
{
	const struct load *l = ctx;
	if (l->report)
		l->report(l->ctx, origin, line, key, value, why);
}

void bs_cli_load(struct bs_config *c, struct bs_rules *rules, const char *file,
		 bs_config_report_fn report, void *ctx)
{
	struct load l = {file, report, ctx};
	bs_config_load_rules(c, rules, load_getenv, bs_read_file_libc, load_report, &l);
}

void bs_cli_printable(FILE *f, const char *s, size_t max)
{
	size_t i;
	for (i = 0; s[i] && i < max; i++) {
		unsigned char c = (unsigned char)s[i];
		fputc(c < 0x20 || c > 0x7e ? '?' : c, f);
	}
	if (s[i])
		fputs("...", f);
}

/* The version the library file carries (after BS_VERSION_MARK), or "". */
static void library_version(const char *path, char *out, size_t cap)
{
	static char buf[1 << 20];
	out[0] = 0;
	FILE *f = fopen(path, "rb");
	if (!f)
		return;
	size_t n, keep = 0, mlen = strlen(BS_VERSION_MARK);
	while (!out[0] && (n = fread(buf + keep, 1, sizeof buf - keep - 1, f)) > 0) {
		n += keep;
		buf[n] = 0;
		for (size_t i = 0; i + mlen < n; i++)
			if (buf[i] == '@' && !memcmp(buf + i, BS_VERSION_MARK, mlen)) {
				snprintf(out, cap, "%.31s", buf + i + mlen);
				break;
			}
		keep = mlen < n ? mlen : n; /* a mark across two reads */
		memmove(buf, buf + n - keep, keep);
	}
	fclose(f);
}

/* The command's version, and that of the library `run` would load. */
static void print_version(void)
{
	char lib[4096], v[32];
	printf("backoffshim %s\n", BS_VERSION);
	if (bs_cli_find_library(bs_cli_argv0, lib, 0) != 0) {
		puts("library: not found");
		return;
	}
	library_version(lib, v, sizeof v);
	printf("library: %s (%s)\n", lib, v[0] ? v : "unknown version");
}

static const struct {
	const char *name;
	int (*fn)(int, char **);
} commands[] = {
	{"run", bs_cmd_run},
	{"schedule", bs_cmd_schedule},
	{"check-config", bs_cmd_check_config},
	{"status", bs_cmd_status},
	{"reset", bs_cmd_reset},
};

/* At exit: output that did not reach stdout (a full disk, a closed
 * descriptor) is an error, not a success a script would believe. A closed
 * stdout the command wrote nothing to is no error (as coreutils judge). */
static void close_stdout(void)
{
	int pending = __fpending(stdout) > 0, failed = ferror(stdout);
	errno = 0;
	if (fclose(stdout) != 0 && (pending || errno != EBADF))
		failed = 1;
	if (failed) {
		fprintf(stderr, "%s: write error: %s\n", bs_cli_argv0 ? bs_cli_argv0 : "backoffshim",
			strerror(errno ? errno : EIO));
		_exit(1);
	}
}

int main(int argc, char **argv)
{
	atexit(close_stdout);
	static const struct option longopts[] = {
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	int c;
	bs_cli_argv0 = argv[0];
	opterr = 0; /* errors are ours to word, here and in every subcommand */
	while ((c = getopt_long(argc, argv, "+:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case 'V':
			print_version();
			return 0;
		default:
			return bs_cli_bad_option(NULL, c, argv);
		}
	}
	if (optind >= argc)
		return bs_cli_usage(NULL, "missing command (run, schedule, check-config, status or reset)");
	int help = strcmp(argv[optind], "help") == 0;
	if (help && optind + 1 >= argc) {
		fputs(usage_text, stdout);
		return 0;
	}
	char *name = argv[optind + help], *help_args[] = {name, "--help", NULL};
	for (size_t i = 0; i < BS_ARRAY_SIZE(commands); i++) {
		if (strcmp(name, commands[i].name) == 0) {
			int sub_argc = help ? 2 : argc - optind; /* "help run" is "run --help" */
			char **sub_argv = help ? help_args : argv + optind;
			optind = 0; /* GNU getopt: start afresh for the subcommand */
			return commands[i].fn(sub_argc, sub_argv);
		}
	}
	return bs_cli_usage(NULL, "unknown command '%s'%s", name,
			    help ? "" : " (expected run, schedule, check-config, status or reset)");
}
