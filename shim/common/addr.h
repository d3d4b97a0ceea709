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

/* Which kind of destination addr is; BS_ADDR_OTHER for anything malformed,
 * too short, or of another family. */
enum bs_addr_kind bs_addr_kind(const struct sockaddr *addr, socklen_t len);

/* The destination key, or 0 when addr is not a destination we key. */
uint64_t bs_addr_key(const struct sockaddr *addr, socklen_t len);

#define BS_ADDR_TAG_V4 (1ull << 60)

/* bs_addr_key for an IPv4 address, inline (a few instructions); 0 for
 * anything else. */
static inline uint64_t bs_addr_v4_key(const struct sockaddr *addr, socklen_t len)
{
	if (!addr || len < (socklen_t)sizeof(struct sockaddr_in) || addr->sa_family != AF_INET)
		return 0;
	struct sockaddr_in in;
	memcpy(&in, addr, sizeof in);
	return BS_ADDR_TAG_V4 | (uint64_t)ntohs(in.sin_port) << 32 | ntohl(in.sin_addr.s_addr);
}

/* "127.0.0.1:5432", "[::1]:6379", "unix:/run/x.sock", "unix:@abstract".
 * Always NUL-terminated; truncated to cap. Returns the length written. */
size_t bs_addr_format(const struct sockaddr *addr, socklen_t len, char *buf,
		      size_t cap);

#endif
