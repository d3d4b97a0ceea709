/* elfinfo: see elfinfo.h. */
#include "elfinfo.h"

#include <elf.h>
#include <string.h>

static int has_go_build_id(const unsigned char *buf, size_t n)
{
	static const char mark[] = "Go build ID: \"";
	size_t m = sizeof mark - 1;
	for (size_t i = 0; i + m <= n; i++)
		if (buf[i] == 'G' && !memcmp(buf + i, mark, m))
			return 1;
	return 0;
}

/* Does the 64-bit ELF image in buf have a PT_INTERP program header?
 * -1 if the headers are not within buf. */
static int has_interp64(const unsigned char *buf, size_t n)
{
	Elf64_Ehdr eh;
	if (n < sizeof eh)
		return -1;
	memcpy(&eh, buf, sizeof eh);
	if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > n ||
	    (size_t)eh.e_phnum * sizeof(Elf64_Phdr) > n - eh.e_phoff)
		return -1;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		memcpy(&ph, buf + eh.e_phoff + i * sizeof ph, sizeof ph);
		if (ph.p_type == PT_INTERP)
			return 1;
	}
	return 0;
}

static int has_interp32(const unsigned char *buf, size_t n)
{
	Elf32_Ehdr eh;
	if (n < sizeof eh)
		return -1;
	memcpy(&eh, buf, sizeof eh);
	if (eh.e_phentsize != sizeof(Elf32_Phdr) || eh.e_phoff > n ||
	    (size_t)eh.e_phnum * sizeof(Elf32_Phdr) > n - eh.e_phoff)
		return -1;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf32_Phdr ph;
		memcpy(&ph, buf + eh.e_phoff + i * sizeof ph, sizeof ph);
		if (ph.p_type == PT_INTERP)
			return 1;
	}
	return 0;
}

enum bs_elf_kind bs_elf_kind(const unsigned char *buf, size_t n)
{
	if (n < EI_NIDENT || memcmp(buf, ELFMAG, SELFMAG))
		return BS_ELF_UNKNOWN;
	int interp = buf[EI_CLASS] == ELFCLASS64   ? has_interp64(buf, n)
		     : buf[EI_CLASS] == ELFCLASS32 ? has_interp32(buf, n)
						   : -1;
	if (interp < 0)
		return BS_ELF_UNKNOWN;
	if (has_go_build_id(buf, n))
		return BS_ELF_GO;
	return interp ? BS_ELF_DYNAMIC : BS_ELF_STATIC;
}
