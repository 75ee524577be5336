#!/usr/bin/env bash
# Integration tests: drive the SFTP server through the OpenSSH sftp client in
# direct mode (sftp -D "SERVER ARGS" -b BATCHFILE).
#
# Usage: tests/clients/run-sftp.sh
#   SFTP_SERVER       server binary (absolute path); default: sftp-server in the
#                     repository root (the parent directory of tests/)
#   SFTP_SERVER_ARGS  extra arguments for the server (may be empty; @CWD@
#                     stands for the directory the server runs in)
#
# The server is started with its working directory set to a scratch "remote"
# directory and every remote path in the batch files is relative to it.
# Everything happens inside a fresh temporary directory that is removed on
# exit. When run as root, a user "sftptest" is created if missing, for the
# permission tests (skipped otherwise).
#
# Output: one "ok - NAME" / "FAIL - NAME: ..." / "skip - NAME: ..." line per
# check, then "N passed, M failed[, K skipped]". Exit status 1 if any failed.

set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/lib.sh
. "$HERE/../lib/lib.sh"

SFTP_SERVER=$(server_path "${SFTP_SERVER:-}")
SFTP_SERVER_ARGS=${SFTP_SERVER_ARGS:-}
SERVER_CMD="$SFTP_SERVER${SFTP_SERVER_ARGS:+ $SFTP_SERVER_ARGS}"
TEST_USER=sftptest

T=$(mktemp -d) || setup_failed "expected mktemp -d to work, got an error"
cleanup() { remove_tree "$T"; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

R=$T/remote     # the server's working directory
L=$T/local      # local side of the client
mkdir "$R" "$L"

# The file names below contain non-ASCII bytes; keep sort/od byte oriented.
export LC_ALL=C

need_server "$SFTP_SERVER"
need_sftp

# sftp_run CWD [SERVER-COMMAND] < BATCH
# Runs the batch read from stdin; sets RC, output in $T/out and $T/err.
sftp_run() {
    local cwd=$1 cmd=${2:-$SERVER_CMD}
    # "@CWD@" in the server's arguments stands for the directory it runs in,
    # so that the suite can run again under e.g. "-r / -d @CWD@".
    cmd=${cmd//@CWD@/$(cd "$cwd" && pwd)}
    cat > "$T/batch"
    (cd "$cwd" && exec timeout 120 sftp -q -D "$cmd" -b "$T/batch") \
        > "$T/out" 2> "$T/err" < /dev/null
    RC=$?
}

# check_err NAME EXTENDED-REGEX [KEY]: a line of the last stderr matches;
# on failure show the stderr lines containing the fixed string KEY (or all).
check_err() {
    local got
    if grep -Eaq -- "$2" "$T/err"; then
        pass "$1"
        return
    fi
    if [ $# -ge 3 ]; then
        got=$(grep -aF -- "$3" "$T/err" | tr '\n' ' ' | cut -c1-400)
        [ -n "$got" ] || got="no message mentioning $3"
    else
        got=$(oneline "$T/err")
    fi
    fail "$1" "expected stderr matching /$2/, got '$got'"
}

# ---------------------------------------------------------------------------
# 1. put/get round trips of various sizes
# ---------------------------------------------------------------------------
SIZES="0 1 32767 32768 261119 261120 261121 67108864"
mkdir "$L/back" "$R/up"
for s in $SIZES; do
    head -c "$s" /dev/urandom > "$L/f$s"
done
sftp_try "$R" < <(
    for s in $SIZES; do echo "put \"$L/f$s\" up/f$s"; done
    for s in $SIZES; do echo "get up/f$s \"$L/back/f$s\""; done
)
check_clean "put/get session"
for s in $SIZES; do
    check_same "put $s bytes: remote copy on disk" "$L/f$s" "$R/up/f$s"
    check_same "get $s bytes: round trip" "$L/f$s" "$L/back/f$s"
done

# ---------------------------------------------------------------------------
# 2. resume: reput / reget / put -a / get -a
# ---------------------------------------------------------------------------
mkdir "$R/resume" "$L/resume"
head -c 1048576 /dev/urandom > "$L/resume/orig"
head -c 12345 /dev/urandom >> "$L/resume/orig"
head -c 300001 "$L/resume/orig" > "$R/resume/reput"
head -c 261121 "$L/resume/orig" > "$R/resume/puta"
cp "$L/resume/orig" "$R/resume/orig"
head -c 77777 "$L/resume/orig" > "$L/resume/reget"
head -c 1 "$L/resume/orig" > "$L/resume/geta"
sftp_try "$R" <<EOF
reput "$L/resume/orig" resume/reput
put -a "$L/resume/orig" resume/puta
reget resume/orig "$L/resume/reget"
get -a resume/orig "$L/resume/geta"
EOF
check_clean "resume session"
check_same "reput completes a partial remote file" "$L/resume/orig" "$R/resume/reput"
check_same "put -a completes a partial remote file" "$L/resume/orig" "$R/resume/puta"
check_same "reget completes a partial local file" "$L/resume/orig" "$L/resume/reget"
check_same "get -a completes a partial local file" "$L/resume/orig" "$L/resume/geta"

# ---------------------------------------------------------------------------
# 3. file system operations
# ---------------------------------------------------------------------------
mkdir "$R/ops" "$R/ops/rmme" "$R/ops/nonempty"
echo "inside" > "$R/ops/nonempty/file"
echo "delete me" > "$R/ops/rmfile"
echo "rename me" > "$L/renamed.expect"
cp "$L/renamed.expect" "$R/ops/old"
echo "existing" > "$R/ops/existing"
echo "target" > "$R/ops/target"
echo "posix" > "$R/ops/psrc"
cp "$R/ops/psrc" "$L/psrc.expect"
echo "mode" > "$R/ops/modefile"
head -c 500000 /dev/urandom > "$R/ops/overwrite"
echo "short" > "$L/short"
mkdir "$R/ops/dirold"
echo "in dir" > "$R/ops/dirold/f"
head -c 200000 /dev/urandom > "$L/fsync"
head -c 300000 /dev/urandom > "$R/ops/cpsrc"
chmod 0640 "$R/ops/cpsrc"
mkdir "$R/ops/modedir"
echo "group" > "$R/ops/grpfile"
echo "owner" > "$R/ops/ownfile"
echo "preserve" > "$L/pres"
chmod 0604 "$L/pres"
touch -d '2001-02-03 04:05:06' "$L/pres"
echo "preserve back" > "$R/ops/presback"
chmod 0640 "$R/ops/presback"
touch -d '2002-03-04 05:06:07' "$R/ops/presback"

if [ "$(id -u)" -eq 0 ]; then
    GRP=$(getent group daemon | cut -d: -f3)
    [ -n "$GRP" ] || GRP=1
    OWN=1
else
    # a group the user is in, preferably not the file's current group
    GRP=$(id -g)
    for g in $(id -G); do [ "$g" != "$(id -g)" ] && GRP=$g && break; done
    OWN=""
fi

sftp_try "$R" < <(
    echo "mkdir ops/newdir"
    echo "rmdir ops/rmme"
    echo "rm ops/rmfile"
    echo "rename ops/old ops/new"
    echo "rename ops/psrc ops/existing"
    echo "ln -s target ops/symlink"
    echo "ln ops/target ops/hardlink"
    echo "ln -s /nonexistent/absolute ops/abslink"
    echo "get ops/symlink \"$L/viasymlink\""
    echo "put \"$L/short\" ops/overwrite"
    echo "rename ops/dirold ops/dirnew"
    echo "put -f \"$L/fsync\" ops/fsync"
    echo "get -f ops/fsync \"$L/fsync.back\""
    echo "cp ops/cpsrc ops/cpdst"
    echo "chmod 640 ops/modefile"
    echo "chmod 711 ops/modedir"
    echo "chgrp $GRP ops/grpfile"
    [ -n "$OWN" ] && echo "chown $OWN ops/ownfile"
    echo "put -p \"$L/pres\" ops/pres"
    echo "get -p ops/presback \"$L/presback\""
    echo "df"
    echo "df -i"
)
check_clean "file operations session"

if [ -d "$R/ops/newdir" ]; then pass "mkdir"; else fail "mkdir" "expected directory ops/newdir, got none"; fi
if [ ! -e "$R/ops/rmme" ]; then pass "rmdir"; else fail "rmdir" "expected ops/rmme removed, got it still there"; fi
if [ ! -e "$R/ops/rmfile" ]; then pass "rm"; else fail "rm" "expected ops/rmfile removed, got it still there"; fi
if [ ! -e "$R/ops/old" ]; then
    check_same "rename" "$L/renamed.expect" "$R/ops/new"
else
    fail "rename" "expected ops/old gone, got it still there"
fi
if [ ! -e "$R/ops/psrc" ]; then
    check_same "rename (posix-rename) replaces an existing target" "$L/psrc.expect" "$R/ops/existing"
else
    fail "rename (posix-rename) replaces an existing target" "expected ops/psrc gone, got it still there"
fi
if [ -L "$R/ops/symlink" ]; then
    check_eq "ln -s" "target" "$(readlink "$R/ops/symlink")"
else
    fail "ln -s" "expected ops/symlink to be a symbolic link, got $(stat -c %F "$R/ops/symlink" 2>&1)"
fi
if [ -L "$R/ops/abslink" ]; then
    check_eq "ln -s with an absolute, dangling target" "/nonexistent/absolute" "$(readlink "$R/ops/abslink")"
else
    fail "ln -s with an absolute, dangling target" "expected ops/abslink to be a symbolic link, got $(stat -c %F "$R/ops/abslink" 2>&1)"
fi
check_same "get through a symlink" "$R/ops/target" "$L/viasymlink"
check_same "put over a larger existing file truncates it" "$L/short" "$R/ops/overwrite"
if [ ! -e "$R/ops/dirold" ]; then
    check_eq "rename of a directory" "in dir" "$(cat "$R/ops/dirnew/f" 2>&1)"
else
    fail "rename of a directory" "expected ops/dirold gone, got it still there"
fi
check_same "put -f (fsync)" "$L/fsync" "$R/ops/fsync"
check_same "get -f (fsync)" "$L/fsync" "$L/fsync.back"
check_same "cp (server-side copy)" "$R/ops/cpsrc" "$R/ops/cpdst"
check_eq "cp keeps the mode" "640" "$(stat -c %a "$R/ops/cpdst" 2>&1)"
check_eq "ln (hard link)" "$(stat -c %i "$R/ops/target" 2>&1) 2" "$(stat -c '%i %h' "$R/ops/hardlink" 2>&1)"
check_eq "chmod 640 file" "640" "$(stat -c %a "$R/ops/modefile" 2>&1)"
check_eq "chmod 711 directory" "711 directory" "$(stat -c '%a %F' "$R/ops/modedir" 2>&1)"
check_eq "chgrp" "$GRP" "$(stat -c %g "$R/ops/grpfile" 2>&1)"
if [ -n "$OWN" ]; then
    check_eq "chown" "$OWN" "$(stat -c %u "$R/ops/ownfile" 2>&1)"
fi
check_same "put -p content" "$L/pres" "$R/ops/pres"
check_eq "put -p preserves mode and mtime" "$(stat -c '%a %Y' "$L/pres")" "$(stat -c '%a %Y' "$R/ops/pres" 2>&1)"
check_same "get -p content" "$R/ops/presback" "$L/presback"
check_eq "get -p preserves mode and mtime" "640 $(stat -c %Y "$R/ops/presback")" "$(stat -c '%a %Y' "$L/presback" 2>&1)"
# df prints a header and one line of numbers
DF=$(awk '/^sftp> -?df$/ { getline h; getline v; print h "|" v; exit }' "$T/out")
if [[ "$DF" =~ Size.*Used.*Avail.*%Capacity\|\ *[0-9]+\ +[0-9]+\ +[0-9]+\ +[0-9]+\ +[0-9]+% ]]; then
    pass "df"
else
    fail "df" "expected a Size/Used/Avail header and a line of numbers, got '$DF'"
fi
DF=$(awk '/^sftp> -?df -i$/ { getline h; getline v; print h "|" v; exit }' "$T/out")
# A file system without inode counts (btrfs: 0 inodes) makes the client
# print ERR for the capacity.
if [[ "$DF" =~ Inodes.*Used.*Avail.*%Capacity\|\ *[0-9]+\ +[0-9]+\ +[0-9]+\ +[0-9]+\ +[0-9]+% ]] ||
    { [ "$(stat -f -c %c "$R" 2>/dev/null)" = 0 ] &&
      [[ "$DF" =~ Inodes.*Used.*Avail.*%Capacity\|\ *0\ +0\ +0\ +0\ +ERR ]]; }; then
    pass "df -i"
else
    fail "df -i" "expected an Inodes/Used/Avail header and a line of numbers, got '$DF'"
fi

# ---------------------------------------------------------------------------
# 4. listings
# ---------------------------------------------------------------------------
mkdir "$R/lsdir" "$R/lsdir/sub"
printf 'hello' > "$R/lsdir/file5"
chmod 0644 "$R/lsdir/file5"
head -c 300000 /dev/zero > "$R/lsdir/big"
chmod 0600 "$R/lsdir/big"
chmod 0751 "$R/lsdir/sub"
ln -s file5 "$R/lsdir/link"
: > "$R/lsdir/.hidden"
ME=$(id -un)
MYGRP=$(id -gn)
sftp_try "$R" <<EOF
ls -l lsdir
ls -la lsdir
EOF
check_clean "ls -l session"
# fields: mode, links, user, group, size, 3 date fields, name
awk '/^sftp> -?ls -l lsdir$/ { f = 1; next } /^sftp> / { f = 0 } f { print $1, $3, $4, $5, $NF }' "$T/out" \
    | sed 's|lsdir/||' | sort > "$T/ls.got"
(cd "$R/lsdir" && for f in big file5 sub link; do
    stat -c "%A $ME $MYGRP %s %n" "$f"; done) | sort > "$T/ls.exp"
check_eq "ls -l shows mode, owner, group, size and name" "$(tr '\n' ';' < "$T/ls.exp")" "$(tr '\n' ';' < "$T/ls.got")"
awk '/^sftp> -?ls -la lsdir$/ { f = 1; next } /^sftp> / { f = 0 } f { print $NF }' "$T/out" \
    | sed 's|lsdir/||' | sort | tr '\n' ' ' > "$T/ls.got"
check_eq "ls -la shows dot files" ". .. .hidden big file5 link sub " "$(cat "$T/ls.got")"

mkdir "$R/many"
(cd "$R/many" && seq -f 'entry-%g' 1 5000 | xargs touch)
sftp_try "$R" <<EOF
ls -1 many
EOF
check_clean "ls of 5000 entries session"
grep -v '^sftp> ' "$T/out" | sed 's|^many/||' | sort > "$T/many.got"
(cd "$R/many" && ls -1) | sort > "$T/many.exp"
if cmp -s "$T/many.exp" "$T/many.got"; then
    pass "ls of a directory of 5000 entries lists exactly those names"
else
    fail "ls of a directory of 5000 entries lists exactly those names" \
        "expected 5000 names, got $(wc -l < "$T/many.got") lines, $(comm -3 "$T/many.exp" "$T/many.got" | wc -l) differing"
fi

# ---------------------------------------------------------------------------
# 5. awkward file names
# ---------------------------------------------------------------------------
make_names() {   # make_names DIR: a tree of awkward names with distinct contents
    mkdir -p "$1/sub dir/deeper"$'\xff'
    printf 'space\n' > "$1/with space"
    printf 'newline\n' > "$1/new"$'\n'"line"
    printf 'utf8\n' > "$1/héllo-日本.txt"
    printf 'bytes\n' > "$1/"$'\xff\xfe.bin'
    printf 'quote\n' > "$1/it's \"quoted\""
    printf 'back\n' > "$1/back\\slash"
    printf 'tab\n' > "$1/tab"$'\t'"name"
    head -c 70000 /dev/urandom > "$1/sub dir/é "$'\xe9'
    printf 'deep\n' > "$1/sub dir/deeper"$'\xff'"/x y"
}
make_names "$L/names"
make_names "$R/rnames"
cp "$L/names/héllo-日本.txt" "$L/utf8.expect"
cp "$L/names/"$'\xff\xfe.bin' "$L/bytes.expect"
cp "$L/names/new"$'\n'"line" "$L/nl.expect"
cp "$L/names/with space" "$L/space.expect"
mkdir "$L/single"
B2=$'\xff\xfe'
B3=$'\xfe\xff'
sftp_try "$R" <<EOF
put -r "$L/names" names_up
get -r names_up "$L/names_back"
get -r rnames "$L/rnames_back"
get "rnames/with space" "$L/single/space"
get rnames/with\\ space "$L/single/space2"
get rnames/héllo-日本.txt "$L/single/utf8"
get rnames/${B2}.bin "$L/single/bytes"
get rnames/new?line "$L/single/nl"
put "$L/utf8.expect" up/日本-ü.txt
put "$L/bytes.expect" up/$B3
put "$L/space.expect" "up/a b  c"
EOF
check_clean "file names session"
same_tree "put -r of awkward names: same names and contents on the server" "$L/names" "$R/names_up"
same_tree "get -r back: same names and contents locally" "$L/names" "$L/names_back"
same_tree "get -r of awkward names created on the server side" "$R/rnames" "$L/rnames_back"
check_same "get of a name with a space (quoted)" "$L/space.expect" "$L/single/space"
check_same "get of a name with a space (backslash)" "$L/space.expect" "$L/single/space2"
check_same "get of a UTF-8 name" "$L/utf8.expect" "$L/single/utf8"
check_same "get of a non-UTF-8 name" "$L/bytes.expect" "$L/single/bytes"
check_same "get of a name with a newline (glob)" "$L/nl.expect" "$L/single/nl"
check_same "put to a UTF-8 name" "$L/utf8.expect" "$R/up/日本-ü.txt"
check_same "put to a non-UTF-8 name" "$L/bytes.expect" "$R/up/"$'\xfe\xff'
check_same "put to a name with spaces" "$L/space.expect" "$R/up/a b  c"

# ---------------------------------------------------------------------------
# 6. errors
# ---------------------------------------------------------------------------
mkdir "$R/err" "$R/err/nonempty" "$R/err/adir"
echo x > "$R/err/nonempty/f"
echo src > "$R/err/src"
echo dst > "$R/err/dst"
echo "keep me" > "$R/err/keep"
echo "target" > "$R/err/target"
echo local > "$L/errlocal"
N255=$(printf 'n%.0s' $(seq 255))
sftp_run "$R" <<EOF
-mkdir err/${N255}x
-put "$L/errlocal" err/$N255
-rmdir err/src
-get err/missing "$L/missing"
-rmdir err/nonempty
-rmdir err/missingdir
-rm err/missingfile
-rm err/adir
-mkdir err/nonempty
-rename err/missing1 err/whatever
-chmod 644 err/missing2
-ln err/src err/dst
-ln -s src err/dst
-ls err/missing3
-put "$L/errlocal" err/missingdir/file
-cd err/missing4
-rename -l err/keep err/target
EOF
check_rc "error session"
check_err "mkdir of a name longer than 255 bytes: Bad message" 'remote mkdir ".*/err/n+x": Bad message' 'err/nnn'
check_same "put to a 255-byte name" "$L/errlocal" "$R/err/$N255"
check_err "rmdir of a regular file fails" 'remote rmdir ".*/err/src": No such file or directory' 'err/src'
check_err "get of a missing file fails" 'File ".*/err/missing" not found' 'err/missing'
if [ ! -e "$L/missing" ]; then pass "get of a missing file creates nothing locally"; else fail "get of a missing file creates nothing locally" "expected no local file, got one"; fi
check_err "rmdir of a non-empty directory fails" 'remote rmdir ".*/err/nonempty": Failure' 'err/nonempty'
if [ -f "$R/err/nonempty/f" ]; then pass "rmdir of a non-empty directory keeps it"; else fail "rmdir of a non-empty directory keeps it" "expected err/nonempty/f, got it gone"; fi
check_err "rmdir of a missing directory fails" 'remote rmdir ".*/err/missingdir": No such file or directory' 'err/missingdir'
check_err "rm of a missing file fails" 'remote delete .*/err/missingfile: No such file or directory' 'err/missingfile'
check_err "rm of a directory fails" 'remote delete .*/err/adir: Failure' 'err/adir'
check_err "mkdir of an existing directory fails" 'remote mkdir ".*/err/nonempty": Failure' 'err/nonempty'
check_err "rename of a missing file fails" 'remote rename ".*/err/missing1" to ".*/err/whatever": No such file or directory' 'err/missing1'
check_err "chmod of a missing file fails" 'remote setstat ".*/err/missing2": No such file or directory' 'err/missing2'
check_err "ln onto an existing file fails" 'remote link ".*/err/src" to ".*/err/dst": Failure' 'err/src'
check_err "ln -s onto an existing file fails" 'remote symlink file "src" to ".*/err/dst": Failure' 'err/dst'
check_eq "failed ln/ln -s leave the target alone" "dst" "$(cat "$R/err/dst" 2>&1)"
check_err "ls of a missing path fails" 'Can.t ls: ".*/err/missing3" not found' 'err/missing3'
check_err "put into a missing directory fails" 'dest open ".*/err/missingdir/file": No such file or directory' 'err/missingdir/file'
check_err "rename -l onto an existing file fails" 'remote rename ".*/err/keep" to ".*/err/target": Failure' 'err/keep'
check_eq "rename -l onto an existing file keeps both" "keep me|target" "$(cat "$R/err/keep" 2>&1)|$(cat "$R/err/target" 2>&1)"
check_err "cd to a missing directory fails" '^stat remote: No such file or directory'
sftp_run "$R" <<EOF
get err/missing5 "$L/missing5"
get err/src "$L/notreached"
EOF
if [ "$RC" -ne 0 ] && [ ! -e "$L/notreached" ]; then
    pass "batch aborts on a failing command without -"
else
    fail "batch aborts on a failing command without -" "expected a non-zero exit and no second transfer, got exit $RC"
fi

# ---------------------------------------------------------------------------
# 7. permission denied for an unprivileged user
# ---------------------------------------------------------------------------
perm_tests() {
    local why=""
    if [ "$(id -u)" -ne 0 ]; then
        skip "permission tests" "not root, cannot create or switch to user $TEST_USER"
        return
    fi
    if ! add_user "$TEST_USER" -M -s /usr/sbin/nologin &&
        ! add_user "$TEST_USER" -M -s /bin/false; then
        why="could not create user $TEST_USER"
    fi
    if [ -z "$why" ] && ! command -v runuser >/dev/null 2>&1; then
        why="runuser not available"
    fi
    if [ -n "$why" ]; then
        skip "permission tests" "$why"
        return
    fi
    local P=$T/perm
    chmod 0755 "$T"
    mkdir -m 0755 "$P"
    mkdir -m 0755 "$P/rootdir"
    mkdir -m 0755 "$P/userdir"
    chown "$TEST_USER" "$P/userdir"
    echo public > "$P/rootdir/pub"
    chmod 0644 "$P/rootdir/pub"
    echo secret > "$P/rootdir/secret"
    chmod 0600 "$P/rootdir/secret"
    echo upload > "$L/upload"
    chmod 0644 "$L/upload"
    local server
    server=$(binary_for_user "$TEST_USER" "$SFTP_SERVER" "$T")
    if ! runuser -u "$TEST_USER" -- test -x "$P/rootdir" -a -x "$server" 2>/dev/null; then
        fail "permission tests: setup" "expected user $TEST_USER to reach $P/rootdir and the server ($server), got no access"
        return
    fi
    sftp_try "$P" "runuser -u $TEST_USER -- $server${SFTP_SERVER_ARGS:+ $SFTP_SERVER_ARGS}" <<EOF
-put "$L/upload" rootdir/new
-mkdir rootdir/newdir
-rm rootdir/pub
-rename rootdir/pub rootdir/moved
-chmod 666 rootdir/pub
-get rootdir/secret "$L/gotsecret"
get rootdir/pub "$L/gotpub"
put "$L/upload" userdir/new
EOF
    check_rc "unprivileged session"
    check_err "put into a root-owned directory: Permission denied" 'dest open ".*/rootdir/new": Permission denied' 'rootdir/new'
    if [ ! -e "$P/rootdir/new" ]; then pass "put into a root-owned directory creates nothing"; else fail "put into a root-owned directory creates nothing" "expected no rootdir/new, got one"; fi
    check_err "mkdir in a root-owned directory: Permission denied" 'remote mkdir ".*/rootdir/newdir": Permission denied' 'rootdir/newdir'
    check_err "rm in a root-owned directory: Permission denied" 'remote delete .*/rootdir/pub: Permission denied' 'rootdir/pub'
    check_err "rename in a root-owned directory: Permission denied" 'remote rename ".*/rootdir/pub" to ".*/rootdir/moved": Permission denied' 'rootdir/pub'
    check_err "chmod of a root-owned file: Permission denied" 'remote setstat ".*/rootdir/pub": Permission denied' 'rootdir/pub'
    check_err "get of an unreadable file: Permission denied" 'remote open ".*/rootdir/secret": Permission denied' 'rootdir/secret'
    check_eq "root-owned file untouched" "public 644" "$(cat "$P/rootdir/pub" 2>&1) $(stat -c %a "$P/rootdir/pub" 2>&1)"
    check_same "unprivileged get of a readable file" "$P/rootdir/pub" "$L/gotpub"
    check_same "unprivileged put into an own directory" "$L/upload" "$P/userdir/new"
    check_eq "uploaded file is owned by the unprivileged user" "$TEST_USER" "$(stat -c %U "$P/userdir/new" 2>&1)"
}
perm_tests

summary
