#!/usr/bin/env bash
# Fuzz tests: runs the libFuzzer harnesses built by "make fuzz"
# (tests/fuzz/fuzz_session, tests/fuzz/fuzz_packet).  First every input of
# each seed corpus (tests/fuzz/fuzz-corpus/NAME/) once, as a regression
# test; then each harness fuzzes for a while, starting from its corpus.
# fuzz_session runs twice: on the sessions of session/, and on those of
# session-wait/, on storage that waits (see tests/fuzz/fuzz_session.c),
# whose corpus must also reach the server's workers, the collection and
# answer of their jobs, and the calls given up after a signal.
#
# Usage: tests/fuzz/run-fuzz.sh [-k] [-t seconds]
#   -t seconds  how long each harness fuzzes (default 25; 0: corpus only)
#   -k          keep the scratch directory: the inputs the run found (NAME/),
#               crash files (NAME-crash-*, NAME-leak-*, NAME-timeout-*) and
#               the logs (NAME-*.log); it is kept anyway when a test fails
#   FUZZ_FLAGS  more libFuzzer flags for the fuzzing runs, e.g.
#               "-use_value_profile=1"
#
# New inputs go to the scratch directory, never into the repository's
# corpus: to keep one, minimise it into the corpus by hand
# (fuzz_NAME -merge=1 tests/fuzz/fuzz-corpus/NAME SCRATCH/NAME).
#
# Output: one "ok - NAME" / "FAIL - NAME: ..." line per corpus input, per
# function session-wait must reach and per fuzzing run (with libFuzzer's
# figures: executions, cov, ft, corpus), then
# "N passed, M failed" (", K skipped" when fuzz_session cannot jail itself
# here: it needs root or user namespaces).  Exit status 1 if any failed.

set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CORPUS=$HERE/fuzz-corpus
SECONDS_EACH=25
KEEP=0
while getopts kt: opt; do
	case $opt in
	k) KEEP=1 ;;
	t) SECONDS_EACH=$OPTARG ;;
	*) echo "usage: tests/fuzz/run-fuzz.sh [-k] [-t seconds]" >&2; exit 2 ;;
	esac
done

# shellcheck source=tests/lib/lib.sh
. "$HERE/../lib/lib.sh"

S=$(mktemp -d "${TMPDIR:-/tmp}/sftp-fuzz-run.XXXXXX") ||
	setup_failed "expected mktemp -d to work, got an error"
# The session harness makes its jail under $TMPDIR: keep it in here.
mkdir "$S/tmp"
TMPDIR=$S/tmp
export TMPDIR
cleanup() {
	if [ "$KEEP" -eq 1 ] || [ "$FAILED" -gt 0 ]; then
		echo "scratch directory kept: $S"
	else
		rm -rf "$S"
	fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# The last line of libFuzzer's progress, and the sanitizer's summary.
figures() {
	grep -E '^#[0-9]+' "$1" | tail -n 1 |
	    sed 's/^#\([0-9]*\)[[:space:]]*[A-Z]*[[:space:]]*/\1 executions, /'
}
summary_of() {
	grep -hE '^(SUMMARY|fuzz_session:|fuzz_packet:)' "$@" | head -n 1
}

# Each input of the corpus once: all in one process, then, if that fails,
# one by one to name the failing inputs.  Returns 1 when the harness cannot
# run here at all (fuzz_session without the right to chroot).
regress() {
	name=$1 bin=$2 dir=$CORPUS/$1
	log=$S/$name-corpus.log
	if "$bin" -runs=0 -timeout=10 -rss_limit_mb=2048 "$dir" >"$log" 2>&1
	then
		for f in "$dir"/*; do
			pass "$name corpus $(basename "$f")"
		done
		return 0
	fi
	if grep -q '^fuzz_session: cannot chroot' "$log"; then
		skip "$name" "the harness cannot chroot here, not even in a\
 user namespace (log: $log)"
		return 1
	fi
	for f in "$dir"/*; do
		one=$S/$name-corpus-$(basename "$f").log
		if "$bin" -timeout=10 -rss_limit_mb=2048 "$f" >"$one" 2>&1; then
			pass "$name corpus $(basename "$f")"
		else
			fail "$name corpus $(basename "$f")" "expected a clean\
 run, got: $(summary_of "$one") (log: $one)"
		fi
	done
	return 0
}

# What the corpus of session-wait must reach: storage calls made in the
# server's workers (the harness counts them, FUZZ_SESSION_STATS), and, by
# the coverage libFuzzer prints, the functions that take note of finished
# jobs (jobs_collect), answer them (requests_reap) and give up calls that
# hang after a signal (requests_abandon).
WAIT_REACHES="jobs_collect requests_reap requests_abandon"
reaches() {
	name=$1 bin=$2 dir=$CORPUS/$1
	log=$S/$name-coverage.log
	FUZZ_SESSION_STATS=1 "$bin" -runs=0 -timeout=10 -rss_limit_mb=2048 \
	    -print_coverage=1 "$dir" >"$log" 2>&1
	stats=$(grep '^fuzz_session: storage that waits' "$log")
	n=$(echo "$stats" |
	    sed -n 's/.* \([0-9]*\) in the server.s workers.*/\1/p')
	if [ "${n:-0}" -gt 0 ]; then
		pass "$name corpus: storage calls in the server's workers ($n)"
	else
		fail "$name corpus: storage calls in the server's workers"\
 "expected some, got ${stats:-no count} (log: $log)"
	fi
	for fn in $WAIT_REACHES; do
		if grep -q "^COVERED_FUNC: .* $fn " "$log"; then
			pass "$name corpus reaches $fn"
		else
			fail "$name corpus reaches $fn" "expected $fn among\
 the functions its corpus covers, got none (log: $log)"
		fi
	done
}

# Fuzzing from the corpus; new inputs and crash files go to the scratch.
fuzz() {
	name=$1 bin=$2 maxlen=$3
	shift 3
	log=$S/$name-fuzz.log
	mkdir -p "$S/$name"
	# shellcheck disable=SC2086
	"$bin" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
	    -max_len="$maxlen" -print_final_stats=1 \
	    -artifact_prefix="$S/$name-" "$@" ${FUZZ_FLAGS:-} \
	    "$S/$name" "$CORPUS/$name" >"$log" 2>&1
	rc=$?
	if [ "$rc" -eq 0 ]; then
		pass "$name fuzzing ${SECONDS_EACH}s: $(figures "$log")"
	else
		found=none
		for a in "$S/$name"-crash-* "$S/$name"-leak-* \
		    "$S/$name"-timeout-* "$S/$name"-oom-*; do
			[ -e "$a" ] && { found=$a; break; }
		done
		fail "$name fuzzing ${SECONDS_EACH}s" "expected no finding,\
 got: $(summary_of "$log"); input: $found (log: $log)"
	fi
}

for name in session session-wait packet; do
	bin=$HERE/fuzz_${name%-wait}
	if [ ! -x "$bin" ]; then
		fail "$name" "expected $bin, got none (make fuzz builds it)"
		continue
	fi
	regress "$name" "$bin" || continue
	[ "$name" = session-wait ] && reaches "$name" "$bin"
	if [ "$SECONDS_EACH" -gt 0 ]; then
		case $name in
		session*) fuzz "$name" "$bin" 8192 -dict="$CORPUS/sftp.dict" ;;
		packet) fuzz packet "$bin" 8192 ;;
		esac
	fi
done

summary
