#!/usr/bin/env python3
"""Fallbacks and late failures of the file system, made by an LD_PRELOAD shim.

The server relies on calls that a kernel or a file system may lack
(copy_file_range, renameat2 with RENAME_NOREPLACE, hard links, fchmodat2)
and on file systems that can fail late (a write-back error at close or
fsync, ESTALE on NFS).  tests/protocol/shim_fs_faults.c, preloaded into the
server, makes each of these happen on demand; the server must then give the
answers OpenSSH's server gives: the same request sequence runs under the
same faults against the reference (/usr/lib/openssh/sftp-server, or
$SFTP_REFERENCE) and the statuses and the files left behind are compared,
besides what each check expects on its own.  The shim logs every fault it
made, and each check also asserts that its fault was reached, so that a
check cannot pass because the path under test was never taken.

Checks:
  copy_data_*          copy-data without copy_file_range (ENOSYS, EXDEV,
                       EOPNOTSUPP, EINVAL, and EXDEV after some partial
                       calls) copies right
  rename_*             RENAME (which must refuse an existing target) without
                       RENAME_NOREPLACE (EINVAL) or renameat2 (ENOSYS), with
                       and without hard links, with and without -r
  hardlink_*           hardlink@openssh.com without hard links: a clean
                       error status, nothing made
  setstat_chmod_*      SETSTAT's chmod under -r without fchmodat2: through
                       /proc, or, when /proc is not there, a clean error
                       other than "no such file" (the file is there)
  openat2_eagain_*     under -r, openat2 answering EAGAIN again and again
                       (renames elsewhere on the system during its walk
                       over ".."): a run of 70 is waited out, a run of 200
                       ends in FAILURE, never a hang
  statvfs_on_fuse      statvfs and fstatvfs on a FUSE mount (bindfs)
  writeback_error_*    an error at close or fsync reaches the client as a
                       failed CLOSE or fsync status, also through OpenSSH's
                       sftp client
  estale_*             ESTALE on READ, WRITE and copy-data: a clean error
                       status, and the session goes on

Every request has a timeout (sftpwire, $SFTP_TIMEOUT, default 10 s): a hang
is a failure.  Needs a C compiler for the shim; root for the FUSE mount and
for hiding /proc (skipped otherwise).

Usage: test_fs_faults.py [NAME-SUBSTRING ...]
Prints one line per check, then "N passed, M failed[, K skipped]"; exits 1
if any failed.
"""

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # leave no __pycache__ in the tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))

from sftpwire import *  # noqa: E402,F401,F403
import suite  # noqa: E402
from suite import Failure, Skip, test  # noqa: E402

SERVER_ARGV = server_argv()
REFERENCE = reference_argv()[0]
SHIM_SOURCE = os.path.join(HERE, "shim_fs_faults.c")
UMASK = 0o022
# Seconds without requests after which the server gives back its buffers
# (its IDLE_MS), and a margin.
IDLE_S = 3.0


# -- the shim -------------------------------------------------------------------

def shim_library():
    """tests/protocol/shim_fs_faults.c built into a temporary directory
    (once)."""
    return suite.shim_library(SHIM_SOURCE, "sftp-fault-shim-")


# -- harness ----------------------------------------------------------------------


class Ctx:
    """One check's scratch directory and the servers it started."""

    def __init__(self):
        self.tmp = os.path.realpath(tempfile.mkdtemp(prefix="sftp-faults-"))
        os.chmod(self.tmp, 0o755)
        self.servers = []
        self.mounts = []
        self.n = 0

    def dir(self, name):
        """A fresh directory for one run."""
        d = os.path.join(self.tmp, name)
        os.mkdir(d)
        return d

    def fault_env(self, faults, log):
        env = dict(os.environ)
        env["LD_PRELOAD"] = shim_library()
        opts = env.get("ASAN_OPTIONS", "")
        env["ASAN_OPTIONS"] = (opts + ":" if opts else "") + \
            "verify_asan_link_order=0"
        env["FAULT_LOG"] = log
        for k, v in faults.items():
            env["FAULT_" + k] = str(v)
        return env

    def server(self, which, cwd, faults=None, args=(), prefix=()):
        """Start ours or the reference under the shim, in cwd; INIT sent.

        Returns the server and the path of the shim's fault log."""
        self.n += 1
        log = os.path.join(self.tmp, "faults-%d.log" % self.n)
        if which == "ref":
            if not os.access(REFERENCE, os.X_OK):
                raise Skip("no reference server at %s" % REFERENCE)
            argv = [REFERENCE] + list(args)
        else:
            argv = SERVER_ARGV + list(args)
        srv = Server(list(prefix) + argv, cwd=cwd,
                     env=self.fault_env(faults or {}, log), umask=UMASK)
        self.servers.append(srv)
        v = srv.init()
        if v.version != 3:
            raise Failure("%s: VERSION %d, expected 3" % (which, v.version))
        return srv, log

    def cleanup(self):
        for srv in self.servers:
            srv.kill()
        for d in reversed(self.mounts):
            r = subprocess.run(["umount", d], capture_output=True, timeout=20)
            if r.returncode != 0:
                subprocess.run(["umount", "-l", d], capture_output=True,
                               timeout=20)
        shutil.rmtree(self.tmp, ignore_errors=True)


def faults_made(log):
    """The faults the shim logged: a list of "CALL ERRNO" strings."""
    try:
        with open(log) as f:
            return f.read().split("\n")[:-1]
    except FileNotFoundError:
        return []


def expect_fault(log, call, what):
    """The shim made the fault CALL (e.g. "copy_file_range ENOSYS")."""
    made = faults_made(log)
    if not any(line == call or line.startswith(call + " ") for line in made):
        raise Failure("%s: the server never met the fault %r (the shim made "
                      "%s)" % (what, call, sorted(set(made)) or "none"))


def shape(reply):
    """What is compared between two runs: type, and status code or data."""
    if isinstance(reply, Status):
        return "STATUS " + STATUS_NAMES.get(reply.code, str(reply.code))
    if isinstance(reply, Data):
        return "DATA %d bytes" % len(reply.data)
    if isinstance(reply, Handle):
        return "HANDLE"
    return reply.type_name


def status_of(reply):
    return reply.code if isinstance(reply, Status) else None


def expect_status(reply, code, what):
    if status_of(reply) != code:
        raise Failure("%s: expected STATUS %s, got %s" %
                      (what, STATUS_NAMES[code], shape(reply)))


def expect_error(reply, what):
    """A STATUS that is neither OK nor EOF: a clean failure."""
    if not isinstance(reply, Status) or reply.code in (SSH_FX_OK, SSH_FX_EOF):
        raise Failure("%s: expected an error STATUS, got %s" %
                      (what, shape(reply)))


def tree(root):
    """What is under root: {relative path: (kind, content)}."""
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", None)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", f.read())
        dirs[:] = [x for x in dirs if not os.path.islink(os.path.join(d, x))]
    return out


def tree_diff(a, b):
    """The first few differences of two trees, as text."""
    diffs = []
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            def show(v):
                if v is None:
                    return "missing"
                if v[0] == "file":
                    return "file of %d bytes" % len(v[1])
                return "%s %r" % v
            diffs.append("%s: %s vs %s" % (k, show(a.get(k)), show(b.get(k))))
    return "; ".join(diffs[:4])


def both(ctx, name, run):
    """run(which, dir) for ours and for the reference, each in a fresh
    directory; returns {which: (result, tree)}.  Without a reference only
    ours runs."""
    out = {}
    for which in ("ours", "ref"):
        if which == "ref" and not os.access(REFERENCE, os.X_OK):
            continue
        d = ctx.dir("%s-%s" % (name, which))
        out[which] = (run(which, d), tree(d))
    return out


def expect_parity(results, what):
    """Ours answered as the reference did and left the same files."""
    if "ref" not in results:
        return
    (ours, ours_tree), (ref, ref_tree) = results["ours"], results["ref"]
    if ours != ref:
        diffs = ["%s: ours %s, OpenSSH %s" % (o[0], o[1], r[1])
                 for o, r in zip(ours, ref) if o != r]
        raise Failure("%s: answers differ from OpenSSH's: %s" %
                      (what, "; ".join(diffs[:4])))
    if ours_tree != ref_tree:
        raise Failure("%s: files differ from what OpenSSH leaves: %s" %
                      (what, tree_diff(ours_tree, ref_tree)))


def write_file(path, data, mode=0o644):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def pattern(n, seed):
    """n bytes that differ at every offset from other seeds' and shifts."""
    out = bytearray()
    x = seed * 2654435761 + 1
    while len(out) < n:
        x = (x * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
        out += x.to_bytes(8, "little")
    return bytes(out[:n])


# -- copy-data without copy_file_range ------------------------------------------

SRC = pattern(1024 * 1024 + 12345, 1)

# (read offset, length, write offset, bytes of "x" the target held before)
COPIES = [
    (0, 0, 0, 0),                   # the whole file, to end of file
    (5000, 300000, 777, 1000),      # a middle part into a file, overlapping
    (len(SRC) - 1000, 200000, 0, 0),  # past the end: OK or EOF as OpenSSH
    (len(SRC) + 10, 70000, 0, 0),   # starting past the end
    (123, 65536 * 3 + 1, 10, 0),    # chunk boundaries
]


def copy_run(ctx, which, d, faults):
    write_file(os.path.join(d, "src"), SRC)
    srv, log = ctx.server(which, d, faults)
    rh = srv.open("src", SSH_FXF_READ)
    answers = []
    for i, (roff, rlen, woff, before) in enumerate(COPIES):
        name = "dst%d" % i
        write_file(os.path.join(d, name), b"x" * before)
        wh = srv.open(name, SSH_FXF_WRITE)
        r = srv.call(req_copy_data(rh, roff, rlen, wh, woff))
        answers.append(("copy %d" % i, shape(r)))
        answers.append(("close %d" % i, shape(srv.call(req_close(wh)))))
    answers.append(("close src", shape(srv.call(req_close(rh)))))
    srv.close()
    return answers, log


def expected_copy(roff, rlen, woff, before):
    data = SRC[roff:] if rlen == 0 else SRC[roff:roff + rlen]
    old = bytearray(b"x" * before)
    if not data:
        return bytes(old)
    if len(old) < woff:
        old += b"\0" * (woff - len(old))
    old[woff:woff + len(data)] = data
    return bytes(old)


def check_copies(ctx, name, faults, fault_line):
    logs = {}

    def run(which, d):
        answers, logs[which] = copy_run(ctx, which, d, faults)
        return answers
    res = both(ctx, name, run)
    expect_fault(logs["ours"], fault_line, name)
    answers, files = res["ours"]
    for i, c in enumerate(COPIES):
        want = expected_copy(*c)
        got = files.get("dst%d" % i, (None, None))[1]
        if got != want:
            raise Failure("%s: copy %d %r left %s bytes, expected %d (first "
                          "difference at %s)" % (
                              name, i, c, None if got is None else len(got),
                              len(want), next((k for k in range(min(
                                  len(got or b""), len(want)))
                                  if got[k] != want[k]), "the end")))
    for label, ans in answers:
        if label.startswith("close") and ans != "STATUS OK":
            raise Failure("%s: %s answered %s" % (name, label, ans))
    if answers[0][1] != "STATUS OK":
        raise Failure("%s: a whole-file copy answered %s" %
                      (name, answers[0][1]))
    expect_parity(res, name)


@test
def test_copy_data_without_copy_file_range_enosys(ctx):
    check_copies(ctx, "enosys", {"CFR": "ENOSYS"}, "copy_file_range ENOSYS")


@test
def test_copy_data_without_copy_file_range_exdev(ctx):
    check_copies(ctx, "exdev", {"CFR": "EXDEV"}, "copy_file_range EXDEV")


@test
def test_copy_data_without_copy_file_range_eopnotsupp(ctx):
    check_copies(ctx, "eopnotsupp", {"CFR": "EOPNOTSUPP"},
                 "copy_file_range EOPNOTSUPP")


@test
def test_copy_data_without_copy_file_range_einval(ctx):
    check_copies(ctx, "einval", {"CFR": "EINVAL"}, "copy_file_range EINVAL")


@test
def test_copy_data_by_hand_keeps_no_buffer_while_idle(ctx):
    """The hand copy's buffer goes back with its request: after the copy
    and a pause, an idle session holds no more private memory than it
    did idle before it."""
    if suite.sanitized(SERVER_ARGV[0]):
        raise Skip("memory is not measured under a sanitizer")
    d = ctx.dir("idle")
    write_file(os.path.join(d, "src"), SRC)
    srv, log = ctx.server("ours", d, {"CFR": "ENOSYS"})
    # Set up: a handle opened and closed once, so that the handle table's
    # first slots count in both measurements.
    h = srv.open("src", SSH_FXF_READ)
    expect_status(srv.call(req_close(h)), SSH_FX_OK, "CLOSE")
    time.sleep(IDLE_S)
    before = suite.private_dirty_kib(srv.proc.pid, SERVER_ARGV[0])
    rh = srv.open("src", SSH_FXF_READ)
    wh = srv.open("dst", SSH_FXF_WRITE | SSH_FXF_CREAT)
    expect_status(srv.call(req_copy_data(rh, 0, 0, wh, 0)), SSH_FX_OK,
                  "copy-data")
    for h in (rh, wh):
        expect_status(srv.call(req_close(h)), SSH_FX_OK, "CLOSE")
    expect_fault(log, "copy_file_range ENOSYS", "idle")
    # The idle step may run late on a loaded machine: wait up to 10 s more.
    time.sleep(IDLE_S)
    deadline = time.monotonic() + 10
    while True:
        after = suite.private_dirty_kib(srv.proc.pid, SERVER_ARGV[0])
        if after - before < 32 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    with open(os.path.join(d, "dst"), "rb") as f:
        if f.read() != SRC:
            raise Failure("the copy differs from its source")
    if after - before >= 32:
        raise Failure("idle before the copy %d KiB private dirty, after it "
                      "%d KiB" % (before, after))
    return "%d KiB private dirty idle before the copy, %d after" % (
        before, after)


@test
def test_copy_data_exdev_after_partial_copies(ctx):
    # Two calls move an odd 65553 bytes each, then the file system says
    # EXDEV: the copy by hand must go on from where the kernel stopped.
    check_copies(ctx, "partial", {"CFR": "EXDEV", "CFR_AFTER": 2,
                                  "CFR_MAX": 65553}, "copy_file_range EXDEV")


# -- RENAME without RENAME_NOREPLACE --------------------------------------------

def rename_fixture(d):
    write_file(os.path.join(d, "a"), b"A")
    write_file(os.path.join(d, "b"), b"B")
    write_file(os.path.join(d, "c"), b"C")
    write_file(os.path.join(d, "e"), b"E")
    os.mkdir(os.path.join(d, "d1"))
    os.mkdir(os.path.join(d, "d2"))
    write_file(os.path.join(d, "d2", "inner"), b"I")
    os.mkdir(os.path.join(d, "d4"))
    os.symlink("c", os.path.join(d, "s"))
    os.symlink("nowhere", os.path.join(d, "dangling"))
    write_file(os.path.join(d, "g"), b"G")
    os.link(os.path.join(d, "g"), os.path.join(d, "h"))
    write_file(os.path.join(d, "k"), b"K")


# (old, new, what must happen: "ok" or "refused" or a status name)
RENAMES = [
    ("a", "new1", "ok"),            # a file to a free name
    ("b", "c", "refused"),          # a file onto a file
    ("d1", "d3", "ok"),             # a directory to a free name
    ("d2", "e", "refused"),         # a directory onto a file
    ("d3", "d4", "refused"),        # a directory onto a directory
    ("s", "e", "refused"),          # a symlink onto a file
    ("s", "snew", "ok"),            # a symlink to a free name
    ("missing", "x", "NO_SUCH_FILE"),
    ("c", "c", "refused"),          # onto itself
    ("g", "h", "refused"),          # onto another link of the same file
    ("k", "dangling", None),        # onto a dangling symlink: as OpenSSH
    ("e", "d4", "refused"),         # a file onto a directory
    ("d4", "d4/sub", None),         # a directory into itself: EINVAL
]


def rename_run(ctx, which, d, faults, confined):
    rename_fixture(d)
    args = ["-r", d] if confined else []
    srv, log = ctx.server(which, d, faults, args)
    answers = []
    for old, new, _ in RENAMES:
        r = srv.call(req_rename(old, new))
        answers.append(("rename %s %s" % (old, new), shape(r)))
    srv.close()
    return answers, log


def check_renames(ctx, name, faults, confined, made="renameat2 EINVAL"):
    logs = {}

    def run(which, d):
        # OpenSSH has no -r: the reference runs unconfined in its directory.
        answers, logs[which] = rename_run(ctx, which, d, faults,
                                          confined and which == "ours")
        return answers
    res = both(ctx, name, run)
    expect_fault(logs["ours"], made, name)
    if "LINK" in faults:
        expect_fault(logs["ours"], "link" if not confined else "linkat", name)
    answers, files = res["ours"]
    for (old, new, want), (label, got) in zip(RENAMES, answers):
        if want == "ok" and got != "STATUS OK":
            raise Failure("%s: %s answered %s, expected OK" %
                          (name, label, got))
        if want == "refused" and got in ("STATUS OK", "STATUS EOF"):
            raise Failure("%s: %s answered %s: the target existed" %
                          (name, label, got))
        if want not in (None, "ok", "refused") and got != "STATUS " + want:
            raise Failure("%s: %s answered %s, expected %s" %
                          (name, label, got, want))
    # What a refused rename must have left alone.
    for path, content in (("b", ("file", b"B")), ("c", ("file", b"C")),
                          ("e", ("file", b"E")), ("g", ("file", b"G")),
                          ("h", ("file", b"G")), ("new1", ("file", b"A")),
                          ("d4", ("dir", None)), ("snew", ("link", "c")),
                          ("d2/inner", ("file", b"I"))):
        if files.get(path) != content:
            raise Failure("%s: after the renames %s is %r, expected %r" %
                          (name, path, files.get(path), content))
    expect_parity(res, name)


@test
def test_rename_without_noreplace(ctx):
    check_renames(ctx, "noreplace", {"RENAMEAT2": "EINVAL"}, False)


@test
def test_rename_without_renameat2(ctx):
    check_renames(ctx, "enosys", {"RENAMEAT2": "ENOSYS"}, False,
                  "renameat2 ENOSYS")


@test
def test_rename_without_noreplace_or_links(ctx):
    check_renames(ctx, "nolinks", {"RENAMEAT2": "EINVAL", "LINK": "EPERM"},
                  False)


@test
def test_rename_without_noreplace_confined(ctx):
    check_renames(ctx, "noreplace-r", {"RENAMEAT2": "EINVAL"}, True)


@test
def test_rename_without_noreplace_or_links_confined(ctx):
    check_renames(ctx, "nolinks-r", {"RENAMEAT2": "EINVAL", "LINK": "EPERM"},
                  True)


# -- hardlink without hard links ------------------------------------------------

def check_hardlink(ctx, name, err, confined):
    logs = {}

    def run(which, d):
        write_file(os.path.join(d, "a"), b"A")
        args = ["-r", d] if confined and which == "ours" else []
        srv, logs[which] = ctx.server(which, d, {"LINK": err}, args)
        answers = [("hardlink", shape(srv.call(req_hardlink("a", "b")))),
                   ("hardlink onto a", shape(srv.call(req_hardlink("a", "a")))),
                   ("stat after", shape(srv.call(req_stat("a"))))]
        srv.close()
        return answers
    res = both(ctx, name, run)
    answers, files = res["ours"]
    expect_fault(logs["ours"], ("linkat " if confined else "link ") + err,
                 name)
    if answers[0][1] in ("STATUS OK", "STATUS EOF") or \
            not answers[0][1].startswith("STATUS"):
        raise Failure("%s: hardlink answered %s, expected an error" %
                      (name, answers[0][1]))
    if answers[2][1] != "ATTRS":
        raise Failure("%s: the session did not go on: STAT answered %s" %
                      (name, answers[2][1]))
    if "b" in files:
        raise Failure("%s: hardlink failed but left b behind" % name)
    expect_parity(res, name)


@test
def test_hardlink_without_links_eperm(ctx):
    check_hardlink(ctx, "eperm", "EPERM", False)


@test
def test_hardlink_without_links_eopnotsupp(ctx):
    check_hardlink(ctx, "eopnotsupp", "EOPNOTSUPP", False)


@test
def test_hardlink_without_links_confined(ctx):
    check_hardlink(ctx, "eperm-r", "EPERM", True)


# -- chmod under -r without fchmodat2 -------------------------------------------

def chmod_fixture(d):
    write_file(os.path.join(d, "f"), b"F", 0o644)
    write_file(os.path.join(d, "t"), b"T", 0o644)
    os.symlink("t", os.path.join(d, "l"))
    os.mkdir(os.path.join(d, "dir"), 0o755)


def chmod_requests(srv):
    """SETSTAT on a file, a directory and through a symlink; lsetstat on a
    file and on the symlink itself."""
    return [
        ("setstat f", shape(srv.call(req_setstat(
            "f", Attrs(permissions=0o600))))),
        ("setstat dir", shape(srv.call(req_setstat(
            "dir", Attrs(permissions=0o700))))),
        ("setstat l", shape(srv.call(req_setstat(
            "l", Attrs(permissions=0o640))))),
        ("lsetstat f", shape(srv.call(req_lsetstat(
            "f", Attrs(permissions=0o604))))),
        ("lsetstat l", shape(srv.call(req_lsetstat(
            "l", Attrs(permissions=0o777))))),
        ("stat f", shape(srv.call(req_stat("f")))),
    ]


def modes(d):
    return {n: stat.S_IMODE(os.lstat(os.path.join(d, n)).st_mode)
            for n in ("f", "t", "dir")}


@test
def test_setstat_chmod_without_fchmodat2(ctx):
    # Ours under -r (where chmod goes through an O_PATH descriptor), the
    # reference unconfined: the answers and modes must be OpenSSH's.
    out = {}
    for which in ("ours", "ref"):
        if which == "ref" and not os.access(REFERENCE, os.X_OK):
            continue
        d = ctx.dir("chmod-" + which)
        chmod_fixture(d)
        args = ["-r", d] if which == "ours" else []
        srv, log = ctx.server(which, d, {"FCHMODAT2": "ENOSYS"}, args)
        answers = chmod_requests(srv)
        srv.close()
        out[which] = (answers, modes(d))
        if which == "ours":
            expect_fault(log, "fchmodat2 ENOSYS", "chmod")
    answers, m = out["ours"]
    want = {"f": 0o604, "t": 0o640, "dir": 0o700}
    if m != want:
        raise Failure("modes after the changes: %s, expected %s" % (
            {k: oct(v) for k, v in m.items()},
            {k: oct(v) for k, v in want.items()}))
    for label, ans in answers[:4]:
        if ans != "STATUS OK":
            raise Failure("%s answered %s, expected OK" % (label, ans))
    if "ref" in out and out["ref"] != out["ours"]:
        raise Failure("ours answered %s with modes %s; OpenSSH %s with %s" % (
            answers, m, out["ref"][0], out["ref"][1]))


@test
def test_setstat_chmod_without_fchmodat2_or_proc(ctx):
    # No fchmodat2 and no /proc (a jail without it): the fallback through
    # /proc/self/fd cannot work, so a chmod must fail cleanly, or succeed
    # for real; never OK with the mode unchanged, never a hang.
    if os.geteuid() != 0:
        raise Skip("hiding /proc needs root (a private mount namespace)")
    if not shutil.which("unshare"):
        raise Skip("no unshare (util-linux)")
    if suite.sanitized(SERVER_ARGV[0]):
        raise Skip("the sanitizer runtime cannot start without /proc")
    d = ctx.dir("noproc")
    chmod_fixture(d)
    hide = ["unshare", "--mount", "--propagation", "private", "--",
            "sh", "-c", 'mount -t tmpfs -o size=1m noproc /proc && exec "$@"',
            "sh"]
    srv, log = ctx.server("ours", d, {"FCHMODAT2": "ENOSYS"}, ["-r", d],
                          prefix=hide)
    answers = chmod_requests(srv)
    srv.close()
    expect_fault(log, "fchmodat2 ENOSYS", "chmod")
    m = modes(d)
    checks = [("setstat f", "f", 0o600), ("setstat dir", "dir", 0o700),
              ("setstat l", "t", 0o640)]
    got = dict(answers)
    for label, name, mode in checks:
        ans = got[label]
        if ans == "STATUS OK":
            # lsetstat f changes f later: judge f by its final mode then.
            final = 0o604 if name == "f" and got["lsetstat f"] == \
                "STATUS OK" else mode
            if m[name] != final:
                raise Failure("%s answered OK but %s is %o, expected %o" %
                              (label, name, m[name], final))
        elif ans in ("STATUS NO_SUCH_FILE", "STATUS EOF") or \
                not ans.startswith("STATUS"):
            # The file is there: "no such file" would send the user
            # looking for the wrong problem.
            raise Failure("%s on an existing file answered %s, expected OK "
                          "or an error status such as FAILURE" % (label, ans))
    if got["stat f"] != "ATTRS":
        raise Failure("the session did not go on: STAT answered %s" %
                      got["stat f"])


# -- openat2 interrupted by renames elsewhere -------------------------------------

def openat2_requests(srv):
    """OPEN for reading through "..", READ, CLOSE; OPEN to create."""
    out = []
    h = srv.call(req_open("sub/../f", SSH_FXF_READ))
    out.append(shape(h))
    if isinstance(h, Handle):
        out.append(shape(srv.call(req_read(h.handle, 0, 10))))
        out.append(shape(srv.call(req_close(h.handle))))
    h = srv.call(req_open("sub/../new", SSH_FXF_WRITE | SSH_FXF_CREAT))
    out.append(shape(h))
    if isinstance(h, Handle):
        out.append(shape(srv.call(req_close(h.handle))))
    out.append(shape(srv.call(req_stat("f"))))
    return out


def openat2_run(ctx, name, run):
    d = ctx.dir(name)
    write_file(os.path.join(d, "f"), b"F", 0o644)
    os.mkdir(os.path.join(d, "sub"), 0o755)
    srv, log = ctx.server("ours", d, {"OPENAT2_EAGAIN": str(run)},
                          ["-r", d])
    answers = openat2_requests(srv)
    srv.close()
    expect_fault(log, "openat2 EAGAIN", "OPEN under -r")
    return d, answers


@test
def test_openat2_eagain_run_is_waited_out(ctx):
    d, answers = openat2_run(ctx, "eagain-70", 70)
    want = ["HANDLE", "DATA 1 bytes", "STATUS OK", "HANDLE", "STATUS OK",
            "ATTRS"]
    if answers != want:
        raise Failure("answered %s, expected %s" % (answers, want))
    if not os.path.exists(os.path.join(d, "new")):
        raise Failure("OPEN answered a handle but made no file")


@test
def test_openat2_eagain_without_end_fails_cleanly(ctx):
    d, answers = openat2_run(ctx, "eagain-200", 200)
    want = ["STATUS FAILURE", "STATUS FAILURE", "ATTRS"]
    if answers != want:
        raise Failure("answered %s, expected %s" % (answers, want))


# -- statvfs on FUSE ------------------------------------------------------------

@test
def test_statvfs_on_fuse(ctx):
    if os.geteuid() != 0:
        raise Skip("mounting bindfs needs root")
    if not shutil.which("bindfs"):
        raise Skip("no bindfs (Debian package bindfs)")
    if not os.path.exists("/dev/fuse"):
        raise Skip("no /dev/fuse")
    src, mnt = ctx.dir("fuse-src"), ctx.dir("fuse")
    r = subprocess.run(["bindfs", src, mnt], capture_output=True, timeout=30)
    if r.returncode != 0:
        raise Skip("bindfs cannot mount: %s" %
                   r.stderr.decode(errors="replace").strip())
    ctx.mounts.append(mnt)
    write_file(os.path.join(mnt, "f"), b"F")
    want = os.statvfs(mnt)
    # Free counts move with the rest of the machine: compared loosely.
    fixed = ("bsize", "frsize", "blocks", "files", "flag", "namemax")
    replies = {}
    for which in ("ours", "ref"):
        if which == "ref" and not os.access(REFERENCE, os.X_OK):
            continue
        srv, _ = ctx.server(which, mnt)
        h = srv.open("f", SSH_FXF_READ)
        for req, label in ((req_statvfs("."), "statvfs"),
                           (req_fstatvfs(h), "fstatvfs")):
            rep = srv.call(req)
            if not isinstance(rep, ExtendedReply):
                raise Failure("%s %s on FUSE answered %s" %
                              (which, label, shape(rep)))
            v = parse_statvfs(rep.data)
            replies[(which, label)] = v
            for k in fixed:
                sys_value = getattr(want, "f_" + k)
                if k == "flag":
                    # The protocol carries two bits: read-only and nosuid.
                    sys_value = (1 if sys_value & os.ST_RDONLY else 0) | \
                        (2 if sys_value & os.ST_NOSUID else 0)
                if v[k] != sys_value:
                    raise Failure("%s %s on FUSE: %s %d, the system says %d"
                                  % (which, label, k, v[k], sys_value))
        expect_status(srv.call(req_close(h)), SSH_FX_OK, "close")
        srv.close()
    if ("ref", "statvfs") in replies:
        for label in ("statvfs", "fstatvfs"):
            o, r = replies[("ours", label)], replies[("ref", label)]
            if o["fsid"] != r["fsid"]:
                raise Failure("%s on FUSE: fsid %d, OpenSSH %d" %
                              (label, o["fsid"], r["fsid"]))


# -- write-back errors -----------------------------------------------------------

def wb_run(ctx, which, d):
    os.mkdir(os.path.join(d, "wb"))
    prefix = os.path.join(d, "wb") + "/"
    srv, log = ctx.server(which, d, {"EIO_PREFIX": prefix})
    answers = []
    h = srv.open("wb/f", SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC)
    answers.append(("write", shape(srv.call(req_write(h, 0, b"w" * 5000)))))
    answers.append(("fsync", shape(srv.call(req_fsync(h)))))
    answers.append(("close", shape(srv.call(req_close(h)))))
    answers.append(("close again", shape(srv.call(req_close(h)))))
    h = srv.open("wb/g", SSH_FXF_WRITE | SSH_FXF_CREAT)
    answers.append(("write g", shape(srv.call(req_write(h, 0, b"g")))))
    answers.append(("close g", shape(srv.call(req_close(h)))))
    h = srv.open("ok", SSH_FXF_WRITE | SSH_FXF_CREAT)
    answers.append(("write ok", shape(srv.call(req_write(h, 0, b"o")))))
    answers.append(("fsync ok", shape(srv.call(req_fsync(h)))))
    answers.append(("close ok", shape(srv.call(req_close(h)))))
    srv.close()
    return answers, log


@test
def test_writeback_error_at_close_and_fsync(ctx):
    logs = {}

    def run(which, d):
        answers, logs[which] = wb_run(ctx, which, d)
        return answers
    res = both(ctx, "wb", run)
    expect_fault(logs["ours"], "fsync EIO", "fsync")
    expect_fault(logs["ours"], "close EIO", "close")
    got = dict(res["ours"][0])
    for label in ("fsync", "close", "close g"):
        if got[label] in ("STATUS OK", "STATUS EOF") or \
                not got[label].startswith("STATUS"):
            raise Failure("a write-back error at %s answered %s, expected "
                          "an error status" % (label, got[label]))
    if got["close again"] == "STATUS OK":
        raise Failure("the handle of a failed CLOSE is still open")
    for label in ("write", "write g", "write ok", "fsync ok", "close ok"):
        if got[label] != "STATUS OK":
            raise Failure("%s answered %s, expected OK" % (label, got[label]))
    expect_parity(res, "write-back")


@test
def test_writeback_error_reaches_sftp_client(ctx):
    # OpenSSH's sftp client uploads, and must say the upload failed.
    if not shutil.which("sftp"):
        raise Skip("no sftp client")
    for which in ("ours", "ref"):
        if which == "ref" and not os.access(REFERENCE, os.X_OK):
            continue
        d = ctx.dir("client-" + which)
        os.mkdir(os.path.join(d, "wb"))
        local = os.path.join(ctx.tmp, "upload-" + which)
        write_file(local, pattern(300000, 7))
        batch = os.path.join(ctx.tmp, "batch-" + which)
        with open(batch, "w") as f:
            f.write("put %s wb/up\n" % local)
        argv = SERVER_ARGV if which == "ours" else [REFERENCE]
        env = ctx.fault_env({"EIO_PREFIX": os.path.join(d, "wb") + "/"},
                            os.path.join(ctx.tmp, "client-%s.log" % which))
        r = subprocess.run(["sftp", "-q", "-D", " ".join(argv), "-b", batch],
                           cwd=d, env=env, capture_output=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        if r.returncode == 0:
            raise Failure("%s: sftp put succeeded (exit 0) though the close "
                          "failed: %s" % (which, r.stderr.decode(
                              errors="replace").strip()[:200]))


# -- ESTALE -------------------------------------------------------------------------

def stale_run(ctx, which, d):
    os.mkdir(os.path.join(d, "stale"))
    write_file(os.path.join(d, "stale", "r"), pattern(200000, 3))
    write_file(os.path.join(d, "stale", "w"), b"")
    write_file(os.path.join(d, "good"), pattern(100000, 4))
    write_file(os.path.join(d, "dst"), b"")
    prefix = os.path.join(d, "stale") + "/"
    srv, log = ctx.server(which, d, {"ESTALE_PREFIX": prefix})
    answers = []
    r = srv.open("stale/r", SSH_FXF_READ)
    w = srv.open("stale/w", SSH_FXF_WRITE)
    g = srv.open("good", SSH_FXF_READ)
    o = srv.open("dst", SSH_FXF_WRITE)
    answers.append(("read small", shape(srv.call(req_read(r, 0, 100)))))
    answers.append(("read large", shape(srv.call(req_read(r, 0, 65536)))))
    answers.append(("read max", shape(srv.call(req_read(r, 1, 261120)))))
    answers.append(("write", shape(srv.call(req_write(w, 0, b"z" * 1000)))))
    answers.append(("copy from stale",
                    shape(srv.call(req_copy_data(r, 0, 0, o, 0)))))
    answers.append(("copy to stale",
                    shape(srv.call(req_copy_data(g, 0, 0, w, 0)))))
    answers.append(("read good", shape(srv.call(req_read(g, 0, 65536)))))
    # Many READs in flight on the stale file: one error each, in order.
    ids = srv.send_many([req_read(r, i * 32768, 32768) for i in range(16)])
    reps = srv.recv_many(len(ids))
    answers.append(("pipelined ids", "in order" if [x.id for x in reps] == ids
                    else "out of order"))
    answers.append(("pipelined", ",".join(sorted(set(map(shape, reps))))))
    for label, h in (("close r", r), ("close w", w), ("close g", g),
                     ("close o", o)):
        answers.append((label, shape(srv.call(req_close(h)))))
    srv.close()
    return answers, log


@test
def test_estale_on_read_write_copy(ctx):
    logs = {}

    def run(which, d):
        answers, logs[which] = stale_run(ctx, which, d)
        return answers
    res = both(ctx, "stale", run)
    made = faults_made(logs["ours"])
    if not any(x.endswith(" ESTALE") for x in made):
        raise Failure("the server never met ESTALE")
    got = dict(res["ours"][0])
    for label in ("read small", "read large", "read max", "write",
                  "copy from stale", "copy to stale"):
        if not got[label].startswith("STATUS") or \
                got[label] in ("STATUS OK", "STATUS EOF"):
            raise Failure("%s on a stale file answered %s, expected an "
                          "error status" % (label, got[label]))
    if got["read good"] != "DATA 65536 bytes":
        raise Failure("the session did not go on: READ answered %s" %
                      got["read good"])
    if got["pipelined ids"] != "in order" or \
            got["pipelined"] not in ("STATUS FAILURE",):
        raise Failure("16 READs in flight on a stale file: %s, %s" %
                      (got["pipelined ids"], got["pipelined"]))
    expect_parity(res, "ESTALE")


# -- main ---------------------------------------------------------------------------

if __name__ == "__main__":
    sys.exit(suite.main(sys.argv, __doc__, Ctx, verbose="FAULTS_VERBOSE"))
