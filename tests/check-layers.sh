#!/bin/sh
# The layers of the server, and the one rule between them: a file includes
# only headers of a layer below its own (and its own header).  Prints one
# line per file and "N passed, M failed"; exits 1 on an upward include.
#
#   5  sftp-server-main.c                          main()
#   4  sftp-server.c sftp-server.h                 options, setup, the loop
#   3  requests.c requests.h                       table, dispatch, handlers
#   2  sched.c sched.h                             the ordering rule,
#                                                  admission, placement, the
#                                                  jobs' system calls
#   1  fs attrib handles path pipes xferlog        the file system, attributes,
#      fileio sandbox rootcheck jobs               handles, expansions, pipes,
#                                                  the transfer log, the file
#                                                  I/O engines, the sandbox,
#                                                  the check of the -r root,
#                                                  the storage workers
#   0  packet log sys-gnu digest sysnames          the wire, logging, GNU calls,
#                                                  digests, system call names
cd "$(dirname "$0")/.." || exit 1

layer() {
    case ${1%.[ch]} in
    sftp-server-main) echo 5 ;;
    sftp-server) echo 4 ;;
    requests) echo 3 ;;
    sched) echo 2 ;;
    fs | attrib | handles | path | pipes | xferlog | fileio | sandbox | \
        rootcheck | jobs) echo 1 ;;
    packet | log | sys-gnu | digest | sysnames) echo 0 ;;
    *) echo "" ;;
    esac
}

pass=0 fail=0
for f in *.c *.h; do
    mine=$(layer "$f")
    if [ -z "$mine" ]; then
        echo "FAIL - $f: in no layer (add it to tests/check-layers.sh)"
        fail=$((fail + 1))
        continue
    fi
    bad=""
    for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
        [ "${inc%.h}" = "${f%.[ch]}" ] && continue
        theirs=$(layer "$inc")
        if [ -z "$theirs" ] || [ "$theirs" -ge "$mine" ]; then
            bad="$bad $inc"
        fi
    done
    if [ -n "$bad" ]; then
        echo "FAIL - $f (layer $mine) includes a layer not below it:$bad"
        fail=$((fail + 1))
    else
        echo "ok - $f (layer $mine)"
        pass=$((pass + 1))
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
