/* ops: the seccomp engine's connects (see sup.h). Each socket the engine
 * takes custody of is an op, in one of four phases; the attempt model
 * (attempt.h) decides every step, as it does for the library's engines. */
#include "sup.h"

#include "addr.h"
#include "attempt.h"
#include "clock.h"
#include "config.h"
#include "errname.h"
#include "log.h"
#include "policy.h"
#include "sfilter.h"
#include "guard.h"
#include "handsoff.h"
#include "proc.h"
#include "ring.h"
#include "shared.h"
#include "table.h"
#include "timeout.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/tcp.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_OPS 1024
/* A waiting op looks at a table other processes move at least this often,
 * and checks that the program still has its socket. */
#define RECHECK (500 * BS_NS_PER_MS)
/* With the user's shared table, an outcome another process publishes
 * wakes its own waiters at once (a futex) and ours within this. */
#define SHARED_RECHECK (100 * BS_NS_PER_MS)
/* A held connect whose notification vanished (a signal) waits this long
 * for the restarted call before it counts as interrupted. */
#define RESTART_GRACE (50 * BS_NS_PER_MS)
/* How long an owed error waits for the program's next look. */
#define OWED_KEEP (60 * BS_NS_PER_SEC)

enum phase {
	FREE = 0,
	WAITING, /* until `due`, then judged again */
	ATTEMPT, /* a connect of its duplicate is on the ring */
	WATCH,   /* a pace-mode connect the program made itself, watched */
	OWED,    /* its connect failed for good: the program's next look gets `owed` */
};

struct op {
	enum phase phase;
	int dup;          /* our duplicate of the program's socket */
	pid_t tid, tgid;  /* the thread of the last call on it, its process */
	int fd;           /* the program's number for it */
	uint64_t notif;   /* the held connect's notification (0: none) */
	int defer;        /* a Go non-blocking connect, answered EINPROGRESS */
	int window_probe; /* WATCH: inside the window, its failure folds */
	int tried;        /* the engine made an attempt of its own on it */
	int guarded;      /* the guard holds it (guard.h) */
	int left;         /* the program left its connect behind (left_behind) */
	unsigned looks;   /* WATCH: looks at a connect not made yet */
	int owed;
	uint32_t gen;     /* the ring tag's generation */
	struct sockaddr_storage addr;
	socklen_t len;
	uint64_t key;
	const struct bs_config *cfg;
	struct bs_attempt a;
	uint64_t due;     /* its next turn: a wait's end, a check, an expiry */
	uint64_t probe, seen, t0, delay;
	int lock;         /* the lock file's byte that backs our probe, or -1 */
	int lock_waited;  /* (bs_attempt_lock_busy_waits's once) */
};

struct bs_sup {
	int listener, ep;
	const struct bs_config *cfg;
	struct bs_ring *ring;
	struct bs_table *tab;
	uint32_t me, own;
	int shared;       /* the user's shared table (else a private one; see
			   * BS_SUP_TABLE_LATER) */
	int guard;        /* the guard's socketpair end, or -1 */
	size_t notif_size;
	unsigned nops; /* ops not FREE */
	struct op ops[MAX_OPS];
	uint64_t seed, draws;
};

/* ---- answers ---- */

static void respond(struct bs_sup *s, uint64_t id, int err, uint32_t flags)
{
	struct seccomp_notif_resp r = {.id = id, .error = err ? -err : 0, .flags = flags};
	ioctl(s->listener, SECCOMP_IOCTL_NOTIF_SEND, &r); /* (ENOENT: the call is gone) */
}

static void answer(struct bs_sup *s, uint64_t id, int err)
{
	respond(s, id, err, 0);
}

static void let_through(struct bs_sup *s, uint64_t id)
{
	respond(s, id, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE);
}

static int still_waiting(struct bs_sup *s, uint64_t id)
{
	return ioctl(s->listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* ---- the log, in the library's words ---- */

/* A line about o's connect, in the name of the program that made it (the
 * engine's own, if that process cannot be read). */
static void line_start(struct bs_line *l, const struct op *o, const char *event, int err)
{
	char name[128] = "?", prog[33];
	bs_addr_format((const struct sockaddr *)&o->addr, o->len, name, sizeof name);
	pid_t pid = o->tgid ? o->tgid : bs_proc_tgid(o->tid);
	if (pid > 0 && bs_proc_name(pid, prog, sizeof prog))
		bs_line_start_as(l, (uint64_t)pid, prog);
	else
		bs_line_start(l);
	bs_line_event(l, event);
	bs_line_fields(l, name, 0, UINT64_MAX, err);
	bs_line_str(l, "connect ");
	bs_line_str(l, name);
	bs_line_str(l, ": ");
}

static void say_failure(const struct op *o, uint32_t step, uint64_t wait, int err)
{
	if (!bs_log_enabled(BS_LOG_INFO))
		return;
	struct bs_line l;
	line_start(&l, o, "retry", err);
	l.attempt = step, l.wait = wait;
	bs_line_str(&l, bs_errno_msg(err));
	bs_line_str(&l, " (attempt ");
	bs_line_u64(&l, step);
	bs_line_str(&l, "), next attempt in ");
	bs_line_dur(&l, wait);
	bs_line_emit(&l, BS_LOG_INFO);
}

static void say_give_up(const struct op *o, int err)
{
	if (!bs_log_enabled(BS_LOG_ERROR))
		return;
	struct bs_line l;
	line_start(&l, o, "give_up", err);
	l.attempt = o->a.b.attempts;
	bs_line_str(&l, "giving up after ");
	bs_line_u64(&l, o->a.b.attempts);
	bs_line_str(&l, o->a.b.attempts == 1 ? " attempt in " : " attempts in ");
	bs_line_dur(&l, bs_budget_elapsed(&o->a.b, bs_now()));
	bs_line_str(&l, " (");
	bs_line_str(&l, bs_stop_text(o->a.b.stop));
	bs_line_str(&l, "): ");
	bs_line_str(&l, bs_errno_msg(err));
	bs_line_emit(&l, BS_LOG_ERROR);
}

static void say_connected(const struct op *o, uint32_t failures)
{
	if (!failures || !bs_log_enabled(BS_LOG_INFO))
		return;
	struct bs_line l;
	line_start(&l, o, "connected", 0);
	bs_line_str(&l, "connected after ");
	bs_line_u64(&l, failures);
	bs_line_str(&l, failures == 1 ? " failed attempt" : " failed attempts");
	bs_line_emit(&l, BS_LOG_INFO);
}

/* ---- the table ---- */

/* At the first claim (a connect the engine holds, or a failure), the
 * user's table, made if need be; the private one that served until then
 * holds no entry, since every claim comes here first. */
static void share_from_now(struct bs_sup *s)
{
	int shared;
	struct bs_table *t = bs_sup_table(s->cfg, 1, &shared);
	if (shared == 1)
		free(s->tab), s->tab = t;
	else
		free(t);
	s->shared = shared == 1;
}

static struct bs_entry *entry(struct bs_sup *s, const struct op *o, uint64_t now)
{
	if (s->shared == BS_SUP_TABLE_LATER)
		share_from_now(s);
	return bs_table_claim_as(s->tab, o->key, now, o->cfg->policy.max_backoff, s->me, &s->own, NULL);
}

/* Another process's waiters wake on the entry's word; ours, waiting for
 * the same destination, judge again at once. */
static void publish(struct bs_sup *s, struct bs_entry *e, uint64_t key, uint64_t now)
{
	bs_entry_bump(e);
	bs_wake((const uint32_t *)&e->seq);
	for (unsigned i = 0, seen = 0; seen < s->nops && i < MAX_OPS; i++) {
		struct op *o = &s->ops[i];
		if (o->phase == FREE)
			continue;
		seen++;
		if (o->phase == WAITING && o->key == key && o->due > now && (o->notif || o->defer))
			o->due = now;
	}
}

static uint64_t next_wait(struct bs_sup *s, const struct op *o, struct bs_entry *e, uint64_t st)
{
	uint64_t r = bs_mix64(s->seed + ++s->draws * BS_GOLDEN);
	return bs_policy_wait(&o->cfg->policy, bs_state_failures(st) + 1, atomic_load(&e->last_wait),
			      bs_policy_unit(r));
}

static void let_probe_go(struct bs_sup *s, struct op *o)
{
	if (!o->probe)
		return;
	struct bs_entry *e = bs_table_find(s->tab, o->key);
	if (e) {
		bs_probe_release(e, o->probe);
		publish(s, e, o->key, bs_now());
	}
	bs_sup_release(o->lock);
	o->probe = 0, o->lock = -1;
}

/* The failure of o's attempt (started at o->t0 on state o->seen), as one
 * step of the destination's schedule unless it folds into another. */
static void record_failure(struct bs_sup *s, struct op *o, int err, uint64_t now)
{
	bs_attempt_failed(&o->a, err);
	if (o->delay == BS_STOP)
		bs_budget_policy_done(&o->a.b);
	struct bs_entry *e = entry(s, o, now);
	if (!e)
		return;
	uint32_t f = bs_state_failures(o->seen) + 1;
	uint64_t delay = o->delay == BS_STOP ? 0 : o->delay;
	atomic_fetch_add(&e->n_attempts, 1);
	atomic_fetch_add(&e->n_failures, 1);
	bs_table_set_addr(s->tab, e, (const struct sockaddr *)&o->addr, (uint32_t)o->len);
	if (bs_entry_fail(e, o->seen, o->t0, o->t0 + delay, f, err, now)) {
		atomic_store(&e->last_wait, delay);
		if (o->delay != BS_STOP && !bs_budget_last(&o->a.b, o->t0 + delay))
			say_failure(o, f, delay, err);
		publish(s, e, o->key, now);
	}
}

static void record_success(struct bs_sup *s, struct op *o)
{
	struct bs_entry *e = bs_table_find(s->tab, o->key);
	uint64_t st;
	if (!e || bs_state_failures(st = atomic_load(&e->state)) == 0 || (st & BS_PROBATION))
		return;
	uint32_t n = bs_entry_connected(e, o->t0);
	atomic_fetch_add(&e->n_attempts, 1);
	publish(s, e, o->key, bs_now());
	say_connected(o, n);
}

/* ---- ops ---- */

static uint64_t tag_of(const struct bs_sup *s, const struct op *o)
{
	return (uint64_t)(o - s->ops) << 32 | o->gen;
}

static struct op *op_new(struct bs_sup *s)
{
	for (unsigned i = 0; i < MAX_OPS; i++)
		if (s->ops[i].phase == FREE) {
			struct op *o = &s->ops[i];
			*o = (struct op){.gen = o->gen + 1, .dup = -1, .lock = -1};
			s->nops++;
			return o;
		}
	return NULL;
}

static void op_free(struct bs_sup *s, struct op *o)
{
	if (o->phase == ATTEMPT)
		bs_ring_cancel(s->ring, tag_of(s, o));
	if (o->phase == WATCH)
		epoll_ctl(s->ep, EPOLL_CTL_DEL, o->dup, NULL);
	let_probe_go(s, o);
	if (o->guarded)
		bs_guard_hold(s->guard, tag_of(s, o), -1);
	if (o->dup >= 0)
		close(o->dup);
	o->phase = FREE;
	o->gen++;
	s->nops--;
}

/* The op whose socket thread tid's fd names (kcmp: the same open file). */
static struct op *op_of(struct bs_sup *s, pid_t tid, int fd)
{
	for (unsigned i = 0, seen = 0; seen < s->nops && i < MAX_OPS; i++) {
		struct op *o = &s->ops[i];
		if (o->phase == FREE)
			continue;
		seen++;
		if (bs_proc_same_file(tid, fd, o->dup) == 1)
			return o;
	}
	return NULL;
}

/* o's connect failed for good with err: a held call gets err now; a
 * deferred socket owes it to the program's next look, and its waiter is
 * woken (its last edge may already be spent). */
static void owe(struct bs_sup *s, struct op *o, int err, uint64_t now)
{
	let_probe_go(s, o);
	if (o->notif) {
		answer(s, o->notif, err);
		op_free(s, o);
		return;
	}
	o->phase = OWED, o->owed = err, o->due = now + OWED_KEEP;
	o->tgid = o->tgid ? o->tgid : bs_proc_tgid(o->tid);
	if (o->defer)
		shutdown(o->dup, SHUT_RDWR);
}

/* The socket after a failed attempt of ours: unconnected, as the kernel
 * leaves it after a refusal, with no error left over (an AF_UNSPEC connect
 * aborts a handshake still in flight and leaves ECONNRESET behind). */
static void reset_socket(struct op *o)
{
	struct sockaddr unspec = {.sa_family = AF_UNSPEC};
	int err;
	socklen_t n = sizeof err;
	connect(o->dup, &unspec, sizeof unspec);
	getsockopt(o->dup, SOL_SOCKET, SO_ERROR, &err, &n);
}

static void give_up(struct bs_sup *s, struct op *o, uint64_t now)
{
	int err = o->a.last_err ? o->a.last_err : ECONNREFUSED;
	struct bs_entry *e = bs_table_find(s->tab, o->key);
	if (e)
		atomic_fetch_add(&e->n_giveups, 1);
	say_give_up(o, err);
	owe(s, o, err, now);
}

/* The engine's table or ring is full. Before an attempt of its own, the
 * engine cannot take o on: the program's connect goes as without the
 * engine. After one, o gives up (the last real error stands). */
static void out_of_room(struct bs_sup *s, struct op *o, uint64_t now)
{
	if (o->tried) {
		bs_budget_stop(&o->a.b, BS_STOP_TABLE_FULL);
		give_up(s, o, now);
		return;
	}
	let_probe_go(s, o);
	if (o->notif && still_waiting(s, o->notif))
		let_through(s, o->notif);
	else if (o->defer) /* (answered EINPROGRESS: the socket connects by itself) */
		connect(o->dup, (const struct sockaddr *)&o->addr, o->len);
	op_free(s, o);
}

static void start_attempt(struct bs_sup *s, struct op *o, struct bs_entry *e, uint64_t st,
			  uint64_t mine, uint64_t now)
{
	o->seen = st, o->t0 = now, o->probe = mine;
	o->delay = next_wait(s, o, e, st);
	uint64_t limit = bs_policy_attempt_timeout(&o->cfg->policy, o->delay == BS_STOP ? 0 : o->delay);
	uint64_t end = bs_budget_end(&o->a.b);
	if (end != BS_NEVER && end - now < limit)
		limit = end > now ? end - now : 1;
	atomic_store(&e->attempt_at, now);
	int r = bs_ring_connect(s->ring, tag_of(s, o), o->dup, (const struct sockaddr *)&o->addr,
				o->len, limit);
	if (r < 0)
		out_of_room(s, o, now);
	else
		o->phase = ATTEMPT, o->tried = 1, o->due = now + RECHECK;
}

/* The attempt model's verdict for o now, carried out. */
static void judge(struct bs_sup *s, struct op *o, uint64_t now)
{
	uint64_t longest = bs_policy_longest_wait(&o->cfg->policy);
	if (o->left) { /* (between two attempts: the last one's error) */
		owe(s, o, o->a.last_err ? o->a.last_err : ECONNREFUSED, now);
		return;
	}
	for (int tries = 0; tries < 8; tries++) {
		struct bs_entry *e = entry(s, o, now);
		if (!e) {
			out_of_room(s, o, now);
			return;
		}
		uint64_t st = atomic_load(&e->state);
		struct bs_attempt_view v = {.state = st, .probe = atomic_load(&e->probe),
					    .resets = atomic_load(&e->resets),
					    .last_err = bs_entry_last_err(e),
					    .join_at = UINT64_MAX};
		v.probe_live = v.probe != 0; /* (staleness decides) */
		struct bs_decision d = bs_attempt_decide(&o->a, &v, now, longest);
		int lock;
		switch (d.verdict) {
		case BS_GO:
			start_attempt(s, o, e, st, 0, now);
			return;
		case BS_TAKE_PROBE: /* the library's order: the lock byte, then the word */
			lock = bs_sup_hold_probe(s->tab, e);
			if (lock == BS_SUP_BUSY &&
			    bs_attempt_lock_busy_waits(&o->a, v.probe, now, &o->lock_waited)) {
				o->phase = WAITING, o->due = now + SHARED_RECHECK;
				return;
			}
			uint64_t timeout = bs_policy_attempt_timeout(&o->cfg->policy, 0) + longest;
			uint64_t mine = bs_attempt_probe(now, timeout, s->me);
			int took = bs_probe_take(e, v.probe, mine);
			if (!took || atomic_load(&e->state) != st) {
				if (took)
					bs_probe_release(e, mine);
				bs_sup_release(lock);
				continue;
			}
			o->lock = lock;
			start_attempt(s, o, e, st, mine, now);
			return;
		case BS_WAIT:
			o->tgid = o->tgid ? o->tgid : bs_proc_tgid(o->tid); /* (for still_held) */
			if (o->defer && !o->guarded) /* (idle until its next attempt) */
				bs_guard_hold(s->guard, tag_of(s, o), o->dup), o->guarded = 1;
			o->phase = WAITING;
			o->due = bs_min_u64(d.until, now + (s->shared == 1 ? SHARED_RECHECK : RECHECK));
			return;
		default:
			give_up(s, o, now);
			return;
		}
	}
	o->phase = WAITING, o->due = now + 10 * BS_NS_PER_MS;
}

/* ---- outcomes ---- */

static int host_syn_retries(void)
{
	static int known;
	if (!known) {
		char buf[16];
		int fd = open("/proc/sys/net/ipv4/tcp_syn_retries", O_RDONLY | O_CLOEXEC);
		long n = fd >= 0 ? read(fd, buf, sizeof buf) : -1;
		if (fd >= 0)
			close(fd);
		known = bs_timeout_syn_retries(buf, n);
	}
	return known;
}

static int int_option(void *fd, int level, int name)
{
	int v = 0;
	socklen_t l = sizeof v;
	return getsockopt(*(const int *)fd, level, name, &v, &l) ? 0 : v;
}

/* bs_attempt_error_is_final, asked of the engine's duplicate. */
static int final_error(struct op *o, int err)
{
	return bs_attempt_error_is_final(err, (const struct sockaddr *)&o->addr, int_option, &o->dup,
					 host_syn_retries);
}

static void attempt_ended(struct bs_sup *s, struct op *o, int res, uint64_t now)
{
	o->phase = WAITING;
	if (res == 0) {
		let_probe_go(s, o);
		record_success(s, o);
		if (o->notif && !still_waiting(s, o->notif)) {
			/* interrupted by a signal: the call the program makes
			 * again (restarted, or after EINTR) gets 0, as the
			 * kernel's own connect would on a connected socket */
			o->notif = 0;
			owe(s, o, 0, now);
			return;
		}
		if (o->notif)
			answer(s, o->notif, 0);
		op_free(s, o);
		return;
	}
	int err = -res;
	if (err == ECANCELED || err == EINTR) { /* its time limit (EINTR: in io-wq) */
		if (o->notif && o->a.b.prog_end != BS_NEVER && now >= o->a.b.prog_end) {
			let_probe_go(s, o); /* the program's SO_SNDTIMEO: as the kernel says */
			answer(s, o->notif, EINPROGRESS);
			op_free(s, o);
			return;
		}
		err = ETIMEDOUT;
	}
	if (o->left) { /* the program moved on: its socket is its own */
		owe(s, o, err, now);
		return;
	}
	reset_socket(o);
	if (!bs_config_retries(o->cfg, err) || final_error(o, err)) {
		bs_budget_stop(&o->a.b, BS_STOP_NOT_RETRYABLE);
		owe(s, o, err, now);
		return;
	}
	record_failure(s, o, err, now);
	let_probe_go(s, o);
	if (o->notif && !still_waiting(s, o->notif)) {
		o->notif = 0; /* interrupted: a restarted call may come back */
		o->due = now + RESTART_GRACE;
		return;
	}
	judge(s, o, now);
}

/* The ring's completions; enter: first let the kernel post the ones it
 * has (task work runs on our next entry to the kernel). */
static void reap_ring(struct bs_sup *s, int enter)
{
	uint64_t tag;
	int res;
	if (enter)
		syscall(SYS_io_uring_enter, bs_ring_fd(s->ring), 0, 0, 0, NULL, 0);
	while (bs_ring_reap(s->ring, &tag, &res)) {
		struct op *o = &s->ops[(tag >> 32) % MAX_OPS];
		if (o->phase == ATTEMPT && o->gen == (uint32_t)tag)
			attempt_ended(s, o, res, bs_now());
	}
}

/* The next change of o's duplicate wakes the loop (EPOLL_CTL_ADD or _MOD). */
static int watch_outcome(struct bs_sup *s, struct op *o, int how)
{
	struct epoll_event ev = {EPOLLOUT | EPOLLONESHOT, {.u64 = BS_SUP_EV_OWN + (uint64_t)(o - s->ops)}};
	return epoll_ctl(s->ep, how, o->dup, &ev);
}

/* A pace-mode connect's outcome, read from the duplicate's TCP state (the
 * program reads its own error: nothing is taken from the socket). The
 * watch may see the socket before the program's connect has run (an
 * unconnected socket is writable and hung up): that is no outcome. An
 * outcome stands after the program closed the socket (held: it still has
 * it); a connect still pending then is let go with our duplicate. */
/* (the kernel's TCP states, include/net/tcp_states.h) */
enum { SYN_SENT = 2, CLOSED = 7 };
#define MAX_LOOKS 500 /* (2 ms apart: a connect not made within 1 s is not watched) */
static void watched(struct bs_sup *s, struct op *o, int held)
{
	uint64_t now = bs_now();
	struct tcp_info ti;
	socklen_t n = sizeof ti;
	memset(&ti, 0, sizeof ti);
	if (getsockopt(o->dup, IPPROTO_TCP, TCP_INFO, &ti, &n) != 0 ||
	    (!held && (ti.tcpi_state == SYN_SENT || (ti.tcpi_state == CLOSED && !ti.tcpi_segs_out)))) {
		op_free(s, o);
		return;
	}
	if (ti.tcpi_state == SYN_SENT) { /* the next change wakes us */
		watch_outcome(s, o, EPOLL_CTL_MOD);
		o->due = now + RECHECK;
		return;
	}
	if (ti.tcpi_state == CLOSED && !ti.tcpi_segs_out) { /* not made yet */
		if (++o->looks < MAX_LOOKS)
			o->due = now + 2 * BS_NS_PER_MS;
		else
			op_free(s, o);
		return;
	}
	if (ti.tcpi_state != CLOSED) {
		record_success(s, o);
	} else if (o->window_probe) {
		struct bs_entry *e = bs_table_find(s->tab, o->key);
		if (e)
			atomic_fetch_add(&e->n_attempts, 1);
	} else {
		bs_attempt_init(&o->a, o->cfg, o->t0, BS_BUDGET_NO_TIMEOUT);
		o->delay = 0;
		struct bs_entry *e = entry(s, o, now);
		if (e)
			o->delay = next_wait(s, o, e, o->seen);
		record_failure(s, o, ti.tcpi_total_retrans ? ETIMEDOUT : ECONNREFUSED, now);
	}
	op_free(s, o);
}

void bs_sup_on_event(struct bs_sup *s, uint64_t data)
{
	if (data == BS_SUP_EV_OWN + MAX_OPS) {
		reap_ring(s, 1);
		return;
	}
	uint64_t i = data - BS_SUP_EV_OWN;
	if (i < MAX_OPS && s->ops[i].phase == WATCH)
		watched(s, &s->ops[i], 1);
}

/* ---- the program's calls ---- */

static uint64_t sndtimeo_ns(int fd)
{
	struct timeval tv;
	socklen_t n = sizeof tv;
	return getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &n) ? BS_BUDGET_NO_TIMEOUT
								: bs_timeout_sndtimeo(&tv);
}

static int is_tcp(int fd)
{
	int type = 0, proto = 0;
	socklen_t n = sizeof type, m = sizeof proto;
	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &n) == 0 && type == SOCK_STREAM &&
	       getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &m) == 0 && proto == IPPROTO_TCP;
}

/* A pace-mode connect (a non-blocking socket of a program other than Go,
 * which learns the outcome its own way): inside the backoff window it
 * fails at once with the destination's last error, as the library's pace
 * mode does; otherwise the program's own call goes, and the engine
 * watches its duplicate for the outcome. */
static void pace(struct bs_sup *s, struct op *o, uint64_t id, uint64_t now)
{
	struct bs_entry *e = bs_table_find(s->tab, o->key);
	uint64_t st = e ? atomic_load(&e->state) : 0;
	uint64_t at = e ? atomic_load(&e->outcome_at) : 0;
	enum bs_no_wait w = bs_attempt_no_wait(st, at, o->cfg->policy.initial_backoff, now);
	if (w == BS_NW_CLAIM_DUE || w == BS_NW_CLAIM_PROBE)
		if (!atomic_compare_exchange_strong(&e->outcome_at, &at, now))
			w = BS_NW_WINDOW; /* another connect claimed it */
	if (w == BS_NW_WINDOW) {
		int err = bs_entry_last_err(e);
		answer(s, id, err ? err : ECONNREFUSED);
		op_free(s, o);
		return;
	}
	o->seen = st, o->t0 = now, o->window_probe = w == BS_NW_CLAIM_PROBE;
	if (watch_outcome(s, o, EPOLL_CTL_ADD) != 0) {
		let_through(s, id);
		op_free(s, o);
		return;
	}
	o->phase = WATCH, o->due = now + RECHECK;
	o->tgid = bs_proc_tgid(o->tid);
	let_through(s, id);
}

/* The library's bs_sock_answers_at_once, asked of the engine's duplicate. */
static int answered_at_once(const struct op *o)
{
	uint8_t state; /* (tcp_info's first byte) */
	int domain = 0;
	socklen_t l = sizeof state, m = sizeof domain;
	int tcp = getsockopt(o->dup, IPPROTO_TCP, TCP_INFO, &state, &l) == 0;
	getsockopt(o->dup, SOL_SOCKET, SO_DOMAIN, &domain, &m);
	return bs_addr_answered_at_once((const struct sockaddr *)&o->addr, domain, tcp ? state : -1);
}

/* A new connect of a TCP socket: held (blocking), deferred (Go) or paced;
 * one the kernel answers at once goes to it. */
static void take(struct bs_sup *s, struct op *o, uint64_t id, uint64_t now)
{
	if (answered_at_once(o)) {
		let_through(s, id);
		op_free(s, o);
		return;
	}
	int nonblocking = fcntl(o->dup, F_GETFL) & O_NONBLOCK;
	int mode = o->cfg->nonblocking;
	if (nonblocking && mode == BS_NB_OFF) {
		let_through(s, id);
		op_free(s, o);
		return;
	}
	if (nonblocking && (mode == BS_NB_PACE || !bs_proc_is_go(o->tid))) {
		pace(s, o, id, now);
		return;
	}
	bs_attempt_init(&o->a, o->cfg, now, nonblocking ? BS_BUDGET_NO_TIMEOUT : sndtimeo_ns(o->dup));
	struct bs_entry *e = entry(s, o, now);
	if (e)
		bs_attempt_join(&o->a, atomic_load(&e->state), atomic_load(&e->resets),
				bs_entry_last_err(e));
	if (nonblocking) {
		o->defer = 1;
		answer(s, id, EINPROGRESS);
	} else {
		o->notif = id;
	}
	judge(s, o, now);
}

/* A connect on a socket the engine already holds. */
static void join(struct bs_sup *s, struct op *o, uint64_t id, pid_t tid)
{
	if (o->phase == OWED) {
		answer(s, id, o->owed);
		op_free(s, o);
	} else if (o->phase == WATCH) { /* the program's own connect: the kernel knows */
		let_through(s, id);
	} else if (o->defer || (o->notif && still_waiting(s, o->notif))) {
		answer(s, id, EALREADY);
	} else { /* a held connect restarted after a signal: it waits on */
		o->notif = id, o->tid = tid;
		if (o->phase == WAITING && o->due > bs_now() + RECHECK)
			o->due = bs_now();
	}
}

/* A connect on a socket the engine follows, to AF_UNSPEC (the program
 * dissolves the association) or to another destination: the program
 * leaves the engine's connect behind, and the call is the kernel's. A
 * connect another thread holds in the engine ends at its attempt's end
 * with that attempt's error, unretried; anything else is forgotten. */
static int left_behind(struct bs_sup *s, struct op *o, const struct seccomp_notif *n)
{
	struct sockaddr_storage ss;
	socklen_t len = (socklen_t)n->data.args[2];
	if (len < sizeof ss.ss_family || len > sizeof ss ||
	    bs_proc_read((pid_t)n->pid, n->data.args[1], &ss, len) != 0 ||
	    (ss.ss_family != AF_UNSPEC && bs_addr_key((const struct sockaddr *)&ss, len) == o->key))
		return 0;
	let_through(s, n->id);
	if (o->notif && still_waiting(s, o->notif))
		o->left = 1;
	else
		op_free(s, o);
	return 1;
}

static void on_connect(struct bs_sup *s, const struct seccomp_notif *n)
{
	pid_t tid = (pid_t)n->pid;
	int fd = (int)n->data.args[0];
	socklen_t len = (socklen_t)n->data.args[2];
	struct op *o = op_of(s, tid, fd);
	if (o) {
		if (!left_behind(s, o, n))
			join(s, o, n->id, tid);
		return;
	}
	struct sockaddr_storage ss;
	/* (hands off: its library retries it, or its sandbox judges it) */
	if (bs_handsoff_has(tid) || len > sizeof ss || bs_proc_read(tid, n->data.args[1], &ss, len) != 0 ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) || !(o = op_new(s))) {
		let_through(s, n->id);
		return;
	}
	o->tid = tid, o->fd = fd, o->addr = ss, o->len = len;
	o->key = bs_addr_key((const struct sockaddr *)&ss, len);
	o->cfg = bs_config_for(s->cfg, (const struct sockaddr *)&ss, len, NULL, NULL);
	o->dup = bs_proc_getfd(tid, fd);
	o->phase = WAITING;
	if (o->dup < 0 || !is_tcp(o->dup) || o->cfg->disable || bs_proc_other_label(tid) ||
	    o->cfg->policy.kind == BS_POLICY_OFF || o->cfg->policy.kind == BS_POLICY_RESPONSIVE ||
	    !still_waiting(s, n->id)) {
		let_through(s, n->id);
		op_free(s, o);
		return;
	}
	take(s, o, n->id, bs_now());
}

/* getsockopt(SOL_SOCKET, SO_ERROR): a socket the engine holds is answered
 * from its op; any other goes to the kernel. */
static void on_so_error(struct bs_sup *s, const struct seccomp_notif *n)
{
	pid_t tid = (pid_t)n->pid;
	if (s->nops)
		reap_ring(s, 1); /* (the outcome that woke the program may wait there) */
	struct op *o = op_of(s, tid, (int)n->data.args[0]);
	int value;
	if (o && o->phase == OWED)
		value = o->owed;
	else if (o && o->defer)
		value = EINPROGRESS; /* Go waits for the next edge */
	else if (o && o->phase == WAITING && !(o->notif && still_waiting(s, o->notif)))
		value = o->a.last_err ? o->a.last_err : ECONNREFUSED; /* (interrupted: the
			error our attempt took from the socket is the program's) */
	else {
		let_through(s, n->id); /* (mid-attempt, the kernel's 0 is true) */
		return;
	}
	if (!still_waiting(s, n->id))
		return;
	socklen_t optlen = 0;
	if (bs_proc_read(tid, n->data.args[4], &optlen, sizeof optlen) != 0 ||
	    optlen < sizeof value || bs_proc_write(tid, n->data.args[3], &value, sizeof value) != 0) {
		let_through(s, n->id);
		return;
	}
	optlen = sizeof value;
	bs_proc_write(tid, n->data.args[4], &optlen, sizeof optlen);
	answer(s, n->id, 0);
	if (o->phase == OWED || !o->defer)
		op_free(s, o);
}

static void one_notification(struct bs_sup *s)
{
	char buf[256] __attribute__((aligned(8)));
	struct seccomp_notif *n = (struct seccomp_notif *)buf;
	memset(buf, 0, s->notif_size);
	if (ioctl(s->listener, SECCOMP_IOCTL_NOTIF_RECV, n) != 0)
		return; /* (ENOENT: the call was interrupted before we read it) */
	if (n->data.nr == SYS_connect)
		on_connect(s, n);
	else if (n->data.nr == SYS_getsockopt)
		on_so_error(s, n);
	else if (n->data.nr == SYS_prctl && n->data.args[0] == BS_SUP_PRCTL_OPTION) {
		bs_handsoff_add((pid_t)n->pid, BS_HANDS_OFF_LIBRARY);
		answer(s, n->id, BS_SUP_PRCTL_ERRNO);
	} else if (n->data.nr == BS_SYS_LANDLOCK_RESTRICT_SELF) {
		bs_handsoff_add((pid_t)n->pid, BS_HANDS_OFF_SANDBOX); /* (before it takes effect) */
		let_through(s, n->id);
	} else
		let_through(s, n->id);
}

/* The listener is readable: one notification (a wake-up per call; more
 * keep it readable), then the completions already there (a loopback
 * connect is done by the time its submission returns). */
void bs_sup_on_notification(struct bs_sup *s)
{
	one_notification(s);
	reap_ring(s, 0);
}

/* Every notification waiting now; never blocks. */
static void drain_notifications(struct bs_sup *s)
{
	for (int i = 0; i < 64; i++) {
		struct pollfd p = {s->listener, POLLIN, 0};
		if (poll(&p, 1, 0) != 1 || !(p.revents & POLLIN))
			return;
		one_notification(s);
	}
}

/* ---- time ---- */

uint64_t bs_sup_next_due(const struct bs_sup *s)
{
	uint64_t due = UINT64_MAX;
	for (unsigned i = 0, seen = 0; seen < s->nops && i < MAX_OPS; i++)
		if (s->ops[i].phase != FREE) {
			seen++;
			due = bs_min_u64(due, s->ops[i].due);
		}
	return due;
}

/* Does the program still have the socket? (A socket it closed must not
 * live on in our duplicate.) */
static int still_held(struct op *o)
{
	int r = bs_proc_same_file(o->tid, o->fd, o->dup);
	if (r < 0 && o->tgid)
		r = bs_proc_same_file(o->tgid, o->fd, o->dup);
	return r == 1;
}

/* A held connect whose wait ended. */
static void waited(struct bs_sup *s, struct op *o, uint64_t now)
{
	if (o->notif && !still_waiting(s, o->notif)) {
		drain_notifications(s); /* (a restarted call joins first) */
		if (o->phase != WAITING)
			return;
	}
	if (o->notif && !still_waiting(s, o->notif)) {
		o->notif = 0;
		o->due = now + RESTART_GRACE;
	} else if (!o->notif && !o->defer) { /* interrupted: EINTR, as the kernel's */
		owe(s, o, o->a.last_err ? o->a.last_err : ECONNREFUSED, now);
	} else {
		judge(s, o, now);
	}
}

static void turn(struct bs_sup *s, struct op *o, uint64_t now)
{
	if (o->phase == WATCH) { /* (its outcome stands after the program's close) */
		watched(s, o, still_held(o));
		return;
	}
	/* (a thread blocked in a held connect keeps the socket, as the
	 * kernel's own connect does, whatever another thread closes) */
	if (!still_held(o) && !(o->notif && still_waiting(s, o->notif))) {
		op_free(s, o);
		return;
	}
	if (o->phase == OWED)
		op_free(s, o); /* (expired) */
	else if (o->phase == WAITING)
		waited(s, o, now);
	else
		o->due = now + RECHECK;
}

void bs_sup_on_time(struct bs_sup *s, uint64_t now)
{
	for (unsigned i = 0; i < MAX_OPS && s->nops; i++)
		if (s->ops[i].phase != FREE && s->ops[i].due <= now)
			turn(s, &s->ops[i], now);
}

/* ---- setup ---- */

struct bs_sup *bs_sup_open(int ep, const struct bs_config *cfg)
{
	struct seccomp_notif_sizes sz;
	struct bs_sup *s = calloc(1, sizeof *s);
	if (!s || syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) != 0 || sz.seccomp_notif > 256)
		return free(s), NULL;
	s->listener = -1, s->guard = -1, s->ep = ep, s->cfg = cfg;
	s->notif_size = sz.seccomp_notif;
	s->me = (uint32_t)getpid();
	s->seed = cfg->seed_set ? cfg->seed : bs_mix64((uint64_t)bs_now() ^ s->me);
	s->ring = bs_ring_open(MAX_OPS);
	s->tab = s->ring ? bs_sup_table(cfg, 0, &s->shared) : NULL;
	if (!s->tab)
		return free(s), NULL; /* (the ring's memory goes with the process) */
	struct epoll_event ev = {EPOLLIN, {.u64 = BS_SUP_EV_OWN + MAX_OPS}};
	epoll_ctl(ep, EPOLL_CTL_ADD, bs_ring_fd(s->ring), &ev);
	return s;
}

void bs_sup_listen(struct bs_sup *s, int listener, int guard)
{
	s->listener = listener, s->guard = guard;
}
