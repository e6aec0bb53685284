# hostprof — build, test, run. See README.md.
#
# Dependencies are found with pkg-config; `make deps` installs the Debian packages.

CC       ?= cc
BUILD    ?= build
OPTFLAGS ?= -O2 -g
CFLAGS   := $(OPTFLAGS) -Wall -Wextra -std=gnu11 -D_GNU_SOURCE -I. -MMD -MP $(EXTRA_CFLAGS)
# The program; the sanitizer build keeps its own copy in its build tree.
BIN      ?= hostprof
LDFLAGS  ?=

# pkg-config module -> Debian package that provides it.
DEP_MODULES := libdw:libdw-dev libelf:libelf-dev libunwind-generic:libunwind-dev \
               capstone:libcapstone-dev msgpack:libmsgpack-dev cmocka:libcmocka-dev \
               nettle:nettle-dev libprotobuf-c:libprotobuf-c-dev json-c:libjson-c-dev zlib:zlib1g-dev libzstd:libzstd-dev \
               libcurl:libcurl4-openssl-dev libxxhash:libxxhash-dev
# Tools: protoc-c generates the pprof and OTLP encoders.
DEB_PACKAGES := pkg-config protobuf-c-compiler libiberty-dev $(foreach d,$(DEP_MODULES),$(word 2,$(subst :, ,$(d))))
# What the tests run, profile or compare against, as command:Debian package (node and a JDK for JIT code: about
# 130 MB to download; perf is the oracle many tests compare with; protoc decodes OTLP output without hostprof's
# schema, curl posts it to a collector; chromium opens the flame graph pages headless, script gives record a
# terminal; the python3 package, probed by its pydoc3, brings the standard library the
# scripted OTLP receiver needs, which python3-minimal lacks). npm and rustc are installed only where no other install provides them
# (nodesource's nodejs bundles npm, rustup's rustc is in ~/.cargo/bin). Debian's Go is probed by its path: the
# tests profile its own binaries (Go 1.19's go and gofmt), which a newer Go first on PATH does not stand for.
# hotspot brings perfparser, the second reader of perf.data files the tests and the bench compare with; it is
# installed without its recommends (KDE's and Qt's GUI extras, which perfparser does not use): LEAN_TOOLS.
TEST_TOOLS   := perf:linux-perf /usr/lib/go/bin/go:golang-go node:nodejs javac:default-jdk-headless clang:clang ld.lld:lld \
                sqlite3:sqlite3 xz:xz-utils pydoc3:python3 g++:g++ objdump:binutils addr2line:binutils \
                setpriv:util-linux npm:npm rustc:rustc protoc:protobuf-compiler curl:curl \
                chromium:chromium script:bsdutils hotspot:hotspot
LEAN_TOOLS   := hotspot
PKG_MODULES  := $(foreach d,$(DEP_MODULES),$(word 1,$(subst :, ,$(d))))
LIB_MODULES  := $(filter-out cmocka,$(PKG_MODULES))

HAVE_PKGCONFIG := $(shell command -v pkg-config >/dev/null 2>&1 && echo yes)
# libiberty (the demangler of binutils and gdb) ships no pkg-config file: its header tells it is there.
ifeq ($(HAVE_PKGCONFIG),yes)
MISSING := $(strip $(foreach d,$(DEP_MODULES),$(if $(shell pkg-config --exists $(word 1,$(subst :, ,$(d))) && echo ok),,$(d))) \
             $(if $(shell command -v protoc-c),,protoc-c:protobuf-c-compiler) \
             $(if $(wildcard /usr/include/libiberty/demangle.h),,libiberty:libiberty-dev))
else
MISSING := pkg-config:pkg-config
endif

# Test tools missing here (rustc counts as there when rustup's is).
tool_missing = $(if $(shell command -v $(1) 2>/dev/null || { [ $(1) = rustc ] && [ -x "$$HOME/.cargo/bin/rustc" ] && echo ok; }),,$(2))
MISSING_TOOLS := $(sort $(foreach t,$(TEST_TOOLS),$(call tool_missing,$(word 1,$(subst :, ,$(t))),$(word 2,$(subst :, ,$(t))))))
MISSING_LEAN  := $(filter $(LEAN_TOOLS),$(MISSING_TOOLS))
MISSING_TOOLS := $(filter-out $(LEAN_TOOLS),$(MISSING_TOOLS))

ifeq ($(MISSING),)
DEP_CFLAGS := $(shell pkg-config --cflags $(LIB_MODULES))
# libcurl is opened at run time, when profiles are sent (src/export/otlp_sender.c): its headers only.
DEP_LIBS   := $(shell pkg-config --libs $(filter-out libcurl,$(LIB_MODULES))) -liberty -lpthread -lm
TEST_LIBS  := $(shell pkg-config --libs cmocka)
endif

# Generated at build time: protobuf-c code for the pprof schema (src/profile/proto/profile.proto), OTLP's
# (src/profile/proto/otlp_*.proto, which import one another by their path from the repository root) and the
# exporter's (src/export/proto/).
PROTOS    := $(wildcard src/profile/proto/*.proto) $(wildcard src/export/proto/*.proto)
GEN_SRCS  := $(PROTOS:%.proto=$(BUILD)/gen/%.pb-c.c)
GEN_HDRS  := $(GEN_SRCS:.c=.h)
GEN_OBJS  := $(GEN_SRCS:.c=.o)
CFLAGS    += -I$(BUILD)/gen

LIB_SRCS  := $(wildcard src/sampling/*.c) $(wildcard src/processes/*.c) $(wildcard src/pipeline/*.c) \
             $(wildcard src/export/*.c) \
             $(wildcard src/base/*.c) $(filter-out src/cmd/main.c,$(wildcard src/cmd/*.c)) \
             $(wildcard src/profile/*.c) $(wildcard unwind/*.c) \
             $(wildcard symbols/*.c) $(wildcard correlate/*.c)
LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/%.o) $(GEN_OBJS)
MAIN_OBJ  := $(BUILD)/src/cmd/main.o
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
INTEG_SRCS:= $(wildcard tests/integration/test_*.c)
INTEG_BINS:= $(INTEG_SRCS:tests/integration/%.c=$(BUILD)/tests/%)
# Fuzz targets, one per parser of untrusted input: standalone runners (tests/fuzz/standalone_main.c) that
# `make check` replays seeds and their mutants through, and libFuzzer builds for `make fuzz`.
FUZZ_SRCS    := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_RUNNERS := $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_ENGINES := $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/libfuzzer/%)
FUZZ_SECONDS ?= 60
TESTLIB_SRCS := $(wildcard tests/lib/*.c)
TESTLIB_OBJS := $(TESTLIB_SRCS:%.c=$(BUILD)/%.o)

# Fixtures are built the way the issue asks: optimised, no frame pointers.
FIXTURE_CFLAGS := -O2 -g -fomit-frame-pointer -Wall -Wextra
FIXTURE_SRCS := $(wildcard tests/fixtures/*.c)
FIXTURE_BINS := $(filter-out $(BUILD)/fixtures/libfixture_shared,$(FIXTURE_SRCS:tests/fixtures/%.c=$(BUILD)/fixtures/%))
WORKLOAD_BINS := $(patsubst bench/workloads/%.c,$(BUILD)/workloads/%,$(wildcard bench/workloads/*.c))
# The sampling floor (bench/floor_sampler.c): the events hostprof opens, every record read and discarded.
FLOOR_BIN := $(BUILD)/bench/floor_sampler

.PHONY: all deps deps-check deps-auto test-deps-auto run check check-asan test fixtures bench clean install fuzz \
        fuzz-engines

all: deps-check $(BIN)

deps-check:
ifneq ($(MISSING),)
	@for d in $(MISSING); do \
	  echo "hostprof: missing dependency $${d%%:*}: install the Debian package $${d##*:} (or run 'make deps')" >&2; \
	done; exit 1
endif

# Installs what is missing: the build's packages and every test tool; `apt-get update` first, as a fresh machine
# has no package lists.
deps:
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y $(DEB_PACKAGES) $(MISSING_TOOLS)
ifneq ($(MISSING_LEAN),)
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(MISSING_LEAN)
endif

deps-auto:
ifneq ($(MISSING),)
	$(MAKE) deps
endif

# The tests' tools, installed where missing (make check, make bench).
test-deps-auto: deps-auto
ifneq ($(MISSING_TOOLS)$(MISSING_LEAN),)
	apt-get update
endif
ifneq ($(MISSING_TOOLS),)
	DEBIAN_FRONTEND=noninteractive apt-get install -y $(MISSING_TOOLS)
endif
ifneq ($(MISSING_LEAN),)
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(MISSING_LEAN)
endif

$(BIN): $(MAIN_OBJ) $(LIB_OBJS)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(DEP_LIBS)

$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: %.proto
	@mkdir -p $(BUILD)/gen
	protoc-c --c_out=$(BUILD)/gen $<

$(GEN_OBJS): %.o: %.c | $(GEN_HDRS)
	$(CC) $(CFLAGS) $(DEP_CFLAGS) -c -o $@ $<

# Generated files and test objects are not intermediates to delete after a build.
.SECONDARY: $(GEN_SRCS) $(GEN_HDRS) $(TESTLIB_OBJS)

# Every object may include a generated header: generate them first.
$(BUILD)/%.o: %.c | $(GEN_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEP_CFLAGS) -c -o $@ $<

# The stack-delta table cache (unwind/stack_deltas_cache.h) trusts a cached table only from the same builder: a
# hash of the builder's sources is part of its key, so any change to them makes earlier tables stale. The object
# is rebuilt whenever one of them changes.
SD_BUILDER_SRCS := $(wildcard unwind/stack_deltas.[ch] unwind/stack_delta_rule.[ch] unwind/prologue.[ch] \
                   unwind/gopclntab.[ch] unwind/byte_reader.[ch] unwind/stack_deltas_cache.[ch])
SD_BUILDER_HASH := $(shell cat $(SD_BUILDER_SRCS) | sha256sum | cut -c1-16)
$(BUILD)/unwind/stack_deltas_cache.o: $(SD_BUILDER_SRCS)
$(BUILD)/unwind/stack_deltas_cache.o: CFLAGS += -DSTACK_DELTAS_BUILDER_SOURCES='"$(SD_BUILDER_HASH)"'
# Likewise the names kept per file (symbols/names_cache.h) are those of one symbolizer: its sources' hash.
SYM_SRCS := $(wildcard symbols/symbolizer.[ch] symbols/gosym.[ch] symbols/stubs.[ch] symbols/demangle.[ch] \
            symbols/names_cache.[ch] unwind/gopclntab.[ch] unwind/byte_reader.[ch] src/base/radix_sort.[ch])
SYM_HASH := $(shell cat $(SYM_SRCS) | sha256sum | cut -c1-16)
$(BUILD)/symbols/symbolizer.o: $(SYM_SRCS)
$(BUILD)/symbols/symbolizer.o: CFLAGS += -DSYMBOLIZER_SOURCES='"$(SYM_HASH)"'

# The flame graph page is put into its writer's object by the assembler (.incbin): rebuild it when the page changes.
$(BUILD)/src/profile/flame_html.o: src/profile/flame.html

# The sources and objects among a program's prerequisites, not the headers -MMD adds to them.
LINK_INPUTS = $(filter %.c %.o,$^)

$(BUILD)/tests/%: tests/unit/%.c $(LIB_OBJS) $(TESTLIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEP_CFLAGS) -o $@ $(LINK_INPUTS) $(DEP_LIBS) $(TEST_LIBS)

$(BUILD)/tests/%: tests/integration/%.c $(LIB_OBJS) $(TESTLIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEP_CFLAGS) -o $@ $(LINK_INPUTS) $(DEP_LIBS) $(TEST_LIBS)

$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/standalone_main.c $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEP_CFLAGS) -o $@ $(LINK_INPUTS) $(DEP_LIBS)

$(BUILD)/libfuzzer/%: tests/fuzz/%.c $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEP_CFLAGS) -fsanitize=fuzzer -o $@ $(LINK_INPUTS) $(DEP_LIBS)

$(BUILD)/fixtures/libfixture_shared.so: tests/fixtures/libfixture_shared.c
	@mkdir -p $(dir $@)
	$(CC) $(FIXTURE_CFLAGS) -fPIC -shared -o $@ $<

$(BUILD)/fixtures/shared_caller: tests/fixtures/shared_caller.c $(BUILD)/fixtures/libfixture_shared.so
	@mkdir -p $(dir $@)
	$(CC) $(FIXTURE_CFLAGS) -o $@ $< -L$(BUILD)/fixtures -lfixture_shared -Wl,-rpath,'$$ORIGIN' -lpthread

$(BUILD)/fixtures/%: tests/fixtures/%.c
	@mkdir -p $(dir $@)
	$(CC) $(FIXTURE_CFLAGS) -o $@ $< -lpthread -lm

$(BUILD)/workloads/%: bench/workloads/%.c
	@mkdir -p $(dir $@)
	$(CC) $(FIXTURE_CFLAGS) -o $@ $< -lpthread -lm

$(FLOOR_BIN): bench/floor_sampler.c unwind/unwind.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -Wall -Wextra -std=gnu11 -o $@ $<

# The fake APM agent (man/hostprof-correlation.7): a library named like the real one, its TLS variable in the
# TLSDESC dialect.
APM_AGENT_SO := $(BUILD)/fixtures/elastic-jvmti-linux-x86_64.so
$(APM_AGENT_SO): tests/fixtures/apm/fake_apm_agent.c
	@mkdir -p $(dir $@)
	$(CC) $(FIXTURE_CFLAGS) -fPIC -shared -ftls-model=global-dynamic -mtls-dialect=gnu2 -o $@ $<

fixtures: $(FIXTURE_BINS) $(BUILD)/fixtures/libfixture_shared.so $(APM_AGENT_SO)

# The main job on a bundled workload: profile it and print the report.
run: deps-auto
	$(MAKE) $(BIN) $(WORKLOAD_BINS)
	./$(BIN) record -o $(BUILD)/run.msgpack -- $(BUILD)/workloads/compress_words
	./$(BIN) report $(BUILD)/run.msgpack

# The layering rule first (tests/check-layers); with CI=true a skipped test fails unless tests/allowed-skips
# lists its reason (tests/run-tests).
check: test-deps-auto
	tests/check-layers
	$(MAKE) $(BIN) $(UNIT_BINS) $(INTEG_BINS) $(FUZZ_RUNNERS) fixtures
	BUILD=$(BUILD) HOSTPROF=./$(BIN) tests/run-tests $(UNIT_BINS) $(INTEG_BINS)

test: check

# The same suite under AddressSanitizer + UndefinedBehaviorSanitizer, in its own build tree.
check-asan: test-deps-auto
	$(MAKE) check BUILD=build-asan BIN=build-asan/hostprof \
	  OPTFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"

# libFuzzer (clang, ASan+UBSan) on every fuzz target (FUZZ_TARGETS="fuzz_elf ...": those only) for FUZZ_SECONDS
# each, corpora kept in build-fuzz/corpus.
fuzz: deps-auto
	command -v clang >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y clang; }
	$(MAKE) $(BIN) fixtures
	$(MAKE) fuzz-engines BUILD=build-fuzz CC=clang \
	  OPTFLAGS="-O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer"
	FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run-fuzz build-fuzz $(BUILD) ./$(BIN)

fuzz-engines: $(FUZZ_ENGINES)

bench: test-deps-auto
	$(MAKE) $(BIN) $(WORKLOAD_BINS) $(FLOOR_BIN) fixtures $(BUILD)/tests/test_apm
	BUILD=$(BUILD) HOSTPROF=./$(BIN) bench/run-bench

PREFIX     ?= /usr/local
DESTDIR    ?=
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
# The binary, man pages, the daemon's systemd unit and (if absent) its config file.
install: $(BIN)
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/hostprof
	for m in man/*.[0-9]; do \
	  s=$${m##*.}; install -D -m 0644 $$m $(DESTDIR)$(PREFIX)/share/man/man$$s/$${m##*/}; done
	mkdir -p $(DESTDIR)$(UNITDIR)
	sed -e 's|@BINDIR@|$(PREFIX)/bin|' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|' src/hostprof.service \
	  > $(DESTDIR)$(UNITDIR)/hostprof.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/hostprof.service
	[ -e $(DESTDIR)$(SYSCONFDIR)/hostprof.conf ] || \
	  install -D -m 0644 src/hostprof.conf $(DESTDIR)$(SYSCONFDIR)/hostprof.conf

clean:
	rm -rf build build-asan build-fuzz hostprof

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
