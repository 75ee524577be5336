#!/usr/bin/env python3
"""Bandwidth limits (-b), from outside the session.

The server under test ($SFTP_SERVER, default sftp-server in the
repository's root) runs in a fresh directory.  Timing is asserted one way
only, where load cannot break it: a limited transfer never finishes sooner
than its bytes allow (less PACE_BURST_NS of slack; its CLOSE waits for the
last request's bytes);
the other bounds are loose (a transfer the limit does not count finishes
in a fraction of the time the limit would give it).  How close the rate
comes to the limit is for bench/bwlimit.sh.

Checks:
  download_never_faster   64 READs of 32 KiB in flight under -b 2M: the
                          bytes take at least their time; replies in
                          request order, the data whole
  upload_never_faster     the same for WRITEs under -b 0:2M, the file
                          whole
  one_direction           -b 1M limits downloads only: an upload of
                          8 MiB is not held (under 6 s, not 8), even
                          after an earlier -b 0:512K; -b 0:1M the other
                          way round
  close_waits_for_the_last_bytes
                          one WRITE of 200 KiB under -b 0:100K, and one
                          READ of a whole 200 KiB file under -b 100K: the
                          CLOSE comes back no sooner than 2 s after the
                          request (less PACE_BURST_NS)
  zero_length_not_held    under -b 1K:1K, after a READ and a WRITE of
                          64 KiB (their bytes due in 64 s), a READ and a
                          WRITE of no bytes are answered (under 30 s),
                          where counted they would wait a minute
  short_reads_given_back  READs past the end of a 1 KiB file, 256 KiB
                          asked for each, under -b 100K: only the bytes
                          sent count (under 30 s; counted, 40 of them
                          would take 100 s)
  copy_data_check_file    copy-data and check-file of 16 MiB under
                          -b 1M:1M are not counted (under 12 s, not 16)
  upload_memory           sftp put of 24 MiB under -b 0:1M: the server's
                          resident memory stays within its buffers (the
                          input it does not take waits in the pipe)
  bad_values              "x", "10MB", "10M:", ":1M", "-1", a rate above
                          2^50: exit 255 at start

Usage: test_bwlimit.py [NAME-SUBSTRING ...]
Prints one line per check, then "N passed, M failed[, K skipped]"; exits 1
if any failed.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # leave no __pycache__ in the tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))

from sftpwire import *  # noqa: E402,F401,F403
import suite  # noqa: E402
from suite import Skip, expect, expect_eq, expect_type, test  # noqa: E402
from suite import expect_ok as ok  # noqa: E402

SERVER_ARGV = server_argv()
MIB = 1 << 20
BURST_S = 0.05      # sched.h's PACE_BURST_NS
CHUNK = 32 * 1024


class Ctx:
    def __init__(self):
        self.tmp = os.path.realpath(tempfile.mkdtemp(prefix="sftp-bw-"))
        self.servers = []

    def server(self, args=()):
        srv = Server(SERVER_ARGV + list(args), cwd=self.tmp, umask=0o022,
                     timeout=120)
        self.servers.append(srv)
        srv.init()
        return srv

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def write(self, name, data):
        with open(self.path(name), "wb") as f:
            f.write(data)

    def cleanup(self):
        for srv in self.servers:
            srv.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)



def pipelined(srv, reqs, depth=64):
    """Sends reqs with depth in flight; returns the replies in order,
    checking each one's id."""
    out, pending, i = [], [], 0
    while i < len(reqs) or pending:
        while i < len(reqs) and len(pending) < depth:
            pending += srv.send_many([reqs[i]])
            i += 1
        r = srv.recv()
        expect_eq("reply id (request order)", r.id, pending.pop(0))
        out.append(r)
    return out


def at_least(what, secs, nbytes, rate, first):
    """The bytes took at least their time at rate, less the first request
    and the burst."""
    floor = (nbytes - first) / rate - BURST_S
    expect(secs >= floor, "%s: %d bytes in %.3f s at a limit of %d/s: "
           "faster than the limit allows (%.3f s at least)" %
           (what, nbytes, secs, rate, floor))


@test
def test_download_never_faster(ctx):
    data = os.urandom(6 * MIB)
    ctx.write("f", data)
    srv = ctx.server(["-b", "2M"])
    h = srv.open("f", SSH_FXF_READ)
    t0 = time.monotonic()
    replies = pipelined(srv, [req_read(h, off, CHUNK)
                              for off in range(0, len(data), CHUNK)])
    secs = time.monotonic() - t0
    got = b"".join(r.data for r in replies)
    expect(got == data, "the data read differ from the file")
    at_least("download", secs, len(data), 2 * MIB, CHUNK)
    expect(secs < 60, "download: %.1f s for 3 s of bytes" % secs)
    return "%.2f s for 6 MiB at 2 MiB/s" % secs


@test
def test_upload_never_faster(ctx):
    data = os.urandom(6 * MIB)
    srv = ctx.server(["-b", "0:2M"])
    h = srv.open("f", SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC)
    t0 = time.monotonic()
    for r in pipelined(srv, [req_write(h, off, data[off:off + CHUNK])
                             for off in range(0, len(data), CHUNK)]):
        ok(r, "WRITE")
    secs = time.monotonic() - t0
    ok(srv.call(req_close(h)), "CLOSE")
    with open(ctx.path("f"), "rb") as f:
        expect(f.read() == data, "the file differs from the data written")
    at_least("upload", secs, len(data), 2 * MIB, CHUNK)
    return "%.2f s for 6 MiB at 2 MiB/s" % secs


@test
def test_one_direction(ctx):
    data = os.urandom(8 * MIB)
    ctx.write("f", data)
    # The last -b counts whole: its upload limit is none.
    srv = ctx.server(["-b", "0:512K", "-b", "1M"])
    h = srv.open("up", SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC)
    t0 = time.monotonic()
    for r in pipelined(srv, [req_write(h, off, data[off:off + CHUNK])
                             for off in range(0, len(data), CHUNK)]):
        ok(r, "WRITE")
    up = time.monotonic() - t0
    expect(up < 6, "-b 1M: an upload of 8 MiB took %.1f s: held" % up)
    srv.close()
    srv = ctx.server(["-b", "0:1M"])
    h = srv.open("f", SSH_FXF_READ)
    t0 = time.monotonic()
    pipelined(srv, [req_read(h, off, CHUNK)
                    for off in range(0, len(data), CHUNK)])
    down = time.monotonic() - t0
    expect(down < 6, "-b 0:1M: a download of 8 MiB took %.1f s: held" %
           down)
    return "upload %.2f s, download %.2f s (8 s at the other limit)" % (
        up, down)


@test
def test_close_waits_for_the_last_bytes(ctx):
    size = 200 * 1024
    data = os.urandom(size)
    ctx.write("f", data)
    took = []
    for args, name, flags in (
            (["-b", "0:100K"], "up", SSH_FXF_WRITE | SSH_FXF_CREAT |
             SSH_FXF_TRUNC),
            (["-b", "100K"], "f", SSH_FXF_READ)):
        srv = ctx.server(args)
        h = srv.open(name, flags)
        t0 = time.monotonic()
        if flags & SSH_FXF_WRITE:
            ok(srv.call(req_write(h, 0, data)), "WRITE")
        else:
            reply = srv.call(req_read(h, 0, size))
            expect(isinstance(reply, Data) and reply.data == data,
                   "READ of the whole file: %r" % (reply,))
        ok(srv.call(req_close(h)), "CLOSE")
        t = time.monotonic() - t0
        # 200 KiB at 100 KiB/s: 2 s, less the slack.
        expect(t >= 2 - BURST_S - 0.01,
               "%s: one request of 200 KiB and its CLOSE took %.2f s, "
               "not 2" % (" ".join(args), t))
        took.append(t)
        srv.close()
    return "upload %.2f s, download %.2f s (2 s each)" % tuple(took)


@test
def test_zero_length_not_held(ctx):
    size = 64 * 1024
    data = os.urandom(size)
    ctx.write("f", data)
    srv = ctx.server(["-b", "1K:1K"])
    hr = srv.open("f", SSH_FXF_READ)
    hw = srv.open("up", SSH_FXF_WRITE | SSH_FXF_CREAT)
    reply = srv.call(req_read(hr, 0, size))
    expect(isinstance(reply, Data) and reply.data == data,
           "the first READ goes at once: %r" % (reply,))
    ok(srv.call(req_write(hw, 0, data)), "the first WRITE")
    # Each direction's next bytes are due in 64 s; none are asked for.
    t0 = time.monotonic()
    reply = srv.call(req_read(hr, 0, 0))
    expect(isinstance(reply, Data) and reply.data == b"",
           "READ of no bytes: %r" % (reply,))
    ok(srv.call(req_write(hw, size, b"")), "WRITE of no bytes")
    t = time.monotonic() - t0
    expect(t < 30, "a READ and a WRITE of no bytes took %.1f s: held" % t)
    srv.close()
    return "%.2f s (64 s if counted)" % t


@test
def test_short_reads_given_back(ctx):
    ctx.write("small", b"s" * 1024)
    srv = ctx.server(["-b", "100K"])
    h = srv.open("small", SSH_FXF_READ)
    t0 = time.monotonic()
    replies = [srv.call(req_read(h, off, 256 * 1024))
               for off in [0] + [2048] * 39]
    secs = time.monotonic() - t0
    expect_type(replies[0], Data, "READ")
    expect_eq("the first READ", len(replies[0].data), 1024)
    for r in replies[1:]:
        expect_type(r, Status, "READ past the end")
        expect_eq("READ past the end", r.code, SSH_FX_EOF)
    expect(secs < 30, "40 READs of a 1 KiB file took %.1f s under -b 100K: "
           "the bytes not sent were counted" % secs)


@test
def test_copy_data_check_file(ctx):
    data = os.urandom(16 * MIB)
    ctx.write("f", data)
    srv = ctx.server(["-b", "1M:1M"])
    r = srv.open("f", SSH_FXF_READ)
    w = srv.open("g", SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC)
    t0 = time.monotonic()
    ok(srv.call(req_copy_data(r, 0, 0, w, 0)), "copy-data")
    ck = srv.call(req_extended("check-file-handle", string(r) +
                               string("sha256") + u64(0) + u64(0) +
                               u32(0)))
    secs = time.monotonic() - t0
    expect_type(ck, ExtendedReply, "check-file-handle")
    expect(hashlib.sha256(data).digest() in ck.data, "check-file: not the "
           "file's digest")
    expect(secs < 12, "copy-data and check-file of 16 MiB took %.1f s under "
           "-b 1M:1M: counted" % secs)
    with open(ctx.path("g"), "rb") as f:
        expect(f.read() == data, "the copy differs")


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@test
def test_upload_memory(ctx):
    if not shutil.which("sftp"):
        raise Skip("no sftp client")
    ctx.write("src", os.urandom(24 * MIB))
    wrapper = ctx.path("server.sh")
    pidfile = ctx.path("server.pid")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\necho $$ > %s\nexec %s -b 0:1M\n" %
                (pidfile, " ".join(SERVER_ARGV)))
    os.chmod(wrapper, 0o755)
    p = subprocess.Popen(["sftp", "-q", "-D", wrapper], cwd=ctx.tmp,
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    p.stdin.write(b"put src dst\n")
    p.stdin.flush()
    peak = 0
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(pidfile) and time.monotonic() < deadline:
            time.sleep(0.01)    # polls for the server, with a deadline
        time.sleep(0.2)         # the wrapper execs the server
        with open(pidfile) as f:
            pid = int(f.read())
        for _ in range(30):     # 3 s of the 24 s the upload takes
            peak = max(peak, rss_kib(pid))
            time.sleep(0.1)
    finally:
        p.kill()
        p.wait()
    # The input buffer (IBUF_HARD, 4 MiB) and the reply queue bound it.
    expect(0 < peak < 12 * 1024, "the server's resident memory reached %d "
           "KiB while its uploads were held" % peak)
    return "peak VmRSS %d KiB" % peak


@test
def test_bad_values(ctx):
    for bad in ("x", "10MB", "10M:", ":1M", "-1", "2000000G", "1M:2M:3M",
                ""):
        r = subprocess.run(SERVER_ARGV + ["-b", bad], cwd=ctx.tmp,
                           stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=30)
        expect_eq("-b %r: exit status" % bad, r.returncode, 255)


if __name__ == "__main__":
    sys.exit(suite.main(sys.argv, __doc__, Ctx))
