#!/usr/bin/env bash
#
# gluster.sh: our sftp-server and the reference OpenSSH sftp-server side by
# side on a GlusterFS volume (shared storage, through FUSE), with the
# project's client sftpbench: uploads and downloads with 255 KiB and 32 KiB
# requests, and many small files (OPEN, WRITE 4 KiB, CLOSE). The floor
# (floor.c, read/write through a 256 KiB buffer) runs the transfers too:
# what the mount itself can do. A download reads through the GlusterFS
# client: the file's pages in the mount's page cache are dropped before each
# run (dd iflag=nocache). Rounds are interleaved, the order rotated
# each round, and the tables with medians and paired ratios ours/ref are
# those of compare.sh (its --report).
#
# The volume is made here as tests/fs/run-fs-matrix.sh makes it (see
# tests/fs/gluster-lib.sh): one brick, in a network namespace of our own whose
# lo has 192.0.2.1, since glusterd refuses loopback addresses; everything is
# removed at exit.
#
# usage: gluster.sh [--ours PATH] [--ref PATH] [--size SIZE] [--rounds N]
#                   [--files N] [--depth N] [--only LIST] [--cache on|off]
#                   [--out FILE]
#
#   --size     bytes per upload or download (default 256M)
#   --rounds   rounds (default 3)
#   --files    files per smallfiles run (default 2000)
#   --only     a subset of up255k,up32k,down255k,down32k,smallfiles
#   --cache    on: GlusterFS's default client caches (one host; the
#              default); off: the caches off, as several hosts on one
#              volume need (tests/fs/run-gluster-2host.sh)
#   --out      keep the raw result lines (compare.sh --report reads them)
#
# Needs root, glusterfs-server and glusterfs-client. OURS and REF in the
# environment stand for --ours and --ref.

set -u

here=$(cd "$(dirname "$0")" && pwd)
self=$here/$(basename "$0")
tests=$(dirname "$here")/tests
ours=${OURS:-$here/../sftp-server}
ref=${REF:-/usr/lib/openssh/sftp-server}
size=256M
rounds=3
files=2000
depth=64
only=
cache=on
out=
addr=192.0.2.1
volume=sftpbench
workloads_all="up255k up32k down255k down32k smallfiles"

# shellcheck source=tests/fs/gluster-lib.sh
. "$tests/fs/gluster-lib.sh"

usage() {
	sed -n '19,30s/^# \{0,1\}//p' "$0" >&2
	exit 2
}

# Bytes from a size with an optional K, M or G suffix.
to_bytes() {
	local n=${1%[KkMmGg]}
	case $n in ''|*[!0-9]*) echo "gluster.sh: bad size $1" >&2; exit 2 ;; esac
	case $1 in
	*[Kk]) echo $((n << 10)) ;;
	*[Mm]) echo $((n << 20)) ;;
	*[Gg]) echo $((n << 30)) ;;
	*) echo "$n" ;;
	esac
}

# The sftpbench arguments of a workload.
wl_args() {
	case $1 in
	up255k) echo "-w upload -l 261120 -b $bytes" ;;
	up32k) echo "-w upload -l 32768 -b $bytes" ;;
	down255k) echo "-w download -l 261120 -b $bytes" ;;
	down32k) echo "-w download -l 32768 -b $bytes" ;;
	smallfiles) echo "-w smallfiles -c $files" ;;
	*) echo "gluster.sh: unknown workload $1" >&2; exit 2 ;;
	esac
}

# run ROUND WORKLOAD CANDIDATE DIR RESULTS: one sftpbench run in DIR, its
# line appended to RESULTS as compare.sh keeps it.
run() {
	local r=$1 wl=$2 who=$3 dir=$4 res=$5 line rc
	local -a cmd
	case $who in
	ours) cmd=(-L ours -- "$ours") ;;
	ref) cmd=(-L ref -- "$ref") ;;
	floor-rw) cmd=(-F -L floor-rw -- "$here/floor" rw) ;;
	esac
	# What the last run left goes, but for the file to download, which
	# leaves the mount's page cache instead: a download reads through
	# the GlusterFS client, as from shared storage, not from local memory.
	find "$dir" -mindepth 1 ! -name 'download-*.dat' -delete 2>/dev/null
	for f in "$dir"/download-*.dat; do
		[ -f "$f" ] && dd if="$f" iflag=nocache count=0 status=none
	done
	# shellcheck disable=SC2046 # the arguments are words
	line=$("$here/sftpbench" -d "$dir" -q "$depth" $(wl_args "$wl") \
	    "${cmd[@]}" 2> "$WORK/stderr")
	rc=$?
	if [ $rc != 0 ] || [ -z "$line" ]; then
		failures=$((failures + 1))
		echo >&2
		echo "gluster.sh: round $r, $wl, $who FAILED (exit $rc):" >&2
		sed 's/^/    /' "$WORK/stderr" >&2
		echo "round=$r name=$wl server=$who status=fail" >> "$res"
		return
	fi
	echo "round=$r name=$wl $line" >> "$res"
}

# inner WORK RESULTS: in the namespace: the volume, the rounds, the report.
inner() {
	local res=$2 r wl cands n i k start
	WORK=$1 MNT=$1/mnt G=$1/gluster
	if [ "$cache" = off ]; then
		GLUSTER_VOLUME_OPTIONS=$GLUSTER_COHERENT_VOLUME_OPTIONS
		GLUSTER_MOUNT_OPTIONS=$GLUSTER_COHERENT_MOUNT_OPTIONS
	fi
	trap 'gluster_down "$G" "$volume" "$MNT"' EXIT
	trap 'exit 130' INT TERM
	if ! gluster_up "$G" "$addr" "$volume" ||
	    ! gluster_mount "$addr" "$volume" "$MNT"; then
		echo "gluster.sh: $GLUSTER_WHY" >&2
		exit 1
	fi
	mkdir -p "$MNT/run"
	echo "sftpbench on GlusterFS: $rounds rounds, $size transfers," \
	    "$files small files, depth $depth, pipes, client caches $cache"
	echo "volume: one brick on $(df -PT "$G/brick" | awk 'NR == 2 { print $2 }'), mounted through FUSE"
	echo "ours: $ours"
	echo "ref:  $ref"
	echo "host: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), Linux $(uname -r)"
	failures=0
	start=$SECONDS
	# The file to download is made once, before the rounds, so that no
	# round's first download finds it fresh in the page cache.
	case " $workloads " in
	*" down"*)
		"$here/sftpbench" -d "$MNT/run" -w download -b "$bytes" -F -- \
		    "$here/floor" rw > /dev/null 2> "$WORK/stderr" ||
		    { echo "gluster.sh: cannot make the file to download:" \
		    "$(cat "$WORK/stderr")" >&2; exit 1; }
		;;
	esac
	for r in $(seq 1 "$rounds"); do
		printf 'round %d/%d:' "$r" "$rounds" >&2
		for wl in $workloads; do
			case $wl in
			up*|down*) cands="ours ref floor-rw" ;;
			*) cands="ours ref" ;;
			esac
			# shellcheck disable=SC2086 # the list is words
			set -- $cands
			n=$#
			# Rotate: round r starts with candidate (r - 1) mod n.
			for i in $(seq 0 $((n - 1))); do
				k=$(( (r - 1 + i) % n + 1 ))
				run "$r" "$wl" "${!k}" "$MNT/run" "$res"
			done
			printf ' %s' "$wl" >&2
		done
		echo >&2
	done
	echo "elapsed: $((SECONDS - start)) s"
	"$here/compare.sh" --report "$res"
	echo "$failures" > "$WORK/failures"
}

if [ "${1:-}" = --inner ]; then
	# The settings come from the outer run through the environment.
	ours=$GB_OURS ref=$GB_REF size=$GB_SIZE rounds=$GB_ROUNDS
	files=$GB_FILES depth=$GB_DEPTH cache=$GB_CACHE workloads=$GB_WORKLOADS
	bytes=$(to_bytes "$size") || exit 2
	inner "$2" "$3"
	exit 0
fi

while [ $# -gt 0 ]; do
	case $1 in
	--ours) ours=$2; shift ;;
	--ref) ref=$2; shift ;;
	--size) size=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--files) files=$2; shift ;;
	--depth) depth=$2; shift ;;
	--only) only=$2; shift ;;
	--cache) cache=$2; shift ;;
	--out) out=$2; shift ;;
	-h|--help) usage ;;
	*) echo "gluster.sh: unknown option $1" >&2; usage ;;
	esac
	shift || usage
done
case $rounds in ''|*[!0-9]*|0) echo "gluster.sh: bad --rounds" >&2; exit 2 ;; esac
case $cache in on|off) ;; *) echo "gluster.sh: --cache on or off" >&2; exit 2 ;; esac
bytes=$(to_bytes "$size") || exit 2
workloads=$workloads_all
[ -n "$only" ] && workloads=${only//,/ }
for wl in $workloads; do
	wl_args "$wl" > /dev/null || exit 2
done
why=$(gluster_missing)
if [ -n "$why" ]; then
	echo "gluster.sh: cannot run here: $why" >&2
	exit 1
fi
[ -x "$ref" ] || { echo "gluster.sh: reference server $ref not found" >&2; exit 1; }
[ -x "$ours" ] || { echo "gluster.sh: our server $ours not found (make)" >&2; exit 1; }
ours=$(cd "$(dirname "$ours")" && pwd)/$(basename "$ours")
# The client and the floor, as compare.sh builds them.
for prog in sftpbench floor; do
	if [ ! -x "$here/$prog" ] || [ "$here/$prog.c" -nt "$here/$prog" ]; then
		echo "gluster.sh: building $prog" >&2
		${CC:-cc} -O2 -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra \
		    -o "$here/$prog" "$here/$prog.c" || exit 1
	fi
done

work=$(mktemp -d /tmp/sftpbench-gluster.XXXXXX) || exit 1
chmod 0755 "$work"
ns=sftp-bench-$$
# shellcheck disable=SC2317 # run by the trap
cleanup() {
	netns_remove "$ns"
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
netns_make "$ns" "$addr" || { echo "gluster.sh: $GLUSTER_WHY" >&2; exit 1; }
res=$work/results
[ -n "$out" ] && res=$(cd "$(dirname "$out")" && pwd)/$(basename "$out") && : > "$res"
GB_OURS=$ours GB_REF=$ref GB_SIZE=$size GB_ROUNDS=$rounds GB_FILES=$files \
    GB_DEPTH=$depth GB_CACHE=$cache GB_WORKLOADS=$workloads \
    netns_run "$ns" "$self" --inner "$work" "$res" &
# In the background: a signal then stops the run at once (see cleanup).
wait $!
rc=$?
[ -n "$out" ] && { echo; echo "raw results: $out"; }
if [ $rc -ne 0 ] || [ "$(cat "$work/failures" 2>/dev/null || echo 1)" != 0 ]; then
	echo "gluster.sh: some runs FAILED" >&2
	exit 1
fi
exit 0
