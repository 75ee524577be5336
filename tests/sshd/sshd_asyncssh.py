#!/usr/bin/python3
"""asyncssh through a real sshd (driven by tests/sshd/run-sshd.sh).

Usage: sshd_asyncssh.py HOST PORT USER KEY KNOWN_HOSTS REMOTE_DIR

REMOTE_DIR is a directory on this machine that the SFTP server can write
(asyncssh talks to it through sshd; the checks read it back directly).
Prints "ok - NAME" / "FAIL - NAME: ..." per check; the calling script counts
them.  Exit status 1 if any check failed.
"""

import asyncio
import os
import random
import stat
import sys
import warnings

warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", module="asyncssh")
import asyncssh  # noqa: E402

FAILED = 0


def ok(name):
    print("ok - asyncssh: %s" % name, flush=True)


def fail(name, why):
    global FAILED
    FAILED += 1
    print("FAIL - asyncssh: %s: %s" % (name, why), flush=True)


def check_eq(name, expected, got):
    if expected == got:
        ok(name)
    else:
        fail(name, "expected %r, got %r" % (expected, got))


async def expect_error(name, code, coro):
    """coro must fail with an SFTPError of the given code."""
    try:
        await coro
    except asyncssh.SFTPError as e:
        check_eq(name, code, e.code)
        return
    fail(name, "expected SFTP error %d, got success" % code)


async def main(host, port, user, key, known_hosts, rdir):
    rnd = random.Random(7)
    local = os.path.join(rdir, "as-local")
    os.makedirs(local, exist_ok=True)
    async with asyncssh.connect(host, port=int(port), username=user,
                                client_keys=[key],
                                known_hosts=known_hosts) as conn:
        async with conn.start_sftp_client() as sftp:
            check_eq("protocol version", 3, sftp.version)
            home = await sftp.realpath(".")
            ok("realpath . is %s" % home)
            # Transfers of several sizes, with asyncssh's parallel requests.
            for size in (0, 1, 32768, 261121, 8 * 1024 * 1024 + 17):
                data = rnd.randbytes(size)
                src = os.path.join(local, "src-%d" % size)
                with open(src, "wb") as f:
                    f.write(data)
                dst = os.path.join(rdir, "as-up-%d" % size)
                await sftp.put(src, dst)
                with open(dst, "rb") as f:
                    check_eq("put %d bytes: contents" % size, True,
                             f.read() == data)
                back = os.path.join(local, "back-%d" % size)
                await sftp.get(dst, back)
                with open(back, "rb") as f:
                    check_eq("get %d bytes: contents" % size, True,
                             f.read() == data)
            # Random access through an open file.
            path = os.path.join(rdir, "as-random")
            model = bytearray(200000)
            async with sftp.open(path, "wb+") as f:
                await f.write(bytes(model))
                for _ in range(100):
                    off = rnd.randrange(0, len(model) - 5000)
                    chunk = rnd.randbytes(rnd.randrange(1, 5000))
                    await f.write(chunk, off)
                    model[off:off + len(chunk)] = chunk
                    roff = rnd.randrange(0, len(model))
                    n = rnd.randrange(1, 70000)
                    got = await f.read(n, roff)
                    if got != bytes(model[roff:roff + n]):
                        fail("random access", "read at %d len %d differs" %
                             (roff, n))
                        break
                else:
                    ok("random access: 100 writes and reads match a model")
            with open(path, "rb") as f:
                check_eq("random access: file on disk", True,
                         f.read() == bytes(model))
            # Attributes and names.
            st = await sftp.stat(path)
            check_eq("stat size", len(model), st.size)
            await sftp.chmod(path, 0o640)
            check_eq("chmod", 0o640, stat.S_IMODE(os.stat(path).st_mode))
            await sftp.utime(path, (1000000000, 1200000000))
            check_eq("utime", (1000000000, 1200000000),
                     (int(os.stat(path).st_atime),
                      int(os.stat(path).st_mtime)))
            await sftp.truncate(path, 1234)
            check_eq("truncate", 1234, os.path.getsize(path))
            d = os.path.join(rdir, "as-dir")
            await sftp.mkdir(d)
            for i in range(250):
                with open(os.path.join(d, "f%03d" % i), "w") as f:
                    f.write("x" * i)
            names = await sftp.listdir(d)
            check_eq("listdir of 250 files",
                     sorted(["f%03d" % i for i in range(250)]),
                     sorted(n for n in names if n not in (".", "..")))
            entries = await sftp.readdir(d)
            sizes = {e.filename: e.attrs.size for e in entries}
            check_eq("readdir attributes", 17, sizes.get("f017"))
            check_eq("readdir long names look like ls -l", True,
                     all(e.longname.startswith("-rw") for e in entries
                         if e.filename.startswith("f")))
            await sftp.symlink("as-random", os.path.join(rdir, "as-link"))
            check_eq("symlink (OpenSSH order)", "as-random",
                     os.readlink(os.path.join(rdir, "as-link")))
            check_eq("readlink", "as-random",
                     await sftp.readlink(os.path.join(rdir, "as-link")))
            await sftp.link(path, os.path.join(rdir, "as-hard"))
            check_eq("hardlink", 2, os.stat(path).st_nlink)
            await sftp.rename(os.path.join(rdir, "as-hard"),
                              os.path.join(rdir, "as-renamed"))
            check_eq("rename", True,
                     os.path.exists(os.path.join(rdir, "as-renamed")))
            await expect_error("rename onto an existing file fails",
                               asyncssh.sftp.FX_FAILURE,
                               sftp.rename(path, os.path.join(rdir,
                                                              "as-renamed")))
            # A file of its own: rename(2) between two links of one file
            # does nothing.
            other = os.path.join(rdir, "as-other")
            with open(other, "wb") as f:
                f.write(b"other")
            await sftp.posix_rename(other, os.path.join(rdir, "as-renamed"))
            with open(os.path.join(rdir, "as-renamed"), "rb") as f:
                check_eq("posix-rename replaces the target", b"other",
                         f.read())
            check_eq("posix-rename: the old name is gone", False,
                     os.path.exists(other))
            vfs = await sftp.statvfs(rdir)
            check_eq("statvfs block size", os.statvfs(rdir).f_bsize,
                     vfs.bsize)
            await sftp.remove(os.path.join(rdir, "as-link"))
            await expect_error("remove of a missing file",
                               asyncssh.sftp.FX_NO_SUCH_FILE,
                               sftp.remove(os.path.join(rdir, "missing")))
            await expect_error("rmdir of a non-empty directory",
                               asyncssh.sftp.FX_FAILURE, sftp.rmdir(d))
            # Server-side copy (copy-data) where asyncssh offers it.
            if hasattr(sftp, "remote_copy"):
                await sftp.remote_copy(path, os.path.join(rdir, "as-copy"))
                with open(os.path.join(rdir, "as-copy"), "rb") as f:
                    check_eq("remote_copy (copy-data)", bytes(model[:1234]),
                             f.read())
    return FAILED == 0


if __name__ == "__main__":
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    try:
        good = asyncio.run(main(*sys.argv[1:]))
    except Exception as e:  # a crash of the script is a failure too
        fail("script", "%s: %s" % (type(e).__name__, e))
        good = False
    sys.exit(0 if good else 1)
