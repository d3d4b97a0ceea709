/* budget: see budget.h. */
#include "budget.h"

#include "clock.h"

static uint64_t end_after(uint64_t start, uint64_t d)
{
	return d > BS_NEVER - start ? BS_NEVER : start + d;
}

void bs_budget_init(struct bs_budget *b, uint64_t start, uint64_t max_elapsed,
		    uint32_t max_attempts, uint64_t prog_timeout)
{
	*b = (struct bs_budget){
		.start = start,
		.elapsed_end = max_elapsed ? end_after(start, max_elapsed) : BS_NEVER,
		.prog_end = prog_timeout == BS_BUDGET_NO_TIMEOUT ? BS_NEVER
								 : end_after(start, prog_timeout),
		.max_attempts = max_attempts,
	};
}

uint64_t bs_budget_end(const struct bs_budget *b)
{
	return b->elapsed_end < b->prog_end ? b->elapsed_end : b->prog_end;
}

uint64_t bs_budget_elapsed(const struct bs_budget *b, uint64_t now)
{
	return now > b->start ? now - b->start : 0;
}

void bs_budget_count(struct bs_budget *b, uint32_t n)
{
	b->attempts = n > UINT32_MAX - b->attempts ? UINT32_MAX : b->attempts + n;
}

void bs_budget_policy_done(struct bs_budget *b)
{
	b->policy_done = 1;
}

int bs_budget_last(const struct bs_budget *b, uint64_t next)
{
	return (b->max_attempts && b->attempts + 1ull >= b->max_attempts) ||
	       next >= bs_budget_end(b);
}

enum bs_stop bs_budget_stop(struct bs_budget *b, enum bs_stop why)
{
	b->stop = why;
	return why;
}

enum bs_stop bs_budget_check(struct bs_budget *b, uint64_t now)
{
	if (b->policy_done)
		return bs_budget_stop(b, BS_STOP_POLICY);
	if (b->max_attempts && b->attempts >= b->max_attempts)
		return bs_budget_stop(b, BS_STOP_MAX_ATTEMPTS);
	if (now >= b->elapsed_end)
		return bs_budget_stop(b, BS_STOP_MAX_ELAPSED);
	if (now >= b->prog_end)
		return bs_budget_stop(b, BS_STOP_PROG_TIMEOUT);
	return BS_STOP_NONE;
}

enum bs_stop bs_budget_check_next(struct bs_budget *b, uint64_t next)
{
	if (next >= b->elapsed_end)
		return bs_budget_stop(b, BS_STOP_NEXT_ELAPSED);
	if (next >= b->prog_end)
		return bs_budget_stop(b, BS_STOP_NEXT_PROG);
	return BS_STOP_NONE;
}

static const char *const stop_text[BS_STOP_COUNT] = {
	[BS_STOP_NONE] = "within budget",
	[BS_STOP_POLICY] = "the policy allows no more attempts",
	[BS_STOP_MAX_ATTEMPTS] = "max_attempts reached",
	[BS_STOP_MAX_ELAPSED] = "max_elapsed reached",
	[BS_STOP_PROG_TIMEOUT] = "the program's SO_SNDTIMEO expired",
	[BS_STOP_NEXT_ELAPSED] = "next attempt is past max_elapsed",
	[BS_STOP_NEXT_PROG] = "next attempt is past the program's SO_SNDTIMEO",
	[BS_STOP_TABLE_FULL] = "destination table full",
	[BS_STOP_SIGNAL] = "a signal interrupted the wait",
	[BS_STOP_NOT_RETRYABLE] = "the error is not retried",
};

const char *bs_stop_text(enum bs_stop why)
{
	return (unsigned)why < BS_STOP_COUNT ? stop_text[why] : "unknown reason";
}
