/* role: is this process a client or a server? See role.h. */
#include "role.h"

#include "addr.h"
#include "ret.h"
#include "sock.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

_Atomic int bs_role_server_g;

void bs_role_is_server(void)
{
	if (!atomic_load_explicit(&bs_role_server_g, memory_order_relaxed))
		atomic_store_explicit(&bs_role_server_g, 1, memory_order_relaxed);
}

/* At most this many descriptors passed by systemd are looked at. */
#define LISTEN_FDS_MAX 64

static int listen_fds(void)
{
	const char *s = secure_getenv("LISTEN_FDS");
	int n = 0;
	for (int i = 0; s && s[i] >= '0' && s[i] <= '9' && n <= LISTEN_FDS_MAX; i++)
		n = n * 10 + (s[i] - '0');
	return n > LISTEN_FDS_MAX ? LISTEN_FDS_MAX : n;
}

/* The descriptors that may hold an inherited listening socket: inetd
 * ("wait" services) passes its listening socket as 0; systemd passes
 * LISTEN_FDS of them from 3 on. Read at load (the program may unset the
 * variable), looked at by the first connect (no system call at load). */
static int last_inherited;

__attribute__((constructor)) static void role_at_load(void)
{
	last_inherited = 2 + listen_fds();
}

void bs_role_first_connect(void)
{
	for (int fd = 0; fd <= last_inherited; fd++)
		if (bs_sock_is_listening(fd)) {
			bs_role_is_server();
			return;
		}
}

/* The ports this process listens on at a wildcard address (network byte
 * order; 0: a free cell). Any local address of the port is its own: 127.0.0.2
 * and the host's own addresses too. Beyond LISTEN_PORTS, a port is not
 * remembered (then a connect of its own to it is judged as any other). */
#define LISTEN_PORTS 16
static _Atomic uint16_t listen_ports[LISTEN_PORTS];

static void serve_port(uint16_t port)
{
	for (int i = 0; i < LISTEN_PORTS; i++) {
		uint16_t p = atomic_load_explicit(&listen_ports[i], memory_order_relaxed);
		if (p == port)
			return;
		if (!p && (atomic_compare_exchange_strong(&listen_ports[i], &p, port) || p == port))
			return; /* (a failed swap loaded the cell's new port) */
	}
}

int bs_role_serves(const struct sockaddr *addr, socklen_t len)
{
	uint16_t port;
	if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
		port = ((const struct sockaddr_in *)(const void *)addr)->sin_port;
	else if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))
		port = ((const struct sockaddr_in6 *)(const void *)addr)->sin6_port;
	else
		return 0;
	for (int i = 0; i < LISTEN_PORTS; i++) {
		uint16_t p = atomic_load_explicit(&listen_ports[i], memory_order_relaxed);
		if (!p)
			return 0;
		if (p == port)
			return 1;
	}
	return 0;
}

/* The key of addr (len bytes) into keys[n], if there is room. */
static int key_into(uint64_t keys[BS_ROLE_KEYS], int n, const void *addr, socklen_t len)
{
	if (n < BS_ROLE_KEYS)
		keys[n++] = bs_addr_key((const struct sockaddr *)addr, len);
	return n;
}

/* A connect of its own to the address fd listens on (a test suite that
 * connects to its own listener) gets no made-up refusal from an earlier
 * failure of that destination. */
int bs_role_listening(int fd, uint64_t keys[BS_ROLE_KEYS])
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	int n = 0;
	if (BS_SYS(SYS_getsockname, fd, &ss, &len) != 0 || len > sizeof ss)
		return 0;
	if (ss.ss_family == AF_UNIX || ss.ss_family == AF_INET || ss.ss_family == AF_INET6)
		n = key_into(keys, n, &ss, len); /* its own address */
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in in;
		memcpy(&in, &ss, sizeof in);
		if (in.sin_addr.s_addr == htonl(INADDR_ANY)) {
			in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			n = key_into(keys, n, &in, sizeof in);
			serve_port(in.sin_port);
		}
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 in6;
		memcpy(&in6, &ss, sizeof in6);
		if (IN6_IS_ADDR_UNSPECIFIED(&in6.sin6_addr)) {
			struct sockaddr_in in = {.sin_family = AF_INET,
						 .sin_port = in6.sin6_port,
						 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
			in6.sin6_addr = in6addr_loopback;
			n = key_into(keys, n, &in6, sizeof in6);
			n = key_into(keys, n, &in, sizeof in);
			serve_port(in6.sin6_port);
		}
	}
	return n;
}
