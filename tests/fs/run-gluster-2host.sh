#!/usr/bin/env bash
# Two hosts, one volume: two sshds, each with "Subsystem sftp SERVER", serve
# the same GlusterFS volume through two FUSE mounts of their own, as two
# machines behind one name would; concurrent paramiko clients on both
# upload, delete, append, create with EXCL, replace by posix-rename and read
# what the other host wrote (tests/fs/gluster_2host.py says what is asserted).
#
# The "hosts" are 192.0.2.1 and 192.0.2.2 (documentation range) on the lo
# of a network namespace made here; glusterd, the brick, both mounts, both
# sshds (port 22 of each address) and the clients all run in it (see
# tests/fs/gluster-lib.sh). Each sshd also offers "Subsystem sftp-ref" with
# OpenSSH's server: when a check fails, the same checks run against it, so
# that the report tells a fault of the file system from one of the server.
#
# Two mounts of one volume are only as coherent as GlusterFS's client caches
# let them be. With its defaults (md-cache, quick-read, open-behind, ...,
# and one second of kernel entry and attribute caching) a host sees a file
# the other just wrote as empty, or one the other replaced as ESTALE or
# missing, for OpenSSH's server as for ours and for a plain read of the
# mount. So by default the volume runs with those caches off (see
# GLUSTER_COHERENT_* in tests/fs/gluster-lib.sh), as a deployment of several
# SFTP hosts on one volume must; GLUSTER_CACHE=on keeps GlusterFS's
# defaults, to see that for oneself.
#
# Usage: tests/fs/run-gluster-2host.sh [SERVER]
#   SERVER         server binary; default $SFTP_SERVER, else sftp-server in
#                  the repository root
#   ROUNDS         scale of each check (default 1: under a minute in all)
#   ONLY           a comma-separated subset of the checks
#   GLUSTER_CACHE  off (default) or on, as above
#   COMPARE        1: run the checks through OpenSSH's server too, not only
#                  when one failed (its lines are "#" comments, not counted)
#
# Needs root, glusterfs-server, glusterfs-client, openssh-server and
# python3-paramiko; skipped with the reason otherwise. Every mount, process
# and the namespace are removed at exit, pass or fail.
#
# Output: "ok - NAME" / "FAIL - NAME: ..." / "skip - NAME: ..." per check,
# then "N passed, M failed[, K skipped]". Exit status 1 if any failed.

set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF=$HERE/$(basename "${BASH_SOURCE[0]}")
PYTHON=/usr/bin/python3
REFERENCE=${SFTP_REFERENCE:-/usr/lib/openssh/sftp-server}
ADDR_A=192.0.2.1
ADDR_B=192.0.2.2
VOLUME=sftp2host
ROUNDS=${ROUNDS:-1}
ONLY=${ONLY:-}
GLUSTER_CACHE=${GLUSTER_CACHE:-off}
COMPARE=${COMPARE:-0}

# shellcheck source=tests/lib/lib.sh
. "$HERE/../lib/lib.sh"
# shellcheck source=tests/lib/sshd-lib.sh
. "$HERE/../lib/sshd-lib.sh"
# shellcheck source=tests/fs/gluster-lib.sh
. "$HERE/gluster-lib.sh"

export LC_ALL=C

HOST_PIDS=()

# start_host NAME ADDR: an sshd on ADDR port 22 with the common settings of
# tests/lib/sshd-lib.sh and both subsystems.
start_host() {
    local name=$1 addr=$2 cfg log pid
    cfg=$SSHD_DIR/sshd_config.$name
    log=$SSHD_DIR/sshd.$name.log
    cat > "$cfg" <<EOF
# sshd for host $name of tests/fs/run-gluster-2host.sh
Port 22
ListenAddress $addr
PidFile $SSHD_DIR/sshd.$name.pid
$(sshd_settings)
Subsystem sftp $SERVER
Subsystem sftp-ref $REFERENCE
EOF
    : > "$log"
    "$SSHD" -D -f "$cfg" -E "$log" </dev/null >/dev/null 2>&1 &
    pid=$!
    HOST_PIDS+=("$pid")
    printf '%s %s\n' "$addr" "$(cut -d' ' -f1,2 "$SSHD_DIR/host_ed25519.pub")" >> "$SSH_KNOWN_HOSTS"
    for _ in $(seq 1 100); do
        grep -q "Server listening on $addr port 22" "$log" 2>/dev/null && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    GLUSTER_WHY="sshd of host $name did not listen: $(tail -n 3 "$log" | tr '\n' ' ' | cut -c1-300)"
    return 1
}

stop_hosts() {
    local pid
    for pid in "${HOST_PIDS[@]}"; do
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    HOST_PIDS=()
}

# clients SUBSYSTEM DIR: the checks through SUBSYSTEM, in DIR of the volume.
clients() {
    "$PYTHON" "$HERE/gluster_2host.py" \
        --host "A=$ADDR_A:$W/a/mnt" --host "B=$ADDR_B:$W/b/mnt" \
        --user "$(id -un)" --key "$SSH_KEY" --known-hosts "$SSH_KNOWN_HOSTS" \
        --subsystem "$1" --dir "$2" --rounds "$ROUNDS" --only "$ONLY"
}

# inner W SERVER COUNTS: everything in the namespace; totals to COUNTS.
inner() {
    W=$1 SERVER=$2
    local counts=$3 out last f
    G=$W/gluster
    if [ "$GLUSTER_CACHE" = off ]; then
        GLUSTER_VOLUME_OPTIONS=$GLUSTER_COHERENT_VOLUME_OPTIONS
        GLUSTER_MOUNT_OPTIONS=$GLUSTER_COHERENT_MOUNT_OPTIONS
    fi
    echo "# GlusterFS client caches: $GLUSTER_CACHE"
    trap 'stop_hosts; gluster_down "$G" "$VOLUME" "$W/a/mnt" "$W/b/mnt"' EXIT
    trap 'exit 1' INT TERM HUP
    if ! gluster_up "$G" "$ADDR_A" "$VOLUME" ||
        ! gluster_mount "$ADDR_A" "$VOLUME" "$W/a/mnt" ||
        ! gluster_mount "$ADDR_B" "$VOLUME" "$W/b/mnt"; then
        fail "setup" "expected the volume mounted twice, got: $GLUSTER_WHY"
    elif ! chmod 1777 "$W/a/mnt" || ! sshd_init "$W/sshd" || ! sshd_authorize "$(id -un)"; then
        fail "setup" "expected keys for sshd, got an error"
    elif ! start_host A "$ADDR_A" || ! start_host B "$ADDR_B"; then
        fail "setup" "expected two sshds, got: $GLUSTER_WHY"
    else
        out=$(clients sftp share 2>&1)
        printf '%s\n' "$out" | grep -E '^(ok|FAIL|skip) '
        last=$(closing_line "$out")
        if [ -z "$last" ]; then
            fail "clients" "expected a closing line, got: $(printf '%s\n' "$out" | tail -n 5 | tr '\n' ' ' | cut -c1-400)"
        else
            add_counts "$last"
            f=$(printf '%s' "$last" | sed -nE 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/p')
            if { [ "$f" -gt 0 ] || [ "$COMPARE" = 1 ]; } && [ -x "$REFERENCE" ]; then
                # The same checks through OpenSSH's server, not counted.
                echo "# the same checks through OpenSSH's server ($REFERENCE):"
                clients sftp-ref share-ref 2>&1 | sed 's/^/#   /'
            fi
        fi
    fi
    echo "$PASSED $FAILED $SKIPPED" > "$counts"
}

if [ "${1:-}" = --inner ]; then
    inner "$2" "$3" "$4"
    exit 0
fi

SERVER=$(server_path "${1:-}")
need_server "$SERVER"
why=$(gluster_missing)
[ -z "$why" ] && why=$(sshd_missing)
[ -z "$why" ] && ! "$PYTHON" -c 'import paramiko' 2>/dev/null && why="no paramiko (Debian package python3-paramiko)"
if [ -n "$why" ]; then
    skip "two hosts, one volume" "$why"
    summary
    exit 0
fi

W=$(mktemp -d /tmp/sftp-2host.XXXXXX) || setup_failed "expected mktemp -d to work, got an error"
chmod 0755 "$W"
NETNS=sftp-2host-$$
cleanup() {
    netns_remove "$NETNS"
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

start=$SECONDS
if ! netns_make "$NETNS" "$ADDR_A" "$ADDR_B"; then
    skip "two hosts, one volume" "$GLUSTER_WHY"
else
    # In the background: a signal to this script then stops it at once, and
    # cleanup ends everything in the namespace.
    netns_run "$NETNS" "$SELF" --inner "$W" "$SERVER" "$W/counts" &
    wait $!
    if [ -s "$W/counts" ]; then
        read -r p f k < "$W/counts"
        PASSED=$((PASSED + p)) FAILED=$((FAILED + f)) SKIPPED=$((SKIPPED + k))
    else
        fail "two hosts, one volume" "expected the run in the namespace to report its totals, got none"
    fi
fi
echo "# two hosts, one volume: $((SECONDS - start)) s"
summary
