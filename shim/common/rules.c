/* rules: destination specs and their specificity. See rules.h. */
#include "rules.h"
#include "addr.h"
#include "mix.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/un.h>

static uint64_t hash(const char *name, unsigned len, int fold)
{
	uint64_t h = fold ? 0x6e616d65 : 0x70617468;
	for (unsigned i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		h = bs_mix64(h ^ (fold && c >= 'A' && c <= 'Z' ? c + 32u : c));
	}
	return h ? h : 1;
}

uint64_t bs_name_hash(const char *name, unsigned len)
{
	return hash(name, len, 1); /* host names are case-insensitive; paths (fold 0) are not */
}

/* Digits alone, at most max: a port (1-65535) or a prefix length. */
static int parse_digits(const char *s, unsigned max, unsigned *out)
{
	unsigned v = 0;
	if (!*s)
		return -1;
	for (; *s; s++)
		if (*s < '0' || *s > '9' || (v = v * 10 + (unsigned)(*s - '0')) > max)
			return -1;
	*out = v;
	return 0;
}

static const unsigned char v4m[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}; /* ::ffff:0:0/96 */

/* 0: an address of its family; 1: an IPv4-mapped IPv6 address, stored as
 * IPv4; -1: not an address. */
static int parse_addr(const char *s, struct bs_spec *sp)
{
	if (inet_pton(AF_INET, s, sp->addr) == 1) {
		sp->family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, s, sp->addr) == 1) {
		sp->family = AF_INET6;
		if (!memcmp(sp->addr, v4m, 12)) { /* ::ffff:a.b.c.d is a.b.c.d */
			memmove(sp->addr, sp->addr + 12, 4);
			memset(sp->addr + 4, 0, 12);
			sp->family = AF_INET;
			return 1;
		}
		return 0;
	}
	return -1;
}

static void mask(struct bs_spec *s)
{
	unsigned bits = s->family == AF_INET ? 32 : 128;
	for (unsigned i = 0; i < bits / 8; i++) {
		unsigned keep = s->plen > i * 8 ? s->plen - i * 8 : 0;
		if (keep < 8)
			s->addr[i] &= (unsigned char)(0xff00u >> keep);
	}
}

/* Splits buf, a destination not unix:, into *host and *port (NULL when it
 * has none): [v6], [v6]:port, [v6/len]:port, host:port (one colon), or
 * host alone. */
static int split_host_port(char *buf, char **host, char **port, const char **why)
{
	*host = buf;
	*port = NULL;
	if (*buf == '[') {
		char *end = strchr(buf, ']');
		if (!end)
			return *why = "missing ']'", -1;
		*end = '\0';
		*host = buf + 1;
		if (end[1] == ':')
			*port = end + 2;
		else if (end[1])
			return *why = "junk after ']'", -1;
	} else if (strchr(buf, ':') == strrchr(buf, ':') && strchr(buf, ':')) {
		*port = strchr(buf, ':');
		*(*port)++ = '\0';
	}
	return 0;
}

/* host/len: an address prefix (an IPv4-mapped IPv6 prefix is IPv4's). */
static int parse_prefix(const char *host, const char *len_text, struct bs_spec *s,
			const char **why)
{
	unsigned len = 0;
	int mapped = parse_addr(host, s);
	if (mapped < 0 || parse_digits(len_text, 128, &len) || (mapped && len < 96) ||
	    (len -= mapped ? 96 : 0) > (s->family == AF_INET ? 32u : 128u))
		return *why = "bad prefix (e.g. 10.0.0.0/8)", -1;
	s->kind = BS_SPEC_PREFIX;
	s->plen = len;
	mask(s);
	return 0;
}

static int is_host_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.';
}

/* host, not an address: a host name, which needs a port. */
static int parse_name(const char *host, struct bs_spec *s, int any_port, const char **why)
{
	for (const char *c = host; *c; c++)
		if (!is_host_name_char(*c))
			return *why = "not an address, prefix, *:port, unix:path or host:port", -1;
	if ((!s->port && !any_port) || !*host)
		return *why = "a host name needs a port (db.internal:5432, or db.internal:* for any)", -1;
	s->kind = BS_SPEC_NAME;
	s->hash = bs_name_hash(host, (unsigned)strlen(host));
	return 0;
}

/* The host part (port already parsed): *, a prefix, an address or a name. */
static int parse_host(char *host, struct bs_spec *s, int any_port, const char **why)
{
	char *slash;
	if (strcmp(host, "*") == 0) {
		s->kind = BS_SPEC_PORT;
		return s->port ? 0 : (*why = "'*' needs a port", -1);
	}
	if ((slash = strchr(host, '/'))) {
		*slash++ = '\0';
		return parse_prefix(host, slash, s, why);
	}
	if (parse_addr(host, s) >= 0) {
		s->kind = s->port ? BS_SPEC_EXACT : BS_SPEC_ADDR;
		s->plen = s->family == AF_INET ? 32 : 128;
		return 0;
	}
	return parse_name(host, s, any_port, why);
}

int bs_spec_parse(const char *text, struct bs_spec *s, const char **why)
{
	char buf[256], *host, *port;
	memset(s, 0, sizeof *s);
	size_t n = strlen(text);
	if (n == 0 || n >= sizeof buf)
		return *why = "empty or too long destination", -1;
	memcpy(buf, text, n + 1);
	if (strncmp(buf, "unix:", 5) == 0) {
		s->kind = BS_SPEC_UNIX;
		s->hash = hash(buf + 5, (unsigned)strlen(buf + 5), 0);
		return buf[5] ? 0 : (*why = "empty unix path", -1);
	}
	if (split_host_port(buf, &host, &port, why))
		return -1;
	int any_port = port && strcmp(port, "*") == 0;
	if (port && !any_port && (parse_digits(port, 65535, &s->port) || !s->port))
		return *why = "bad port (1-65535, or *)", -1;
	return parse_host(host, s, any_port, why);
}

int bs_spec_same(const struct bs_spec *a, const struct bs_spec *b)
{
	return a->kind == b->kind && a->family == b->family && a->plen == b->plen &&
	       a->port == b->port && a->hash == b->hash && !memcmp(a->addr, b->addr, 16);
}

/* The destination as family, 16 address bytes (v4 in the first 4) and port. */
static int dest_of(const struct sockaddr *sa, socklen_t len, int *fam,
		   unsigned char a[16], unsigned *port)
{
	struct sockaddr_in in;
	memset(a, 0, 16);
	if (bs_addr_kind(sa, len) != BS_ADDR_INET)
		return -1;
	*fam = bs_addr_as_v4(sa, &in) ? AF_INET : AF_INET6;
	*port = ntohs(in.sin_port);
	if (*fam == AF_INET)
		memcpy(a, &in.sin_addr, 4);
	else
		memcpy(a, ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr, 16);
	return 0;
}

static int prefix_match(const struct bs_spec *s, const unsigned char *a)
{
	unsigned full = s->plen / 8, rest = s->plen % 8;
	if (memcmp(s->addr, a, full))
		return 0;
	return !rest || ((s->addr[full] ^ a[full]) & (0xff00u >> rest)) == 0;
}

/* A name lookup (addr.h's pseudo-address): its [dest NAME:PORT] or
 * [dest NAME:*] section, else a [dest *:PORT] one. */
static int name_score(const struct bs_spec *s, const struct sockaddr *sa, socklen_t len)
{
	unsigned port, n = bs_name_parts(sa, len, &port);
	if (s->port && s->port != port)
		return -1;
	if (s->kind == BS_SPEC_PORT)
		return 100;
	const char *name = ((const struct bs_name_addr *)(const void *)sa)->text;
	return s->kind == BS_SPEC_NAME && bs_name_hash(name, n) == s->hash ? 4000 + (s->port != 0)
									 : -1;
}

int bs_spec_score(const struct bs_spec *s, const struct sockaddr *sa, socklen_t len,
		  bs_name_has_fn name_has, void *ctx)
{
	if (s->kind == BS_SPEC_UNIX) {
		if (bs_addr_kind(sa, len) != BS_ADDR_UNIX)
			return -1;
		const struct sockaddr_un *un = (const void *)sa;
		char path[sizeof un->sun_path];
		size_t n = bs_addr_unix_path_len(un, len);
		memcpy(path, un->sun_path, n);
		if (n && !path[0])
			path[0] = '@'; /* an abstract name, as its text shows it */
		return hash(path, (unsigned)n, 0) == s->hash ? 5000 : -1;
	}
	int fam;
	unsigned char a[16];
	unsigned port;
	if (bs_addr_plausible(sa) && len > sizeof(sa_family_t) && sa->sa_family == BS_AF_NAME)
		return name_score(s, sa, len);
	if (dest_of(sa, len, &fam, a, &port))
		return -1;
	if (s->port && s->port != port)
		return -1;
	switch (s->kind) {
	case BS_SPEC_PORT:
		return 100;
	case BS_SPEC_NAME:
		/* names are remembered by address alone (programs often resolve
		 * without a service and set the port themselves) */
		return name_has && name_has(ctx, s->hash, bs_addr_host_key(sa, len)) ? 4000 : -1;
	default:
		if (fam != s->family || !prefix_match(s, a))
			return -1;
		if (s->kind == BS_SPEC_EXACT)
			return 5000;
		if (s->kind == BS_SPEC_ADDR)
			return 200;
		return 1000 + (int)s->plen * 2 + (s->port ? 1 : 0);
	}
}
