/* addr: sockaddr -> key and text. See addr.h. */
#include "addr.h"
#include "mix.h"
#include "rules.h"
#include "util.h"

#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/un.h>

#define TAG_V4 BS_ADDR_TAG_V4
#define TAG_V6 (2ull << 60)
#define TAG_UNIX (3ull << 60)
#define TAG_NAME 0ull /* (the table keeps bits 62 and 63 for itself) */
#define LOW60 ((1ull << 60) - 1)

int bs_addr_as_v4(const struct sockaddr *addr, struct sockaddr_in *in)
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	const struct sockaddr_in6 *in6 = (const void *)addr;
	if (addr->sa_family == AF_INET) {
		memcpy(in, addr, sizeof *in);
		return 1;
	}
	*in = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = in6->sin6_port};
	memcpy(&in->sin_addr, in6->sin6_addr.s6_addr + 12, 4);
	return memcmp(in6->sin6_addr.s6_addr, mapped, 12) == 0;
}

int bs_addr_never_routed(const struct sockaddr *addr, int v6only)
{
	struct sockaddr_in in;
	if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
		return 0;
	if (bs_addr_as_v4(addr, &in)) {
		uint32_t a = ntohl(in.sin_addr.s_addr);
		return (v6only && addr->sa_family == AF_INET6) ||
		       a >> 28 == 0xe || a == 0xffffffffu; /* 224.0.0.0/4, 255.255.255.255 */
	}
	return ((const struct sockaddr_in6 *)(const void *)addr)->sin6_addr.s6_addr[0] == 0xff;
}

int bs_addr_answered_at_once(const struct sockaddr *addr, int domain, int tcp_state)
{
	enum { CLOSED = 7 }; /* (the kernel's TCP_CLOSE) */
	return (domain > 0 && domain != addr->sa_family) || (tcp_state >= 0 && tcp_state != CLOSED);
}

enum bs_addr_kind bs_addr_kind(const struct sockaddr *addr, socklen_t len)
{
	if (!bs_addr_plausible(addr) || len < (socklen_t)sizeof(sa_family_t))
		return BS_ADDR_OTHER;
	switch (addr->sa_family) {
	case AF_INET:
		return len >= (socklen_t)sizeof(struct sockaddr_in) ? BS_ADDR_INET : BS_ADDR_OTHER;
	case AF_INET6:
		return len >= (socklen_t)sizeof(struct sockaddr_in6) ? BS_ADDR_INET : BS_ADDR_OTHER;
	case AF_UNIX:
		return len > (socklen_t)offsetof(struct sockaddr_un, sun_path) ? BS_ADDR_UNIX : BS_ADDR_OTHER;
	default:
		return BS_ADDR_OTHER;
	}
}

static uint64_t hash_bytes(const unsigned char *p, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++)
		h = bs_mix64(h ^ p[i]);
	return h;
}

size_t bs_addr_unix_path_len(const struct sockaddr_un *un, socklen_t len)
{
	size_t max = (size_t)len - offsetof(struct sockaddr_un, sun_path);
	if (max > sizeof un->sun_path)
		max = sizeof un->sun_path;
	if (max > 0 && un->sun_path[0] == '\0')
		return max;
	size_t n = 0;
	while (n < max && un->sun_path[n])
		n++;
	return n;
}

int bs_addr_of_v4_key(uint64_t key, struct sockaddr_in *out)
{
	if ((key & ~BS_ADDR_V4_BITS) != TAG_V4)
		return 0;
	uint64_t w = key & BS_ADDR_V4_BITS;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	w <<= 16;
#endif
	memset(out, 0, sizeof *out);
	memcpy(out, &w, sizeof w);
	out->sin_family = AF_INET;
	return 1;
}

uint64_t bs_addr_host_key(const struct sockaddr *addr, socklen_t len)
{
	struct sockaddr_storage st;
	if (bs_addr_kind(addr, len) != BS_ADDR_INET || len > sizeof st)
		return 0;
	memcpy(&st, addr, len);
	((struct sockaddr_in *)&st)->sin_port = 0; /* (the same offset in v6) */
	return bs_addr_key((struct sockaddr *)&st, len);
}

uint64_t bs_addr_key(const struct sockaddr *addr, socklen_t len)
{
	switch (bs_addr_kind(addr, len)) {
	case BS_ADDR_INET: {
		const struct sockaddr_in6 *in6 = (const void *)addr;
		struct sockaddr_in in;
		if (bs_addr_as_v4(addr, &in))
			return bs_addr_v4_key_of(&in);
		/* a link-local address is only a destination with its scope */
		uint64_t h = hash_bytes(in6->sin6_addr.s6_addr, 16,
					ntohs(in6->sin6_port) ^ (uint64_t)in6->sin6_scope_id << 16);
		return TAG_V6 | (h & LOW60);
	}
	case BS_ADDR_UNIX: {
		const struct sockaddr_un *un = (const void *)addr;
		size_t n = bs_addr_unix_path_len(un, len);
		uint64_t h = hash_bytes((const unsigned char *)un->sun_path, n, 0x756e6978);
		return TAG_UNIX | (h & LOW60);
	}
	default:
		return 0;
	}
}

socklen_t bs_name_addr(struct bs_name_addr *a, const char *node, const char *svc)
{
	size_t n = strlen(node), m = svc ? strlen(svc) : 0;
	if (n + (m ? m + 1 : 0) >= sizeof a->text)
		return 0;
	a->family = BS_AF_NAME;
	memcpy(a->text, node, n);
	if (m) {
		a->text[n] = ':';
		memcpy(a->text + n + 1, svc, m);
		n += m + 1;
	}
	a->text[n] = '\0';
	return (socklen_t)(offsetof(struct bs_name_addr, text) + n + 1);
}

/* The text of a name pseudo-address, up to len (it may be cut: the table
 * keeps its first bytes); 0 if a is not one. */
static size_t name_text(const struct sockaddr *a, socklen_t len, const char **text)
{
	size_t off = offsetof(struct bs_name_addr, text);
	*text = "";
	if (!bs_addr_plausible(a) || len <= off || a->sa_family != BS_AF_NAME)
		return 0;
	*text = ((const struct bs_name_addr *)(const void *)a)->text;
	return strnlen(*text, len - off);
}

uint64_t bs_name_key(const struct sockaddr *a, socklen_t len)
{
	const char *t = NULL;
	size_t n = name_text(a, len, &t);
	return n ? TAG_NAME | (bs_name_hash(t, (unsigned)n) & LOW60) | 1 : 0;
}

uint64_t bs_name_key_of_family(uint64_t unspec, int family)
{
	if (family != AF_INET && family != AF_INET6)
		return unspec;
	return TAG_NAME | (bs_mix64(unspec ^ (uint64_t)family) & LOW60) | 1;
}

int bs_name_keys_match(uint64_t any, uint64_t unspec)
{
	return any == unspec || any == bs_name_key_of_family(unspec, AF_INET) ||
	       any == bs_name_key_of_family(unspec, AF_INET6);
}

static int all_digits(const char *s)
{
	while (*s >= '0' && *s <= '9')
		s++;
	return !*s;
}

/* glibc's res_hnok, which its DNS lookup asks before it sends a query: a
 * dotted name of labels of 1 to 63 letters, digits, '-' and '_', 253 bytes
 * at most, not starting with '-'; and not digits and dots alone, unless it
 * ends in the root's dot (an address inet_aton refuses: 10.0.0.300). (AI_IDN turns other bytes into
 * letters first: they are left to libc then.) */
static int glibc_would_ask(const char *node, int idn)
{
	size_t n = strlen(node), label = 0;
	if (n && node[n - 1] == '.')
		n--; /* (the root's dot) */
	else if (strspn(node, "0123456789.") == n)
		return 0; /* (digits and dots: a mistyped address, never a name) */
	if (!n || n > 253 || node[0] == '-' || node[n - 1] == '.')
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)node[i];
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			 c == '-' || c == '_' || c == '.' || (idn && c >= 0x80);
		label = c == '.' ? 0 : label + 1;
		if (!ok || (c == '.' && (!i || node[i - 1] == '.')) || label > 63)
			return 0;
	}
	return 1;
}

int bs_name_may_resolve(const char *node, const char *svc, int flags)
{
	if ((flags & AI_NUMERICSERV) && svc && !all_digits(svc))
		return 0;
	return glibc_would_ask(node, flags & AI_IDN);
}

unsigned bs_name_parts(const struct sockaddr *a, socklen_t len, unsigned *port)
{
	const char *t = NULL;
	size_t n = name_text(a, len, &t), colon = n;
	*port = 0;
	while (colon > 0 && t[colon - 1] != ':')
		colon--;
	if (!colon)
		return (unsigned)n;
	for (size_t i = colon; i < n && *port <= 65535; i++)
		*port = t[i] >= '0' && t[i] <= '9' ? *port * 10 + (unsigned)(t[i] - '0') : 65536;
	if (*port > 65535 || colon == n)
		*port = 0;
	return (unsigned)colon - 1;
}

/* --- formatting, no stdio --- */

struct out {
	char *buf;
	size_t cap, n;
};

static void put_c(struct out *o, char c)
{
	if (o->n + 1 < o->cap)
		o->buf[o->n++] = c;
}

static void put_s(struct out *o, const char *s)
{
	while (*s)
		put_c(o, *s++);
}

static void put_u(struct out *o, unsigned v)
{
	char t[20];
	size_t n = bs_u64_digits(t, v);
	for (size_t i = 0; i < n; i++)
		put_c(o, t[i]);
}

static void put_hex16(struct out *o, unsigned v)
{
	for (int sh = 12; sh >= 0; sh -= 4)
		if (v >> sh || sh == 0) /* no leading zeros */
			put_c(o, "0123456789abcdef"[(v >> sh) & 0xf]);
}

static void put_v4(struct out *o, const unsigned char *a)
{
	for (int i = 0; i < 4; i++) {
		if (i)
			put_c(o, '.');
		put_u(o, a[i]);
	}
}

/* RFC 5952: lower case, longest run (>= 2) of zero groups becomes "::". */
static void put_v6(struct out *o, const unsigned char *a)
{
	unsigned g[8];
	for (int i = 0; i < 8; i++)
		g[i] = (unsigned)a[2 * i] << 8 | a[2 * i + 1];
	int best = -1, bestlen = 1, run = 0; /* a run of one is not compressed */
	for (int i = 0; i < 8; i++) {
		run = g[i] ? 0 : run + 1;
		if (run > bestlen) { /* (the first of equal runs wins) */
			best = i + 1 - run;
			bestlen = run;
		}
	}
	for (int i = 0; i < 8; i++) {
		if (i == best) {
			put_s(o, "::");
			i += bestlen - 1;
			continue;
		}
		if (i && i != best + bestlen)
			put_c(o, ':');
		put_hex16(o, g[i]);
	}
}

size_t bs_addr_format(const struct sockaddr *addr, socklen_t len, char *buf,
		      size_t cap)
{
	struct out o = {buf, cap, 0};
	if (cap == 0)
		return 0;
	switch (bs_addr_kind(addr, len)) {
	case BS_ADDR_INET: {
		struct sockaddr_in in;
		if (bs_addr_as_v4(addr, &in)) {
			put_v4(&o, (const unsigned char *)&in.sin_addr);
		} else {
			put_c(&o, '[');
			put_v6(&o, ((const struct sockaddr_in6 *)(const void *)addr)->sin6_addr.s6_addr);
			put_c(&o, ']');
		}
		put_c(&o, ':');
		put_u(&o, ntohs(in.sin_port));
		break;
	}
	case BS_ADDR_UNIX: {
		const struct sockaddr_un *un = (const void *)addr;
		size_t n = bs_addr_unix_path_len(un, len);
		put_s(&o, "unix:");
		for (size_t i = 0; i < n; i++) {
			char c = un->sun_path[i];
			if (i == 0 && c == '\0')
				c = '@';
			else if ((unsigned char)c < 0x20 || (unsigned char)c > 0x7e)
				c = '?';
			put_c(&o, c);
		}
		break;
	}
	default: {
		const char *t;
		size_t n = name_text(addr, len, &t);
		for (size_t i = 0; i < n; i++)
			put_c(&o, t[i]);
		if (!n)
			put_s(&o, "?");
	}
	}
	buf[o.n] = '\0';
	return o.n;
}
