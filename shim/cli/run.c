/* backoffshim run: exec a command with the shim preloaded. See cli.h. */
#include "cli.h"

#include "elfinfo.h"
#include "log.h"
#include "readfile.h"
#include "sup.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#ifndef BS_PREFIX
#define BS_PREFIX "/usr/local"
#endif
/* where the Debian package puts the library: lib/<multiarch>/backoffshim/ */
#ifndef BS_MULTIARCH
#define BS_MULTIARCH "x86_64-linux-gnu"
#endif
#define PACKAGED "lib/" BS_MULTIARCH "/backoffshim/" LIB_NAME
#define LIB_NAME "libbackoffshim.so"

#define EXIT_RUN_ERROR 125 /* run's own errors, usage included (as env, timeout, nice) */
#define EXIT_CANNOT_RUN 126
#define EXIT_NOT_FOUND 127

static const char help_text[] =
	"Usage: backoffshim run [OPTIONS] [--] CMD [ARGS...]\n"
	"\n"
	"Runs CMD with its connects retried. The preload engine execs CMD in place of\n"
	"this process (no fork: CMD keeps the process id, receives the signals and\n"
	"its exit status is its own, so it works as a container ENTRYPOINT) with\n"
	LIB_NAME " appended to LD_PRELOAD.\n"
	"Each option sets its BACKOFFSHIM_* variable, overriding one already in the\n"
	"environment; values are checked before CMD starts.\n"
	"\n"
	"Options:\n"
	"  --initial-backoff D  first wait (BACKOFFSHIM_INITIAL_BACKOFF), e.g. 250ms\n"
	"  --max-backoff D      cap on the wait (BACKOFFSHIM_MAX_BACKOFF)\n"
	"  --multiplier X       growth per failure, 1 to 100 (BACKOFFSHIM_MULTIPLIER)\n"
	"  --jitter X           random fraction, 0 to 1 (BACKOFFSHIM_JITTER)\n"
	"  --max-elapsed D      time per connect() call, 0 = unlimited\n"
	"                       (BACKOFFSHIM_MAX_ELAPSED)\n"
	"  --max-attempts N     attempts per connect() call, 0 = unlimited\n"
	"                       (BACKOFFSHIM_MAX_ATTEMPTS)\n"
	"  --policy NAME        grpc, list, exponential, responsive or off\n"
	"                       (BACKOFFSHIM_POLICY)\n"
	"  --config FILE        INI file to read (BACKOFFSHIM_CONFIG, made absolute)\n"
	"  --pace               never sleep on non-blocking sockets: fail a connect\n"
	"                       inside the backoff window at once\n"
	"                       (BACKOFFSHIM_NONBLOCKING=pace)\n"
	"  --resolve MODE       off, temporary or wait: retry a name that does not\n"
	"                       resolve yet (BACKOFFSHIM_RESOLVE)\n"
	"  --log LEVEL          off, error, info or debug (BACKOFFSHIM_LOG)\n"
	"  --engine E           auto (the default), preload or seccomp; see below\n"
	"  -h, --help           show this help\n"
	"\n"
	"Durations take a unit: ns, us, ms, s, m, h or d (a bare number is\n"
	"refused: write 50ms or 50s; 0 needs none).\n"
	"\n"
	"The library is looked for next to this program (DIR/" LIB_NAME ",\n"
	"DIR/../lib/" LIB_NAME ", DIR/../" PACKAGED "), then as\n"
	"  " BS_PREFIX "/lib/" LIB_NAME " or " BS_PREFIX "/" PACKAGED ".\n"
	"\n"
	"Engines: preload appends the library to LD_PRELOAD and execs CMD in place.\n"
	"seccomp stays CMD's parent and retries its connects from outside through a\n"
	"seccomp filter, for programs the library cannot reach: static binaries and\n"
	"Go programs (Linux 6.9 or later). It forwards signals and ends as CMD ends\n"
	"(its exit status, or death by the same signal). auto picks seccomp for a static or Go program\n"
	"(or a script whose interpreter is one) and preload otherwise, never seccomp\n"
	"for a setuid/setgid or file-capability program; --log debug says which.\n"
	"A program neither engine can act on gets one warning line, and runs anyway;\n"
	"so does one whose engine is not available here (the line says why).\n"
	"\n"
	"Exit status: CMD's own; 125 on a usage error, a bad value or when the\n"
	"library is not found; 126 if CMD cannot be run; 127 if CMD is not found\n"
	"(as env, timeout and nice).\n"
	"\n"
	"Example: backoffshim run --max-backoff 30s -- ./client db.internal 5432\n";

/* A value option sets var to its value, once config has checked it (with
 * its variable-style key); a flag (key NULL) sets var to `flag`. */
static const struct {
	const char *opt, *key, *var, *flag;
} settings[] = {
	{"initial-backoff", "initial_backoff", "BACKOFFSHIM_INITIAL_BACKOFF", NULL},
	{"max-backoff", "max_backoff", "BACKOFFSHIM_MAX_BACKOFF", NULL},
	{"multiplier", "multiplier", "BACKOFFSHIM_MULTIPLIER", NULL},
	{"jitter", "jitter", "BACKOFFSHIM_JITTER", NULL},
	{"max-elapsed", "max_elapsed", "BACKOFFSHIM_MAX_ELAPSED", NULL},
	{"max-attempts", "max_attempts", "BACKOFFSHIM_MAX_ATTEMPTS", NULL},
	{"policy", "policy", "BACKOFFSHIM_POLICY", NULL},
	{"log", "log", "BACKOFFSHIM_LOG", NULL},
	{"pace", NULL, "BACKOFFSHIM_NONBLOCKING", "pace"},
	{"resolve", "resolve", "BACKOFFSHIM_RESOLVE", NULL},
};
_Static_assert(BS_ARRAY_SIZE(settings) == BS_CLI_SETTINGS, "BS_CLI_SETTINGS counts them");
enum { OPT_CONFIG = BS_CLI_OPT_SETTING + BS_CLI_SETTINGS, OPT_ENGINE };

void bs_cli_setting_options(struct option *out)
{
	for (int i = 0; i < BS_CLI_SETTINGS; i++)
		out[i] = (struct option){settings[i].opt, settings[i].key ? required_argument : no_argument,
					 NULL, BS_CLI_OPT_SETTING + i};
}

int bs_cli_take_setting(const char *sub, int opt, const char *value)
{
	struct bs_config scratch;
	const char *why;
	int i = opt - BS_CLI_OPT_SETTING;
	bs_config_defaults(&scratch);
	if (!settings[i].key)
		value = settings[i].flag;
	else if (bs_config_set(&scratch, NULL, settings[i].key, value, &why))
		return bs_cli_usage(sub, "--%s '%s': %s", settings[i].opt, value, why);
	setenv(settings[i].var, value, 1);
	return 0;
}

int bs_cli_find_library(const char *argv0, char out[PATH_MAX], int say)
{
	char exe[PATH_MAX], dir[PATH_MAX], cand[5][PATH_MAX + 64];
	int n = 0;
	ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (len > 0)
		exe[len] = '\0';
	else if (!(argv0 && strchr(argv0, '/') && realpath(argv0, exe)))
		exe[0] = '\0';
	if (exe[0]) { /* an absolute path: the running binary's */
		bs_path_dir(exe, dir, sizeof dir);
		snprintf(cand[n++], sizeof cand[0], "%s/" LIB_NAME, dir);
		snprintf(cand[n++], sizeof cand[0], "%s/../lib/" LIB_NAME, dir);
		snprintf(cand[n++], sizeof cand[0], "%s/../" PACKAGED, dir);
	}
	snprintf(cand[n++], sizeof cand[0], "%s/lib/" LIB_NAME, BS_PREFIX);
	snprintf(cand[n++], sizeof cand[0], "%s/" PACKAGED, BS_PREFIX);
	for (int i = 0; i < n; i++)
		if (realpath(cand[i], out) && access(out, R_OK) == 0)
			return 0;
	if (say)
		fprintf(stderr, "backoffshim run: cannot find " LIB_NAME "; looked for:\n");
	for (int i = 0; say && i < n; i++)
		fprintf(stderr, "  %s\n", cand[i]);
	return -1;
}

/* Is an existing copy of the shim already in this LD_PRELOAD list? (Two
 * copies would both interpose connect() and retry inside each other.) */
static int already_preloaded(const char *list)
{
	char item[PATH_MAX];
	while (*list) {
		size_t len = strcspn(list, ": ");
		if (len && len < sizeof item) {
			memcpy(item, list, len);
			item[len] = '\0';
			const char *base = strrchr(item, '/');
			base = base ? base + 1 : item;
			if (strcmp(base, LIB_NAME) == 0 && access(item, R_OK) == 0)
				return 1;
		}
		list += len;
		list += strspn(list, ": ");
	}
	return 0;
}

static int preload(const char *lib)
{
	const char *old = getenv("LD_PRELOAD");
	if (old && already_preloaded(old))
		return 0;
	if (!old || !old[strspn(old, ": ")])
		return setenv("LD_PRELOAD", lib, 1);
	char *v;
	if (asprintf(&v, "%s:%s", old, lib) < 0)
		return -1;
	int r = setenv("LD_PRELOAD", v, 1);
	free(v);
	return r;
}

/* The file the library will read, checked as it will check it. */
static int set_config_file(const char *path)
{
	char abs[PATH_MAX];
	static char buf[1];
	const char *why;
	if (access(path, R_OK) != 0 || !realpath(path, abs))
		return bs_cli_usage("run", "--config %s: %s", path, strerror(errno));
	if (bs_read_file_libc(NULL, abs, buf, 0, &why) < 0)
		return bs_cli_usage("run", "--config %s: %s", path, why);
	setenv("BACKOFFSHIM_CONFIG", abs, 1);
	return 0;
}

/* The file execvp would run for cmd, into path; 0 if none is found. Like
 * glibc: the first executable regular file along PATH (an empty entry is
 * the current directory; "/bin:/usr/bin" when PATH is unset). */
static int find_command(const char *cmd, char *path, size_t n)
{
	if (strchr(cmd, '/'))
		return snprintf(path, n, "%s", cmd) < (int)n;
	const char *dirs = getenv("PATH");
	if (!dirs)
		dirs = "/bin:/usr/bin";
	for (const char *p = dirs;; p++) {
		size_t len = strcspn(p, ":");
		struct stat st;
		if (snprintf(path, n, "%.*s%s%s", (int)len, p, len ? "/" : "", cmd) < (int)n &&
		    stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0)
			return 1;
		p += len;
		if (!*p)
			return 0;
	}
}

/* Is the id a file's owner shows as one this user namespace maps? (An
 * owner it cannot map shows as the overflow id, and the kernel ignores a
 * set-id bit it cannot apply.) which: "uid_map" or "gid_map". */
static int id_mapped(unsigned long id, const char *which)
{
	char path[32];
	unsigned long in, out, count;
	snprintf(path, sizeof path, "/proc/self/%s", which);
	FILE *f = fopen(path, "r");
	if (!f)
		return 1;
	int mapped = 0;
	while (!mapped && fscanf(f, "%lu %lu %lu", &in, &out, &count) == 3)
		mapped = id >= in && id - in < count;
	fclose(f);
	return mapped;
}

/* Would exec of this file run in secure mode (AT_SECURE), where the loader
 * ignores LD_PRELOAD? Set-id bits count only when they change an id and the
 * file system honours them; file capabilities only for a user other than
 * root. */
static int execs_securely(const char *path, const struct stat *st)
{
	struct statvfs fs;
	if (statvfs(path, &fs) == 0 && (fs.f_flag & ST_NOSUID))
		return 0;
	if ((st->st_mode & S_ISUID) && st->st_uid != getuid() && id_mapped(st->st_uid, "uid_map"))
		return 1;
	if ((st->st_mode & S_ISGID) && (st->st_mode & S_IXGRP) && st->st_gid != getgid() &&
	    id_mapped(st->st_gid, "gid_map"))
		return 1;
	return getuid() != 0 && getxattr(path, "security.capability", NULL, 0) > 0;
}

/* The interpreter a "#!" line names, into interp; 0 if head has none. */
static int script_interpreter(const unsigned char *head, size_t n, char *interp, size_t size)
{
	if (n < 2 || head[0] != '#' || head[1] != '!')
		return 0;
	size_t i = 2, len = 0;
	while (i < n && (head[i] == ' ' || head[i] == '\t'))
		i++;
	while (i < n && len + 1 < size && !strchr(" \t\n", head[i]) && head[i])
		interp[len++] = (char)head[i++];
	interp[len] = '\0';
	return len > 0;
}

/* What a program is to the engines (a script is judged by its
 * interpreter). */
enum program { PLAIN, SECURE, STATIC, GO };

/* What the program in path is, and why the preloaded library cannot act
 * on it (NULL: it can). A file this user may run but not read is judged
 * by its set-id bits alone. */
static const char *why_no_effect(const char *path, int depth, enum program *what)
{
	static char why[PATH_MAX + 64];
	static unsigned char head[64 * 1024]; /* (a script's is done with before recursing) */
	struct stat st;
	*what = PLAIN;
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return NULL; /* (exec refuses it; a FIFO's open would block) */
	FILE *f = fopen(path, "rb");
	size_t n = f ? fread(head, 1, sizeof head, f) : 0;
	if (f)
		fclose(f);
	char interp[PATH_MAX];
	if (depth < 4 && script_interpreter(head, n, interp, sizeof interp)) {
		const char *inner = why_no_effect(interp, depth + 1, what);
		if (!inner || inner == why)
			return inner;
		snprintf(why, sizeof why, "its interpreter %s: %s", interp, inner);
		return why;
	}
	enum bs_elf_kind kind = bs_elf_kind(head, n);
	if ((kind != BS_ELF_UNKNOWN || !f) && execs_securely(path, &st))
		return *what = SECURE,
		       "it is setuid/setgid or has file capabilities, and the loader ignores LD_PRELOAD for it";
	if (kind == BS_ELF_STATIC)
		return *what = STATIC, "it is statically linked, so nothing is preloaded into it";
	if (kind == BS_ELF_GO)
		return *what = GO, "it is a Go program, which connects without the C library";
	return NULL;
}

enum engine { AUTO, PRELOAD, SECCOMP };

/* The engine for cmd, with at most one warning line: a program neither
 * engine can act on, or an engine this machine cannot run, runs anyway. */
static enum engine choose_engine(const char *cmd, enum engine asked)
{
	static const char *const kinds[] = {"a dynamic program", "a set-id program",
					    "a static binary", "a Go program"};
	const char *level = getenv("BACKOFFSHIM_LOG");
	char path[PATH_MAX];
	enum program what = PLAIN;
	const char *why = NULL;
	if (find_command(cmd, path, sizeof path))
		why = why_no_effect(path, 0, &what);
	else
		snprintf(path, sizeof path, "%s", cmd);
	enum engine e = asked != AUTO ? asked : what == STATIC || what == GO ? SECCOMP : PRELOAD;
	const char *off = NULL;
	if (e == SECCOMP && what == SECURE) {
		off = "no_new_privs would take its privileges";
		e = PRELOAD;
	} else if (e == SECCOMP && (off = bs_sup_unavailable()))
		e = PRELOAD;
	if (off)
		fprintf(stderr, "backoffshim run: warning: the seccomp engine cannot run %s: %s; "
				"running it %s\n", path, off, what == PLAIN ? "with the preload engine" : "as it is");
	else if (e == PRELOAD && why)
		fprintf(stderr, "backoffshim run: warning: the shim will have no effect on %s: %s\n",
			path, why);
	if (level && !strcasecmp(level, "debug")) /* --log debug: say which engine */
		fprintf(stderr, "backoffshim run: engine %s for %s (%s%s)\n",
			e == SECCOMP ? "seccomp" : "preload", path, kinds[what],
			asked == e ? ", asked for" : "");
	return e;
}

/* The settings the seccomp engine applies, loaded as the library loads
 * them; their problems counted, then told in the library's one line. */
static void report(void *ctx, const char *origin, unsigned line, const char *key,
		   const char *value, const char *why)
{
	(void)origin, (void)line, (void)key, (void)value, (void)why;
	++*(unsigned *)ctx;
}

static void setup_log(const struct bs_config *c, const char *cmd)
{
	struct bs_log_style st = {.json = c->log_json};
	const char *base = strrchr(cmd, '/');
	snprintf(st.program, sizeof st.program, "%s", base ? base + 1 : cmd);
	st.time = c->log_time == 1 || (c->log_time < 0 && c->log_file[0]);
	bs_log_set_style(&st);
	int fd = c->log_file[0] ? open(c->log_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
								O_NONBLOCK | O_NOCTTY, 0644)
				: -1;
	bs_log_setup((enum bs_level)c->log_level, fd);
}

static int run_seccomp(char **argv)
{
	static struct bs_config cfg;
	static struct bs_rules rules;
	unsigned problems = 0;
	bs_cli_load(&cfg, &rules, NULL, report, &problems);
	bs_config_check_env_names(environ, report, &problems);
	setup_log(&cfg, argv[0]);
	if (problems) {
		const char *file = getenv("BACKOFFSHIM_CONFIG");
		if (!file || !*file)
			file = access(BS_DEFAULT_CONFIG, F_OK) == 0 ? BS_DEFAULT_CONFIG : NULL;
		bs_config_tell_problems(problems, file, NULL);
	}
	fflush(NULL);
	int status = bs_sup_run(argv, &cfg);
	if (status >= 0)
		return status;
	fprintf(stderr, "backoffshim run: warning: the seccomp engine could not start (%s); "
			"running %s as it is\n", strerror(errno), argv[0]);
	execvp(argv[0], argv);
	int err = errno;
	fprintf(stderr, "backoffshim run: cannot run '%s': %s\n", argv[0], strerror(err));
	return err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN;
}

int bs_cli_engine(const char *sub, const char *v)
{
	static const char *const names[] = {"auto", "preload", "seccomp"};
	for (int i = 0; i < 3; i++)
		if (!strcmp(v, names[i]))
			return i;
	bs_cli_usage(sub, "--engine '%s': expected auto, preload or seccomp", v);
	return -1;
}

/* run's options: -1 with the command at argv[optind], else the exit
 * status (BS_EXIT_USAGE for a usage error). */
static int run_options(int argc, char **argv, enum engine *engine)
{
	struct option longopts[BS_CLI_SETTINGS + 4];
	bs_cli_setting_options(longopts);
	longopts[BS_CLI_SETTINGS] = (struct option){"config", required_argument, NULL, OPT_CONFIG};
	longopts[BS_CLI_SETTINGS + 1] = (struct option){"engine", required_argument, NULL, OPT_ENGINE};
	longopts[BS_CLI_SETTINGS + 2] = (struct option){"help", no_argument, NULL, 'h'};
	longopts[BS_CLI_SETTINGS + 3] = (struct option){NULL, 0, NULL, 0};
	int c;
	while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
		if (c >= BS_CLI_OPT_SETTING && c < OPT_CONFIG) {
			if (bs_cli_take_setting("run", c, optarg))
				return BS_EXIT_USAGE;
		} else if (c == OPT_CONFIG) {
			if (set_config_file(optarg))
				return BS_EXIT_USAGE;
		} else if (c == OPT_ENGINE) {
			int e = bs_cli_engine("run", optarg);
			if (e < 0)
				return BS_EXIT_USAGE;
			*engine = (enum engine)e;
		} else if (c == 'h') {
			fputs(help_text, stdout);
			return 0;
		} else {
			return bs_cli_bad_option("run", c, argv);
		}
	}
	if (optind >= argc)
		return bs_cli_usage("run", "missing the command to run (run [OPTIONS] -- CMD [ARGS...])");
	return -1;
}

/* The command run by the engine: the status to exit with (the
 * program's own under the seccomp engine; the preload engine execs). */
static int run_command(char **argv, enum engine engine)
{
	if (choose_engine(argv[0], engine) == SECCOMP)
		return run_seccomp(argv);
	char lib[PATH_MAX];
	if (bs_cli_find_library(bs_cli_argv0, lib, 1))
		return EXIT_RUN_ERROR;
	if (lib[strcspn(lib, ": ")]) { /* (the loader splits LD_PRELOAD there) */
		fprintf(stderr, "backoffshim run: LD_PRELOAD cannot name %s: its path has a space "
				"or a colon; install the shim elsewhere\n", lib);
		return EXIT_RUN_ERROR;
	}
	if (preload(lib)) {
		fprintf(stderr, "backoffshim run: cannot set LD_PRELOAD: %s\n", strerror(errno));
		return EXIT_RUN_ERROR;
	}
	execvp(argv[0], argv);
	int err = errno;
	fprintf(stderr, "backoffshim run: cannot run '%s': %s\n", argv[0], strerror(err));
	return err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN;
}

int bs_cmd_run(int argc, char **argv)
{
	enum engine engine = AUTO;
	int r = run_options(argc, argv, &engine);
	if (r >= 0) /* (run's own usage errors are 125, as env's are) */
		return r == BS_EXIT_USAGE ? EXIT_RUN_ERROR : r;
	return run_command(argv + optind, engine);
}
