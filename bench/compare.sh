#!/usr/bin/env bash
#
# compare.sh: run our sftp-server, the reference OpenSSH sftp-server and the
# floor (floor.c) side by side through sftpbench, in interleaved rounds with the
# order rotated each round, on a private tmpfs when one can be mounted. Prints
# for each workload the medians, the per-round paired ratios ours/ref of server
# CPU per unit and of rate, their medians, and the peak RSS.
#
# usage: compare.sh [--quick] [--ours PATH] [--ref PATH] [--size SIZE]
#                   [--rounds N] [--depth N] [--pin same|split|none]
#                   [--only LIST] [--socketpair] [--verify] [--out FILE]
#        compare.sh --report FILE
#
# OURS and REF in the environment stand for --ours and --ref. --report prints
# the tables again from the raw lines that --out kept.

set -u
BENCH_PROG=compare.sh
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

size=1G
rounds=5
depth=64
only=
transport=
verify=
out=
report=
pin=same
stat_count=100000
small_count=5000
listings=5
all_workloads="up255k up32k down255k down32k readdir stat smallfiles"

# --quick sets smaller defaults, which the other options override.
if bench_has --quick "$@"; then
	size=128M
	rounds=3
	stat_count=50000
	listings=3
fi
while [ $# -gt 0 ]; do
	case $1 in
	--quick) ;;
	--ours) ours=$2; shift ;;
	--ref) ref=$2; shift ;;
	--size) size=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--depth) depth=$2; shift ;;
	--only) only=$2; shift ;;
	--pin) pin=$2; shift ;;
	--socketpair) transport=-S ;;
	--verify) verify=-V ;;
	--out) out=$2; shift ;;
	--report) report=$2; shift ;;
	-h|--help) bench_usage ;;
	*) bench_unknown "$1" ;;
	esac
	shift || bench_usage
done
bench_count --rounds "$rounds"

# summarize WORKLOADS FILE: the tables, from the result lines in FILE.
summarize() {
	awk -v order="$1" "$bench_awk"'
# Median of field f over the rounds of workload w and server s.
function med(w, s, f,    r, n, a) {
	n = 0
	for (r = 1; r <= rounds; r++)
		if ((w, s, r, f) in v)
			a[++n] = v[w, s, r, f]
	return median(a, n)
}
function title(w) {
	if (w == "up255k") return "upload, 255 KiB writes"
	if (w == "up32k") return "upload, 32 KiB writes"
	if (w == "down255k") return "download, 255 KiB reads"
	if (w == "down32k") return "download, 32 KiB reads"
	if (w == "readdir") return "readdir, 20,000 entries"
	if (w == "stat") return "stat, LSTAT"
	if (w == "smallfiles") return "smallfiles, OPEN/WRITE 4 KiB/CLOSE"
	return w
}
# Paired ratios ours/ref of field f, one per round, then their median.
function ratios(w, f, label, inv,    r, n, a, x, line) {
	n = 0
	line = ""
	for (r = 1; r <= rounds; r++) {
		if (!((w, "ours", r, f) in v) || !((w, "ref", r, f) in v) ||
		    v[w, "ref", r, f] == 0) {
			line = line "     -"
			continue
		}
		x = v[w, "ours", r, f] / v[w, "ref", r, f]
		a[++n] = x
		line = line sprintf(" %5.2f", x)
	}
	if (n == 0)
		return ""
	x = median(a, n)
	printf "  ours/ref %-16s%s   median %.2f\n", label, line, x
	return x
}
{
	kv_parse(1)
	w = kv["name"]; s = kv["server"]; r = kv["round"]
	any[w] = 1
	if (r + 0 > rounds)
		rounds = r + 0
	if (kv["status"] == "fail") {
		failed[w, s]++
		next
	}
	if (kv["unit"] == "MiB") {
		per = kv["units"] / 1024
		cpu_unit[w] = "CPU s/GiB"
		rate_unit[w] = "MiB/s"
		rscale = 1
		cscale = 1
	} else {
		per = kv["units"]
		cpu_unit[w] = "CPU us/" kv["unit"]
		rate_unit[w] = "k" kv["unit"] "/s"
		rscale = 1000
		cscale = 1e6
	}
	v[w, s, r, "cpu"] = kv["server_cpu"] / per * cscale
	v[w, s, r, "rate"] = kv["rate"] / rscale
	v[w, s, r, "scpu"] = kv["server_cpu"]
	v[w, s, r, "wall"] = kv["wall"]
	v[w, s, r, "ccpu"] = kv["client_cpu"]
	v[w, s, r, "rss"] = kv["server_maxrss_kb"]
	v[w, s, r, "hwm"] = kv["server_hwm_kb"]
	v[w, s, r, "ooo"] = kv["ooo"]
	seen[w, s] = 1
}
END {
	nw = split(order, wls, " ")
	ns = split("ours ref floor-rw floor-splice", servers, " ")
	for (i = 1; i <= nw; i++) {
		w = wls[i]
		if (!(w in any))
			continue
		printf "\n%s (medians of %d rounds)\n", title(w), rounds
		printf "  %-13s %11s %11s %8s %8s %10s %10s %9s\n", "server",
		    rate_unit[w], cpu_unit[w], "CPU s", "wall s", "client s",
		    "maxrss KiB", "VmHWM KiB"
		for (j = 1; j <= ns; j++) {
			s = servers[j]
			if ((w, s) in failed)
				printf "  %-13s FAILED in %d of %d rounds\n", s,
				    failed[w, s], rounds
			if (!((w, s) in seen))
				continue
			printf "  %-13s %11.1f %11.3f %8.3f %8.3f %10.3f %10d %9d\n", s,
			    med(w, s, "rate"), med(w, s, "cpu"),
			    med(w, s, "scpu"), med(w, s, "wall"),
			    med(w, s, "ccpu"), med(w, s, "rss"), med(w, s, "hwm")
		}
		rc[w] = ratios(w, "cpu", cpu_unit[w])
		rr[w] = ratios(w, "rate", "rate")
	}
	printf "\nsummary: medians; ratio = median of the per-round ratios ours/ref\n\n"
	printf "| workload | ours rate | ref rate | rate ours/ref | "
	printf "ours CPU | ref CPU | CPU ours/ref | floor-rw CPU | "
	printf "floor-splice CPU | ours RSS KiB | ref RSS KiB |\n"
	printf "|---|---|---|---|---|---|---|---|---|---|---|\n"
	for (i = 1; i <= nw; i++) {
		w = wls[i]
		if (!(w in any))
			continue
		printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
		    title(w),
		    fmt(med(w, "ours", "rate"), "%.1f " rate_unit[w]),
		    fmt(med(w, "ref", "rate"), "%.1f " rate_unit[w]),
		    fmt(rr[w], "%.2f"),
		    fmt(med(w, "ours", "cpu"), "%.3f " substr(cpu_unit[w], 5)),
		    fmt(med(w, "ref", "cpu"), "%.3f " substr(cpu_unit[w], 5)),
		    fmt(rc[w], "%.2f"),
		    fmt(med(w, "floor-rw", "cpu"), "%.3f " substr(cpu_unit[w], 5)),
		    fmt(med(w, "floor-splice", "cpu"),
		    "%.3f " substr(cpu_unit[w], 5)),
		    fmt(med(w, "ours", "rss"), "%d"),
		    fmt(med(w, "ref", "rss"), "%d")
	}
}
function fmt(x, f) {
	return x == "" ? "-" : sprintf(f, x)
}
	' "$2"
}

if [ -n "$report" ]; then
	summarize "$all_workloads" "$report"
	exit
fi

# The client and the floor, when missing or older than their sources.
bench_build sftpbench floor
bench=$bench_here/sftpbench
floor=$bench_here/floor

[ -x "$ref" ] || bench_die "reference server $ref not found"
have_ours=1
if [ -x "$ours" ]; then
	ours=$(bench_abs "$ours")
else
	echo "compare.sh: $ours not found: running the reference and the floor only" >&2
	have_ours=0
fi

bytes=$(bench_to_bytes "$size") || exit 2

# Pinning. The scheduler may put the client and the server on one CPU or on
# two from one run to the next, and on these machines that alone changes the
# server's CPU time by half: "same" pins both to the last CPU (the default:
# stable numbers), "split" the client and the server to the last two, "none"
# leaves them to the scheduler.
last=$(bench_last_cpu)
pin_client=()
pin_server=()
case $pin in
same|split|none) ;;
*) bench_bad "--pin same, split or none" ;;
esac
if [ "$pin" != none ] && ! command -v taskset > /dev/null; then
	echo "compare.sh: no taskset: not pinning" >&2
	pin=none
fi
if [ "$pin" = split ] && [ "$last" -lt 1 ]; then
	pin=same
fi
case $pin in
same) pin_client=(taskset -c "$last") ;;
split)
	pin_client=(taskset -c $((last - 1)))
	pin_server=(taskset -c "$last")
	;;
esac

work=$(mktemp -d "${TMPDIR:-/tmp}/sftpbench.XXXXXX") || exit 1
bench_remove "$work"
fs="a temporary directory ($(df -PT "$work" 2>/dev/null | awk 'NR == 2 { print $2 }'))"
if bench_tmpfs "$work" $((3 * bytes + (512 << 20))) 0700; then
	fs="a private tmpfs"
fi
res=${out:-$work/results}
: > "$res" || exit 1

echo "sftpbench: $rounds rounds, $size transfers, depth $depth, ${transport:+socketpair}${transport:-pipes}, pinned: $pin, on $fs"
echo "ours: $ours"
echo "ref:  $ref"
bench_load_warning
echo "host: $(bench_host)"

# The sftpbench arguments of a workload.
wl_args() {
	case $1 in
	readdir) echo "-w readdir -n 20000 -i $listings" ;;
	stat) echo "-w stat -n 20000 -c $stat_count" ;;
	smallfiles) echo "-w smallfiles -c $small_count" ;;
	*) bench_transfer_args "$1" "$bytes" ;;
	esac
}

workloads=$all_workloads
[ -n "$only" ] && workloads=${only//,/ }
for wl in $workloads; do
	wl_args "$wl" > /dev/null || exit 2
done

failures=0
# run ROUND WORKLOAD CANDIDATE: one sftpbench run, its line kept in $res.
run() {
	local r=$1 wl=$2 who=$3
	local -a cmd
	case $who in
	ours) cmd=(-L ours -- "${pin_server[@]}" "$ours") ;;
	ref) cmd=(-L ref -- "${pin_server[@]}" "$ref") ;;
	floor-rw) cmd=(-F -L floor-rw -- "${pin_server[@]}" "$floor" rw) ;;
	floor-splice)
		cmd=(-F -L floor-splice -- "${pin_server[@]}" "$floor" splice) ;;
	esac
	# shellcheck disable=SC2046
	bench_record "$r" "$wl" "$who" "$res" "$work/stderr" \
	    "${pin_client[@]}" "$bench" -d "$work" -q "$depth" $transport \
	    $verify $(wl_args "$wl") "${cmd[@]}"
}

start=$(date +%s)
for r in $(seq 1 "$rounds"); do
	printf 'round %d/%d:' "$r" "$rounds" >&2
	for wl in $workloads; do
		case $wl in
		up*|down*) cands="ours ref floor-rw floor-splice" ;;
		*) cands="ours ref" ;;
		esac
		[ $have_ours = 0 ] && cands=${cands#ours }
		# shellcheck disable=SC2086 # the list is words
		for who in $(bench_rotate "$r" $cands); do
			run "$r" "$wl" "$who"
		done
		printf ' %s' "$wl" >&2
	done
	echo >&2
done
echo "elapsed: $(( $(date +%s) - start )) s"

summarize "$workloads" "$res"

if [ -n "$out" ]; then
	echo
	echo "raw results: $out"
fi
if [ $failures -gt 0 ]; then
	echo "compare.sh: $failures runs FAILED" >&2
	exit 1
fi
exit 0
