/* defer: the rounds of defer mode. See defer.h. */
#include "defer.h"

#include "attempt.h"
#include "clock.h"
#include "custody.h"
#include "nonblock.h"
#include "outcome.h"
#include "park.h"
#include "policy.h"
#include "real.h"
#include "ret.h"
#include "role.h"
#include "sock.h"

#include <errno.h>

/* The destination is due: this socket takes its one probe (replacing the
 * word the verdict saw), unless the probe before it published its outcome
 * (then let go) after this thread read the state: then it is judged again
 * on the next round. */
static int take_probe(const struct bs_config *cfg, struct bs_entry *e, struct bs_fdslot *s,
		      uint64_t state, uint64_t seen, uint64_t now)
{
	/* a parked socket's probe names no thread: 0 is no thread's tid */
	uint64_t mine = bs_attempt_probe(now, bs_policy_attempt_timeout(&cfg->policy, 0), 0);
	if (!bs_probe_take(e, seen, mine))
		return 0;
	if (atomic_load(&e->state) != state) {
		bs_probe_release(e, mine);
		return 0;
	}
	atomic_store(&s->probe, mine);
	return 1;
}

/* The reconnect: the program's socket, non-blocking as the program made
 * it. Returns the socket's state after it. */
static unsigned reconnected(const struct bs_config *cfg, int fd, uint64_t now)
{
	struct sockaddr_storage ss;
	struct bs_dest d = bs_fd_dest(fd, &ss);
	int r = d.addr ? (int)BS_NEG(bs_real_connect(fd, d.addr, d.len)) : -EBADF;
	if (r == -ECONNABORTED) /* see sock.h */
		r = (int)BS_NEG(bs_real_connect(fd, d.addr, d.len));
	int err = -r;
	bs_fd_set(bs_fds(), fd, BS_FD_CONNECTING, now);
	bs_park_rejoin(fd);
	if (r != 0 && err != EINPROGRESS && err != EALREADY) {
		/* failed at once: an outcome like any other */
		int res = bs_nb_outcome(cfg, fd, err, 0);
		if (res != BS_NB_PARKED_NOW)
			bs_owe_now(fd, res ? res : err); /* to its next look */
	} /* (a connect at once: the program learns it as usual) */
	return bs_fd_state(bs_fds(), fd);
}

static unsigned next_step(int fd, struct bs_fdslot *s, uint64_t now, uint64_t *next)
{
	const struct bs_config *cfg = bs_active();
	if (!cfg)
		return BS_FD_PARKED;
	struct sockaddr_storage ss;
	struct bs_dest d = bs_fd_dest(fd, &ss);
	if (d.addr)
		cfg = bs_cfg_for(cfg, d.addr, d.len);
	struct bs_entry *e = bs_table_find(bs_tab(), d.key);
	struct bs_attempt a;
	struct bs_decision v = {.verdict = BS_GO};
	if (e)
		v = bs_park_judge(cfg, s, e, now, 0, &a);
	if (v.verdict == BS_WAIT) {
		if (next && v.until > now && v.until < *next)
			*next = v.until;
		return BS_FD_PARKED;
	}
	/* to act on the socket, it must be the one the shim parked: asked
	 * only now, so that a round over many parked sockets that are not
	 * due makes no system call for them */
	if (!bs_park_holds(fd))
		return BS_FD_NONE; /* not ours to answer for: passed through */
	if (v.reset) /* the operator said the server is back */
		bs_outcome_log_reset(d.addr, d.len);
	switch (v.verdict) {
	case BS_GO: /* (or nothing known of it now) */
		return reconnected(cfg, fd, now);
	case BS_TAKE_PROBE:
		if (take_probe(cfg, e, s, v.state, v.probe, now))
			return reconnected(cfg, fd, now);
		if (next && now + BS_DEFER_RECHECK / 4 < *next)
			*next = now + BS_DEFER_RECHECK / 4; /* judged again soon */
		return BS_FD_PARKED;
	default:
		return bs_park_spent(fd, &a.b);
	}
}

/* One thread at a time gives a parked socket its next step; to the others
 * it stays parked meanwhile. */
static unsigned run_fd(int fd, struct bs_fdslot *s, uint64_t now, uint64_t *next)
{
	if (atomic_fetch_or(&s->flags, BS_FDF_BUSY) & BS_FDF_BUSY)
		return BS_FD_PARKED;
	unsigned st = atomic_load(&s->state);
	if (st == BS_FD_PARKED)
		st = next_step(fd, s, now, next);
	atomic_fetch_and(&s->flags, ~BS_FDF_BUSY);
	return st;
}

unsigned bs_defer_run_fd(int fd, uint64_t now)
{
	struct bs_fdslot *s = bs_fd_slot(bs_fds(), fd);
	if (!s || atomic_load(&s->state) != BS_FD_PARKED)
		return s ? atomic_load(&s->state) : BS_FD_NONE;
	if (!bs_park_holds(fd))
		return BS_FD_NONE; /* (the program's own look: asked first) */
	return run_fd(fd, s, now, NULL);
}

uint64_t bs_defer_run(uint64_t now)
{
	struct bs_fdtab *t = bs_fds();
	if (!bs_fd_any_parked(t) || !bs_custody_here())
		return BS_TIMEOUT_NONE;
	uint64_t next = now + BS_DEFER_RECHECK;
	int parked = 0;
	unsigned high = atomic_load(&t->high);
	for (unsigned fd = 0; fd < high && fd < t->cap; fd++) {
		struct bs_fdslot *s = &t->slots[fd];
		if (atomic_load_explicit(&s->state, memory_order_relaxed) == BS_FD_PARKED)
			parked += run_fd((int)fd, s, now, &next) == BS_FD_PARKED;
	}
	return parked ? next : BS_TIMEOUT_NONE;
}

enum bs_screen bs_defer_screen(int fd)
{
	struct bs_fdslot *s = bs_fd_slot(bs_fds(), fd);
	if (!s || bs_fd_slot_state(s) != BS_FD_CONNECTING)
		return BS_SCREEN_KEEP;
	if (!bs_custody_here())
		return BS_SCREEN_KEEP; /* a vfork child's look: the parent's socket */
	const struct bs_config *cfg = bs_active();
	struct sockaddr_storage ss;
	struct bs_dest d = bs_fd_dest(fd, &ss);
	if (!cfg || !d.addr || !bs_nb_parks(bs_cfg_for(cfg, d.addr, d.len)))
		return BS_SCREEN_KEEP; /* the program reads its error itself */
	enum bs_custody c = bs_custody_check(fd);
	if (c != BS_CUSTODY_HELD) {
		if (c == BS_CUSTODY_GONE)
			bs_outcome_forget(fd); /* another socket took the number */
		return BS_SCREEN_KEEP;
	}
	if (!bs_park_may_hide(fd))
		return BS_SCREEN_KEEP; /* its error stays for the program to read */
	uint64_t cookie = bs_sock_cookie(fd);
	int err;
	if (!cookie)
		return BS_SCREEN_KEEP;
	if ((err = bs_sock_take_error(fd)) <= 0) {
		/* another thread's report of the same failure read it first,
		 * and parked the socket: this report goes too */
		return bs_park_is_parked(fd) && bs_park_holds(fd) ? BS_SCREEN_HIDE
								   : BS_SCREEN_KEEP;
	}
	int res = bs_nb_outcome(cfg, fd, err, 1);
	if (res == BS_NB_PARKED_NOW)
		return BS_SCREEN_HIDE;
	if (res == BS_NB_EINTR)
		return BS_SCREEN_EINTR;
	if (res == 0)
		return BS_SCREEN_CONNECTED; /* retry mode reconnected it */
	bs_owe(fd, cookie, res); /* read away here: owed to this very socket */
	return BS_SCREEN_KEEP;
}

/* bounds the loop: each round but the last waits until a parked socket's
 * due time, which then moves on */
#define ROUNDS_MAX 1000000

/* The signals a call's mask blocks are blocked in the thread until the
 * call returns: its one kernel wait is several here, and between them the
 * thread's own mask would let such a signal's handler run inside the
 * call. The kernel reads the program's mask (a bad pointer: no widening,
 * and the real call says EFAULT); glibc's SIGCANCEL and SIGSETXID stay
 * unblocked, as pthread_sigmask leaves them. Returns 1 if the mask was
 * widened (*old: the thread's). */
static int widen_mask(const sigset_t *mask, uint64_t *old)
{
	if (!mask || BS_SYS(SYS_rt_sigprocmask, SIG_BLOCK, mask, old, sizeof *old) != 0)
		return 0;
	uint64_t glibc = (3ull << 31) & ~*old; /* (signals 32 and 33) */
	if (glibc)
		BS_SYS(SYS_rt_sigprocmask, SIG_UNBLOCK, &glibc, NULL, sizeof glibc);
	return 1;
}

static int rounds(void *call, uint64_t deadline,
		  int (*round)(void *call, uint64_t now, uint64_t wake))
{
	for (int n = 0; n < ROUNDS_MAX; n++) {
		uint64_t now = bs_now();
		int r = round(call, now, bs_defer_run(now));
		if (r || bs_now() >= deadline)
			return r; /* (-EINTR: the call's, or a signal ended retry mode's wait) */
	}
	return 0;
}

int bs_defer_rounds(void *call, uint64_t deadline, const sigset_t *mask,
		    int (*round)(void *call, uint64_t now, uint64_t wake))
{
	uint64_t old;
	int widened = widen_mask(mask, &old);
	int r = rounds(call, deadline, round);
	if (widened)
		BS_SYS(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof old);
	return r;
}

uint64_t bs_defer_round_wait(uint64_t now, uint64_t deadline, uint64_t wake)
{
	return bs_timeout_left(now, wake < deadline ? wake : deadline);
}
