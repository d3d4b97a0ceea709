/* outcome: the publication of what the wrappers learn. See outcome.h. */
#include "outcome.h"

#include "addr.h"
#include "budget.h"
#include "clock.h"
#include "custody.h"
#include "errname.h"
#include "log.h"
#include "policy.h"
#include "role.h"
#include "shared.h"
#include "util.h"
#include "sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <string.h>

int bs_outcome_give_up(const struct bs_dest *d, const struct bs_budget *b, int err)
{
	err = err ? err : bs_dest_is_name(d->addr) ? BS_ERR_EAI(EAI_AGAIN) : ECONNREFUSED;
	struct bs_entry *e = bs_table_find(bs_tab(), d->key);
	if (e)
		atomic_fetch_add(&e->n_giveups, 1);
	if (bs_log_enabled(BS_LOG_ERROR)) {
		struct bs_line l;
		bs_dest_line(&l, d->addr, d->len, "give_up", err);
		l.attempt = b->attempts;
		l.held_back = 1; /* (a loop of connects past the budget repeats it) */
		bs_line_str(&l, "giving up after ");
		bs_line_u64(&l, b->attempts);
		bs_line_str(&l, b->attempts == 1 ? " attempt in " : " attempts in ");
		bs_line_dur(&l, bs_budget_elapsed(b, bs_now()));
		bs_line_str(&l, " (");
		bs_line_str(&l, bs_stop_text(b->stop));
		bs_line_str(&l, "): ");
		bs_line_str(&l, bs_errno_msg(err));
		bs_line_emit(&l, BS_LOG_ERROR);
	}
	return -err;
}

void bs_outcome_log_passed(const struct sockaddr *addr, socklen_t len, const char *why, int err)
{
	struct bs_line l;
	bs_dest_line(&l, addr, len, "pass", err);
	l.held_back = 1;
	bs_line_str(&l, "passed through (");
	bs_line_str(&l, why);
	if (err) {
		bs_line_str(&l, ": ");
		bs_line_str(&l, bs_errno_msg(err));
	}
	bs_line_str(&l, ")");
	bs_line_emit(&l, BS_LOG_DEBUG);
}

/* The failure count this process last told the log of, per slot: one
 * line per step for the whole process, whatever its threads. */
static _Atomic uint32_t g_told[BS_TABLE_SLOTS];

int bs_outcome_tell_step(const struct bs_entry *e, uint32_t failures)
{
	size_t i = (size_t)(e - bs_tab()->entries);
	if (i >= BS_TABLE_SLOTS)
		return 1;
	uint32_t old = atomic_load(&g_told[i]);
	while (old != failures)
		if (atomic_compare_exchange_weak(&g_told[i], &old, failures))
			return 1;
	return 0;
}

void bs_outcome_log_waiting(const struct bs_dest *d, int first, uint32_t failures, int err,
			    const char *who, uint64_t wait)
{
	struct bs_line l;
	bs_dest_line(&l, d->addr, d->len, "wait", err);
	l.attempt = failures;
	l.wait = wait;
	l.held_back = first; /* (each call of a loop of connects says it first) */
	bs_line_str(&l, err ? bs_errno_msg(err) : "backing off");
	bs_line_str(&l, first ? " (" : " (attempt ");
	bs_line_u64(&l, failures);
	if (first)
		bs_line_str(&l, failures == 1 ? " failure); waiting " : " failures); waiting ");
	else
		bs_line_str(&l, ", by another); waiting ");
	bs_line_dur(&l, wait);
	if (first && who) {
		bs_line_str(&l, " while ");
		bs_line_str(&l, who);
		bs_line_str(&l, " tries it");
	} else if (first) {
		bs_line_str(&l, " for its next attempt");
	}
	bs_line_emit(&l, BS_LOG_INFO);
}

void bs_outcome_log_reset(const struct sockaddr *addr, socklen_t len)
{
	if (!bs_log_enabled(BS_LOG_INFO))
		return;
	struct bs_line l;
	bs_dest_line(&l, addr, len, "reset", 0);
	bs_line_str(&l, "backoff reset by the operator, trying now");
	bs_line_emit(&l, BS_LOG_INFO);
}

void bs_publish(struct bs_entry *e)
{
	bs_entry_bump(e);
	bs_wake((const uint32_t *)&e->seq);
}

static void log_failure(const struct bs_dest *d, uint32_t step, uint64_t wait, int err)
{
	struct bs_line l;
	bs_dest_line(&l, d->addr, d->len, "retry", err);
	l.attempt = step;
	l.wait = wait;
	bs_line_str(&l, bs_errno_msg(err));
	bs_line_str(&l, " (attempt ");
	bs_line_u64(&l, step);
	bs_line_str(&l, "), next attempt in ");
	bs_line_dur(&l, wait); /* the schedule's wait, as drawn */
	bs_line_emit(&l, BS_LOG_INFO);
}

/* One failed step of e (read as `seen`) for an attempt that started at
 * `started`; the next attempt `delay` after `from`. */
static void publish_failure(struct bs_entry *e, const struct bs_dest *d, uint64_t seen,
			    uint64_t started, uint64_t from, uint64_t delay, int err, int quiet)
{
	uint32_t f = bs_state_failures(seen) + 1;
	if (delay == BS_STOP) {
		delay = 0; /* no more retries: the give-up line says so */
		quiet = 1;
	}
	uint64_t now = bs_now();
	atomic_fetch_add(&e->n_attempts, 1);
	atomic_fetch_add(&e->n_failures, 1);
	bs_shared_mark_known(e);
	uint64_t at = atomic_load(&e->attempt_at);
	while (at < started && !atomic_compare_exchange_weak(&e->attempt_at, &at, started))
		;
	if (d->addr) /* (a name's text is kept as far as it fits) */
		bs_table_set_addr(bs_tab(), e, d->addr,
				  bs_dest_is_name(d->addr) ? (uint32_t)bs_min_u64(d->len, BS_TABLE_ADDR_MAX)
							   : (uint32_t)d->len);
	bs_res_mark(bs_res(), d->key, bs_dest_host(d), BS_CAND_FAILED, now, BS_RES_HORIZON);
	if (!bs_entry_fail(e, seen, started, from + delay, f, err, now))
		return; /* folded into another outcome */
	atomic_store(&e->last_wait, delay);
	if (!quiet && bs_log_enabled(BS_LOG_INFO))
		log_failure(d, f, delay, err);
	bs_publish(e);
}

void bs_outcome_failed(struct bs_entry *e, const struct bs_dest *d, uint64_t seen,
		       uint64_t t0, uint64_t delay, int err, int quiet)
{
	publish_failure(e, d, seen, t0, t0, delay, err, quiet);
}

/* A failure of the attempt that started at `started`, learned now, whose
 * wait counts from `from`: the attempt's start for a connect that failed,
 * now for a connection that was lost after it connected. */
static int failed_from(const struct bs_config *cfg, const struct bs_dest *d,
		       uint64_t started, uint64_t from, int err, uint64_t announce_before)
{
	uint64_t now = bs_now();
	struct bs_entry *e = bs_shared_claim(d, now, cfg->policy.max_backoff);
	if (!e)
		return 0;
	uint64_t s = atomic_load(&e->state), delay = bs_next_wait(cfg, e, s);
	int quiet = delay != BS_STOP && from + delay >= announce_before;
	publish_failure(e, d, s, started, from, delay, err, quiet);
	return delay == BS_STOP;
}

int bs_outcome_failed_later(const struct bs_config *cfg, const struct bs_dest *d,
			    uint64_t t0, int err, uint64_t announce_before)
{
	return failed_from(cfg, d, t0, t0, err, announce_before);
}

void bs_outcome_probe_failed(const struct bs_dest *d, int err)
{
	struct bs_entry *e = bs_table_find(bs_tab(), d->key);
	if (!e)
		return;
	atomic_fetch_add(&e->n_attempts, 1);
	atomic_fetch_add(&e->n_failures, 1);
	atomic_store(&e->last_err, (uint32_t)err);
	atomic_store(&e->last_used, bs_now());
}

void bs_outcome_connected(const struct bs_dest *d, int fd, uint64_t t0)
{
	/* (Resolution records only need failures: an untried, in-flight or
	 * connected sibling all mean "the program has somewhere to go".) The
	 * attempt's start stands for now: close enough, and no clock read. */
	if (fd >= 0)
		bs_fd_track(bs_fds(), fd, BS_FD_PROBATION, d->key, t0, t0, d->addr,
			    d->addr ? d->len : 0);
	struct bs_entry *e = bs_table_find(bs_tab(), d->key);
	uint64_t s;
	if (!e || bs_state_failures(s = atomic_load(&e->state)) == 0 || (s & BS_PROBATION) ||
	    (fd >= 0 && !bs_sock_is_stream(fd))) /* a UDP connect proves nothing */
		return;
	/* the outcome's time is its attempt's start, as the fd records it:
	 * a failure of this same connection later (closed early, a send
	 * error) is then never folded into its own success */
	uint32_t n = bs_entry_connected(e, t0);
	atomic_fetch_add(&e->n_attempts, 1);
	bs_shared_mark_known(e);
	bs_publish(e);
	if (n && bs_log_enabled(BS_LOG_INFO)) {
		struct bs_line l;
		int name = bs_dest_is_name(d->addr);
		bs_dest_line(&l, d->addr, d->len, name ? "resolved" : "connected", 0);
		l.attempt = n + 1;
		bs_line_str(&l, name ? "resolved after " : "connected after ");
		bs_line_u64(&l, n);
		bs_line_str(&l, n == 1 ? " failed attempt" : " failed attempts");
		bs_line_emit(&l, BS_LOG_INFO);
	}
}

/* key's entry, if a healthy connection would change anything for it. */
static struct bs_entry *in_backoff(uint64_t key)
{
	struct bs_entry *e = bs_table_find(bs_tab(), key);
	return e && atomic_load(&e->state) != 0 ? e : NULL;
}

void bs_outcome_healthy(uint64_t key)
{
	struct bs_entry *e = in_backoff(key);
	if (e && bs_entry_ok(e))
		bs_publish(e);
}

/* A list the program walks by itself (libpq host=A,B, pgJDBC, gRPC's
 * ipv4:A,B): it closed a socket whose failure the shim was hiding (its
 * own connect timeout ran out), then at once connected another address on
 * the same port. That is learned as a resolution of the two would be
 * (resolv.h): for WALK_LASTS, the address it left has an alternative, so
 * its next refusal reaches the program at once, while the other has not
 * failed. A process remembers the last socket it left. */
#define WALK_WITHIN BS_RES_FALLBACK
#define WALK_LASTS (600 * BS_NS_PER_SEC)

static _Atomic uint64_t walk_at; /* 0: none; written last, taken by CAS */
static struct sockaddr_storage walk_addr;
static socklen_t walk_len;

static unsigned port_of(const struct sockaddr *a, socklen_t len)
{
	return bs_addr_kind(a, len) == BS_ADDR_INET ? ntohs(((const struct sockaddr_in *)(const void *)a)->sin_port)
						    : 0; /* (sin6_port lies there too) */
}

static void walk_left(int fd)
{
	struct sockaddr_storage ss;
	struct bs_dest d = bs_fd_dest(fd, &ss);
	if (!d.addr || !port_of(d.addr, d.len))
		return;
	memcpy(&walk_addr, d.addr, d.len);
	walk_len = d.len;
	atomic_store(&walk_at, bs_now());
}

static void walk_on(const struct sockaddr *to, socklen_t len, uint64_t key, uint64_t now)
{
	uint64_t at = atomic_load(&walk_at);
	if (!at || now - at > WALK_WITHIN)
		return;
	struct sockaddr_storage from;
	socklen_t flen = walk_len;
	memcpy(&from, &walk_addr, sizeof from);
	uint64_t fkey = bs_addr_key((struct sockaddr *)&from, flen);
	if (fkey == key || port_of((struct sockaddr *)&from, flen) != port_of(to, len) ||
	    !atomic_compare_exchange_strong(&walk_at, &at, 0))
		return;
	bs_res_learn_walk(bs_res(), fkey, key, now, WALK_LASTS);
	if (bs_log_enabled(BS_LOG_INFO)) {
		char next[128];
		bs_addr_format(to, len, next, sizeof next);
		struct bs_line l;
		bs_dest_line(&l, (struct sockaddr *)&from, flen, "walk", 0);
		l.held_back = 1;
		bs_line_str(&l, "the program gave up on it and went on to ");
		bs_line_str(&l, next);
		bs_line_str(&l, ": it walks a list of its own, so its refusals reach it at once while ");
		bs_line_str(&l, next);
		bs_line_str(&l, " has not failed");
		bs_line_emit(&l, BS_LOG_INFO);
	}
}

int bs_outcome_started(const struct bs_config *cfg, int fd, const struct sockaddr *addr,
		       socklen_t len, uint64_t key, uint64_t t0)
{
	walk_on(addr, len, key, t0);
	int mode = bs_nb_mode(cfg);
	if (mode != BS_NB_OFF) {
		bs_fd_track(bs_fds(), fd, BS_FD_CONNECTING, key, t0, t0, addr, len);
		struct bs_entry *e = bs_table_find(bs_tab(), key);
		atomic_store(&bs_fd_slot(bs_fds(), fd)->seen_fail,
			     e ? bs_state_failures(atomic_load(&e->state)) : 0);
		/* custody from the start in the modes that may hide its failure:
		 * the socket, not whatever takes the number later, is the one
		 * that may be parked */
		if (bs_nb_parks(cfg))
			bs_custody_take(fd);
	}
	return -EINPROGRESS;
}

void bs_outcome_paced_connected(int fd, uint64_t t0)
{
	bs_fd_set(bs_fds(), fd, BS_FD_HEALTHY, t0);
}

void bs_outcome_forget(int fd)
{
	bs_fd_clear(bs_fds(), fd);
}

uint64_t bs_dest_host(const struct bs_dest *d)
{
	return d->addr ? bs_addr_host_key(d->addr, d->len) : 0;
}

struct bs_dest bs_fd_dest(int fd, struct sockaddr_storage *ss)
{
	struct bs_dest d = {0, (const struct sockaddr *)ss, 0};
	if (!bs_fd_read_dest(bs_fds(), fd, &d.key, ss, &d.len))
		d.key = atomic_load(&bs_fd_slot(bs_fds(), fd)->key), d.len = 0;
	if (!d.len)
		d.addr = NULL;
	return d;
}

/* The one healthy_after test: has fd's connection lived that long? */
static int lived(const struct bs_config *cfg, int fd)
{
	uint64_t since = bs_fd_since_ns(fd), now = bs_now();
	return now > since && now - since >= cfg->healthy_after;
}

/* The one "proved healthy" transition: the destination, then the fd. */
static void proved_healthy(int fd, uint64_t key)
{
	bs_outcome_healthy(key);
	bs_fd_set(bs_fds(), fd, BS_FD_HEALTHY, bs_now());
}

int bs_outcome_lived(const struct bs_config *cfg, int fd, uint64_t key)
{
	if (!lived(cfg, fd))
		return 0;
	proved_healthy(fd, key); /* healthy, whatever ends it now */
	return 1;
}

void bs_outcome_first_byte(const struct bs_config *cfg, int fd, const struct bs_dest *d)
{
	if (bs_outcome_lived(cfg, fd, d->key))
		return;
	if (!bs_sock_peer_is(fd, d->key))
		bs_fd_clear(bs_fds(), fd); /* the number was reused behind us */
	else
		proved_healthy(fd, d->key);
}

int bs_outcome_first_byte_calm(int fd)
{
	struct bs_fdslot *s = bs_fd_slot(bs_fds(), fd);
	return s && !in_backoff(atomic_load(&s->key)) && bs_fd_first_byte(s);
}

void bs_outcome_closed_early(const struct bs_config *cfg, int fd, const struct bs_dest *d,
			     int err)
{
	if (bs_outcome_lived(cfg, fd, d->key))
		return;
	if (!bs_sock_peer_is(fd, d->key)) {
		bs_fd_clear(bs_fds(), fd); /* the number was reused behind us */
	} else if (err == 0 && bs_sock_peer_took_all(fd)) {
		proved_healthy(fd, d->key); /* an upload the peer took in full */
	} else {
		/* closed or reset before a single byte: a failed attempt */
		failed_from(cfg, d, bs_fd_since_ns(fd), bs_now(), err ? err : ECONNRESET, UINT64_MAX);
		bs_fd_clear(bs_fds(), fd);
	}
}

void bs_outcome_send_error(const struct bs_config *cfg, int fd, int err)
{
	struct sockaddr_storage ss;
	struct bs_dest d;
	if (!bs_sock_is_stream(fd)) {
		bs_fd_clear(bs_fds(), fd); /* a datagram's error (outcome.h) */
	} else if (bs_sock_peer_is(fd, (d = bs_fd_dest(fd, &ss)).key)) {
		if (d.addr)
			cfg = bs_cfg_for(cfg, d.addr, d.len);
		failed_from(cfg, &d, bs_fd_since_ns(fd), bs_now(), err, UINT64_MAX);
		bs_fd_clear(bs_fds(), fd);
	}
}

/* The settings that apply to fd's destination ([dest] rules). */
static const struct bs_config *cfg_of_fd(const struct bs_config *cfg, int fd)
{
	if (!cfg->rules || !cfg->rules->n)
		return cfg; /* no [dest] sections: no address to read */
	struct sockaddr_storage ss;
	struct bs_dest d = bs_fd_dest(fd, &ss);
	return d.addr ? bs_cfg_for(cfg, d.addr, d.len) : cfg;
}

void bs_outcome_sent(const struct bs_config *cfg, int fd)
{
	bs_outcome_lived(cfg_of_fd(cfg, fd), fd, atomic_load(&bs_fd_slot(bs_fds(), fd)->key));
}

/* A connect the program saw succeed without a look the shim screens
 * (EPOLLOUT alone, as a connect-only health check learns it) is closed:
 * a success all the same, if fd is connected to the slot's destination. */
static void connected_unseen(int fd, struct bs_fdslot *s)
{
	const struct bs_config *cfg = bs_active();
	uint64_t key = atomic_load(&s->key);
	if (!cfg || !in_backoff(key) || !bs_sock_has_peer(fd) || !bs_sock_peer_is(fd, key))
		return;
	struct sockaddr_storage ss;
	struct bs_dest d = bs_fd_dest(fd, &ss);
	if (d.addr && bs_cfg_for(cfg, d.addr, d.len)->policy.kind != BS_POLICY_RESPONSIVE)
		bs_outcome_connected(&d, -1, bs_fd_since_ns(fd));
}

void bs_outcome_closed(int fd)
{
	struct bs_fdslot *s = bs_fd_slot(bs_fds(), fd);
	const struct bs_config *cfg;
	if (!s)
		return;
	switch (atomic_load_explicit(&s->state, memory_order_acquire)) {
	case BS_FD_EPOLL:
		bs_fd_ep_forget_set(bs_fds(), fd); /* its registrations are gone */
		break;
	case BS_FD_CONNECTING:
		connected_unseen(fd, s);
		/* fall through */
	case BS_FD_PARKED:
		if (atomic_load(&s->state) == BS_FD_PARKED)
			walk_left(fd); /* (a failure it was hiding) */
		bs_outcome_probe_learned(fd); /* a probe closed: others may go */
		break;
	case BS_FD_PROBATION:
		/* (a destination not in backoff has nothing to reset: no
		 * clock read, no settings looked up) */
		if (in_backoff(atomic_load(&s->key)) && (cfg = bs_active()) &&
		    lived(cfg_of_fd(cfg, fd), fd))
			proved_healthy(fd, atomic_load(&s->key));
		break;
	}
	bs_fd_renew_slot(bs_fds(), s); /* the number names nothing now */
}

void bs_owe(int fd, uint64_t cookie, int err)
{
	bs_fd_set_ident(bs_fds(), fd, cookie);
	bs_fd_fail(bs_fds(), fd, err);
}

int bs_owed_holds(int fd)
{
	if (bs_fd_state(bs_fds(), fd) != BS_FD_FAILED)
		return 0;
	enum bs_custody c = bs_custody_check(fd);
	if (c == BS_CUSTODY_GONE)
		bs_fd_clear(bs_fds(), fd); /* closed behind our back, number reused */
	return c == BS_CUSTODY_HELD;
}

int bs_owed_take(int fd)
{
	return bs_owed_holds(fd) ? bs_fd_take_err(bs_fds(), fd) : 0;
}

void bs_owe_now(int fd, int err)
{
	uint64_t cookie = bs_sock_cookie(fd);
	if (cookie)
		bs_owe(fd, cookie, err);
	else
		bs_outcome_forget(fd);
}

uint64_t bs_outcome_take_probe(int fd)
{
	struct bs_fdslot *s = bs_fd_slot(bs_fds(), fd);
	return s && atomic_load(&s->probe) ? atomic_exchange(&s->probe, 0) : 0;
}

void bs_outcome_let_probe_go(uint64_t key, uint64_t probe)
{
	struct bs_entry *e;
	if (probe && (e = bs_table_find(bs_tab(), key)) != NULL)
		bs_probe_release(e, probe);
}

void bs_outcome_probe_learned(int fd)
{
	struct bs_fdslot *s = bs_fd_slot(bs_fds(), fd);
	if (s && atomic_load(&s->probe))
		bs_outcome_let_probe_go(atomic_load(&s->key), bs_outcome_take_probe(fd));
}

void bs_outcome_renew(int fd)
{
	bs_outcome_probe_learned(fd);
	bs_fd_renew(bs_fds(), fd);
}
