/*
 * responsive: adaptive pacing for rate-limited servers (policy =
 * responsive). Every connect() to the destination first waits its current
 * interval — successes included — until the interval is back to 0. A
 * failure raises the interval, every down_threshold consecutive successes
 * lower it (the arithmetic is bs_responsive_up/down in policy.c). A blocking
 * call retries within its budget; a non-blocking one waits (retry mode) or
 * not (pace, off) and reports its outcome like any other.
 */
#include "responsive.h"

#include "attempt.h"
#include "budget.h"
#include "clock.h"
#include "errname.h"
#include "log.h"
#include "outcome.h"
#include "policy.h"
#include "real.h"
#include "ret.h"
#include "role.h"
#include "shared.h"
#include "shim.h"
#include "sock.h"

#include <errno.h>

static void log_stats(const struct bs_entry *e, const struct sockaddr *addr, socklen_t len,
		      const char *what, int err)
{
	enum bs_level lvl = err ? BS_LOG_INFO : BS_LOG_DEBUG;
	if (!bs_log_enabled(lvl))
		return;
	struct bs_line l;
	bs_dest_line(&l, addr, len, "pace", err);
	if (err) {
		bs_line_str(&l, bs_errno_msg(err));
		bs_line_str(&l, "; ");
	}
	bs_line_str(&l, what);
	bs_line_str(&l, ", interval ");
	bs_line_dur(&l, atomic_load(&e->interval));
	static const char *const names[] = {" (calls ", ", up ", ", down ", ", waits "};
	const _Atomic uint32_t *const counts[] = {&e->n_calls, &e->n_up, &e->n_down, &e->n_waits};
	for (int i = 0; i < 4; i++) {
		bs_line_str(&l, names[i]);
		bs_line_u64(&l, atomic_load(counts[i]));
	}
	bs_line_str(&l, ", waited ");
	bs_line_dur(&l, atomic_load(&e->waited));
	bs_line_str(&l, ")");
	bs_line_emit(&l, lvl);
}

void bs_responsive_outcome(const struct bs_config *cfg, struct bs_entry *e,
			   const struct sockaddr *addr, socklen_t len, int err)
{
	const struct bs_policy *p = &cfg->policy;
	uint64_t iv = atomic_load(&e->interval), want; /* (up and down bound what they make) */
	uint32_t th = p->down_threshold ? p->down_threshold : 1;
	if (err)
		atomic_store(&e->succ, 0);
	else if ((atomic_fetch_add(&e->succ, 1) + 1) % th || !iv)
		return;
	do
		want = (err ? bs_responsive_up : bs_responsive_down)(p, iv,
								   bs_policy_unit(bs_random()));
	while (!atomic_compare_exchange_weak(&e->interval, &iv, want));
	atomic_fetch_add(err ? &e->n_up : &e->n_down, 1);
	if (err)
		atomic_store(&e->last_err, (uint32_t)err);
	log_stats(e, addr, len, err ? "went up" : "went down", err);
}

/* Sleep until `until` (a futex nobody wakes), counted in the entry's
 * stats. EINTR if a signal should end the call: nothing is in flight then,
 * and EINTR from connect() would say otherwise. */
static int pause_until(struct bs_entry *e, uint64_t until, int has_tv)
{
	uint32_t word = 0;
	uint64_t from = bs_now();
	struct bs_intr intr;
	bs_intr_begin(&intr, has_tv);
	bs_intr_before_wait(&intr);
	for (int i = 0; i < 1000 && bs_now() < until; i++)
		if (bs_wait_cancellable(&word, 0, until) == EINTR && bs_intr_returns_eintr(&intr))
			return EINTR;
	atomic_fetch_add(&e->n_waits, 1);
	atomic_fetch_add(&e->waited, until > from ? until - from : 0);
	return 0;
}

/* The call ends for the reason in a's budget: the common give-up line,
 * -(the last error seen); when the budget's time ran out, the stats line
 * too (info, as it always was; not for max_attempts or a signal). */
static int give_up_with_stats(struct bs_entry *e, const struct bs_dest *d,
			      const struct bs_attempt *a)
{
	int last = a->last_err ? a->last_err : bs_entry_last_err(e);
	if (a->b.stop != BS_STOP_SIGNAL && a->b.stop != BS_STOP_MAX_ATTEMPTS)
		log_stats(e, d->addr, d->len, "giving up (budget spent)", last);
	return bs_outcome_give_up(d, &a->b, last);
}

/* The attempt model's verdicts (bs_attempt_paced), carried out. */
int bs_responsive_connect(const struct bs_config *cfg, int fd, const struct sockaddr *addr,
			  socklen_t len, uint64_t key)
{
	uint64_t start = bs_now();
	struct bs_dest d = {key, addr, len};
	struct bs_entry *e = bs_shared_claim(&d, start, cfg->policy.max_backoff);
	if (!e)
		return (int)BS_NEG(bs_real_connect(fd, addr, len));
	atomic_fetch_add(&e->n_calls, 1);
	atomic_store(&e->last_used, start); /* in use: not to be reclaimed */
	int blocking = bs_sock_is_blocking_stream(fd);
	int paced = blocking || bs_nb_mode(cfg) == BS_NB_RETRY;
	/* the program's SO_SNDTIMEO bounds the whole call */
	uint64_t prog = blocking ? bs_sock_sndtimeo_ns(fd) : BS_BUDGET_NO_TIMEOUT;
	struct bs_attempt a;
	bs_attempt_init(&a, cfg, start, prog);
	for (;;) { /* (ends by the budget, or at a success) */
		uint64_t iv = paced ? bs_responsive_bounded(&cfg->policy, atomic_load(&e->interval)) : 0;
		struct bs_decision v = bs_attempt_paced(&a, iv, bs_now());
		if (v.verdict == BS_END)
			return give_up_with_stats(e, &d, &a);
		if (v.verdict == BS_WAIT) {
			if (pause_until(e, v.until, prog != BS_BUDGET_NO_TIMEOUT) == EINTR) {
				bs_budget_stop(&a.b, BS_STOP_SIGNAL);
				return give_up_with_stats(e, &d, &a);
			}
			if (!bs_table_owns(bs_tab(), e, key)) /* entry reclaimed */
				return (int)BS_NEG(bs_real_connect(fd, addr, len));
		}
		uint64_t t0 = bs_now();
		int r = (int)BS_NEG(bs_real_connect(fd, addr, len));
		if (r == -EINPROGRESS)
			return bs_outcome_started(cfg, fd, addr, len, key, t0);
		if (r == 0) {
			bs_responsive_outcome(cfg, e, addr, len, 0);
			bs_outcome_connected(&d, fd, t0);
			return 0;
		}
		if (!bs_config_retries(cfg, -r) || bs_sock_error_is_final(fd, addr, -r))
			return r;
		bs_responsive_outcome(cfg, e, addr, len, -r);
		bs_attempt_failed(&a, -r);
		if (!blocking || bs_res_has_alternative(bs_res(), key, bs_dest_host(&d), bs_now(),
							BS_RES_FALLBACK))
			return r;
	}
}
