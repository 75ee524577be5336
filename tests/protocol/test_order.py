#!/usr/bin/env python3
"""Pipelined requests on slow storage: the outcome of running them in order.

A client keeps many requests in flight; a server may work on several at
once while storage is slow, but what the client sees must be what running
the requests one at a time, in order, gives.  Each check here sends the
same raw request stream, 64 requests written before any reply is read, to
OpenSSH's server (/usr/lib/openssh/sftp-server, or $SFTP_REFERENCE) and to
the server under test, each in a fresh directory holding the same files,
and each under bench/slowfs with a delay that differs per kind of storage
call, so that a later request would finish first if it were let run
early.  Then every reply must be equal between the two: its id (the id of
the request in the same position: replies come in request order), type,
status code and message, data, names and attributes (times left out), and
so must every file left behind and the exit status.  (The two servers run
at the same time, each in its own directory.)  Where a reply's
content follows from the requests alone (READ after WRITE, sizes), it is
also checked against a model of the file, so that a check cannot pass on a
stream that never reaches what it claims to test; and slowfs's count of
the calls it held shows that the delay was there.

Delay profiles (milliseconds per call of each kind, slowfs -D):
  plain        no delay tool at all
  reads slow   read 2, write 0.05, stat 0.3, open 0.2, close 0.1, dir 1
  writes slow  write 2, read 0.05, stat 0.2, open 0.2, close 1, dir 0.2
  stats slow   stat 2, open 1, read 0.2, write 0.2, close 0.1, dir 1.5
  (meta and sync calls 0.2 in each)
  jitter       read, write and stat 0.05, and every call but close 0 to
               1.5 more, drawn from seed 1 (slowfs -j 1.5 -s 1): calls
               made at once end in an order of chance

Checks, each under each profile:
  write_then_read_one_handle   WRITE then an overlapping READ, one handle
  read_then_write_one_handle   READ then an overlapping WRITE, one handle
  write_then_read_two_handles  the same through a write-only and a
  read_then_write_two_handles  read-only handle of one file
  overlapping_writes           writes over each other through 3 handles
  write_then_stat_size         a growing file: FSTAT of both handles and
                               STAT after each WRITE
  append_writes                WRITEs through a handle opened with APPEND,
                               and READs and WRITEs through another
  copy_data_between_writes     copy-data amid WRITEs and READs of its files
  close_then_open_trunc        WRITEs, CLOSE, OPEN with TRUNCATE, READs
                               through another handle, requests on the
                               closed handle, then the new handle
  open_close_amid_transfers    creating OPENs (new files, one file through
                               other spellings, two modes, EXCL twice), a
                               name opened before and after it is made, a
                               truncating OPEN between WRITEs, CLOSEs and
                               the closed handles; then the new handles
  rename_remove_after_reads    RENAME and REMOVE of files being read
  readdir_while_creating       READDIR (long names: sizes) while files are
                               created, grown and removed
  readdir_lstats_at_once       one READDIR of 100 names whose stats wait
                               1 s: 50 or more of its lstats held at once
  opens_wait_for_open_alone    40 creating OPENs in a pipeline on storage
                               whose stats wait a second: each waits for
                               its open(2) alone (the file it opened is
                               told from the kernel's copy, no stat held
                               per OPEN), and yet WRITEs to the 40 new
                               files are known to be of other files: 20
                               or more held at once
  readdir_first_batch_stops    the first READDIR on storage that turns out
                               to wait ends its reply within 16 names
  readdirs_share_workers       two READDIRs in a pipeline: the workers
                               that end the first's lstats join the
                               second's, 50 or more held at once
  enospc_mid_pipeline          a small tmpfs fills up mid-pipeline, then
                               space is freed (root: mount)
  enospc_separate_writes       WRITEs of separate ranges fill a small tmpfs:
                               the first ones in request order get the
                               space
  enospc_close_of_removed      a removed file's space comes back at its
                               CLOSE, amid WRITEs that fill a small tmpfs
  eio_estale_mid_pipeline      EIO at fsync and close, ESTALE on reads and
                               writes, from tests/protocol/shim_fs_faults.c
  random_SEED                  random streams over 3 files and 6 handles
                               under slowfs's jitter drawn from the seed:
                               READ, WRITE, FSTAT, STAT, LSTAT, FSETSTAT,
                               OPEN, READDIR
And three checks that the suite can fail: tests/protocol/order_proxy.py in
front of OpenSSH's server runs a READ and the WRITE next to it in the
other order (catches_*_before_earlier_*), or sends two replies swapped
(catches_replies_out_of_order), and the comparison must fail.

$ORDER_SEED (default 1) is the first seed of the random streams and
$ORDER_ROUNDS (default 8) their number; a failure names its seed, and
"test_order.py random_SEED" with ORDER_SEED=SEED runs it again;
$ORDER_VERBOSE set prints each check's time.  The
delay tool is $SFTP_SLOWFS, else bench/slowfs.c built for the run (with
$CC, cc or gcc); without either, or without root (slowfs must look at
the descriptors of servers that are not dumpable), the delayed checks are
skipped.

Usage: test_order.py [NAME-SUBSTRING ...]
Prints one line per check, then "N passed, M failed[, K skipped]"; exits 1
if any failed.
"""

import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading

sys.dont_write_bytecode = True  # leave no __pycache__ in the tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))

from sftpwire import *  # noqa: E402,F401,F403
import suite  # noqa: E402
from suite import Failure, Skip, add_test  # noqa: E402

SERVER_ARGV = server_argv()
REFERENCE = reference_argv()[0]
SHIM_SOURCE = os.path.join(HERE, "shim_fs_faults.c")
UMASK = 0o022
DEPTH = 64

RW = SSH_FXF_READ | SSH_FXF_WRITE
W = SSH_FXF_WRITE
R = SSH_FXF_READ

# (name, slowfs -D, slowfs -j and -s or None)
PROFILES = [
    ("plain", None, None),
    ("reads slow", "read=2,write=0.05,stat=0.3,open=0.2,close=0.1,dir=1,"
     "meta=0.2,sync=0.2", None),
    ("writes slow", "write=2,read=0.05,stat=0.2,open=0.2,close=1,dir=0.2,"
     "meta=0.2,sync=0.2", None),
    ("stats slow", "stat=2,open=1,read=0.2,write=0.2,close=0.1,dir=1.5,"
     "meta=0.2,sync=0.2", None),
    ("jitter", "read=0.05,write=0.05,stat=0.05", (1.5, 1)),
]


# -- the delay tool ---------------------------------------------------------------

def slowfs():
    """The delay tool (suite.slowfs())."""
    return suite.slowfs()


def held_counts(path):
    """slowfs -o's report: {kind: (held, seen)}, and under "at once" the
    most calls it held at the same time (more than one: the server had
    several calls waiting on storage together)."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    out = {}
    for k, held, seen in re.findall(r"(\w+)=(\d+)/(\d+)", text):
        out[k] = (int(held), int(seen))
    m = re.search(r"held_max=(\d+)", text)
    if m:
        out["at once"] = (int(m.group(1)), 0)
    return out


# -- harness ----------------------------------------------------------------------


class Ctx:
    """One check's scratch directory, servers and mounts."""

    def __init__(self):
        self.tmp = os.path.realpath(tempfile.mkdtemp(prefix="sftp-order-"))
        os.chmod(self.tmp, 0o755)
        # The logs of the tools, kept apart: the servers' directories sit
        # side by side in tmp, whose entry READDIR shows as "..".
        self.logs = os.path.join(self.tmp, "logs")
        os.mkdir(self.logs)
        self.servers = []
        self.mounts = []

    def mount_tmpfs(self, d, size):
        if os.geteuid() != 0:
            raise Skip("a size-limited tmpfs needs root to mount")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o",
                            "size=%d,mode=0755" % size, "sftp-order", d],
                           capture_output=True, timeout=20)
        if r.returncode != 0:
            raise Skip("mount -t tmpfs failed: %s" %
                       r.stderr.decode(errors="replace").strip())
        self.mounts.append(d)

    def cleanup(self):
        for srv in self.servers:
            srv.kill()
        for d in reversed(self.mounts):
            r = subprocess.run(["umount", d], capture_output=True, timeout=20)
            if r.returncode != 0:
                subprocess.run(["umount", "-l", d], capture_output=True,
                               timeout=20)
        shutil.rmtree(self.tmp, ignore_errors=True)


class Plan:
    """A scenario: the files to make, the handles to open before the
    pipeline, the pipeline itself and a second one after it.

    A request is (label, make, want): make(h) builds it from h, the map of
    handle names to the handles of the server at hand; want, when given,
    is the reply expected (as norm() gives it, id left out) that the model
    of the files predicts.  An OPEN labelled "open:NAME" adds its handle to
    h as NAME for the second pipeline."""

    def __init__(self):
        self.files = []      # (path, data); data None for a directory
        self.opens = []      # (name, path, pflags); pflags None: OPENDIR
        self.stream = []
        self.stage2 = []
        self.tmpfs = None    # size in bytes of a tmpfs for each side
        self.faults = None   # {"EIO_PREFIX": "eio/", ...}, relative
        self.fault_calls = []  # shim log lines each side must show ("CALL
        # ERRNO", or "* ERRNO" for any call)
        self.model = {}
        self.modes = {}      # path: mode other than 0644

    def file(self, path, data):
        self.files.append((path, data))
        if data is not None:
            self.model[path] = bytearray(data)

    def dir(self, path):
        self.files.append((path, None))

    def open(self, name, path, pflags):
        self.opens.append((name, path, pflags))

    def opendir(self, name, path):
        self.opens.append((name, path, None))

    def add(self, label, make, want=None, stage=1):
        (self.stream if stage == 1 else self.stage2).append(
            (label, make, want))

    # Requests that keep the model of the files in step.

    def write(self, hname, path, off, data, stage=1, ok=True):
        """A WRITE that succeeds, or (ok False) fails, changing nothing."""
        if ok:
            m = self.model[path]
            if len(m) < off:
                m.extend(bytes(off - len(m)))
            m[off:off + len(data)] = data
        self.add("WRITE %s %d+%d" % (hname, off, len(data)),
                 lambda h: req_write(h[hname], off, data),
                 ("STATUS", SSH_FX_OK, b"Success") if ok else
                 ("STATUS", SSH_FX_FAILURE, b"Failure"), stage)

    def read(self, hname, path, off, n, stage=1, check=True):
        m = self.model[path]
        got = bytes(m[off:off + n])
        want = None
        if check:
            want = ("DATA", got) if got else \
                ("STATUS", SSH_FX_EOF, b"End of file")
        self.add("READ %s %d+%d" % (hname, off, n),
                 lambda h: req_read(h[hname], off, n), want, stage)

    def size_of(self, path):
        return len(self.model[path])


def norm_attrs(a):
    """An ATTRS without its times."""
    return (a.flags, a.size, a.uid, a.gid, a.permissions)


# "-rw-r--r--    1 root     root         4096 Dec  2 06:00 name": the date
# (two forms: "Mon dd hh:mm" and "Mon dd  yyyy") may differ between runs.
_LONGNAME = re.compile(rb"^(\S+\s+\d+\s+\S+\s+\S+\s+\d+ )"
                       rb"([A-Z][a-z]{2} [ \d]\d (?:\d\d:\d\d| \d{4}))( .*)$",
                       re.S)


def norm_longname(ln):
    m = _LONGNAME.match(ln)
    return m.group(1) + b"DATE" + m.group(3) if m else ln


def norm(reply):
    """What is compared of a reply, id left out."""
    if isinstance(reply, Status):
        return ("STATUS", reply.code, reply.message, reply.lang)
    if isinstance(reply, Handle):
        return ("HANDLE",)
    if isinstance(reply, Data):
        return ("DATA", reply.data)
    if isinstance(reply, AttrsReply):
        return ("ATTRS", norm_attrs(reply.attrs))
    if isinstance(reply, Name):
        return ("NAME", tuple((e.filename, norm_longname(e.longname),
                               norm_attrs(e.attrs)) for e in reply.entries))
    if isinstance(reply, ExtendedReply):
        return ("EXTENDED_REPLY", reply.data)
    return ("?", reply.raw)


def show(n):
    """A normalised reply, short."""
    if n[0] == "DATA":
        d = n[1]
        return "DATA %d bytes %r%s" % (len(d), d[:24], "..." if len(d) > 24
                                       else "")
    if n[0] == "STATUS":
        return "STATUS %s %r" % (STATUS_NAMES.get(n[1], n[1]), n[2])
    if n[0] == "NAME":
        return "NAME %r" % ([e[0].decode(errors="replace") + " " +
                             str(e[2][1]) for e in n[1]],)
    return repr(n)[:200]


def matches(want, got):
    """Whether a normalised reply is what the model predicted: a STATUS
    prediction gives code and message (the language tag is empty), an
    ATTRS one ("SIZE", n) the size, a NAME one ("NAMES", n) the number of
    entries."""
    if want[0] == "STATUS":
        return got == want + (b"",)
    if want[0] == "SIZE":
        return got[0] == "ATTRS" and got[1][1] == want[1]
    if want[0] == "NAMES":
        return got[0] == "NAME" and len(got[1]) == want[1]
    return got == want


def make_tree(root, plan):
    for path, data in plan.files:
        p = os.path.join(root, path)
        if data is None:
            os.mkdir(p)
        else:
            with open(p, "wb") as f:
                f.write(data)
            os.chmod(p, plan.modes.get(path, 0o644))


def run_side(ctx, which, root, plan, profile, jitter=None, argv=None):
    """Run plan's pipelines on one server (which: "ref" or "ours") in root
    under the delay profile; return (replies of each request, normalised,
    with a failure text for an id out of place or None; the tree left
    behind; the exit status; slowfs's counts; the shim's fault log)."""
    if not os.access(REFERENCE, os.X_OK):
        raise Skip("no reference server at %s" % REFERENCE)
    if argv is None:
        argv = [REFERENCE] if which == "ref" else list(SERVER_ARGV)
    env = dict(os.environ)
    counts = os.path.join(ctx.logs, "slowfs-%s.txt" % which)
    faultlog = os.path.join(ctx.logs, "faults-%s.log" % which)
    if plan.faults:
        shim = suite.shim_library(SHIM_SOURCE, "sftp-order-shim-")
        pre = ["env", "LD_PRELOAD=" + shim, "FAULT_LOG=" + faultlog]
        for k, v in plan.faults.items():
            pre.append("FAULT_%s=%s" % (k, os.path.join(root, v)))
        opts = env.get("ASAN_OPTIONS", "")
        env["ASAN_OPTIONS"] = (opts + ":" if opts else "") + \
            "verify_asan_link_order=0"
        argv = pre + argv
    if profile is not None or jitter is not None:
        tool = [slowfs(), "-o", counts]
        if profile is not None:
            tool += ["-D", profile]
        if jitter is not None:
            tool += ["-j", str(jitter[0]), "-s", str(jitter[1])]
        argv = tool + ["--"] + argv
    srv = Server(argv, cwd=root, env=env, umask=UMASK)
    ctx.servers.append(srv)
    v = srv.init()
    if v.version != 3:
        raise Failure("%s: VERSION %d, expected 3" % (which, v.version))
    h = {}
    for name, path, pflags in plan.opens:
        if pflags is None:
            h[name] = srv.opendir(path)
        else:
            h[name] = srv.open(path, pflags)
    out = []
    for stage in (plan.stream, plan.stage2):
        if not stage:
            continue
        if len(stage) > DEPTH:
            raise Failure("a pipeline of %d requests, more than %d" %
                          (len(stage), DEPTH))
        reqs = [make(h) for _, make, _ in stage]
        # Ids that do not follow one another, so that a reply sent for
        # the wrong request cannot carry the right id by chance.
        ids = [(0x10000 + 7919 * (len(out) + i)) & 0xFFFFFFFF
               for i in range(len(reqs))]
        srv.send_many(reqs, ids)
        for i, rid in enumerate(ids):
            reply = srv.recv()
            bad = None
            if reply.id != rid:
                bad = "reply %d carries id %r, expected %d (the id of " \
                    "request %d, %s): replies out of request order" % (
                        len(out), reply.id, rid, len(out),
                        stage[i][0])
            out.append((norm(reply), bad))
            if isinstance(reply, Handle) and \
                    stage[i][0].startswith("open:"):
                h[stage[i][0][len("open:"):]] = reply.handle
    code = srv.close()
    err = srv.stderr_output()
    m = suite.SANITIZER_REPORT.search(err)
    if which == "ours" and m:
        raise Failure("the server's stderr holds a sanitizer report: %s" %
                      err[m.start():m.start() + 300].decode(errors="replace"))
    return (out, suite.tree_snapshot(root), code, held_counts(counts),
            faults_made(faultlog))


def faults_made(log):
    """The faults the shim logged: "CALL ERRNO" lines."""
    try:
        with open(log) as f:
            return f.read().split("\n")[:-1]
    except FileNotFoundError:
        return []


def compare(plan, profile, jitter=None, what="", ours=None):
    """Run plan on both servers and compare; return a summary.  ours is
    the command line of the server compared with OpenSSH's (by default
    the server under test)."""
    ctx = plan.ctx
    results = {}
    roots = {}
    for which in ("ref", "ours"):
        roots[which] = os.path.join(ctx.tmp, which)
        os.mkdir(roots[which])
        if plan.tmpfs:
            ctx.mount_tmpfs(roots[which], plan.tmpfs)
    # Both trees are made before either server starts, so that each sees
    # the same parent directory (READDIR shows "..").  The servers then
    # run at the same time, each in its own tree.
    for which in ("ref", "ours"):
        make_tree(roots[which], plan)
    # The tools are built before the two sides run, side by side: each
    # waits on its delays, not on the other's.
    if profile is not None or jitter is not None:
        slowfs()
    if plan.faults:
        suite.shim_library(SHIM_SOURCE, "sftp-order-shim-")

    def side(which):
        try:
            results[which] = run_side(ctx, which, roots[which], plan,
                                      profile, jitter,
                                      ours if which == "ours" else None)
        except BaseException as e:  # handed to the main thread
            results[which] = e
    threads = [threading.Thread(target=side, args=(w,))
               for w in ("ref", "ours")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for which in ("ref", "ours"):
        if isinstance(results[which], BaseException):
            raise results[which]
    ref, ours = results["ref"], results["ours"]
    labels = [lab for lab, _, _ in plan.stream + plan.stage2]
    wants = [w for _, _, w in plan.stream + plan.stage2]
    # Replies in request order, on both sides.
    for which in ("ours", "ref"):
        for _, bad in results[which][0]:
            if bad:
                raise Failure("%s%s: %s" % (what, "OpenSSH's server" if
                                            which == "ref" else "ours", bad))
    # The reference against the model: the stream tests what it claims.
    for i, ((got, _), want) in enumerate(zip(ref[0], wants)):
        if want is not None and not matches(want, got):
            raise Failure("%sthe test's model is wrong: OpenSSH's server "
                          "answered request %d (%s) %s, the model expected "
                          "%s" % (what, i, labels[i], show(got), show(want)))
    for i, ((r, _), (o, _)) in enumerate(zip(ref[0], ours[0])):
        if r != o:
            where = ""
            if r[0] == o[0] == "DATA":
                at = next((j for j, (x, y) in enumerate(zip(r[1], o[1]))
                           if x != y), min(len(r[1]), len(o[1])))
                where = " (first difference at byte %d)" % at
            raise Failure("%sreply %d (%s) differs%s: OpenSSH's server %s, "
                          "ours %s" % (what, i, labels[i], where, show(r),
                                       show(o)))
    if ref[1] != ours[1]:
        rt, ot = dict((e[0], e[1:]) for e in ref[1]), \
            dict((e[0], e[1:]) for e in ours[1])
        diff = sorted(n for n in set(rt) | set(ot) if rt.get(n) != ot.get(n))
        n = diff[0]

        def brief(e):
            if e is None:
                return "absent"
            mode, size, data = e
            return "mode %s size %d %r" % (mode, size, (data or b"")[:24])
        raise Failure("%sfiles left behind differ at %s: OpenSSH's server "
                      "%s, ours %s" % (what, n, brief(rt.get(n)),
                                       brief(ot.get(n))))
    if ref[2] != ours[2]:
        raise Failure("%sexit status: OpenSSH's server %d, ours %d" %
                      (what, ref[2], ours[2]))
    if plan.fault_calls:
        for which in ("ref", "ours"):
            for call in plan.fault_calls:
                if not any(x == call or x.startswith(call + " ") or
                           (call[0] == "*" and x.endswith(call[1:]))
                           for x in results[which][4]):
                    raise Failure("%s%s never met the fault %r (the shim "
                                  "made %s)" % (what, which, call,
                                                sorted(set(results[which][4]))
                                                or "none"))
    if profile is not None or jitter is not None:
        # The kinds of call the stream makes, each of which slowfs must
        # have held on both sides.
        kinds = {k for lab in labels for word, k in
                 (("READ ", "read"), ("WRITE ", "write"),
                  ("STAT ", "stat")) if word in lab + " "}
        for which in ("ref", "ours"):
            for k in sorted(kinds):
                if not results[which][3].get(k, (0, 0))[0]:
                    raise Failure("%sslowfs held no %s call of %s: the "
                                  "check ran without its delay" %
                                  (what, k, which))
    held = dict(ours[3])
    at_once = held.pop("at once", (0, 0))[0]
    if not held:
        return "%d replies equal" % len(ours[0])
    return "%d replies equal; slowfs held %s; at most %d at once" % (
        len(ours[0]), ", ".join("%s %d" % (k, v[0]) for k, v in
                                sorted(held.items()) if v[0]), at_once)


def pattern(seed, n):
    """n reproducible bytes."""
    return random.Random(seed).randbytes(n)


# -- the scenarios ------------------------------------------------------------


def plan_write_then_read(two):
    p = Plan()
    p.file("f", pattern(1, 32768))
    if two:
        p.open("w", "f", W)
        p.open("r", "f", R)
    else:
        p.open("w", "f", RW)
    rh = "r" if two else "w"
    for i in range(DEPTH // 2):
        off = (i * 1531) % 28000
        p.write("w", "f", off, pattern(100 + i, 2048))
        p.read(rh, "f", off + 512, 4096)
    return p


def plan_read_then_write(two):
    p = Plan()
    p.file("f", pattern(2, 32768))
    if two:
        p.open("w", "f", W)
        p.open("r", "f", R)
    else:
        p.open("w", "f", RW)
    rh = "r" if two else "w"
    for i in range(DEPTH // 2):
        off = (i * 977) % 28000
        p.read(rh, "f", off, 4096)
        p.write("w", "f", off + 1024, pattern(200 + i, 2048))
    return p


def plan_overlapping_writes():
    p = Plan()
    p.file("f", pattern(3, 20000))
    for n, fl in (("a", RW), ("b", RW), ("c", W)):
        p.open(n, "f", fl)
    rng = random.Random(3)
    for i in range(DEPTH - 4):
        off = rng.randrange(0, 40000)
        p.write(rng.choice("abc"), "f", off,
                pattern(300 + i, rng.randrange(1, 9000)))
    end = p.size_of("f")
    q = (end + 3) // 4
    for i in range(4):
        p.read(rng.choice("ab"), "f", i * q, q)
    return p


def plan_write_then_stat():
    p = Plan()
    p.file("f", b"")
    p.open("w", "f", RW)
    p.open("r", "f", R)
    for i in range(DEPTH // 4):
        p.write("w", "f", p.size_of("f"), pattern(400 + i, 1000 + 37 * i))
        size = p.size_of("f")
        for label, make in (("FSTAT w", lambda h: req_fstat(h["w"])),
                            ("STAT f", lambda h: req_stat("f")),
                            ("FSTAT r", lambda h: req_fstat(h["r"]))):
            p.add(label, make, ("SIZE", size))
    return p


def plan_append():
    """WRITEs through a handle opened with APPEND land at the end of the
    file whatever their offset; other WRITEs and READs go between."""
    p = Plan()
    p.file("f", pattern(6, 8000))
    p.open("a", "f", W | SSH_FXF_APPEND)
    p.open("w", "f", RW)
    for i in range(DEPTH // 4):
        data = pattern(650 + i, 700 + 13 * i)
        end = p.size_of("f")
        p.model["f"][end:] = data
        p.add("WRITE a (append) %d" % len(data),
              lambda h, data=data: req_write(h["a"], 0, data),
              ("STATUS", SSH_FX_OK, b"Success"))
        p.read("w", "f", max(0, end - 300), 1000)
        p.write("w", "f", end + 200, pattern(680 + i, 100))
        p.add("FSTAT w", lambda h: req_fstat(h["w"]),
              ("SIZE", p.size_of("f")))
    return p


def plan_copy_data():
    """copy-data between WRITEs and READs of both of its files."""
    p = Plan()
    p.file("src", pattern(7, 30000))
    p.file("dst", pattern(8, 10000))
    p.open("s", "src", RW)
    p.open("d", "dst", RW)
    ok = ("STATUS", SSH_FX_OK, b"Success")
    for i in range(DEPTH // 8):
        p.write("s", "src", i * 3000, pattern(720 + i, 2000))
        p.read("d", "dst", i * 2500, 3000)
        roff, n, woff = i * 2000, 6000, i * 2500 + 500
        src = bytes(p.model["src"][roff:roff + n])
        m = p.model["dst"]
        if len(m) < woff:
            m.extend(bytes(woff - len(m)))
        m[woff:woff + len(src)] = src
        p.add("copy-data s %d+%d to d %d" % (roff, n, woff),
              lambda h, roff=roff, n=n, woff=woff: req_copy_data(
                  h["s"], roff, n, h["d"], woff), ok)
        p.read("d", "dst", woff, 4000)
        p.write("s", "src", roff + 1000, pattern(760 + i, 3000))
        p.add("FSTAT d", lambda h: req_fstat(h["d"]),
              ("SIZE", p.size_of("dst")))
        p.add("STAT src", lambda h: req_stat("src"),
              ("SIZE", p.size_of("src")))
        p.read("s", "src", roff, 2000)
    return p


def plan_close_then_trunc():
    p = Plan()
    p.file("f", pattern(5, 16384))
    p.open("w", "f", W)
    p.open("r", "f", R)
    p.open("w2", "f", W)
    for i in range(20):
        p.write("w", "f", 16384 + i * 1200, pattern(500 + i, 1200))
        if i % 5 == 4:
            p.read("r", "f", 16384 + i * 1000, 3000)
    p.add("CLOSE w", lambda h: req_close(h["w"]),
          ("STATUS", SSH_FX_OK, b"Success"))
    # The closed handle: each request fails, and changes nothing.  (Before
    # the OPEN: OpenSSH's server gives a closed handle's slot to the next
    # OPEN, and the old handle then names the new file.)
    p.add("WRITE w (closed)", lambda h: req_write(h["w"], 0, b"closed"),
          ("STATUS", SSH_FX_FAILURE, b"Failure"))
    p.add("READ w (closed)", lambda h: req_read(h["w"], 0, 10),
          ("STATUS", SSH_FX_FAILURE, b"Failure"))
    p.add("FSTAT w (closed)", lambda h: req_fstat(h["w"]),
          ("STATUS", SSH_FX_FAILURE, b"Failure"))
    p.add("CLOSE w (closed)", lambda h: req_close(h["w"]),
          ("STATUS", SSH_FX_NO_SUCH_FILE, b"No such file"))
    p.add("open:t", lambda h: req_open("f", RW | SSH_FXF_TRUNC))
    p.model["f"] = bytearray()
    p.read("r", "f", 0, 4096)
    p.add("FSTAT r", lambda h: req_fstat(h["r"]), ("SIZE", 0))
    p.add("STAT f", lambda h: req_stat("f"), ("SIZE", 0))
    for i in range(14):
        p.write("w2", "f", i * 700, pattern(550 + i, 900))
        p.read("r", "f", i * 700 + 300, 1000)
    p.add("STAT f", lambda h: req_stat("f"), ("SIZE", p.size_of("f")))
    # After the pipeline, the handle the OPEN gave.
    for i in range(6):
        p.read("t", "f", i * 2000, 2000, stage=2)
        p.write("t", "f", i * 2000 + 100, pattern(600 + i, 500), stage=2)
        p.read("r", "f", i * 2000, 2000, stage=2)
    p.add("CLOSE t", lambda h: req_close(h["t"]),
          ("STATUS", SSH_FX_OK, b"Success"), stage=2)
    p.read("r", "f", 0, 20000, stage=2)
    return p



def plan_open_close():
    """OPENs and CLOSEs amid WRITEs and READs: creating OPENs of new files,
    of one file through other spellings and with two modes; a name opened
    before and after a creating OPEN makes it; EXCL twice; a truncating
    OPEN between WRITEs of the file; CLOSEs, then requests on the closed
    handles.  Then the handles the OPENs gave, and the modes."""
    p = Plan()
    p.dir("d")
    p.file("a", pattern(21, 20000))
    p.file("warm", pattern(22, 3000))
    p.open("w", "a", RW)
    p.open("r", "warm", R)
    p.open("c", "warm", R)
    ok = ("STATUS", SSH_FX_OK, b"Success")
    fail = ("STATUS", SSH_FX_FAILURE, b"Failure")
    handle = ("HANDLE",)
    create = W | SSH_FXF_CREAT | SSH_FXF_TRUNC
    for i in range(8):
        p.add("STAT warm", lambda h: req_stat("warm"), ("SIZE", 3000))
    for i in range(6):
        p.add("open:n%d" % i, lambda h, i=i: req_open("n%d" % i, create),
              handle)
        p.model["n%d" % i] = bytearray()
    p.add("open:s1", lambda h: req_open("./n0", RW | SSH_FXF_CREAT), handle)
    p.add("open:s2", lambda h: req_open(
        "d/../n0", RW | SSH_FXF_CREAT | SSH_FXF_TRUNC), handle)
    p.add("open:m", lambda h: req_open("m", W | SSH_FXF_CREAT,
                                       Attrs(permissions=0o600)), handle)
    p.add("open:m2", lambda h: req_open("./m", W | SSH_FXF_CREAT,
                                        Attrs(permissions=0o640)), handle)
    p.add("OPEN new (missing)", lambda h: req_open("new", R),
          ("STATUS", SSH_FX_NO_SUCH_FILE, b"No such file"))
    p.add("open:new", lambda h: req_open("new", W | SSH_FXF_CREAT), handle)
    p.add("open:new_r", lambda h: req_open("new", R), handle)
    p.add("STAT new", lambda h: req_stat("new"), ("SIZE", 0))
    p.add("open:x", lambda h: req_open("x", W | SSH_FXF_CREAT |
                                       SSH_FXF_EXCL), handle)
    p.add("OPEN ./x EXCL", lambda h: req_open("./x", W | SSH_FXF_CREAT |
                                              SSH_FXF_EXCL), fail)
    p.add("OPEN d/../x EXCL", lambda h: req_open(
        "d/../x", RW | SSH_FXF_CREAT | SSH_FXF_EXCL), fail)
    for i in range(5):
        p.write("w", "a", i * 1000, pattern(700 + i, 1000))
    p.read("r", "warm", 0, 1000)
    p.add("open:t", lambda h: req_open("a", W | SSH_FXF_TRUNC), handle)
    p.model["a"] = bytearray()
    p.read("w", "a", 0, 5000)
    for i in range(5):
        p.write("w", "a", 3000 + i * 500, pattern(710 + i, 500))
    p.add("FSTAT w", lambda h: req_fstat(h["w"]), ("SIZE", p.size_of("a")))
    p.add("STAT a", lambda h: req_stat("a"), ("SIZE", p.size_of("a")))
    # No OPEN after a CLOSE here: OpenSSH's server gives a closed handle's
    # slot to the next OPEN, and the old handle then names the new file.
    p.add("CLOSE c", lambda h: req_close(h["c"]), ok)
    p.add("READ c (closed)", lambda h: req_read(h["c"], 0, 10), fail)
    p.add("FSTAT c (closed)", lambda h: req_fstat(h["c"]), fail)
    p.add("CLOSE c (closed)", lambda h: req_close(h["c"]),
          ("STATUS", SSH_FX_NO_SUCH_FILE, b"No such file"))
    p.read("r", "warm", 1000, 1000)
    p.add("CLOSE r", lambda h: req_close(h["r"]), ok)
    p.add("CLOSE w", lambda h: req_close(h["w"]), ok)
    p.add("READ r (closed)", lambda h: req_read(h["r"], 0, 10), fail)
    p.add("WRITE w (closed)", lambda h: req_write(h["w"], 0, b"closed"),
          fail)
    # The handles the OPENs gave.
    for i in range(6):
        p.write("n%d" % i, "n%d" % i, 0, pattern(720 + i, 3000 + i * 100),
                stage=2)
    p.write("s1", "n0", 1000, pattern(730, 400), stage=2)
    p.read("s2", "n0", 0, 5000, stage=2)
    p.add("READ new_r", lambda h: req_read(h["new_r"], 0, 10),
          ("STATUS", SSH_FX_EOF, b"End of file"), stage=2)
    p.add("WRITE t", lambda h: req_write(h["t"], 0, b"t"), ok, stage=2)
    p.model["a"][0:1] = b"t"
    for n in ("m", "n0", "new", "x"):
        p.add("STAT " + n, lambda h, n=n: req_stat(n), stage=2)
    for n in ("n0", "n1", "n2", "n3", "n4", "n5", "s1", "s2", "m", "m2",
              "new", "new_r", "x", "t"):
        p.add("CLOSE " + n, lambda h, n=n: req_close(h[n]), ok, stage=2)
    return p

def plan_atomic_uploads():
    """Uploads under -A amid other work (the server under test runs with
    -A, OpenSSH's without: the requests never look at a target between
    its OPEN and its CLOSE, where the two differ by design).  Uploads over
    a file and of new files, WRITEs to them beside READs of another file,
    their CLOSEs (each puts its file in place) followed at once by STAT,
    LSTAT and OPENs of their names; a second upload of one name; EXCL onto
    a name just put in place; an OPEN that neither creates nor truncates,
    which writes in place.  Then the handles the OPENs gave, and the
    files left behind (contents, modes: an upload over a file keeps its
    mode, as a truncating OPEN does)."""
    p = Plan()
    p.dir("d")
    p.file("old", pattern(31, 20000))
    p.file("d/old2", pattern(32, 5000))
    p.file("keep", pattern(33, 30000))
    p.modes["old"] = 0o640
    up = W | SSH_FXF_CREAT | SSH_FXF_TRUNC
    p.open("u1", "old", up)
    p.open("u2", "new", up)
    p.open("u3", "d/old2", RW | SSH_FXF_CREAT | SSH_FXF_TRUNC)
    p.open("r", "keep", R)
    ok = ("STATUS", SSH_FX_OK, b"Success")
    handle = ("HANDLE",)
    for i in range(6):
        p.add("WRITE u1 %d" % i, lambda h, i=i: req_write(
            h["u1"], i * 3000, pattern(800 + i, 3000)), ok)
        p.add("WRITE u2 %d" % i, lambda h, i=i: req_write(
            h["u2"], i * 2000, pattern(810 + i, 2000)), ok)
        p.read("r", "keep", i * 4000, 4000)
    p.add("WRITE u3", lambda h: req_write(h["u3"], 0, pattern(820, 7000)),
          ok)
    p.add("READ u3", lambda h: req_read(h["u3"], 1000, 3000),
          ("DATA", pattern(820, 7000)[1000:4000]))
    p.add("FSTAT u3", lambda h: req_fstat(h["u3"]), ("SIZE", 7000))
    p.add("CLOSE u1", lambda h: req_close(h["u1"]), ok)
    p.add("STAT old", lambda h: req_stat("old"), ("SIZE", 18000))
    p.add("open:o", lambda h: req_open("old", R), handle)
    p.add("CLOSE u2", lambda h: req_close(h["u2"]), ok)
    p.add("LSTAT new", lambda h: req_lstat("new"), ("SIZE", 12000))
    p.add("OPEN new EXCL", lambda h: req_open("new", W | SSH_FXF_CREAT |
                                              SSH_FXF_EXCL),
          ("STATUS", SSH_FX_FAILURE, b"Failure"))
    p.add("CLOSE u3", lambda h: req_close(h["u3"]), ok)
    p.add("STAT d/old2", lambda h: req_stat("d/old2"), ("SIZE", 7000))
    p.add("open:u4", lambda h: req_open("new", up), handle)
    p.add("open:u5", lambda h: req_open("fresh", up), handle)
    p.add("open:a", lambda h: req_open("keep", W | SSH_FXF_CREAT), handle)
    p.read("r", "keep", 0, 2000)
    # The handles the OPENs gave.
    p.add("READ o", lambda h: req_read(h["o"], 0, 18000),
          ("DATA", b"".join(pattern(800 + i, 3000) for i in range(6))),
          stage=2)
    p.add("WRITE u4", lambda h: req_write(h["u4"], 0, pattern(830, 999)), ok,
          stage=2)
    p.add("WRITE u5", lambda h: req_write(h["u5"], 0, pattern(831, 99)), ok,
          stage=2)
    p.add("WRITE a", lambda h: req_write(h["a"], 100, b"in place"), ok,
          stage=2)
    p.model["keep"][100:108] = b"in place"
    p.read("r", "keep", 0, 2000, stage=2)
    for n in ("u4", "u5", "a", "o"):
        p.add("CLOSE " + n, lambda h, n=n: req_close(h[n]), ok, stage=2)
    for n in ("new", "fresh", "old"):
        p.add("STAT " + n, lambda h, n=n: req_stat(n), stage=2)
    p.read("r", "keep", 0, 30000, stage=2)
    p.add("CLOSE r", lambda h: req_close(h["r"]), ok, stage=2)
    return p


def plan_rename_remove():
    p = Plan()
    for n in "abcd":
        p.file(n, pattern(ord(n), 24576))
    p.open("a", "a", R)
    p.open("b", "b", R)
    ok = ("STATUS", SSH_FX_OK, b"Success")
    nsf = ("STATUS", SSH_FX_NO_SUCH_FILE, b"No such file")
    for i in range(8):
        p.read("a", "a", i * 3000, 3000)
        p.add("STAT a", lambda h: req_stat("a"), ("SIZE", 24576))
    p.add("RENAME a a2", lambda h: req_rename("a", "a2"), ok)
    p.add("STAT a", lambda h: req_stat("a"), nsf)
    p.add("LSTAT a2", lambda h: req_lstat("a2"), ("SIZE", 24576))
    p.add("OPEN a", lambda h: req_open("a", R), nsf)
    p.read("a", "a", 100, 1000)
    for i in range(8):
        p.read("b", "b", i * 3000, 3000)
    p.add("REMOVE b", lambda h: req_remove("b"), ok)
    p.add("STAT b", lambda h: req_stat("b"), nsf)
    p.add("OPEN b", lambda h: req_open("b", R), nsf)
    p.read("b", "b", 20000, 4096)
    for i in range(6):
        p.add("LSTAT c", lambda h: req_lstat("c"), ("SIZE", 24576))
        p.add("STAT d", lambda h: req_stat("d"), ("SIZE", 24576))
    p.add("REMOVE c", lambda h: req_remove("c"), ok)
    p.add("RENAME c x", lambda h: req_rename("c", "x"), nsf)
    p.add("RENAME d c", lambda h: req_rename("d", "c"), ok)
    p.add("posix-rename a2 d", lambda h: req_posix_rename("a2", "d"), ok)
    p.add("STAT c", lambda h: req_stat("c"), ("SIZE", 24576))
    p.add("REMOVE a2", lambda h: req_remove("a2"), nsf)
    p.add("REMOVE d", lambda h: req_remove("d"), ok)
    p.add("STAT d", lambda h: req_stat("d"), nsf)
    p.read("a", "a", 0, 4096)
    p.read("b", "b", 0, 4096)
    while len(p.stream) < DEPTH:
        p.add("LSTAT c", lambda h: req_lstat("c"), ("SIZE", 24576))
    return p


def plan_readdir():
    p = Plan()
    p.dir("d")
    for i in range(5):
        p.file("d/old%d" % i, pattern(700 + i, 100 * (i + 1)))
    p.opendir("early", "d")
    p.opendir("late", "d")
    p.opendir("last", "d")
    ok = ("STATUS", SSH_FX_OK, b"Success")
    eof = ("STATUS", SSH_FX_EOF, b"End of file")
    p.add("READDIR early", lambda h: req_readdir(h["early"]),
          ("NAMES", 7))
    for i in range(12):
        name = "d/new%02d" % i
        p.add("OPEN %s creat" % name,
              lambda h, name=name: req_open(name, W | SSH_FXF_CREAT))
        p.add("SETSTAT %s size" % name,
              lambda h, name=name, i=i: req_setstat(
                  name, Attrs(size=1000 + i)), ok)
        p.add("STAT %s" % name, lambda h, name=name: req_stat(name),
              ("SIZE", 1000 + i))
    p.add("REMOVE d/old1", lambda h: req_remove("d/old1"), ok)
    p.add("MKDIR d/sub", lambda h: req_mkdir("d/sub"), ok)
    p.add("READDIR late", lambda h: req_readdir(h["late"]), ("NAMES", 19))
    p.add("READDIR late", lambda h: req_readdir(h["late"]), eof)
    p.add("READDIR early", lambda h: req_readdir(h["early"]))
    for i in range(0, 12, 2):
        name = "d/new%02d" % i
        p.add("REMOVE %s" % name, lambda h, name=name: req_remove(name), ok)
        p.add("LSTAT %s" % name, lambda h, name=name: req_lstat(name),
              ("STATUS", SSH_FX_NO_SUCH_FILE, b"No such file"))
    p.add("SETSTAT d/old2 size",
          lambda h: req_setstat("d/old2", Attrs(size=5)), ok)
    p.add("READDIR last", lambda h: req_readdir(h["last"]), ("NAMES", 13))
    p.add("READDIR last", lambda h: req_readdir(h["last"]), eof)
    p.add("RMDIR d/sub", lambda h: req_rmdir("d/sub"), ok)
    while len(p.stream) < DEPTH:
        p.add("STAT d/old2", lambda h: req_stat("d/old2"), ("SIZE", 5))
    return p


def plan_enospc():
    """A tmpfs of 256 KiB: a 160 KiB file, then writes of 8 KiB blocks to
    two files in turn; space runs out, a REMOVE frees it, writes go on."""
    p = Plan()
    p.tmpfs = 256 * 1024
    p.file("fill", pattern(9, 160 * 1024))
    p.file("x", b"")
    p.file("y", b"")
    p.open("x", "x", RW)
    p.open("y", "y", RW)
    p.open("fill", "fill", R)
    for i in range(20):
        hn = "xy"[i % 2]
        p.add("WRITE %s %d+8192" % (hn, (i // 2) * 8192),
              lambda h, hn=hn, i=i: req_write(
                  h[hn], (i // 2) * 8192, pattern(900 + i, 8192)))
        p.add("READ fill", lambda h, i=i: req_read(h["fill"], i * 8192,
                                                    8192))
    for n in "xy":
        p.add("FSTAT %s" % n, lambda h, n=n: req_fstat(h[n]))
        p.add("READ %s" % n, lambda h, n=n: req_read(h[n], 0, 100000))
    p.add("CLOSE fill", lambda h: req_close(h["fill"]),
          ("STATUS", SSH_FX_OK, b"Success"))
    p.add("REMOVE fill", lambda h: req_remove("fill"),
          ("STATUS", SSH_FX_OK, b"Success"))
    for i in range(6):
        hn = "yx"[i % 2]
        p.add("WRITE %s %d+8192" % (hn, 81920 + i * 8192),
              lambda h, hn=hn, i=i: req_write(
                  h[hn], 81920 + i * 8192, pattern(950 + i, 8192)),
              ("STATUS", SSH_FX_OK, b"Success"))
        p.add("STAT %s" % hn, lambda h, hn=hn: req_stat(hn))
    for n in "xy":
        p.add("FSTAT %s" % n, lambda h, n=n: req_fstat(h[n]))
        p.add("READ %s" % n, lambda h, n=n: req_read(h[n], 40000, 100000))
    p.add("CLOSE x", lambda h: req_close(h["x"]))
    p.add("CLOSE y", lambda h: req_close(h["y"]))
    return p


def plan_enospc_separate():
    """A tmpfs of 100 KiB: 25 pages, one of them a small file read first
    (so that a server that measures its storage finds it slow before the
    WRITEs come).  32 WRITEs of a page each, to ranges that do not
    overlap: the first 24 in request order fit, the last 8 meet a full
    disk."""
    p = Plan()
    p.tmpfs = 100 * 1024
    p.file("warm", pattern(1299, 4000))
    p.file("x", b"")
    p.open("warm", "warm", R)
    p.open("x", "x", RW)
    for i in range(6):
        p.read("warm", "warm", i * 500, 1000)
        p.add("STAT warm", lambda h: req_stat("warm"), ("SIZE", 4000))
    for i in range(32):
        p.write("x", "x", i * 4096, pattern(1300 + i, 4096), ok=i < 24)
    p.add("FSTAT x", lambda h: req_fstat(h["x"]), ("SIZE", 24 * 4096))
    for i in range(8):
        p.read("x", "x", i * 3 * 4096, 3 * 4096)
    p.add("CLOSE x", lambda h: req_close(h["x"]),
          ("STATUS", SSH_FX_OK, b"Success"))
    return p



def plan_enospc_close():
    """A tmpfs of 256 KiB; a 160 KiB file, open, is removed: its space
    comes back only at its CLOSE, amid WRITEs to another file that fill
    the rest.  WRITEs before the CLOSE meet a full disk, those after it
    do not."""
    p = Plan()
    p.tmpfs = 256 * 1024
    p.file("big", pattern(31, 160 * 1024))
    p.file("x", b"")
    p.open("b", "big", R)
    p.open("x", "x", RW)
    for i in range(20):
        p.add("STAT x", lambda h: req_stat("x"), ("SIZE", 0))
    p.add("REMOVE big", lambda h: req_remove("big"),
          ("STATUS", SSH_FX_OK, b"Success"))
    for i in range(14):
        p.add("WRITE x %d+8192" % (i * 8192),
              lambda h, i=i: req_write(h["x"], i * 8192,
                                       pattern(800 + i, 8192)))
    p.add("CLOSE b", lambda h: req_close(h["b"]),
          ("STATUS", SSH_FX_OK, b"Success"))
    for i in range(14, 24):
        p.add("WRITE x %d+8192" % (i * 8192),
              lambda h, i=i: req_write(h["x"], i * 8192,
                                       pattern(800 + i, 8192)),
              ("STATUS", SSH_FX_OK, b"Success"))
    p.add("FSTAT x", lambda h: req_fstat(h["x"]), ("SIZE", 24 * 8192))
    p.add("READ x", lambda h: req_read(h["x"], 0, 200000))
    p.add("CLOSE x", lambda h: req_close(h["x"]),
          ("STATUS", SSH_FX_OK, b"Success"))
    return p

def plan_faults():
    """EIO at fsync and close of eio/f; ESTALE on reads and writes of
    stale/f; ok/f in between works."""
    p = Plan()
    p.faults = {"EIO_PREFIX": "eio/", "ESTALE_PREFIX": "stale/"}
    p.fault_calls = ["fsync EIO", "close EIO", "* ESTALE"]
    for d in ("eio", "stale", "ok"):
        p.dir(d)
        p.file(d + "/f", pattern(len(d), 16384))
    p.open("e", "eio/f", RW)
    p.open("s", "stale/f", RW)
    p.open("k", "ok/f", RW)
    p.open("k2", "ok/f", R)
    fail = ("STATUS", SSH_FX_FAILURE, b"Failure")
    ok = ("STATUS", SSH_FX_OK, b"Success")
    for i in range(6):
        p.write("e", "eio/f", i * 1000, pattern(1000 + i, 1500))
        p.add("WRITE s", lambda h, i=i: req_write(h["s"], i * 100, b"z" * 50),
              fail)
        p.write("k", "ok/f", i * 2000, pattern(1100 + i, 2500))
        p.read("k2", "ok/f", i * 2000 + 1000, 3000)
    p.add("fsync e", lambda h: req_fsync(h["e"]), fail)
    p.read("e", "eio/f", 0, 8000)
    p.add("READ s", lambda h: req_read(h["s"], 0, 100), fail)
    p.write("e", "eio/f", 9000, pattern(1200, 3000))
    p.add("fsync k", lambda h: req_fsync(h["k"]), ok)
    p.add("CLOSE e", lambda h: req_close(h["e"]), fail)
    p.add("READ e (closed)", lambda h: req_read(h["e"], 0, 10), fail)
    p.add("WRITE e (closed)", lambda h: req_write(h["e"], 0, b"late"), fail)
    p.read("k2", "ok/f", 0, 16384)
    p.add("open:e2", lambda h: req_open("eio/f", RW))
    p.add("STAT eio/f", lambda h: req_stat("eio/f"),
          ("SIZE", p.size_of("eio/f")))
    p.add("CLOSE s", lambda h: req_close(h["s"]), ok)
    p.add("WRITE s (closed)", lambda h: req_write(h["s"], 0, b"late"), fail)
    for i in range(DEPTH - len(p.stream)):
        p.read("k2", "ok/f", i * 500, 1000)
    p.read("e2", "eio/f", 0, 20000, stage=2)
    p.add("fsync e2", lambda h: req_fsync(h["e2"]), fail, stage=2)
    p.add("CLOSE e2", lambda h: req_close(h["e2"]), fail, stage=2)
    p.add("CLOSE k", lambda h: req_close(h["k"]), ok, stage=2)
    return p


def plan_random(seed):
    """Random requests on three files, through two handles each: READ,
    WRITE, FSTAT, STAT, LSTAT, FSETSTAT of the size, OPEN (with TRUNCATE
    or for reading) and READDIR with its long names."""
    rng = random.Random(seed)
    p = Plan()
    names = ["f0", "f1", "f2"]
    for i, n in enumerate(names):
        p.file(n, pattern(seed * 10 + i, rng.randrange(0, 40000)))
        p.open(n + "a", n, RW)
        p.open(n + "b", n, rng.choice((RW, R, W)))
    flags = {o[0]: o[2] for o in p.opens}
    p.opendir("dot", ".")
    ok = ("STATUS", SSH_FX_OK, b"Success")
    readdir_at = rng.randrange(DEPTH // 2, DEPTH)
    for i in range(DEPTH):
        n = rng.choice(names)
        hn = n + rng.choice("ab")
        k = rng.random()
        if i == readdir_at:
            p.add("READDIR .", lambda h: req_readdir(h["dot"]), ("NAMES", 5))
        elif k < 0.35 and flags[hn] & W:
            off = rng.randrange(0, 48000)
            p.write(hn, n, off, rng.randbytes(rng.randrange(1, 12000)))
        elif k < 0.7 and flags[hn] & R:
            p.read(hn, n, rng.randrange(0, 48000), rng.randrange(1, 20000))
        elif k < 0.78:
            p.add("FSTAT %s" % hn, lambda h, hn=hn: req_fstat(h[hn]),
                  ("SIZE", p.size_of(n)))
        elif k < 0.86:
            p.add("STAT %s" % n, lambda h, n=n: req_stat(n),
                  ("SIZE", p.size_of(n)))
        elif k < 0.91 and flags[hn] & W:
            # On a read-only handle ftruncate() fails with EINVAL, which
            # OpenSSH's server answers BAD_MESSAGE: left out.
            size = rng.randrange(0, 48000)
            m = p.model[n]
            if size < len(m):
                del m[size:]
            else:
                m.extend(bytes(size - len(m)))
            p.add("FSETSTAT %s size %d" % (hn, size),
                  lambda h, hn=hn, size=size: req_fsetstat(
                      h[hn], Attrs(size=size)), ok)
        elif k < 0.93:
            # The new handle is never used: its number may differ between
            # the servers only in ways the comparison does not see.
            del p.model[n][:]
            p.add("OPEN %s truncate" % n, lambda h, n=n: req_open(
                n, W | SSH_FXF_TRUNC))
        elif k < 0.95:
            p.add("OPEN %s read" % n, lambda h, n=n: req_open(n, R))
        else:
            p.add("LSTAT %s" % n, lambda h, n=n: req_lstat(n),
                  ("SIZE", p.size_of(n)))
    for n in names:
        p.read(n + "a", n, 0, 65536, stage=2)
    return p


# -- registration ---------------------------------------------------------------

SCENARIOS = [
    ("write_then_read_one_handle", lambda: plan_write_then_read(False)),
    ("read_then_write_one_handle", lambda: plan_read_then_write(False)),
    ("write_then_read_two_handles", lambda: plan_write_then_read(True)),
    ("read_then_write_two_handles", lambda: plan_read_then_write(True)),
    ("overlapping_writes", plan_overlapping_writes),
    ("write_then_stat_size", plan_write_then_stat),
    ("append_writes", plan_append),
    ("copy_data_between_writes", plan_copy_data),
    ("close_then_open_trunc", plan_close_then_trunc),
    ("open_close_amid_transfers", plan_open_close),
    ("rename_remove_after_reads", plan_rename_remove),
    ("readdir_while_creating", plan_readdir),
    ("enospc_mid_pipeline", plan_enospc),
    ("enospc_separate_writes", plan_enospc_separate),
    ("enospc_close_of_removed", plan_enospc_close),
    ("eio_estale_mid_pipeline", plan_faults),
]


def scenario_test(build, profile, jitter, ours=None):
    def run(ctx):
        plan = build()
        plan.ctx = ctx
        return compare(plan, profile, jitter, ours=ours)
    return run


for _name, _build in SCENARIOS:
    for _pname, _profile, _jitter in PROFILES:
        add_test("%s [%s]" % (_name, _pname),
                 scenario_test(_build, _profile, _jitter))
for _pname, _profile, _jitter in PROFILES:
    add_test("atomic_uploads [%s]" % _pname,
             scenario_test(plan_atomic_uploads, _profile, _jitter,
                           ours=SERVER_ARGV + ["-A"]))


def random_test(seed):
    def run(ctx):
        plan = plan_random(seed)
        plan.ctx = ctx
        # Every call kind slowed by 0 to 1.5 ms, drawn from the seed.
        return compare(plan, "read=0.05,write=0.05,stat=0.05",
                       jitter=(1.5, seed),
                       what="seed %d (rerun: ORDER_SEED=%d test_order.py "
                       "random_%d): " % (seed, seed, seed))
    return run


def proxy_test(mode, build, want):
    """The suite catches a server that breaks the order: OpenSSH's server
    behind tests/protocol/order_proxy.py MODE must fail the comparison
    with the reference itself, with a message that contains want."""
    def run(ctx):
        plan = build()
        plan.ctx = ctx
        proxy = [sys.executable, os.path.join(HERE, "order_proxy.py"), mode,
                 REFERENCE]
        try:
            got = compare(plan, None, ours=proxy)
        except Failure as e:
            if want not in str(e):
                raise Failure("expected a failure that says %r, got: %s" %
                              (want, e))
            return "caught: %s" % str(e)[:160]
        raise Failure("a server that breaks the order (order_proxy.py %s) "
                      "passed: %s" % (mode, got))
    return run


add_test("catches_write_run_before_earlier_read",
         proxy_test("swap-exec", lambda: plan_read_then_write(False),
                    "differs"))
add_test("catches_read_run_before_earlier_write",
         proxy_test("swap-exec", lambda: plan_write_then_read(True),
                    "differs"))
add_test("catches_replies_out_of_order",
         proxy_test("swap-replies", lambda: plan_write_then_read(False),
                    "out of request order"))

def sized_names(root, prefix, count):
    """count files in root (made), each of a size its name gives: the
    names and sizes, as a dict."""
    os.mkdir(root)
    os.chmod(root, 0o755)
    want = {}
    for i in range(count):
        n = "%s%03d" % (prefix, i)
        want[n] = len(n) + i
        with open(os.path.join(root, n), "wb") as f:
            f.write(b"x" * want[n])
    return want


def listed(replies):
    """The names and sizes of READDIR replies, less "." and ".."."""
    return {os.fsdecode(e.filename): e.attrs.size for r in replies
            for e in r.entries if e.filename not in (b".", b"..")}


def first_held(path, kind):
    """How many calls of kind slowfs held of the server's first thread
    (its loop, not a worker), from its report at path."""
    try:
        with open(path) as f:
            m = re.search(r"first_%s=(\d+)" % kind, f.read())
    except FileNotFoundError:
        return 0
    return int(m.group(1)) if m else 0


def slowfs_session(ctx, report, delays, held, cwd, extra=()):
    """Our server (with the options extra) under slowfs -D delays, holding
    the calls under held, started in cwd and past INIT; and the path of
    slowfs's report (named report, in the logs)."""
    counts = os.path.join(ctx.logs, report)
    argv = [slowfs(), "-o", counts, "-D", delays, "-p", held,
            "--"] + list(SERVER_ARGV) + list(extra)
    srv = Server(argv, cwd=cwd, env=dict(os.environ), umask=UMASK,
                 timeout=60)
    ctx.servers.append(srv)
    srv.init()
    return srv, counts


def stats_to_workers(srv, name):
    """READs of name that wait, one at a time (slowfs answers their
    RWF_NOWAIT tries with EAGAIN, so they go to workers): 4 in a row that
    waited make the session's stats go to workers too."""
    h = srv.open(name, SSH_FXF_READ)
    for _ in range(8):
        r = srv.call(req_read(h, 0, 16))
        if r.type != SSH_FXP_DATA:
            raise Failure("READ: %r" % r)
    srv.call(req_close(h))


def expect_listing(got, want, what):
    """got, names and sizes listed, must be want."""
    if got != want:
        raise Failure("%s's names and sizes: %d of %d right" % (
            what, sum(got.get(n) == v for n, v in want.items()), len(want)))


def held_at_once_after_exit(srv, counts, what, least=50):
    """The server exits 0; slowfs (its report in counts) held least or
    more calls at once, which is returned."""
    if srv.close() != 0:
        raise Failure("exit status %r" % srv.returncode)
    most = held_counts(counts).get("at once", (0, 0))[0]
    if most < least:
        raise Failure("slowfs held at most %d of %s at once, expected %d "
                      "or more" % (most, what, least))
    return most


def readdir_lstats_at_once(ctx):
    """One READDIR of 100 names on storage whose stats wait: its lstats
    go to workers together, at least 50 of them held at once by slowfs
    (they went in slices of 8, at most 13 at once, before).  Each lstat is
    held a second, so that the workers need not all start within less
    on a loaded machine."""
    root = os.path.join(ctx.tmp, "hundred")
    want = sized_names(root, "n", 98)           # with "." and "..": 100
    srv, counts = slowfs_session(ctx, "slowfs-readdir.txt",
                                 "stat=1000,read=50", root, root)
    stats_to_workers(srv, "n097")
    h = srv.opendir(".")
    r = srv.call(req_readdir(h))
    if r.type != SSH_FXP_NAME:
        raise Failure("READDIR: %r" % r)
    expect_listing(listed([r]), want, "READDIR")
    most = held_at_once_after_exit(srv, counts, "the READDIR's lstats")
    return "slowfs held %d lstats at once" % most


add_test("readdir_lstats_at_once", readdir_lstats_at_once)


def open_new_files(srv, prefix, n):
    """Creating OPENs of prefix00 ... in one pipeline: their handles, in
    order."""
    ids = srv.send_many([req_open("%s%02d" % (prefix, i), SSH_FXF_WRITE |
                                  SSH_FXF_CREAT | SSH_FXF_TRUNC)
                         for i in range(n)])
    replies = srv.recv_many(n)
    if [r.id for r in replies] != ids or \
            any(r.type != SSH_FXP_HANDLE for r in replies):
        raise Failure("OPENs: %r" % replies[:3])
    return [r.handle for r in replies]


def opens_wait_for_open_alone(ctx):
    """40 creating OPENs of new files in one pipeline, on storage whose
    opens wait 50 ms and stats a second: an OPEN learns which file it
    opened without a stat that waits (OpenSSH's OPEN makes open(2)
    alone), so slowfs holds far fewer stats than OPENs; and since the
    files are told apart all the same, one WRITE to each, in one
    pipeline, runs beside the others: 20 or more held at once."""
    root = os.path.join(ctx.tmp, "made")
    sized_names(root, "r", 1)
    srv, counts = slowfs_session(ctx, "slowfs-opens.txt",
                                 "open=50,stat=1000,read=50,write=1000",
                                 root, root)
    stats_to_workers(srv, "r000")
    n = 40
    handles = open_new_files(srv, "new", n)
    ids = srv.send_many([req_write(h, 0, b"w%02d" % i)
                         for i, h in enumerate(handles)])
    for r in srv.recv_many(n):
        if r.type != SSH_FXP_STATUS or r.code != SSH_FX_OK:
            raise Failure("WRITE: %r" % r)
    for h in handles:
        if srv.call(req_close(h)).code != SSH_FX_OK:
            raise Failure("CLOSE failed")
    most = held_at_once_after_exit(srv, counts, "the WRITEs", least=20)
    stats = held_counts(counts).get("stat", (0, 0))[0]
    if stats >= n // 2:
        raise Failure("slowfs held %d stats for %d OPENs: each OPEN waited "
                      "for a stat of the file it opened" % (stats, n))
    for i in range(n):
        with open(os.path.join(root, "new%02d" % i), "rb") as f:
            if f.read() != b"w%02d" % i:
                raise Failure("new%02d does not hold its WRITE" % i)
    return "%d stats held in all, %d WRITEs held at once" % (stats, most)


add_test("opens_wait_for_open_alone", opens_wait_for_open_alone)


CLOSES_HERE = "CLOSE of handles open for writing answers at once: it runs here"


def expect_ok_pipeline(srv, reqs, what):
    """Sends reqs in one pipeline: each must be answered OK, in order."""
    ids = srv.send_many(reqs)
    replies = srv.recv_many(len(reqs))
    if [r.id for r in replies] != ids or \
            any(r.type != SSH_FXP_STATUS or r.code != SSH_FX_OK
                for r in replies):
        raise Failure("%ss: %r" % (what, replies[:3]))


def small_files(srv, root, prefix, n):
    """n new files of a few bytes each, every step one pipeline: their
    OPENs, then a WRITE to each, then their CLOSEs; each file then holds
    its own bytes."""
    handles = open_new_files(srv, prefix, n)
    for reqs, what in (([req_write(h, 0, b"%s%02d" % (prefix.encode(), i))
                         for i, h in enumerate(handles)], "WRITE"),
                       ([req_close(h) for h in handles], "CLOSE")):
        expect_ok_pipeline(srv, reqs, what)
    for i in range(n):
        with open(os.path.join(root, "%s%02d" % (prefix, i)), "rb") as f:
            if f.read() != b"%s%02d" % (prefix.encode(), i):
                raise Failure("%s%02d does not hold its WRITE" % (prefix, i))


def closes_run_here_when_quick(ctx):
    """On storage whose opens and writes wait (50 ms) but whose close(2)
    does not (slowfs holds none), CLOSEs go to workers with the rest, and
    once 32 in a row did not wait they run in the loop, which spares each
    a worker's wake-up: the server says so at DEBUG.  Where close(2) waits
    (100 ms, as NFS's flush of what was written), they stay with the
    workers: slowfs holds all 41, none of them made by the loop's thread.
    Every file holds its bytes."""
    out = []
    for delays, quick in (("open=50,read=50,write=50", True),
                          ("open=50,read=50,write=50,close=100", False)):
        root = os.path.join(ctx.tmp, "closes-%d" % quick)
        sized_names(root, "r", 1)
        srv, counts = slowfs_session(ctx, "slowfs-closes-%d.txt" % quick,
                                     delays, root, root,
                                     extra=("-e", "-l", "DEBUG"))
        stats_to_workers(srv, "r000")
        small_files(srv, root, "s", 40)
        if srv.close() != 0:
            raise Failure("exit status %r" % srv.returncode)
        said = CLOSES_HERE in srv.stderr_output().decode(errors="replace")
        closes = held_counts(counts).get("close", (0, 0))
        if said != quick:
            raise Failure("closes %s: the server %s %r" % (
                "do not wait" if quick else "wait 100 ms",
                "never said" if quick else "said", CLOSES_HERE))
        if not quick and closes[0] != 40 + 1:
            raise Failure("slowfs held %d closes, expected 41" % closes[0])
        if not quick and first_held(counts, "close") != 0:
            raise Failure("the loop's thread made %d of the closes that "
                          "waited" % first_held(counts, "close"))
        out.append("%s: %s" % ("quick" if quick else "waiting",
                               "here after 32" if said else
                               "%d held" % closes[0]))
    return "; ".join(out)


add_test("closes_run_here_when_quick", closes_run_here_when_quick)


def slow_from_the_start(ctx):
    """A session whose storage waits from its first call (opens and
    writes held 50 ms): its first calls are all timed, so its WRITEs go
    to workers after 4 of them (SLOW_STREAK) made one after the other in
    the loop; when only one call in 8 was timed from the start, the loop
    made 11 (slowfs counts the calls of the server's first thread)."""
    root = os.path.join(ctx.tmp, "fromstart")
    os.makedirs(root)
    srv, counts = slowfs_session(ctx, "slowfs-fromstart.txt",
                                 "open=50,write=50", root, root)
    h = srv.open("up", SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC)
    n = 40
    expect_ok_pipeline(srv, [req_write(h, i * 4096, bytes([i]) * 4096)
                             for i in range(n)], "WRITE")
    if srv.call(req_close(h)).code != SSH_FX_OK:
        raise Failure("CLOSE failed")
    if srv.close() != 0:
        raise Failure("exit status %r" % srv.returncode)
    with open(os.path.join(root, "up"), "rb") as f:
        if f.read() != b"".join(bytes([i]) * 4096 for i in range(n)):
            raise Failure("the file does not hold the WRITEs")
    loop = first_held(counts, "write")
    if loop > 5:
        raise Failure("the loop's thread made %d of the %d WRITEs, one "
                      "after the other, before the others went to "
                      "workers; expected 4" % (loop, n))
    return "%d of %d WRITEs in the loop" % (loop, n)


add_test("slow_from_the_start", slow_from_the_start)


def readdir_first_batch_stops(ctx):
    """The first READDIR of a session whose storage turns out to wait
    (each lstat held 50 ms): it ends its reply once its own lstats have
    shown that, with 16 names or fewer, instead of making its hundred
    lstats in a row in the loop (5 s); the listing is whole."""
    root = os.path.join(ctx.tmp, "first")
    want = sized_names(root, "f", 198)
    srv, counts = slowfs_session(ctx, "slowfs-first.txt", "stat=50", root,
                                 root)
    h = srv.opendir(".")
    batches, end = srv.readdir_all(h)
    if end.code != SSH_FX_EOF:
        raise Failure("READDIR ended with %r" % end)
    first = len(batches[0].entries)
    expect_listing(listed(batches), want, "the listing")
    if srv.close() != 0:
        raise Failure("exit status %r" % srv.returncode)
    if first > 16:
        raise Failure("the first READDIR held %d names: its lstats ran in "
                      "the loop after storage was seen to wait" % first)
    return "first READDIR: %d names, then %d more READDIRs" % (
        first, len(batches) - 1)


add_test("readdir_first_batch_stops", readdir_first_batch_stops)


def readdirs_share_workers(ctx):
    """Two READDIRs in a pipeline, of directories a (not held) and b (each
    lstat held a second): the workers that finish a's lstats join b's, so
    that 50 or more of b's are held at once (b had at most 13 at once,
    in slices of 8 names, while a's took the workers first)."""
    a = os.path.join(ctx.tmp, "a")
    b = os.path.join(ctx.tmp, "b")
    want_a = sized_names(a, "a", 98)
    want_b = sized_names(b, "b", 98)
    srv, counts = slowfs_session(ctx, "slowfs-share.txt",
                                 "stat=1000,read=50", b, ctx.tmp)
    stats_to_workers(srv, "b/b097")
    ha, hb = srv.opendir("a"), srv.opendir("b")
    ids = srv.send_many([req_readdir(ha), req_readdir(hb)])
    replies = srv.recv_many(2)
    if [r.id for r in replies] != ids or \
            any(r.type != SSH_FXP_NAME for r in replies):
        raise Failure("READDIRs: %r" % replies)
    for r, want in zip(replies, (want_a, want_b)):
        expect_listing(listed([r]), want, "READDIR %d" % r.id)
    most = held_at_once_after_exit(srv, counts, "b's lstats")
    return "slowfs held %d of b's lstats at once" % most


add_test("readdirs_share_workers", readdirs_share_workers)

_first = int(os.environ.get("ORDER_SEED", "1"))
for _seed in range(_first, _first + int(os.environ.get("ORDER_ROUNDS",
                                                        "8"))):
    add_test("random_%d" % _seed, random_test(_seed))


if __name__ == "__main__":
    sys.exit(suite.main(sys.argv, __doc__, Ctx, verbose="ORDER_VERBOSE"))
