# avo: one Makefile for everything. `make run` and `make test` are the two
# commands a new user needs; both install what is missing first.

CC      ?= cc
BUILD   ?= build
CFLAGS  ?= -O2 -g
override CFLAGS += -std=c17 -D_GNU_SOURCE -Wall -Wextra -Werror \
           -I. -Iproto -Idaemon/common -I$(BUILD)/gen -MMD -MP $(shell pkg-config --cflags libpq 2>/dev/null || echo -I/usr/include/postgresql)
LDLIBS_BASE := -ljansson -lm -ldl -lpthread

# CUDA parts build only where nvcc exists (PATH or /usr/local/cuda).
NVCC ?= $(shell command -v nvcc 2>/dev/null || ( [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc ))

PKGS_DEB := build-essential pkg-config libuv1-dev libpq-dev libcurl4-openssl-dev \
            libjansson-dev libmicrohttpd-dev libsystemd-dev libcmocka-dev libssl-dev libgit2-dev libseccomp-dev \
            postgresql postgresql-client curl jq iproute2 systemd python3-yaml python3-jsonschema \
            clang clang-format libclang-rt-14-dev man-db groff-base zsh

PROTO_SRC   := $(wildcard proto/*.c)
COMMON_SRC  := $(wildcard daemon/common/*.c)
AVOD_SRC    := $(filter-out daemon/avod/main.c,$(wildcard daemon/avod/*.c))
WORKER_SRC  := $(filter-out daemon/worker/main.c,$(wildcard daemon/worker/*.c))
HARNESS_SRC := $(filter-out daemon/harness/main.c,$(wildcard daemon/harness/*.c))
CLIENT_SRC  := $(filter-out client/avoctl.c,$(wildcard client/*.c))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

LIB_PROTO   := $(BUILD)/lib/libavoproto.a
LIB_COMMON  := $(BUILD)/lib/libavocommon.a
LIB_AVOD    := $(BUILD)/lib/libavod.a
LIB_WORKER  := $(BUILD)/lib/libavoworker.a
LIB_HARNESS := $(BUILD)/lib/libavoharness.a
LIB_CLIENT  := $(BUILD)/lib/libavoclient.a

LIBS_AVOD   := -luv -lpq -lmicrohttpd -lsystemd -lcurl -lcrypto -lgit2 $(LDLIBS_BASE)
LIBS_WORKER := -lpq -lcrypto -lsystemd $(LDLIBS_BASE)
LIBS_HARN   := -lcrypto -lseccomp $(LDLIBS_BASE)
LIBS_CLIENT := -lcurl -lsystemd $(LDLIBS_BASE)

BINS := $(BUILD)/bin/avod $(BUILD)/bin/avo-worker $(BUILD)/bin/avo-harness $(BUILD)/bin/avoctl

# CUDA programs: built for Hopper (sm_90a: wgmma, setmaxnreg) and Ampere, with
# PTX for newer GPUs; the CUDA runtime is linked statically so the binaries
# run on a bare GPU host.
NVCC_FLAGS := -O2 -std=c++17 -Xcompiler -Wall,-Werror \
              -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=[sm_80,compute_80]
# The install root comes from nvcc itself (its TOP= line): /usr/local/bin/nvcc
# is often a wrapper script, so the directory of the nvcc found is not it.
CUDA_HOME := $(if $(NVCC),$(abspath $(shell $(NVCC) --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^\#\$$ TOP=//p' | head -n1)))
CUDA_LIBDIRS := $(CUDA_HOME)/lib64 $(CUDA_HOME)/extras/CUPTI/lib64
CUDA_LINK := $(foreach d,$(CUDA_LIBDIRS),-L$(d) -Xlinker -rpath=$(d))
CUDA_BINS := $(if $(NVCC),$(BUILD)/bin/avo-canary $(BUILD)/bin/avo-gpu-probe $(BUILD)/bin/avo-harness-cuda)
# GPU unit tests (run by tests/gpu/test_*.sh on a GPU host; built wherever nvcc is).
CUDA_TESTS := $(if $(NVCC),$(BUILD)/tests/gpu/test_compare)

# avo-harness-cuda: the same harness sources built with the CUDA runtime
# (shared libcudart, as the candidates use, so one runtime serves both).
HARNESS_CUDA_SRC := $(wildcard daemon/harness/*.c) daemon/common/avo_nvml.c daemon/common/avo_cgroup.c \
                    daemon/common/avo_phases.c \
                    daemon/common/avo_utf8.c daemon/common/avo_hash.c daemon/common/avo_file.c \
                    daemon/common/avo_paths.c
HARNESS_CUDA_OBJ := $(patsubst %.c,$(BUILD)/obj-cuda/%.o,$(HARNESS_CUDA_SRC)) $(BUILD)/obj-cuda/daemon/gpu/avo_cupti.o \
                    $(BUILD)/obj-cuda/daemon/gpu/avo_gate.o $(BUILD)/obj-cuda/daemon/gpu/avo_fill.o \
                    $(BUILD)/obj-cuda/daemon/gpu/avo_compare.o

UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
# Benchmark programs (bench/*.c): built with everything, run by bench/*.sh.
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))

.PHONY: all deps build run test test-unit test-integration test-gpu clean install uninstall fuzz format format-check
.DEFAULT_GOAL := all

all: $(BINS) $(UNIT_BINS) $(CUDA_BINS) $(CUDA_TESTS) $(BENCH_BINS)
	@$(if $(NVCC),,echo "avo: nvcc not found (PATH, /usr/local/cuda): CUDA parts not built")

build: all

# deps: install the Debian packages that are missing (idempotent; needs root or sudo).
deps:
	@missing=""; for p in $(PKGS_DEB); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "avo: installing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null || \
	  { echo "avo: apt-get install failed for:$$missing" >&2; exit 1; }; \
	fi

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The PTX instructions the installed toolkit documents, for the candidate
# policy (daemon/worker/policy.c): generated from the toolkit by asking its
# ptxas (no GPU needed; a few seconds), cached here until the toolkit or the
# script changes. Without a toolkit the list is empty (docs/evaluation.md).
PTX_OPCODES := $(BUILD)/gen/ptx_opcodes.h
$(PTX_OPCODES): daemon/worker/gen_ptx_opcodes.sh $(wildcard $(CUDA_HOME)/bin/ptxas)
	@mkdir -p $(dir $@)
	daemon/worker/gen_ptx_opcodes.sh "$(CUDA_HOME)" >$@.tmp && mv $@.tmp $@
$(BUILD)/obj/daemon/worker/policy.o: $(PTX_OPCODES)

$(LIB_PROTO): $(call obj,$(PROTO_SRC))
$(LIB_COMMON): $(call obj,$(COMMON_SRC))
$(LIB_AVOD): $(call obj,$(AVOD_SRC))
$(LIB_WORKER): $(call obj,$(WORKER_SRC))
$(LIB_HARNESS): $(call obj,$(HARNESS_SRC))
$(LIB_CLIENT): $(call obj,$(CLIENT_SRC))
$(BUILD)/lib/%.a:
	@mkdir -p $(dir $@)
	@rm -f $@
	ar rcs $@ $^ $(if $^,,$(BUILD)/obj/empty.o)

$(BUILD)/obj/empty.o:
	@mkdir -p $(dir $@)
	echo 'typedef int avo_empty_unit;' | $(CC) -x c -c - -o $@

# proto/ uses daemon/common (avo_paths_join), so libavoproto comes first.
ALL_LIBS := $(LIB_AVOD) $(LIB_WORKER) $(LIB_HARNESS) $(LIB_CLIENT) $(LIB_PROTO) $(LIB_COMMON)
$(ALL_LIBS): | $(BUILD)/obj/empty.o

$(BUILD)/bin/avod: $(BUILD)/obj/daemon/avod/main.o $(LIB_AVOD) $(LIB_PROTO) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LIBS_AVOD)
$(BUILD)/bin/avo-worker: $(BUILD)/obj/daemon/worker/main.o $(LIB_WORKER) $(LIB_PROTO) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LIBS_WORKER)
$(BUILD)/bench/%: bench/%.c $(LIB_AVOD) $(LIB_PROTO) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Idaemon/avod -o $@ $< $(LIB_AVOD) $(LIB_PROTO) $(LIB_COMMON) $(LIBS_AVOD)
# The harness is the only process that runs candidate code: libc, jansson
# and libcrypto (ChaCha20 for the input streams; of libavocommon it takes
# the control-group, phase-timing, UTF-8 and file objects).
$(BUILD)/bin/avo-harness: $(BUILD)/obj/daemon/harness/main.o $(LIB_HARNESS) $(LIB_PROTO) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LIBS_HARN)
$(BUILD)/bin/avoctl: $(BUILD)/obj/client/avoctl.o $(LIB_CLIENT) $(LIB_PROTO) $(LIB_COMMON)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LIBS_CLIENT)

$(BUILD)/obj-cuda/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DAVO_WITH_CUDA -I$(CUDA_HOME)/include -Idaemon/gpu -c $< -o $@

$(BUILD)/obj-cuda/daemon/gpu/avo_cupti.o: daemon/gpu/avo_cupti.cu daemon/gpu/avo_cupti.h
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -std=c++17 -Xcompiler -Wall,-Wextra,-Werror -c $< -o $@

# The timing gate is device code: built for the same targets as the candidates.
$(BUILD)/obj-cuda/daemon/gpu/avo_gate.o: daemon/gpu/avo_gate.cu daemon/gpu/avo_gate.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -Xcompiler -Wextra -c $< -o $@

# The input stream and the checks on the device: built for the same targets.
$(BUILD)/obj-cuda/daemon/gpu/avo_fill.o: daemon/gpu/avo_fill.cu daemon/gpu/avo_fill.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -Xcompiler -Wextra -c $< -o $@

$(BUILD)/obj-cuda/daemon/gpu/avo_compare.o: daemon/gpu/avo_compare.cu daemon/gpu/avo_compare.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -Xcompiler -Wextra -c $< -o $@

$(BUILD)/bin/avo-harness-cuda: $(HARNESS_CUDA_OBJ) $(LIB_PROTO)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(foreach d,$(CUDA_LIBDIRS),-L$(d) -Wl,-rpath,$(d)) -L$(CUDA_HOME)/lib64/stubs \
	    -lcudart -lcupti -lcuda -lstdc++ $(LIBS_HARN)

# The device comparisons against the host's rule (tests/gpu/test_compare_gpu.sh).
$(BUILD)/tests/gpu/test_compare: tests/gpu/unit/test_compare.cu $(BUILD)/obj-cuda/daemon/gpu/avo_compare.o
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -Idaemon/gpu -o $@ $^

$(BUILD)/bin/avo-canary: daemon/gpu/canary.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -o $@ $<

$(BUILD)/bin/avo-gpu-probe: daemon/gpu/probe.cu daemon/gpu/avo_cupti.cu daemon/gpu/avo_cupti.h daemon/common/avo_nvml.c
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -Idaemon/common -Idaemon/gpu -o $@ daemon/gpu/probe.cu daemon/gpu/avo_cupti.cu \
	    daemon/common/avo_nvml.c $(CUDA_LINK) -lcupti -lcuda -ljansson -ldl -Xlinker -export-dynamic

# The fuzz target (tests/fuzz): the parsers it drives are compiled into it
# with clang's libFuzzer and sanitizers, so coverage reaches into them.
FUZZ_CC ?= clang
FUZZ_SRC := tests/fuzz/fuzz_parsers.c proto/avo_routes.c proto/avo_jobspec.c daemon/avod/llm.c daemon/avod/tune.c \
            client/sse.c client/buf.c daemon/worker/policy.c
fuzz: $(BUILD)/fuzz/fuzz_parsers
$(BUILD)/fuzz/fuzz_parsers: $(FUZZ_SRC) $(LIB_PROTO) $(LIB_COMMON) $(PTX_OPCODES)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -O1 -g -std=c17 -D_GNU_SOURCE -I. -Iproto -Idaemon/common -Idaemon/avod -I$(BUILD)/gen \
	    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -o $@ $(FUZZ_SRC) \
	    $(LIB_PROTO) $(LIB_COMMON) $(LDLIBS_BASE)

# Unit tests link every library; static linking pulls only what each needs.
# Objects listed as extra prerequisites (test helpers) are linked in too.
$(BUILD)/tests/test_%: tests/unit/test_%.c $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(filter %.o,$^) $(ALL_LIBS) -lcmocka $(LIBS_AVOD) -lseccomp

# The loop tests run db.c and engine.c, test_worker_states sql/024, test_recheck sql/026 and test_profile_order
# sql/027, against a throwaway PostgreSQL
# started by tests/unit/pgtest.c (avod's own embedded-cluster code).
UNIT_PG_TESTS := $(BUILD)/tests/test_db_loop $(BUILD)/tests/test_engine_loop $(BUILD)/tests/test_worker_states \
                 $(BUILD)/tests/test_recheck $(BUILD)/tests/test_profile_order $(BUILD)/tests/test_claim_affinity
$(UNIT_PG_TESTS): $(BUILD)/obj/tests/unit/pgtest.o

# make run: the main job on the embedded PostgreSQL. KEEP=1 leaves it running.
run: deps
	@$(MAKE) --no-print-directory all
	@./daemon/run-sample.sh

test: deps
	@$(MAKE) --no-print-directory all
	@./tests/run.sh

test-unit: all
	@./tests/run.sh unit

test-integration: all
	@./tests/run.sh integration

# On a GPU host (see docs/gpu-testing.md): the GPU group alone.
test-gpu: all
	@./tests/run.sh gpu

clean:
	rm -rf $(BUILD)

# install: binaries, the schema migrations and problem packages (found by
# avod and the workers at <bindir>/../share/avo), docs, and the systemd
# units, sysusers and tmpfiles snippets with their paths set to PREFIX.
PREFIX  ?= /usr/local
BINDIR  := $(PREFIX)/bin
DATADIR := $(PREFIX)/share/avo
DOCDIR  := $(PREFIX)/share/doc/avo
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
# avoctl's man page and completion scripts, generated from its command table
MANDIR  ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions
UNITS := avod.service avo-worker@.service avo-nightly.service avo-nightly.timer

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DATADIR) $(DESTDIR)$(DOCDIR) $(DESTDIR)$(UNITDIR) \
	    $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR)
	install -m 0755 $(BINS) $(CUDA_BINS) $(DESTDIR)$(BINDIR)/
	rm -rf $(DESTDIR)$(DATADIR)/sql $(DESTDIR)$(DATADIR)/kernels
	cp -R --no-preserve=ownership sql kernels $(DESTDIR)$(DATADIR)/
	cp -R --no-preserve=ownership README.md docs/. $(DESTDIR)$(DOCDIR)/
	for u in $(UNITS); do \
	    sed -e 's#/usr/local/bin/#$(BINDIR)/#g' -e 's#/usr/local/share/doc/avo#$(DOCDIR)#g' systemd/$$u \
	        >$(DESTDIR)$(UNITDIR)/$$u && chmod 0644 $(DESTDIR)$(UNITDIR)/$$u || exit 1; \
	done
	install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR)
	$(BUILD)/bin/avoctl man >$(DESTDIR)$(MANDIR)/man1/avoctl.1 && chmod 0644 $(DESTDIR)$(MANDIR)/man1/avoctl.1
	$(BUILD)/bin/avoctl completion bash >$(DESTDIR)$(BASHCOMPDIR)/avoctl && chmod 0644 $(DESTDIR)$(BASHCOMPDIR)/avoctl
	$(BUILD)/bin/avoctl completion zsh >$(DESTDIR)$(ZSHCOMPDIR)/_avoctl && chmod 0644 $(DESTDIR)$(ZSHCOMPDIR)/_avoctl
	install -m 0644 systemd/avo.sysusers $(DESTDIR)$(SYSUSERSDIR)/avo.conf
	install -m 0644 systemd/avo.tmpfiles $(DESTDIR)$(TMPFILESDIR)/avo.conf
	@echo "avo: installed under $(DESTDIR)$(PREFIX); as root: systemd-sysusers; systemd-tmpfiles --create;"
	@echo "     systemctl daemon-reload; systemctl enable --now avod avo-worker@0 (docs/operations.md)"

uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,avod avo-worker avo-harness avoctl avo-canary avo-gpu-probe avo-harness-cuda)
	rm -rf $(DESTDIR)$(DATADIR) $(DESTDIR)$(DOCDIR)
	rm -f $(addprefix $(DESTDIR)$(UNITDIR)/,$(UNITS)) $(DESTDIR)$(SYSUSERSDIR)/avo.conf $(DESTDIR)$(TMPFILESDIR)/avo.conf
	rm -f $(DESTDIR)$(MANDIR)/man1/avoctl.1 $(DESTDIR)$(BASHCOMPDIR)/avoctl $(DESTDIR)$(ZSHCOMPDIR)/_avoctl

-include $(shell find $(BUILD)/obj $(BUILD)/obj-cuda $(BUILD)/tests $(BUILD)/bench -name '*.d' 2>/dev/null)

# The layout .clang-format describes (issue 23): daemon/, client/, proto/ and
# the unit tests; kernels, hostile cases and fixtures keep their own.
FORMAT_SRC = $(shell find daemon client proto tests/unit -name '*.[ch]' -o -name '*.cu' 2>/dev/null | sort)
format:
	clang-format -i $(FORMAT_SRC)
format-check:
	@bad=0; for f in $(FORMAT_SRC); do \
	  clang-format --dry-run -Werror "$$f" >/dev/null 2>&1 || { echo "format-check: $$f is not formatted as .clang-format says (make format)"; bad=1; }; \
	done; exit $$bad
