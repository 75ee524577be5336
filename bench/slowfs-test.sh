#!/bin/bash
# usage: bench/slowfs-test.sh [--server PATH]
#
# Functional checks of bench/slowfs (no timing): which calls it holds and
# which it lets through (its -o counters), the EAGAIN answer to RWF_NOWAIT,
# io_uring refused, exit statuses passed on, many threads running to the
# right result, and an SFTP server under its own seccomp sandbox (this
# tree's sftp-server, or --server PATH) completing verified workloads
# through it. Ends with "N passed, M failed"; exits 1 if any failed.

set -u
BENCH_PROG=slowfs-test.sh
. "$(dirname "$0")/lib.sh"

server=$ours
while [ $# -gt 0 ]; do
	case $1 in
	--server) server=$2; shift 2 ;;
	-h|--help) bench_usage ;;
	*) bench_unknown "$1" ;;
	esac
done

bench_build slowfs
bench_build sftpbench
SLOWFS=$bench_here/slowfs
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
out=$("$SLOWFS" -D read=0.5 -- python3 -c "$nowait_py" "$work/f" 2>&1)
check "RWF_NOWAIT on a held file: EAGAIN, then a plain read" \
    "nowait EAGAIN
plain 12 slow storage" "$out"
out=$("$SLOWFS" -D stat=0.5 -- python3 -c "$nowait_py" "$work/f" 2>&1)
check "RWF_NOWAIT with reads not held: the bytes" \
    "nowait 12 slow storage
plain 12 slow storage" "$out"

# 2. Pipes and sockets are let through, files held: 200 writes and reads
# on a pipe and on a socketpair (descriptors above 2), 10 writes to a file.
rm -f "$work/stats"
"$SLOWFS" -d 0.1 -o "$work/stats" -- python3 -c '
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

# 4. io_uring is refused with ENOSYS (its work would bypass the filter).
out=$("$SLOWFS" -d 0.1 -- python3 -c '
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
out=$("$SLOWFS" -d 0.05 -j 0.5 -s 7 -- python3 -c '
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

# 7. An SFTP server under its own seccomp sandbox, through sftpbench with
# content checks: every reply right, and slowfs saw its storage calls.
if [ -x "$server" ]; then
	mkdir -p "$work/sftp"
	for w in "stat -c 300 -n 300" "readdir -n 300 -i 2" \
	    "upload -l 32k -b 4M" "download -l 32k -b 4M" "smallfiles -c 100"; do
		set -- $w
		rm -f "$work/stats"
		if "$bench_here/sftpbench" -V -d "$work/sftp" -w $w -- \
		    "$SLOWFS" -d 0.1 -j 0.2 -o "$work/stats" -- "$server" \
		    > "$work/line" 2>&1; then
			case $1 in
			stat) k=stat ;; readdir) k=dir ;; upload) k=write ;;
			download) k=read ;; smallfiles) k=open ;;
			esac
			case $(counter "$work/stats" $k) in
			0/*|"") not_ok "server $1: no $k held" ;;
			*) ok "server $1 under slowfs, verified" ;;
			esac
		else
			not_ok "server $1: $(cat "$work/line")"
		fi
	done
else
	echo "skip: no server at $server (make sftp-server)"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
