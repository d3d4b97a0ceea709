/* getaddrinfo/freeaddrinfo. A name that does not resolve yet: with
 * `resolve = temporary` (EAI_AGAIN) or `wait` (EAI_NONAME as well), for the
 * name's [dest NAME:PORT] / [dest NAME:*] section or globally, the lookup
 * is the engine's op, retried on the backoff schedule inside the call's
 * budget, one lookup in flight per name on the host, with a connect's log
 * lines, keyed by "name:service" (docs/resolve.md); otherwise it is libc's
 * alone. Then which destinations one name resolved to is remembered, so
 * that a failed connect() to one of them is not waited on while the
 * program still has others to try (resolv.h). */
#include "addr.h"
#include "clock.h"
#include "engine.h"
#include "errname.h"
#include "outcome.h"
#include "real.h"
#include "rules.h"
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

/* Did libc say "not known" without asking a name server? For a name
 * none could know, when it ran out of descriptors or memory, or when
 * AI_ADDRCONFIG leaves out the one family asked for (that it asked none
 * cannot be told apart: when in doubt, the program's). */
static int not_known_here(const struct lookup *l)
{
	int flags = l->hints ? l->hints->ai_flags : 0, family = l->hints ? l->hints->ai_family : 0;
	return !bs_name_may_resolve(l->node, l->svc, flags) ||
	       l->errno_after == EMFILE || l->errno_after == ENFILE || l->errno_after == ENOMEM ||
	       ((flags & AI_ADDRCONFIG) && family != AF_UNSPEC);
}

/* Does this lookup error (BS_ERR_EAI) lead into backoff under cfg? */
static int retries(struct bs_op *op, const struct bs_config *cfg, int err)
{
	return (err == BS_ERR_EAI(EAI_AGAIN) && cfg->resolve >= BS_RESOLVE_TEMPORARY) ||
	       (err == BS_ERR_EAI(EAI_NONAME) && cfg->resolve == BS_RESOLVE_WAIT &&
		!not_known_here((const struct lookup *)op));
}

/* A name, not an address written out: an empty node or one with a ':'
 * (an IPv6 literal, with or without a scope) never waits, nor does a
 * lookup the program asked to be numeric. */
static int is_name(const char *node, const struct addrinfo *hints)
{
	return *node && !strchr(node, ':') && !(hints && (hints->ai_flags & AI_NUMERICHOST));
}

/* getaddrinfo() as the settings say; its result and errno as libc's. */
static int resolve(const struct bs_config *cfg, const char *node, const char *svc,
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
	uint64_t any = bs_name_key(a, len);
	uint64_t key = bs_name_key_of_family(any, hints ? hints->ai_family : 0);
	struct bs_dest d = {key, a, len};
	int r = bs_engine_retry_op(cfg, &d, &l.op);
	if (r == 0) { /* a name has no first byte to wait for: healthy now, and
		       * for a lookup of any family too */
		bs_outcome_healthy(d.key);
		if (any != d.key)
			bs_outcome_healthy(any);
	}
	int eai = r == 0 ? 0 : BS_ERR_IS_EAI(-r) ? BS_EAI_OF(-r) : l.last ? l.last : EAI_AGAIN;
	errno = l.errno_after;
	return eai;
}

BS_API int getaddrinfo(const char *node, const char *svc, const struct addrinfo *hints,
		       struct addrinfo **res)
{
	const struct bs_config *cfg = bs_active();
	int r = cfg && node && cfg->resolve_any ? resolve(cfg, node, svc, hints, res)
						  : bs_real_getaddrinfo(node, svc, hints, res);
	if (r != 0 || !res || !cfg)
		return r;
	uint64_t keys[BS_RES_KEYS], hosts[BS_RES_KEYS];
	unsigned n = 0;
	for (const struct addrinfo *ai = *res; ai && n < BS_RES_KEYS; ai = ai->ai_next) {
		if ((ai->ai_socktype != SOCK_STREAM && ai->ai_socktype != 0) ||
		    ai->ai_addrlen > sizeof(struct sockaddr_storage))
			continue;
		uint64_t k = bs_addr_key(ai->ai_addr, ai->ai_addrlen);
		if (!k)
			continue;
		hosts[n] = bs_addr_host_key(ai->ai_addr, ai->ai_addrlen);
		keys[n++] = k;
	}
	uint64_t now = bs_now();
	/* a single address leaves nowhere else to go; with no service named,
	 * the program connects each address to a port of its own (libuv) */
	if (n >= 2)
		bs_res_add(bs_res(), svc ? keys : hosts, n, now, 0, !svc);
	if (n && node && cfg->rules && cfg->rules->n) /* for [dest name:port] sections */
		bs_res_add(bs_res(), hosts, n, now, bs_name_hash(node, (unsigned)strlen(node)), 0);
	return r;
}

/* Records outlive the result: CPython, for one, frees it before connecting;
 * they expire after BS_RES_HORIZON instead. */
BS_API void freeaddrinfo(struct addrinfo *res) { bs_real_freeaddrinfo(res); }
