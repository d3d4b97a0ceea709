/*
 * cli: the `backoffshim` command (run, schedule, check-config, status,
 * reset).
 *
 * An ordinary program, not preloaded: it may use stdio, the heap and exit.
 * It links the same shim/common modules as the library, so values are
 * parsed and the schedule is computed by the very code the library runs.
 * Usage errors print one line naming the problem and a pointer to --help
 * on stderr, and exit 2. Output never contains colour codes.
 */
#ifndef BS_CLI_H
#define BS_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "config.h"
#include "util.h"

#include "version.h"

#define BS_EXIT_USAGE 2

extern const char *bs_cli_argv0;

/* The library `run` would preload (next to argv0, DIR/../lib, then the
 * install prefix), as a real path into out; 0, or -1 if none is found
 * (after a message naming every candidate if `say`). */
int bs_cli_find_library(const char *argv0, char out[4096], int say);

/* run's options that set one BACKOFFSHIM_* variable each (--max-backoff,
 * --pace...); schedule takes them too, so that a run line can be previewed.
 * bs_cli_setting_options writes their BS_CLI_SETTINGS getopt_long entries,
 * whose values are BS_CLI_OPT_SETTING + i. bs_cli_take_setting applies the
 * one getopt_long returned, its value checked as the library would check
 * it: 0, or sub's usage error (BS_EXIT_USAGE, after the message). */
#define BS_CLI_OPT_SETTING 256
#define BS_CLI_SETTINGS 10
struct option;
void bs_cli_setting_options(struct option *out);
int bs_cli_take_setting(const char *sub, int opt, const char *value);

/* Subcommands: argv[0] is the subcommand's name. Each returns an exit status
 * (run returns only when it could not exec). */
int bs_cmd_run(int argc, char **argv);
int bs_cmd_schedule(int argc, char **argv);
int bs_cmd_check_config(int argc, char **argv);
int bs_cmd_status(int argc, char **argv);
int bs_cmd_reset(int argc, char **argv);

/* "backoffshim SUB: <message>" and "Try 'backoffshim SUB --help'." on
 * stderr; returns BS_EXIT_USAGE. sub may be NULL for the top level. */
int bs_cli_usage(const char *sub, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The usage error for what getopt_long returned ('?' or ':'), using optopt
 * and argv[optind - 1]. Returns BS_EXIT_USAGE. */
int bs_cli_bad_option(const char *sub, int ret, char **argv);
/* --engine's value (run's, and schedule's, which takes run's options):
 * 0 auto, 1 preload, 2 seccomp; else -1 after the usage error. */
int bs_cli_engine(const char *sub, const char *v);

/* A duration in the units the config accepts: "0", "250ms", "1.6s", "2m",
 * "409.6ms"; at most 3 decimals (rounded). buf needs 32 bytes. */
void bs_cli_dur(uint64_t ns, char *buf, size_t cap);

/* getenv as a bs_config_getenv_fn (ctx unused). */
const char *bs_cli_getenv(void *ctx, const char *name);

/* The settings the library would use, loaded as it loads them (defaults,
 * the INI file, the BACKOFFSHIM_* variables; [dest ...] sections into
 * rules), but with file, if not NULL, in place of $BACKOFFSHIM_CONFIG.
 * Problems go to report(ctx, ...), or nowhere if report is NULL. */
void bs_cli_load(struct bs_config *c, struct bs_rules *rules, const char *file,
		 bs_config_report_fn report, void *ctx);

/* s with control and non-ASCII bytes as '?', cut at max bytes ("..."). */
void bs_cli_printable(FILE *f, const char *s, size_t max);

/* Print the effective configuration (the policy and every key that matters
 * to it) as "  key = value" lines. Defined in show.c. */
void bs_cli_show_config(FILE *f, const struct bs_config *c);

/* schedule --dest (dest.c): ADDR:PORT, [V6]:PORT, NAME:PORT (resolved
 * here; its [dest NAME:PORT] section applies) or unix:PATH. */
struct bs_cli_dest {
	const char *text;
	struct sockaddr_storage ss;
	socklen_t len;
	int is_name;
	/* what the name resolved to, for the [dest NAME] rules */
	uint64_t name;          /* its hash, 0 if not a name */
	uint64_t keys[16];      /* each address's key, port 0 */
	unsigned nkeys;
	int unresolved;         /* a name that does not resolve here */
};
/* 0, or -1 if text is not one of the forms above. */
int bs_cli_dest_parse(const char *text, struct bs_cli_dest *d);
/* The settings the library would use for d, and the rule they come from
 * (NULL: the global ones). */
const struct bs_config *bs_cli_dest_config(const struct bs_config *c,
					   const struct bs_cli_dest *d,
					   const struct bs_rule **rule);
/* "destination: ..." and where its settings come from. */
void bs_cli_dest_show(FILE *f, const struct bs_cli_dest *d, const struct bs_rule *rule);
/* The [dest ...] sections loaded, if any. */
void bs_cli_rules_show(FILE *f, const struct bs_config *c);

#endif
