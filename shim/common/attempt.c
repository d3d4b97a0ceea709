/* attempt: one connect's retry decisions. See attempt.h. */
#include "attempt.h"

#include "addr.h"
#include "config.h"
#include "policy.h"
#include "table.h"
#include "timeout.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

void bs_attempt_init(struct bs_attempt *a, const struct bs_config *cfg, uint64_t start,
		     uint64_t prog_timeout)
{
	/* (the longest any engine's probe runs: the seccomp engine's) */
	uint64_t most = bs_policy_longest_wait(&cfg->policy) + cfg->policy.min_connect_timeout;
	*a = (struct bs_attempt){.anchor_at = start, .probe_most = most + BS_PROBE_GRACE};
	bs_budget_init(&a->b, start, cfg->max_elapsed, cfg->max_attempts, prog_timeout);
}

void bs_attempt_join(struct bs_attempt *a, uint64_t state, uint32_t resets, int last_err)
{
	a->seen_fail = bs_state_failures(state);
	a->resets = resets;
	if (last_err > 0)
		a->last_err = last_err;
}

void bs_attempt_failed(struct bs_attempt *a, int err)
{
	a->own_failed = 1;
	if (err > 0)
		a->last_err = err;
}

/* The destination's steps since the attempt last looked (all of them if
 * its count went down: it was healthy or reset in between), and its own
 * failure, which counts one even when it folded into another's step. */
static void count_steps(struct bs_attempt *a, const struct bs_attempt_view *v, uint64_t now)
{
	uint32_t f = bs_state_failures(v->state);
	uint32_t more = f >= a->seen_fail ? f - a->seen_fail : f;
	uint32_t own = a->own_failed ? 1u : 0u;
	/* (another's failure is the newest, or the only error known) */
	if (v->last_err > 0 && (more > own || !a->last_err))
		a->last_err = v->last_err;
	if (more || own) {
		bs_budget_count(&a->b, more > own ? more : own);
		a->anchor_at = now;
	}
	a->seen_fail = f;
	a->own_failed = 0;
}

/* The entry's next allowed time, bounded by longest_wait after anchor_at. */
static uint64_t due_at(const struct bs_attempt *a, uint64_t state, uint64_t longest_wait)
{
	uint64_t next = bs_state_next_at(state);
	uint64_t bound = a->anchor_at + longest_wait;
	if (bound < a->anchor_at)
		bound = UINT64_MAX;
	return next < bound ? next : bound;
}

static struct bs_decision verdict(enum bs_verdict v, uint64_t until, int reset)
{
	return (struct bs_decision){.verdict = v, .until = until, .reset = reset};
}

/* Due: the probe, unless a live holder still has it. */
static struct bs_decision probe_or_wait(struct bs_attempt *a, const struct bs_attempt_view *v,
					uint64_t now, int join)
{
	uint64_t stale = bs_attempt_probe_stale(a, v->probe, now);
	if (v->probe && stale > now && v->probe_live) {
		uint64_t end = bs_budget_end(&a->b);
		return verdict(BS_WAIT, stale < end ? stale : end, 0);
	}
	return (struct bs_decision){.verdict = BS_TAKE_PROBE, .until = now, .join = join,
				    .probe = v->probe, .state = v->state};
}

struct bs_decision bs_attempt_decide(struct bs_attempt *a, const struct bs_attempt_view *v,
				     uint64_t now, uint64_t longest_wait)
{
	count_steps(a, v, now);
	if (v->resets != a->resets) {
		a->resets = v->resets; /* the operator says it is back: go now */
		return verdict(BS_GO, now, 1);
	}
	if (bs_budget_check(&a->b, now) != BS_STOP_NONE)
		return verdict(BS_END, now, 0);
	if (bs_state_may_attempt(v->state))
		return verdict(BS_GO, now, 0);
	uint64_t due = due_at(a, v->state, longest_wait);
	int join = v->join_at < due;
	uint64_t at = join ? v->join_at : due;
	if (now >= at)
		return probe_or_wait(a, v, now, join && now < due);
	if (bs_budget_check_next(&a->b, at) != BS_STOP_NONE)
		return verdict(BS_END, now, 0);
	return verdict(BS_WAIT, at, 0);
}

struct bs_decision bs_attempt_paced(struct bs_attempt *a, uint64_t interval, uint64_t now)
{
	uint64_t at = now + interval < now ? UINT64_MAX : now + interval;
	if (a->own_failed) {
		a->own_failed = 0;
		bs_budget_count(&a->b, 1);
		if (bs_budget_check(&a->b, now) != BS_STOP_NONE ||
		    bs_budget_check_next(&a->b, at) != BS_STOP_NONE)
			return verdict(BS_END, now, 0);
	}
	if (!interval)
		return verdict(BS_GO, now, 0);
	uint64_t end = bs_budget_end(&a->b);
	return verdict(BS_WAIT, at < end ? at : end, 0);
}

uint64_t bs_attempt_probe(uint64_t now, uint64_t timeout, uint32_t tid)
{
	return bs_probe_make(now + BS_PROBE_GRACE + timeout, tid);
}

uint64_t bs_attempt_probe_stale(struct bs_attempt *a, uint64_t p, uint64_t now)
{
	if (p != a->probe_seen)
		a->probe_seen = p, a->probe_seen_at = now;
	uint64_t stale = bs_probe_stale_at(p), bound = a->probe_seen_at + a->probe_most;
	return stale < bound ? stale : bound;
}

int bs_attempt_lock_busy_waits(struct bs_attempt *a, uint64_t probe, uint64_t now,
			       int *waited_empty)
{
	if (probe)
		return bs_attempt_probe_stale(a, probe, now) > now;
	if (*waited_empty)
		return 0;
	*waited_empty = 1;
	return 1;
}

enum bs_no_wait bs_attempt_no_wait(uint64_t state, uint64_t outcome_at, uint64_t every,
				   uint64_t now)
{
	if (bs_state_may_attempt(state))
		return BS_NW_GO;
	int due = now >= bs_state_next_at(state);
	if (!every)
		return due ? BS_NW_DUE : BS_NW_WINDOW;
	if (outcome_at > now && outcome_at - now > every)
		outcome_at = 0; /* later than any real outcome: garbage, claimable */
	if (outcome_at > now || now - outcome_at < every)
		return BS_NW_WINDOW; /* one real attempt per `every`, due or not */
	return due ? BS_NW_CLAIM_DUE : BS_NW_CLAIM_PROBE;
}

int bs_attempt_error_is_final(int err, const struct sockaddr *addr, bs_sockopt_fn opt, void *sock,
			      int (*host)(void))
{
	if (err == ETIMEDOUT)
		return bs_timeout_bound_is_programs(opt(sock, IPPROTO_TCP, TCP_USER_TIMEOUT),
						    opt(sock, IPPROTO_TCP, TCP_SYNCNT), host);
	return err == ENETUNREACH &&
	       bs_addr_never_routed(addr, addr && addr->sa_family == AF_INET6 &&
					      opt(sock, IPPROTO_IPV6, IPV6_V6ONLY));
}
