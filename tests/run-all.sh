#!/usr/bin/env bash
# Runs every integration suite against one server binary and adds up their
# closing lines.  Usage: tests/run-all.sh [SERVER]; SFTP_SERVER otherwise.
# SUITES="raw sftp ..." runs some of them.  The suites whose tools need
# root or network namespaces skip what they cannot do and say why.
# SUITE_JOBS=N runs N suites at once (default 1); their lines still come
# in the order of SUITES, each suite's together.  The suites keep out of
# each other's way (their own scratch directories, free ports, a lock
# around what is machine-wide), as check-cross runs them for two
# architectures at once.
set -u
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=tests/lib/lib.sh
. tests/lib/lib.sh
export SFTP_SERVER=${1:-${SFTP_SERVER:-$PWD/sftp-server}}
PYTHON=${PYTHON:-/usr/bin/python3}
# The longest first, so that N at once end together.
SUITES=${SUITES:-"sshd sshd-atomic guarantees hostile inflight ends parity race order confine-sftp faults atomic modes bwlimit confine sftp raw xferlog sandbox"}
SUITE_JOBS=${SUITE_JOBS:-1}

# suite_cmd NAME: the command of suite NAME in the array cmd.
suite_cmd() {
    case $1 in
    raw)          cmd=("$PYTHON" tests/protocol/test_raw.py) ;;
    hostile)      cmd=("$PYTHON" tests/protocol/test_hostile.py) ;;
    confine)      cmd=("$PYTHON" tests/protocol/test_confine.py) ;;
    race)         cmd=("$PYTHON" tests/protocol/test_race.py) ;;
    guarantees)   cmd=("$PYTHON" tests/protocol/test_guarantees.py) ;;
    faults)       cmd=("$PYTHON" tests/protocol/test_fs_faults.py) ;;
    order)        cmd=("$PYTHON" tests/protocol/test_order.py) ;;
    inflight)     cmd=("$PYTHON" tests/protocol/test_inflight.py) ;;
    ends)         cmd=("$PYTHON" tests/protocol/test_ends.py) ;;
    sandbox)      cmd=("$PYTHON" tests/protocol/test_sandbox.py) ;;
    atomic)       cmd=("$PYTHON" tests/protocol/test_atomic.py) ;;
    modes)        cmd=("$PYTHON" tests/protocol/test_modes.py) ;;
    bwlimit)      cmd=("$PYTHON" tests/protocol/test_bwlimit.py) ;;
    sftp)         cmd=(tests/clients/run-sftp.sh) ;;
    confine-sftp) cmd=(tests/clients/run-confine.sh) ;;
    parity)       cmd=(tests/clients/run-parity.sh) ;;
    sshd)         cmd=(tests/sshd/run-sshd.sh) ;;
    sshd-atomic)  cmd=(env SFTP_SERVER_ARGS=-A tests/sshd/run-sshd.sh) ;;
    xferlog)      cmd=(tests/sshd/run-xferlog.sh) ;;
    *)            echo "run-all: unknown suite $1" >&2; exit 2 ;;
    esac
}

T=$(mktemp -d) || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM HUP

# run_suite NAME: the suite, its output to $T/NAME.out, then its exit
# status and seconds to $T/NAME.rc.
run_suite() {
    local start=$SECONDS rc
    "${cmd[@]}" > "$T/$1.out" 2>&1
    rc=$?
    echo "$rc $((SECONDS - start))" > "$T/$1.rc"
}

# report NAME: a finished suite's FAIL and skip lines and closing line.
broken=""
report() {
    local s=$1 out rc secs last
    suite_cmd "$s"
    out=$(cat "$T/$s.out")
    read -r rc secs < "$T/$s.rc"
    echo "== $s: ${cmd[*]}"
    printf '%s\n' "$out" | grep -E '^(FAIL|skip) ' || true
    last=$(closing_line "$out")
    echo "   $s: ${last:-no closing line} (exit $rc, $secs s)"
    if [ -z "$last" ] || [ "$rc" -ne 0 ]; then
        broken="$broken $s"
        [ -z "$last" ] && printf '%s\n' "$out" | tail -n 20
    fi
    add_counts "$last"
}

# The suites, SUITE_JOBS at once; each reported once it and those before
# it are done.
started=()
next=0
flush() {
    while [ "$next" -lt "${#started[@]}" ] &&
        [ -e "$T/${started[$next]}.rc" ]; do
        report "${started[$next]}"
        next=$((next + 1))
    done
}
for s in $SUITES; do
    suite_cmd "$s"
    if [ ! -e "${cmd[-1]}" ] && [ ! -e "${cmd[0]}" ]; then
        continue
    fi
    while [ "$(jobs -rp | wc -l)" -ge "$SUITE_JOBS" ]; do
        wait -n
        flush
    done
    suite_cmd "$s"	# report() in flush() took cmd for its own
    started+=("$s")
    run_suite "$s" &
done
wait
flush
[ -n "$broken" ] && echo "suites that failed:$broken"
summary && [ -z "$broken" ]
