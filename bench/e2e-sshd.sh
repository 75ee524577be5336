#!/usr/bin/env bash
#
# e2e-sshd.sh: our sftp-server and the reference OpenSSH sftp-server end to
# end, behind a real sshd: the system's /usr/sbin/sshd on 127.0.0.1 with its
# own configuration and keys (tests/lib/sshd-lib.sh), and the OpenSSH sftp client
# doing "put" and "get" of one file, on a private tmpfs. Rounds interleave the
# two servers (the order alternates from one round to the next).
#
# usage: e2e-sshd.sh [--ours PATH] [--ref PATH] [--size SIZE] [--rounds N]
#                    [--cipher NAME] [--buffer BYTES] [--requests N]
#                    [--out FILE] [--strace-sshd]
#        e2e-sshd.sh --report FILE
#
# --cipher    default aes128-gcm@openssh.com (AES-NI; no separate MAC)
# --buffer    sftp -B (default: sftp's own choice)
# --requests  sftp -R (default: sftp's own, 64)
# --out       keep the raw lines there
# --report    print the tables again from lines kept by --out, run nothing
# --strace-sshd  then one more put and get per server, not measured, with
#             strace -f attached to the listening sshd: the system calls of
#             the sshd processes of the session, and their read and write
#             sizes on their busiest descriptors
#
# Per transfer it measures:
#   server CPU  the sftp-server's user+sys seconds, from the "time" of the
#               bash that the Subsystem command is
#   sshd CPU    the CPU of the sshd processes of the session: the growth of
#               cutime+cstime of the listening sshd (it reaps the session's
#               monitor, which reaps the rest) once the session is gone,
#               less the server's CPU
#   client CPU  sftp and the ssh it runs (/usr/bin/time around sftp)
#   wall        the whole sftp command: connection, login and the transfer
# An empty session (connect, log in, "pwd") per server and round gives the
# fixed part of these: the per-GiB figures are net of its median.
#
# Needs /usr/sbin/sshd, ssh, sftp, ssh-keygen, bash, /usr/bin/time, python3
# (a free port). As root it mounts a tmpfs on a temporary directory. Never reads
# or changes /etc/ssh.

set -u
BENCH_PROG=e2e-sshd.sh
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

size=1G
rounds=3
cipher=aes128-gcm@openssh.com
buffer=
requests=
out=
report=
strace_sshd=0

while [ $# -gt 0 ]; do
	case $1 in
	--ours) ours=$2; shift ;;
	--ref) ref=$2; shift ;;
	--size) size=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--cipher) cipher=$2; shift ;;
	--buffer) buffer=$2; shift ;;
	--requests) requests=$2; shift ;;
	--out) out=$2; shift ;;
	--report) report=$2; shift ;;
	--strace-sshd) strace_sshd=1 ;;
	-h|--help) bench_usage ;;
	*) bench_unknown "$1" ;;
	esac
	shift || bench_usage
done
bench_count --rounds "$rounds"
bytes=$(bench_to_bytes "$size") || exit 2

# The tables: medians over the rounds, per-round paired ratios ours/ref.
summarize() {
	awk "$bench_awk"'
function med(op, s, f,    r, n, a) {
	n = 0
	for (r = 1; r <= rounds; r++)
		if ((op, s, r, f) in v)
			a[++n] = v[op, s, r, f]
	return median(a, n)
}
function ratio(op, f,    r, n, a) {
	n = 0
	for (r = 1; r <= rounds; r++)
		if ((op, "ours", r, f) in v && (op, "ref", r, f) in v && v[op, "ref", r, f] > 0)
			a[++n] = v[op, "ours", r, f] / v[op, "ref", r, f]
	return n ? sprintf("%.2f", median(a, n)) : "-"
}
function ratios(op, f,    r, s) {
	s = ""
	for (r = 1; r <= rounds; r++)
		if ((op, "ours", r, f) in v && (op, "ref", r, f) in v && v[op, "ref", r, f] > 0)
			s = s sprintf(" %.2f", v[op, "ours", r, f] / v[op, "ref", r, f])
	return s
}
{
	kv_parse(1)
	op = kv["op"]; s = kv["server"]; r = kv["round"]
	gib = kv["bytes"] / 1073741824
	if (r + 0 > rounds)
		rounds = r + 0
	raw[op, s, r, "server"] = kv["server_cpu"]
	raw[op, s, r, "sshd"] = kv["sshd_cpu"]
	raw[op, s, r, "client"] = kv["client_cpu"]
	raw[op, s, r, "wall"] = kv["wall"]
}
# v: the empty session as measured; a transfer per GiB, less the median of
# all empty sessions (both servers, every round: connection and login).
function derive(    op, s, r, k, o, f, nf, fs, e, a, n, ops) {
	nf = split("server sshd client wall", fs, " ")
	split("put get", ops, " ")
	for (f = 1; f <= nf; f++) {
		n = 0
		delete a
		for (r = 1; r <= rounds; r++)
			for (k = 1; k <= 2; k++) {
				s = k == 1 ? "ours" : "ref"
				if (("empty", s, r, fs[f]) in raw) {
					a[++n] = raw["empty", s, r, fs[f]]
					v["empty", s, r, fs[f]] = a[n]
				}
			}
		e = n ? median(a, n) : 0
		for (r = 1; r <= rounds; r++)
			for (k = 1; k <= 2; k++) {
				s = k == 1 ? "ours" : "ref"
				for (o = 1; o <= 2; o++) {
					op = ops[o]
					if ((op, s, r, fs[f]) in raw)
						v[op, s, r, fs[f]] = (raw[op, s, r, fs[f]] - e) / (fs[f] == "wall" ? 1 : gib)
				}
			}
	}
	for (r = 1; r <= rounds; r++)
		for (k = 1; k <= 2; k++) {
			s = k == 1 ? "ours" : "ref"
			for (o = 1; o <= 2; o++)
				if ((ops[o], s, r, "wall") in v && v[ops[o], s, r, "wall"] > 0)
					v[ops[o], s, r, "rate"] = gib * 1024 / v[ops[o], s, r, "wall"]
		}
}
END {
	derive()
	printf "\nempty session (connect, log in, pwd): medians, seconds\n\n"
	printf "| server | server CPU s | sshd CPU s | client CPU s | wall s |\n|---|---|---|---|---|\n"
	for (k = 1; k <= 2; k++) {
		s = k == 1 ? "ours" : "ref"
		printf "| %s | %.2f | %.2f | %.2f | %.2f |\n", s, med("empty", s, "server"),
		    med("empty", s, "sshd"), med("empty", s, "client"), med("empty", s, "wall")
	}
	printf "\nper GiB moved, less the median empty session;\n"
	printf "medians of %d rounds; ratio = median of the per-round ratios ours/ref\n\n", rounds
	printf "| op | server CPU s/GiB ours | ref | ours/ref | sshd CPU s/GiB ours | ref | ours/ref | client CPU s/GiB ours | ref | wall MiB/s ours | ref | ours/ref |\n"
	printf "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
	for (k = 1; k <= 2; k++) {
		op = k == 1 ? "put" : "get"
		printf "| %s | %.2f | %.2f | %s | %.2f | %.2f | %s | %.2f | %.2f | %.0f | %.0f | %s |\n", op,
		    med(op, "ours", "server"), med(op, "ref", "server"), ratio(op, "server"),
		    med(op, "ours", "sshd"), med(op, "ref", "sshd"), ratio(op, "sshd"),
		    med(op, "ours", "client"), med(op, "ref", "client"),
		    med(op, "ours", "rate"), med(op, "ref", "rate"), ratio(op, "rate")
	}
	printf "\nper-round ratios ours/ref\n"
	for (k = 1; k <= 2; k++) {
		op = k == 1 ? "put" : "get"
		printf "  %s server CPU:%s   sshd CPU:%s   rate:%s\n", op,
		    ratios(op, "server"), ratios(op, "sshd"), ratios(op, "rate")
	}
}' "$1"
}

if [ -n "$report" ]; then
	summarize "$report"
	exit
fi

# shellcheck source=tests/lib/sshd-lib.sh
. "$bench_top/tests/lib/sshd-lib.sh"

why=$(sshd_missing)
[ -z "$why" ] || bench_die "cannot run: $why"
tools="sftp /usr/bin/time"
[ $strace_sshd = 1 ] && tools="$tools strace"
for c in $tools; do
	command -v "$c" > /dev/null || bench_die "$c not found"
done
if [ ! -x "$ours" ] || [ ! -x "$ref" ]; then
	bench_die "need both servers: $ours, $ref"
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/sftpe2e.XXXXXX") || exit 1
bench_remove "$T"
chmod 0755 "$T"
# shellcheck disable=SC2317 # run by the trap
bench_on_exit() {
	sshd_stop
}
mkdir -m 0755 "$T/fs" "$T/bin" || exit 1
fs="a temporary directory"
if bench_tmpfs "$T/fs" $((3 * bytes + (256 << 20))) 0755; then
	fs="a private tmpfs"
elif [ "$(id -u)" = 0 ]; then
	echo "e2e-sshd.sh: $bench_why" >&2
fi
F=$T/fs
mkdir -m 0777 "$F/local" "$F/remote" || exit 1

# Copies (the build may replace ours meanwhile), and the Subsystem command:
# a bash that runs the server named in $T/which under its "time" keyword
# (getrusage of the child: millisecond figures, where /usr/bin/time prints
# hundredths), appends "user sys real" to $T/cpu.NAME, and notes what the
# server's stdin is.
cp "$ours" "$T/bin/sftp-server-ours" && cp "$ref" "$T/bin/sftp-server-ref" || exit 1
chmod 0755 "$T/bin"/*
cat > "$T/bin/subsystem" <<EOF
#!/bin/bash
who=\$(cat "$T/which")
readlink /proc/\$\$/fd/0 > "$T/stdin.\$who"
TIMEFORMAT="%3U %3S %3R"
{ time "$T/bin/sftp-server-\$who" 2>&3 3>&-; } 3>&2 2>> "$T/cpu.\$who"
EOF
chmod 0755 "$T/bin/subsystem"

sshd_init "$T/sshd" || bench_die "ssh-keygen failed"
sshd_authorize "$(id -un)"
if ! sshd_start e2e <<EOF
Subsystem sftp $T/bin/subsystem
Ciphers $cipher
Compression no
EOF
then
	bench_die "sshd: $SSHD_ERROR"
fi

sftp_opts=(-q -c "$cipher" -o Compression=no)
[ -n "$buffer" ] && sftp_opts+=(-B "$buffer")
[ -n "$requests" ] && sftp_opts+=(-R "$requests")

echo "e2e-sshd.sh: $rounds rounds, $size files, sftp put and get through $SSHD on 127.0.0.1, cipher $cipher, on $fs"
echo "ours: $ours"
echo "ref:  $ref"
echo "sftp options: ${sftp_opts[*]}"
echo "host: $(bench_host), $($SSHD -V 2>&1 | head -n 1)"
echo "load average before: $(cut -d ' ' -f 1-3 /proc/loadavg)"

echo "e2e-sshd.sh: making the $size file" >&2
head -c "$bytes" /dev/urandom > "$F/local/src.dat" || exit 1
ln "$F/local/src.dat" "$F/remote/src.dat" || exit 1
chmod 0644 "$F/local/src.dat"

res=${out:-$T/results}
: > "$res" || exit 1
hz=$(getconf CLK_TCK)

# CPU seconds of the reaped descendants of the listening sshd.
children_cpu() {
	awk -v hz="$hz" '{ sub(/^.*\) /, ""); printf "%.2f\n", ($14 + $15) / hz }' \
	    "/proc/$SSHD_PID/stat"
}

# Waits (at most 20 s) until the listening sshd has no children left.
wait_reaped() {
	local n=0
	while [ -n "$(pgrep -P "$SSHD_PID")" ] && [ $n -lt 200 ]; do
		sleep 0.1
		n=$((n + 1))
	done
}

failures=0
# transfer ROUND OP WHO: one sftp session; its line goes to $res.
transfer() {
	local r=$1 op=$2 who=$3 batch=$T/batch c0 c1 scpu line rc
	case $op in
	put) echo "put $F/local/src.dat $F/remote/up.dat" > "$batch" ;;
	get) echo "get $F/remote/src.dat $F/local/down.dat" > "$batch" ;;
	empty) echo "pwd" > "$batch" ;;
	esac
	rm -f "$F/remote/up.dat" "$F/local/down.dat"
	echo "$who" > "$T/which"
	: > "$T/cpu.$who"
	wait_reaped
	c0=$(children_cpu)
	/usr/bin/time -o "$T/client" -f "%e %U %S" \
	    timeout 600 sftp "${SSH_OPTS[@]}" "${sftp_opts[@]}" -b "$batch" \
	    "$(id -un)@127.0.0.1" > "$T/sftp.out" 2>&1 < /dev/null
	rc=$?
	wait_reaped
	c1=$(children_cpu)
	scpu=$(awk 'NF == 3 { printf "%.3f\n", $1 + $2 }' "$T/cpu.$who" | tail -n 1)
	if [ $rc != 0 ] || [ -z "$scpu" ]; then
		echo "e2e-sshd.sh: round $r $op $who FAILED (exit $rc): $(tr '\n' ' ' < "$T/sftp.out")" >&2
		failures=$((failures + 1))
		return
	fi
	case $op in
	put) cmp -s "$F/local/src.dat" "$F/remote/up.dat" ;;
	get) cmp -s "$F/remote/src.dat" "$F/local/down.dat" ;;
	esac || {
		echo "e2e-sshd.sh: round $r $op $who: the copy differs from the original" >&2
		failures=$((failures + 1))
		return
	}
	line=$(awk -v r="$r" -v op="$op" -v who="$who" -v c0="$c0" -v c1="$c1" \
	    -v scpu="$scpu" -v bytes="$bytes" '{
		printf "round=%s op=%s server=%s bytes=%s wall=%s client_cpu=%.2f server_cpu=%s tree_cpu=%.2f sshd_cpu=%.3f\n",
		    r, op, who, bytes, $1, $2 + $3, scpu, c1 - c0, c1 - c0 - scpu }' "$T/client")
	[ "$r" = 0 ] || echo "$line" >> "$res"
}

start=$(date +%s)
for r in $(seq 1 "$rounds"); do
	printf 'round %d/%d:' "$r" "$rounds" >&2
	for op in empty put get; do
		for who in $(bench_alternate "$r" ours ref); do
			transfer "$r" "$op" "$who"
			printf ' %s-%s' "$op" "$who" >&2
		done
	done
	echo >&2
done
rm -f "$F/remote/up.dat" "$F/local/down.dat"
echo "elapsed: $(( $(date +%s) - start )) s, load average after: $(cut -d ' ' -f 1-3 /proc/loadavg)"
for who in ours ref; do
	[ -s "$T/stdin.$who" ] && echo "$who's stdin: $(sed 's/:.*//' "$T/stdin.$who")"
done

summarize "$res"

# sshd_syscalls DIR: the per-process files of strace -ff: sshd's own (those
# that exec nothing but sshd) summed, the server and the shells left out.
sshd_syscalls() {
	local f sshd_files=()
	for f in "$1"/s.*; do
		if grep -q '^execve(' "$f" && grep '^execve(' "$f" | grep -qv '^execve("/usr/sbin/sshd"'; then
			continue
		fi
		sshd_files+=("$f")
	done
	awk "$bench_awk"'
# by_count(count, keys): the indices of count[] in keys[1..m], the largest
# count first; returns m.
function by_count(count, keys,    i, j, k, m, t) {
	m = 0
	for (k in count)
		keys[++m] = k
	for (i = 1; i <= m; i++)
		for (j = i; j > 1 && count[keys[j - 1]] < count[keys[j]]; j--) {
			t = keys[j]; keys[j] = keys[j - 1]; keys[j - 1] = t
		}
	return m
}
FNR == 1 { pid = FILENAME; sub(/.*\./, "", pid) }
{
	p = index($0, "(")
	if (p == 0)
		next
	name = substr($0, 1, p - 1)
	if (name !~ /^[a-z_0-9]+$/)
		next
	calls[name]++
	total++
	if ((name == "read" || name == "write") && match($0, / = [0-9]+$/)) {
		fd = substr($0, p + 1) + 0
		k = pid " " name "(" fd ")"
		n[k]++
		sz[k, n[k]] = substr($0, RSTART + 3) + 0
		sum[k] += sz[k, n[k]]
	}
}
END {
	printf "  sshd system calls: %d:", total
	m = by_count(calls, order)
	for (i = 1; i <= m && i <= 8; i++)
		printf " %s %d", order[i], calls[order[i]]
	printf "\n"
	m = by_count(n, ks)
	for (i = 1; i <= m && i <= 4; i++) {
		k = ks[i]
		delete a
		for (j = 1; j <= n[k]; j++)
			a[j] = sz[k, j]
		printf "  pid %s: %d calls, median %d B, mean %d B\n", k, n[k],
		    median(a, n[k]), sum[k] / n[k]
	}
}' "${sshd_files[@]}"
}

if [ $strace_sshd = 1 ]; then
	echo
	echo "strace -f -ff of the listening sshd, one put and one get per server (not measured)"
	for op in put get; do
		for who in ours ref; do
			d=$T/strace.$who.$op
			mkdir "$d"
			strace -f -ff -qq -o "$d/s" -p "$SSHD_PID" 2> /dev/null &
			spid=$!
			sleep 1
			transfer 0 "$op" "$who" > /dev/null
			kill -INT "$spid"
			wait "$spid"
			echo "$op, $who:"
			sshd_syscalls "$d"
			rm -rf "$d"
		done
	done
fi

[ -n "$out" ] && echo "raw lines: $out"
if [ $failures -gt 0 ]; then
	echo "e2e-sshd.sh: $failures transfers FAILED" >&2
	exit 1
fi
exit 0
