/*
 * budget: how much one connect() call may spend, and why it stopped.
 *
 * Promise: pure arithmetic on a caller-owned struct. No I/O, no clock
 * reads, no allocation, no globals: every time is passed in (ns,
 * monotonic), so every function is async-signal-safe and unit-testable.
 * Every retry loop (engine.c, nonblock.c, responsive.c) keeps its call's
 * start, max_elapsed, max_attempts, the program's SO_SNDTIMEO deadline,
 * the attempts counted and the reason it stopped here, and the one give-up
 * line (outcome.c) reads them from here.
 */
#ifndef BS_BUDGET_H
#define BS_BUDGET_H

#include <stdint.h>

/* No SO_SNDTIMEO set by the program. */
#define BS_BUDGET_NO_TIMEOUT UINT64_MAX

/* Why a call stopped retrying; bs_stop_text() gives the log's words. */
enum bs_stop {
	BS_STOP_NONE = 0,       /* still within budget */
	BS_STOP_POLICY,         /* the policy allows no more attempts */
	BS_STOP_MAX_ATTEMPTS,   /* max_attempts reached */
	BS_STOP_MAX_ELAPSED,    /* max_elapsed reached */
	BS_STOP_PROG_TIMEOUT,   /* the program's SO_SNDTIMEO expired */
	BS_STOP_NEXT_ELAPSED,   /* next attempt is past max_elapsed */
	BS_STOP_NEXT_PROG,      /* next attempt is past the program's SO_SNDTIMEO */
	BS_STOP_TABLE_FULL,     /* destination table full */
	BS_STOP_SIGNAL,         /* a signal interrupted the wait */
	BS_STOP_NOT_RETRYABLE,  /* the error is not one that is retried */
	BS_STOP_COUNT
};

struct bs_budget {
	uint64_t start;        /* the call's start */
	uint64_t elapsed_end;  /* start + max_elapsed, or BS_NEVER */
	uint64_t prog_end;     /* start + the program's SO_SNDTIMEO, or BS_NEVER */
	uint32_t max_attempts; /* 0: no limit */
	uint32_t attempts;     /* failed attempts counted against this call */
	int policy_done;       /* the policy said no further attempt */
	enum bs_stop stop;     /* why the call stopped; BS_STOP_NONE until then */
};

/* A call starting at `start`. max_elapsed 0 and max_attempts 0 mean no
 * limit (as in the config); prog_timeout is the program's SO_SNDTIMEO in
 * ns, or BS_BUDGET_NO_TIMEOUT. Ends that would overflow become BS_NEVER. */
void bs_budget_init(struct bs_budget *b, uint64_t start, uint64_t max_elapsed,
		    uint32_t max_attempts, uint64_t prog_timeout);

/* The earlier of the two deadlines (BS_NEVER if neither is set). */
uint64_t bs_budget_end(const struct bs_budget *b);
/* Time spent at `now` (0 if now is before the start). */
uint64_t bs_budget_elapsed(const struct bs_budget *b, uint64_t now);

/* Count n more failed attempts (saturating). */
void bs_budget_count(struct bs_budget *b, uint32_t n);
/* The policy allows no further attempt (bs_budget_check says so next). */
void bs_budget_policy_done(struct bs_budget *b);

/* Would a failure now (the next attempt at `next`) end the call: the
 * attempt count would reach max_attempts, or `next` is at or past a
 * deadline? Records nothing. */
int bs_budget_last(const struct bs_budget *b, uint64_t next);

/* May the call try again at `now`? Checks, in this order, the policy,
 * max_attempts, max_elapsed and the program's SO_SNDTIMEO. Returns the
 * reason (also recorded in b->stop), or BS_STOP_NONE. */
enum bs_stop bs_budget_check(struct bs_budget *b, uint64_t now);
/* Is the next attempt, due at `next`, past max_elapsed or the program's
 * SO_SNDTIMEO? Returns (and records) the reason, or BS_STOP_NONE. */
enum bs_stop bs_budget_check_next(struct bs_budget *b, uint64_t next);
/* Stop for a reason found outside the budget (table full, a signal...).
 * Returns why. */
enum bs_stop bs_budget_stop(struct bs_budget *b, enum bs_stop why);

/* The reason in the log's words: "max_attempts reached", ... Never NULL. */
const char *bs_stop_text(enum bs_stop why);

#endif
