#!/usr/bin/env python3
"""Atomic uploads (-A), from outside the session.

The server under test ($SFTP_SERVER, default sftp-server in the
repository's root) runs with -A in a fresh directory; the test looks at
the files with the system's own calls, as another program would.  Unless
a check says otherwise the sandbox is on, and new files are unnamed
(O_TMPFILE); tests/protocol/shim_fs_faults.c stands for the kernels and
file systems where they cannot be (hidden names).

Checks:
  reader_sees_whole_files   a 256 MiB upload over a 4 MiB file while
                            another process opens and reads the target in
                            a loop: every read is the whole old file or the
                            whole new one; halfway, the target is the old
                            file.  Without -A the same halfway read is
                            neither (the check can fail)
  sigkill_leaves_the_old_file   the server killed with SIGKILL halfway:
                            the old file and nothing else, or nothing for
                            a new file; with hidden names, the hidden file
                            is what is left (the manual says so)
  client_leaves, sigterm    the client closes the pipes, or SIGTERM,
                            halfway: the old file and nothing else, with
                            unnamed files and with hidden names
  failed_write_discards     a WRITE into the upload fails (ESTALE, from
                            shim_fs_faults.c): its CLOSE fails with it and
                            the old file stays, nothing else
  mode_refused_at_close     fchmod refused at the CLOSE (shim_fs_faults.c,
                            as on a file system of fixed modes): an upload
                            whose mode would be wider than the old file's
                            is not put in place (PERMISSION_DENIED), one no
                            wider is
  own_handle                through the upload's handle: READ, FSTAT,
                            FSETSTAT, fsync, check-file and copy-data act
                            on the upload; STAT, LSTAT, READDIR and an OPEN
                            for reading of the target see the old file
  replace_keeps_mode        an upload over a file takes its mode; a hard
                            link to the old file keeps the old content
  attributes_at_close       the upload takes what the old file has at the
                            CLOSE: a mode changed meanwhile (by another
                            program, or SETSTAT of the target), and its
                            extended attributes, the ACL that keeps a user
                            out among them
  hidden_name_is_its_own    with hidden names: a client that renames the
                            upload away and another file onto its hidden
                            name (-P remove,posix-rename) has that file
                            neither removed when the session ends nor put
                            in place by the CLOSE
  others_files_in_place     a session not run as root writes in place a
                            file of another user, or of a group it is not
                            a member of (a new file could not keep them),
                            in a sticky directory and a plain one; its own
                            file of its own group is replaced
  changed_meanwhile         as nobody: a file whose owner or group is
                            changed to ones the session cannot give between
                            the OPEN and the CLOSE is not replaced (the
                            CLOSE fails, PERMISSION_DENIED); an FSETSTAT
                            whose mode was set but whose owner was refused
                            keeps that mode at the CLOSE
  as_written_in_place       a replaced file's set-ID bits and file
                            capabilities end as an upload in place leaves
                            them: a session as root keeps set-user-ID and
                            loses the capabilities, one as nobody loses
                            both set-ID bits (the kernel's rules on write)
  trailing_slash            an upload to "new/" or "t/" (t a file) fails
                            as OpenSSH's OPEN does (FAILURE), nothing made
  handles_a_third           limits@openssh.com: a third of the handles of a
                            session without -A (an upload holds up to three
                            descriptors)
  symlink_followed          an upload through a symlink replaces the file
                            it names, and the symlink stays; under -r an
                            absolute symlink and ".." stay beneath the root
  filepart_then_rename      as WinSCP: an upload to NAME.filepart, its
                            CLOSE, then a RENAME (and a posix-rename) over
                            NAME: the file whole under NAME, nothing else
  resume_in_place           an OPEN that neither creates nor truncates
                            writes in place, seen at once
  last_close_wins           two sessions upload one name: the last CLOSE
                            wins, in both orders, each version whole
  excl                      O_EXCL: a name made meanwhile by another
                            program makes the CLOSE fail; the other file
                            stays, nothing else is left
  readonly                  -R refuses the upload, nothing is made
  transfer_log              -L: "placed":true for an upload put in place,
                            false (and forced) for one the client left
  log_guard                 -L: an upload onto the log's name is refused
  deny_list                 -P rename,remove,hardlink,posix-rename: uploads
                            still go in place (CLOSE is not a RENAME)
  where_uploads_go          on this file system: an unnamed file
                            (O_TMPFILE), or a hidden name (said, not
                            failed: tests/fs/run-fs-matrix.sh shows it)
  fallbacks                 before Linux 6.10 (linkat AT_EMPTY_PATH
                            refused): through /proc; without /proc too:
                            hidden names; a file system without O_TMPFILE:
                            hidden names

Usage: test_atomic.py [NAME-SUBSTRING ...]
Prints one line per check, then "N passed, M failed[, K skipped]"; exits 1
if any failed.
"""

import multiprocessing
import os
import shutil
import signal
import stat
import struct
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # leave no __pycache__ in the tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))

from sftpwire import *  # noqa: E402,F401,F403
import suite  # noqa: E402
from suite import expect, expect_eq, expect_type, test  # noqa: E402
from suite import expect_ok as ok, json_lines as records  # noqa: E402

SERVER_ARGV = server_argv()
SHIM_SOURCE = os.path.join(HERE, "shim_fs_faults.c")
UMASK = 0o022
UP = SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC
CHUNK = 255 * 1024
PREFIX = ".sftp-upload."


class Ctx:
    def __init__(self):
        self.tmp = os.path.realpath(tempfile.mkdtemp(prefix="sftp-atomic-"))
        self.servers = []
        self.procs = []
        self.extra = []     # directories of the test's own, removed after

    def server(self, args=(), env=None, cwd=None, init=True):
        srv = Server(SERVER_ARGV + ["-A"] + list(args), cwd=cwd or self.tmp,
                     env=env, umask=UMASK)
        self.servers.append(srv)
        if init:
            srv.init()
        return srv

    def shimmed(self, **faults):
        """The environment of a server with the fault shim."""
        shim = suite.shim_library(SHIM_SOURCE, "sftp-atomic-shim-")
        env = dict(os.environ)
        env["LD_PRELOAD"] = shim
        for k, v in faults.items():
            env["FAULT_" + k] = v
        opts = env.get("ASAN_OPTIONS", "")
        env["ASAN_OPTIONS"] = (opts + ":" if opts else "") + \
            "verify_asan_link_order=0"
        return env

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def write(self, name, data, mode=0o644):
        with open(self.path(name), "wb") as f:
            f.write(data)
        os.chmod(self.path(name), mode)

    def read(self, name):
        with open(self.path(name), "rb") as f:
            return f.read()

    def cleanup(self):
        for p in self.procs:
            if p.is_alive():
                p.kill()
        for srv in self.servers:
            srv.kill()
        for d in self.extra + [self.tmp]:
            shutil.rmtree(d, ignore_errors=True)



def blob(seed, n):
    """n bytes that differ from those of any other seed."""
    import random
    return random.Random(seed).randbytes(n)


def send_writes(srv, h, data, start, end):
    """WRITEs of data[start:end) in CHUNK pieces, 32 in flight; all OK."""
    pending = []
    off = start
    while off < end or pending:
        while off < end and len(pending) < 32:
            n = min(CHUNK, end - off)
            pending += srv.send_many([req_write(h, off, data[off:off + n])])
            off += n
        reply = srv.recv()
        expect_eq("WRITE reply id", reply.id, pending.pop(0))
        ok(reply, "WRITE")


def unnamed_here(ctx):
    """Whether the file system of ctx.tmp makes unnamed files (O_TMPFILE):
    where it does not (FUSE, GlusterFS), uploads have hidden names."""
    try:
        fd = os.open(ctx.tmp, os.O_TMPFILE | os.O_WRONLY, 0o600)
    except OSError:
        return False
    os.close(fd)
    return True


def one_hidden(left, target):
    """Whether left is target and one hidden name of an upload of it."""
    hidden = [n for n in left if n != target]
    return target in left and len(hidden) == 1 and \
        hidden[0].startswith(PREFIX) and hidden[0].endswith("." + target) \
        and len(hidden[0]) == len(PREFIX) + 12 + 1 + len(target)


def names(ctx, sub=""):
    return sorted(os.listdir(ctx.path(sub) if sub else ctx.tmp))


def half_upload(ctx, srv, target, new, pflags=UP):
    """An upload of new to target, written halfway."""
    h = srv.open(target, pflags)
    send_writes(srv, h, new, 0, len(new) // 2)
    return h


def reader(path, count, stop, bad, missing):
    """Reads path whole in a loop until stop is set: counts the whole reads
    and those that found no file (missing), and notes in bad the size of
    one that is neither path.want0's contents nor path.want1's."""
    with open(path + ".want0", "rb") as f:
        want0 = f.read()
    with open(path + ".want1", "rb") as f:
        want1 = f.read()
    while not stop.is_set():
        try:
            with open(path, "rb") as f:
                got = f.read()
        except FileNotFoundError:
            missing.value += 1
            continue
        if got != want0 and got != want1:
            bad.value = len(got)
            return
        count.value += 1


@test
def test_reader_sees_whole_files(ctx):
    old = blob(1, 4 << 20)
    new = b"".join(blob(100 + i, 1 << 20) for i in range(256))
    os.mkdir(ctx.path("want"))
    with open(ctx.path("want", "t.want0"), "wb") as f:
        f.write(old)
    with open(ctx.path("want", "t.want1"), "wb") as f:
        f.write(new)
    results = []
    misses = 0
    for atomic in (True, False):
        ctx.write("t", old)
        srv = Server(SERVER_ARGV + (["-A"] if atomic else []), cwd=ctx.tmp,
                     umask=UMASK)
        ctx.servers.append(srv)
        srv.init()
        h = srv.open("t", UP)
        count = multiprocessing.Value("l", 0)
        bad = multiprocessing.Value("l", -1)
        missing = multiprocessing.Value("l", 0)
        stop = multiprocessing.Event()
        # The reader reads what the target is now, from another process.
        os.symlink(ctx.path("t"), ctx.path("want", "t"))
        if atomic:
            p = multiprocessing.Process(
                target=reader, args=(ctx.path("want", "t"), count, stop,
                                     bad, missing))
            ctx.procs.append(p)
            p.start()
        send_writes(srv, h, new, 0, len(new) // 2)
        halfway = ctx.read("t")
        send_writes(srv, h, new, len(new) // 2, len(new))
        ok(srv.call(req_close(h)), "CLOSE")
        after = ctx.read("t")
        if atomic:
            # Reads after the CLOSE too: the new file, whole.
            deadline = time.monotonic() + 60
            seen = count.value
            while count.value < seen + 3 and bad.value == -1 and \
                    p.is_alive() and time.monotonic() < deadline:
                time.sleep(0.01)    # polls a count, with a deadline
            stop.set()
            p.join(60)
            expect(bad.value == -1, "the reader saw a file of %d bytes, "
                   "neither the old one nor the new one" % bad.value)
            misses = missing.value
            expect(misses == 0 or on_fuse(ctx.tmp),
                   "the reader found no file %d times" % misses)
            expect(count.value >= 3, "the reader read %d times" %
                   count.value)
            expect(halfway == old, "halfway, the target is not the old "
                   "file (%d bytes)" % len(halfway))
            expect_eq("the directory", names(ctx), ["t", "want"])
        else:
            expect(halfway != old and halfway != new,
                   "without -A, halfway, the target is already whole: the "
                   "check could not fail")
        expect(after == new, "after CLOSE, the target is not the new file")
        srv.close()
        os.unlink(ctx.path("want", "t"))
        results.append(count.value)
    return "%d whole reads during and after the upload%s; without -A the " \
        "halfway read was partial" % (results[0], "" if not misses else
                                      ", %d found no file: on FUSE, the "
                                      "daemon's rename is not atomic for an "
                                      "open beside it" % misses)


def on_fuse(path):
    """Whether path is on a FUSE file system, whose daemon decides whether
    a rename(2) that replaces a file is atomic for an open(2) beside it:
    through bindfs, such an open finds no file now and then."""
    best, fstype = "", ""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            mnt = fields[4].replace("\\040", " ")
            typ = fields[fields.index("-") + 1]
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and \
                    len(mnt) >= len(best):
                best, fstype = mnt, typ
    return fstype.startswith("fuse")


def killed_midway(ctx, how, env=None, exist=True):
    """An upload halfway, then the session ended by how: what is left."""
    old, new = blob(3, 1 << 20), blob(4, 8 << 20)
    if exist:
        ctx.write("t", old)
    srv = ctx.server(env=env)
    half_upload(ctx, srv, "t", new)
    if how == "kill":
        srv.proc.send_signal(signal.SIGKILL)
    elif how == "term":
        srv.proc.send_signal(signal.SIGTERM)
    else:
        srv.close_stdin()
    srv.wait(30)
    left = names(ctx)
    if exist:
        expect(ctx.read("t") == old, "%s: the target is not the old file" %
               how)
    return left


@test
def test_sigkill_leaves_the_old_file(ctx):
    unnamed = unnamed_here(ctx)
    left = killed_midway(ctx, "kill")
    if unnamed:
        expect_eq("left after SIGKILL (unnamed)", left, ["t"])
    else:
        expect(one_hidden(left, "t"), "left after SIGKILL, on a file "
               "system without O_TMPFILE: %r" % left)
    for f in os.listdir(ctx.tmp):
        os.unlink(ctx.path(f))
    left = killed_midway(ctx, "kill", exist=False)
    if unnamed:
        expect_eq("left after SIGKILL of a new file's upload", left, [])
    else:
        expect(len(left) == 1 and one_hidden(left + ["t"], "t"),
               "left after SIGKILL of a new file's upload: %r" % left)
    for f in os.listdir(ctx.tmp):
        os.unlink(ctx.path(f))
    env = ctx.shimmed(TMPFILE="EOPNOTSUPP")
    left = killed_midway(ctx, "kill", env=env)
    expect(one_hidden(left, "t"), "hidden names: left %r" % left)
    return "%s; hidden names: %s left" % (
        "unnamed: nothing left" if unnamed else "no O_TMPFILE here",
        [n for n in left if n != "t"][0])


@test
def test_client_leaves(ctx):
    expect_eq("left after the client left", killed_midway(ctx, "leave"),
              ["t"])
    env = ctx.shimmed(TMPFILE="EOPNOTSUPP")
    expect_eq("left after the client left (hidden names)",
              killed_midway(ctx, "leave", env=env), ["t"])


@test
def test_sigterm(ctx):
    expect_eq("left after SIGTERM", killed_midway(ctx, "term"), ["t"])
    env = ctx.shimmed(TMPFILE="EOPNOTSUPP")
    expect_eq("left after SIGTERM (hidden names)",
              killed_midway(ctx, "term", env=env), ["t"])


@test
def test_failed_write_discards(ctx):
    ctx.write("t", b"old")
    srv = ctx.server(env=ctx.shimmed(ESTALE_PREFIX=ctx.tmp))
    h = srv.open("t", UP)
    reply = srv.call(req_write(h, 0, b"never whole"))
    expect_type(reply, Status, "WRITE")
    expect(reply.code != SSH_FX_OK, "the WRITE did not fail: the shim did "
           "not reach the upload")
    reply = srv.call(req_close(h))
    expect_type(reply, Status, "CLOSE")
    expect_eq("CLOSE of an upload whose WRITE failed", reply.code,
              SSH_FX_FAILURE)
    expect_eq("the target", ctx.read("t"), b"old")
    expect_eq("the directory", names(ctx), ["t"])


@test
def test_mode_refused_at_close(ctx):
    env = ctx.shimmed(FCHMOD="EPERM")
    for name, old_mode, placed in (("narrow", 0o600, False),
                                   ("same", 0o644, True)):
        ctx.write(name, b"old", mode=old_mode)
        srv = ctx.server(env=env)
        h = srv.open(name, UP, Attrs(permissions=0o644))
        ok(srv.call(req_write(h, 0, b"new")), "WRITE")
        reply = srv.call(req_close(h))
        expect_type(reply, Status, "CLOSE %s" % name)
        expect_eq("CLOSE over a %o file, its mode refused" % old_mode,
                  reply.code,
                  SSH_FX_OK if placed else SSH_FX_PERMISSION_DENIED)
        srv.close()
        st = os.stat(ctx.path(name))
        expect_eq("%s: the target and its mode" % name,
                  (ctx.read(name), stat.S_IMODE(st.st_mode)),
                  (b"new" if placed else b"old", old_mode))
    expect_eq("the directory", names(ctx), ["narrow", "same"])


@test
def test_own_handle(ctx):
    old, new = blob(5, 10000), blob(6, 30000)
    ctx.write("t", old)
    ctx.write("src", blob(7, 5000))
    srv = ctx.server()
    h = srv.open("t", SSH_FXF_READ | UP)
    send_writes(srv, h, new, 0, len(new))
    got = srv.call(req_read(h, 100, 1000))
    expect_type(got, Data, "READ through the upload")
    expect(got.data == new[100:1100], "READ through the upload: not the "
           "new bytes")
    a = srv.call(req_fstat(h))
    expect_type(a, AttrsReply, "FSTAT")
    expect_eq("FSTAT size", a.attrs.size, len(new))
    ok(srv.call(req_fsetstat(h, Attrs(permissions=0o600))), "FSETSTAT")
    ok(srv.call(req_fsync(h)), "fsync")
    r = srv.open("src", SSH_FXF_READ)
    ok(srv.call(req_copy_data(r, 0, 5000, h, len(new))), "copy-data")
    final = new + blob(7, 5000)
    ck = srv.call(req_extended("check-file-handle", string(h) +
                               string("md5") + u64(0) + u64(0) + u32(0)))
    expect_type(ck, ExtendedReply, "check-file-handle")
    import hashlib
    expect(hashlib.md5(final).digest() in ck.data, "check-file-handle: "
           "not the digest of the upload")
    # The target, by its name: the old file.
    a = srv.call(req_stat("t"))
    expect_type(a, AttrsReply, "STAT")
    expect_eq("STAT size during the upload", a.attrs.size, len(old))
    a = srv.call(req_lstat("t"))
    expect_eq("LSTAT size during the upload", a.attrs.size, len(old))
    o = srv.open("t", SSH_FXF_READ)
    got = srv.call(req_read(o, 0, 20000))
    expect(got.data == old, "an OPEN for reading: not the old file")
    d = srv.opendir(".")
    batches, _ = srv.readdir_all(d)
    listed = sorted(n.filename for b in batches for n in b.entries)
    if unnamed_here(ctx):
        expect_eq("READDIR", listed, [b".", b"..", b"src", b"t"])
    else:   # the hidden name is an entry of the directory
        rest = [n.decode() for n in listed if n not in (b".", b"..",
                                                       b"src")]
        expect(one_hidden(rest, "t") and b"src" in listed,
               "READDIR: %r" % listed)
    ok(srv.call(req_close(h)), "CLOSE")
    expect(ctx.read("t") == final, "after CLOSE: not the upload")
    expect_eq("mode after CLOSE", stat.S_IMODE(os.stat(ctx.path("t")).st_mode),
              0o600)
    got = srv.call(req_read(o, 0, 20000))
    expect(got.data == old, "the handle opened before CLOSE: not the old "
           "file")
    # (FUSE keeps a replaced file open under a name of its own until then.)
    ok(srv.call(req_close(o)), "CLOSE of the old file")
    expect_eq("the directory", names(ctx), ["src", "t"])


@test
def test_replace_keeps_mode(ctx):
    ctx.write("t", blob(8, 100), mode=0o604)
    os.link(ctx.path("t"), ctx.path("hl"))
    srv = ctx.server()
    h = srv.open("t", UP, Attrs(permissions=0o666))
    send_writes(srv, h, blob(9, 2000), 0, 2000)
    ok(srv.call(req_close(h)), "CLOSE")
    expect_eq("mode of the new file", stat.S_IMODE(
        os.stat(ctx.path("t")).st_mode), 0o604)
    expect(ctx.read("hl") == blob(8, 100), "the hard link: not the old "
           "file")
    expect(ctx.read("t") == blob(9, 2000), "the target: not the upload")
    h = srv.open("n", UP, Attrs(permissions=0o640))
    ok(srv.call(req_close(h)), "CLOSE")
    expect_eq("mode of a new file", stat.S_IMODE(
        os.stat(ctx.path("n")).st_mode), 0o640)


def acl_blob(uid, perm=0):
    """A POSIX ACL (the kernel's xattr form): rw-r--r-- with the user uid
    given perm (by default nothing)."""
    entries = [(0x01, 6, 0xffffffff), (0x02, perm, uid),
               (0x04, 4, 0xffffffff), (0x10, 4, 0xffffffff),
               (0x20, 4, 0xffffffff)]
    return struct.pack("<I", 2) + b"".join(
        struct.pack("<HHI", *e) for e in entries)


@test
def test_attributes_at_close(ctx):
    # A mode changed while the upload is open: by another program, then
    # by SETSTAT of the target in the session.
    srv = ctx.server()
    for how in ("chmod", "SETSTAT"):
        ctx.write("t", b"old", mode=0o644)
        h = srv.open("t", UP)
        send_writes(srv, h, b"new", 0, 3)
        if how == "chmod":
            os.chmod(ctx.path("t"), 0o600)
        else:
            ok(srv.call(req_setstat("t", Attrs(permissions=0o600))),
               "SETSTAT")
        ok(srv.call(req_close(h)), "CLOSE")
        expect_eq("%s meanwhile: the target" % how, ctx.read("t"), b"new")
        expect_eq("%s meanwhile: its mode" % how, stat.S_IMODE(
            os.stat(ctx.path("t")).st_mode), 0o600)
    # Extended attributes, where the file system has them.
    ctx.write("x", b"old", mode=0o644)
    acl = acl_blob(65534)
    try:
        os.setxattr(ctx.path("x"), "user.label", b"kept")
        os.setxattr(ctx.path("x"), "system.posix_acl_access", acl)
    except OSError as e:
        return "extended attributes not checked: %s" % e.strerror
    h = srv.open("x", UP)
    send_writes(srv, h, b"new", 0, 3)
    ok(srv.call(req_close(h)), "CLOSE")
    expect_eq("the target", ctx.read("x"), b"new")
    expect_eq("user.label", os.getxattr(ctx.path("x"), "user.label"),
              b"kept")
    expect_eq("the ACL", os.getxattr(ctx.path("x"),
                                     "system.posix_acl_access"), acl)
    # A default ACL of the directory gives the new file an ACL that the old
    # one has not: taken away, as a write in place would not add it.
    os.mkdir(ctx.path("d"))
    try:
        os.setxattr(ctx.path("d"), "system.posix_acl_default",
                    acl_blob(1234, 7))
        ctx.write("d/y", b"old", mode=0o640)
        # The old file without the ACL it inherited.
        os.removexattr(ctx.path("d/y"), "system.posix_acl_access")
    except OSError as e:
        return "mode, user.label and the ACL; default ACLs not checked: " \
            "%s" % e.strerror
    os.chmod(ctx.path("d/y"), 0o640)
    h = srv.open("d/y", UP)
    send_writes(srv, h, b"new", 0, 3)
    ok(srv.call(req_close(h)), "CLOSE")
    expect_eq("under a default ACL, the target", ctx.read("d/y"), b"new")
    expect_eq("under a default ACL, the ACLs", [
        n for n in os.listxattr(ctx.path("d/y")) if n.startswith("system.")],
        [])
    expect_eq("under a default ACL, the mode",
              stat.S_IMODE(os.stat(ctx.path("d/y")).st_mode), 0o640)
    return "mode, user.label, the ACL, none from a default ACL"


@test
def test_hidden_name_is_its_own(ctx):
    for end in ("session end", "CLOSE"):
        for f in os.listdir(ctx.tmp):
            os.unlink(ctx.path(f))
        ctx.write("precious", b"precious", mode=0o444)
        ctx.write("t", b"old")
        srv = ctx.server(["-P", "remove,posix-rename"],
                         env=ctx.shimmed(TMPFILE="EOPNOTSUPP"))
        h = srv.open("t", UP)
        send_writes(srv, h, b"new", 0, 3)
        hidden = [n for n in names(ctx) if n.startswith(PREFIX)]
        expect_eq("hidden names", len(hidden), 1)
        ok(srv.call(req_rename(hidden[0], "junk")), "RENAME of the upload")
        ok(srv.call(req_rename("precious", hidden[0])), "RENAME onto it")
        if end == "CLOSE":
            reply = srv.call(req_close(h))
            expect(isinstance(reply, Status) and reply.code != SSH_FX_OK,
                   "CLOSE: expected a failure, got %r" % (reply,))
            expect_eq("the target", ctx.read("t"), b"old")
        srv.close()
        expect_eq("%s: the file renamed onto the hidden name" % end,
                  ctx.read(hidden[0]), b"precious")
        expect_eq("%s: the upload the client moved" % end,
                  ctx.read("junk"), b"new")


def as_nobody():
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)


def nobodys_binary(ctx):
    """The work directory opened to all, and a server binary that nobody
    can run (a copy, removed after, when the clone is closed to others);
    None when nobody cannot reach the work directory."""
    os.chmod(ctx.tmp, 0o777)
    if not others_can_run(ctx.tmp):
        return None
    binary = binary_for_others(SERVER_ARGV[0], os.path.dirname(ctx.tmp))
    if binary != SERVER_ARGV[0]:
        ctx.extra.append(os.path.dirname(binary))
    return binary


def nobodys_binary_or_skip(ctx):
    """nobodys_binary(), or Skip where a session cannot run as nobody."""
    if os.geteuid() != 0:
        raise suite.Skip("the session runs as nobody: needs root")
    binary = nobodys_binary(ctx)
    if binary is None:
        raise suite.Skip("nobody cannot reach %s" % ctx.tmp)
    return binary


def session_of(ctx, binary, atomic=True, preexec_fn=as_nobody):
    """A session in ctx.tmp, with -A or without, after INIT."""
    srv = Server([binary] + SERVER_ARGV[1:] + (["-A"] if atomic else []),
                 cwd=ctx.tmp, umask=UMASK, preexec_fn=preexec_fn)
    ctx.servers.append(srv)
    srv.init()
    return srv


@test
def test_others_files_in_place(ctx):
    binary = nobodys_binary_or_skip(ctx)
    done = []
    for dmode in (0o1777, 0o777):
        os.chmod(ctx.tmp, dmode)
        for name, uid, gid, placed in (("theirs", 1002, 65534, False),
                                       ("their_group", 65534, 0, False),
                                       ("mine", 65534, 65534, True)):
            ctx.write(name, b"old", mode=0o666)
            os.chown(ctx.path(name), uid, gid)
            srv = session_of(ctx, binary)
            h = srv.open(name, UP)
            ok(srv.call(req_write(h, 0, b"new")), "WRITE")
            # In place: the target has the new bytes before the CLOSE.
            expect_eq("%o %s: before the CLOSE" % (dmode, name),
                      ctx.read(name), b"old" if placed else b"new")
            ok(srv.call(req_close(h)), "CLOSE %s" % name)
            st = os.stat(ctx.path(name))
            expect_eq("%o %s: the target" % (dmode, name), ctx.read(name),
                      b"new")
            expect_eq("%o %s: owner and group" % (dmode, name),
                      (st.st_uid, st.st_gid), (uid, gid))
            srv.close()
            done.append(name)
    os.chmod(ctx.tmp, 0o700)
    return ", ".join(sorted(set(done)))


@test
def test_changed_meanwhile(ctx):
    binary = nobodys_binary_or_skip(ctx)
    for owner in ((1002, 1002), (65534, 0)):
        ctx.write("t", b"old", mode=0o660)
        os.chown(ctx.path("t"), 65534, 65534)
        srv = session_of(ctx, binary)
        h = srv.open("t", UP)
        ok(srv.call(req_write(h, 0, b"new")), "WRITE")
        os.chown(ctx.path("t"), *owner)
        reply = srv.call(req_close(h))
        expect(isinstance(reply, Status) and
               reply.code == SSH_FX_PERMISSION_DENIED,
               "chown %d:%d meanwhile: CLOSE %r" % (owner + (reply,)))
        st = os.stat(ctx.path("t"))
        expect_eq("chown %d:%d meanwhile: the target" % owner,
                  (ctx.read("t"), st.st_uid, st.st_gid), (b"old",) + owner)
        srv.close()
        expect_eq("chown %d:%d meanwhile: the directory" % owner,
                  names(ctx), ["t"])
    # FSETSTAT: the mode set, the owner refused.
    ctx.write("t", b"old", mode=0o644)
    os.chown(ctx.path("t"), 65534, 65534)
    srv = session_of(ctx, binary)
    h = srv.open("t", UP)
    reply = srv.call(req_fsetstat(h, Attrs(permissions=0o600, uid=0, gid=0)))
    expect(isinstance(reply, Status) and
           reply.code == SSH_FX_PERMISSION_DENIED, "FSETSTAT %r" % (reply,))
    ok(srv.call(req_close(h)), "CLOSE")
    srv.close()
    expect_eq("the mode FSETSTAT set", stat.S_IMODE(
        os.stat(ctx.path("t")).st_mode), 0o600)
    os.chmod(ctx.tmp, 0o700)


# File capabilities: version 2, CAP_NET_RAW permitted.
CAPS = struct.pack("<5I", 0x02000000, 1 << 13, 0, 0, 0)


def upload_over(ctx, binary, atomic, name, preexec_fn=None):
    """name replaced through a session with -A or without: its mode and
    whether it has file capabilities after the CLOSE."""
    srv = session_of(ctx, binary, atomic, preexec_fn)
    h = srv.open(name, UP)
    ok(srv.call(req_write(h, 0, b"new")), "WRITE")
    ok(srv.call(req_close(h)), "CLOSE %s" % name)
    srv.close()
    expect_eq("%s: the target" % name, ctx.read(name), b"new")
    try:
        caps = os.getxattr(ctx.path(name), "security.capability") == CAPS
    except OSError:
        caps = False
    return stat.S_IMODE(os.stat(ctx.path(name)).st_mode), caps


@test
def test_as_written_in_place(ctx):
    if os.geteuid() != 0:
        raise suite.Skip("set-ID bits of root's and nobody's: needs root")
    done = []
    # As root: set-user-ID kept (CAP_FSETID), capabilities lost.
    got = {}
    for atomic in (False, True):
        ctx.write("root", b"old", mode=0o755)
        os.chmod(ctx.path("root"), 0o4755)
        try:
            os.setxattr(ctx.path("root"), "security.capability", CAPS)
            caps = True
        except OSError:
            caps = False    # not on this file system
        got[atomic] = upload_over(ctx, SERVER_ARGV[0], atomic, "root")
    expect_eq("as root, in place", got[False], (0o4755, False))
    expect_eq("as root, -A", got[True], got[False])
    done.append("root" + (" with capabilities" if caps else ""))
    # As nobody, its own file: both set-ID bits lost.
    binary = nobodys_binary(ctx)
    if binary is not None:
        for atomic in (False, True):
            ctx.write("mine", b"old", mode=0o775)
            os.chown(ctx.path("mine"), 65534, 65534)
            os.chmod(ctx.path("mine"), 0o6775)
            got[atomic] = upload_over(ctx, binary, atomic, "mine",
                                      preexec_fn=as_nobody)
        expect_eq("as nobody, in place", got[False], (0o775, False))
        expect_eq("as nobody, -A", got[True], got[False])
        done.append("nobody")
    os.chmod(ctx.tmp, 0o700)
    return ", ".join(done)


@test
def test_trailing_slash(ctx):
    ctx.write("t", b"old")
    srv = ctx.server()
    for name in ("new/", "t/"):
        reply = srv.call(req_open(name, UP))
        expect(isinstance(reply, Status) and reply.code == SSH_FX_FAILURE,
               "OPEN %s: expected FAILURE, got %r" % (name, reply))
    expect_eq("the directory", names(ctx), ["t"])
    expect_eq("the file", ctx.read("t"), b"old")


@test
def test_handles_a_third(ctx):
    lims = []
    for args in ([], ["-A"]):
        srv = Server(SERVER_ARGV + args, cwd=ctx.tmp, umask=UMASK)
        ctx.servers.append(srv)
        srv.init()
        reply = expect_type(srv.call(req_limits()), ExtendedReply, "limits")
        lims.append(parse_limits(reply.data)["max_open_handles"])
    expect_eq("handles under -A", lims[1], lims[0] // 3)
    return "%d, under -A %d" % tuple(lims)


@test
def test_symlink_followed(ctx):
    os.mkdir(ctx.path("root"))
    os.mkdir(ctx.path("root", "sub"))
    ctx.write("root/sub/t", b"old")
    os.symlink("sub/t", ctx.path("root", "rel"))
    os.symlink("/sub/t", ctx.path("root", "abs"))
    os.symlink("../../../outside", ctx.path("root", "up"))
    cases = [(["-r", ctx.path("root")], "abs", "root/sub/t"),
             (["-r", ctx.path("root")], "up", "root/outside"),
             ([], "root/rel", "root/sub/t")]
    if suite.emulator():    # it has no openat2(2): no -r
        cases = cases[2:]
    for i, (args, name, where) in enumerate(cases):
        srv = ctx.server(args)
        data = blob(20 + i, 3000)
        h = srv.open(name, UP)
        send_writes(srv, h, data, 0, len(data))
        ok(srv.call(req_close(h)), "CLOSE " + name)
        srv.close()
        expect(ctx.read(where) == data, "%s: %s is not the upload" %
               (name, where))
        expect(os.path.islink(ctx.path("root", os.path.basename(name))),
               "%s: no longer a symlink" % name)
    expect_eq("beside the root", names(ctx), ["root"])
    if suite.emulator():
        return "-r left out: %s emulates no openat2(2)" % suite.emulator()


@test
def test_filepart_then_rename(ctx):
    ctx.write("t", b"old")
    ctx.write("u", b"old")
    srv = ctx.server()
    for name, rename in (("t", req_rename), ("u", req_posix_rename)):
        data = blob(30 + len(name), 3 << 20)
        h = srv.open(name + ".filepart", UP)
        send_writes(srv, h, data, 0, len(data))
        ok(srv.call(req_close(h)), "CLOSE")
        if rename is req_rename:
            ok(srv.call(req_remove(name)), "REMOVE")
        ok(srv.call(rename(name + ".filepart", name)), "RENAME")
        expect(ctx.read(name) == data, "%s: not the upload" % name)
    expect_eq("the directory", names(ctx), ["t", "u"])


@test
def test_resume_in_place(ctx):
    ctx.write("t", b"0123456789")
    srv = ctx.server()
    h = srv.open("t", SSH_FXF_WRITE | SSH_FXF_CREAT)
    ok(srv.call(req_write(h, 10, b"abc")), "WRITE")
    expect_eq("the target at once", ctx.read("t"), b"0123456789abc")
    ok(srv.call(req_close(h)), "CLOSE")


@test
def test_last_close_wins(ctx):
    for first in (0, 1):
        datas = [blob(10, 3 << 20), blob(11, 2 << 20)]
        srvs = [ctx.server(), ctx.server()]
        hs = [s.open("t", UP) for s in srvs]
        for s, h, d in zip(srvs, hs, datas):
            send_writes(s, h, d, 0, len(d))
        for i in (first, 1 - first):
            ok(srvs[i].call(req_close(hs[i])), "CLOSE %d" % i)
            expect(ctx.read("t") == datas[i], "after CLOSE %d: not its "
                   "upload" % i)
        for s in srvs:
            s.close()
        expect_eq("the directory", names(ctx), ["t"])


@test
def test_excl(ctx):
    srv = ctx.server()
    h = srv.open("t", SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_EXCL)
    send_writes(srv, h, blob(12, 5000), 0, 5000)
    ctx.write("t", b"made meanwhile")
    reply = srv.call(req_close(h))
    expect_type(reply, Status, "CLOSE")
    expect_eq("CLOSE over a name made meanwhile", reply.code, SSH_FX_FAILURE)
    expect_eq("the other file", ctx.read("t"), b"made meanwhile")
    expect_eq("the directory", names(ctx), ["t"])
    for extra in (0, SSH_FXF_TRUNC):
        reply = srv.call(req_open("t", SSH_FXF_WRITE | SSH_FXF_CREAT |
                                  SSH_FXF_EXCL | extra))
        expect_type(reply, Status, "OPEN EXCL")
        expect_eq("OPEN EXCL of a name that is there", reply.code,
                  SSH_FX_FAILURE)
    expect_eq("the directory", names(ctx), ["t"])


@test
def test_readonly(ctx):
    srv = ctx.server(["-R"])
    reply = srv.call(req_open("t", UP))
    expect_type(reply, Status, "OPEN")
    expect_eq("OPEN under -R", reply.code, SSH_FX_PERMISSION_DENIED)
    expect_eq("the directory", names(ctx), [])



@test
def test_transfer_log(ctx):
    os.mkdir(ctx.path("d"))
    log = ctx.path("xfer.log")
    open(log, "w").close()
    srv = ctx.server(["-L", log], cwd=ctx.path("d"))
    h = srv.open("put", UP)
    send_writes(srv, h, blob(13, 1000), 0, 1000)
    ok(srv.call(req_close(h)), "CLOSE")
    h = srv.open("left", UP)
    send_writes(srv, h, blob(14, 1000), 0, 1000)
    srv.close()
    closes = [(r["path"], r.get("placed"), r.get("forced", False))
              for r in records(log) if r["event"] == "close"]
    expect_eq("close records", closes, [("put", True, False),
                                        ("left", False, True)])
    expect_eq("the directory", names(ctx, "d"), ["put"])


@test
def test_log_guard(ctx):
    log = ctx.path("xfer.log")
    open(log, "w").close()
    srv = ctx.server(["-L", log])
    reply = srv.call(req_open("xfer.log", UP))
    expect_type(reply, Status, "OPEN of the log")
    expect_eq("OPEN of the log", reply.code, SSH_FX_PERMISSION_DENIED)
    srv.close()
    expect_eq("the directory", names(ctx), ["xfer.log"])
    expect_eq("the log's records", [r["event"] for r in records(log)],
              ["session-open", "session-close"])


@test
def test_deny_list(ctx):
    ctx.write("t", b"old")
    srv = ctx.server(["-P", "rename,remove,hardlink,posix-rename"])
    h = srv.open("t", UP)
    send_writes(srv, h, b"new", 0, 3)
    ok(srv.call(req_close(h)), "CLOSE")
    expect_eq("the target", ctx.read("t"), b"new")


@test
def test_where_uploads_go(ctx):
    ctx.write("t", b"old")
    srv = ctx.server()
    h = srv.open("t", UP)
    ok(srv.call(req_write(h, 0, b"new")), "WRITE")
    during = names(ctx)
    ok(srv.call(req_close(h)), "CLOSE")
    expect_eq("the target", ctx.read("t"), b"new")
    expect_eq("the directory", names(ctx), ["t"])
    if during == ["t"]:
        return "unnamed files (O_TMPFILE)"
    expect(len(during) == 2 and during[0].startswith(PREFIX),
           "during the upload: %r" % during)
    return "hidden names (no O_TMPFILE here)"


@test
def test_fallbacks(ctx):
    seen = []
    for faults, want in (({"LINK_EMPTY": "ENOENT"}, "through /proc"),
                         ({"LINK_EMPTY": "ENOENT", "NO_PROC": "1"},
                          "hidden names"),
                         ({"TMPFILE": "EOPNOTSUPP"}, "hidden as")):
        for f in os.listdir(ctx.tmp):
            os.unlink(ctx.path(f))
        ctx.write("t", b"old")
        srv = ctx.server(["-l", "DEBUG", "-e"], env=ctx.shimmed(**faults))
        h = srv.open("t", UP)
        send_writes(srv, h, b"new data", 0, 8)
        listed = names(ctx)
        ok(srv.call(req_close(h)), "CLOSE")
        h = srv.open("n", UP)
        ok(srv.call(req_close(h)), "CLOSE n")
        srv.close()
        err = srv.stderr_output().decode(errors="replace")
        expect(want in err, "%r: the log does not say %r" % (faults, want))
        expect_eq("%r: the target" % faults, ctx.read("t"), b"new data")
        expect_eq("%r: the directory" % faults, names(ctx), ["n", "t"])
        hidden = want != "through /proc" or not unnamed_here(ctx)
        expect(hidden == (len(listed) == 2), "%r: during the upload %r" %
               (faults, listed))
        seen.append(want)
    return ", ".join(seen)


if __name__ == "__main__":
    sys.exit(suite.main(sys.argv, __doc__, Ctx))
