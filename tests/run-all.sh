#!/usr/bin/env bash
# Runs every integration suite against one server binary and adds up their
# closing lines.  Usage: tests/run-all.sh [SERVER]; SFTP_SERVER otherwise.
# SUITES="raw sftp ..." runs some of them.  The suites whose tools need
# root or network namespaces skip what they cannot do and say why.
set -u
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=tests/lib/lib.sh
. tests/lib/lib.sh
export SFTP_SERVER=${1:-${SFTP_SERVER:-$PWD/sftp-server}}
PYTHON=${PYTHON:-/usr/bin/python3}
SUITES=${SUITES:-"raw hostile confine race guarantees faults order sandbox sftp confine-sftp parity sshd xferlog"}

broken=""
for s in $SUITES; do
    case $s in
    raw)          cmd=("$PYTHON" tests/protocol/test_raw.py) ;;
    hostile)      cmd=("$PYTHON" tests/protocol/test_hostile.py) ;;
    confine)      cmd=("$PYTHON" tests/protocol/test_confine.py) ;;
    race)         cmd=("$PYTHON" tests/protocol/test_race.py) ;;
    guarantees)   cmd=("$PYTHON" tests/protocol/test_guarantees.py) ;;
    faults)       cmd=("$PYTHON" tests/protocol/test_fs_faults.py) ;;
    order)        cmd=("$PYTHON" tests/protocol/test_order.py) ;;
    sandbox)      cmd=("$PYTHON" tests/protocol/test_sandbox.py) ;;
    sftp)         cmd=(tests/clients/run-sftp.sh) ;;
    confine-sftp) cmd=(tests/clients/run-confine.sh) ;;
    parity)       cmd=(tests/clients/run-parity.sh) ;;
    sshd)         cmd=(tests/sshd/run-sshd.sh) ;;
    xferlog)      cmd=(tests/sshd/run-xferlog.sh) ;;
    *)            echo "run-all: unknown suite $s" >&2; exit 2 ;;
    esac
    if [ ! -e "${cmd[-1]}" ] && [ ! -e "${cmd[0]}" ]; then
        continue
    fi
    echo "== $s: ${cmd[*]}"
    start=$SECONDS
    out=$("${cmd[@]}" 2>&1)
    rc=$?
    printf '%s\n' "$out" | grep -E '^(FAIL|skip) ' || true
    last=$(closing_line "$out")
    echo "   $s: ${last:-no closing line} (exit $rc, $((SECONDS - start)) s)"
    if [ -z "$last" ] || [ "$rc" -ne 0 ]; then
        broken="$broken $s"
        [ -z "$last" ] && printf '%s\n' "$out" | tail -n 20
    fi
    add_counts "$last"
done
[ -n "$broken" ] && echo "suites that failed:$broken"
summary && [ -z "$broken" ]
