"""suite: what the Python suites share, over sftpwire.

A test is a function that raises Failure when an expectation is not met
and Skip when it cannot run here; whatever it returns is shown on its "ok"
line.  Results print as the shell suites' do (tests/lib/lib.sh): one line
per test, "ok - NAME", "FAIL - NAME: why" or "skip - NAME: why", then a
closing line "N passed, M failed[, K skipped]"; the exit status is 1 when
any failed.

A suite registers its tests with @test (or add_test), gives main() a fresh
context for each, with a cleanup() method, and runs the tests whose name
contains one of the arguments (all of them without arguments).
"""

import atexit
import json
import os
import platform
import re
import shutil
import stat
import struct
import subprocess
import tempfile
import time
import traceback

import sftpwire
from sftpwire import AttrsReply, req_stat


class Failure(Exception):
    """A test's expectation was not met."""


class Skip(Exception):
    """A test cannot run here."""


TESTS = []


def test(fn):
    """Register a test function; its name loses the test_ prefix."""
    TESTS.append((fn.__name__[len("test_"):], fn))
    return fn


def add_test(name, fn):
    TESTS.append((name, fn))


def sanitized(binary):
    """A sanitizer build: $SFTP_SANITIZED=1, or the binary's name says so
    (sftp-server-asan)."""
    return (os.environ.get("SFTP_SANITIZED") == "1" or
            re.search(r"(asan|ubsan|msan|tsan|sanit)",
                      os.path.basename(binary)) is not None)


def emulator():
    """The emulator the server runs under, as $SFTP_EMULATED names it
    (tests/cross/run-cross.sh sets it to qemu-ARCH-static), or None.  The
    server's pid is then the emulator's: /proc/PID shows the emulator's
    memory and descriptors, and the system calls qemu-user lacks (openat2)
    fail with ENOSYS."""
    return os.environ.get("SFTP_EMULATED") or None


def static_binary(path):
    """Whether path is an ELF executable without a program interpreter:
    statically linked, so that an LD_PRELOAD library never loads into it."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF":
                return False
            wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
            if wide:
                phoff, = struct.unpack_from(order + "Q", head, 32)
                phentsize, phnum = struct.unpack_from(order + "HH", head, 54)
            else:
                phoff, = struct.unpack_from(order + "I", head, 28)
                phentsize, phnum = struct.unpack_from(order + "HH", head, 42)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except (OSError, struct.error):
        return False
    types = [struct.unpack_from(order + "I", table, i * phentsize)[0]
             for i in range(phnum)]
    return 3 not in types     # PT_INTERP


def preload_unusable(binary):
    """Why an LD_PRELOAD shim cannot load into the server, or None."""
    if emulator():
        return "the server runs under %s: an x86-64 shim cannot load " \
            "into it" % emulator()
    if static_binary(binary):
        return "%s is statically linked: LD_PRELOAD never loads into it" % \
            os.path.basename(binary)
    return None


def private_dirty_kib(pid, binary):
    """Private_Dirty of pid, less the mappings of its own executable: a
    binary written moments ago has dirty page-cache pages that count there
    until they reach the disk."""
    total, mine = 0, False
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            fields = line.split()
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                mine = len(fields) >= 6 and \
                    os.path.realpath(fields[5]) == os.path.realpath(binary)
            elif fields[0] == "Private_Dirty:" and not mine:
                total += int(fields[1])
    return total


def own_anonymous_kib(pid, binary):
    """The anonymous memory of pid's executable itself, KiB: the pages of
    its mappings that relocations and writes made its own (the relocated
    tables, .data), and its bss (the nameless mapping right after them)."""
    total, end = 0, None
    mine = bss = False
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            fields = line.split()
            m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", line)
            if m:
                start = int(m.group(1), 16)
                named = len(fields) >= 6
                mine = named and \
                    os.path.realpath(fields[5]) == os.path.realpath(binary)
                bss = not named and end is not None and start == end
                if mine:
                    end = int(m.group(2), 16)
            elif fields[0] == "Anonymous:" and (mine or bss):
                total += int(fields[1])
    return total


# Signs of a sanitizer report in the server's stderr.
SANITIZER_REPORT = re.compile(rb"(ERROR: \w+Sanitizer|runtime error:|"
                              rb"WARNING: ThreadSanitizer|"
                              rb"LeakSanitizer|AddressSanitizer)")


# -- assertions ---------------------------------------------------------------


def expect(cond, msg):
    if not cond:
        raise Failure(msg)


def expect_eq(what, got, want):
    if got != want:
        raise Failure("%s: expected %r, got %r" % (what, want, got))


def expect_type(reply, cls, what="reply"):
    if not isinstance(reply, cls):
        raise Failure("%s: expected %s, got %r" % (what, cls.__name__, reply))
    return reply


def expect_ok(reply, what):
    """The reply is a STATUS with code 0 (SSH_FX_OK)."""
    expect_type(reply, sftpwire.Status, what)
    expect_eq(what, reply.code, sftpwire.SSH_FX_OK)
    return reply


def json_lines(path):
    """The JSON objects of a file of one per line (a transfer log)."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def expect_alive(srv, what="after it"):
    """The session goes on: a following STAT is answered with its id."""
    rid = srv.next_id()
    reply = srv.call(req_stat("."), rid)
    expect_type(reply, AttrsReply, "STAT %s" % what)


# -- files --------------------------------------------------------------------


def tree_snapshot(top):
    """Every entry under top with its type, mode, size and contents."""
    snap = []
    for root, dirs, files in os.walk(top):
        for n in sorted(dirs + files):
            p = os.path.join(root, n)
            st = os.lstat(p)
            data = None
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    data = f.read()
            elif stat.S_ISLNK(st.st_mode):
                data = os.readlink(p)
            snap.append((os.path.relpath(p, top), oct(st.st_mode),
                         st.st_size, data))
    return sorted(snap)


def noatime_read(path):
    """The contents of a file, read without moving its atime."""
    fd = os.open(path, os.O_RDONLY | os.O_NOATIME | os.O_NOFOLLOW)
    try:
        chunks = []
        while True:
            b = os.read(fd, 65536)
            if not b:
                return b"".join(chunks)
            chunks.append(b)
    finally:
        os.close(fd)


def noatime_names(path):
    """The sorted names in a directory, listed without moving its atime."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOATIME |
                 os.O_NOFOLLOW)
    try:
        return sorted(os.listdir(fd))
    finally:
        os.close(fd)


# -- LD_PRELOAD shims -----------------------------------------------------------

_SHIMS = {}  # source -> the built library, or the Skip that says why not


def shim_library(source, prefix):
    """The LD_PRELOAD shim source built (once per run) into a temporary
    directory whose name starts with prefix, removed at exit; Skip without
    a C compiler ($CC, cc or gcc)."""
    why = preload_unusable(sftpwire.server_argv()[0])
    if why:
        raise Skip(why)
    if source not in _SHIMS:
        _SHIMS[source] = _build_shim(source, prefix)
    if isinstance(_SHIMS[source], Skip):
        raise _SHIMS[source]
    return _SHIMS[source]


def _build_c(source, prefix, name, flags, libs, what):
    """source built with $CC (else cc or gcc) and flags into name, in a
    temporary directory whose name starts with prefix, removed at exit;
    Skip without a compiler, Failure when the build fails."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc or not shutil.which(cc.split()[0]):
        return Skip("no C compiler to build %s" % what)
    d = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, d, True)
    out = os.path.join(d, name)
    r = subprocess.run(cc.split() + flags + ["-o", out, source] + libs,
                       capture_output=True, timeout=120)
    if r.returncode != 0:
        raise Failure("building %s failed: %s" %
                      (what, r.stderr.decode(errors="replace")[-500:]))
    return out


def _build_shim(source, prefix):
    return _build_c(source, prefix,
                    os.path.basename(source)[:-len(".c")] + ".so",
                    ["-shared", "-fPIC", "-O2"], ["-ldl"],
                    "the LD_PRELOAD shim")


_SLOWFS = []


def slowfs():
    """The delay tool: $SFTP_SLOWFS, else bench/slowfs.c built once into a
    temporary directory, removed at exit; Skip when there is neither."""
    if not _SLOWFS:
        _SLOWFS.append(_find_slowfs())
    if isinstance(_SLOWFS[0], Skip):
        raise _SLOWFS[0]
    return _SLOWFS[0]


def _find_slowfs():
    if os.geteuid() != 0:
        # The servers make themselves undumpable; only root may then look
        # at their descriptors in /proc, which is how slowfs tells a read
        # of a file from one of a pipe.  Without it, READ and WRITE would
        # run undelayed.
        return Skip("slowfs needs root to see the descriptors of the "
                    "servers, which are not dumpable")
    given = os.environ.get("SFTP_SLOWFS")
    if given:
        if not os.access(given, os.X_OK):
            return Skip("SFTP_SLOWFS=%s is not an executable" % given)
        return os.path.abspath(given)
    source = os.path.join(sftpwire.REPO, "bench", "slowfs.c")
    if not os.path.exists(source):
        return Skip("no delay tool: bench/slowfs.c is not in this tree and "
                    "SFTP_SLOWFS is unset")
    if platform.machine() not in ("x86_64", "aarch64"):
        return Skip("bench/slowfs knows the system calls of x86_64 and "
                    "aarch64 only, not of %s" % platform.machine())
    return _build_c(source, "sftp-slowfs-", "slowfs", ["-O2"], [],
                    "bench/slowfs.c")


# -- running ------------------------------------------------------------------


def outcome(fn, *args):
    """Run fn(*args): ("ok", what it returned), ("FAIL", why) or
    ("skip", why)."""
    try:
        return "ok", fn(*args)
    except Failure as e:
        return "FAIL", str(e)
    except Skip as e:
        return "skip", str(e)
    except sftpwire.WireError as e:
        return "FAIL", "%s: %s" % (type(e).__name__, e)
    except Exception as e:  # a bug in the test, or a surprise
        tb = traceback.extract_tb(e.__traceback__)[-1]
        return "FAIL", "%s: %s (%s:%d)" % (type(e).__name__, e,
                                           os.path.basename(tb.filename),
                                           tb.lineno)


class Results:
    """The lines of a run and their count."""

    def __init__(self):
        self.counts = {"ok": 0, "FAIL": 0, "skip": 0}

    def report(self, state, name, detail=None):
        self.counts[state] += 1
        line = "%s - %s" % (state, name)
        if detail:
            line += ": " + str(detail).replace("\n", " ")
        print(line, flush=True)

    def summary(self):
        """Print the closing line; return the exit status."""
        line = "%d passed, %d failed" % (self.counts["ok"],
                                         self.counts["FAIL"])
        if self.counts["skip"]:
            line += ", %d skipped" % self.counts["skip"]
        print(line)
        return 1 if self.counts["FAIL"] else 0


def selected(tests, patterns):
    """The tests whose name contains one of patterns (all without any)."""
    return [(n, f) for n, f in tests
            if not patterns or any(p in n for p in patterns)]


def main(argv, doc, new_ctx, tests=TESTS, verbose=None):
    """Run the selected tests, each given a fresh new_ctx() that is cleaned
    up after it; print their lines and the closing line, and return the
    exit status.  -h prints doc.  When the environment variable named by
    verbose is set, each test's time follows its line."""
    patterns = argv[1:]
    if any(p in ("-h", "--help") for p in patterns):
        print(doc.strip())
        return 0
    results = Results()
    for name, fn in selected(tests, patterns):
        t0 = time.monotonic()
        ctx = new_ctx()
        try:
            state, detail = outcome(fn, ctx)
        finally:
            ctx.cleanup()
        results.report(state, name, detail)
        if verbose and os.environ.get(verbose):
            print("# %s took %.1f s" % (name, time.monotonic() - t0),
                  flush=True)
    return results.summary()
