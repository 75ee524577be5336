#!/usr/bin/env python3
"""The ends of a session with work in flight, on storage that waits.

Every check runs the server under bench/slowfs (-p: only the files of the
check's own directory wait), so that READs and WRITEs run in workers and
are in flight when the session ends; -L names a transfer log.  Whatever
ends the session, the server must not crash, and the transfer log must
hold a close record for every file the session opened and one
session-close.

Checks:
  end_sweep              a pipeline of WRITEs and 255 KiB READs; after k
                         bytes of replies read (k swept from 0 past the
                         whole), the session is ended: the client leaves
                         (both pipes closed), SIGTERM, SIGHUP, or the
                         client closes the server's stdout and keeps its
                         stdin open.  The replies the client read are
                         whole and in order; the exit status is 0, or
                         death by the signal sent; never another death;
                         the INFO log has a forced close line for each
                         file, and the session's close
  sigterm_storage_hangs  reads and closes of the storage hang (held 60 s
                         each); READs in flight and three other files
                         open, then SIGTERM: the session ends well within
                         60 s (the give-up comes 5 s after the signal),
                         dies of SIGTERM, and the transfer log and the
                         INFO log say, for each file, that its close
                         could not be made
  sigterm_buffered_requests
                         400 MKDIRs in one pipeline, each held 50 ms in
                         the loop (a MKDIR runs alone): SIGTERM after the
                         first ones; no more than 2 directories are made
                         after the signal (all 400 were, before), and the
                         server dies of SIGTERM

slowfs needs root (it reads the server's descriptors in /proc), x86_64 or
aarch64, and a C compiler, or $SFTP_SLOWFS; without them the checks skip.

Usage: test_ends.py [NAME-SUBSTRING ...]
Prints one line per check, then "N passed, M failed[, K skipped]"; exits 1
if any failed.
"""

import json
import os
import select
import shutil
import signal
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
READ_LEN = 255 * 1024
NREADS = 40
NWRITES = 8

def slowfs():
    """The delay tool (suite.slowfs())."""
    return suite.slowfs()


class Ctx:
    """One check's scratch directory, and the processes it started."""

    def __init__(self):
        self.tmp = os.path.realpath(tempfile.mkdtemp(prefix="sftp-ends-"))
        self.servers = []
        self.pids = []

    def cleanup(self):
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for srv in self.servers:
            srv.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)


def children(pid):
    """The pids whose parent is pid."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses.
        if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
            out.append(int(name))
    return out


def the_server(wrapper_pid, depth):
    """The pid depth generations below wrapper_pid (slowfs, then the
    status wrapper), waiting for it to be started."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pid = wrapper_pid
        for _ in range(depth):
            kids = children(pid)
            if len(kids) != 1:
                break
            pid = kids[0]
        else:
            return pid
        time.sleep(0.01)    # polls a condition, with a deadline
    raise Failure("the server under slowfs never started")


def start(ctx, data, xlog, profile):
    """The server in data under slowfs with profile, -L xlog, its exit
    status written to a file by a shell between the two.  Returns the
    Server (slowfs's process), the server's pid and the status file."""
    status = os.path.join(ctx.tmp, "status-%d" % len(ctx.servers))
    argv = [slowfs(), "-p", data, "-D", profile, "--",
            "/bin/sh", "-c", '"$@"; echo $? >"$0"', status] + \
        SERVER_ARGV + ["-e", "-l", "INFO", "-L", xlog]
    srv = Server(argv, cwd=data)
    ctx.servers.append(srv)
    pid = the_server(srv.proc.pid, 2)
    ctx.pids.append(pid)
    return srv, pid, status


def frames(buf):
    """The whole reply packets at the start of buf, and what is left."""
    out = []
    while len(buf) >= 4:
        n = int.from_bytes(buf[:4], "big")
        if n == 0 or n > 4 * SFTP_MAX_MSG_LENGTH:
            raise Failure("a reply length word of %d" % n)
        if len(buf) < 4 + n:
            break
        out.append(parse_reply(bytes(buf[4:4 + n])))
        buf = buf[4 + n:]
    return out, buf


def send_all(fd, data, deadline):
    """Writes data to fd, non-blocking, reading nothing meanwhile."""
    view = memoryview(data)
    while view:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Failure("the server stopped reading its input")
        _, w, _ = select.select([], [fd], [], left)
        if w:
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                pass


def read_until(out, buf, want, deadline):
    """Reads the server's stdout into buf until it holds want bytes, or
    the output ends.  Returns buf."""
    while len(buf) < want:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Failure("no reply from the server: %d of %d bytes read" %
                          (len(buf), want))
        r, _, _ = select.select([out], [], [], left)
        if not r:
            continue
        chunk = os.read(out, min(want - len(buf), 1 << 20))
        if not chunk:
            break
        buf += chunk
    return buf


def gone(pid, seconds):
    """Whether process pid is gone (not even a zombie) within seconds."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not os.path.exists("/proc/%d" % pid):
            return True
        time.sleep(0.02)    # polls a condition, with a deadline
    return False


def exit_status(path):
    """The server's exit status as its shell saw it: 128 + N for death by
    signal N."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                s = f.read().strip()
            if s:
                return int(s)
        except FileNotFoundError:
            pass
        time.sleep(0.02)    # polls a condition, with a deadline
    raise Failure("no exit status of the server")


def records(xlog):
    with open(xlog) as f:
        return [json.loads(line) for line in f if line.strip()]


def check_records(xlog, paths, what):
    """Every file of paths has one close record, and there is one
    session-close.  Returns the close records by path."""
    recs = records(xlog)
    closes = {}
    for r in recs:
        if r.get("event") == "close":
            if r.get("path") in closes:
                raise Failure("%s: two close records of %s" %
                              (what, r.get("path")))
            closes[r.get("path")] = r
    missing = [p for p in paths if p not in closes]
    ends = [r for r in recs if r.get("event") == "session-close"]
    if missing or len(ends) != 1:
        raise Failure("%s: the transfer log lacks close records of %s, "
                      "has %d session-close; it holds %r" %
                      (what, missing, len(ends),
                       [(r.get("event"), r.get("path")) for r in recs]))
    return closes


def open_files(data):
    """The files of the sweep: one to read, one to write, one left
    idle."""
    with open(os.path.join(data, "big"), "wb") as f:
        for i in range(NREADS):
            f.write(bytes([i]) * READ_LEN)
    with open(os.path.join(data, "idle"), "wb") as f:
        f.write(b"i" * 100)


ENDS = ("leave", "SIGTERM", "SIGHUP", "stdout")

# A suite run under nohup, or from a background job, inherits SIGHUP or
# SIGINT ignored, and the server, as OpenSSH's, keeps a signal it was
# started with ignored: a handler here makes each the default in the
# servers this suite starts (exec resets handlers, not ignores).
for _sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, lambda s, f: None)


def one_end(ctx, how, k, n):
    """One session of the sweep, ended by how after k bytes of replies."""
    data = os.path.join(ctx.tmp, "d%d" % n)
    os.mkdir(data)
    open_files(data)
    xlog = os.path.join(ctx.tmp, "xfer-%d.log" % n)
    open(xlog, "w").close()
    srv, pid, status = start(ctx, data, xlog,
                             "read=20,write=20,stat=1,open=1")
    fin, fout = srv.proc.stdin.fileno(), srv.proc.stdout.fileno()
    what = "%s after %d bytes" % (how, k)
    deadline = time.monotonic() + 60
    # The setup, one request at a time: INIT and three OPENs.
    send_all(fin, encode_init(), deadline)
    buf = bytearray()
    handles = {}
    reqs = [("big", SSH_FXF_READ), ("new", SSH_FXF_WRITE | SSH_FXF_CREAT),
            ("idle", SSH_FXF_READ)]
    buf = read_until(fout, buf, 1, deadline)
    for rid, (name, flags) in enumerate(reqs, 1):
        while True:
            got, rest = frames(buf)
            if len(got) > rid - 1:
                break
            buf = read_until(fout, buf, len(buf) + 1, deadline)
        send_all(fin, encode_request(rid, req_open(name, flags)), deadline)
    while True:
        got, rest = frames(buf)
        if len(got) == 1 + len(reqs):
            break
        buf = read_until(fout, buf, len(buf) + 1, deadline)
    for (name, _), reply in zip(reqs, got[1:]):
        if not isinstance(reply, Handle):
            raise Failure("%s: OPEN %s: %r" % (what, name, reply))
        handles[name] = reply.handle
    buf = bytearray(rest)
    # The pipeline: WRITEs, then READs, all sent at once (they fit the
    # pipe), none of their replies read yet.
    pipeline = [req_write(handles["new"], 4096 * i, b"w" * 4096)
                for i in range(NWRITES)]
    pipeline += [req_read(handles["big"], READ_LEN * i, READ_LEN)
                 for i in range(NREADS)]
    ids = list(range(100, 100 + len(pipeline)))
    send_all(fin, b"".join(encode_request(i, r)
                           for i, r in zip(ids, pipeline)), deadline)
    buf = read_until(fout, buf, k, deadline)
    if how == "leave":
        srv.proc.stdin.close()
        srv.proc.stdout.close()
    elif how == "stdout":
        srv.proc.stdout.close()
    else:
        os.kill(pid, getattr(signal, how))
    if not gone(pid, 60):
        raise Failure("%s: the server still runs 60 s later" % what)
    code = exit_status(status)
    if how == "stdout":
        srv.proc.stdin.close()
    else:
        # What came is whole replies, in request order (up to a cut one).
        got, _ = frames(buf if how == "leave" else
                        read_until(fout, buf, 1 << 30, deadline))
        for i, reply in enumerate(got):
            if reply.id != ids[i]:
                raise Failure("%s: reply %d carries id %r, expected %d" %
                              (what, i, reply.id, ids[i]))
    srv.proc.wait(90)
    err = srv.stderr_output()
    m = suite.SANITIZER_REPORT.search(err)
    if m:
        raise Failure("%s: a sanitizer report: %s" %
                      (what, err[m.start():m.start() + 300]))
    want = 128 + getattr(signal, how) if how.startswith("SIG") else 0
    if code != want:
        raise Failure("%s: exit status %d, expected %d; stderr ends %r" %
                      (what, code, want, err[-400:]))
    check_records(xlog, ["big", "new", "idle"], what)
    text = err.decode(errors="replace")
    lost = [f for f in ("big", "new", "idle")
            if 'forced close "%s"' % f not in text]
    if lost or "session closed for local user" not in text:
        raise Failure("%s: the INFO log lacks the forced close of %s or "
                      "the session's close; it ends %r" %
                      (what, lost, text[-400:]))


@test
def test_end_sweep(ctx):
    slowfs()
    total = NREADS * (READ_LEN + 13) + NWRITES * 28
    points = [0, 1, 4096, 65536, 200000, 262144, 300000, 400000, 524288,
              700000, 1 << 20, 1500000, 2 << 20, 4 << 20, total // 2,
              total - READ_LEN, total]
    n = 0
    bad = []
    for k in points:
        for how in ENDS:
            try:
                one_end(ctx, how, k, n)
            except Failure as e:
                bad.append(str(e))
            n += 1
    if bad:
        raise Failure("%d of %d sessions: %s" % (len(bad), n,
                                                 "; ".join(bad[:3])))
    return "%d sessions ended" % n


def threads(pid):
    try:
        return len(os.listdir("/proc/%d/task" % pid))
    except OSError:
        return 0


@test
def test_sigterm_storage_hangs(ctx):
    slowfs()
    data = os.path.join(ctx.tmp, "d")
    os.mkdir(data)
    os.mkdir(os.path.join(data, "sub"))
    for name in ("a", "b"):
        with open(os.path.join(data, name), "wb") as f:
            f.write(name.encode() * 8192)
    xlog = os.path.join(ctx.tmp, "xfer.log")
    open(xlog, "w").close()
    # Reads and closes of the files wait a minute, slowfs's longest:
    # closing three handles one after the other would take three.
    srv, pid, status = start(ctx, data, xlog, "read=60000,close=60000")
    srv.init()
    ha = srv.open("a", SSH_FXF_READ)
    hb = srv.open("b", SSH_FXF_READ)
    hc = srv.open("c", SSH_FXF_WRITE | SSH_FXF_CREAT)
    srv.opendir("sub")
    st = srv.call(req_write(hc, 0, b"c" * 4096))
    if not isinstance(st, Status) or st.code != SSH_FX_OK:
        raise Failure("WRITE: %r" % (st,))
    srv.send_many([req_read(ha, 0, 4096), req_read(hb, 0, 4096)])
    deadline = time.monotonic() + 30
    while threads(pid) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)    # polls a condition, with a deadline
    if threads(pid) < 2:
        raise Failure("the READs never reached a worker")
    os.kill(pid, signal.SIGTERM)
    # The give-up comes 5 s after the signal; then nothing may wait.
    if not gone(pid, 60):
        raise Failure("the server still runs 60 s after SIGTERM; its "
                      "stderr ends %r" % srv.stderr_output()[-600:])
    code = exit_status(status)
    err = srv.stderr_output().decode(errors="replace")
    if code != 128 + signal.SIGTERM:
        raise Failure("exit status %d, expected death by SIGTERM; stderr "
                      "ends %r" % (code, err[-600:]))
    if "2 storage operations did not finish within 5 s of signal 15: " \
            "given up, and not counted" not in err:
        raise Failure("no line for the READs given up: %r" % err[-800:])
    closes = check_records(xlog, ["a", "b", "c"], "SIGTERM")
    for name, rec in sorted(closes.items()):
        if rec.get("forced") is not True or rec.get("closed") is not False \
                or "not closed" not in rec.get("result", ""):
            raise Failure("the close record of %s does not say that it "
                          "was not closed: %r" % (name, rec))
    if closes["c"].get("bytes_written") != 4096:
        raise Failure("the close record of c: %r" % (closes["c"],))
    end = [r for r in records(xlog) if r.get("event") == "session-close"]
    if end[0].get("result") != "SIGTERM":
        raise Failure("session-close: %r" % (end[0],))
    for line in ['forced close "a"', 'forced close "b"', 'forced close "c"',
                 'forced closedir "sub"', 'file "a" not closed',
                 'file "b" not closed', 'file "c" not closed',
                 'directory "sub" not closed',
                 "session closed for local user"]:
        if line not in err:
            raise Failure("the INFO log lacks %r; it ends %r" %
                          (line, err[-800:]))
    return "ended, every file logged as not closed"



@test
def test_sigterm_buffered_requests(ctx):
    slowfs()
    data = os.path.join(ctx.tmp, "d")
    os.mkdir(data)
    xlog = os.path.join(ctx.tmp, "xfer.log")
    open(xlog, "w").close()
    srv, pid, status = start(ctx, data, xlog, "meta=50")
    srv.init()
    n = 400
    srv.send_many([req_mkdir("m%03d" % i) for i in range(n)])
    deadline = time.monotonic() + 30
    while len(os.listdir(data)) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)    # polls a condition, with a deadline
    before = len(os.listdir(data))
    os.kill(pid, signal.SIGTERM)
    if not gone(pid, 60):
        raise Failure("the server still runs 60 s after SIGTERM")
    made = len(os.listdir(data))
    code = exit_status(status)
    if code != 128 + signal.SIGTERM:
        raise Failure("exit status %d, expected death by SIGTERM" % code)
    if made > before + 2:
        raise Failure("%d directories were made after SIGTERM (%d before "
                      "it, %d in all): the buffered requests ran on" %
                      (made - before, before, made))
    return "%d directories before SIGTERM, %d after" % (before,
                                                        made - before)


if __name__ == "__main__":
    sys.exit(suite.main(sys.argv, __doc__, Ctx, verbose="ENDS_VERBOSE"))
