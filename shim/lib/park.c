/* park: defer mode's parked sockets. See park.h. */
#include "park.h"

#include "outcome.h"
#include "role.h"

#include "attempt.h"
#include "clock.h"
#include "custody.h"
#include "policy.h"
#include "sock.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <sys/epoll.h>

static struct bs_fdslot *slot(int fd)
{
	return bs_fd_slot(bs_fds(), fd);
}

/* The parked connect's attempt (attempt.h), kept in its slot: the call's
 * start, its steps, the destination's failures and resets it last saw, its
 * last error, and (while parked) in `since` when it last learned of a new
 * step. */
static void attempt_load(const struct bs_config *cfg, struct bs_fdslot *s, struct bs_attempt *a)
{
	bs_attempt_init(a, cfg, atomic_load(&s->call_start), BS_BUDGET_NO_TIMEOUT);
	bs_budget_count(&a->b, atomic_load(&s->steps));
	a->anchor_at = atomic_load(&s->since);
	a->seen_fail = atomic_load(&s->seen_fail);
	a->resets = atomic_load(&s->resets);
	a->last_err = (int)atomic_load(&s->last_err);
}

static void attempt_store(struct bs_fdslot *s, const struct bs_attempt *a)
{
	atomic_store(&s->steps, a->b.attempts);
	atomic_store(&s->since, a->anchor_at);
	atomic_store(&s->seen_fail, a->seen_fail);
	atomic_store(&s->resets, a->resets);
	atomic_store(&s->last_err, (uint32_t)a->last_err);
}

struct bs_decision bs_park_judge(const struct bs_config *cfg, struct bs_fdslot *s,
				 struct bs_entry *e, uint64_t now, int own_err, struct bs_attempt *a)
{
	attempt_load(cfg, s, a);
	if (own_err)
		bs_attempt_failed(a, own_err);
	struct bs_attempt_view v = {
		.state = atomic_load(&e->state),
		.probe = atomic_load(&e->probe),
		.resets = atomic_load(&e->resets),
		.last_err = bs_entry_last_err(e),
		.probe_live = 1, /* a parked socket's probe names no thread: staleness decides */
		.join_at = UINT64_MAX,
	};
	struct bs_decision d = bs_attempt_decide(a, &v, now, bs_policy_longest_wait(&cfg->policy));
	attempt_store(s, a);
	return d;
}

/* Does another number the wrappers saw copied (BS_FDF_TWIN) still name
 * fd's socket? The kernel tells, by cookie. If none does (a dup2 onto the
 * old number, then a close of the new one: perl's IO::Socket::IP), fd's
 * mark goes. */
static int named_twice(int fd, struct bs_fdslot *s)
{
	struct bs_fdtab *t = bs_fds();
	uint64_t mine = bs_sock_cookie(fd);
	unsigned high = atomic_load(&t->high);
	for (unsigned i = 0; i < high && i < t->cap; i++)
		if ((int)i != fd && (atomic_load(&t->slots[i].flags) & BS_FDF_TWIN) &&
		    (!mine || bs_sock_cookie((int)i) == mine))
			return 1;
	atomic_fetch_and(&s->flags, ~BS_FDF_TWIN);
	return 0;
}

static int can_hide(int fd, struct bs_fdslot *s)
{
	/* (no address kept: it could not reconnect) */
	unsigned flags = atomic_load(&s->flags);
	if ((flags & BS_FDF_NO_PARK) || !atomic_load(&s->addrlen))
		return 0;
	if ((flags & BS_FDF_TWIN) && named_twice(fd, s))
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
	int r = bs_sock_epoll_ctl((int)set - 1, EPOLL_CTL_DEL, fd, 0, 0);
	if (r == 0) {
		atomic_fetch_or(&s->flags, BS_FDF_EP_REMOVED);
		return 1;
	}
	if (r == -ENOENT || r == -EBADF || r == -EINVAL) {
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

static void log_give_up(int fd, const struct bs_budget *b, int err)
{
	struct sockaddr_storage ss;
	struct bs_dest d = bs_fd_dest(fd, &ss);
	bs_outcome_give_up(&d, b, err);
}

int bs_park_may_hide(int fd)
{
	struct bs_fdslot *s = slot(fd);
	return s && can_hide(fd, s);
}

uint64_t bs_park_budget_end(const struct bs_config *cfg, int fd)
{
	struct bs_fdslot *s = slot(fd);
	if (!s || !bs_nb_parks(cfg) || !can_hide(fd, s))
		return UINT64_MAX; /* not parked: no give-up line follows */
	struct bs_attempt a; /* as bs_park will judge it, this failure counted */
	attempt_load(cfg, s, &a);
	return bs_budget_last(&a.b, 0) ? 0 : bs_budget_end(&a.b);
}

/* Parked: the slot says so; `since` keeps what bs_park_judge stored in it. */
static int set_parked(struct bs_fdslot *s, int fd)
{
	return bs_fd_set(bs_fds(), fd, BS_FD_PARKED, atomic_load(&s->since));
}

int bs_park(const struct bs_config *cfg, int fd, int err)
{
	struct bs_fdslot *s = slot(fd);
	if (!s || !bs_nb_parks(cfg) || !can_hide(fd, s))
		return 0;
	uint64_t key = atomic_load(&s->key), now = bs_now();
	struct bs_entry *e = bs_table_find(bs_tab(), key);
	if (!e)
		return 0; /* untracked destination (table full) */
	struct bs_attempt a;
	atomic_store(&s->resets, atomic_load(&e->resets)); /* resets before it: not its */
	if (bs_park_judge(cfg, s, e, now, err, &a).verdict == BS_END) {
		log_give_up(fd, &a.b, err);
		return 0;
	}
	if (bs_custody_check(fd) != BS_CUSTODY_HELD || !leave_epoll_set(fd, s))
		return 0;
	bs_sock_abort(fd); /* unconnected, nothing pending: ready to go again */
	if (set_parked(s, fd))
		return 1;
	/* another thread moved the slot meanwhile: the program sees the real
	 * error on the socket as it now is, back in its epoll set */
	rejoin_epoll_set(fd, s);
	bs_owe_now(fd, err);
	return 0;
}

int bs_park_waiting(const struct bs_config *cfg, int fd, int err)
{
	struct bs_fdslot *s = slot(fd);
	if (!s || !bs_nb_parks(cfg) || atomic_load(&s->state) != BS_FD_CONNECTING || !can_hide(fd, s))
		return 0;
	struct bs_entry *e = bs_table_find(bs_tab(), atomic_load(&s->key));
	struct bs_attempt a;
	if (!e)
		return 0;
	atomic_store(&s->resets, atomic_load(&e->resets)); /* resets before it: not its */
	atomic_store(&s->last_err, (uint32_t)err);
	/* (parked before the program has looked at all: in a process with an
	 * io_uring, it may look there) */
	if (bs_park_judge(cfg, s, e, bs_now(), 0, &a).verdict == BS_END ||
	    bs_custody_check(fd) != BS_CUSTODY_HELD || !bs_custody_may_hide_unscreened() ||
	    !leave_epoll_set(fd, s))
		return 0;
	if (set_parked(s, fd))
		return 1;
	rejoin_epoll_set(fd, s);
	return 0;
}

/* (b NULL: the illusion cannot be kept; no give-up line) */
unsigned bs_park_spent(int fd, const struct bs_budget *b)
{
	struct bs_fdslot *s = slot(fd);
	int err = (int)atomic_load(&s->last_err);
	bs_sock_as_refused(fd);
	rejoin_epoll_set(fd, s);
	bs_owe_now(fd, err ? err : ECONNREFUSED);
	if (b)
		log_give_up(fd, b, err);
	return BS_FD_FAILED;
}

void bs_park_rejoin(int fd)
{
	rejoin_epoll_set(fd, slot(fd));
}

void bs_park_end(int fd)
{
	struct bs_fdslot *s = slot(fd);
	if (!bs_park_holds(fd) || (atomic_fetch_or(&s->flags, BS_FDF_BUSY) & BS_FDF_BUSY))
		return; /* (another thread is giving it its next step) */
	if (atomic_load(&s->state) == BS_FD_PARKED)
		bs_park_spent(fd, NULL);
	atomic_fetch_and(&s->flags, ~BS_FDF_BUSY);
}

int bs_park_holds(int fd)
{
	struct bs_fdslot *s = slot(fd);
	if (!s || atomic_load(&s->state) != BS_FD_PARKED)
		return 0;
	enum bs_custody c = bs_custody_check(fd);
	if (c == BS_CUSTODY_GONE) {
		/* closed behind the wrappers' back (fclose, a raw close): the
		 * socket is gone, and with it its epoll registrations and its
		 * probe's attempt */
		bs_outcome_renew(fd);
	}
	return c == BS_CUSTODY_HELD;
}

void bs_park_unscreened(int fd)
{
	struct bs_fdslot *s = slot(fd);
	if (!s || !bs_fd_state_in_flight(atomic_load(&s->state)) || !bs_custody_here())
		return;
	atomic_fetch_or(&s->flags, BS_FDF_NO_PARK);
	bs_park_end(fd);
}

void bs_park_end_out_of_sets(unsigned lo, unsigned hi)
{
	struct bs_fdtab *t = bs_fds();
	if (!bs_fd_any_parked(t) || !bs_custody_here())
		return;
	unsigned high = atomic_load(&t->high);
	for (unsigned fd = 0; fd < high && fd < t->cap; fd++) {
		uint32_t set = atomic_load(&t->slots[fd].ep_set);
		if (set && set - 1 >= lo && set - 1 <= hi &&
		    atomic_load(&t->slots[fd].state) == BS_FD_PARKED)
			bs_park_unscreened((int)fd);
	}
}

/* A socket in flight at fork() is parked or retried by neither process
 * from now on: a child may wait on it, read its error, or share its epoll
 * set before it execs (close-on-exec is no protection until then), so each
 * process learns its outcome from the kernel, as without the shim. One
 * parked now ends here (its last error owed to the parent's next look). */
static void before_fork(void)
{
	struct bs_fdtab *t = bs_fds();
	if (!bs_fd_any_pending(t))
		return;
	unsigned high = atomic_load(&t->high);
	for (unsigned fd = 0; fd < high && fd < t->cap; fd++) {
		unsigned st = atomic_load_explicit(&t->slots[fd].state, memory_order_relaxed);
		if (st == BS_FD_PARKED) {
			bs_park_end((int)fd);
		} else if (st == BS_FD_CONNECTING) {
			bs_outcome_probe_learned((int)fd); /* nobody will publish it */
			bs_fd_clear(t, (int)fd);
		}
	}
}

/* In the child, the sockets the parent was connecting are the parent's:
 * the child forgets them and passes its calls on them through, as if the
 * shim had never seen them. A refusal the shim read away is owed to the
 * child too: the kernel would tell it to whichever process looked first,
 * and without it the child would see a socket with no error, "connected". */
static void after_fork_in_child(void)
{
	bs_custody_start();
	struct bs_fdtab *t = bs_fds();
	if (!bs_fd_any_pending(t))
		return;
	unsigned high = atomic_load(&t->high);
	for (unsigned fd = 0; fd < high && fd < t->cap; fd++)
		if (bs_fd_state_in_flight(atomic_load(&t->slots[fd].state)))
			bs_fd_clear(t, (int)fd);
}

__attribute__((constructor)) static void park_fork_hooks(void)
{
	pthread_atfork(before_fork, NULL, after_fork_in_child);
}
