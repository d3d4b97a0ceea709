/* Unit tests for addr.c: destination keys (and the fast path's inline IPv4
 * key) and text for socket addresses. */
#include "unit.h"
#include "mix.h"

#include "addr.h"
#include "policy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <netdb.h>
#include <string.h>
#include <sys/un.h>

#define SEED 0xadd7e55ull

static struct sockaddr_in v4(const char *ip, uint16_t port)
{
	struct sockaddr_in a;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, ip, &a.sin_addr), 1);
	return a;
}

static struct sockaddr_in6 v6(const char *ip, uint16_t port)
{
	struct sockaddr_in6 a;
	memset(&a, 0, sizeof a);
	a.sin6_family = AF_INET6;
	a.sin6_port = htons(port);
	assert_int_equal(inet_pton(AF_INET6, ip, &a.sin6_addr), 1);
	return a;
}

/* A unix address of `n` path bytes; the length passed excludes any NUL. */
static socklen_t un(struct sockaddr_un *a, const char *path, size_t n)
{
	memset(a, 0, sizeof *a);
	a->sun_family = AF_UNIX;
	memcpy(a->sun_path, path, n);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
}

#define SA(x) ((const struct sockaddr *)(x))
#define KEY(x) bs_addr_key(SA(&(x)), sizeof(x))

static void check_text(const struct sockaddr *a, socklen_t len, const char *want)
{
	char buf[160];
	memset(buf, 'x', sizeof buf);
	size_t n = bs_addr_format(a, len, buf, sizeof buf);
	assert_string_equal(buf, want);
	assert_int_equal(n, strlen(want));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* IPv4 keys are exact: the address and port are recoverable, every
 * (address, port) pair gets its own key, and sin_zero does not matter. */
static void check_routed(const char *const *ips, size_t n, int want)
{
	for (size_t i = 0; i < n; i++) {
		struct sockaddr_in a4;
		struct sockaddr_in6 a6;
		const struct sockaddr *a = (const struct sockaddr *)&a4;
		if (strchr(ips[i], ':'))
			a6 = v6(ips[i], 80), a = (const struct sockaddr *)&a6;
		else
			a4 = v4(ips[i], 80);
		assert_int_equal(bs_addr_never_routed(a, 0), want);
	}
}

static void test_addresses_no_route_reaches(void **state)
{
	(void)state;
	static const char *const never[] = {"224.0.0.1", "239.255.255.250", "255.255.255.255",
					    "ff02::1", "ff0e::1", "::ffff:224.0.0.1",
					    "::ffff:255.255.255.255"};
	static const char *const routed[] = {"127.0.0.1", "10.0.0.1", "223.255.255.255",
					     "240.0.0.1", "192.168.1.255", "::1", "fe80::1",
					     "2001:db8::1", "::ffff:127.0.0.1"};
	check_routed(never, sizeof never / sizeof *never, 1);
	check_routed(routed, sizeof routed / sizeof *routed, 0);
	/* an IPv4-mapped address from an IPV6_V6ONLY socket; a real v6 one is routed */
	struct sockaddr_in6 mapped = v6("::ffff:127.0.0.1", 80), one = v6("::1", 80);
	assert_int_equal(bs_addr_never_routed((struct sockaddr *)&mapped, 1), 1);
	assert_int_equal(bs_addr_never_routed((struct sockaddr *)&one, 1), 0);
	assert_int_equal(bs_addr_never_routed(NULL, 0), 0);
}

static void test_connects_the_kernel_answers_at_once(void **state)
{
	(void)state;
	struct sockaddr_in a = v4("127.0.0.1", 80);
	struct sockaddr_in6 b = v6("::1", 80);
	const struct sockaddr *four = (struct sockaddr *)&a, *six = (struct sockaddr *)&b;
	assert_int_equal(bs_addr_answered_at_once(four, AF_INET, 7), 0);  /* closed */
	assert_int_equal(bs_addr_answered_at_once(six, AF_INET6, 7), 0);
	assert_int_equal(bs_addr_answered_at_once(four, AF_INET6, 7), 1); /* EINVAL */
	assert_int_equal(bs_addr_answered_at_once(six, AF_INET, 7), 1);  /* EAFNOSUPPORT */
	assert_int_equal(bs_addr_answered_at_once(four, AF_INET, 1), 1);  /* established */
	assert_int_equal(bs_addr_answered_at_once(four, AF_INET, 10), 1); /* listening */
	assert_int_equal(bs_addr_answered_at_once(four, AF_INET, 2), 1);  /* connecting */
	assert_int_equal(bs_addr_answered_at_once(four, 0, -1), 0);       /* nothing known */
}

static void test_v4_key_exact(void **state)
{
	(void)state;
	struct sockaddr_in a = v4("127.0.0.1", 5432);
	uint64_t k = KEY(a);
	assert_int_equal(bs_addr_kind(SA(&a), sizeof a), BS_ADDR_INET);
	assert_true(k != 0);
	struct sockaddr_in back;
	assert_true(bs_addr_of_v4_key(k, &back)); /* exact: it names a */
	assert_int_equal(ntohl(back.sin_addr.s_addr), 0x7f000001ull);
	assert_int_equal(ntohs(back.sin_port), 5432);
	assert_int_equal(bs_addr_of_v4_key(k ^ (1ull << 61), &back), 0); /* not IPv4 */

	memset(a.sin_zero, 0xa5, sizeof a.sin_zero);
	assert_int_equal(KEY(a), k);
	/* a longer length (e.g. a sockaddr_storage) does not change it */
	struct sockaddr_storage ss;
	memset(&ss, 0x5a, sizeof ss);
	memcpy(&ss, &a, sizeof a);
	assert_int_equal(bs_addr_key(SA(&ss), sizeof ss), k);

	enum { NA = 64, NP = 64 };
	uint64_t *keys = malloc(NA * NP * sizeof *keys);
	assert_non_null(keys);
	for (int i = 0; i < NA; i++)
		for (int j = 0; j < NP; j++) {
			uint32_t ip = (uint32_t)bs_mix64(SEED + (uint64_t)i);
			if (i < 4)
				ip = i == 0 ? 0 : i == 1 ? UINT32_MAX : i == 2 ? 1 : 0x7f000001;
			uint16_t port = j < 3 ? (uint16_t)(j == 0 ? 0 : j == 1 ? 65535 : 1)
					      : (uint16_t)bs_mix64(SEED * 3 + (uint64_t)j);
			a.sin_addr.s_addr = htonl(ip);
			a.sin_port = htons(port);
			uint64_t key = KEY(a);
			assert_true(key != 0);
			struct sockaddr_in back;
			assert_true(bs_addr_of_v4_key(key, &back)); /* exact: it names a */
			assert_int_equal(back.sin_family, AF_INET);
			assert_int_equal(ntohl(back.sin_addr.s_addr), ip);
			assert_int_equal(ntohs(back.sin_port), port);
			keys[i * NP + j] = key;
		}
	qsort(keys, NA * NP, sizeof *keys, cmp_u64);
	for (int i = 1; i < NA * NP; i++)
		assert_true(keys[i] != keys[i - 1]);
	free(keys);
}

/* The fast path's inline IPv4 key is bs_addr_key's, and 0 for anything
 * else (an IPv4-mapped IPv6 address takes the full path). */
static void test_v4_key_inline(void **state)
{
	(void)state;
	uint64_t x = SEED;
	for (int i = 0; i < 2000; i++) {
		x = bs_mix64(x);
		struct sockaddr_in a;
		memset(&a, 0, sizeof a);
		a.sin_family = AF_INET;
		a.sin_port = (uint16_t)x;
		a.sin_addr.s_addr = (uint32_t)(x >> 16);
		uint64_t k = KEY(a);
		assert_int_equal(bs_addr_v4_key(SA(&a), sizeof a), k);
		assert_int_equal(bs_addr_v4_key(SA(&a), 128), k); /* a sockaddr_storage's length */
	}
	struct sockaddr_in a = v4("127.0.0.1", 5432);
	struct sockaddr_in6 b = v6("::1", 5432), m = v6("::ffff:127.0.0.1", 5432);
	struct sockaddr_un u;
	socklen_t ul = un(&u, "/run/x", 6);
	assert_int_equal(bs_addr_v4_key(SA(&a), sizeof a - 1), 0);
	assert_int_equal(bs_addr_v4_key(NULL, sizeof a), 0);
	assert_int_equal(bs_addr_v4_key(SA(&b), sizeof b), 0);
	assert_int_equal(bs_addr_v4_key(SA(&m), sizeof m), 0);
	assert_int_equal(bs_addr_v4_key(SA(&u), ul), 0);
}

/* Addresses the kernel refuses with EFAULT are never read: NULL, the first
 * page, the kernel's half. */
static void test_unreadable_pointers_are_not_read(void **state)
{
	(void)state;
	const struct sockaddr *bad[] = {NULL, (const void *)16, (const void *)4095,
					(const void *)-1L, (const void *)-4096L,
					(const void *)(1ull << 63)};
	char buf[16];
	for (unsigned i = 0; i < sizeof bad / sizeof *bad; i++) {
		assert_false(bs_addr_plausible(bad[i]));
		assert_int_equal(bs_addr_kind(bad[i], sizeof(struct sockaddr_in)), BS_ADDR_OTHER);
		assert_int_equal(bs_addr_v4_key(bad[i], sizeof(struct sockaddr_in)), 0);
		assert_int_equal(bs_addr_key(bad[i], sizeof(struct sockaddr_in6)), 0);
		bs_addr_format(bad[i], sizeof(struct sockaddr_in), buf, sizeof buf);
		assert_string_equal(buf, "?");
	}
	struct sockaddr_in in = {.sin_family = AF_INET};
	assert_true(bs_addr_plausible(&in));
}

static void test_v4_format(void **state)
{
	(void)state;
	struct sockaddr_in a = v4("127.0.0.1", 5432);
	check_text(SA(&a), sizeof a, "127.0.0.1:5432");
	a = v4("0.0.0.0", 0);
	check_text(SA(&a), sizeof a, "0.0.0.0:0");
	a = v4("255.255.255.255", 65535);
	check_text(SA(&a), sizeof a, "255.255.255.255:65535");
	a = v4("10.0.200.9", 80);
	check_text(SA(&a), sizeof a, "10.0.200.9:80");
}

/* ::ffff:a.b.c.d is the IPv4 destination a.b.c.d. */
static void test_v4_mapped(void **state)
{
	(void)state;
	const uint16_t ports[] = {0, 1, 5432, 65535};
	for (size_t i = 0; i < sizeof ports / sizeof ports[0]; i++) {
		struct sockaddr_in a = v4("127.0.0.1", ports[i]);
		struct sockaddr_in6 m = v6("::ffff:127.0.0.1", ports[i]);
		assert_int_equal(bs_addr_kind(SA(&m), sizeof m), BS_ADDR_INET);
		assert_int_equal(KEY(m), KEY(a));
		struct sockaddr_in folded;
		assert_int_equal(bs_addr_as_v4(SA(&m), &folded), 1);
		assert_memory_equal(&folded, &a, sizeof a);
		char want[32];
		snprintf(want, sizeof want, "127.0.0.1:%u", ports[i]);
		check_text(SA(&m), sizeof m, want);
	}
	/* not mapped: ::127.0.0.1 (compat) and ::fffe:127.0.0.1 are IPv6 */
	struct sockaddr_in a = v4("127.0.0.1", 80);
	struct sockaddr_in6 c = v6("::7f00:1", 80);
	assert_true(KEY(c) != KEY(a));
	struct sockaddr_in port_only;
	assert_int_equal(bs_addr_as_v4(SA(&c), &port_only), 0);
	assert_int_equal(port_only.sin_port, htons(80));
	check_text(SA(&c), sizeof c, "[::7f00:1]:80");
	c = v6("::fffe:7f00:1", 80);
	assert_true(KEY(c) != KEY(a));
	check_text(SA(&c), sizeof c, "[::fffe:7f00:1]:80");
}

/* RFC 5952 text: lower case, no leading zeros, the longest run of two or more
 * zero groups becomes "::" (the first of equal runs), a lone zero stays. */
static void test_v6_format(void **state)
{
	(void)state;
	static const struct {
		const char *in;
		uint16_t port;
		const char *want;
	} cases[] = {
		{"::1", 6379, "[::1]:6379"},
		{"2001:db8::1", 80, "[2001:db8::1]:80"},
		{"2001:db8:0:1:1:1:1:1", 1, "[2001:db8:0:1:1:1:1:1]:1"},
		{"::", 0, "[::]:0"},
		{"1::", 2, "[1::]:2"},
		{"2001:0:0:1:0:0:0:1", 3, "[2001:0:0:1::1]:3"},   /* longest wins */
		{"2001:db8:0:0:1:0:0:1", 4, "[2001:db8::1:0:0:1]:4"}, /* first of equal */
		{"0:0:1:0:0:1:0:0", 5, "[::1:0:0:1:0:0]:5"},
		{"1:0:1:0:1:0:1:0", 6, "[1:0:1:0:1:0:1:0]:6"},
		{"0:1:2:3:4:5:6:0", 7, "[0:1:2:3:4:5:6:0]:7"},
		{"2001:0DB8:000A:00B0:0C00:ABCD:EF01:FFFF", 65535,
		 "[2001:db8:a:b0:c00:abcd:ef01:ffff]:65535"},
		{"fe80::1:2", 443, "[fe80::1:2]:443"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct sockaddr_in6 a = v6(cases[i].in, cases[i].port);
		check_text(SA(&a), sizeof a, cases[i].want);
	}
}

/* Cross-check against glibc's inet_ntop on seeded addresses rich in zero
 * groups (skipping the ::a.b.c.d forms glibc prints in dotted notation). */
static void test_v6_format_vs_inet_ntop(void **state)
{
	(void)state;
	for (uint64_t k = 0; k < 20000; k++) {
		struct sockaddr_in6 a;
		memset(&a, 0, sizeof a);
		a.sin6_family = AF_INET6;
		a.sin6_port = htons((uint16_t)k);
		uint64_t r = bs_mix64(SEED + k * BS_GOLDEN);
		for (int g = 0; g < 8; g++) {
			unsigned sel = (r >> (2 * g)) & 3, v;
			v = sel < 2 ? 0 : sel == 2 ? 1 : (unsigned)(r >> (16 + 6 * g)) & 0xffff;
			a.sin6_addr.s6_addr[2 * g] = (unsigned char)(v >> 8);
			a.sin6_addr.s6_addr[2 * g + 1] = (unsigned char)v;
		}
		static const unsigned char zero[10];
		if (memcmp(a.sin6_addr.s6_addr, zero, 10) == 0)
			continue;
		char ntop[INET6_ADDRSTRLEN], want[INET6_ADDRSTRLEN + 16];
		assert_non_null(inet_ntop(AF_INET6, &a.sin6_addr, ntop, sizeof ntop));
		snprintf(want, sizeof want, "[%s]:%u", ntop, (unsigned)(uint16_t)k);
		check_text(SA(&a), sizeof a, want);
	}
}

/* Anything short, NULL or of another family is OTHER with key 0. */
static void test_other(void **state)
{
	(void)state;
	struct sockaddr_in a = v4("127.0.0.1", 80);
	struct sockaddr_in6 b = v6("::1", 80);
	struct sockaddr_un u;
	socklen_t ulen = un(&u, "/x", 2);
	const struct {
		const struct sockaddr *sa;
		socklen_t len;
	} bad[] = {
		{NULL, sizeof a},
		{SA(&a), 0},
		{SA(&a), 1},
		{SA(&a), sizeof(sa_family_t)},
		{SA(&a), sizeof a - 1},
		{SA(&b), sizeof b - 1},
		{SA(&b), sizeof a},
		{SA(&u), offsetof(struct sockaddr_un, sun_path)},
		{SA(&u), 1},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(bs_addr_kind(bad[i].sa, bad[i].len), BS_ADDR_OTHER);
		assert_int_equal(bs_addr_key(bad[i].sa, bad[i].len), 0);
		check_text(bad[i].sa, bad[i].len, "?");
	}
	/* the full lengths are fine */
	assert_int_equal(bs_addr_kind(SA(&u), ulen), BS_ADDR_UNIX);
	assert_int_equal(bs_addr_kind(SA(&b), sizeof b), BS_ADDR_INET);

	const sa_family_t fams[] = {AF_UNSPEC, AF_PACKET, AF_NETLINK, AF_BLUETOOTH, 0xffff};
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof ss);
	for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
		ss.ss_family = fams[i];
		assert_int_equal(bs_addr_kind(SA(&ss), sizeof ss), BS_ADDR_OTHER);
		assert_int_equal(bs_addr_key(SA(&ss), sizeof ss), 0);
		check_text(SA(&ss), sizeof ss, "?");
	}
}

/* Filesystem paths end at the first NUL; abstract names (leading NUL, shown
 * as '@') take every byte of the given length. */
static void test_unix(void **state)
{
	(void)state;
	struct sockaddr_un a, b;
	socklen_t la = un(&a, "/run/x.sock", 11);
	assert_int_equal(bs_addr_kind(SA(&a), la), BS_ADDR_UNIX);
	uint64_t k = bs_addr_key(SA(&a), la);
	assert_true(k != 0);
	check_text(SA(&a), la, "unix:/run/x.sock");
	/* with the trailing NUL, the whole struct, or junk after the NUL: same */
	assert_int_equal(bs_addr_key(SA(&a), la + 1), k);
	assert_int_equal(bs_addr_key(SA(&a), sizeof a), k);
	check_text(SA(&a), sizeof a, "unix:/run/x.sock");
	memcpy(a.sun_path + 12, "junk", 4);
	assert_int_equal(bs_addr_key(SA(&a), sizeof a), k);
	/* a different path, a prefix, a longer path: different keys */
	socklen_t lb = un(&b, "/run/y.sock", 11);
	assert_true(bs_addr_key(SA(&b), lb) != k);
	lb = un(&b, "/run/x.soc", 10);
	assert_true(bs_addr_key(SA(&b), lb) != k);
	lb = un(&b, "/run/x.sock2", 12);
	assert_true(bs_addr_key(SA(&b), lb) != k);
	/* a path cut short by the length */
	assert_int_equal(bs_addr_key(SA(&a), la - 5), bs_addr_key(SA(&b), un(&b, "/run/x", 6)));
	check_text(SA(&a), la - 5, "unix:/run/x");

	/* abstract names */
	la = un(&a, "\0backoff", 8);
	uint64_t ka = bs_addr_key(SA(&a), la);
	assert_int_equal(bs_addr_kind(SA(&a), la), BS_ADDR_UNIX);
	assert_true(ka != 0 && ka != k);
	check_text(SA(&a), la, "unix:@backoff");
	lb = un(&b, "@backoff", 8); /* a path that merely looks the same */
	check_text(SA(&b), lb, "unix:@backoff");
	assert_true(bs_addr_key(SA(&b), lb) != ka);
	/* for abstract names the length is part of the name */
	lb = un(&b, "\0backoff\0", 9);
	assert_true(bs_addr_key(SA(&b), lb) != ka);
	check_text(SA(&b), lb, "unix:@backoff?");
	lb = un(&b, "\0", 1);
	check_text(SA(&b), lb, "unix:@");
	assert_true(bs_addr_key(SA(&b), lb) != 0);
	/* unprintable bytes are shown as '?' */
	lb = un(&b, "/tmp/a\tb\x7f\xc3", 10);
	check_text(SA(&b), lb, "unix:/tmp/a?b??");
	/* a full 108-byte path with no NUL stays within sun_path */
	memset(b.sun_path, 'p', sizeof b.sun_path);
	assert_true(bs_addr_key(SA(&b), sizeof b) != 0);
	char buf[256];
	assert_int_equal(bs_addr_format(SA(&b), sizeof b, buf, sizeof buf),
			 5 + sizeof b.sun_path);
}

/* Keys are never 0 and separate families, ports and addresses. */
/* The host key: the same address at any port; 0 for what is not an
 * internet address. */
static void test_host_key(void **state)
{
	(void)state;
	struct sockaddr_in a = v4("127.0.0.1", 80), b = v4("127.0.0.1", 8080), c = v4("127.0.0.2", 80);
	struct sockaddr_in z = v4("127.0.0.1", 0);
	uint64_t ha = bs_addr_host_key((struct sockaddr *)&a, sizeof a);
	assert_true(ha != 0);
	assert_true(ha == bs_addr_host_key((struct sockaddr *)&b, sizeof b));
	assert_true(ha == bs_addr_key((struct sockaddr *)&z, sizeof z));
	assert_true(ha != bs_addr_host_key((struct sockaddr *)&c, sizeof c));
	struct sockaddr_in6 x = v6("::1", 80), y = v6("::1", 443);
	assert_true(bs_addr_host_key((struct sockaddr *)&x, sizeof x) ==
		    bs_addr_host_key((struct sockaddr *)&y, sizeof y));
	assert_true(bs_addr_host_key((struct sockaddr *)&x, sizeof x) != ha);
	struct sockaddr_un u;
	socklen_t ul = un(&u, "/tmp/s", 6);
	assert_true(bs_addr_host_key((struct sockaddr *)&u, ul) == 0);
}

static void test_keys_nonzero_distinct(void **state)
{
	(void)state;
	enum { N = 3000 };
	uint64_t *keys = malloc(3 * N * sizeof *keys);
	assert_non_null(keys);
	for (int i = 0; i < N; i++) {
		uint64_t r = bs_mix64(SEED ^ (uint64_t)i);
		struct sockaddr_in6 a6;
		memset(&a6, 0, sizeof a6);
		a6.sin6_family = AF_INET6;
		memcpy(a6.sin6_addr.s6_addr, &r, 8);
		memcpy(a6.sin6_addr.s6_addr + 8, &r, 8);
		a6.sin6_addr.s6_addr[0] |= 0x20; /* never v4-mapped */
		a6.sin6_port = htons(443);
		keys[3 * i] = KEY(a6);
		a6.sin6_port = htons(444);
		keys[3 * i + 1] = KEY(a6);
		struct sockaddr_un u;
		char path[32];
		int n = snprintf(path, sizeof path, "/run/s%d.sock", i);
		keys[3 * i + 2] = bs_addr_key(SA(&u), un(&u, path, (size_t)n));
	}
	for (int i = 0; i < 3 * N; i++)
		assert_true(keys[i] != 0);
	qsort(keys, 3 * N, sizeof *keys, cmp_u64);
	for (int i = 1; i < 3 * N; i++)
		assert_true(keys[i] != keys[i - 1]);
	free(keys);

	/* the same address in different families never collides */
	struct sockaddr_in a = v4("0.0.0.0", 0);
	struct sockaddr_in6 b = v6("::", 0);
	struct sockaddr_un u;
	socklen_t lu = un(&u, "\0", 1);
	assert_true(KEY(a) != KEY(b));
	assert_true(KEY(a) != bs_addr_key(SA(&u), lu));
	assert_true(KEY(b) != bs_addr_key(SA(&u), lu));
	assert_true(KEY(a) != 0 && KEY(b) != 0);
	/* flowinfo is not part of the destination */
	b = v6("2001:db8::1", 80);
	uint64_t kb = KEY(b);
	b.sin6_flowinfo = htonl(12345);
	assert_int_equal(KEY(b), kb);
}

/* Truncated output is a NUL-terminated prefix and never overruns cap. */
static void test_truncation(void **state)
{
	(void)state;
	struct sockaddr_in a = v4("192.168.100.200", 65535);
	struct sockaddr_in6 b = v6("2001:db8::1", 80);
	struct sockaddr_un u;
	socklen_t lu = un(&u, "\0abstract", 9);
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof ss);
	ss.ss_family = AF_PACKET;
	const struct {
		const struct sockaddr *sa;
		socklen_t len;
		const char *full;
	} cases[] = {
		{SA(&a), sizeof a, "192.168.100.200:65535"},
		{SA(&b), sizeof b, "[2001:db8::1]:80"},
		{SA(&u), lu, "unix:@abstract"},
		{SA(&ss), sizeof ss, "?"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		size_t full = strlen(cases[i].full);
		for (size_t cap = 0; cap <= full + 2; cap++) {
			char buf[64];
			memset(buf, '#', sizeof buf);
			size_t n = bs_addr_format(cases[i].sa, cases[i].len, buf, cap);
			for (size_t j = cap; j < sizeof buf; j++)
				assert_int_equal(buf[j], '#'); /* nothing past cap */
			if (cap == 0) {
				assert_int_equal(n, 0);
				continue;
			}
			size_t want = full < cap - 1 ? full : cap - 1;
			assert_int_equal(n, want);
			assert_int_equal(buf[n], '\0');
			assert_memory_equal(buf, cases[i].full, want);
		}
	}
}

/* A name lookup's pseudo-address: text, key, parts, and never a socket's. */
static void test_name_addr(void **state)
{
	(void)state;
	struct bs_name_addr a, b;
	const struct sockaddr *sa = (const struct sockaddr *)&a;
	socklen_t len = bs_name_addr(&a, "DB.internal", "5432");
	assert_true(len > 0);
	assert_int_equal(bs_addr_kind(sa, len), BS_ADDR_OTHER);
	assert_int_equal(bs_addr_key(sa, len), 0);
	char buf[64];
	bs_addr_format(sa, len, buf, sizeof buf);
	assert_string_equal(buf, "DB.internal:5432");
	unsigned port;
	assert_int_equal(bs_name_parts(sa, len, &port), strlen("DB.internal"));
	assert_int_equal(port, 5432);
	/* names are case-insensitive; the service is part of the key */
	socklen_t lb = bs_name_addr(&b, "db.INTERNAL", "5432");
	uint64_t k = bs_name_key(sa, len);
	assert_true(k != 0);
	assert_int_equal(bs_name_key((const struct sockaddr *)&b, lb), k);
	lb = bs_name_addr(&b, "db.internal", "5433");
	assert_true(bs_name_key((const struct sockaddr *)&b, lb) != k);
	/* the table keeps bits 62-63 for itself */
	assert_int_equal(k >> 62, 0);
	/* no service; a named service has no port */
	lb = bs_name_addr(&b, "cache", NULL);
	assert_int_equal(bs_name_parts((const struct sockaddr *)&b, lb, &port), 5);
	assert_int_equal(port, 0);
	lb = bs_name_addr(&b, "cache", "redis");
	assert_int_equal(bs_name_parts((const struct sockaddr *)&b, lb, &port), 5);
	assert_int_equal(port, 0);
	lb = bs_name_addr(&b, "cache", "99999");
	bs_name_parts((const struct sockaddr *)&b, lb, &port);
	assert_int_equal(port, 0);
	/* too long to keep: 0, and a socket address is no name */
	char big[200];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	assert_int_equal(bs_name_addr(&b, big, "1"), 0);
	struct sockaddr_in in = {.sin_family = AF_INET};
	assert_int_equal(bs_name_key((const struct sockaddr *)&in, sizeof in), 0);
}

/* Lookups libc answers "not known" without a name server are not waited on. */
static void test_name_may_resolve(void **state)
{
	(void)state;
	char long_label[80], long_name[300];
	memset(long_label, 'a', 64);
	long_label[64] = '\0';
	memset(long_name, 'a', sizeof long_name - 1);
	long_name[sizeof long_name - 1] = '\0';
	for (int i = 50; i < 299; i += 50)
		long_name[i] = '.';
	static const char *const fine[] = {"db", "db.", "my_service", "a-b.example", "x1.y2.z3",
					   "a.-b"};
	for (size_t i = 0; i < sizeof fine / sizeof *fine; i++)
		assert_true(bs_name_may_resolve(fine[i], "80", 0));
	const char *bad[] = {"", ".", "a..b", ".a", "a b", "a\tb", "-x", "a..", long_label,
			     long_name, "db1,db2", "user@db", "a/b", "x*", "caf\xc3\xa9",
			     "10.0.0.300", "1.2.3.4.5", "123456789012"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		assert_false(bs_name_may_resolve(bad[i], "80", 0));
	assert_true(bs_name_may_resolve("caf\xc3\xa9", "80", AI_IDN));
	assert_true(bs_name_may_resolve("1.2.3.4.", "80", 0));
	assert_true(bs_name_may_resolve("1a.example", "80", 0));
	assert_true(bs_name_may_resolve("db", "http", 0));
	assert_true(bs_name_may_resolve("db", "8080", AI_NUMERICSERV));
	assert_true(bs_name_may_resolve("db", NULL, AI_NUMERICSERV));
	assert_false(bs_name_may_resolve("db", "http", AI_NUMERICSERV));
}

/* A lookup for one family has a key of its own; all are the name's. */
static void test_name_key_of_family(void **state)
{
	(void)state;
	struct bs_name_addr a;
	socklen_t len = bs_name_addr(&a, "db", "80");
	uint64_t k = bs_name_key((const struct sockaddr *)&a, len);
	uint64_t k4 = bs_name_key_of_family(k, AF_INET), k6 = bs_name_key_of_family(k, AF_INET6);
	assert_int_equal(bs_name_key_of_family(k, AF_UNSPEC), k);
	assert_true(k4 != k && k6 != k && k4 != k6 && k4 && k6);
	assert_true(bs_name_keys_match(k, k) && bs_name_keys_match(k4, k) && bs_name_keys_match(k6, k));
	assert_false(bs_name_keys_match(k + 2, k));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_addresses_no_route_reaches),
		cmocka_unit_test(test_connects_the_kernel_answers_at_once),
		cmocka_unit_test(test_v4_key_exact),
		cmocka_unit_test(test_v4_key_inline),
		cmocka_unit_test(test_unreadable_pointers_are_not_read),
		cmocka_unit_test(test_v4_format),
		cmocka_unit_test(test_v4_mapped),
		cmocka_unit_test(test_v6_format),
		cmocka_unit_test(test_v6_format_vs_inet_ntop),
		cmocka_unit_test(test_other),
		cmocka_unit_test(test_unix),
		cmocka_unit_test(test_host_key),
		cmocka_unit_test(test_keys_nonzero_distinct),
		cmocka_unit_test(test_truncation),
		cmocka_unit_test(test_name_addr),
		cmocka_unit_test(test_name_may_resolve),
		cmocka_unit_test(test_name_key_of_family),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
