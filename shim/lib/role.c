/* role: is this process a client or a server? See shim.h (bs_nb_mode). */
#include "real.h"
#include "shim.h"
#include "sock.h"

#include <stdlib.h>

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
