# sftp-server: a drop-in replacement for OpenSSH's sftp-server.

PREFIX ?= /usr/local
EXEC_PREFIX ?= $(PREFIX)
libexecdir ?= $(EXEC_PREFIX)/libexec
mandir ?= $(PREFIX)/share/man
DESTDIR ?=
INSTALL ?= install

CC ?= cc
CFLAGS ?= -O2 -g
WERROR ?= -Werror
WARNINGS = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wpointer-arith -Wformat=2 -Wvla $(WERROR)
# 64-bit off_t and time_t on 32-bit systems: files over 2 GiB, offsets up
# to 2^63 and dates after 2038, as on 64-bit ones.  _TIME_BITS takes effect
# with glibc 2.34 or later; other libcs ignore it (musl's time_t is 64-bit).
LARGE = -D_FILE_OFFSET_BITS=64 -D_TIME_BITS=64
# Threads (jobs.c): part of the C library, -pthread for older glibc and for
# the sanitizers.  Every build below takes STD, so every build has them.
STD = -std=c11 -D_DEFAULT_SOURCE $(LARGE) -pthread
# Build paths out of the debug info: the same binary from any directory.
PATHMAP = -ffile-prefix-map=$(CURDIR)=.
ALL_CFLAGS = $(STD) $(WARNINGS) $(PATHMAP) $(CPPFLAGS) $(CFLAGS)
SANFLAGS = -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=all
# ThreadSanitizer: clang's, whose runtime is linked in statically, so that
# the suites' LD_PRELOAD shims load beside it (TSAN_CC=gcc: libtsan).
TSAN_CC ?= clang
TSANFLAGS = -O1 -g -fsanitize=thread -fno-omit-frame-pointer

PYTHON ?= /usr/bin/python3

# The server without main(): the fuzz harness links these.
LIB_SRCS = sftp-server.c requests.c sched.c packet.c handles.c attrib.c \
	log.c path.c fs.c rootcheck.c pipes.c digest.c xferlog.c fileio.c \
	sys-gnu.c sandbox.c jobs.c
SRCS = sftp-server-main.c $(LIB_SRCS)
HDRS = sftp-server.h requests.h sched.h packet.h handles.h attrib.h log.h \
	path.h fs.h rootcheck.h pipes.h digest.h xferlog.h fileio.h sys-gnu.h \
	sandbox.h jobs.h sysnames.h
OBJS = $(SRCS:.c=.o)

UNIT_TESTS = tests/unit/test_packet tests/unit/test_handles tests/unit/test_attrib \
	tests/unit/test_fs tests/unit/test_path tests/unit/test_digest \
	tests/unit/test_xferlog tests/unit/test_fileio tests/unit/test_requests \
	tests/unit/test_rootcheck tests/unit/test_sandbox tests/unit/test_jobs \
	tests/unit/test_sched
# What every unit binary links besides its own file.
UNIT_LIB = tests/unit/unit.c
# test_sandbox's lists of the calls the suites make, one per architecture.
UNIT_HDRS = tests/unit/unit.h tests/lib/packet_test.h \
	$(wildcard tests/unit/sandbox_calls_*.h)

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all asan tsan static run check check-build check-fast check-fs \
	check-fs-quick check-fs-hostile check-gluster check-storage \
	check-openssh-regress \
	unit integration integration-asan integration-tsan \
	package-check fuzz fuzz-run fuzz-check deps test-deps install \
	uninstall clean lint lint-columns

all: sftp-server

sftp-server: $(OBJS)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $(OBJS)

%.o: %.c $(HDRS)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

# A static binary, to copy into a chroot jail as it is: with musl when
# musl-gcc is installed (Debian: musl-tools), else with $(CC).  musl reads
# the jail's /etc/passwd and /etc/group itself, where static glibc follows
# the jail's nsswitch.conf (a module other than files needs glibc's shared
# NSS modules there), and it is a sixth of the size.
MUSL_CC ?= musl-gcc
STATIC_CC ?= $(if $(shell command -v $(MUSL_CC) 2>/dev/null),$(MUSL_CC),$(CC))
# musl-gcc sees musl's headers only; the kernel's (linux/, asm/,
# asm-generic/: system calls without a libc wrapper) come from the system's
# linux-libc-dev through a directory of links.
MUSL_INC = build/musl-include
STATIC_INC = $(if $(findstring musl,$(STATIC_CC)),-isystem $(MUSL_INC))

static: sftp-server-static

sftp-server-static: $(SRCS) $(HDRS) | $(if $(STATIC_INC),$(MUSL_INC))
	$(STATIC_CC) $(STATIC_INC) $(ALL_CFLAGS) $(LDFLAGS) -static -o $@ \
	    $(SRCS)

$(MUSL_INC):
	mkdir -p $@
	ln -sfn /usr/include/linux $@/linux
	ln -sfn /usr/include/asm-generic $@/asm-generic
	ln -sfn /usr/include/$$($(CC) -print-multiarch)/asm $@/asm

run: sftp-server
	sftp -D $(CURDIR)/sftp-server

# The same sources with ASan and UBSan, for the test suites.
asan: sftp-server-asan

sftp-server-asan: $(SRCS) $(HDRS)
	$(CC) $(STD) $(WARNINGS) $(CPPFLAGS) $(SANFLAGS) -o $@ $(SRCS)

# The same sources with ThreadSanitizer, for the suites that drive
# pipelines (make integration-tsan).
tsan: sftp-server-tsan

sftp-server-tsan: $(SRCS) $(HDRS)
	$(TSAN_CC) $(STD) $(WARNINGS) $(CPPFLAGS) $(TSANFLAGS) -o $@ $(SRCS)

# A unit binary #includes the sources it tests.  Each takes an optional
# test-name pattern: tests/unit/test_packet 'test_get_u32*'
tests/unit/test_%: tests/unit/test_%.c $(UNIT_LIB) $(UNIT_HDRS) $(SRCS) $(HDRS)
	$(CC) $(STD) $(WARNINGS) $(CPPFLAGS) $(SANFLAGS) -o $@ $< $(UNIT_LIB) \
	    -lcmocka

# test_requests.c #includes requests.c and links the rest of the server,
# built with the same flags.
REQUESTS_TEST_SRCS = $(filter-out sftp-server.c requests.c,$(LIB_SRCS))

tests/unit/test_requests: tests/unit/test_requests.c $(UNIT_LIB) $(UNIT_HDRS) \
    $(SRCS) $(HDRS)
	$(CC) $(STD) $(WARNINGS) $(CPPFLAGS) $(SANFLAGS) -o $@ $< \
	    $(REQUESTS_TEST_SRCS) $(UNIT_LIB) -lcmocka

# test_sched.c #includes sched.c and links the layers below it.
SCHED_TEST_SRCS = $(filter-out sftp-server.c requests.c sched.c,$(LIB_SRCS))

tests/unit/test_sched: tests/unit/test_sched.c $(UNIT_LIB) $(UNIT_HDRS) \
    $(SRCS) $(HDRS)
	$(CC) $(STD) $(WARNINGS) $(CPPFLAGS) $(SANFLAGS) -o $@ $< \
	    $(SCHED_TEST_SRCS) $(UNIT_LIB) -lcmocka

unit: $(UNIT_TESTS)
	@set -e; for t in $(UNIT_TESTS); do echo "== $$t"; ./$$t; done

# Suites run at once by tests/run-all.sh: they mostly wait (on servers,
# clients, sshd, idle timers), so more than the cores.
SUITE_JOBS ?= 3
export SUITE_JOBS

# Every integration suite: raw protocol, hostile input, confinement, the
# OpenSSH client, parity with OpenSSH's server, a real sshd with clients.
integration: sftp-server sftp-server-static
	PYTHON=$(PYTHON) tests/run-all.sh $(CURDIR)/sftp-server
	tests/sshd/run-chroot.sh

# The same suites against the sanitizer build.
integration-asan: sftp-server-asan
	SFTP_SANITIZED=1 PYTHON=$(PYTHON) tests/run-all.sh \
	    $(CURDIR)/sftp-server-asan

# A few suites against the ThreadSanitizer build: raw, order and
# inflight (pipelines on slow storage, where requests run on other
# threads), guarantees and sftp; about two minutes.  The first report ends the server
# (halt_on_error), which fails the check that ran it.  The sandbox is off
# (-S): under the filter TSan's runtime cannot do its work.  It starts a
# thread of its own at the first pthread_create() that sleeps in
# nanosleep(2), which the filter refuses, so it spins; and a report wants
# to start a symbolizer (clang's runtime forks llvm-symbolizer), which the
# filter refuses too, so it comes without function names or lines.  The
# AddressSanitizer build (integration-asan) runs the suites with the
# filter on and traps any call off its list.  The ThreadSanitizer build
# leaves the filter out by itself (sandbox.c), for the suites' servers
# that are started without SFTP_SERVER_ARGS.
TSAN_SUITES ?= order guarantees inflight sftp raw

integration-tsan: sftp-server-tsan
	SFTP_SANITIZED=1 SFTP_SERVER_ARGS=-S TSAN_OPTIONS=halt_on_error=1 \
	    SUITES="$(TSAN_SUITES)" PYTHON=$(PYTHON) tests/run-all.sh \
	    $(CURDIR)/sftp-server-tsan

# libFuzzer harnesses (tests/fuzz/fuzz_*.c): clang with compiler-rt (Debian:
# clang, libclang-rt-14-dev).
FUZZ_CC ?= clang
FUZZ_CFLAGS = $(STD) $(WARNINGS) $(CPPFLAGS) -DSFTP_FUZZ -g -O1 \
	-fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=all
FUZZERS = tests/fuzz/fuzz_session tests/fuzz/fuzz_packet
SECONDS ?= 60

fuzz: $(FUZZERS)

tests/fuzz/fuzz_session: tests/fuzz/fuzz_session.c $(SRCS) $(HDRS)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ tests/fuzz/fuzz_session.c $(LIB_SRCS) -lpthread

tests/fuzz/fuzz_packet: tests/fuzz/fuzz_packet.c packet.c packet.h \
    tests/lib/packet_test.h
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ tests/fuzz/fuzz_packet.c

# Each harness for SECONDS seconds; what it finds stays in the scratch
# directory printed at the end, never in tests/fuzz/fuzz-corpus.
fuzz-run: $(FUZZERS)
	tests/fuzz/run-fuzz.sh -k -t $(SECONDS)

# The corpus as a regression test, then 25 seconds of fuzzing each (whole
# sessions twice: on storage that never waits, and on storage that waits).
fuzz-check: $(FUZZERS)
	tests/fuzz/run-fuzz.sh

# Other architectures, with Debian's cross compilers (gcc-TRIPLET): the
# server, static, and the unit tests (linked with the architecture's
# libcmocka from Debian multiarch) in build/ARCH/.  The rules are made from
# LIB_SRCS, HDRS and UNIT_TESTS, so new sources and tests come along.
CROSS_ARCHS = i386 armhf arm64 s390x
CROSS_i386 = i686-linux-gnu
CROSS_armhf = arm-linux-gnueabihf
CROSS_arm64 = aarch64-linux-gnu
CROSS_s390x = s390x-linux-gnu
CROSS_CFLAGS = -O2 -g
# As the native unit tests (SANFLAGS), which some warnings depend on.
CROSS_UNIT_CFLAGS = -O1 -g
CROSS_UNIT = tests/cross/unit_skip.c

define cross_rules
build/$(1)/sftp-server: $$(SRCS) $$(HDRS)
	@mkdir -p $$(@D)
	$$(CROSS_$(1))-gcc $$(STD) $$(WARNINGS) $$(PATHMAP) $$(CROSS_CFLAGS) \
	    -static -o $$@ $$(SRCS)

build/$(1)/test_%: tests/unit/test_%.c $$(CROSS_UNIT) $$(UNIT_LIB) \
    $$(UNIT_HDRS) $$(SRCS) $$(HDRS)
	@mkdir -p $$(@D)
	$$(CROSS_$(1))-gcc $$(STD) $$(WARNINGS) $$(CROSS_UNIT_CFLAGS) -o $$@ $$< \
	    $$(UNIT_LIB) $$(CROSS_UNIT) -lcmocka

build/$(1)/test_requests: tests/unit/test_requests.c $$(CROSS_UNIT) \
    $$(UNIT_LIB) $$(UNIT_HDRS) $$(SRCS) $$(HDRS)
	@mkdir -p $$(@D)
	$$(CROSS_$(1))-gcc $$(STD) $$(WARNINGS) $$(CROSS_UNIT_CFLAGS) -o $$@ $$< \
	    $$(REQUESTS_TEST_SRCS) $$(UNIT_LIB) $$(CROSS_UNIT) -lcmocka

build/$(1)/test_sched: tests/unit/test_sched.c $$(CROSS_UNIT) \
    $$(UNIT_LIB) $$(UNIT_HDRS) $$(SRCS) $$(HDRS)
	@mkdir -p $$(@D)
	$$(CROSS_$(1))-gcc $$(STD) $$(WARNINGS) $$(CROSS_UNIT_CFLAGS) -o $$@ $$< \
	    $$(SCHED_TEST_SRCS) $$(UNIT_LIB) $$(CROSS_UNIT) -lcmocka

cross-$(1): build/$(1)/sftp-server
cross-unit-$(1): $$(UNIT_TESTS:tests/unit/%=build/$(1)/%)
endef
$(foreach a,$(CROSS_ARCHS),$(eval $(call cross_rules,$(a))))

.PHONY: cross check-cross $(CROSS_ARCHS:%=cross-%) \
	$(CROSS_ARCHS:%=cross-unit-%)
cross: $(CROSS_ARCHS:%=cross-%) $(CROSS_ARCHS:%=cross-unit-%)

# Each architecture's unit tests and server, run natively where the kernel
# can (i386 on x86-64) and under qemu-user otherwise, with protocol suites
# that need no sshd; and the suites against make static's musl build.
# About two minutes on two cores.
check-cross: sftp-server-static
	STATIC_CC="$(STATIC_CC)" UNIT_TESTS="$(UNIT_TESTS)" PYTHON=$(PYTHON) \
	    tests/cross/run-cross.sh $(CROSS_ARCHS) musl

# Install and uninstall, reproducible and hardened builds, the Debian package
# (its build-time tests, an armhf cross build) and the RPM.
package-check:
	UNIT_TESTS="$(UNIT_TESTS)" tests/packaging/run-package.sh

# Everything: the builds, lint and the unit tests, then the parts below,
# CHECK_JOBS of them at once (they mostly wait: on servers, clients, sshd,
# qemu, idle timers), each one's lines together when it ends (make -O).
# check-storage, the longest part (about 7 minutes, 4.5 of them the hostile
# suite on FUSE and GlusterFS), starts first; the others fill the second
# slot meanwhile.
CHECK_JOBS ?= 2
CHECK_PARTS = check-storage check-cross integration integration-asan \
	integration-tsan package-check fuzz-check

check:
	$(MAKE) -j$(JOBS) all $(UNIT_TESTS)
	$(MAKE) lint unit
	$(MAKE) -j$(CHECK_JOBS) -Otarget $(CHECK_PARTS)

# The file-system matrix's quick run, the hostile suite on the file systems
# that wait (FUSE, GlusterFS), then two sshd hosts on GlusterFS: one after
# the other, each with a GlusterFS volume of its own.
check-storage:
	$(MAKE) check-fs-quick
	$(MAKE) check-fs-hostile
	$(MAKE) check-gluster

# The file-system matrix (needs root): the protocol, sftp, confinement and
# hostile suites again on ext4, xfs, btrfs, overlayfs, tmpfs, FUSE and
# GlusterFS; an entry the machine cannot make is skipped with the reason.
check-fs: sftp-server
	PYTHON=$(PYTHON) tests/fs/run-fs-matrix.sh $(CURDIR)/sftp-server

# The same without the hostile suite: about a minute, part of make check.
check-fs-quick: sftp-server
	SUITES=raw,sftp,confine,probe,calls,atomic PYTHON=$(PYTHON) \
	    tests/fs/run-fs-matrix.sh $(CURDIR)/sftp-server

# The hostile suite where storage waits and work goes to workers: FUSE
# (bindfs) and GlusterFS.  Part of make check.
check-fs-hostile: sftp-server
	FS=fuse,gluster SUITES=hostile PYTHON=$(PYTHON) \
	    tests/fs/run-fs-matrix.sh $(CURDIR)/sftp-server

# Two sshd "hosts" on one GlusterFS volume, concurrent clients on both.
check-gluster: sftp-server
	tests/fs/run-gluster-2host.sh $(CURDIR)/sftp-server

# OpenSSH's own SFTP and scp regression tests, in an OpenSSH source tree
# that is configured and built: make check-openssh-regress OPENSSH_TREE=DIR
check-openssh-regress: sftp-server
	tests/sshd/run-openssh-regress.sh "$(OPENSSH_TREE)" $(CURDIR)/sftp-server

# What a package build runs (dh_auto_test, rpm's %check): the unit tests,
# without sanitizers (not every architecture has them), and protocol suites
# that need neither root nor a network; as another user they skip what
# needs root, saying why.  fakeroot is left out: its chown and chmod are
# not the kernel's, for the server either.  CHECK_BUILD_SUITES names the
# suites (package-check's RPM build runs raw alone: its Debian build
# ran them all on the same sources).
CHECK_BUILD_SUITES ?= raw confine guarantees sftp

check-build: SANFLAGS = -O1 -g
check-build: all unit
	env -u LD_PRELOAD -u FAKEROOTKEY SUITES="$(CHECK_BUILD_SUITES)" \
	    PYTHON=$(PYTHON) tests/run-all.sh $(CURDIR)/sftp-server

# The edit-compile-test loop, as any user: the server and the unit tests
# built on every core, lint, the unit tests, then the protocol suites that
# need neither sshd nor root (as another user they skip what needs root,
# saying why).  Under two minutes on two cores from a clean tree.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

check-fast:
	$(MAKE) -j$(JOBS) all $(UNIT_TESTS)
	$(MAKE) lint unit
	SUITES="raw confine guarantees sftp inflight atomic modes bwlimit" \
	    PYTHON=$(PYTHON) \
	    tests/run-all.sh $(CURDIR)/sftp-server

include bench/Makefile.inc

# Banned calls (see the style guide), includes only down the layers, and
# the server's lines within 80 columns.
lint: lint-columns
	@tests/check-layers.sh > /dev/null || tests/check-layers.sh
	@! grep -nE '\b(strcpy|strcat|sprintf|vsprintf|strncpy|strtok|gets|atoi)\(' \
	    $(SRCS) $(HDRS) bench/*.c | grep -vE '(snprintf|vsnprintf)\(' || \
	    { echo "banned call"; exit 1; }

# The server's lines within 80 columns (tabs as 8).
lint-columns:
	@out=$$(tests/check-columns.sh $(SRCS) $(HDRS)); rc=$$?; \
	    printf '%s\n' "$$out" | grep -v '^ok - '; exit $$rc

APT_GET = $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get

# $(call apt_install,PACKAGES,ARCHITECTURES): installs with apt-get those of
# PACKAGES (NAME, or NAME:ARCH of another architecture) that dpkg does not
# have installed, after adding the ARCHITECTURES dpkg lacks.  When nothing
# is missing, neither apt-get nor dpkg runs: no lock is taken, and no root
# is needed.
define apt_install
	@native=$$(dpkg --print-architecture) missing=""; \
	for p in $(1); do \
	    case $$p in \
	    *:*) n=$${p%:*} a=$${p##*:} ;; \
	    *) n=$$p a=$$native ;; \
	    esac; \
	    dpkg-query -W -f='$${Architecture} $${Status}\n' "$$n" 2>/dev/null | \
	        grep -qE "^($$a|all) install ok installed$$" || \
	        missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then \
	    echo "$@: every package is installed"; exit 0; \
	fi; \
	echo "$@: not installed:$$missing"; \
	set -e; \
	for a in $(2); do \
	    dpkg --print-foreign-architectures | grep -qx "$$a" || \
	        $(SUDO) dpkg --add-architecture "$$a"; \
	done; \
	$(APT_GET) update; \
	$(APT_GET) install -y --no-install-recommends $$missing
endef

# What "make run" and "make check-fast" need: a compiler, make, OpenSSH's
# client, cmocka and Python.
DEPS = gcc libc6-dev make openssh-client libcmocka-dev python3

deps:
	$(call apt_install,$(DEPS))

# What "make check" needs: the test tools, OpenSSH's server and its
# sftp-server (the reference), the clients, the file systems, the packaging
# tools, and for check-cross the cross compilers, each architecture's
# libcmocka (Debian multiarch: the architectures are added to dpkg),
# qemu-user and musl.
CROSS_PKGS = $(foreach a,$(CROSS_ARCHS),gcc-$(CROSS_$(a)) \
	libc6-dev-$(a)-cross libcmocka-dev:$(a)) \
	crossbuild-essential-armhf qemu-user-static musl-tools
TEST_DEPS = build-essential gcc make clang libcmocka-dev openssh-client \
	openssh-server openssh-sftp-server python3 python3-paramiko \
	python3-asyncssh mandoc lftp curl valgrind strace \
	libclang-rt-14-dev debhelper devscripts lintian dpkg-dev fakeroot \
	autopkgtest rpm e2fsprogs xfsprogs btrfs-progs bindfs fuse3 logrotate \
	glusterfs-server glusterfs-client iproute2 golang-go \
	golang-github-pkg-sftp-dev $(CROSS_PKGS)

test-deps:
	$(call apt_install,$(TEST_DEPS),$(CROSS_ARCHS))

# The manual page is installed as MANNAME(8), its examples naming the
# installed server.  The packages, which sit beside OpenSSH's (it owns
# sftp-server(8)), set MANNAME=fast-sftp-server.
MANNAME ?= sftp-server

install: sftp-server
	$(INSTALL) -d $(DESTDIR)$(libexecdir) $(DESTDIR)$(mandir)/man8
	$(INSTALL) -m 0755 sftp-server $(DESTDIR)$(libexecdir)/sftp-server
	sed -e 's|/usr/local/libexec/sftp-server|$(libexecdir)/sftp-server|g' \
	    -e '0,/^\.Nm sftp-server$$/s//.Nm $(MANNAME)/' \
	    man/sftp-server.8 > $(DESTDIR)$(mandir)/man8/$(MANNAME).8
	chmod 0644 $(DESTDIR)$(mandir)/man8/$(MANNAME).8

uninstall:
	rm -f $(DESTDIR)$(libexecdir)/sftp-server \
	    $(DESTDIR)$(mandir)/man8/$(MANNAME).8

clean:
	rm -rf build
	rm -f sftp-server sftp-server-asan sftp-server-tsan sftp-server-static \
	    $(OBJS) $(UNIT_TESTS) \
	    $(BENCH_PROGS) $(BENCH_GO) $(FUZZERS)
