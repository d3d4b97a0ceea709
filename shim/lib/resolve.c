/* resolve: a name that does not resolve yet, retried on its schedule
 * (`resolve = temporary|wait`). The lookup is the engine's op: its
 * single flight across the host, its budget and its log lines are a
 * connect's, keyed by "name:service". See docs/resolve.md. */
#include "resolve.h"

#include "addr.h"
#include "engine.h"
#include "errname.h"
#include "real.h"
#include "shim.h"

#include <errno.h>

struct lookup {
	struct bs_op op;
	const char *node, *svc;
	const struct addrinfo *hints;
	struct addrinfo **res;
	int last;        /* the last real result (EAI_*), 0 before any */
	int errno_after; /* errno as it left it (EAI_SYSTEM's detail) */
};

static int attempt(struct bs_op *op)
{
	struct lookup *l = (struct lookup *)op;
	l->last = bs_real_getaddrinfo(l->node, l->svc, l->hints, l->res);
	l->errno_after = errno;
	return l->last ? BS_ERR_EAI(l->last) : 0;
}

int bs_resolve_retries(const struct bs_config *cfg, int err)
{
	return (err == BS_ERR_EAI(EAI_AGAIN) && cfg->resolve >= BS_RESOLVE_TEMPORARY) ||
	       (err == BS_ERR_EAI(EAI_NONAME) && cfg->resolve == BS_RESOLVE_WAIT);
}

int bs_resolve(const struct bs_config *cfg, const char *node, const char *svc,
	       const struct addrinfo *hints, struct addrinfo **res)
{
	struct bs_name_addr na;
	socklen_t len = bs_name_addr(&na, node, svc);
	const struct sockaddr *a = (const struct sockaddr *)&na;
	if (len)
		cfg = bs_cfg_for(cfg, a, len);
	if (!len || cfg->resolve == BS_RESOLVE_OFF || !res ||
	    (hints && (hints->ai_flags & AI_NUMERICHOST)))
		return bs_real_getaddrinfo(node, svc, hints, res);
	bs_first_connect(); /* the shared table, as for a connect */
	struct lookup l = {{attempt, bs_resolve_retries}, node, svc, hints, res, 0, 0};
	struct bs_dest d = {bs_name_key(a, len), a, len};
	int r = bs_engine_retry_op(cfg, &d, &l.op);
	int eai = r == 0 ? 0 : BS_ERR_IS_EAI(-r) ? BS_EAI_OF(-r) : l.last ? l.last : EAI_AGAIN;
	errno = l.errno_after;
	return eai;
}
