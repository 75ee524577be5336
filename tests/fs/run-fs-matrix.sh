#!/usr/bin/env bash
# The file-system matrix: the integration suites run again with the served
# tree on each of several file systems, made and mounted here:
#
#   ext4, xfs, btrfs  a 1 GiB sparse image, mkfs, attached to a loop device
#   overlay           overlayfs whose lower and upper layers are on a tmpfs
#                     (a container's root); the tree lives in a directory
#                     of the lower layer
#   tmpfs             a tmpfs
#   fuse              bindfs (FUSE) passing a directory through
#   gluster           a one-brick GlusterFS volume (the brick on a tmpfs)
#                     mounted through FUSE, with GlusterFS's default options;
#                     glusterd refuses loopback addresses, so it, the mount,
#                     the server and the clients run in a network namespace
#                     made here whose lo also has 192.0.2.1 (documentation
#                     range); its state, logs and sockets are bind-mounted
#                     from the scratch directory in that namespace's private
#                     mount namespace, so /var/lib/glusterd stays untouched
#                     (tests/fs/gluster-lib.sh)
#
# Every suite makes its files under $TMPDIR (tempfile.mkdtemp in the Python
# suites, mktemp -d in the shell ones), so TMPDIR is pointed at the mount.
#
# Usage: tests/fs/run-fs-matrix.sh [SERVER]
#   SERVER         server binary; default $SFTP_SERVER, else sftp-server in
#                  the repository root
#   FS=a,b         entries to run (default ext4,xfs,btrfs,overlay,tmpfs,
#                  fuse,gluster)
#   SUITES=a,b     suites to run on each (default raw,sftp,hostile,confine,
#                  probe, calls, atomic; also confine-sftp and parity);
#                  atomic is tests/protocol/test_atomic.py (-A); probe is
#                  tests/fs/fs_probe.py: our server and OpenSSH's on files that
#                  were there before the session (on overlay: in the lower
#                  layer), answers and files left compared; calls is
#                  tests/fs/fs_calls.py: which calls the server relies on
#                  the file system has, and the fallback where it lacks one
#   SUITE_TIMEOUT  seconds one suite may take (default 900)
#
# Needs root. Debian packages: e2fsprogs, xfsprogs, btrfs-progs, bindfs,
# fuse3, glusterfs-server, glusterfs-client, iproute2. An entry the machine
# cannot do is reported as "skip - NAME: reason".
#
# Output: for each entry and suite "ok - ENTRY SUITE: ..." or "FAIL - ...",
# with the suite's own FAIL and skip lines indented below, and the entry's
# totals and time in parentheses; then the sum of all the suites' checks as
# "N passed, M failed[, K skipped]" (a skipped entry counts one skip). Exit
# status 1 if anything failed. Every mount, loop device, namespace and
# process made here is removed at exit, pass, fail or signal.

set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF=$HERE/$(basename "${BASH_SOURCE[0]}")
PYTHON=${PYTHON:-/usr/bin/python3}
SUITE_TIMEOUT=${SUITE_TIMEOUT:-900}
ALL_FS="ext4,xfs,btrfs,overlay,tmpfs,fuse,gluster"
FS=${FS:-$ALL_FS}
SUITES=${SUITES:-raw,sftp,hostile,confine,probe,calls,atomic}
IMAGE_SIZE=1G
GLUSTER_ADDR=192.0.2.1
GLUSTER_VOLUME=sftpfsm

# shellcheck source=tests/lib/lib.sh
. "$HERE/../lib/lib.sh"
# shellcheck source=tests/fs/gluster-lib.sh
. "$HERE/gluster-lib.sh"
PROTOCOL=$REPO/tests/protocol
CLIENTS=$REPO/tests/clients

export LC_ALL=C

# suite_command NAME: the command line of one suite, in CMD.
suite_command() {
    case $1 in
    raw)          CMD=("$PYTHON" "$PROTOCOL/test_raw.py") ;;
    hostile)      CMD=("$PYTHON" "$PROTOCOL/test_hostile.py") ;;
    confine)      CMD=("$PYTHON" "$PROTOCOL/test_confine.py") ;;
    sftp)         CMD=("$CLIENTS/run-sftp.sh") ;;
    confine-sftp) CMD=("$CLIENTS/run-confine.sh") ;;
    parity)       CMD=("$CLIENTS/run-parity.sh") ;;
    probe)        CMD=("$PYTHON" "$HERE/fs_probe.py" run "$PROBE/ours" "$PROBE/ref") ;;
    calls)        CMD=("$PYTHON" "$HERE/fs_calls.py") ;;
    atomic)       CMD=("$PYTHON" "$PROTOCOL/test_atomic.py") ;;
    *)            return 1 ;;
    esac
}

# run_suites ENTRY DIR: every selected suite with its files under DIR. The
# checks each suite counts are added to the totals; a suite that fails
# without saying so (no closing line, or a bad exit with no failure
# counted) adds one failure.
run_suites() {
    local entry=$1 dir=$2 s out rc last start nfail left
    for s in ${SUITES//,/ }; do
        if [ "$s" = probe ]; then
            # Twin fixtures, unless the entry made them already (overlay
            # makes them in its lower layer).
            PROBE=$dir/sftp-probe
            if [ ! -d "$PROBE" ]; then
                mkdir "$PROBE" && "$PYTHON" "$HERE/fs_probe.py" make "$PROBE/ours" &&
                    "$PYTHON" "$HERE/fs_probe.py" make "$PROBE/ref"
            fi
        fi
        if ! suite_command "$s"; then
            fail "$entry $s" "expected a suite name (raw, sftp, hostile, confine, probe, calls, atomic, confine-sftp, parity), got $s"
            continue
        fi
        start=$SECONDS
        # In the background, so that a signal to this script stops it at
        # once (bash runs traps only between foreground commands).
        (cd "$REPO" && TMPDIR=$dir SFTP_SERVER=$SERVER exec \
            timeout -k 10 "$SUITE_TIMEOUT" "${CMD[@]}") \
            > "$W/suite.out" 2>&1 </dev/null &
        CHILD=$!
        wait "$CHILD"
        rc=$?
        CHILD=""
        out=$(cat "$W/suite.out")
        last=$(closing_line "$out")
        if [ -z "$last" ]; then
            fail "$entry $s" "expected a closing line, got none (exit $rc, $((SECONDS - start)) s): $(printf '%s\n' "$out" | tail -n 3 | tr '\n' ' ' | cut -c1-300)"
        else
            nfail=$(printf '%s' "$last" | sed -nE 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/p')
            add_counts "$last"
            if [ "$rc" -ne 0 ] && [ "${nfail:-0}" -eq 0 ]; then
                fail "$entry $s" "expected exit 0 with no failure counted, got exit $rc ($last)"
            elif [ "${nfail:-0}" -gt 0 ]; then
                printf 'FAIL - %s %s: %s (%d s)\n' "$entry" "$s" "$last" $((SECONDS - start))
            else
                printf 'ok - %s %s: %s (%d s)\n' "$entry" "$s" "$last" $((SECONDS - start))
            fi
        fi
        # The suite's failures and skips; the calls suite's lines are its
        # report, and the atomic suite's line on where uploads go.
        printf '%s\n' "$out" | grep -E '^(FAIL|skip) |^ok - calls: |^ok - (where_uploads_go|reader_sees_whole_files): ' |
            sed 's/^/    /'
        [ "$s" = probe ] && rm -rf "$PROBE"
    done
    # What the suites left behind (a mount's lost+found is the file system's).
    left=$(cd "$dir" && find . -mindepth 1 -maxdepth 1 ! -name lost+found | head -n 5 | tr '\n' ' ')
    if [ -n "$left" ]; then
        fail "$entry clean" "expected the suites to remove their files, found: $left"
    else
        pass "$entry clean"
    fi
}

# fs_type DIR: the type of the file system DIR is on.
fs_type() {
    findmnt -n -o FSTYPE -T "$1" 2>/dev/null | head -n 1
}

# check_type ENTRY DIR WANT: the served tree really is on a WANT file system
# (a pattern), and TMPDIR leads both mktemp and Python's tempfile there.
check_type() {
    local entry=$1 dir=$2 want=$3 got py sh
    got=$(fs_type "$dir")
    # shellcheck disable=SC2254
    case $got in
    $want) pass "$entry mounted ($got)" ;;
    *) fail "$entry mounted" "expected a $want file system at $dir, got ${got:-none}"; return 1 ;;
    esac
    py=$(TMPDIR=$dir "$PYTHON" -c 'import tempfile; print(tempfile.gettempdir())')
    sh=$(TMPDIR=$dir mktemp -d) && rmdir "$sh"
    if [ "$py" = "$dir" ] && [ "${sh%/*}" = "$dir" ]; then
        pass "$entry TMPDIR"
    else
        fail "$entry TMPDIR" "expected tempfile and mktemp to choose $dir, got $py and ${sh%/*}"
        return 1
    fi
}

# --- what was made, and its removal ------------------------------------------

MOUNTS=()	# mount points, unmounted last first
LOOPS=()	# loop devices, detached after the unmounts
NETNS=""	# the network namespace, with every process left in it
CHILD=""	# the suite (or the namespace's run) going on, by its pid

# teardown: undoes everything made so far, last first.
teardown() {
    local i
    if [ -n "$CHILD" ]; then
        # timeout passes the signal on to the suite.
        kill "$CHILD" 2>/dev/null
        wait "$CHILD" 2>/dev/null
        CHILD=""
    fi
    for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
        gl_unmount "${MOUNTS[i]}"
    done
    MOUNTS=()
    for i in "${LOOPS[@]}"; do
        losetup -d "$i" 2>/dev/null
    done
    LOOPS=()
    if [ -n "$NETNS" ]; then
        # Only processes in our namespace: the glusterd, its brick, the
        # FUSE client, and whatever a killed run left there.
        netns_remove "$NETNS"
        NETNS=""
    fi
}

# need CMD...: prints which command is missing, if any.
need() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || { echo "no $c"; return; }
    done
}

# kernel_has FS: the kernel knows FS (or can load it).
kernel_has() {
    grep -qw "$1" /proc/filesystems && return 0
    modprobe "$1" >/dev/null 2>&1 && grep -qw "$1" /proc/filesystems
}

# --- the entries: each sets DIR (the served tree) or SKIP_WHY ----------------

# setup_image FS PACKAGE MKFS...: a sparse image made with MKFS (from the
# Debian package PACKAGE), on a loop device.
setup_image() {
    local fs=$1 pkg=$2 img dev err
    shift 2
    SKIP_WHY=$(need "$1" losetup)
    [ -n "$SKIP_WHY" ] && SKIP_WHY="$SKIP_WHY (Debian packages $pkg, mount)" && return 1
    [ -e /dev/loop-control ] || { SKIP_WHY="no /dev/loop-control"; return 1; }
    kernel_has "$fs" || { SKIP_WHY="the kernel has no $fs"; return 1; }
    img=$W/$fs.img
    truncate -s "$IMAGE_SIZE" "$img" || { SKIP_WHY="cannot make a sparse image"; return 1; }
    if ! err=$("$@" "$img" 2>&1); then
        fail "$fs mkfs" "expected $1 to make the file system, got: $(printf '%s' "$err" | tail -n 2 | tr '\n' ' ')"
        return 2
    fi
    if ! dev=$(losetup --find --show "$img" 2>&1); then
        SKIP_WHY="no loop device: $dev"
        return 1
    fi
    LOOPS+=("$dev")
    mkdir -p "$W/$fs/mnt"
    if ! err=$(mount -t "$fs" "$dev" "$W/$fs/mnt" 2>&1); then
        SKIP_WHY="cannot mount $fs from $dev: $err"
        return 1
    fi
    MOUNTS+=("$W/$fs/mnt")
    chmod 1777 "$W/$fs/mnt"
    DIR=$W/$fs/mnt
    WANT=$fs
}

setup_ext4() { setup_image ext4 e2fsprogs mkfs.ext4 -q -F; }
setup_xfs() { setup_image xfs xfsprogs mkfs.xfs -q -f; }
setup_btrfs() { setup_image btrfs btrfs-progs mkfs.btrfs -q -f; }

# setup_tmpfs: a tmpfs.
setup_tmpfs() {
    local err
    mkdir -p "$W/tmpfs/mnt"
    if ! err=$(mount -t tmpfs -o size=1g,mode=1777 fsmatrix "$W/tmpfs/mnt" 2>&1); then
        SKIP_WHY="cannot mount a tmpfs: $err"
        return 1
    fi
    MOUNTS+=("$W/tmpfs/mnt")
    DIR=$W/tmpfs/mnt
    WANT=tmpfs
}

# setup_overlay: overlayfs with both layers on one tmpfs, as a container's
# root. The served directory and the probe's fixtures come from the lower
# layer, so the first change to them is a copy-up.
setup_overlay() {
    local b=$W/overlay err
    kernel_has overlay || { SKIP_WHY="the kernel has no overlay"; return 1; }
    mkdir -p "$b/layers" "$b/mnt"
    if ! err=$(mount -t tmpfs -o size=1g fsmatrix "$b/layers" 2>&1); then
        SKIP_WHY="cannot mount a tmpfs: $err"
        return 1
    fi
    MOUNTS+=("$b/layers")
    mkdir -p "$b/layers/lower/srv" "$b/layers/upper" "$b/layers/work"
    chmod 1777 "$b/layers/lower/srv"
    # The probe's fixtures come from the image, as a container's files do.
    case ",$SUITES," in
    *,probe,*)
        mkdir "$b/layers/lower/srv/sftp-probe"
        "$PYTHON" "$HERE/fs_probe.py" make "$b/layers/lower/srv/sftp-probe/ours" &&
            "$PYTHON" "$HERE/fs_probe.py" make "$b/layers/lower/srv/sftp-probe/ref"
        ;;
    esac
    if ! err=$(mount -t overlay -o "lowerdir=$b/layers/lower,upperdir=$b/layers/upper,workdir=$b/layers/work" fsmatrix "$b/mnt" 2>&1); then
        SKIP_WHY="cannot mount an overlay: $err"
        return 1
    fi
    MOUNTS+=("$b/mnt")
    DIR=$b/mnt/srv
    WANT=overlay
}

# setup_fuse: bindfs passing a directory through FUSE.
setup_fuse() {
    local err
    SKIP_WHY=$(need bindfs)
    [ -n "$SKIP_WHY" ] && SKIP_WHY="$SKIP_WHY (Debian package bindfs)" && return 1
    [ -c /dev/fuse ] || { SKIP_WHY="no /dev/fuse"; return 1; }
    mkdir -p "$W/fuse/src" "$W/fuse/mnt"
    chmod 1777 "$W/fuse/src"
    if ! err=$(bindfs "$W/fuse/src" "$W/fuse/mnt" 2>&1); then
        SKIP_WHY="bindfs cannot mount: $err"
        return 1
    fi
    MOUNTS+=("$W/fuse/mnt")
    DIR=$W/fuse/mnt
    WANT="fuse*"
}

# setup_gluster: the namespace; the rest happens inside it (gluster_inner).
setup_gluster() {
    SKIP_WHY=$(gluster_missing)
    [ -n "$SKIP_WHY" ] && return 1
    NETNS=sftp-fsm-$$
    if ! netns_make "$NETNS" "$GLUSTER_ADDR"; then
        SKIP_WHY=$GLUSTER_WHY
        return 1
    fi
}

# --- GlusterFS, inside the namespace ----------------------------------------

# gluster_inner W SERVER COUNTS: the gluster entry, run by "ip netns exec";
# prints its lines and writes its totals to COUNTS.
gluster_inner() {
    local counts=$3
    W=$1 SERVER=$2 G=$1/gluster
    trap 'gluster_down "$G" "$GLUSTER_VOLUME" "$G/mnt"' EXIT
    trap 'exit 1' INT TERM HUP
    if gluster_up "$G" "$GLUSTER_ADDR" "$GLUSTER_VOLUME" &&
        gluster_mount "$GLUSTER_ADDR" "$GLUSTER_VOLUME" "$G/mnt"; then
        chmod 1777 "$G/mnt"
        if check_type gluster "$G/mnt" "fuse*"; then
            run_suites gluster "$G/mnt"
        fi
    else
        fail "gluster setup" "expected a volume mounted, got: $GLUSTER_WHY $(tail -n 3 "$G/log/glusterd.log" 2>/dev/null | tr '\n' ' ' | cut -c1-300)"
    fi
    echo "$PASSED $FAILED $SKIPPED" > "$counts"
}

# --- main ----------------------------------------------------------------------

if [ "${1:-}" = --gluster-inner ]; then
    gluster_inner "$2" "$3" "$4"
    exit 0
fi

SERVER=$(server_path "${1:-}")
need_server "$SERVER"
if [ "$(id -u)" -ne 0 ]; then
    skip "fs matrix" "mounting file systems needs root"
    summary
    exit 0
fi

W=$(mktemp -d /tmp/sftp-fsmatrix.XXXXXX) || setup_failed "expected mktemp -d to work, got an error"
chmod 0755 "$W"
cleanup() {
    teardown
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

START=$SECONDS
for entry in ${FS//,/ }; do
    case ",$ALL_FS," in
    *",$entry,"*) ;;
    *) fail "$entry" "expected an entry of $ALL_FS, got $entry"; continue ;;
    esac
    echo "== $entry"
    t0=$SECONDS p0=$PASSED f0=$FAILED k0=$SKIPPED
    DIR="" WANT="" SKIP_WHY=""
    "setup_$entry"
    rc=$?
    if [ $rc -eq 1 ]; then
        skip "$entry" "$SKIP_WHY"
    elif [ $rc -eq 0 ] && [ "$entry" = gluster ]; then
        netns_run "$NETNS" "$SELF" --gluster-inner "$W" "$SERVER" "$W/gluster.counts" &
        CHILD=$!
        wait "$CHILD"
        CHILD=""
        if [ -s "$W/gluster.counts" ]; then
            read -r p f k < "$W/gluster.counts"
            PASSED=$((PASSED + p)) FAILED=$((FAILED + f)) SKIPPED=$((SKIPPED + k))
        else
            fail "gluster" "expected the run in the namespace to report its totals, got none"
        fi
    elif [ $rc -eq 0 ] && check_type "$entry" "$DIR" "$WANT"; then
        run_suites "$entry" "$DIR"
    fi
    teardown
    echo "   ($entry: $((PASSED - p0)) passed, $((FAILED - f0)) failed, $((SKIPPED - k0)) skipped, in $((SECONDS - t0)) s)"
done
echo "# fs matrix: $((SECONDS - START)) s"
summary
