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

/* The objects loaded now (their link maps), into out; how many. */
static unsigned loaded(struct link_map **out)
{
	unsigned n = 0;
	for (struct link_map *m = _r_debug.r_map; m && n < MAX_OBJECTS; m = m->l_next)
		out[n++] = m;
	return n;
}

/* An object's RELRO range (read-only once relocated), from its program
 * headers. */
struct relro {
	ElfW(Addr) base, lo, hi;
};

static int find_relro(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct relro *r = ctx;
	(void)size;
	if (info->dlpi_addr != r->base)
		return 0;
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO) {
			r->lo = r->base + info->dlpi_phdr[i].p_vaddr;
			r->hi = r->lo + info->dlpi_phdr[i].p_memsz;
		}
	return 1;
}

static const ElfW(Dyn) *dyn_of(const struct link_map *m, ElfW(Sxword) tag)
{
	for (const ElfW(Dyn) *d = m->l_ld; d && d->d_tag != DT_NULL; d++)
		if (d->d_tag == tag)
			return d;
	return NULL;
}

/* Point *slot at fn; inside RELRO, the page is made writable for the
 * write and read-only again. */
static void set_slot(void **slot, void *fn, const struct relro *ro)
{
	if (*slot == fn)
		return;
	if ((ElfW(Addr))slot < ro->lo || (ElfW(Addr))slot >= ro->hi) {
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

/* The relocations of table `tag` (of size `sz_tag`) of object m that name an
 * interposed call: their slots pointed at the shim's. */
static void patch_table(const struct link_map *m, ElfW(Sxword) tag, ElfW(Sxword) sz_tag,
			const ElfW(Sym) *syms, const char *strs, const struct relro *ro)
{
	const ElfW(Dyn) *t = dyn_of(m, tag), *sz = dyn_of(m, sz_tag);
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
			set_slot((void **)(m->l_addr + r[i].r_offset), fn, ro);
	}
}

static void patch(const struct link_map *m)
{
	const ElfW(Dyn) *sym = dyn_of(m, DT_SYMTAB), *str = dyn_of(m, DT_STRTAB);
	const ElfW(Dyn) *pltrel = dyn_of(m, DT_PLTREL);
	if (!sym || !str || (pltrel && pltrel->d_un.d_val != DT_RELA))
		return; /* (the 64-bit ABIs this builds for use RELA) */
	const ElfW(Sym) *syms = (const ElfW(Sym) *)sym->d_un.d_ptr;
	const char *strs = (const char *)str->d_un.d_ptr;
	struct relro ro = {m->l_addr, 0, 0};
	dl_iterate_phdr(find_relro, &ro);
	patch_table(m, DT_JMPREL, DT_PLTRELSZ, syms, strs, &ro);
	patch_table(m, DT_RELA, DT_RELASZ, syms, strs, &ro);
}

static int among(struct link_map *m, struct link_map *const *set, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (set[i] == m)
			return 1;
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
	struct link_map *before[MAX_OBJECTS], *after[MAX_OBJECTS];
	unsigned nb = loaded(before);
	void *h = bs_real_dlopen(file, mode);
	if (!h)
		return NULL;
	unsigned na = loaded(after);
	for (unsigned i = 0; i < na; i++)
		if (!among(after[i], before, nb))
			patch(after[i]);
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
