#!/usr/bin/python3
"""Two hosts, one volume: concurrent SFTP clients through two sshds whose
servers see the same GlusterFS volume through two FUSE mounts.

Run by tests/fs/run-gluster-2host.sh inside its network namespace, which
starts the volume, the mounts and the sshds.  Each host is given as
NAME=ADDRESS:MOUNT-DIRECTORY; the clients log in as --user with --key,
checking the host key against --known-hosts, and open the subsystem
--subsystem ("sftp": the server under test; "sftp-ref": OpenSSH's, to tell
the file system's faults from the server's).

Checks:
  uploads_and_deletes  workers on both hosts upload files and delete some
                       of their own in the same directory; every file
                       whose CLOSE was acknowledged reads back whole from
                       the other host, and through both mounts; every
                       deleted one is gone
  appends              workers on both hosts append records to one file
                       opened with APPEND; every record whose WRITE was
                       acknowledged is there exactly once, whole
  excl                 all workers race to create the same name with EXCL:
                       exactly one wins each round, and its content is what
                       the other host reads
  posix_rename         a writer on one host replaces a file again and again
                       by posix-rename; a reader on the other host polling
                       it through SFTP (and one reading its mount directly,
                       to tell the file system from the server) never
                       gets "no such file" nor a partial file: the old or
                       the new; other errors (ESTALE, which GlusterFS gives
                       now and then to the plain reader as well) fail the
                       check above one read in 50
  read_after_close     what one host wrote is what the other reads right
                       after the CLOSE: new files, and one file rewritten
                       in place with other sizes, in both directions

Prints "ok - NAME" / "FAIL - NAME: ..." lines (the first few problems of
each) and "N passed, M failed".
"""

import argparse
import errno
import hashlib
import os
import random
import struct
import sys
import threading
import time
import traceback

import paramiko

SSH_PORT = 22
TIMEOUT = 60


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--host", action="append", required=True,
                   help="NAME=ADDRESS:MOUNT")
    p.add_argument("--user", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--known-hosts", required=True)
    p.add_argument("--subsystem", default="sftp")
    p.add_argument("--dir", default="share",
                   help="directory under each mount to work in")
    p.add_argument("--rounds", type=int, default=1,
                   help="scale of each check")
    p.add_argument("--only", default="")
    return p.parse_args()


class Host:
    def __init__(self, spec, args):
        name, rest = spec.split("=", 1)
        self.name = name
        self.addr, self.mount = rest.split(":", 1)
        self.args = args
        # The same directory of the volume, as this host's mount shows it.
        self.root = os.path.join(self.mount, args.dir)

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def connect(self):
        """A new SSH connection and SFTP session to this host."""
        a = self.args
        keys = paramiko.HostKeys(a.known_hosts)
        t = paramiko.Transport((self.addr, SSH_PORT))
        t.start_client(timeout=TIMEOUT)
        got = t.get_remote_server_key()
        known = keys.lookup(self.addr)
        if known is None or known.get(got.get_name()) != got:
            t.close()
            raise RuntimeError("host key of %s does not match" % self.addr)
        t.auth_publickey(a.user,
                         paramiko.Ed25519Key.from_private_key_file(a.key))
        chan = t.open_session(timeout=TIMEOUT)
        chan.settimeout(TIMEOUT)
        chan.invoke_subsystem(a.subsystem)
        sftp = paramiko.SFTPClient(chan)
        sftp._transport_ref = t  # kept alive with the client
        return sftp


def close_sftp(sftp):
    try:
        t = sftp._transport_ref
        sftp.close()
        t.close()
    except Exception:
        pass


class Problems:
    """The problems one check found, thread-safe."""

    def __init__(self):
        self.lock = threading.Lock()
        self.items = []

    def add(self, text):
        with self.lock:
            self.items.append(text)

    def __bool__(self):
        return bool(self.items)

    def text(self):
        n = len(self.items)
        more = " (and %d more)" % (n - 4) if n > 4 else ""
        return "; ".join(self.items[:4]) + more


def run_threads(targets):
    """Runs each (function, args) in a thread; re-raises the first error."""
    errors = []

    def wrap(fn, fargs):
        try:
            fn(*fargs)
        except Exception as e:
            tb = traceback.extract_tb(e.__traceback__)[-1]
            errors.append("%s: %s (line %d)" % (type(e).__name__, e,
                                                tb.lineno))
    threads = [threading.Thread(target=wrap, args=(fn, fargs))
               for fn, fargs in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    if errors:
        raise RuntimeError("; ".join(errors[:3]))


def blob(rng, size):
    return rng.randbytes(size)


class StepError(IOError):
    """An SFTP request failed: which one, and its status."""


def sftp_read(sftp, path):
    """OPEN, FSTAT, READs and CLOSE; a failure names the request."""
    step = "OPEN"
    try:
        f = sftp.open(path, "rb")
        try:
            step = "FSTAT"
            size = f.stat().st_size
            step = "READ"
            f.prefetch(size)
            data = f.read()
        finally:
            step = "CLOSE"
            f.close()
    except IOError as e:
        text = "%s: %s" % (step, e.strerror or e)
        if e.errno is None:
            raise StepError(text) from e
        raise StepError(e.errno, text) from e
    return data


def mount_read(path):
    with open(path, "rb") as f:
        return f.read()


# -- the checks -------------------------------------------------------------------


def check_uploads_and_deletes(hosts, args):
    problems = Problems()
    d = "up"
    hosts[0].connect_and(lambda s: s.mkdir(hosts[0].path(d)))
    kept, deleted = {}, set()
    lock = threading.Lock()
    files_each = 12 * args.rounds

    def worker(host, w):
        rng = random.Random("%s-%d" % (host.name, w))
        sftp = host.connect()
        mine = []
        try:
            for j in range(files_each):
                name = "%s-w%d-f%d" % (host.name, w, j)
                size = rng.choice([0, 1, 32768, 32769, 65536 * 3 + 5,
                                   rng.randrange(1, 700000)])
                data = blob(rng, size)
                with sftp.open(host.path(d, name), "wb") as f:
                    f.set_pipelined(True)
                    f.write(data)
                # The CLOSE (end of "with") was acknowledged.
                with lock:
                    kept[name] = hashlib.sha256(data).hexdigest()
                mine.append(name)
                if j % 3 == 2:
                    victim = mine.pop(0)
                    sftp.remove(host.path(d, victim))
                    with lock:
                        del kept[victim]
                        deleted.add(victim)
        finally:
            close_sftp(sftp)
    run_threads([(worker, (h, w)) for h in hosts for w in range(2)])
    # Read back from the other host through SFTP, and from both mounts.
    for reader in hosts:
        sftp = reader.connect()
        try:
            names = set(sftp.listdir(reader.path(d)))
            for name, digest in sorted(kept.items()):
                writer = name.split("-")[0]
                if writer == reader.name:
                    continue
                if name not in names:
                    problems.add("%s does not list %s" % (reader.name, name))
                    continue
                got = sftp_read(sftp, reader.path(d, name))
                if hashlib.sha256(got).hexdigest() != digest:
                    problems.add("%s reads %s with other content (%d bytes)"
                                 % (reader.name, name, len(got)))
            for name in sorted(deleted & names):
                problems.add("%s still lists deleted %s" %
                             (reader.name, name))
        finally:
            close_sftp(sftp)
        for name, digest in sorted(kept.items()):
            try:
                got = mount_read(reader.path(d, name))
            except OSError as e:
                problems.add("mount of %s: %s: %s" % (reader.name, name, e))
                continue
            if hashlib.sha256(got).hexdigest() != digest:
                problems.add("mount of %s: %s has other content" %
                             (reader.name, name))
    return problems, "%d files kept, %d deleted" % (len(kept), len(deleted))


RECORD = 64


def record(host, w, i):
    head = ("%s w%d r%05d " % (host, w, i)).encode()
    body = hashlib.sha256(head).hexdigest().encode()
    return (head + body)[:RECORD - 1] + b"\n"


def check_appends(hosts, args):
    problems = Problems()
    path_rel = ("appends",)
    acked = []
    lock = threading.Lock()
    per = 150 * args.rounds

    def worker(host, w):
        sftp = host.connect()
        try:
            with sftp.open(host.path(*path_rel), "ab") as f:
                for i in range(per):
                    rec = record(host.name, w, i)
                    f.write(rec)
                    f.flush()   # the WRITE's status was OK
                    with lock:
                        acked.append(rec)
        finally:
            close_sftp(sftp)
    run_threads([(worker, (h, w)) for h in hosts for w in range(2)])
    for reader in hosts:
        sftp = reader.connect()
        try:
            data = sftp_read(sftp, reader.path(*path_rel))
        finally:
            close_sftp(sftp)
        recs = [data[i:i + RECORD] for i in range(0, len(data), RECORD)]
        seen = {}
        for r in recs:
            seen[r] = seen.get(r, 0) + 1
        lost = [r for r in acked if r not in seen]
        twice = [r for r, n in seen.items() if n > 1]
        torn = [r for r in seen if r not in set(acked)]
        if lost or twice or torn or len(data) != RECORD * len(acked):
            problems.add("%s reads %d bytes for %d acknowledged records: %d "
                         "lost, %d twice, %d torn or foreign" % (
                             reader.name, len(data), len(acked), len(lost),
                             len(twice), len(torn)))
    return problems, "%d records" % len(acked)


def check_excl(hosts, args):
    problems = Problems()
    rounds = 25 * args.rounds
    workers = [(h, w) for h in hosts for w in range(2)]
    barrier = threading.Barrier(len(workers), timeout=TIMEOUT)
    wins = {}
    lock = threading.Lock()
    hosts[0].connect_and(lambda s: s.mkdir(hosts[0].path("excl")))

    def worker(host, w):
        me = ("%s-w%d" % (host.name, w)).encode()
        sftp = host.connect()
        try:
            for r in range(rounds):
                barrier.wait()
                try:
                    f = sftp.open(host.path("excl", "r%d" % r), "wbx")
                except IOError:
                    continue    # someone else made it first
                with f:
                    f.write(me)
                with lock:
                    wins.setdefault(r, []).append(me)
        finally:
            close_sftp(sftp)
    run_threads([(worker, wk) for wk in workers])
    for r in range(rounds):
        got = wins.get(r, [])
        if len(got) != 1:
            problems.add("round %d: %d creators won (%s)" %
                         (r, len(got), b",".join(got).decode()))
    for reader in hosts:
        sftp = reader.connect()
        try:
            for r in range(rounds):
                if len(wins.get(r, [])) != 1:
                    continue
                got = sftp_read(sftp, reader.path("excl", "r%d" % r))
                if got != wins[r][0]:
                    problems.add("%s reads round %d's file as %r, the "
                                 "winner wrote %r" % (reader.name, r, got,
                                                      wins[r][0]))
        finally:
            close_sftp(sftp)
    return problems, "%d rounds, %d workers" % (rounds, len(workers))


VERSION_SIZE = 40000


def version_blob(v):
    rng = random.Random(v)
    body = rng.randbytes(VERSION_SIZE - 40)
    return struct.pack(">Q", v) + hashlib.sha256(body).digest() + body


def version_of(data):
    """The version a whole file carries, or None if it is not whole."""
    if len(data) != VERSION_SIZE:
        return None
    if hashlib.sha256(data[40:]).digest() != data[8:40]:
        return None
    return struct.unpack(">Q", data[:8])[0]


def check_posix_rename(hosts, args):
    problems = Problems()
    # What the file system itself does, read through the mount: when it
    # fails there too, no server can do better, and the report says so.
    fs_problems = Problems()
    # Other errors than "no such file" (GlusterFS answers ESTALE now and
    # then to a file replaced on another client, to a plain read of the
    # mount too): a few are the file system's; many are a failure.
    transient = Problems()
    writer_host, reader_host = hosts[0], hosts[1]
    versions = 60 * args.rounds
    state = {"done": False, "sftp_reads": 0, "mount_reads": 0,
             "seen": set()}
    w = writer_host.connect()
    try:
        w.mkdir(writer_host.path("ren"))
        with w.open(writer_host.path("ren", "current"), "wb") as f:
            f.write(version_blob(0))
    finally:
        close_sftp(w)

    def writer():
        sftp = writer_host.connect()
        try:
            for v in range(1, versions + 1):
                tmp = writer_host.path("ren", ".tmp-%d" % v)
                with sftp.open(tmp, "wb") as f:
                    f.set_pipelined(True)
                    f.write(version_blob(v))
                sftp.posix_rename(tmp, writer_host.path("ren", "current"))
        finally:
            state["done"] = True
            close_sftp(sftp)

    def sftp_reader():
        sftp = reader_host.connect()
        path = reader_host.path("ren", "current")
        try:
            while not state["done"]:
                state["sftp_reads"] += 1
                try:
                    data = sftp_read(sftp, path)
                except IOError as e:
                    if e.errno == errno.ENOENT:
                        # Neither the old file nor the new: not atomic.
                        problems.add("SFTP read on %s: %s" %
                                     (reader_host.name, e))
                    else:
                        transient.add("%s" % e)
                    continue
                v = version_of(data)
                if v is None:
                    problems.add("SFTP read on %s: a file of %d bytes that "
                                 "is no whole version" % (reader_host.name,
                                                          len(data)))
                else:
                    state["seen"].add(v)
        finally:
            close_sftp(sftp)

    def mount_reader():
        path = reader_host.path("ren", "current")
        while not state["done"]:
            state["mount_reads"] += 1
            try:
                data = mount_read(path)
            except OSError as e:
                fs_problems.add(os.strerror(e.errno))
                continue
            if version_of(data) is None:
                fs_problems.add("%d bytes, no whole version" % len(data))
    run_threads([(writer, ()), (sftp_reader, ()), (mount_reader, ())])
    if state["sftp_reads"] < 5:
        problems.add("the SFTP reader read only %d times" %
                     state["sftp_reads"])
    if len(transient.items) * 50 > state["sftp_reads"]:
        problems.add("%d of %d SFTP reads failed: %s" % (
            len(transient.items), state["sftp_reads"], transient.text()))
    fs = "the mount itself: %d of %d reads failed%s" % (
        len(fs_problems.items), state["mount_reads"],
        " (%s)" % ", ".join(sorted(set(fs_problems.items)))[:200]
        if fs_problems else "")
    return problems, "%d renames, %d SFTP reads (%d failed: %s), %d " \
        "versions seen; %s" % (
            versions, state["sftp_reads"],
            len(problems.items) + len(transient.items),
            ", ".join(sorted(set(transient.items)))[:200] or "none",
            len(state["seen"]), fs)


def check_read_after_close(hosts, args):
    problems = Problems()
    rounds = 30 * args.rounds
    rng = random.Random(99)
    conns = {h.name: h.connect() for h in hosts}
    try:
        conns[hosts[0].name].mkdir(hosts[0].path("rac"))
        for r in range(rounds):
            src, dst = (hosts[0], hosts[1]) if r % 2 == 0 else \
                (hosts[1], hosts[0])
            for name in ("new-%d" % r, "same"):
                size = rng.choice([0, 1, 4095, 65536,
                                   rng.randrange(1, 400000)])
                data = blob(rng, size)
                with conns[src.name].open(src.path("rac", name), "wb") as f:
                    f.set_pipelined(True)
                    f.write(data)
                # The CLOSE was acknowledged: the other host reads now.
                try:
                    st = conns[dst.name].stat(dst.path("rac", name))
                    got = sftp_read(conns[dst.name], dst.path("rac", name))
                except IOError as e:
                    problems.add("round %d: %s cannot read %s written by %s:"
                                 " %s" % (r, dst.name, name, src.name, e))
                    continue
                if got != data or st.st_size != size:
                    problems.add("round %d: %s wrote %s with %d bytes, %s "
                                 "stats %d and reads %d%s" % (
                                     r, src.name, name, size, dst.name,
                                     st.st_size, len(got),
                                     "" if len(got) != size else
                                     " (other content)"))
    finally:
        for s in conns.values():
            close_sftp(s)
    return problems, "%d rounds, both directions" % rounds


CHECKS = [
    ("uploads_and_deletes", check_uploads_and_deletes),
    ("appends", check_appends),
    ("excl", check_excl),
    ("posix_rename", check_posix_rename),
    ("read_after_close", check_read_after_close),
]


def main():
    args = parse_args()
    hosts = [Host(s, args) for s in args.host]
    if len(hosts) != 2:
        print("FAIL - setup: expected two --host, got %d" % len(hosts))
        print("0 passed, 1 failed")
        return 1
    for h in hosts:
        h.connect_and = (lambda host: lambda fn: _with(host, fn))(h)
    passed = failed = 0
    # The working directory, made through the first host.
    _with(hosts[0], lambda s: s.mkdir(hosts[0].root))
    only = [x for x in args.only.split(",") if x]
    for name, fn in CHECKS:
        if only and name not in only:
            continue
        t0 = time.monotonic()
        try:
            problems, what = fn(hosts, args)
        except Exception as e:
            tb = traceback.extract_tb(e.__traceback__)[-1]
            print("FAIL - %s: %s: %s (line %d)" % (name, type(e).__name__, e,
                                                   tb.lineno), flush=True)
            failed += 1
            continue
        secs = time.monotonic() - t0
        if problems:
            print("FAIL - %s: %s [%s, %.1f s]" % (name, problems.text(),
                                                  what, secs), flush=True)
            failed += 1
        else:
            print("ok - %s: %s, %.1f s" % (name, what, secs), flush=True)
            passed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def _with(host, fn):
    sftp = host.connect()
    try:
        return fn(sftp)
    finally:
        close_sftp(sftp)


if __name__ == "__main__":
    sys.exit(main())
