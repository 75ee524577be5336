# shellcheck shell=bash disable=SC2034
# A private GlusterFS for the tests (sourced by tests/fs/run-fs-matrix.sh,
# tests/fs/run-gluster-2host.sh and bench/gluster.sh): a network namespace of
# our own, a glusterd in it, a one-brick volume and its FUSE mounts.
#
# glusterd refuses loopback addresses for bricks, so the namespace's lo gets
# addresses of the documentation range (192.0.2.x) besides 127.0.0.1; no
# packet ever leaves the namespace. Everything that talks to the volume runs
# in that namespace, under "ip netns exec", which also gives it a private
# mount namespace: gluster_up bind-mounts a scratch directory over
# /var/lib/glusterd, /var/log/glusterfs and /run/gluster there, so the
# machine's own state is never read or changed, and the FUSE mounts made in
# there are seen by that process and its children only. The caller thus
# runs its whole GlusterFS part as one command in the namespace.
#
# Outside the namespace:
#   gluster_missing           prints why GlusterFS cannot run here (nothing
#                             if it can)
#   netns_make NAME ADDR...   the namespace, lo up with each ADDR (a /24)
#   netns_remove NAME         kills every process left in it, deletes it
#   netns_run NAME CMD...     CMD in the namespace, as the reaper of the
#                             daemons it starts (glusterd and its brick
#                             daemonize: reaped there, they leave no
#                             zombies behind under a PID 1 that never
#                             reaps)
# Inside it:
#   gluster_up G ADDR VOLUME  glusterd with its state under G, and VOLUME
#                             made of one brick G/brick on ADDR, a tmpfs of
#                             GLUSTER_BRICK_SIZE (default 3g), with the
#                             volume options in GLUSTER_VOLUME_OPTIONS
#                             ("key=value ...", default none)
#   gluster_mount ADDR VOLUME DIR   one FUSE mount of the volume, with the
#                             mount options in GLUSTER_MOUNT_OPTIONS
#                             ("a=b,c=d", default none)
#   gluster_down G VOLUME DIR...    unmounts, deletes the volume, stops
#                             glusterd and the brick
# Each returns non-zero with the reason in GLUSTER_WHY when it fails.

GLUSTER_WHY=""
GLUSTER_VOLUME_OPTIONS=${GLUSTER_VOLUME_OPTIONS:-}
GLUSTER_MOUNT_OPTIONS=${GLUSTER_MOUNT_OPTIONS:-}

# What makes two mounts of one volume coherent, as two SFTP hosts need:
# none of the client-side caches that answer from memory (metadata,
# small-file contents, delayed opens, read-ahead, write-behind), no kernel
# caching of entries and attributes, and no page cache (direct I/O: a file
# rewritten elsewhere with the same size and within the same second keeps
# its old pages otherwise). Without them a host reads a file another host
# replaced as stale, empty or ESTALE for a while (see
# tests/fs/run-gluster-2host.sh).
GLUSTER_COHERENT_VOLUME_OPTIONS="performance.stat-prefetch=off performance.quick-read=off performance.io-cache=off performance.read-ahead=off performance.open-behind=off performance.write-behind=off performance.readdir-ahead=off"
GLUSTER_COHERENT_MOUNT_OPTIONS="attribute-timeout=0,entry-timeout=0,negative-timeout=0,direct-io-mode=enable"

gluster_missing() {
    local c
    if [ "$(id -u)" -ne 0 ]; then
        echo "GlusterFS and network namespaces need root"
        return
    fi
    for c in glusterd gluster mount.glusterfs; do
        if ! command -v "$c" >/dev/null 2>&1; then
            echo "no $c (Debian packages glusterfs-server, glusterfs-client)"
            return
        fi
    done
    command -v ip >/dev/null 2>&1 || { echo "no ip (Debian package iproute2)"; return; }
    [ -c /dev/fuse ] || { echo "no /dev/fuse"; return; }
    # A glusterd of the machine's own would share /run/gluster with ours.
    if pgrep -x glusterd >/dev/null 2>&1; then
        echo "a glusterd is already running on this machine"
    fi
}

netns_make() {
    local ns=$1 a err
    shift
    if ! err=$(ip netns add "$ns" 2>&1); then
        GLUSTER_WHY="cannot make a network namespace: $err"
        return 1
    fi
    ip -n "$ns" link set lo up || { GLUSTER_WHY="cannot bring up lo in $ns"; return 1; }
    for a in "$@"; do
        ip -n "$ns" addr add "$a/24" dev lo || { GLUSTER_WHY="cannot give lo $a"; return 1; }
    done
}

# netns_remove NAME: TERM, then KILL, to each process still in the
# namespace (by its pid: they are ours), then the namespace.
netns_remove() {
    local ns=$1 pid n
    ip netns list 2>/dev/null | grep -qw "^$ns" || return 0
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
        kill "$pid" 2>/dev/null
    done
    for n in 1 2 3 4 5 6 7 8 9 10; do
        [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break
        sleep 0.2
    done
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
        kill -9 "$pid" 2>/dev/null
    done
    ip netns del "$ns" 2>/dev/null
}

netns_run() {
    local ns=$1
    shift
    if [ -x /usr/bin/python3 ]; then
        # PR_SET_CHILD_SUBREAPER (36) survives the exec; bash reaps any child.
        ip netns exec "$ns" /usr/bin/python3 -c 'import ctypes, os, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
os.execv(sys.argv[1], sys.argv[1:])' "$@"
    else
        ip netns exec "$ns" "$@"
    fi
}

# gl_unmount DIR: unmount, retrying while it is busy, then lazily.
gl_unmount() {
    mountpoint -q "$1" 2>/dev/null || return 0
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        umount "$1" 2>/dev/null && return 0
        sleep 0.3
    done
    umount -l "$1" 2>/dev/null
}

gluster_up() {
    local g=$1 addr=$2 vol=$3 d out
    mkdir -p "$g/lib" "$g/log" "$g/run" "$g/brick"
    # The brick on a tmpfs of the namespace: no disk noise in the numbers,
    # and its 65536 .glusterfs directories go with the namespace.
    mount -t tmpfs -o "size=${GLUSTER_BRICK_SIZE:-3g}" sftpbrick "$g/brick" ||
        { GLUSTER_WHY="cannot mount a tmpfs for the brick"; return 1; }
    # The package's hooks and option groups, which glusterd expects.
    [ -d /var/lib/glusterd ] && cp -a /var/lib/glusterd/. "$g/lib/" 2>/dev/null
    for d in lib:/var/lib/glusterd log:/var/log/glusterfs run:/run/gluster; do
        [ -d "${d#*:}" ] || mkdir -p "${d#*:}"
        mount --bind "$g/${d%%:*}" "${d#*:}" ||
            { GLUSTER_WHY="cannot bind-mount over ${d#*:}"; return 1; }
    done
    glusterd -p "$g/glusterd.pid" || { GLUSTER_WHY="glusterd did not start"; return 1; }
    for _ in $(seq 1 100); do
        gluster --mode=script pool list >/dev/null 2>&1 && break
        sleep 0.2
    done
    if ! out=$(gluster --mode=script volume create "$vol" "$addr:$g/brick" force 2>&1); then
        GLUSTER_WHY="cannot make the volume: $out $(tail -n 2 "$g/log/glusterd.log" 2>/dev/null | tr '\n' ' ' | cut -c1-300)"
        return 1
    fi
    for d in $GLUSTER_VOLUME_OPTIONS; do
        out=$(gluster --mode=script volume set "$vol" "${d%%=*}" "${d#*=}" 2>&1) ||
            { GLUSTER_WHY="cannot set $d: $out"; return 1; }
    done
    if ! out=$(gluster --mode=script volume start "$vol" 2>&1); then
        GLUSTER_WHY="cannot make the volume: $out $(tail -n 2 "$g/log/glusterd.log" 2>/dev/null | tr '\n' ' ' | cut -c1-300)"
        return 1
    fi
}

gluster_mount() {
    local out
    mkdir -p "$3"
    out=$(mount -t glusterfs ${GLUSTER_MOUNT_OPTIONS:+-o "$GLUSTER_MOUNT_OPTIONS"} "$1:/$2" "$3" 2>&1) ||
        { GLUSTER_WHY="cannot mount the volume: $out"; return 1; }
    for _ in $(seq 1 50); do
        mountpoint -q "$3" && stat -f "$3" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    GLUSTER_WHY="the volume did not come up at $3"
    return 1
}

gluster_down() {
    local g=$1 vol=$2 d f
    shift 2
    for d in "$@"; do
        gl_unmount "$d"
    done
    gluster --mode=script volume stop "$vol" force >/dev/null 2>&1
    gluster --mode=script volume delete "$vol" >/dev/null 2>&1
    [ -s "$g/glusterd.pid" ] && kill "$(cat "$g/glusterd.pid")" 2>/dev/null
    find "$g/run" -name '*.pid' 2>/dev/null | while read -r f; do
        [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
    done
    rm -f "$g/glusterd.pid"
    gl_unmount "$g/brick"
}
