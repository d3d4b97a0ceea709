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

static void test_dynamic_static_go(void **state)
{
	(void)state;
	unsigned dyn[] = {PT_PHDR, PT_INTERP, PT_LOAD}, stat[] = {PT_LOAD, PT_NOTE};
	size_t n = make64(dyn, 3);
	assert_int_equal(bs_elf_kind(img, n), BS_ELF_DYNAMIC);
	n = make64(stat, 2);
	assert_int_equal(bs_elf_kind(img, n), BS_ELF_STATIC);
	static const char go[] = "\xff Go build ID: \"abc/def\"";
	memcpy(img + 1000, go, sizeof go - 1);
	assert_int_equal(bs_elf_kind(img, sizeof img), BS_ELF_GO);
	make64(dyn, 3); /* a dynamically linked Go program (cgo) is still Go */
	memcpy(img + 1000, go, sizeof go - 1);
	assert_int_equal(bs_elf_kind(img, sizeof img), BS_ELF_GO);
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
		cmocka_unit_test(test_malformed_is_unknown),
	};
	return cmocka_run_group_tests_name("elfinfo", tests, NULL, NULL);
}
