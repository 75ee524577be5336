#!/usr/bin/env python3
"""Which of the calls the server relies on a file system has.

Used by tests/fs/run-fs-matrix.sh (suite "calls") on each file system of
its matrix: in a directory made under $TMPDIR (the mount), each call is
tried once and reported, with the fallback the server takes where it is
missing.  Every line is "ok - calls: NAME: ..." (a report, not a check:
what a file system lacks is not a failure), then "N passed, 0 failed".
"""

import ctypes
import errno
import os
import shutil
import tempfile

AT_FDCWD = -100
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
SYS_OPENAT2, SYS_FCHMODAT2 = 437, 452          # x86_64 and the others alike
RESOLVE_IN_ROOT = 0x10
AT_EMPTY_PATH = 0x1000

libc = ctypes.CDLL(None, use_errno=True)


def err():
    e = ctypes.get_errno()
    return "no (%s)" % errno.errorcode.get(e, e)


def main():
    d = tempfile.mkdtemp(prefix="fs-calls-")
    p = lambda n: os.path.join(d, n).encode()   # noqa: E731
    out = []
    try:
        for n in (b"a", b"b", b"c"):
            with open(p(n.decode()), "wb") as f:
                f.write(b"x" * 65536)
        # copy_file_range: copy-data copies by hand without it
        try:
            with open(p("a"), "rb") as src, open(p("c"), "r+b") as dst:
                n = os.copy_file_range(src.fileno(), dst.fileno(), 65536)
            out.append(("copy_file_range", "yes (%d bytes)" % n))
        except OSError as e:
            out.append(("copy_file_range", "no (%s): copy-data by pread/"
                        "pwrite" % errno.errorcode.get(e.errno, e.errno)))
        # renameat2: RENAME refuses an existing target atomically with it
        r = libc.renameat2(AT_FDCWD, p("a"), AT_FDCWD, p("b"),
                           RENAME_NOREPLACE)
        got = "yes" if r == -1 and ctypes.get_errno() == errno.EEXIST \
            else err() + ": RENAME by link and unlink, as OpenSSH"
        out.append(("renameat2 RENAME_NOREPLACE", got))
        r = libc.renameat2(AT_FDCWD, p("a"), AT_FDCWD, p("b"),
                           RENAME_EXCHANGE)
        out.append(("renameat2 RENAME_EXCHANGE (tests only)",
                    "yes" if r == 0 else err()))
        try:
            os.link(p("a"), p("hard"))
            out.append(("link", "yes"))
        except OSError as e:
            out.append(("link", "no (%s): hardlink fails as OpenSSH's; "
                        "RENAME checks, then renames" %
                        errno.errorcode.get(e.errno, e.errno)))
        fd = os.open(p("a"), os.O_PATH)
        libc.syscall.restype = ctypes.c_long
        r = libc.syscall(ctypes.c_long(SYS_FCHMODAT2), fd, b"",
                         ctypes.c_uint(0o640), AT_EMPTY_PATH)
        out.append(("fchmodat2 on O_PATH", "yes" if r == 0 else
                    err() + ": chmod through /proc/self/fd"))
        os.close(fd)

        class How(ctypes.Structure):
            _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                        ("resolve", ctypes.c_uint64)]
        dfd = os.open(d, os.O_PATH | os.O_DIRECTORY)
        how = How(os.O_PATH, 0, RESOLVE_IN_ROOT)
        r = libc.syscall(ctypes.c_long(SYS_OPENAT2), dfd, b"../b",
                         ctypes.byref(how), ctypes.c_size_t(24))
        out.append(("openat2 RESOLVE_IN_ROOT", "yes" if r >= 0 else
                    err() + ": -r refuses to start"))
        if r >= 0:
            os.close(r)
        os.close(dfd)
        st = os.statvfs(d)
        out.append(("statvfs", "bsize %d, blocks %d, files %d%s" % (
            st.f_bsize, st.f_blocks, st.f_files,
            " (no inode counts)" if st.f_files == 0 else "")))
        kinds = {e.name: e.is_dir(follow_symlinks=False)
                 for e in os.scandir(d)}
        out.append(("readdir", "%d entries; the server stats each entry, "
                    "d_type or not" % len(kinds)))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    for name, what in out:
        print("ok - calls: %s: %s" % (name, what))
    print("%d passed, 0 failed" % len(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
