/* role: is this process a client or a server? See shim.h (bs_nb_mode). */
#include "addr.h"
#include "real.h"
#include "shim.h"
#include "sock.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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

void bs_role_detect_inherited(void)
{
	/* inetd ("wait" services) passes its listening socket as 0;
	 * systemd passes LISTEN_FDS of them from 3 on */
	int last = 2 + listen_fds();
	for (int fd = 0; fd <= last; fd++)
		if (bs_sock_is_listening(fd)) {
			bs_role_is_server();
			return;
		}
}

static void is_up(const void *addr, socklen_t len)
{
	bs_outcome_healthy(bs_addr_key((const struct sockaddr *)addr, len));
}

/* The address fd listens on is up: this process serves it. A connect of
 * its own to it (a test suite that connects to its own listener) gets no
 * made-up refusal from an earlier failure of that destination. A wildcard
 * address is reached through loopback. */
void bs_role_listening(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	int saved = errno;
	if (syscall(SYS_getsockname, fd, &ss, &len) == 0 && len <= sizeof ss) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in in;
			memcpy(&in, &ss, sizeof in);
			is_up(&in, sizeof in);
			if (in.sin_addr.s_addr == htonl(INADDR_ANY)) {
				in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
				is_up(&in, sizeof in);
			}
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 in6;
			memcpy(&in6, &ss, sizeof in6);
			is_up(&in6, sizeof in6);
			if (IN6_IS_ADDR_UNSPECIFIED(&in6.sin6_addr)) {
				struct sockaddr_in in = {.sin_family = AF_INET,
							 .sin_port = in6.sin6_port,
							 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
				in6.sin6_addr = in6addr_loopback;
				is_up(&in6, sizeof in6);
				is_up(&in, sizeof in);
			}
		}
	}
	errno = saved;
}
