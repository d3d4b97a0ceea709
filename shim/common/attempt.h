/*
 * attempt: the retry of one program connect(), decided in one place.
 *
 * Promise: pure. No I/O, no clock reads, no globals, no allocation: the
 * caller passes what it read of the destination (its table entry, which a
 * shared table makes other processes' word: untrusted) and the time, and
 * gets a verdict: go now, take the destination's one probe (single
 * flight), wait until a time, or stop (why). Async-signal-safe.
 *
 * Every engine carries verdicts out and decides nothing itself: the
 * blocking loop (engine.c) waits on the entry, a parked socket (park.c)
 * stays parked until the time, retry mode (nonblock.c) waits in the
 * program's readiness call. The same rules hold for all of them:
 *  - steps: each new failure step of the destination since the attempt
 *    last looked counts one against its budget; its own failure counts one
 *    even when it folded into another's step;
 *  - a reset by the operator sends it at once, and says so;
 *  - the budget (max_attempts, max_elapsed, the program's SO_SNDTIMEO) is
 *    checked now, and against the next due time before any wait;
 *  - healthy or on probation: go, no probe needed;
 *  - otherwise it is due at the entry's next allowed time, but never later
 *    than the schedule's longest wait after the attempt last learned of a
 *    new step (a table whose prober died, or garbage, cannot hold it);
 *  - due: a probe held by a live holder and not yet stale is waited for;
 *    else the attempt takes the probe.
 */
#ifndef BS_ATTEMPT_H
#define BS_ATTEMPT_H

#include <stdint.h>

#include "budget.h"

struct bs_attempt {
	struct bs_budget b; /* its budget; b.attempts counts its failed steps */
	uint64_t anchor_at; /* when it last learned of a new step */
	uint32_t seen_fail; /* the destination's failure count last seen */
	uint32_t resets;    /* the destination's reset count last seen */
	int last_err;       /* the last real error: its own, or the destination's */
	int own_failed;     /* its own attempt failed since it last looked */
	/* the probe word it last saw held, since when, and how long this
	 * policy's longest attempt may hold one: the word's stale time is
	 * another process's (or a forged) clock, bounded by its own */
	uint64_t probe_seen, probe_seen_at, probe_most;
};

/* What the caller read of the destination. */
struct bs_attempt_view {
	uint64_t state;  /* table.h's state word (0: no entry, healthy) */
	uint64_t probe;  /* table.h's probe word */
	uint32_t resets; /* the entry's reset count */
	int last_err;    /* the entry's last error */
	int probe_live;  /* the caller knows the probe's holder to be alive
			  * (or cannot tell: then 1, and staleness decides) */
	uint64_t join_at; /* a newcomer to a shared schedule may go at this
			   * time, after claiming it (engine.c's join rule);
			   * UINT64_MAX: not a newcomer */
};

enum bs_verdict {
	BS_GO,    /* attempt now, no probe needed (healthy, probation, reset) */
	BS_TAKE_PROBE, /* due: take the probe (then check the state is unchanged) */
	BS_WAIT,  /* not yet: until `until` */
	BS_END,   /* the budget is spent: a->b.stop says why */
};

struct bs_decision {
	enum bs_verdict verdict;
	uint64_t until; /* BS_WAIT: until when (ns) */
	int reset;      /* an operator's reset was noticed (the caller logs it) */
	int join;       /* BS_TAKE_PROBE as a newcomer: claim join_at first */
	uint64_t probe; /* BS_TAKE_PROBE: the probe word it saw, to replace by
			 * compare-and-swap (anything else there: judge again) */
	uint64_t state; /* the state word it judged (still so after the swap,
			 * or judge again) */
};

/* The one place a connect's budget is built (bs_budget_init): cfg's limits
 * and, for a blocking socket only, the program's SO_SNDTIMEO. */
struct bs_config;
void bs_attempt_init(struct bs_attempt *a, const struct bs_config *cfg, uint64_t start,
		     uint64_t prog_timeout);

/* The attempt begins watching the destination in `state` (its failures
 * before this call are not this call's), with `resets` and `last_err`. */
void bs_attempt_join(struct bs_attempt *a, uint64_t state, uint32_t resets, int last_err);

/* Its own attempt failed with err (counted at the next decision). */
void bs_attempt_failed(struct bs_attempt *a, int err);

/* The verdict at `now`. longest_wait: policy.h's bs_policy_longest_wait. */
struct bs_decision bs_attempt_decide(struct bs_attempt *a, const struct bs_attempt_view *v,
				     uint64_t now, uint64_t longest_wait);

/* A non-blocking connect that may not wait (pace mode, and defer's first
 * look) to a destination in `state`, whose last outcome was published at
 * `outcome_at`:
 *  GO:     healthy or on probation;
 *  DUE:    the schedule's next attempt (its failure is the next step);
 *  WINDOW: inside the backoff window: no attempt goes, except
 *  (pace only, `every` = initial_backoff, 0 for none) one per `every`
 *  since the last outcome, which the caller claims by moving outcome_at
 *  from the value it read to now (so concurrent connects send one):
 *  CLAIM_DUE: that attempt, due; CLAIM_PROBE: that attempt inside the
 *  window, a window probe whose failure folds into the current step. */
enum bs_no_wait { BS_NW_GO, BS_NW_DUE, BS_NW_WINDOW, BS_NW_CLAIM_DUE, BS_NW_CLAIM_PROBE };
enum bs_no_wait bs_attempt_no_wait(uint64_t state, uint64_t outcome_at, uint64_t every,
				   uint64_t now);

/* The responsive policy's verdict: every connect to the destination waits
 * its current `interval` (successes included), cut at the budget's end,
 * and then goes anyway: only an attempt can bring the interval down.
 * After the attempt's own failure (bs_attempt_failed), it ends when the
 * budget is spent now or would be by the next go. No probe: the interval
 * paces every caller. GO, WAIT (then go) or END. */
struct bs_decision bs_attempt_paced(struct bs_attempt *a, uint64_t interval, uint64_t now);

/* The probe word of an attempt taken at `now` that may run `timeout`: it
 * goes stale a grace second after the attempt must be over, so a holder
 * that vanished mid-attempt blocks the others no longer. tid: the
 * holder's thread (0 for a parked socket's, which names none). */
#define BS_PROBE_GRACE (1000000000ull)
uint64_t bs_attempt_probe(uint64_t now, uint64_t timeout, uint32_t tid);

/* BS_TAKE_PROBE found the probe's lock byte in the shared table held by
 * another process, which takes its lock before the probe word and keeps
 * it through its attempt. Wait (1) while the probe word seen is in time,
 * and once while it is empty (the holder is between its lock and its
 * swap: a taker that swapped first, without the lock, would look dead to
 * it and lose the probe to it). Past that the holder is gone or stopped,
 * or a fork child kept its lock, and the probe word alone decides (0).
 * *waited_empty: the caller's flag for the once, 0 when its call begins. */
int bs_attempt_lock_busy_waits(struct bs_attempt *a, uint64_t probe, uint64_t now,
			       int *waited_empty);

/* When the probe word p goes stale for this attempt: its own stale time,
 * but no later than probe_most after the attempt first saw it. */
uint64_t bs_attempt_probe_stale(struct bs_attempt *a, uint64_t p, uint64_t now);

struct sockaddr;

/* One int socket option of the socket a caller asks about (`sock`: its
 * own handle), 0 if it cannot be read. */
typedef int (*bs_sockopt_fn)(void *sock, int level, int name);

/* Is err, which a connect of `sock` to addr (NULL: not known) ended with,
 * final whatever the destination does, so that no retry could mend it?
 *  - ETIMEDOUT ended by the program's own bound on the handshake
 *    (bs_timeout_bound_is_programs: TCP_USER_TIMEOUT, TCP_SYNCNT, and the
 *    host's net.ipv4.tcp_syn_retries from `host`);
 *  - ENETUNREACH to an address no route reaches (bs_addr_never_routed,
 *    with the socket's IPV6_V6ONLY).
 * Options are read only for those two errors. The library and the
 * seccomp engine both decide here. */
int bs_attempt_error_is_final(int err, const struct sockaddr *addr, bs_sockopt_fn opt, void *sock,
			      int (*host)(void));

#endif
