#!/usr/bin/env python3
"""Requests in flight on storage that waits: concurrency, and the order kept.

tests/protocol/shim_slow.c, preloaded into the server, makes storage wait:
a READ finds nothing in the page cache (RWF_NOWAIT answers EAGAIN), and the
first block of a file, or a stat of a "slow" name, takes 30 ms longer than
anything else, so that a later request would finish first if the server
let it start early.  Each check sends a pipeline of requests in one go and
expects exactly the replies, and the file, of running them one at a time
in order; where the reference server (/usr/lib/openssh/sftp-server, or
$SFTP_REFERENCE) is there, its replies to the same stream are compared
too.

Checks:
  reads_overlap            32 READs in flight are run by several workers at
                           once (the shim sees two at a time), -T 1 by one
  reads_overlap_sandboxed  the same with the sandbox on: threads allowed
  read_miss_sends_the_rest a READ that misses the page cache sends the
                           READs behind it on the handle straight to
                           workers: 32 READs, one RWF_NOWAIT try
  workers_batch_policy     each worker runs as SCHED_BATCH, the loop's
                           thread as before (the sandbox on)
  requests_start_between_flushes
                           a request that comes while a full queue of
                           replies is written starts before the replies
                           ready behind them are written too
  workers_end_when_idle    an idle session holds no worker thread, and
                           no more memory than before they ran
  workers_end_in_a_trickle after a burst, a client that keeps moving 64 KiB
                           a round (the pipes never see a trickle) still
                           sees the workers end between its rounds, and
                           each round makes no more than it waits on
  reads_keep_their_bytes   a READ's reply is written out from the bytes
                           its worker read into: a later READ that waits
                           for room in the arena gets them only once the
                           reply is out, though the client reads nothing
                           for a while (every reply holds the file's bytes)
  reads_after_kept_bytes   READs past the end fill the arena behind a slow
                           READ answered from its bytes: one reap answers
                           them all, and the arena keeps their bytes while
                           the ring is empty; the next READ waits for the
                           replies to be written out, and is answered
  write_then_read          a READ of bytes an earlier WRITE in flight
                           changes waits for it; FSTAT and STAT see the size
  read_then_write          a WRITE over bytes an earlier READ in flight
                           returns waits for it, through one handle or two
  overlapping_writes       overlapping WRITEs keep their order; disjoint
                           ones may not, with the same result
  readdir_after_write      READDIR (its lstats in workers) sees the size an
                           earlier WRITE in flight gives; a later WRITE
                           waits for it
  opens_overlap            creating OPENs of new files run at once (the
                           shim sees two open() calls at a time); with
                           O_EXCL, or -T 1, one at a time; CLOSEs of
                           their handles, then requests on the closed
                           handles, in one pipeline, as OpenSSH answers
  end_of_input_in_flight   input ends with WRITEs in flight: each is
                           answered, and counted in the close line
  replies_wait_for_no_later_call
                           16 READs of 255 KiB, then a CLOSE of another
                           file whose close(2) waits until the test lets
                           it go: every READ's reply comes before that
  no_thread_for_storage_work
                           at RLIMIT_NPROC no worker can be made: every
                           READ is served in the loop's thread, and the
                           INFO log says so once
  sigterm_in_flight        SIGTERM with WRITEs in flight: the close line
                           counts every byte the file got
  sigterm_storage_hangs    SIGTERM with a READ whose storage never answers:
                           given up 5 s later, logged, the file closed
                           (forced), death by the signal; a READ that ends
                           within the 5 s is waited for and counted

The server runs with -S where the shim sleeps (the sandbox refuses
nanosleep).  Needs a C compiler for the shim.

Usage: test_inflight.py [NAME-SUBSTRING ...]
Prints one line per check, then "N passed, M failed[, K skipped]"; exits 1
if any failed.
"""

import os
import pwd
import re
import resource
import shutil
import signal
import struct
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
SHIM_SOURCE = os.path.join(HERE, "shim_slow.c")
SLOW_US = 30000
RW = SSH_FXF_READ | SSH_FXF_WRITE


class Ctx:
    """One check's scratch directory and the servers it started."""

    def __init__(self):
        self.tmp = os.path.realpath(tempfile.mkdtemp(prefix="sftp-inflight-"))
        self.servers = []
        self.n = 0

    def dir(self, name):
        d = os.path.join(self.tmp, name)
        os.mkdir(d)
        return d

    def server(self, which, cwd, env=None, args=(), preexec_fn=None,
               others=False):
        """Ours (or the reference) under the shim, in cwd; INIT sent.
        others: the binary and the shim are copied where another user
        reaches them (preexec_fn may become one).  Returns the server and
        the path of the shim's log."""
        self.n += 1
        log = os.path.join(self.tmp, "most-%d" % self.n)
        e = dict(os.environ)
        shim = suite.shim_library(SHIM_SOURCE, "sftp-slow-shim-")
        e["LD_PRELOAD"] = binary_for_others(shim, self.tmp) if others \
            else shim
        opts = e.get("ASAN_OPTIONS", "")
        e["ASAN_OPTIONS"] = (opts + ":" if opts else "") + \
            "verify_asan_link_order=0"
        e["SHIM_LOG"] = log
        for k, v in (env or {}).items():
            e["SHIM_" + k] = str(v)
        if which == "ref":
            argv = [REFERENCE] + list(args)
        else:
            argv = SERVER_ARGV + list(args)
        if others:
            argv[0] = binary_for_others(argv[0], self.tmp)
        srv = Server(argv, cwd=cwd, env=e, preexec_fn=preexec_fn)
        self.servers.append(srv)
        srv.init()
        return srv, log

    def cleanup(self):
        for srv in self.servers:
            srv.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)


def most_in_flight(log):
    try:
        with open(log) as f:
            return int(f.read().strip() or 0)
    except FileNotFoundError:
        return 0


def shape(reply):
    if isinstance(reply, Status):
        return "STATUS " + STATUS_NAMES.get(reply.code, str(reply.code))
    if isinstance(reply, Data):
        return "DATA %r %d" % (bytes(sorted(set(reply.data))),
                               len(reply.data))
    if isinstance(reply, AttrsReply):
        return "ATTRS size %s" % reply.attrs.size
    if isinstance(reply, Handle):
        return "HANDLE"
    if isinstance(reply, Name):
        return "NAME " + " ".join(sorted(
            "%s:%s" % (e.filename.decode(), e.attrs.size)
            for e in reply.entries if e.filename not in (b".", b"..")))
    return reply.type_name


def pipeline(srv, reqs):
    """Sends reqs in one go; returns the shapes of the replies, checking
    that each carries the id of its request, in order."""
    ids = srv.send_many(reqs)
    out = []
    for rid in ids:
        r = srv.recv()
        if r.id != rid:
            raise Failure("reply for request %d came for %d: out of order" %
                          (rid, r.id))
        out.append(shape(r))
    return out


# Calls after which the server hands WRITEs and stats to workers: one in
# SAMPLE timed, then SLOW_STREAK slow ones in a row, and a margin.
STREAK = 8 + 4 + 4


def warm_up(srv):
    """WRITEs that wait, to file "warm", until the server sees that its
    storage waits: the requests of the pipeline after them go to workers.
    Returns their requests, to begin a pipeline with."""
    h = open_h(srv, "warm", RW | SSH_FXF_CREAT)
    return [req_write(h, 0, b"w" * 512) for _ in range(STREAK)]


def open_h(srv, path, pflags=RW):
    r = srv.call(req_open(path, pflags))
    if not isinstance(r, Handle):
        raise Failure("OPEN %s: %s" % (path, shape(r)))
    return r.handle


def write_file(path, data):
    with open(path, "wb") as f:
        f.write(data)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def against_reference(ctx, name, run, env, args):
    """run(srv, dir) for ours and, when it is there, the reference; returns
    ours, after checking that both gave the same answers and files."""
    got = {}
    for which in ("ours", "ref"):
        if which == "ref" and not os.access(REFERENCE, os.X_OK):
            continue
        d = ctx.dir("%s-%s" % (name, which))
        srv, _ = ctx.server(which, d, env, args if which == "ours" else ())
        answers = run(srv, d)
        got[which] = (answers, {f: read_file(os.path.join(d, f))
                                for f in sorted(os.listdir(d))
                                if os.path.isfile(os.path.join(d, f))})
    if "ref" in got and got["ref"] != got["ours"]:
        def show(g):
            return g[0], {f: runs(b) for f, b in g[1].items()}
        raise Failure("%s: ours %r, OpenSSH %r" % (name, show(got["ours"]),
                                                   show(got["ref"])))
    return got["ours"]


def runs(data):
    """bytes as runs, for messages: "B*4096 a*4096"."""
    out, i = [], 0
    while i < len(data):
        j = i
        while j < len(data) and data[j] == data[i]:
            j += 1
        out.append("%s*%d" % (chr(data[i]) if 32 < data[i] < 127 else
                              "\\x%02x" % data[i], j - i))
        i = j
    return " ".join(out)


def expect(what, got, want):
    if got != want:
        if isinstance(got, bytes):
            got, want = runs(got), runs(want)
        raise Failure("%s: got %r, expected %r" % (what, got, want))


def reads_overlap(ctx, args, env_extra=None):
    d = ctx.dir("reads-%d" % ctx.n)
    data = bytes(range(256)) * 4096    # 1 MiB
    write_file(os.path.join(d, "f"), data)
    env = {"NOWAIT": 1, "MEET": 2}
    env.update(env_extra or {})
    srv, log = ctx.server("ours", d, env, args)
    h = open_h(srv, "f", SSH_FXF_READ)
    n = 32 if "1" not in args else 2
    ids = srv.send_many([req_read(h, i * 32768, 32768) for i in range(n)])
    for i, rid in enumerate(ids):
        r = srv.recv()
        if r.id != rid or not isinstance(r, Data) or \
                r.data != data[i * 32768:(i + 1) * 32768]:
            raise Failure("READ %d: %r" % (i, shape(r)))
    return most_in_flight(log)


@test
def test_reads_overlap(ctx):
    most = reads_overlap(ctx, ["-S", "-T", "16"])
    if most < 2:
        raise Failure("32 READs in flight, waiting storage: the shim saw "
                      "%d at a time, expected 2 or more" % most)
    most = reads_overlap(ctx, ["-S", "-T", "1"], {"MEET_MS": 200})
    expect("-T 1: READs at a time", most, 1)


@test
def test_reads_overlap_sandboxed(ctx):
    most = reads_overlap(ctx, ["-T", "16"])
    if most < 2:
        raise Failure("with the sandbox: the shim saw %d READs at a time, "
                      "expected 2 or more" % most)


@test
def test_reads_keep_their_bytes(ctx):
    # A first READ's reply fills the pipe, which the client leaves unread.
    # Then 32 READs of 255 KiB fill the workers' arena, and 2 more wait for
    # room.  The second of the 32 (offset 0) is slow, so the loop answers
    # the first alone, while its queue has room: it then takes a waiting
    # READ before that reply is written out, which waits on the full pipe.
    # Given the first's bytes, the waiting READ's worker would write over
    # them before they are sent.
    d = ctx.dir("keep")
    size = 35 * 261120
    data = b"".join(struct.pack(">Q", i) for i in range(size // 8))
    write_file(os.path.join(d, "f"), data)
    srv, _ = ctx.server("ours", d, {"NOWAIT": 1, "SLOW_READ_US": SLOW_US},
                        ["-S", "-T", "64"])
    h = open_h(srv, "f", SSH_FXF_READ)
    offs = [261120 * 34, 261120, 0] + [261120 * i for i in range(2, 34)]
    ids = list(range(100, 100 + len(offs)))
    reqs = [encode_request(i, req_read(h, o, 261120))
            for i, o in zip(ids, offs)]
    # Written as they are, not by send_many(), which reads the replies
    # meanwhile: 1 KiB of requests fits the pipe.
    os.write(srv._in, reqs[0])
    time.sleep(0.1)
    os.write(srv._in, b"".join(reqs[1:]))
    time.sleep(0.3)
    for rid, off in zip(ids, offs):
        r = srv.recv()
        if r.id != rid or not isinstance(r, Data):
            raise Failure("READ at %d: %r" % (off, shape(r)))
        if r.data != data[off:off + 261120]:
            at = next(i for i in range(len(r.data))
                      if r.data[i] != data[off + i]) // 8 * 8
            raise Failure("READ at %d: its bytes differ from the file's "
                          "from byte %d on: they are those at %d" %
                          (off, at, 8 * struct.unpack(
                              ">Q", r.data[at:at + 8])[0]))


@test
def test_reads_after_kept_bytes(ctx):
    # The first READ (offset 0) is slow and gets 5,000 bytes, sent from
    # its arena bytes; 31 READs at the end of the file are quick.  The 32
    # fill the arena; the 33rd waits for room.  Once the first ends, one
    # reap answers all 32 (their replies are small) and retires them: the
    # ring is empty, but their bytes stay taken until the replies are
    # written out.  The 33rd must wait for that, not find no room.
    d = ctx.dir("kept")
    data = bytes((i * 7 + 3) & 0xff for i in range(5000))
    write_file(os.path.join(d, "f"), data)
    srv, _ = ctx.server("ours", d, {"NOWAIT": 1, "SLOW_READ_US": 200000},
                        ["-S", "-T", "64"])
    h = open_h(srv, "f", SSH_FXF_READ)
    offs = [0] + [5000] * 31 + [0]
    ids = srv.send_many([req_read(h, o, 261120) for o in offs])
    for rid, off in zip(ids, offs):
        r = srv.recv()
        if r.id != rid:
            raise Failure("reply for request %d came for %d" % (rid, r.id))
        want = "DATA %d" % len(data) if off == 0 else "STATUS EOF"
        got = "DATA %d" % len(r.data) if isinstance(r, Data) else shape(r)
        if got != want or (off == 0 and r.data != data):
            raise Failure("READ at %d: %s, expected %s" % (off, got, want))


def threads(pid):
    try:
        return len(os.listdir("/proc/%d/task" % pid))
    except FileNotFoundError:
        return 0


@test
def test_read_miss_sends_the_rest(ctx):
    d = ctx.dir("miss")
    data = bytes(range(256)) * 4096    # 1 MiB
    write_file(os.path.join(d, "f"), data)
    tries = os.path.join(ctx.tmp, "nowait-tries")
    # The first READ's pread (offset 0) takes 300 ms in its worker: the
    # other 31 are taken meanwhile, before any READ through the handle is
    # answered.  Each would ask the page cache first without the miss.
    srv, _ = ctx.server("ours", d, {"NOWAIT": 1, "SLOW_READ_US": 300000,
                                    "NOWAIT_LOG": tries}, ["-S", "-T", "16"])
    h = open_h(srv, "f", SSH_FXF_READ)
    ids = srv.send_many([req_read(h, i * 32768, 32768) for i in range(32)])
    for i, rid in enumerate(ids):
        r = srv.recv()
        if r.id != rid or not isinstance(r, Data) or \
                r.data != data[i * 32768:(i + 1) * 32768]:
            raise Failure("READ %d: %r" % (i, shape(r)))
    expect("RWF_NOWAIT tries of 32 READs behind a miss",
           most_in_flight(tries), 1)


@test
def test_requests_start_between_flushes(ctx):
    d = ctx.dir("between")
    data = bytes(range(256)) * 4096    # 1 MiB
    write_file(os.path.join(d, "a"), data)
    write_file(os.path.join(d, "b"), data)
    events = os.path.join(ctx.tmp, "events")
    srv, _ = ctx.server("ours", d, {"NOWAIT": 1, "SLOW_WRITE_US": SLOW_US,
                                    "SLOW_READ_US": 300000,
                                    "EVENTS": events}, ["-S"])
    # Storage is seen to wait: requests in flight are taken while the
    # queue of replies is full, since each goes to a worker.
    pipeline(srv, warm_up(srv))
    ha = open_h(srv, "a", SSH_FXF_READ)
    hb = open_h(srv, "b", SSH_FXF_READ)
    # The first of 32 READs of a (offset 0) takes 300 ms, the others end
    # meanwhile: then 32 replies are ready at once, four queues' worth
    # (8 a queue, OQ_HIWAT), more than stdout holds.  The client sends a
    # READ of b once it has read the first reply, and no more: stdout's
    # pipe (256 KiB at most) is full, and the loop's first or second
    # write of a queue can end only once the client reads on, after it
    # sent the READ of b.
    ids = srv.send_many([req_read(ha, i * 32768, 32768) for i in range(32)])
    srv.buffer_exactly(4 + 9 + 32768)   # the first reply, no more
    xid = srv.send_unread(req_read(hb, 12345, 100))
    replies = [srv.recv() for _ in range(33)]
    for i, (rid, r) in enumerate(zip(ids + [xid], replies)):
        want = data[i * 32768:(i + 1) * 32768] if i < 32 else \
            data[12345:12445]
        if r.id != rid or not isinstance(r, Data) or r.data != want:
            raise Failure("reply %d: %r" % (i, shape(r)))
    with open(events) as f:
        lines = f.read().split("\n")
    # The READ of b asks the page cache first, in the loop: "P 12345".
    if "P 12345" not in lines:
        raise Failure("no RWF_NOWAIT try of the READ of b: %r" % lines)
    after = sum(int(ln.split()[1]) for ln in
                lines[lines.index("P 12345") + 1:] if ln.startswith("W "))
    # Written after it: a queue of READs of a at least (262,248 bytes)
    # besides its own reply (113 bytes).  It is taken after the first
    # write of a queue, or the second, once the client has sent it (with
    # nothing in flight any more, it would wait for room in the queue).
    if after < 262248:
        raise Failure("the READ of b started once every reply ready "
                      "before it was written (%d bytes written after "
                      "it): %r" % (after, lines[-12:]))


def sched_policy(pid, tid):
    """The scheduling policy of thread tid (field 41 of its stat)."""
    with open("/proc/%d/task/%d/stat" % (pid, tid)) as f:
        stat = f.read()
    return int(stat[stat.rindex(")") + 2:].split()[38])


@test
def test_workers_batch_policy(ctx):
    d = ctx.dir("policy")
    write_file(os.path.join(d, "f"), bytes(range(256)) * 1024)
    # 4 READs meet in the shim (4 workers at -T 4) and wait there for a
    # fifth that never comes, until MEET_MS: meanwhile every worker has
    # started, and is seen.
    srv, log = ctx.server("ours", d, {"NOWAIT": 1, "MEET": 5,
                                      "MEET_MS": 4000}, ["-T", "4"])
    pid = srv.proc.pid
    h = open_h(srv, "f", SSH_FXF_READ)
    ids = srv.send_many([req_read(h, i * 32768, 32768) for i in range(4)])
    deadline = time.monotonic() + 3
    while most_in_flight(log) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)    # polls a condition, with a deadline
    expect("READs in the shim at once", most_in_flight(log), 4)
    policies = {tid: sched_policy(pid, tid)
                for tid in map(int, os.listdir("/proc/%d/task" % pid))}
    for rid in ids:
        r = srv.recv()
        if r.id != rid or not isinstance(r, Data):
            raise Failure("READ: %r" % shape(r))
    expect("the loop's policy (SCHED_OTHER)", policies.pop(pid), 0)
    # A sanitizer's runtime may have a thread of its own, as the loop's.
    expect("workers as SCHED_BATCH (3)",
           sum(1 for p in policies.values() if p == 3), 4)


def anon_kib(pid):
    """The process's anonymous memory (smaps_rollup), KiB: its own pages.
    (Private_Clean would count the binary's pages too, private or shared
    as other processes run the same binary at the time.)  None when it
    cannot be read: the server makes itself not dumpable, and then only
    root reads its smaps."""
    try:
        f = open("/proc/%d/smaps_rollup" % pid)
    except PermissionError:
        return None
    with f:
        return int(re.search(r"^Anonymous:\s+(\d+)", f.read(),
                             re.M).group(1))


@test
def test_workers_end_when_idle(ctx):
    d = ctx.dir("idle")
    write_file(os.path.join(d, "f"), bytes(range(256)) * 1024)
    # 32 READs that meet in the shim: 32 workers at once.
    srv, log = ctx.server("ours", d, {"NOWAIT": 1, "MEET": 32,
                                      "MEET_MS": 500}, ["-S"])
    pid = srv.proc.pid
    alone = threads(pid)    # the loop's
    h = open_h(srv, "f", SSH_FXF_READ)
    pipeline(srv, [req_read(h, 0, 4096)])
    time.sleep(3)           # idle once, with every buffer it will have
    before = anon_kib(pid)
    pipeline(srv, [req_read(h, i * 32768, 32768) for i in range(32)])
    # The shim's count of reads at once: the workers may have ended
    # (50 ms after the burst) before a loaded machine runs this line.
    many = most_in_flight(log)
    if many < 2:
        raise Failure("READs that waited ran %d at a time: no workers" %
                      many)
    # The session goes idle once its traffic falls to a trickle (pipes.c).
    deadline = time.monotonic() + 15
    # ThreadSanitizer's runtime starts a thread of its own beside the
    # first worker, and keeps it: a sanitizer build may hold one more.
    if os.environ.get("SFTP_SANITIZED") == "1":
        alone += 1
    while threads(pid) > alone and time.monotonic() < deadline:
        time.sleep(0.05)    # polls a condition, with a deadline
    if threads(pid) > alone:
        raise Failure("threads of an idle session: %d, expected %d" %
                      (threads(pid), alone))
    # The workers' stacks are given back with them (the C library would
    # keep them, and the pages they touched, for threads to come).
    # The threads end before the pages go back (jobs_idle(), then the
    # buffers): a loaded machine may show the moment between.
    after = anon_kib(pid)
    while before is not None and after > before + 96 and \
            time.monotonic() < deadline:
        time.sleep(0.05)    # polls a condition, with a deadline
        after = anon_kib(pid)
    if before is not None and os.environ.get("SFTP_SANITIZED") != "1" and \
            after > before + 96:
        raise Failure("anonymous memory idle after %d workers: %d KiB, "
                      "%d KiB before them" % (many, after, before))
    # And the session goes on: a READ that waits makes workers again.
    got = pipeline(srv, [req_read(h, 0, 4096)])
    expect("a READ after the idle time", got, ["DATA %r 4096" % bytes(
        sorted(set(bytes(range(256)) * 16)))])
    if before is None:
        raise Skip("the threads end and come again; the memory they leave "
                   "is read from the server's smaps, which needs root (the "
                   "server is not dumpable)")


@test
def test_workers_end_in_a_trickle(ctx):
    d = ctx.dir("trickle")
    data = bytes(range(256)) * 4096    # 1 MiB
    write_file(os.path.join(d, "f"), data)
    srv, log = ctx.server("ours", d, {"NOWAIT": 1, "MEET": 32,
                                      "MEET_MS": 500}, ["-S"])
    pid = srv.proc.pid
    alone = threads(pid)
    if os.environ.get("SFTP_SANITIZED") == "1":
        alone += 1      # ThreadSanitizer's own thread (above)
    h = open_h(srv, "f", SSH_FXF_READ)
    pipeline(srv, [req_read(h, i * 32768, 32768) for i in range(32)])
    # The workers of the burst, as the shim counted their reads at once
    # (they may have ended already: 50 ms after the burst, on a loaded
    # machine, before the test looks at the threads).
    burst = most_in_flight(log)
    if burst <= 2:
        raise Failure("32 READs that waited ran %d at a time in workers, "
                      "expected more than 2" % burst)
    # Rounds of two 32 KiB READs, about 0.3 s apart: 64 KiB a round keeps
    # the traffic above what the pipes call a trickle (64 KiB in 2 s), so
    # the session never goes idle.  Between rounds no storage work is in
    # flight: the workers end all the same, and a round of two READs makes
    # two at the most.  Counted over the rounds, not timed: a loaded
    # machine may not run the server between every two rounds.
    ended = 0
    most = 0
    for i in range(60):
        got = pipeline(srv, [req_read(h, (2 * i + k) % 32 * 32768, 32768)
                             for k in range(2)])
        if any(not g.startswith("DATA") for g in got):
            raise Failure("round %d: %r" % (i, got))
        time.sleep(0.3)     # the client's pace, not a wait for the server
        n = threads(pid)
        if n <= alone:
            ended += 1
        elif ended > 0:
            most = max(most, n - alone)
        if ended >= 3:
            break
    if ended == 0:
        raise Failure("a session trickling 64 KiB a round after a burst "
                      "held %d workers between rounds, every time; "
                      "expected none" % (threads(pid) - alone))
    if most > 2:
        raise Failure("a round of two READs left %d workers, expected "
                      "2 at most" % most)


@test
def test_write_then_read(ctx):
    def run(srv, d):
        write_file(os.path.join(d, "f"), b"a" * 8192)
        write_file(os.path.join(d, "slow"), b"")
        h = open_h(srv, "f")
        return pipeline(srv, warm_up(srv) + [
            req_write(h, 0, b"A" * 4096),      # slow
            req_write(h, 0, b"B" * 4096),      # slow, in a worker
            req_read(h, 0, 4096),              # must see B
            req_write(h, 8192, b"C" * 4096),   # grows the file
            req_fstat(h),
            req_stat("f"),
            req_read(h, 8192, 8192),
            req_close(h)])
    answers, files = against_reference(
        ctx, "wr", run, {"NOWAIT": 1, "SLOW_WRITE_US": SLOW_US}, ["-S"])
    expect("answers", answers, ["STATUS OK"] * STREAK + [
        "STATUS OK", "STATUS OK", "DATA %r 4096" % b"B", "STATUS OK",
        "ATTRS size 12288", "ATTRS size 12288", "DATA %r 4096" % b"C",
        "STATUS OK"])
    expect("the file", files["f"], b"B" * 4096 + b"a" * 4096 + b"C" * 4096)


@test
def test_read_then_write(ctx):
    def run(srv, d):
        write_file(os.path.join(d, "f"), b"o" * 8192)
        h = open_h(srv, "f")
        h2 = open_h(srv, "f")
        return pipeline(srv, [
            req_read(h, 0, 4096),              # slow, in a worker
            req_write(h, 0, b"1" * 4096),      # must wait for it
            req_read(h, 0, 4096),
            req_read(h, 0, 4096),              # slow again
            req_write(h2, 0, b"2" * 4096),     # another handle: waits too
            req_read(h2, 0, 8192),
            req_close(h), req_close(h2)])
    answers, files = against_reference(
        ctx, "rw", run, {"NOWAIT": 1, "SLOW_READ_US": SLOW_US}, ["-S"])
    expect("answers", answers, [
        "DATA %r 4096" % b"o", "STATUS OK", "DATA %r 4096" % b"1",
        "DATA %r 4096" % b"1", "STATUS OK", "DATA %r 8192" % b"2o",
        "STATUS OK", "STATUS OK"])
    expect("the file", files["f"], b"2" * 4096 + b"o" * 4096)


@test
def test_overlapping_writes(ctx):
    def run(srv, d):
        h = open_h(srv, "f", RW | SSH_FXF_CREAT)
        return pipeline(srv, warm_up(srv) + [
            req_write(h, 0, b"s" * 4096),      # slow
            req_write(h, 0, b"X" * 8192),      # slow, in a worker
            req_write(h, 4096, b"Y" * 8192),   # overlaps: waits
            req_write(h, 0, b"P" * 2048),      # slow, in a worker
            req_write(h, 16384, b"Q" * 2048),  # disjoint: may go first
            req_close(h)])
    answers, files = against_reference(
        ctx, "ww", run, {"NOWAIT": 1, "SLOW_WRITE_US": SLOW_US}, ["-S"])
    expect("answers", answers, ["STATUS OK"] * (STREAK + 6))
    expect("the file", files["f"],
           b"P" * 2048 + b"X" * 2048 + b"Y" * 8192 + b"\0" * 4096 +
           b"Q" * 2048)


@test
def test_readdir_after_write(ctx):
    def run(srv, d):
        os.mkdir(os.path.join(d, "dir"))
        write_file(os.path.join(d, "dir", "f"), b"")
        h = open_h(srv, "dir/f")
        r = srv.call(req_opendir("dir"))
        if not isinstance(r, Handle):
            raise Failure("OPENDIR: %s" % shape(r))
        dh = r.handle
        return pipeline(srv, warm_up(srv) + [
            req_write(h, 0, b"s" * 4096),      # slow
            req_write(h, 0, b"g" * 16384),     # slow, in a worker
            req_readdir(dh),                   # must see 16384
            req_write(h, 16384, b"h" * 4096),  # waits for the listing
            req_readdir(dh),
            req_close(dh), req_close(h)])
    answers, files = against_reference(
        ctx, "rd", run, {"NOWAIT": 1, "SLOW_WRITE_US": SLOW_US}, ["-S"])
    expect("answers", answers, ["STATUS OK"] * STREAK + [
        "STATUS OK", "STATUS OK", "NAME f:16384",
        "STATUS OK", "STATUS EOF", "STATUS OK", "STATUS OK"])


def opens(ctx, args, pflags, n):
    """n OPENs of new files MEET-i with pflags after a warm-up, in one
    pipeline; then CLOSEs of their handles and a READ and a CLOSE of each
    closed one, in another.  Returns the most open() calls our server had
    in flight at once, and its replies, after comparing them (and the
    files made) with OpenSSH's."""
    got = {}
    most = 0
    for which in ("ours", "ref"):
        if which == "ref" and not os.access(REFERENCE, os.X_OK):
            continue
        d = ctx.dir("opens-%d-%s" % (ctx.n, which))
        log = os.path.join(ctx.tmp, "opens-most-%d-%s" % (ctx.n, which))
        env = {"OPEN_MEET": 2, "MEET_MS": 200, "OPEN_LOG": log,
               "SLOW_WRITE_US": SLOW_US}
        srv, _ = ctx.server(which, d, env, args if which == "ours" else ())
        warm = warm_up(srv)
        ids = srv.send_many(warm + [req_open("MEET-%d" % i, pflags)
                                    for i in range(n)])
        out, hs = [], []
        for i, rid in enumerate(ids):
            r = srv.recv()
            if r.id != rid:
                raise Failure("reply for request %d came for %d" %
                              (rid, r.id))
            if i >= len(warm):
                out.append(shape(r))
                if isinstance(r, Handle):
                    hs.append(r.handle)
        reqs = []
        for h in hs:
            reqs += [req_close(h), req_read(h, 0, 10), req_close(h)]
        out += pipeline(srv, reqs)
        got[which] = (out, sorted(os.listdir(d)))
        if which == "ours":
            most = most_in_flight(log)
    if "ref" in got and got["ref"] != got["ours"]:
        raise Failure("ours %r, OpenSSH %r" % (got["ours"], got["ref"]))
    return most, got["ours"][0]


@test
def test_opens_overlap(ctx):
    create = SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC
    closed = ["STATUS OK", "STATUS FAILURE", "STATUS NO_SUCH_FILE"]
    most, out = opens(ctx, ["-S", "-T", "16"], create, 16)
    expect("replies", out, ["HANDLE"] * 16 + closed * 16)
    if most < 2:
        raise Failure("16 creating OPENs in flight, waiting storage: the "
                      "shim saw %d open() calls at a time, expected 2 or "
                      "more" % most)
    most, out = opens(ctx, ["-S", "-T", "16"], create | SSH_FXF_EXCL, 4)
    expect("replies", out, ["HANDLE"] * 4 + closed * 4)
    expect("O_EXCL: open() calls at a time", most, 1)
    most, out = opens(ctx, ["-S", "-T", "1"], create, 4)
    expect("replies", out, ["HANDLE"] * 4 + closed * 4)
    expect("-T 1: open() calls at a time", most, 1)


@test
def test_replies_wait_for_no_later_call(ctx):
    # A reply whose call is done, with every reply before it sent, leaves
    # without waiting for a later call: the READs' replies do not wait for
    # the CLOSE behind them, whose close(2) is held until they are all in.
    d = ctx.dir("gate")
    n, size = 16, 261120
    data = bytes(range(251)) * (n * size // 251 + 1)
    write_file(os.path.join(d, "f"), data[:n * size])
    write_file(os.path.join(d, "GATE"), b"g")
    gate = os.path.join(ctx.tmp, "release")
    log = os.path.join(ctx.tmp, "gate-log")
    os.mkfifo(gate)
    srv, _ = ctx.server("ours", d, {"NOWAIT": 1, "CLOSE_GATE": gate,
                                    "GATE_LOG": log,
                                    "SLOW_WRITE_US": SLOW_US}, ["-S"])
    hf = open_h(srv, "f", SSH_FXF_READ)
    hg = open_h(srv, "GATE", SSH_FXF_READ)
    # The WRITEs that wait first: the CLOSE then goes to a worker.
    warm = warm_up(srv)
    ids = srv.send_many(warm + [req_read(hf, i * size, size)
                                for i in range(n)] + [req_close(hg)])
    for rid in ids[:len(warm)]:
        r = srv.recv()
        if r.id != rid or shape(r) != "STATUS OK":
            raise Failure("warm-up WRITE %d: %s" % (rid, shape(r)))
    ids = ids[len(warm):]
    deadline = time.monotonic() + 30
    while not os.path.exists(log) and time.monotonic() < deadline:
        time.sleep(0.01)    # polls a condition, with a deadline
    if not os.path.exists(log):
        raise Failure("the CLOSE never reached close(2)")
    before = []
    try:
        while len(before) < n:
            before.append(srv.recv())
    except Timeout:
        pass
    finally:
        # Let the close(2) go: open the FIFO's other end, and close it.
        os.close(os.open(gate, os.O_WRONLY))
    with open(log) as f:
        expect("the thread whose close(2) waited", f.read(), "worker")
    got = before + [srv.recv() for _ in range(n + 1 - len(before))]
    for i, (rid, r) in enumerate(zip(ids, got)):
        if r.id != rid:
            raise Failure("reply %d carries id %d, expected %d" %
                          (i, r.id, rid))
    for i in range(n):
        if not isinstance(got[i], Data) or \
                got[i].data != data[i * size:(i + 1) * size]:
            raise Failure("READ %d: %s" % (i, shape(got[i])))
    expect("CLOSE", shape(got[n]), "STATUS OK")
    expect("READ replies sent while the later CLOSE's close(2) waited",
           sum(isinstance(r, Data) for r in before), n)


NO_THREAD_LINE = ("storage calls run one at a time, in the session's own "
                  "thread: no thread could be made for them")


@test
def test_no_thread_for_storage_work(ctx):
    # An account at its process limit (RLIMIT_NPROC of 1: no thread can be
    # made): READs that would go to workers are served, right and in
    # order, in the loop's thread, and the log says so once per session,
    # at INFO, however many bursts meet the limit.  Root is not held to
    # RLIMIT_NPROC, so as root the server runs as nobody.
    become = None
    if os.geteuid() == 0:
        try:
            nobody = pwd.getpwnam("nobody")
        except KeyError:
            raise Skip("as root, needs the user nobody, whom RLIMIT_NPROC "
                       "holds")
        become = nobody
        os.chmod(ctx.tmp, 0o755)

    def at_process_limit():
        if become is not None:
            os.setgroups([])
            os.setgid(become.pw_gid)
            os.setuid(become.pw_uid)
        resource.setrlimit(resource.RLIMIT_NPROC, (1, 1))

    d = ctx.dir("nproc")
    os.chmod(d, 0o755)
    data = bytes(range(256)) * 1024    # 256 KiB
    write_file(os.path.join(d, "f"), data)
    srv, _ = ctx.server("ours", d, {"NOWAIT": 1}, ["-e", "-l", "INFO"],
                        preexec_fn=at_process_limit, others=True)
    h = open_h(srv, "f", SSH_FXF_READ)
    for burst in range(2):
        ids = srv.send_many([req_read(h, i * 8192, 8192)
                             for i in range(32)])
        for i, rid in enumerate(ids):
            r = srv.recv()
            if r.id != rid or not isinstance(r, Data) or \
                    r.data != data[i * 8192:(i + 1) * 8192]:
                raise Failure("burst %d, READ %d: %s" % (burst, i, shape(r)))
        # Past the linger, the session's workers are tried again.
        time.sleep(0.2)
    expect("threads of the server", threads(srv.proc.pid), 1)
    srv.close_stdin()
    expect("exit status", srv.wait(), 0)
    err = srv.stderr_output().decode(errors="replace")
    lines = [ln for ln in err.splitlines() if NO_THREAD_LINE in ln]
    if len(lines) != 1:
        raise Failure("expected one log line %r, got %d: %r" %
                      (NO_THREAD_LINE, len(lines), err[-1500:]))
    if "Resource temporarily unavailable" not in lines[0]:
        raise Failure("the line does not say why: %r" % lines[0])


def close_line(err, path):
    m = re.search(r'(forced )?close "%s" bytes read (\d+) written (\d+)' %
                  re.escape(path), err)
    if not m:
        raise Failure("no close line for %s in the log: %r" %
                      (path, err[-2000:]))
    return int(m.group(2)), int(m.group(3))


@test
def test_end_of_input_in_flight(ctx):
    d = ctx.dir("eof")
    srv, _ = ctx.server("ours", d, {"NOWAIT": 1, "SLOW_WRITE_US": SLOW_US},
                        ["-S", "-e", "-l", "INFO"])
    h = open_h(srv, "f", RW | SSH_FXF_CREAT)
    reqs = warm_up(srv) + [req_write(h, 0, b"s" * 4096)] + \
        [req_write(h, 0 if i % 2 else 4096 * i, b"%d" % (i % 10) * 4096)
         for i in range(1, 17)]
    ids = srv.send_many(reqs)
    srv.close_stdin()
    got = []
    for rid in ids:
        r = srv.recv()
        got.append((r.id == rid, shape(r)))
    expect("replies after the end of input", got,
           [(True, "STATUS OK")] * len(reqs))
    expect("exit status", srv.wait(), 0)
    rd, wr = close_line(srv.stderr_output().decode(errors="replace"), "f")
    expect("bytes written in the close line", (rd, wr), (0, 4096 * 17))


@test
def test_sigterm_in_flight(ctx):
    d = ctx.dir("term")
    srv, log = ctx.server("ours", d, {"NOWAIT": 1,
                                      "SLOW_WRITE_US": SLOW_US * 4},
                          ["-S", "-e", "-l", "INFO"])
    h = open_h(srv, "f", RW | SSH_FXF_CREAT)
    reqs = warm_up(srv) + [req_write(h, 0, b"s" * 4096)] + \
        [req_write(h, 4096 * i if i % 2 else 0, b"w" * 4096)
         for i in range(1, 9)]
    srv.send_many(reqs)
    deadline = time.monotonic() + 10
    while most_in_flight(log) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)    # polls a condition, with a deadline
    srv.proc.send_signal(signal.SIGTERM)
    status = srv.wait()
    expect("exit status", status, -signal.SIGTERM)
    err = srv.stderr_output().decode(errors="replace")
    rd, wr = close_line(err, "f")
    size = os.path.getsize(os.path.join(d, "f"))
    if wr == 0 or wr % 4096 != 0:
        raise Failure("close line: written %d" % wr)
    if size > wr:
        raise Failure("the file holds %d bytes, the close line counts %d" %
                      (size, wr))


def sigterm_during_read(ctx, name, read_us, eof=False):
    """A READ at offset 0 that its storage holds read_us, SIGTERM while
    it waits (after the end of input, with eof): the exit status, the
    seconds to it, and stderr."""
    d = ctx.dir(name)
    write_file(os.path.join(d, "f"), b"r" * 4096)
    srv, log = ctx.server("ours", d, {"NOWAIT": 1, "SLOW_READ_US": read_us},
                          ["-S", "-e", "-l", "INFO"])
    h = open_h(srv, "f", SSH_FXF_READ)
    srv.send_many([req_read(h, 0, 4096)])
    deadline = time.monotonic() + 10
    while most_in_flight(log) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)    # polls a condition, with a deadline
    if eof:
        srv.close_stdin()
        time.sleep(0.3)     # the session ends, and waits for the READ
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    try:
        status = srv.proc.wait(60)
    except subprocess.TimeoutExpired:
        raise Failure("the server still runs 60 s after SIGTERM")
    took = time.monotonic() - t0
    return status, took, srv.stderr_output().decode(errors="replace")


@test
def test_sigterm_storage_hangs(ctx):
    status, took, err = sigterm_during_read(ctx, "hang", 3600 * 1000000)
    expect("exit status", status, -signal.SIGTERM)
    if took < 4.5:
        raise Failure("gave up %.1f s after SIGTERM, expected 5 s" % took)
    if "1 storage operation did not finish within 5 s of signal 15: " \
            "given up, and not counted" not in err:
        raise Failure("no line for the READ given up: %r" % err[-600:])
    if close_line(err, "f") != (0, 0):
        raise Failure("close line: %r" % (close_line(err, "f"),))
    # The client left first: the end waits for the READ until a signal
    # comes, then 5 s more.
    status, took, err = sigterm_during_read(ctx, "eof", 3600 * 1000000,
                                            eof=True)
    if took < 4.5 or "given up" not in err:
        raise Failure("after the end of input, SIGTERM: gave up %.1f s "
                      "later, log %r" % (took, err[-600:]))
    # One that ends in time is waited for, and counted.
    status, took, err = sigterm_during_read(ctx, "late", 1000000)
    expect("exit status", status, -signal.SIGTERM)
    if "given up" in err:
        raise Failure("a READ that ended 1 s later was given up: %r" %
                      err[-600:])
    if close_line(err, "f") != (4096, 0):
        raise Failure("close line: %r, expected 4096 bytes read" %
                      (close_line(err, "f"),))


if __name__ == "__main__":
    sys.exit(suite.main(sys.argv, __doc__, Ctx, verbose="INFLIGHT_VERBOSE"))
