# backoffshim — see README.md. Quick start: `make demo`, `make check`.
CC      ?= cc
BUILD   := build
PREFIX  ?= /usr/local
INIH_A  ?= $(firstword $(wildcard /usr/lib/*/libinih.a /usr/lib/libinih.a))

CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC -fvisibility=hidden \
           -Ishim/common -Ishim/lib
LDFLAGS_SO := -shared -Wl,--version-script=shim/exports.map -Wl,--exclude-libs,ALL \
              -Wl,-z,relro -Wl,-z,now -Wl,-z,defs

COMMON_SRC := $(wildcard shim/common/*.c)
LIB_SRC    := $(wildcard shim/lib/*.c)
COMMON_OBJ := $(COMMON_SRC:%.c=$(BUILD)/obj/%.o)
LIB_OBJ    := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
SO         := $(BUILD)/libbackoffshim.so
CLI_SRC    := $(wildcard shim/cli/*.c)
CLI_OBJ    := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
CLI        := $(BUILD)/backoffshim

UNIT_SRC   := $(wildcard tests/unit/test_*.c)
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
PROG_SRC   := $(wildcard tests/progs/*.c)
PROG_BIN   := $(PROG_SRC:tests/progs/%.c=$(BUILD)/progs/%)
BENCH_BIN  := $(BUILD)/bench/connect_bench

VALGRIND := valgrind --quiet --error-exitcode=1 --leak-check=full \
            --errors-for-leak-kinds=definite --show-leak-kinds=definite

.PHONY: all deps test-deps check unit integration demo bench install clean FORCE
all: $(SO) $(CLI)

# Missing Debian packages are installed on demand (see scripts/install-deps).
deps:
	@test -f /usr/include/ini.h -a -n "$(INIH_A)" || scripts/install-deps build
test-deps: deps
	@scripts/install-deps --check test >/dev/null 2>&1 || scripts/install-deps test

$(BUILD)/obj/%.o: %.c $(wildcard shim/common/*.h shim/lib/*.h) | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(SO): $(COMMON_OBJ) $(LIB_OBJ) shim/exports.map | deps
	$(CC) $(CFLAGS) $(LDFLAGS_SO) -o $@ $(COMMON_OBJ) $(LIB_OBJ) \
	    $(firstword $(wildcard /usr/lib/*/libinih.a /usr/lib/libinih.a))

# The command: the same common objects as the library, linked into a program.
# PREFIX is compiled in (where `run` looks for the library last); the stamp
# file changes only when PREFIX does, so a new PREFIX rebuilds the command.
$(BUILD)/prefix.stamp: FORCE
	@mkdir -p $(BUILD)
	@echo '$(PREFIX)' | cmp -s - $@ || echo '$(PREFIX)' > $@

$(BUILD)/obj/shim/cli/%.o: shim/cli/%.c $(wildcard shim/cli/*.h shim/common/*.h) \
		$(BUILD)/prefix.stamp | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ishim/cli -DBS_PREFIX='"$(PREFIX)"' -c $< -o $@

$(CLI): $(CLI_OBJ) $(COMMON_OBJ) | deps
	$(CC) $(CFLAGS) -Wl,-z,relro -Wl,-z,now -o $@ $(CLI_OBJ) $(COMMON_OBJ) \
	    $(firstword $(wildcard /usr/lib/*/libinih.a /usr/lib/libinih.a))

$(BUILD)/tests/%: tests/unit/%.c $(wildcard tests/unit/*.h) $(COMMON_OBJ) | test-deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(COMMON_OBJ) \
	    $(firstword $(wildcard /usr/lib/*/libinih.a /usr/lib/libinih.a)) -lcmocka -lpthread

$(BUILD)/progs/%: tests/progs/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -o $@ $< -lpthread

$(BENCH_BIN): tests/bench/connect_bench.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -o $@ $< -lpthread

check: $(SO) $(CLI) $(UNIT_BIN) $(PROG_BIN) | test-deps
	@scripts/check.sh $(UNIT_BIN)

unit: $(UNIT_BIN)
	@for t in $(UNIT_BIN); do $(VALGRIND) $$t || exit 1; done

integration: $(SO) $(CLI) $(PROG_BIN) | test-deps
	@python3 tests/integration/run.py

demo: $(SO) $(BUILD)/progs/legacy_client
	@scripts/demo.sh

bench: $(SO) $(BENCH_BIN)
	@$(BENCH_BIN) $(SO)

install: $(SO) $(CLI)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/share/backoffshim
	install -m 0755 $(CLI) $(DESTDIR)$(PREFIX)/bin/backoffshim
	install -m 0644 $(SO) $(DESTDIR)$(PREFIX)/lib/libbackoffshim.so
	install -m 0644 config/backoffshim.ini $(DESTDIR)$(PREFIX)/share/backoffshim/backoffshim.ini

clean:
	rm -rf $(BUILD)
