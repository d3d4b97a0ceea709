/* engine: see engine.h. Only a retryable failure (or a destination already
 * in backoff) leads into the loop below, which waits for the destination's
 * next allowed time, lets one caller per destination probe (single
 * flight), and publishes each outcome to every waiter. */
#include "engine.h"

#include "attempt.h"
#include "clock.h"
#include "log.h"
#include "nonblock.h"
#include "outcome.h"
#include "policy.h"
#include "real.h"
#include "ret.h"
#include "role.h"
#include "shared.h"
#include "shim.h"
#include "sock.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>

/* With a shared table, a waiter re-checks at least this often whether the
 * attempt slot's owner is still alive (its process may have been killed). */
#define SHARED_RECHECK (500 * BS_NS_PER_MS)

struct call {
	const struct bs_config *cfg;
	int fd;             /* the program's socket; -1 for an op */
	struct bs_op *op;   /* what is retried, if not fd's connect (a lookup) */
	struct bs_dest dest;
	struct bs_entry *e;
	struct bs_attempt a; /* its budget and what it knows (attempt.h) */
	struct bs_intr intr; /* the EINTR rule's facts (has_timeout: SO_SNDTIMEO) */
	uint64_t cookie;    /* fd's socket when the call began to back off (0: an op) */
	int wait_counted;   /* its wait since the last attempt is in n_waited */
	uint32_t tid;
	int fallback;       /* the program has other addresses of the name */
	int lock;           /* the shared table's lock for our probe, or -1 */
	int lock_waited;    /* (bs_attempt_lock_busy_waits's once) */
	uint32_t join_fail; /* the destination's failures when the call began */
	uint64_t join_seen; /* the entry's attempt_at a newcomer judged by */
	uint32_t told;      /* the failure count the log last heard of from this
			     * call (NOT_TOLD: it has said nothing yet) */
	/* Set only while the call blocks in its attempt (holding the probe)
	 * or in its wait (counted as a waiter): what bs_engine_abandon lets
	 * go if a signal handler leaves the call with siglongjmp. */
	uint64_t held;            /* our probe word */
	_Atomic int in_attempt, in_wait;
	struct call *outer;       /* the call this one interrupted, if any */
	int listed;               /* in open_calls (a jump took it out) */
};

/* The engine calls of this thread, innermost first (a signal handler may
 * connect while a call waits). */
static __thread struct call *open_calls __attribute__((tls_model("initial-exec")));

#define NOT_TOLD UINT32_MAX

/* Returned by a step of the call that does not end it: the loop goes on. */
#define AGAIN 1

static int retries(const struct call *c, int err)
{
	if (c->op)
		return c->op->retries(c->op, c->cfg, err);
	return bs_config_retries(c->cfg, err) && !bs_sock_error_is_final(c->fd, c->dest.addr, err);
}

/* The destination backs off for an error this call's settings would not
 * retry (another process's are wider: resolve = wait, more of retry_on):
 * that schedule is not this call's to wait on, so the program's own
 * attempt goes at once, as without the shim. */
static int not_ours(const struct call *c, uint64_t s)
{
	int last = s && c->e ? bs_entry_last_err(c->e) : 0;
	return last > 0 && !retries(c, last);
}

/* The attempt the program itself would make: 0 or -err. */
static int plain_try(struct call *c)
{
	return c->op ? -c->op->attempt(c->op) : (int)BS_NEG(bs_real_connect(c->fd, c->dest.addr, c->dest.len));
}

/* The shim's limit for one attempt that follows a wait of delay. */
static uint64_t attempt_timeout(const struct call *c, uint64_t delay)
{
	return bs_policy_attempt_timeout(&c->cfg->policy, delay == BS_STOP ? 0 : delay);
}

/* The call ends for the reason recorded in its budget: the common
 * give-up line (outcome.c); returns -(the last attempt's error). */
static int end_call(const struct call *c)
{
	return bs_outcome_give_up(&c->dest, &c->a.b, c->a.last_err);
}

/* A failure of this call's attempt; when it ends the call's budget, the
 * give-up line says so instead of announcing a wait that will not happen,
 * and when the program has other addresses to try, nothing is announced. */
static void record_failure(struct call *c, uint64_t seen, uint64_t t0,
			   uint64_t delay, int err)
{
	uint64_t next = delay == BS_STOP ? t0 : t0 + delay;
	int quiet = bs_budget_last(&c->a.b, next) || c->fallback;
	if (delay == BS_STOP)
		bs_budget_policy_done(&c->a.b);
	bs_attempt_failed(&c->a, err);
	bs_outcome_failed(c->e, &c->dest, seen, t0, delay, err, quiet);
	c->told = bs_state_failures(atomic_load(&c->e->state)); /* (its own line) */
	bs_outcome_tell_step(c->e, c->told);
}

static void record_failure_after(struct call *c, uint64_t s, uint64_t t0, int err)
{
	record_failure(c, s, t0, bs_next_wait(c->cfg, c->e, s), err);
}

/* Into open_calls unless in it: at the start, and back from a wait or an
 * attempt that a signal handler's jump took it out of (alive after all). */
static void still_open(struct call *c)
{
	if (!c->listed) {
		c->outer = open_calls;
		open_calls = c;
		c->listed = 1;
	}
}

/* The call counts as a waiter no more (once, however it leaves). */
static void stop_waiting(struct call *c)
{
	if (!atomic_exchange(&c->in_wait, 0))
		return;
	bs_shared_wait_ends(c->e);
	atomic_fetch_sub(&c->e->waiting, 1);
}

/* A step of the call: sleep on the entry until `until`, unless its state
 * moves first; AGAIN. A signal that should end the call ends it. Then no
 * attempt of this socket is in flight, so the call ends with the last
 * attempt's real error, never EINTR: to connect(), EINTR means "still
 * connecting in the background", and a program that then polls the socket
 * would take an unconnected one for connected (CPython does). */
static int wait_step(struct call *c, uint64_t seen_state, uint64_t until)
{
	uint32_t seq = atomic_load(&c->e->seq);
	if (atomic_load(&c->e->state) != seen_state)
		return AGAIN;
	uint64_t t0 = bs_now();
	if (bs_shared_on())
		until = bs_min_u64(until, t0 + SHARED_RECHECK);
	atomic_fetch_add(&c->e->waiting, 1);
	bs_shared_wait_begins(c->e);
	atomic_store(&c->in_wait, 1);
	bs_intr_before_wait(&c->intr);
	int r = bs_wait_cancellable((const uint32_t *)&c->e->seq, seq, until);
	stop_waiting(c);
	still_open(c);
	pthread_testcancel(); /* (one that came as the wait ended) */
	if (!c->wait_counted) /* (one wait between two attempts, however many wake-ups) */
		atomic_fetch_add(&c->e->n_waited, 1);
	c->wait_counted = 1;
	atomic_fetch_add(&c->e->waited_ms, (uint32_t)((bs_now() - t0) / BS_NS_PER_MS));
	/* (a lookup then ends with its last real result: libc's getaddrinfo
	 * rides out a signal, but no wait of the shim's may outlast it) */
	if (r == EINTR && bs_intr_returns_eintr(&c->intr))
		return bs_budget_stop(&c->a.b, BS_STOP_SIGNAL), end_call(c);
	return AGAIN;
}

static void release_probe(struct call *c, uint64_t mine)
{
	int lock = c->lock;
	c->lock = -1, c->held = 0;
	bs_probe_release(c->e, mine);
	bs_shared_release(lock);
}

static int probe_ends(struct call *c, uint64_t mine, int err)
{
	release_probe(c, mine);
	bs_publish(c->e);
	return -err;
}

/* Our probe: the attempt itself, then the outcome published. */
static int probe(struct call *c, uint64_t s, uint64_t now, uint64_t mine, uint64_t delay)
{
	uint64_t shim_end = now + attempt_timeout(c, delay);
	atomic_store(&c->e->attempt_at, now);
	uint64_t end = bs_min_u64(shim_end, bs_budget_end(&c->a.b));
	int err = 0;
	enum bs_sock_outcome r;
	c->held = mine;
	c->wait_counted = 0;
	atomic_store(&c->in_attempt, 1);
	if (c->op)
		r = (err = c->op->attempt(c->op)) ? BS_ATT_FAIL : BS_ATT_OK;
	else
		r = bs_sock_attempt(c->fd, c->dest.addr, c->dest.len, end,
				    end == c->a.b.prog_end && end < shim_end, &c->intr, &err);
	atomic_store(&c->in_attempt, 0);
	still_open(c);
	switch (r) {
	case BS_ATT_OK:
		release_probe(c, mine);
		bs_outcome_connected(&c->dest, c->fd, now);
		return 0;
	case BS_ATT_PROG_TIMEOUT:
	case BS_ATT_EINTR:
		return probe_ends(c, mine, r == BS_ATT_EINTR ? EINTR : EINPROGRESS);
	case BS_ATT_CUT:
		/* cut by the shim's own bound, with no outcome yet: at the
		 * budget's end (an attempt begun in its last moments, whose
		 * refusal was on its way) the call ends with the last real
		 * error, as it does between attempts */
		err = end < shim_end && c->a.last_err > 0 ? c->a.last_err : ETIMEDOUT;
		break;
	case BS_ATT_FAIL:
		break;
	}
	if (!retries(c, err))
		return probe_ends(c, mine, err);
	/* a retryable failure: recorded, then published with the probe let
	 * go; the call goes on unless the program has other addresses to try */
	record_failure(c, s, now, delay, err);
	probe_ends(c, mine, err);
	return c->fallback ? -err : AGAIN;
}

/* The call's entry may have been taken over for another destination while
 * it waited: claim one again. 0 when the table is full of live entries. */
static int hold_entry(struct call *c)
{
	if (bs_table_owns(bs_tab(), c->e, c->dest.key))
		return 1;
	c->e = bs_shared_claim(&c->dest, bs_now(), c->cfg->policy.max_backoff);
	return c->e != NULL;
}

/* Healthy, on probation after someone got through, or reset by the
 * operator (or the program has other addresses to try: no waiting): a
 * plain connect, exactly as on the fast path, its outcome recorded. */
static int plain_attempt(struct call *c, uint64_t s, uint64_t now)
{
	c->wait_counted = 0;
	int r = plain_try(c);
	if (r == 0) {
		bs_outcome_connected(&c->dest, c->fd, now);
		return 0;
	}
	if (!retries(c, -r))
		return r;
	record_failure_after(c, s, now, -r);
	return c->fallback ? r : AGAIN;
}

/* Another live thread's probe of the destination is still in time: a
 * thread of this process, or one in a process that holds the entry's lock
 * in the shared table. */
static int probe_held_elsewhere(struct call *c, uint64_t p, uint64_t now)
{
	return p && bs_attempt_probe_stale(&c->a, p, now) > now && bs_probe_tid(p) != c->tid &&
	       (bs_thread_alive(bs_probe_tid(p)) || bs_shared_held_elsewhere(c->e));
}

/* The destination's next allowed time has come and no one else probes:
 * take the probe (single flight) and attempt. The probe goes stale when
 * the attempt must be over: a thread that vanished mid-attempt blocks the
 * others no longer. */
static int take_probe_and_attempt(struct call *c, uint64_t s, uint64_t now, uint64_t p)
{
	uint64_t delay = bs_next_wait(c->cfg, c->e, s);
	uint64_t mine = bs_attempt_probe(now, attempt_timeout(c, delay), c->tid);
	c->lock = bs_shared_hold(c->e);
	if (c->lock == BS_SHARED_BUSY) {
		c->lock = -1;
		if (bs_attempt_lock_busy_waits(&c->a, p, now, &c->lock_waited))
			return wait_step(c, s, now + SHARED_RECHECK);
	}
	if (!bs_probe_take(c->e, p, mine)) {
		release_probe(c, bs_probe_make(0, 0)); /* (the lock alone) */
		return AGAIN;
	}
	if (atomic_load(&c->e->state) != s) { /* an outcome came first */
		release_probe(c, mine);
		return AGAIN;
	}
	return probe(c, s, now, mine, delay);
}

/* A process that joins a destination other processes are backing off
 * from (it has published nothing about it yet) may make one attempt at
 * once if none is in flight and none started in the last initial_backoff,
 * or else as soon as that is so, unless a failure is published meanwhile:
 * then it waits with the others. The attempt is claimed by moving
 * attempt_at (claim_join), so that of many newcomers one goes. A restart
 * loop is then paced to one attempt per initial_backoff, a herd of
 * processes started together follows one schedule, and a newcomer after
 * the server's return connects within initial_backoff. Returns when the
 * call may go as a newcomer (UINT64_MAX: it is none). */
static uint64_t join_at(struct call *c, uint64_t s, uint64_t now, int probe_held)
{
	if (!bs_shared_on() || bs_shared_known(c->e) || bs_state_failures(s) != c->join_fail ||
	    probe_held)
		return UINT64_MAX;
	uint64_t at = atomic_load(&c->e->attempt_at);
	c->join_seen = at;
	/* (a start further ahead than a racing newcomer's claim could put it
	 * is no fact: another time namespace's clock, or a forged word) */
	uint64_t initial = c->cfg->policy.initial_backoff;
	return at > now + initial ? now : at + initial;
}

static struct bs_attempt_view view_of(struct call *c, uint64_t s, uint64_t now)
{
	struct bs_attempt_view v;
	v.state = s;
	v.probe = atomic_load(&c->e->probe);
	v.resets = atomic_load(&c->e->resets);
	v.last_err = bs_entry_last_err(c->e);
	v.probe_live = probe_held_elsewhere(c, v.probe, now);
	v.join_at = bs_state_may_attempt(s) ? UINT64_MAX : join_at(c, s, now, v.probe_live);
	return v;
}

/* A wait on a schedule another thread or process moves: its first line
 * says who is trying and when this call goes next; after that, one line
 * per step it learns of (its own failures have their own lines). */
static void tell_wait(struct call *c, uint64_t s, const struct bs_attempt_view *v,
		      uint64_t until, uint64_t now)
{
	uint32_t f = bs_state_failures(s);
	if (f == c->told || !f || !bs_log_enabled(BS_LOG_INFO) || !bs_outcome_tell_step(c->e, f))
		return;
	const char *who = !v->probe_live ? NULL
			  : bs_thread_alive(bs_probe_tid(v->probe)) ? "another thread of this process"
								    : "another process";
	bs_outcome_log_waiting(&c->dest, c->told == NOT_TOLD, f, c->a.last_err, who,
			       until > now ? until - now : 0);
	c->told = f;
}

static int carry_out(struct call *c, const struct bs_decision *d, uint64_t s,
		     const struct bs_attempt_view *v, uint64_t now)
{
	if (d->reset) /* the operator reset the destination while the call waited */
		bs_outcome_log_reset(c->dest.addr, c->dest.len);
	switch (d->verdict) {
	case BS_GO:
		return plain_attempt(c, s, now);
	case BS_WAIT:
		tell_wait(c, s, v, d->until, now);
		return wait_step(c, s, d->until);
	case BS_TAKE_PROBE:
		if (d->join && !atomic_compare_exchange_strong(&c->e->attempt_at, &c->join_seen, now))
			return AGAIN; /* another newcomer went (claim_join) */
		return take_probe_and_attempt(c, s, now, v->probe);
	default:
		return end_call(c);
	}
}

/* Another thread closed the program's socket while the call waited, and
 * the number may name a new one: the call ends with its last real error,
 * which the kernel's connect on the closed socket would have returned;
 * nothing is attempted on whatever the number names now. */
static int socket_gone(const struct call *c)
{
	return c->cookie && bs_sock_cookie(c->fd) != c->cookie;
}

static int loop(struct call *c)
{
	uint64_t longest = bs_policy_longest_wait(&c->cfg->policy);
	for (;;) {
		if (socket_gone(c))
			return -(c->a.last_err ? c->a.last_err : EBADF);
		if (!hold_entry(c)) /* table full of live entries: go untracked */
			return bs_budget_stop(&c->a.b, BS_STOP_TABLE_FULL), end_call(c);
		uint64_t s = atomic_load(&c->e->state), now = bs_now();
		struct bs_attempt_view v = view_of(c, s, now);
		struct bs_decision d = bs_attempt_decide(&c->a, &v, now, longest);
		int r = carry_out(c, &d, s, &v, now);
		if (r != AGAIN)
			return r;
	}
}

/* What a call holds while it blocks, let go: when a signal handler
 * leaves it with siglongjmp (jump.c) or pthread_cancel ends it. A jump
 * that stays inside the handler lets go early; the call's own release,
 * which follows, then finds nothing held. */
static void abandon(struct call *c)
{
	stop_waiting(c);
	if (atomic_exchange(&c->in_attempt, 0)) {
		release_probe(c, c->held);
		bs_publish(c->e);
	}
}

void bs_engine_abandon(void)
{
	for (struct call *c = open_calls; c; c = c->outer) {
		abandon(c);
		c->listed = 0;
	}
	open_calls = NULL;
}

static void cancelled(void *p)
{
	struct call *c = p;
	abandon(c);
	if (c->listed)
		open_calls = c->outer;
}

static int retry_loop(struct call *c)
{
	int r;
	c->held = 0;
	atomic_init(&c->in_attempt, 0);
	atomic_init(&c->in_wait, 0);
	c->listed = 0;
	still_open(c);
	pthread_cleanup_push(cancelled, c);
	r = loop(c);
	pthread_cleanup_pop(0);
	if (c->listed)
		open_calls = c->outer;
	return r;
}

/* What follows the program's own connect, which failed with err (t0 its
 * start). AGAIN when the failure of a blocking stream socket leads into
 * backoff. */
static int first_failed(struct call *c, uint64_t t0, int err)
{
	if (err == EINPROGRESS && bs_log_enabled(BS_LOG_DEBUG))
		bs_outcome_log_passed(c->dest.addr, c->dest.len,
				      "non-blocking, in progress: its outcome is watched", 0);
	if (err == EINPROGRESS)
		return bs_outcome_started(c->cfg, c->fd, c->dest.addr, c->dest.len, c->dest.key, t0);
	if (!retries(c, err)) {
		if (bs_log_enabled(BS_LOG_DEBUG))
			bs_outcome_log_passed(c->dest.addr, c->dest.len,
					      "an error the shim does not retry", err);
		return -err;
	}
	if (bs_sock_is_blocking_stream(c->fd))
		return AGAIN;
	/* a datagram's error is its own; so is a non-blocking EAGAIN (an
	 * AF_UNIX listener's full queue): nothing retries it, so nothing is
	 * published or announced */
	if (err != EAGAIN && bs_sock_is_stream(c->fd))
		bs_outcome_failed_later(c->cfg, &c->dest, t0, err, UINT64_MAX);
	return -err;
}

/* A blocking stream socket whose first attempt failed with err (t0 its
 * start), or that found its destination (state s) in backoff (err 0). */
static int backoff_connect(struct call *c, uint64_t s, uint64_t t0, int err)
{
	c->tid = bs_gettid();
	c->lock = -1;
	uint64_t start = t0 ? t0 : bs_now();
	c->fallback = !c->op && bs_res_has_alternative(bs_res(), c->dest.key,
						       bs_dest_host(&c->dest), start, BS_RES_FALLBACK);
	uint64_t prog = c->op ? BS_BUDGET_NO_TIMEOUT : bs_sock_sndtimeo_ns(c->fd);
	bs_intr_begin(&c->intr, prog != BS_BUDGET_NO_TIMEOUT);
	c->cookie = c->op ? 0 : bs_sock_cookie(c->fd);
	c->wait_counted = 0;
	bs_attempt_init(&c->a, c->cfg, start, prog); /* the call's budget, from start */
	if (!c->e)
		c->e = bs_shared_claim(&c->dest, start, c->cfg->policy.max_backoff);
	if (!c->e)
		return err ? -err : plain_try(c);
	uint64_t joined = err ? s : atomic_load(&c->e->state);
	c->join_fail = bs_state_failures(joined);
	c->told = NOT_TOLD;
	c->lock_waited = 0;
	bs_attempt_join(&c->a, joined, atomic_load(&c->e->resets),
			err ? 0 : bs_entry_last_err(c->e));
	if (err) {
		/* The plain attempt failed: that is one more failure. */
		record_failure_after(c, s, t0, err);
		if (c->fallback)
			return -err; /* the program has other addresses to try */
	} else if (c->fallback) {
		/* Backing off, but the program can go elsewhere: no wait. */
		return plain_attempt(c, atomic_load(&c->e->state), bs_now());
	}
	return retry_loop(c);
}

int bs_engine_connect(const struct bs_config *cfg, int fd,
		      const struct sockaddr *addr, socklen_t len, uint64_t key)
{
	struct call c; /* the fast path fills what it uses; backoff_connect the rest */
	c.cfg = cfg, c.fd = fd, c.op = NULL, c.dest = (struct bs_dest){key, addr, len};
	c.e = bs_table_find(bs_tab(), key);
	if (c.e)
		bs_shared_forget_stale(cfg, c.e);
	uint64_t s = c.e ? atomic_load_explicit(&c.e->state, memory_order_acquire) : 0;
	uint64_t t0 = 0;
	int err = 0;
	if (bs_state_may_attempt(s) || (s && bs_role_serves(addr, len)) || not_ours(&c, s) ||
	    bs_sock_answers_at_once(fd, addr)) {
		/* the program's own connect (a connect to one of its own
		 * listening ports always goes, as does one the kernel answers
		 * at once) */
		t0 = bs_now();
		int r = (int)BS_NEG(bs_real_connect(fd, addr, len));
		if (r == 0) {
			bs_outcome_connected(&c.dest, fd, t0);
			if (bs_log_enabled(BS_LOG_DEBUG))
				bs_outcome_log_passed(addr, len, "connected at once", 0);
			return 0;
		}
		err = -r;
		if ((r = first_failed(&c, t0, err)) != AGAIN)
			return r;
	} else if (!bs_sock_is_blocking_stream(fd)) {
		if (!bs_sock_is_stream(fd)) /* a UDP connect sends nothing: never paced */
			return (int)BS_NEG(bs_real_connect(fd, addr, len));
		return bs_nb_connect(cfg, fd, addr, len, key);
	}
	return backoff_connect(&c, s, t0, err);
}

/* (connect.c's fresh path: as it saw the destination before its attempt,
 * no entry, never failed) */
int bs_engine_first_failed(const struct bs_config *cfg, int fd, const struct sockaddr *addr,
			   socklen_t len, uint64_t key, uint64_t t0, int err)
{
	struct call c;
	c.cfg = cfg, c.fd = fd, c.op = NULL, c.dest = (struct bs_dest){key, addr, len}, c.e = NULL;
	int r = first_failed(&c, t0, err);
	return r != AGAIN ? r : backoff_connect(&c, 0, t0, err);
}

int bs_engine_retry_op(const struct bs_config *cfg, const struct bs_dest *d, struct bs_op *op)
{
	struct call c;
	c.cfg = cfg, c.fd = -1, c.op = op, c.dest = *d;
	c.e = bs_table_find(bs_tab(), d->key);
	if (c.e)
		bs_shared_forget_stale(cfg, c.e);
	uint64_t s = c.e ? atomic_load(&c.e->state) : 0, t0 = 0;
	int err = 0;
	if (bs_state_may_attempt(s) || not_ours(&c, s)) { /* the program's own attempt */
		t0 = bs_now();
		int r = plain_try(&c);
		if (r == 0) {
			bs_outcome_connected(&c.dest, -1, t0);
			return 0;
		}
		if (!retries(&c, err = -r))
			return r;
	}
	return backoff_connect(&c, s, t0, err);
}
