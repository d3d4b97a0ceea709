/*
 * elfinfo: can a preloaded library act on this program? Decided from the
 * first bytes of its file, which the caller reads (no I/O here).
 *
 * Promise: a pure function over a buffer; never reads past n bytes, so a
 * truncated or hostile file only gives BS_ELF_UNKNOWN.
 */
#ifndef BS_ELFINFO_H
#define BS_ELFINFO_H

#include <stddef.h>

enum bs_elf_kind {
	BS_ELF_UNKNOWN = 0, /* not ELF (a script...), or not readable as one */
	BS_ELF_DYNAMIC,     /* has PT_INTERP: the dynamic loader runs, LD_PRELOAD works */
	BS_ELF_STATIC,      /* no PT_INTERP: nothing is preloaded */
	BS_ELF_GO,          /* a Go program (the Go linker's build-id note in a PT_NOTE
	                       segment): its runtime makes system calls itself */
};

/* What buf (the file's first n bytes; 64 KiB is plenty) says. */
enum bs_elf_kind bs_elf_kind(const unsigned char *buf, size_t n);

#endif
