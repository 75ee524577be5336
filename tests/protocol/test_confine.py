#!/usr/bin/env python3
"""Escape matrix of "sftp-server -r ROOT", spoken to in raw SFTP.

With -r every client path is resolved beneath ROOT by the kernel
(openat2(2) with RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS): "..", absolute
paths and symlinks, absolute ones included, all stay inside, and the client
sees ROOT as "/".  These tests try to get out anyway.

Each run builds one temporary directory:

    TMP/                   mode 0711, root's (-r refuses a root directory
                           on a path that anyone else can change)
    TMP/root/              the server's -r directory, mode 0755, so that
                           its attributes differ from TMP's
    TMP/root/etc/passwd    a decoy: where "/etc/passwd" lands inside the root
    TMP/root/abs           -> /etc/passwd        (absolute link out)
    TMP/root/rel           -> ../outside/secret  (relative link out)
    TMP/root/dirlink       -> /
    TMP/root/outdir        -> ../outside
    TMP/root/hostabs       -> TMP/outside/secret (the host's absolute path)
    TMP/root/hostdir       -> TMP/outside
    TMP/root/chain_a       -> chain_b -> chain_c -> ../../outside/secret
    TMP/root/chainabs_a    -> chainabs_b -> TMP/outside
    TMP/root/victim        flipped by another process during the race test
    TMP/root/proc/         where a check mounts /proc, in the server's own
                           private mount namespace, to try magic links
    TMP/root/confine-TOKEN a directory that exists only inside the root
    TMP/outside/secret     a unique marker string, never to reach the client
    TMP/outside/...        more files, a directory, a symlink whose text
                           carries a marker, a uniquely named file

A link that points out resolves, inside the root, to a path that does not
exist there (a failure) or to the decoy: "/etc/passwd" from the client is
TMP/root/etc/passwd, never the host's.

The invariant, checked at the end: no byte outside the root read, written,
created or listed.  Every reply of every server is searched for the secret
marker, the marker in the outside symlink's text, the unique outside name,
the lines of the host's /etc/passwd and the host path of TMP.  TMP itself
(names) and TMP/outside (names, types, sizes, modes, owners, link counts,
inodes, mtimes, ctimes, atimes, contents) are snapshotted before and
after, as is the host's /etc/passwd (inode, mode, owner, size, link count,
mtime, ctime).  Outside atimes are set before their mtimes first, so that
under relatime any read or listing of them by the server moves them; the
snapshot itself reads with O_NOATIME.  Requests that would harm the host
if confinement failed are never sent: against /etc/passwd only attribute
changes to its current mode and owner (which would still show in its
ctime).  A request that must land inside the root goes to a directory
named after this run's random token, which exists only inside the root, so
that if it escaped it would fail instead of creating anything on the host.

Environment: SFTP_SERVER (default: sftp-server in the repository root),
CONFINE_RACE_SECONDS (default 4): how long the swap race runs.

Usage: test_confine.py [NAME-SUBSTRING ...]
Prints one line per check, then "N passed, M failed[, K skipped]"; exits 1
if any check failed.

For run-confine.sh, which runs the same matrix through OpenSSH's sftp:
  test_confine.py --layout DIR     builds the world in the empty DIR and
                                   prints TOKEN=... (the run's marker)
  test_confine.py --snapshot DIR   prints the snapshot of DIR's outside and
                                   of the host's /etc/passwd
  test_confine.py --flip DIR SECS  swaps DIR/root/victim with links to the
                                   outside until killed (SIGTERM) or SECS
                                   pass; prints "ready", then the swap count
"""

import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # leave no __pycache__ in the tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))

from sftpwire import *  # noqa: E402,F401,F403
from suite import (  # noqa: E402
    Failure, Results, Skip, noatime_names, noatime_read, outcome)

SERVER = server_argv()[0]
RACE_SECONDS = float(os.environ.get("CONFINE_RACE_SECONDS", "4"))

TOKEN = secrets.token_hex(8)
SECRET = ("CONFINE-SECRET-%s: if a client sees this, -r leaked\n" %
          TOKEN).encode()
LINK_TEXT = "CONFINE-LINKTEXT-%s" % TOKEN
UNIQUE_NAME = "only-outside-%s" % TOKEN
# A directory that exists only inside the root (see the module's doc).
TOKDIR = "confine-%s" % TOKEN
DECOY = b"decoy passwd inside the root\n"
INSIDE = b"inside data\n"
SUBFILE = b"sub file\n"
VICTIM_SECRET = b"victim's secret, inside the root\n"
ADMIN_LINKED = b"a file the admin hard-linked into the root\n"

READ = SSH_FXF_READ
WRITE_NEW = SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC


# ---------------------------------------------------------------------------
# Servers whose every reply is kept, for the search at the end.

REPLIES = []  # (payload, context, host_path_allowed)


class RecServer(Server):
    """A Server that records every reply payload it receives."""

    context = ""
    allow_host_path = False

    def recv_packet(self, timeout=None):
        payload = super().recv_packet(timeout)
        REPLIES.append((payload, self.context, self.allow_host_path))
        return payload


# ---------------------------------------------------------------------------
# The temporary world


# Whether O_NOATIME keeps atimes here (it does not through FUSE): where it
# does not, the snapshot cannot look without moving them, and leaves them out.
ATIMES = [True]


def describe(st):
    return (stat.filemode(st.st_mode), st.st_uid, st.st_gid, st.st_size,
            st.st_nlink, st.st_ino, st.st_mtime_ns, st.st_ctime_ns,
            st.st_atime_ns if ATIMES[0] else None)


class World:
    def __init__(self, tmp=None, build=True):
        if tmp is None:
            tmp = tempfile.mkdtemp(prefix="sftp-confine-")
        self.tmp = os.path.realpath(tmp)
        self.root = os.path.join(self.tmp, "root")
        self.out = os.path.join(self.tmp, "outside")
        self.servers = []
        self.passwd_st = os.stat("/etc/passwd")
        with open("/etc/passwd", "rb") as f:
            self.passwd_lines = [l for l in f.read().splitlines()
                                 if len(l) >= 8]
        if build:
            self.build()

    def r(self, *p):
        return os.path.join(self.root, *p)

    def o(self, *p):
        return os.path.join(self.out, *p)

    def write(self, path, data, mode=0o644):
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)

    def build(self):
        r, o = self.r, self.o
        os.mkdir(self.root, 0o755)
        os.mkdir(self.out, 0o755)
        # outside/
        self.write(o("secret"), SECRET, 0o600)
        self.write(o(UNIQUE_NAME), SECRET)
        self.write(o("linked"), ADMIN_LINKED)
        os.makedirs(o("sub", "deeper"))
        self.write(o("sub", "deeper", "file"), SECRET)
        os.mkdir(o("emptydir"))
        os.symlink(LINK_TEXT, o("olink"))
        # root/
        self.write(r("inside"), INSIDE)
        for i in range(1, 6):
            self.write(r("inside_r%d" % i), INSIDE)
        os.mkdir(r("sub"))
        self.write(r("sub", "subfile"), SUBFILE)
        os.makedirs(r("a", "b"))
        os.mkdir(r(TOKDIR))
        self.write(r(TOKDIR, "file"), INSIDE)
        os.mkdir(r("proc"))  # a mount point for the magic-link check
        os.mkdir(r("etc"))
        # The decoy's mode and size differ from the host's /etc/passwd.
        self.decoy_mode = 0o600 if (self.passwd_st.st_mode & 0o777) != 0o600 \
            else 0o640
        self.write(r("etc", "passwd"), DECOY, self.decoy_mode)
        links = {
            "abs": "/etc/passwd",
            "rel": "../outside/secret",
            "dirlink": "/",
            "outdir": "../outside",
            "hostabs": o("secret"),
            "hostdir": self.out,
            "chain_a": "chain_b",
            "chain_b": "chain_c",
            "chain_c": "../../outside/secret",
            "chainabs_a": "chainabs_b",
            "chainabs_b": self.out,
            "loop1": "loop2",
            "loop2": "loop1",
            "proclink": "/proc",
            "procself": "/proc/self/root/etc/passwd",
            # Dangling: creating through them lands in the root or fails.
            "tokcreate_abs": "/%s/made_abs" % TOKDIR,
            "tokcreate_rel": "../../%s/made_rel" % TOKDIR,
        }
        for name, target in links.items():
            os.symlink(target, r(name))
        # A hard link the admin placed: it is a file inside the root like any
        # other (the same inode as outside/linked, by the admin's choice), so
        # reading it is harmless.  The client itself cannot make such a link:
        # see check "hardlink".
        os.link(o("linked"), r("adminlink"))
        # The race's victim: a directory that another process swaps (with
        # renameat2 RENAME_EXCHANGE) with symlinks to the outside.
        os.mkdir(r("victim"))
        self.write(r("victim", "secret"), VICTIM_SECRET)
        os.symlink(self.out, r(".spare_abs"))
        os.symlink("../outside", r(".spare_rel"))
        # A symlink to the root, for -r through a link.
        os.symlink("root", os.path.join(self.tmp, "rootlink"))
        # TMP's attributes differ from ROOT's (0755), to tell them apart in
        # "..".  Both stay root's: -r refuses a root directory on a path
        # that anyone but root could change.
        os.chmod(self.tmp, 0o711)
        os.chmod(self.root, 0o755)
        # atime before mtime: under relatime the next read moves the atime.
        old = 946684800 * 10**9  # 2000-01-01
        for path in [self.tmp] + self.outside_paths():
            st = os.lstat(path)
            os.utime(path, ns=(old, st.st_mtime_ns), follow_symlinks=False)
        before = os.lstat(self.out).st_atime_ns
        noatime_names(self.out)
        ATIMES[0] = os.lstat(self.out).st_atime_ns == before

    def outside_paths(self):
        paths = [self.out]
        todo = [self.out]
        while todo:
            d = todo.pop()
            for n in noatime_names(d):
                p = os.path.join(d, n)
                paths.append(p)
                if stat.S_ISDIR(os.lstat(p).st_mode):
                    todo.append(p)
        return paths

    def snapshot(self):
        snap = {}
        st = os.lstat(self.tmp)
        snap["TMP"] = (describe(st), noatime_names(self.tmp))
        for p in self.outside_paths():
            st = os.lstat(p)
            d = describe(st)
            if stat.S_ISREG(st.st_mode):
                extra = noatime_read(p)
            elif stat.S_ISLNK(st.st_mode):
                # No readlink(): it would move the atime.  A changed text
                # is a new inode, or a new ctime.
                extra = None
            else:
                extra = noatime_names(p)
            if p == self.o("linked"):
                d = d[:-1]  # its inode is also root/adminlink: read inside
            snap[os.path.relpath(p, self.tmp)] = (d, extra)
        return snap

    def passwd_state(self):
        st = os.stat("/etc/passwd")
        return (st.st_ino, stat.filemode(st.st_mode), st.st_uid, st.st_gid,
                st.st_size, st.st_nlink, st.st_mtime_ns, st.st_ctime_ns)

    def server(self, args=None, init=True, context=""):
        """The server with -e and args (default: -r ROOT), run in TMP."""
        return self.start([SERVER, "-e"] + (["-r", self.root] if args is None
                                            else list(args)), init, context)

    def start(self, argv, init=True, context=""):
        """Any command line speaking SFTP on its stdin/stdout, run in TMP."""
        srv = RecServer(argv, cwd=self.tmp)
        srv.context = context
        self.servers.append(srv)
        if init:
            v = srv.init()
            if v.version != 3:
                raise Failure("VERSION %d, expected 3" % v.version)
        return srv

    def cleanup(self):
        for srv in self.servers:
            srv.kill()
        for dirpath, dirs, _ in os.walk(self.tmp):
            for d in dirs:
                p = os.path.join(dirpath, d)
                if not os.path.islink(p):
                    os.chmod(p, 0o700)
        shutil.rmtree(self.tmp, ignore_errors=True)


# ---------------------------------------------------------------------------
# Helpers


def ok_status(reply):
    return isinstance(reply, Status) and reply.code == SSH_FX_OK


def is_error(reply):
    return isinstance(reply, Status) and reply.code != SSH_FX_OK


def expect_error(reply, what):
    if not is_error(reply):
        raise Failure("%s: expected an error status, got %r" % (what, reply))
    return reply


def expect_ok(reply, what):
    if not ok_status(reply):
        raise Failure("%s: expected OK, got %r" % (what, reply))


def read_path(srv, path):
    """OPEN for reading and READ to the end: bytes, or the error Status."""
    reply = srv.call(req_open(path, READ))
    if not isinstance(reply, Handle):
        if not is_error(reply):
            raise Failure("OPEN %r: expected HANDLE or an error, got %r" %
                          (path, reply))
        return reply
    data = b""
    while True:
        d = srv.call(req_read(reply.handle, len(data), 65536))
        if isinstance(d, Data):
            data += d.data
            continue
        if not (isinstance(d, Status) and d.code == SSH_FX_EOF):
            raise Failure("READ of %r: expected DATA or EOF, got %r" %
                          (path, d))
        break
    srv.close_handle(reply.handle)
    return data


def list_dir(srv, path):
    """OPENDIR and READDIR to the end: {name: NameEntry}, or the Status."""
    reply = srv.call(req_opendir(path))
    if not isinstance(reply, Handle):
        if not is_error(reply):
            raise Failure("OPENDIR %r: expected HANDLE or an error, got %r" %
                          (path, reply))
        return reply
    batches, end = srv.readdir_all(reply.handle)
    if end.code != SSH_FX_EOF:
        raise Failure("READDIR %r ended with %r" % (path, end))
    srv.close_handle(reply.handle)
    return {e.filename: e for b in batches for e in b.entries}


def name1(reply, what):
    if not isinstance(reply, Name) or len(reply.entries) != 1:
        raise Failure("%s: expected one NAME, got %r" % (what, reply))
    return reply.entries[0].filename


def root_names(w):
    return {os.fsencode(n) for n in noatime_names(w.root)} | {b".", b".."}


def attrs_key(a):
    return (a.size, a.uid, a.gid, a.permissions, a.mtime)


def stat_key(st):
    return (st.st_size, st.st_uid, st.st_gid, st.st_mode,
            int(st.st_mtime) & 0xFFFFFFFF)


# ---------------------------------------------------------------------------
# Checks.  Each is (name, function of the World); a function raises Failure
# or Skip, or returns an optional detail for the "ok" line.

CHECKS = []


def check(name):
    def reg(fn):
        CHECKS.append((name, fn))
        return fn
    return reg


# Paths that must resolve to the decoy (the root's own /etc/passwd), and
# paths that must not resolve at all; read with OPEN/READ and STAT.
DECOY_PATHS = [
    "/etc/passwd", "//etc/passwd", "/../etc/passwd", "/./../../etc/passwd",
    "../../../etc/passwd", "a/../../../etc/passwd",
    "a/b/../../../../etc/passwd", "../" * 200 + "etc/passwd", "abs",
    "dirlink/etc/passwd", "dirlink/../etc/passwd",
    "dirlink/dirlink/etc/passwd", "sub/../../etc/passwd",
]
FAIL_PATHS = [
    "../outside/secret", "../../outside/secret", "../../../outside/secret",
    "a/../../outside/secret", "rel", "outdir/secret", "outdir/sub/deeper/file",
    "hostabs", "hostdir/secret", "chain_a", "chain_b", "chainabs_a/secret",
    "dirlink/../outside/secret", "loop1", "proclink/self/root/etc/hostname",
    "procself", "rel/", "outdir/" + UNIQUE_NAME,
]


def host_paths(w):
    # The real path of the secret, as an absolute client path: it must not
    # exist inside the root.
    return [w.o("secret"), w.o("sub", "deeper", "file")]


@check("read: absolute paths, .. chains and links to /etc/passwd give the "
       "decoy inside the root")
def _(w):
    srv = w.server(context="read-decoy")
    decoy_st = os.stat(w.r("etc", "passwd"))
    for p in DECOY_PATHS:
        got = read_path(srv, p)
        if got != DECOY:
            raise Failure("OPEN/READ %r: expected the decoy %r, got %r" %
                          (p[:60], DECOY, got))
        reply = srv.call(req_stat(p))
        if not isinstance(reply, AttrsReply) or \
                attrs_key(reply.attrs) != stat_key(decoy_st):
            raise Failure("STAT %r: expected the decoy's attributes %r, "
                          "got %r" % (p[:60], stat_key(decoy_st), reply))
    return "%d paths" % len(DECOY_PATHS)


@check("read: .. chains, relative/absolute/chained links and host paths "
       "to the outside fail")
def _(w):
    srv = w.server(context="read-fail")
    paths = FAIL_PATHS + host_paths(w)
    for p in paths:
        got = read_path(srv, p)
        if not isinstance(got, Status):
            raise Failure("OPEN/READ %r: expected an error, got %d bytes %r" %
                          (p, len(got), got[:40]))
        expect_error(srv.call(req_stat(p)), "STAT %r" % p)
    # Through a link as a directory, even LSTAT must not see the outside.
    for p in ["outdir/secret", "hostdir/secret", "chainabs_a/secret",
              "outdir/olink", "hostdir/" + UNIQUE_NAME, "../outside/secret"]:
        expect_error(srv.call(req_lstat(p)), "LSTAT %r" % p)
    return "%d paths" % len(paths)


@check("read: a hard link the admin placed inside the root is a file inside "
       "(harmless)")
def _(w):
    srv = w.server(context="adminlink")
    got = read_path(srv, "adminlink")
    if got != ADMIN_LINKED:
        raise Failure("OPEN/READ adminlink: expected %r, got %r" %
                      (ADMIN_LINKED, got))


@check("opendir: .., /.., .. chains and dirlink list the root itself")
def _(w):
    srv = w.server(context="opendir-root")
    want = root_names(w)
    for p in ["/", ".", "..", "../..", "../../..", "/..", "/../..",
              "a/../../..", "a/b/../../../..", "dirlink", "dirlink/..",
              "dirlink/dirlink/..", "sub/../.."]:
        got = list_dir(srv, p)
        if isinstance(got, Status):
            raise Failure("OPENDIR %r: expected the root's listing, got %r" %
                          (p, got))
        if set(got) != want:
            raise Failure("READDIR %r: expected the root's names, got "
                          "these more: %s, these fewer: %s" %
                          (p, sorted(set(got) - want),
                           sorted(want - set(got))))


@check("opendir: directories outside, through .. or links, fail")
def _(w):
    srv = w.server(context="opendir-fail")
    paths = ["../outside", "../../outside", "outdir", "outdir/", "outdir/sub",
             "hostdir", "chainabs_a", "dirlink/../outside", "proclink/self",
             "../outside/sub", w.out, w.tmp, "a/../../outside"]
    for p in paths:
        got = list_dir(srv, p)
        if not isinstance(got, Status):
            raise Failure("OPENDIR %r: expected an error, got names %s" %
                          (p, sorted(got)))
    return "%d paths" % len(paths)


@check("readdir: the root's .. entry carries the root's own attributes, "
       "not its parent's")
def _(w):
    srv = w.server(context="dotdot-attrs")
    tmp_st = os.stat(w.tmp)
    for p in ["/", "..", "dirlink", "a/.."]:
        got = list_dir(srv, p)
        if isinstance(got, Status) or b".." not in got or b"." not in got:
            raise Failure("READDIR %r: expected . and .., got %r" % (p, got))
        root_st = os.stat(w.root)
        dd, d = attrs_key(got[b".."].attrs), attrs_key(got[b"."].attrs)
        if dd != d or dd != stat_key(root_st):
            raise Failure("READDIR %r: expected '..' with the root's "
                          "attributes %r, got %r (the real parent's: %r)" %
                          (p, stat_key(root_st), dd, stat_key(tmp_st)))
        longname = got[b".."].longname
        if longname.split()[0] != stat.filemode(root_st.st_mode).encode():
            raise Failure("READDIR %r: '..' longname %r, expected the "
                          "root's mode %s" % (p, longname,
                                               stat.filemode(root_st.st_mode)))
    # The listing of a subdirectory has the root as its "..", as it is.
    got = list_dir(srv, "sub")
    if attrs_key(got[b".."].attrs) != stat_key(os.stat(w.root)):
        raise Failure("READDIR sub: '..' expected the root's attributes")
    for p in ["..", "/..", "../.."]:
        reply = srv.call(req_stat(p))
        if not isinstance(reply, AttrsReply) or \
                attrs_key(reply.attrs) != stat_key(os.stat(w.root)):
            raise Failure("STAT %r: expected the root's attributes, got %r" %
                          (p, reply))
    if stat_key(tmp_st) == stat_key(os.stat(w.root)):
        return "parent and root indistinguishable here"
    return None


@check("realpath: answers are paths as the client sees them, never the "
       "host path")
def _(w):
    srv = w.server(context="realpath")
    want = {".": b"/", "": b"/", "/": b"/", "..": b"/", "../../..": b"/",
            "/..": b"/", "dirlink": b"/", "dirlink/..": b"/",
            "a/../../..": b"/", "sub/../..": b"/", "inside": b"/inside",
            "abs": b"/etc/passwd", "../etc/passwd": b"/etc/passwd",
            "outdir": b"/outside", "../outside": b"/outside",
            "sub": b"/sub", "a/b/../../sub/subfile": b"/sub/subfile"}
    for p, expected in want.items():
        got = name1(srv.call(req_realpath(p)), "REALPATH %r" % p)
        if got != expected:
            raise Failure("REALPATH %r: expected %r, got %r" %
                          (p, expected, got))
    # Through a missing directory inside the root: an error (the host's
    # path of the root, too, is a path inside it, where it does not exist).
    for p in ["hostdir", "hostabs", "chainabs_a", "rel", "chain_a",
              "outdir/secret", "outdir/sub/deeper", w.tmp, w.root, w.out]:
        expect_error(srv.call(req_realpath(p)), "REALPATH %r" % p)


@check("expand-path: ~, ~/x and relative paths answer client paths")
def _(w):
    srv = w.server(context="expand-path")
    want = {"~": b"/", "~/": b"/", "~/inside": b"/inside", ".": b"/",
            "..": b"/", "~/..": b"/", "dirlink": b"/", "": b"/",
            "~/sub/../..": b"/"}
    for p, expected in want.items():
        got = name1(srv.call(req_expand_path(p)), "expand-path %r" % p)
        if got != expected:
            raise Failure("expand-path %r: expected %r, got %r" %
                          (p, expected, got))


@check("home-directory: the session user's home outside the root is /")
def _(w):
    srv = w.server(context="home-directory")
    me = pwd.getpwuid(os.getuid())
    for who in ["", me.pw_name]:
        got = name1(srv.call(req_home_directory(who)),
                    "home-directory %r" % who)
        if got != b"/":
            raise Failure("home-directory %r: expected '/', got %r" %
                          (who, got))


@check("home-directory: a home inside the root is answered as the client "
       "sees it")
def _(w):
    me = pwd.getpwuid(os.getuid())
    home = os.path.realpath(me.pw_dir)
    parent = os.path.dirname(home)
    if home == "/" or not os.path.isdir(home):
        raise Skip("the home directory %r is / or missing" % me.pw_dir)
    # Read-only requests only: this root is a real directory of the host.
    srv = w.server(["-R", "-r", parent], context="home-inside")
    got = name1(srv.call(req_home_directory("")), "home-directory")
    want = os.fsencode("/" + os.path.basename(home))
    if parent == "/":
        want = os.fsencode(home)
    if got != want:
        raise Failure("home-directory with -r %s: expected %r, got %r" %
                      (parent, want, got))
    srv2 = w.server(["-R", "-r", home], context="home-is-root")
    got = name1(srv2.call(req_home_directory("")), "home-directory")
    if got != b"/":
        raise Failure("home-directory with the home as root: expected '/', "
                      "got %r" % got)
    for p in [".", "~", "..", "~/"]:
        reply = srv2.call(req_expand_path(p))
        got = name1(reply, "expand-path %r" % p)
        if got != b"/":
            raise Failure("expand-path %r with the home as root: expected "
                          "'/', got %r" % (p, got))
    # ~USER is the passwd home, a host path: it must not come back as is.
    for p in ["~" + me.pw_name, "~" + me.pw_name + "/"]:
        reply = srv2.call(req_expand_path(p))
        if isinstance(reply, Name) and \
                name1(reply, "expand-path") == os.fsencode(me.pw_dir):
            raise Failure("expand-path %r with the home as root answered "
                          "the host path %r" % (p, me.pw_dir))


@check("readlink: links outside are not read; a link's own text is")
def _(w):
    srv = w.server(context="readlink")
    for p in ["outdir/olink", "../outside/olink", "hostdir/olink",
              "chainabs_a/olink", w.o("olink")]:
        expect_error(srv.call(req_readlink(p)), "READLINK %r" % p)
    got = name1(srv.call(req_readlink("abs")), "READLINK abs")
    if got != b"/etc/passwd":
        raise Failure("READLINK abs: expected its text '/etc/passwd', got %r"
                      % got)
    srv.allow_host_path = True  # the planted text is the host path
    got = name1(srv.call(req_readlink("hostdir")), "READLINK hostdir")
    srv.allow_host_path = False
    if got != os.fsencode(w.out):
        raise Failure("READLINK hostdir: expected its text, got %r" % got)


@check("open for writing: creating or truncating through links and .. "
       "stays inside or fails")
def _(w):
    srv = w.server(context="open-write")
    fail = ["rel", "outdir/secret", "outdir/newfile", "../outside/secret",
            "../outside/newfile", "hostabs", "hostdir/newfile", "chain_a",
            "chainabs_a/newfile", w.o("newfile"), w.o("secret"),
            "outdir/sub/deeper/file", "proclink/self/root" + w.o("newfile"),
            "proclink/self/cwd/../outside/newfile"]
    for p in fail:
        for flags in (WRITE_NEW, SSH_FXF_WRITE, SSH_FXF_WRITE | SSH_FXF_APPEND,
                      WRITE_NEW | SSH_FXF_EXCL):
            reply = srv.call(req_open(p, flags))
            if isinstance(reply, Handle):
                srv.call(req_write(reply.handle, 0, b"PWNED"))
                srv.close_handle(reply.handle)
                raise Failure("OPEN %r flags 0x%x: expected an error, got a "
                              "handle" % (p, flags))
            expect_error(reply, "OPEN %r flags 0x%x" % (p, flags))
    # These land inside the root.
    # These land inside the root.
    for i, p in enumerate(["../%s/new1", "../../../%s/new2", "/%s/new3",
                           "dirlink/%s/new4", "/../%s/new5",
                           "a/../../%s/new6"]):
        p = p % TOKDIR
        h = srv.open(p, WRITE_NEW)
        expect_ok(srv.call(req_write(h, 0, b"written")), "WRITE %r" % p)
        srv.close_handle(h)
        where = w.r(TOKDIR, "new%d" % (i + 1))
        if not os.path.isfile(where) or open(where, "rb").read() != b"written":
            raise Failure("OPEN %r: expected the new file at root/%s" %
                          (p, os.path.relpath(where, w.root)))
    # Creating through dangling links to absolute and .. paths.
    for link, made in [("tokcreate_abs", "made_abs"),
                       ("tokcreate_rel", "made_rel")]:
        h = srv.open(link, WRITE_NEW)
        srv.close_handle(h)
        if not os.path.isfile(w.r(TOKDIR, made)):
            raise Failure("OPEN %s (dangling link) with CREAT: expected "
                          "root/%s/%s" % (link, TOKDIR, made))
    # Opening "abs" for writing opens the decoy (nothing is written: were it
    # the host's /etc/passwd, merely opening it would harm nothing).
    h = srv.open("abs", SSH_FXF_WRITE)
    reply = srv.call(req_fstat(h))
    srv.close_handle(h)
    if not isinstance(reply, AttrsReply) or reply.attrs.size != len(DECOY):
        raise Failure("OPEN abs for writing: expected the decoy, FSTAT %r" %
                      reply)


@check("setstat: chmod/chown through abs change the decoy, never "
       "/etc/passwd; times through a link land inside")
def _(w):
    srv = w.server(context="setstat")
    before = w.passwd_state()
    pst = w.passwd_st
    mode = pst.st_mode & 0o7777
    # Each value is /etc/passwd's current one: harmless even if it escaped,
    # and its ctime would still show it.  (No times: SFTP's whole seconds
    # would cut its mtime's nanoseconds.)
    for p in ["abs", "/etc/passwd", "../../etc/passwd", "dirlink/etc/passwd"]:
        os.chmod(w.r("etc", "passwd"), w.decoy_mode)
        expect_ok(srv.call(req_setstat(p, Attrs(permissions=mode))),
                  "SETSTAT %r mode %o" % (p, mode))
        dst = os.stat(w.r("etc", "passwd"))
        if dst.st_mode & 0o7777 != mode:
            raise Failure("SETSTAT %r mode %o: expected the decoy to take "
                          "it, got %o" % (p, mode, dst.st_mode & 0o7777))
        # As root, /etc/passwd's owner; otherwise the decoy's own (which
        # the host's /etc/passwd would refuse).
        owner = (pst.st_uid, pst.st_gid) if os.geteuid() == 0 else \
            (os.getuid(), os.getgid())
        expect_ok(srv.call(req_setstat(p, Attrs(uid=owner[0],
                                                gid=owner[1]))),
                  "SETSTAT %r owner" % p)
    after = w.passwd_state()
    if after != before:
        raise Failure("/etc/passwd changed: %r -> %r" % (before, after))
    os.chmod(w.r("etc", "passwd"), w.decoy_mode)
    # Times through a link, on a file that exists only inside the root.
    os.symlink("/" + TOKDIR + "/file", w.r("tokabs"))
    expect_ok(srv.call(req_setstat("tokabs", Attrs(atime=34567,
                                                    mtime=34567))),
              "SETSTAT tokabs times")
    if os.stat(w.r(TOKDIR, "file")).st_mtime != 34567:
        raise Failure("SETSTAT tokabs times: expected root/%s/file's mtime "
                      "set" % TOKDIR)


@check("setstat: size/mode/times/owner through links outside fail")
def _(w):
    srv = w.server(context="setstat-out")
    paths = ["rel", "outdir/secret", "../outside/secret", "hostabs",
             "hostdir/secret", "chain_a", "outdir", "hostdir", "../outside",
             "outdir/emptydir", w.o("secret")]
    for p in paths:
        for a in (Attrs(size=0), Attrs(permissions=0o777),
                  Attrs(atime=1, mtime=1), Attrs(uid=65534, gid=65534)):
            expect_error(srv.call(req_setstat(p, a)),
                         "SETSTAT %r %r" % (p, a))
    return "%d paths" % len(paths)


@check("lsetstat: through outside links fails; on a link itself stays inside")
def _(w):
    srv = w.server(context="lsetstat")
    for p in ["outdir/secret", "../outside/secret", "hostdir/secret",
              "outdir/olink", "chainabs_a/secret", "outdir/emptydir"]:
        for a in (Attrs(permissions=0o777), Attrs(atime=1, mtime=1),
                  Attrs(uid=65534, gid=65534)):
            expect_error(srv.call(req_lsetstat(p, a)),
                         "LSETSTAT %r %r" % (p, a))
    # On the link "rel" itself (-> ../outside/secret): a mode cannot be set
    # (Linux), times can; were the link followed out, the snapshot of the
    # outside would show it.
    expect_error(srv.call(req_lsetstat("rel", Attrs(permissions=0o644))),
                 "LSETSTAT rel mode")
    expect_ok(srv.call(req_lsetstat("rel", Attrs(atime=12345, mtime=12345))),
              "LSETSTAT rel times")
    if os.lstat(w.r("rel")).st_mtime != 12345:
        raise Failure("LSETSTAT rel times: the link's mtime did not change")
    p = "dirlink/%s/file" % TOKDIR
    expect_ok(srv.call(req_lsetstat(p, Attrs(atime=23456, mtime=23456))),
              "LSETSTAT %s times" % p)
    if os.stat(w.r(TOKDIR, "file")).st_mtime != 23456:
        raise Failure("LSETSTAT %s: root/%s/file's mtime did not change" %
                      (p, TOKDIR))


@check("statvfs: through outside links fails; through dirlink is the root's")
def _(w):
    srv = w.server(context="statvfs")
    for p in ["outdir", "../outside", "hostdir", "proclink/self",
              "outdir/secret", "chainabs_a", w.out, "procself"]:
        expect_error(srv.call(req_statvfs(p)), "statvfs %r" % p)
    base = parse_statvfs(srv.call(req_statvfs("/")).data)
    for p in ["dirlink", "..", "../../..", "abs"]:
        reply = srv.call(req_statvfs(p))
        if not isinstance(reply, ExtendedReply):
            raise Failure("statvfs %r: expected a reply, got %r" % (p, reply))
        got = parse_statvfs(reply.data)
        for k in ("bsize", "blocks", "fsid", "namemax"):
            if got[k] != base[k]:
                raise Failure("statvfs %r: %s %d, expected the root's %d" %
                              (p, k, got[k], base[k]))


@check("mkdir/rmdir/remove/symlink: through outside links fail; through .. "
       "land inside")
def _(w):
    srv = w.server(context="entries")
    for p in ["outdir/newdir", "../outside/newdir", "hostdir/newdir",
              "chainabs_a/newdir", w.o("newdir"), "outdir/sub/new"]:
        expect_error(srv.call(req_mkdir(p)), "MKDIR %r" % p)
    for p in ["outdir/emptydir", "../outside/emptydir", "hostdir/emptydir",
              w.o("emptydir"), "outdir/sub/deeper", "..", "/", "dirlink",
              "outdir"]:
        expect_error(srv.call(req_rmdir(p)), "RMDIR %r" % p)
    for p in ["outdir/secret", "../outside/secret", "hostdir/secret",
              w.o("secret"), "outdir/olink", "chainabs_a/" + UNIQUE_NAME,
              "outdir/sub/deeper/file", "..", "/"]:
        expect_error(srv.call(req_remove(p)), "REMOVE %r" % p)
    for p in ["outdir/newlink", "../outside/newlink", "hostdir/newlink",
              w.o("newlink")]:
        expect_error(srv.call(req_symlink("/etc/passwd", p)),
                     "SYMLINK -> %r" % p)
    t = TOKDIR
    expect_ok(srv.call(req_mkdir("../%s/up_dir" % t)), "MKDIR ../T/up_dir")
    expect_ok(srv.call(req_mkdir("dirlink/dirlink/%s/up_dir2" % t)),
              "MKDIR dirlink/dirlink/T/up_dir2")
    expect_ok(srv.call(req_symlink("/etc/passwd", "../%s/up_link" % t)),
              "SYMLINK ../T/up_link")
    for name in ["up_dir", "up_dir2", "up_link"]:
        if not os.path.lexists(w.r(t, name)):
            raise Failure("expected %s created in root/%s" % (name, t))
    if read_path(srv, t + "/up_link") != DECOY:
        raise Failure("a client's link to /etc/passwd: expected the decoy")
    # A link the client made pointing out resolves inside, like any other.
    expect_ok(srv.call(req_symlink("../outside/secret", "client_rel")),
              "SYMLINK client_rel")
    if not isinstance(read_path(srv, "client_rel"), Status):
        raise Failure("OPEN client_rel (-> ../outside/secret): expected an "
                      "error")
    expect_ok(srv.call(req_rmdir("../%s/up_dir" % t)), "RMDIR ../T/up_dir")
    expect_ok(srv.call(req_remove("/../%s/up_link" % t)),
              "REMOVE /../T/up_link")
    for name in ["up_dir", "up_link"]:
        if os.path.lexists(w.r(t, name)):
            raise Failure("expected %s removed from root/%s" % (name, t))


@check("rename/posix-rename: with one side outside they fail; .. lands "
       "inside")
def _(w):
    srv = w.server(context="rename")
    for mk in (req_rename, req_posix_rename):
        for old, new in [("inside_r1", "../outside/x"),
                         ("inside_r1", "outdir/x"),
                         ("inside_r1", "hostdir/x"),
                         ("inside_r1", w.o("x")),
                         ("inside_r1", "outdir/sub/x"),
                         ("inside_r1", "chainabs_a/x"),
                         ("outdir/secret", "stolen"),
                         ("../outside/secret", "stolen"),
                         ("hostdir/secret", "stolen"),
                         (w.o("secret"), "stolen"),
                         ("outdir/emptydir", "stolen_dir"),
                         ("outdir/olink", "stolen_link"),
                         ("chainabs_a/" + UNIQUE_NAME, "stolen")]:
            expect_error(srv.call(mk(old, new)),
                         "%s %r -> %r" % (mk.__name__, old, new))
        if not os.path.isfile(w.r("inside_r1")):
            raise Failure("inside_r1 vanished from the root")
    t = TOKDIR
    expect_ok(srv.call(req_rename("inside_r2", "../%s/x_up" % t)),
              "RENAME inside_r2 ../T/x_up")
    expect_ok(srv.call(req_posix_rename("inside_r3", "../../../%s/y_up" % t)),
              "posix-rename inside_r3 ../../../T/y_up")
    expect_ok(srv.call(req_posix_rename("inside_r4", "dirlink/%s/z_up" % t)),
              "posix-rename inside_r4 dirlink/T/z_up")
    for n in ["x_up", "y_up", "z_up"]:
        if not os.path.isfile(w.r(t, n)):
            raise Failure("expected root/%s/%s after the rename" % (t, n))


@check("hardlink: the client cannot link outside files into the root "
       "(nor root files out)")
def _(w):
    srv = w.server(context="hardlink")
    pst = os.stat("/etc/passwd")
    for old, new in [("../outside/secret", "hl1"), ("outdir/secret", "hl2"),
                     ("hostdir/secret", "hl3"), (w.o("secret"), "hl4"),
                     ("outdir/" + UNIQUE_NAME, "hl6"),
                     ("chainabs_a/secret", "hl7"),
                     ("inside", "outdir/hl8"), ("inside", "../outside/hl9"),
                     ("inside", "hostdir/hl10"), ("inside", w.o("hl11")),
                     ("outdir/linked", "hl12")]:
        expect_error(srv.call(req_hardlink(old, new)),
                     "hardlink %r -> %r" % (old, new))
    # "/etc/passwd" is the decoy: a link to it is a link to the decoy.
    reply = srv.call(req_hardlink("/etc/passwd", "hl_etc"))
    if ok_status(reply):
        st = os.lstat(w.r("hl_etc"))
        if st.st_ino != os.stat(w.r("etc", "passwd")).st_ino or \
                st.st_ino == pst.st_ino:
            raise Failure("hardlink /etc/passwd: expected the decoy's inode")
    else:
        expect_error(reply, "hardlink /etc/passwd")
    # "abs" is a link: a hard link to it is a link to the link, inside.
    reply = srv.call(req_hardlink("abs", "hl_abs"))
    if ok_status(reply) and not os.path.islink(w.r("hl_abs")):
        raise Failure("hardlink abs: expected a link to the symlink itself")
    if os.stat("/etc/passwd").st_nlink != pst.st_nlink:
        raise Failure("/etc/passwd gained a link")
    for n in os.listdir(w.root):
        st = os.lstat(w.r(n))
        if stat.S_ISREG(st.st_mode) and st.st_ino in (
                pst.st_ino, os.lstat(w.o("secret")).st_ino):
            raise Failure("root/%s is a hard link to a file outside" % n)


@check("copy-data: outside paths cannot be opened, so no handle to copy "
       "from or to")
def _(w):
    srv = w.server(context="copy-data")
    for p in ["../outside/secret", "outdir/secret", "rel", "hostabs",
              w.o("secret")]:
        expect_error(srv.call(req_open(p, READ)), "OPEN %r for reading" % p)
        expect_error(srv.call(req_open(p, WRITE_NEW)), "OPEN %r for writing"
                     % p)
    rh = srv.open("inside", READ)
    wh = srv.open("../%s/copy_up" % TOKDIR, WRITE_NEW)
    expect_ok(srv.call(req_copy_data(rh, 0, 0, wh, 0)), "copy-data")
    srv.close_handle(rh)
    srv.close_handle(wh)
    if open(w.r(TOKDIR, "copy_up"), "rb").read() != INSIDE:
        raise Failure("copy-data inside the root: expected root/%s/copy_up"
                      % TOKDIR)


def edge_tree(d):
    os.mkdir(d)
    for n in ["f1", "f2", "f3", "f4", "f5"]:
        with open(os.path.join(d, n), "wb") as f:
            f.write(INSIDE)
    os.mkdir(os.path.join(d, "dir"))
    os.symlink("f1", os.path.join(d, "lnk"))
    os.symlink("nothing", os.path.join(d, "dang"))
    os.symlink("nothing", os.path.join(d, "dang2"))


EDGE_REQUESTS = [
    ("REMOVE f1/", req_remove("f1/")), ("REMOVE lnk/", req_remove("lnk/")),
    ("REMOVE dang/", req_remove("dang/")),
    ("HARDLINK f2/ h1", req_hardlink("f2/", "h1")),
    ("HARDLINK dang2/ h2", req_hardlink("dang2/", "h2")),
    ("RENAME f3/ r1", req_rename("f3/", "r1")),
    ("posix-rename f4/ r2", req_posix_rename("f4/", "r2")),
    ("posix-rename f5 r3/", req_posix_rename("f5", "r3/")),
    ("SYMLINK x newl/", req_symlink("x", "newl/")),
    ("RMDIR f2/", req_rmdir("f2/")), ("MKDIR md/", req_mkdir("md/")),
    ("LSTAT lnk/", req_lstat("lnk/")), ("READLINK lnk/", req_readlink("lnk/")),
    ("LSTAT f2/", req_lstat("f2/")), ("STAT f2/.", req_stat("f2/.")),
    ("RMDIR dir/.", req_rmdir("dir/.")), ("RMDIR dir/..", req_rmdir("dir/..")),
    ("REMOVE dir/.", req_remove("dir/.")), ("MKDIR dir/.", req_mkdir("dir/.")),
    ("SYMLINK x dir/.", req_symlink("x", "dir/.")),
    ("HARDLINK f2 dir/.", req_hardlink("f2", "dir/.")),
    ("RENAME dir/. x", req_rename("dir/.", "x")),
    ("READLINK dir/.", req_readlink("dir/.")),
]


def reply_key(reply):
    if isinstance(reply, Status):
        return STATUS_NAMES.get(reply.code, reply.code)
    return type(reply).__name__


@check("edge paths (trailing /, last component . or ..): answered under -r "
       "as without it")
def _(w):
    plain, jail = w.r("edge_plain"), w.r("edge_jail")
    edge_tree(plain)
    edge_tree(jail)
    a = w.server(["-d", plain], context="edge-plain")
    b = w.server(["-r", jail], context="edge-jail")
    diffs = []
    for what, req in EDGE_REQUESTS:
        ka, kb = reply_key(a.call(req)), reply_key(b.call(req))
        if ka != kb:
            diffs.append("%s: %s without -r, %s with" % (what, ka, kb))
    ta, tb = sorted(os.listdir(plain)), sorted(os.listdir(jail))
    if ta != tb:
        diffs.append("files left: %s without -r, %s with" % (ta, tb))
    if diffs:
        raise Failure("expected the same answers, got: " + "; ".join(diffs))


# The swap race: another process flips "victim" between a directory inside
# the root and symlinks to the outside directory (absolute host path and
# relative) with renameat2(RENAME_EXCHANGE); the client keeps working on
# victim/secret and victim/newfile.
FLIPPER = r"""
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
rx = libc.renameat2
rx.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
               ctypes.c_uint]
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
victim = sys.argv[1].encode()
spares = [s.encode() for s in sys.argv[3:]]
end = time.monotonic() + float(sys.argv[2])
n = 0
print("ready", flush=True)
while not stop and time.monotonic() < end:
    for s in spares:
        for _ in range(2):
            if rx(-100, victim, -100, s, 2) != 0:
                print("renameat2: " + os.strerror(ctypes.get_errno()),
                      flush=True)
                sys.exit(1)
            n += 1
print(n, flush=True)
"""


@check("race: victim swapped between an inside directory and links out, "
       "while the client works on it")
def _(w):
    import ctypes
    if not hasattr(ctypes.CDLL(None), "renameat2"):
        raise Skip("no renameat2() in the C library")
    libc = ctypes.CDLL(None, use_errno=True)
    for _ in range(2):   # swap the spares and back: can this fs exchange?
        if libc.renameat2(-100, w.r(".spare_abs").encode(), -100,
                          w.r(".spare_rel").encode(), 2) != 0:
            raise Skip("this file system cannot exchange names "
                       "(renameat2 RENAME_EXCHANGE: %s)" %
                       os.strerror(ctypes.get_errno()))
    srv = w.server(context="race")
    allowed = {b".", b"..", b"secret", b"newfile", b"newfile2", b"newdir",
               b"olink", b"hl"}
    flipper = subprocess.Popen(
        [sys.executable, "-I", "-c", FLIPPER, w.r("victim"),
         str(RACE_SECONDS + 10), w.r(".spare_abs"), w.r(".spare_rel")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=w.root)
    try:
        if flipper.stdout.readline().strip() != b"ready":
            raise Failure("the flipper did not start: %r" %
                          flipper.stderr.read())
        seen = {"ok": 0, "err": 0}
        iters = 0
        end = time.monotonic() + RACE_SECONDS
        while time.monotonic() < end:
            iters += 1
            for p in ["victim/secret", "victim/../victim/secret",
                      "victim/./secret"]:
                got = read_path(srv, p)
                if isinstance(got, Status):
                    seen["err"] += 1
                elif got != VICTIM_SECRET:
                    raise Failure("iteration %d: OPEN/READ %r gave %r" %
                                  (iters, p, got[:60]))
                else:
                    seen["ok"] += 1
            reply = srv.call(req_stat("victim/secret"))
            if isinstance(reply, AttrsReply) and \
                    reply.attrs.size != len(VICTIM_SECRET):
                raise Failure("iteration %d: STAT victim/secret size %d" %
                              (iters, reply.attrs.size))
            expect_error(srv.call(req_stat("victim/" + UNIQUE_NAME)),
                         "STAT victim/" + UNIQUE_NAME)
            got = list_dir(srv, "victim")
            if not isinstance(got, Status) and not set(got) <= allowed:
                raise Failure("iteration %d: READDIR victim listed %s" %
                              (iters, sorted(set(got) - allowed)))
            reply = srv.call(req_open("victim/newfile", WRITE_NEW))
            if isinstance(reply, Handle):
                srv.call(req_write(reply.handle, 0, b"race"))
                srv.call(req_close(reply.handle))
            srv.call(req_setstat("victim/secret", Attrs(permissions=0o640)))
            srv.call(req_rename("victim/newfile", "victim/newfile2"))
            srv.call(req_remove("victim/newfile2"))
            srv.call(req_remove("victim/newfile"))
            srv.call(req_mkdir("victim/newdir"))
            srv.call(req_rmdir("victim/newdir"))
            srv.call(req_symlink("x", "victim/olink"))
            srv.call(req_remove("victim/olink"))
            srv.call(req_hardlink("victim/secret", "victim/hl"))
            srv.call(req_remove("victim/hl"))
    finally:
        flipper.send_signal(signal.SIGTERM)
        try:
            fout, ferr = flipper.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            flipper.kill()
            fout, ferr = flipper.communicate(timeout=5)
    last = fout.split()[-1:] or [b""]
    if flipper.returncode != 0 or not last[0].isdigit():
        raise Failure("the flipper failed: %r %r" % (fout, ferr))
    if not os.path.isdir(w.r("victim")) or os.path.islink(w.r("victim")):
        raise Failure("the flipper left victim a link")
    if seen["ok"] == 0 or seen["err"] == 0:
        raise Failure("race not exercised: %d reads inside, %d failed, %s "
                      "swaps" % (seen["ok"], seen["err"], last[0].decode()))
    return ("%d iterations (%d requests), %s swaps; victim/secret read %d "
            "times inside, %d refused while a link" %
            (iters, srv._next_id - 1, last[0].decode(), seen["ok"],
             seen["err"]))


@check("-r through a symlink to a real directory: works, stays inside the "
       "real directory")
def _(w):
    for arg in [os.path.join(w.tmp, "rootlink"), "rootlink", "rootlink/",
                "./root/../rootlink"]:
        srv = w.server(["-r", arg], context="rootlink")
        if read_path(srv, "inside") != INSIDE:
            raise Failure("-r %s: OPEN/READ inside failed" % arg)
        for p in ["../outside/secret", "../root/inside", "rel", w.r("inside")]:
            if not isinstance(read_path(srv, p), Status):
                raise Failure("-r %s: OPEN/READ %r: expected an error" %
                              (arg, p))
        got = name1(srv.call(req_realpath(".")), "REALPATH .")
        if got != b"/":
            raise Failure("-r %s: REALPATH . expected '/', got %r" %
                          (arg, got))
        names = list_dir(srv, "..")
        if isinstance(names, Status) or set(names) != root_names(w):
            raise Failure("-r %s: READDIR .. expected the root's names" % arg)
        if attrs_key(names[b".."].attrs) != stat_key(os.stat(w.root)):
            raise Failure("-r %s: '..' expected the root's attributes" % arg)
        h = srv.open("../%s/via_rootlink" % TOKDIR, WRITE_NEW)
        srv.close_handle(h)
        if not os.path.isfile(w.r(TOKDIR, "via_rootlink")):
            raise Failure("-r %s: a new file did not land in the real "
                          "directory" % arg)
        os.unlink(w.r(TOKDIR, "via_rootlink"))
        srv.close()


MAGIC_PATHS = ["/proc/self/root/etc/passwd", "/proc/self/root",
               "/proc/self/cwd/../outside/secret", "/proc/1/root/etc/passwd",
               "/proc/self/exe", "/proc/thread-self/root/etc/passwd",
               "proc/self/root/proc/self/root/etc/passwd",
               "proclink/self/root/etc/passwd"]


def proc_server(w, context):
    """The server with /proc mounted inside the root, in a private mount
    namespace of its own (so the mount vanishes with it); Skip if that
    cannot be done here."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        raise Skip("needs unshare(1) and root, to mount /proc inside the "
                   "root in a private mount namespace")
    script = 'mount -t proc proc "$1/proc" && exec "$2" -e -r "$1"'
    srv = w.start(["unshare", "-m", "--propagation", "private", "sh", "-c",
                   script, "sh", w.root, SERVER], init=False, context=context)
    try:
        srv.init()
    except WireError:
        raise Skip("cannot mount /proc in a private namespace here: %r" %
                   srv.stderr_output().strip()[:200])
    reply = srv.call(req_stat("/proc/self/status"))
    if not isinstance(reply, AttrsReply):
        raise Skip("/proc is not mounted inside the root: STAT "
                   "/proc/self/status got %r" % reply)
    return srv


@check("magic links: with /proc mounted inside the root, /proc/self/root, "
       "cwd, exe and /proc/1/root are not followed")
def _(w):
    srv = proc_server(w, "magic")
    for p in MAGIC_PATHS:
        got = read_path(srv, p)
        if not isinstance(got, Status):
            raise Failure("OPEN/READ %r: expected an error, got %d bytes %r"
                          % (p, len(got), got[:40]))
        got = list_dir(srv, p)
        if not isinstance(got, Status):
            raise Failure("OPENDIR %r: expected an error, got names %s" %
                          (p, sorted(got)[:10]))
        expect_error(srv.call(req_stat(p)), "STAT %r" % p)
        expect_error(srv.call(req_statvfs(p)), "statvfs %r" % p)
    # (Read-only requests only: followed, these links lead to the host's
    # own files.)
    return "%d paths" % len(MAGIC_PATHS)


@check("magic links: with /proc mounted inside the root, READLINK of "
       "/proc/self/cwd, exe and fd/N reveals no host path")
def _(w):
    srv = proc_server(w, "magic-readlink")
    # This check reports host paths itself, not the invariant.
    srv.allow_host_path = True
    leaks = []
    for p in ["/proc/self/cwd", "/proc/self/exe"] + \
            ["/proc/self/fd/%d" % i for i in range(3, 8)]:
        reply = srv.call(req_readlink(p))
        if isinstance(reply, Name):
            got = name1(reply, "READLINK %r" % p)
            if got.startswith(b"/") and (os.fsencode(w.tmp) in got or
                                         got == os.fsencode(SERVER)):
                leaks.append("%s -> %s" % (p, got.decode(errors="replace")))
    if leaks:
        raise Failure("expected an error or a path inside the root, got the "
                      "host's: " + ", ".join(leaks))


@check("-r with a missing directory, a file or a dangling link: exit "
       "non-zero with an error on stderr")
def _(w):
    os.symlink("nowhere", w.r("dangling"))
    try:
        for arg in [os.path.join(w.tmp, "missing"), w.r("inside"),
                    w.r("dangling"), "missing/sub"]:
            srv = w.server(["-r", arg], init=False, context="missing-root")
            try:
                srv.init()
                raise Failure("-r %s: expected no VERSION, got one" % arg)
            except (ServerClosed, ProtocolError):
                pass
            except BrokenPipeError:
                pass
            rc = srv.wait()
            err = srv.stderr_output()
            if rc == 0 or rc < 0:
                raise Failure("-r %s: expected a non-zero exit, got %d" %
                              (arg, rc))
            if os.fsencode(arg) not in err or not err.strip():
                raise Failure("-r %s: expected an error naming it on stderr, "
                              "got %r" % (arg, err))
    finally:
        os.unlink(w.r("dangling"))


@check("-d is taken relative to the root")
def _(w):
    cases = [("/sub", b"/sub"), ("sub", b"/sub"), ("dirlink/sub", b"/sub"),
             ("/a/b/../../sub", b"/sub"), ("/", b"/"), ("..", b"/"),
             ("../..", b"/")]
    for d, want in cases:
        srv = w.server(["-r", w.root, "-d", d], context="-d")
        got = name1(srv.call(req_realpath(".")), "REALPATH .")
        if got != want:
            raise Failure("-d %s: expected the start directory %r, got %r" %
                          (d, want, got))
        if want == b"/sub" and read_path(srv, "subfile") != SUBFILE:
            raise Failure("-d %s: OPEN subfile (relative) failed" % d)
        srv.close()
    # Directories outside, by .. or links or host paths: not entered; the
    # session starts at "/" with an error logged.
    for d in ["../outside", "outdir", "hostdir", w.out, w.r("sub")]:
        srv = w.server(["-r", w.root, "-d", d], context="-d-out")
        got = name1(srv.call(req_realpath(".")), "REALPATH .")
        if got != b"/":
            raise Failure("-d %s: expected to stay at '/', got %r" % (d, got))
        if not isinstance(read_path(srv, "secret"), Status):
            raise Failure("-d %s: OPEN secret (relative) succeeded" % d)
        srv.close()
        if b"chdir" not in srv.stderr_output():
            raise Failure("-d %s: expected a chdir error on stderr, got %r" %
                          (d, srv.stderr_output()))


# ---------------------------------------------------------------------------
# The invariant

def final_checks(w, before, passwd_before):
    results = []

    def add(name, fn):
        try:
            detail = fn()
            results.append(("ok", name, detail))
        except Failure as e:
            results.append(("FAIL", name, str(e)))

    def no_leak():
        needles = [(SECRET.strip(), "the secret"),
                   (LINK_TEXT.encode(), "the outside link's text"),
                   (UNIQUE_NAME.encode(), "the outside-only name")]
        needles += [(l, "a line of the host's /etc/passwd")
                    for l in w.passwd_lines]
        for payload, ctx, _ in REPLIES:
            for n, what in needles:
                if n in payload:
                    raise Failure("a reply in %r carried %s: %r" %
                                  (ctx, what, payload[:120]))
        return "%d replies searched" % len(REPLIES)

    def no_host_path():
        host = os.fsencode(w.tmp)
        for payload, ctx, allowed in REPLIES:
            if host in payload and not allowed:
                raise Failure("a reply in %r carried the host path %r: %r" %
                              (ctx, w.tmp, payload[:160]))

    def outside_unchanged():
        after = w.snapshot()
        diffs = []
        for k in sorted(set(before) | set(after)):
            if before.get(k) != after.get(k):
                diffs.append("%s: %r -> %r" % (k, before.get(k),
                                               after.get(k)))
        if diffs:
            raise Failure("the outside changed: " + "; ".join(diffs)[:2000])
        return "%d entries" % len(after)

    def passwd_unchanged():
        after = w.passwd_state()
        if after != passwd_before:
            raise Failure("/etc/passwd changed: %r -> %r (unless another "
                          "program rewrote it meanwhile)" %
                          (passwd_before, after))

    add("invariant: no reply carries a byte or a name from outside the root",
        no_leak)
    add("invariant: no reply carries the host path of the root",
        no_host_path)
    add("invariant: nothing outside the root read, written, created or "
        "listed (TMP and TMP/outside snapshot)", outside_unchanged)
    add("invariant: the host's /etc/passwd unchanged (inode, mode, owner, "
        "size, links, mtime, ctime)", passwd_unchanged)
    return results


def tool(argv):
    """The helpers of run-confine.sh (see the module's doc)."""
    if argv[1] == "--layout" and len(argv) == 3:
        World(argv[2])
        print("TOKEN=%s" % TOKEN)
        return 0
    if argv[1] == "--snapshot" and len(argv) == 3:
        w = World(argv[2], build=False)
        for k, v in sorted(w.snapshot().items()):
            print("%s %r" % (k, v))
        print("/etc/passwd %r" % (w.passwd_state(),))
        return 0
    if argv[1] == "--flip" and len(argv) == 4:
        w = World(argv[2], build=False)
        os.chdir(w.root)
        sys.argv = ["flipper", w.r("victim"), argv[3], w.r(".spare_abs"),
                    w.r(".spare_rel")]
        exec(FLIPPER, {"__name__": "flipper"})
        return 0
    print("usage: see test_confine.py --help", file=sys.stderr)
    return 2


def main(argv):
    if argv[1:2] in (["--layout"], ["--snapshot"], ["--flip"]):
        return tool(argv)
    patterns = argv[1:]
    if any(p in ("-h", "--help") for p in patterns):
        print(__doc__.strip())
        return 0
    results = Results()
    report = results.report

    if not os.access(SERVER, os.X_OK):
        report("FAIL", "server", "expected an executable at %s" % SERVER)
        return results.summary()
    w = World()
    try:
        before = w.snapshot()
        passwd_before = w.passwd_state()
        probe = w.server(init=False, context="probe")
        try:
            probe.init()
        except WireError:
            err = probe.stderr_output()
            if b"openat2" in err:
                report("skip", "all", "the kernel has no openat2(2): %r" %
                       err.strip())
                return results.summary()
            if b"bad ownership" in err:
                report("skip", "all", "-r wants a path only root can "
                       "change, and this user owns %s: run as root (%r)" %
                       (w.tmp, err.strip()))
                return results.summary()
        probe.kill()
        for name, fn in CHECKS:
            if patterns and not any(p in name for p in patterns):
                continue
            state, detail = outcome(fn, w)
            report(state, name, detail)
        for srv in w.servers:
            srv.kill()
        for state, name, detail in final_checks(w, before, passwd_before):
            report(state, name, detail)
    finally:
        w.cleanup()
    return results.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
