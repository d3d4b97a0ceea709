/* resolve: a name that does not resolve yet, retried on its schedule
 * (`resolve = temporary|wait`). The lookup is the engine's op: its
 * single flight across the host, its budget and its log lines are a
 * connect's, keyed by "name:service". See docs/resolve.md. */
#include "resolve.h"

#include "addr.h"
#include "engine.h"
#include "errname.h"
#include "outcome.h"
#include "real.h"
#include "shim.h"

#include <errno.h>
#include <string.h>

struct lookup {
	struct bs_op op;
	const char *node, *svc;
	const struct addrinfo *hints;
	struct addrinfo **res;
	int last;        /* the last real result (EAI_*), 0 before any */
	int errno_in;    /* errno as the program had it */
	int errno_after; /* errno as the last real call left it */
};

/* Each real lookup starts from the program's errno, not from whatever the
 * shim's waits left in it: libc leaves errno alone on most failures. */
static int attempt(struct bs_op *op)
{
	struct lookup *l = (struct lookup *)op;
	errno = l->errno_in;
	l->last = bs_real_getaddrinfo(l->node, l->svc, l->hints, l->res);
	l->errno_after = errno;
	return l->last ? BS_ERR_EAI(l->last) : 0;
}

/* Does this lookup error (BS_ERR_EAI) lead into backoff under cfg? */
static int retries(const struct bs_config *cfg, int err)
{
	return (err == BS_ERR_EAI(EAI_AGAIN) && cfg->resolve >= BS_RESOLVE_TEMPORARY) ||
	       (err == BS_ERR_EAI(EAI_NONAME) && cfg->resolve == BS_RESOLVE_WAIT);
}

/* A name, not an address written out: an empty node or one with a ':'
 * (an IPv6 literal, with or without a scope) never waits, nor does a
 * lookup the program asked to be numeric. */
static int is_name(const char *node, const struct addrinfo *hints)
{
	return *node && !strchr(node, ':') && !(hints && (hints->ai_flags & AI_NUMERICHOST));
}

int bs_resolve(const struct bs_config *cfg, const char *node, const char *svc,
	       const struct addrinfo *hints, struct addrinfo **res)
{
	struct bs_name_addr na;
	socklen_t len = is_name(node, hints) ? bs_name_addr(&na, node, svc) : 0;
	const struct sockaddr *a = (const struct sockaddr *)&na;
	if (len)
		cfg = bs_cfg_for(cfg, a, len);
	if (!len || cfg->resolve == BS_RESOLVE_OFF || !res)
		return bs_real_getaddrinfo(node, svc, hints, res);
	bs_first_connect(); /* the shared table, as for a connect */
	struct lookup l = {{attempt, retries}, node, svc, hints, res, 0, errno, errno};
	struct bs_dest d = {bs_name_key(a, len), a, len};
	int r = bs_engine_retry_op(cfg, &d, &l.op);
	if (r == 0) /* a name has no first byte to wait for: healthy now */
		bs_outcome_healthy(d.key);
	int eai = r == 0 ? 0 : BS_ERR_IS_EAI(-r) ? BS_EAI_OF(-r) : l.last ? l.last : EAI_AGAIN;
	errno = l.errno_after;
	return eai;
}
