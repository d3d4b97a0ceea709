/* connect(): the interposed entry point. Classifies the call and hands
 * destinations the shim cares about to the engine; everything else goes
 * straight to libc. */
#include "addr.h"
#include "real.h"
#include "shim.h"

#include <sys/socket.h>

__attribute__((visibility("default"))) int connect(int fd, const struct sockaddr *addr,
						   socklen_t len)
{
	const struct bs_config *cfg = bs_active();
	if (!cfg)
		return bs_real_connect(fd, addr, len);
	switch (bs_addr_kind(addr, len)) {
	case BS_ADDR_INET:
		break;
	case BS_ADDR_UNIX:
		if (cfg->unix_sockets)
			break;
		/* fall through */
	default:
		return bs_real_connect(fd, addr, len);
	}
	return bs_engine_connect(cfg, fd, addr, len, bs_addr_key(addr, len));
}
