#!/usr/bin/env bash
#
# latency.sh: the servers side by side on slow storage. Each storage system
# call of each server (read, write, open, stat, directory read, ...) is held
# for the same time by bench/slowfs, at 0, 0.2 and 1 ms, and sftpbench drives
# the seven workloads with 64 requests in flight (only calls on the work
# directory are held, not those on /etc or the server's libraries): downloads and uploads with
# 32 KiB and 255 KiB requests, 5,000 LSTATs pipelined, a listing of 5,000
# entries (with long names), and small files (OPEN, WRITE 4 KiB, CLOSE; 64
# requests, so many files, in flight). The servers: ours, OpenSSH's and Go
# pkg/sftp's (bench/gosftp, built from Debian's packaged sources; skipped
# with a reason when Go or pkg/sftp is missing). One table: the median rate
# of each, the paired ratios ours/OpenSSH and ours/pkg-sftp, and the most
# storage calls each server had waiting at once (slowfs's held_max), and
# slowfs's own CPU and lateness while it served ours; then
# slowfs's own ceiling at each delay (bench/callrate, 64 threads, no
# server), above which no server's rate can be read.
#
# usage: latency.sh [--ours PATH] [--ref PATH] [--go PATH] [--servers LIST]
#                   [--delays LIST] [--size SIZE] [--entries N] [--files N]
#                   [--depth N] [--rounds N] [--only LIST] [--dir DIR]
#                   [--gluster] [--out FILE] [--report FILE]
#
#   --ours     our server (default: this tree's sftp-server; env OURS)
#   --ref      OpenSSH's (default /usr/lib/openssh/sftp-server; env REF)
#   --go       pkg/sftp's (default bench/gosftp-server, built when missing)
#   --servers  a subset of ours,ref,go (default all three)
#   --delays   milliseconds per storage call (default 0,0.2,1; 0 with
#              --gluster)
#   --size     bytes per upload or download (default 64M)
#   --entries  names LSTATed and listed (default 5000)
#   --files    files per smallfiles run (default 2000)
#   --depth    requests in flight (default 64)
#   --rounds   rounds, the order of the servers rotated each (default 3)
#   --only     a subset of down32k,up32k,down255k,up255k,stat,readdir,
#              smallfiles
#   --dir      work in DIR (default: a private tmpfs as root, else a
#              temporary directory)
#   --gluster  work on a GlusterFS volume with its client caches off (as
#              bench/gluster.sh --cache off makes it; root)
#   --out      keep the raw result lines
#   --report   print the table again from lines kept by --out, run nothing

set -u
BENCH_PROG=latency.sh
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

self=$bench_here/$(basename "$0")
gosrv=$bench_here/gosftp-server
servers=ours,ref,go
delays=
size=64M
entries=5000
files=2000
depth=64
rounds=3
only=
dir=
gluster=0
out=
report=
addr=192.0.2.1
volume=sftplatency
workloads_all="down32k up32k down255k up255k stat readdir smallfiles"

# The sftpbench arguments of a workload.
wl_args() {
	case $1 in
	stat) echo "-w stat -c $entries -n $entries" ;;
	readdir) echo "-w readdir -n $entries -i 1" ;;
	smallfiles) echo "-w smallfiles -c $files" ;;
	*) bench_transfer_args "$1" "$bytes" ;;
	esac
}

# run ROUND DELAY WORKLOAD SERVER DIR RESULTS: one sftpbench run in DIR,
# the server under slowfs -d DELAY; its line appended to RESULTS with the
# round, the delay and slowfs's held_max.
run() {
	local r=$1 d=$2 wl=$3 who=$4 wdir=$5 res=$6 line rc held cost
	local -a cmd
	case $who in
	ours) cmd=("$ours") ;;
	ref) cmd=("$ref") ;;
	go) cmd=("$gosrv") ;;
	esac
	rm -f "$WORK/slowfs"
	# shellcheck disable=SC2046 # the arguments are words
	line=$("$bench_here/sftpbench" -d "$wdir" -q "$depth" -L "$who" \
	    $(wl_args "$wl") -- "$bench_here/slowfs" -d "$d" -p "$wdir" \
	    -o "$WORK/slowfs" -- "${cmd[@]}" 2> "$WORK/stderr")
	rc=$?
	if [ $rc != 0 ] || [ -z "$line" ]; then
		failures=$((failures + 1))
		echo >&2
		echo "$BENCH_PROG: round $r, $d ms, $wl, $who FAILED" \
		    "(exit $rc):" >&2
		sed 's/^/    /' "$WORK/stderr" >&2
		echo "round=$r delay=$d name=$wl server=$who status=fail" \
		    >> "$res"
		return
	fi
	held=$(sed -n 's/.* held_max=\([0-9]*\).*/\1/p' "$WORK/slowfs" |
	    tail -n 1)
	# slowfs's own cost: its CPU seconds, and how late it let calls go.
	cost=$(sed -n 's/.* cpu_s=\([0-9.]*\) late_mean_us=\([0-9.]*\).*/slowfs_cpu=\1 slowfs_late_us=\2/p' \
	    "$WORK/slowfs" | tail -n 1)
	echo "round=$r delay=$d name=$wl $line held_max=${held:--1} $cost" \
	    >> "$res"
}

# ceiling ROUND DELAY RESULTS: slowfs's own ceiling at DELAY: callrate's
# 64 threads LSTAT one file under it, no server; the line appended to
# RESULTS as name=ceiling.
ceiling() {
	local r=$1 d=$2 res=$3 line held
	mkdir -p "$WORK/ceiling"
	: > "$WORK/ceiling/f"
	rm -f "$WORK/slowfs"
	if ! line=$("$bench_here/slowfs" -d "$d" -p "$WORK/ceiling" \
	    -o "$WORK/slowfs" -- "$bench_here/callrate" 64 64000 \
	    "$WORK/ceiling/f" 2> "$WORK/stderr"); then
		echo "$BENCH_PROG: the ceiling at $d ms failed:" \
		    "$(cat "$WORK/stderr")" >&2
		return
	fi
	held=$(sed -n 's/.* held_max=\([0-9]*\).*/\1/p' "$WORK/slowfs" |
	    tail -n 1)
	echo "round=$r delay=$d name=ceiling server=slowfs unit=call $line" \
	    "held_max=${held:--1}" >> "$res"
}

# summarize RESULTS: the table, from the lines of run().
summarize() {
	awk "$bench_awk"'
	function fmt(v) {
		if (v == "")
			return "-"
		if (v >= 100)
			return sprintf("%.0f", v)
		if (v >= 10)
			return sprintf("%.1f", v)
		return sprintf("%.2f", v)
	}
	function ratio(a, b,    n, i, r, k, t) {
		# The median of the per-round ratios a/b (rounds with both).
		n = 0
		for (i = 1; i <= maxr; i++) {
			k = key SUBSEP i
			if ((k SUBSEP a) in rate && (k SUBSEP b) in rate &&
			    rate[k SUBSEP b] > 0)
				t[++n] = rate[k SUBSEP a] / rate[k SUBSEP b]
		}
		if (n == 0)
			return "-"
		r = median(t, n)
		return sprintf("%.2f", r)
	}
	function med(who,    n, i, t, k) {
		n = 0
		for (i = 1; i <= maxr; i++) {
			k = key SUBSEP i SUBSEP who
			if (k in rate)
				t[++n] = rate[k]
		}
		if (failed[key SUBSEP who])
			return "FAILED"
		return fmt(median(t, n))
	}
	function cost(    n, j, a, b) {
		# slowfs while it served ours: its CPU over the run wall time,
		# and the mean lateness of the calls it held; medians.
		if (dl[i] + 0 == 0 || nshare[key] == 0)
			return "-"
		for (j = 1; j <= nshare[key]; j++) {
			a[j] = share[key, j]
			b[j] = late[key, j]
		}
		n = nshare[key]
		return sprintf("%.2f, %.0f", median(a, n), median(b, n))
	}
	function heldmax(who) {
		# At 0 ms nothing is held: there is nothing to tell.
		if (dl[i] + 0 == 0 || !((key SUBSEP who) in held))
			return "-"
		return held[key SUBSEP who]
	}
	$0 ~ / name=ceiling / {
		kv_parse(1)
		d = kv["delay"]
		if (!(d in cn))
			cd[++ncd] = d
		cr[d, ++cn[d]] = kv["rate"]
		next
	}
	{
		kv_parse(1)
		d = kv["delay"]; wl = kv["name"]; who = kv["server"]
		k = wl SUBSEP d
		if (!(k in seen)) {
			seen[k] = 1
			order[++nk] = k
			wlname[nk] = wl; dl[nk] = d
		}
		if (kv["round"] > maxr)
			maxr = kv["round"]
		if (kv["status"] == "fail") {
			failed[k SUBSEP who] = 1
			next
		}
		unit[k] = kv["unit"]
		rate[k SUBSEP kv["round"] SUBSEP who] = kv["rate"]
		if (!((k SUBSEP who) in held) || kv["held_max"] > held[k SUBSEP who])
			held[k SUBSEP who] = kv["held_max"]
		if (who == "ours" && kv["slowfs_cpu"] != "" && kv["wall"] > 0) {
			share[k, ++nshare[k]] = kv["slowfs_cpu"] / kv["wall"]
			late[k, nshare[k]] = kv["slowfs_late_us"]
		}
		has[who] = 1
	}
	END {
		u["MiB"] = "MiB/s"; u["op"] = "LSTAT/s"
		u["entry"] = "names/s"; u["file"] = "files/s"
		print "| workload | ms | unit | ours | OpenSSH | pkg/sftp |" \
		    " ours/OpenSSH | ours/pkg-sftp | held at once (ours, OpenSSH, pkg/sftp) |" \
		    " slowfs for ours: CPUs, late us |"
		print "|---|---|---|---|---|---|---|---|---|---|"
		for (i = 1; i <= nk; i++) {
			key = order[i]
			printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s, %s, %s | %s |\n",
			    wlname[i], dl[i], u[unit[key]], med("ours"),
			    med("ref"), med("go"), ratio("ours", "ref"),
			    ratio("ours", "go"), heldmax("ours"),
			    heldmax("ref"), heldmax("go"), cost()
		}
		print ""
		print "Rates are medians over " maxr " round(s); ratios are medians" \
		    " of the ratios within each round (above 1: ours is faster)."
		print "\"held at once\": the most storage calls the server had" \
		    " waiting in slowfs at one time, over its runs."
		print "\"slowfs for ours\": the CPU the harness itself took while" \
		    " it served ours (its CPU time over the run wall time, in CPUs)," \
		    " and how late, past its delay, it let a held call go (mean," \
		    " microseconds); medians over the rounds."
		for (i = 1; i <= ncd; i++) {
			n = 0
			for (j = 1; j <= cn[cd[i]]; j++)
				t[++n] = cr[cd[i], j]
			printf "%s%s ms: %.0f calls/s (64 threads could make %.0f)",
			    i == 1 ? "slowfs'"'"'s own ceiling (bench/callrate: 64" \
			    " threads LSTAT one file, no server), median: " : "; ",
			    cd[i], median(t, n), 64000 / cd[i]
		}
		if (ncd > 0)
			print "."
	}' "$1"
}

# The runs, in WORKDIR; RESULTS gets their lines.
rounds_run() {
	local wdir=$1 res=$2 r d wl who cands start
	cands=${servers//,/ }
	echo "slow storage: bench/slowfs -p WORK holds every storage system" \
	    "call on the work directory for DELAY ms"
	[ "$(id -u)" = 0 ] || echo "warning: not root: slowfs cannot tell" \
	    "the descriptors of undumpable servers (OpenSSH's, ours) apart"
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "rounds: $rounds; delays (ms): $delays; $size transfers," \
	    "$entries LSTATs and names, $files small files; depth $depth; pipes"
	echo "work: $wdir ($(df -PT "$wdir" | awk 'NR == 2 { print $2 }'))"
	for who in $cands; do
		case $who in
		ours) echo "ours: $ours ($(bench_ident "$ours" "$ours"))" ;;
		ref) echo "OpenSSH: $ref ($(bench_ident "$ref" "$ref"))" ;;
		go) echo "pkg/sftp: $gosrv ($(bench_ident "$gosrv" "$gosrv"))" ;;
		esac
	done
	echo "host: $(bench_host)"
	bench_load_warning
	echo
	failures=0
	start=$SECONDS
	# The fixtures are made once, before the rounds, by a server-less
	# run: the file to download and the directory.
	case " $workloads " in
	*" down"*)
		"$bench_here/sftpbench" -d "$wdir" -w download -b "$bytes" \
		    -F -- "$bench_here/floor" rw > /dev/null 2> "$WORK/stderr" ||
		    bench_die "cannot make the file to download:" \
		    "$(cat "$WORK/stderr")"
		;;
	esac
	for r in $(seq 1 "$rounds"); do
		for d in ${delays//,/ }; do
			printf 'round %d/%d, %s ms:' "$r" "$rounds" "$d" >&2
			for wl in $workloads; do
				# shellcheck disable=SC2086 # words
				for who in $(bench_rotate "$r" $cands); do
					run "$r" "$d" "$wl" "$who" "$wdir" "$res"
				done
				printf ' %s' "$wl" >&2
			done
			if [ "$d" != 0 ]; then
				ceiling "$r" "$d" "$res"
				printf ' ceiling' >&2
			fi
			echo >&2
		done
	done
	echo "elapsed: $((SECONDS - start)) s"
	echo
	summarize "$res"
	echo "$failures" > "$WORK/failures"
}

# inner WORK RESULTS: in the namespace of --gluster: the volume with its
# client caches off, the rounds on it.
inner() {
	local res=$2
	WORK=$1
	MNT=$1/mnt G=$1/gluster
	# shellcheck source=tests/fs/gluster-lib.sh
	. "$bench_top/tests/fs/gluster-lib.sh"
	GLUSTER_VOLUME_OPTIONS=$GLUSTER_COHERENT_VOLUME_OPTIONS
	GLUSTER_MOUNT_OPTIONS=$GLUSTER_COHERENT_MOUNT_OPTIONS
	trap 'gluster_down "$G" "$volume" "$MNT"' EXIT
	trap 'exit 130' INT TERM
	if ! gluster_up "$G" "$addr" "$volume" ||
	    ! gluster_mount "$addr" "$volume" "$MNT"; then
		echo "latency.sh: $GLUSTER_WHY" >&2
		exit 1
	fi
	mkdir -p "$MNT/run"
	echo "GlusterFS: one brick on a tmpfs, through FUSE, client caches off" \
	    "(tests/fs/gluster-lib.sh's coherent options)"
	rounds_run "$MNT/run" "$res"
}

if [ "${1:-}" = --inner ]; then
	# The settings come from the outer run through the environment.
	ours=$LB_OURS ref=$LB_REF gosrv=$LB_GO servers=$LB_SERVERS
	delays=$LB_DELAYS size=$LB_SIZE entries=$LB_ENTRIES files=$LB_FILES
	depth=$LB_DEPTH rounds=$LB_ROUNDS workloads=$LB_WORKLOADS
	bytes=$(bench_to_bytes "$size") || exit 2
	inner "$2" "$3"
	exit 0
fi

while [ $# -gt 0 ]; do
	case $1 in
	--ours) ours=$2; shift ;;
	--ref) ref=$2; shift ;;
	--go) gosrv=$2; shift ;;
	--servers) servers=$2; shift ;;
	--delays) delays=$2; shift ;;
	--size) size=$2; shift ;;
	--entries) entries=$2; shift ;;
	--files) files=$2; shift ;;
	--depth) depth=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--only) only=$2; shift ;;
	--dir) dir=$2; shift ;;
	--gluster) gluster=1 ;;
	--out) out=$2; shift ;;
	--report) report=$2; shift ;;
	-h|--help) bench_usage ;;
	*) bench_unknown "$1" ;;
	esac
	shift || bench_usage
done

if [ -n "$report" ]; then
	[ -r "$report" ] || bench_die "cannot read $report"
	summarize "$report"
	exit 0
fi

bench_count --rounds "$rounds"
bench_count --entries "$entries"
bench_count --files "$files"
bench_count --depth "$depth"
bytes=$(bench_to_bytes "$size") || exit 2
if [ -z "$delays" ]; then
	delays=0,0.2,1
	[ $gluster = 1 ] && delays=0
fi
for d in ${delays//,/ }; do
	case $d in
	''|*[!0-9.]*|*.*.*) bench_bad "bad delay $d (milliseconds)" ;;
	esac
done
workloads=$workloads_all
[ -n "$only" ] && workloads=${only//,/ }
for wl in $workloads; do
	wl_args "$wl" > /dev/null || exit 2
done
for who in ${servers//,/ }; do
	case $who in ours|ref|go) ;; *) bench_bad "unknown server $who" ;; esac
done

# The client, slowfs, the floor (which makes the file to download) and
# pkg/sftp's server, when missing or older than their sources.
bench_build sftpbench slowfs floor callrate
# shellcheck disable=SC2086 # the list is words
if bench_has go ${servers//,/ }; then
	[ "$gosrv" = "$bench_here/gosftp-server" ] && bench_build gosftp-server
	if [ ! -x "$gosrv" ]; then
		echo "$BENCH_PROG: pkg/sftp's server $gosrv missing: it is" \
		    "left out" >&2
		servers=$(echo ",$servers," | sed 's/,go,/,/; s/^,//; s/,$//')
	fi
fi
# shellcheck disable=SC2086 # the list is words
if bench_has ours ${servers//,/ }; then
	[ -x "$ours" ] || bench_die "our server $ours not found (make)"
	ours=$(bench_abs "$ours")
fi
# shellcheck disable=SC2086 # the list is words
if bench_has ref ${servers//,/ }; then
	[ -x "$ref" ] || bench_die "OpenSSH's server $ref not found" \
	    "(Debian: openssh-sftp-server)"
fi
[ -x "$gosrv" ] && gosrv=$(bench_abs "$gosrv")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sftp-latency.XXXXXX") || exit 1
bench_remove "$WORK"
chmod 0755 "$WORK"
res=$WORK/results
[ -n "$out" ] && res=$(bench_abs "$out") && : > "$res"

if [ $gluster = 1 ]; then
	# shellcheck source=tests/fs/gluster-lib.sh
	. "$bench_top/tests/fs/gluster-lib.sh"
	why=$(gluster_missing)
	[ -z "$why" ] || bench_die "cannot run on GlusterFS here: $why"
	ns=sftp-latency-$$
	# shellcheck disable=SC2317 # run by the trap
	bench_on_exit() {
		netns_remove "$ns"
	}
	netns_make "$ns" "$addr" || bench_die "$GLUSTER_WHY"
	LB_OURS=$ours LB_REF=$ref LB_GO=$gosrv LB_SERVERS=$servers \
	    LB_DELAYS=$delays LB_SIZE=$size LB_ENTRIES=$entries \
	    LB_FILES=$files LB_DEPTH=$depth LB_ROUNDS=$rounds \
	    LB_WORKLOADS=$workloads \
	    netns_run "$ns" "$self" --inner "$WORK" "$res" &
	# In the background: a signal then stops the run at once.
	wait $!
	rc=$?
else
	if [ -z "$dir" ]; then
		dir=$WORK/fs
		mkdir "$dir"
		if ! bench_tmpfs "$dir" "$((3 * bytes + (512 << 20)))" 0755; then
			echo "note: no private tmpfs ($bench_why): working in" \
			    "$dir" >&2
		fi
	fi
	[ -d "$dir" ] || bench_die "no directory $dir"
	rounds_run "$(bench_abs "$dir")" "$res"
	rc=0
fi
[ -n "$out" ] && { echo; echo "raw results: $out"; }
if [ $rc -ne 0 ] || [ "$(cat "$WORK/failures" 2>/dev/null || echo 1)" != 0 ]; then
	echo "$BENCH_PROG: some runs FAILED" >&2
	exit 1
fi
exit 0
