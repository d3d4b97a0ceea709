/*
 * role: is this process a client or a server?
 *
 * Promise: one relaxed load to ask; a few system calls when the library
 * loads (an inherited listening socket) and when the program listens.
 */
#ifndef BS_ROLE_H
#define BS_ROLE_H

#include "config.h"
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

/* A process that listens (listen(), accept(), or a listening socket
 * inherited from systemd's LISTEN_FDS or inetd at fd 0) is a server; any
 * other is a client. nonblocking = auto means defer for a client, pace for
 * a server: a server connects on behalf of its requests and has its own
 * failover, so a refused upstream must reach it at once. */
extern _Atomic int bs_role_server_g __attribute__((visibility("hidden")));
void bs_role_is_server(void);
/* The first connect() of the process: an inherited listening socket
 * (inetd's fd 0, systemd's LISTEN_FDS) makes it a server. */
void bs_role_first_connect(void);
/* fd listens (listen() succeeded): the keys of the destinations it
 * serves, which are up (its own address, and loopback for a wildcard one),
 * into keys[]; returns how many (at most BS_ROLE_KEYS). */
#define BS_ROLE_KEYS 3
int bs_role_listening(int fd, uint64_t keys[BS_ROLE_KEYS]);
/* Might addr be this process's own listening socket: its port is one the
 * process listens on at a wildcard address? (Then a connect to it is never
 * refused by the shim: the process itself serves it.) */
int bs_role_serves(const struct sockaddr *addr, socklen_t len);
/* The mode in force for non-blocking sockets under cfg (never auto). */
static inline int bs_nb_mode(const struct bs_config *cfg)
{
	if (cfg->nonblocking != BS_NB_AUTO)
		return cfg->nonblocking;
	return atomic_load_explicit(&bs_role_server_g, memory_order_relaxed) ? BS_NB_PACE
									       : BS_NB_DEFER;
}
/* Does cfg's mode park (park.h)? defer does; so does retry, wherever it
 * may not wait. */
static inline int bs_nb_parks(const struct bs_config *cfg)
{
	return bs_nb_mode(cfg) == BS_NB_DEFER || bs_nb_mode(cfg) == BS_NB_RETRY;
}

#endif
