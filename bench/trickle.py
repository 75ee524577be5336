#!/usr/bin/env python3
"""trickle.py: what many sessions hold after a burst, while they trickle.

N sessions of each server (ours and OpenSSH's, or $SFTP_REFERENCE), each
under bench/slowfs (every storage call of the server held DELAY ms, so that
ours hands its work to workers), each with a 1 MiB file of its own.  Every
session downloads the file in one burst of 32 READs of 32 KiB in flight,
then trickles: two 32 KiB READs every 1.5 s (about 43 KiB/s, more than the
64 KiB in 2 s below which the pipes call it a trickle, so the session never
goes idle).  From 1 s after the burst's end, the servers' tasks (threads)
and memory (Rss; Pss, which splits each shared page among the processes
that map it; and Anonymous, the pages of the process's own, not the
binary's and libraries' that sessions share) are summed over the sessions
every 0.1 to 0.4 s (at random times) for SECONDS; the report gives the mean and the most of those
samples per session, and ours against OpenSSH's.  slowfs's own process is
not counted.

usage: bench/trickle.py [-n SESSIONS] [-d DELAY_MS] [-t SECONDS] [OURS]
Needs bench/slowfs (make bench/slowfs) and root for slowfs's -p to tell
paths apart; runs as any user otherwise.
"""

import argparse
import os
import random
import shutil
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "lib"))

from sftpwire import (Data, Handle, Server, SSH_FXF_READ,  # noqa: E402
                      reference_argv, req_open, req_read)

CHUNK = 32768
FILE = 1024 * 1024


def server_pid(slowfs_pid):
    """The server: slowfs's child."""
    for t in os.listdir("/proc/%d/task" % slowfs_pid):
        try:
            with open("/proc/%d/task/%s/children" % (slowfs_pid, t)) as f:
                kids = f.read().split()
        except FileNotFoundError:
            continue
        if kids:
            return int(kids[0])
    return None


def tasks(pid):
    try:
        return len(os.listdir("/proc/%d/task" % pid))
    except FileNotFoundError:
        return 0


def mem_kib(pid):
    """Rss, Pss and Anonymous of smaps_rollup, KiB."""
    got = {"Rss:": 0, "Pss:": 0, "Anonymous:": 0}
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                w = line.split()
                if w and w[0] in got:
                    got[w[0]] = int(w[1])
    except FileNotFoundError:
        pass
    return got["Rss:"], got["Pss:"], got["Anonymous:"]


def reads(h, first, n):
    return [req_read(h, (first + i) % (FILE // CHUNK) * CHUNK, CHUNK)
            for i in range(n)]


def expect_data(srv, ids):
    for rid in ids:
        r = srv.recv(timeout=120)
        if r.id != rid or not isinstance(r, Data):
            raise SystemExit("READ %d: %r" % (rid, r))


def run(name, argv, args, tmp):
    slowfs = os.path.join(HERE, "slowfs")
    sessions = []
    for i in range(args.n):
        d = os.path.join(tmp, "%s-%d" % (name, i))
        os.mkdir(d)
        with open(os.path.join(d, "f"), "wb") as f:
            f.write(bytes(range(256)) * (FILE // 256))
        srv = Server([slowfs, "-d", str(args.delay), "-p", d, "--"] + argv,
                     cwd=d)
        srv.init()
        r = srv.call(req_open("f", SSH_FXF_READ))
        if not isinstance(r, Handle):
            raise SystemExit("%s: OPEN: %r" % (name, r))
        sessions.append((srv, r.handle, server_pid(srv.proc.pid)))
    # The burst: every session's 32 READs in flight at once.
    pending = [(s, s.send_many(reads(h, 0, 32))) for s, h, _ in sessions]
    for s, ids in pending:
        expect_data(s, ids)
    burst_end = time.monotonic()
    samples = []
    next_round = burst_end
    k = 0
    while time.monotonic() < burst_end + 1 + args.seconds:
        if time.monotonic() >= burst_end + 1:
            t = rss = pss = anon = 0
            for _, _, p in sessions:
                t += tasks(p)
                m = mem_kib(p)
                rss += m[0]
                pss += m[1]
                anon += m[2]
            samples.append((t / args.n, rss / args.n, pss / args.n,
                            anon / args.n))
        if time.monotonic() >= next_round:
            pending = [(s, s.send_many(reads(h, 2 * k, 2)))
                       for s, h, _ in sessions]
            for s, ids in pending:
                expect_data(s, ids)
            k += 1
            next_round += 1.5
        # Samples at times of their own, not right after each round.
        time.sleep(random.uniform(0.1, 0.4))
    for s, _, _ in sessions:
        s.kill()
    return [(sum(x) / len(x), max(x)) for x in zip(*samples)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("-d", dest="delay", type=float, default=1)
    ap.add_argument("-t", dest="seconds", type=int, default=10)
    ap.add_argument("ours", nargs="?",
                    default=os.path.join(os.path.dirname(HERE),
                                         "sftp-server"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="sftp-trickle-")
    try:
        got = {}
        for name, argv in (("ours", [os.path.abspath(args.ours)]),
                           ("openssh", reference_argv())):
            got[name] = run(name, argv, args, tmp)
            (tm, tx), (rm, rx), (pm, px), (am, ax) = got[name]
            print("%-8s per session, mean (most): tasks %.2f (%.2f), "
                  "Rss %.0f (%.0f) KiB, Pss %.0f (%.0f) KiB, "
                  "Anonymous %.0f (%.0f) KiB" %
                  (name, tm, tx, rm, rx, pm, px, am, ax))
        o, r = got["ours"], got["openssh"]
        print("ours/openssh, mean (most): " + ", ".join(
            "%s %.2f (%.2f)" % (what, o[i][0] / r[i][0], o[i][1] / r[i][1])
            for i, what in enumerate(("tasks", "Rss", "Pss",
                                      "Anonymous"))))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
