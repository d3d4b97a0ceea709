/* park: defer mode's parked sockets. See park.h. */
#include "park.h"

#include "budget.h"
#include "clock.h"
#include "custody.h"
#include "log.h"
#include "policy.h"
#include "real.h"
#include "shared.h"
#include "sock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>

#define PROBE_GRACE (1 * BS_NS_PER_SEC)
/* a probe of a parked socket names no thread: 0 is no thread's tid */
#define PARK_PROBE_TID 0u

static struct bs_fdslot *slot(int fd)
{
	return bs_fd_slot(bs_fds(), fd);
}

/* The destination's failure steps this connect lived through, brought up
 * to date from the destination's count; its own failure (`own`) counts one
 * even when it folded into another socket's step. */
static uint32_t steps_now(struct bs_fdslot *s, uint64_t state, int own)
{
	uint32_t f = bs_state_failures(state), seen = atomic_load(&s->seen_fail);
	uint32_t steps = atomic_load(&s->steps), more = f > seen ? f - seen : 0;
	steps += more > (uint32_t)own ? more : (uint32_t)own;
	atomic_store(&s->steps, steps);
	atomic_store(&s->seen_fail, f);
	return steps;
}

static void budget_of(const struct bs_config *cfg, struct bs_fdslot *s, uint32_t steps,
		      struct bs_budget *b)
{
	bs_budget_init(b, atomic_load(&s->call_start), cfg->max_elapsed, cfg->max_attempts,
		       BS_BUDGET_NO_TIMEOUT);
	bs_budget_count(b, steps);
}

/* When the destination is next due for this parked socket: when the table
 * says, but never later than the longest wait of the schedule after the
 * socket last learned something: its own park, or the table's last
 * outcome (clamped to now: the table is advice, not proof). So a table
 * whose prober died lets the socket go on its own, and a table that goes
 * on publishing a step at a time keeps a herd of parked sockets to its
 * schedule instead of releasing all those parked at once together. */
static uint64_t due_of(const struct bs_config *cfg, struct bs_fdslot *s, uint64_t state,
		       uint64_t now)
{
	uint64_t since = atomic_load(&s->since);
	struct bs_entry *e = bs_table_find(bs_tab(), atomic_load(&s->key));
	uint64_t outcome = e ? atomic_load(&e->outcome_at) : 0;
	if (outcome > now)
		outcome = now;
	return bs_shared_due(cfg, state, outcome > since ? outcome : since);
}

/* Would the budget end before the destination is next due? */
static int budget_ends(const struct bs_config *cfg, struct bs_fdslot *s, uint64_t state,
		       int own, uint64_t now, struct bs_budget *b)
{
	budget_of(cfg, s, steps_now(s, state, own), b);
	if (bs_budget_check(b, now) != BS_STOP_NONE)
		return 1;
	return !bs_state_may_attempt(state) &&
	       bs_budget_check_next(b, due_of(cfg, s, state, now)) !=
		       BS_STOP_NONE;
}

/* defer parks; so does retry, wherever it may not wait */
static int parks(const struct bs_config *cfg)
{
	int mode = bs_nb_mode(cfg);
	return mode == BS_NB_DEFER || mode == BS_NB_RETRY;
}

static int can_hide(int fd, struct bs_fdslot *s)
{
	if (atomic_load(&s->flags) & BS_FDF_NO_PARK)
		return 0;
	if (!atomic_load(&s->addrlen)) /* no address kept: it could not reconnect */
		return 0;
	if (bs_sock_has_flag(fd, O_ASYNC)) { /* its signals would tell */
		atomic_fetch_or(&s->flags, BS_FDF_NO_PARK);
		return 0;
	}
	return 1;
}

/* Out of its epoll set while parked (a failed socket is HUP,
 * level-triggered). A registration the kernel does not know was stale. */
static int leave_epoll_set(int fd, struct bs_fdslot *s)
{
	uint32_t set = atomic_load(&s->ep_set);
	if (!set)
		return 1;
	int err = bs_sock_epoll_ctl((int)set - 1, EPOLL_CTL_DEL, fd, 0, 0);
	if (err == 0) {
		atomic_fetch_or(&s->flags, BS_FDF_EP_REMOVED);
		return 1;
	}
	if (err == ENOENT || err == EBADF || err == EINVAL) {
		atomic_store(&s->ep_set, 0);
		return 1;
	}
	return 0;
}

static void rejoin_epoll_set(int fd, struct bs_fdslot *s)
{
	uint32_t set = atomic_load(&s->ep_set);
	if (!(atomic_fetch_and(&s->flags, ~BS_FDF_EP_REMOVED) & BS_FDF_EP_REMOVED) || !set)
		return;
	if (bs_sock_epoll_ctl((int)set - 1, EPOLL_CTL_ADD, fd, atomic_load(&s->ep_events),
			      atomic_load(&s->ep_data)) != 0)
		atomic_store(&s->ep_set, 0);
}

/* The program's next look at fd gets err (bs_owed_take). */
static void owe(int fd, int err)
{
	struct bs_sock_ident id;
	if (bs_sock_ident(fd, &id))
		bs_owe(fd, &id, err);
	else
		bs_outcome_forget(fd);
}

uint64_t bs_park_take_probe(int fd)
{
	struct bs_fdslot *s = slot(fd);
	return s && atomic_load(&s->probe) ? atomic_exchange(&s->probe, 0) : 0;
}

void bs_park_let_probe_go(uint64_t key, uint64_t probe)
{
	struct bs_entry *e;
	if (probe && (e = bs_table_find(bs_tab(), key)) != NULL)
		bs_probe_release(e, probe);
}

void bs_park_outcome_learned(int fd)
{
	struct bs_fdslot *s = slot(fd);
	if (s && atomic_load(&s->probe))
		bs_park_let_probe_go(atomic_load(&s->key), bs_park_take_probe(fd));
}

static int log_give_up(const struct bs_config *cfg, int fd, const struct bs_budget *b, int err)
{
	struct sockaddr_storage ss;
	struct bs_dest d = bs_fd_dest(fd, &ss);
	(void)cfg;
	int saved = errno;
	bs_outcome_give_up(&d, b, err);
	errno = saved;
	return 0;
}

uint64_t bs_park_budget_end(const struct bs_config *cfg, int fd)
{
	struct bs_fdslot *s = slot(fd);
	if (!s || !parks(cfg) || !can_hide(fd, s))
		return UINT64_MAX; /* not parked: no give-up line follows */
	struct bs_budget b; /* as bs_park will judge it, this failure counted */
	budget_of(cfg, s, atomic_load(&s->steps), &b);
	return bs_budget_last(&b, 0) ? 0 : bs_budget_end(&b);
}

int bs_park(const struct bs_config *cfg, int fd, int err)
{
	struct bs_fdslot *s = slot(fd);
	if (!s || !parks(cfg) || !can_hide(fd, s))
		return 0;
	uint64_t key = atomic_load(&s->key), now = bs_now();
	struct bs_entry *e = bs_table_find(bs_tab(), key);
	if (!e)
		return 0; /* untracked destination (table full) */
	struct bs_budget b;
	if (budget_ends(cfg, s, atomic_load(&e->state), 1, now, &b))
		return log_give_up(cfg, fd, &b, err);
	if (!bs_custody_take(fd) || !leave_epoll_set(fd, s))
		return 0;
	int saved = errno;
	bs_sock_abort(fd); /* unconnected, nothing pending: ready to go again */
	errno = saved;
	atomic_store(&s->last_err, (uint32_t)err);
	atomic_store(&s->resets, atomic_load(&e->resets));
	bs_fd_set(bs_fds(), fd, BS_FD_PARKED, now);
	return 1;
}

int bs_park_waiting(const struct bs_config *cfg, int fd, int err)
{
	struct bs_fdslot *s = slot(fd);
	if (!s || !parks(cfg) || atomic_load(&s->state) != BS_FD_CONNECTING || !can_hide(fd, s))
		return 0;
	struct bs_entry *e = bs_table_find(bs_tab(), atomic_load(&s->key));
	struct bs_budget b;
	if (!e || budget_ends(cfg, s, atomic_load(&e->state), 0, bs_now(), &b) ||
	    !bs_custody_take(fd) || !leave_epoll_set(fd, s))
		return 0;
	atomic_store(&s->last_err, (uint32_t)err);
	atomic_store(&s->resets, atomic_load(&e->resets));
	bs_fd_set(bs_fds(), fd, BS_FD_PARKED, bs_now());
	return 1;
}

/* May this parked socket go now? The destination connected (all go), or
 * it is due and this socket takes its one probe. */
static int may_go(const struct bs_config *cfg, struct bs_entry *e, struct bs_fdslot *s,
		  uint64_t state, uint64_t now)
{
	if (bs_state_may_attempt(state))
		return 1;
	if (now < due_of(cfg, s, state, now))
		return 0;
	uint64_t p = atomic_load(&e->probe);
	if (p && bs_probe_stale_at(p) > now)
		return 0; /* another socket or thread is probing */
	uint64_t mine = bs_probe_make(now + PROBE_GRACE + bs_policy_attempt_timeout(&cfg->policy, 0),
				      PARK_PROBE_TID);
	if (!bs_probe_take(e, p, mine))
		return 0;
	if (atomic_load(&e->state) != state) {
		/* the probe before this one published its outcome (then let
		 * go) after this thread read the state: judge again */
		bs_probe_release(e, mine);
		return 0;
	}
	atomic_store(&s->probe, mine);
	return 1;
}

/* The reconnect: the program's socket, non-blocking as the program made it. */
static void retry_parked(const struct bs_config *cfg, int fd, struct bs_fdslot *s, uint64_t now)
{
	struct sockaddr_storage ss;
	struct bs_dest d = bs_fd_dest(fd, &ss);
	int saved = errno;
	int r = d.addr ? bs_real_connect(fd, d.addr, d.len) : -1;
	int err = r == 0 ? 0 : d.addr ? errno : EBADF;
	if (r < 0 && err == ECONNABORTED) { /* see sock.h */
		r = bs_real_connect(fd, d.addr, d.len);
		err = r == 0 ? 0 : errno;
	}
	errno = saved;
	bs_fd_set(bs_fds(), fd, BS_FD_CONNECTING, now);
	rejoin_epoll_set(fd, s);
	if (r == 0 || err == EINPROGRESS || err == EALREADY)
		return; /* (a connect at once: the program learns it as usual) */
	/* failed at once: an outcome like any other */
	int res = bs_nb_outcome(cfg, fd, err, 0);
	if (res != BS_NB_PARKED_NOW)
		owe(fd, res ? res : err); /* to its next look */
}

/* Did an operator reset the destination since fd was parked? Then it goes
 * now, whatever the state says by the time this thread looks (another
 * waiter's attempt may have failed already), and says why. */
static int was_reset(struct bs_entry *e, struct bs_fdslot *s, const struct bs_dest *d)
{
	uint32_t r = atomic_load(&e->resets);
	if (r == atomic_load(&s->resets))
		return 0;
	atomic_store(&s->resets, r);
	if (bs_log_enabled(BS_LOG_INFO))
		bs_outcome_log_reset(d);
	return 1;
}

/* The budget is spent (or the illusion cannot be kept): the program sees
 * the last real error, as without the shim. */
static unsigned end_parked(const struct bs_config *cfg, int fd, struct bs_fdslot *s,
			   const struct bs_budget *b)
{
	int err = (int)atomic_load(&s->last_err);
	rejoin_epoll_set(fd, s);
	owe(fd, err ? err : ECONNREFUSED);
	if (b)
		log_give_up(cfg, fd, b, err);
	return BS_FD_FAILED;
}

void bs_park_end(int fd)
{
	if (bs_park_holds(fd))
		end_parked(NULL, fd, slot(fd), NULL);
}

/* A parked slot whose number no longer names the parked socket (closed
 * behind the wrappers' back: fclose, a raw close): the socket is gone, and
 * with it its epoll registrations and its probe's attempt. */
static void forget_stale(struct bs_fdslot *s)
{
	if (atomic_load(&s->probe))
		bs_park_let_probe_go(atomic_load(&s->key), atomic_exchange(&s->probe, 0));
	bs_fd_renew_slot(bs_fds(), s);
}

int bs_park_holds(int fd)
{
	struct bs_fdslot *s = slot(fd);
	if (!s || atomic_load(&s->state) != BS_FD_PARKED)
		return 0;
	if (bs_custody_holds(fd))
		return 1;
	if (bs_custody_here())
		forget_stale(s);
	return 0;
}

void bs_park_unscreened(int fd)
{
	struct bs_fdslot *s = slot(fd);
	if (!s || !bs_fd_state_in_flight(atomic_load(&s->state)) || !bs_custody_here())
		return;
	atomic_fetch_or(&s->flags, BS_FDF_NO_PARK);
	bs_park_end(fd);
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
	uint64_t state = e ? atomic_load(&e->state) : 0;
	struct bs_budget b;
	if (e && was_reset(e, s, &d)) {
		retry_parked(cfg, fd, s, now); /* the operator said the server is back */
		return bs_fd_state(bs_fds(), fd);
	}
	if (e && budget_ends(cfg, s, state, 0, now, &b))
		return end_parked(cfg, fd, s, &b);
	if (!e || may_go(cfg, e, s, state, now)) {
		retry_parked(cfg, fd, s, now);
		return bs_fd_state(bs_fds(), fd);
	}
	uint64_t due = due_of(cfg, s, state, now);
	if (next && due > now && due < *next)
		*next = due;
	return BS_FD_PARKED;
}

/* One thread at a time gives a parked socket its next step; to the others
 * it stays parked meanwhile. */
static unsigned run_fd(int fd, struct bs_fdslot *s, uint64_t now, uint64_t *next)
{
	if (!bs_park_holds(fd))
		return BS_FD_NONE; /* not ours to answer for: passed through */
	if (atomic_fetch_or(&s->flags, BS_FDF_BUSY) & BS_FDF_BUSY)
		return BS_FD_PARKED;
	unsigned st = atomic_load(&s->state);
	if (st == BS_FD_PARKED)
		st = next_step(fd, s, now, next);
	atomic_fetch_and(&s->flags, ~BS_FDF_BUSY);
	return st;
}

unsigned bs_park_run_fd(int fd, uint64_t now)
{
	struct bs_fdslot *s = slot(fd);
	if (!s || atomic_load(&s->state) != BS_FD_PARKED)
		return s ? atomic_load(&s->state) : BS_FD_NONE;
	return run_fd(fd, s, now, NULL);
}

uint64_t bs_park_run(uint64_t now)
{
	struct bs_fdtab *t = bs_fds();
	if (!bs_fd_any_parked(t) || !bs_custody_here())
		return BS_PARK_NEVER;
	uint64_t next = now + BS_PARK_RECHECK;
	int parked = 0;
	unsigned high = atomic_load(&t->high);
	for (unsigned fd = 0; fd < high && fd < t->cap; fd++) {
		struct bs_fdslot *s = &t->slots[fd];
		if (atomic_load_explicit(&s->state, memory_order_relaxed) == BS_FD_PARKED)
			parked += run_fd((int)fd, s, now, &next) == BS_FD_PARKED;
	}
	return parked ? next : BS_PARK_NEVER;
}

/* The mode that applies to fd's destination, or -1 if unknown. */
static int mode_of(int fd, const struct bs_config **cfgp)
{
	const struct bs_config *cfg = bs_active();
	uint64_t key;
	struct sockaddr_storage ss;
	socklen_t len = 0;
	if (!cfg || !bs_fd_read_dest(bs_fds(), fd, &key, &ss, &len) || !len)
		return -1;
	*cfgp = cfg;
	return bs_nb_mode(bs_cfg_for(cfg, (const struct sockaddr *)&ss, len));
}

enum bs_screen bs_park_screen(int fd)
{
	const struct bs_config *cfg;
	struct bs_fdslot *s = slot(fd);
	if (!s || bs_fd_slot_state(s) != BS_FD_CONNECTING)
		return BS_SCREEN_KEEP;
	if (!bs_custody_here())
		return BS_SCREEN_KEEP; /* a vfork child's look: the parent's socket */
	int mode = mode_of(fd, &cfg);
	if (mode != BS_NB_DEFER && mode != BS_NB_RETRY)
		return BS_SCREEN_KEEP; /* the program reads its error itself */
	struct bs_sock_ident id;
	int err;
	if (!bs_sock_ident(fd, &id) || (err = bs_sock_take_error(fd)) <= 0)
		return BS_SCREEN_KEEP;
	int res = bs_nb_outcome(cfg, fd, err, 1);
	if (res == BS_NB_PARKED_NOW)
		return BS_SCREEN_HIDE;
	if (res == BS_NB_EINTR)
		return BS_SCREEN_EINTR;
	if (res == 0)
		return BS_SCREEN_CONNECTED; /* retry mode reconnected it */
	bs_owe(fd, &id, res); /* read away here: owed to this very socket */
	return BS_SCREEN_KEEP;
}

enum bs_screen bs_park_screen_ready(int fd)
{
	if (bs_fd_state(bs_fds(), fd) != BS_FD_CONNECTING || !bs_sock_has_failed(fd))
		return BS_SCREEN_KEEP;
	return bs_park_screen(fd);
}

/* A socket in flight at fork() is parked or retried by neither process
 * from now on: a child may wait on it, read its error, or share its epoll
 * set before it execs (close-on-exec is no protection until then), so each
 * process learns its outcome from the kernel, as without the shim. One
 * parked now ends here (its last error owed to the parent's next look). */
void bs_park_before_fork(void)
{
	struct bs_fdtab *t = bs_fds();
	if (!bs_fd_any_pending(t))
		return;
	unsigned high = atomic_load(&t->high);
	for (unsigned fd = 0; fd < high && fd < t->cap; fd++) {
		unsigned st = atomic_load_explicit(&t->slots[fd].state, memory_order_relaxed);
		if (st == BS_FD_PARKED)
			bs_park_end((int)fd);
		else if (st == BS_FD_CONNECTING)
			bs_fd_clear(t, (int)fd);
	}
}

/* In the child, the sockets the parent was connecting (or owes an error)
 * are the parent's: the child forgets them and passes its calls on them
 * through, as if the shim had never seen them. */
void bs_park_after_fork_in_child(void)
{
	bs_custody_start();
	struct bs_fdtab *t = bs_fds();
	if (!bs_fd_any_pending(t))
		return;
	unsigned high = atomic_load(&t->high);
	for (unsigned fd = 0; fd < high && fd < t->cap; fd++)
		if (bs_fd_state_is_pending(atomic_load(&t->slots[fd].state)))
			bs_fd_clear(t, (int)fd);
}

/* bounds the loop: each round but the last waits until a parked socket's
 * due time, which then moves on */
#define ROUNDS_MAX 1000000

int bs_park_rounds(void *call, uint64_t deadline, int (*round)(void *call, uint64_t now),
		   int (*screen)(void *call, int r))
{
	int saved = errno;
	for (int n = 0; n < ROUNDS_MAX; n++) {
		int r = round(call, bs_now());
		if (r < 0)
			return r; /* EINTR and the rest: the program's, as they are */
		r = screen(call, r);
		if (r < 0)
			return errno = EINTR, -1;
		if (r || bs_now() >= deadline)
			return errno = saved, r;
	}
	return errno = saved, 0;
}

uint64_t bs_park_round_wait(uint64_t now, uint64_t deadline, uint64_t wake)
{
	return bs_timeout_left(now, wake < deadline ? wake : deadline);
}
