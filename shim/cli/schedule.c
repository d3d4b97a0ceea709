/* backoffshim schedule: preview the effective policy and its next waits. */
#include "cli.h"
#include "log.h"
#include "mix.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROWS 100000

static const char help_text[] =
	"Usage: backoffshim schedule [--config FILE] [--dest ADDR:PORT] [-n N] [--seed S]\n"
	"                            [RUN OPTIONS] [[--] CMD [ARGS...]]\n"
	"\n"
	"Loads the configuration as the library does - built-in defaults, then the\n"
	"INI file (FILE, else $BACKOFFSHIM_CONFIG, else " BS_DEFAULT_CONFIG " if it\n"
	"exists), then the BACKOFFSHIM_* variables - and prints the effective policy\n"
	"and the next N waits: for each failed attempt, the wait drawn, the range it\n"
	"is drawn from and when the next attempt starts. 'stop' marks the failure\n"
	"after which no further attempt is made (the policy or the budget of one\n"
	"connect() call says so). Configuration problems are printed on stderr as\n"
	"the library prints them; the schedule is printed anyway.\n"
	"\n"
	"Options:\n"
	"  --config FILE      read FILE instead of $BACKOFFSHIM_CONFIG / " BS_DEFAULT_CONFIG "\n"
	"  --dest ADDR:PORT   preview the settings a destination gets: the [dest ...]\n"
	"                     section that matches it (most specific wins) or the\n"
	"                     global [backoff] ones. 127.0.0.1:5432, [::1]:6379,\n"
	"                     db.internal:5432 (resolved here) or unix:/run/app.sock\n"
	"  -n N               how many waits to show (default 10)\n"
	"  --seed S           seed of the random draws (default: the configured seed,\n"
	"                     else a random one, which is printed); the same seed\n"
	"                     gives the same output\n"
	"  --initial-backoff D, --max-backoff D, --multiplier X, --jitter X,\n"
	"  --max-elapsed D, --max-attempts N, --policy NAME, --log LEVEL, --pace,\n"
	"  --resolve MODE, --engine E\n"
	"                     as for run (they set the same variables; both engines\n"
	"                     keep one schedule), so that a run line can be\n"
	"                     previewed; a trailing [--] CMD ARGS... is accepted,\n"
	"                     as run takes it, and not run\n"
	"  -h, --help         show this help\n"
	"\n"
	"Exit status: 0; 1 if the config file cannot be read (missing, unreadable,\n"
	"not a regular file, too large: the schedule shown is then the defaults');\n"
	"2 on a usage error.\n";

/* The loader's context. */
struct load_ctx {
	const char *config; /* --config, or NULL */
	unsigned problems;
	int unreadable;     /* the config file could not be read */
};

/* The library's own wording, on stderr. */
static void report(void *ctx, const char *origin, unsigned line, const char *key,
		   const char *value, const char *why)
{
	struct load_ctx *x = ctx;
	struct bs_line l;
	x->problems++;
	if (!line && !key && !value) /* the file itself: missing, unreadable, not a file... */
		x->unreadable = 1;
	bs_config_describe(&l, origin, line, key, value, why);
	bs_line_emit_fd(&l, 2);
}

/* Where the settings come from; returns the ones that apply to dest. */
static const struct bs_config *print_sources(const struct bs_config *c, struct load_ctx *x,
					     const struct bs_cli_dest *dest)
{
	const char *file = x->config ? x->config : getenv("BACKOFFSHIM_CONFIG");
	printf("config file: ");
	if (file && *file)
		bs_cli_printable(stdout, file, 200);
	else if (access(BS_DEFAULT_CONFIG, F_OK) == 0)
		fputs(BS_DEFAULT_CONFIG, stdout);
	else
		fputs("none (" BS_DEFAULT_CONFIG " does not exist): built-in defaults", stdout);
	putchar('\n');
	int n = 0;
	for (char **e = environ; *e; e++) {
		if (!bs_config_var_known(*e) || strncmp(*e, "BACKOFFSHIM_CONFIG=", 19) == 0)
			continue; /* (an unknown one is among the problems) */
		fputs(n++ ? ", " : "environment: ", stdout);
		bs_cli_printable(stdout, *e, 80);
	}
	if (n)
		putchar('\n');
	if (x->problems)
		printf("problems: %u (printed on stderr; each bad value, line or section "
		       "was ignored)\n", x->problems);
	if (dest) {
		const struct bs_rule *rule;
		c = bs_cli_dest_config(c, dest, &rule);
		bs_cli_dest_show(stdout, dest, rule);
	} else {
		bs_cli_rules_show(stdout, c);
	}
	bs_cli_show_config(stdout, c);
	return c;
}

static void print_rows(const struct bs_config *c, uint64_t seed, uint32_t n)
{
	const struct bs_policy *p = &c->policy;
	char w[32], lo[32], hi[32], tot[32];
	uint64_t prev = 0, total = 0;
	printf("\nThe next %u waits. Row N: attempt N failed, the shim waits 'wait' (drawn\n"
	       "from [min, max]) and attempt N+1 starts at 'total', counted from the start\n"
	       "of attempt 1 (each attempt failing at once, e.g. refused).\n", n);
	printf("%7s  %-10s %-10s %-10s %s\n", "attempt", "wait", "min", "max", "total");
	for (uint32_t k = 1; k <= n; k++) {
		double u = bs_policy_unit(bs_mix64(seed + (uint64_t)(k - 1) * BS_GOLDEN));
		uint64_t d = p->kind == BS_POLICY_RESPONSIVE ? bs_responsive_up(p, prev, u)
							     : bs_policy_wait(p, k, prev, u);
		const char *stop = NULL;
		if (d == BS_STOP)
			stop = p->kind == BS_POLICY_OFF
				       ? "policy off: a failed connect is not retried"
				       : "the policy stops: the next wait would reach max_backoff";
		else if (c->max_attempts && k >= c->max_attempts)
			stop = "max_attempts reached";
		else if (c->max_elapsed && (d >= c->max_elapsed || total + d >= c->max_elapsed))
			stop = "the next attempt would start after max_elapsed";
		bs_cli_dur(total, tot, sizeof tot);
		if (stop) {
			printf("%7u  %-10s %-10s %-10s %-10s (%s)\n", k, "stop", "-", "-", tot, stop);
			return;
		}
		uint64_t a, b;
		bs_policy_wait_range(p, k, prev, &a, &b);
		total = total + d < total ? UINT64_MAX : total + d;
		bs_cli_dur(d, w, sizeof w);
		bs_cli_dur(a, lo, sizeof lo);
		bs_cli_dur(b, hi, sizeof hi);
		bs_cli_dur(total, tot, sizeof tot);
		printf("%7u  %-10s %-10s %-10s %s\n", k, w, lo, hi, tot);
		prev = d;
	}
}

static uint64_t random_seed(void)
{
	uint64_t s;
	if (getrandom(&s, sizeof s, GRND_NONBLOCK) == (ssize_t)sizeof s)
		return s;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return bs_mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid());
}

struct schedule_opts {
	struct load_ctx x;
	struct bs_cli_dest dest; /* dest.text: NULL without --dest */
	int have_seed;
	uint64_t rows, seed;
};

/* The command line into *o: -1 to go on, or the exit status to end with. */
static int parse_options(int argc, char **argv, struct schedule_opts *o)
{
	static const struct option fixed[] = {
		{"config", required_argument, NULL, 'c'},
		{"dest", required_argument, NULL, 'd'},
		{"seed", required_argument, NULL, 's'},
		{"engine", required_argument, NULL, 'e'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct option longopts[BS_CLI_SETTINGS + BS_ARRAY_SIZE(fixed)];
	bs_cli_setting_options(longopts);
	memcpy(longopts + BS_CLI_SETTINGS, fixed, sizeof fixed);
	const char *why;
	int c;
	/* (a run line's "[--] CMD ARGS..." is allowed, as run takes it, and not run) */
	while ((c = getopt_long(argc, argv, "+:hn:", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			if (!*optarg)
				return bs_cli_usage("schedule", "--config needs a file name");
			o->x.config = optarg;
			break;
		case 'd':
			if (bs_cli_dest_parse(optarg, &o->dest))
				return bs_cli_usage("schedule", "--dest '%s': expected ADDR:PORT, e.g. "
						    "127.0.0.1:5432, [::1]:6379, db.internal:5432 "
						    "or unix:/run/app.sock", optarg);
			break;
		case 'n':
			if (bs_parse_uint(optarg, MAX_ROWS, &o->rows, &why))
				return bs_cli_usage("schedule", "-n '%s': %s (at most %d)", optarg,
						    why, MAX_ROWS);
			break;
		case 's':
			if (bs_parse_uint(optarg, UINT64_MAX, &o->seed, &why))
				return bs_cli_usage("schedule", "--seed '%s': %s", optarg, why);
			o->have_seed = 1;
			break;
		case 'e': /* run's: both engines keep one schedule */
			if (bs_cli_engine("schedule", optarg) < 0)
				return BS_EXIT_USAGE;
			break;
		case 'h':
			fputs(help_text, stdout);
			return 0;
		default:
			if (c < BS_CLI_OPT_SETTING || c >= BS_CLI_OPT_SETTING + BS_CLI_SETTINGS)
				return bs_cli_bad_option("schedule", c, argv);
			if (bs_cli_take_setting("schedule", c, optarg))
				return BS_EXIT_USAGE;
		}
	}
	return -1;
}

/* --seed, else the configured seed, else a random one; printed with where
 * it came from. */
static uint64_t choose_seed(const struct schedule_opts *o, const struct bs_config *cfg)
{
	uint64_t seed = o->have_seed ? o->seed : cfg->seed_set ? cfg->seed : random_seed();
	const char *how = o->have_seed    ? "--seed"
			  : cfg->seed_set ? "the configured seed"
					  : "random; pass --seed to repeat";
	printf("seed: %llu (%s)\n", (unsigned long long)seed, how);
	return seed;
}

int bs_cmd_schedule(int argc, char **argv)
{
	static struct bs_rules rules;
	struct schedule_opts o = {.x = {NULL, 0, 0}, .rows = 10};
	int status = parse_options(argc, argv, &o);
	if (status >= 0)
		return status;

	struct bs_config all;
	bs_cli_load(&all, &rules, o.x.config, report, &o.x);
	bs_config_check_env_names(environ, report, &o.x);
	const struct bs_config *cfg = print_sources(&all, &o.x, o.dest.text ? &o.dest : NULL);
	uint64_t seed = choose_seed(&o, cfg);
	if (o.rows)
		print_rows(cfg, seed, (uint32_t)o.rows);
	return o.x.unreadable ? 1 : 0; /* (the schedule shown is the defaults') */
}
