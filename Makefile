# backoffshim — see README.md. Quick start: `make demo`, `make check`.
CC      ?= cc
BUILD   := build
PREFIX  ?= /usr/local

CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC -fvisibility=hidden \
           -Ishim/common
# shim/common sees only its own headers (its callers pass in what it needs:
# getenv, file reading, reporting); the library's objects also see shim/lib.
LIB_INC :=
# The export map is made from the one list of interposed calls (see
# shim/lib/interposed.def and shim/exports.map.in).
EXPORTS_MAP := $(BUILD)/exports.map
LDFLAGS_SO := -shared -Wl,-soname,libbackoffshim.so -Wl,--version-script=$(EXPORTS_MAP) -Wl,--exclude-libs,ALL \
              -Wl,-z,relro -Wl,-z,now -Wl,-z,defs

LIB_HDRS   := $(wildcard shim/common/*.h shim/lib/*.h) shim/lib/interposed.def
COMMON_SRC := $(wildcard shim/common/*.c)
LIB_SRC    := $(wildcard shim/lib/*.c)
COMMON_OBJ := $(COMMON_SRC:%.c=$(BUILD)/obj/%.o)
LIB_OBJ    := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
SO         := $(BUILD)/libbackoffshim.so
CLI_SRC    := $(wildcard shim/cli/*.c)
# the seccomp engine (shim/sup) runs inside the command: `run --engine seccomp`
SUP_SRC    := $(wildcard shim/sup/*.c)
CLI_OBJ    := $(CLI_SRC:%.c=$(BUILD)/obj/%.o) $(SUP_SRC:%.c=$(BUILD)/obj/%.o)
CLI        := $(BUILD)/backoffshim

UNIT_SRC   := $(wildcard tests/unit/test_*.c)
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
PROG_SRC   := $(wildcard tests/progs/*.c)
PROG_BIN   := $(PROG_SRC:tests/progs/%.c=$(BUILD)/progs/%)
# Other preloads the tests load beside the shim
PRELOAD_SO := $(patsubst tests/preload/%.c,$(BUILD)/preload/%.so,$(wildcard tests/preload/*.c))
BENCH_BIN  := $(BUILD)/bench/connect_bench
# The seccomp engine's cost (issue 23): tests/bench/sup_bench.c, with the
# engine's own filter (shim/common/sfilter.c) for its filter-only setting.
SUP_BENCH_BIN := $(BUILD)/bench/sup_bench
# Programs LD_PRELOAD cannot reach, for the seccomp engine (issue 23): the
# static Go clients of tests/go (one main package a directory) and a static
# C client (tests/static).
GO_DIRS    := $(patsubst tests/go/%/main.go,%,$(wildcard tests/go/*/main.go))
GO_BIN     := $(GO_DIRS:%=$(BUILD)/go/%)
GO_SRC     := tests/go/go.mod $(shell find tests/go -name '*.go' 2>/dev/null)
STATIC_BIN := $(BUILD)/static/cstatic $(BUILD)/static/sclient
MAN_LIBDIR ?= $(PREFIX)/lib
MAN_PAGES  := $(BUILD)/man/backoffshim.1 $(BUILD)/man/backoffshim.ini.5

VALGRIND := valgrind --quiet --error-exitcode=1 --leak-check=full \
            --errors-for-leak-kinds=definite --show-leak-kinds=definite

.PHONY: all man deps test-deps check check-under-load cross-check go-progs unit integration demo bench herd herd500 install uninstall deb clean FORCE
all: $(SO) $(CLI)

# Missing Debian packages are installed on demand (see scripts/install-deps).
deps:
	@scripts/install-deps --check build >/dev/null 2>&1 || scripts/install-deps build
test-deps: deps
	@scripts/install-deps --check test >/dev/null 2>&1 || scripts/install-deps test

$(BUILD)/obj/%.o: %.c $(LIB_HDRS) | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LIB_INC) -c $< -o $@

$(EXPORTS_MAP): shim/exports.map.in shim/lib/interposed.def
	@mkdir -p $(dir $@)
	$(CC) -E -P -undef -x c -Ishim/lib $< -o $@.tmp && mv $@.tmp $@

$(SO): $(COMMON_OBJ) $(LIB_OBJ) $(EXPORTS_MAP) | deps
	$(CC) $(CFLAGS) $(LDFLAGS_SO) -o $@ $(COMMON_OBJ) $(LIB_OBJ) \
	    $(firstword $(wildcard /usr/lib/*/libinih.a /usr/lib/libinih.a))

# The command: the same common objects as the library, linked into a program.
# PREFIX is compiled in (where `run` looks for the library last); the stamp
# file changes only when PREFIX does, so a new PREFIX rebuilds the command.
$(BUILD)/prefix.stamp: FORCE
	@mkdir -p $(BUILD)
	@echo '$(PREFIX) $(MAN_LIBDIR)' | cmp -s - $@ || echo '$(PREFIX) $(MAN_LIBDIR)' > $@

$(BUILD)/obj/shim/cli/%.o: shim/cli/%.c $(wildcard shim/cli/*.h shim/common/*.h) \
		$(BUILD)/prefix.stamp | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ishim/cli -Ishim/sup -DBS_PREFIX='"$(PREFIX)"' -DBS_MULTIARCH='"$(MULTIARCH)"' -c $< -o $@

$(BUILD)/obj/shim/sup/%.o: shim/sup/%.c $(wildcard shim/sup/*.h shim/cli/*.h shim/common/*.h) | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ishim/sup -Ishim/cli -c $< -o $@

$(CLI): $(CLI_OBJ) $(COMMON_OBJ) | deps
	$(CC) $(CFLAGS) -Wl,-z,relro -Wl,-z,now -o $@ $(CLI_OBJ) $(COMMON_OBJ) \
	    $(firstword $(wildcard /usr/lib/*/libinih.a /usr/lib/libinih.a))

# Unit tests read config files through the command's libc reader; the
# command's own modules a test needs are compiled into that test alone
# (elfinfo is the command's, and stays out of the library).
UNIT_EXTRA := shim/cli/readfile.c shim/cli/readfile.h shim/cli/elfinfo.c shim/cli/elfinfo.h \
	shim/sup/scm.c shim/sup/scm.h
UNIT_CLI_SRC = shim/cli/readfile.c
$(BUILD)/tests/test_elfinfo $(BUILD)/asan/tests/test_elfinfo: UNIT_CLI_SRC += shim/cli/elfinfo.c
$(BUILD)/tests/test_sfilter $(BUILD)/asan/tests/test_sfilter: UNIT_CLI_SRC += shim/sup/scm.c

$(BUILD)/tests/%: tests/unit/%.c $(wildcard tests/unit/*.h) $(COMMON_OBJ) $(UNIT_EXTRA) | test-deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -Ishim/cli -Ishim/sup -o $@ $< $(UNIT_CLI_SRC) $(COMMON_OBJ) \
	    $(firstword $(wildcard /usr/lib/*/libinih.a /usr/lib/libinih.a)) -lcmocka -lpthread

$(BUILD)/progs/%: tests/progs/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -o $@ $< -lpthread

$(BUILD)/preload/%.so: tests/preload/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -fPIC -shared -o $@ $< -ldl

# Go: static (CGO_ENABLED=0), offline (GOPROXY=off; the module has no
# dependencies), every cache under build/; the toolchain found is used
# (GOTOOLCHAIN=local for Go 1.21 and later). Without go, go-progs says SKIPPED
# and the tests that need the binaries report SKIP.
GO         ?= go
GO_ENV     := CGO_ENABLED=0 GO111MODULE=on GOFLAGS=-mod=readonly GOPROXY=off GOSUMDB=off \
              GOWORK=off GOENV=off GOTOOLCHAIN=local GOTELEMETRY=off \
              GOCACHE=$(abspath $(BUILD))/go-cache GOPATH=$(abspath $(BUILD))/go-path \
              GOMODCACHE=$(abspath $(BUILD))/go-path/pkg/mod

$(BUILD)/go/%: $(GO_SRC)
	@mkdir -p $(dir $@)
	cd tests/go && $(GO_ENV) $(GO) build -trimpath -buildvcs=false -o $(abspath $@) ./$*

go-progs:
	@if command -v $(GO) >/dev/null 2>&1; then \
	    $(MAKE) --no-print-directory $(GO_BIN); \
	else \
	    echo "go-progs: SKIPPED, no $(GO) (apt-get install golang-go)"; \
	fi

$(BUILD)/static/%: tests/static/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -static -o $@ $< -lpthread

$(BENCH_BIN): tests/bench/connect_bench.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -o $@ $< -lpthread

$(SUP_BENCH_BIN): tests/bench/sup_bench.c shim/common/sfilter.c shim/common/sfilter.h \
		shim/sup/scm.c shim/sup/scm.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Ishim/common -Ishim/sup -o $@ \
	    tests/bench/sup_bench.c shim/common/sfilter.c shim/sup/scm.c -lpthread

check: $(SO) $(CLI) $(MAN_PAGES) $(UNIT_BIN) $(PROG_BIN) $(PRELOAD_SO) $(STATIC_BIN) $(BENCH_BIN) $(SUP_BENCH_BIN) | test-deps
	@$(MAKE) --no-print-directory cross-check
	@$(MAKE) --no-print-directory go-progs
	@scripts/check.sh $(UNIT_BIN)

# make check three times in a row under stress-ng --cpu 2 (RUNS=N for more)
check-under-load:
	@scripts/check-under-load $(RUNS)

# The library compiled (not linked: no aarch64 libinih) for aarch64, whose
# asm-generic system-call table lacks dup2, poll, accept, open...: a raw
# syscall(SYS_x) the architecture has not fails here. Skipped, saying so,
# without Debian's gcc-aarch64-linux-gnu and libc6-dev-arm64-cross
# (scripts/install-deps test installs them).
CROSS_CC   ?= aarch64-linux-gnu-gcc
CROSS_DIR  := $(BUILD)/cross-aarch64
CROSS_OBJ  := $(COMMON_SRC:%.c=$(CROSS_DIR)/obj/%.o) $(LIB_SRC:%.c=$(CROSS_DIR)/obj/%.o)

.PHONY: cross-build
cross-check: | deps
	@if echo '#include <stdio.h>' | $(CROSS_CC) -E -x c - >/dev/null 2>&1; then \
	    $(MAKE) --no-print-directory cross-build && \
	    echo "cross-check: the library compiles for aarch64"; \
	else \
	    echo "cross-check: SKIPPED, no $(CROSS_CC) with its C library" \
	         "(apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross)"; \
	fi

cross-build: $(CROSS_OBJ)

# ini.h is the only header the cross compiler does not have (/usr/include
# itself holds the host's glibc headers, so it is not on the path).
$(CROSS_DIR)/inc/ini.h: | deps
	@mkdir -p $(dir $@)
	cp /usr/include/ini.h $@

$(CROSS_DIR)/obj/%.o: %.c $(LIB_HDRS) $(CROSS_DIR)/inc/ini.h
	@mkdir -p $(dir $@)
	$(CROSS_CC) -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -fPIC \
	    -fvisibility=hidden -Ishim/common $(LIB_INC) -I$(CROSS_DIR)/inc -c $< -o $@

unit: $(UNIT_BIN)
	@for t in $(UNIT_BIN); do $(VALGRIND) $$t || exit 1; done

integration: $(SO) $(CLI) $(PROG_BIN) $(PRELOAD_SO) $(STATIC_BIN) | test-deps
	@$(MAKE) --no-print-directory go-progs
	@python3 tests/integration/run.py

demo: $(SO) $(BUILD)/progs/legacy_client
	@scripts/install-deps --check demo >/dev/null 2>&1 || scripts/install-deps demo
	@scripts/demo.sh

# Wall-time ratios, then what they cannot show: instructions (callgrind)
# and system calls (strace -c) added per operation (tests/bench/counts.py).
# Then the seccomp engine's cost (issue 23, docs/performance.md), in a
# network namespace of its own with lo up (outside one, this host intercepts
# outgoing TCP): it prints its ratios and at most warns, never fails.
bench: $(SO) $(CLI) $(BENCH_BIN) $(SUP_BENCH_BIN)
	@$(BENCH_BIN) $(SO)
	@python3 tests/bench/counts.py $(BENCH_BIN) $(SO)
	@unshare --user --map-current-user --keep-caps --net \
	    sh -c 'ip link set lo up && exec $(SUP_BENCH_BIN) $(CLI)' || \
	    echo "seccomp engine cost: not measured (no network namespace here, or see above)"

# The herd experiment (issue 10): 100 clients, three cases, build/herd.png.
herd: $(SO) $(BUILD)/progs/herdclient
	@scripts/install-deps --check herd >/dev/null 2>&1 || scripts/install-deps herd
	@python3 tests/herd/herd.py

# Issue 20: 500 processes (HERD_N=...), blocking and parked, one shared table: SYNs per step, CPU per process; build/herd500.txt.
herd500: $(SO) $(BUILD)/progs/herdclient $(BUILD)/progs/herdnb
	@python3 tests/herd/herd500.py

# Every file `make install` writes, so that `make uninstall` removes exactly
# those: the command, the library, the example config, the man pages, the
# bash, zsh and fish completions, and the list of the directories install
# created (INSTALL_DIRS_LIST), the only ones uninstall removes (if empty).
MULTIARCH ?= $(shell $(CC) -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)

INSTALL_DIRS := $(PREFIX)/bin $(PREFIX)/lib $(PREFIX)/share/backoffshim \
	$(PREFIX)/share/man/man1 $(PREFIX)/share/man/man5 \
	$(PREFIX)/share/bash-completion/completions $(PREFIX)/share/zsh/site-functions \
	$(PREFIX)/share/fish/vendor_completions.d
INSTALL_DIRS_LIST := $(PREFIX)/share/backoffshim/installed-dirs
INSTALLED := $(PREFIX)/bin/backoffshim $(PREFIX)/lib/libbackoffshim.so \
	$(PREFIX)/share/backoffshim/backoffshim.ini $(PREFIX)/share/man/man1/backoffshim.1 \
	$(PREFIX)/share/man/man5/backoffshim.ini.5 \
	$(PREFIX)/share/bash-completion/completions/backoffshim \
	$(PREFIX)/share/zsh/site-functions/_backoffshim \
	$(PREFIX)/share/fish/vendor_completions.d/backoffshim.fish $(INSTALL_DIRS_LIST)

# The man pages name the version and where this install puts the library
# (MAN_LIBDIR, MAN_PAGES: defined at the top).
$(BUILD)/man/%: man/% shim/common/version.h $(BUILD)/prefix.stamp
	@mkdir -p $(dir $@)
	@sed -e "s|@VERSION@|$$(sed -n 's/^#define BS_VERSION "\(.*\)"/\1/p' shim/common/version.h)|" \
	    -e 's|@LIBDIR@|$(MAN_LIBDIR)|g' $< > $@.tmp && mv $@.tmp $@
man: $(MAN_PAGES)

# The directories missing before (each level, without DESTDIR) are added
# to those an earlier install recorded.
install: $(SO) $(CLI) $(MAN_PAGES)
	@new=$$(for d in $(addprefix $(DESTDIR),$(INSTALL_DIRS)); do \
	    while [ ! -d "$$d" ]; do echo "$${d#$(DESTDIR)}"; d=$$(dirname "$$d"); done; \
	done); \
	install -d $(addprefix $(DESTDIR),$(INSTALL_DIRS)) && \
	{ cat $(DESTDIR)$(INSTALL_DIRS_LIST) 2>/dev/null; [ -z "$$new" ] || echo "$$new"; } | \
	    LC_ALL=C sort -u > $(DESTDIR)$(INSTALL_DIRS_LIST).tmp && \
	mv $(DESTDIR)$(INSTALL_DIRS_LIST).tmp $(DESTDIR)$(INSTALL_DIRS_LIST)
	install -m 0755 $(CLI) $(DESTDIR)$(PREFIX)/bin/backoffshim
	install -m 0644 $(SO) $(DESTDIR)$(PREFIX)/lib/libbackoffshim.so
	install -m 0644 config/backoffshim.ini $(DESTDIR)$(PREFIX)/share/backoffshim/backoffshim.ini
	install -m 0644 $(BUILD)/man/backoffshim.1 $(DESTDIR)$(PREFIX)/share/man/man1/backoffshim.1
	install -m 0644 $(BUILD)/man/backoffshim.ini.5 $(DESTDIR)$(PREFIX)/share/man/man5/backoffshim.ini.5
	install -m 0644 completions/backoffshim \
	    $(DESTDIR)$(PREFIX)/share/bash-completion/completions/backoffshim
	install -m 0644 completions/_backoffshim $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_backoffshim
	install -m 0644 completions/backoffshim.fish \
	    $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/backoffshim.fish

# The files, then the directories install recorded (PREFIX and below),
# deepest first, each only if empty: one that existed before is not listed.
uninstall:
	@dirs=$$(cat $(DESTDIR)$(INSTALL_DIRS_LIST) 2>/dev/null || echo $(PREFIX)/share/backoffshim); \
	rm -f $(addprefix $(DESTDIR),$(INSTALLED)) && \
	for d in $$(echo "$$dirs" | LC_ALL=C sort -r); do \
	    case $$d in $(PREFIX)|$(PREFIX)/*) rmdir "$(DESTDIR)$$d" 2>/dev/null || :;; esac; \
	done

# make deb: a Debian package under build/ (scripts/mkdeb.sh), built from a
# tree of its own compiled for PREFIX=/usr.
deb:
	@$(MAKE) -s --no-print-directory BUILD=$(BUILD)/deb-build PREFIX=/usr \
	    MAN_LIBDIR=/usr/lib/$(MULTIARCH)/backoffshim $(BUILD)/deb-build/libbackoffshim.so \
	    $(BUILD)/deb-build/backoffshim $(BUILD)/deb-build/man/backoffshim.1 \
	    $(BUILD)/deb-build/man/backoffshim.ini.5
	@scripts/mkdeb.sh $(BUILD)/deb-build $(BUILD) $(MULTIARCH)

clean:
	rm -rf $(BUILD)

# --- Sanitizers and fuzzing (clang-14; see README "Tests") -------------------
# make sanitize: unit tests under ASan+UBSan, the threaded ones under TSan, and
# an ASan+UBSan build of the library preloaded into part of the integration
# suite. make fuzz: libFuzzer targets for the configuration parsers.
CLANG        ?= clang-14
SAN_CFLAGS   := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC -O1 -g \
                -fno-omit-frame-pointer -Ishim/common
ASAN_FLAGS   := -fsanitize=address,undefined -fno-sanitize-recover=all
TSAN_FLAGS   := -fsanitize=thread
ASAN_DIR     := $(BUILD)/asan
TSAN_DIR     := $(BUILD)/tsan
FUZZ_DIR     := $(BUILD)/fuzz
SAN_HDRS     := $(LIB_HDRS)
# looked up when a recipe runs, i.e. after `deps` may have installed it
SAN_INIH      = $(firstword $(wildcard /usr/lib/*/libinih.a /usr/lib/libinih.a))

ASAN_COMMON_OBJ := $(COMMON_SRC:%.c=$(ASAN_DIR)/obj/%.o)
ASAN_LIB_OBJ    := $(LIB_SRC:%.c=$(ASAN_DIR)/obj/%.o)
ASAN_UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(ASAN_DIR)/tests/%)
ASAN_SO         := $(ASAN_DIR)/libbackoffshim.so
TSAN_COMMON_OBJ := $(COMMON_SRC:%.c=$(TSAN_DIR)/obj/%.o)
# every unit test that starts threads
TSAN_UNIT_SRC   := $(shell grep -l pthread_create $(UNIT_SRC) 2>/dev/null)
TSAN_UNIT_BIN   := $(TSAN_UNIT_SRC:tests/unit/%.c=$(TSAN_DIR)/tests/%)

FUZZ_SRC        := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN        := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_DIR)/bin/%)
FUZZ_COMMON_OBJ := $(COMMON_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
FUZZ_SECONDS    ?= 30

.PHONY: san-deps fuzz-deps sanitize sanitize-build fuzz fuzz-build
san-deps: deps
	@scripts/install-deps --check sanitize >/dev/null 2>&1 || scripts/install-deps sanitize
fuzz-deps: deps
	@scripts/install-deps --check fuzz >/dev/null 2>&1 || scripts/install-deps fuzz

$(ASAN_DIR)/obj/%.o: %.c $(SAN_HDRS) | san-deps
	@mkdir -p $(dir $@)
	$(CLANG) $(SAN_CFLAGS) $(LIB_INC) $(ASAN_FLAGS) -c $< -o $@

$(TSAN_DIR)/obj/%.o: %.c $(SAN_HDRS) | san-deps
	@mkdir -p $(dir $@)
	$(CLANG) $(SAN_CFLAGS) $(LIB_INC) $(TSAN_FLAGS) -c $< -o $@

# Coverage instrumentation for libFuzzer, plus ASan and UBSan.
$(FUZZ_DIR)/obj/%.o: %.c $(SAN_HDRS) | fuzz-deps
	@mkdir -p $(dir $@)
	$(CLANG) $(SAN_CFLAGS) $(LIB_INC) -fsanitize=fuzzer-no-link,address,undefined \
	    -fno-sanitize-recover=all -c $< -o $@

$(ASAN_DIR)/tests/%: tests/unit/%.c $(wildcard tests/unit/*.h) $(ASAN_COMMON_OBJ) $(UNIT_EXTRA) \
		| san-deps test-deps
	@mkdir -p $(dir $@)
	$(CLANG) $(SAN_CFLAGS) $(ASAN_FLAGS) -Itests/unit -Ishim/cli -Ishim/sup -o $@ $< $(UNIT_CLI_SRC) \
	    $(ASAN_COMMON_OBJ) \
	    $(SAN_INIH) -lcmocka -lpthread

$(TSAN_DIR)/tests/%: tests/unit/%.c $(wildcard tests/unit/*.h) $(TSAN_COMMON_OBJ) \
		tests/fuzz/cmocka_skip.c $(UNIT_EXTRA) | san-deps test-deps
	@mkdir -p $(dir $@)
	$(CLANG) $(SAN_CFLAGS) $(TSAN_FLAGS) -Itests/unit -Ishim/cli -Ishim/sup -o $@ $< tests/fuzz/cmocka_skip.c \
	    $(UNIT_CLI_SRC) \
	    $(TSAN_COMMON_OBJ) \
	    $(SAN_INIH) -lcmocka -lpthread

# The preloadable library with the shared ASan runtime (which then has to be
# preloaded ahead of it: scripts/sanitize.sh).
$(ASAN_SO): $(ASAN_COMMON_OBJ) $(ASAN_LIB_OBJ) $(EXPORTS_MAP) | san-deps
	$(CLANG) $(SAN_CFLAGS) $(ASAN_FLAGS) -shared-libasan $(LDFLAGS_SO) -o $@ \
	    $(ASAN_COMMON_OBJ) $(ASAN_LIB_OBJ) $(SAN_INIH)

$(FUZZ_DIR)/bin/%: tests/fuzz/%.c tests/fuzz/fuzz.h $(SAN_HDRS) $(FUZZ_COMMON_OBJ) | fuzz-deps
	@mkdir -p $(dir $@)
	$(CLANG) $(SAN_CFLAGS) -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	    -Itests/fuzz -o $@ $< $(FUZZ_COMMON_OBJ) $(SAN_INIH)

$(BUILD)/obj/shim/lib/%.o $(CROSS_DIR)/obj/shim/lib/%.o $(ASAN_DIR)/obj/shim/lib/%.o \
$(TSAN_DIR)/obj/shim/lib/%.o $(FUZZ_DIR)/obj/shim/lib/%.o: LIB_INC := -Ishim/lib

.SECONDARY: $(ASAN_COMMON_OBJ) $(TSAN_COMMON_OBJ) $(FUZZ_COMMON_OBJ)

sanitize-build: $(ASAN_UNIT_BIN) $(TSAN_UNIT_BIN) $(ASAN_SO) $(CLI) $(PROG_BIN) $(PRELOAD_SO)

sanitize: sanitize-build | test-deps
	@CLANG=$(CLANG) scripts/sanitize.sh $(ASAN_DIR) $(TSAN_DIR) $(ASAN_SO) \
	    $(ASAN_UNIT_BIN) -- $(TSAN_UNIT_BIN)

fuzz-build: $(FUZZ_BIN)

fuzz: fuzz-build
	@scripts/sanitize.sh --fuzz $(FUZZ_DIR) $(FUZZ_SECONDS) $(FUZZ_BIN)
