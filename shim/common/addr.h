/*
 * addr: socket addresses as destination keys and as text.
 *
 * Promise: pure functions over the bytes the caller passes (no syscalls, no
 * allocation, async-signal-safe). A key is a non-zero 64-bit value that names
 * a destination: family + address + port, with IPv4-mapped IPv6 folded into
 * IPv4. IPv4 keys are exact; IPv6 and unix-path keys are 60-bit hashes.
 */
#ifndef BS_ADDR_H
#define BS_ADDR_H

#include <stddef.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

enum bs_addr_kind { BS_ADDR_OTHER = 0, BS_ADDR_INET = 1, BS_ADDR_UNIX = 2 };

/* Could p point into a process's memory? Not in its first page (NULL and
 * the small numbers a bad cast gives) nor in the kernel's half (-1 as a
 * pointer; negative as a signed number): given those, the kernel fails the
 * call with EFAULT, and the shim, which reads the address first, must not
 * fault instead. One signed compare. (A wild pointer into the user's half
 * is not caught.) */
static inline int bs_addr_plausible(const void *p)
{
	return (intptr_t)p >= 4096;
}

/* Which kind of destination addr is; BS_ADDR_OTHER for anything malformed,
 * too short, or of another family. */
enum bs_addr_kind bs_addr_kind(const struct sockaddr *addr, socklen_t len);

/* An internet address (of kind BS_ADDR_INET) as an IPv4 one into *in, an
 * IPv4-mapped IPv6 address folded: 1; 0 for a real IPv6 address, whose
 * port alone *in then holds. */
int bs_addr_as_v4(const struct sockaddr *addr, struct sockaddr_in *in);

/* Is addr one that no route carries a TCP connect to, whatever the
 * network does (the kernel's ENETUNREACH at once): multicast or the
 * limited broadcast, as IPv4, IPv4-mapped or IPv6, or an IPv4-mapped
 * address from a socket that is `v6only` (IPV6_V6ONLY)? 0 for anything
 * but AF_INET and AF_INET6 (NULL too). */
int bs_addr_never_routed(const struct sockaddr *addr, int v6only);

/* Would the kernel answer a connect of a socket to addr at once, whatever
 * the destination does: a socket of another family (`domain`, SO_DOMAIN;
 * <= 0: not known) gets EINVAL or EAFNOSUPPORT, a TCP socket that is not
 * closed (`tcp_state`, tcp_info's; < 0: not known) EISCONN or EALREADY?
 * No such connect is made to wait. */
int bs_addr_answered_at_once(const struct sockaddr *addr, int domain, int tcp_state);

/* The destination key, or 0 when addr is not a destination we key. */
uint64_t bs_addr_key(const struct sockaddr *addr, socklen_t len);
/* The key of the same address with port 0: the host alone (for a lookup
 * that named no service, and for [dest NAME:*] rules); 0 if none. */
uint64_t bs_addr_host_key(const struct sockaddr *addr, socklen_t len);

/* A name lookup as a destination (getaddrinfo with `resolve` on): a
 * pseudo-address of a family no socket has, holding "name" or
 * "name:service", that the table, the log and status treat as an address.
 * bs_addr_kind() calls it BS_ADDR_OTHER, so connect() never takes one. */
#define BS_AF_NAME 0xfffe
#define BS_NAME_TEXT 126
struct bs_name_addr {
	sa_family_t family;
	char text[BS_NAME_TEXT]; /* NUL-terminated */
};
/* Fill *a from node and svc (svc may be NULL); its length, or 0 when the
 * text does not fit. */
socklen_t bs_name_addr(struct bs_name_addr *a, const char *node, const char *svc);
/* Its key (names are case-insensitive); 0 if a is not one. */
uint64_t bs_name_key(const struct sockaddr *a, socklen_t len);
/* The key of a lookup that asks for one family (AF_INET or AF_INET6; any
 * other: key itself), so that a name that fails for one family does not
 * hold up a lookup for another; and whether `any` is one of unspec's. */
uint64_t bs_name_key_of_family(uint64_t unspec, int family);
int bs_name_keys_match(uint64_t any, uint64_t unspec);
/* Could a name server ever answer this lookup (getaddrinfo's node, service
 * and ai_flags)? Not when libc says "not known" without asking one: a
 * name its hostname check refuses (glibc's res_hnok: labels of letters,
 * digits, '-' and '_', none empty or over 63 bytes, 253 in all, no '-'
 * first), or a service that is not a number under AI_NUMERICSERV. */
int bs_name_may_resolve(const char *node, const char *svc, int flags);
/* Its name's length and its service's port (0: none, or not a number). */
unsigned bs_name_parts(const struct sockaddr *a, socklen_t len, unsigned *port);

#define BS_ADDR_TAG_V4 (1ull << 60)
#define BS_ADDR_V4_BITS ((1ull << 48) - 1)

/* An IPv4 key: the tag, and the six bytes of port and address as they lie
 * in a sockaddr_in (network order), read as one native integer. Keys never
 * leave the machine (the shared table is per host), and this reading costs
 * a load and a shift. */
static inline uint64_t bs_addr_v4_key_of(const struct sockaddr_in *in)
{
	uint64_t w;
	memcpy(&w, in, sizeof w); /* family, port, address */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return BS_ADDR_TAG_V4 | w >> 16;
#else
	return BS_ADDR_TAG_V4 | (w & BS_ADDR_V4_BITS);
#endif
}

/* bs_addr_key for an IPv4 address, inline (a few instructions); 0 for
 * anything else. */
static inline uint64_t bs_addr_v4_key(const struct sockaddr *addr, socklen_t len)
{
	if (!bs_addr_plausible(addr) || len < (socklen_t)sizeof(struct sockaddr_in) ||
	    addr->sa_family != AF_INET)
		return 0;
	return bs_addr_v4_key_of((const struct sockaddr_in *)addr);
}

/* The sockaddr_in an IPv4 key names (IPv4 keys are exact): 1, or 0 if key
 * is not an IPv4 one. */
int bs_addr_of_v4_key(uint64_t key, struct sockaddr_in *out);

/* Length of a unix path inside the address: up to the first NUL for a
 * filesystem path, the whole remainder for an abstract name (a NUL first,
 * which bs_addr_format and [dest unix:@name] write as '@'). */
struct sockaddr_un;
size_t bs_addr_unix_path_len(const struct sockaddr_un *un, socklen_t len);

/* "127.0.0.1:5432", "[::1]:6379", "unix:/run/x.sock", "unix:@abstract".
 * Always NUL-terminated; truncated to cap. Returns the length written. */
size_t bs_addr_format(const struct sockaddr *addr, socklen_t len, char *buf,
		      size_t cap);

#endif
