/* config_rules: [dest SPEC] sections and BACKOFFSHIM_DEST_RULES. See config.h
 * and rules.h (what a SPEC is and which one wins). */
#include "config.h"
#include "log.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static int is_global_key(const char *key)
{
	static const char *const global[] = {"unix", "seed", "disable", "level", "file", "time", "format", "shared"};
	for (unsigned i = 0; i < BS_ARRAY_SIZE(global); i++)
		if (!strcasecmp(key, global[i]))
			return 1;
	return 0;
}

int bs_rule_begin(struct bs_config *c, const char *spec, const char *origin, unsigned line,
		  bs_config_report_fn report, void *ctx)
{
	static char why_dup[160];
	const char *why;
	struct bs_spec sp;
	if (!c->rules) {
		report(ctx, origin, line, NULL, spec, "per-destination sections are not read here");
		return -1;
	}
	if (bs_spec_parse(spec, &sp, &why)) {
		report(ctx, origin, line, NULL, spec, why);
		return -1;
	}
	for (unsigned i = 0; i < c->rules->n; i++) {
		const struct bs_rule *o = &c->rules->r[i];
		if (bs_spec_same(&o->spec, &sp)) {
			if (!line && o->line) /* the environment adds to the file's */
				return (int)i;
			snprintf(why_dup, sizeof why_dup,
				 "matches exactly what [dest %s] at %s:%u matches", o->text,
				 o->origin, o->line);
			report(ctx, origin, line, NULL, spec, why_dup);
			return -1;
		}
	}
	if (c->rules->n == BS_RULES_MAX) {
		report(ctx, origin, line, NULL, spec, "more than 32 destination sections");
		return -1;
	}
	struct bs_rule *r = &c->rules->r[c->rules->n];
	memset(r, 0, sizeof *r);
	r->spec = sp;
	snprintf(r->text, sizeof r->text, "%s", spec);
	snprintf(r->origin, sizeof r->origin, "%s", origin);
	r->line = line;
	return (int)c->rules->n++;
}

void bs_rule_key(struct bs_config *c, int i, const char *key, const char *value,
		 const char *origin, unsigned line, bs_config_report_fn report, void *ctx)
{
	const char *why;
	static struct bs_config scratch; /* start-up only: not re-entered */
	if (i < 0 || !c->rules || (unsigned)i >= c->rules->n)
		return; /* the section itself was already reported */
	struct bs_rule *r = &c->rules->r[i];
	if (is_global_key(key)) {
		report(ctx, origin, line, key, value,
		       "applies to the whole process, not to one destination: set it in "
		       "[backoff] (unix, seed, shared, disable) or [log] (level, file, time, format)");
		return;
	}
	scratch = *c;
	if (bs_config_set(&scratch, "backoff", key, value, &why)) {
		report(ctx, origin, line, key, value, why);
		return;
	}
	if (r->nkv == BS_RULE_KEYS || strlen(key) >= sizeof r->kv[0].key ||
	    strlen(value) >= sizeof r->kv[0].value) {
		report(ctx, origin, line, key, value, "too many or too long keys in this section");
		return;
	}
	snprintf(r->kv[r->nkv].key, sizeof r->kv[0].key, "%s", key);
	snprintf(r->kv[r->nkv].value, sizeof r->kv[0].value, "%s", value);
	r->nkv++;
}

void bs_rule_env(struct bs_config *c, const char *text, bs_config_report_fn report,
		 void *ctx)
{
	static const char var[] = "BACKOFFSHIM_DEST_RULES";
	char buf[1024];
	if (strlen(text) >= sizeof buf) {
		report(ctx, var, 0, NULL, NULL, "longer than 1023 characters");
		return;
	}
	strcpy(buf, text);
	for (char *save = NULL, *rule = strtok_r(buf, ";", &save); rule;
	     rule = strtok_r(NULL, ";", &save)) {
		char *eq = strchr(rule, '=');
		if (!eq) {
			report(ctx, var, 0, NULL, rule, "expected SPEC=key:value,...");
			continue;
		}
		*eq = '\0';
		int i = bs_rule_begin(c, rule, var, 0, report, ctx);
		/* key:value pairs split on ','; a piece without ':' continues
		 * the previous value (delays:0,10ms,1s) */
		char *p = eq + 1, key[24] = "", val[96] = "";
		while (p) {
			char *next = strchr(p, ',');
			if (next)
				*next++ = '\0';
			char *colon = strchr(p, ':');
			if (colon) {
				if (*key)
					bs_rule_key(c, i, key, val, var, 0, report, ctx);
				*colon = '\0';
				snprintf(key, sizeof key, "%s", p);
				snprintf(val, sizeof val, "%s", colon + 1);
			} else if (*key && strlen(val) + strlen(p) + 2 < sizeof val) {
				strcat(val, ",");
				strcat(val, p);
			} else {
				report(ctx, var, 0, NULL, p, "expected key:value");
			}
			p = next;
		}
		if (*key)
			bs_rule_key(c, i, key, val, var, 0, report, ctx);
	}
}

void bs_config_finish(struct bs_config *c)
{
	const char *why;
	c->resolve_any = c->resolve != BS_RESOLVE_OFF;
	if (!c->rules)
		return;
	for (unsigned i = 0; i < c->rules->n; i++) {
		struct bs_rule *r = &c->rules->r[i];
		r->cfg = *c;
		r->cfg.rules = NULL;
		for (unsigned k = 0; k < r->nkv; k++)
			bs_config_set(&r->cfg, "backoff", r->kv[k].key, r->kv[k].value, &why);
		c->resolve_any |= r->cfg.resolve != BS_RESOLVE_OFF;
	}
}

const struct bs_config *bs_config_for(const struct bs_config *c, const struct sockaddr *addr,
				      socklen_t len, bs_name_has_fn name_has, void *ctx)
{
	const struct bs_rules *rs = c->rules;
	if (!rs || !rs->n)
		return c;
	const struct bs_config *best = c;
	int best_score = -1;
	for (unsigned i = 0; i < rs->n; i++) {
		int sc = bs_spec_score(&rs->r[i].spec, addr, len, name_has, ctx);
		if (sc > best_score) {
			best_score = sc;
			best = &rs->r[i].cfg;
		}
	}
	return best;
}

/* At most max bytes of outside text, escaped by the line builder (no
 * control byte can reach a terminal), "..." when cut. */
static void put_printable(struct bs_line *l, const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);
	bs_line_mem(l, s, n > max ? max : n);
	if (n > max)
		bs_line_str(l, "...");
}

void bs_config_describe(struct bs_line *l, const char *origin, unsigned line,
			const char *key, const char *value, const char *why)
{
	bs_line_start(l);
	bs_line_event(l, "config");
	bs_line_str(l, "config: ");
	put_printable(l, origin, 200);
	if (line) {
		bs_line_str(l, ":");
		bs_line_u64(l, line);
	}
	if (key) {
		bs_line_str(l, ": ");
		put_printable(l, key, 40);
		if (!value) { /* a problem of the settings as a whole */
			bs_line_str(l, ": ");
			bs_line_str(l, why);
			return;
		}
		bs_line_str(l, " = ");
	} else if (value && line) { /* a [dest ...] section header */
		bs_line_str(l, ": [dest ");
		put_printable(l, value, 60);
		bs_line_str(l, "]: ");
		bs_line_str(l, why);
		bs_line_str(l, "; section ignored");
		return;
	} else if (value && !line) {
		bs_line_str(l, "=");
	} else {
		bs_line_str(l, ": ");
	}
	if (value) {
		bs_line_str(l, "\"");
		put_printable(l, value, 40);
		bs_line_str(l, "\": ");
	}
	bs_line_str(l, why);
	bs_line_str(l, value ? "; value ignored"
		     : bs_config_section_problem(why) ? "; section ignored"
		     : line ? "; line ignored" : "; ignored");
}

/* Does this policy grow its waits from initial_backoff up to max_backoff? */
static int grows(const struct bs_policy *p)
{
	return p->kind == BS_POLICY_GRPC || p->kind == BS_POLICY_EXPONENTIAL ||
	       p->kind == BS_POLICY_RESPONSIVE;
}

/* max_backoff below initial_backoff: the waits never grow. The problem
 * names both values (whichever of them is the mistake). */
static void check_backoffs(const struct bs_policy *p, const char *origin, unsigned line,
			   bs_config_report_fn report, void *ctx)
{
	static char why[160];
	if (!grows(p) || p->max_backoff >= p->initial_backoff)
		return;
	struct bs_line a, b;
	a.n = b.n = 0;
	bs_line_dur(&a, p->max_backoff);
	bs_line_dur(&b, p->initial_backoff);
	snprintf(why, sizeof why,
		 "%.*s is below initial_backoff %.*s: every wait is max_backoff, the schedule "
		 "never grows", (int)a.n, a.buf, (int)b.n, b.buf);
	report(ctx, origin, line, "max_backoff", NULL, why);
}

/* Has a [dest] section the global problem only because it inherits it? */
static int inherits_backoffs(const struct bs_policy *r, const struct bs_policy *g)
{
	return grows(g) && r->initial_backoff == g->initial_backoff &&
	       r->max_backoff == g->max_backoff;
}

/* The shortest first wait c can draw; 0 for a policy that never waits. */
static uint64_t first_wait(const struct bs_config *c)
{
	uint64_t lo = 0, hi;
	if (c->policy.kind != BS_POLICY_OFF)
		bs_policy_wait_range(&c->policy, 1, 0, &lo, &hi);
	return lo;
}

/* max_elapsed not above the first wait: no failed connect is retried. */
static void check_budget(const struct bs_config *c, const char *origin, unsigned line,
			 bs_config_report_fn report, void *ctx)
{
	static char why[200];
	uint64_t first = first_wait(c);
	if (!c->max_elapsed || !first || c->max_elapsed > first)
		return;
	struct bs_line a, b;
	a.n = b.n = 0;
	bs_line_dur(&a, c->max_elapsed);
	bs_line_dur(&b, first);
	snprintf(why, sizeof why,
		 "%.*s is not above the first wait %.*s: no failed connect is ever retried "
		 "(raise max_elapsed, or lower initial_backoff)", (int)a.n, a.buf, (int)b.n, b.buf);
	report(ctx, origin, line, "max_elapsed", NULL, why);
}

void bs_config_check(const struct bs_config *c, const char *origin,
		     bs_config_report_fn report, void *ctx)
{
	check_backoffs(&c->policy, origin, 0, report, ctx);
	check_budget(c, origin, 0, report, ctx);
	for (unsigned i = 0; c->rules && i < c->rules->n; i++) {
		const struct bs_rule *r = &c->rules->r[i];
		if (r->spec.kind == BS_SPEC_UNIX && !c->unix_sockets)
			report(ctx, r->origin, r->line, NULL, r->text,
			       "unix = off, so this section never applies (set unix = on)");
		else if (!inherits_backoffs(&r->cfg.policy, &c->policy))
			check_backoffs(&r->cfg.policy, r->origin, r->line, report, ctx);
		if (r->cfg.max_elapsed != c->max_elapsed || first_wait(&r->cfg) != first_wait(c))
			check_budget(&r->cfg, r->origin, r->line, report, ctx);
	}
}

void bs_config_tell_problems(unsigned n, const char *file,
			     const char *log_problem)
{
	struct bs_line l;
	bs_line_start(&l);
	bs_line_event(&l, "config");
	bs_line_str(&l, "config: ");
	bs_line_u64(&l, n);
	bs_line_str(&l, n == 1 ? " problem" : " problems");
	bs_line_str(&l, "; see them with: backoffshim check-config --env");
	if (file && strcmp(file, "/dev/null")) { /* (/dev/null: no file) */
		bs_line_str(&l, " ");
		bs_line_str(&l, file);
	}
	if (log_problem) {
		bs_line_str(&l, "; the log file: ");
		bs_line_str(&l, log_problem);
	}
	bs_line_emit(&l, BS_LOG_ERROR);
}
