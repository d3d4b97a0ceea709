/*
 * deepbind: dlopen(). A library opened with RTLD_DEEPBIND (PHP opens every
 * extension so) looks symbols up in its own dependencies first: libcurl
 * inside PHP's curl extension binds connect() to libc, past the preloaded
 * shim, and its connects are never retried.
 *
 * Promise: after such a dlopen of a path, each object it newly loaded has
 * the GOT entries of the interposed socket calls pointed at the shim's, as
 * a normal load binds them. The entries are written through
 * /proc/self/mem, so no page's protection changes, not even for a moment
 * (a RELRO page may share its end with .data). dlopen itself is never
 * redirected (glibc takes the caller's namespace from the return address).
 * A dlopen the shim would have to call in the program's stead without
 * changing its meaning is passed on as a tail call, so that glibc still
 * sees the program as the caller: a bare name (the caller's RUNPATH
 * searches it), a path with `$` (the caller's $ORIGIN), a caller with
 * DT_RPATH (inherited by what it loads) or outside the base namespace.
 * Then nothing is patched, and one line says which library is not covered.
 */
#include "log.h"
#include "real.h"
#include "ret.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <elf.h>
#include <link.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int fcntl64(int fd, int cmd, ...); /* (glibc declares it only with _FILE_OFFSET_BITS=64) */

/* the shim's own functions for each interposed name */
struct own {
	const char *name;
	void *fn;
};

#define BS_REAL(ret, name, params, args, fallback) {#name, (void *)name},
#define BS_REAL_VOID(name, params, args, fallback) {#name, (void *)name},
#define BS_EXPORT(name) /* (the _chk variants: their plain calls are patched) */
static const struct own own[] = {
#include "interposed.def"
};
#undef BS_REAL
#undef BS_REAL_VOID
#undef BS_EXPORT

static void *own_fn(const char *name)
{
	if (!strcmp(name, "dlopen"))
		return NULL; /* (see the promise) */
	for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
		if (!strcmp(own[i].name, name))
			return own[i].fn;
	return NULL;
}

#define MAX_OBJECTS 256

/* What dl_iterate_phdr says of an object: its base and dynamic section. */
struct object {
	ElfW(Addr) base;
	const ElfW(Dyn) *dyn;
};

static const ElfW(Dyn) *dyn_of(const struct object *o, ElfW(Sxword) tag)
{
	for (const ElfW(Dyn) *d = o->dyn; d && d->d_tag != DT_NULL; d++)
		if (d->d_tag == tag)
			return d;
	return NULL;
}

/* Point *slot at fn through /proc/self/mem (mem: its fd), which writes
 * past a page's protection without changing it. */
static int set_slot(void **slot, void *fn, int mem)
{
	return *slot == fn ||
	       BS_SYS(SYS_pwrite64, mem, &fn, sizeof fn, (off_t)(uintptr_t)slot) == sizeof fn;
}

/* The relocations of table `tag` (of size `sz_tag`) that name an
 * interposed call: their slots pointed at the shim's. */
static int patch_table(const struct object *o, ElfW(Sxword) tag, ElfW(Sxword) sz_tag,
		       const ElfW(Sym) *syms, const char *strs, int mem)
{
	int ok = 1;
	const ElfW(Dyn) *t = dyn_of(o, tag), *sz = dyn_of(o, sz_tag);
	if (!t || !sz)
		return 1;
	const ElfW(Rela) *r = (const ElfW(Rela) *)t->d_un.d_ptr;
	for (size_t i = 0; i < sz->d_un.d_val / sizeof *r; i++) {
		unsigned type = (unsigned)ELF64_R_TYPE(r[i].r_info);
#if defined(__x86_64__)
		if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
			continue;
#elif defined(__aarch64__)
		if (type != R_AARCH64_JUMP_SLOT && type != R_AARCH64_GLOB_DAT)
			continue;
#else
		(void)type;
		return 1;
#endif
		const ElfW(Sym) *s = &syms[ELF64_R_SYM(r[i].r_info)];
		void *fn = s->st_shndx == SHN_UNDEF ? own_fn(strs + s->st_name) : NULL;
		if (fn)
			ok &= set_slot((void **)(o->base + r[i].r_offset), fn, mem);
	}
	return ok;
}

static int patch(const struct object *o, int mem)
{
	const ElfW(Dyn) *sym = dyn_of(o, DT_SYMTAB), *str = dyn_of(o, DT_STRTAB);
	const ElfW(Dyn) *pltrel = dyn_of(o, DT_PLTREL);
	if (!sym || !str || (pltrel && pltrel->d_un.d_val != DT_RELA))
		return 1; /* (the 64-bit ABIs this builds for use RELA) */
	const ElfW(Sym) *syms = (const ElfW(Sym) *)sym->d_un.d_ptr;
	const char *strs = (const char *)str->d_un.d_ptr;
	return patch_table(o, DT_JMPREL, DT_PLTRELSZ, syms, strs, mem) &
	       patch_table(o, DT_RELA, DT_RELASZ, syms, strs, mem);
}

/* The objects loaded before a dlopen (their bases); after it, each one
 * not among them is patched, inside dl_iterate_phdr, which holds the
 * loader's lock: no other thread can unload it meanwhile. */
struct walk {
	ElfW(Addr) before[MAX_OBJECTS];
	unsigned n;
	int patching, mem, failed;
};

static int visit(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct walk *w = ctx;
	(void)size;
	if (!w->patching) {
		if (w->n < MAX_OBJECTS)
			w->before[w->n++] = info->dlpi_addr;
		return 0;
	}
	for (unsigned i = 0; i < w->n; i++)
		if (w->before[i] == info->dlpi_addr)
			return 0;
	struct object o = {info->dlpi_addr, NULL};
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			o.dyn = (const ElfW(Dyn) *)(o.base + info->dlpi_phdr[i].p_vaddr);
	if (o.dyn && !patch(&o, w->mem))
		w->failed = 1;
	return 0;
}

static void say_not_covered(const char *file, const char *why)
{
	if (!bs_log_enabled(BS_LOG_INFO))
		return;
	struct bs_line l;
	bs_line_start(&l);
	bs_line_event(&l, "deepbind");
	bs_line_str(&l, file ? file : "?");
	bs_line_str(&l, ": opened with RTLD_DEEPBIND ");
	bs_line_str(&l, why);
	bs_line_str(&l, "; its connects (and its dependencies') bypass the shim");
	bs_line_emit(&l, BS_LOG_INFO);
}

/* Does the object holding code address `at` carry DT_RPATH, or live
 * outside the base namespace? Then a dlopen made in its stead would lose
 * what glibc takes from the caller. */
static int caller_matters(const void *at)
{
	Dl_info info;
	struct link_map *m = NULL;
	Lmid_t ns = LM_ID_BASE;
	if (!dladdr1(at, &info, (void **)&m, RTLD_DL_LINKMAP) || !m ||
	    dlinfo(m, RTLD_DI_LMID, &ns) != 0 || ns != LM_ID_BASE)
		return 1;
	for (const ElfW(Dyn) *d = m->l_ld; d && d->d_tag != DT_NULL; d++)
		if (d->d_tag == DT_RPATH)
			return 1;
	return 0;
}

static __attribute__((noinline)) void *open_and_patch(const char *file, int mode)
{
	struct walk w = {.n = 0, .patching = 0, .mem = -1, .failed = 0};
	dl_iterate_phdr(visit, &w);
	void *h = bs_real_dlopen(file, mode);
	if (h && w.n < MAX_OBJECTS) {
		w.mem = (int)BS_SYS(SYS_openat, AT_FDCWD, "/proc/self/mem", O_RDWR | O_CLOEXEC);
		w.patching = 1;
		if (w.mem >= 0)
			dl_iterate_phdr(visit, &w);
		if (w.mem < 0 || w.failed)
			say_not_covered(file, "(/proc/self/mem refused the patch)");
		if (w.mem >= 0)
			BS_SYS(SYS_close, w.mem);
	}
	return h;
}

/* The reason a dlopen is passed on untouched, or NULL. */
static __attribute__((noinline)) const char *not_ours(const char *file, const void *caller)
{
	if (!strchr(file, '/'))
		return "by name";
	if (strchr(file, '$'))
		return "by a path with $";
	if (caller_matters(caller))
		return "by a caller with DT_RPATH or in another namespace";
	return NULL;
}

BS_API void *dlopen(const char *file, int mode)
{
	if (!(mode & RTLD_DEEPBIND) || !file)
		return bs_real_dlopen(file, mode);
	const char *why = not_ours(file, __builtin_return_address(0));
	if (why) {
		say_not_covered(file, why);
		return bs_real_dlopen(file, mode);
	}
	return open_and_patch(file, mode);
}
