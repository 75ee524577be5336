#!/usr/bin/env bash
# Runs every integration suite against one server binary and adds up their
# closing lines.  Usage: tests/run-all.sh [SERVER]; SFTP_SERVER otherwise.
# The suites whose tools need root or network namespaces skip what they
# cannot do and say why.
set -u
cd "$(dirname "$0")/.." || exit 1
export SFTP_SERVER=${1:-${SFTP_SERVER:-$PWD/sftp-server}}
PYTHON=${PYTHON:-/usr/bin/python3}
SUITES=${SUITES:-"raw hostile confine race guarantees faults sftp confine-sftp parity sshd xferlog"}

total_pass=0 total_fail=0 total_skip=0 broken=""
for s in $SUITES; do
    case $s in
    raw)          cmd=("$PYTHON" tests/test_raw.py) ;;
    hostile)      cmd=("$PYTHON" tests/test_hostile.py) ;;
    confine)      cmd=("$PYTHON" tests/test_confine.py) ;;
    race)         cmd=("$PYTHON" tests/test_race.py) ;;
    guarantees)   cmd=("$PYTHON" tests/test_guarantees.py) ;;
    faults)       cmd=("$PYTHON" tests/test_fs_faults.py) ;;
    sftp)         cmd=(tests/run-sftp.sh) ;;
    confine-sftp) cmd=(tests/run-confine.sh) ;;
    parity)       cmd=(tests/run-parity.sh) ;;
    sshd)         cmd=(tests/run-sshd.sh) ;;
    xferlog)      cmd=(tests/run-xferlog.sh) ;;
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
    last=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
    echo "   $s: ${last:-no closing line} (exit $rc, $((SECONDS - start)) s)"
    if [ -z "$last" ] || [ "$rc" -ne 0 ]; then
        broken="$broken $s"
        [ -z "$last" ] && printf '%s\n' "$out" | tail -n 20
    fi
    p=$(printf '%s' "$last" | sed -nE 's/^([0-9]+) passed.*/\1/p')
    f=$(printf '%s' "$last" | sed -nE 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/p')
    k=$(printf '%s' "$last" | sed -nE 's/.*, ([0-9]+) skipped.*/\1/p')
    total_pass=$((total_pass + ${p:-0}))
    total_fail=$((total_fail + ${f:-0}))
    total_skip=$((total_skip + ${k:-0}))
done
[ -n "$broken" ] && echo "suites that failed:$broken"
if [ "$total_skip" -gt 0 ]; then
    echo "$total_pass passed, $total_fail failed, $total_skip skipped"
else
    echo "$total_pass passed, $total_fail failed"
fi
[ -z "$broken" ] && [ "$total_fail" -eq 0 ]
