#!/usr/bin/python3
"""paramiko through a real sshd (driven by tests/sshd/run-sshd.sh).

Usage: sshd_paramiko.py HOST PORT USER KEY KNOWN_HOSTS REMOTE_DIR
       sshd_paramiko.py HOST PORT USER KEY KNOWN_HOSTS FILE disconnect

The second form writes 1 MiB to FILE (remote path) in acknowledged writes,
leaves it open and exits without closing the connection.

REMOTE_DIR is a directory on this machine that the SFTP server can write
(paramiko talks to it through sshd; the checks read it back directly with
os.stat and open). Prints "ok - NAME" / "FAIL - NAME: ..." per check; the
calling script counts them. Exit status 1 if any check failed.
"""

import os
import random
import stat
import sys
import time

import paramiko

FAILED = 0


def ok(name):
    print("ok - paramiko: %s" % name, flush=True)


def fail(name, why):
    global FAILED
    FAILED += 1
    print("FAIL - paramiko: %s: %s" % (name, why), flush=True)


def check_eq(name, expected, got):
    if expected == got:
        ok(name)
    else:
        e, g = repr(expected), repr(got)
        fail(name, "expected %s, got %s" % (e[:200], g[:200]))


def check_bytes(name, expected, got):
    if expected == got:
        ok(name)
        return
    if len(expected) != len(got):
        fail(name, "expected %d bytes, got %d" % (len(expected), len(got)))
        return
    first = next(i for i in range(len(expected)) if expected[i] != got[i])
    fail(name, "expected identical %d bytes, got a difference at offset %d"
         % (len(expected), first))


def check_raises(name, func, errno_expected=None):
    try:
        func()
    except IOError as e:
        if errno_expected is None or e.errno == errno_expected:
            ok(name)
        else:
            fail(name, "expected errno %s, got %r" % (errno_expected, e))
        return
    except Exception as e:  # pylint: disable=broad-except
        fail(name, "expected IOError, got %r" % e)
        return
    fail(name, "expected an error, got success")


def read_local(path):
    with open(path, "rb") as f:
        return f.read()


def connect():
    host, port, user, key, known_hosts = sys.argv[1:6]
    client = paramiko.SSHClient()
    client.load_host_keys(known_hosts)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(host, port=int(port), username=user, key_filename=key,
                   look_for_keys=False, allow_agent=False, timeout=30,
                   banner_timeout=30, auth_timeout=30)
    sftp = client.open_sftp()
    sftp.get_channel().settimeout(60)
    return client, sftp


def disconnect(path):
    """1 MiB in acknowledged writes, then gone without a word."""
    _, sftp = connect()
    f = sftp.open(path, "wb")
    f.set_pipelined(False)
    for _ in range(16):
        f.write(b"x" * 65536)
        f.flush()
    print("ok - paramiko: 1 MiB written, leaving without closing",
          flush=True)
    os._exit(0)  # pylint: disable=protected-access


def main():
    rdir = sys.argv[6]
    rnd = random.Random(20261129)
    try:
        client, sftp = connect()
    except Exception as e:  # pylint: disable=broad-except
        fail("connect and open the sftp subsystem", repr(e))
        return
    ok("connect and open the sftp subsystem (host key checked)")

    base = rdir + "/pm"
    os.mkdir(base)
    local = rdir + "/pm-local"
    os.mkdir(local)

    # normalize / chdir / getcwd
    check_eq("normalize('.') is the start directory", rdir,
             sftp.normalize("."))
    sftp.chdir(base)
    check_eq("chdir + getcwd", base, sftp.getcwd())

    # mkdir with a mode, listdir_attr against os.lstat
    sftp.mkdir("lsdir", 0o750)
    check_eq("mkdir with mode 0750", 0o750,
             stat.S_IMODE(os.stat(base + "/lsdir").st_mode))
    d = base + "/lsdir"
    with open(d + "/five", "wb") as f:
        f.write(b"hello")
    with open(d + "/big", "wb") as f:
        f.write(os.urandom(300000))
    os.chmod(d + "/big", 0o600)
    os.mkdir(d + "/sub")
    os.symlink("five", d + "/link")
    os.utime(d + "/five", (1000000000, 1234567890))
    want = {}
    for n in os.listdir(d):
        st = os.lstat(d + "/" + n)
        want[n] = (st.st_mode, st.st_size, st.st_uid, st.st_gid,
                   int(st.st_mtime))
    got = {}
    for a in sftp.listdir_attr("lsdir"):
        got[a.filename] = (a.st_mode, a.st_size, a.st_uid, a.st_gid,
                           a.st_mtime)
    check_eq("listdir_attr: names, modes, sizes, ids, mtimes as lstat",
             want, got)
    check_eq("listdir", sorted(want), sorted(sftp.listdir("lsdir")))

    # stat / lstat
    st = os.stat(d + "/five")
    a = sftp.stat("lsdir/link")
    check_eq("stat follows a symlink",
             (st.st_mode, st.st_size, int(st.st_atime), int(st.st_mtime)),
             (a.st_mode, a.st_size, a.st_atime, a.st_mtime))
    a = sftp.lstat("lsdir/link")
    check_eq("lstat of a symlink", True, stat.S_ISLNK(a.st_mode))
    check_raises("stat of a missing file: ENOENT",
                 lambda: sftp.stat("lsdir/missing"), 2)

    # put / get with prefetch, several sizes
    for size in (0, 1, 32768, 261121, 5 * 1048576 + 3, 24 * 1048576):
        data = os.urandom(size) if size < 1048576 else \
            rnd.randbytes(size)
        src = "%s/put%d" % (local, size)
        with open(src, "wb") as f:
            f.write(data)
        try:
            attrs = sftp.put(src, "put%d" % size, confirm=True)
            check_eq("put %d bytes: size reported" % size, size,
                     attrs.st_size)
            check_bytes("put %d bytes: remote contents" % size, data,
                        read_local("%s/put%d" % (base, size)))
            back = "%s/get%d" % (local, size)
            sftp.get("put%d" % size, back, prefetch=True)
            check_bytes("get %d bytes with prefetch" % size, data,
                        read_local(back))
        except Exception as e:  # pylint: disable=broad-except
            fail("put/get %d bytes" % size, repr(e))

    # file object: pipelined writes, prefetch reads, readv
    data = rnd.randbytes(3 * 1048576 + 17)
    with sftp.open("obj", "wb") as f:
        f.set_pipelined(True)
        for i in range(0, len(data), 65536):
            f.write(data[i:i + 65536])
    check_bytes("pipelined writes through a file object", data,
                read_local(base + "/obj"))
    with sftp.open("obj", "rb") as f:
        f.prefetch()
        got = f.read()
    check_bytes("prefetch read through a file object", data, got)
    # paramiko's readv waits forever for overlapping ranges (whatever the
    # server): disjoint ones, in random order
    chunks = [(o, rnd.randrange(1, 70000)) for o in
              rnd.sample(range(0, len(data) - 70000, 70000), 40)]
    with sftp.open("obj", "rb") as f:
        got = list(f.readv(chunks))
    want = [data[o:o + n] for o, n in chunks]
    check_eq("readv of 40 random ranges", True, got == want)

    # SFTPFile.check(): the server's digests against hashlib's on the same
    # bytes, whole file, a range, and per block (check-file)
    import hashlib
    import zlib

    def digest(alg, b):
        if alg == "crc32":
            return zlib.crc32(b).to_bytes(4, "big")
        return hashlib.new(alg, b).digest()

    with sftp.open("obj", "rb") as f:
        for alg in ("md5", "sha1", "sha224", "sha256", "sha384", "sha512",
                    "crc32"):
            try:
                check_bytes("check(%s): whole file" % alg, digest(alg, data),
                            f.check(alg))
                check_bytes("check(%s): bytes 1000 to 1001000" % alg,
                            digest(alg, data[1000:1001000]),
                            f.check(alg, 1000, 1000000))
                blocks = b"".join(digest(alg, data[o:o + 262144]) for o in
                                  range(17, len(data), 262144))
                check_bytes("check(%s): 256 KiB blocks from 17" % alg,
                            blocks, f.check(alg, 17, 0, 262144))
            except Exception as e:  # pylint: disable=broad-except
                fail("check(%s)" % alg, repr(e))

    # random access reads and writes against a model
    model = bytearray(rnd.randbytes(1048576))
    with open(base + "/rand", "wb") as f:
        f.write(model)
    bad = []
    with sftp.open("rand", "r+b") as f:
        for i in range(300):
            off = rnd.randrange(len(model) + 5000)
            n = rnd.randrange(1, 40000)
            if i % 2:
                chunk = rnd.randbytes(n)
                f.seek(off)
                f.write(chunk)
                if off > len(model):
                    model.extend(b"\0" * (off - len(model)))
                model[off:off + n] = chunk
            else:
                f.seek(off)
                got = f.read(n)
                if got != bytes(model[off:off + n]):
                    bad.append(off)
        f.flush()
        size = f.stat().st_size
    check_eq("random reads see the random writes before them", [], bad)
    check_eq("fstat size after random writes", len(model), size)
    check_bytes("file after 150 random writes", bytes(model),
                read_local(base + "/rand"))

    # offsets past 4 GiB (a sparse file)
    big = 5 * 1024 ** 3 + 12345
    with sftp.open("sparse", "wb") as f:
        f.seek(big)
        f.write(b"far away")
    with sftp.open("sparse", "rb") as f:
        f.seek(big - 4)
        got = f.read(100)
    check_eq("write and read at an offset past 4 GiB",
             (big + 8, b"\0\0\0\0far away"),
             (os.stat(base + "/sparse").st_size, got))
    os.unlink(base + "/sparse")

    # a directory that takes several READDIR rounds
    os.mkdir(base + "/many")
    names = ["entry-%04d-%s" % (i, "x" * (i % 50)) for i in range(3000)]
    for n in names:
        open(base + "/many/" + n, "wb").close()
    got = sorted(a.filename for a in sftp.listdir_attr("many"))
    check_eq("listdir_attr of 3000 entries", sorted(names), got)

    # append mode, exclusive create
    with open(base + "/app", "wb") as f:
        f.write(b"start|")
    with sftp.open("app", "a") as f:
        f.write(b"appended")
    check_eq("open in append mode", b"start|appended",
             read_local(base + "/app"))
    check_raises("open 'wx' of an existing file fails",
                 lambda: sftp.open("app", "wx"))
    with sftp.open("excl", "wx") as f:
        f.write(b"new")
    check_eq("open 'wx' of a new file", b"new", read_local(base + "/excl"))

    # truncate (setstat size) and file.truncate (fsetstat size)
    sftp.truncate("rand", 1000)
    check_eq("truncate shrinks", bytes(model[:1000]),
             read_local(base + "/rand"))
    sftp.truncate("rand", 5000)
    check_eq("truncate extends with zeros", bytes(model[:1000]) +
             b"\0" * 4000, read_local(base + "/rand"))
    with sftp.open("rand", "r+") as f:
        f.truncate(10)
    check_eq("file.truncate", bytes(model[:10]), read_local(base + "/rand"))

    # utime, chmod
    sftp.utime("app", (1111111111, 1222222222))
    st = os.stat(base + "/app")
    check_eq("utime sets atime and mtime", (1111111111, 1222222222),
             (int(st.st_atime), int(st.st_mtime)))
    sftp.utime("excl", None)
    check_eq("utime(None) sets the current time", True,
             abs(os.stat(base + "/excl").st_mtime - time.time()) < 60)
    sftp.chmod("app", 0o604)
    check_eq("chmod", 0o604, stat.S_IMODE(os.stat(base + "/app").st_mode))

    # symlink / readlink
    sftp.symlink("app", "lnk")
    check_eq("symlink creates a link with the given target", "app",
             os.readlink(base + "/lnk"))
    check_eq("readlink", "app", sftp.readlink("lnk"))
    sftp.symlink("/nonexistent/target", "dangling")
    check_eq("readlink of a dangling absolute link", "/nonexistent/target",
             sftp.readlink("dangling"))
    with sftp.open("lnk", "rb") as f:
        check_eq("read through a symlink", b"start|appended", f.read())

    # rename / posix_rename
    with open(base + "/r1", "wb") as f:
        f.write(b"one")
    with open(base + "/r2", "wb") as f:
        f.write(b"two")
    check_raises("rename onto an existing file fails",
                 lambda: sftp.rename("r1", "r2"))
    check_eq("failed rename leaves both files", (b"one", b"two"),
             (read_local(base + "/r1"), read_local(base + "/r2")))
    sftp.posix_rename("r1", "r2")
    check_eq("posix_rename replaces the target",
             (False, b"one"), (os.path.exists(base + "/r1"),
                               read_local(base + "/r2")))
    sftp.rename("r2", "r3")
    check_eq("rename to a new name", (False, b"one"),
             (os.path.exists(base + "/r2"), read_local(base + "/r3")))

    # remove, rmdir, errors
    sftp.remove("r3")
    check_eq("remove", False, os.path.exists(base + "/r3"))
    sftp.mkdir("gone")
    sftp.rmdir("gone")
    check_eq("rmdir", False, os.path.exists(base + "/gone"))
    check_raises("remove of a missing file: ENOENT",
                 lambda: sftp.remove("missing"), 2)
    check_raises("open of a missing file: ENOENT",
                 lambda: sftp.open("missing", "r"), 2)

    check_eq("session still usable after errors", True,
             "app" in sftp.listdir("."))

    sftp.close()
    client.close()


if __name__ == "__main__":
    try:
        if sys.argv[7:] == ["disconnect"]:
            disconnect(sys.argv[6])
        main()
    except Exception as e:  # pylint: disable=broad-except
        fail("unexpected exception", repr(e))
    sys.exit(1 if FAILED else 0)
