#!/usr/bin/env python3
"""Raw-protocol tests of an SFTP version 3 server.

The server under test is $SFTP_SERVER (default: sftp-server in the
repository root), started with the extra arguments in
$SFTP_SERVER_ARGS (split on spaces).  Where behaviour must equal OpenSSH's,
some tests also run the reference server $SFTP_REFERENCE (default:
/usr/lib/openssh/sftp-server) on the same files and compare.

Each test runs in a fresh temporary directory, the server's cwd.

Some tests deliberately expect something other than what OpenSSH 9.2's
server does, and fail against it: unknown_packet_type (OP_UNSUPPORTED
instead of silence), malformed_* (BAD_MESSAGE instead of an exit),
stale_handle_after_reuse (handles are never reused),
ext_copy_data_same_inode_other_path and ext_copy_data_bad_handles_no_such_file
(as OpenSSH 10.4), ext_home_directory* (as OpenSSH 9.8) and
readdir_of_a_directory_renamed_after_opendir (entries listed, not EOF).

Usage: test_raw.py [NAME-SUBSTRING ...]
Prints one line per test, then "N passed, M failed[, K skipped]"; exits 1
if any test failed.
"""

import grp
import os
import pwd
import random
import re
import shutil
import stat
import struct
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # leave no __pycache__ in the tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))

from sftpwire import *  # noqa: E402,F401,F403
import suite  # noqa: E402
from suite import (  # noqa: E402
    Failure, Skip, add_test, expect, expect_alive, expect_eq, expect_type,
    test, tree_snapshot)

SERVER_ARGV = server_argv()
REFERENCE = reference_argv()[0]

# The umask the servers are started with (tests of modes depend on it).
UMASK = 0o022


# ---------------------------------------------------------------------------
# Harness


class Ctx:
    """One test's temporary directory and the servers it started."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="sftp-raw-")
        self.cwd = os.path.realpath(self.tmp)
        self.servers = []

    def start(self, binary, args=(), init=True, env=None, umask=UMASK,
              version=3, cwd=None):
        srv = Server([binary] + list(args), cwd=cwd or self.cwd, env=env,
                     umask=umask)
        self.servers.append(srv)
        if init:
            v = srv.init(version)
            if v.version != 3:
                raise Failure("VERSION %d, expected 3" % v.version)
        return srv

    def server(self, args=(), **kw):
        """Start the server under test (and send INIT unless init=False)."""
        return self.start(SERVER_ARGV[0], SERVER_ARGV[1:] + list(args), **kw)

    def reference(self, args=(), **kw):
        """Start the reference server; Skip if it is not installed."""
        if not os.access(REFERENCE, os.X_OK):
            raise Skip("reference server %s not installed" % REFERENCE)
        return self.start(REFERENCE, list(args), **kw)

    def path(self, *parts):
        return os.path.join(self.cwd, *parts)

    def write(self, name, data=b"", mode=None, mtime=None):
        p = self.path(name)
        with open(p, "wb") as f:
            f.write(data)
        if mode is not None:
            os.chmod(p, mode)
        if mtime is not None:
            os.utime(p, (mtime, mtime))
        return p

    def read(self, name):
        with open(self.path(name), "rb") as f:
            return f.read()

    def cleanup(self):
        for srv in self.servers:
            srv.kill()
        for root, dirs, _ in os.walk(self.tmp):
            for d in dirs:
                p = os.path.join(root, d)
                if not os.path.islink(p):
                    os.chmod(p, 0o700)
        shutil.rmtree(self.tmp, ignore_errors=True)


# -- assertions ---------------------------------------------------------------


def expect_status(reply, code, what="reply", rid=None):
    """The reply is a STATUS with code, OpenSSH's message, empty language."""
    name = STATUS_NAMES[code]
    if not isinstance(reply, Status) or reply.code != code:
        raise Failure("%s: expected STATUS %s, got %r" % (what, name, reply))
    expect_eq("%s: message of STATUS %s" % (what, name), reply.message,
              STATUS_MESSAGES[code])
    expect_eq("%s: language tag" % what, reply.lang, b"")
    if rid is not None:
        expect_eq("%s: request id" % what, reply.id, rid)
    return reply


def expect_data(reply, data, what="READ"):
    expect_type(reply, Data, what)
    if reply.data != data:
        raise Failure("%s: expected %d bytes %r, got %d bytes %r" %
                      (what, len(data), data[:40], len(reply.data),
                       reply.data[:40]))


def expect_name1(reply, path, what="reply"):
    """A NAME with exactly one entry: filename = longname = path, no attrs."""
    expect_type(reply, Name, what)
    expect_eq("%s: NAME count" % what, len(reply.entries), 1)
    e = reply.entries[0]
    expect_eq("%s: filename" % what, e.filename, os.fsencode(path))
    expect_eq("%s: longname" % what, e.longname, os.fsencode(path))
    expect_eq("%s: attrs flags" % what, e.attrs.flags, 0)


def expect_attrs_of(reply, st, what="reply"):
    expect_type(reply, AttrsReply, what)
    expect_eq("%s: attrs flags" % what, reply.attrs.flags, 0x0F)
    expect_eq("%s: attrs" % what, reply.attrs, Attrs.from_stat(st))


def expect_exit(srv, want, what):
    """Close nothing; wait for the server to exit by itself with status."""
    code = srv.wait()
    if want == "nonzero":
        expect(code != 0, "%s: expected a non-zero exit status, got 0" % what)
    else:
        expect_eq("%s: exit status" % what, code, want)


# ---------------------------------------------------------------------------
# INIT / VERSION


def expect_extensions(what, extensions):
    """OpenSSH's extensions first, as OpenSSH advertises them, then the
    server's own, each name once and none of them OpenSSH's."""
    n = len(OPENSSH_EXTENSIONS)
    expect_eq("%s: OpenSSH's extensions first" % what, extensions[:n],
              OPENSSH_EXTENSIONS)
    names = [name for name, _ in extensions[n:]]
    expect_eq("%s: the server's own after them, each once" % what, names,
              [name for name in dict.fromkeys(names)
               if name not in OPENSSH_EXTENSION_NAMES])


def make_version_test(client_version):
    def run(ctx):
        first = ctx.server(init=False).init(3).extensions
        srv = ctx.server(init=False)
        v = srv.init(client_version)
        expect_eq("VERSION for INIT %d" % client_version, v.version, 3)
        expect_extensions("VERSION for INIT %d" % client_version,
                          v.extensions)
        expect_eq("extensions for INIT %d, as for INIT 3" % client_version,
                  v.extensions, first)
        expect_alive(srv)
    return run


for _v in (3, 2, 6):
    add_test("version_for_init_%d" % _v, make_version_test(_v))


@test
def test_second_init_answered(ctx):
    srv = ctx.server(init=False)
    first = srv.init(3).extensions
    v = srv.init(3)
    expect_eq("second VERSION", (v.version, v.extensions), (3, first))
    expect_alive(srv)


@test
def test_request_before_init_is_fatal(ctx):
    srv = ctx.server(init=False)
    srv.send(req_stat("."), 1)
    out = srv.read_output(DEFAULT_TIMEOUT)
    expect_eq("output after STAT before INIT", out, b"")
    expect(srv.at_eof(), "server still running after STAT before INIT")
    expect_exit(srv, "nonzero", "STAT before INIT")


@test
def test_extended_before_init_is_fatal(ctx):
    srv = ctx.server(init=False)
    srv.send(req_limits(), 1)
    out = srv.read_output(DEFAULT_TIMEOUT)
    expect_eq("output after EXTENDED before INIT", out, b"")
    expect_exit(srv, "nonzero", "EXTENDED before INIT")


@test
def test_eof_after_init_exits_0(ctx):
    srv = ctx.server()
    expect_eq("exit status at end of input", srv.close(), 0)


# ---------------------------------------------------------------------------
# Pipelining


@test
def test_pipeline_256_in_order(ctx):
    for i in range(8):
        ctx.write("f%d" % i, b"x" * (i * 7))
    srv = ctx.server()
    hw = srv.open("pipe", SSH_FXF_READ | SSH_FXF_WRITE | SSH_FXF_CREAT |
                  SSH_FXF_TRUNC)
    rng = random.Random(256)
    ids = rng.sample(range(1, 0xFFFFFFFF), 254) + [0, 0xFFFFFFFF]
    rng.shuffle(ids)
    reqs, checks = [], []
    chunk = 0
    for i in range(256):
        kind = i % 6
        name = "f%d" % (i % 8)
        if kind == 0:
            reqs.append(req_stat(name))
            checks.append(("stat", name))
        elif kind == 1:
            reqs.append(req_lstat(name))
            checks.append(("stat", name))
        elif kind == 2:
            reqs.append(req_realpath(name))
            checks.append(("realpath", name))
        elif kind == 3:
            reqs.append(req_open(name, SSH_FXF_READ))
            checks.append(("open", name))
        elif kind == 4:
            chunk += 1
            data = b"%016d" % chunk
            reqs.append(req_write(hw, chunk * 16, data))
            checks.append(("write", None))
        else:
            reqs.append(req_read(hw, chunk * 16, 16))
            checks.append(("read", b"%016d" % chunk))
    srv.send_many(reqs, ids)
    handles = []
    for n, (rid, (kind, arg)) in enumerate(zip(ids, checks)):
        reply = srv.recv()
        what = "reply %d (%s)" % (n, kind)
        expect_eq("%s: request id" % what, reply.id, rid)
        if kind == "stat":
            expect_type(reply, AttrsReply, what)
            expect_eq(what + ": size", reply.attrs.size,
                      os.stat(ctx.path(arg)).st_size)
        elif kind == "realpath":
            expect_name1(reply, ctx.path(arg), what)
        elif kind == "open":
            handles.append(expect_type(reply, Handle, what).handle)
        elif kind == "write":
            expect_status(reply, SSH_FX_OK, what)
        else:
            expect_data(reply, arg, what)
    expect_eq("distinct handles", len(set(handles + [hw])),
              len(handles) + 1)
    for h in handles + [hw]:
        expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")
    want = bytearray(16 * (chunk + 1))
    for c in range(1, chunk + 1):
        want[c * 16:(c + 1) * 16] = b"%016d" % c
    expect_eq("file written by the pipeline", ctx.read("pipe"), bytes(want))


@test
def test_pipeline_large_reads_backpressure(ctx):
    # 256 READs of 261120 bytes sent before any reply is read: 64 MiB of
    # replies, far more than any pipe holds.
    srv, h, data = two_mib_file(ctx)
    offs = [(i * 100003) % (len(data) - 261120) for i in range(256)]
    ids = srv.send_many(req_read(h, off, 261120) for off in offs)
    for n, (rid, off) in enumerate(zip(ids, offs)):
        reply = srv.recv()
        expect_eq("reply %d id" % n, reply.id, rid)
        expect_data(reply, data[off:off + 261120], "READ %d at %d" % (n, off))
    expect_alive(srv)


@test
def test_pipeline_large_writes(ctx):
    srv = ctx.server()
    h = srv.open("w", SSH_FXF_WRITE | SSH_FXF_CREAT)
    blocks = [bytes([i]) * 261120 for i in range(64)]
    ids = srv.send_many(req_write(h, i * 261120, b)
                        for i, b in enumerate(blocks))
    for n, rid in enumerate(ids):
        expect_status(srv.recv(), SSH_FX_OK, "WRITE %d" % n, rid)
    expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")
    expect(ctx.read("w") == b"".join(blocks), "file differs from the WRITEs")


# ---------------------------------------------------------------------------
# Handles

HANDLE_OPS = ("READ", "WRITE", "FSTAT", "FSETSTAT", "READDIR", "CLOSE")


def handle_op(op, h):
    return {
        "READ": req_read(h, 0, 10),
        "WRITE": req_write(h, 0, b"zz"),
        "FSTAT": req_fstat(h),
        "FSETSTAT": req_fsetstat(h, Attrs(permissions=0o600)),
        "READDIR": req_readdir(h),
        "CLOSE": req_close(h),
    }[op]


def expect_invalid_handle(srv, h, what, ops=HANDLE_OPS):
    for op in ops:
        code = SSH_FX_NO_SUCH_FILE if op == "CLOSE" else SSH_FX_FAILURE
        expect_status(srv.call(handle_op(op, h)), code,
                      "%s on %s" % (op, what))


@test
def test_handles_at_most_256_bytes_and_distinct(ctx):
    os.mkdir(ctx.path("d"))
    ctx.write("f", b"abc")
    srv = ctx.server()
    hs = []
    for _ in range(10):
        hs.append(srv.open("f", SSH_FXF_READ))
        hs.append(srv.opendir("d"))
    for h in hs:
        expect(len(h) <= MAX_HANDLE_LENGTH,
               "handle of %d bytes (max 256): %r" % (len(h), h))
    expect_eq("number of distinct handles", len(set(hs)), len(hs))
    for h in hs:
        expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")


@test
def test_stale_file_handle(ctx):
    ctx.write("f", b"0123456789")
    srv = ctx.server()
    h = srv.open("f", SSH_FXF_READ | SSH_FXF_WRITE)
    expect_status(srv.close_handle(h), SSH_FX_OK, "first CLOSE")
    expect_invalid_handle(srv, h, "a closed file handle")
    expect_eq("file contents", ctx.read("f"), b"0123456789")


@test
def test_many_handles(ctx):
    for i in range(10):
        ctx.write("f%d" % i, b"file %d" % i)
    srv = ctx.server()
    n = 1000
    ids = srv.send_many(req_open("f%d" % (i % 10), SSH_FXF_READ)
                        for i in range(n))
    hs = []
    for i, rid in enumerate(ids):
        reply = srv.recv()
        expect_eq("OPEN %d id" % i, reply.id, rid)
        hs.append(expect_type(reply, Handle, "OPEN %d" % i).handle)
    expect_eq("distinct handles", len(set(hs)), n)
    ids = srv.send_many(req_read(h, 0, 100) for h in hs)
    for i, rid in enumerate(ids):
        expect_data(srv.recv(), b"file %d" % (i % 10), "READ %d" % i)
    ids = srv.send_many(req_close(h) for h in hs)
    for i, rid in enumerate(ids):
        expect_status(srv.recv(), SSH_FX_OK, "CLOSE %d" % i, rid)
    expect_invalid_handle(srv, hs[0], "the first closed handle")


@test
def test_stale_handle_after_reuse(ctx):
    # Deliberately stricter than OpenSSH, whose handles are slot numbers: a
    # closed handle stays invalid even when a new handle takes its place.
    ctx.write("a", b"aaaa")
    ctx.write("b", b"bbbb")
    srv = ctx.server()
    ha = srv.open("a", SSH_FXF_READ | SSH_FXF_WRITE)
    expect_status(srv.close_handle(ha), SSH_FX_OK, "CLOSE a")
    hb = srv.open("b", SSH_FXF_READ | SSH_FXF_WRITE)
    expect(ha != hb, "the new handle equals the closed one: %r" % hb)
    expect_invalid_handle(srv, ha, "a closed handle after reuse",
                          ops=("READ", "WRITE", "FSTAT", "FSETSTAT",
                               "READDIR"))
    expect_data(srv.call(req_read(hb, 0, 10)), b"bbbb", "READ b")
    expect_invalid_handle(srv, ha, "a closed handle after reuse",
                          ops=("CLOSE",))
    expect_data(srv.call(req_read(hb, 0, 10)), b"bbbb", "READ b again")
    expect_eq("b", ctx.read("b"), b"bbbb")


@test
def test_stale_dir_handle(ctx):
    os.mkdir(ctx.path("d"))
    srv = ctx.server()
    h = srv.opendir("d")
    expect_status(srv.close_handle(h), SSH_FX_OK, "first CLOSE")
    expect_invalid_handle(srv, h, "a closed directory handle")


@test
def test_forged_handles(ctx):
    ctx.write("f", b"0123456789")
    os.mkdir(ctx.path("d"))
    srv = ctx.server()
    # Keep real handles open so that forged ones have something to hit.
    hf = srv.open("f", SSH_FXF_READ | SSH_FXF_WRITE)
    hd = srv.opendir("d")
    rng = random.Random(1234)
    forged = [b"", b"\x00", bytes(x ^ 0xFF for x in hf),
              bytes(x ^ 0xFF for x in hd), hf + b"\x00", hf[:-1],
              b"\x00" + hf]
    for n in (1, 2, 3, 4, 5, 8, 16, 32, 255, 256, 257, 1000):
        forged.append(bytes(rng.randrange(256) for _ in range(n)))
    forged = [h for h in forged if h not in (hf, hd)]
    for h in forged:
        expect_invalid_handle(srv, h, "forged handle %r" % h[:20])
    expect_data(srv.call(req_read(hf, 0, 4)), b"0123",
                "READ on the real handle afterwards")
    expect_eq("file contents", ctx.read("f"), b"0123456789")


@test
def test_handle_of_wrong_kind(ctx):
    ctx.write("f", b"0123456789")
    os.mkdir(ctx.path("d"))
    srv = ctx.server()
    hf = srv.open("f", SSH_FXF_READ)
    hd = srv.opendir("d")
    expect_status(srv.call(req_readdir(hf)), SSH_FX_FAILURE,
                  "READDIR on a file handle")
    for op in ("READ", "WRITE", "FSTAT", "FSETSTAT"):
        expect_status(srv.call(handle_op(op, hd)), SSH_FX_FAILURE,
                      "%s on a directory handle" % op)
    expect_status(srv.close_handle(hf), SSH_FX_OK, "CLOSE file")
    expect_status(srv.close_handle(hd), SSH_FX_OK, "CLOSE dir")


# ---------------------------------------------------------------------------
# READ


def ten_byte_file(ctx):
    ctx.write("f", b"0123456789")
    srv = ctx.server()
    return srv, srv.open("f", SSH_FXF_READ)


@test
def test_read_at_eof(ctx):
    srv, h = ten_byte_file(ctx)
    expect_status(srv.call(req_read(h, 10, 5)), SSH_FX_EOF, "READ at EOF")


@test
def test_read_past_eof(ctx):
    srv, h = ten_byte_file(ctx)
    expect_status(srv.call(req_read(h, 11, 5)), SSH_FX_EOF, "READ at 11")
    expect_status(srv.call(req_read(h, 1 << 40, 5)), SSH_FX_EOF,
                  "READ at 2^40")


@test
def test_read_crossing_eof(ctx):
    srv, h = ten_byte_file(ctx)
    expect_data(srv.call(req_read(h, 6, 10)), b"6789", "READ 6+10")
    expect_data(srv.call(req_read(h, 0, 100)), b"0123456789", "READ 0+100")
    expect_data(srv.call(req_read(h, 9, 261120)), b"9", "READ 9+261120")


@test
def test_read_length_zero(ctx):
    srv, h = ten_byte_file(ctx)
    for off in (0, 5, 10, 100):
        expect_data(srv.call(req_read(h, off, 0)), b"",
                    "READ of length 0 at %d" % off)


@test
def test_read_exact_ranges(ctx):
    srv, h = ten_byte_file(ctx)
    expect_data(srv.call(req_read(h, 0, 10)), b"0123456789", "READ 0+10")
    expect_data(srv.call(req_read(h, 3, 1)), b"3", "READ 3+1")
    expect_data(srv.call(req_read(h, 9, 1)), b"9", "READ 9+1")


def two_mib_file(ctx):
    data = random.Random(2).randbytes(2 << 20)
    ctx.write("big", data)
    srv = ctx.server()
    return srv, srv.open("big", SSH_FXF_READ), data


@test
def test_read_clamped_to_261120(ctx):
    srv, h, data = two_mib_file(ctx)
    expect_data(srv.call(req_read(h, 0, 1 << 20)), data[:261120],
                "READ of 1 MiB")
    expect_data(srv.call(req_read(h, 1000, 261121)), data[1000:1000 + 261120],
                "READ of 261121 at 1000")
    expect_data(srv.call(req_read(h, 7, 0xFFFFFFFF)), data[7:261127],
                "READ of 2^32-1 at 7")


@test
def test_read_full_lengths(ctx):
    srv, h, data = two_mib_file(ctx)
    n = len(data)
    for length in (1, 4095, 4096, 32767, 32768, 65536, 131072, 261119,
                   261120):
        for off in (0, 1, 12345, 1 << 20, n - length):
            expect_data(srv.call(req_read(h, off, length)),
                        data[off:off + length],
                        "READ of %d at %d" % (length, off))
    expect_data(srv.call(req_read(h, n - 100, 261120)), data[n - 100:],
                "READ of 261120 100 bytes before EOF")


@test
def test_read_pipelined_whole_file(ctx):
    srv, h, data = two_mib_file(ctx)
    step = 261120
    reqs = [req_read(h, off, step) for off in range(0, len(data), step)]
    reqs.append(req_read(h, len(data), step))
    ids = srv.send_many(reqs)
    got = []
    for n, rid in enumerate(ids[:-1]):
        reply = srv.recv()
        expect_eq("reply %d id" % n, reply.id, rid)
        got.append(expect_type(reply, Data, "READ %d" % n).data)
    expect_status(srv.recv(), SSH_FX_EOF, "last READ", ids[-1])
    expect(b"".join(got) == data, "pipelined READs did not return the file")


@test
def test_dates_after_2038_as_reference(ctx):
    # A 32-bit time_t ends in January 2038: there stat(2) of a later file
    # fails with EOVERFLOW.  ATTRS carry times cut to 32 bits, as OpenSSH's
    # server sends them, and long names show the year.
    times = {"y2039": (1 << 31) + 400 * 86400, "y2106": (1 << 32) + 86400}
    os.mkdir(ctx.path("d"))
    for name, t in times.items():
        ctx.write("d/" + name, b"x" * 5, mode=0o640, mtime=t)
    try:
        got = {n: os.stat(ctx.path("d", n)).st_mtime for n in times}
    except OverflowError:
        raise Skip("this system cannot date a file after 2038")
    if got != times:
        raise Skip("the file system keeps no dates after 2038: %r" % got)
    answers = {}
    for who, start in (("reference", ctx.reference), ("server", ctx.server)):
        srv = start()
        out = []
        for n in sorted(times):
            for label, req in (("STAT", req_stat("d/" + n)),
                               ("LSTAT", req_lstat("d/" + n))):
                r = expect_type(srv.call(req), AttrsReply,
                                "%s: %s %s" % (who, label, n))
                out.append(("%s %s" % (label, n), r.attrs))
            h = srv.open("d/" + n, SSH_FXF_READ)
            r = expect_type(srv.call(req_fstat(h)), AttrsReply,
                            "%s: FSTAT %s" % (who, n))
            out.append(("FSTAT " + n, r.attrs))
        batches, end = srv.readdir_all(srv.opendir("d"))
        expect_eq("%s: READDIR ends with" % who, end.code, SSH_FX_EOF)
        for e in sorted((e for b in batches for e in b.entries
                         if e.filename.decode() in times),
                        key=lambda e: e.filename):
            # The long name without the link count, which OpenSSH leaves
            # out in READDIR.
            out.append(("READDIR " + e.filename.decode(), e.attrs,
                        e.longname.split()[2:]))
        answers[who] = out
    expect_eq("entries", len(answers["server"]), 8)
    for want, got in zip(answers["reference"], answers["server"]):
        expect_eq(got[0], got[1:], want[1:])
    for label, attrs, *_ in answers["server"]:
        n = label.split()[1]
        expect_eq("%s: mtime" % label, attrs.mtime, times[n] & 0xffffffff)
    return "mtime %s" % ", ".join("%s %s" % (n, time.strftime(
        "%Y-%m-%d", time.gmtime(t))) for n, t in sorted(times.items()))


@test
def test_huge_offsets_match_reference(ctx):
    # OpenSSH seeks with lseek(2), which fails (EINVAL -> BAD_MESSAGE)
    # beyond the file system's largest file; compare on the same files.
    bad = []
    replies = {}
    for who, start in (("reference", ctx.reference), ("server", ctx.server)):
        name = "f-" + who
        ctx.write(name, b"0123456789")
        srv = start()
        h = srv.open(name, SSH_FXF_READ | SSH_FXF_WRITE)
        out = []
        for off in (1 << 40, 1 << 62, (1 << 63) - 1, 1 << 63,
                    (1 << 64) - 1):
            for label, req in (("READ", req_read(h, off, 5)),
                               ("WRITE", req_write(h, off, b"x"))):
                out.append(("%s at 0x%x" % (label, off),
                            short(srv.call(req))))
        replies[who] = out
    for (label, want), (_, got) in zip(replies["reference"],
                                       replies["server"]):
        if want != got:
            bad.append("%s: expected %s, got %s" % (label, want, got))
    expect(not bad, "; ".join(bad))


# ---------------------------------------------------------------------------
# WRITE


@test
def test_write_then_read_back(ctx):
    srv = ctx.server()
    h = srv.open("w", SSH_FXF_READ | SSH_FXF_WRITE | SSH_FXF_CREAT)
    expect_status(srv.call(req_write(h, 0, b"hello world")), SSH_FX_OK,
                  "WRITE at 0")
    expect_status(srv.call(req_write(h, 6, b"WORLD!")), SSH_FX_OK,
                  "WRITE at 6")
    expect_status(srv.call(req_write(h, 3, b"")), SSH_FX_OK,
                  "WRITE of 0 bytes")
    expect_data(srv.call(req_read(h, 0, 100)), b"hello WORLD!",
                "READ back")
    expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")
    expect_eq("file contents", ctx.read("w"), b"hello WORLD!")


@test
def test_write_sparse_beyond_eof(ctx):
    srv = ctx.server()
    h = srv.open("s", SSH_FXF_READ | SSH_FXF_WRITE | SSH_FXF_CREAT)
    expect_status(srv.call(req_write(h, 0, b"ab")), SSH_FX_OK, "WRITE 0")
    expect_status(srv.call(req_write(h, 100000, b"xyz")), SSH_FX_OK,
                  "WRITE at 100000")
    expect_status(srv.call(req_write(h, 5 << 30, b"end")), SSH_FX_OK,
                  "WRITE at 5 GiB")
    expect_data(srv.call(req_read(h, 0, 100003)),
                b"ab" + bytes(99998) + b"xyz", "READ back the hole")
    expect_data(srv.call(req_read(h, (5 << 30) - 2, 10)),
                b"\0\0end", "READ back at 5 GiB")
    expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")
    expect_eq("file size", os.stat(ctx.path("s")).st_size, (5 << 30) + 3)


@test
def test_write_large_blocks(ctx):
    data = random.Random(3).randbytes(3 * 261120 + 17)
    srv = ctx.server()
    h = srv.open("big", SSH_FXF_WRITE | SSH_FXF_CREAT)
    reqs = [req_write(h, off, data[off:off + 261120])
            for off in range(0, len(data), 261120)]
    ids = srv.send_many(reqs)
    for rid in ids:
        expect_status(srv.recv(), SSH_FX_OK, "WRITE", rid)
    expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")
    expect(ctx.read("big") == data, "file differs from the WRITEs")


@test
def test_open_append_ignores_offset(ctx):
    ctx.write("a", b"start")
    srv = ctx.server()
    h = srv.open("a", SSH_FXF_WRITE | SSH_FXF_APPEND)
    expect_status(srv.call(req_write(h, 0, b"-one")), SSH_FX_OK, "WRITE 0")
    expect_status(srv.call(req_write(h, 2, b"-two")), SSH_FX_OK, "WRITE 2")
    expect_status(srv.call(req_write(h, 1000, b"-three")), SSH_FX_OK,
                  "WRITE 1000")
    expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")
    expect_eq("file contents", ctx.read("a"), b"start-one-two-three")


# ---------------------------------------------------------------------------
# OPEN


@test
def test_open_creat_excl_existing(ctx):
    ctx.write("e", b"keep")
    srv = ctx.server()
    expect_status(srv.call(req_open("e", SSH_FXF_WRITE | SSH_FXF_CREAT |
                                    SSH_FXF_EXCL)),
                  SSH_FX_FAILURE, "OPEN CREAT|EXCL of an existing file")
    expect_eq("file contents", ctx.read("e"), b"keep")


@test
def test_open_creat_excl_new(ctx):
    srv = ctx.server()
    h = srv.open("n", SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_EXCL)
    expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")
    expect(os.path.isfile(ctx.path("n")), "file was not created")


@test
def test_open_missing_for_read(ctx):
    srv = ctx.server()
    expect_status(srv.call(req_open("missing", SSH_FXF_READ)),
                  SSH_FX_NO_SUCH_FILE, "OPEN of a missing file")
    expect_status(srv.call(req_open("missing/x", SSH_FXF_READ)),
                  SSH_FX_NO_SUCH_FILE, "OPEN of missing/x")
    expect_status(srv.call(req_open("nodir/x", SSH_FXF_WRITE |
                                    SSH_FXF_CREAT)),
                  SSH_FX_NO_SUCH_FILE, "OPEN CREAT in a missing directory")
    expect(not os.path.exists(ctx.path("missing")), "file was created")


@test
def test_open_trunc(ctx):
    ctx.write("t", b"old contents")
    srv = ctx.server()
    h = srv.open("t", SSH_FXF_WRITE | SSH_FXF_TRUNC)
    expect_eq("size after OPEN TRUNC", os.stat(ctx.path("t")).st_size, 0)
    expect_status(srv.call(req_write(h, 0, b"new")), SSH_FX_OK, "WRITE")
    expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")
    expect_eq("file contents", ctx.read("t"), b"new")


@test
def test_open_without_trunc_keeps_data(ctx):
    ctx.write("k", b"0123456789")
    srv = ctx.server()
    h = srv.open("k", SSH_FXF_WRITE)
    expect_status(srv.call(req_write(h, 2, b"ab")), SSH_FX_OK, "WRITE")
    expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")
    expect_eq("file contents", ctx.read("k"), b"01ab456789")


@test
def test_open_write_on_read_handle_fails(ctx):
    ctx.write("r", b"0123")
    srv = ctx.server()
    h = srv.open("r", SSH_FXF_READ)
    reply = srv.call(req_write(h, 0, b"xx"))
    expect_type(reply, Status, "WRITE on a read-only handle")
    expect(reply.code != SSH_FX_OK, "WRITE on a read-only handle succeeded")
    expect_eq("file contents", ctx.read("r"), b"0123")


def make_open_mode_test(perm, want, args=(), umask=UMASK):
    def run(ctx):
        srv = ctx.server(args=args, umask=umask)
        attrs = None if perm is None else Attrs(permissions=perm)
        h = srv.open("m", SSH_FXF_WRITE | SSH_FXF_CREAT, attrs)
        expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")
        expect_eq("mode of the new file",
                  oct(os.stat(ctx.path("m")).st_mode), oct(0o100000 | want))
    return run


add_test("open_mode_640", make_open_mode_test(0o640, 0o640))
add_test("open_mode_777_umask_022", make_open_mode_test(0o777, 0o755))
add_test("open_mode_default_666_umask_022", make_open_mode_test(None, 0o644))
add_test("open_mode_umask_option_077",
         make_open_mode_test(0o666, 0o600, args=["-u", "077"]))
add_test("open_mode_umask_0", make_open_mode_test(0o606, 0o606, umask=0))


@test
def test_open_flags_zero_reads(ctx):
    ctx.write("z", b"zero flags")
    srv = ctx.server()
    h = srv.open("z", 0)
    expect_data(srv.call(req_read(h, 0, 100)), b"zero flags",
                "READ on a handle opened with pflags 0")
    h2 = srv.open("z", SSH_FXF_READ | SSH_FXF_WRITE)
    expect_status(srv.call(req_write(h2, 0, b"ZERO")), SSH_FX_OK, "WRITE")
    expect_data(srv.call(req_read(h2, 0, 100)), b"ZERO flags",
                "READ on a READ|WRITE handle")


@test
def test_non_utf8_names_round_trip(ctx):
    name = b"\xff\xfe-caf\xe9 \x01.bin"
    srv = ctx.server()
    h = srv.open(name, SSH_FXF_WRITE | SSH_FXF_CREAT)
    expect_status(srv.call(req_write(h, 0, b"bytes")), SSH_FX_OK, "WRITE")
    expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")
    p = os.path.join(os.fsencode(ctx.cwd), name)
    expect_eq("names on disk", os.listdir(os.fsencode(ctx.cwd)), [name])
    expect_attrs_of(srv.call(req_stat(name)), os.stat(p), "STAT")
    expect_name1(srv.call(req_realpath(name)),
                 os.path.join(os.fsencode(ctx.cwd), name), "REALPATH")
    expect_status(srv.call(req_rename(name, name + b"\x80")), SSH_FX_OK,
                  "RENAME")
    expect_eq("names on disk", os.listdir(os.fsencode(ctx.cwd)),
              [name + b"\x80"])


@test
def test_open_mode_ignored_for_existing(ctx):
    ctx.write("x", b"", mode=0o600)
    srv = ctx.server()
    h = srv.open("x", SSH_FXF_WRITE | SSH_FXF_CREAT,
                 Attrs(permissions=0o777))
    expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")
    expect_eq("mode", oct(os.stat(ctx.path("x")).st_mode), oct(0o100600))


# ---------------------------------------------------------------------------
# STAT / LSTAT / FSTAT


def stat_tree(ctx):
    ctx.write("f", b"some bytes", mode=0o640, mtime=1234567890)
    os.utime(ctx.path("f"), (1111111111, 1234567890))
    os.mkdir(ctx.path("d"), 0o751)
    os.symlink("f", ctx.path("l"))
    os.symlink("nowhere", ctx.path("dangling"))


@test
def test_stat_file(ctx):
    stat_tree(ctx)
    srv = ctx.server()
    expect_attrs_of(srv.call(req_stat("f")), os.stat(ctx.path("f")),
                    "STAT f")
    expect_attrs_of(srv.call(req_lstat("f")), os.lstat(ctx.path("f")),
                    "LSTAT f")


@test
def test_stat_directory(ctx):
    stat_tree(ctx)
    srv = ctx.server()
    expect_attrs_of(srv.call(req_stat("d")), os.stat(ctx.path("d")),
                    "STAT d")
    expect_attrs_of(srv.call(req_stat(".")), os.stat(ctx.cwd), "STAT .")
    expect_attrs_of(srv.call(req_stat(ctx.cwd)), os.stat(ctx.cwd),
                    "STAT of the absolute cwd")


@test
def test_lstat_symlink(ctx):
    stat_tree(ctx)
    srv = ctx.server()
    reply = srv.call(req_lstat("l"))
    expect_attrs_of(reply, os.lstat(ctx.path("l")), "LSTAT l")
    expect(stat.S_ISLNK(reply.attrs.permissions),
           "LSTAT of a link: mode %o is not S_IFLNK" % reply.attrs.permissions)
    expect_attrs_of(srv.call(req_lstat("dangling")),
                    os.lstat(ctx.path("dangling")), "LSTAT dangling")


@test
def test_stat_follows_symlink(ctx):
    stat_tree(ctx)
    srv = ctx.server()
    expect_attrs_of(srv.call(req_stat("l")), os.stat(ctx.path("f")),
                    "STAT l")
    expect_status(srv.call(req_stat("dangling")), SSH_FX_NO_SUCH_FILE,
                  "STAT of a dangling link")


@test
def test_stat_missing(ctx):
    stat_tree(ctx)
    srv = ctx.server()
    for p in ("missing", "missing/x", "f/x"):
        expect_status(srv.call(req_stat(p)), SSH_FX_NO_SUCH_FILE,
                      "STAT %s" % p)
        expect_status(srv.call(req_lstat(p)), SSH_FX_NO_SUCH_FILE,
                      "LSTAT %s" % p)
    expect_status(srv.call(req_stat("")), SSH_FX_NO_SUCH_FILE,
                  "STAT of the empty path")


@test
def test_fstat(ctx):
    stat_tree(ctx)
    srv = ctx.server()
    h = srv.open("f", SSH_FXF_READ)
    expect_attrs_of(srv.call(req_fstat(h)), os.stat(ctx.path("f")), "FSTAT")
    h2 = srv.open("l", SSH_FXF_READ)
    expect_attrs_of(srv.call(req_fstat(h2)), os.stat(ctx.path("f")),
                    "FSTAT through a link")


# ---------------------------------------------------------------------------
# SETSTAT / FSETSTAT


def setstat_cases(ctx, srv, apply, path):
    """Run the SETSTAT checks; apply(attrs) sends the request."""
    what = "size"
    expect_status(apply(Attrs(size=3)), SSH_FX_OK, what)
    expect_eq(what, os.stat(path).st_size, 3)
    expect_status(apply(Attrs(size=100000)), SSH_FX_OK, "grow")
    expect_eq("grown size", os.stat(path).st_size, 100000)
    expect_eq("contents", open(path, "rb").read(8), b"012\0\0\0\0\0")
    expect_status(apply(Attrs(permissions=0o604)), SSH_FX_OK, "chmod")
    expect_eq("mode", oct(os.stat(path).st_mode), oct(0o100604))
    expect_status(apply(Attrs(permissions=0o4755)), SSH_FX_OK, "chmod 4755")
    expect_eq("mode", oct(os.stat(path).st_mode), oct(0o104755))
    expect_status(apply(Attrs(atime=1000000000, mtime=1100000000)),
                  SSH_FX_OK, "utimes")
    st = os.stat(path)
    expect_eq("atime", st.st_atime, 1000000000)
    expect_eq("mtime", st.st_mtime, 1100000000)
    expect_status(apply(Attrs(uid=os.getuid(), gid=os.getgid())),
                  SSH_FX_OK, "chown to own ids")
    st = os.stat(path)
    expect_eq("uid", st.st_uid, os.getuid())
    expect_eq("gid", st.st_gid, os.getgid())
    expect_status(apply(Attrs(size=1, permissions=0o600, atime=5, mtime=6)),
                  SSH_FX_OK, "all at once")
    st = os.stat(path)
    expect_eq("size/mode/atime/mtime",
              (st.st_size, oct(st.st_mode), st.st_atime, st.st_mtime),
              (1, oct(0o100600), 5, 6))
    expect_status(apply(Attrs()), SSH_FX_OK, "empty attrs")


@test
def test_setstat(ctx):
    p = ctx.write("f", b"0123456789")
    srv = ctx.server()
    setstat_cases(ctx, srv, lambda a: srv.call(req_setstat("f", a)), p)


@test
def test_setstat_follows_symlink(ctx):
    p = ctx.write("f", b"0123456789", mode=0o644)
    os.symlink("f", ctx.path("l"))
    srv = ctx.server()
    expect_status(srv.call(req_setstat("l", Attrs(permissions=0o600))),
                  SSH_FX_OK, "SETSTAT through a link")
    expect_eq("target mode", oct(os.stat(p).st_mode), oct(0o100600))


@test
def test_setstat_missing(ctx):
    srv = ctx.server()
    for a in (Attrs(size=1), Attrs(permissions=0o600),
              Attrs(atime=1, mtime=2), Attrs(uid=os.getuid(),
                                             gid=os.getgid())):
        expect_status(srv.call(req_setstat("missing", a)),
                      SSH_FX_NO_SUCH_FILE, "SETSTAT %r of a missing file" % a)
    expect(not os.path.exists(ctx.path("missing")), "file was created")


@test
def test_fsetstat(ctx):
    p = ctx.write("f", b"0123456789")
    srv = ctx.server()
    h = srv.open("f", SSH_FXF_READ | SSH_FXF_WRITE)
    setstat_cases(ctx, srv, lambda a: srv.call(req_fsetstat(h, a)), p)


# ---------------------------------------------------------------------------
# OPENDIR / READDIR


@test
def test_readdir_of_a_directory_renamed_after_opendir(ctx):
    # A documented difference (README): the entries are looked up through
    # the open directory, so they are listed; OpenSSH's server looks them up
    # by the path it opened, finds none and answers EOF.
    names = {}
    for who, start in (("server", ctx.server), ("reference", ctx.reference)):
        os.mkdir(ctx.path(who))
        for n in ("a", "b", "c"):
            ctx.write(os.path.join(who, n))
        srv = start()
        h = srv.opendir(who)
        os.rename(ctx.path(who), ctx.path(who + ".moved"))
        batches, end = srv.readdir_all(h)
        expect_status(end, SSH_FX_EOF, "%s: READDIR at the end" % who)
        names[who] = sorted(e.filename for b in batches for e in b.entries)
        expect_eq("%s: exit status" % who, srv.close(), 0)
    expect_eq("entries listed after the rename", names["server"],
              [b".", b"..", b"a", b"b", b"c"])
    expect_eq("entries OpenSSH's server lists after the rename",
              names["reference"], [])


@test
def test_readdir_250_files(ctx):
    os.mkdir(ctx.path("d"))
    names = ["file%03d" % i for i in range(250)]
    for n in names:
        ctx.write(os.path.join("d", n), n.encode())
    srv = ctx.server()
    h = srv.opendir("d")
    batches, end = srv.readdir_all(h)
    expect_status(end, SSH_FX_EOF, "READDIR after the last entry")
    sizes = [len(b.entries) for b in batches]
    expect(all(0 < s <= 100 for s in sizes),
           "NAME batch sizes %r, expected 1..100 each" % sizes)
    got = [e.filename for b in batches for e in b.entries]
    expect_eq("number of entries", len(got), 252)
    expect_eq("names", sorted(got),
              sorted([b".", b".."] + [os.fsencode(n) for n in names]))
    expect_status(srv.call(req_readdir(h)), SSH_FX_EOF, "READDIR again")
    expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")


@test
def test_readdir_attrs_match_lstat(ctx):
    os.mkdir(ctx.path("d"))
    ctx.write("d/f", b"12345", mode=0o640, mtime=1500000000)
    os.mkdir(ctx.path("d/sub"), 0o700)
    os.symlink("f", ctx.path("d/l"))
    os.symlink("nowhere", ctx.path("d/dangling"))
    os.mkfifo(ctx.path("d/fifo"))
    ctx.write("d/with space", b"")
    ctx.write("d/caf\xe9".encode("latin-1").decode("utf-8", "surrogateescape"),
              b"non-utf8")
    srv = ctx.server()
    h = srv.opendir("d")
    batches, end = srv.readdir_all(h)
    expect_status(end, SSH_FX_EOF, "end of READDIR")
    entries = [e for b in batches for e in b.entries]
    expect_eq("names", sorted(e.filename for e in entries),
              sorted([b".", b".."] + os.listdir(os.fsencode(ctx.path("d")))))
    for e in entries:
        st = os.lstat(os.path.join(os.fsencode(ctx.path("d")), e.filename))
        expect_eq("attrs flags of %r" % e.filename, e.attrs.flags, 0x0F)
        expect_eq("attrs of %r" % e.filename, e.attrs, Attrs.from_stat(st))


@test
def test_readdir_empty_dir(ctx):
    os.mkdir(ctx.path("e"))
    srv = ctx.server()
    h = srv.opendir("e")
    batches, end = srv.readdir_all(h)
    expect_status(end, SSH_FX_EOF, "end of READDIR")
    expect_eq("names", sorted(e.filename for b in batches for e in b.entries),
              [b".", b".."])


@test
def test_opendir_missing(ctx):
    srv = ctx.server()
    expect_status(srv.call(req_opendir("missing")), SSH_FX_NO_SUCH_FILE,
                  "OPENDIR of a missing directory")


@test
def test_opendir_regular_file(ctx):
    ctx.write("f", b"x")
    srv = ctx.server()
    expect_status(srv.call(req_opendir("f")), SSH_FX_NO_SUCH_FILE,
                  "OPENDIR of a regular file")


# ---------------------------------------------------------------------------
# Long names, compared with the reference server


def long_name_user(min_len=9):
    """A passwd entry whose name is longer than 8 characters, if any."""
    for p in pwd.getpwall():
        if len(p.pw_name) >= min_len:
            try:
                grp.getgrgid(p.pw_gid)
            except KeyError:
                continue
            return p
    return None


def build_longname_tree(ctx, top):
    d = ctx.path(top)
    os.mkdir(d)
    now = time.time()
    w = lambda n, data=b"", **kw: ctx.write(os.path.join(top, n), data, **kw)
    w("empty")
    w("five", b"12345")
    big = w("big")
    os.truncate(big, 123456789)
    os.mkdir(os.path.join(d, "dir"))
    os.mkdir(os.path.join(d, "sticky"))
    os.chmod(os.path.join(d, "sticky"), 0o1777)
    os.mkdir(os.path.join(d, "sticky_noexec"))
    os.chmod(os.path.join(d, "sticky_noexec"), 0o1776)
    os.symlink("five", os.path.join(d, "link"))
    w("suid", b"#!", mode=0o4755)
    w("suid_noexec", mode=0o4644)
    w("sgid", mode=0o2755)
    w("sgid_noexec", mode=0o2644)
    w("nomode", mode=0)
    w("allmode", mode=0o7777)
    w("old", b"old", mtime=now - 2 * 365 * 86400)
    w("halfyear", mtime=now - 200 * 86400)
    w("recent", mtime=now - 30 * 86400)
    w("new", b"new", mtime=now - 2)
    w("soon", mtime=now + 60)
    w("future", mtime=now + 3 * 86400)
    w("epoch", mtime=0)
    w("with space", b"s")
    w("tab\tname")
    hl = w("hard")
    os.link(hl, os.path.join(d, "hard2"))
    os.mkfifo(os.path.join(d, "fifo"))
    w("x" * 200)
    if os.geteuid() == 0:
        unk = w("unknown_owner")
        os.chown(unk, 4242, 4243)
        lu = long_name_user()
        if lu is not None:
            lf = w("long_owner")
            os.chown(lf, lu.pw_uid, lu.pw_gid)
    # Entries not dated above get a time an hour ago.  Left at their
    # creation time they could be a moment ahead of time(2) when the
    # reference reads them (file times are finer than the clock time(2)
    # reads), and the reference would print a year where the server,
    # started later, prints the time of day.
    timed = {"old", "halfyear", "recent", "new", "future", "epoch", "soon"}
    for n in os.listdir(d):
        if n not in timed:
            os.utime(os.path.join(d, n), (now - 3600, now - 3600),
                     follow_symlinks=False)
    # The listing's ".." too: the scratch directory, changed by mkdir above.
    for x in (d, os.path.dirname(d)):
        os.utime(x, (now - 100, now - 100))


def listing(srv, path):
    h = srv.opendir(path)
    batches, end = srv.readdir_all(h)
    expect_status(end, SSH_FX_EOF, "end of READDIR")
    expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")
    return sorted((e.filename, e.longname) for b in batches for e in b.entries)


def make_longname_test(tz):
    def run(ctx):
        build_longname_tree(ctx, "t")
        env = dict(os.environ, TZ=tz, LC_ALL="C", LANG="C")
        want = listing(ctx.reference(env=env), "t")
        got = listing(ctx.server(env=env), "t")
        expect_eq("entry names", [n for n, _ in got], [n for n, _ in want])
        bad = ["longname of %r: expected %r, got %r" % (name, r, g)
               for (name, g), (_, r) in zip(got, want) if g != r]
        expect(not bad, "; ".join(bad))
    return run


add_test("longname_matches_reference", make_longname_test(
    "EST5EDT,M3.2.0,M11.1.0"))
add_test("longname_matches_reference_utc", make_longname_test("UTC0"))
add_test("longname_matches_reference_far_east", make_longname_test("XYZ-13"))


# ---------------------------------------------------------------------------
# REMOVE / MKDIR / RMDIR / RENAME / READLINK / SYMLINK


@test
def test_remove(ctx):
    ctx.write("f", b"x")
    os.symlink("f", ctx.path("l"))
    srv = ctx.server()
    expect_status(srv.call(req_remove("l")), SSH_FX_OK, "REMOVE link")
    expect(os.path.exists(ctx.path("f")), "REMOVE of a link removed target")
    expect_status(srv.call(req_remove("f")), SSH_FX_OK, "REMOVE file")
    expect(not os.path.lexists(ctx.path("f")), "file still there")
    expect_status(srv.call(req_remove("f")), SSH_FX_NO_SUCH_FILE,
                  "REMOVE again")


@test
def test_remove_directory_fails(ctx):
    os.mkdir(ctx.path("d"))
    srv = ctx.server()
    reply = expect_type(srv.call(req_remove("d")), Status, "REMOVE dir")
    expect(reply.code in (SSH_FX_FAILURE, SSH_FX_PERMISSION_DENIED),
           "REMOVE of a directory: expected FAILURE, got %r" % reply)
    expect(os.path.isdir(ctx.path("d")), "directory was removed")


@test
def test_mkdir(ctx):
    srv = ctx.server()
    expect_status(srv.call(req_mkdir("a", Attrs(permissions=0o750))),
                  SSH_FX_OK, "MKDIR 750")
    expect_eq("mode", oct(os.stat(ctx.path("a")).st_mode), oct(0o40750))
    expect_status(srv.call(req_mkdir("b", Attrs(permissions=0o777))),
                  SSH_FX_OK, "MKDIR 777")
    expect_eq("mode", oct(os.stat(ctx.path("b")).st_mode), oct(0o40755))
    expect_status(srv.call(req_mkdir("c")), SSH_FX_OK, "MKDIR no attrs")
    expect_eq("mode", oct(os.stat(ctx.path("c")).st_mode), oct(0o40755))
    expect_status(srv.call(req_mkdir("a/sub", Attrs(permissions=0o700))),
                  SSH_FX_OK, "MKDIR a/sub")
    expect_eq("mode", oct(os.stat(ctx.path("a/sub")).st_mode), oct(0o40700))


@test
def test_mkdir_existing_and_missing_parent(ctx):
    os.mkdir(ctx.path("d"))
    ctx.write("f")
    srv = ctx.server()
    expect_status(srv.call(req_mkdir("d")), SSH_FX_FAILURE, "MKDIR existing")
    expect_status(srv.call(req_mkdir("f")), SSH_FX_FAILURE,
                  "MKDIR over a file")
    expect_status(srv.call(req_mkdir("no/sub")), SSH_FX_NO_SUCH_FILE,
                  "MKDIR in a missing directory")


@test
def test_rmdir(ctx):
    os.mkdir(ctx.path("e"))
    os.mkdir(ctx.path("full"))
    ctx.write("full/f")
    ctx.write("f")
    srv = ctx.server()
    expect_status(srv.call(req_rmdir("e")), SSH_FX_OK, "RMDIR empty")
    expect(not os.path.exists(ctx.path("e")), "directory still there")
    expect_status(srv.call(req_rmdir("full")), SSH_FX_FAILURE,
                  "RMDIR non-empty")
    expect(os.path.exists(ctx.path("full/f")), "contents removed")
    expect_status(srv.call(req_rmdir("e")), SSH_FX_NO_SUCH_FILE,
                  "RMDIR missing")
    expect_status(srv.call(req_rmdir("f")), SSH_FX_NO_SUCH_FILE,
                  "RMDIR of a file")


@test
def test_rename_to_new_name(ctx):
    ctx.write("a", b"contents of a")
    srv = ctx.server()
    expect_status(srv.call(req_rename("a", "b")), SSH_FX_OK, "RENAME")
    expect(not os.path.lexists(ctx.path("a")), "old name still there")
    expect_eq("contents of new name", ctx.read("b"), b"contents of a")
    expect_status(srv.call(req_rename("a", "c")), SSH_FX_NO_SUCH_FILE,
                  "RENAME of a missing file")


@test
def test_rename_target_exists(ctx):
    ctx.write("a", b"A")
    ctx.write("b", b"B")
    os.mkdir(ctx.path("d1"))
    os.mkdir(ctx.path("d2"))
    srv = ctx.server()
    expect_status(srv.call(req_rename("a", "b")), SSH_FX_FAILURE,
                  "RENAME onto an existing file")
    expect_eq("old file", ctx.read("a"), b"A")
    expect_eq("target file", ctx.read("b"), b"B")
    expect_status(srv.call(req_rename("d1", "d2")), SSH_FX_FAILURE,
                  "RENAME a directory onto an existing one")
    expect(os.path.isdir(ctx.path("d1")), "d1 vanished")
    expect_status(srv.call(req_rename("a", "d2")), SSH_FX_FAILURE,
                  "RENAME a file onto an existing directory")


@test
def test_rename_directory_and_symlink(ctx):
    os.mkdir(ctx.path("d"))
    ctx.write("d/f", b"inside")
    os.symlink("nowhere", ctx.path("l"))
    srv = ctx.server()
    expect_status(srv.call(req_rename("d", "e")), SSH_FX_OK,
                  "RENAME directory")
    expect_eq("file in renamed directory", ctx.read("e/f"), b"inside")
    expect(not os.path.exists(ctx.path("d")), "old directory still there")
    expect_status(srv.call(req_rename("l", "l2")), SSH_FX_OK,
                  "RENAME dangling symlink")
    expect_eq("link target", os.readlink(ctx.path("l2")), "nowhere")


@test
def test_readlink(ctx):
    os.symlink("some/target", ctx.path("l"))
    os.symlink("/abs/x y", ctx.path("l2"))
    ctx.write("f")
    srv = ctx.server()
    expect_name1(srv.call(req_readlink("l")), "some/target", "READLINK l")
    expect_name1(srv.call(req_readlink("l2")), "/abs/x y", "READLINK l2")
    expect_status(srv.call(req_readlink("f")), SSH_FX_BAD_MESSAGE,
                  "READLINK of a regular file")
    expect_status(srv.call(req_readlink("missing")), SSH_FX_NO_SUCH_FILE,
                  "READLINK of a missing path")


@test
def test_symlink_openssh_order(ctx):
    ctx.write("target", b"t")
    srv = ctx.server()
    expect_status(srv.call(req_symlink("target", "link")), SSH_FX_OK,
                  "SYMLINK")
    expect(os.path.islink(ctx.path("link")), "link was not created")
    expect_eq("link target", os.readlink(ctx.path("link")), "target")
    expect(not os.path.islink(ctx.path("target")), "target became a link")
    expect_status(srv.call(req_symlink("nowhere/at/all", "dangling")),
                  SSH_FX_OK, "SYMLINK to a missing target")
    expect_eq("dangling target", os.readlink(ctx.path("dangling")),
              "nowhere/at/all")
    expect_status(srv.call(req_symlink("x", "target")), SSH_FX_FAILURE,
                  "SYMLINK over an existing file")


# ---------------------------------------------------------------------------
# REALPATH


def realpath_tree(ctx):
    ctx.write("file", b"x")
    os.mkdir(ctx.path("dir"))
    os.mkdir(ctx.path("dir/sub"))
    os.symlink("dir", ctx.path("dirlink"))
    os.symlink("nowhere", ctx.path("dangling"))
    os.symlink("loop", ctx.path("loop"))
    os.symlink(ctx.path("dir/sub"), ctx.path("abslink"))


@test
def test_realpath(ctx):
    realpath_tree(ctx)
    srv = ctx.server()
    cwd = ctx.cwd
    for arg, want in (("", cwd), (".", cwd), ("./", cwd),
                      ("nonexist", cwd + "/nonexist"),
                      ("..", os.path.dirname(cwd)),
                      ("dir/..", cwd), ("dir/sub/../..", cwd),
                      ("dir/./sub", cwd + "/dir/sub"),
                      ("dirlink", cwd + "/dir"),
                      ("dirlink/sub", cwd + "/dir/sub"),
                      ("abslink", cwd + "/dir/sub"),
                      ("file", cwd + "/file"),
                      (cwd, cwd), ("/", "/"), ("/..", "/"),
                      (cwd + "//dir///sub/", cwd + "/dir/sub")):
        expect_name1(srv.call(req_realpath(arg)), want, "REALPATH %r" % arg)
    for arg in ("nonexist/x", "nonexist/", "file/x", "dir/nonexist/x"):
        expect_status(srv.call(req_realpath(arg)), SSH_FX_NO_SUCH_FILE,
                      "REALPATH %r" % arg)


REALPATH_INPUTS = [
    "", ".", "./", "..", "../..", "/", "//", "/..", "/./", "nonexist",
    "nonexist/x", "nonexist/", "file", "file/", "file/x", "file/.",
    "file/..", "dir", "dir/", "dir/.", "dir/..", "dir/sub/..", "dir//sub",
    "dir/nonexist", "dir/nonexist/", "dirlink", "dirlink/", "dirlink/..",
    "dirlink/sub", "abslink", "abslink/..", "dangling", "dangling/",
    "dangling/x", "loop", "loop/x", "a b", "dir/../nonexist",
    "nonexist/..", "/nonexistent-top-dir-xyz", "/nonexistent-top-dir-xyz/x",
    "x" * 300, ("y" * 255 + "/") * 20,
]


@test
def test_realpath_matches_reference(ctx):
    realpath_tree(ctx)
    ref = ctx.reference()
    srv = ctx.server()
    bad = []
    for arg in REALPATH_INPUTS + [ctx.cwd, ctx.cwd + "/dir/../file"]:
        want = ref.call(req_realpath(arg))
        got = srv.call(req_realpath(arg))
        if (got.type, got.raw[5:]) != (want.type, want.raw[5:]):
            bad.append("REALPATH %r: expected %s, got %s" %
                       (arg[:60], short(want), short(got)))
    expect(not bad, "; ".join(bad))


def short(reply):
    """A reply in few words, for messages listing many of them."""
    if isinstance(reply, Status):
        return STATUS_NAMES.get(reply.code, str(reply.code))
    if isinstance(reply, Name) and len(reply.entries) == 1:
        return "NAME %r" % reply.entries[0].filename
    return repr(reply)


# ---------------------------------------------------------------------------
# Restricted modes (-R, -p, -P), compared with the reference server


def reply_shape(reply):
    """What must be equal between two servers: handles and extended
    replies are compared by type only (their bytes may differ)."""
    if isinstance(reply, (Handle, ExtendedReply)):
        return reply.type_name
    return (reply.type_name, reply.raw[5:])


def restricted_setup(d):
    """Files with fixed times; atimes in the future so reads keep them.

    The times are constants, so that two trees set up a second apart (one
    for each server compared) are alike.
    """
    for n in ("f", "t"):
        with open(os.path.join(d, n), "wb") as f:
            f.write(b"0123456789")
    os.mkdir(os.path.join(d, "sub"))
    os.symlink("f", os.path.join(d, "l"))
    atime = 4000000000
    for n in ("f", "t", "sub", "l", "."):
        os.utime(os.path.join(d, n), (atime, 1500000000),
                 follow_symlinks=False)


def restricted_script(srv):
    """Every kind of request, mutating ones included; (label, reply)s."""
    out = []

    def call(label, req):
        out.append((label, srv.call(req)))
        return out[-1][1]

    for label, fl in (("OPEN WRITE", SSH_FXF_WRITE),
                      ("OPEN READ|APPEND", SSH_FXF_READ | SSH_FXF_APPEND),
                      ("OPEN READ|CREAT", SSH_FXF_READ | SSH_FXF_CREAT),
                      ("OPEN READ|TRUNC", SSH_FXF_READ | SSH_FXF_TRUNC),
                      ("OPEN 0", 0), ("OPEN READ|WRITE", SSH_FXF_READ |
                                      SSH_FXF_WRITE)):
        r = call(label, req_open("t", fl))
        if isinstance(r, Handle):
            call("CLOSE after " + label, req_close(r.handle))
    r = call("OPEN READ", req_open("f", SSH_FXF_READ))
    h = r.handle if isinstance(r, Handle) else b"none"
    call("READ", req_read(h, 0, 4))
    call("WRITE", req_write(h, 0, b"xx"))
    call("FSTAT", req_fstat(h))
    call("FSETSTAT", req_fsetstat(h, Attrs(permissions=0o600)))
    call("fsync", req_fsync(h))
    call("fstatvfs", req_fstatvfs(h))
    call("copy-data", req_copy_data(h, 0, 2, h, 0))
    call("STAT", req_stat("f"))
    call("LSTAT", req_lstat("l"))
    call("READLINK", req_readlink("l"))
    call("SETSTAT", req_setstat("f", Attrs(permissions=0o604)))
    call("lsetstat", req_lsetstat("f", Attrs(permissions=0o606)))
    r = call("OPENDIR", req_opendir("sub"))
    if isinstance(r, Handle):
        call("READDIR", req_readdir(r.handle))
        call("CLOSE dir", req_close(r.handle))
    call("MKDIR", req_mkdir("newdir"))
    call("RMDIR", req_rmdir("sub"))
    call("SYMLINK", req_symlink("f", "l2"))
    call("hardlink", req_hardlink("f", "h"))
    call("RENAME", req_rename("f", "g"))
    call("posix-rename", req_posix_rename("l", "l3"))
    call("REMOVE", req_remove("l"))
    call("statvfs", req_statvfs("."))
    call("limits", req_limits())
    call("users-groups-by-id", req_users_groups_by_id([0], [0]))
    call("CLOSE", req_close(h))
    return out


def make_restricted_test(args):
    def run(ctx):
        results = {}
        for who, start in (("reference", ctx.reference),
                           ("server", ctx.server)):
            d = ctx.path(who)
            os.mkdir(d)
            restricted_setup(d)
            srv = start(args=args, cwd=d, init=False)
            v = srv.init()
            # Documented exception: check-file is this server's own.
            replies = [("VERSION", without_own_extensions(v.extensions))]
            replies += [(label, reply_shape(r))
                        for label, r in restricted_script(srv)]
            results[who] = (replies, tree_snapshot(d))
        (want, want_tree), (got, got_tree) = (results["reference"],
                                              results["server"])
        bad = ["%s: expected %r, got %r" % (lw, rw, rg)
               for (lw, rw), (_, rg) in zip(want, got) if rw != rg]
        expect(not bad, "; ".join(bad))
        expect_eq("files afterwards", got_tree, want_tree)
    return run


add_test("readonly_matches_reference", make_restricted_test(["-R"]))
add_test("allowlist_matches_reference", make_restricted_test(
    ["-p", "open,close,read,fstat,opendir,readdir,stat,limits,rename"]))
add_test("denylist_matches_reference", make_restricted_test(
    ["-P", "write,remove,posix-rename,fsync,copy-data,mkdir"]))
add_test("no_restriction_matches_reference", make_restricted_test([]))


# ---------------------------------------------------------------------------
# Status messages, unknown requests


@test
def test_status_messages(ctx):
    ctx.write("f", b"abc")
    os.mkdir(ctx.path("d"))
    ctx.write("d/x")
    srv = ctx.server()
    h = srv.open("f", SSH_FXF_READ)
    expect_status(srv.call(req_fstat(b"")), SSH_FX_FAILURE, "FSTAT bad")
    expect_status(srv.call(req_read(h, 3, 1)), SSH_FX_EOF, "READ at EOF")
    expect_status(srv.call(req_stat("nope")), SSH_FX_NO_SUCH_FILE, "STAT")
    expect_status(srv.call(req_hardlink("d", "d2")),
                  SSH_FX_PERMISSION_DENIED, "hardlink of a directory")
    expect_status(srv.call(req_rmdir("d")), SSH_FX_FAILURE, "RMDIR")
    expect_status(srv.call(req_readlink("f")), SSH_FX_BAD_MESSAGE,
                  "READLINK of a file")
    expect_status(srv.call(req_extended("nosuch@example.com")),
                  SSH_FX_OP_UNSUPPORTED, "unknown EXTENDED")
    expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")


@test
def test_unknown_packet_type(ctx):
    srv = ctx.server()
    for ptype in (99, 0, 2, 21, 101, 105, 199, 201, 255):
        rid = 0x5A000000 + ptype
        srv.send_raw(frame(u8(ptype) + u32(rid)))
        expect_status(srv.recv(), SSH_FX_OP_UNSUPPORTED,
                      "unknown packet type %d" % ptype, rid)
        expect_alive(srv, "after type %d" % ptype)
    rid = 777
    srv.send_raw(frame(u8(99) + u32(rid) + b"trailing bytes" * 10))
    expect_status(srv.recv(), SSH_FX_OP_UNSUPPORTED,
                  "unknown type with a body", rid)
    expect_alive(srv)


@test
def test_extended_unknown_name(ctx):
    srv = ctx.server()
    for name in ("nosuch@example.com", "", "posix-rename@openssh.org",
                 "limits@openssh.comX", "statvfs@openssh.co"):
        expect_status(srv.call(req_extended(name, string("x"))),
                      SSH_FX_OP_UNSUPPORTED, "EXTENDED %r" % name)
    expect_alive(srv)


# ---------------------------------------------------------------------------
# Malformed requests: BAD_MESSAGE with the request id, session goes on


def expect_bad_message(srv, payload, what):
    """payload is type + id + fields; its id must come back."""
    rid = struct_u32(payload[1:5])
    srv.send_raw(frame(payload))
    expect_status(srv.recv(), SSH_FX_BAD_MESSAGE, what, rid)
    expect_alive(srv, "after " + what)


def struct_u32(b):
    return int.from_bytes(b, "big")


@test
def test_malformed_string_past_end(ctx):
    ctx.write("abc")
    srv = ctx.server()
    expect_bad_message(srv, u8(SSH_FXP_OPEN) + u32(41) + u32(1000) + b"abc",
                       "OPEN with a path length past the end")
    expect_bad_message(srv, u8(SSH_FXP_STAT) + u32(42) + u32(0xFFFFFFFF) +
                       b"abc", "STAT with path length 2^32-1")
    expect_bad_message(srv, u8(SSH_FXP_OPEN) + u32(43) + string("abc") +
                       u32(1), "OPEN without its ATTRS")
    expect_bad_message(srv, u8(SSH_FXP_OPEN) + u32(44) + string("abc") +
                       u32(1) + u32(SSH_FILEXFER_ATTR_SIZE) + b"\0\0",
                       "OPEN with truncated ATTRS")
    expect_bad_message(srv, u8(SSH_FXP_RENAME) + u32(45) + string("abc") +
                       u32(10) + b"x", "RENAME with a short second path")
    expect(os.path.exists(ctx.path("abc")), "abc was renamed")


@test
def test_malformed_type_and_id_only(ctx):
    srv = ctx.server()
    for ptype in list(range(SSH_FXP_OPEN, SSH_FXP_SYMLINK + 1)) + \
            [SSH_FXP_EXTENDED]:
        expect_bad_message(srv, u8(ptype) + u32(1000 + ptype),
                           "%s with only an id" % PACKET_TYPE_NAMES[ptype])


@test
def test_malformed_cut_id_logged_by_type(ctx):
    # A request cut within its id is answered with id 0; its ERROR line
    # names the type, not a request 0 that the client never sent.
    srv = ctx.server(["-e"])
    for ptype, cut in ((SSH_FXP_STAT, b""), (SSH_FXP_READ, b"\0\0\0")):
        srv.send_raw(frame(u8(ptype) + cut))
        expect_status(srv.recv(), SSH_FX_BAD_MESSAGE,
                      "%s cut in its id" % PACKET_TYPE_NAMES[ptype], 0)
    expect_alive(srv, "after requests cut in their id")
    expect_eq("exit status", srv.close(), 0)
    expect_eq("ERROR lines", error_lines(srv, b"bad message"), [
        b"request of type %d: bad message: no request id" % t
        for t in (SSH_FXP_STAT, SSH_FXP_READ)])


@test
def test_malformed_truncated_fields(ctx):
    ctx.write("f", b"0123456789")
    srv = ctx.server()
    h = srv.open("f", SSH_FXF_READ | SSH_FXF_WRITE)
    cases = [
        ("READ without len", u8(SSH_FXP_READ) + u32(51) + string(h) + u64(0)),
        ("READ with a short offset",
         u8(SSH_FXP_READ) + u32(52) + string(h) + b"\0\0\0"),
        ("WRITE with data past the end",
         u8(SSH_FXP_WRITE) + u32(53) + string(h) + u64(0) + u32(100) + b"ab"),
        ("WRITE without data",
         u8(SSH_FXP_WRITE) + u32(54) + string(h) + u64(0)),
        ("SETSTAT without ATTRS", u8(SSH_FXP_SETSTAT) + u32(55) +
         string("f")),
        ("SETSTAT with a short mtime", u8(SSH_FXP_SETSTAT) + u32(56) +
         string("f") + u32(SSH_FILEXFER_ATTR_ACMODTIME) + u32(1)),
        ("EXTENDED name past the end",
         u8(SSH_FXP_EXTENDED) + u32(57) + u32(50) + b"posix"),
        ("posix-rename without the new path",
         u8(SSH_FXP_EXTENDED) + u32(58) + string("posix-rename@openssh.com") +
         string("f")),
        ("copy-data without write offset",
         u8(SSH_FXP_EXTENDED) + u32(59) + string("copy-data") + string(h) +
         u64(0) + u64(0) + string(h)),
        ("users-groups-by-id with a ragged uid list",
         u8(SSH_FXP_EXTENDED) + u32(60) +
         string("users-groups-by-id@openssh.com") + string(b"\0\0\0") +
         string(b"")),
    ]
    for what, payload in cases:
        expect_bad_message(srv, payload, what)
    expect_eq("file contents", ctx.read("f"), b"0123456789")


@test
def test_malformed_embedded_nul(ctx):
    ctx.write("a", b"x")
    srv = ctx.server()
    expect_bad_message(srv, u8(SSH_FXP_STAT) + u32(61) + string(b"a\0b"),
                       "STAT of a path with a NUL")
    expect_bad_message(srv, u8(SSH_FXP_OPEN) + u32(62) + string(b"new\0x") +
                       u32(SSH_FXF_WRITE | SSH_FXF_CREAT) + u32(0),
                       "OPEN of a path with a NUL")
    expect_bad_message(srv, u8(SSH_FXP_REMOVE) + u32(63) + string(b"a\0"),
                       "REMOVE of a path with a trailing NUL")
    expect_bad_message(srv, u8(SSH_FXP_MKDIR) + u32(64) + string(b"\0") +
                       u32(0), "MKDIR of a NUL")
    expect_bad_message(srv, u8(SSH_FXP_RENAME) + u32(65) + string(b"a") +
                       string(b"b\0c"), "RENAME to a path with a NUL")
    expect(os.path.exists(ctx.path("a")), "a was removed or renamed")
    expect(not os.path.exists(ctx.path("new")), "new was created")
    expect(not os.path.exists(ctx.path("b")), "b was created")


@test
def test_malformed_attrs_extended_count(ctx):
    ctx.write("f", b"0123456789", mode=0o644)
    srv = ctx.server()
    attrs = Attrs(flags=SSH_FILEXFER_ATTR_EXTENDED |
                  SSH_FILEXFER_ATTR_PERMISSIONS, permissions=0o600,
                  ext_count=0xFFFFFFFF)
    rid = srv.send(req_setstat("f", attrs))
    expect_status(srv.recv(), SSH_FX_BAD_MESSAGE,
                  "SETSTAT with extended count 2^32-1", rid)
    expect_alive(srv)
    expect_eq("mode", oct(os.stat(ctx.path("f")).st_mode), oct(0o100644))
    rid = srv.send(req_open("new", SSH_FXF_WRITE | SSH_FXF_CREAT,
                            Attrs(flags=SSH_FILEXFER_ATTR_EXTENDED,
                                  ext_count=0xFFFFFFFF)))
    expect_status(srv.recv(), SSH_FX_BAD_MESSAGE,
                  "OPEN with extended count 2^32-1", rid)
    expect_alive(srv)
    expect(not os.path.exists(ctx.path("new")), "new was created")


@test
def test_attrs_extended_pairs_accepted(ctx):
    ctx.write("f", b"0123456789", mode=0o644)
    srv = ctx.server()
    attrs = Attrs(permissions=0o600, extended=[("a@b", "1"), ("c@d", "")])
    expect_status(srv.call(req_setstat("f", attrs)), SSH_FX_OK,
                  "SETSTAT with two extended pairs")
    expect_eq("mode", oct(os.stat(ctx.path("f")).st_mode), oct(0o100600))


@test
def test_trailing_bytes_ignored(ctx):
    ctx.write("f", b"abc")
    srv = ctx.server()
    srv.send_raw(frame(u8(SSH_FXP_STAT) + u32(71) + string("f") + b"junk"))
    expect_attrs_of(srv.recv(), os.stat(ctx.path("f")),
                    "STAT with trailing bytes")
    expect_alive(srv)


# ---------------------------------------------------------------------------
# Framing


@test
def test_frame_length_zero_exits_255(ctx):
    srv = ctx.server()
    try:
        srv.send_raw(u32(0) + encode_request(1, req_stat(".")))
    except ServerClosed:
        pass
    expect_exit(srv, 255, "length word 0")
    expect_eq("output", srv.read_output(1), b"")


@test
def test_frame_length_262145_exits_11(ctx):
    srv = ctx.server()
    try:
        srv.send_raw(u32(262145) + u8(SSH_FXP_WRITE) + u32(1) + bytes(100))
    except ServerClosed:
        pass
    expect_exit(srv, 11, "length word 262145")
    expect_eq("output", srv.read_output(1), b"")


@test
def test_frame_length_max_exits(ctx):
    srv = ctx.server()
    try:
        srv.send_raw(u32(0xFFFFFFFF) + u8(SSH_FXP_WRITE) + u32(1) + bytes(100))
    except ServerClosed:
        pass
    expect_exit(srv, "nonzero", "length word 2^32-1")
    expect_eq("output", srv.read_output(1), b"")


@test
def test_frame_length_262144_accepted(ctx):
    srv = ctx.server()
    h = srv.open("w", SSH_FXF_WRITE | SSH_FXF_CREAT)
    head = u8(SSH_FXP_WRITE) + u32(81) + string(h) + u64(0)
    n = SFTP_MAX_MSG_LENGTH - len(head) - 4
    data = random.Random(4).randbytes(n)
    payload = head + string(data)
    expect_eq("payload length", len(payload), SFTP_MAX_MSG_LENGTH)
    srv.send_raw(frame(payload))
    expect_status(srv.recv(), SSH_FX_OK, "WRITE of a 262144-byte packet", 81)
    expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")
    expect(ctx.read("w") == data, "file differs from the WRITE")


@test
def test_eof_mid_packet_exits_0(ctx):
    srv = ctx.server()
    pkt = encode_request(5, req_stat("."))
    srv.send_raw(pkt[:7])
    srv.close_stdin()
    expect_exit(srv, 0, "end of input mid packet")
    expect_eq("output", srv.read_output(1), b"")


@test
def test_eof_mid_length_word_exits_0(ctx):
    srv = ctx.server()
    srv.send_raw(b"\0\0")
    srv.close_stdin()
    expect_exit(srv, 0, "end of input mid length word")


@test
def test_eof_with_open_handles_exits_0(ctx):
    srv = ctx.server()
    h = srv.open("w", SSH_FXF_WRITE | SSH_FXF_CREAT)
    expect_status(srv.call(req_write(h, 0, b"data")), SSH_FX_OK, "WRITE")
    os.mkdir(ctx.path("d"))
    srv.opendir("d")
    expect_eq("exit status", srv.close(), 0)
    expect_eq("file contents", ctx.read("w"), b"data")


@test
def test_byte_by_byte_input(ctx):
    ctx.write("f", b"abc")
    srv = ctx.server(init=False)
    for b in encode_init(3):
        srv.send_raw(bytes([b]))
    expect_type(srv.recv(), Version, "VERSION")
    for b in encode_request(9, req_stat("f")):
        srv.send_raw(bytes([b]))
    expect_attrs_of(srv.recv(), os.stat(ctx.path("f")), "STAT")


# ---------------------------------------------------------------------------
# Extensions


@test
def test_ext_posix_rename(ctx):
    ctx.write("a", b"A")
    ctx.write("b", b"B")
    srv = ctx.server()
    expect_status(srv.call(req_posix_rename("a", "b")), SSH_FX_OK,
                  "posix-rename onto an existing file")
    expect_eq("target contents", ctx.read("b"), b"A")
    expect(not os.path.exists(ctx.path("a")), "old name still there")
    expect_status(srv.call(req_posix_rename("b", "c")), SSH_FX_OK,
                  "posix-rename to a new name")
    expect_eq("new name contents", ctx.read("c"), b"A")
    expect_status(srv.call(req_posix_rename("a", "c")), SSH_FX_NO_SUCH_FILE,
                  "posix-rename of a missing file")


def expect_statvfs(reply, st, what):
    expect_type(reply, ExtendedReply, what)
    got = parse_statvfs(reply.data)
    flag = (1 if st.f_flag & os.ST_RDONLY else 0) | \
        (2 if st.f_flag & os.ST_NOSUID else 0)
    for k, v in (("bsize", st.f_bsize), ("frsize", st.f_frsize),
                 ("blocks", st.f_blocks), ("files", st.f_files),
                 ("namemax", st.f_namemax), ("flag", flag),
                 ("fsid", st.f_fsid)):
        expect_eq("%s: %s" % (what, k), got[k], v)


@test
def test_ext_statvfs(ctx):
    os.mkdir(ctx.path("d"))
    srv = ctx.server()
    expect_statvfs(srv.call(req_statvfs(".")), os.statvfs(ctx.cwd),
                   "statvfs .")
    expect_statvfs(srv.call(req_statvfs("d")), os.statvfs(ctx.cwd),
                   "statvfs d")
    expect_statvfs(srv.call(req_statvfs("/")), os.statvfs("/"), "statvfs /")
    expect_status(srv.call(req_statvfs("missing")), SSH_FX_NO_SUCH_FILE,
                  "statvfs of a missing path")


@test
def test_ext_fstatvfs(ctx):
    ctx.write("f", b"x")
    srv = ctx.server()
    h = srv.open("f", SSH_FXF_READ)
    expect_statvfs(srv.call(req_fstatvfs(h)), os.statvfs(ctx.cwd),
                   "fstatvfs")
    expect_status(srv.call(req_fstatvfs(b"bogus-handle")), SSH_FX_FAILURE,
                  "fstatvfs of a bad handle")


@test
def test_ext_statvfs_fsid_as_reference(ctx):
    # The file system's id is statfs(2)'s two 32-bit words; OpenSSH's
    # server on a 64-bit glibc system sends both, the first in the low
    # half.  32-bit systems and musl keep only the first in statvfs(3).
    # tmpfs and ext4 ids often have the high bit of a word set.
    ctx.write("f", b"x")
    paths = [p for p in (ctx.cwd, "/", "/dev/shm", "/run", "/proc",
                         "/sys", "/dev") if os.path.isdir(p)]
    answers = {}
    for who, start in (("reference", ctx.reference), ("server", ctx.server)):
        srv = start()
        got = []
        for p in paths:
            got.append((p, parse_statvfs(expect_type(
                srv.call(req_statvfs(p)), ExtendedReply,
                "%s: statvfs %s" % (who, p)).data)["fsid"]))
        h = srv.open("f", SSH_FXF_READ)
        got.append(("fstatvfs f", parse_statvfs(expect_type(
            srv.call(req_fstatvfs(h)), ExtendedReply,
            "%s: fstatvfs" % who).data)["fsid"]))
        answers[who] = got
    bad = ["%s: expected %#x, got %#x" % (p, want, got)
           for (p, want), (_, got) in zip(answers["reference"],
                                          answers["server"]) if want != got]
    expect(not bad, "; ".join(bad))
    # The reference's own value, as this system's statvfs(3) gives it.
    for p, fsid in answers["reference"][:-1]:
        if struct.calcsize("P") == 8:
            expect_eq("%s: the reference's fsid" % p, fsid,
                      os.statvfs(p).f_fsid)
    return "%d file systems" % len({f for _, f in answers["server"]})


@test
def test_ext_hardlink(ctx):
    ctx.write("a", b"A")
    ctx.write("b", b"B")
    srv = ctx.server()
    expect_status(srv.call(req_hardlink("a", "c")), SSH_FX_OK, "hardlink")
    sa, sc = os.stat(ctx.path("a")), os.stat(ctx.path("c"))
    expect_eq("st_nlink", sa.st_nlink, 2)
    expect_eq("same inode", sc.st_ino, sa.st_ino)
    expect_status(srv.call(req_hardlink("a", "b")), SSH_FX_FAILURE,
                  "hardlink onto an existing file")
    expect_eq("target contents", ctx.read("b"), b"B")
    expect_status(srv.call(req_hardlink("missing", "m2")),
                  SSH_FX_NO_SUCH_FILE, "hardlink of a missing file")


@test
def test_ext_fsync(ctx):
    srv = ctx.server()
    h = srv.open("w", SSH_FXF_WRITE | SSH_FXF_CREAT)
    expect_status(srv.call(req_write(h, 0, b"sync me")), SSH_FX_OK, "WRITE")
    expect_status(srv.call(req_fsync(h)), SSH_FX_OK, "fsync")
    expect_status(srv.call(req_fsync(b"\xde\xad\xbe\xef")),
                  SSH_FX_NO_SUCH_FILE, "fsync of a bad handle")
    expect_status(srv.call(req_fsync(b"")), SSH_FX_NO_SUCH_FILE,
                  "fsync of an empty handle")
    expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")
    expect_status(srv.call(req_fsync(h)), SSH_FX_NO_SUCH_FILE,
                  "fsync of a closed handle")


@test
def test_ext_lsetstat(ctx):
    p = ctx.write("f", b"0123456789", mode=0o644)
    os.symlink("f", ctx.path("l"))
    srv = ctx.server()
    expect_status(srv.call(req_lsetstat("f", Attrs(permissions=0o600))),
                  SSH_FX_OK, "lsetstat permissions")
    expect_eq("mode", oct(os.stat(p).st_mode), oct(0o100600))
    expect_status(srv.call(req_lsetstat("f", Attrs(atime=7, mtime=8))),
                  SSH_FX_OK, "lsetstat times")
    st = os.stat(p)
    expect_eq("times", (st.st_atime, st.st_mtime), (7, 8))
    expect_status(srv.call(req_lsetstat("l", Attrs(atime=9, mtime=10))),
                  SSH_FX_OK, "lsetstat times of a link")
    lst, st = os.lstat(ctx.path("l")), os.stat(p)
    expect_eq("link times", (lst.st_atime, lst.st_mtime), (9, 10))
    expect_eq("target times", (st.st_atime, st.st_mtime), (7, 8))
    expect_status(srv.call(req_lsetstat("f", Attrs(size=2))),
                  SSH_FX_BAD_MESSAGE, "lsetstat size")
    expect_eq("size", os.stat(p).st_size, 10)
    expect_status(srv.call(req_lsetstat("missing",
                                        Attrs(permissions=0o600))),
                  SSH_FX_NO_SUCH_FILE, "lsetstat of a missing file")


@test
def test_ext_limits(ctx):
    srv = ctx.server()
    reply = expect_type(srv.call(req_limits()), ExtendedReply, "limits")
    lim = parse_limits(reply.data)
    expect_eq("max packet length", lim["max_packet_length"], 262144)
    expect_eq("max read length", lim["max_read_length"], 261120)
    expect_eq("max write length", lim["max_write_length"], 261120)
    expect(lim["max_open_handles"] > 0,
           "max open handles: expected > 0, got %d" % lim["max_open_handles"])


@test
def test_ext_expand_path(ctx):
    os.mkdir(ctx.path("d"))
    srv = ctx.server()
    cwd = ctx.cwd
    root_home = os.path.realpath(pwd.getpwnam("root").pw_dir)
    cases = [("~", cwd), ("~/x", cwd + "/x"), ("~/", cwd),
             ("~/d/../x", cwd + "/x"), ("", cwd), ("x", cwd + "/x")]
    if os.access(root_home, os.X_OK):
        cases.append(("~root/x", os.path.join(root_home, "x")))
    else:
        # Not root: root's home (0700) cannot be searched, as for OpenSSH.
        expect_status(srv.call(req_expand_path("~root/x")),
                      SSH_FX_PERMISSION_DENIED,
                      "expand-path '~root/x', root's home not searchable")
    for arg, want in cases:
        expect_name1(srv.call(req_expand_path(arg)), want,
                     "expand-path %r" % arg)
    reply = srv.call(req_expand_path("~nosuchuserxyz/x"))
    expect_type(reply, Status, "expand-path of an unknown user")
    expect_eq("expand-path of an unknown user: code", reply.code,
              SSH_FX_NO_SUCH_FILE)
    expect_status(srv.call(req_expand_path("~/nonexist/x")),
                  SSH_FX_NO_SUCH_FILE, "expand-path ~/nonexist/x")


def copy_setup(ctx, data):
    ctx.write("src", data)
    srv = ctx.server()
    return srv, srv.open("src", SSH_FXF_READ)


@test
def test_ext_copy_data_whole_file(ctx):
    data = random.Random(5).randbytes(300000)
    srv, hr = copy_setup(ctx, data)
    hw = srv.open("dst", SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC)
    expect_status(srv.call(req_copy_data(hr, 0, 0, hw, 0)), SSH_FX_OK,
                  "copy-data with length 0")
    expect_status(srv.close_handle(hw), SSH_FX_OK, "CLOSE")
    expect(ctx.read("dst") == data, "copy differs from the source "
           "(%d bytes vs %d)" % (len(ctx.read("dst")), len(data)))


@test
def test_ext_copy_data_partial(ctx):
    srv, hr = copy_setup(ctx, b"abcdefghijklmnopqrstuvwxyz")
    ctx.write("dst", b"0123456789")
    hw = srv.open("dst", SSH_FXF_WRITE)
    expect_status(srv.call(req_copy_data(hr, 3, 5, hw, 2)), SSH_FX_OK,
                  "copy-data 3+5 to 2")
    expect_eq("dst", ctx.read("dst"), b"01defgh789")
    expect_status(srv.call(req_copy_data(hr, 20, 100, hw, 12)), SSH_FX_OK,
                  "copy-data past the source's end")
    expect_eq("dst", ctx.read("dst"), b"01defgh789\0\0uvwxyz")
    for roff, rlen in ((26, 5), (26, 0), (100, 5)):
        expect_status(srv.call(req_copy_data(hr, roff, rlen, hw, 0)),
                      SSH_FX_OK, "copy-data of %d at %d, at or past the "
                      "source's end" % (rlen, roff))
    expect_eq("dst", ctx.read("dst"), b"01defgh789\0\0uvwxyz")


@test
def test_no_memory_for_the_jobs_ring_serves_one_at_a_time(ctx):
    # The jobs' ring and arena (4 MiB and more) are mapped at start; where
    # the address space has no room for them, the session serves every
    # request in turn, as -T 1, and says so once, rather than fail later.
    if os.environ.get("SFTP_SANITIZED") == "1" or \
            os.environ.get("SFTP_EMULATED"):
        raise Skip("a sanitizer's or an emulator's address space is not "
                   "the server's")
    ctx.write("f", b"x" * 100000)
    srv = ctx.server(["-e", "-l", "INFO"])
    with open("/proc/%d/status" % srv.proc.pid) as f:
        vm = int(re.search(r"^VmSize:\s+(\d+)", f.read(), re.M).group(1))
    expect_eq("exit status", srv.close(), 0)
    # 2 MiB less than a server with its ring: room for all but the ring.
    srv = ctx.start("/bin/sh", ["-c", 'ulimit -v %d && exec "$0" "$@"' %
                                (vm - 2048)] + SERVER_ARGV + ["-e", "-l",
                                                              "INFO"])
    h = srv.open("f", SSH_FXF_READ)
    ids = srv.send_many([req_read(h, i * 32768, 32768) for i in range(4)])
    got = b"".join(srv.recv().data for _ in ids)
    expect_eq("the file read through the session", got, b"x" * 100000)
    expect_status(srv.close_handle(h), SSH_FX_OK, "CLOSE")
    expect_eq("exit status", srv.close(), 0)
    lines = [line for line in srv.stderr_output().splitlines()
             if b"storage operations run one at a time" in line]
    expect_eq("lines saying so", len(lines), 1)


def error_lines(srv, text):
    """The lines the server (-e, level ERROR) logged that contain text."""
    return [line for line in srv.stderr_output().splitlines()
            if text in line]


@test
def test_ext_copy_data_bad_handles_no_such_file(ctx):
    # As OpenSSH 10.4 (9.2 answered FAILURE and logged nothing): an
    # unknown, closed or directory handle on either side is NO_SUCH_FILE,
    # with an ERROR line that says which side.
    ctx.write("src", b"abcdefghij")
    os.mkdir(ctx.path("d"))
    srv = ctx.server(["-e"])
    hr = srv.open("src", SSH_FXF_READ)
    hw = srv.open("dst", SSH_FXF_WRITE | SSH_FXF_CREAT)
    closed = srv.open("src", SSH_FXF_READ)
    expect_status(srv.close_handle(closed), SSH_FX_OK, "CLOSE")
    hd = srv.opendir("d")
    for label, bad in (("an unknown", b"bogus"), ("a closed", closed),
                       ("a directory", hd)):
        expect_status(srv.call(req_copy_data(hr, 0, 3, bad, 0)),
                      SSH_FX_NO_SUCH_FILE, "copy-data to %s handle" % label)
        expect_status(srv.call(req_copy_data(bad, 0, 3, hw, 0)),
                      SSH_FX_NO_SUCH_FILE,
                      "copy-data from %s handle" % label)
    expect_status(srv.call(req_copy_data(closed, 0, 3, closed, 0)),
                  SSH_FX_NO_SUCH_FILE, "copy-data from and to a closed handle")
    expect_alive(srv, "after copy-data of bad handles")
    expect_eq("exit status", srv.close(), 0)
    expect_eq("dst", ctx.read("dst"), b"")
    expect_eq("ERROR lines for the write side", len(error_lines(
        srv, b"process_extended_copy_data: invalid write handle")), 3)
    expect_eq("ERROR lines for the read side", len(error_lines(
        srv, b"process_extended_copy_data: invalid read handle")), 4)


@test
def test_ext_copy_data_same_handle(ctx):
    ctx.write("f", b"0123456789")
    srv = ctx.server(["-e"])
    h = srv.open("f", SSH_FXF_READ | SSH_FXF_WRITE)
    expect_status(srv.call(req_copy_data(h, 0, 5, h, 5)), SSH_FX_FAILURE,
                  "copy-data with one handle for read and write")
    expect_eq("file contents", ctx.read("f"), b"0123456789")
    expect_eq("exit status", srv.close(), 0)
    expect_eq("ERROR lines", error_lines(srv, b"copy_data"), [])


@test
def test_ext_copy_data_same_path_two_handles(ctx):
    ctx.write("f", b"0123456789")
    srv = ctx.server(["-e"])
    hr = srv.open("f", SSH_FXF_READ)
    hw = srv.open("f", SSH_FXF_WRITE)
    expect_status(srv.call(req_copy_data(hr, 0, 5, hw, 5)), SSH_FX_FAILURE,
                  "copy-data between two handles on one path")
    expect_eq("file contents", ctx.read("f"), b"0123456789")
    expect_eq("exit status", srv.close(), 0)
    expect_eq("ERROR lines", error_lines(srv, b"copy_data"), [])


@test
def test_ext_copy_data_same_inode_other_path(ctx):
    # As OpenSSH 10.4 (9.2 copied, reading what it wrote): the same file
    # under another name, a hard link, a symbolic link or another spelling
    # of the path, is FAILURE with an ERROR line.
    ctx.write("f", b"0123456789")
    os.link(ctx.path("f"), ctx.path("g"))
    os.symlink("f", ctx.path("s"))
    srv = ctx.server(["-e"])
    hr = srv.open("f", SSH_FXF_READ)
    for name in ("./g", "s", "./f", ctx.path("f")):
        hw = srv.open(name, SSH_FXF_WRITE)
        expect_status(srv.call(req_copy_data(hr, 0, 5, hw, 5)),
                      SSH_FX_FAILURE, "copy-data from f to %s" % name)
        expect_status(srv.call(req_copy_data(hw, 0, 0, hr, 0)),
                      SSH_FX_FAILURE, "copy-data from %s to f" % name)
        expect_status(srv.close_handle(hw), SSH_FX_OK, "CLOSE")
    expect_eq("file contents", ctx.read("f"), b"0123456789")
    expect_eq("exit status", srv.close(), 0)
    expect_eq("ERROR lines", len(error_lines(
        srv, b"process_extended_copy_data: read and write handles refer "
        b"to the same file")), 8)


@test
def test_ext_home_directory(ctx):
    srv = ctx.server()
    own = pwd.getpwuid(os.getuid()).pw_dir
    expect_name1(srv.call(req_home_directory("")), own,
                 "home-directory of the empty name")
    expect_name1(srv.call(req_home_directory("root")),
                 pwd.getpwnam("root").pw_dir, "home-directory root")
    expect_status(srv.call(req_home_directory("nosuchuserxyz")),
                  SSH_FX_FAILURE, "home-directory of an unknown user")


@test
def test_ext_home_directory_other_user(ctx):
    others = [p for p in pwd.getpwall() if p.pw_uid != os.getuid()]
    if not others:
        raise Skip("no other user in the passwd database")
    p = others[-1]
    srv = ctx.server()
    expect_name1(srv.call(req_home_directory(p.pw_name)), p.pw_dir,
                 "home-directory %s" % p.pw_name)


def uid_name(u):
    try:
        return os.fsencode(pwd.getpwuid(u).pw_name)
    except KeyError:
        return b""


def gid_name(g):
    try:
        return os.fsencode(grp.getgrgid(g).gr_name)
    except KeyError:
        return b""


@test
def test_ext_users_groups_by_id(ctx):
    srv = ctx.server()
    uids = [0, 4294967294, os.getuid(), 65534, 0]
    gids = [0, 4294967294, os.getgid()]
    reply = expect_type(srv.call(req_users_groups_by_id(uids, gids)),
                        ExtendedReply, "users-groups-by-id")
    users, groups = parse_users_groups(reply.data)
    expect_eq("user names", users, [uid_name(u) for u in uids])
    expect_eq("group names", groups, [gid_name(g) for g in gids])
    expect_eq("root", (users[0], groups[0]), (b"root", b"root"))
    reply = expect_type(srv.call(req_users_groups_by_id([], [])),
                        ExtendedReply, "users-groups-by-id of nothing")
    expect_eq("empty lists", parse_users_groups(reply.data), ([], []))


# ---------------------------------------------------------------------------
# check-file: digests on the server (draft-ietf-secsh-filexfer-extensions-00)


def req_check_file(name, target, algs, off=0, length=0, block=0):
    return req_extended(name, string(target) + string(algs) + u64(off) +
                        u64(length) + u32(block))


def check_file_reply(reply, what):
    """(algorithm, digests) of a check-file EXTENDED_REPLY."""
    reply = expect_type(reply, ExtendedReply, what)
    r = Reader(reply.data)
    expect_eq(what + ": reply name", r.string(), b"check-file")
    return r.string(), r.rest()


def crc32_digest(data):
    import zlib
    return struct.pack(">I", zlib.crc32(data))


def digest_of(alg, data):
    import hashlib
    return crc32_digest(data) if alg == "crc32" else \
        hashlib.new(alg, data).digest()


@test
def test_check_file_every_algorithm_range_and_blocks(ctx):
    data = random.Random(21).randbytes(3 * 65536 + 1234)
    ctx.write("f", data)
    srv = ctx.server()
    v = srv.call(req_extended("limits@openssh.com"))  # the session works
    expect_type(v, ExtendedReply, "limits")
    h = srv.open("f", SSH_FXF_READ)
    for alg in ("md5", "sha1", "sha224", "sha256", "sha384", "sha512",
                "crc32"):
        for name, target in (("check-file-handle", h), ("check-file", h),
                             ("check-file-name", "f")):
            got = check_file_reply(srv.call(req_check_file(
                name, target, alg)), "%s %s" % (name, alg))
            expect_eq("%s %s: whole file" % (name, alg), got,
                      (alg.encode(), digest_of(alg, data)))
        got = check_file_reply(srv.call(req_check_file(
            "check-file-handle", h, alg, 1000, 70000)), alg + " range")
        expect_eq(alg + ": range", got[1], digest_of(alg, data[1000:71000]))
        got = check_file_reply(srv.call(req_check_file(
            "check-file-handle", h, alg, 5, 0, 65536)), alg + " blocks")
        want = b"".join(digest_of(alg, data[o:o + 65536])
                        for o in range(5, len(data), 65536))
        expect_eq(alg + ": 65536-byte blocks to the end", got[1], want)
    # The first algorithm of the list that the server knows.
    got = check_file_reply(srv.call(req_check_file(
        "check-file-handle", h, "whirlpool,sha384,md5")), "first known")
    expect_eq("first known algorithm", got[0], b"sha384")
    # The empty range at the end of the file: one digest of nothing.
    got = check_file_reply(srv.call(req_check_file(
        "check-file-handle", h, "md5", len(data))), "empty range")
    expect_eq("empty range", got[1], digest_of("md5", b""))


@test
def test_check_file_errors(ctx):
    ctx.write("f", b"x" * 1000)
    os.mkdir(ctx.path("d"))
    srv = ctx.server()
    h = srv.open("f", SSH_FXF_READ)
    w = srv.open("f", SSH_FXF_WRITE)
    cases = [
        ("start past the end", req_check_file("check-file-handle", h, "md5",
                                              1001), SSH_FX_EOF),
        ("range past the end", req_check_file("check-file-handle", h, "md5",
                                              500, 501), SSH_FX_EOF),
        ("no known algorithm", req_check_file("check-file-handle", h,
                                              "whirlpool,md4"),
         SSH_FX_OP_UNSUPPORTED),
        ("block size under 256", req_check_file("check-file-handle", h,
                                                "md5", 0, 0, 255),
         SSH_FX_BAD_MESSAGE),
        ("handle open write-only", req_check_file("check-file-handle", w,
                                                  "md5"),
         SSH_FX_PERMISSION_DENIED),
        ("unknown handle", req_check_file("check-file-handle", b"nonsense",
                                          "md5"), SSH_FX_FAILURE),
        ("missing file", req_check_file("check-file-name", "nope", "md5"),
         SSH_FX_NO_SUCH_FILE),
        ("a directory", req_check_file("check-file-name", "d", "md5"),
         SSH_FX_FAILURE),
        ("truncated request", req_extended("check-file-handle", string(h) +
                                           string("md5") + u64(0)),
         SSH_FX_BAD_MESSAGE),
    ]
    for what, req, code in cases:
        expect_status(srv.call(req), code, "check-file: " + what)
    # Digests that would not fit one reply: a failure, not a huge reply.
    big = ctx.write("big", b"")
    os.truncate(big, 64 << 20)
    expect_status(srv.call(req_check_file("check-file-name", "big", "sha512",
                                          0, 0, 256)), SSH_FX_FAILURE,
                  "check-file: 262144 blocks of sha512")
    expect_alive(srv)
    # -R lets it through, -P check-file refuses all three names.
    ro = ctx.server(["-R"])
    check_file_reply(ro.call(req_check_file("check-file-name", "f", "md5")),
                     "-R")
    denied = ctx.server(["-P", "check-file"])
    for name in ("check-file-handle", "check-file-name", "check-file"):
        expect_status(denied.call(req_check_file(name, "f", "md5")),
                      SSH_FX_PERMISSION_DENIED, "-P check-file: " + name)


@test
def test_transfer_log_write_failure_fails_no_request(ctx):
    # A log at the file size limit: every append fails with EFBIG.
    import resource
    log = ctx.write("xfer.log", b"x" * 65536)
    saved = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (65536, saved[1]))
    try:
        srv = ctx.server(["-e", "-L", log])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, saved)
    h = srv.open("f", SSH_FXF_WRITE | SSH_FXF_CREAT)
    expect_status(srv.call(req_write(h, 0, b"data")), SSH_FX_OK, "WRITE")
    expect_status(srv.call(req_close(h)), SSH_FX_OK, "CLOSE")
    expect_status(srv.call(req_mkdir("d")), SSH_FX_OK, "MKDIR")
    expect_status(srv.call(req_rmdir("d")), SSH_FX_OK, "RMDIR")
    expect_eq("exit status", srv.close(), 0)
    err = srv.stderr_output()
    expect_eq("reports of the failed log", err.count(b"transfer log:"), 1)
    expect(b"File too large" in err, "no reason given: %r" % err)
    expect_eq("file", ctx.read("f"), b"data")
    expect_eq("log", ctx.read("xfer.log"), b"x" * 65536)


# ---------------------------------------------------------------------------
# check-file is a read; the transfer log is out of every request's reach


CHECK_FILE_NAMES = ("check-file-handle", "check-file-name", "check-file")


def check_file_advertised(srv_version):
    return sorted(n for n, _ in srv_version.extensions
                  if n.decode() in CHECK_FILE_NAMES)


@test
def test_check_file_is_refused_where_read_is(ctx):
    ctx.write("f", b"secret" * 100)
    # Each: options, the names advertised, the names that answer.
    cases = [
        (["-P", "read"], [], []),
        (["-P", "open"], ["check-file", "check-file-handle"],
         ["check-file", "check-file-handle"]),
        (["-p", "open,check-file"], [], []),
        (["-p", "read,check-file"], ["check-file", "check-file-handle"],
         ["check-file", "check-file-handle"]),
        (["-p", "open,read,check-file"], sorted(CHECK_FILE_NAMES),
         sorted(CHECK_FILE_NAMES)),
        (["-R"], sorted(CHECK_FILE_NAMES), sorted(CHECK_FILE_NAMES)),
    ]
    for args, advertised, answered in cases:
        srv = ctx.server(args + ["-e", "-l", "VERBOSE"], init=False)
        v = srv.init()
        what = " ".join(args)
        expect_eq("%s: check-file names advertised" % what,
                  [n.decode() for n in check_file_advertised(v)], advertised)
        for name in CHECK_FILE_NAMES:
            # A handle opened before -P/-p would refuse OPEN is not to be
            # had: the handle forms get a forged one, which answers FAILURE
            # when permitted, PERMISSION_DENIED when not.
            target = "f" if name == "check-file-name" else b"\0" * 8
            r = srv.call(req_check_file(name, target, "crc32", 0, 1))
            if name in answered:
                expect(not (isinstance(r, Status) and
                            r.code == SSH_FX_PERMISSION_DENIED),
                       "%s: %s refused: %r" % (what, name, r))
            else:
                expect_status(r, SSH_FX_PERMISSION_DENIED,
                              "%s: %s" % (what, name))
        srv.close()
        if not answered:
            err = srv.stderr_output()
            expect(b"Refusing check-file request" in err,
                   "%s: no refusal logged: %r" % (what, err))


@test
def test_check_file_bytes_are_logged_as_reads(ctx):
    import json
    data = random.Random(3).randbytes(100000)
    ctx.write("f", data)
    log = ctx.write("xfer.log")
    srv = ctx.server(["-e", "-l", "INFO", "-L", log])
    check_file_reply(srv.call(req_check_file("check-file-name", "f",
                                             "sha256")), "by name")
    h = srv.open("f", SSH_FXF_READ)
    check_file_reply(srv.call(req_check_file("check-file-handle", h, "md5",
                                             1000, 70000)), "by handle")
    expect_status(srv.call(req_close(h)), SSH_FX_OK, "CLOSE")
    expect_eq("exit status", srv.close(), 0)
    err = srv.stderr_output().decode()
    for line in ('open "f" flags READ mode 0666',
                 'close "f" bytes read 100000 written 0',
                 'close "f" bytes read 70000 written 0'):
        expect(line in err, "missing INFO line %r in %r" % (line, err))
    recs = [json.loads(x) for x in ctx.read("xfer.log").splitlines()]
    by_name = [r for r in recs if r["event"] == "check-file"]
    expect_eq("check-file records", len(by_name), 1)
    r = by_name[0]
    expect_eq("check-file record",
              (r["path"], r["flags"], r["bytes_read"], r["first_offset"],
               r["last_offset"], r["result"]),
              ("f", "READ", 100000, 0, 100000, "ok"))
    closes = [r for r in recs if r["event"] == "close"]
    expect_eq("close of the handle",
              [(r["bytes_read"], r["first_offset"], r["last_offset"])
               for r in closes], [(70000, 1000, 71000)])


@test
def test_check_file_work_is_bounded(ctx):
    big = ctx.write("big")
    os.truncate(big, (64 << 30) + 1)     # sparse: 64 GiB and a byte
    srv = ctx.server(["-e"])
    t0 = time.monotonic()
    for name in ("check-file-name", "check-file-handle"):
        target = "big" if name == "check-file-name" else \
            srv.open("big", SSH_FXF_READ)
        expect_status(srv.call(req_check_file(name, target, "md5"),
                               timeout=30), SSH_FX_FAILURE,
                      "%s over 64 GiB" % name)
    expect(time.monotonic() - t0 < 10, "refused only after %.1f s" %
           (time.monotonic() - t0))
    # A range within the bound at the end of that file is answered.
    got = check_file_reply(srv.call(req_check_file(
        "check-file-name", "big", "md5", 64 << 30, 1)), "last byte")
    expect_eq("digest of the last byte", got[1], digest_of("md5", b"\0"))
    srv.close()
    expect(b"at most 68719476736 hashed in one request" in
           srv.stderr_output(), "no reason logged: %r" % srv.stderr_output())


def log_records(ctx, name):
    """The transfer log's records; every line strict JSON of valid Unicode."""
    import json
    recs = []
    for raw in ctx.read(name).splitlines():
        line = raw.decode("utf-8")      # strict: no invalid bytes
        rec = json.loads(line)
        for v in rec.values():
            if isinstance(v, str):
                v.encode("utf-8")       # strict: no lone surrogates
        recs.append(rec)
    return recs


@test
def test_transfer_log_is_out_of_reach_of_requests(ctx):
    log = ctx.write("xfer.log", mode=0o666)
    st0 = os.stat(log)
    ctx.write("other", b"other")
    os.symlink("xfer.log", ctx.path("link"))
    for args in (["-L", log], ["-L", log, "-r", ctx.cwd, "-d", "/"]):
        # -r wants a root only root can change, and openat2(2), which
        # qemu-user lacks.
        if "-r" in args and (os.geteuid() != 0 or suite.emulator()):
            continue
        srv = ctx.server(args + ["-e"])
        names = ["xfer.log", log if "-r" not in args else "/xfer.log",
                 "link", "./xfer.log", "sub/../xfer.log"]
        os.makedirs(ctx.path("sub"), exist_ok=True)
        for n in names:
            for pf in (SSH_FXF_READ, SSH_FXF_WRITE | SSH_FXF_APPEND,
                       SSH_FXF_WRITE | SSH_FXF_TRUNC,
                       SSH_FXF_READ | SSH_FXF_TRUNC,
                       SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC,
                       SSH_FXF_READ | SSH_FXF_WRITE):
                expect_status(srv.call(req_open(n, pf)),
                              SSH_FX_PERMISSION_DENIED,
                              "OPEN %s flags 0x%x" % (n, pf))
            for a in (Attrs(size=0), Attrs(permissions=0o777),
                      Attrs(atime=1, mtime=1), Attrs(uid=os.getuid(),
                                                     gid=os.getgid())):
                expect_status(srv.call(req_setstat(n, a)),
                              SSH_FX_PERMISSION_DENIED, "SETSTAT %s %r" %
                              (n, a))
                if n != "link" and a.size is None:
                    expect_status(srv.call(req_lsetstat(n, a)),
                                  SSH_FX_PERMISSION_DENIED,
                                  "LSETSTAT %s %r" % (n, a))
            expect_status(srv.call(req_check_file("check-file-name", n,
                                                  "md5")),
                          SSH_FX_PERMISSION_DENIED, "check-file " + n)
        for req, what in (
                (req_remove("xfer.log"), "REMOVE"),
                (req_rename("xfer.log", "moved"), "RENAME from"),
                (req_posix_rename("xfer.log", "moved"), "posix-rename from"),
                (req_posix_rename("other", "xfer.log"), "posix-rename onto"),
                (req_hardlink("xfer.log", "linked"), "hardlink")):
            expect_status(srv.call(req), SSH_FX_PERMISSION_DENIED, what)
        # Other files, and the link itself, are served as ever.
        h = srv.open("other", SSH_FXF_READ | SSH_FXF_WRITE)
        expect_status(srv.call(req_close(h)), SSH_FX_OK, "CLOSE other")
        expect_status(srv.call(req_lsetstat("link", Attrs(atime=5,
                                                          mtime=5))),
                      SSH_FX_OK, "LSETSTAT of the symlink itself")
        expect_eq("exit status", srv.close(), 0)
        err = srv.stderr_output()
        expect(b'it is the transfer log' in err, "no refusal logged: %r" %
               err[:300])
    st1 = os.stat(log)
    expect_eq("the log's inode, mode and owner", (st1.st_ino, st1.st_mode,
                                                  st1.st_uid),
              (st0.st_ino, st0.st_mode, st0.st_uid))
    for n in ("moved", "linked"):
        expect(not os.path.lexists(ctx.path(n)), n + " exists")
    recs = log_records(ctx, "xfer.log")
    expect(all(r.get("session") for r in recs), "a record not the "
           "server's: %r" % recs)
    expect_eq("the other file", ctx.read("other"), b"other")


def rotate_log(ctx, name, keep):
    """Rotates as the manual says: name.N-1 to name.N, ..., name to name.1,
    then a new, empty name with the same mode.  Returns the old contents."""
    was = ctx.read(name)
    mode = os.stat(ctx.path(name)).st_mode & 0o7777
    for n in range(keep - 1, 0, -1):
        if os.path.exists(ctx.path("%s.%d" % (name, n))):
            os.rename(ctx.path("%s.%d" % (name, n)),
                      ctx.path("%s.%d" % (name, n + 1)))
    os.rename(ctx.path(name), ctx.path(name + ".1"))
    ctx.write(name, b"", mode=mode)
    return was


def attack_log(srv, ctx, names, prefix):
    """Every way a request could change the log or a rotated file; each
    must be refused."""
    for i, n in enumerate(names):
        for pf in (SSH_FXF_WRITE | SSH_FXF_TRUNC,
                   SSH_FXF_WRITE | SSH_FXF_APPEND,
                   SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC,
                   SSH_FXF_READ):
            expect_status(srv.call(req_open(n, pf)),
                          SSH_FX_PERMISSION_DENIED,
                          "%s: OPEN %s flags 0x%x" % (prefix, n, pf))
        for a in (Attrs(size=0), Attrs(permissions=0o777),
                  Attrs(atime=1, mtime=1)):
            expect_status(srv.call(req_setstat(n, a)),
                          SSH_FX_PERMISSION_DENIED,
                          "%s: SETSTAT %s %r" % (prefix, n, a))
        for req, what in (
                (req_remove(n), "REMOVE"),
                (req_rename(n, "moved"), "RENAME from"),
                (req_posix_rename("other", n), "posix-rename onto"),
                (req_hardlink(n, "linked"), "hardlink from")):
            expect_status(srv.call(req), SSH_FX_PERMISSION_DENIED,
                          "%s: %s %s" % (prefix, what, n))
        # A symlink to it is the client's to make; opening it is refused.
        link = "%s-ln%d" % (prefix, i)
        expect_status(srv.call(req_symlink(n, link)), SSH_FX_OK,
                      "%s: SYMLINK to %s" % (prefix, n))
        for pf in (SSH_FXF_WRITE | SSH_FXF_TRUNC,
                   SSH_FXF_WRITE | SSH_FXF_APPEND):
            expect_status(srv.call(req_open(link, pf)),
                          SSH_FX_PERMISSION_DENIED,
                          "%s: OPEN %s -> %s flags 0x%x" % (prefix, link, n,
                                                            pf))
        expect_status(srv.call(req_setstat(link, Attrs(size=0))),
                      SSH_FX_PERMISSION_DENIED,
                      "%s: SETSTAT size 0 of %s -> %s" % (prefix, link, n))
    # No entry of the family is made in the log's directory either.
    d = names[0].rsplit("/", 1)[0]
    for req, what in ((req_mkdir(d + "/xfer.log.9"), "MKDIR"),
                      (req_symlink("/", d + "/xfer.log-x"), "SYMLINK"),
                      (req_hardlink("other", d + "/xfer.log.8"),
                       "hardlink onto"),
                      (req_rename("other", d + "/xfer.log.6"),
                       "RENAME onto")):
        expect_status(srv.call(req), SSH_FX_PERMISSION_DENIED, "%s: %s %s" %
                      (prefix, what, req[1][:40]))


@test
def test_transfer_log_is_guarded_across_rotations(ctx):
    # Two rotations: one session open across both, one started after.
    # Under -r the log lies beneath the root, where requests could reach it.
    for args in ([], ["-r", ctx.cwd, "-d", "/"]):
        if "-r" in args and (os.geteuid() != 0 or suite.emulator()):
            continue
        for n in os.listdir(ctx.cwd):
            p = ctx.path(n)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            else:
                os.unlink(p)
        os.mkdir(ctx.path("logs"), 0o755)
        log = ctx.write("logs/xfer.log", mode=0o666)
        ctx.write("other", b"other")
        d = "/logs" if "-r" in args else "logs"
        tag = "-r" if args else "plain"
        before = ctx.server(args + ["-e", "-L", log])
        expect_status(before.call(req_mkdir("d1")), SSH_FX_OK, "MKDIR d1")
        first = rotate_log(ctx, "logs/xfer.log", 5)
        expect_status(before.call(req_mkdir("d2")), SSH_FX_OK, "MKDIR d2")
        second = rotate_log(ctx, "logs/xfer.log", 5)
        # A hard link that another program made to the oldest file.
        os.link(ctx.path("logs/xfer.log.2"), ctx.path("hl"))
        after = ctx.server(args + ["-e", "-L", log])
        names = [d + "/xfer.log", d + "/xfer.log.1", d + "/xfer.log.2",
                 "hl", "logs/../" + d.lstrip("/") + "/xfer.log.1"]
        attack_log(before, ctx, names, tag + " before")
        attack_log(after, ctx, names, tag + " after")
        expect_status(before.call(req_mkdir("d3")), SSH_FX_OK, "MKDIR d3")
        for srv, who in ((before, "before"), (after, "after")):
            expect_eq("%s %s: exit status" % (tag, who), srv.close(), 0)
            err = srv.stderr_output()
            expect(b'it is the transfer log' in err, "%s %s: no refusal "
                   "logged: %r" % (tag, who, err[:300]))
        # Each file holds what it held, and then the records that came
        # while it was the log, every one from these sessions.
        pids = {before.proc.pid, after.proc.pid}
        for name, events in (("logs/xfer.log.2", ["session-open", "mkdir"]),
                             ("logs/xfer.log.1", ["mkdir"])):
            recs = log_records(ctx, name)
            expect_eq("%s: events in %s" % (tag, name),
                      [r["event"] for r in recs], events)
        expect_eq("%s: xfer.log.2 is what was first rotated" % tag,
                  ctx.read("logs/xfer.log.2"), first)
        expect_eq("%s: xfer.log.1 is what was rotated second" % tag,
                  ctx.read("logs/xfer.log.1"), second)
        recs = log_records(ctx, "logs/xfer.log")
        expect(all(r["session"] in pids for r in recs),
               "%s: a record not the servers': %r" % (tag, recs))
        expect_eq("%s: the new log's first record" % tag,
                  (recs[0]["session"], recs[0]["event"]),
                  (after.proc.pid, "session-open"))
        mkdirs = [(r["session"], r["path"], r["result"]) for r in recs
                  if r["event"] == "mkdir"]
        expect((before.proc.pid, "d3", "ok") in mkdirs,
               "%s: MKDIR d3 of the session open across the rotations "
               "not in the new log: %r" % (tag, mkdirs))
        closes = [r["session"] for r in recs if r["event"] ==
                  "session-close"]
        expect_eq("%s: session-close records" % tag, sorted(closes),
                  sorted(pids))
        for n in ("moved", "linked", "logs/xfer.log.9", "logs/xfer.log-x",
                  "logs/xfer.log.8", "logs/xfer.log.6"):
            expect(not os.path.lexists(ctx.path(n)), "%s: %s exists" %
                   (tag, n))
        expect_eq("%s: the other file" % tag, ctx.read("other"), b"other")


@test
def test_transfer_log_rotation_outside_the_root(ctx):
    # Under -r with the log outside the root, Landlock (where the kernel
    # has it) keeps the session from opening the new file: its records go
    # on to the rotated one, and it says so once.  Without Landlock the
    # session follows the rotation as it does without -r.
    if os.geteuid() != 0 or suite.emulator():
        raise Skip("-r wants a root only root can change, and openat2(2)")
    os.mkdir(ctx.path("root"), 0o755)
    os.mkdir(ctx.path("logs"), 0o755)
    log = ctx.write("logs/xfer.log", mode=0o666)
    srv = ctx.server(["-e", "-l", "VERBOSE", "-L", log, "-r",
                      ctx.path("root"), "-d", "/"])
    expect_status(srv.call(req_mkdir("d1")), SSH_FX_OK, "MKDIR d1")
    rotate_log(ctx, "logs/xfer.log", 2)
    expect_status(srv.call(req_mkdir("d2")), SSH_FX_OK, "MKDIR d2")
    expect_status(srv.call(req_mkdir("d3")), SSH_FX_OK, "MKDIR d3")
    expect_eq("exit status", srv.close(), 0)
    err = srv.stderr_output()
    landlock = re.search(rb"landlock ABI \d+: files beneath", err)
    old = [r["event"] for r in log_records(ctx, "logs/xfer.log.1")]
    new = [r["event"] for r in log_records(ctx, "logs/xfer.log")]
    stuck = err.count(b"transfer log: cannot open the new \"xfer.log\" "
                      b"after a rotation (Permission denied): writing on "
                      b"to the rotated file")
    if landlock:
        expect_eq("records in the rotated file", old,
                  ["session-open", "mkdir", "mkdir", "mkdir",
                   "session-close"])
        expect_eq("records in the new file", new, [])
        expect_eq("reports of the rotation not followed", stuck, 1)
    else:
        expect_eq("records in the rotated file", old,
                  ["session-open", "mkdir"])
        expect_eq("records in the new file", new,
                  ["mkdir", "mkdir", "session-close"])
        expect_eq("reports of the rotation not followed", stuck, 0)


MANUAL = os.path.join(HERE, "..", "..", "man", "sftp-server.8")
MANUAL_LOG = "/var/log/sftp-transfers.log"


def manual_log_blocks():
    """The literal blocks of the manual's TRANSFER LOG section, as text."""
    with open(MANUAL) as f:
        text = f.read()
    section = text.split(".Sh TRANSFER LOG\n", 1)[1].split("\n.Sh ", 1)[0]
    blocks = []
    for part in section.split(".Bd -literal -offset indent\n")[1:]:
        blocks.append(part.split(".Ed\n", 1)[0])
    return blocks


def manual_commands(block, log):
    """A block of "# command" lines as a shell script for log."""
    lines = block.splitlines()
    expect(all(x.startswith("# ") for x in lines), "not a block of "
           "commands: %r" % block)
    return "\n".join(x[2:] for x in lines).replace(MANUAL_LOG, log) + "\n"


def append_only_dir(ctx):
    """A directory on a file system with chattr +a: ctx's own, else a
    small ext4 image mounted on loop.  Returns (path, unmount or None);
    raises Skip with the reason when there is none."""
    import subprocess
    if not shutil.which("chattr"):
        raise Skip("chattr (e2fsprogs) not installed")
    if os.geteuid() != 0:
        raise Skip("chattr +a needs root (CAP_LINUX_IMMUTABLE)")
    d = ctx.path("fs")
    os.mkdir(d, 0o755)
    probe = os.path.join(d, "probe")
    open(probe, "w").close()
    if subprocess.run(["chattr", "+a", probe], capture_output=True
                      ).returncode == 0:
        subprocess.run(["chattr", "-a", probe], check=True)
        os.unlink(probe)
        return d, None
    os.unlink(probe)
    img = ctx.path("fs.img")
    with open(img, "wb") as f:
        f.truncate(16 << 20)
    for argv in (["mkfs.ext4", "-q", "-F", img],
                 ["mount", "-o", "loop", img, d]):
        r = subprocess.run(argv, capture_output=True)
        if r.returncode != 0:
            raise Skip("%s's file system has no chattr +a, and %s failed: "
                       "%s" % (ctx.cwd, argv[0], r.stderr.decode()[:200]))
    os.chmod(d, 0o755)
    return d, lambda: subprocess.run(["umount", d], check=True)


def logrotate_config(block, log, append_only):
    """The manual's logrotate block for log; without append_only, with its
    two scripts left out, as the manual says."""
    text = block.replace(MANUAL_LOG, log)
    if not append_only:
        text = re.sub(r"\t(prerotate|postrotate)\n.*?\tendscript\n", "",
                      text, flags=re.S)
    return text


@test
def test_transfer_log_rotation_by_hand_as_the_manual_says(ctx):
    rotation_recipes(ctx, [("by hand", False), ("by hand, chattr +a", True)])


@test
def test_transfer_log_rotation_by_logrotate_as_the_manual_says(ctx):
    if not shutil.which("logrotate"):
        raise Skip("logrotate not installed")
    rotation_recipes(ctx, [("logrotate", False),
                           ("logrotate, chattr +a", True)])


def rotation_recipes(ctx, variants):
    """The manual's own commands, as written, with and without chattr +a,
    or its logrotate configuration: a session open across the rotation
    writes on to the new file, one started after it too, neither reaches
    either file, and an append-only log is append-only again after."""
    import subprocess
    blocks = manual_log_blocks()
    setup = [b for b in blocks if "install" in b and "mv " not in b]
    plain = [b for b in blocks if "mv " in b and "chattr" not in b]
    flagged = [b for b in blocks if "mv " in b and "chattr -a" in b]
    conf = [b for b in blocks if "{" in b]
    expect_eq("the manual's blocks: set-up, rotations, logrotate",
              (len(setup), len(plain), len(flagged), len(conf)),
              (1, 1, 1, 1))
    d, unmount = append_only_dir(ctx)
    try:
        for what, append_only in variants:
            logs = os.path.join(d, "logs")
            if os.path.exists(logs):
                subprocess.run(["chattr", "-R", "-a", logs], check=True)
                shutil.rmtree(logs)
            os.mkdir(logs, 0o755)
            log = os.path.join(logs, "sftp-transfers.log")
            script = manual_commands(setup[0], log)
            if not append_only:
                script = "\n".join(x for x in script.splitlines()
                                   if "chattr" not in x) + "\n"
            subprocess.run(["sh", "-ec", script], check=True)
            first = ctx.server(["-e", "-L", log])
            expect_status(first.call(req_mkdir("a1")), SSH_FX_OK, "MKDIR")
            if append_only:
                # The plain rename fails on an append-only log, as the
                # manual says, and changes nothing.
                r = subprocess.run(["sh", "-ec", manual_commands(plain[0],
                                                                 log)],
                                   capture_output=True)
                expect(r.returncode != 0 and b"Operation not permitted" in
                       r.stderr, "%s: the plain rotation of an append-only "
                       "log: %r" % (what, r))
                expect(not os.path.exists(log + ".1"),
                       "%s: renamed all the same" % what)
            if what.startswith("logrotate"):
                cf = os.path.join(d, "logrotate.conf")
                with open(cf, "w") as f:
                    f.write(logrotate_config(conf[0], log, append_only))
                r = subprocess.run(["logrotate", "-f", "-s",
                                    os.path.join(d, "state"), cf],
                                   capture_output=True)
            else:
                r = subprocess.run(["sh", "-ec", manual_commands(
                    flagged[0] if append_only else plain[0], log)],
                    capture_output=True)
            expect_eq("%s: exit status of the rotation (%r)" % (what,
                                                                r.stderr),
                      r.returncode, 0)
            expect_status(first.call(req_mkdir("a2")), SSH_FX_OK, "MKDIR")
            second = ctx.server(["-e", "-L", log])
            expect_status(second.call(req_mkdir("a3")), SSH_FX_OK, "MKDIR")
            for srv in (first, second):
                for n in (log, log + ".1"):
                    for pf in (SSH_FXF_WRITE | SSH_FXF_TRUNC,
                               SSH_FXF_WRITE | SSH_FXF_APPEND):
                        expect_status(srv.call(req_open(n, pf)),
                                      SSH_FX_PERMISSION_DENIED,
                                      "%s: OPEN %s 0x%x" % (what, n, pf))
            expect_eq("%s: exit status" % what, first.close(), 0)
            expect_eq("%s: exit status" % what, second.close(), 0)
            if append_only:
                for n, flagged_now in ((log, True), (log + ".1", False)):
                    try:
                        os.close(os.open(n, os.O_WRONLY))
                        writable = True
                    except PermissionError:
                        writable = False
                    expect_eq("%s: %s append-only" % (what, n), not writable,
                              flagged_now)
            old = [(r["session"], r["event"]) for r in
                   json_lines(log + ".1")]
            new = [(r["session"], r["event"]) for r in json_lines(log)]
            a, b = first.proc.pid, second.proc.pid
            expect_eq("%s: the rotated file" % what, old,
                      [(a, "session-open"), (a, "mkdir")])
            expect_eq("%s: the new file" % what, new,
                      [(a, "mkdir"), (b, "session-open"), (b, "mkdir"),
                       (a, "session-close"), (b, "session-close")])
            os.rmdir(ctx.path("a1"))
            os.rmdir(ctx.path("a2"))
            os.rmdir(ctx.path("a3"))
    finally:
        if os.path.exists(os.path.join(d, "logs")):
            subprocess.run(["chattr", "-R", "-a", os.path.join(d, "logs")])
        if unmount is not None:
            unmount()


def json_lines(path):
    import json
    with open(path, "rb") as f:
        return [json.loads(x.decode("utf-8")) for x in f.read().splitlines()]


# The server in a mount namespace of its own whose /dev holds only null and
# a "log" that leads to $1/log.sock: the system log of the test alone.
SYSLOG_NS = r'''
d=$1; shift
mkdir "$d/dev"
: > "$d/dev/null"
mount --bind /dev/null "$d/dev/null"
ln -s "$d/log.sock" "$d/dev/log"
mount --rbind "$d/dev" /dev
exec "$@"
'''


class SyslogReceiver:
    """A system log at DIR/log.sock: keeps each message as it came."""

    def __init__(self, d):
        import socket
        import threading
        self.path = os.path.join(d, "log.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.messages = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            msg = self.sock.recv(1 << 20)
            if msg == b"STOP":
                return
            self.messages.append(msg)

    def stop(self):
        """Every message sent before this call, then the socket gone."""
        import socket
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.sendto(b"STOP", self.path)
        s.close()
        self.thread.join(30)
        self.sock.close()
        os.unlink(self.path)
        return self.messages


def syslog_server(ctx, d, args, **kw):
    return ctx.start("unshare", ["-m", "--propagation", "private", "sh",
                                 "-ec", SYSLOG_NS, "sh", d] + SERVER_ARGV +
                     args, **kw)


def syslog_session(srv):
    """The requests whose records the two forms of the log must agree on."""
    h = srv.open("f", SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC)
    expect_status(srv.call(req_write(h, 0, b"x" * 1000)), SSH_FX_OK,
                  "WRITE")
    expect_status(srv.call(req_close(h)), SSH_FX_OK, "CLOSE")
    expect_status(srv.call(req_mkdir("d\nnew\xe9")), SSH_FX_OK, "MKDIR")
    expect_status(srv.call(req_rename("f", "g")), SSH_FX_OK, "RENAME")
    expect_status(srv.call(req_setstat("g", Attrs(permissions=0o600))),
                  SSH_FX_OK, "SETSTAT")
    expect_status(srv.call(req_remove("missing")), SSH_FX_NO_SUCH_FILE,
                  "REMOVE")


def comparable(rec):
    return {k: v for k, v in rec.items() if k not in ("time", "duration")}


@test
def test_transfer_log_to_the_system_log(ctx):
    # -L syslog:LOCAL6: each record is one message at local6.info, tagged
    # sftp-transfer[PID], whose text is the record the file form writes.
    import json
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise Skip("a /dev/log of the test's own needs root and unshare(1)")
    if suite.emulator():
        raise Skip("under an emulator the mount namespace's binary is "
                   "not the server")
    log = ctx.write("xfer.log")
    env = dict(os.environ, SSH_CONNECTION="192.0.2.9 5555 192.0.2.1 22")
    srv = ctx.server(["-L", log], env=env)
    syslog_session(srv)
    expect_eq("exit status", srv.close(), 0)
    want = [comparable(r) for r in log_records(ctx, "xfer.log")]
    want_pid = srv.proc.pid
    os.unlink(ctx.path("g"))
    os.rmdir(ctx.path("d\nnew\xe9"))

    d = ctx.path("ns")
    os.mkdir(d)
    rx = SyslogReceiver(d)
    srv = syslog_server(ctx, d, ["-e", "-L", "syslog:LOCAL6"], env=env)
    syslog_session(srv)
    # A system log restarted meanwhile gets the records after it.
    first = rx.stop()
    rx = SyslogReceiver(d)
    expect_status(srv.call(req_rmdir("d\nnew\xe9")), SSH_FX_OK, "RMDIR")
    expect_eq("exit status", srv.close(), 0)
    second = rx.stop()
    expect_eq("stderr", srv.stderr_output(), b"")
    recs = []
    for m in first + second:
        g = re.match(rb"<182>[A-Z][a-z]{2} [ 1-3][0-9] [0-9]{2}:[0-9]{2}:"
                     rb"[0-9]{2} sftp-transfer\[%d\]: (\{[^\n]*\})\Z" %
                     srv.proc.pid, m)
        expect(g is not None, "not a local6.info message of the server "
               "with one record: %r" % m[:200])
        recs.append(json.loads(g.group(1).decode("utf-8")))
    expect_eq("messages before the restart", len(first), len(want) - 1)
    got = [comparable(r) for r in recs]
    for r in want:
        r["session"] = srv.proc.pid
    rmdir = {"session": srv.proc.pid, "user": want[0]["user"],
             "client": "192.0.2.9", "port": 5555, "event": "rmdir",
             "path": "d\nnew\xe9", "result": "ok"}
    expect_eq("the records", got, want[:-1] + [rmdir] + want[-1:])
    expect(want_pid != srv.proc.pid, "the same process twice")
    # No files: nothing in the served directory is refused.
    expect(not os.path.exists(ctx.path("syslog:LOCAL6")),
           "a file named after the option")

    # A system log that is not there, or a facility that is not one:
    # the session is refused, as with a log file that cannot be opened.
    for arg, why in (("syslog:LOCAL6", "No such file or directory"),
                     ("syslog:LOCAL9", "unknown facility")):
        os.mkdir(ctx.path("none-%s" % why[:2]))
        srv = syslog_server(ctx, ctx.path("none-%s" % why[:2]),
                            ["-e", "-L", arg], init=False)
        expect_exit(srv, 1, "-L " + arg)
        want_err = ('transfer log "%s": %s: refusing the session' %
                    (arg, why)).encode()
        expect(want_err in srv.stderr_output(), "-L %s: expected %r, got %r"
               % (arg, want_err, srv.stderr_output()))


@test
def test_transfer_log_must_be_a_regular_file_not_a_symlink(ctx):
    theirs = ctx.write("theirs", b"", mode=0o666)
    os.symlink(theirs, ctx.path("link.log"))
    os.mkfifo(ctx.path("fifo.log"))
    for name, why in (("link.log", "a symbolic link"),
                      ("missing.log", "no such file; create it first"),
                      ("fifo.log", "not a regular file"),
                      ("/dev/null", "not a regular file")):
        path = ctx.path(name) if not name.startswith("/") else name
        srv = ctx.server(["-e", "-L", path], init=False)
        expect_exit(srv, 1, "-L " + name)
        err = srv.stderr_output()
        want = ('transfer log "%s": %s: refusing the session' %
                (path, why)).encode()
        expect(want in err, "-L %s: expected %r, got %r" % (name, want, err))
    expect_eq("the symlink's target", ctx.read("theirs"), b"")
    expect(not os.path.exists(ctx.path("missing.log")),
           "a missing log was created")


@test
def test_transfer_log_is_strict_unicode_with_exact_bytes(ctx):
    log = ctx.write("xfer.log")
    srv = ctx.server(["-L", log])
    names = [b"caf\xe9.txt", b"x\xff\xfe\n{\"event\":\"forged\"}",
             "é€😀.txt".encode(), b"\xed\xa0\x80"]
    for n in names:
        h = srv.open(n, SSH_FXF_WRITE | SSH_FXF_CREAT)
        expect_status(srv.call(req_close(h)), SSH_FX_OK, "CLOSE %r" % n)
    expect_status(srv.call(req_rename(names[0], b"renamed\xc0")), SSH_FX_OK,
                  "RENAME")
    srv.close()
    recs = log_records(ctx, "xfer.log")
    closes = [r for r in recs if r["event"] == "close"]
    for n, r in zip(names, closes):
        valid = True
        try:
            readable = n.decode("utf-8")
        except UnicodeDecodeError:
            valid = False
            readable = n.decode("utf-8", "replace")
        if valid:
            expect("path_hex" not in r, "%r: a hex field for UTF-8" % n)
            expect_eq("path of %r" % n, r["path"], readable)
        else:
            expect_eq("path_hex of %r" % n, bytes.fromhex(r["path_hex"]), n)
            expect("\ufffd" in r["path"], "%r: no U+FFFD in %r" %
                   (n, r["path"]))
    ren = [r for r in recs if r["event"] == "rename"][0]
    expect_eq("rename: exact bytes of both names",
              (bytes.fromhex(ren["path_hex"]),
               bytes.fromhex(ren["target_hex"])), (names[0], b"renamed\xc0"))


@test
def test_copy_data_offsets_in_transfer_log(ctx):
    ctx.write("src", bytes(range(256)) * 40)
    log = ctx.write("xfer.log")
    srv = ctx.server(["-L", log])
    r = srv.open("src", SSH_FXF_READ)
    w = srv.open("dst", SSH_FXF_WRITE | SSH_FXF_CREAT)
    expect_status(srv.call(req_copy_data(r, 100, 1000, w, 5000)), SSH_FX_OK,
                  "copy-data")
    for h in (r, w):
        expect_status(srv.call(req_close(h)), SSH_FX_OK, "CLOSE")
    srv.close()
    got = [(x["path"], x["bytes_read"], x["bytes_written"],
            x.get("first_offset"), x.get("last_offset"))
           for x in log_records(ctx, "xfer.log") if x["event"] == "close"]
    expect_eq("close records", got, [("src", 1000, 0, 100, 1100),
                                     ("dst", 0, 1000, 5000, 6000)])


if __name__ == "__main__":
    sys.exit(suite.main(sys.argv, __doc__, Ctx))
