#!/usr/bin/env bash
#
# bwlimit.sh: how close -b keeps a session to its limit. For each limit and
# each workload, sftpbench moves limit x seconds bytes through our server
# started with that limit on the workload's side (-b RATE for downloads,
# -b 0:RATE for uploads), over pipes, in a work directory on tmpfs; the
# table gives the rate reached against the limit (1.00: exactly; the issue
# asks for 0.95 to 1.05 over 10 s) and the server's CPU. A row with the
# limit "none" is the same transfer without -b, for scale.
#
# usage: bwlimit.sh [--ours PATH] [--limits LIST] [--seconds N]
#                   [--only LIST] [--dir DIR]
#
#   --ours     our server (default: this tree's sftp-server; env OURS)
#   --limits   rates with K, M or G (default 1M,10M,100M)
#   --seconds  length of each transfer at its limit (default 10)
#   --only     a subset of down255k,down32k,up255k,up32k (default all)
#   --dir      work in DIR (default: a private tmpfs as root, else a
#              temporary directory)

set -u
BENCH_PROG=bwlimit.sh
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

limits=1M,10M,100M
seconds=10
only=down255k,down32k,up255k,up32k
dir=
while [ $# -gt 0 ]; do
	case $1 in
	--ours) ours=$2; shift ;;
	--limits) limits=$2; shift ;;
	--seconds) seconds=$2; shift ;;
	--only) only=$2; shift ;;
	--dir) dir=$2; shift ;;
	-h|--help) bench_usage ;;
	*) bench_unknown "$1" ;;
	esac
	shift
done
bench_count seconds "$seconds"
[ -x "$ours" ] || bench_die "no server at $ours"
bench_build sftpbench

if [ -z "$dir" ]; then
	dir=$(mktemp -d /tmp/bwlimit.XXXXXX) || bench_die "mktemp failed"
	bench_remove "$dir"
	bench_tmpfs "$dir" 4G 700 || true
fi

echo "bwlimit.sh: $(bench_host); $ours ($(bench_ident "$ours" "$ours"))"
bench_load_warning
printf '| workload | limit | MiB | wall s | MiB/s | rate/limit | server CPU s |\n'
printf '|---|---|---|---|---|---|---|\n'
for wl in ${only//,/ }; do
	for lim in ${limits//,/ } none; do
		if [ "$lim" = none ]; then
			bytes=$(bench_to_bytes 256M)
			args=()
		else
			rate=$(bench_to_bytes "$lim")
			bytes=$((rate * seconds))
			case $wl in
			down*) args=(-b "$lim") ;;
			*) args=(-b "0:$lim") ;;
			esac
		fi
		# shellcheck disable=SC2046 # the workload's arguments, split
		line=$("$bench_here/sftpbench" $(bench_transfer_args "$wl" \
		    "$bytes") -d "$dir" -- "$ours" "${args[@]}" 2>&1 | tail -n 1)
		echo "$line" | awk -v wl="$wl" -v lim="$lim" -v rate="${rate:-0}" '
		{
			for (i = 1; i <= NF; i++) {
				split($i, kv, "=")
				v[kv[1]] = kv[2]
			}
			mib = v["units"]
			r = v["rate"]
			printf "| %s | %s | %.0f | %.2f | %.2f | %s | %.3f |\n",
			    wl, lim, mib, v["wall"], r,
			    lim == "none" ? "-" : sprintf("%.3f",
			    r * 1048576 / rate), v["server_cpu"]
		}'
		rm -f "$dir"/*
	done
done
