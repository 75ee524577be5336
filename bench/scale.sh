#!/usr/bin/env bash
#
# scale.sh: what idle SFTP sessions of one user cost, and what many of them do
# to a new session of that user, for our sftp-server and the reference
# OpenSSH one. Runs as root; the sessions run as an unprivileged user, whose
# pipes count against the pipe quota (root is exempt). Four parts:
#   idle      per idle session: pipe pages and Private_Dirty after INIT,
#             again after an 8 MiB upload and download and some idle seconds,
#             and after another such transfer and as many seconds of one STAT
#             a second (busy, but moving little)
#   sessions  with N idle sessions of the user held open, a new session of
#             that user uploads and downloads (32 KiB and 255 KiB requests):
#             rate and server CPU per GiB, against N = the first of the list
#   burst     one session: 64 MiB moved after a pause longer than the idle
#             timeout, against 64 MiB moved right after
#   mix       8 uploads and 8 downloads at once, one session each: aggregate
#             rate, server CPU per GiB, slowest session against the median
#
# usage: scale.sh [--quick] [--ours PATH] [--ref PATH] [--user NAME]
#                 [--sessions LIST] [--size SIZE] [--rounds N] [--parts LIST]
#                 [--burst-rounds N] [--pause SECONDS] [--pin same|none]
#                 [--hog] [--out FILE]
#        scale.sh --report FILE
#
# OURS and REF in the environment stand for --ours and --ref. --hog runs one
# CPU-bound loop pinned to the last CPU during each mix round (as a benchmark
# pinned there by taskset, compare.sh's default, would be). --out
# keeps the raw result lines; --report prints the tables again from them.

set -u
BENCH_PROG=scale.sh
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

user=sftpscale
sessions=0,100,500,1000
size=256M
rounds=5
burst_rounds=5
parts=idle,sessions,burst,mix
pause=5
pin=same
out=
report=
hog=0
sessions_set=false
idle_n=20		# sessions in the idle part
idle_xfer=8M		# what each of them uploads and downloads there
idle_wait=5		# seconds idle (or a STAT a second) after that
settle=3		# seconds after the last INIT: past the 2 s idle timeout
burst_size=64M
mix_size=256M
mix_req=261120		# the mix's request size (sftp 9.2's 255 KiB)
workloads="up32k up255k down32k down255k"

# --quick sets smaller defaults, which the other options override.
if bench_has --quick "$@"; then
	size=64M
	rounds=1
	burst_rounds=2
	mix_size=64M
	idle_n=10
	idle_wait=3
	pause=3
fi
while [ $# -gt 0 ]; do
	case $1 in
	--quick) ;;
	--ours) ours=$2; shift ;;
	--ref) ref=$2; shift ;;
	--user) user=$2; shift ;;
	--sessions) sessions=$2; sessions_set=true; shift ;;
	--size) size=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--burst-rounds) burst_rounds=$2; shift ;;
	--parts) parts=$2; shift ;;
	--pause) pause=$2; shift ;;
	--pin) pin=$2; shift ;;
	--out) out=$2; shift ;;
	--report) report=$2; shift ;;
	--hog) hog=1 ;;
	-h|--help) bench_usage ;;
	*) bench_unknown "$1" ;;
	esac
	shift || bench_usage
done
bench_count --rounds "$rounds"
bench_count --burst-rounds "$burst_rounds"
bench_count --pause "$pause" 0
case $pin in same|none) ;; *) bench_bad "bad --pin" ;; esac
case ,$sessions, in *[!0-9,]*|,,) bench_bad "bad --sessions" ;; esac
sessions=${sessions//,/ }
size_b=$(bench_to_bytes "$size") || exit 2
mix_b=$(bench_to_bytes "$mix_size") || exit 2

# summarize FILE: the tables, from the result lines in FILE.
summarize() {
	awk -v sessions="$sessions" -v workloads="$workloads" "$bench_awk"'
function add(key, val) {
	cnt[key]++
	vals[key, cnt[key]] = val
}
function med(key,    i, a) {
	if (!(key in cnt))
		return ""
	for (i = 1; i <= cnt[key]; i++)
		a[i] = vals[key, i]
	return median(a, cnt[key])
}
function f(x, fmt) {
	return x == "" ? "-" : sprintf(fmt, x)
}
function yes(ok) {
	return ok ? "yes" : "**no**"
}
{
	kv_parse(2)
	s = kv["server"]
}
$1 == "idle" {
	st = kv["state"]
	idle[s, st, "n"] = kv["alive"]
	idle[s, st, "pmed"] = kv["root_pages_median"]
	idle[s, st, "pmax"] = kv["root_pages_max"]
	idle[s, st, "hpmax"] = kv["pages_max"]
	idle[s, st, "dmed"] = kv["pd_kb_median"]
	idle[s, st, "dmax"] = kv["pd_kb_max"]
	idle[s, st, "rss"] = kv["rss_kb_median"]
	have_idle = 1
}
$1 == "held" {
	n = kv["n"]
	add("ready" SUBSEP s SUBSEP n, kv["seconds"])
	add("hpmin" SUBSEP s SUBSEP n, kv["pages_min"])
	add("hpmed" SUBSEP s SUBSEP n, kv["pages_median"])
	add("hpmax" SUBSEP s SUBSEP n, kv["pages_max"])
	add("htot" SUBSEP s SUBSEP n, kv["pages_total"])
	add("pd" SUBSEP s SUBSEP n, kv["pd_kb_median"])
	add("upages" SUBSEP s SUBSEP n, kv["user_pages"])
	add("upipes" SUBSEP s SUBSEP n, kv["user_pipes"])
	probe[s, n] = kv["probe_new"] " / " kv["probe_grown"]
	have_held = 1
}
$1 == "sess" && !kv["failed"] {
	n = kv["n"]; w = kv["wl"]; r = kv["round"]
	cpu = kv["server_cpu"] / (kv["units"] / 1024)
	add("rate" SUBSEP s SUBSEP n SUBSEP w, kv["rate"])
	add("cpu" SUBSEP s SUBSEP n SUBSEP w, cpu)
	R[s, n, w, r] = kv["rate"]
	C[s, n, w, r] = cpu
	if (!(r in rounds)) {
		rounds[r] = 1
		nrounds++
	}
}
$1 == "sess" && kv["failed"] { failed[kv["server"], kv["n"], kv["wl"]]++ }
$1 == "burst" {
	w = kv["wl"]
	add("brate" SUBSEP s SUBSEP w, kv["burst_rate"])
	add("srate" SUBSEP s SUBSEP w, kv["steady_rate"])
	add("bratio" SUBSEP s SUBSEP w, kv["burst_rate"] / kv["steady_rate"])
	add("bcpu" SUBSEP s SUBSEP w, kv["burst_cpu"] / kv["steady_cpu"])
	add("bidle" SUBSEP s SUBSEP w, kv["idle_pages"])
	add("bbusy" SUBSEP s SUBSEP w, kv["busy_pages"])
	have_burst = 1
}
$1 == "mix" {
	r = kv["round"]
	mixmib[s, r] += kv["units"]
	mixcpu[s, r] += kv["server_cpu"]
	mixall[s, r] += kv["server_cpu"] + kv["client_cpu"]
	k = ++mixn[s, r]
	mixrate[s, r, k] = kv["rate"]
	if (kv["workload"] == "upload")
		add("mixup" SUBSEP s, kv["rate"])
	else
		add("mixdown" SUBSEP s, kv["rate"])
}
$1 == "mixspan" {
	r = kv["round"]
	if (kv["failed"] == 0 && mixn[s, r] == 16) {
		add("magg" SUBSEP s, mixmib[s, r] / kv["span"])
		add("mcpu" SUBSEP s, mixcpu[s, r] / (mixmib[s, r] / 1024))
		for (k = 1; k <= 16; k++) {
			a[k] = mixrate[s, r, k]
		}
		mm = median(a, 16)
		add("mslow" SUBSEP s, a[1] / mm)
		add("mmin" SUBSEP s, a[1])
		add("mmed" SUBSEP s, mm)
		add("mspan" SUBSEP s, kv["span"])
		add("mcpus" SUBSEP s, mixall[s, r] / kv["span"])
		add("mbusy" SUBSEP s, kv["busy_ticks"] / kv["hz"] / kv["span"])
		mround[s, r] = 1
		MA[s, r] = mixmib[s, r] / kv["span"]
		MC[s, r] = mixcpu[s, r] / (mixmib[s, r] / 1024)
	}
	have_mix = 1
}
END {
	ns = split(sessions, N, " ")
	nw = split(workloads, W, " ")
	if (have_idle) {
		print ""
		print "### Idle sessions: pipe pages (stdin + stdout) and Private_Dirty per session"
		print ""
		print "| server | state | sessions | pipe pages, median / max | Private_Dirty KiB, median / max | Rss KiB, median | goal: <= 8 pages, <= 200 KiB |"
		print "|---|---|---|---|---|---|---|"
		split("init xfer trickle", S, " ")
		for (i = 1; i <= 2; i++) {
			s = i == 1 ? "ours" : "ref"
			for (j = 1; j <= 3; j++) {
				st = S[j]
				if (!((s, st, "n") in idle))
					continue
				ok = idle[s, st, "pmax"] <= 8 && idle[s, st, "hpmax"] <= 8 && idle[s, st, "dmax"] <= 200
				printf "| %s | %s | %s | %s / %s | %s / %s | %s | %s |\n", s,
				    st == "init" ? "after INIT" : st == "xfer" ? "after 8 MiB up + down, then idle" : "after 8 MiB up + down, then a STAT a second",
				    idle[s, st, "n"], idle[s, st, "pmed"], idle[s, st, "pmax"],
				    idle[s, st, "dmed"], idle[s, st, "dmax"], idle[s, st, "rss"],
				    s == "ours" ? yes(ok) : (ok ? "(met)" : "(not met)")
			}
		}
	}
	if (have_held) {
		print ""
		print "### Held sessions (medians over rounds)"
		print ""
		print "| server | N | start s | pipe pages per session, min / median / max | all N sessions | user'\''s pipe pages (pipes) | Private_Dirty KiB per session | a new pipe of the user / grown to 1 MiB |"
		print "|---|---|---|---|---|---|---|---|"
		for (i = 1; i <= 2; i++) {
			s = i == 1 ? "ours" : "ref"
			for (j = 1; j <= ns; j++) {
				n = N[j]
				if (!(("ready" SUBSEP s SUBSEP n) in cnt))
					continue
				printf "| %s | %s | %.2f | %s / %s / %s | %s | %s (%s) | %s | %s |\n", s, n,
				    med("ready" SUBSEP s SUBSEP n),
				    (n > 0 ? med("hpmin" SUBSEP s SUBSEP n) : "-"),
				    (n > 0 ? med("hpmed" SUBSEP s SUBSEP n) : "-"),
				    (n > 0 ? med("hpmax" SUBSEP s SUBSEP n) : "-"),
				    med("htot" SUBSEP s SUBSEP n),
				    med("upages" SUBSEP s SUBSEP n), med("upipes" SUBSEP s SUBSEP n),
				    (n > 0 ? med("pd" SUBSEP s SUBSEP n) : "-"), probe[s, n]
			}
		}
	}
	if (nrounds > 0) {
		base = N[1]
		print ""
		print "### A new session with N idle sessions held (medians; ratios against N = " base ", paired by round)"
		print ""
		print "| server | workload | N | rate MiB/s | CPU s/GiB | rate / N=" base " | CPU / N=" base " | goal: rate >= 0.9x, CPU <= 1.1x |"
		print "|---|---|---|---|---|---|---|---|"
		for (i = 1; i <= 2; i++) {
			s = i == 1 ? "ours" : "ref"
			for (k = 1; k <= nw; k++) {
				w = W[k]
				for (j = 1; j <= ns; j++) {
					n = N[j]
					if (!(("rate" SUBSEP s SUBSEP n SUBSEP w) in cnt)) {
						if ((s, n, w) in failed)
							printf "| %s | %s | %s | FAILED | | | | |\n", s, w, n
						continue
					}
					delete rr; delete cr; m = 0
					for (r in rounds)
						if (((s, n, w, r) in R) && ((s, base, w, r) in R)) {
							m++
							rr[m] = R[s, n, w, r] / R[s, base, w, r]
							cr[m] = C[s, n, w, r] / C[s, base, w, r]
						}
					rq = median(rr, m); cq = median(cr, m)
					goal = n == base ? "" : (s == "ours" ? yes(rq >= 0.9 && cq <= 1.1) : ((rq >= 0.9 && cq <= 1.1) ? "(met)" : "(not met)"))
					printf "| %s | %s | %s | %.1f | %.3f | %s | %s | %s |\n", s, w, n,
					    med("rate" SUBSEP s SUBSEP n SUBSEP w), med("cpu" SUBSEP s SUBSEP n SUBSEP w),
					    n == base ? "1" : f(rq, "%.2f"), n == base ? "1" : f(cq, "%.2f"), goal
				}
			}
		}
	}
	if (have_burst) {
		print ""
		print "### Burst after idle: 64 MiB after the pause, against 64 MiB right after (medians of per-round ratios)"
		print ""
		print "| server | workload | pipe pages idle / busy | steady MiB/s | burst MiB/s | burst / steady rate | burst / steady CPU | goal: rate >= 0.8x |"
		print "|---|---|---|---|---|---|---|---|"
		for (i = 1; i <= 2; i++) {
			s = i == 1 ? "ours" : "ref"
			for (k = 1; k <= nw; k++) {
				w = W[k]
				if (!(("brate" SUBSEP s SUBSEP w) in cnt))
					continue
				q = med("bratio" SUBSEP s SUBSEP w)
				printf "| %s | %s | %s / %s | %.1f | %.1f | %.2f | %.2f | %s |\n", s, w,
				    med("bidle" SUBSEP s SUBSEP w), med("bbusy" SUBSEP s SUBSEP w),
				    med("srate" SUBSEP s SUBSEP w), med("brate" SUBSEP s SUBSEP w), q,
				    med("bcpu" SUBSEP s SUBSEP w), s == "ours" ? yes(q >= 0.8) : (q >= 0.8 ? "(met)" : "(not met)")
			}
		}
	}
	if (have_mix) {
		print ""
		print "### 16 sessions at once: 8 uploads + 8 downloads (medians over rounds)"
		print ""
		print "| server | aggregate MiB/s | server CPU s/GiB | span s | CPUs busy / used by the sessions | upload MiB/s per session | download MiB/s per session | slowest MiB/s | median MiB/s | slowest / median | goal: >= 0.5 |"
		print "|---|---|---|---|---|---|---|---|---|---|---|"
		for (i = 1; i <= 2; i++) {
			s = i == 1 ? "ours" : "ref"
			if (!(("magg" SUBSEP s) in cnt)) {
				printf "| %s | FAILED | | | | | | | | | |\n", s
				continue
			}
			q = med("mslow" SUBSEP s)
			printf "| %s | %.1f | %.3f | %.2f | %.2f / %.2f | %.1f | %.1f | %.1f | %.1f | %.2f | %s |\n", s,
			    med("magg" SUBSEP s), med("mcpu" SUBSEP s), med("mspan" SUBSEP s),
			    med("mbusy" SUBSEP s), med("mcpus" SUBSEP s),
			    med("mixup" SUBSEP s), med("mixdown" SUBSEP s), med("mmin" SUBSEP s),
			    med("mmed" SUBSEP s), q, s == "ours" ? yes(q >= 0.5) : (q >= 0.5 ? "(met)" : "(not met)")
		}
		delete ra; delete ca; m = 0
		for (r in mround)
			if ((("ours", r) in MA) && (("ref", r) in MA)) {
				m++
				ra[m] = MA["ours", r] / MA["ref", r]
				ca[m] = MC["ours", r] / MC["ref", r]
			}
		if (m > 0)
			printf "\nours / ref, paired by round: aggregate rate %.2f, CPU per GiB %.2f\n", median(ra, m), median(ca, m)
	}
}' "$1"
}

if [ -n "$report" ]; then
	# The N of the file, in their order, unless --sessions says.
	$sessions_set || sessions=$(awk '$1 == "held" { for (i = 2; i <= NF; i++) if ($i ~ /^n=/ && !seen[$i]++) printf "%s ", substr($i, 3) }' "$report")
	summarize "$report"
	exit 0
fi

[ "$(id -u)" = 0 ] ||
    bench_bad "must run as root (tmpfs, setpriv, the servers' smaps)"
for c in setpriv taskset; do
	command -v $c > /dev/null || bench_bad "no $c"
done
for s in "$ours" "$ref"; do
	[ -x "$s" ] || bench_bad "no server $s"
done

# The client, the holder and sessinfo, when missing or older than their
# sources; copied to the work area below.
bench_build sftpbench holder sessinfo

# The user whose sessions these are: a system user, made for the run when
# missing and then removed at the end.
if ! id -u "$user" > /dev/null 2>&1; then
	useradd --system -M -d /nonexistent -s /usr/sbin/nologin "$user" ||
	    bench_die "cannot create user $user"
	bench_userdel=$user
fi
uid=$(id -u "$user")
gid=$(id -g "$user")
[ "$uid" != 0 ] || bench_bad "$user is root, which the quota exempts"
user_cmd=(setpriv --reuid "$uid" --regid "$gid" --clear-groups)
as_user() {
	"${user_cmd[@]}" "$@"
}
last=$(bench_last_cpu)
pin_cmd=()
[ "$pin" = same ] && pin_cmd=(taskset -c "$last")

max_n=0
for n in $sessions; do
	[ "$n" -gt "$max_n" ] && max_n=$n
done
[ "$idle_n" -gt "$max_n" ] && max_n=$idle_n
if [ "$(ulimit -n)" -lt $((2 * max_n + 256)) ]; then
	ulimit -n $((2 * max_n + 256)) ||
	    bench_die "cannot raise ulimit -n"
fi

# Work area: binaries on the disk (copied, then synced: dirty page-cache
# pages of a fresh binary would show as the servers' Private_Dirty), data on
# a private tmpfs owned by the user.
work=$(mktemp -d "${TMPDIR:-/tmp}/scale.XXXXXX") || exit 1
bench_remove "$work"
chmod 0755 "$work"
fs=$work/fs
mkdir -p "$work/bin" "$fs"
hold_pid=
hold_exit=
hog_pid=
burst_pid=
mix_pids=()

# stop_holder: ends the held sessions (their stdin closes; they exit) and
# waits for the holder, which reaps them. If it does not say so, it is killed
# by PID, and so is every server it started that still runs as the user.
stop_holder() {
	local line p fd
	[ -n "$hold_pid" ] || return 0
	hold_exit=
	fd=${HOLD[1]:-}
	if [ -n "$fd" ]; then
		{ echo quit >&"$fd"; } 2>/dev/null
		exec {fd}>&-
	fi
	if [ -n "${HOLD[0]:-}" ] &&
	    read -r -t 120 -u "${HOLD[0]}" line 2>/dev/null; then
		hold_exit=${line#exited }
	fi
	bench_reap "$hold_pid" 50
	if [ -z "$hold_exit" ] && [ -s "$fs/held/pids" ]; then
		while read -r p; do
			# Still a process of the user (the servers are
			# undumpable: /proc/PID is root's, so not stat).
			[ "$(awk '/^Uid:/ { print $2; exit }' "/proc/$p/status" 2>/dev/null)" = "$uid" ] &&
			    kill "$p" 2>/dev/null
		done < "$fs/held/pids"
	fi
	rm -f "$fs/held/pids"
	hold_pid=
}

# At exit, before the unmounts: the held sessions, the mix's clients, the
# hog and the burst.
# shellcheck disable=SC2317 # run by the trap
bench_on_exit() {
	local p
	stop_holder
	for p in "${mix_pids[@]}" $hog_pid $burst_pid; do
		kill "$p" 2>/dev/null
	done
	wait 2>/dev/null
}

bench_tmpfs "$fs" $((2 * size_b + 16 * mix_b + (1 << 30))) 0700 \
    "uid=$uid,gid=$gid" || bench_die "cannot mount a tmpfs: $bench_why"
for p in sftpbench holder sessinfo; do
	cp "$bench_here/$p" "$work/bin/$p"
done
cp "$ours" "$work/bin/ours"
cp "$ref" "$work/bin/ref"
chmod 0755 "$work/bin" "$work/bin/"*
sync
as_user mkdir "$fs/new" "$fs/held" "$fs/burst" "$fs/mix"

res=${out:-$work/results}
: > "$res" || exit 1

failures=0
start_s=$SECONDS
echo "scale.sh: parts $parts; sessions $sessions; $size per transfer, $rounds rounds; pause $pause s; pinned: $pin"
echo "ours: $ours ($(bench_ident "$ours" "$work/bin/ours"))"
echo "ref:  $ref ($(bench_ident "$ref" "$work/bin/ref"))"
echo "user: $user (uid $uid); pipe-user-pages-soft $(cat /proc/sys/fs/pipe-user-pages-soft), pipe-user-pages-hard $(cat /proc/sys/fs/pipe-user-pages-hard), pipe-max-size $(cat /proc/sys/fs/pipe-max-size)"
echo "user's pipes before: $("$work/bin/sessinfo" -u "$uid")"
echo "host: $(bench_host); load average $(cut -d ' ' -f 1-3 /proc/loadavg)"
bench_load_warning

# hold_start SERVER N: N sessions of SERVER (ours or ref) held by the
# holder, running as the user; sets hold_ready to its "ready" line.
hold_start() {
	local srv=$1 n=$2
	coproc HOLD { exec setpriv --reuid "$uid" --regid "$gid" --clear-groups \
	    "$work/bin/holder" hold -n "$n" -P "$fs/held/pids" -d "$fs/held" \
	    -- "$work/bin/$srv" 2>> "$work/holder.err"; }
	# shellcheck disable=SC2153 # set by coproc
	hold_pid=$HOLD_PID
	if ! read -r -t $((60 + n / 10)) -u "${HOLD[0]}" hold_ready ||
	    [ "${hold_ready%% *}" != ready ]; then
		echo "scale.sh: holder failed to start $n sessions of $srv:" >&2
		cat "$work/holder.err" >&2
		exit 1
	fi
}

# hold_cmd COMMAND: one command to the holder; prints its answer.
hold_cmd() {
	local line
	echo "$1" >&"${HOLD[1]}"
	if ! read -r -t 600 -u "${HOLD[0]}" line; then
		echo "scale.sh: holder did not answer $1:" >&2
		cat "$work/holder.err" >&2
		exit 1
	fi
	echo "$line"
}

# snapshot: the held sessions as the holder and as root see them.
snapshot() {
	local st si
	st=$(hold_cmd stat)
	si=$("$work/bin/sessinfo" -f "$fs/held/pids")
	echo "${st#stat } ${si//pages_/root_pages_} user_$("$work/bin/sessinfo" -u "$uid" | sed 's/ / user_/g')"
}

# bench_run TAG SERVER ARGS...: one sftpbench run as the user; its line,
# prefixed by TAG, goes to $res.
bench_run() {
	local tag=$1 srv=$2 line rc
	shift 2
	line=$(as_user "${pin_cmd[@]}" "$work/bin/sftpbench" "$@" -L "$srv" \
	    -- "$work/bin/$srv" 2> "$work/bench.err")
	rc=$?
	if [ $rc != 0 ] || [ -z "$line" ]; then
		echo "FAILED $tag: $(tr '\n' ' ' < "$work/bench.err")" >&2
		echo "$tag failed=1" >> "$res"
		failures=$((failures + 1))
		return 1
	fi
	echo "$tag $line" >> "$res"
}

# Rounds swap the servers' order every other round, and reverse the N of
# --sessions, so that a drift in the machine's speed over a round does not
# always fall on the same server or on the largest N (bench_alternate).

part_idle() {
	local srv snap
	echo "== idle: $idle_n sessions per server: after INIT, then after $idle_xfer up and down each and $idle_wait s idle, then again with $idle_wait s of a STAT a second" >&2
	for srv in ours ref; do
		hold_start $srv $idle_n
		sleep $settle
		snap=$(snapshot)
		echo "idle server=$srv state=init $snap" >> "$res"
		hold_cmd "xfer $idle_xfer" > /dev/null
		sleep "$idle_wait"
		snap=$(snapshot)
		echo "idle server=$srv state=xfer $snap" >> "$res"
		hold_cmd "xfer $idle_xfer" > /dev/null
		hold_cmd "trickle $idle_wait" > /dev/null
		snap=$(snapshot)
		echo "idle server=$srv state=trickle $snap" >> "$res"
		stop_holder
	done
}

part_sessions() {
	local r n srv wl snap probe t0
	echo "== sessions: N = $sessions held, a new session runs $workloads, $rounds rounds" >&2
	for r in $(seq 1 "$rounds"); do
		# shellcheck disable=SC2086 # the list is words
		for n in $(bench_alternate "$r" $sessions); do
			for srv in $(bench_alternate "$r" ours ref); do
				echo "   round $r, $n sessions of $srv" >&2
				t0=$SECONDS
				hold_start "$srv" "$n"
				sleep $settle
				snap=$(snapshot)
				probe=$(hold_cmd probe)
				probe=${probe/new=/probe_new=}
				probe=${probe/grown=/probe_grown=}
				echo "held server=$srv n=$n round=$r ${hold_ready#ready } $snap ${probe#probe }" >> "$res"
				for wl in $workloads; do
					# shellcheck disable=SC2046
					bench_run "sess server=$srv n=$n round=$r wl=$wl" \
					    "$srv" -d "$fs/new" -b "$size_b" $(bench_transfer_args "$wl")
				done
				stop_holder
				echo "held-exit server=$srv n=$n round=$r ${hold_exit:-} seconds=$((SECONDS - t0))" >> "$res"
			done
		done
	done
}

part_burst() {
	local wl srv i=0 line
	echo "== burst: $burst_size after $pause s idle, against $burst_size right after, $burst_rounds rounds" >&2
	for wl in $workloads; do
		i=$((i + 1))
		for srv in $(bench_alternate "$i" ours ref); do
			# In the background, so that a signal's trap need not wait
			# for the pauses; not through as_user, so that $! is the
			# holder itself (setpriv and taskset exec it).
			# shellcheck disable=SC2046
			"${user_cmd[@]}" "${pin_cmd[@]}" "$work/bin/holder" burst \
			    $(bench_transfer_args "$wl") -b "$burst_size" -s "$pause" \
			    -r "$burst_rounds" -d "$fs/burst" -- "$work/bin/$srv" \
			    > "$work/burst.out" 2> "$work/burst.err" &
			burst_pid=$!
			if ! wait $burst_pid; then
				echo "FAILED burst $srv $wl: $(tr '\n' ' ' < "$work/burst.err")" >&2
				failures=$((failures + 1))
			fi
			burst_pid=
			while read -r line; do
				echo "burst server=$srv wl=$wl ${line#burst }" >> "$res"
			done < "$work/burst.out"
		done
	done
}

part_mix() {
	local r srv i t0 t1 f p rc busy idle st0 st1
	echo "== mix: 8 uploads and 8 downloads at once, $mix_size each, ${mix_req}-byte requests, $rounds rounds, not pinned$([ $hog = 1 ] && echo ", one CPU hog beside")" >&2
	for i in 1 2 3 4 5 6 7 8; do
		as_user mkdir -p "$fs/mix/u$i" "$fs/mix/d$i"
	done
	# The download fixture, made once by sftpbench and copied.
	bench_run "mixprep" ref -d "$fs/mix/d1" -w download -b "$mix_b" > /dev/null
	for i in 2 3 4 5 6 7 8; do
		as_user cp "$fs/mix/d1/download-$mix_b.dat" "$fs/mix/d$i/"
	done
	for r in $(seq 1 "$rounds"); do
		for srv in $(bench_alternate "$r" ours ref); do
			# sftpbench -p 0: the memory is touched here, before.
			as_user "$work/bin/holder" touch $((8 * mix_b + (512 << 20)))
			# Started directly (not through as_user): $! is each
			# sftpbench, which the trap can end.
			mix_pids=()
			if [ $hog = 1 ]; then
				taskset -c "$last" bash -c 'while :; do :; done' &
				hog_pid=$!
			fi
			read -r -a st0 < /proc/stat
			t0=$(date +%s.%N)
			for i in 1 2 3 4 5 6 7 8; do
				"${user_cmd[@]}" "$work/bin/sftpbench" -p 0 -t 300 \
				    -d "$fs/mix/u$i" -w upload -l $mix_req \
				    -b "$mix_b" -L "$srv" -- "$work/bin/$srv" \
				    > "$work/mix.u$i" 2>&1 &
				mix_pids+=($!)
				"${user_cmd[@]}" "$work/bin/sftpbench" -p 0 -t 300 \
				    -d "$fs/mix/d$i" -w download -l $mix_req \
				    -b "$mix_b" -L "$srv" -- "$work/bin/$srv" \
				    > "$work/mix.d$i" 2>&1 &
				mix_pids+=($!)
			done
			rc=0
			for p in "${mix_pids[@]}"; do
				wait "$p" || rc=1
			done
			t1=$(date +%s.%N)
			read -r -a st1 < /proc/stat
			mix_pids=()
			if [ -n "$hog_pid" ]; then
				kill "$hog_pid"
				wait "$hog_pid" 2>/dev/null
				hog_pid=
			fi
			for f in "$work"/mix.[ud]*; do
				if ! grep -q '^workload=' "$f"; then
					echo "FAILED mix $srv ${f##*.}: $(tr '\n' ' ' < "$f")" >&2
					rc=1
					continue
				fi
				echo "mix server=$srv round=$r slot=${f##*.} $(grep '^workload=' "$f")" >> "$res"
			done
			[ $rc = 0 ] || failures=$((failures + 1))
			# The machine's busy and idle CPU time over the span, in
			# clock ticks (/proc/stat: user nice system idle iowait
			# irq softirq steal).
			busy=$(( st1[1] + st1[2] + st1[3] + st1[6] + st1[7] + st1[8] - st0[1] - st0[2] - st0[3] - st0[6] - st0[7] - st0[8] ))
			idle=$(( st1[4] + st1[5] - st0[4] - st0[5] ))
			echo "mixspan server=$srv round=$r span=$(echo "$t1 - $t0" | bc) busy_ticks=$busy idle_ticks=$idle hz=$(getconf CLK_TCK) failed=$rc" >> "$res"
		done
	done
}

for part in ${parts//,/ }; do
	case $part in
	idle) part_idle ;;
	sessions) part_sessions ;;
	burst) part_burst ;;
	mix) part_mix ;;
	*) bench_bad "unknown part $part" ;;
	esac
done

summarize "$res"

echo
echo "load average at the end: $(cut -d ' ' -f 1-3 /proc/loadavg); $((SECONDS - start_s)) s"
[ $failures = 0 ] || { echo "scale.sh: $failures failed runs" >&2; exit 1; }
exit 0
