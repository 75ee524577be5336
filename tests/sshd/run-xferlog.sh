#!/usr/bin/env bash
# The transfer log (-L) through a private sshd: concurrent paramiko sessions
# upload, download, rename, list and remove; every line of the log must be
# one JSON object whose figures match what the clients did.  The log is
# renamed while sessions run, as logrotate does.
#
# Usage: tests/sshd/run-xferlog.sh [SERVER]
# Prints one line per check, then "N passed, M failed[, K skipped]".
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/lib.sh
. "$HERE/../lib/lib.sh"
# shellcheck source=tests/lib/sshd-lib.sh
. "$HERE/../lib/sshd-lib.sh"
SFTP_SERVER=$(server_path "${1:-}")
PYTHON=${PYTHON:-/usr/bin/python3}

T=$(mktemp -d) || setup_failed "expected mktemp -d to work, got an error"
cleanup() { sshd_stop; rm -rf "$T"; }
trap cleanup EXIT

why=$(sshd_missing)
if [ -n "$why" ]; then
    skip "all" "$why"
    summary
    exit $?
fi
if ! "$PYTHON" -c "import paramiko" 2>/dev/null; then
    skip "all" "python3-paramiko not installed"
    summary
    exit $?
fi
chmod 0755 "$T"
sshd_init "$T/sshd" || { fail "setup" "sshd_init failed"; summary; exit 1; }
sshd_authorize "$(id -un)"
mkdir -m 0755 "$T/logs" "$T/w"
# The server never creates its log: as the manual says, make it first.
install -m 0622 /dev/null "$T/logs/xfer.log"
if ! sshd_start xferlog <<EOF
Subsystem sftp $SFTP_SERVER -L $T/logs/xfer.log
EOF
then
    fail "sshd" "expected it to start, got: $SSHD_ERROR"
    summary
    exit 1
fi

timeout 170 "$PYTHON" "$HERE/sshd_xferlog.py" 127.0.0.1 "$SSHD_PORT" \
    "$(id -un)" "$SSH_KEY" "$SSH_KNOWN_HOSTS" "$T/w" "$T/logs/xfer.log" \
    > "$T/out" 2> "$T/err"
rc=$?
cat "$T/out"
PASSED=$((PASSED + $(grep -c '^ok - ' "$T/out")))
FAILED=$((FAILED + $(grep -c '^FAIL - ' "$T/out")))
if [ "$rc" -ne 0 ] && ! grep -q '^FAIL - ' "$T/out"; then
    fail "sshd_xferlog.py" "expected exit status 0, got $rc: $(tail -3 "$T/err" | tr '\n' ' ')"
fi
summary
