/* Unit tests for elfinfo: dynamic, static and Go programs told apart from
 * their first bytes; anything malformed is unknown. */
#include "unit.h"

#include <elf.h>
#include <string.h>

#include "elfinfo.h"

static unsigned char img[4096];

/* A 64-bit ELF header with nph program headers of the given types. */
static size_t make64(const unsigned *types, unsigned nph)
{
	memset(img, 0, sizeof img);
	Elf64_Ehdr eh = {0};
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_phoff = sizeof eh;
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = (Elf64_Half)nph;
	memcpy(img, &eh, sizeof eh);
	for (unsigned i = 0; i < nph; i++) {
		Elf64_Phdr ph = {0};
		ph.p_type = types[i];
		memcpy(img + sizeof eh + i * sizeof ph, &ph, sizeof ph);
	}
	return sizeof eh + nph * sizeof(Elf64_Phdr);
}

/* A note at off in img: its name (with the NUL, or padded to 4 as the Go
 * linker writes it) and type, 8 bytes of description; returns its size. */
static size_t put_note_sized(size_t off, const char *name, unsigned namesz, unsigned type)
{
	Elf64_Nhdr nh = {namesz, 8, type};
	memcpy(img + off, &nh, sizeof nh);
	memset(img + off + sizeof nh, 0, (namesz + 3u) & ~3u);
	memcpy(img + off + sizeof nh, name, strlen(name));
	return sizeof nh + ((nh.n_namesz + 3u) & ~3u) + 8;
}

static size_t put_note(size_t off, const char *name, unsigned type)
{
	return put_note_sized(off, name, (unsigned)strlen(name) + 1, type);
}

/* Program header i becomes a PT_NOTE over [off, off + size). */
static void note_segment64(unsigned i, size_t off, size_t size)
{
	Elf64_Phdr ph = {0};
	ph.p_type = PT_NOTE;
	ph.p_offset = off;
	ph.p_filesz = size;
	memcpy(img + sizeof(Elf64_Ehdr) + i * sizeof ph, &ph, sizeof ph);
}

static void test_dynamic_static_go(void **state)
{
	(void)state;
	unsigned dyn[] = {PT_PHDR, PT_INTERP, PT_LOAD, PT_NOTE}, stat[] = {PT_LOAD, PT_NOTE};
	size_t n = make64(dyn, 3);
	assert_int_equal(bs_elf_kind(img, n), BS_ELF_DYNAMIC);
	n = make64(stat, 2);
	assert_int_equal(bs_elf_kind(img, n), BS_ELF_STATIC);
	/* a Go program: the GNU build id, then the Go linker's note */
	size_t size = put_note(1000, "GNU", NT_GNU_BUILD_ID);
	size += put_note_sized(1000 + size, "Go", 4, 4);
	note_segment64(1, 1000, size);
	assert_int_equal(bs_elf_kind(img, sizeof img), BS_ELF_GO);
	assert_int_equal(bs_elf_kind(img, 1000 + size - 1), BS_ELF_STATIC); /* note cut */
	make64(dyn, 4); /* a dynamically linked Go program (cgo) is still Go */
	size = put_note(2000, "Go", 4);
	note_segment64(3, 2000, size);
	assert_int_equal(bs_elf_kind(img, sizeof img), BS_ELF_GO);
}

static void test_go_is_told_by_its_note_alone(void **state)
{
	(void)state;
	unsigned dyn[] = {PT_INTERP, PT_NOTE};
	make64(dyn, 2);
	/* the text a Go program prints is no proof: a C string can hold it */
	static const char text[] = "\xff Go build ID: \"abc/def\"";
	memcpy(img + 1000, text, sizeof text - 1);
	note_segment64(1, 2000, put_note(2000, "GNU", NT_GNU_BUILD_ID));
	assert_int_equal(bs_elf_kind(img, sizeof img), BS_ELF_DYNAMIC);
	/* a note named Go with another type, and one named "Gopher" */
	size_t size = put_note(2000, "Go", 1);
	size += put_note(2000 + size, "Gopher", 4);
	note_segment64(1, 2000, size);
	assert_int_equal(bs_elf_kind(img, sizeof img), BS_ELF_DYNAMIC);
	/* a note whose sizes run past its segment ends the walk */
	Elf64_Nhdr huge = {3, 0x7fffffff, 4};
	memcpy(img + 2000, &huge, sizeof huge);
	assert_int_equal(bs_elf_kind(img, sizeof img), BS_ELF_DYNAMIC);
	note_segment64(1, sizeof img + 10, 100); /* a segment past the buffer */
	assert_int_equal(bs_elf_kind(img, sizeof img), BS_ELF_DYNAMIC);
}

static void test_32_bit(void **state)
{
	(void)state;
	memset(img, 0, sizeof img);
	Elf32_Ehdr eh = {0};
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS32;
	eh.e_phoff = sizeof eh;
	eh.e_phentsize = sizeof(Elf32_Phdr);
	eh.e_phnum = 2;
	memcpy(img, &eh, sizeof eh);
	Elf32_Phdr ph[2] = {{.p_type = PT_INTERP}, {.p_type = PT_LOAD}};
	memcpy(img + sizeof eh, ph, sizeof ph);
	assert_int_equal(bs_elf_kind(img, sizeof img), BS_ELF_DYNAMIC);
	ph[0] = (Elf32_Phdr){.p_type = PT_NOTE, .p_offset = 500};
	ph[0].p_filesz = (Elf32_Word)put_note(500, "Go", 4);
	memcpy(img + sizeof eh, ph, sizeof ph);
	assert_int_equal(bs_elf_kind(img, sizeof img), BS_ELF_GO);
	ph[0].p_type = PT_LOAD;
	memcpy(img + sizeof eh, ph, sizeof ph);
	assert_int_equal(bs_elf_kind(img, sizeof img), BS_ELF_STATIC);
}

static void test_malformed_is_unknown(void **state)
{
	(void)state;
	assert_int_equal(bs_elf_kind((const unsigned char *)"#!/bin/sh\n", 10), BS_ELF_UNKNOWN);
	assert_int_equal(bs_elf_kind(img, 0), BS_ELF_UNKNOWN);
	unsigned dyn[] = {PT_INTERP};
	size_t n = make64(dyn, 1);
	assert_int_equal(bs_elf_kind(img, n - 1), BS_ELF_UNKNOWN); /* headers cut */
	assert_int_equal(bs_elf_kind(img, 20), BS_ELF_UNKNOWN);
	Elf64_Ehdr eh;
	memcpy(&eh, img, sizeof eh);
	eh.e_phoff = ~0ull; /* points past the buffer */
	memcpy(img, &eh, sizeof eh);
	assert_int_equal(bs_elf_kind(img, sizeof img), BS_ELF_UNKNOWN);
	eh.e_phoff = sizeof eh;
	eh.e_phnum = 0xffff; /* more headers than the buffer holds */
	memcpy(img, &eh, sizeof eh);
	assert_int_equal(bs_elf_kind(img, sizeof img), BS_ELF_UNKNOWN);
	img[EI_CLASS] = 7;
	assert_int_equal(bs_elf_kind(img, sizeof img), BS_ELF_UNKNOWN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dynamic_static_go),
		cmocka_unit_test(test_go_is_told_by_its_note_alone),
		cmocka_unit_test(test_32_bit),
		cmocka_unit_test(test_malformed_is_unknown),
	};
	return cmocka_run_group_tests_name("elfinfo", tests, NULL, NULL);
}
