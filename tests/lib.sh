# Results of the shell suites, sourced by each: one line per check,
# "ok - NAME", "FAIL - NAME: what was expected, what came back" or
# "skip - NAME: why", and a closing line "N passed, M failed" (with
# ", K skipped" when any were skipped) that tells whether all passed.

PASSED=0
FAILED=0
SKIPPED=0

pass() { PASSED=$((PASSED + 1)); printf 'ok - %s\n' "$1"; }
fail() { FAILED=$((FAILED + 1)); printf 'FAIL - %s: %s\n' "$1" "$2"; }
skip() { SKIPPED=$((SKIPPED + 1)); printf 'skip - %s: %s\n' "$1" "$2"; }

# summary: the closing line; returns 0 when nothing failed.
summary() {
    if [ "$SKIPPED" -gt 0 ]; then
        printf '%d passed, %d failed, %d skipped\n' "$PASSED" "$FAILED" "$SKIPPED"
    else
        printf '%d passed, %d failed\n' "$PASSED" "$FAILED"
    fi
    [ "$FAILED" -eq 0 ]
}
