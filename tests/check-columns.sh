#!/bin/sh
# The server's lines fit 80 columns, tabs counted as 8 (style(9)).  Prints
# one line per file and "N passed, M failed"; a failing file lists its long
# lines as LINE:COLUMNS.  Exits 1 when a line is longer.  Usage:
# tests/check-columns.sh [FILE...], the server's .c and .h files by default.
cd "$(dirname "$0")/.." || exit 1
[ $# -gt 0 ] || set -- *.c *.h

pass=0 fail=0
for f in "$@"; do
    long=$(expand -t 8 "$f" | awk 'length > 80 { printf " %d:%d", NR, length }')
    if [ -n "$long" ]; then
        echo "FAIL - $f: lines over 80 columns:$long"
        fail=$((fail + 1))
    else
        echo "ok - $f"
        pass=$((pass + 1))
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
