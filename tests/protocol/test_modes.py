#!/usr/bin/env python3
"""Forced modes (-m and -M), from outside the session.

The server under test ($SFTP_SERVER, default sftp-server in the
repository's root) runs in a fresh directory with umask 022 unless a check
says otherwise; the test looks at the modes with the system's own calls.

Checks:
  file_mode_exact           OPEN that makes a file: exactly -m's mode,
                            whatever the client asks and the umask (-u 077
                            too); an OPEN of a file that is there (CREATE,
                            TRUNCATE) leaves its mode; a dangling symlink's
                            target is made, with -m's mode
  dir_mode_exact            MKDIR: exactly -M's mode; without -M (-m
                            alone) the client's mode less the umask, as
                            before
  changes_kept_silently     SETSTAT, FSETSTAT and lsetstat with
                            permissions: OK, the mode stays; the times and
                            the size asked for beside it apply; -m alone
                            leaves a directory's change through, -M alone
                            a file's
  kept_by_the_file_changed  -m: another program swaps a directory and a
                            file between the server's look at the name and
                            its change (tests/protocol/shim_fs_faults.c,
                            FAULT_SWAP): the file keeps -m's mode, the
                            directory it looked at changes; the same with
                            -M, the other way round; and by lsetstat
  atomic_uploads            -A with -m: a new name gets -m's mode, an
                            upload over a file takes the old mode
  on_storage_that_waits     the same OPENs as jobs of workers (under
                            bench/slowfs; no -L, whose guard keeps OPENs
                            in the loop): a made file has -m's mode, one
                            that was there keeps its own
  transfer_log              "mode_forced":true on the close of a file made
                            with -m (through a dangling symlink too), on
                            MKDIR under -M (not on one that failed: its
                            mode is the one asked for), and on a change
                            left out; absent elsewhere
  transfer_log_refused      -m: SETSTAT of the transfer log's mode, by its
                            name or a symlink, is refused (PERMISSION_DENIED)
                            as without -m, and its mode stays
  bad_values                -m and -M with a value that is not octal 0 to
                            7777 (999, 10000, -1, 0x1ff, "", " 644"): exit
                            255 at start, as for a bad -u
  without_the_options       the umask and the client's modes as before

Usage: test_modes.py [NAME-SUBSTRING ...]
Prints one line per check, then "N passed, M failed[, K skipped]"; exits 1
if any failed.
"""

import os
import shutil
import stat
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # leave no __pycache__ in the tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))

from sftpwire import *  # noqa: E402,F401,F403
import suite  # noqa: E402
from suite import expect, expect_eq, expect_type, test  # noqa: E402
from suite import expect_ok as ok, json_lines as records  # noqa: E402

SERVER_ARGV = server_argv()
UP = SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC


class Ctx:
    def __init__(self):
        self.tmp = os.path.realpath(tempfile.mkdtemp(prefix="sftp-modes-"))
        self.servers = []

    def server(self, args=(), umask=0o022, argv=None, env=None):
        srv = Server((argv or SERVER_ARGV) + list(args), cwd=self.tmp,
                     umask=umask, env=env)
        self.servers.append(srv)
        srv.init()
        return srv

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def mode(self, name):
        return stat.S_IMODE(os.lstat(self.path(name)).st_mode)

    def cleanup(self):
        for srv in self.servers:
            srv.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)



def make(srv, name, perm, flags=UP):
    h = srv.open(name, flags, Attrs(permissions=perm))
    ok(srv.call(req_write(h, 0, b"data")), "WRITE " + name)
    ok(srv.call(req_close(h)), "CLOSE " + name)


@test
def test_file_mode_exact(ctx):
    with open(ctx.path("there"), "w") as f:
        f.write("old")
    os.chmod(ctx.path("there"), 0o604)
    os.symlink("target", ctx.path("dangling"))
    srv = ctx.server(["-m", "0640"])
    make(srv, "a", 0o777)
    make(srv, "b", 0o600)
    make(srv, "there", 0o777)
    make(srv, "dangling", 0o777, SSH_FXF_WRITE | SSH_FXF_CREAT)
    srv.close()
    srv = ctx.server(["-m", "0604", "-u", "077"], umask=0o077)
    make(srv, "c", 0o600)
    srv.close()
    got = {n: ctx.mode(n) for n in ("a", "b", "there", "target", "c")}
    expect_eq("modes", got, {"a": 0o640, "b": 0o640, "there": 0o604,
                             "target": 0o640, "c": 0o604})


@test
def test_dir_mode_exact(ctx):
    srv = ctx.server(["-M", "0751"])
    ok(srv.call(req_mkdir("d", Attrs(permissions=0o700))), "MKDIR d")
    ok(srv.call(req_mkdir("e")), "MKDIR e")
    srv.close()
    srv = ctx.server(["-m", "0600"])
    ok(srv.call(req_mkdir("f", Attrs(permissions=0o777))), "MKDIR f")
    srv.close()
    expect_eq("modes", [ctx.mode(n) for n in ("d", "e", "f")],
              [0o751, 0o751, 0o755])


@test
def test_changes_kept_silently(ctx):
    srv = ctx.server(["-m", "0640", "-M", "0750"])
    make(srv, "f", 0o600)
    ok(srv.call(req_mkdir("d")), "MKDIR")
    reply = srv.call(req_mkdir("d", Attrs(permissions=0o700)))
    expect(isinstance(reply, Status) and reply.code == SSH_FX_FAILURE,
           "MKDIR of a name there: %r" % (reply,))
    h = srv.open("f", SSH_FXF_WRITE)
    ok(srv.call(req_fsetstat(h, Attrs(permissions=0o606, size=2))),
       "FSETSTAT f")
    ok(srv.call(req_close(h)), "CLOSE")
    ok(srv.call(req_setstat("f", Attrs(permissions=0o777,
                                       atime=1000000, mtime=1000000))),
       "SETSTAT f")
    ok(srv.call(req_lsetstat("f", Attrs(permissions=0o400))), "lsetstat f")
    ok(srv.call(req_setstat("d", Attrs(permissions=0o700))), "SETSTAT d")
    srv.close()
    st = os.stat(ctx.path("f"))
    expect_eq("f: mode, mtime, size", (stat.S_IMODE(st.st_mode),
                                       int(st.st_mtime), st.st_size),
              (0o640, 1000000, 2))
    expect_eq("d: mode", ctx.mode("d"), 0o750)
    # One option: the other kind changes.
    srv = ctx.server(["-m", "0640"])
    ok(srv.call(req_setstat("d", Attrs(permissions=0o711))), "SETSTAT d")
    srv.close()
    srv = ctx.server(["-M", "0750"])
    ok(srv.call(req_setstat("f", Attrs(permissions=0o604))), "SETSTAT f")
    srv.close()
    expect_eq("d, f", (ctx.mode("d"), ctx.mode("f")), (0o711, 0o604))


@test
def test_kept_by_the_file_changed(ctx):
    shim = suite.shim_library(os.path.join(HERE, "shim_fs_faults.c"),
                              "sftp-modes-shim-")
    swaps = 0
    for opt, req in (("-m", req_setstat), ("-M", req_setstat),
                     ("-m", req_lsetstat)):
        for name in os.listdir(ctx.tmp):
            p = ctx.path(name)
            (os.rmdir if os.path.isdir(p) else os.unlink)(p)
        # x is what the server looks at: the kind the option does not keep.
        keep_file = opt == "-m"
        os.mkdir(ctx.path("x" if keep_file else "y"), 0o755)
        with open(ctx.path("y" if keep_file else "x"), "w") as f:
            f.write("file")
        os.chmod(ctx.path("y" if keep_file else "x"), 0o644)
        log = ctx.path("..", os.path.basename(ctx.tmp) + ".swaplog")
        env = dict(os.environ, LD_PRELOAD=shim, FAULT_SWAP="x:y",
                   FAULT_LOG=log)
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") +
                               ":verify_asan_link_order=0").lstrip(":")
        srv = ctx.server([opt, "0644" if keep_file else "0755"], env=env)
        reply = srv.call(req("x", Attrs(permissions=0o6777)))
        srv.close()
        with open(log) as f:
            swapped = "swap" in f.read()
        os.unlink(log)
        swaps += swapped
        # The kind the option keeps, wherever the swap left it.
        for n in ("x", "y"):
            st = os.lstat(ctx.path(n))
            if stat.S_ISDIR(st.st_mode) != keep_file:
                expect_eq("%s %s: the %s's mode" % (opt, req.__name__,
                          "file" if keep_file else "directory"),
                          stat.S_IMODE(st.st_mode),
                          0o644 if keep_file else 0o755)
        ok(reply, "%s %s" % (opt, req.__name__))
    expect(swaps == 3, "the shim swapped the names %d times of 3" % swaps)


@test
def test_atomic_uploads(ctx):
    with open(ctx.path("old"), "w") as f:
        f.write("old")
    os.chmod(ctx.path("old"), 0o604)
    srv = ctx.server(["-A", "-m", "0640", "-u", "077"], umask=0o077)
    make(srv, "new", 0o777)
    make(srv, "old", 0o777)
    srv.close()
    expect_eq("new, old", (ctx.mode("new"), ctx.mode("old")),
              (0o640, 0o604))
    expect_eq("the directory", sorted(os.listdir(ctx.tmp)), ["new", "old"])



@test
def test_transfer_log(ctx):
    os.mkdir(ctx.path("w"))
    log = ctx.path("x.log")
    open(log, "w").close()
    with open(ctx.path("w", "there"), "w") as f:
        f.write("old")
    srv = Server(SERVER_ARGV + ["-m", "0640", "-M", "0750", "-L", log],
                 cwd=ctx.path("w"), umask=0o022)
    ctx.servers.append(srv)
    srv.init()
    make(srv, "new", 0o600)
    make(srv, "there", 0o600)
    os.symlink("target", ctx.path("w", "dangling"))
    make(srv, "dangling", 0o600)
    ok(srv.call(req_mkdir("d")), "MKDIR")
    reply = srv.call(req_mkdir("d", Attrs(permissions=0o700)))
    expect(isinstance(reply, Status) and reply.code == SSH_FX_FAILURE,
           "MKDIR of a name there: %r" % (reply,))
    ok(srv.call(req_setstat("new", Attrs(permissions=0o777))), "SETSTAT")
    ok(srv.call(req_setstat("new", Attrs(mtime=5, atime=5))), "SETSTAT")
    srv.close()
    got = [(r["event"], r.get("path"), r.get("mode"),
            r.get("mode_forced", False)) for r in records(log)
           if r["event"] in ("close", "mkdir", "setstat")]
    expect_eq("records", got, [("close", "new", None, True),
                               ("close", "there", None, False),
                               ("close", "dangling", None, True),
                               ("mkdir", "d", "0750", True),
                               ("mkdir", "d", "0700", False),
                               ("setstat", "new", "0777", True),
                               ("setstat", "new", None, False)])


@test
def test_transfer_log_refused(ctx):
    os.mkdir(ctx.path("lg"))
    log = ctx.path("lg", "xfer.log")
    open(log, "w").close()
    os.chmod(log, 0o644)
    os.symlink("xfer.log", ctx.path("lg", "lnk"))
    srv = Server(SERVER_ARGV + ["-m", "0600", "-L", log],
                 cwd=ctx.path("lg"), umask=0o022)
    ctx.servers.append(srv)
    srv.init()
    for name in ("xfer.log", "lnk"):
        reply = srv.call(req_setstat(name, Attrs(permissions=0o666)))
        expect(isinstance(reply, Status) and
               reply.code == SSH_FX_PERMISSION_DENIED,
               "SETSTAT of the log's mode through %s: %r" % (name, reply))
    srv.close()
    expect_eq("the log's mode", stat.S_IMODE(os.stat(log).st_mode), 0o644)
    expect_eq("setstat records",
              [(r["path"], r.get("result"), r.get("mode_forced", False))
               for r in records(log) if r["event"] == "setstat"],
              [("xfer.log", "Permission denied", False),
               ("lnk", "Permission denied", False)])


@test
def test_on_storage_that_waits(ctx):
    tool = suite.slowfs()
    os.mkdir(ctx.path("w"))
    with open(ctx.path("w", "there"), "w") as f:
        f.write("old")
    os.chmod(ctx.path("w", "there"), 0o604)
    srv = Server([tool, "-D", "open=3,stat=3,write=1", "--"] + SERVER_ARGV +
                 ["-m", "0640", "-u", "077"], cwd=ctx.path("w"),
                 umask=0o077)
    ctx.servers.append(srv)
    srv.init()
    # Enough slow calls that OPENs go to workers (the loop times one call
    # in 8 until one waited), then a pipeline of creating OPENs.
    for i in range(40):
        srv.call(req_stat("there"))
    names = ["n%d" % i for i in range(16)] + ["there"]
    ids = srv.send_many([req_open(n, UP, Attrs(permissions=0o777))
                         for n in names])
    hs = []
    for rid in ids:
        r = srv.recv()
        expect_type(r, Handle, "OPEN")
        hs.append(r.handle)
    for h in hs:
        ok(srv.call(req_close(h)), "CLOSE")
    srv.close()
    expect_eq("modes", {n: ctx.mode(os.path.join("w", n)) for n in names},
              dict([(n, 0o640) for n in names[:-1]] + [("there", 0o604)]))


@test
def test_bad_values(ctx):
    for opt in ("-m", "-M"):
        for bad in ("999", "10000", "-1", "0x1ff", "", " 644", "+644",
                    "0644 "):
            r = subprocess.run(SERVER_ARGV + [opt, bad], cwd=ctx.tmp,
                               stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=30)
            expect_eq("%s %r: exit status" % (opt, bad), r.returncode, 255)
    r = subprocess.run(SERVER_ARGV + ["-u", "999"], cwd=ctx.tmp,
                       stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=30)
    expect_eq("-u 999: exit status (the same)", r.returncode, 255)


@test
def test_without_the_options(ctx):
    srv = ctx.server([], umask=0o027)
    make(srv, "f", 0o666)
    ok(srv.call(req_mkdir("d", Attrs(permissions=0o777))), "MKDIR")
    ok(srv.call(req_setstat("f", Attrs(permissions=0o600))), "SETSTAT")
    srv.close()
    expect_eq("f, d", (ctx.mode("f"), ctx.mode("d")), (0o600, 0o750))


if __name__ == "__main__":
    sys.exit(suite.main(sys.argv, __doc__, Ctx))
