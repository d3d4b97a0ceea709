/* show: the effective configuration as text, and each wait's range. See cli.h. */
#include "cli.h"
#include "errname.h"

/* What each policy but grpc does (grpc's line names its jitter mode). */
static const char *const described[] = {
	[BS_POLICY_LIST] = "a fixed list of waits, each drawn in [0.5 d, 1.5 d]",
	[BS_POLICY_EXPONENTIAL] = "no jitter; stops once a wait would reach max_backoff",
	[BS_POLICY_OFF] = "pass-through: a failed connect is returned at once",
	[BS_POLICY_RESPONSIVE] = "adaptive pacing: every connect waits the destination's "
				 "current interval, which failures raise and successes lower",
};

static void key_dur(FILE *f, const char *key, uint64_t ns, const char *note)
{
	char b[32];
	bs_cli_dur(ns, b, sizeof b);
	fprintf(f, "  %-20s = %s%s\n", key, b, note);
}

static void key_delays(FILE *f, const struct bs_policy *p)
{
	const uint64_t *l = p->ndelays ? p->delays : bs_default_delays;
	uint32_t n = p->ndelays ? p->ndelays : 10;
	char b[32];
	fprintf(f, "  %-20s = ", "delays");
	for (uint32_t i = 0; i < n; i++) {
		bs_cli_dur(l[i], b, sizeof b);
		fprintf(f, "%s%s", i ? ", " : "", b);
	}
	fprintf(f, "%s\n", p->ndelays ? "" : " (the default list)");
}

static void key_errs(FILE *f, const struct bs_config *c)
{
	int any = 0;
	fprintf(f, "  %-20s = ", "retry_on");
	for (int e = 1; e < 64 * BS_ERRSET_WORDS; e++) {
		if (!bs_config_retries(c, e))
			continue;
		const char *name = bs_errno_name(e);
		if (name)
			fprintf(f, "%s%s", any ? ", " : "", name);
		else
			fprintf(f, "%serrno %d", any ? ", " : "", e);
		any = 1;
	}
	fputc('\n', f);
}

/* The keys the policy itself reads. */
static void policy_keys(FILE *f, const struct bs_policy *p)
{
	int grpc = p->kind == BS_POLICY_GRPC, expo = p->kind == BS_POLICY_EXPONENTIAL;
	if (p->kind == BS_POLICY_LIST)
		key_delays(f, p);
	if (p->kind == BS_POLICY_LIST || p->kind == BS_POLICY_OFF)
		return;
	key_dur(f, "initial_backoff", p->initial_backoff, "");
	if (expo || (grpc && p->jitter_mode != BS_JITTER_DECORRELATED))
		fprintf(f, "  %-20s = %g\n", "multiplier", p->multiplier);
	if (grpc && p->jitter_mode == BS_JITTER_PROPORTIONAL)
		fprintf(f, "  %-20s = %g\n", "jitter", p->jitter);
	if (grpc)
		fprintf(f, "  %-20s = %s\n", "jitter_mode",
			bs_name_of(&bs_jmode_names, p->jitter_mode));
	key_dur(f, "max_backoff", p->max_backoff,
		expo ? " (a wait that would reach it ends the retries)" : "");
	if (p->kind != BS_POLICY_RESPONSIVE)
		return;
	fprintf(f, "  %-20s = %g\n", "up_multiplier", p->up_multiplier);
	fprintf(f, "  %-20s = %g\n", "down_multiplier", p->down_multiplier);
	fprintf(f, "  %-20s = %u (consecutive successes per step down)\n",
		"down_threshold", p->down_threshold);
	fprintf(f, "  %-20s = %g\n", "randomization_factor", p->randomization_factor);
	key_dur(f, "max_randomization", p->max_randomization, "");
}

/* The keys that matter to every policy that retries. */
static void retry_keys(FILE *f, const struct bs_config *c)
{
	const struct bs_policy *p = &c->policy;
	key_dur(f, "min_connect_timeout", p->min_connect_timeout,
		" (least time a retried attempt gets)");
	fprintf(f, "  %-20s = %u%s\n", "max_attempts", c->max_attempts,
		c->max_attempts ? " (per connect() call)" : " (unlimited)");
	key_dur(f, "max_elapsed", c->max_elapsed,
		c->max_elapsed ? " (per connect() call)" : " (unlimited)");
	key_errs(f, c);
	fprintf(f, "  %-20s = %s\n", "nonblocking",
		bs_name_of(&bs_nbmode_names, c->nonblocking));
	key_dur(f, "healthy_after", c->healthy_after, "");
	fprintf(f, "  %-20s = %s\n", "unix", c->unix_sockets ? "on" : "off");
}

/* The keys of the process as a whole: the table, disable and [log]. */
static void process_keys(FILE *f, const struct bs_config *c)
{
	fprintf(f, "  %-20s = %s\n", "shared", c->shared);
	fprintf(f, "  %-20s = %s%s\n", "disable", c->disable ? "on" : "off",
		c->disable ? " (the library passes everything through)" : "");
	fprintf(f, "[log]\n");
	fprintf(f, "  %-20s = %s\n", "level", bs_name_of(&bs_level_names, c->log_level));
	fprintf(f, "  %-20s = %s\n", "file", c->log_file[0] ? c->log_file : "(stderr)");
	fprintf(f, "  %-20s = %s\n", "time",
		c->log_time < 0 ? "(on for a log file, off on stderr)" : c->log_time ? "on" : "off");
	fprintf(f, "  %-20s = %s\n", "format", bs_name_of(&bs_logfmt_names, c->log_json));
}

void bs_cli_show_config(FILE *f, const struct bs_config *c)
{
	const struct bs_policy *p = &c->policy;
	fprintf(f, "policy: %s (", bs_name_of(&bs_policy_names, p->kind));
	if (p->kind == BS_POLICY_GRPC)
		fprintf(f, "gRPC connection backoff, %s jitter)\n",
			bs_name_of(&bs_jmode_names, p->jitter_mode));
	else
		fprintf(f, "%s)\n", described[p->kind]);
	policy_keys(f, p);
	if (p->kind != BS_POLICY_OFF)
		retry_keys(f, c);
	process_keys(f, c);
}
