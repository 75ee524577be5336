#!/usr/bin/env bash
# Integration tests behind a real sshd: the system's /usr/sbin/sshd runs in
# the foreground on 127.0.0.1 and a free high port with its own configuration
# and keys in a temporary directory (see tests/lib/sshd-lib.sh), with
# "Subsystem sftp SERVER ...", and real clients log in over SSH:
# OpenSSH sftp and scp, paramiko, asyncssh, curl (libssh2) and lftp. Every file moved
# is compared with its original. Then the server's flags are checked to take
# effect through sshd (-e -l INFO, -l INFO -f LOCAL5, -R, -u, -P), and, when
# run as root, an unprivileged user logs in too.
#
# Usage: tests/sshd/run-sshd.sh
#   SFTP_SERVER   server binary (absolute path); default: sftp-server in the
#                 repository root
#   SFTP_SERVER_ARGS  more options of the server in the clients' part (1 to
#                 5 below), as -A: the clients' checks hold with them too
#
# Never reads or changes /etc/ssh and never touches the machine's own sshd.
# As root it creates /run/sshd if missing (sshd's privilege separation
# directory) and a user "sftpssh" (shell /bin/sh, no password) if missing,
# and, when no syslog daemon owns /dev/log, listens there itself for the
# length of the -f LOCAL5 check (tests/sshd/sshd_syslog.py; removed after).
#
# Output: "ok - NAME" / "FAIL - NAME: ..." / "skip - NAME: ..." per check,
# then "N passed, M failed[, K skipped]". Exit status 1 if any failed.

set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/lib.sh
. "$HERE/../lib/lib.sh"
# shellcheck source=tests/lib/sshd-lib.sh
. "$HERE/../lib/sshd-lib.sh"

SFTP_SERVER=$(server_path "${SFTP_SERVER:-}")
PYTHON=/usr/bin/python3
TEST_USER=sftpssh
HOST=127.0.0.1

export LC_ALL=C

T=$(mktemp -d) || setup_failed "expected mktemp -d to work, got an error"
SYSLOG_PID=""
SYSLOG_SOCKET=""
cleanup() {
    sshd_stop
    if [ -n "$SYSLOG_PID" ]; then
        kill "$SYSLOG_PID" 2>/dev/null
        wait "$SYSLOG_PID" 2>/dev/null
    fi
    # our own socket only (the listener removes it; this is for a crash)
    if [ -n "$SYSLOG_SOCKET" ] && [ -S "$SYSLOG_SOCKET" ] && [ -e "$T/syslog.ours" ]; then
        rm -f "$SYSLOG_SOCKET"
    fi
    remove_tree "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
chmod 0755 "$T"

S=$T/sshd       # sshd's configuration, keys and logs
R=$T/remote     # the server's start directory (-d), where clients write
L=$T/local      # the clients' side
mkdir -m 0755 "$R" "$L"

need_server "$SFTP_SERVER"
WHY=$(sshd_missing)
if [ -n "$WHY" ]; then
    skip "sshd tests" "$WHY"
    summary
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    SSHD_USERS="root $TEST_USER"
    ME=root
else
    ME=$(id -un)
fi
if ! sshd_init "$S"; then
    fail "sshd setup" "expected host and user keys made with ssh-keygen, got an error"
    summary
    exit 1
fi
sshd_authorize "$ME"

# start NAME SUBSYSTEM-ARGS...: sshd with "Subsystem sftp SERVER ARGS"
start() {
    local name=$1
    shift
    if sshd_start "$name" <<EOF
Subsystem sftp $SFTP_SERVER $*
EOF
    then
        return 0
    fi
    fail "sshd starts ($name)" "expected sshd to listen on $HOST, got: $SSHD_ERROR"
    return 1
}

# sftp_run < BATCH: OpenSSH sftp through sshd; RC, $T/out, $T/err
sftp_run() {
    local user=${1:-$ME}
    cat > "$T/batch"
    timeout 120 sftp "${SSH_OPTS[@]}" -q -b "$T/batch" "$user@$HOST" \
        > "$T/out" 2> "$T/err" < /dev/null
    RC=$?
}

check_absent() {  # check_absent NAME PATH
    if [ ! -e "$2" ] && [ ! -L "$2" ]; then
        pass "$1"
    else
        fail "$1" "expected no ${2#"$T"/}, got one"
    fi
}

same_mtimes() {   # same_mtimes NAME DIR1 DIR2: regular files' mtimes
    local name=$1 a=$2 b=$3 p bad=""
    while IFS= read -r -d '' p; do
        [ "$(stat -c %Y "$a/$p")" = "$(stat -c %Y "$b/$p" 2>/dev/null)" ] || bad="$bad $p"
    done < <(cd "$a" && find . -type f -print0)
    if [ -z "$bad" ]; then
        pass "$name"
    else
        fail "$name" "expected the same modification times, got differences in:$bad"
    fi
}

make_tree() {     # make_tree DIR: a small tree of files, empty ones, subdirs
    mkdir -p "$1/sub/deeper" "$1/empty dir" "$1/sp ace"
    head -c 2097169 /dev/urandom > "$1/big"
    head -c 300000 /dev/urandom > "$1/sub/mid"
    : > "$1/sub/empty"
    printf 'deep\n' > "$1/sub/deeper/leaf"
    printf 'space\n' > "$1/sp ace/with space"
    printf 'utf8\n' > "$1/sub/héllo.txt"
    touch -d '2011-01-01 00:00:01' "$1/sub/mid"
}

START=$SECONDS
# shellcheck disable=SC2086 # the options, split
start main -d "$R" ${SFTP_SERVER_ARGS:-} || { summary; exit 1; }

# ---------------------------------------------------------------------------
# 1. OpenSSH sftp
# ---------------------------------------------------------------------------
SIZES="0 1 32768 261121 1048583 16777216"
mkdir "$R/up" "$L/back"
for s in $SIZES; do
    head -c "$s" /dev/urandom > "$L/f$s"
done
make_tree "$L/tree"
mkdir "$R/ops" "$R/ops/rmdir"
echo "rename me" > "$R/ops/old"
echo "remove me" > "$R/ops/rmfile"
sftp_try < <(
    for s in $SIZES; do echo "put \"$L/f$s\" up/f$s"; done
    for s in $SIZES; do echo "get up/f$s \"$L/back/f$s\""; done
    echo "mkdir ops/newdir"
    echo "rmdir ops/rmdir"
    echo "rename ops/old ops/new"
    echo "rm ops/rmfile"
    echo "ls -l up"
    echo "df"
    echo "put -r \"$L/tree\" treeup"
    echo "get -r treeup \"$L/treeback\""
    echo "pwd"
)
check_clean "sftp: session through sshd"
for s in $SIZES; do
    check_same "sftp: put $s bytes" "$L/f$s" "$R/up/f$s"
    check_same "sftp: get $s bytes" "$L/f$s" "$L/back/f$s"
done
if [ -d "$R/ops/newdir" ]; then pass "sftp: mkdir"; else fail "sftp: mkdir" "expected ops/newdir, got none"; fi
check_absent "sftp: rmdir" "$R/ops/rmdir"
check_absent "sftp: rm" "$R/ops/rmfile"
if [ ! -e "$R/ops/old" ]; then
    check_eq "sftp: rename" "rename me" "$(cat "$R/ops/new" 2>&1)"
else
    fail "sftp: rename" "expected ops/old gone, got it still there"
fi
awk '/^sftp> -?ls -l up$/ { f = 1; next } /^sftp> / { f = 0 } f { print $1, $3, $4, $5, $NF }' "$T/out" \
    | sed 's|up/||' | sort > "$T/ls.got"
(cd "$R/up" && for f in *; do stat -c "%A $(id -un) $(id -gn) %s %n" "$f"; done) | sort > "$T/ls.exp"
check_eq "sftp: ls -l shows mode, owner, group, size and name" "$(tr '\n' ';' < "$T/ls.exp")" "$(tr '\n' ';' < "$T/ls.got")"
DF=$(awk '/^sftp> -?df$/ { getline h; getline v; print h "|" v; exit }' "$T/out")
if [[ "$DF" =~ Size.*Used.*Avail.*%Capacity\|\ *[0-9]+\ +[0-9]+\ +[0-9]+\ +[0-9]+\ +[0-9]+% ]]; then
    pass "sftp: df"
else
    fail "sftp: df" "expected a Size/Used/Avail header and a line of numbers, got '$DF'"
fi
check_grep "sftp: pwd is the -d start directory" "^Remote working directory: $R\$" "$T/out"
same_tree "sftp: put -r of a tree" "$L/tree" "$R/treeup"
same_tree "sftp: get -r of a tree" "$L/tree" "$L/treeback"

# the largest requests the client allows and a deep pipeline: the server's
# backpressure against sshd's channel window
cat > "$T/batch" <<EOF
put "$L/f16777216" up/deep
get up/deep "$L/back/deep"
EOF
timeout 120 sftp "${SSH_OPTS[@]}" -q -B 261120 -R 1024 -b "$T/batch" "$ME@$HOST" > "$T/out" 2> "$T/err" < /dev/null
RC=$?
check_clean "sftp -B 261120 -R 1024: session"
check_same "sftp -B 261120 -R 1024: put 16 MiB" "$L/f16777216" "$R/up/deep"
check_same "sftp -B 261120 -R 1024: get 16 MiB" "$L/f16777216" "$L/back/deep"

# ---------------------------------------------------------------------------
# 2. scp (SFTP protocol, as the default since OpenSSH 9.0)
# ---------------------------------------------------------------------------
scp_run() {       # scp_run ARGS...: RC, $T/err
    timeout 120 scp "${SSH_OPTS[@]}" -q "$@" > "$T/out" 2> "$T/err" < /dev/null
    RC=$?
}
mkdir "$L/scp"
scp_run -s "$L/f1048583" "$ME@$HOST:scp1"
check_rc "scp: upload to a relative path"
check_same "scp: upload lands in the start directory" "$L/f1048583" "$R/scp1"
scp_run -s "$ME@$HOST:scp1" "$L/scp/scp1"
check_rc "scp: download"
check_same "scp: download contents" "$L/f1048583" "$L/scp/scp1"
scp_run -s "$L/f261121" "$ME@$HOST:~/scp2"
check_rc "scp: upload to a ~/ path"
check_same "scp: ~/ is the start directory (expand-path)" "$L/f261121" "$R/scp2"
scp_run -s "$ME@$HOST:~/scp2" "$L/scp/scp2"
check_same "scp: download of a ~/ path" "$L/f261121" "$L/scp/scp2"
scp_run -s "$L/f16777216" "$ME@$HOST:$R/up/scp-abs"
check_same "scp: upload to an absolute path, 16 MiB" "$L/f16777216" "$R/up/scp-abs"
scp_run -s -r "$L/tree" "$ME@$HOST:scptree"
check_rc "scp -r: upload"
same_tree "scp -r: uploaded tree" "$L/tree" "$R/scptree"
scp_run -s -r "$ME@$HOST:~/scptree" "$L/scp/tree"
check_rc "scp -r: download"
same_tree "scp -r: downloaded tree" "$L/tree" "$L/scp/tree"
chmod 0640 "$L/f32768"
touch -d '2005-06-07 08:09:10' "$L/f32768"
scp_run -s -p "$L/f32768" "$ME@$HOST:scp-p"
check_eq "scp -p: mode and mtime kept" "640 $(stat -c %Y "$L/f32768")" "$(stat -c '%a %Y' "$R/scp-p" 2>&1)"
scp_run -s -3 "$ME@$HOST:scp1" "$ME@$HOST:scp3"
check_same "scp -3: remote to remote through this host" "$L/f1048583" "$R/scp3"
scp_run -s "$ME@$HOST:missing-file" "$L/scp/missing"
if [ "$RC" -ne 0 ] && grep -q 'No such file' "$T/err"; then
    pass "scp: download of a missing file fails with No such file"
else
    fail "scp: download of a missing file fails with No such file" "expected a non-zero exit and 'No such file', got exit $RC, '$(oneline "$T/err")'"
fi

# ---------------------------------------------------------------------------
# 3. paramiko
# ---------------------------------------------------------------------------
# py_client NAME MODULE SCRIPT: a Python client script through the sshd; its
# own ok/FAIL lines are counted here.
py_client() {
    if ! "$PYTHON" -c "import $2" 2>/dev/null; then
        skip "$1" "python3-$2 not installed"
        return
    fi
    timeout 170 "$PYTHON" "$HERE/$3" "$HOST" "$SSHD_PORT" "$ME" \
        "$SSH_KEY" "$SSH_KNOWN_HOSTS" "$R" > "$T/$2.out" 2> "$T/$2.err"
    RC=$?
    cat "$T/$2.out"
    n_ok=$(grep -c '^ok - ' "$T/$2.out")
    n_fail=$(grep -c '^FAIL - ' "$T/$2.out")
    PASSED=$((PASSED + n_ok))
    FAILED=$((FAILED + n_fail))
    if [ "$RC" -ne 0 ] && [ "$n_fail" -eq 0 ]; then
        fail "$1: script" "expected exit status 0, got $RC (stderr: $(oneline "$T/$2.err"))"
    fi
}

py_client paramiko paramiko sshd_paramiko.py
# asyncssh (its own SFTP client, parallel requests)
py_client asyncssh asyncssh sshd_asyncssh.py

# ---------------------------------------------------------------------------
# 4. curl (libssh2)
# ---------------------------------------------------------------------------
curl_tests() {
    local base c
    if ! command -v curl >/dev/null 2>&1; then
        skip "curl" "curl not installed"
        return
    fi
    if ! curl -V | grep -q '^Protocols:.* sftp'; then
        skip "curl" "this curl has no sftp support"
        return
    fi
    # curl checks the host key against ~/.ssh/known_hosts
    mkdir -p "$S/curlhome/.ssh"
    cp "$SSH_KNOWN_HOSTS" "$S/curlhome/.ssh/known_hosts"
    base="sftp://$ME@$HOST:$SSHD_PORT"
    c=(env HOME="$S/curlhome" timeout 120 curl -sS --key "$SSH_KEY" --pubkey "$SSH_PUBKEY" --max-time 110)
    mkdir "$R/curl" "$L/curl"

    "${c[@]}" -T "$L/f1048583" "$base$R/curl/up1" > "$T/out" 2> "$T/err"; RC=$?
    check_clean "curl: upload to an absolute path"
    check_same "curl: uploaded contents" "$L/f1048583" "$R/curl/up1"
    "${c[@]}" -o "$L/curl/down1" "$base$R/curl/up1" > "$T/out" 2> "$T/err"; RC=$?
    check_clean "curl: download"
    check_same "curl: downloaded contents" "$L/f1048583" "$L/curl/down1"
    "${c[@]}" -T "$L/f16777216" "$base/~/curl/up16" > "$T/out" 2> "$T/err"; RC=$?
    check_clean "curl: upload of 16 MiB to a ~/ path"
    check_same "curl: ~/ is the start directory" "$L/f16777216" "$R/curl/up16"
    "${c[@]}" -o "$L/curl/down16" "$base/~/curl/up16" > "$T/out" 2> "$T/err"; RC=$?
    check_same "curl: download of 16 MiB" "$L/f16777216" "$L/curl/down16"
    "${c[@]}" --ftp-create-dirs -T "$L/f1" "$base$R/curl/new/deep/f1" > "$T/out" 2> "$T/err"; RC=$?
    check_clean "curl: upload with --ftp-create-dirs"
    check_same "curl: --ftp-create-dirs made the directories" "$L/f1" "$R/curl/new/deep/f1"

    # range download (random access read)
    "${c[@]}" -r 100000-299999 -o "$L/curl/range" "$base$R/curl/up1" > "$T/out" 2> "$T/err"; RC=$?
    tail -c +100001 "$L/f1048583" | head -c 200000 > "$L/curl/range.exp"
    check_same "curl: range download -r 100000-299999" "$L/curl/range.exp" "$L/curl/range"
    # resumed upload and append
    head -c 500000 "$L/f1048583" > "$R/curl/resume"
    "${c[@]}" -C - -T "$L/f1048583" "$base$R/curl/resume" > "$T/out" 2> "$T/err"; RC=$?
    check_clean "curl: resumed upload (-C -)"
    check_same "curl: resumed upload completes the file" "$L/f1048583" "$R/curl/resume"
    printf 'head|' > "$R/curl/app"
    printf 'tail' > "$L/curl/tail"
    "${c[@]}" --append -T "$L/curl/tail" "$base$R/curl/app" > "$T/out" 2> "$T/err"; RC=$?
    check_eq "curl: --append upload" "head|tail" "$(cat "$R/curl/app" 2>&1)"
    head -c 500000 "$L/f1048583" > "$L/curl/partial"
    "${c[@]}" -C - -o "$L/curl/partial" "$base$R/curl/up1" > "$T/out" 2> "$T/err"; RC=$?
    check_same "curl: resumed download (-C -)" "$L/f1048583" "$L/curl/partial"

    # directory listings
    mkdir "$R/curl/ls" "$R/curl/ls/sub"
    printf 'hello' > "$R/curl/ls/five"
    : > "$R/curl/ls/.hidden"
    ln -s five "$R/curl/ls/link"
    "${c[@]}" -l "$base$R/curl/ls/" > "$T/out" 2> "$T/err"; RC=$?
    check_clean "curl: name listing (-l)"
    check_eq "curl: name listing" ". .. .hidden five link sub" "$(sort "$T/out" | tr '\n' ' ' | sed 's/ $//')"
    "${c[@]}" "$base$R/curl/ls/" > "$T/out" 2> "$T/err"; RC=$?
    check_clean "curl: long listing"
    check_grep "curl: long listing of a file" '^-rw-r--r-- +1 +[^ ]+ +[^ ]+ +5 .* five$' "$T/out"
    check_grep "curl: long listing of a symlink" '^lrwxrwxrwx +1 .* link -> five$' "$T/out"
    check_grep "curl: long listing of a directory" '^d[rwx-]{9} .* sub$' "$T/out"

    # quote commands
    mkdir "$R/curl/q" "$R/curl/q/rmd"
    echo a > "$R/curl/q/a"
    echo rmf > "$R/curl/q/rmf"
    echo lnk > "$R/curl/q/target"
    "${c[@]}" -Q "mkdir $R/curl/q/made" -Q "rename $R/curl/q/a $R/curl/q/b" \
        -Q "rm $R/curl/q/rmf" -Q "rmdir $R/curl/q/rmd" -Q "chmod 640 $R/curl/q/b" \
        -Q "symlink $R/curl/q/target $R/curl/q/sym" -Q "ln $R/curl/q/target $R/curl/q/hard" \
        -Q "mtime \"Fri, 13 Feb 2009 23:31:30 GMT\" $R/curl/q/target" \
        -Q "-rename $R/curl/q/made $R/curl/q/made2" \
        -o /dev/null "$base$R/curl/q/" > "$T/out" 2> "$T/err"; RC=$?
    check_clean "curl: quote commands"
    if [ -d "$R/curl/q/made2" ] && [ ! -e "$R/curl/q/made" ]; then
        pass "curl: quote mkdir, and rename after the transfer (-Q -cmd)"
    else
        fail "curl: quote mkdir, and rename after the transfer (-Q -cmd)" "expected q/made2 and no q/made, got $(ls "$R/curl/q" | tr '\n' ' ')"
    fi
    check_eq "curl: quote rename" "no a|a" "$([ -e "$R/curl/q/a" ] && echo "a still there" || echo "no a")|$(cat "$R/curl/q/b" 2>&1)"
    check_absent "curl: quote rm" "$R/curl/q/rmf"
    check_absent "curl: quote rmdir" "$R/curl/q/rmd"
    check_eq "curl: quote chmod" "640" "$(stat -c %a "$R/curl/q/b" 2>&1)"
    check_eq "curl: quote symlink" "$R/curl/q/target" "$(readlink "$R/curl/q/sym" 2>&1)"
    check_eq "curl: quote ln (symlink)" "$R/curl/q/target" "$(readlink "$R/curl/q/hard" 2>&1)"
    check_eq "curl: quote mtime" "1234567890" "$(stat -c %Y "$R/curl/q/target" 2>&1)"
    "${c[@]}" -Q "rm $R/curl/q/missing" -o /dev/null "$base$R/curl/q/" > "$T/out" 2> "$T/err"; RC=$?
    check_eq "curl: failing quote command gives exit status 21" "21" "$RC"
    "${c[@]}" -o "$L/curl/missing" "$base$R/curl/missing" > "$T/out" 2> "$T/err"; RC=$?
    check_eq "curl: download of a missing file gives exit status 78" "78" "$RC"
}
curl_tests

# ---------------------------------------------------------------------------
# 5. lftp
# ---------------------------------------------------------------------------
lftp_tests() {
    if ! command -v lftp >/dev/null 2>&1; then
        skip "lftp" "lftp not installed"
        return
    fi
    make_tree "$R/lftpsrc"
    cat > "$T/lftp.cmds" <<EOF
set sftp:connect-program "ssh -a -x -F /dev/null -o UserKnownHostsFile=$SSH_KNOWN_HOSTS -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o BatchMode=yes -o IdentitiesOnly=yes -o IdentityAgent=none -o LogLevel=ERROR -i $SSH_KEY"
set sftp:auto-confirm yes
set net:max-retries 2
set net:reconnect-interval-base 1
set net:timeout 30
set cmd:fail-exit yes
set cmd:interactive no
open -u $ME, -p $SSHD_PORT sftp://$HOST
mirror $R/lftpsrc $L/lftpdown
mirror -R $L/tree $R/lftpup
mirror -R --parallel=3 $L/tree $R/lftpup3
put $L/f1048583 -o $R/lftpput
pget -n 4 $R/lftpsrc/big -o $L/lftppget
get $R/lftpput -o $L/lftpget
mv $R/lftpput $R/lftpmoved
cd $R/lftpsrc
cls -1
EOF
    timeout 150 lftp -f "$T/lftp.cmds" > "$T/out" 2> "$T/err" < /dev/null
    RC=$?
    check_clean "lftp: session (mirror both ways, put, get, pget, mv, cls)"
    same_tree "lftp: mirror of a remote tree" "$R/lftpsrc" "$L/lftpdown"
    same_mtimes "lftp: mirror keeps modification times" "$R/lftpsrc" "$L/lftpdown"
    same_tree "lftp: mirror -R of a local tree" "$L/tree" "$R/lftpup"
    same_mtimes "lftp: mirror -R sets modification times" "$L/tree" "$R/lftpup"
    same_tree "lftp: mirror -R --parallel=3" "$L/tree" "$R/lftpup3"
    check_same "lftp: put, mv" "$L/f1048583" "$R/lftpmoved"
    check_same "lftp: get" "$L/f1048583" "$L/lftpget"
    check_same "lftp: pget -n 4 (four connections, ranges of one file)" "$R/lftpsrc/big" "$L/lftppget"
    check_eq "lftp: cls" "big empty dir/ sp ace/ sub/" "$(sort "$T/out" | tr '\n' ' ' | sed 's/ $//')"
}
lftp_tests

# ---------------------------------------------------------------------------
# 6. the server's flags, through sshd's Subsystem line
# ---------------------------------------------------------------------------
# sshd drops a subsystem's stderr: the shell that runs the Subsystem line
# sends it to a file instead.
mkdir "$R/flags"
echo "read me" > "$R/flags/readme"
if start log-e -e -l INFO -d "$R" "2>>$T/server-e.log"; then
    sftp_run <<EOF
put "$L/f261121" flags/up
get flags/up "$L/flags-back"
EOF
    check_clean "-e -l INFO: session"
    check_same "-e -l INFO: transfer" "$L/f261121" "$L/flags-back"
    scp_run "$L/f1" "$ME@$HOST:flags/scp"
    check_same "scp without -s: transfer" "$L/f1" "$R/flags/scp"
    # on stderr each line ends in CR LF, as OpenSSH's
    tr -d '\r' < "$T/server-e.log" > "$T/server-e.txt"
    L_=$T/server-e.txt
    check_grep "-e -l INFO: session opened line with the client address" "^session opened for local user $ME from \[127\.0\.0\.1\]\$" "$L_"
    check_grep "-e -l INFO: open line of an upload" "^open \"$R/flags/up\" flags WRITE,CREATE,TRUNCATE mode 0[0-7]+\$" "$L_"
    check_grep "-e -l INFO: close line of an upload" "^close \"$R/flags/up\" bytes read 0 written 261121\$" "$L_"
    check_grep "-e -l INFO: open line of a download" "^open \"$R/flags/up\" flags READ mode 0666\$" "$L_"
    check_grep "-e -l INFO: close line of a download" "^close \"$R/flags/up\" bytes read 261121 written 0\$" "$L_"
    check_grep "-e -l INFO: session closed line" "^session closed for local user $ME from \[127\.0\.0\.1\]\$" "$L_"
    check_grep "scp without -s speaks SFTP (the server logged its upload)" "^close \"(.*/)?flags/scp\" bytes read 0 written 1\$" "$L_"

    # a client that vanishes with a file open: the server sees the end of its
    # input, closes the file (logging what was written) and exits
    if "$PYTHON" -c 'import paramiko' 2>/dev/null; then
        timeout 60 "$PYTHON" "$HERE/sshd_paramiko.py" "$HOST" "$SSHD_PORT" "$ME" \
            "$SSH_KEY" "$SSH_KNOWN_HOSTS" "$R/flags/abrupt" disconnect > "$T/pm.out" 2> "$T/pm.err"
        RC=$?
        check_eq "client gone mid-upload: 1 MiB written first" "0 ok - paramiko: 1 MiB written, leaving without closing" "$RC $(cat "$T/pm.out")"
        n=0
        while [ $n -lt 100 ] && ! tr -d '\r' < "$T/server-e.log" | grep -q "close \"$R/flags/abrupt\""; do
            sleep 0.1
            n=$((n + 1))
        done
        tr -d '\r' < "$T/server-e.log" > "$T/server-e.txt"
        check_grep "client gone mid-upload: the server closes the file and logs it (forced close)" "^forced close \"$R/flags/abrupt\" bytes read 0 written 1048576\$" "$L_"
        check_eq "client gone mid-upload: the data is on disk" "1048576" "$(stat -c %s "$R/flags/abrupt" 2>&1)"
        n=0
        while [ $n -lt 100 ] && [ "$(grep -c '^session closed' "$T/server-e.txt")" -lt 3 ]; do
            sleep 0.1
            n=$((n + 1))
            tr -d '\r' < "$T/server-e.log" > "$T/server-e.txt"
        done
        check_eq "client gone mid-upload: the server ends its session" "3 3" \
            "$(grep -c '^session opened' "$T/server-e.txt") $(grep -c '^session closed' "$T/server-e.txt")"
    fi
fi

# /dev/log is the machine's: suites that run at once (make check runs this
# script for several builds in parallel, with and without -A) take turns at
# it under a lock on /dev, held from the check that it is free until the
# listener has removed it; without the turns, one suite's server logged to
# another's listener, or to none.
syslog_tests() {
    local n=0
    if [ "$(id -u)" -ne 0 ]; then
        skip "-l INFO -f LOCAL5: syslog lines" "not root, cannot listen on /dev/log"
        return 1
    fi
    exec 8</dev
    if command -v flock >/dev/null && ! flock -w 300 8; then
        exec 8<&-
        fail "-l INFO -f LOCAL5: syslog listener" "expected the lock on /dev within 300 s, got none"
        return 1
    fi
    if [ -e /dev/log ] || [ -L /dev/log ]; then
        exec 8<&-
        skip "-l INFO -f LOCAL5: syslog lines" "/dev/log belongs to a running syslog daemon"
        return 1
    fi
    SYSLOG_SOCKET=/dev/log
    : > "$T/syslog.ours"
    "$PYTHON" "$HERE/sshd_syslog.py" /dev/log "$T/syslog.txt" 8<&- &
    SYSLOG_PID=$!
    while [ ! -S /dev/log ] && [ $n -lt 100 ] && kill -0 "$SYSLOG_PID" 2>/dev/null; do
        sleep 0.05
        n=$((n + 1))
    done
    if [ ! -S /dev/log ] || ! kill -0 "$SYSLOG_PID" 2>/dev/null; then
        fail "-l INFO -f LOCAL5: syslog listener" "expected our listener on a socket at /dev/log within 5 s, got none"
        return 1
    fi
}
syslog_stop() {
    if [ -n "$SYSLOG_PID" ]; then
        kill "$SYSLOG_PID" 2>/dev/null
        wait "$SYSLOG_PID" 2>/dev/null
        SYSLOG_PID=""
        rm -f "$T/syslog.ours"
    fi
    SYSLOG_SOCKET=""
    exec 8<&-
}
# syslog's tag is the program's name, as OpenSSH's (__progname)
IDENT=$(basename "$SFTP_SERVER" | sed 's/[][\.*^$+?(){}|/]/\\&/g')
if start syslog -l INFO -f LOCAL5 -d "$R"; then
    syslog_tests
    HAVE_SYSLOG=$?
    # the lock is this shell's: no client keeps it after its turn
    sftp_run 8<&- <<EOF
put "$L/f32768" flags/syslog
EOF
    check_clean "-l INFO -f LOCAL5: session"
    check_same "-l INFO -f LOCAL5: transfer" "$L/f32768" "$R/flags/syslog"
    if [ "$HAVE_SYSLOG" -eq 0 ]; then
        # the server has exited when the client has: wait for its last line
        n=0
        while ! grep -q "session closed for local user $ME from \[127\.0\.0\.1\]" "$T/syslog.txt" 2>/dev/null && [ $n -lt 100 ]; do
            sleep 0.05
            n=$((n + 1))
        done
        syslog_stop
        # <174>: facility LOCAL5 (21) * 8 + severity INFO (6)
        check_grep "-l INFO -f LOCAL5: session opened, at local5.info" "^<174>[^]]* $IDENT\[[0-9]+\]: session opened for local user $ME from \[127\.0\.0\.1\]\$" "$T/syslog.txt"
        check_grep "-l INFO -f LOCAL5: close line" "^<174>[^]]* $IDENT\[[0-9]+\]: close \"$R/flags/syslog\" bytes read 0 written 32768\$" "$T/syslog.txt"
        # other programs on this machine may log meanwhile: only the lines of
        # the server process that wrote our file count
        pid=$(grep -a "close \"$R/flags/syslog\"" "$T/syslog.txt" | sed -nE "s/.*$IDENT\[([0-9]+)\]: .*/\1/p" | head -1)
        n=$(grep -Eac "$IDENT\[$pid\]: " "$T/syslog.txt")
        if [ -z "$pid" ] || [ "$n" -lt 3 ]; then
            fail "-l INFO -f LOCAL5: every server line at local5.info" "expected at least 3 lines of the server that wrote flags/syslog, got $n (pid '$pid')"
        elif grep -Ea "$IDENT\[$pid\]: " "$T/syslog.txt" | grep -qv '^<174>'; then
            fail "-l INFO -f LOCAL5: every server line at local5.info" "expected only <174> lines, got '$(grep -Ea "$IDENT\[$pid\]: " "$T/syslog.txt" | grep -v '^<174>' | head -2 | tr '\n' ' ')'"
        else
            pass "-l INFO -f LOCAL5: every server line at local5.info"
        fi
    fi
fi
syslog_stop

if start readonly -R -d "$R"; then
    sftp_try <<EOF
put "$L/f1" flags/ro-new
get flags/readme "$L/ro-got"
mkdir flags/ro-dir
rm flags/readme
EOF
    check_grep "-R: upload refused with Permission denied" "dest open \"$R/flags/ro-new\": Permission denied" "$T/err"
    check_absent "-R: nothing created by the upload" "$R/flags/ro-new"
    check_grep "-R: mkdir refused with Permission denied" "remote mkdir \"$R/flags/ro-dir\": Permission denied" "$T/err"
    check_eq "-R: rm refused, file kept" "read me" "$(cat "$R/flags/readme" 2>&1)"
    check_same "-R: download still works" "$R/flags/readme" "$L/ro-got"
fi

if start umask -u 077 -d "$R"; then
    chmod 0644 "$L/f32768"
    sftp_try <<EOF
put "$L/f32768" flags/umask-file
mkdir flags/umask-dir
EOF
    check_clean "-u 077: session"
    check_eq "-u 077: uploaded 0644 file is 0600" "600" "$(stat -c %a "$R/flags/umask-file" 2>&1)"
    check_eq "-u 077: new directory is 0700" "700" "$(stat -c %a "$R/flags/umask-dir" 2>&1)"
fi

if start deny -P remove,rmdir -d "$R"; then
    mkdir "$R/flags/keepdir"
    sftp_try <<EOF
rm flags/readme
rmdir flags/keepdir
put "$L/f1" flags/deny-put
EOF
    check_grep "-P remove,rmdir: rm refused" "remote delete $R/flags/readme: Permission denied" "$T/err"
    check_eq "-P remove,rmdir: file and directory kept" "read me|yes" "$(cat "$R/flags/readme" 2>&1)|$([ -d "$R/flags/keepdir" ] && echo yes)"
    check_same "-P remove,rmdir: other requests allowed" "$L/f1" "$R/flags/deny-put"
fi

# ---------------------------------------------------------------------------
# 7. an unprivileged user
# ---------------------------------------------------------------------------
user_tests() {
    local server=$SFTP_SERVER U=$T/user
    if [ "$(id -u)" -ne 0 ]; then
        skip "unprivileged user" "not root, cannot create user $TEST_USER"
        return
    fi
    if ! sshd_test_user "$TEST_USER" /; then
        skip "unprivileged user" "could not create user $TEST_USER"
        return
    fi
    sshd_authorize "$TEST_USER"
    mkdir -m 0755 "$U" "$U/rootdir"
    mkdir -m 0755 "$U/mine"
    chown "$TEST_USER" "$U/mine"
    echo public > "$U/rootdir/pub"
    echo secret > "$U/rootdir/secret"
    chmod 0600 "$U/rootdir/secret"
    chmod 0644 "$L/f261121"
    server=$(binary_for_user "$TEST_USER" "$server" "$T")
    # the user's shell appends the server's stderr to this file
    : > "$T/user.log"
    chmod 0666 "$T/user.log"
    sshd_start user <<EOF || { fail "sshd starts (user)" "expected sshd to listen, got: $SSHD_ERROR"; return; }
Subsystem sftp $server -e -l INFO -d $U 2>>$T/user.log
EOF
    sftp_try "$TEST_USER" <<EOF
put "$L/f261121" mine/up
get mine/up "$L/user-back"
put "$L/f1" rootdir/new
get rootdir/secret "$L/user-secret"
get rootdir/pub "$L/user-pub"
EOF
    check_rc "unprivileged user: session"
    check_same "unprivileged user: upload into an own directory" "$L/f261121" "$U/mine/up"
    check_eq "unprivileged user: uploaded file is the user's" "$TEST_USER 644" "$(stat -c '%U %a' "$U/mine/up" 2>&1)"
    check_same "unprivileged user: download" "$L/f261121" "$L/user-back"
    check_grep "unprivileged user: upload into root's directory refused" "dest open \"$U/rootdir/new\": Permission denied" "$T/err"
    check_absent "unprivileged user: nothing created in root's directory" "$U/rootdir/new"
    check_grep "unprivileged user: root's 0600 file unreadable" "remote open \"$U/rootdir/secret\": Permission denied" "$T/err"
    check_same "unprivileged user: readable file" "$U/rootdir/pub" "$L/user-pub"
    tr -d '\r' < "$T/user.log" > "$T/user.txt"
    check_grep "unprivileged user: log names the user" "^session opened for local user $TEST_USER from \[127\.0\.0\.1\]\$" "$T/user.txt"
}
user_tests

sshd_stop
printf '# %d s\n' $((SECONDS - START))
summary
