/*
 * redirect: a connect() wrapper of the kind proxies preload (proxychains,
 * socket_wrapper): a connect to 127.0.0.1:REDIRECT_FROM goes to
 * 127.0.0.1:REDIRECT_TO instead. Preloaded after the shim, it wraps the
 * program's connect but not the shim's retries.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int connect(int fd, const struct sockaddr *a, socklen_t l)
{
	int (*next)(int, const struct sockaddr *, socklen_t) =
		(int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
	const char *from = getenv("REDIRECT_FROM"), *to = getenv("REDIRECT_TO");
	struct sockaddr_in in;
	if (from && to && a && a->sa_family == AF_INET && l >= sizeof in) {
		memcpy(&in, a, sizeof in);
		if (ntohs(in.sin_port) == atoi(from)) {
			in.sin_port = htons((unsigned short)atoi(to));
			return next(fd, (struct sockaddr *)&in, sizeof in);
		}
	}
	return next(fd, a, l);
}
