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
BENCH_PROG=gluster.sh
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

self=$bench_here/$(basename "$0")
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
. "$bench_top/tests/fs/gluster-lib.sh"

# The sftpbench arguments of a workload.
wl_args() {
	case $1 in
	smallfiles) echo "-w smallfiles -c $files" ;;
	*) bench_transfer_args "$1" "$bytes" ;;
	esac
}

# run ROUND WORKLOAD CANDIDATE DIR RESULTS: one sftpbench run in DIR, its
# line appended to RESULTS as compare.sh keeps it.
run() {
	local r=$1 wl=$2 who=$3 dir=$4 res=$5
	local -a cmd
	case $who in
	ours) cmd=(-L ours -- "$ours") ;;
	ref) cmd=(-L ref -- "$ref") ;;
	floor-rw) cmd=(-F -L floor-rw -- "$bench_here/floor" rw) ;;
	esac
	# What the last run left goes, but for the file to download, which
	# leaves the mount's page cache instead: a download reads through
	# the GlusterFS client, as from shared storage, not from local memory.
	find "$dir" -mindepth 1 ! -name 'download-*.dat' -delete 2>/dev/null
	for f in "$dir"/download-*.dat; do
		[ -f "$f" ] && dd if="$f" iflag=nocache count=0 status=none
	done
	# shellcheck disable=SC2046 # the arguments are words
	bench_record "$r" "$wl" "$who" "$res" "$WORK/stderr" \
	    "$bench_here/sftpbench" -d "$dir" -q "$depth" $(wl_args "$wl") \
	    "${cmd[@]}"
}

# inner WORK RESULTS: in the namespace: the volume, the rounds, the report.
inner() {
	local res=$2 r wl cands who start
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
	echo "host: $(bench_host)"
	failures=0
	start=$SECONDS
	# The file to download is made once, before the rounds, so that no
	# round's first download finds it fresh in the page cache.
	case " $workloads " in
	*" down"*)
		"$bench_here/sftpbench" -d "$MNT/run" -w download -b "$bytes" \
		    -F -- "$bench_here/floor" rw > /dev/null 2> "$WORK/stderr" ||
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
			for who in $(bench_rotate "$r" $cands); do
				run "$r" "$wl" "$who" "$MNT/run" "$res"
			done
			printf ' %s' "$wl" >&2
		done
		echo >&2
	done
	echo "elapsed: $((SECONDS - start)) s"
	"$bench_here/compare.sh" --report "$res"
	echo "$failures" > "$WORK/failures"
}

if [ "${1:-}" = --inner ]; then
	# The settings come from the outer run through the environment.
	ours=$GB_OURS ref=$GB_REF size=$GB_SIZE rounds=$GB_ROUNDS
	files=$GB_FILES depth=$GB_DEPTH cache=$GB_CACHE workloads=$GB_WORKLOADS
	bytes=$(bench_to_bytes "$size") || exit 2
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
	-h|--help) bench_usage ;;
	*) bench_unknown "$1" ;;
	esac
	shift || bench_usage
done
bench_count --rounds "$rounds"
case $cache in on|off) ;; *) bench_bad "--cache on or off" ;; esac
bytes=$(bench_to_bytes "$size") || exit 2
workloads=$workloads_all
[ -n "$only" ] && workloads=${only//,/ }
for wl in $workloads; do
	wl_args "$wl" > /dev/null || exit 2
done
why=$(gluster_missing)
[ -z "$why" ] || bench_die "cannot run here: $why"
[ -x "$ref" ] || bench_die "reference server $ref not found"
[ -x "$ours" ] || bench_die "our server $ours not found (make)"
ours=$(bench_abs "$ours")
# The client and the floor, when missing or older than their sources.
bench_build sftpbench floor

work=$(mktemp -d /tmp/sftpbench-gluster.XXXXXX) || exit 1
bench_remove "$work"
chmod 0755 "$work"
ns=sftp-bench-$$
# At exit, before the work area goes: the namespace, and what runs in it.
# shellcheck disable=SC2317 # run by the trap
bench_on_exit() {
	netns_remove "$ns"
}
netns_make "$ns" "$addr" || bench_die "$GLUSTER_WHY"
res=$work/results
[ -n "$out" ] && res=$(bench_abs "$out") && : > "$res"
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
