/*
 * libFuzzer target: [dest SPEC] specs through bs_spec_parse (rules.c), and
 * bs_spec_score against addresses. The input is "SPEC" or "SPEC\0SOCKADDR":
 * the bytes after the NUL are passed to bs_spec_score as a raw sockaddr of
 * exactly that length. An accepted spec must be well formed (kind, family,
 * prefix length, port, host bits cleared), parse the same way twice, and
 * match the destination it names (both as IPv4 and as IPv4-mapped IPv6).
 */
#include "fuzz.h"
#include "addr.h"
#include "rules.h"

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/un.h>

static int name_yes(void *ctx, uint64_t hash, uint64_t key)
{
	(void)ctx;
	(void)hash;
	(void)key;
	return 1;
}

static int name_no(void *ctx, uint64_t hash, uint64_t key)
{
	(void)ctx;
	(void)hash;
	(void)key;
	return 0;
}

static int score_inet(const struct bs_spec *s, const unsigned char *a, unsigned port,
		      int mapped, bs_name_has_fn has)
{
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
	memset(&in, 0, sizeof in);
	memset(&in6, 0, sizeof in6);
	if (s->family == AF_INET && !mapped) {
		in.sin_family = AF_INET;
		in.sin_port = htons((uint16_t)port);
		memcpy(&in.sin_addr, a, 4);
		return bs_spec_score(s, (struct sockaddr *)&in, sizeof in, has, NULL);
	}
	in6.sin6_family = AF_INET6;
	in6.sin6_port = htons((uint16_t)port);
	if (s->family == AF_INET) { /* ::ffff:a.b.c.d */
		in6.sin6_addr.s6_addr[10] = in6.sin6_addr.s6_addr[11] = 0xff;
		memcpy(in6.sin6_addr.s6_addr + 12, a, 4);
	} else {
		memcpy(in6.sin6_addr.s6_addr, a, 16);
	}
	return bs_spec_score(s, (struct sockaddr *)&in6, sizeof in6, has, NULL);
}

static void well_formed(const char *text, const struct bs_spec *s)
{
	FZ_CHECK(s->kind >= BS_SPEC_EXACT && s->kind <= BS_SPEC_UNIX, "%s: kind %d", fz_str(text),
		 s->kind);
	FZ_CHECK(s->port <= 65535, "%s: port %u", fz_str(text), s->port);
	switch (s->kind) {
	case BS_SPEC_UNIX:
		FZ_CHECK(!strncmp(text, "unix:", 5) && text[5], "%s: unix spec", fz_str(text));
		return;
	case BS_SPEC_NAME:
		/* a port, or NAME:* (any port) */
		FZ_CHECK((s->port || (strlen(text) > 2 && !strcmp(text + strlen(text) - 2, ":*"))) &&
				 s->hash,
			 "%s: name without port or hash", fz_str(text));
		return;
	case BS_SPEC_PORT:
		FZ_CHECK(s->port, "%s: *:port without a port", fz_str(text));
		return;
	case BS_SPEC_EXACT:
		FZ_CHECK(s->port, "%s: exact without a port", fz_str(text));
		break;
	case BS_SPEC_ADDR:
		FZ_CHECK(!s->port, "%s: address with a port", fz_str(text));
		break;
	}
	FZ_CHECK(s->family == AF_INET || s->family == AF_INET6, "%s: family %d", fz_str(text),
		 s->family);
	unsigned bits = s->family == AF_INET ? 32 : 128;
	FZ_CHECK(s->plen <= bits, "%s: prefix length %u", fz_str(text), s->plen);
	if (s->kind != BS_SPEC_PREFIX)
		FZ_CHECK(s->plen == bits, "%s: plen %u", fz_str(text), s->plen);
	for (unsigned b = s->plen; b < 128; b++)
		FZ_CHECK(!(s->addr[b / 8] >> (7 - b % 8) & 1),
			 "%s: bit %u set past the prefix length %u", fz_str(text), b, s->plen);
}

static void matches_itself(const char *text, const struct bs_spec *s)
{
	unsigned port = s->port ? s->port : 4242;
	int sc;
	switch (s->kind) {
	case BS_SPEC_UNIX: {
		size_t n = strlen(text + 5);
		if (n > sizeof ((struct sockaddr_un *)0)->sun_path)
			return;
		struct sockaddr_un un;
		memset(&un, 0, sizeof un);
		un.sun_family = AF_UNIX;
		memcpy(un.sun_path, text + 5, n);
		sc = bs_spec_score(s, (struct sockaddr *)&un,
				   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n), NULL, NULL);
		FZ_CHECK(sc == 5000, "%s: its own path scores %d", fz_str(text), sc);
		return;
	}
	case BS_SPEC_NAME: {
		static const unsigned char lo[4] = {127, 0, 0, 1};
		struct bs_spec v4 = *s;
		v4.family = AF_INET;
		sc = score_inet(&v4, lo, port, 0, name_yes);
		FZ_CHECK(sc == 4000, "%s: a resolved address scores %d", fz_str(text), sc);
		sc = score_inet(&v4, lo, port, 0, name_no);
		FZ_CHECK(sc == -1, "%s: an unresolved address scores %d", fz_str(text), sc);
		/* a lookup of the name (getaddrinfo's pseudo-address) matches it */
		const char *colon = strrchr(text, ':'), *from = text;
		char node[256], svc[8];
		if (*from == '[') /* ("[name]:port" is read as the name) */
			from++, colon = strchr(from, ']');
		size_t n = (size_t)(colon - from);
		if (!colon || n >= sizeof node)
			return;
		memcpy(node, from, n);
		node[n] = '\0';
		snprintf(svc, sizeof svc, "%u", port);
		struct bs_name_addr na;
		socklen_t len = bs_name_addr(&na, node, svc);
		if (!len)
			return;
		sc = bs_spec_score(s, (struct sockaddr *)&na, len, NULL, NULL);
		FZ_CHECK(sc >= 4000, "%s: a lookup of its name scores %d", fz_str(text), sc);
		return;
	}
	case BS_SPEC_PORT: {
		static const unsigned char a[4] = {10, 1, 2, 3};
		struct bs_spec v4 = *s;
		v4.family = AF_INET;
		sc = score_inet(&v4, a, port, 0, NULL);
		FZ_CHECK(sc == 100, "%s: its port scores %d", fz_str(text), sc);
		sc = score_inet(&v4, a, port == 1 ? 2 : 1, 0, NULL);
		FZ_CHECK(sc == -1, "%s: another port scores %d", fz_str(text), sc);
		return;
	}
	default:
		for (int mapped = 0; mapped <= (s->family == AF_INET); mapped++) {
			sc = score_inet(s, s->addr, port, mapped, NULL);
			FZ_CHECK(sc >= 0, "%s: its own address scores %d%s", fz_str(text), sc,
				 mapped ? " (as ::ffff:a.b.c.d)" : "");
			/* the last address of the prefix too, unless that is an
			 * IPv4-mapped one (::/80 ends in ::ffff:255.255.255.255):
			 * those are IPv4 destinations, which an IPv6 prefix
			 * does not match */
			static const unsigned char v4m[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
			unsigned char last[16];
			memcpy(last, s->addr, 16);
			unsigned bits = s->family == AF_INET ? 32 : 128;
			for (unsigned b = s->plen; b < bits; b++)
				last[b / 8] |= (unsigned char)(0x80u >> (b % 8));
			if (s->family == AF_INET6 && !memcmp(last, v4m, 12))
				continue;
			sc = score_inet(s, last, port, mapped, NULL);
			FZ_CHECK(sc >= 0, "%s: the prefix's last address scores %d", fz_str(text),
				 sc);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 4096)
		return 0;
	const uint8_t *nul = memchr(data, '\0', size);
	size_t tlen = nul ? (size_t)(nul - data) : size;
	char *text = fz_strndup(data, tlen);
	struct bs_spec s, again;
	const char *why = NULL;
	if (bs_spec_parse(text, &s, &why)) {
		fz_check_why(why);
	} else {
		well_formed(text, &s);
		FZ_CHECK(bs_spec_parse(text, &again, &why) == 0 && bs_spec_same(&s, &again),
			 "%s parses differently twice", fz_str(text));
		matches_itself(text, &s);
	}
	if (nul) {
		/* a raw sockaddr of exactly the remaining length */
		size_t alen = size - tlen - 1;
		void *sa = malloc(alen ? alen : 1);
		if (!sa)
			abort();
		memcpy(sa, nul + 1, alen);
		if (why == NULL || !bs_spec_parse(text, &s, &why)) {
			int sc = bs_spec_score(&s, sa, (socklen_t)alen, name_yes, NULL);
			FZ_CHECK(sc == -1 || sc >= 100, "%s: score %d", fz_str(text), sc);
		}
		free(sa);
	}
	free(text);
	return 0;
}
