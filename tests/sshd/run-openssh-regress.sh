#!/usr/bin/env bash
#
# OpenSSH's own regression tests of SFTP and scp (regress/ of an OpenSSH
# source tree), run with this server as the sftp-server of the sshd they
# start. The tree is the caller's: configured and built (./configure && make),
# of the OpenSSH release whose tests you want. Nothing is downloaded.
#
# Usage: tests/sshd/run-openssh-regress.sh OPENSSH_TREE [SERVER]
#
# OpenSSH's top-level Makefile names its own sftp-server for the tests, so
# that file is set aside and replaced by a link to SERVER for the run, and put
# back when the script ends, pass or fail. make is told the link is up to date
# (-o): otherwise it relinks OpenSSH's server over it whenever SERVER is older
# than the tree's objects, and the tests would quietly run OpenSSH's server.
# After each test the link is checked to be still SERVER's. The tests need /var/empty (sshd's
# privilege separation directory); as root it is made when missing.
# TESTS (space-separated) chooses others of regress/*.sh.

. "$(dirname "$0")/../lib/lib.sh"

tree=${1:?usage: run-openssh-regress.sh OPENSSH_TREE [SERVER]}
server=$(realpath "${2:-$REPO/sftp-server}")
tests=${TESTS:-"sftp sftp-cmds sftp-badcmds sftp-batch sftp-glob sftp-perm sftp-uri sftp-chroot scp scp3 scp-uri"}

[ -x "$server" ] || setup_failed "no server at $server"
[ -x "$tree/sshd" ] && [ -x "$tree/sftp" ] && [ -f "$tree/regress/test-exec.sh" ] ||
    setup_failed "$tree is not a built OpenSSH tree (./configure && make)"
if [ ! -d /var/empty ]; then
    [ "$(id -u)" = 0 ] || setup_failed "/var/empty is missing (sshd needs it)"
    mkdir -m 755 /var/empty
fi

# Everything the tests need, built with the tree's own server in place.
make -C "$tree" > /dev/null 2>&1 || setup_failed "make in $tree failed"

saved=$tree/sftp-server.before-regress
[ -e "$saved" ] && setup_failed "$saved is left from an earlier run: put it back first"
mv "$tree/sftp-server" "$saved" || setup_failed "cannot set $tree/sftp-server aside"
restore() {
    rm -f "$tree/sftp-server"
    mv "$saved" "$tree/sftp-server"
}
trap restore EXIT
trap 'exit 1' INT TERM
ln -s "$server" "$tree/sftp-server"

for t in $tests; do
    log=$(mktemp)
    # One test per make run, so that a failure does not stop the others.
    # /tmp is world-writable here, which the tests would refuse.
    make -C "$tree" -o sftp-server t-exec LTESTS="$t" \
        TEST_SSH_UNSAFE_PERMISSIONS=1 > "$log" 2>&1
    rc=$?
    if [ "$(readlink "$tree/sftp-server")" != "$server" ]; then
        fail "openssh regress: $t" "$tree/sftp-server is no longer a link to $server: the test did not run this server"
        ln -sf "$server" "$tree/sftp-server"
    elif [ $rc = 0 ] && grep -q '^all t-exec passed' "$log"; then
        pass "openssh regress: $t ($(grep '^ok ' "$log" | head -1 | cut -c4-))"
    else
        fail "openssh regress: $t" "$(grep -v '^	\|^make' "$log" | tail -5 | tr '\n' ' ')"
    fi
    rm -f "$log"
done
summary
