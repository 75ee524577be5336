#!/bin/bash
# usage: bench/slowfs-test.sh [--server PATH]
#
# Functional checks of bench/slowfs (no timing): which calls it holds and
# which it lets through (its -o counters), the EAGAIN answer to RWF_NOWAIT,
# io_uring refused, exit statuses passed on, many threads running to the
# right result, calls of threads held at once, and an SFTP server under its
# own seccomp sandbox (this tree's sftp-server, or --server PATH) and Go
# pkg/sftp's (bench/gosftp-server, when built) completing verified
# workloads through it. Ends with "N passed, M failed"; exits 1 if any failed.
# SLOWFS in the environment names another build of slowfs to check.

set -u
BENCH_PROG=slowfs-test.sh
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

server=$ours
# The interpreter itself, not a wrapper script whose every stat would wait.
PY=${PYTHON:-/usr/bin/python3}
while [ $# -gt 0 ]; do
	case $1 in
	--server) server=$2; shift 2 ;;
	-h|--help) bench_usage ;;
	*) bench_unknown "$1" ;;
	esac
done

bench_build slowfs
bench_build sftpbench
# pkg/sftp's server, when Go and pkg/sftp are installed (else make says why).
bench_build gosftp-server
SLOWFS=${SLOWFS:-$bench_here/slowfs}
work=$(mktemp -d "${TMPDIR:-/tmp}/slowfs-test.XXXXXX") || exit 1
bench_remove "$work"
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok: $1"; }
not_ok() { failed=$((failed + 1)); echo "FAILED: $1"; }

# check NAME EXPECTED ACTUAL
check() {
	if [ "$2" = "$3" ]; then
		ok "$1"
	else
		not_ok "$1: expected [$2], got [$3]"
	fi
}

# counter FILE KIND: "held/seen" of KIND in slowfs's -o line.
counter() {
	sed -n "s/.* $2=\([0-9]*\/[0-9]*\).*/\1/p" "$1" | tail -n 1
}

# 1. RWF_NOWAIT on a held file is answered EAGAIN; a plain read of it
# returns its bytes; with reads not held, RWF_NOWAIT reads them.
printf 'slow storage\n' > "$work/f"
nowait_py='
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
buf = bytearray(12)
try:
    n = os.preadv(fd, [buf], 0, os.RWF_NOWAIT)
    print("nowait", n, bytes(buf[:n]).decode())
except BlockingIOError:
    print("nowait EAGAIN")
n = os.preadv(fd, [buf], 0)
print("plain", n, bytes(buf[:n]).decode())
'
out=$("$SLOWFS" -D read=0.5 -- "$PY" -c "$nowait_py" "$work/f" 2>&1)
check "RWF_NOWAIT on a held file: EAGAIN, then a plain read" \
    "nowait EAGAIN
plain 12 slow storage" "$out"
out=$("$SLOWFS" -D stat=0.5 -- "$PY" -c "$nowait_py" "$work/f" 2>&1)
check "RWF_NOWAIT with reads not held: the bytes" \
    "nowait 12 slow storage
plain 12 slow storage" "$out"

# 2. Pipes and sockets are let through, files held: 200 writes and reads
# on a pipe and on a socketpair (descriptors above 2), 10 writes to a file.
rm -f "$work/stats"
"$SLOWFS" -d 0.1 -o "$work/stats" -- "$PY" -c '
import os, socket, sys
r, w = os.pipe()
a, b = socket.socketpair()
for i in range(100):
    os.write(w, b"x"); os.read(r, 1)
    os.write(a.fileno(), b"y"); os.read(b.fileno(), 1)
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
for i in range(10):
    os.write(fd, b"z")
os.close(fd)
' "$work/g"
check "pipe and socket writes seen, not held; file writes held" \
    "10/210" "$(counter "$work/stats" write)"
check "file written" "zzzzzzzzzz" "$(cat "$work/g")"
held=$(counter "$work/stats" read)
if [ $((${held#*/} - ${held%/*})) -ge 200 ]; then
	ok "200 reads of a pipe and a socket seen, not held ($held)"
else
	not_ok "reads: 200 of a pipe and a socket not let through ($held)"
fi

# 3. A kind not held is not even sent to slowfs: with only reads held,
# stats go by unseen.
rm -f "$work/stats"
"$SLOWFS" -D read=0.1 -o "$work/stats" -- sh -c "ls -l '$work' >/dev/null"
check "-D read=0.1: stats not seen" "0/0" "$(counter "$work/stats" stat)"
rm -f "$work/stats"
"$SLOWFS" -D stat=0.1 -o "$work/stats" -- sh -c "ls -l '$work' >/dev/null"
case $(counter "$work/stats" stat) in
0/*|"") not_ok "-D stat=0.1: ls -l's stats held" ;;
*) ok "-D stat=0.1: ls -l's stats held" ;;
esac

# 3c. A statx() of a descriptor with AT_STATX_DONT_SYNC asks the kernel's
# copy: the filter lets it through, unasked; the same without it is held.
# The same script twice, with and without two such calls: the calls that
# reach slowfs ("seen") differ by none of them.
statx_py='
import ctypes, os, platform, sys
nr = {"x86_64": 332, "aarch64": 291}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(sys.argv[1], os.O_RDONLY)
buf = ctypes.create_string_buffer(256)
for flags in [int(a) for a in sys.argv[2:]]:
    if libc.syscall(nr, fd, b"", flags, 0x1 | 0x100, buf) != 0:
        sys.exit("statx: errno %d" % ctypes.get_errno())
'
rm -f "$work/stats" "$work/stats0"
# A first run, not counted: whatever the interpreter writes or looks up
# once (a module's compiled cache) is done before the two that are.
"$SLOWFS" -D stat=0.1 -p "$work" -- "$PY" -c "$statx_py" "$work/f" \
    $((0x1000))
"$SLOWFS" -D stat=0.1 -p "$work" -o "$work/stats" -- "$PY" -c "$statx_py" \
    "$work/f" $((0x1000 | 0x4000)) $((0x1000 | 0x4000)) $((0x1000))
"$SLOWFS" -D stat=0.1 -p "$work" -o "$work/stats0" -- "$PY" -c "$statx_py" \
    "$work/f" $((0x1000))
check "statx with AT_STATX_DONT_SYNC not held nor asked, without it held" \
    "1/$(counter "$work/stats0" stat | cut -d/ -f2)" \
    "$(counter "$work/stats" stat)"

# 3b. -p DIR: only calls on paths and descriptors under DIR are held;
# relative paths count from the working directory or the directory
# descriptor. Nothing else of the interpreter's touches DIR, so the counts
# held are exact: 2 stats, 2 opens, 1 read.
mkdir -p "$work/in" "$work/out"
echo x > "$work/in/x"
echo y > "$work/out/y"
rm -f "$work/stats"
"$SLOWFS" -d 0.1 -p "$work/in" -o "$work/stats" -- "$PY" -c '
import os, sys
os.chdir(sys.argv[1])
os.lstat("in/x")
os.lstat(sys.argv[1] + "/out/y")
os.lstat("out/y")
d = os.open("in", os.O_RDONLY)
os.stat("x", dir_fd=d)
fd = os.open("out/y", os.O_RDONLY)
os.read(fd, 1)
fd = os.open(sys.argv[1] + "/in/x", os.O_RDONLY)
os.read(fd, 1)
' "$work"
check "-p: stats held inside only" 2 "$(counter "$work/stats" stat | cut -d/ -f1)"
check "-p: opens held inside only" 2 "$(counter "$work/stats" open | cut -d/ -f1)"
check "-p: reads held inside only" 1 "$(counter "$work/stats" read | cut -d/ -f1)"

# 4. io_uring is refused with ENOSYS (its work would bypass the filter).
out=$("$SLOWFS" -d 0.1 -- "$PY" -c '
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(120)
r = libc.syscall(425, 8, buf)
print(r, errno.errorcode.get(ctypes.get_errno()))
' 2>&1)
check "io_uring_setup refused" "-1 ENOSYS" "$out"

# 5. Exit statuses are the command's; a command not found is 127.
"$SLOWFS" -d 0.1 -- sh -c 'exit 7'
check "exit status passed on" 7 $?
"$SLOWFS" -d 0.1 -- /nonexistent/program 2>/dev/null
check "command not found" 127 $?
# (The status is read by a shell of its own, so that no "Terminated" shows.)
rc=$(sh -c '"$1" -d 0.1 -- sh -c "kill -TERM \$\$"; echo $?' sh "$SLOWFS" \
    2>/dev/null)
check "killed by a signal: 128 + 15" 143 "$rc"

# 6. Many threads, with jitter so that calls finish out of order: each
# writes, renames, stats and reads back its own files; all must be right.
mkdir -p "$work/many"
out=$("$SLOWFS" -d 0.05 -j 0.5 -s 7 -- "$PY" -c '
import os, sys, threading
d = sys.argv[1]
bad = []
def work(t):
    for i in range(20):
        p = os.path.join(d, "t%d-%d" % (t, i))
        data = (b"%d:%d;" % (t, i)) * (i + 1)
        with open(p + ".tmp", "wb") as f:
            f.write(data)
        os.rename(p + ".tmp", p)
        if os.lstat(p).st_size != len(data):
            bad.append(p)
        with open(p, "rb") as f:
            if f.read() != data:
                bad.append(p)
ts = [threading.Thread(target=work, args=(t,)) for t in range(8)]
for t in ts: t.start()
for t in ts: t.join()
print(len(os.listdir(d)), len(bad))
' "$work/many" 2>&1)
check "8 threads, jitter: 160 files, all right" "160 0" "$out"

# 7. Held calls wait together, not one after the other: 8 threads, past a
# barrier, each LSTAT one file held 500 ms. For at most one to be held at a
# time, each would have to start half a second after the one before.
rm -f "$work/stats"
out=$("$SLOWFS" -D stat=500 -p "$work" -o "$work/stats" -- "$PY" -c '
import os, sys, threading
b = threading.Barrier(8)
def work():
    b.wait()
    os.lstat(sys.argv[1])
ts = [threading.Thread(target=work) for t in range(8)]
for t in ts: t.start()
for t in ts: t.join()
print("done")
' "$work/f" 2>&1)
held=$(sed -n 's/.* held_max=\([0-9]*\).*/\1/p' "$work/stats")
if [ "$out" = "done" ] && [ "${held:-0}" -ge 2 ]; then
	ok "8 threads held at once (held_max $held)"
else
	not_ok "8 threads: $out, held_max ${held:-none}"
fi

# 8. An SFTP server under its own seccomp sandbox, through sftpbench with
# content checks: every reply right, and slowfs saw its storage calls.
# Go's pkg/sftp too when it is built (raw system calls from many threads).
gosrv=$bench_here/gosftp-server
for srv in "$server" "$gosrv"; do
	if [ ! -x "$srv" ]; then
		echo "skip: no server at $srv"
		continue
	fi
	mkdir -p "$work/sftp"
	for w in "stat -c 300 -n 300" "readdir -n 300 -i 2" \
	    "upload -l 32k -b 4M" "download -l 32k -b 4M" "smallfiles -c 100"; do
		# shellcheck disable=SC2086 # the arguments are words
		set -- $w
		rm -f "$work/stats"
		# shellcheck disable=SC2086
		if "$bench_here/sftpbench" -V -d "$work/sftp" -w $w -- \
		    "$SLOWFS" -d 0.1 -j 0.2 -o "$work/stats" -- "$srv" \
		    > "$work/line" 2>&1; then
			case $1 in
			stat) k="stat" ;; readdir) k="dir" ;; upload) k="write" ;;
			download) k="read" ;; smallfiles) k="open" ;;
			esac
			case $(counter "$work/stats" "$k") in
			0/*|"") not_ok "${srv##*/} $1: no $k held" ;;
			*) ok "${srv##*/} $1 under slowfs, verified" ;;
			esac
		else
			not_ok "${srv##*/} $1: $(cat "$work/line")"
		fi
	done
done

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
