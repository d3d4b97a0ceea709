/* sfilter: see sfilter.h. */
#include "sfilter.h"

#include <linux/audit.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "sfilter: unknown architecture"
#endif

#define ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i))
#define ARG_HI(i) (ARG_LO(i) + 4)

#define LD(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
/* if A == k fall through, else skip n */
#define IF_EQ(k, n) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (k), 0, (n))

unsigned bs_sfilter_build(struct sock_filter *out, int trap_so_error)
{
	unsigned n = 0;
#define PUT(x) (out[n++] = (struct sock_filter)x)
	PUT(LD(offsetof(struct seccomp_data, arch)));
	PUT(IF_EQ(ARCH, 0)); /* else to ALLOW: patched below */
	unsigned to_allow_at = n - 1;
	PUT(LD(offsetof(struct seccomp_data, nr)));

	/* connect(fd, addr, 16 or 28) */
	PUT(IF_EQ(SYS_connect, 5));
	PUT(LD(ARG_LO(2)));
	PUT(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 16, 1, 0));
	PUT(IF_EQ(28, 1));
	PUT(RET(SECCOMP_RET_USER_NOTIF));
	PUT(RET(SECCOMP_RET_ALLOW));

	/* getsockopt(fd, SOL_SOCKET, SO_ERROR, ...) */
	if (trap_so_error) {
		PUT(IF_EQ(SYS_getsockopt, 8));
		PUT(LD(ARG_HI(1)));
		PUT(IF_EQ(0, 5));
		PUT(LD(ARG_LO(1)));
		PUT(IF_EQ(SOL_SOCKET, 3));
		PUT(LD(ARG_LO(2)));
		PUT(IF_EQ(SO_ERROR, 1));
		PUT(RET(SECCOMP_RET_USER_NOTIF));
		PUT(RET(SECCOMP_RET_ALLOW));
	}

	/* landlock_restrict_self() */
	PUT(IF_EQ(BS_SYS_LANDLOCK_RESTRICT_SELF, 1));
	PUT(RET(SECCOMP_RET_USER_NOTIF));

	/* prctl(BS_SUP_PRCTL_OPTION): the library announces itself (every
	 * path here comes from a test of nr: A holds it still) */
	PUT(IF_EQ(SYS_prctl, 3));
	PUT(LD(ARG_LO(0)));
	PUT(IF_EQ(BS_SUP_PRCTL_OPTION, 1));
	PUT(RET(SECCOMP_RET_USER_NOTIF));
	PUT(RET(SECCOMP_RET_ALLOW));
	out[to_allow_at].jf = (unsigned char)(n - 1 - (to_allow_at + 1));
#undef PUT
	return n;
}
