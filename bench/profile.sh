#!/usr/bin/env bash
#
# profile.sh: where the system calls and the CPU time of the transfer
# workloads go, for our sftp-server and the reference OpenSSH sftp-server,
# driven by sftpbench on a private tmpfs (as compare.sh).
#
# usage: profile.sh [--ours PATH] [--ref PATH] [--size SIZE] [--only LIST]
#                   [--pin same|none] [--steps LIST] [--perf-servers LIST]
#                   [--perf-size SIZE] [--freq HZ] [--out DIR]
#
# --only       workloads among up255k,up32k,down255k,down32k (default: all)
# --steps      among strace,count,perf (default: all three)
#              strace: strace -c, then a trace of read, write, writev,
#                      splice, pwrite64, pread64 for the sizes
#              count:  perf stat on syscall tracepoints (no ptrace: the
#                      unperturbed number of system calls per request)
#              perf:   perf record -e cpu-clock -g, attached by pid
# --perf-servers  among ours,ref,floor-rw,floor-splice (default: ours)
# --perf-size  bytes per perf run (default 4G: enough samples at --freq)
# --freq       perf's sampling rate in Hz (default 5000: each sample costs
#              some 15 us on these VMs, so faster sampling inflates the CPU
#              time it measures)
# --out        keep every raw file there (default: a temporary directory,
#              removed at exit)

set -u
BENCH_PROG=profile.sh
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

size=1G
only="up255k,up32k,down255k,down32k"
pin=same
steps="strace,count,perf"
perf_servers=ours
perf_size=4G
freq=5000
out=

while [ $# -gt 0 ]; do
	case $1 in
	--ours) ours=$2; shift ;;
	--ref) ref=$2; shift ;;
	--size) size=$2; shift ;;
	--only) only=$2; shift ;;
	--pin) pin=$2; shift ;;
	--steps) steps=$2; shift ;;
	--perf-servers) perf_servers=$2; shift ;;
	--perf-size) perf_size=$2; shift ;;
	--freq) freq=$2; shift ;;
	--out) out=$2; shift ;;
	-h|--help) bench_usage ;;
	*) bench_unknown "$1" ;;
	esac
	shift || bench_usage
done

for c in strace perf taskset; do
	command -v "$c" > /dev/null || bench_die "$c not found"
done
if [ ! -x "$ours" ] || [ ! -x "$ref" ]; then
	bench_die "need both servers: $ours, $ref"
fi

bytes=$(bench_to_bytes "$size") || exit 2
perf_bytes=$(bench_to_bytes "$perf_size") || exit 2

# The client, and the floor when it is profiled, when missing or older than
# their sources.
case ",$perf_servers," in
*,floor-*) bench_build sftpbench floor ;;
*) bench_build sftpbench ;;
esac
bench=$bench_here/sftpbench

work=$(mktemp -d "${TMPDIR:-/tmp}/sftpprof.XXXXXX") || exit 1
bench_remove "$work"
chmod 0755 "$work"
mkdir "$work/fs" "$work/bin" || exit 1
if [ -z "$out" ]; then
	out=$work/out
fi
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
fs="a temporary directory"
if bench_tmpfs "$work/fs" $((2 * bytes + 2 * perf_bytes + (512 << 20))) 0700; then
	fs="a private tmpfs"
fi
fix=$work/fs

# Copies under names of their own: the build may replace ours meanwhile.
cp "$ours" "$work/bin/sftp-server-ours" && cp "$ref" "$work/bin/sftp-server-ref" || exit 1
server_bin() { echo "$work/bin/sftp-server-$1"; }

pin_cmd=()
case $pin in
same) pin_cmd=(taskset -c "$(bench_last_cpu)") ;;
none) ;;
*) bench_bad "--pin same or none" ;;
esac

workloads=${only//,/ }
for wl in $workloads; do
	bench_transfer_args "$wl" > /dev/null || exit 2
done

echo "profile.sh: $size transfers, pipes, depth 64, pinned: $pin, on $fs"
echo "ours: $ours"
echo "ref:  $ref"
echo "host: $(bench_host), load average $(cut -d ' ' -f 1-3 /proc/loadavg)"
echo "raw files: $out"

# bench WHO WL TAG CMD...: one sftpbench run with CMD before the server;
# the result line goes to $out/TAG.WHO.WL.line.
bench() {
	local who=$1 wl=$2 tag=$3 f
	shift 3
	f=$out/$tag.$who.$wl
	# shellcheck disable=SC2046 # the arguments are words
	if ! "${pin_cmd[@]}" "$bench" -d "$fix" -t 300 \
	    $(bench_transfer_args "$wl" "$bytes") -L "$who" -- \
	    "$@" "$(server_bin "$who")" > "$f.line" 2> "$f.err"; then
		echo "profile.sh: $tag $who $wl FAILED: $(tr '\n' ' ' < "$f.err")" >&2
		return 1
	fi
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" "$2"; }

# Replies: one per request, and the VERSION of INIT.
replies() { echo $(($(field requests "$1") + 1)); }

# strace_summary FILE-C TRACE LINE: one Markdown row of the strace numbers.
strace_summary() {
	local total
	total=$(awk '$NF == "total" { print $(NF - 2) }' "$1")
	awk -v total="$total" -v replies="$(replies "$3")" \
	    -v requests="$(field requests "$3")" "$bench_awk"'
{
	line = $0
	sub(/^[0-9]+ +/, "", line)		# the pid of strace -f
	p = index(line, "(")
	if (p == 0)
		next
	name = substr(line, 1, p - 1)
	args = substr(line, p + 1)
	if (!match(line, / = -?[0-9]+/))
		next
	ret = substr(line, RSTART + 3, RLENGTH - 3) + 0
	split(args, a, ", ")
	fd = a[1] + 0
	if (name == "read" && fd == 0 && ret > 0) {
		sz[++nr] = ret
		sum += ret
		ask = a[3]
		sub(/\).*/, "", ask)
	}
	if ((name == "write" || name == "writev") && fd == 1)
		w1++
	if (name == "splice" && a[3] + 0 == 1)
		s1++
	if (name == "pwrite64" || (name == "write" && fd > 2))
		fw++
	if (name == "pread64" || (name == "read" && fd > 2) || (name == "splice" && a[3] + 0 != 1))
		fr++
}
END {
	# syscalls/request | read(0) calls | median | mean | asked | write(v)(1) | splice(->1) | replies/write | file writes | file reads
	printf "%.2f | %d | %d | %d | %s | %d | %d | %.2f | %d | %d\n",
	    total / requests, nr, median(sz, nr), nr ? sum / nr : 0, ask,
	    w1, s1, w1 ? replies / w1 : 0, fw, fr
}' "$2"
}

# attach WHO WL: perf record on the server that sftpbench starts. The
# command sftpbench runs is a shell that stops itself and, once perf is
# attached to it and has let it go on, execs the server: perf sees the whole
# session, INIT to exit (the events stay across the exec).
attach() {
	local who=$1 wl=$2 f bpid pid="" i=0 p
	local -a cmd
	f=$out/perf.$who.$wl
	# shellcheck disable=SC2016 # $$, $0 and $@ are the little shell's
	local stop='kill -STOP $$; exec "$0" "$@"'
	case $who in
	floor-rw) cmd=(-F -- /bin/sh -c "$stop" "$bench_here/floor" rw) ;;
	floor-splice) cmd=(-F -- /bin/sh -c "$stop" "$bench_here/floor" splice) ;;
	*) cmd=(-- /bin/sh -c "$stop" "$(server_bin "$who")") ;;
	esac
	# shellcheck disable=SC2046 # the arguments are words
	"${pin_cmd[@]}" "$bench" -d "$fix" -t 300 \
	    $(bench_transfer_args "$wl" "$perf_bytes") -L "$who" \
	    "${cmd[@]}" > "$f.line" 2> "$f.err" &
	bpid=$!
	while [ $i -lt 1000 ] && [ -z "$pid" ]; do
		for p in $(pgrep -P "$bpid"); do
			[ "$(cut -d ' ' -f 3 "/proc/$p/stat" 2>/dev/null)" = T ] && pid=$p
		done
		sleep 0.01
		i=$((i + 1))
	done
	if [ -z "$pid" ]; then
		echo "profile.sh: perf $who $wl: no stopped server process found" >&2
		kill "$bpid" 2>/dev/null
		wait "$bpid"
		return 1
	fi
	perf record -q -e cpu-clock -F "$freq" -g -p "$pid" -o "$f.data" \
	    > "$f.record.log" 2>&1 &
	sleep 1
	kill -CONT "$pid"
	if ! wait "$bpid"; then
		echo "profile.sh: perf $who $wl FAILED: $(tr '\n' ' ' < "$f.err")" >&2
		wait
		return 1
	fi
	wait
	perf report -i "$f.data" --no-children --sort dso,sym --stdio \
	    --percent-limit 0.5 -g none 2> /dev/null | grep -v '^#' | grep -v '^$' > "$f.top"
	perf report -i "$f.data" --no-children --sort dso --stdio -g none \
	    2> /dev/null | grep -v '^#' | grep -v '^$' > "$f.dso"
	perf report -i "$f.data" --no-children --sort sym --stdio -g caller,0.5,callee,function,percent \
	    --percent-limit 2 2> /dev/null > "$f.callers"
}

# warm BYTES: makes the download fixture of that size (one throwaway run)
# and reads it twice more, so that its pages are on the active list. The
# first reads of a freshly written file move each page from the inactive to
# the active LRU list (folio_mark_accessed), which otherwise lands in the
# profile of whichever download comes first.
warm() {
	case " $workloads " in
	*" down"*) ;;
	*) return 0 ;;
	esac
	"$bench" -d "$fix" -w download -b "$1" -- "$(server_bin ours)" > /dev/null || return 1
	dd if="$fix/download-$1.dat" of=/dev/null bs=1M status=none
	dd if="$fix/download-$1.dat" of=/dev/null bs=1M status=none
}

has_step() { case ",$steps," in *",$1,"*) return 0 ;; esac; return 1; }

if has_step strace || has_step count; then
	warm "$bytes" || exit 1
fi
if has_step perf; then
	warm "$perf_bytes" || exit 1
fi

if has_step strace; then
	echo
	echo "## strace (1: strace -c; 2: strace -e trace=read,write,writev,splice,pwrite64,pread64)"
	echo
	echo "| workload | server | syscalls/request | read(0) calls | read(0) median B | read(0) mean B | read(0) asked B | write/writev(1) | splice(->1) | replies/write | file writes | file reads |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
	for wl in $workloads; do
		for who in ours ref; do
			bench "$who" "$wl" strace-c /usr/bin/strace -f -qq -c -o "$out/strace-c.$who.$wl.txt" -- || continue
			bench "$who" "$wl" strace /usr/bin/strace -f -qq \
			    -e trace=read,write,writev,splice,pwrite64,pread64 \
			    -o "$out/strace.$who.$wl.txt" -- || continue
			echo "| $wl | $who | $(strace_summary "$out/strace-c.$who.$wl.txt" \
			    "$out/strace.$who.$wl.txt" "$out/strace-c.$who.$wl.line") |"
			rm -f "$out/strace.$who.$wl.txt.gz"
			gzip -f "$out/strace.$who.$wl.txt"
		done
	done
	echo
	echo "strace -c tables: $out/strace-c.*.txt"
fi

if has_step count; then
	echo
	echo "## system calls counted by perf stat on tracepoints (no ptrace)"
	echo
	echo "| workload | server | requests | syscalls | syscalls/request | read(0) | replies/read(0) | write+writev(1) | splice(->1) | replies/write | poll/ppoll | server CPU s |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
	for wl in $workloads; do
		for who in ours ref; do
			f=$out/count.$who.$wl
			bench "$who" "$wl" count perf stat -x, -o "$f.txt" \
			    -e raw_syscalls:sys_enter \
			    -e syscalls:sys_enter_read --filter 'fd == 0' \
			    -e syscalls:sys_enter_write --filter 'fd == 1' \
			    -e syscalls:sys_enter_writev --filter 'fd == 1' \
			    -e syscalls:sys_enter_splice --filter 'fd_out == 1' \
			    -e syscalls:sys_enter_poll -e syscalls:sys_enter_ppoll -- || continue
			awk -F, -v req="$(field requests "$f.line")" -v rep="$(replies "$f.line")" \
			    -v cpu="$(field server_cpu "$f.line")" -v wl="$wl" -v who="$who" '
$3 ~ /sys_enter/ { n[$3] = $1 }
END {
	w = n["syscalls:sys_enter_write"] + n["syscalls:sys_enter_writev"]
	r = n["syscalls:sys_enter_read"]
	printf "| %s | %s | %d | %d | %.2f | %d | %.2f | %d | %d | %.2f | %d | %.3f |\n",
	    wl, who, req, n["raw_syscalls:sys_enter"], n["raw_syscalls:sys_enter"] / req,
	    r, r ? rep / r : 0, w, n["syscalls:sys_enter_splice"], w ? rep / w : 0,
	    n["syscalls:sys_enter_poll"] + n["syscalls:sys_enter_ppoll"], cpu
}' "$f.txt"
		done
	done
	echo
	echo "(server CPU under perf stat: the perf process's own CPU is included)"
fi

if has_step perf; then
	for who in ${perf_servers//,/ }; do
		for wl in $workloads; do
			attach "$who" "$wl" || continue
			f=$out/perf.$who.$wl
			echo
			echo "## perf record -e cpu-clock -F $freq -g, $who, $wl, $perf_size"
			echo
			echo "server CPU s: $(field server_cpu "$f.line") (under perf), samples: $(perf report -i "$f.data" --stdio 2> /dev/null | sed -n 's/^# Samples: \([^ ]*\).*/\1/p' | head -n 1), by object:"
			sed 's/^/    /' "$f.dso"
			echo
			echo "top symbols (self):"
			head -n 15 "$f.top" | sed 's/^/    /'
		done
	done
fi
