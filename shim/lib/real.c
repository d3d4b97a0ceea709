/* real: lazy dlsym(RTLD_NEXT) with a raw-syscall fallback. See real.h. */
#include "real.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Set while this thread is inside dlsym, so that re-entry cannot recurse. */
static __thread int in_dlsym __attribute__((tls_model("initial-exec")));

static void *resolve(void *_Atomic *slot, const char *name)
{
	void *p = atomic_load_explicit(slot, memory_order_acquire);
	if (p || in_dlsym)
		return p;
	in_dlsym = 1;
	p = dlsym(RTLD_NEXT, name);
	in_dlsym = 0;
	if (p)
		atomic_store_explicit(slot, p, memory_order_release);
	return p;
}

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);
static void *_Atomic real_connect;

int bs_real_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	connect_fn f = (connect_fn)resolve(&real_connect, "connect");
	if (f)
		return f(fd, addr, len);
	return (int)syscall(SYS_connect, fd, addr, len);
}

void bs_real_resolve_all(void)
{
	resolve(&real_connect, "connect");
}
