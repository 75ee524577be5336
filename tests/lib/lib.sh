# shellcheck shell=bash
# What the shell suites share, sourced by each (bash).
#
# Results: one line per check, "ok - NAME", "FAIL - NAME: what was
# expected, what came back" or "skip - NAME: why", and a closing line
# "N passed, M failed" (with ", K skipped" when any were skipped) that
# tells whether all passed.
#
# The checks below name files relative to the suite's scratch directory T
# in their messages.  Those of a client's run (check_rc, check_clean,
# sftp_try) read what the suite's own sftp_run left: the exit status in RC,
# stderr in $T/err.

PASSED=0
FAILED=0
SKIPPED=0

# The repository's root (this file is tests/lib/lib.sh).
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

pass() { PASSED=$((PASSED + 1)); printf 'ok - %s\n' "$1"; }
fail() { FAILED=$((FAILED + 1)); printf 'FAIL - %s: %s\n' "$1" "$2"; }
skip() { SKIPPED=$((SKIPPED + 1)); printf 'skip - %s: %s\n' "$1" "$2"; }

# summary: the closing line; returns 0 when nothing failed.
summary() {
    if [ "$SKIPPED" -gt 0 ]; then
        printf '%d passed, %d failed, %d skipped\n' "$PASSED" "$FAILED" "$SKIPPED"
    else
        printf '%d passed, %d failed\n' "$PASSED" "$FAILED"
    fi
    [ "$FAILED" -eq 0 ]
}

# setup_failed WHY: the suite cannot start; says so, closes and exits 1.
setup_failed() {
    fail setup "$1"
    summary
    exit 1
}

# closing_line TEXT: the last closing line of a suite's output TEXT.
closing_line() {
    printf '%s\n' "$1" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1
}

# add_counts LINE: adds a closing line "N passed, M failed[, K skipped]" to
# the totals.
add_counts() {
    local p f k
    p=$(printf '%s' "$1" | sed -nE 's/^([0-9]+) passed.*/\1/p')
    f=$(printf '%s' "$1" | sed -nE 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/p')
    k=$(printf '%s' "$1" | sed -nE 's/.*, ([0-9]+) skipped.*/\1/p')
    PASSED=$((PASSED + ${p:-0}))
    FAILED=$((FAILED + ${f:-0}))
    SKIPPED=$((SKIPPED + ${k:-0}))
}

# add_user NAME USERADD-ARGS...: makes the account NAME unless it exists;
# returns 0 when it exists after.  Suites that run at once may make the
# same account: one finds it made, one waits while the other holds the
# lock of /etc/passwd.
add_user() {
    local name=$1 i
    shift
    for i in 1 2 3 4 5 6 7 8 9 10; do
        id "$name" >/dev/null 2>&1 && return 0
        useradd "$@" "$name" >/dev/null 2>&1 && return 0
        sleep 0.3
    done
    id "$name" >/dev/null 2>&1
}

# binary_for_user USER BINARY DIR: prints where USER can run BINARY: BINARY
# itself when USER can, else a copy of the same name in DIR/bin-USER (made
# mode 0755; DIR must be open to USER).  A tree cloned into a home of mode
# 0700 is closed to other users, and the suites run from there all the same.
binary_for_user() {
    local user=$1 binary=$2 dir=$3/bin-$1
    if runuser -u "$user" -- test -x "$binary" 2>/dev/null; then
        printf '%s\n' "$binary"
        return
    fi
    mkdir -p -m 0755 "$dir" &&
        cp "$binary" "$dir/" && chmod 0755 "$dir/${binary##*/}" &&
        printf '%s\n' "$dir/${binary##*/}"
}

# server_path [PATH]: the server under test as an absolute path: PATH, else
# $SFTP_SERVER, else sftp-server in the repository's root.
server_path() {
    local s=${1:-${SFTP_SERVER:-$REPO/sftp-server}}
    case $s in /*) ;; *) s=$PWD/$s ;; esac
    printf '%s\n' "$s"
}

# need_server PATH: the server is executable, or the suite stops here.
need_server() {
    [ -x "$1" ] && return 0
    fail "server executable" "expected an executable at $1, got none"
    summary
    exit 1
}

# need_sftp: OpenSSH's sftp client is in PATH, or the suite stops here.
need_sftp() {
    command -v sftp >/dev/null 2>&1 && return 0
    fail "sftp client" "expected the OpenSSH sftp client in PATH, got none"
    summary
    exit 1
}

# remove_tree DIR: removes a scratch directory, also where a test took the
# owner's rights away. Only directories get them back: a file may be a hard
# link to one outside.
remove_tree() {
    find "$1" -type d ! -perm -u=rwx -exec chmod u+rwx {} + 2>/dev/null
    rm -rf "$1"
}

# oneline FILE: FILE on one line, for messages.
oneline() { tr '\n' ' ' < "$1" | cut -c1-400; }

# check_eq NAME EXPECTED ACTUAL
check_eq() {
    if [ "$2" = "$3" ]; then
        pass "$1"
    else
        fail "$1" "expected '$2', got '$3'"
    fi
}

# check_grep NAME EXTENDED-REGEX FILE: a line of FILE matches
check_grep() {
    if grep -Eaq -- "$2" "$3" 2>/dev/null; then
        pass "$1"
    else
        fail "$1" "expected a line matching /$2/ in ${3#"$T"/}, got '$(oneline "$3" 2>/dev/null)'"
    fi
}

# check_same NAME EXPECTED-FILE ACTUAL-FILE: the same bytes
check_same() {
    if [ ! -e "$3" ] && [ ! -L "$3" ]; then
        fail "$1" "expected file ${3#"$T"/} to exist, got no such file"
    elif cmp -s "$2" "$3"; then
        pass "$1"
    else
        fail "$1" "expected ${3#"$T"/} identical to ${2#"$T"/}, got $(cmp "$2" "$3" 2>&1 | head -1)"
    fi
}

# listing DIR: NUL-separated sorted relative paths of DIR, as od -c dump
listing() { (cd "$1" && find . -mindepth 1 -print0 | sort -z | od -An -c); }

# same_tree NAME DIR1 DIR2: same names (byte for byte), types and file contents
same_tree() {
    local name=$1 a=$2 b=$3 p bad=""
    if [ ! -d "$b" ]; then
        fail "$name" "expected directory ${b#"$T"/}, got none"
        return
    fi
    if [ "$(listing "$a")" != "$(listing "$b")" ]; then
        fail "$name" "expected names [$(cd "$a" && find . -mindepth 1 -print0 | sort -z | tr '\0\n' '|?')], got [$(cd "$b" && find . -mindepth 1 -print0 | sort -z | tr '\0\n' '|?')]"
        return
    fi
    while IFS= read -r -d '' p; do
        if [ -f "$a/$p" ]; then
            cmp -s "$a/$p" "$b/$p" || bad="$bad ${p//$'\n'/?}"
        elif [ -d "$a/$p" ]; then
            [ -d "$b/$p" ] || bad="$bad ${p//$'\n'/?}(not a dir)"
        fi
    done < <(cd "$a" && find . -mindepth 1 -print0)
    if [ -z "$bad" ]; then
        pass "$name"
    else
        fail "$name" "expected identical contents, got differences in:$bad"
    fi
}

# check_rc NAME: the last client exited 0
check_rc() {
    if [ "$RC" -eq 0 ]; then
        pass "$1"
    else
        fail "$1" "expected exit status 0, got $RC (stderr: $(oneline "$T/err"))"
    fi
}

# check_clean NAME: the last client exited 0 and printed nothing on stderr
check_clean() {
    if [ "$RC" -ne 0 ]; then
        fail "$1" "expected exit status 0, got $RC (stderr: $(oneline "$T/err"))"
    elif [ -s "$T/err" ]; then
        fail "$1" "expected no error messages, got '$(oneline "$T/err")'"
    else
        pass "$1"
    fi
}

# sftp_try [ARGS...] < BATCH: the suite's sftp_run with every command
# prefixed with "-", so that one failing command does not abort the rest of
# the batch (each effect is checked on its own afterwards).
# shellcheck disable=SC2120 # some suites' sftp_run takes no argument
sftp_try() {
    sed 's/^[^-]/-&/' > "$T/batch.in"
    sftp_run "$@" < "$T/batch.in"
}
