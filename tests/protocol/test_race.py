#!/usr/bin/env python3
"""Race harness of "sftp-server -r ROOT": names swapped under the server.

With -r every client path is resolved beneath ROOT by openat2(2) with
RESOLVE_IN_ROOT.  A name that the server checks and then resolves a second
time (say fstatat(AT_SYMLINK_NOFOLLOW), then fchmodat() that follows) is a
hole: between the two calls another process can put a symlink there, and
the second call resolves it from the real "/".  The rule: under -r no name
is resolved again after it was checked.

Here tests/protocol/race_swap.c exchanges (renameat2 RENAME_EXCHANGE) the name
ROOT/d/v as fast as it can with a regular file, a directory and symlinks
to the host's files and directory, absolute and relative, while this
client sends every request and extension that takes a path, pipelined in
large batches, at "d/v" and, where it makes sense, "d/v/x".  The requests
are grouped in families (one per attribute of SETSTAT and of lsetstat, OPEN
with each flag combination, rename, hardlink, ...); the families take turns
for RACE_SECONDS, and after each batch the world outside the root is
compared with its snapshot, so that a change is blamed on the family whose
batch made it.  Each family gets one "ok"/"FAIL" line.  After a change the
outside is rebuilt, so that one family's escape does not hide another's.

The world, one temporary directory:

    TMP/outside/            0700, the host's files the race aims at:
      secret, x             0600, a marker with this run's token
      only-outside-TOKEN    0600, a name no listing inside may show
      sub/ (0700), sub/x    0600
    TMP/root/               the server's -r directory
    TMP/root/d/             the swapper's directory: the target "v", its
                            candidates c_* and the swapper's .trash
    TMP/root/fixed          a file to link and copy from
    TMP/root/outside/...    decoys: where the relative links land inside
    TMP/root/TMP/outside/   decoys: where the absolute links land inside

The candidates: regular files, directories holding x, and symlinks to
TMP/outside/secret, ../../outside/secret, TMP/outside, ../../outside and
TMP/outside/new (missing: creation through it would make a file outside),
in an order that makes d/v alternate between "not a link" and a link: the
check-then-follow window is hit on every other swap.  The swapper only
renames names inside ROOT/d, and makes again any kind the server removed
or replaced.  The server and this client are pinned to one CPU and the
swapper to another where there are two: on a busy machine the scheduler
would otherwise often run the server and the swapper by turns, and the
race would hardly ever be hit.

What is checked: nothing outside ROOT in TMP changed (names, types, modes,
owners, sizes, contents, link counts, inodes, mtimes, ctimes, and atimes,
which are set before the mtimes so that a read moves them); no reply
carries the token; every request got exactly one well-formed reply of a
kind it allows; the server exits 0 at the end of input, with no sanitizer
report on stderr; the race was real (lstat of d/v saw a file, a directory
and a symlink).

Skipped, with the reason: a kernel without openat2(2), a file system that
cannot exchange names, no C compiler and no RACE_SWAP, and a server that
refuses -r on a TMP this (non-root) user owns.

Environment:
  SFTP_SERVER     the server (default: sftp-server in the repository root),
                  run as "SERVER -e -l ERROR -r TMP/root"
  RACE_SECONDS    how long the families take turns (default 15)
  RACE_SWAP       a built tests/protocol/race_swap; otherwise it is built from
                  tests/protocol/race_swap.c with $CC (default cc) into another
                  temporary directory
  RACE_BATCH      requests per batch (default 256)
  RACE_KEEP       when set, TMP is left for a look
  SFTP_SANITIZED  1 for a sanitizer build (only named in the output)

Usage: test_race.py [FAMILY-SUBSTRING ...]
Prints one line per check, then "N passed, M failed[, K skipped]"; exits 1
if any check failed.
"""

import os
import re
import secrets
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
import traceback

sys.dont_write_bytecode = True  # leave no __pycache__ in the tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))

from sftpwire import *  # noqa: E402,F401,F403
import sftpwire  # noqa: E402
from suite import (  # noqa: E402
    SANITIZER_REPORT, Failure, Results, Skip, noatime_names, noatime_read,
    selected)

SERVER = server_argv()[0]
SWAP_SOURCE = os.path.join(HERE, "race_swap.c")
RACE_SECONDS = float(os.environ.get("RACE_SECONDS", "15"))
BATCH = max(16, int(os.environ.get("RACE_BATCH", "256")))
SANITIZED = os.environ.get("SFTP_SANITIZED") == "1"

TOKEN = secrets.token_hex(8)
SECRET = ("RACE-SECRET-%s: outside the root\n" % TOKEN).encode()
UNIQUE_NAME = "only-outside-%s" % TOKEN
DECOY = b"decoy inside the root\n"
FIXED = b"fixed file inside the root\n"

# The swapped name, a path beneath it, and the same name spelt otherwise
# (copy-data refuses two handles opened on the same path string).
V = "d/v"
VX = "d/v/x"
V_ALIAS = "d/./v"
VX_ALIAS = "d/./v/x"

OLD = 946684800 * 10**9  # 2000-01-01: atimes before mtimes
ALL_PFLAGS = list(range(64))  # READ WRITE APPEND CREAT TRUNC EXCL


# ---------------------------------------------------------------------------
# The temporary world


def write_file(path, data, mode):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                 mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.chmod(path, mode)


class World:
    def __init__(self):
        self.tmp = os.path.realpath(tempfile.mkdtemp(prefix="sftp-race-"))
        self.root = os.path.join(self.tmp, "root")
        self.out = os.path.join(self.tmp, "outside")
        # Not in TMP: running the swapper moves its atime.
        self.build_dir = None
        self.top = {"root", "outside"}
        self.procs = []

    def r(self, *p):
        return os.path.join(self.root, *p)

    def o(self, *p):
        return os.path.join(self.out, *p)

    def build(self):
        self.build_outside()
        os.mkdir(self.root, 0o755)
        os.mkdir(self.r("d"), 0o755)
        write_file(self.r("fixed"), FIXED, 0o644)
        # The decoys: where the links land when resolved inside the root.
        for base in [self.r("outside"), self.r(self.out.lstrip("/"))]:
            os.makedirs(os.path.join(base, "sub"))
            for name in ["secret", "x", os.path.join("sub", "x")]:
                write_file(os.path.join(base, name), DECOY, 0o600)
        os.utime(self.tmp, ns=(OLD, os.lstat(self.tmp).st_mtime_ns))

    def build_outside(self):
        os.mkdir(self.out, 0o700)
        for name in ["secret", "x", UNIQUE_NAME]:
            write_file(self.o(name), SECRET, 0o600)
        os.mkdir(self.o("sub"), 0o700)
        write_file(self.o("sub", "x"), SECRET, 0o600)
        # atime before mtime: under relatime the next read moves the atime.
        for p in [self.o("sub", "x"), self.o("sub"), self.o(UNIQUE_NAME),
                  self.o("x"), self.o("secret"), self.out]:
            os.utime(p, ns=(OLD, os.lstat(p).st_mtime_ns),
                     follow_symlinks=False)

    def swap_specs(self):
        """race_swap's arguments: the target first, then the candidates.

        The target meets them in this order, over and over: a file or a
        directory, then a link, so that every other swap turns something
        checked as "not a link" into a link.
        """
        return ["f:v", "l:c_abs:" + self.o("secret"),
                "d:c_dir", "l:c_rel:../../outside/secret",
                "f:c_file", "l:c_absdir:" + self.out,
                "d:c_dir2", "l:c_reldir:../../outside",
                "f:c_file2", "l:c_absnew:" + self.o("new")]

    def snapshot(self):
        """TMP without the root: every entry's state, by relative path."""
        snap = {}
        todo = [self.tmp]
        while todo:
            d = todo.pop()
            for n in noatime_names(d):
                p = os.path.join(d, n)
                if p == self.root:
                    continue
                st = os.lstat(p)
                if stat.S_ISREG(st.st_mode):
                    extra = noatime_read(p)
                elif stat.S_ISLNK(st.st_mode):
                    extra = os.readlink(p)
                elif stat.S_ISDIR(st.st_mode):
                    extra = tuple(noatime_names(p))
                    todo.append(p)
                else:
                    extra = None
                snap[os.path.relpath(p, self.tmp)] = describe(st) + (extra,)
        st = os.lstat(self.tmp)
        snap["."] = describe(st) + (tuple(noatime_names(self.tmp)),)
        return snap

    def rebuild_outside(self):
        """After an escape: TMP outside the root as it was built."""
        for n in noatime_names(self.tmp):
            if n not in self.top:
                remove_tree(os.path.join(self.tmp, n))
        remove_tree(self.out)
        self.build_outside()
        os.utime(self.tmp, ns=(OLD, os.lstat(self.tmp).st_mtime_ns))

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if os.environ.get("RACE_KEEP"):
            print("# kept %s" % self.tmp)
            return
        remove_tree(self.tmp)
        if self.build_dir is not None:
            remove_tree(self.build_dir)


FIELDS = ("type", "mode", "uid", "gid", "size", "nlink", "inode", "mtime",
          "ctime", "atime", "content")


def describe(st):
    return (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid,
            st.st_gid, st.st_size, st.st_nlink, st.st_ino, st.st_mtime_ns,
            st.st_ctime_ns, st.st_atime_ns)


def show(field, v):
    if field == "mode":
        return "%04o" % v
    if field == "type":
        return {stat.S_IFREG: "file", stat.S_IFDIR: "dir",
                stat.S_IFLNK: "symlink"}.get(v, oct(v))
    if field == "content":
        return repr(v[:40] if isinstance(v, bytes) else v)
    return str(v)


def snapshot_diff(before, after):
    """What changed, one phrase per entry."""
    diffs = []
    for k in sorted(set(before) | set(after)):
        a, b = before.get(k), after.get(k)
        if a == b:
            continue
        if a is None:
            diffs.append("%s: new %s" % (k, show("type", b[0])))
        elif b is None:
            diffs.append("%s: gone" % k)
        else:
            diffs.append("%s: %s" % (k, ", ".join(
                "%s %s -> %s" % (f, show(f, x), show(f, y))
                for f, x, y in zip(FIELDS, a, b) if x != y)))
    return diffs


def remove_tree(path):
    """Removes path, whatever it is and whatever modes the race left."""
    if os.path.islink(path) or not os.path.isdir(path):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return
    for dirpath, dirs, _ in os.walk(path):
        for d in dirs:
            p = os.path.join(dirpath, d)
            if not os.path.islink(p):
                os.chmod(p, 0o700)
    os.chmod(path, 0o700)
    shutil.rmtree(path, ignore_errors=True)


def swapper_binary(w):
    """$RACE_SWAP, or race_swap.c built into a temporary directory."""
    given = os.environ.get("RACE_SWAP")
    if given:
        if not os.access(given, os.X_OK):
            raise Failure("RACE_SWAP=%s is not an executable" % given)
        return os.path.abspath(given)
    cc = os.environ.get("CC") or "cc"
    if not shutil.which(cc.split()[0]):
        raise Skip("no C compiler (%s) to build %s, and no RACE_SWAP" %
                   (cc, SWAP_SOURCE))
    w.build_dir = tempfile.mkdtemp(prefix="sftp-race-build-")
    out = os.path.join(w.build_dir, "race_swap")
    r = subprocess.run(cc.split() + ["-std=c11", "-D_DEFAULT_SOURCE", "-O2",
                                     "-Wall", "-Wextra", "-o", out,
                                     SWAP_SOURCE],
                       capture_output=True, timeout=120)
    if r.returncode != 0:
        raise Failure("building race_swap failed: %s" %
                      r.stderr.decode(errors="replace")[-500:])
    return out


# ---------------------------------------------------------------------------
# Replies: exactly one each, of a kind the request allows


_EXPECTED = {}


def expected_kind(req):
    """(reply class other than STATUS or None, may the status be EOF)."""
    got = _EXPECTED.get(req)
    if got is None:
        got = _EXPECTED[req] = _expected_kind(req)
    return got


def _expected_kind(req):
    ptype, body = req
    if ptype in (SSH_FXP_OPEN, SSH_FXP_OPENDIR):
        return Handle, False
    if ptype in (SSH_FXP_STAT, SSH_FXP_LSTAT, SSH_FXP_FSTAT):
        return AttrsReply, False
    if ptype == SSH_FXP_READ:
        return Data, True
    if ptype == SSH_FXP_READDIR:
        return Name, True
    if ptype in (SSH_FXP_REALPATH, SSH_FXP_READLINK):
        return Name, False
    if ptype == SSH_FXP_EXTENDED:
        ext = sftpwire.Reader(body).string()
        if ext == b"statvfs@openssh.com":
            return ExtendedReply, False
        if ext == b"expand-path@openssh.com":
            return Name, False
        return None, ext == b"copy-data"
    return None, False


def bad_reply(req, reply):
    """Why reply does not answer req, or None."""
    cls, eof_ok = expected_kind(req)
    if isinstance(reply, Status):
        if reply.code > SSH_FX_OP_UNSUPPORTED:
            return "status code %d" % reply.code
        if reply.code == SSH_FX_EOF and not eof_ok:
            return "EOF"
        if reply.code == SSH_FX_OK and cls is not None:
            return "OK where %s was due" % cls.__name__
        return None
    if cls is None or not isinstance(reply, cls):
        return "a %s" % reply.type_name
    if isinstance(reply, Name):
        n = len(reply.entries)
        if n == 0 or (req[0] != SSH_FXP_READDIR and n != 1):
            return "NAME with %d entries" % n
    if isinstance(reply, ExtendedReply):
        try:
            parse_statvfs(reply.data)
        except ProtocolError as e:
            return "a malformed statvfs reply: %s" % e
    if isinstance(reply, Data):
        want = struct_u32(req[1][-4:])
        if len(reply.data) > want:
            return "%d bytes for a READ of %d" % (len(reply.data), want)
    return None


def struct_u32(b):
    return int.from_bytes(b, "big")


_STATUS_HEAD = struct.Struct(">III")


def parse_fast(payload):
    """parse_reply(), with a shortcut for STATUS, which most replies are.

    The shortcut is as strict: the two strings must end the packet
    exactly; anything else goes to parse_reply().
    """
    if payload[0] == SSH_FXP_STATUS and len(payload) >= 17:
        rid, code, mlen = _STATUS_HEAD.unpack_from(payload, 1)
        end = 13 + mlen
        if end + 4 <= len(payload) and \
                end + 4 + struct_u32(payload[end:end + 4]) == len(payload):
            reply = Status(rid, code, payload[13:end], payload[end + 4:])
            reply.raw = payload
            return reply
    return parse_reply(payload)


class Session:
    """The server under test, its batches and what they showed."""

    def __init__(self, w):
        self.w = w
        self.srv = Server([SERVER, "-e", "-l", "ERROR", "-r", w.root],
                          cwd=w.tmp)
        self.sent = 0
        self.bad = []        # (family, request, reply, why)
        self.leaks = []      # (family, reply)
        self.v_types = {}    # S_IFMT of d/v in LSTAT replies -> count

    def batch(self, family, reqs):
        """Sends reqs at once, reads every reply; returns them in order."""
        ids = self.srv.send_many(reqs)
        asked = set(ids)
        self.sent += len(reqs)
        got = {}
        for _ in reqs:
            reply = parse_fast(self.srv.recv_packet())
            if (reply.id in got or reply.id not in asked) and \
                    len(self.bad) < 20:
                self.bad.append((family, None, reply,
                                 "a second or unasked-for reply"))
            got[reply.id] = reply
            if TOKEN.encode() in reply.raw:
                self.leaks.append((family, reply))
        out = []
        for rid, req in zip(ids, reqs):
            reply = got.get(rid)
            why = "no reply" if reply is None else bad_reply(req, reply)
            if why is not None and len(self.bad) < 20:
                self.bad.append((family, req, reply, why))
            out.append(reply)
        return out


# ---------------------------------------------------------------------------
# The families.  Each is a generator: it yields a batch (a list of
# requests) and receives the replies, so that a second batch can use the
# handles the first one opened.


def owner():
    """The uid and gid a chown sends: another user's as root, else ours."""
    if os.geteuid() == 0:
        return 65534, 65534
    return os.getuid(), os.getgid()


def attrs_of(which):
    uid, gid = owner()
    t = 1000000000 + secrets.randbelow(1000)
    a = {"size": Attrs(size=5),
         "permissions": Attrs(permissions=0o777),
         "uid/gid": Attrs(uid=uid, gid=gid),
         "atime/mtime": Attrs(atime=t, mtime=t)}
    if which == "all four":
        return Attrs(size=5, permissions=0o777, uid=uid, gid=gid, atime=t,
                     mtime=t)
    if which == "all but size":  # lsetstat refuses any size at once
        return Attrs(permissions=0o777, uid=uid, gid=gid, atime=t, mtime=t)
    return a[which]


def fam_setstat(which, lset):
    make = req_lsetstat if lset else req_setstat

    def gen(s):
        attrs = attrs_of(which)
        # Mostly the name itself: only there can a link be followed.
        unit = [make(V, attrs)] * 3 + [make(VX, attrs)]
        yield unit * (BATCH // len(unit))
    return gen


def handles_of(replies):
    return [r.handle for r in replies if isinstance(r, Handle)]


def closing(handles):
    return [req_close(h) for h in handles]


def fam_open(s):
    """Every pflags combination on d/v and d/v/x, then read, write, close."""
    unit = [req_open(p, f, Attrs(permissions=0o600))
            for f in ALL_PFLAGS for p in (V, VX)]
    # As many rounds as the batch size and the open handles allow, or one.
    reqs = unit * max(1, min(BATCH, s.max_handles) // len(unit))
    hs = handles_of((yield reqs))
    more = []
    for h in hs:
        more += [req_read(h, 0, 64), req_write(h, 2, b"race"),
                 req_close(h)]
    yield more


def fam_copy_data(s):
    """Handles on d/v, d/./v, d/v/x, d/./v/x and fixed, copied both ways."""
    rw = SSH_FXF_READ | SSH_FXF_WRITE
    paths = [V, V_ALIAS, VX, VX_ALIAS, "fixed"]
    reqs = []
    n = max(1, min(BATCH // 16, s.max_handles // len(paths)))
    for _ in range(n):
        reqs += [req_open(p, rw) for p in paths]
    replies = yield reqs
    hs = [r.handle if isinstance(r, Handle) else None for r in replies]
    more, opened = [], []
    for i in range(n):
        v, va, vx, vxa, fx = hs[5 * i:5 * i + 5]
        for a, b in [(v, va), (va, v), (vx, vxa), (vxa, vx), (v, fx),
                     (fx, v), (vx, fx)]:
            if a is not None and b is not None:
                more.append(req_copy_data(a, 0, 0, b, 0))
        opened += [h for h in (v, va, vx, vxa, fx) if h is not None]
    yield more + closing(opened)


def fam_stat(s):
    unit = [req_stat(V), req_lstat(V), req_stat(VX), req_lstat(VX)]
    yield unit * (BATCH // len(unit))


def fam_remove(s):
    yield [req_remove(V), req_remove(VX)] * (BATCH // 2)


def fam_rename(posix):
    make = req_posix_rename if posix else req_rename
    src = "d/src_p" if posix else "d/src_r"

    def gen(s):
        unit = [make(V, "d/m1"), make("d/m1", V),
                make(VX, "d/m2"), make("d/m2", VX),
                req_symlink("../../outside/x", src), make(src, V),
                req_remove(src)]
        yield unit * max(1, BATCH // len(unit))
    return gen


def fam_hardlink(s):
    unit = [req_hardlink(V, "d/h1"), req_remove("d/h1"),
            req_hardlink("fixed", V),
            req_hardlink(VX, "d/h2"), req_remove("d/h2"),
            req_hardlink("fixed", VX)]
    yield unit * max(1, BATCH // len(unit))


def fam_symlink(s):
    unit = [req_symlink(s.w.o("x"), V), req_symlink("../../outside/x", V),
            req_remove(VX), req_symlink("../../../outside/x", VX),
            req_symlink(V, "d/s1"), req_remove("d/s1")]
    yield unit * max(1, BATCH // len(unit))


def fam_readlink(s):
    yield [req_readlink(V), req_readlink(VX)] * (BATCH // 2)


def fam_realpath(s):
    unit = [req_realpath(p) for p in (V, VX, "d/v/..", "d/v/x/..")]
    yield unit * max(1, BATCH // len(unit))


def fam_opendir(s):
    paths = [V, VX, "d/v/."]
    n = max(1, min(BATCH // 8, s.max_handles // len(paths)))
    hs = handles_of((yield [req_opendir(p) for _ in range(n)
                            for p in paths]))
    more = []
    for h in hs:
        more += [req_readdir(h), req_readdir(h), req_close(h)]
    yield more


def fam_mkdir(s):
    unit = [req_mkdir(VX), req_rmdir(VX), req_mkdir(V), req_rmdir(V),
            req_mkdir("d/v/x/y"), req_rmdir("d/v/x/y")]
    yield unit * max(1, BATCH // len(unit))


def fam_statvfs(s):
    yield [req_statvfs(V), req_statvfs(VX)] * (BATCH // 2)


def fam_expand_path(s):
    unit = [req_expand_path(p) for p in (V, VX, "d/v/../v", "~/d/v")]
    yield unit * max(1, BATCH // len(unit))


FAMILIES = []
for _which in ["size", "permissions", "uid/gid", "atime/mtime", "all four"]:
    FAMILIES.append(("setstat %s" % _which, fam_setstat(_which, False)))
for _which in ["size", "permissions", "uid/gid", "atime/mtime",
               "all but size"]:
    FAMILIES.append(("lsetstat@openssh.com %s" % _which,
                     fam_setstat(_which, True)))
FAMILIES += [
    ("open (all 64 pflags), read, write, close", fam_open),
    ("copy-data between handles on the swapped name", fam_copy_data),
    ("stat and lstat", fam_stat),
    ("remove", fam_remove),
    ("rename, the name as source and target", fam_rename(False)),
    ("posix-rename@openssh.com, the name as source and target",
     fam_rename(True)),
    ("hardlink@openssh.com, the name as source and target", fam_hardlink),
    ("symlink, the name as link path", fam_symlink),
    ("readlink", fam_readlink),
    ("realpath", fam_realpath),
    ("opendir and readdir", fam_opendir),
    ("mkdir and rmdir", fam_mkdir),
    ("statvfs@openssh.com", fam_statvfs),
    ("expand-path@openssh.com", fam_expand_path),
]


# ---------------------------------------------------------------------------
# The race


class Tally:
    def __init__(self):
        self.requests = 0
        self.succeeded = 0  # replies other than an error STATUS
        self.turns = 0
        self.escapes = []   # (seconds into the race, diffs)


def run_family(s, name, gen_fn, tally):
    """One turn of a family: its batches, then a look outside."""
    gen = gen_fn(s)
    reqs = next(gen)
    while True:
        replies = s.batch(name, reqs)
        tally.requests += len(reqs)
        tally.succeeded += sum(1 for r in replies if not (
            isinstance(r, Status) and r.code not in (SSH_FX_OK, SSH_FX_EOF)))
        if gen_fn is fam_stat:
            for req, reply in zip(reqs, replies):
                if req[0] == SSH_FXP_LSTAT and req[1].endswith(b"d/v") and \
                        isinstance(reply, AttrsReply) and \
                        reply.attrs.permissions is not None:
                    t = stat.S_IFMT(reply.attrs.permissions)
                    s.v_types[t] = s.v_types.get(t, 0) + 1
        try:
            reqs = gen.send(replies)
        except StopIteration:
            break
    tally.turns += 1


def race(w, s, families, swapper, tallies):
    """Families in turn for RACE_SECONDS, counted in tallies by name."""
    baseline = w.snapshot()
    start = time.monotonic()
    while time.monotonic() - start < RACE_SECONDS:
        for name, fn in families:
            if swapper.poll() is not None:
                raise Failure("the swapper exited early (status %d): %s" %
                              (swapper.returncode,
                               swapper.stderr.read().decode(
                                   errors="replace").strip()))
            run_family(s, name, fn, tallies[name])
            now = w.snapshot()
            if now != baseline:
                tallies[name].escapes.append(
                    (time.monotonic() - start, snapshot_diff(baseline, now)))
                w.rebuild_outside()
                baseline = w.snapshot()


def family_line(name, t):
    what = "race: %s on %s and %s" % (name, V, VX)
    if t.escapes:
        first_at, diffs = t.escapes[0]
        return ("FAIL", what,
                "changed outside the root in %d of %d turns (%d requests); "
                "first after %.2f s: %s" %
                (len(t.escapes), t.turns, t.requests, first_at,
                 "; ".join(diffs)[:600]))
    return ("ok", what, "%d requests in %d turns, %d succeeded" %
            (t.requests, t.turns, t.succeeded))


def pin(server_pid, swapper_pid):
    """The server and this client on one CPU, the swapper on another.

    The race is only hit while the server and the swapper run at the same
    time; on a busy machine the scheduler often puts them on one CPU.  The
    client and the server take turns, so they can share one.  Returns what
    was done, for the output.
    """
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError) as e:
        return "not pinned to CPUs: %s" % e
    if len(cpus) < 2:
        return "one CPU: the race is hit far less often"
    try:
        os.sched_setaffinity(server_pid, {cpus[-2]})
        os.sched_setaffinity(0, {cpus[-2]})
        os.sched_setaffinity(swapper_pid, {cpus[-1]})
    except OSError as e:
        return "not pinned to CPUs: %s" % e
    return "server and client on CPU %d, swapper on CPU %d" % (cpus[-2],
                                                               cpus[-1])


def stop_swapper(swapper):
    swapper.send_signal(signal.SIGTERM)
    try:
        out, err = swapper.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        swapper.kill()
        out, err = swapper.communicate(timeout=5)
    m = re.search(rb"swaps (\d+) repairs (\d+)", out)
    if swapper.returncode != 0 or m is None:
        raise Failure("the swapper failed (status %r): %r %r" %
                      (swapper.returncode, out[-200:], err[-300:]))
    return int(m.group(1)), int(m.group(2))


def main(argv):
    patterns = argv[1:]
    if any(p in ("-h", "--help") for p in patterns):
        print(__doc__.strip())
        return 0
    results = Results()
    report, summary = results.report, results.summary
    families = selected(FAMILIES, patterns)
    if not os.access(SERVER, os.X_OK):
        report("FAIL", "server", "expected an executable at %s" % SERVER)
        return summary()
    w = World()
    try:
        return run(w, families, report, summary)
    finally:
        w.cleanup()


def run(w, families, report, summary):
    try:
        w.build()
        binary = swapper_binary(w)
    except Skip as e:
        report("skip", "all", e)
        return summary()
    except Failure as e:
        report("FAIL", "setup", e)
        return summary()
    before = w.snapshot()
    s = Session(w)
    try:
        s.srv.init()
    except WireError as e:
        err = s.srv.stderr_output()
        if b"openat2" in err:
            report("skip", "all", "the kernel has no openat2(2): %r" %
                   err.strip())
            return summary()
        if b"bad ownership" in err:
            report("skip", "all", "-r wants a path only root can change, "
                   "and this user owns %s: run as root (%r)" %
                   (w.tmp, err.strip()))
            return summary()
        report("FAIL", "server start", "%s: %s; stderr %r" %
               (type(e).__name__, e, err[-300:]))
        return summary()
    w.procs.append(s.srv.proc)
    limits = s.srv.call(req_limits())
    s.max_handles = 256
    if isinstance(limits, ExtendedReply):
        s.max_handles = max(8, min(1024, parse_limits(
            limits.data)["max_open_handles"] - 8))

    swapper = subprocess.Popen(
        [binary, "-s", str(RACE_SECONDS + 60), w.r("d")] + w.swap_specs(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    w.procs.append(swapper)
    if swapper.stdout.readline().strip() != b"ready":
        err = swapper.stderr.read().decode(errors="replace").strip()
        if swapper.wait() == 3:
            report("skip", "all", err)
        else:
            report("FAIL", "swapper start", "exit status %d: %s" %
                   (swapper.returncode, err))
        return summary()
    pinned = pin(s.srv.proc.pid, swapper.pid)

    tallies = {name: Tally() for name, _ in families}
    crash = None
    start = time.monotonic()
    try:
        race(w, s, families, swapper, tallies)
    except WireError as e:
        crash = "%s: %s" % (type(e).__name__, e)
    except Failure as e:
        crash = str(e)
    elapsed = time.monotonic() - start
    try:
        swaps, repairs = stop_swapper(swapper)
        swap_error = None
    except Failure as e:
        swaps, repairs, swap_error = 0, 0, str(e)

    for name, _ in families:
        report(*family_line(name, tallies[name]))

    # The server: alive to the end, silent after its last reply, exit 0.
    status = None
    if crash is None:
        s.srv.close_stdin()
        try:
            extra = s.srv.read_output(10)
            status = s.srv.wait(10)
        except WireError as e:
            extra, crash = b"", "%s: %s" % (type(e).__name__, e)
        if extra:
            crash = "%d bytes after the last reply: %r" % (len(extra),
                                                           extra[:60])
        elif status != 0:
            crash = "exit status %d at the end of input" % status
    else:
        s.srv.kill()
    err = s.srv.stderr_output()
    what = "server: ran the whole race and exited 0 at the end of input"
    if crash is not None:
        report("FAIL", what, "%s (exit status %r); stderr: %r" %
               (crash, s.srv.proc.returncode, err[-400:]))
    else:
        report("ok", what, "%d requests in %.1f s%s" %
               (s.sent, elapsed, ", sanitized build" if SANITIZED else ""))
    m = SANITIZER_REPORT.search(err)
    if m:
        report("FAIL", "server: no sanitizer report on stderr",
               err[max(0, m.start() - 100):m.start() + 600].decode(
                   errors="replace"))
    else:
        report("ok", "server: no sanitizer report on stderr")

    what = "replies: every request got exactly one well-formed reply"
    if s.bad:
        report("FAIL", what, "; ".join(
            "%s: %r -> %r: %s" % (fam, req and PACKET_TYPE_NAMES.get(req[0]),
                                  reply, why)
            for fam, req, reply, why in s.bad[:5]))
    elif crash is not None:
        report("FAIL", what, "the server stopped answering")
    else:
        report("ok", what, "%d replies" % s.sent)

    what = "replies: none carries a byte or a name from outside the root"
    if s.leaks:
        fam, reply = s.leaks[0]
        report("FAIL", what, "%d replies, the first to %s: %r" %
               (len(s.leaks), fam, reply.raw[:120]))
    else:
        report("ok", what)

    what = "race exercised: the swapper swapped, lstat of d/v saw each kind"
    names = {stat.S_IFREG: "file", stat.S_IFDIR: "dir",
             stat.S_IFLNK: "symlink"}
    seen = ", ".join("%s %d" % (names.get(t, oct(t)), n)
                     for t, n in sorted(s.v_types.items()))
    if swap_error:
        report("FAIL", what, swap_error)
    elif not any(fn is fam_stat for _, fn in families):
        report("skip", what, "the stat family was not selected")
    elif swaps == 0 or set(names) - set(s.v_types):
        report("FAIL", what, "%d swaps; lstat saw: %s" % (swaps, seen))
    else:
        report("ok", what, "%d swaps, %d objects made again; lstat saw: "
               "%s; %s" % (swaps, repairs, seen, pinned))

    what = "outside the root: nothing changed, nothing new in TMP"
    diffs = snapshot_diff(before, w.snapshot())
    escaped = [n for n, t in tallies.items() if t.escapes]
    if escaped:
        report("FAIL", what, "changed by %s (rebuilt after each: see above)"
               % ", ".join(escaped))
    elif diffs:
        report("FAIL", what, "; ".join(diffs)[:800])
    else:
        report("ok", what, "%d entries" % len(before))
    return summary()


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Exception as e:  # a bug in the test, or a surprise
        tb = traceback.extract_tb(e.__traceback__)[-1]
        print("FAIL - test_race.py: %s: %s (%s:%d)" % (
            type(e).__name__, e, os.path.basename(tb.filename), tb.lineno))
        print("0 passed, 1 failed")
        sys.exit(1)
