#!/usr/bin/env bash
#
# scale-sshd.sh: many idle SFTP sessions of one user through a real sshd, and
# a new session of that user next to them. The system's /usr/sbin/sshd runs
# on 127.0.0.1 with its own keys and configuration (tests/lib/sshd-lib.sh), its
# "Subsystem sftp" the server under test. sshd's session process, running as
# the user, makes each session's pipes, so they count against that user's
# pipe quota (pipe-user-pages-soft), as on a real host.
#
# For each server and each N of --sessions:
#   hold      N idle sessions over N/10 connections: one ControlMaster "ssh
#             -N" each, and holder (as root: client-side pipes are not the
#             user's) starting 10 "ssh -S MUX -s ... sftp" on it, INIT done
#   measure   after 3 s idle: the servers' stdin+stdout pipe pages and
#             stderr pipe pages (F_GETPIPE_SZ through pidfd_getfd), their
#             Private_Dirty, and all the pipe pages of the user's processes
#   probe     a new session (ssh ... python3) prints the sizes of the pipes
#             sshd gave it and whether stdin grows to 1 MiB
#   transfer  a new connection: sftp "put" then "get" of --size, with the
#             new server's pipes read during the put
# Rounds repeat all of it (medians, and ratios to the first N paired by round).
#
# usage: scale-sshd.sh [--ours PATH] [--ref PATH] [--servers LIST]
#                      [--user NAME] [--sessions LIST] [--size SIZE]
#                      [--rounds N] [--per-conn N] [--out FILE]
#        scale-sshd.sh --report FILE
#
# Needs root, /usr/sbin/sshd, ssh, sftp, ssh-keygen, python3. Never reads or
# changes /etc/ssh. The user (default sftpscale, as scale.sh) gets /bin/sh and
# a home on a private tmpfs, so that sshd lets it in.

set -u
BENCH_PROG=scale-sshd.sh
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

servers="ours ref"
user=sftpscale
sessions=0,200
size=512M
rounds=3
per_conn=10
settle=3
cipher=aes128-gcm@openssh.com
out=
report=

while [ $# -gt 0 ]; do
	case $1 in
	--ours) ours=$2; shift ;;
	--ref) ref=$2; shift ;;
	--servers) servers=${2//,/ }; shift ;;
	--user) user=$2; shift ;;
	--sessions) sessions=$2; shift ;;
	--size) size=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--per-conn) per_conn=$2; shift ;;
	--out) out=$2; shift ;;
	--report) report=$2; shift ;;
	-h|--help) bench_usage ;;
	*) bench_unknown "$1" ;;
	esac
	shift || bench_usage
done
bench_count --rounds "$rounds"
bench_count --per-conn "$per_conn"
case ,$sessions, in *[!0-9,]*|,,) bench_bad "bad --sessions" ;; esac
sessions=${sessions//,/ }
size_b=$(bench_to_bytes "$size") || exit 2

# summarize FILE: the tables, from the result lines in FILE.
summarize() {
	awk -v sessions="$sessions" -v servers="$servers" "$bench_awk"'
{
	kv_parse(2)
	s = kv["server"]; n = kv["n"]
}
$1 == "held" {
	H[s, n] = sprintf("| %s | %s | %s | %s | %s / %s | %s | %s (%s) | %s | %s %s %s / %s |", s, n, kv["start_s"],
	    kv["alive"], kv["pages_median"], kv["pages_max"], kv["err_pages_median"],
	    kv["user_pages"], kv["user_pipes"], kv["pd_kb_median"],
	    kv["fd0"], kv["fd1"], kv["fd2"], kv["grown"])
}
$1 == "xfer" && !kv["failed"] {
	k = ++cnt[s, n, kv["op"]]
	rate[s, n, kv["op"], k] = kv["bytes"] / 1048576 / kv["wall"]
	R[s, n, kv["op"], kv["round"]] = rate[s, n, kv["op"], k]
	if (kv["round"] > nr)
		nr = kv["round"]
	fd0[s, n, kv["op"]] = kv["fd0"]
	fd1[s, n, kv["op"]] = kv["fd1"]
}
END {
	ns = split(sessions, N, " ")
	nv = split(servers, S, " ")
	print ""
	print "### Idle sessions through sshd, after 3 s idle"
	print ""
	print "| server | N | start s | servers found | stdin+stdout pages per session, median / max | stderr pages | user'\''s pipe pages (pipes) | Private_Dirty KiB | new session: fd0 fd1 fd2 bytes / stdin grown to |"
	print "|---|---|---|---|---|---|---|---|---|"
	for (i = 1; i <= nv; i++)
		for (j = 1; j <= ns; j++)
			if ((S[i], N[j]) in H)
				print H[S[i], N[j]]
	print ""
	print "### A new session next to them: sftp put and get (medians; wall includes login; ratios paired by round)"
	print ""
	print "| server | N | put MiB/s | put / N=" N[1] " | its stdin, stdout during the put | get MiB/s | get / N=" N[1] " |"
	print "|---|---|---|---|---|---|---|"
	for (i = 1; i <= nv; i++) {
		s = S[i]
		for (o = 1; o <= 2; o++) {
			op = o == 1 ? "put" : "get"
			for (j = 1; j <= ns; j++) {
				delete a
				for (k = 1; k <= cnt[s, N[j], op]; k++)
					a[k] = rate[s, N[j], op, k]
				m[s, N[j], op] = median(a, cnt[s, N[j], op])
			}
		}
		for (j = 1; j <= ns; j++) {
			n = N[j]
			for (o = 1; o <= 2; o++) {
				op = o == 1 ? "put" : "get"
				delete a
				q = 0
				for (r = 1; r <= nr; r++)
					if (((s, n, op, r) in R) && ((s, N[1], op, r) in R))
						a[++q] = R[s, n, op, r] / R[s, N[1], op, r]
				pr[op] = q > 0 ? sprintf("%.2f", median(a, q)) : "-"
			}
			printf "| %s | %s | %s | %s | %s, %s | %s | %s |\n", s, n,
			    (m[s, n, "put"] == "" ? "FAILED" : sprintf("%.1f", m[s, n, "put"])),
			    pr["put"], fd0[s, n, "put"], fd1[s, n, "put"],
			    (m[s, n, "get"] == "" ? "FAILED" : sprintf("%.1f", m[s, n, "get"])),
			    pr["get"]
		}
	}
}' "$1"
}

if [ -n "$report" ]; then
	sessions=$(awk '$1 == "held" { for (i = 2; i <= NF; i++) if ($i ~ /^n=/ && !seen[$i]++) printf "%s ", substr($i, 3) }' "$report")
	servers=$(awk '$1 == "held" { for (i = 2; i <= NF; i++) if ($i ~ /^server=/ && !seen[$i]++) printf "%s ", substr($i, 8) }' "$report")
	summarize "$report"
	exit 0
fi

[ "$(id -u)" = 0 ] || bench_bad "must run as root"
# shellcheck disable=SC2034 # read by sshd-lib.sh
SSHD_USERS=$user
# shellcheck source=tests/lib/sshd-lib.sh
. "$bench_top/tests/lib/sshd-lib.sh"
why=$(sshd_missing)
[ -z "$why" ] && ! command -v sftp > /dev/null && why="no sftp"
[ -z "$why" ] || bench_bad "$why"
for s in $servers; do
	case $s in
	ours) [ -x "$ours" ] || bench_bad "no $ours" ;;
	ref) [ -x "$ref" ] || bench_bad "no $ref" ;;
	*) bench_bad "unknown server $s" ;;
	esac
done

work=$(mktemp -d "${TMPDIR:-/tmp}/scale-sshd.XXXXXX") || exit 1
bench_remove "$work"
chmod 0755 "$work"
fs=$work/home
mkdir -p "$work/bin" "$fs"
holder_pids=()
holder_fds=()
master_pids=()

# release: ends the held sessions (each holder's input closes: it closes its
# sessions and reaps its ssh clients), then the master connections; kills
# by PID what lingers.
release() {
	local fd p
	for fd in "${holder_fds[@]}"; do
		exec {fd}>&-
	done
	holder_fds=()
	for p in "${holder_pids[@]}"; do
		bench_reap "$p" 100
	done
	holder_pids=()
	for p in "${master_pids[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	master_pids=()
}

# At exit, before the unmount: the sessions, their connections and sshd.
# shellcheck disable=SC2317 # run by the trap
bench_on_exit() {
	release
	sshd_stop
}

# The holder and sessinfo, when missing or older than their sources, copied
# to the work area.
bench_build holder sessinfo
for prog in holder sessinfo; do
	cp "$bench_here/$prog" "$work/bin/$prog"
done
[ -x "$ours" ] && cp "$ours" "$work/bin/ours"
[ -x "$ref" ] && cp "$ref" "$work/bin/ref"
chmod 0755 "$work/bin" "$work/bin/"*
sync

sshd_init "$work/sshd" || bench_die "sshd_init failed"
# The user (made for the run when missing, and then removed at the end);
# its home a tmpfs of its own, for the uploads and the idle sessions.
id -u "$user" > /dev/null 2>&1 || bench_userdel=$user
sshd_test_user "$user" "$fs" || bench_die "cannot set up user $user"
uid=$(id -u "$user")
gid=$(id -g "$user")
bench_tmpfs "$fs" $((3 * size_b + (256 << 20))) 0700 "uid=$uid,gid=$gid" ||
    bench_die "cannot mount a tmpfs: $bench_why"
sshd_authorize "$user"
# The client's side of the transfers, on the same tmpfs, closed to the user.
mkdir -m 0700 "$fs/local"
head -c "$size_b" /dev/urandom > "$fs/src.dat"
chown "$uid:$gid" "$fs/src.dat"

res=${out:-$work/results}
: > "$res" || exit 1
start_s=$SECONDS
echo "scale-sshd.sh: servers $servers; sessions $sessions ($per_conn per connection); sftp put and get of $size, $rounds rounds, $cipher"
for s in $servers; do
	case $s in
	ours) echo "ours: $ours ($(bench_ident "$ours" "$work/bin/ours"))" ;;
	ref) echo "ref:  $ref ($(bench_ident "$ref" "$work/bin/ref"))" ;;
	esac
done
echo "user: $user (uid $uid); pipe-user-pages-soft $(cat /proc/sys/fs/pipe-user-pages-soft); load average $(cut -d ' ' -f 1-3 /proc/loadavg)"

# server_pids SERVER: the PIDs of the user's processes running that binary
# (its copy in the work area is named after it).
server_pids() {
	pgrep -U "$uid" -x "$1"
}

# hold SERVER N: N idle sessions, per_conn on each master connection.
hold() {
	local srv=$1 n=$2 k=0 left=$2 m fd line i
	while [ "$left" -gt 0 ]; do
		k=$((k + 1))
		m=$per_conn
		[ "$left" -lt "$m" ] && m=$left
		left=$((left - m))
		ssh "${SSH_OPTS[@]}" -o ControlMaster=yes -o "ControlPath=$work/mux.$k" \
		    -o ControlPersist=no -N "$user@127.0.0.1" < /dev/null 2>> "$work/ssh.err" &
		master_pids+=($!)
		for i in $(seq 1 200); do
			ssh -F /dev/null -o "ControlPath=$work/mux.$k" -O check x 2>/dev/null && break
			sleep 0.05
		done
		rm -f "$work/ctl.$k"
		mkfifo "$work/ctl.$k"
		"$work/bin/holder" hold -n "$m" -- ssh "${SSH_OPTS[@]}" \
		    -o "ControlPath=$work/mux.$k" -s "$user@127.0.0.1" sftp \
		    < "$work/ctl.$k" > "$work/hold.$k" 2>> "$work/holder.err" &
		holder_pids+=($!)
		exec {fd}> "$work/ctl.$k"
		holder_fds+=("$fd")
	done
	# All started; wait for every holder to report its sessions ready.
	for i in $(seq 1 $k); do
		line=
		for _ in $(seq 1 1200); do
			line=$(head -n 1 "$work/hold.$i" 2>/dev/null)
			[ -n "$line" ] && break
			sleep 0.05
		done
		case $line in
		ready*) ;;
		*)
			echo "scale-sshd.sh: connection $i of $srv: no sessions: $(tail -3 "$work/holder.err" "$work/ssh.err" 2>/dev/null | tr '\n' ' ')" >&2
			return 1 ;;
		esac
	done
}

probe_py='import fcntl
r = []
for fd in (0, 1, 2):
    try:
        r.append("fd%d=%d" % (fd, fcntl.fcntl(fd, 1032)))
    except OSError:
        r.append("fd%d=-1" % fd)
try:
    fcntl.fcntl(0, 1031, 1 << 20)
    r.append("grown=%d" % fcntl.fcntl(0, 1032))
except OSError as e:
    r.append("grown=EPERM" if e.errno == 1 else "grown=errno%d" % e.errno)
print(" ".join(r))'

# transfer SERVER N ROUND: sftp put, then get, each on a new connection.
transfer() {
	local srv=$1 n=$2 r=$3 op t0 t1 pid new held sample
	held=" $(tr '\n' ' ' < "$work/held.pids" 2>/dev/null) "
	for op in put get; do
		rm -f "$fs/local/got.dat"
		if [ $op = put ]; then
			echo "put $fs/src.dat up.dat" > "$work/batch"
		else
			echo "get src.dat $fs/local/got.dat" > "$work/batch"
		fi
		t0=$(date +%s.%N)
		sftp "${SSH_OPTS[@]}" -c "$cipher" -b "$work/batch" "$user@127.0.0.1" \
		    > "$work/sftp.out" 2>&1 &
		pid=$!
		sample=
		# The new server's pipes, once the transfer has run a while.
		for _ in $(seq 1 100); do
			new=
			for p in $(server_pids "$srv"); do
				case $held in *" $p "*) ;; *) new=$p ;; esac
			done
			if [ -n "$new" ]; then
				sleep 0.3
				sample=$("$work/bin/sessinfo" "$new" 2>/dev/null)
				break
			fi
			kill -0 $pid 2>/dev/null || break
			sleep 0.02
		done
		if ! wait $pid; then
			echo "FAILED sftp $op ($srv, N=$n): $(tr '\n' ' ' < "$work/sftp.out")" >&2
			echo "xfer server=$srv n=$n round=$r op=$op failed=1" >> "$res"
			continue
		fi
		t1=$(date +%s.%N)
		echo "xfer server=$srv n=$n round=$r op=$op bytes=$size_b wall=$(echo "$t1 - $t0" | bc) ${sample:-fd0=- fd1=-}" >> "$res"
	done
	rm -f "$fs/up.dat" "$fs/local/got.dat"
}

# Rounds interleave: each round runs every N and every server, the servers'
# order and the N's reversed every other round, so that a drift of the
# machine's speed does not always fall on the same ones.
for r in $(seq 1 "$rounds"); do
	# shellcheck disable=SC2086 # the lists are words
	for srv in $(bench_alternate "$r" $servers); do
		sshd_start "$srv" <<EOF || bench_die "$SSHD_ERROR"
Subsystem sftp $work/bin/$srv
Ciphers $cipher
EOF
		# shellcheck disable=SC2086
		for n in $(bench_alternate "$r" $sessions); do
			echo "== round $r, $srv: $n idle sessions" >&2
			t0=$SECONDS
			hold "$srv" "$n" || exit 1
			hold_s=$((SECONDS - t0))
			sleep $settle
			server_pids "$srv" > "$work/held.pids"
			si=$("$work/bin/sessinfo" -f "$work/held.pids")
			usr=$("$work/bin/sessinfo" -u "$uid")
			probe=$(ssh "${SSH_OPTS[@]}" "$user@127.0.0.1" /usr/bin/python3 -c "'$probe_py'" < /dev/null 2>&1 | tail -n 1)
			echo "held server=$srv n=$n round=$r start_s=$hold_s $si user_${usr// / user_} probe $probe" >> "$res"
			transfer "$srv" "$n" "$r"
			release
		done
	done
done
sshd_stop

summarize "$res"
echo
echo "load average at the end: $(cut -d ' ' -f 1-3 /proc/loadavg); $((SECONDS - start_s)) s"
