#!/usr/bin/env bash
# Records the system calls that the protocol suites make a server make once
# its sandbox is entered, for tests/unit/test_sandbox.c: each one must be
# on the filter's list, with the argument values the list checks.
#
# Usage: tests/unit/record-sandbox-calls.sh ARCH SERVER [QEMU]
#   ARCH    x86_64 i386 armhf arm64 s390x: writes tests/unit/sandbox_calls_ARCH.h
#   SERVER  the server built for ARCH (make, make cross-ARCH)
#   QEMU    qemu-user for ARCH (qemu-aarch64-static...), where this kernel
#           cannot run it: its -d strace log instead of strace(1)
#
# Each session is traced from the start; its calls count from the one that
# enters the filter (prctl(PR_SET_SECCOMP), which qemu-user refuses: the
# server goes on without it, making the same calls).  SUITES picks the suites
# (default: raw sftp guarantees, and confine where it runs natively).
set -u
cd "$(dirname "$0")/../.." || exit 1
[ $# -ge 2 ] || { echo "usage: $0 ARCH SERVER [QEMU]" >&2; exit 2; }
ARCH=$1 SERVER=$(realpath "$2") QEMU=${3:-}
PYTHON=${PYTHON:-/usr/bin/python3}
if [ -n "$QEMU" ]; then
    SUITES=${SUITES:-raw sftp guarantees}
else
    SUITES=${SUITES:-raw sftp guarantees confine}
fi
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
# The sftp suite's test user runs the wrapper and writes its trace.
chmod 0777 "$T"
mkdir -m 1777 "$T/traces"
if [ -n "$QEMU" ]; then
    printf '#!/bin/sh\nexec %s -d strace -D %s/traces/t.$$ %s "$@"\n' \
        "$QEMU" "$T" "$SERVER" > "$T/server"
else
    printf '#!/bin/sh\nexec strace -D -f -qq -n -e raw=all -o %s/traces/t.$$ %s "$@"\n' \
        "$T" "$SERVER" > "$T/server"
fi
chmod 0755 "$T/server"
SUITES="$SUITES" tests/run-all.sh "$T/server" >&2
"$PYTHON" - "$T/traces" "$ARCH" "$SERVER" > "tests/unit/sandbox_calls_$ARCH.h" <<'EOF'
import os
import re
import sys

traces, arch, server = sys.argv[1:4]
# The arguments the filter's list checks, by call (a row of sandbox.c with
# checks needs its entry here): the others are recorded as 0.  "self" marks
# a pid that must be the process's own.
CHECKED = {
    "fcntl": (1, 2), "fcntl64": (1, 2), "madvise": (2,), "mremap": (3,),
    "socket": (0, 1, 2), "send": (3,), "sendto": (3,), "sendmsg": (2,),
    "futex": (1,), "futex_time64": (1,), "renameat2": (4,),
    "mmap": (2,), "mmap2": (2,), "mprotect": (2,), "prctl": (0,),
    "socketcall": (0,), "setsockopt": (0,), "getsockopt": (0,),
    "kill": ("self",), "tgkill": ("self",), "tkill": ("self",),
    "clone": (0, 1),
}
# strace: "PID [ NR] name(0x1, 0x2) = ..."; qemu: "PID name(1,2,...) = ...".
LINE = re.compile(r"^\d+\s+(?:\[\s*(\d+)\]\s+)?([a-z0-9_]+)\((.*?)\)\s+=")
# strace names a socketcall(2) (102 on i386 and s390x) by the call it makes,
# with that call's arguments: it is recorded as socketcall and its operation.
SOCKETCALL_NR = 102
SOCKETCALL_OPS = {
    "socket": 1, "bind": 2, "connect": 3, "listen": 4, "accept": 5,
    "getsockname": 6, "getpeername": 7, "socketpair": 8, "send": 9,
    "recv": 10, "sendto": 11, "recvfrom": 12, "shutdown": 13,
    "setsockopt": 14, "getsockopt": 15, "sendmsg": 16, "recvmsg": 17,
    "accept4": 18,
}
# Names qemu's log gives some values, as the kernel numbers them.
SYMBOLS = {
    "F_DUPFD": 0, "F_GETFD": 1, "F_SETFD": 2, "F_GETFL": 3, "F_SETFL": 4,
    "F_DUPFD_CLOEXEC": 1030, "F_SETPIPE_SZ": 1031, "F_GETPIPE_SZ": 1032,
    "FD_CLOEXEC": 1, "NULL": 0, "PF_UNIX": 1, "AF_UNIX": 1, "PF_LOCAL": 1,
    "SOCK_STREAM": 1, "SOCK_DGRAM": 2, "SOCK_CLOEXEC": 0o2000000,
    "SOCK_NONBLOCK": 0o4000, "PROT_NONE": 0, "PROT_READ": 1,
    "PROT_WRITE": 2, "PROT_EXEC": 4, "MADV_DONTNEED": 4, "MADV_FREE": 8,
    "O_RDONLY": 0, "O_WRONLY": 1, "O_RDWR": 2, "O_APPEND": 0o2000,
    "O_NONBLOCK": 0o4000, "O_ASYNC": 0o20000, "FASYNC": 0o20000,
    "IPPROTO_IP": 0,
}


def value(arg):
    """An argument as a number: 0x.., decimal, or names or'ed together."""
    total = 0
    for part in arg.strip().split("|"):
        part = part.strip()
        try:
            total |= int(part, 0)
        except ValueError:
            if part not in SYMBOLS:
                unknown.add(part)
            total |= SYMBOLS.get(part, 0)
    return total


unknown = set()
warned = set()


seen = set()
for f in sorted(os.listdir(traces)):
    on = False
    for line in open(os.path.join(traces, f), errors="replace"):
        m = LINE.match(line)
        if not m:
            continue
        nr, name, args = m.group(1), m.group(2), m.group(3).split(",")
        if name.startswith("syscall_"):
            name = str(int(name[len("syscall_"):], 0))
        vals = [value(a) for a in args]
        if not on:
            on = name == "prctl" and vals[:1] == [22]
            continue
        rec = [0] * 6
        if (arch in ("i386", "s390x") and nr is not None and
                int(nr) == SOCKETCALL_NR and name in SOCKETCALL_OPS):
            # Its socket(2) is refused on purpose (its family cannot be
            # seen): syslog(3) tries it where there is no /dev/log.
            if name != "socket":
                rec[0] = SOCKETCALL_OPS[name]
                seen.add(("socketcall", tuple(rec)))
            continue
        for i in CHECKED.get(name, ()):
            if i == "self":
                rec[0] = "SELF"
            elif i < len(vals):
                unknown.clear()
                rec[i] = value(args[i]) & 0xffffffff
                for u in unknown - warned:
                    sys.stderr.write("%s: argument %d: no value for %s\n" %
                                     (name, i, u))
                warned.update(unknown)
        unknown.clear()
        if name in ("fcntl", "fcntl64") and rec[1] != 4:
            rec[2] = 0          # only F_SETFL's flags are checked
        seen.add((name, tuple(rec)))
print("/*")
print(" * The system calls the protocol suites made %s make, once its" % arch)
print(" * sandbox was entered, with the arguments the filter checks (the others")
print(" * 0; SELF: the process's pid): tests/unit/record-sandbox-calls.sh")
print(" * wrote it.  A name, or a number where the tracer knew no name.")
print(" */")
for name, rec in sorted(seen, key=lambda r: (r[0], r[1])):
    args = ", ".join(str(a) if a == "SELF" else hex(a) if a > 9 else str(a)
                     for a in rec)
    if name.isdigit():
        print("\t{ NULL, %s, { %s } }," % (name, args))
    else:
        print("\t{ \"%s\", -1, { %s } }," % (name, args))
EOF
echo "wrote tests/unit/sandbox_calls_$ARCH.h: $(grep -c '^	{' "tests/unit/sandbox_calls_$ARCH.h") entries" >&2
