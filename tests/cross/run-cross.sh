#!/usr/bin/env bash
# The server on other architectures and C libraries.
#
#   i386 armhf arm64 s390x: built with Debian's cross compilers (make
#       cross-ARCH cross-unit-ARCH: the server static, the unit tests with
#       the architecture's libcmocka), run natively where this kernel can
#       (i386 on x86-64) and under qemu-user otherwise (qemu-ARCH-static):
#       the unit tests, then protocol suites that need no sshd against the
#       server (the Python suites and sftp -D take it through a two-line
#       wrapper that execs qemu).  32-bit, big-endian and 64-bit others:
#       64-bit offsets and dates, wire integers built byte by byte.
#   musl: make static's binary when musl-gcc built it, natively: the
#       suites, and a check that it renames with renameat2(RENAME_NOREPLACE)
#       and copies with copy_file_range as the glibc build does.
#
# Suites: natively (i386) raw, confine, guarantees and sftp; under qemu raw,
# sftp and guarantees; musl raw, confine, guarantees, race, hostile and sftp.
# The others run against the x86-64 build in make check.
#
# What cannot run somewhere is skipped with the reason: an architecture
# without its cross compiler or qemu, unit tests without its libcmocka
# (make test-deps installs them all), under qemu the exhaustive unit tests
# of QEMU_UNIT_SKIP (minutes there, seconds natively in make unit), and the
# checks the suites skip themselves when $SFTP_EMULATED names the emulator
# (/proc/PID is qemu's) or the binary is static (no LD_PRELOAD shim).
# qemu-user 7.2 does not emulate openat2(2), so -r cannot start under it:
# the i386 build, run natively, and musl take the confinement suite.
#
# Usage: tests/cross/run-cross.sh [TARGET...]
#   TARGETs: i386 armhf arm64 s390x musl (the default: all of them)
#   JOBS        targets run at once (default: CPUs, at most 2)
#   UNIT_TESTS  the unit tests (tests/unit/test_NAME), as the Makefile has
#   STATIC_CC   the compiler of sftp-server-static (from make check-cross)
#   SUITES_NATIVE, SUITES_QEMU, SUITES_MUSL  the suites of tests/run-all.sh
#
# Output: per target, the suites' FAIL and skip lines and closing lines;
# then "N passed, M failed[, K skipped]" over all.  Exit status 1 if any
# failed.

set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/lib.sh
. "$HERE/../lib/lib.sh"

TARGETS=${*:-i386 armhf arm64 s390x musl}
UNIT_TESTS=${UNIT_TESTS:-$(cd "$REPO" && ls tests/unit/test_*.c | sed 's/\.c$//' | tr '\n' ' ')}
SUITES_NATIVE=${SUITES_NATIVE:-raw confine guarantees sftp}
SUITES_QEMU=${SUITES_QEMU:-raw sftp guarantees}
SUITES_MUSL=${SUITES_MUSL:-raw confine guarantees race hostile sftp atomic}
# Unit tests left out under qemu: each one's reason.
QEMU_UNIT_SKIP="test_ibuf_next_every_split_in_two_reads"
QEMU_UNIT_SKIP_WHY="exhaustive (every split of a 200 KiB stream): 5 s natively, minutes under qemu-user; make unit runs it"
NCPU=$(nproc 2>/dev/null || echo 1)
JOBS=${JOBS:-$((NCPU < 2 ? 1 : 2))}
export PYTHON=${PYTHON:-/usr/bin/python3}
export LC_ALL=C
START=$SECONDS

T=$(mktemp -d) || setup_failed "expected mktemp -d to work, got an error"
# The qemu wrappers are in here: the sftp suite's test user runs them.
chmod 0755 "$T"
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP

# Each architecture: its cross compiler's prefix, the directory of its
# libraries under Debian multiarch, and its qemu-user.
ARCHS="i386 i686-linux-gnu i386-linux-gnu qemu-i386-static
armhf arm-linux-gnueabihf arm-linux-gnueabihf qemu-arm-static
arm64 aarch64-linux-gnu aarch64-linux-gnu qemu-aarch64-static
s390x s390x-linux-gnu s390x-linux-gnu qemu-s390x-static"
arch_field() { printf '%s\n' "$ARCHS" | awk -v a="$1" -v n="$2" '$1 == a { print $n }'; }
triplet() { arch_field "$1" 2; }
multiarch() { arch_field "$1" 3; }
qemu_of() { arch_field "$1" 4; }

# suites NAME SERVER SUITES [ENV...]: tests/run-all.sh, its lines but the
# "ok" ones, each closing line added up
suites() {
    local name=$1 server=$2 list=$3 out rc line
    shift 3
    out=$(cd "$REPO" && env "$@" SUITES="$list" tests/run-all.sh "$server" 2>&1)
    rc=$?
    printf '%s\n' "$out" | grep -E '^(FAIL|skip) |^   [a-z-]+: ' |
        sed -E "s/^   /   $name /; s/^(FAIL|skip) - /\1 - $name: /"
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
    if [ -z "$line" ]; then
        fail "$name suites ($list)" "expected a closing line from tests/run-all.sh, got: $(printf '%s' "$out" | tail -n 5 | tr '\n' ' ')"
    elif [ "$rc" -ne 0 ] && ! printf '%s' "$line" | grep -q ', [1-9][0-9]* failed'; then
        fail "$name suites ($list)" "expected exit status 0 with '$line', got $rc"
    fi
    add_counts "$line"
}

# unit NAME BINARY [RUNNER...]: a cmocka test binary, its counts added up
unit() {
    local name=$1 bin=$2 out rc p f
    shift 2
    out=$("$@" "$bin" 2>&1)
    rc=$?
    p=$(printf '%s\n' "$out" | sed -nE 's/^\[  PASSED  \] ([0-9]+) test.*/\1/p' | tail -n 1)
    f=$(printf '%s\n' "$out" | sed -nE 's/^\[  FAILED  \] ([0-9]+) test.*/\1/p' | tail -n 1)
    if [ -z "$p" ] && [ -z "$f" ]; then
        fail "$name $(basename "$bin")" "expected cmocka's summary, got exit $rc: $(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')"
        return
    fi
    # A failed test's lines, and cmocka's ERROR line of each, which says
    # what failed (fail_msg()).
    printf '%s\n' "$out" | grep -E '^\[  (FAILED|ERROR)  \] test_|^ERROR: ' | sed "s/^/FAIL - $name $(basename "$bin"): /"
    printf '   %s unit %s: %d passed, %d failed\n' "$name" "$(basename "$bin")" "${p:-0}" "${f:-0}"
    PASSED=$((PASSED + ${p:-0}))
    FAILED=$((FAILED + ${f:-0}))
    if [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then
        fail "$name $(basename "$bin")" "expected exit status 0 with no failed test, got $rc"
    fi
}

# arch ARCH: one architecture's unit tests and suites
arch() {
    local a=$1 tri q bin exe=() mode t s skipped
    tri=$(triplet "$a")
    q=$(qemu_of "$a")
    if ! command -v "$tri-gcc" >/dev/null 2>&1; then
        skip "$a" "no $tri-gcc (Debian: gcc-$tri; make test-deps installs it)"
        return
    fi
    bin=$REPO/build/$a/sftp-server
    if [ ! -x "$bin" ]; then
        fail "$a: make cross-$a" "expected build/$a/sftp-server, got none: $(tail -n 3 "$T/build.log" | tr '\n' ' ')"
        return
    fi
    if "$bin" -Q requests > /dev/null 2>&1; then
        mode=native
    elif command -v "$q" >/dev/null 2>&1; then
        mode=$q
        exe=("$q")
    else
        skip "$a" "this kernel cannot run $a binaries and there is no $q (Debian: qemu-user-static)"
        return
    fi
    echo "== $a ($tri, $mode)"

    # The unit tests, linked with the architecture's libcmocka.
    skipped=""
    for t in $UNIT_TESTS; do
        t=$(basename "$t")
        if [ ! -e "/usr/lib/$(multiarch "$a")/libcmocka.so" ]; then
            skip "$a unit $t" "no libcmocka for $a (Debian multiarch: libcmocka-dev:$a; make test-deps installs it)"
            continue
        elif [ ! -x "$REPO/build/$a/$t" ]; then
            fail "$a unit $t: make cross-unit-$a" "expected build/$a/$t, got none: $(grep -m1 -E "error" "$T/build.log" | cut -c1-200)"
            continue
        fi
        if [ "$mode" = native ]; then
            unit "$a" "$REPO/build/$a/$t"
        else
            # The arena's and the input buffer's models: a tenth of
            # their steps (seconds natively).
            JOBS_MODEL_STEPS=200000 IBUF_MODEL_STEPS=100000 \
                CMOCKA_SKIP="$QEMU_UNIT_SKIP" \
                unit "$a" "$REPO/build/$a/$t" "${exe[@]}"
            for s in $QEMU_UNIT_SKIP; do
                grep -q "$s" "$REPO/tests/unit/$t.c" && skipped="$skipped $s"
            done
        fi
    done
    for s in $skipped; do
        skip "$a unit $s" "$QEMU_UNIT_SKIP_WHY"
    done

    # The suites.
    if [ "$mode" = native ]; then
        suites "$a" "$bin" "$SUITES_NATIVE"
    else
        mkdir -p "$T/$a"
        # The wrapper runs a copy beside it: the suites' other users run it,
        # and the tree may be closed to them (a clone in a home of 0700).
        cp "$bin" "$T/$a/sftp-server-$a" && chmod 0755 "$T/$a/sftp-server-$a"
        printf '#!/bin/sh\nexec %s %s "$@"\n' "$q" "$T/$a/sftp-server-$a" > "$T/$a/sftp-server"
        chmod 0755 "$T/$a/sftp-server"
        case " $SUITES_QEMU " in
        *" confine "*) ;;
        *) skip "$a suite confine" "-r needs openat2(2), which $q does not emulate; the builds that run natively take the confinement suite" ;;
        esac
        suites "$a" "$T/$a/sftp-server" "$SUITES_QEMU" SFTP_EMULATED="$q"
    fi
}

# musl: make static's binary, when musl built it
musl() {
    local bin=$REPO/sftp-server-static d
    case $(basename "${STATIC_CC:-}") in
    *musl*) ;;
    *)
        skip "musl" "sftp-server-static was built with ${STATIC_CC:-cc}: no musl-gcc (Debian: musl-tools; make test-deps installs it)"
        return
        ;;
    esac
    if [ ! -x "$bin" ]; then
        fail "musl: make static" "expected sftp-server-static, got none"
        return
    fi
    echo "== musl (${STATIC_CC}, static)"
    suites musl "$bin" "$SUITES_MUSL"

    # The calls only a libc wrapper or syscall(2) gives: the same as glibc's.
    if ! command -v strace >/dev/null 2>&1 || ! command -v sftp >/dev/null 2>&1; then
        skip "musl: renameat2 and copy_file_range" "no strace or sftp"
        return
    fi
    d=$T/musl-calls
    mkdir -p "$d"
    printf 'x%.0s' $(seq 1 1000) > "$d/a"
    printf 'rename a b\ncp b c\n' > "$d/batch"
    # Without posix-rename offered, sftp's rename is RENAME, which refuses
    # an existing target.
    (cd "$d" && timeout 60 strace -f -qq -e trace=renameat2,copy_file_range \
        -o "$d/trace" sftp -q -b batch -D "$bin -P posix-rename" \
        > out 2> err < /dev/null)
    if grep -q 'renameat2(.*RENAME_NOREPLACE' "$d/trace"; then
        pass "musl: RENAME with renameat2(RENAME_NOREPLACE)"
    else
        fail "musl: RENAME with renameat2(RENAME_NOREPLACE)" "expected a renameat2 call, got: $(head -c 300 "$d/trace" | tr '\n' ' ')"
    fi
    if grep -q 'copy_file_range(' "$d/trace" && cmp -s "$d/b" "$d/c"; then
        pass "musl: copy-data with copy_file_range"
    else
        fail "musl: copy-data with copy_file_range" "expected a copy_file_range call and c equal to b, got: $(head -c 300 "$d/trace" | tr '\n' ' ') $(oneline "$d/err")"
    fi
}

# The builds, in one make: what is missing fails here and is reported per
# target below.
BUILD=""
for a in $TARGETS; do
    [ "$a" = musl ] && continue
    command -v "$(triplet "$a")-gcc" >/dev/null 2>&1 && BUILD="$BUILD cross-$a cross-unit-$a"
done
if [ -n "$BUILD" ]; then
    # shellcheck disable=SC2086
    make -C "$REPO" -k -j"$JOBS" UNIT_TESTS="$UNIT_TESTS" $BUILD > "$T/build.log" 2>&1
    printf '# built%s in %d s\n' "$BUILD" $((SECONDS - START))
fi

# Each target's lines and counts go to a file of its own, JOBS at once.
run_target() {
    PASSED=0 FAILED=0 SKIPPED=0
    case $1 in
    musl) musl ;;
    i386 | armhf | arm64 | s390x) arch "$1" ;;
    *) fail "$1" "expected a target among i386 armhf arm64 s390x musl" ;;
    esac
    printf '%s %s %s\n' "$PASSED" "$FAILED" "$SKIPPED" > "$T/$1.counts"
}
for a in $TARGETS; do
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do
        wait -n
    done
    run_target "$a" > "$T/$a.out" 2>&1 &
done
wait
PASSED=0 FAILED=0 SKIPPED=0
for a in $TARGETS; do
    cat "$T/$a.out"
    read -r p f k < "$T/$a.counts" || { p=0 f=1 k=0; echo "FAIL - $a: no counts"; }
    PASSED=$((PASSED + p)) FAILED=$((FAILED + f)) SKIPPED=$((SKIPPED + k))
done
printf '# %d s\n' $((SECONDS - START))
summary
