# shellcheck shell=bash
#
# lib.sh: what the scripts of bench/ share. A script sets BENCH_PROG to its
# own name and sources this file after "set -u":
#
#   BENCH_PROG=compare.sh
#   . "$(dirname "$0")/lib.sh"
#
# It then has bench_here (bench/) and bench_top (the tree above it), ours and
# ref (the servers to compare: $OURS or the tree's sftp-server, $REF or
# OpenSSH's), and the functions below: messages and usage; checks of counts
# and sizes; sftpbench's transfer workloads; the order of the candidates in
# a round; the host, its load and a binary's identity; the programs built
# through the top Makefile (bench/Makefile.inc); temporary files and private
# tmpfs mounts, undone at exit by one trap; and bench_awk, the functions the
# tables' awk programs share.

bench_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench_top=$(cd "$bench_here/.." && pwd)
# shellcheck disable=SC2034 # for the scripts
ours=${OURS:-$bench_top/sftp-server}
# shellcheck disable=SC2034
ref=${REF:-/usr/lib/openssh/sftp-server}

# bench_die MESSAGE: prints "PROG: MESSAGE" to stderr and exits 1.
bench_die() {
	echo "$BENCH_PROG: $*" >&2
	exit 1
}

# bench_bad MESSAGE: the same for a bad option or argument: exits 2.
bench_bad() {
	echo "$BENCH_PROG: $*" >&2
	exit 2
}

# bench_usage: the script's header comment from its "usage:" line to the
# comment's end, to stderr; exits 2.
bench_usage() {
	awk 'NR > 1 && !/^#/ { exit }
	    p || /^# usage:/ { p = 1; sub(/^# ?/, ""); print }' "$0" >&2
	exit 2
}

# bench_unknown OPTION: says that OPTION is unknown, then bench_usage.
bench_unknown() {
	echo "$BENCH_PROG: unknown option $1" >&2
	bench_usage
}

# bench_has WORD ARG...: whether WORD is one of the ARGs: an option, such as
# --quick, that sets defaults before the others are read.
bench_has() {
	local w=$1 a
	shift
	for a; do
		[ "$a" = "$w" ] && return 0
	done
	return 1
}

# bench_count OPTION VALUE [MIN]: VALUE must be a whole number of at least
# MIN (default 1), or the script stops with "bad OPTION".
bench_count() {
	case $2 in ''|*[!0-9]*) bench_bad "bad $1" ;; esac
	[ "$((10#$2))" -ge "${3:-1}" ] || bench_bad "bad $1"
}

# bench_to_bytes SIZE: prints SIZE in bytes. SIZE is a whole number with an
# optional K, M or G (powers of 1024); another stops the (sub)shell with
# "bad size SIZE".
bench_to_bytes() {
	local n=${1%[KkMmGg]}
	case $n in ''|*[!0-9]*) bench_bad "bad size $1" ;; esac
	case $1 in
	*[Kk]) echo $((10#$n << 10)) ;;
	*[Mm]) echo $((10#$n << 20)) ;;
	*[Gg]) echo $((10#$n << 30)) ;;
	*) echo $((10#$n)) ;;
	esac
}

# bench_transfer_args WORKLOAD [BYTES]: sftpbench's arguments for the
# transfer workloads up255k, up32k, down255k and down32k (requests of
# 255 KiB, as OpenSSH's sftp makes them, or 32 KiB), with "-b BYTES" when
# BYTES is given. Another name: a message, and status 2.
bench_transfer_args() {
	local b=${2:+ -b $2}
	case $1 in
	up255k) echo "-w upload -l 261120$b" ;;
	up32k) echo "-w upload -l 32768$b" ;;
	down255k) echo "-w download -l 261120$b" ;;
	down32k) echo "-w download -l 32768$b" ;;
	*) echo "$BENCH_PROG: unknown workload $1" >&2; return 2 ;;
	esac
}

# bench_rotate ROUND ITEM...: the items, one a line, round r starting with
# item (r - 1) mod n: over n rounds each item runs in each place once.
bench_rotate() {
	local r=$1 i
	shift
	local -a items=("$@")
	for ((i = 0; i < ${#items[@]}; i++)); do
		echo "${items[(r - 1 + i) % ${#items[@]}]}"
	done
}

# bench_alternate ROUND ITEM...: the items, one a line, in their order in
# odd rounds and reversed in even ones, so that a drift in the machine's
# speed over a round does not always fall on the same item.
bench_alternate() {
	local r=$1 i
	shift
	if [ $((r % 2)) = 1 ]; then
		printf '%s\n' "$@"
	else
		for ((i = $#; i > 0; i--)); do
			echo "${!i}"
		done
	fi
}

# bench_record ROUND WORKLOAD WHO RESULTS ERRFILE COMMAND...: runs COMMAND,
# one sftpbench run, and appends its line to RESULTS as compare.sh's tables
# read it: "round=ROUND name=WORKLOAD ...". A failed run is told on stderr
# with sftpbench's message (from ERRFILE), appended as "... server=WHO
# status=fail" and counted in failures.
bench_record() {
	local r=$1 wl=$2 who=$3 res=$4 err=$5 line rc
	shift 5
	line=$("$@" 2> "$err")
	rc=$?
	if [ $rc != 0 ] || [ -z "$line" ]; then
		failures=$((failures + 1))
		echo >&2
		echo "$BENCH_PROG: round $r, $wl, $who FAILED (exit $rc):" >&2
		sed 's/^/    /' "$err" >&2
		echo "round=$r name=$wl server=$who status=fail" >> "$res"
		return
	fi
	echo "round=$r name=$wl $line" >> "$res"
}

# bench_reap PID TENTHS: waits up to TENTHS tenths of a second for PID, a
# child, to exit; then kills it and reaps it.
bench_reap() {
	local i
	for ((i = 0; i < $2; i++)); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# bench_host: the machine in a few words: its CPUs, their model, the kernel.
bench_host() {
	echo "$(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' \
	    /proc/cpuinfo | head -n 1), Linux $(uname -r)"
}

# bench_load_warning: a line of warning when the load average says that
# other work is running.
bench_load_warning() {
	local load
	load=$(cut -d ' ' -f 1 /proc/loadavg)
	case $load in
	0.[0-4]*) ;;
	*) echo "warning: load average $load: other work is running, expect noise" ;;
	esac
}

# bench_last_cpu: the number of the last CPU, where runs are pinned.
bench_last_cpu() {
	echo $(($(nproc) - 1))
}

# bench_abs FILE: FILE's absolute path (its directory must exist).
bench_abs() {
	echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
}

# bench_ident BINARY COPY: the sha256 of the copy that runs (12 digits)
# and, for a binary of this tree, the commit the tree is at and whether it
# has changes.
bench_ident() {
	local id head
	id="sha256 $(sha256sum < "$2" | cut -c1-12)"
	case $(cd "$(dirname "$1")" && pwd -P) in
	"$(cd "$bench_top" && pwd -P)")
		if head=$(git -C "$bench_top" rev-parse --short HEAD 2>/dev/null); then
			id="$id, tree at $head"
			[ -n "$(git -C "$bench_top" status --porcelain -uno 2>/dev/null)" ] &&
			    id="$id with changes"
		fi ;;
	esac
	echo "$id"
}

# bench_build PROG...: bench/PROG... built by the top Makefile (with the
# project's flags) when missing or older than their sources. Stops the
# script when a build fails.
bench_build() {
	local -a targets=("${@/#/bench/}")
	make -q --no-print-directory -C "$bench_top" "${targets[@]}" \
	    > /dev/null 2>&1 && return 0
	echo "$BENCH_PROG: building $*" >&2
	make -s --no-print-directory -C "$bench_top" "${targets[@]}" >&2 ||
	    bench_die "cannot build $*"
}

# What the trap undoes at exit: mounts, the last first; files and
# directories; an account made for the run.
bench_mounts=()
bench_removals=()
bench_userdel=
bench_why=

# bench_remove PATH...: files or directories (a work area) removed at exit,
# with all in them.
bench_remove() {
	bench_removals+=("$@")
}

# bench_tmpfs DIR SIZE MODE [OPTIONS]: a private tmpfs of SIZE bytes on DIR,
# root directory mode MODE, unmounted at exit. Only root can: returns 1
# otherwise, or when the mount fails (its message in bench_why).
# shellcheck disable=SC2034 # bench_why is for the scripts
bench_tmpfs() {
	bench_why="not root"
	[ "$(id -u)" = 0 ] || return 1
	bench_why=$(mount -t tmpfs -o "size=$2,mode=$3${4:+,$4}" \
	    "${BENCH_PROG%.*}" "$1" 2>&1) || return 1
	bench_mounts+=("$1")
}

# bench_cleanup: the EXIT trap, run once: the script's bench_on_exit (when
# it defines one: servers and clients to stop), then the unmounts, the
# removals and the account.
bench_cleanup() {
	local i
	trap - EXIT INT TERM HUP
	if declare -F bench_on_exit > /dev/null; then
		bench_on_exit
	fi
	for ((i = ${#bench_mounts[@]} - 1; i >= 0; i--)); do
		umount "${bench_mounts[i]}" 2>/dev/null ||
		    umount -l "${bench_mounts[i]}"
	done
	[ ${#bench_removals[@]} = 0 ] || rm -rf "${bench_removals[@]}"
	[ -z "$bench_userdel" ] || userdel "$bench_userdel" 2>/dev/null
}
trap bench_cleanup EXIT
trap 'exit 130' INT TERM HUP

# bench_awk: the functions the tables' awk programs share, to put before a
# program's own text (awk "$bench_awk"'...'):
#   median(a, n)    the median of a[1..n], as numbers ("" when n is 0);
#                   sorts a in place
#   kv_parse(from)  the key=value fields from field "from" on, into kv[]; a
#                   value that looks like a number becomes one
# shellcheck disable=SC2016,SC2034 # awk's text, for the scripts
bench_awk='
function median(a, n,    i, j, t) {
	for (i = 1; i <= n; i++)
		a[i] += 0
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
			t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
		}
	if (n == 0)
		return ""
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function kv_parse(from,    i, p, v) {
	delete kv
	for (i = from; i <= NF; i++) {
		p = index($i, "=")
		if (p == 0)
			continue
		v = substr($i, p + 1)
		kv[substr($i, 1, p - 1)] = v ~ /^-?([0-9]+\.?[0-9]*|\.[0-9]+)$/ ? v + 0 : v
	}
}
'
