#!/usr/bin/env bash
#
# hash-compare.sh: digest.c, through hashbench (which reads the file as the
# server does for check-file), against the coreutils tools on one file in
# the page cache. For each algorithm, N rounds alternate which of the two
# runs first; every digest is checked against the other tool's. Prints the
# best rate of each by wall-clock time and by CPU time (user + system), and
# the ratios ours/coreutils.
#
# usage: hash-compare.sh [--size SIZE] [--rounds N] [--algos LIST]
#                        [--file PATH] [--no-pin]
#
# SIZE takes K, M or G (default 1G) and the file of random bytes is made in
# TMPDIR (or /tmp); --file hashes an existing file instead. LIST is a list
# of algorithm names separated by commas (default: all). crc32 has no
# coreutils tool: Python's zlib.crc32() stands in, for the digest check and
# as a yardstick, not as a target. Runs are pinned to the last CPU unless
# --no-pin.

set -u
BENCH_PROG=hash-compare.sh
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

size=1G
rounds=5
algos=sha256,md5,sha1,sha512,sha224,sha384,crc32
file=
pin=1

while [ $# -gt 0 ]; do
	case $1 in
	--size) size=${2-}; shift ;;
	--rounds) rounds=${2-}; shift ;;
	--algos) algos=${2-}; shift ;;
	--file) file=${2-}; shift ;;
	--no-pin) pin=0 ;;
	-h|--help) bench_usage ;;
	*) bench_unknown "$1" ;;
	esac
	shift || bench_usage
done
bench_count --rounds "$rounds"

# The reference tool of an algorithm.
ref_tool() {
	case $1 in
	md5|sha1|sha224|sha256|sha384|sha512) echo "${1}sum" ;;
	crc32) echo "python3 zlib" ;;
	*) return 1 ;;
	esac
}

for a in ${algos//,/ }; do
	ref_tool "$a" > /dev/null || bench_bad "unknown algorithm $a"
done

# hashbench, when missing or older than its sources (digest.c included).
bench_build hashbench
hb=$bench_here/hashbench

work=$(mktemp -d "${TMPDIR:-/tmp}/hash-compare.XXXXXX") || exit 1
bench_remove "$work"

if [ -z "$file" ]; then
	bytes=$(bench_to_bytes "$size") || exit 2
	file=$work/data
	echo "hash-compare.sh: writing $bytes random bytes to $file" >&2
	head -c "$bytes" /dev/urandom > "$file" || exit 1
else
	bytes=$(stat -c %s "$file") || exit 1
fi
# Warm the page cache, so that each tool reads from memory.
cat "$file" > /dev/null

pin_cmd=()
if [ "$pin" = 1 ] && command -v taskset > /dev/null; then
	pin_cmd=(taskset -c "$(bench_last_cpu)")
fi

# The CRC-32 as zlib computes it, in hex, reading as hashbench does.
crc_py='import sys, zlib
c = 0
with open(sys.argv[1], "rb", buffering=0) as f:
    while True:
        b = f.read(262144)
        if not b:
            break
        c = zlib.crc32(b, c)
print("%08x  %s" % (c, sys.argv[1]))'

# run WHO ALGO ROUND: one timed run; appends "algo who round digest real
# user sys" to the results.
run() {
	local who=$1 algo=$2 round=$3 cmd digest real user sys
	if [ "$who" = ours ]; then
		cmd=("$hb" "$algo" "$file")
	elif [ "$algo" = crc32 ]; then
		cmd=(python3 -c "$crc_py" "$file")
	else
		cmd=("${algo}sum" "$file")
	fi
	TIMEFORMAT='%3R %3U %3S'
	if ! { time "${pin_cmd[@]}" "${cmd[@]}" > "$work/out" 2> "$work/err"; } \
	    2> "$work/time"; then
		echo "hash-compare.sh: ${cmd[*]} failed:" >&2
		cat "$work/err" >&2
		exit 1
	fi
	digest=$(awk 'NR == 1 { print $1 }' "$work/out")
	read -r real user sys < "$work/time"
	echo "$algo $who $round $digest $real $user $sys" >> "$work/results"
}

: > "$work/results"
for a in ${algos//,/ }; do
	echo "hash-compare.sh: $a, $rounds rounds" >&2
	for ((r = 1; r <= rounds; r++)); do
		if ((r % 2)); then
			run ours "$a" "$r"
			run ref "$a" "$r"
		else
			run ref "$a" "$r"
			run ours "$a" "$r"
		fi
	done
done

echo
echo "$(basename "$file"): $bytes bytes in the page cache, best of $rounds rounds," \
    "MB/s = 10^6 bytes/s"
awk -v bytes="$bytes" -v order="${algos//,/ }" '
{
	algo = $1; who = $2; d = $4; real = $5; cpu = $6 + $7
	if ((algo, who) in digest && digest[algo, who] != d)
		bad[algo] = 1
	digest[algo, who] = d
	w = real > 0 ? bytes / real / 1e6 : 0
	c = cpu > 0 ? bytes / cpu / 1e6 : 0
	if (w > wall[algo, who])
		wall[algo, who] = w
	if (c > cpu_rate[algo, who])
		cpu_rate[algo, who] = c
	tool[algo] = algo == "crc32" ? "zlib (py)" : algo "sum"
}
END {
	printf "%-7s %-10s %9s %9s %6s   %9s %9s %6s  %s\n", "algo", "reference",
	    "ours", "ref", "ratio", "ours CPU", "ref CPU", "ratio", "digests"
	n = split(order, list, " ")
	status = 0
	for (i = 1; i <= n; i++) {
		a = list[i]
		same = !(a in bad) && digest[a, "ours"] == digest[a, "ref"]
		if (!same)
			status = 1
		rw = wall[a, "ref"] > 0 ? wall[a, "ours"] / wall[a, "ref"] : 0
		rc = cpu_rate[a, "ref"] > 0 ? \
		    cpu_rate[a, "ours"] / cpu_rate[a, "ref"] : 0
		printf "%-7s %-10s %9.1f %9.1f %6.2f   %9.1f %9.1f %6.2f  %s\n",
		    a, tool[a], wall[a, "ours"], wall[a, "ref"], rw,
		    cpu_rate[a, "ours"], cpu_rate[a, "ref"], rc,
		    same ? "equal" : "DIFFER"
	}
	exit status
}' "$work/results"
