/* nonblock: non-blocking connects. See nonblock.h. */
#include "nonblock.h"

#include "addr.h"
#include "attempt.h"
#include "clock.h"
#include "custody.h"
#include "outcome.h"
#include "park.h"
#include "policy.h"
#include "real.h"
#include "responsive.h"
#include "ret.h"
#include "role.h"
#include "shared.h"
#include "shim.h"
#include "sock.h"
#include "util.h"

#include <errno.h>

int bs_nb_last_err(uint64_t key)
{
	struct bs_entry *e = bs_table_find(bs_tab(), key);
	int err = e ? bs_entry_last_err(e) : 0;
	return err ? err : ECONNREFUSED;
}

/* Wait, as the attempt model says, until the destination may be tried
 * again, unless that is past the budget. A signal handler ends the wait
 * only inside a readiness call (`in_readiness`: poll and the like fail
 * with EINTR whatever SA_RESTART says); connect() and sendto() go on.
 * Returns BS_STOP_NONE when due, else why not (also in a->b). Retry mode
 * and a blocking TCP Fast Open do not take the destination's probe: their
 * attempts are not single-flight. */
static enum bs_stop wait_due(const struct bs_config *cfg, uint64_t key, struct bs_attempt *a,
			     int in_readiness)
{
	uint64_t longest = bs_policy_longest_wait(&cfg->policy);
	for (int i = 0; i < 100000; i++) {
		struct bs_entry *e = bs_table_find(bs_tab(), key);
		if (!e)
			return BS_STOP_NONE;
		uint32_t seq = atomic_load(&e->seq);
		struct bs_attempt_view v = {atomic_load(&e->state), 0, atomic_load(&e->resets),
					    bs_entry_last_err(e), 0, UINT64_MAX};
		struct bs_decision d = bs_attempt_decide(a, &v, bs_now(), longest);
		if (d.verdict == BS_END)
			return a->b.stop;
		if (d.verdict != BS_WAIT)
			return BS_STOP_NONE;
		if (bs_wait_cancellable((const uint32_t *)&e->seq, seq, d.until) == EINTR && in_readiness)
			return bs_budget_stop(&a->b, BS_STOP_SIGNAL);
	}
	return BS_STOP_NONE;
}

int bs_nb_wait_due(const struct bs_config *cfg, int fd, const struct bs_dest *d, uint64_t now)
{
	struct bs_attempt a; /* max_elapsed from now, and the program's SO_SNDTIMEO */
	bs_attempt_init(&a, cfg, now, bs_sock_sndtimeo_ns(fd)); /* (a blocking socket) */
	struct bs_entry *e = bs_table_find(bs_tab(), d->key);
	if (e)
		bs_attempt_join(&a, atomic_load(&e->state), atomic_load(&e->resets), 0);
	if (wait_due(cfg, d->key, &a, 0) == BS_STOP_NONE)
		return 0;
	return bs_outcome_give_up(d, &a.b, bs_nb_last_err(d->key));
}

/* Could connect() itself fail with err (a server down or out of reach)?
 * Pace makes up only such a failure: a window that a connection's reset
 * opened (ECONNRESET, a server that took a request and reset it) lets the
 * connect go, since no kernel's connect would report it and the server is
 * up. */
static int a_connects_error(int err)
{
	return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH ||
	       err == ENETUNREACH;
}

/* A connect to a destination that may be in its backoff window, by mode,
 * as the attempt model says (bs_attempt_no_wait). Returns 1 with the
 * result in *r if the call is settled here, 0 to send the attempt (*probe
 * set if it is pace's window probe). */
static int in_window(const struct bs_config *cfg, int fd, const struct sockaddr *addr,
		     socklen_t len, uint64_t key, uint64_t now, int *r, int *probe)
{
	struct bs_entry *e = bs_table_find(bs_tab(), key);
	if (!e || bs_role_serves(addr, len))
		return 0; /* (a connect to one of its own listening ports goes) */
	bs_shared_forget_stale(cfg, e);
	int pace = bs_nb_mode(cfg) == BS_NB_PACE;
	uint64_t o = atomic_load(&e->outcome_at);
	enum bs_no_wait v = bs_attempt_no_wait(atomic_load(&e->state), o,
					       pace ? cfg->policy.initial_backoff : 0, now);
	if (v == BS_NW_GO || v == BS_NW_DUE)
		return 0;
	if ((v == BS_NW_CLAIM_DUE || v == BS_NW_CLAIM_PROBE) &&
	    atomic_compare_exchange_strong(&e->outcome_at, &o, now))
		return *probe = v == BS_NW_CLAIM_PROBE, 0;
	/* inside the window (or another connect claimed its attempt) */
	if (pace) {
		/* no packet sent, but a destination that comes back is found
		 * within initial_backoff */
		int last = bs_nb_last_err(key);
		return a_connects_error(last) ? (*r = -last, 1) : 0;
	}
	/* defer, retry: a non-blocking connect() never waits: parked */
	*r = bs_outcome_started(cfg, fd, addr, len, key, now);
	if (!bs_park_waiting(cfg, fd, bs_nb_last_err(key)))
		return bs_outcome_forget(fd), 0;
	return 1;
}

int bs_nb_connect(const struct bs_config *cfg, int fd, const struct sockaddr *addr,
		  socklen_t len, uint64_t key)
{
	int r, probe = 0;
	uint64_t now = bs_now();
	if (bs_nb_mode(cfg) != BS_NB_OFF &&
	    !bs_res_has_alternative(bs_res(), key, bs_addr_host_key(addr, len), now,
				    BS_RES_FALLBACK) &&
	    in_window(cfg, fd, addr, len, key, now, &r, &probe))
		return r;
	now = bs_now();
	r = (int)BS_NEG(bs_real_connect(fd, addr, len));
	if (r != -EINPROGRESS) {
		struct bs_dest d = {key, addr, len};
		if (r == -EAGAIN)
			return r; /* the program's (see engine.c: first_failed) */
		if (r == 0)
			bs_outcome_connected(&d, fd, now);
		else if (!bs_config_retries(cfg, -r) || bs_sock_error_is_final(fd, addr, -r))
			; /* (nothing to pace) */
		else if (probe)
			bs_outcome_probe_failed(&d, -r);
		else
			bs_outcome_failed_later(cfg, &d, now, -r, UINT64_MAX);
		return r;
	}
	r = bs_outcome_started(cfg, fd, addr, len, key, now);
	if (probe)
		atomic_fetch_or(&bs_fd_slot(bs_fds(), fd)->flags, BS_FDF_WINDOW_PROBE);
	return r;
}

/* One round of retry mode: wait until due, reconnect, publish. Returns 1
 * to go on; 0 when the call ends: *err 0 (connected), or a->b.stop says
 * why. */
static int nb_round(const struct bs_config *cfg, int fd, const struct bs_dest *d,
		    struct bs_attempt *a, int *err)
{
	struct bs_entry *e = bs_table_find(bs_tab(), d->key);
	if (!e) /* untracked: the table is full */
		return bs_budget_stop(&a->b, BS_STOP_TABLE_FULL), 0;
	if (wait_due(cfg, d->key, a, 1) != BS_STOP_NONE)
		return 0;
	uint64_t a0 = bs_now(), s = atomic_load(&e->state);
	uint64_t delay = bs_next_wait(cfg, e, s);
	if (delay == BS_STOP) {
		bs_outcome_failed(e, d, s, a0, delay, *err, 1);
		return bs_budget_stop(&a->b, BS_STOP_POLICY), 0;
	}
	uint64_t end = bs_min_u64(a0 + bs_policy_attempt_timeout(&cfg->policy, delay),
				  bs_budget_end(&a->b));
	static const struct bs_intr any_signal = {.has_timeout = 1}; /* (ends a readiness call) */
	switch (bs_sock_attempt(fd, d->addr, d->len, end, 0, &any_signal, err)) {
	case BS_ATT_OK:
		*err = 0;
		bs_outcome_connected(d, fd, a0);
		return 0;
	case BS_ATT_EINTR: /* the handshake goes on */
		*err = EINTR;
		bs_fd_set(bs_fds(), fd, BS_FD_CONNECTING, a0); /* in flight, as the kernel has it */
		return bs_budget_stop(&a->b, BS_STOP_SIGNAL), 0;
	case BS_ATT_FAIL:
		break;
	default:
		*err = ETIMEDOUT;
	}
	int last = bs_budget_last(&a->b, a0 + delay); /* then the give-up line says it */
	bs_attempt_failed(a, *err);
	if (!bs_config_retries(cfg, *err) || bs_sock_error_is_final(fd, d->addr, *err)) {
		bs_budget_count(&a->b, 1);
		return bs_budget_stop(&a->b, BS_STOP_NOT_RETRYABLE), 0;
	}
	bs_outcome_failed(e, d, s, a0, delay, *err, last);
	return 1;
}

/* Retry mode after the first attempt (started at `start`) failed with err:
 * rounds until connected or the budget is spent, then the common give-up
 * line. Returns 0 or the error the program sees. */
static int nb_retry(const struct bs_config *cfg, int fd, const struct bs_dest *d,
		    uint64_t start, int err)
{
	struct bs_attempt a;
	bs_attempt_init(&a, cfg, start, BS_BUDGET_NO_TIMEOUT);
	struct bs_entry *e = bs_table_find(bs_tab(), d->key);
	if (e) /* its own failure is published already: counted once */
		bs_attempt_join(&a, atomic_load(&e->state), atomic_load(&e->resets), 0);
	bs_attempt_failed(&a, err);
	while (nb_round(cfg, fd, d, &a, &err))
		;
	if (err == 0)
		return 0;
	/* a signal: the readiness call fails with EINTR, as it would without
	 * the shim; the socket stays "connecting" (in flight, or parked) */
	if (a.b.stop == BS_STOP_SIGNAL && (err == EINTR || bs_park(cfg, fd, err)))
		return BS_NB_EINTR;
	bs_outcome_forget(fd);
	bs_outcome_give_up(d, &a.b, err);
	return err;
}

/* What the program sees of an outcome that is not a retryable failure:
 * published, then the probe let go. */
static int settled(const struct bs_config *cfg, int fd, const struct bs_dest *d, uint64_t t0,
		   int err, uint64_t probe)
{
	int paced = cfg->policy.kind == BS_POLICY_RESPONSIVE;
	struct bs_entry *e = paced ? bs_table_find(bs_tab(), d->key) : NULL;
	if (e && d->addr && (err == 0 || bs_config_retries(cfg, err)))
		bs_responsive_outcome(cfg, e, d->addr, d->len, err);
	if (err)
		bs_outcome_forget(fd);
	else if (paced)
		bs_outcome_paced_connected(fd, t0);
	else
		bs_outcome_connected(d, fd, t0);
	bs_outcome_let_probe_go(d->key, probe);
	return err;
}

/* A retryable failure of fd's attempt (started at t0), published. Returns
 * what the program sees: the error, or BS_NB_PARKED_NOW. */
static int failed(const struct bs_config *cfg, int fd, struct bs_dest *d, uint64_t t0,
		  uint64_t start, int err, int may_wait, uint64_t probe)
{
	if (atomic_load(&bs_fd_slot(bs_fds(), fd)->flags) & BS_FDF_WINDOW_PROBE) {
		bs_outcome_probe_failed(d, err); /* the window's step already counts it */
		return settled(cfg, fd, d, t0, err, probe);
	}
	int parks = bs_nb_parks(cfg);
	enum bs_custody held = parks ? bs_custody_check(fd) : BS_CUSTODY_HELD;
	if (held != BS_CUSTODY_HELD) {
		/* not the socket whose connect this slot recorded (the number
		 * was reused behind the wrappers), or not this process's: its
		 * error is the program's alone, and no failure of d */
		bs_outcome_let_probe_go(d->key, probe);
		if (held == BS_CUSTODY_GONE)
			bs_outcome_forget(fd);
		return err;
	}
	int fallback = bs_res_has_alternative(bs_res(), d->key, bs_dest_host(d), bs_now(),
					      BS_RES_FALLBACK);
	int policy_done = bs_outcome_failed_later(cfg, d, t0, err,
						  fallback ? 0 : bs_park_budget_end(cfg, fd));
	bs_outcome_let_probe_go(d->key, probe);
	if (policy_done && !fallback && d->addr) {
		struct bs_attempt a; /* the policy allows no further attempt */
		bs_attempt_init(&a, cfg, start, BS_BUDGET_NO_TIMEOUT);
		bs_budget_count(&a.b, atomic_load(&bs_fd_slot(bs_fds(), fd)->steps) + 1);
		bs_budget_stop(&a.b, BS_STOP_POLICY);
		bs_outcome_give_up(d, &a.b, err);
	}
	if (policy_done || fallback || !d->addr) {
		bs_outcome_forget(fd);
		return err;
	}
	if (bs_nb_mode(cfg) == BS_NB_RETRY && may_wait)
		return nb_retry(cfg, fd, d, start, err);
	/* retry mode waits only where the program could block itself;
	 * elsewhere (getsockopt, send, recv...) it parks, as defer does,
	 * unless the program may have learned of the failure where the shim
	 * screens nothing (custody.h) */
	if (parks && (may_wait || bs_custody_may_hide_unscreened()) && bs_park(cfg, fd, err))
		return BS_NB_PARKED_NOW;
	bs_outcome_forget(fd);
	return err;
}

int bs_nb_outcome(const struct bs_config *cfg, int fd, int err, int may_wait)
{
	struct bs_fdslot *sl = bs_fd_slot(bs_fds(), fd);
	if (!sl || atomic_load(&sl->state) != BS_FD_CONNECTING)
		return err;
	/* the probe is let go only once the outcome is published: no other
	 * attempt may go out on the state from before it */
	uint64_t probe = bs_outcome_take_probe(fd);
	struct sockaddr_storage ss;
	struct bs_dest d = bs_fd_dest(fd, &ss);
	uint64_t t0 = atomic_load(&sl->since),
		 start = atomic_load(&sl->call_start);
	if (d.addr)
		cfg = bs_cfg_for(cfg, d.addr, d.len);
	if (cfg->policy.kind == BS_POLICY_RESPONSIVE || err == 0 || !bs_config_retries(cfg, err) ||
	    bs_sock_error_is_final(fd, d.addr, err))
		return settled(cfg, fd, &d, t0, err, probe);
	if (bs_sock_was_established(fd)) {
		/* connected (a program may learn that from POLLOUT alone), then
		 * reset: the connection's error, the program's as it is; to the
		 * schedule, a connection closed before its first byte */
		settled(cfg, fd, &d, t0, 0, probe);
		bs_outcome_closed_early(cfg, fd, &d, err);
		return err;
	}
	return failed(cfg, fd, &d, t0, start, err, may_wait, probe);
}
