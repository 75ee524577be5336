#!/usr/bin/env bash
# Drop-in parity tests: the server under test against OpenSSH's sftp-server
# (the reference), through the OpenSSH sftp client (sftp -D) and on the
# command line.  Every extension through the client command that uses it,
# every option, the log lines of a scripted session at INFO, VERBOSE and
# DEBUG3 (stderr and syslog), and the manual page.
#
# Usage: tests/clients/run-parity.sh
#   SFTP_SERVER     server binary; default: sftp-server in the repository root
#   SFTP_REFERENCE  reference server; default: /usr/lib/openssh/sftp-server
#   CC              C compiler for the syslog capture library (default: cc)
#   PARITY_KEEP     if set, keep the scratch directory (logs in its res/)
#
# The server under test is copied into the scratch directory first and run
# from there.  Both servers run one after the other in the same scratch
# directory, with the same TZ, umask and environment, so that their logs
# can be compared line by line.  Documented, intended differences from OpenSSH 9.2 are
# handled explicitly (see tests/clients/parity_logcmp.py):
#   - our extra VERBOSE line `transfer "NAME" S s R MiB/s` after each close;
#   - OpenSSH 9.2's miscounted `users-groups-by-id: N users, M groups`
#     (fixed in OpenSSH 10.3; we print the right counts).
#   - the server's own requests (check-file), those its -Q requests lists
#     beyond the reference's: their lines are left out.
# Run with SFTP_SERVER set to the reference itself, the suite checks the
# reference's side of each documented difference instead of ours.
#
# Output: one "ok - NAME" / "FAIL - NAME: ..." / "skip - NAME: ..." line per
# check, then "N passed, M failed[, K skipped]". Exit status 1 if any failed.

set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/lib.sh
. "$HERE/../lib/lib.sh"

SFTP_SERVER=$(server_path "${SFTP_SERVER:-}")
REF=${SFTP_REFERENCE:-/usr/lib/openssh/sftp-server}
PY=/usr/bin/python3
MAN=$REPO/man/sftp-server.8

T=$(mktemp -d) || setup_failed "expected mktemp -d to work, got an error"
cleanup() {
    if [ -n "${PARITY_KEEP:-}" ]; then echo "# kept $T"; return; fi
    remove_tree "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP PIPE
T=$(cd "$T" && pwd -P)

# The same conditions for both servers.
export LC_ALL=C
export TZ=ABC-3
umask 022
unset SSH_CONNECTION SSH_CLIENT

need_server "$SFTP_SERVER"
need_sftp
case $T in *[[:space:]]*)
    # sftp -D splits its argument on white space.
    fail "setup" "expected a temporary directory without white space, got '$T'"
    summary; exit 1 ;;
esac

HAVE_REF=0
[ -x "$REF" ] && HAVE_REF=1
IS_REF=0
[ "$HAVE_REF" = 1 ] && [ "$SFTP_SERVER" -ef "$REF" ] && IS_REF=1
NOREF="reference server $REF not installed"

# The server's own requests (check-file): those its -Q requests lists and
# the reference's does not.  Their log lines are a documented difference,
# left out of the comparisons (parity_logcmp.py).
PARITY_OWN_REQUESTS=
if [ "$HAVE_REF" = 1 ] && [ "$IS_REF" = 0 ]; then
    PARITY_OWN_REQUESTS=$(comm -23 <("$SFTP_SERVER" -Q requests | sort) \
        <("$REF" -Q requests | sort) | tr '\n' ' ')
fi
export PARITY_OWN_REQUESTS

# A private copy of the server under test, named as OpenSSH's is (the name
# shows in usage and syslog): a rebuild while the suite runs cannot leave it
# without a binary or mix two builds, and a sanitizer build answers to the
# same name.
mkdir "$T/under-test"
if cp "$SFTP_SERVER" "$T/under-test/sftp-server"; then
    SFTP_SERVER=$T/under-test/sftp-server
else
    fail "setup" "expected to copy $SFTP_SERVER, got an error"
    summary; exit 1
fi

ME=$(id -un)
MYUID=$(id -u)
MYGID=$(id -g)
MYHOME=$(getent passwd "$MYUID" | cut -d: -f6)
ROOTHOME=$(getent passwd root | cut -d: -f6)

W=$T/w          # scratch area: W/r is the servers' cwd, W/l the client's
RES=$T/res      # results: NAME.{out,err,log,rc}
mkdir "$RES"

# The server wrapper: sftp -D runs it; it sends the server's stderr to
# $PARITY_LOG (so that log lines and client messages do not interleave) and
# loads the syslog capture library when $PARITY_PRELOAD is set.
cat > "$T/srv" <<'EOF'
#!/bin/sh
if [ -n "${PARITY_PRELOAD:-}" ]; then
    LD_PRELOAD=$PARITY_PRELOAD
    export LD_PRELOAD
fi
exec "$PARITY_SERVER" "$@" 2>>"$PARITY_LOG"
EOF
chmod 755 "$T/srv"

# The syslog capture library (see tests/clients/parity-syslog.c).  A sanitizer
# build must accept it ahead of its runtime.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
SHIM=
SHIM_WHY="no C compiler (${CC:-cc}) to build tests/clients/parity-syslog.c"
if command -v "${CC:-cc}" >/dev/null 2>&1; then
    if "${CC:-cc}" -shared -fPIC -o "$T/parity-syslog.so" "$HERE/parity-syslog.c" 2>"$T/cc.err"; then
        SHIM=$T/parity-syslog.so
    else
        SHIM_WHY="tests/clients/parity-syslog.c does not build: $(head -c 200 "$T/cc.err")"
    fi
fi

# oneline FILE: lib.sh's, with carriage returns too, in 300 characters
oneline() { tr '\n\r' '  ' < "$1" | cut -c1-300; }
q() { printf '%s' "$1" | tr '\n\r' '  ' | cut -c1-300; }

# fresh: recreate the scratch area with the same files, modes and times.
fresh() {
    chmod -R u+rwx "$W" 2>/dev/null
    rm -rf "$W"
    mkdir -p "$W/r/sub" "$W/l"
    printf 'hello\n' > "$W/l/small"
    printf 'other\n' > "$W/l/small2"
    head -c 1100000 "$T/random" > "$W/l/big"
    head -c 1500000 "$T/random" > "$W/l/huge"
    printf 'remote file\n' > "$W/r/file"
    printf 'existing\n' > "$W/r/exists"
    printf 'in sub\n' > "$W/r/sub/in"
    chmod 0644 "$W/l/"* "$W/r/file" "$W/r/exists" "$W/r/sub/in"
    touch -h -d '2021-02-03 04:05:06' "$W/l/"* "$W/r/file" "$W/r/exists" "$W/r/sub/in" "$W/r/sub"
}
head -c 2000000 /dev/urandom > "$T/random"

# run TAG BINARY "ARGS" BATCH-FILE [ENV-ASSIGNMENT...]
# One sftp -D session in W/r; results in RES/TAG.{out,err,log,rc,syslog}.
run() {
    local tag=$1 bin=$2 args=$3 batch=$4
    shift 4
    : > "$RES/$tag.log"
    rm -f "$RES/$tag.syslog"
    (cd "$W/r" && exec env PARITY_SERVER="$bin" PARITY_LOG="$RES/$tag.log" \
        PARITY_SYSLOG="$RES/$tag.syslog" "$@" \
        timeout 60 sftp -q -D "$T/srv${args:+ $args}" -b "$batch") \
        > "$RES/$tag.out" 2> "$RES/$tag.err" < /dev/null
    echo $? > "$RES/$tag.rc"
    [ -e "$RES/$tag.syslog" ] || : > "$RES/$tag.syslog"
}

# both TAG "ARGS" BATCH-FILE [SETUP-FUNCTION [ENV-ASSIGNMENT...]]
# The same session against a fresh scratch area with the server under test
# (RES/TAG.test.*) and the reference (RES/TAG.ref.*); after it, W holds what
# the server under test left (the reference ran first).
both() {
    local tag=$1 args=$2 batch=$3 setup=${4:-}
    shift 3; [ $# -gt 0 ] && shift
    if [ "$HAVE_REF" = 1 ]; then
        fresh; [ -n "$setup" ] && $setup
        run "$tag.ref" "$REF" "$args" "$batch" "$@"
        snapshot > "$RES/$tag.ref.tree"
    fi
    fresh; [ -n "$setup" ] && $setup
    run "$tag.test" "$SFTP_SERVER" "$args" "$batch" "$@"
    snapshot > "$RES/$tag.test.tree"
}

# snapshot: the remote tree (names, types, modes, sizes, link counts)
snapshot() { (cd "$W/r" && find . -printf '%p %y %m %s %n\n' | sort); }

# cmp_files NAME WHAT TEST-FILE REF-FILE [--client]
cmp_files() {
    local name=$1 what=$2 a=$3 b=$4 msg
    shift 4
    if msg=$("$PY" "$HERE/parity_logcmp.py" cmp "$@" --mask "$T=@T" "$a" "$b"); then
        pass "$name"
    else
        fail "$name" "expected $what as the reference's, got $msg"
    fi
}

# cmp_session NAME TAG [log|out|err|syslog|tree|rc]...: compare parts of a
# both() session with the reference's.
cmp_session() {
    local name=$1 tag=$2 part msg opt bad=""
    shift 2
    if [ "$HAVE_REF" = 0 ]; then skip "$name" "$NOREF"; return; fi
    for part in "$@"; do
        opt=           # client output: --client masks df numbers, ls dates
        case $part in out|err) opt=--client ;; esac
        if ! msg=$("$PY" "$HERE/parity_logcmp.py" cmp ${opt:+"$opt"} --mask "$T=@T" \
                "$RES/$tag.test.$part" "$RES/$tag.ref.$part"); then
            bad="$bad${bad:+; }$part: $msg"
        fi
    done
    if [ -z "$bad" ]; then
        pass "$name"
    else
        fail "$name" "expected the same as the reference, got $(q "$bad")"
    fi
}

# has TAG PART REGEX: RES/TAG.PART has a line matching the extended REGEX
has() { tr -d '\r' < "$RES/$1.$2" | grep -Eq -- "$3"; }

# check NAME CONDITION-COMMAND... -- EXPECTED-TEXT GOT-TEXT
check() {
    local name=$1; shift
    local cmd=() expected got
    while [ "$1" != "--" ]; do cmd+=("$1"); shift; done
    shift; expected=$1 got=$2
    if "${cmd[@]}"; then pass "$name"; else fail "$name" "expected $expected, got $(q "$got")"; fi
}

# ---------------------------------------------------------------------------
# Command line: -h, bad options, -Q, -l, -f, -u, -P, -p (no client)

# cli NAME [ENV...] -- ARGS...: run both servers with ARGS (stdin /dev/null)
# and compare exit status, stdout and stderr; with CLI_SYSLOG set, what they
# sent to syslog too (needs the capture library).
cli() {
    local name=$1; shift
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    if [ "$HAVE_REF" = 0 ]; then skip "$name" "$NOREF"; return; fi
    local who bin diffs=""
    for who in test ref; do
        bin=$SFTP_SERVER; [ $who = ref ] && bin=$REF
        rm -f "$RES/cli.$who.syslog"
        (cd "$W/r" && exec env ${SHIM:+LD_PRELOAD=$SHIM} PARITY_SYSLOG="$RES/cli.$who.syslog" \
            "${envs[@]}" timeout 10 "$bin" "$@") \
            > "$RES/cli.$who.out" 2> "$RES/cli.$who.err" < /dev/null
        echo $? > "$RES/cli.$who.rc"
        [ -e "$RES/cli.$who.syslog" ] || : > "$RES/cli.$who.syslog"
    done
    local part msg ref
    local parts="rc out err"
    # Documented exception: -A (atomic uploads), -b (bandwidth limits),
    # -L (the transfer log), -M and -m (forced modes), -r (confinement),
    # -S (no sandbox) and -T (storage operations in flight) are this
    # server's own options, so its usage text names them and OpenSSH's does
    # not; without them, its lines joined and broken again before
    # [-P denied_requests], it is OpenSSH's.
    if [ -z "${CLI_OWN_USAGE:-}" ]; then
        sed -e ':a' -e 'N' -e '$!ba' -e 's/\n\t/ /g' \
            -e 's/\[-AehRS\]/[-ehR]/; s/\[-b down\[:up\]\] //; s/\[-L transfer_log\] //' \
            -e 's/\[-M dir_mode\] //; s/\[-m file_mode\] //' \
            -e 's/\[-r root_directory\] //; s/\[-T storage_ops\] //' \
            -e 's/ \[-P denied_requests\]/\n\t[-P denied_requests]/' \
            "$RES/cli.test.err" > "$RES/cli.test.err.tmp" &&
            mv "$RES/cli.test.err.tmp" "$RES/cli.test.err"
    fi
    [ -n "${CLI_SYSLOG:-}" ] && parts="$parts syslog"
    for part in $parts; do
        ref=$RES/cli.ref.$part
        # With CLI_OWN_USAGE set, stderr must be the server's own -h text
        # (the usage text itself is compared once, by the -h test).
        [ $part = err ] && [ -n "${CLI_OWN_USAGE:-}" ] && ref=$RES/usage.test
        if ! msg=$("$PY" "$HERE/parity_logcmp.py" cmp --mask "$T=@T" \
                "$RES/cli.test.$part" "$ref"); then
            diffs="$diffs${diffs:+; }$part: $msg"
        fi
    done
    if [ -z "$diffs" ]; then
        pass "$name"
    else
        fail "$name" "expected ${parts// /, } as the reference's (exit status $(q "$(cat "$RES/cli.ref.rc")")), got $(q "$diffs")"
    fi
}

fresh
if [ -z "$SHIM" ]; then
    skip "syslog capture" "$SHIM_WHY; syslog lines are not compared"
fi

cli "-h: exit status and usage text" -- -h
cli "bad option -x: exit status and usage text" -- -x
"$SFTP_SERVER" -h > /dev/null 2> "$RES/usage.test" < /dev/null
CLI_OWN_USAGE=1
cli "-e -h: usage even with other options first" -- -e -R -h
cli "bad option -x after good ones" -- -e -l INFO -x
cli "--help is a bad option" -- --help
cli "-d without its argument" -- -d
cli "-Q without its argument" -- -Q
cli "-u without its argument" -- -u
CLI_OWN_USAGE=
cli "extra operands are ignored" -- -e -l INFO extra operand
cli "-c stops option parsing" -- -e -l INFO -c -x
cli "-Q requests: the list of request names" -- -Q requests
cli "-Q REQUESTS: query type in any case" -- -Q ReQuEsTs
cli "-Q bad value" -- -Q bad
cli "-Q protocol-features is not a query" -- -Q protocol-features
cli "-Q empty value" -- -Q ""
cli "-l bad value" -- -l BAD
cli "-l bad value with -e" -- -e -l BAD
cli "-l bad value then a good one" -- -e -l BAD -l INFO
cli "-l debug (any case)" -- -e -l debug
cli "-f bad value" -- -f BAD
cli "-f bad value with -e" -- -e -l INFO -f BAD
for u in 8 0778 1000 abc "" -1 0x1 "7 " 99999999999999999999999 "0 7"; do
    cli "-u '$u' is refused (exit 255)" -- -e -u "$u"
done
for u in 0 077 0777 "+7" " 7" -0; do
    cli "-u '$u' is accepted" -- -e -l INFO -u "$u"
done
cli "-P given twice is fatal" -- -e -P read -P write
cli "-p given twice is fatal" -- -e -p read -p write
cli "-d with an unknown %x token is fatal" -- -e -d "$T/%x"
cli "-d ending in a lone % is fatal" -- -e -d "$T/a%"
cli "-d ~nosuchuser is fatal" -- -e -d "~parity-no-such-user"
cli "SSH_CONNECTION set: session opened ... from [10.0.0.1]" \
    "SSH_CONNECTION=10.0.0.1 5555 10.0.0.2 22" -- -e -l INFO
cli "SSH_CONNECTION malformed (no space): exit 255 and log lines" \
    "SSH_CONNECTION=10.0.0.1" -- -e -l INFO
cli "SSH_CONNECTION empty: malformed" "SSH_CONNECTION=" -- -e -l INFO

# What goes to syslog: before the options are read (option errors), and
# without -e.  OpenSSH's syslog lines of level ERROR and FATAL start with
# "error: " and "fatal: ".
if [ -n "$SHIM" ]; then
    CLI_SYSLOG=1
    cli "syslog: by default, facility AUTH" -- -l INFO
    cli "syslog: -f local5 (any case)" -- -l INFO -f local5
    cli "syslog: -f AUTHPRIV" -- -l VERBOSE -f AUTHPRIV
    cli "syslog: chdir failure (an ERROR line)" -- -d "$T/no-such-dir"
    cli "syslog: -l bad value" -- -e -l BAD -l INFO
    cli "syslog: -f bad value" -- -e -f BAD
    cli "syslog: -u bad value (a FATAL line)" -- -e -u 8
    cli "syslog: -P given twice" -- -e -P read -P write
    cli "syslog: -p given twice" -- -e -p read -p write
    cli "syslog: -d with an unknown %x token" -- -e -d "$T/%x"
    cli "syslog: -d ending in a lone %" -- -e -d "$T/a%"
    cli "syslog: -d ~nosuchuser" -- -e -d "~parity-no-such-user"
    cli "syslog: SSH_CONNECTION malformed" "SSH_CONNECTION=10.0.0.1" -- -l INFO
    CLI_SYSLOG=
fi

# The program name as invoked names the program in usage and syslog
# (OpenSSH uses the base name of argv[0]); invoked through symbolic links.
mkdir -p "$T/bin.test" "$T/bin.ref"
if [ "$HAVE_REF" = 1 ]; then
    ln -s "$SFTP_SERVER" "$T/bin.test/my-sftpd"; ln -s "$REF" "$T/bin.ref/my-sftpd"
    ln -s "$SFTP_SERVER" "$T/bin.test/internal-sftp"; ln -s "$REF" "$T/bin.ref/internal-sftp"
    timeout 10 "$T/bin.test/my-sftpd" -h > /dev/null 2> "$RES/argv0.test" < /dev/null
    timeout 10 "$T/bin.ref/my-sftpd" -h > /dev/null 2> "$RES/argv0.ref" < /dev/null
    # The usage text itself is compared by the -h test; here only the name.
    sed 's/sftp-server/my-sftpd/g' "$RES/usage.test" > "$RES/argv0.expect"
    if ! grep -q my-sftpd "$RES/argv0.ref"; then
        fail "usage text names the program as invoked (my-sftpd -h)" "expected the reference to say my-sftpd, got $(oneline "$RES/argv0.ref")"
    else
        cmp_files "usage text names the program as invoked (my-sftpd -h)" "the usage text (-h, with my-sftpd for sftp-server)" \
            "$RES/argv0.test" "$RES/argv0.expect"
    fi
    if [ -n "$SHIM" ]; then
        for who in test ref; do
            : > "$RES/argv0s.$who"
            LD_PRELOAD=$SHIM PARITY_SYSLOG=$RES/argv0s.$who timeout 10 "$T/bin.$who/internal-sftp" -l INFO \
                < /dev/null > /dev/null 2>&1
        done
        cmp_files "syslog ident is the program name as invoked (internal-sftp)" "the syslog lines" \
            "$RES/argv0s.test" "$RES/argv0s.ref"
    else
        skip "syslog ident is the program name as invoked (internal-sftp)" "$SHIM_WHY"
    fi
else
    skip "usage text names the program as invoked" "$NOREF"
fi

# ---------------------------------------------------------------------------
# Every extension through the client command that uses it

# posix-rename (rename) and legacy rename (rename -l)
cat > "$T/b.rename" <<EOF
rename file renamed
rename renamed exists
rename -l exists legacy
-rename -l legacy sub/in
EOF
both rename "-e -l VERBOSE" "$T/b.rename"
# "legacy" holds what was "file": renamed onto "exists", then renamed -l.
check "rename: posix-rename replaces an existing target" \
    test "$(cat "$W/r/legacy" 2>&1)" = "remote file" -- "the content of the renamed file" "$(cat "$W/r/legacy" 2>&1)"
check "rename: logged as posix-rename" has rename.test log '^posix-rename old "[^"]*/r/file" new "[^"]*/r/renamed"$' -- \
    "posix-rename old \".../file\" new \".../renamed\"" "$(oneline "$RES/rename.test.log")"
check "rename -l: logged as legacy rename" has rename.test log '^rename old "[^"]*/r/exists" new "[^"]*/r/legacy"$' -- \
    "rename old \".../exists\" new \".../legacy\"" "$(oneline "$RES/rename.test.log")"
check "rename -l onto an existing file fails" has rename.test err 'remote rename .*sub/in.*: Failure' -- \
    "remote rename ... Failure" "$(oneline "$RES/rename.test.err")"
cmp_session "rename, rename -l: client output, log and files as the reference" rename out err log tree

# statvfs (df, df -i)
printf 'df\ndf -i\ndf -h sub\n' > "$T/b.df"
both df "-e -l VERBOSE" "$T/b.df"
check "df: statvfs logged" has df.test log '^statvfs "[^"]*/r"$' -- 'statvfs ".../r"' "$(oneline "$RES/df.test.log")"
check "df: a row of numbers" has df.test out '^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+%$' -- "a df row" "$(oneline "$RES/df.test.out")"
check "df -i: inode header" has df.test out '^ +Inodes +Used +Avail +\(root\) +%Capacity$' -- "the df -i header" "$(oneline "$RES/df.test.out")"
cmp_session "df, df -i, df -h: client output (numbers masked) and log as the reference" df out err log

# The numbers themselves, against statvfs(2) of the same directory: the
# totals only (free space and free inodes move with whatever else runs).
want=$(stat -f -c '%c' "$W/r")
got=$(tr -d '\r' < "$RES/df.test.out" | awk '/Inodes/ {getline; print $1; exit}')
check "df -i: total inodes from statvfs" test "$want" = "$got" -- "$want" "$got"
want=$(stat -f -c '%b %S' "$W/r" | awk '{printf "%d", $1 * $2 / 1024}')
got=$(tr -d '\r' < "$RES/df.test.out" | awk '/Size/ {getline; print $1; exit}')
check "df: size in KiB from statvfs" test "$want" = "$got" -- "$want" "$got"

# hardlink (ln)
printf 'ln file hard\nln -s file soft\n' > "$T/b.ln"
both ln "-e -l VERBOSE" "$T/b.ln"
check "ln: a hard link (same inode)" test "$(stat -c %i "$W/r/file")" = "$(stat -c %i "$W/r/hard" 2>/dev/null)" -- \
    "the same inode" "$(ls -li "$W/r" 2>&1)"
check "ln: logged as hardlink" has ln.test log '^hardlink old "[^"]*/r/file" new "[^"]*/r/hard"$' -- \
    "hardlink old ... new ..." "$(oneline "$RES/ln.test.log")"
check "ln -s: logged as symlink (target as given)" has ln.test log '^symlink old "file" new "[^"]*/r/soft"$' -- \
    "symlink old \"file\" new ..." "$(oneline "$RES/ln.test.log")"
cmp_session "ln, ln -s: client output, log and files as the reference" ln out err log tree

# fsync (put -f)
printf 'lcd %s\nput -f small synced\nput small unsynced\n' "$W/l" > "$T/b.fsync"
both fsync "-e -l VERBOSE" "$T/b.fsync"
check "put -f: fsync logged" has fsync.test log '^fsync "[^"]*/r/synced"$' -- 'fsync ".../synced"' "$(oneline "$RES/fsync.test.log")"
check "put without -f: no fsync" eval '! has fsync.test log "^fsync \"[^\"]*/r/unsynced\""' -- "no fsync line for unsynced" "$(oneline "$RES/fsync.test.log")"
cmp_session "put -f: client output, log and files as the reference" fsync out err log tree

# lsetstat (chmod -h, chgrp -h, chown -h)
if echo help | timeout 10 sftp -D "$SFTP_SERVER" -b - 2>/dev/null | grep -q 'chmod \[-h\]'; then
    printf 'ln -s file soft\nchmod -h 600 file\n-chmod -h 640 soft\nchgrp -h %s file\n' "$MYGID" > "$T/b.lset"
    both lset "-e -l DEBUG1" "$T/b.lset"
    check "chmod -h: mode set" test "$(stat -c %a "$W/r/file")" = 600 -- "mode 600" "$(stat -c %a "$W/r/file")"
    check "chmod -h: sent as lsetstat" has lset.test log '^debug1: request [0-9]+: lsetstat name "[^"]*/r/file"$' -- \
        "debug1: request N: lsetstat name \".../file\"" "$(oneline "$RES/lset.test.log")"
    check "chmod -h on a symbolic link: Failure (Linux)" has lset.test err 'remote lsetstat .*soft.*: Failure' -- \
        "remote lsetstat ...soft...: Failure" "$(oneline "$RES/lset.test.err")"
    cmp_session "chmod -h, chgrp -h: client output, DEBUG1 log and files as the reference" lset out err log tree
else
    skip "chmod -h" "this sftp client has no chmod -h"
fi

# copy-data (cp)
printf 'cp file copy\n-cp file file\n-cp missing copy2\n' > "$T/b.cp"
both cp-v "-e -l VERBOSE" "$T/b.cp"
cmp_session "cp: client output, VERBOSE log and files as the reference" cp-v out err log tree
both cp "-e -l DEBUG1" "$T/b.cp"
check "cp: the copy has the content" test "$(cat "$W/r/copy" 2>&1)" = "remote file" -- "remote file" "$(cat "$W/r/copy" 2>&1)"
check "cp: sent as copy-data" has cp.test log '^debug1: request [0-9]+: copy-data from "[^"]*/r/file" \(handle [0-9]+\) off 0 len 0 to "[^"]*/r/copy" \(handle [0-9]+\) off 0$' -- \
    "debug1: request N: copy-data from ... to ..." "$(oneline "$RES/cp.test.log")"
# Onto the same file under another name: OpenSSH 10.4 refuses it with an
# ERROR line, which this server follows; the reference, 9.2, copies.
printf -- '-cp file hard\n-cp file soft\n' > "$T/b.cp-same"
same_file() { ln "$W/r/file" "$W/r/hard"; ln -s file "$W/r/soft"; }
both cp-same "-e" "$T/b.cp-same" same_file
check "cp onto a hard link of itself: Failure (as OpenSSH 10.4)" has cp-same.test err '^Couldn.t copy file "[^"]*/r/file" to "[^"]*/r/hard": Failure$' -- \
    "Couldn't copy file .../file to .../hard: Failure" "$(oneline "$RES/cp-same.test.err")"
check "cp onto a symbolic link to itself: Failure (as OpenSSH 10.4)" has cp-same.test err '^Couldn.t copy file "[^"]*/r/file" to "[^"]*/r/soft": Failure$' -- \
    "Couldn't copy file .../file to .../soft: Failure" "$(oneline "$RES/cp-same.test.err")"
check "cp onto itself under another name: two ERROR lines (as OpenSSH 10.4)" \
    test "$(tr -d '\r' < "$RES/cp-same.test.log" | grep -cx 'process_extended_copy_data: read and write handles refer to the same file')" = 2 -- \
    "two lines 'process_extended_copy_data: read and write handles refer to the same file'" "$(oneline "$RES/cp-same.test.log")"
if [ "$HAVE_REF" = 1 ]; then
    printf '# cp onto itself, the reference %s: %s\n' "$REF" \
        "$(tr -d '\r' < "$RES/cp-same.ref.err" | grep -c "^Couldn.t copy") of 2 refused"
fi

# users-groups-by-id (ls -l names)
# As root, "file" is given to uid/gid 65534 (nobody); otherwise the names
# are the user's own.
OWN_U=$ME OWN_G=$(id -gn)
if [ "$MYUID" = 0 ] && getent passwd 65534 >/dev/null && getent group 65534 >/dev/null; then
    OWN_U=$(getent passwd 65534 | cut -d: -f1)
    OWN_G=$(getent group 65534 | cut -d: -f1)
    owned() { chown -h 65534:65534 "$W/r/file"; chown -h 65534:0 "$W/r/exists"; }
else
    owned() { :; }
fi
printf 'ls -l\nls -ln\n' > "$T/b.ls"
both ls "-e -l VERBOSE" "$T/b.ls" owned
check "ls -l: user and group names from users-groups-by-id" \
    has ls.test out "^-rw-r--r-- +\\? $OWN_U +$OWN_G +12 .* file\$" -- \
    "'-rw-r--r--    ? $OWN_U $OWN_G 12 ... file' (? = the client formats it)" "$(oneline "$RES/ls.test.out")"
check "ls -l: users-groups-by-id logged" has ls.test log '^users-groups-by-id: [0-9]+ users, [0-9]+ groups$' -- \
    "a users-groups-by-id line" "$(oneline "$RES/ls.test.log")"
cmp_session "ls -l, ls -ln: client output and log as the reference" ls out err log
both ls-nougid "-e -l VERBOSE -P users-groups-by-id" "$T/b.ls" owned
check "ls -l without users-groups-by-id: server longnames" \
    has ls-nougid.test out "^-rw-r--r-- +1 $OWN_U +$OWN_G +12 .* file\$" -- \
    "'-rw-r--r--    1 $OWN_U $OWN_G 12 ... file'" "$(oneline "$RES/ls-nougid.test.out")"
cmp_session "ls -l with -P users-groups-by-id: client output and log as the reference" ls-nougid out err log

# limits: request sizes (DEBUG1 "request N: read/write ... len L" lines)
lens() { "$PY" "$HERE/parity_logcmp.py" lines "request [0-9]+: $2 " "$RES/$1.log" | sed -n 's/.* len \([0-9]*\)$/\1/p' | sort -n | uniq -c | awk '{printf "%s%sx%s", sep, $1, $2; sep=","}'; }
maxlen() { "$PY" "$HERE/parity_logcmp.py" lines "request [0-9]+: $2 " "$RES/$1.log" | sed -n 's/.* len \([0-9]*\)$/\1/p' | sort -n | tail -1; }
printf 'lcd %s\nput huge up\nget up down\n' "$W/l" > "$T/b.lim"
fresh; run lim.test "$SFTP_SERVER" "-e -l DEBUG1" "$T/b.lim"
check "limits: put of 1.5 MB in writes of 261120 bytes" test "$(maxlen lim.test write)" = 261120 -- \
    "writes of at most and mostly 261120 bytes" "$(lens lim.test write)"
check "limits: get of 1.5 MB in reads of 261120 bytes" test "$(maxlen lim.test read)" = 261120 -- \
    "reads of at most and mostly 261120 bytes" "$(lens lim.test read)"
check "limits: transfer intact" cmp -s "$W/l/huge" "$W/l/down" -- "the same bytes back" "$(cmp "$W/l/huge" "$W/l/down" 2>&1)"
fresh; run lim-p.test "$SFTP_SERVER" "-e -l DEBUG1 -P limits" "$T/b.lim"
check "-P limits: writes fall back to 32768 bytes" test "$(maxlen lim-p.test write)" = 32768 -- \
    "writes of at most 32768 bytes" "$(lens lim-p.test write)"
check "-P limits: reads fall back to 32768 bytes" test "$(maxlen lim-p.test read)" = 32768 -- \
    "reads of at most 32768 bytes" "$(lens lim-p.test read)"
check "-P limits: transfer intact" cmp -s "$W/l/huge" "$W/l/down" -- "the same bytes back" "$(cmp "$W/l/huge" "$W/l/down" 2>&1)"
check "-P limits: refusal logged at INIT" has lim-p.test log '^Refusing denylisted limits request$' -- \
    "Refusing denylisted limits request" "$(oneline "$RES/lim-p.test.log")"
if [ "$HAVE_REF" = 1 ]; then
    fresh; run lim.ref "$REF" "-e -l DEBUG1" "$T/b.lim"
    fresh; run lim-p.ref "$REF" "-e -l DEBUG1 -P limits" "$T/b.lim"
    check "limits, -P limits: the same write sizes as with the reference" \
        test "$(lens lim.test write) / $(lens lim-p.test write)" = "$(lens lim.ref write) / $(lens lim-p.ref write)" -- \
        "$(lens lim.ref write) / $(lens lim-p.ref write)" "$(lens lim.test write) / $(lens lim-p.test write)"
else
    skip "limits: the same write sizes as with the reference" "$NOREF"
fi

# ---------------------------------------------------------------------------
# -R against every modifying client command

cat > "$T/b.ro" <<EOF
lcd $W/l
-put small
-put -f small small-f
-rm file
-mkdir newdir
-rmdir sub
-rename file file2
-rename -l file file3
-ln file hard
-ln -s file soft
-symlink file soft2
-chmod 600 file
-chmod -h 600 file
-chgrp $MYGID file
-chown $MYUID file
-cp file copy
-reput big file
get file got
ls
df
EOF
both ro "-e -l VERBOSE -R" "$T/b.ro"
ro_expect() {
    local what=$1 rx=$2
    check "-R: $what refused" has ro.test err "$rx" -- "'$rx'" "$(oneline "$RES/ro.test.err")"
}
ro_expect "put" '^dest open ".*/r/small": Permission denied$'
ro_expect "put -f" '^dest open ".*/r/small-f": Permission denied$'
ro_expect "rm" '^remote delete .*/r/file: Permission denied$'
ro_expect "mkdir" '^remote mkdir ".*/r/newdir": Permission denied$'
ro_expect "rmdir" '^remote rmdir ".*/r/sub": Permission denied$'
ro_expect "rename (falls back to plain rename: posix-rename not advertised)" '^remote rename ".*/r/file" to ".*/r/file2": Permission denied$'
ro_expect "rename -l" '^remote rename ".*/r/file" to ".*/r/file3": Permission denied$'
ro_expect "ln (hardlink not advertised)" '^Server does not support hardlink@openssh.com extension$'
ro_expect "ln -s" '^remote symlink file "file" to ".*/r/soft": Permission denied$'
ro_expect "symlink" '^remote symlink file "file" to ".*/r/soft2": Permission denied$'
ro_expect "chmod" '^remote setstat ".*/r/file": Permission denied$'
ro_expect "chmod -h (lsetstat not advertised)" '^Server does not support lsetstat@openssh.com extension$'
ro_expect "cp (copy-data not advertised)" '^Server does not support copy-data extension$'
ro_expect "reput" '^dest open ".*/r/file": Permission denied$'
check "-R: get, ls and df still work" eval 'cmp -s "$W/r/file" "$W/l/got" && has ro.test out "^exists +file +sub *$"' -- \
    "the file fetched and listed" "$(oneline "$RES/ro.test.out")"
fresh_snapshot() { (W=$T/w2; fresh; snapshot; rm -rf "$W"); }
check "-R: nothing changed on the server" eval '[ "$(snapshot)" = "$(fresh_snapshot)" ]' -- "the tree untouched" "$(snapshot | tr '\n' ' ')"
cmp_session "-R: client messages, VERBOSE log and files as the reference" ro out err log tree

# -R: the INIT log lines (OpenSSH logs the refusals while composing VERSION)
printf 'version\n' > "$T/b.version"
both init-ro "-e -l VERBOSE -R" "$T/b.version"
check "-R: refusals logged at INIT" has init-ro.test log '^Refusing posix-rename request in read-only mode$' -- \
    "Refusing posix-rename request in read-only mode" "$(oneline "$RES/init-ro.test.log")"
cmp_session "-R -l VERBOSE: INIT log lines as the reference" init-ro log out
both init-rpp "-e -l VERBOSE -R -P limits,open -p close,hardlink,limits,posix-rename,readdir,realpath,statvfs" "$T/b.version"
cmp_session "-R -P -p -l VERBOSE: INIT log lines as the reference" init-rpp log out err
both init-d2 "-e -l DEBUG2 -R -P fsync" "$T/b.version"
cmp_session "-R -P fsync -l DEBUG2: INIT log lines as the reference" init-d2 log out err

# ---------------------------------------------------------------------------
# -P and -p through the client

cat > "$T/b.pp" <<EOF
lcd $W/l
rename file f2
-rename -l f2 f3
-ln f2 hard
-df
-cp f2 copy
-ls -l
-put -f small s
-chmod -h 600 f2
-get f2 got
-mkdir d
-rm exists
ls
EOF
both deny-pr "-e -l VERBOSE -P posix-rename" "$T/b.pp"
check "-P posix-rename: rename uses plain RENAME" has deny-pr.test log '^rename old "[^"]*/r/file" new "[^"]*/r/f2"$' -- \
    "rename old \".../file\" new \".../f2\"" "$(oneline "$RES/deny-pr.test.log")"
check "-P posix-rename: no posix-rename logged" eval '! has deny-pr.test log "^posix-rename"' -- "no posix-rename line" "$(oneline "$RES/deny-pr.test.log")"
check "-P posix-rename: refusal logged at INIT" has deny-pr.test log '^Refusing denylisted posix-rename request$' -- \
    "Refusing denylisted posix-rename request" "$(oneline "$RES/deny-pr.test.log")"
cmp_session "-P posix-rename: client output, log and files as the reference" deny-pr out err log tree
both deny-ext "-e -l VERBOSE -P posix-rename,statvfs,hardlink,fsync,lsetstat,copy-data,users-groups-by-id,remove" "$T/b.pp"
check "-P extensions: the client sees them unsupported" has deny-ext.test err '^Server does not support copy-data extension$' -- \
    "Server does not support copy-data extension" "$(oneline "$RES/deny-ext.test.err")"
check "-P remove: rm refused" has deny-ext.test err '^remote delete .*/r/exists: Permission denied$' -- \
    "remote delete ...: Permission denied" "$(oneline "$RES/deny-ext.test.err")"
cmp_session "-P with extension names: client output, log and files as the reference" deny-ext out err log tree
both allow "-e -l VERBOSE -p realpath,stat,lstat,opendir,readdir,close,open,read,rename,statvfs" "$T/b.pp"
check "-p: write refused (put)" has allow.test err 'Permission denied' -- "Permission denied somewhere" "$(oneline "$RES/allow.test.err")"
check "-p: refusal logged" has allow.test log '^Refusing non-allowlisted write request$' -- \
    "Refusing non-allowlisted write request" "$(oneline "$RES/allow.test.log")"
cmp_session "-p allowlist: client output, log and files as the reference" allow out err log tree
both allow-few "-e -l VERBOSE -p realpath,opendir,readdir,rename,stat,lstat" "$T/b.pp"
cmp_session "-p allowlist without close/open: client output, log and files as the reference" allow-few out err log tree
both allow-glob "-e -l VERBOSE -p *stat,realpath,open*,read*,close" "$T/b.pp"
cmp_session "-p with patterns (no wildcards): client output, log and files as the reference" allow-glob out err log tree
both deny-glob "-e -l VERBOSE -P *" "$T/b.pp"
check "-P '*' refuses nothing" has deny-glob.test log '^posix-rename old ' -- "posix-rename allowed" "$(oneline "$RES/deny-glob.test.log")"
cmp_session "-P '*': client output, log and files as the reference" deny-glob out err log tree

# ---------------------------------------------------------------------------
# -u: modes of new files and directories

printf 'lcd %s\nput small up\nmkdir dir\nput small dir/in\n' "$W/l" > "$T/b.umask"
mode_of() { stat -c %a "$W/r/$1" 2>&1; }
local_0666() { chmod 0666 "$W/l/small"; }
both umask077 "-e -l INFO -u 077" "$T/b.umask"
check "-u 077: put makes 0600" test "$(mode_of up)" = 600 -- 600 "$(mode_of up)"
check "-u 077: mkdir makes 0700" test "$(mode_of dir)" = 700 -- 700 "$(mode_of dir)"
cmp_session "-u 077: log and modes as the reference" umask077 log tree out err
both umask0 "-e -l INFO -u 0" "$T/b.umask" local_0666
check "-u 0: put makes the mode requested (0666)" test "$(mode_of up)" = 666 -- 666 "$(mode_of up)"
check "-u 0: mkdir makes the mode requested (0777)" test "$(mode_of dir)" = 777 -- 777 "$(mode_of dir)"
cmp_session "-u 0: log and modes as the reference" umask0 log tree out err
both umask-none "-e -l INFO" "$T/b.umask" local_0666
check "no -u: the inherited umask 022 applies" test "$(mode_of up) $(mode_of dir)" = "644 755" -- "644 755" "$(mode_of up) $(mode_of dir)"
cmp_session "no -u: log and modes as the reference" umask-none log tree

# ---------------------------------------------------------------------------
# -d: start directory tokens

printf 'pwd\nls\n' > "$T/b.pwd"
pwd_is() { has "$1" out "^Remote working directory: $(printf '%s' "$2" | sed 's/[][\.*^$+?(){}|]/\\&/g')\$"; }
dtest() {
    local name=$1 arg=$2 want=$3 tag=d$((++DN))
    both "$tag" "-e -l INFO -d $arg" "$T/b.pwd"
    check "-d $name: starts in ${want/#$T/T}" pwd_is "$tag.test" "$want" -- "Remote working directory: $want" "$(oneline "$RES/$tag.test.out") $(oneline "$RES/$tag.test.log")"
    cmp_session "-d $name: pwd and log as the reference" "$tag" out err log
}
DN=0
mkdir -p "$T/x%y" "$T/$ME" "$T/$MYUID" "$T/%$ME"
if [ -n "$MYHOME" ] && (cd "$MYHOME") 2>/dev/null; then
    dtest "%d (home directory)" "%d" "$MYHOME"
    dtest "~ (home directory)" "~" "$MYHOME"
else
    skip "-d %d and ~" "the home directory of $ME cannot be entered"
fi
if [ -n "$ROOTHOME" ] && (cd "$ROOTHOME") 2>/dev/null; then
    dtest "~root" "~root" "$ROOTHOME"
else
    skip "-d ~root" "the home directory of root cannot be entered"
fi
dtest "T/x%%y (literal %)" "$T/x%%y" "$T/x%y"
dtest "T/%u (user name)" "$T/%u" "$T/$ME"
dtest "T/%U (numeric uid)" "$T/%U" "$T/$MYUID"
dtest "T/%%%u" "$T/%%%u" "$T/%$ME"
# A missing directory: logged, and the session goes on in the original cwd.
both dmissing "-e -d $T/missing-%u" "$T/b.pwd"
check "-d missing: session goes on in the original directory" pwd_is dmissing.test "$W/r" -- \
    "Remote working directory: $W/r" "$(oneline "$RES/dmissing.test.out")"
check "-d missing: chdir failure logged" has dmissing.test log "^chdir to \"$T/missing-$ME\" failed: No such file or directory\$" -- \
    "chdir to \"$T/missing-$ME\" failed: No such file or directory" "$(oneline "$RES/dmissing.test.log")"
cmp_session "-d missing: client output and log as the reference" dmissing out err log

# ---------------------------------------------------------------------------
# Log lines of a scripted session, compared line by line

cat > "$T/b.session" <<EOF
lcd $W/l
put small a.txt
put -p small p.txt
put big big.bin
get big.bin big.copy
get a.txt a.back
ls
ls -l
mkdir d
put small2 d/in.txt
rename a.txt b.txt
rename -l b.txt c.txt
ln -s c.txt s.lnk
ln c.txt h.txt
chmod 600 c.txt
chmod -h 640 h.txt
chgrp $MYGID c.txt
df
df -i
put -f small f.txt
cp c.txt cp.txt
get -p p.txt p.back
rm d/in.txt
rmdir d
rm h.txt
-rm missing.txt
-get missing.txt
-mkdir c.txt
-chmod -h 600 s.lnk
-rmdir sub
-rename missing.txt x
-ln -s c.txt s.lnk
-cp missing.txt y
EOF
# Names that the log escapes: a UTF-8 name (octal on stderr and in syslog),
# a tab (kept on stderr, \t in syslog), a backslash (doubled).
printf 'put small "caf\303\251 x"\nput small "t\tb"\nput small "bs\\\\q"\nrename "t\tb" "t\tc"\nls -l\n' >> "$T/b.session"
SC="SSH_CONNECTION=10.0.0.1 5555 10.0.0.2 22"
both s-verbose "-e -l VERBOSE" "$T/b.session"
cmp_session "session -l VERBOSE: log as the reference (documented exceptions filtered)" s-verbose log
cmp_session "session -l VERBOSE: client output and files as the reference" s-verbose out err tree
both s-verbose-conn "-e -l VERBOSE" "$T/b.session" "" "$SC"
check "session with SSH_CONNECTION: session opened ... from [10.0.0.1]" \
    has s-verbose-conn.test log "^session opened for local user $ME from \\[10\\.0\\.0\\.1\\]\$" -- \
    "session opened for local user $ME from [10.0.0.1]" "$(head -1 "$RES/s-verbose-conn.test.log")"
check "session with SSH_CONNECTION: session closed ... from [10.0.0.1]" \
    has s-verbose-conn.test log "^session closed for local user $ME from \\[10\\.0\\.0\\.1\\]\$" -- \
    "session closed for local user $ME from [10.0.0.1]" "$(tail -1 "$RES/s-verbose-conn.test.log")"
cmp_session "session -l VERBOSE with SSH_CONNECTION: log as the reference" s-verbose-conn log
both s-info "-e -l INFO" "$T/b.session"
cmp_session "session -l INFO: log as the reference" s-info log
check "put -p: modtime logged in local time (TZ=$TZ)" has s-info.test log '^set "[^"]*/r/p\.txt" modtime 20210203-04:05:06$' -- \
    "set \".../p.txt\" modtime 20210203-04:05:06" "$(grep modtime "$RES/s-info.test.log")"
both s-info-conn "-e -l INFO" "$T/b.session" "" "$SC"
cmp_session "session -l INFO with SSH_CONNECTION: log as the reference" s-info-conn log
both s-error "-e" "$T/b.session"
cmp_session "session at the default level (ERROR): log as the reference" s-error log
both s-quiet "-e -l QUIET" "$T/b.session"
check "session -l QUIET: nothing logged" test ! -s "$RES/s-quiet.test.log" -- "nothing" "$(oneline "$RES/s-quiet.test.log")"
if [ -n "$SHIM" ]; then
    both s-syslog "-l VERBOSE -f LOCAL3" "$T/b.session" "" "PARITY_PRELOAD=$SHIM" "$SC"
    check "session to syslog: lines captured" test -s "$RES/s-syslog.test.syslog" -- "syslog lines" "nothing"
    cmp_session "session to syslog -l VERBOSE -f LOCAL3: lines, facility and priority as the reference" s-syslog syslog log
else
    skip "session to syslog" "$SHIM_WHY"
fi
both s-debug3 "-e -l DEBUG3" "$T/b.session"
cmp_session "session -l DEBUG3: log as the reference (documented exceptions filtered)" s-debug3 log

# The documented differences themselves.
if [ "$IS_REF" = 1 ]; then
    check "documented: no transfer lines (reference)" eval '! has s-verbose.test log "^transfer "' -- \
        "no transfer lines" "$(grep -c '^transfer' "$RES/s-verbose.test.log")"
else
    if msg=$("$PY" "$HERE/parity_logcmp.py" transfer "$RES/s-verbose.test.log"); then
        pass "documented: a transfer line after each file close at VERBOSE ($msg)"
    else
        fail "documented: a transfer line after each file close at VERBOSE" "expected transfer \"NAME\" S.sss s R.r MiB/s after each close, got $msg"
    fi
fi
check "documented: no transfer lines at INFO" eval '! has s-info.test log "^transfer "' -- \
    "no transfer lines" "$(grep -c '^transfer' "$RES/s-info.test.log") lines"
ug=$("$PY" "$HERE/parity_wire.py" ugid "$SFTP_SERVER")
if [ "$IS_REF" = 1 ]; then
    check "documented: users-groups-by-id count (OpenSSH 9.2 miscount)" test "$ug" = "users-groups-by-id: 5 users, 0 groups" -- \
        "users-groups-by-id: 5 users, 0 groups" "$ug"
else
    check "documented: users-groups-by-id count of 3 uids and 2 gids" test "$ug" = "users-groups-by-id: 3 users, 2 groups" -- \
        "users-groups-by-id: 3 users, 2 groups" "$ug"
fi

# Log lines the client cannot provoke: handles left open at the end
# (forced close), an oversized message, a request before INIT, an unknown
# extended request.
for scen in forced oversize before-init unknown-ext; do
    for who in test ref; do
        bin=$SFTP_SERVER
        if [ $who = ref ]; then [ "$HAVE_REF" = 1 ] || continue; bin=$REF; fi
        fresh
        (cd "$W/r" && timeout 60 "$PY" "$HERE/parity_wire.py" log "$bin" "$scen") > "$RES/raw-$scen.$who" 2>&1
    done
    if [ "$HAVE_REF" = 1 ]; then
        cmp_files "raw session $scen: exit status and VERBOSE log as the reference" "the exit status and log" \
            "$RES/raw-$scen.test" "$RES/raw-$scen.ref"
    else
        skip "raw session $scen: exit status and VERBOSE log as the reference" "$NOREF"
    fi
done
if [ "$IS_REF" = 0 ]; then
    if msg=$("$PY" "$HERE/parity_logcmp.py" transfer "$RES/raw-forced.test"); then
        pass "documented: a transfer line after each forced close ($msg)"
    else
        fail "documented: a transfer line after each forced close" "expected transfer \"NAME\" S.sss s R.r MiB/s after each, got $msg"
    fi
fi

# A malformed SSH_CONNECTION through the client.
printf 'pwd\n' > "$T/b.pwd1"
both s-badconn "-e -l INFO" "$T/b.pwd1" "" "SSH_CONNECTION=10.0.0.1"
check "malformed SSH_CONNECTION: the client gets no session" test "$(cat "$RES/s-badconn.test.rc")" != 0 -- \
    "sftp failing" "exit status $(cat "$RES/s-badconn.test.rc")"
cmp_session "malformed SSH_CONNECTION: log as the reference" s-badconn log

# ---------------------------------------------------------------------------
# The manual page

if [ ! -f "$MAN" ]; then
    fail "manual page" "expected $MAN, got none"
elif ! command -v mandoc >/dev/null 2>&1; then
    skip "manual page" "mandoc not installed"
else
    # Warnings about the local manual database are about this machine.
    mandoc -Tlint "$MAN" > "$T/lint" 2>&1
    grep -v -e 'outdated mandoc.db' -e 'referenced manual not found' "$T/lint" > "$T/lint.page"
    check "manual: mandoc -Tlint clean" test ! -s "$T/lint.page" -- "no messages" "$(oneline "$T/lint.page")"
    mandoc -Tascii "$MAN" 2>/dev/null | sed 's/.\x08//g' > "$T/man.txt"
    check "manual: mandoc -Tascii renders" grep -q '^SYNOPSIS' "$T/man.txt" -- "a SYNOPSIS section" "$(head -c 200 "$T/man.txt")"
    if command -v man >/dev/null 2>&1; then
        MANPAGER=cat MANWIDTH=80 timeout 30 man -l "$MAN" > "$T/manl.txt" 2> "$T/manl.err"
        rc=$?
        check "man -l renders without warnings" eval '[ $rc = 0 ] && grep -q SYNOPSIS "$T/manl.txt" && ! grep -v "outdated mandoc.db" "$T/manl.err" | grep -q .' -- \
            "exit 0, a SYNOPSIS and no warnings" "exit $rc, $(oneline "$T/manl.err")"
    else
        skip "man -l" "man not installed"
    fi
    syn=$(awk '/^SYNOPSIS/ {on=1; next} /^[A-Z]/ {on=0} on' "$T/man.txt" | tr -s ' \t\n' '   ' | sed 's/^ //; s/ $//')
    "$SFTP_SERVER" -h > /dev/null 2> "$T/usage" < /dev/null
    use=$(sed '1s/^usage: //' "$T/usage" | tr -s ' \t\n' '   ' | sed 's/^ //; s/ $//')
    if [ "$IS_REF" = 1 ]; then
        skip "manual: SYNOPSIS matches the -h usage text" "the manual is this project's; the server under test is the reference"
    else
        check "manual: SYNOPSIS matches the -h usage text" test "$syn" = "$use" -- "'$use'" "'$syn'"
    fi
    # Every option of the usage text has its entry in the option list.
    missing=
    for f in $(printf '%s\n' "$use" | grep -o -- '\(^\|[[ ]\)-[A-Za-z]\+' | sed 's/^[[ ]//' | sed 's/^-//' | fold -w1 | sort -u); do
        grep -q "^\\.It Fl $f\\b" "$MAN" || missing="$missing -$f"
    done
    check "manual: every option of the usage text is described" test -z "$missing" -- "an .It Fl entry for each" "missing:$missing"
fi

# Every request -Q requests lists is named in the manual's list of them.
if [ ! -f "$MAN" ]; then
    :
elif [ "$IS_REF" = 1 ]; then
    skip "manual: every request of -Q requests is named" "the manual is this project's; the server under test is the reference"
else
    missing=
    for n in $("$SFTP_SERVER" -Q requests 2>/dev/null); do
        grep -qE "^\.(It )?Cm (.* )?$n( |\$)" "$MAN" || missing="$missing $n"
    done
    check "manual: every request of -Q requests is named" test -z "$missing" -- "a .Cm of each" "missing:$missing"
fi

summary
