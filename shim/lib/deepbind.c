/*
 * deepbind: dlopen(). A library opened with RTLD_DEEPBIND (PHP opens every
 * extension so) looks symbols up in its own dependencies first: libcurl
 * inside PHP's curl extension binds connect() to libc, past the preloaded
 * shim, and its connects are never retried.
 *
 * Promise: after such a dlopen of a path, each object it newly loaded has
 * the GOT entries of the interposed calls pointed at the shim's, as a
 * normal load binds them (a write per entry; a read-only RELRO page is made
 * writable for the write and read-only again). The library's own symbol
 * lookup is not changed otherwise. A dlopen by bare name is passed on as a
 * tail call, so that glibc still sees the program as its caller (the
 * caller's RUNPATH decides the search): then nothing is patched, and one
 * line says which library the shim does not cover and why.
 */
#include "log.h"
#include "real.h"
#include "ret.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <elf.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
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
#define NOWN (sizeof own / sizeof own[0])

static void *own_fn(const char *name)
{
	for (size_t i = 0; i < NOWN; i++)
		if (!strcmp(own[i].name, name))
			return own[i].fn;
	return NULL;
}

#define MAX_OBJECTS 256

/* What dl_iterate_phdr says of an object: its base and dynamic section;
 * its RELRO range (read-only once relocated). */
struct object {
	ElfW(Addr) base, relro_lo, relro_hi;
	const ElfW(Dyn) *dyn;
};

static struct object object_of(const struct dl_phdr_info *info)
{
	struct object o = {info->dlpi_addr, 0, 0, NULL};
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_DYNAMIC)
			o.dyn = (const ElfW(Dyn) *)(o.base + ph->p_vaddr);
		if (ph->p_type == PT_GNU_RELRO) {
			o.relro_lo = o.base + ph->p_vaddr;
			o.relro_hi = o.relro_lo + ph->p_memsz;
		}
	}
	return o;
}

static const ElfW(Dyn) *dyn_of(const struct object *o, ElfW(Sxword) tag)
{
	for (const ElfW(Dyn) *d = o->dyn; d && d->d_tag != DT_NULL; d++)
		if (d->d_tag == tag)
			return d;
	return NULL;
}

/* Point *slot at fn; inside RELRO, the page is made writable for the
 * write and read-only again. */
static void set_slot(void **slot, void *fn, const struct object *o)
{
	if (*slot == fn)
		return;
	if ((ElfW(Addr))slot < o->relro_lo || (ElfW(Addr))slot >= o->relro_hi) {
		*slot = fn;
		return;
	}
	long page = sysconf(_SC_PAGESIZE);
	void *p = (void *)((uintptr_t)slot & ~(uintptr_t)(page - 1));
	if (BS_NEG(mprotect(p, (size_t)page, PROT_READ | PROT_WRITE)) != 0)
		return;
	*slot = fn;
	BS_NEG(mprotect(p, (size_t)page, PROT_READ));
}

/* The relocations of table `tag` (of size `sz_tag`) that name an
 * interposed call: their slots pointed at the shim's. */
static void patch_table(const struct object *o, ElfW(Sxword) tag, ElfW(Sxword) sz_tag,
			const ElfW(Sym) *syms, const char *strs)
{
	const ElfW(Dyn) *t = dyn_of(o, tag), *sz = dyn_of(o, sz_tag);
	if (!t || !sz)
		return;
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
		return;
#endif
		const ElfW(Sym) *s = &syms[ELF64_R_SYM(r[i].r_info)];
		void *fn = s->st_shndx == SHN_UNDEF ? own_fn(strs + s->st_name) : NULL;
		if (fn)
			set_slot((void **)(o->base + r[i].r_offset), fn, o);
	}
}

static void patch(const struct object *o)
{
	const ElfW(Dyn) *sym = dyn_of(o, DT_SYMTAB), *str = dyn_of(o, DT_STRTAB);
	const ElfW(Dyn) *pltrel = dyn_of(o, DT_PLTREL);
	if (!sym || !str || (pltrel && pltrel->d_un.d_val != DT_RELA))
		return; /* (the 64-bit ABIs this builds for use RELA) */
	const ElfW(Sym) *syms = (const ElfW(Sym) *)sym->d_un.d_ptr;
	const char *strs = (const char *)str->d_un.d_ptr;
	patch_table(o, DT_JMPREL, DT_PLTRELSZ, syms, strs);
	patch_table(o, DT_RELA, DT_RELASZ, syms, strs);
}

/* The objects loaded before a dlopen (their bases); after it, each one
 * not among them is patched, inside dl_iterate_phdr, which holds the
 * loader's lock: no other thread can unload it meanwhile. */
struct walk {
	ElfW(Addr) before[MAX_OBJECTS];
	unsigned n;
	int patching;
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
	struct object o = object_of(info);
	if (o.dyn)
		patch(&o);
	return 0;
}

static void say_not_covered(const char *file)
{
	if (!bs_log_enabled(BS_LOG_INFO))
		return;
	struct bs_line l;
	bs_line_start(&l);
	bs_line_event(&l, "deepbind");
	bs_line_str(&l, file ? file : "?");
	bs_line_str(&l, ": opened with RTLD_DEEPBIND by name; its connects (and its "
		       "dependencies') bypass the shim");
	bs_line_emit(&l, BS_LOG_INFO);
}

static __attribute__((noinline)) void *open_and_patch(const char *file, int mode)
{
	struct walk w = {.n = 0, .patching = 0};
	dl_iterate_phdr(visit, &w);
	void *h = bs_real_dlopen(file, mode);
	if (h && w.n < MAX_OBJECTS) {
		w.patching = 1;
		dl_iterate_phdr(visit, &w);
	}
	return h;
}

BS_API void *dlopen(const char *file, int mode)
{
	if (!(mode & RTLD_DEEPBIND) || !file)
		return bs_real_dlopen(file, mode);
	if (!strchr(file, '/')) {
		say_not_covered(file);
		return bs_real_dlopen(file, mode);
	}
	return open_and_patch(file, mode);
}
