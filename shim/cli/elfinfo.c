/* elfinfo: see elfinfo.h. */
#include "elfinfo.h"

#include <elf.h>
#include <stdint.h>
#include <string.h>

/* The program headers of either ELF class, read field by field. */
struct phdrs {
	const unsigned char *buf;
	size_t n;
	int is64;
	uint64_t off;
	unsigned count, size;
};

struct seg {
	uint32_t type;
	uint64_t offset, filesz;
};

/* The ELF header of type T in buf: where its program headers are. */
#define READ_EHDR(T, ph, buf, n)                                                     \
	do {                                                                         \
		T eh_;                                                               \
		if ((n) < sizeof eh_)                                                \
			return -1;                                                   \
		memcpy(&eh_, (buf), sizeof eh_);                                     \
		(ph)->off = eh_.e_phoff, (ph)->count = eh_.e_phnum;                  \
		(ph)->size = eh_.e_phentsize;                                        \
	} while (0)

/* 0 if the program headers lie within the buffer. */
static int open_phdrs(struct phdrs *ph, const unsigned char *buf, size_t n)
{
	ph->buf = buf;
	ph->n = n;
	ph->is64 = buf[EI_CLASS] == ELFCLASS64;
	if (ph->is64)
		READ_EHDR(Elf64_Ehdr, ph, buf, n);
	else if (buf[EI_CLASS] == ELFCLASS32)
		READ_EHDR(Elf32_Ehdr, ph, buf, n);
	else
		return -1;
	if (ph->size != (ph->is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)))
		return -1;
	if (ph->off > n || (uint64_t)ph->count * ph->size > n - ph->off)
		return -1;
	return 0;
}

static struct seg segment(const struct phdrs *ph, unsigned i)
{
	const unsigned char *at = ph->buf + ph->off + (size_t)i * ph->size;
	if (ph->is64) {
		Elf64_Phdr p;
		memcpy(&p, at, sizeof p);
		return (struct seg){p.p_type, p.p_offset, p.p_filesz};
	}
	Elf32_Phdr p;
	memcpy(&p, at, sizeof p);
	return (struct seg){p.p_type, p.p_offset, p.p_filesz};
}

#define NT_GO_BUILDID 4 /* the Go linker's build-id note (cmd/link) */

static uint32_t align4(uint32_t v)
{
	return (v + 3u) & ~3u;
}

/* Does a PT_NOTE segment, as far as it lies within the buffer, hold the Go
 * linker's build-id note? Every Go program has one, stripped or not. */
static int has_go_note(const struct phdrs *ph, struct seg s)
{
	if (s.offset > ph->n)
		return 0;
	uint64_t end = s.filesz > ph->n - s.offset ? ph->n : s.offset + s.filesz;
	for (uint64_t at = s.offset; end - at >= sizeof(Elf64_Nhdr);) {
		Elf64_Nhdr nh; /* the same three words in both classes */
		memcpy(&nh, ph->buf + at, sizeof nh);
		uint64_t name = at + sizeof nh;
		uint64_t next = name + (uint64_t)align4(nh.n_namesz) + align4(nh.n_descsz);
		if (nh.n_namesz > 0xffff || nh.n_descsz > 0xffffff || next > end)
			return 0;
		/* named "Go": the Go linker counts its padding (size 4), other tools do not (3) */
		if (nh.n_type == NT_GO_BUILDID && (nh.n_namesz == 3 || nh.n_namesz == 4) &&
		    !memcmp(ph->buf + name, "Go\0", nh.n_namesz))
			return 1;
		at = next;
	}
	return 0;
}

enum bs_elf_kind bs_elf_kind(const unsigned char *buf, size_t n)
{
	struct phdrs ph;
	if (n < EI_NIDENT || memcmp(buf, ELFMAG, SELFMAG) || open_phdrs(&ph, buf, n))
		return BS_ELF_UNKNOWN;
	int interp = 0, go = 0;
	for (unsigned i = 0; i < ph.count; i++) {
		struct seg s = segment(&ph, i);
		interp |= s.type == PT_INTERP;
		go |= s.type == PT_NOTE && has_go_note(&ph, s);
	}
	if (go)
		return BS_ELF_GO;
	return interp ? BS_ELF_DYNAMIC : BS_ELF_STATIC;
}
