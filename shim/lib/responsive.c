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

#include "addr.h"
#include "attempt.h"
#include "budget.h"
#include "clock.h"
#include "errname.h"
#include "log.h"
#include "outcome.h"
#include "policy.h"
#include "real.h"
#include "role.h"
#include "shim.h"
#include "sock.h"

#include <errno.h>

static void log_stats(const struct bs_entry *e, const struct sockaddr *addr, socklen_t len,
		      const char *what, int err)
{
	enum bs_level lvl = err ? BS_LOG_INFO : BS_LOG_DEBUG;
	if (!bs_log_enabled(lvl))
		return;
	char name[128];
	struct bs_line l;
	bs_addr_format(addr, len, name, sizeof name);
	bs_line_start(&l);
	bs_line_event(&l, "pace");
	bs_line_fields(&l, name, 0, UINT64_MAX, err);
	bs_line_str(&l, "connect ");
	bs_line_str(&l, name);
	bs_line_str(&l, ": ");
	if (err) {
		bs_line_str(&l, bs_errno_msg(err));
		bs_line_str(&l, "; ");
	}
	bs_line_str(&l, what);
	bs_line_str(&l, ", interval ");
	bs_line_dur(&l, atomic_load(&e->interval));
	bs_line_str(&l, " (calls ");
	bs_line_u64(&l, atomic_load(&e->n_calls));
	bs_line_str(&l, ", up ");
	bs_line_u64(&l, atomic_load(&e->n_up));
	bs_line_str(&l, ", down ");
	bs_line_u64(&l, atomic_load(&e->n_down));
	bs_line_str(&l, ", waits ");
	bs_line_u64(&l, atomic_load(&e->n_waits));
	bs_line_str(&l, ", waited ");
	bs_line_dur(&l, atomic_load(&e->waited));
	bs_line_str(&l, ")");
	bs_line_emit(&l, lvl);
}

void bs_responsive_outcome(const struct bs_config *cfg, struct bs_entry *e,
			   const struct sockaddr *addr, socklen_t len, int err)
{
	const struct bs_policy *p = &cfg->policy;
	uint64_t iv = atomic_load(&e->interval), want;
	if (err) {
		atomic_store(&e->succ, 0);
		do
			want = bs_responsive_up(p, iv, bs_policy_unit(bs_random()));
		while (!atomic_compare_exchange_weak(&e->interval, &iv, want));
		atomic_fetch_add(&e->n_up, 1);
		atomic_store(&e->last_err, (uint32_t)err);
		log_stats(e, addr, len, "went up", err);
		return;
	}
	uint32_t th = p->down_threshold ? p->down_threshold : 1;
	if ((atomic_fetch_add(&e->succ, 1) + 1) % th || !iv)
		return;
	do
		want = bs_responsive_down(p, iv, bs_policy_unit(bs_random()));
	while (!atomic_compare_exchange_weak(&e->interval, &iv, want));
	atomic_fetch_add(&e->n_down, 1);
	log_stats(e, addr, len, "went down", 0);
}

/* Sleep d ns (a futex nobody wakes). EINTR if a signal should end the call. */
static int pause_for(uint64_t d, int has_tv)
{
	uint32_t word = 0;
	uint64_t until = bs_now() + d;
	while (bs_now() < until)
		if (bs_wait(&word, 0, until) == EINTR && bs_intr_returns_eintr(has_tv))
			return EINTR;
	return 0;
}

/* Wait the entry's interval iv before an attempt, at most until the
 * budget's end, then try anyway: only an attempt can bring the interval
 * down again. After a failure of this call, an attempt past the budget is
 * not made. Returns 0 to attempt, or the reason to stop (also in b). */
static enum bs_stop pace(struct bs_entry *e, struct bs_budget *b, uint64_t iv, int has_tv)
{
	uint64_t now = bs_now(), end = bs_budget_end(b), w = iv;
	if (b->attempts && bs_budget_check_next(b, now + iv) != BS_STOP_NONE)
		return b->stop;
	if (now + w > end)
		w = end > now ? end - now : 0;
	/* a signal: nothing in flight, EINTR would say otherwise */
	if (w && pause_for(w, has_tv) == EINTR)
		return bs_budget_stop(b, BS_STOP_SIGNAL);
	atomic_fetch_add(&e->n_waits, 1);
	atomic_fetch_add(&e->waited, w);
	return BS_STOP_NONE;
}

/* The call ends for the reason in b: the common give-up line, errno the
 * last error seen; when the budget's time ran out, the stats line too (info,
 * as it always was; not for max_attempts or a signal). */
static int give_up_with_stats(struct bs_entry *e, const struct bs_dest *d,
			      const struct bs_budget *b, int err)
{
	int last = err ? err : (int)atomic_load(&e->last_err);
	if (b->stop != BS_STOP_SIGNAL && b->stop != BS_STOP_MAX_ATTEMPTS)
		log_stats(e, d->addr, d->len, "giving up (budget spent)", last);
	return bs_outcome_give_up(d, b, last);
}

/* An attempt connected (r == 0) or is in flight (EINPROGRESS). */
static int started(const struct bs_config *cfg, struct bs_entry *e, int fd,
		   const struct bs_dest *d, uint64_t t0, int r, int saved)
{
	if (r != 0)
		return bs_outcome_started(cfg, fd, d->addr, d->len, d->key, t0);
	bs_responsive_outcome(cfg, e, d->addr, d->len, 0);
	bs_outcome_connected(cfg, d, fd, t0);
	errno = saved;
	return 0;
}

int bs_responsive_connect(const struct bs_config *cfg, int fd, const struct sockaddr *addr,
			  socklen_t len, uint64_t key)
{
	int saved = errno, err = 0;
	uint64_t start = bs_now();
	struct bs_entry *e = bs_table_claim(bs_tab(), key, start, cfg->policy.max_backoff);
	if (!e)
		return bs_real_connect(fd, addr, len);
	atomic_fetch_add(&e->n_calls, 1);
	atomic_store(&e->last_used, start); /* in use: not to be reclaimed */
	int blocking = bs_sock_is_blocking_stream(fd);
	/* the program's SO_SNDTIMEO bounds the whole call */
	uint64_t prog = blocking ? bs_sock_sndtimeo_ns(fd) : BS_BUDGET_NO_TIMEOUT;
	int has_tv = prog != BS_BUDGET_NO_TIMEOUT;
	struct bs_attempt a; /* (its budget: the responsive policy paces itself) */
	bs_attempt_init(&a, cfg, start, prog);
	struct bs_dest d = {key, addr, len};
	for (;;) {
		uint64_t iv = atomic_load(&e->interval);
		if (iv && (blocking || bs_nb_mode(cfg) == BS_NB_RETRY)) {
			if (pace(e, &a.b, iv, has_tv) != BS_STOP_NONE)
				return give_up_with_stats(e, &d, &a.b, err);
			if (!bs_table_owns(bs_tab(), e, key))
				return bs_real_connect(fd, addr, len); /* entry reclaimed */
		}
		uint64_t t0 = bs_now();
		int r = bs_real_connect(fd, addr, len);
		err = r ? errno : 0;
		if (r == 0 || err == EINPROGRESS)
			return started(cfg, e, fd, &d, t0, r, saved);
		if (!bs_config_retries(cfg, err))
			return errno = err, -1;
		bs_responsive_outcome(cfg, e, addr, len, err);
		bs_budget_count(&a.b, 1);
		if (!blocking || bs_res_has_alternative(bs_res(), key, bs_now(), BS_RES_FALLBACK))
			return errno = err, -1;
		if (bs_budget_check(&a.b, bs_now()) != BS_STOP_NONE)
			return give_up_with_stats(e, &d, &a.b, err);
	}
}
