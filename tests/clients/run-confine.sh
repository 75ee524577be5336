#!/usr/bin/env bash
# The -r escape matrix of test_confine.py, through OpenSSH's sftp client in
# direct mode (sftp -D "SERVER -r ROOT" -b BATCH), then the functional
# suites again under -r.
#
# Usage: tests/clients/run-confine.sh
#   SFTP_SERVER   server binary; default: sftp-server in the repository root
#   PYTHON        Python 3 interpreter; default: python3
#   CONFINE_RACE_ROUNDS  rounds of the swap race batch (default 1000)
#   CONFINE_KEEP  when set, the temporary directory is left for a look
#
# The world (root/, outside/ with a secret marker, the links pointing out,
# the race's victim) is built by "test_confine.py --layout" in a fresh
# temporary directory and snapshotted by "test_confine.py --snapshot"
# before and after; see test_confine.py for what the snapshot covers.  The
# client runs in a local directory beside the world, so that every local
# path is relative and no host path of the world reaches the client but
# through the server.
#
# Output: one "ok - NAME" / "FAIL - NAME: ..." / "skip - NAME: ..." line per
# check, then "N passed, M failed[, K skipped]".  Exit status 1 if any
# failed.

set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/lib.sh
. "$HERE/../lib/lib.sh"

SFTP_SERVER=$(server_path "${SFTP_SERVER:-}")
PYTHON=${PYTHON:-python3}
ROUNDS=${CONFINE_RACE_ROUNDS:-1000}
PROTOCOL=$REPO/tests/protocol
confine() { timeout 120 "$PYTHON" "$PROTOCOL/test_confine.py" "$@"; }
export PYTHONDONTWRITEBYTECODE=1

FLIPPER_PID=
T=$(mktemp -d) || setup_failed "expected mktemp -d to work, got an error"
cleanup() {
    [ -n "$FLIPPER_PID" ] && kill "$FLIPPER_PID" 2>/dev/null
    # CONFINE_KEEP=1 leaves the directory for a look afterwards.
    [ -n "${CONFINE_KEEP:-}" ] && { echo "# kept $T"; return; }
    remove_tree "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

W=$T/world      # root/ and outside/
R=$W/root
O=$W/outside
L=$T/local      # the client's local directory
K=$T/work       # batches, outputs, snapshots
mkdir "$W" "$L" "$K"
export LC_ALL=C

need_server "$SFTP_SERVER"
need_sftp

# sftp_batch NAME [SERVER-ARGS...] < BATCH: runs the batch in $L against
# "SERVER -r $R" (or SERVER SERVER-ARGS); every command is prefixed with
# "-" so that the batch goes on past refusals.  Output in $K/NAME.out and
# $K/NAME.err; RC set.
sftp_batch() {
    local name=$1 cmd
    shift
    if [ $# -gt 0 ]; then cmd="$SFTP_SERVER $*"; else cmd="$SFTP_SERVER -r $R"; fi
    sed 's/^[^-]/-&/' > "$K/$name.batch"
    (cd "$L" && exec timeout 60 sftp -q -D "$cmd" -b "$K/$name.batch") \
        > "$K/$name.out" 2> "$K/$name.err" < /dev/null
    RC=$?
}

# section NAME CMD: the output lines of command CMD in batch NAME
section() {
    awk -v c="sftp> -$2" '$0 == c { on = 1; next } /^sftp> / { on = 0 } on' \
        "$K/$1.out"
}

# check_local_is NAME CONTENT-FILE LOCAL...: each local file equals CONTENT-FILE
check_local_is() {
    local name=$1 want=$2 f bad=""
    shift 2
    for f in "$@"; do
        if [ ! -f "$L/$f" ]; then bad="$bad $f(missing)"
        elif ! cmp -s "$want" "$L/$f"; then bad="$bad $f($(head -c 40 "$L/$f" | tr '\n' ' '))"
        fi
    done
    if [ -z "$bad" ]; then pass "$name"; else fail "$name" "expected the decoy in each, got:$bad"; fi
}

# check_absent NAME WHERE PATH...: none of PATH exists under WHERE
check_absent() {
    local name=$1 where=$2 f bad=""
    shift 2
    for f in "$@"; do
        if [ -e "$where/$f" ] || [ -L "$where/$f" ]; then bad="$bad $f"; fi
    done
    if [ -z "$bad" ]; then pass "$name"; else fail "$name" "expected none of them, got:$bad"; fi
}

# check_present NAME WHERE PATH...
check_present() {
    local name=$1 where=$2 f bad=""
    shift 2
    for f in "$@"; do
        if [ ! -e "$where/$f" ] && [ ! -L "$where/$f" ]; then bad="$bad $f"; fi
    done
    if [ -z "$bad" ]; then pass "$name"; else fail "$name" "expected each of them, missing:$bad"; fi
}

# ---------------------------------------------------------------------------
# The world

SETUP_START=$SECONDS
if ! eval "$(confine --layout "$W")" || [ -z "${TOKEN:-}" ]; then
    fail "setup" "expected test_confine.py --layout to build the world, got an error"
    summary
    exit 1
fi
TOKDIR=confine-$TOKEN
printf 'decoy passwd inside the root\n' > "$K/decoy"
printf "victim's secret, inside the root\n" > "$K/victim"
printf 'payload\n' > "$L/payload"
awk 'length($0) >= 8' /etc/passwd > "$K/passwd.lines"
PASSWD_MODE=$(stat -c %a /etc/passwd)
PASSWD_UID=$(stat -c %u /etc/passwd)
PASSWD_GID=$(stat -c %g /etc/passwd)
confine --snapshot "$W" > "$K/snap.before"

# Is -r usable here at all?
if ! timeout 10 "$SFTP_SERVER" -e -r "$R" < /dev/null 2> "$K/probe.err"; then
    if grep -q openat2 "$K/probe.err"; then
        skip "all" "the kernel has no openat2(2): $(oneline "$K/probe.err")"
        summary
        exit 0
    fi
    if grep -q "bad ownership" "$K/probe.err"; then
        skip "all" "-r wants a path only root can change: run as root ($(oneline "$K/probe.err"))"
        summary
        exit 0
    fi
fi

# ---------------------------------------------------------------------------
# 1. Reads: the decoy for /etc/passwd by any route, nothing from outside

sftp_batch read <<EOF
get /etc/passwd g_etc1
get ../../../etc/passwd g_etc2
get a/../../../etc/passwd g_etc3
get abs g_etc4
get dirlink/etc/passwd g_etc5
get //etc/passwd g_etc6
get dirlink/dirlink/../etc/passwd g_etc7
get rel g_out1
get ../outside/secret g_out2
get ../../outside/secret g_out3
get outdir/secret g_out4
get hostabs g_out5
get hostdir/secret g_out6
get chain_a g_out7
get chainabs_a/secret g_out8
get dirlink/../outside/secret g_out9
get outdir/sub/deeper/file g_out10
get procself g_out11
get $O/secret g_out13
get -R outdir g_outdir1
get -R ../outside g_outdir2
get -R hostdir g_outdir3
get -R chainabs_a g_outdir4
reget ../outside/secret g_out12
get adminlink g_admin
EOF
check_local_is "sftp get: /etc/passwd by absolute path, .. chains and links gives the decoy" \
    "$K/decoy" g_etc1 g_etc2 g_etc3 g_etc4 g_etc5 g_etc6 g_etc7
check_absent "sftp get: files outside by .., links, chains and -R fetch nothing" "$L" \
    g_out1 g_out2 g_out3 g_out4 g_out5 g_out6 g_out7 g_out8 g_out9 g_out10 \
    g_out11 g_out12 g_out13 g_outdir1 g_outdir2 g_outdir3 g_outdir4
if cmp -s "$L/g_admin" "$R/adminlink"; then
    # A hard link the admin placed inside the root is a file inside: harmless.
    pass "sftp get: the admin's hard link inside the root is a file inside"
else
    fail "sftp get: the admin's hard link inside the root is a file inside" "expected its content, got none"
fi

# ---------------------------------------------------------------------------
# 2. Listings and the current directory

sftp_batch list <<EOF
df ..
df outdir
df hostdir
ls -1a /
ls -1a ..
ls -1a ../../..
ls -1a dirlink/
ls -1a a/../../..
ls -1a outdir/
ls -1a ../outside
ls -1a hostdir/
ls -1a chainabs_a/
ls -la ..
pwd
cd ..
pwd
cd ../../..
pwd
cd outdir
pwd
cd hostdir
pwd
cd ../outside
pwd
cd dirlink
pwd
cd /sub/../..
pwd
EOF
(cd "$R" && { echo .; echo ..; find . -mindepth 1 -maxdepth 1 -printf '%f\n'; } | sort) > "$K/root.names"
bad=""
for d in / .. ../../.. dirlink/ a/../../..; do
    section list "ls -1a $d" | sed "s|^${d%/}/||; s|^/||" | sort > "$K/got.names"
    cmp -s "$K/root.names" "$K/got.names" ||
        bad="$bad [$d: $(comm -3 "$K/root.names" "$K/got.names" | tr -d '\t' | tr '\n' ' ')]"
done
if [ -z "$bad" ]; then
    pass "sftp ls: /, .., ../../.., dirlink/ and a/../../.. list the root itself"
else
    fail "sftp ls: /, .., ../../.., dirlink/ and a/../../.. list the root itself" "expected the root's names, got differences:$bad"
fi
bad=""
for d in outdir/ ../outside hostdir/ chainabs_a/; do
    [ -n "$(section list "ls -1a $d")" ] && bad="$bad $d"
done
if [ -z "$bad" ]; then
    pass "sftp ls: outdir/, ../outside, hostdir/, chainabs_a/ list nothing"
else
    fail "sftp ls: outdir/, ../outside, hostdir/, chainabs_a/ list nothing" "expected no names, got some for:$bad"
fi
# "ls -la ..": the ".." entry is the root's own (mode and owner), not the
# real parent's (0711; the root itself is 0755).
want=$(stat -c %A "$R")
got=$(section list "ls -la .." | awk '$NF == "../.." { print $1 }')
check_eq "sftp ls -la ..: the root's '..' shows the root's mode" "$want" "$got"
got=$(grep -c '^Remote working directory: /$' "$K/list.out")
check_eq "sftp pwd: / after cd .., ../../.., outdir, hostdir, ../outside, dirlink, /sub/../.." 8 "$got"
if grep -q "^Remote working directory: .*$T" "$K/list.out"; then
    fail "sftp pwd: never the host path" "got $(grep "^Remote working" "$K/list.out" | sort -u | tr '\n' ' ')"
else
    pass "sftp pwd: never the host path"
fi
got=$(section list "df .." | wc -l)
bad=$(section list "df outdir" | wc -l)$(section list "df hostdir" | wc -l)
if [ "$got" -eq 2 ] && [ "$bad" = 00 ]; then
    pass "sftp df: .. is the root's file system, outdir and hostdir fail"
else
    fail "sftp df: .. is the root's file system, outdir and hostdir fail" "expected 2, 0 and 0 lines, got $got and $bad"
fi

# ---------------------------------------------------------------------------
# 3. Writes: through links and .. they fail or land inside the root

sftp_batch write <<EOF
put payload outdir/p1
put payload ../outside/p2
put payload rel
put payload hostabs
put payload hostdir/p3
put payload chainabs_a/p4
put payload $O/p9
put payload chain_a
put payload outdir/secret
reput payload ../outside/secret
put -a payload ../outside/secret
put payload ../$TOKDIR/p5
put payload dirlink/$TOKDIR/p6
put payload /$TOKDIR/p7
put payload ../../../$TOKDIR/p8
chmod $PASSWD_MODE abs
chown $PASSWD_UID abs
chgrp $PASSWD_GID dirlink/etc/passwd
chmod 600 rel
chmod 600 outdir/secret
chmod 777 outdir
chmod 600 hostabs
chmod 777 ../outside
chown 65534 outdir/secret
chown 65534 rel
chgrp 65534 hostdir/secret
mkdir outdir/nd
mkdir ../outside/nd
mkdir hostdir/nd
mkdir chainabs_a/nd
mkdir ../$TOKDIR/nd_up
rmdir outdir/emptydir
rmdir ../outside/emptydir
rmdir hostdir/emptydir
ln -s /etc/passwd outdir/sl
ln -s x ../outside/sl
ln -s x hostdir/sl
ln -s /etc/passwd ../$TOKDIR/sl_up
ln ../outside/secret hl1
ln outdir/secret hl2
ln hostdir/secret hl3
ln inside outdir/hl4
ln inside ../outside/hl5
ln /etc/passwd hl_etc
rename inside_r1 ../outside/x
rename inside_r1 outdir/x
rename inside_r1 hostdir/x
rename outdir/secret stolen1
rename ../outside/secret stolen2
rename hostdir/secret stolen3
rename outdir/emptydir stolen4
rename inside_r2 ../$TOKDIR/x_up
rename inside_r3 dirlink/$TOKDIR/y_up
cp outdir/secret stolen5
cp ../outside/secret stolen6
cp hostabs stolen7
cp inside outdir/cp1
cp inside ../outside/cp2
cp inside ../$TOKDIR/cp_up
cp /etc/passwd $TOKDIR/cp_etc
rm outdir/secret
rm ../outside/secret
rm hostdir/secret
rm chainabs_a/olink
rm outdir/sub/deeper/file
EOF
check_present "sftp put/mkdir/ln -s/rename/cp through .. and dirlink land inside the root" "$R/$TOKDIR" \
    p5 p6 p7 p8 nd_up sl_up x_up y_up cp_up cp_etc
check_absent "sftp put/mkdir/ln/rename/cp from or to the outside do nothing" "$R" \
    stolen1 stolen2 stolen3 stolen4 stolen5 stolen6 stolen7 hl1 hl2 hl3
check_present "sftp rename to the outside leaves the file in the root" "$R" inside_r1
if cmp -s "$K/decoy" "$R/$TOKDIR/cp_etc"; then
    pass "sftp cp /etc/passwd copies the decoy"
else
    fail "sftp cp /etc/passwd copies the decoy" "expected the decoy in $TOKDIR/cp_etc, got other content"
fi
check_eq "sftp chmod $PASSWD_MODE abs: the decoy takes the mode" "$PASSWD_MODE" "$(stat -c %a "$R/etc/passwd")"
got=$(stat -c %i "$R/hl_etc" 2>/dev/null)
if [ -z "$got" ] || [ "$got" = "$(stat -c %i "$R/etc/passwd")" ]; then
    pass "sftp ln /etc/passwd: fails or links the decoy, never the host's"
else
    fail "sftp ln /etc/passwd: fails or links the decoy, never the host's" "expected the decoy's inode, got $got"
fi

# ---------------------------------------------------------------------------
# 4. The swap race: victim flipped between a directory inside the root and
# links to the outside while the client gets, lists, puts, renames,
# removes, mkdirs and chmods inside it.

# Started directly, so that $! is the flipper itself; it stops by itself
# after 60 seconds in any case.
"$PYTHON" "$PROTOCOL/test_confine.py" --flip "$W" 60 > "$K/flip.out" 2> "$K/flip.err" &
FLIPPER_PID=$!
for _ in $(seq 100); do
    grep -q ready "$K/flip.out" 2>/dev/null && break
    sleep 0.05
done
if ! grep -q ready "$K/flip.out"; then
    fail "sftp race: victim swapped while the client works on it" "expected the flipper to start, got $(oneline "$K/flip.err")"
else
    RACE_START=$SECONDS
    mkdir "$L/race"
    for i in $(seq "$ROUNDS"); do
        echo "get victim/secret race/v$i"
        echo "get victim/../victim/secret race/w$i"
        echo "ls -1a victim"
        echo "put payload victim/newfile"
        echo "rename victim/newfile victim/newfile2"
        echo "rm victim/newfile2"
        echo "mkdir victim/nd"
        echo "rmdir victim/nd"
        echo "chmod 640 victim/secret"
    done | sftp_batch race
    kill -TERM "$FLIPPER_PID" 2>/dev/null
    for _ in $(seq 100); do
        kill -0 "$FLIPPER_PID" 2>/dev/null || break
        sleep 0.05
    done
    kill -KILL "$FLIPPER_PID" 2>/dev/null
    wait "$FLIPPER_PID" 2>/dev/null
    FLIPPER_PID=
    swaps=$(tail -1 "$K/flip.out")
    got=0 bad=""
    for f in "$L"/race/*; do
        [ -f "$f" ] || continue
        got=$((got + 1))
        cmp -s "$K/victim" "$f" || bad="$bad ${f##*/}"
    done
    names=$(grep -v '^sftp> ' "$K/race.out" | sed 's|^victim/||' | sort -u |
        grep -vxE 'victim|\.|\.\.|secret|newfile|newfile2|nd' | tr '\n' ' ')
    detail="$ROUNDS rounds, $got of $((2 * ROUNDS)) gets succeeded, $swaps swaps, $((SECONDS - RACE_START))s"
    if [ -n "$bad" ] || [ -n "$names" ]; then
        fail "sftp race: victim swapped while the client works on it" "expected only the victim's content and names, got other content in:$bad; names: $names"
    elif ! [ "$swaps" -gt 0 ] 2>/dev/null || [ "$got" -eq 0 ] || [ "$got" -eq $((2 * ROUNDS)) ]; then
        fail "sftp race: victim swapped while the client works on it" "race not exercised: $detail"
    elif [ ! -d "$R/victim" ] || [ -L "$R/victim" ]; then
        fail "sftp race: victim swapped while the client works on it" "the flipper left victim a link"
    else
        pass "sftp race: victim swapped while the client works on it ($detail)"
    fi
fi

# ---------------------------------------------------------------------------
# 5. -r through a symlink, -r missing, -d relative to the root

sftp_batch rootlink -r "$W/rootlink" <<EOF
pwd
get inside g_rootlink
get ../outside/secret g_rootlink_out
put payload ../$TOKDIR/via_rootlink
EOF
if cmp -s "$L/g_rootlink" "$R/inside" && [ ! -e "$L/g_rootlink_out" ] &&
    [ -f "$R/$TOKDIR/via_rootlink" ] && grep -qx 'Remote working directory: /' "$K/rootlink.out"; then
    pass "sftp -r through a symlink to the root: works and stays inside the real directory"
else
    fail "sftp -r through a symlink to the root: works and stays inside the real directory" \
        "expected inside read, the outside not, the put in root/$TOKDIR and pwd /; got: $(oneline "$K/rootlink.out") $(oneline "$K/rootlink.err")"
fi

sftp_batch missing -e -r "$W/missing" <<EOF
pwd
EOF
if [ "$RC" -ne 0 ] && grep -q "$W/missing" "$K/missing.err"; then
    pass "sftp -r with a missing directory: the session fails with the server's error"
else
    fail "sftp -r with a missing directory: the session fails with the server's error" "expected a non-zero exit and the directory named on stderr, got $RC and '$(oneline "$K/missing.err")'"
fi

sftp_batch startdir -r "$R" -d /sub <<EOF
pwd
get subfile g_subfile
EOF
if grep -qx 'Remote working directory: /sub' "$K/startdir.out" && [ -f "$L/g_subfile" ]; then
    pass "sftp -r ROOT -d /sub: starts in the root's /sub"
else
    fail "sftp -r ROOT -d /sub: starts in the root's /sub" "got '$(oneline "$K/startdir.out")'"
fi

sftp_batch startdir2 -r "$R" -d ../outside <<EOF
pwd
get secret g_startdir2
EOF
if grep -qx 'Remote working directory: /' "$K/startdir2.out" && [ ! -e "$L/g_startdir2" ]; then
    pass "sftp -r ROOT -d ../outside: stays at /"
else
    fail "sftp -r ROOT -d ../outside: stays at /" "got '$(oneline "$K/startdir2.out")'"
fi

# ---------------------------------------------------------------------------
# 6. The invariant

bad=""
for f in "$K"/*.out "$K"/*.err; do
    if grep -aqF -e "CONFINE-SECRET-$TOKEN" -e "CONFINE-LINKTEXT-$TOKEN" \
        -e "only-outside-$TOKEN" -f "$K/passwd.lines" "$f"; then
        bad="$bad ${f##*/}"
    fi
done
while IFS= read -r -d '' f; do
    if grep -aqF -e "CONFINE-SECRET-$TOKEN" -e "CONFINE-LINKTEXT-$TOKEN" \
        -f "$K/passwd.lines" "$f"; then
        bad="$bad local/${f#"$L"/}"
    fi
done < <(find "$L" -type f -print0)
if [ -z "$bad" ]; then
    pass "invariant: no output or downloaded file carries a byte or a name from outside the root"
else
    fail "invariant: no output or downloaded file carries a byte or a name from outside the root" "found in:$bad"
fi
confine --snapshot "$W" > "$K/snap.after"
if cmp -s "$K/snap.before" "$K/snap.after"; then
    pass "invariant: nothing outside the root read, written, created or listed; /etc/passwd unchanged (matrix: $((SECONDS - SETUP_START))s)"
else
    fail "invariant: nothing outside the root read, written, created or listed; /etc/passwd unchanged" \
        "$(diff "$K/snap.before" "$K/snap.after" | grep '^[<>]' | cut -c1-300 | tr '\n' ' ')"
fi

# ---------------------------------------------------------------------------
# 7. The functional suites under -r / -d @CWD@

suite() {
    local name=$1 start=$SECONDS last
    shift
    SFTP_SERVER=$SFTP_SERVER SFTP_SERVER_ARGS="-r / -d @CWD@" timeout 300 "$@" > "$K/$name.suite" 2>&1
    local rc=$?
    last=$(tail -1 "$K/$name.suite")
    if [ "$rc" -eq 0 ]; then
        pass "$name under -r / -d @CWD@: $last ($((SECONDS - start))s)"
    else
        fail "$name under -r / -d @CWD@" "exit $rc, $last; failures: $(grep '^FAIL' "$K/$name.suite" | head -5 | cut -c1-200 | tr '\n' ' ')"
    fi
}
suite test_raw.py "$PYTHON" "$PROTOCOL/test_raw.py"
if grep -q '@CWD@' "$HERE/run-sftp.sh"; then
    suite run-sftp.sh bash "$HERE/run-sftp.sh"
else
    skip "run-sftp.sh under -r / -d @CWD@" "run-sftp.sh passes SFTP_SERVER_ARGS as is: it needs @CWD@ replaced by the server's directory in sftp_run"
fi

summary
