#!/usr/bin/python3
"""The transfer log (-L) through sshd (driven by tests/sshd/run-xferlog.sh).

Usage: sshd_xferlog.py HOST PORT USER KEY KNOWN_HOSTS REMOTE_DIR LOG

Six paramiko sessions at once each upload a file of its own size, read a
range of it back, rename it, make and remove a directory, change a mode and
remove a missing file, then stay open while LOG is renamed to LOG.1 and a
new LOG made (logrotate's "create" way) and three more sessions run.  Every
line of LOG.1 and LOG must be a JSON object; the figures must match what
the sessions did; what the first six did before the rotation is in LOG.1,
their ends follow the rotation into LOG with the three later sessions.
Prints "ok - NAME" / "FAIL - NAME: ...".
"""

import json
import os
import random
import sys
import threading
import time

import paramiko

HOST, PORT, USER, KEY, KNOWN, RDIR, LOG = sys.argv[1:8]
PORT = int(PORT)
FAILED = 0


def ok(name):
    print("ok - xferlog: %s" % name, flush=True)


def fail(name, why):
    global FAILED
    FAILED += 1
    print("FAIL - xferlog: %s: %s" % (name, why), flush=True)


def check(name, cond, why):
    if cond:
        ok(name)
    else:
        fail(name, why)


def connect():
    client = paramiko.SSHClient()
    client.load_host_keys(KNOWN)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(HOST, PORT, username=USER, key_filename=KEY,
                   look_for_keys=False, allow_agent=False, timeout=20)
    return client, client.open_sftp()


def names(i):
    return ("%s/s%d\nweird\xe9.bin" % (RDIR, i), "%s/r%d.bin" % (RDIR, i),
            "%s/d%d" % (RDIR, i), "%s/missing%d" % (RDIR, i))


def session(i, done, started, hold=None, worked=None):
    """One client's work; records in done[i] that it finished."""
    data = random.Random(1000 + i).randbytes(100000 + 37 * i)
    name, renamed, d, missing = names(i)
    client, sftp = connect()
    started.release()
    try:
        with sftp.open(name, "wb") as f:
            f.write(data)
        with sftp.open(name, "rb") as f:
            f.seek(1000 + i)
            got = f.read(5000)
        if got != data[1000 + i:6000 + i]:
            raise RuntimeError("read back differs")
        sftp.rename(name, renamed)
        sftp.mkdir(d)
        sftp.rmdir(d)
        sftp.chmod(renamed, 0o640)
        try:
            sftp.remove(missing)
        except IOError:
            pass
        if hold is not None:
            worked.release()
            hold.wait(30)   # open across the log's rename
        done[i] = True
    finally:
        sftp.close()
        client.close()


def run(ids, hold=None, worked=None):
    done, started = {}, threading.Semaphore(0)
    threads = [threading.Thread(target=session, args=(i, done, started,
                                                      hold, worked))
               for i in ids]
    for t in threads:
        t.start()
    for _ in ids:
        started.acquire(timeout=30)
    return threads, done


def lines_of(path):
    out, bad = [], []
    with open(path, "rb") as f:
        for raw in f:
            try:
                # Strict: UTF-8 throughout, and no lone surrogates.
                rec = json.loads(raw.decode("utf-8"))
                for v in rec.values():
                    if isinstance(v, str):
                        v.encode("utf-8")
                out.append(rec)
            except ValueError as e:
                bad.append((raw[:120], str(e)))
    return out, bad


def check_sessions(recs, ids, where, want_open=True, want_close=True):
    by_session = {}
    for r in recs:
        by_session.setdefault(r["session"], []).append(r)
    check("%s: one session per client" % where, len(by_session) == len(ids),
          "%d sessions: %r" % (len(by_session), sorted(by_session)))
    for pid, rs in sorted(by_session.items()):
        ev = [r["event"] for r in rs]
        if want_open and want_close:
            ok = ev[0] == "session-open" and ev[-1] == "session-close" \
                and "close" in ev
        elif want_open:
            ok = ev[0] == "session-open" and "close" in ev and \
                "session-close" not in ev
        else:
            ok = ev == ["session-close"]
        check("%s: session %d: %s" % (where, pid, (
            "opens, works and closes, in order" if want_open and want_close
            else "opens and works" if want_open else "closes, only")),
            ok, repr(ev))
        bad = [r for r in rs if not (r["user"] == USER and
                                     r["client"] == "127.0.0.1" and
                                     isinstance(r["port"], int) and
                                     r["time"].endswith("Z"))]
        check("%s: session %d: user, client, port and time in every line"
              % (where, pid), not bad, repr(bad[:1]))


def check_client(recs, i, where):
    size = 100000 + 37 * i
    name, renamed, d, missing = names(i)
    up = [r for r in recs if r["event"] == "close" and
          r.get("path") == name and "WRITE" in r["flags"]]
    down = [r for r in recs if r["event"] == "close" and
            r.get("path") == name and r["flags"] == "READ"]
    check("%s: client %d: upload closed, %d bytes, offsets 0 to %d" %
          (where, i, size, size),
          len(up) == 1 and up[0]["bytes_written"] == size and
          up[0]["first_offset"] == 0 and up[0]["last_offset"] == size and
          up[0]["result"] == "ok" and up[0]["duration"] >= 0, repr(up))
    # paramiko reads ahead: at least the 5000 bytes asked for, from where
    # they were asked
    check("%s: client %d: download closed, from offset %d" %
          (where, i, 1000 + i),
          len(down) == 1 and down[0]["bytes_read"] >= 5000 and
          down[0]["first_offset"] == 1000 + i and
          down[0]["result"] == "ok", repr(down))
    want = [("rename", name, renamed, "ok"), ("mkdir", d, None, "ok"),
            ("rmdir", d, None, "ok"), ("setstat", renamed, None, "ok"),
            ("remove", missing, None, "No such file")]
    mine = {name, renamed, d, missing}
    got = [(r["event"], r.get("path"), r.get("target"), r["result"])
           for r in recs if r["event"] != "close" and r.get("path") in mine]
    check("%s: client %d: rename, mkdir, rmdir, chmod, remove" % (where, i),
          got == want, repr(got))


def main():
    hold, worked = threading.Event(), threading.Semaphore(0)
    first, done1 = run(range(6), hold, worked)
    for _ in range(6):            # all six have done their work
        worked.acquire(timeout=60)
    os.rename(LOG, LOG + ".1")    # logrotate: rename, then new sessions
    fd = os.open(LOG, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o622)
    os.close(fd)                  # ... and "create" the next log
    second, done2 = run(range(6, 9))
    for t in second:
        t.join(60)
    hold.set()
    for t in first:
        t.join(60)
    check("nine sessions finished", len(done1) + len(done2) == 9,
          "%d of 9" % (len(done1) + len(done2)))
    # A server writes session-close when sshd has torn its channel down,
    # after the client returned: wait for all nine, up to 30 s.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        closes = sum(1 for p in (LOG + ".1", LOG) if os.path.exists(p)
                     for r in lines_of(p)[0]
                     if r.get("event") == "session-close")
        if closes >= 9:
            break
        time.sleep(0.1)
    old, bad_old = lines_of(LOG + ".1")
    new, bad_new = lines_of(LOG)
    check("every line of both files is one JSON object (%d lines)" %
          (len(old) + len(new)), not bad_old and not bad_new,
          repr((bad_old + bad_new)[:2]))
    check_sessions(old, range(6), "rotated log", want_close=False)
    early = {r["session"] for r in old}
    check_sessions([r for r in new if r["session"] in early], range(6),
                   "new log, sessions open across the rotation",
                   want_open=False)
    check_sessions([r for r in new if r["session"] not in early],
                   range(6, 9), "new log")
    for recs, ids, where in ((old, range(6), "rotated log"),
                             (new, range(6, 9), "new log")):
        for i in ids:
            check_client(recs, i, where)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
