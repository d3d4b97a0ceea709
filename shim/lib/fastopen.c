/* fastopen: see fastopen.h. A blocking socket waits until the destination
 * is due; a non-blocking one never waits and fails at once inside the
 * backoff window (it cannot be parked: its data is part of the call),
 * unless its mode is off. */
#include "fastopen.h"

#include "addr.h"
#include "attempt.h"
#include "clock.h"
#include "nonblock.h"
#include "outcome.h"
#include "policy.h"
#include "real.h"
#include "ret.h"
#include "role.h"
#include "shared.h"
#include "shim.h"
#include "sock.h"

#include <errno.h>
#include <fcntl.h>

ssize_t bs_fastopen(const struct bs_config *cfg, int fd, const void *buf, size_t n, int flags,
		    const struct sockaddr *addr, socklen_t len)
{
	uint64_t key = bs_addr_key(addr, len), now = bs_now();
	cfg = bs_cfg_for(cfg, addr, len);
	if (cfg->policy.kind == BS_POLICY_OFF)
		return BS_NEG(bs_real_sendto(fd, buf, n, flags, addr, len));
	struct bs_entry *e = key ? bs_table_find(bs_tab(), key) : NULL;
	if (e)
		bs_shared_forget_stale(cfg, e);
	struct bs_dest d = {key, addr, len};
	if (e && !bs_state_may_attempt(atomic_load(&e->state))) {
		int nb = bs_sock_has_flag(fd, O_NONBLOCK);
		if (nb && bs_nb_mode(cfg) != BS_NB_OFF &&
		    bs_attempt_no_wait(atomic_load(&e->state), 0, 0, now) == BS_NW_WINDOW)
			return -bs_nb_last_err(key); /* a non-blocking call never waits */
		int r = nb ? 0 : bs_nb_wait_due(cfg, fd, &d, now);
		if (r < 0)
			return r;
	}
	now = bs_now();
	ssize_t r = BS_NEG(bs_real_sendto(fd, buf, n, flags, addr, len));
	if (key) {
		if (r >= 0)
			bs_outcome_connected(&d, fd, now);
		else if (r == -EINPROGRESS)
			bs_outcome_started(cfg, fd, addr, len, key, now);
		else if (bs_config_retries(cfg, (int)-r))
			bs_outcome_failed_later(cfg, &d, now, (int)-r, UINT64_MAX);
	}
	return r;
}
