#!/usr/bin/env python3
"""The server's sandbox, tried from inside the running server.

Once past INIT, the server runs with no new privileges and a seccomp filter
(/proc/PID/status: NoNewPrivs 1, Seccomp 2), and under -r with Landlock
keeping its file access beneath the root.  These tests make calls from
inside the live process, as a debugger's call command would
(tests/protocol/inject.c, built by the test: it stops the server where it
waits, makes each call with its registers, and lets it go on), and check
what each returned:

  - execve of a program, socket(AF_INET), socket(AF_INET6), ptrace of
    another process, kill of another process, executable memory: EPERM;
    a call through the x32 ABI ends the process (SIGSYS);
  - the calls that take a command or flags, with values the server does
    not use: fcntl's F_SETOWN, F_SETSIG, F_SETLEASE, F_NOTIFY and O_ASYNC,
    madvise's other advice, unix sockets of other types: EPERM, and one
    ERROR line per call;
  - a call off the list: ENOSYS, and one ERROR line that names it (the
    sanitizer build aborts, naming it); linkat(2) of a descriptor and the
    calls on extended attributes only under -A;
  - under -r, open of a file outside the root and of /etc/shadow, and a
    file created outside: EACCES;
  - under -r, the calls that take a path of their own (chmod, chown,
    lchown, truncate, stat, lstat, statfs, readlink, mkdir, rmdir, unlink,
    rename, link, symlink), on files outside the root: EPERM, the files
    unchanged; without -r the same calls work; with Landlock ABI 2, which
    has no truncate right, truncate(2) outside the root: EPERM;
  - under -r, socket(AF_UNIX) and connect(2) to a unix listener outside the
    root: EPERM, nothing reaches the listener; without -r they reach it;
    under -r the system log (a /dev/log of the test's, in a mount namespace)
    still gets the session's lines over the connection made at start;
  - what serving needs still works from there: socket(AF_UNIX), opening a
    file beneath the root and /etc/passwd (name lookups);

and that the session answers requests afterwards, name lookups (long names,
users-groups-by-id, home-directory, ~user) as with -S.  The log says at
VERBOSE what is in force, in one line.  -S turns the sandbox off; under an
LD_PRELOAD shim (tests/protocol/shim_sandbox.c) the server meets a kernel
without seccomp, without Landlock or with an older Landlock ABI, and still
serves, saying what is missing.

The injected calls and the -r checks need root (the server is not dumpable
and -r wants a root-owned path), the injector an x86-64 server; the shim a
dynamically linked one.  Where they cannot run, the tests say why and skip.

Usage: test_sandbox.py [NAME-SUBSTRING ...]
Prints one line per test, then "N passed, M failed[, K skipped]"; exits 1
if any test failed.
"""

import ctypes
import errno
import grp
import os
import pwd
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # leave no __pycache__ in the tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))

from sftpwire import *  # noqa: E402,F401,F403
import suite  # noqa: E402
from suite import (  # noqa: E402
    Failure, Skip, expect, expect_alive, expect_eq, expect_type, test)

SERVER_ARGV = server_argv()
SERVER = SERVER_ARGV[0]
INJECT_SOURCE = os.path.join(HERE, "inject.c")
SHIM_SOURCE = os.path.join(HERE, "shim_sandbox.c")

# System call numbers of the ABIs the injector speaks, by the ELF class and
# machine of the server: x86-64, and i386 (run on an x86-64 kernel).
X86_64, I386 = (2, 62), (1, 3)
# i386's stat, lstat, chown and lchown here are the calls its C library
# makes: stat64, lstat64, chown32 and lchown32.
NR = {
    X86_64: {"close": 3, "mmap": 9, "socket": 41, "getpid": 39,
             "execve": 59, "kill": 62, "ptrace": 101, "openat": 257,
             "connect": 42, "stat": 4, "lstat": 6, "statfs": 137,
             "readlink": 89, "chmod": 90, "chown": 92, "lchown": 94,
             "truncate": 76, "mkdir": 83, "rmdir": 84, "unlink": 87,
             "rename": 82, "link": 86, "symlink": 88, "setsockopt": 54,
             "getsockopt": 55, "fcntl": 72, "madvise": 28, "getppid": 110,
             "linkat": 265, "fsetxattr": 190, "fgetxattr": 193,
             "flistxattr": 196, "fremovexattr": 199},
    I386: {"close": 6, "mmap": 192, "socket": 359, "getpid": 20,
           "execve": 11, "kill": 37, "ptrace": 26, "openat": 295,
           "socketcall": 102, "connect": 362, "stat": 195, "lstat": 196,
           "statfs": 99, "readlink": 85, "chmod": 15, "chown": 212,
           "lchown": 198, "truncate": 92, "mkdir": 39, "rmdir": 40,
           "unlink": 10, "rename": 38, "link": 9, "symlink": 83,
           "setsockopt": 366, "getsockopt": 365, "fcntl": 221,
           "madvise": 219, "getppid": 64, "linkat": 303, "fsetxattr": 228,
           "fgetxattr": 231, "flistxattr": 234, "fremovexattr": 237},
}
X32_BIT = 0x40000000
SYS_SOCKET = 1      # socketcall(2)'s socket(2)
AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10
SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_SEQPACKET = 1, 2, 3, 5
SOCK_CLOEXEC = 0o2000000
F_GETFL, F_SETFL, F_SETOWN, F_SETSIG, F_SETLEASE, F_NOTIFY = \
    3, 4, 8, 10, 1024, 1026
O_ASYNC, O_NONBLOCK = 0o20000, 0o4000
MADV_DONTNEED, MADV_MERGEABLE, MADV_HWPOISON = 4, 12, 100
SOL_SOCKET, SO_SNDBUF = 1, 7
AT_FDCWD, AT_SYMLINK_FOLLOW, AT_EMPTY_PATH = -100, 0x400, 0x1000
PTRACE_ATTACH = 16
O_RDONLY, O_WRONLY, O_WRONLY_CREAT, O_TRUNC = 0, 0o1, 0o101, 0o1000
AT_FDCWD = -100
PROT_READ_EXEC = 0x5
MAP_PRIVATE_ANON = 0x22

OUTSIDE = b"outside the root: a confined session must never read this\n"
INSIDE = b"inside the root\n"


# -- what the kernel offers ---------------------------------------------------


def landlock_abi():
    """The kernel's Landlock ABI, or the errno that says it has none."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    r = libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0),
                     ctypes.c_uint32(1))
    return ("abi", r) if r >= 0 else ("errno", ctypes.get_errno())


def landlock_line(root, abi):
    """The landlock part of the sandbox's VERBOSE line, for ABI abi."""
    if abi >= 6:
        net = "TCP refused, abstract sockets and signals scoped"
    elif abi >= 4:
        net = "TCP refused"
    else:
        net = ""
    if root is not None and abi < 2:
        return ("landlock ABI %d not used: it refuses renames across "
                "directories" % abi)
    if root is None and abi < 4:
        return "landlock ABI %d: nothing to refuse without -r" % abi
    if root is not None:
        return 'landlock ABI %d: files beneath "%s"%s' % (
            abi, root, ", " + net if net else "")
    return "landlock ABI %d: %s" % (abi, net)


def expected_landlock(root):
    kind, v = landlock_abi()
    if kind == "errno":
        return "landlock missing (%s)" % os.strerror(v)
    return landlock_line(root, v)


def elf_machine(path):
    """(class, machine) from the ELF header of path, or None."""
    with open(path, "rb") as f:
        head = f.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    order = "little" if head[5] == 1 else "big"
    return head[4], int.from_bytes(head[18:20], order)


def is_dynamic(path):
    """Whether path names a dynamic loader (an LD_PRELOAD shim can work)."""
    with open(path, "rb") as f:
        head = f.read(4096)
    return b"/ld-linux" in head or b"/ld-musl" in head


def need_root(why):
    if os.geteuid() != 0:
        raise Skip("needs root: %s" % why)


# -- the injector ----------------------------------------------------------------

_TOOLS = {}


def injector():
    """tests/protocol/inject.c built once per run; Skip where it cannot
    drive the server here."""
    need_root("the server is not dumpable, only root may trace it")
    if os.uname().machine != "x86_64" or elf_machine(SERVER) not in NR:
        raise Skip("the injector drives x86-64 and i386 servers on an "
                   "x86-64 kernel only")
    if "inject" not in _TOOLS:
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        if not cc:
            _TOOLS["inject"] = Skip("no C compiler for the injector")
        else:
            d = tempfile.mkdtemp(prefix="sftp-inject-")
            out = os.path.join(d, "inject")
            r = subprocess.run(cc.split() + ["-O2", "-o", out, INJECT_SOURCE],
                               capture_output=True, timeout=120)
            if r.returncode != 0:
                raise Failure("building the injector failed: %s" %
                              r.stderr.decode(errors="replace")[-500:])
            _TOOLS["inject"] = out
            _TOOLS["dir"] = d
    if isinstance(_TOOLS["inject"], Skip):
        raise _TOOLS["inject"]
    return _TOOLS["inject"]


def inject_arg(a):
    """An argument as the injector takes it: a str is text (NUL-terminated)
    and bytes are bytes, both copied into the process; else a number."""
    if isinstance(a, str):
        return "@" + a
    if isinstance(a, bytes):
        return "%" + a.hex()
    return str(a)


def inject(srv, *calls):
    """Makes calls (tuples: a name of NR, then arguments, see inject_arg())
    from inside the server; returns what each returned (-errno on
    failure)."""
    argv = [injector(), str(srv.proc.pid)]
    for name, *args in calls:
        nr = NR[elf_machine(SERVER)][name]
        argv.append(",".join([str(nr)] + [inject_arg(a) for a in args]))
    r = subprocess.run(argv, capture_output=True, timeout=60)
    if r.returncode != 0:
        raise Failure("inject: exit %d: %s" % (
            r.returncode, r.stderr.decode(errors="replace").strip()))
    return [int(x) for x in r.stdout.split()]


def expect_errno(what, got, want):
    if got != -want:
        raise Failure("%s from inside the server: expected -1 with %s, got "
                      "%s" % (what, errno.errorcode[want],
                              describe_result(got)))


def describe_result(v):
    if -4096 < v < 0:
        return "-1 with %s" % errno.errorcode.get(-v, str(-v))
    return "%d (it worked)" % v


def proc_status(pid):
    fields = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            fields[k] = v.strip()
    return fields


# -- harness -----------------------------------------------------------------------


class Ctx:
    """A root-owned TMP (0711) with root/ (the -r directory) and
    outside/secret beside it, and the servers started."""

    def __init__(self):
        self.tmp = os.path.realpath(tempfile.mkdtemp(prefix="sftp-sandbox-"))
        self.root = os.path.join(self.tmp, "root")
        self.outside = os.path.join(self.tmp, "outside")
        os.mkdir(self.root, 0o755)
        os.mkdir(self.outside, 0o755)
        for path, data in ((os.path.join(self.root, "inside"), INSIDE),
                           (os.path.join(self.outside, "secret"), OUTSIDE)):
            with open(path, "wb") as f:
                f.write(data)
        os.mkdir(os.path.join(self.root, "a"))
        os.mkdir(os.path.join(self.root, "b"))
        with open(os.path.join(self.root, "a", "moved"), "wb") as f:
            f.write(INSIDE)
        os.chmod(self.tmp, 0o711)
        self.servers = []
        self.others = []

    def server(self, args=(), env=None, init=True, argv=None):
        srv = Server((argv or SERVER_ARGV) + ["-e", "-l", "VERBOSE"] +
                     list(args), cwd=self.root, env=env)
        self.servers.append(srv)
        if init:
            expect_eq("VERSION", srv.init().version, 3)
        return srv

    def shim_env(self, **settings):
        if not is_dynamic(SERVER):
            raise Skip("a static server: no LD_PRELOAD shim")
        env = dict(os.environ)
        env["LD_PRELOAD"] = suite.shim_library(SHIM_SOURCE,
                                               "sftp-sandbox-shim-")
        opts = env.get("ASAN_OPTIONS", "")
        env["ASAN_OPTIONS"] = (opts + ":" if opts else "") + \
            "verify_asan_link_order=0"
        for k, v in settings.items():
            env["SHIM_" + k] = str(v)
        return env

    def other_process(self):
        """A process of the same user, not the server's."""
        p = subprocess.Popen(["sleep", "300"])
        self.others.append(p)
        return p.pid

    def cleanup(self):
        for srv in self.servers:
            srv.kill()
        for p in self.others:
            p.kill()
            p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


def sandbox_lines(srv):
    """The server's "sandbox:" lines (it logs with -e)."""
    return [l for l in srv.stderr_output().decode(errors="replace")
            .replace("\r", "").split("\n") if "sandbox:" in l]


def expect_lines(srv, want):
    got = sandbox_lines(srv)
    expect_eq("the sandbox's log lines", got, want)


# An id no one has: its lookup walks every module of the name service
# switch.  A static glibc binary cannot use the modules (it crashes in them,
# sandbox or not), so it is asked only for ids the files know.
NOBODY_ID = 4242420


def lookups(srv):
    """What name lookups answer: long names of a listing, users-groups-by-id
    of root and of an id no one has, home-directory of root, and ~root."""
    h = srv.opendir(".")
    batches, _ = srv.readdir_all(h)
    srv.close_handle(h)
    longs = sorted(e.longname for b in batches for e in b.entries)
    ids = [0, NOBODY_ID] if is_dynamic(SERVER) else [0]
    ug = srv.call(req_users_groups_by_id(ids, ids))
    expect_type(ug, ExtendedReply, "users-groups-by-id")
    home = srv.call(req_home_directory(b"root"))
    tilde = srv.call(req_expand_path(b"~root"))
    return (longs, parse_users_groups(ug.data),
            [e.filename for e in getattr(home, "entries", [])] or repr(home),
            [e.filename for e in getattr(tilde, "entries", [])] or
            repr(tilde))


# -- tests ---------------------------------------------------------------------------


@test
def test_status_no_new_privs_and_filter(ctx):
    """After INIT: NoNewPrivs 1 and Seccomp 2 (filter mode), with and
    without -r; one VERBOSE line says what is in force."""
    got = []
    for args, root in (((), None), (("-r", ctx.root), ctx.root)):
        if root is not None and os.geteuid() != 0:
            continue
        srv = ctx.server(args)
        expect_alive(srv)
        st = proc_status(srv.proc.pid)
        expect_eq("NoNewPrivs of %s" % (" ".join(args) or "the server"),
                  st.get("NoNewPrivs"), "1")
        expect_eq("Seccomp of %s" % (" ".join(args) or "the server"),
                  st.get("Seccomp"), "2")
        expect_lines(srv, ["sandbox: seccomp filter on; " +
                           expected_landlock(root)])
        got.append(st.get("Seccomp"))
    return "Seccomp %s" % ", ".join(got)


@test
def test_refused_from_inside(ctx):
    """execve, socket(AF_INET), socket(AF_INET6), ptrace and kill of
    another process, and executable memory, from inside the live server:
    EPERM each, and the session goes on."""
    srv = ctx.server()
    other = ctx.other_process()
    r = inject(srv, ("execve", "/bin/true", 0, 0),
               ("socket", AF_INET, SOCK_STREAM, 0),
               ("socket", AF_INET6, SOCK_STREAM, 0),
               ("ptrace", PTRACE_ATTACH, other, 0, 0),
               ("kill", other, signal.SIGTERM),
               ("mmap", 0, 4096, PROT_READ_EXEC, MAP_PRIVATE_ANON, -1, 0),
               ("socket", AF_UNIX, SOCK_STREAM, 0),
               ("getpid",))
    expect_errno("execve(\"/bin/true\")", r[0], errno.EPERM)
    expect_errno("socket(AF_INET)", r[1], errno.EPERM)
    expect_errno("socket(AF_INET6)", r[2], errno.EPERM)
    expect_errno("ptrace(PTRACE_ATTACH) of another process", r[3],
                 errno.EPERM)
    expect_errno("kill() of another process", r[4], errno.EPERM)
    expect_errno("mmap(PROT_EXEC)", r[5], errno.EPERM)
    # What serving needs still works there: the injection is real.
    expect(r[6] >= 0, "socket(AF_UNIX) from inside the server: expected a "
           "descriptor (syslog and NSS need it), got %s" %
           describe_result(r[6]))
    expect_eq("getpid() from inside the server", r[7], srv.proc.pid)
    # setsockopt and getsockopt at stdout alone (pipes.c): on another
    # socket the filter refuses them; at stdout, a pipe here, the kernel
    # answers.
    s = inject(srv, ("setsockopt", r[6], SOL_SOCKET, SO_SNDBUF, 0, 4),
               ("setsockopt", 1, SOL_SOCKET, SO_SNDBUF, 0, 4),
               ("getsockopt", r[6], SOL_SOCKET, SO_SNDBUF, 0, 0),
               ("getsockopt", 1, SOL_SOCKET, SO_SNDBUF, 0, 0))
    expect_errno("setsockopt() of a socket other than stdout", s[0],
                 errno.EPERM)
    expect_errno("setsockopt() of stdout, a pipe", s[1], errno.ENOTSOCK)
    expect_errno("getsockopt() of a socket other than stdout", s[2],
                 errno.EPERM)
    expect_errno("getsockopt() of stdout, a pipe", s[3], errno.ENOTSOCK)
    inject(srv, ("close", r[6]))
    expect_eq("the other process's tracer",
              proc_status(other).get("TracerPid"), "0")
    expect(ctx.others[0].poll() is None, "the other process was killed")
    if "socketcall" in NR[elf_machine(SERVER)]:
        # Its arguments are in memory, where the filter cannot look.
        r = inject(srv, ("socketcall", SYS_SOCKET, 0))
        expect_errno("socketcall(SYS_SOCKET)", r[0], errno.EPERM)
    expect_alive(srv, "after the calls")
    h = srv.open("inside", SSH_FXF_READ)
    data = srv.call(req_read(h, 0, 1000))
    expect_eq("READ after the calls", getattr(data, "data", data), INSIDE)
    srv.close_handle(h)
    expect_eq("exit status at the end of input", srv.close(), 0)


@test
def test_commands_and_flags_held_to_those_in_use(ctx):
    """From inside the live server: fcntl's F_SETOWN, F_SETSIG, F_SETLEASE,
    F_NOTIFY and F_SETFL with O_ASYNC (a signal of the client's choosing to
    any process of the account), madvise with an advice the server does not
    use, socket(AF_UNIX) of another type than stream or datagram: EPERM
    each, and the log names each call once; F_GETFL, F_SETFL without
    O_ASYNC, MADV_DONTNEED and a datagram socket still work, and stdin is
    left as it was."""
    srv = ctx.server()
    other = ctx.other_process()
    r = inject(srv, ("fcntl", 0, F_GETFL),
               ("fcntl", 0, F_SETOWN, other),
               ("fcntl", 0, F_SETSIG, signal.SIGKILL),
               ("fcntl", 0, F_SETLEASE, 0),
               ("fcntl", 0, F_NOTIFY, 0),
               ("mmap", 0, 4096, 3, MAP_PRIVATE_ANON, -1, 0),
               ("socket", AF_UNIX, SOCK_RAW, 0),
               ("socket", AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0),
               ("socket", AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0))
    flags, page, dgram = r[0], r[5], r[8]
    expect(flags >= 0, "fcntl(0, F_GETFL) from inside the server: expected "
           "the flags, got %s" % describe_result(flags))
    expect(page > 0 or page < -4096, "mmap: %s" % describe_result(page))
    if elf_machine(SERVER) == I386:
        page &= 0xffffffff
    for what, got in (("fcntl(F_SETOWN)", r[1]), ("fcntl(F_SETSIG)", r[2]),
                      ("fcntl(F_SETLEASE)", r[3]), ("fcntl(F_NOTIFY)", r[4]),
                      ("socket(AF_UNIX, SOCK_RAW)", r[6]),
                      ("socket(AF_UNIX, SOCK_SEQPACKET)", r[7])):
        expect_errno(what, got, errno.EPERM)
    expect(dgram >= 0, "socket(AF_UNIX, SOCK_DGRAM) (syslog) from inside "
           "the server: expected a descriptor, got %s" %
           describe_result(dgram))
    r = inject(srv, ("fcntl", 0, F_SETFL, flags | O_ASYNC),
               ("fcntl", 0, F_SETFL, flags),
               ("fcntl", 0, F_GETFL),
               ("madvise", page, 4096, MADV_MERGEABLE),
               ("madvise", page, 4096, MADV_HWPOISON),
               ("madvise", page, 4096, MADV_DONTNEED),
               ("close", dgram))
    expect_errno("fcntl(F_SETFL, O_ASYNC)", r[0], errno.EPERM)
    expect_eq("fcntl(F_SETFL) without O_ASYNC", r[1], 0)
    expect_eq("stdin's flags after the calls", r[2], flags)
    expect(not flags & O_ASYNC, "stdin has O_ASYNC")
    expect_errno("madvise(MADV_MERGEABLE)", r[3], errno.EPERM)
    expect_errno("madvise(MADV_HWPOISON)", r[4], errno.EPERM)
    expect_eq("madvise(MADV_DONTNEED)", r[5], 0)
    expect_alive(srv, "after the calls")
    expect_eq("REALPATH after the calls",
              [e.filename for e in srv.call(req_realpath(".")).entries],
              [ctx.root.encode()])
    expect(ctx.others[0].poll() is None, "the other process was killed")
    expect_eq("exit status at the end of input", srv.close(), 0)
    nr = NR[elf_machine(SERVER)]
    fcntl = "fcntl64" if elf_machine(SERVER) == I386 else "fcntl"
    expect_eq("the log's lines about them", refused_lines(srv), [
        "sandbox: system call %d (%s) refused: arguments not on the list" %
        (nr[name], label) for name, label in
        (("fcntl", fcntl), ("socket", "socket"), ("madvise", "madvise"))])


@test
def test_linkat_flags_only_under_A(ctx):
    """From inside the live server: linkat(2) of a descriptor (stdin) to a
    name with AT_EMPTY_PATH, and of /proc/self/fd/0 with AT_SYMLINK_FOLLOW:
    EPERM without -A, and the log names the call once; under -A, whose
    unnamed uploads are named so, the filter lets them through to the
    kernel (which will not link a pipe: no name is made either way)."""
    calls = (("linkat", 0, "", AT_FDCWD, "linked", AT_EMPTY_PATH),
             ("linkat", AT_FDCWD, "/proc/self/fd/0", AT_FDCWD, "linked2",
              AT_SYMLINK_FOLLOW))
    srv = ctx.server()
    r = inject(srv, *calls)
    expect_errno("linkat(AT_EMPTY_PATH) without -A", r[0], errno.EPERM)
    expect_errno("linkat(AT_SYMLINK_FOLLOW) without -A", r[1], errno.EPERM)
    expect_alive(srv, "after the calls")
    srv.call(req_realpath("."))     # the loop reports what was refused
    expect_eq("exit status at the end of input", srv.close(), 0)
    expect_eq("the log's lines about them", refused_lines(srv), [
        "sandbox: system call %d (linkat) refused: arguments not on the "
        "list" % NR[elf_machine(SERVER)]["linkat"]])
    srv = ctx.server(["-A"])
    r = inject(srv, *calls)
    for what, got in (("AT_EMPTY_PATH", r[0]),
                      ("AT_SYMLINK_FOLLOW", r[1])):
        expect(got != -errno.EPERM, "linkat(%s) under -A: the filter "
               "refused it" % what)
    srv.call(req_realpath("."))
    expect_eq("exit status at the end of input", srv.close(), 0)
    expect_eq("the log's lines about them", refused_lines(srv), [])
    for n in ("linked", "linked2"):
        expect(not os.path.lexists(os.path.join(ctx.root, n)),
               "a name %s was made" % n)


@test
def test_xattr_calls_only_under_A(ctx):
    """From inside the live server: flistxattr, fgetxattr, fsetxattr and
    fremovexattr on stdin.  Without -A they are off the list (ENOSYS, one
    line each in the log); under -A, whose uploads take the extended
    attributes of the file they replace, the filter lets them through to
    the kernel (which has no attributes for a pipe)."""
    calls = (("flistxattr", 0, 0, 0),
             ("fgetxattr", 0, "security.sftp-test", 0, 0),
             ("fsetxattr", 0, "security.sftp-test", "x", 1, 0),
             ("fremovexattr", 0, "security.sftp-test"))
    machine = elf_machine(SERVER)
    # A sanitizer build aborts at a call off the list (off_the_list).
    sanitized = bool(os.environ.get("SFTP_SANITIZED"))
    if not sanitized:
        srv = ctx.server()
        r = inject(srv, *calls)
        for (name, *_), got in zip(calls, r):
            expect_errno("%s without -A" % name, got, errno.ENOSYS)
        srv.call(req_realpath("."))
        expect_eq("exit status at the end of input", srv.close(), 0)
        expect_eq("the log's lines about them", refused_lines(srv), [
            "sandbox: system call %d (%s) refused: not on the list" %
            (NR[machine][c[0]], c[0]) for c in calls])
    srv = ctx.server(["-A"])
    r = inject(srv, *calls)
    for (name, *_), got in zip(calls, r):
        expect(got != -errno.ENOSYS, "%s under -A: the filter refused it" %
               name)
    srv.call(req_realpath("."))
    expect_eq("exit status at the end of input", srv.close(), 0)
    expect_eq("the log's lines about them", refused_lines(srv), [])
    if sanitized:
        return "under -A only: a sanitizer build aborts at a call off the " \
            "list"


def refused_lines(srv):
    """The server's lines about calls the filter trapped."""
    return [l for l in srv.stderr_output().decode(errors="replace")
            .replace("\r", "").split("\n") if " refused: " in l]


@test
def test_call_off_the_list_is_logged(ctx):
    """A call that no row of the list names (getppid), from inside the live
    server: it fails with ENOSYS, the session goes on, and the log says at
    ERROR which call it was, once however often it came.  The sanitizer
    build aborts there instead, naming it."""
    srv = ctx.server()
    nr = NR[elf_machine(SERVER)]["getppid"]
    if os.environ.get("SFTP_SANITIZED"):
        try:
            inject(srv, ("getppid",))
        except Failure:
            pass
        status = srv.wait(30)
        expect(status != 0, "the server ended with status 0")
        err = srv.stderr_output().decode(errors="replace")
        expect("sandbox: system call %d (getppid) is not on the list" % nr
               in err, "no report of the call in: %r" % err[-2000:])
        return "the sanitizer build aborts, naming it"
    r = inject(srv, ("getppid",), ("getppid",), ("getpid",))
    expect_errno("getppid()", r[0], errno.ENOSYS)
    expect_errno("getppid() again", r[1], errno.ENOSYS)
    expect_eq("getpid()", r[2], srv.proc.pid)
    expect_eq("REALPATH after the call",
              [e.filename for e in srv.call(req_realpath(".")).entries],
              [ctx.root.encode()])
    expect_eq("exit status at the end of input", srv.close(), 0)
    expect_eq("the log's lines", refused_lines(srv),
              ["sandbox: system call %d (getppid) refused: not on the list" %
               nr])


@test
def test_x32_call_ends_the_process(ctx):
    """A call through the x32 ABI (another numbering) kills the server:
    SIGSYS, no errno to probe with."""
    inj = injector()
    if elf_machine(SERVER) != X86_64:
        raise Skip("x32 is an ABI of x86-64 servers")
    srv = ctx.server()
    argv = [inj, str(srv.proc.pid), str(X32_BIT | NR[X86_64]["getpid"])]
    subprocess.run(argv, capture_output=True, timeout=60)
    expect_eq("how the server ended", srv.wait(30), -signal.SIGSYS)


@test
def test_confined_files_refused(ctx):
    """Under -r, from inside the live server: open of a file outside the
    root, of /etc/shadow, and a file created outside fail with EACCES;
    files beneath the root and /etc/passwd open.  The session goes on."""
    need_root("-r wants a root directory on a path only root can change")
    kind, abi = landlock_abi()
    if kind == "errno" or abi < 2:
        raise Skip("the kernel's Landlock cannot keep files beneath the "
                   "root here (%s)" % expected_landlock(ctx.root))
    srv = ctx.server(["-r", ctx.root])
    secret = os.path.join(ctx.outside, "secret")
    made = os.path.join(ctx.outside, "made")
    r = inject(srv, ("openat", AT_FDCWD, secret, O_RDONLY),
               ("openat", AT_FDCWD, "/etc/shadow", O_RDONLY),
               ("openat", AT_FDCWD, made, O_WRONLY_CREAT, 0o644),
               ("openat", AT_FDCWD, os.path.join(ctx.root, "inside"),
                O_RDONLY),
               ("openat", AT_FDCWD, "/etc/passwd", O_RDONLY))
    expect_errno("open(\"%s\")" % secret, r[0], errno.EACCES)
    expect_errno("open(\"/etc/shadow\")", r[1], errno.EACCES)
    expect_errno("open(\"%s\", O_CREAT)" % made, r[2], errno.EACCES)
    expect(not os.path.lexists(made), "%s was created" % made)
    expect(r[3] >= 0 and r[4] >= 0, "open of a file beneath the root and "
           "of /etc/passwd from inside the server: expected descriptors, "
           "got %s and %s" % (describe_result(r[3]), describe_result(r[4])))
    inject(srv, ("close", r[3]), ("close", r[4]))
    expect_alive(srv, "after the calls")
    h = srv.open("/inside", SSH_FXF_READ)
    data = srv.call(req_read(h, 0, 1000))
    expect_eq("READ after the calls", getattr(data, "data", data), INSIDE)
    srv.close_handle(h)
    # A rename across directories: Landlock's REFER right is granted.
    expect_eq("RENAME /a/moved /b/moved",
              srv.call(req_rename("/a/moved", "/b/moved")).code, SSH_FX_OK)
    expect(os.path.exists(os.path.join(ctx.root, "b", "moved")),
           "the rename did not happen")
    return "Landlock ABI %d" % abi


# -- under -r: the calls that take a path of their own, and sockets -------------

# Room for what stat, statfs and readlink write back, in either ABI.
OUT_BUFFER = "x" * 255


def legacy_fixture(d):
    """d/victim (0644, root's), d/link -> victim and d/dir, empty."""
    os.mkdir(d, 0o755)
    victim = os.path.join(d, "victim")
    with open(victim, "wb") as f:
        f.write(OUTSIDE)
    os.chmod(victim, 0o644)
    os.symlink("victim", os.path.join(d, "link"))
    os.mkdir(os.path.join(d, "dir"), 0o755)


def legacy_calls(d):
    """(label, call) for each call that takes a path of its own, all on
    files of d.  In this order, each works without -r."""
    def p(name):
        return os.path.join(d, name)
    return [
        ("chmod", ("chmod", p("victim"), 0o777)),
        ("chown", ("chown", p("victim"), NOBODY_ID, NOBODY_ID)),
        ("lchown", ("lchown", p("link"), NOBODY_ID, NOBODY_ID)),
        ("truncate", ("truncate", p("victim"), 0)),
        ("stat", ("stat", p("victim"), OUT_BUFFER)),
        ("lstat", ("lstat", p("link"), OUT_BUFFER)),
        ("statfs", ("statfs", d, OUT_BUFFER)),
        ("readlink", ("readlink", p("link"), OUT_BUFFER, 100)),
        ("mkdir", ("mkdir", p("made"), 0o755)),
        ("symlink", ("symlink", "victim", p("sym"))),
        ("link", ("link", p("victim"), p("hard"))),
        ("rename", ("rename", p("hard"), p("renamed"))),
        ("unlink", ("unlink", p("renamed"))),
        ("rmdir", ("rmdir", p("dir"))),
    ]


def snapshot(d):
    """What a call could change in d: each entry's type, mode, owner, size
    and contents."""
    out = {}
    for name in sorted(os.listdir(d)):
        st = os.lstat(os.path.join(d, name))
        data = None
        if stat.S_ISREG(st.st_mode):
            with open(os.path.join(d, name), "rb") as f:
                data = f.read()
        out[name] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                     st.st_uid, st.st_gid, st.st_size, data)
    return out


@test
def test_path_calls_refused_under_r(ctx):
    """Under -r, from inside the live server: chmod, chown, lchown,
    truncate, stat, lstat, statfs, readlink, mkdir, symlink, link, rename,
    unlink and rmdir of files outside the root fail with EPERM, whatever
    Landlock's ABI, and change nothing; the server never makes them there.
    Without -r the same calls work.  The session then serves SETSTAT (size,
    mode, owner, times), STAT, READLINK and statvfs under -r."""
    need_root("-r wants a root directory on a path only root can change")
    injector()
    plain = os.path.join(ctx.outside, "legacy-plain")
    legacy_fixture(plain)
    srv = ctx.server()
    calls = legacy_calls(plain)
    r = inject(srv, *[c for _, c in calls])
    bad = ["%s: %s" % (label, describe_result(v))
           for (label, _), v in zip(calls, r) if v < 0]
    expect(not bad, "without -r, calls that must work failed: %s" %
           ", ".join(bad))
    st = os.lstat(os.path.join(plain, "victim"))
    expect_eq("the victim without -r (mode, owner, size)",
              (stat.S_IMODE(st.st_mode), st.st_uid, st.st_size),
              (0o777, NOBODY_ID, 0))
    expect_eq("entries without -r", sorted(os.listdir(plain)),
              ["link", "made", "sym", "victim"])
    expect_alive(srv, "after the calls without -r")

    d = os.path.join(ctx.outside, "legacy-r")
    legacy_fixture(d)
    before = snapshot(d)
    srv = ctx.server(["-r", ctx.root])
    calls = legacy_calls(d)
    r = inject(srv, *[c for _, c in calls])
    got = [(label, describe_result(v)) for (label, _), v in zip(calls, r)]
    want = [(label, describe_result(-errno.EPERM)) for label, _ in calls]
    expect_eq("the calls under -r, from inside the server", got, want)
    expect_eq("the files outside the root after them", snapshot(d), before)
    expect_alive(srv, "after the calls under -r")

    # What serving does under -r needs none of them.
    os.symlink("inside", os.path.join(ctx.root, "to-inside"))
    expect_eq("SETSTAT of /inside", srv.call(req_setstat("/inside", Attrs(
        size=3, permissions=0o600, uid=NOBODY_ID, gid=NOBODY_ID,
        atime=12345, mtime=67890))).code, SSH_FX_OK)
    st = os.stat(os.path.join(ctx.root, "inside"))
    expect_eq("/inside after SETSTAT (size, mode, owner, times)",
              (st.st_size, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid,
               int(st.st_atime), int(st.st_mtime)),
              (3, 0o600, NOBODY_ID, NOBODY_ID, 12345, 67890))
    a = srv.call(req_stat("/to-inside"))
    expect_type(a, AttrsReply, "STAT of /to-inside")
    expect_eq("STAT of /to-inside: size", a.attrs.size, 3)
    link = srv.call(req_readlink("/to-inside"))
    expect_eq("READLINK of /to-inside",
              [e.filename for e in getattr(link, "entries", [])] or link,
              [b"inside"])
    expect_type(srv.call(req_statvfs("/")), ExtendedReply, "statvfs of /")
    return "%d calls" % len(calls)


@test
def test_truncate_outside_with_landlock_abi_2(ctx):
    """Landlock ABI 2 (Linux 5.19 to 6.1, the shim answers the version) has
    no truncate right.  Under -r, from inside the live server: truncate(2)
    of a file outside the root fails with EPERM, and opening it to write,
    or read-only with O_TRUNC, with EACCES; the file keeps its contents.
    SETSTAT of a size beneath the root works."""
    kind, real = landlock_abi()
    if kind == "errno" or real < 2:
        raise Skip("the kernel has no Landlock ABI 2 to offer")
    need_root("-r wants a root directory on a path only root can change")
    injector()
    env = ctx.shim_env(LANDLOCK_ABI=2)
    d = os.path.join(ctx.outside, "abi2")
    legacy_fixture(d)
    before = snapshot(d)
    victim = os.path.join(d, "victim")
    srv = ctx.server(["-r", ctx.root], env=env)
    expect_lines(srv, ["sandbox: seccomp filter on; " +
                       landlock_line(ctx.root, 2)])
    r = inject(srv, ("truncate", victim, 0),
               ("openat", AT_FDCWD, victim, O_WRONLY),
               ("openat", AT_FDCWD, victim, O_RDONLY | O_TRUNC))
    got = [describe_result(v) for v in r]
    expect_eq("truncate(), open(O_WRONLY) and open(O_RDONLY | O_TRUNC) of "
              "a file outside the root", got,
              [describe_result(-errno.EPERM), describe_result(-errno.EACCES),
               describe_result(-errno.EACCES)])
    expect_eq("the files outside the root after them", snapshot(d), before)
    expect_eq("SETSTAT size of /inside", srv.call(req_setstat(
        "/inside", Attrs(size=2))).code, SSH_FX_OK)
    expect_eq("/inside after it", os.path.getsize(
        os.path.join(ctx.root, "inside")), 2)


def unix_address(path):
    """struct sockaddr_un for path, as the kernel reads it."""
    return (socket.AF_UNIX.to_bytes(2, sys.byteorder) +
            path.encode() + b"\0")


def syslog_server(ctx, args):
    """A server that logs to syslog, at its default level (ERROR: no line
    before the sandbox), in a mount namespace of its own whose /dev holds
    the test's /dev/log (a datagram socket) and /dev/null.  Returns the
    server and that socket."""
    if not shutil.which("unshare"):
        raise Skip("no unshare (util-linux) for a /dev/log of the test's")
    dev = os.path.join(ctx.tmp, "dev")
    os.mkdir(dev, 0o755)
    open(os.path.join(dev, "null"), "w").close()
    log = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    log.bind(os.path.join(dev, "log"))
    log.setblocking(False)
    jail = ["unshare", "--mount", "--propagation", "private", "--", "sh",
            "-c", 'mount --bind /dev/null "$0/null" && mount --bind "$0" /dev '
            '&& exec "$@"', dev]
    srv = Server(jail + SERVER_ARGV + list(args), cwd=ctx.root)
    ctx.servers.append(srv)
    expect_eq("VERSION", srv.init().version, 3)
    return srv, log


def syslog_lines(log):
    """The messages queued on the test's /dev/log, their header dropped
    (and the newline that musl's syslog(3) ends them with)."""
    out = []
    while True:
        try:
            msg = log.recv(4096).decode(errors="replace")
        except BlockingIOError:
            return out
        out.append(msg.split("]: ", 1)[-1].rstrip("\n"))


@test
def test_unix_sockets_refused_under_r(ctx):
    """A unix listener outside the root (as systemd --user's): without -r,
    socket(AF_UNIX) and connect(2) from inside the server reach it; under -r
    both fail with EPERM and nothing reaches it.  The session goes on, and
    its lines still reach the system log over the socket connected at
    start."""
    need_root("-r wants a root directory on a path only root can change")
    injector()
    path = os.path.join(ctx.outside, "listener")
    lsn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        lsn.bind(path)
        lsn.listen(4)
        lsn.setblocking(False)
        addr = unix_address(path)

        srv = ctx.server()
        r = inject(srv, ("socket", AF_UNIX, SOCK_STREAM, 0))
        expect(r[0] >= 0, "socket(AF_UNIX) without -r: expected a "
               "descriptor, got %s" % describe_result(r[0]))
        c = inject(srv, ("connect", r[0], addr, len(addr)))
        expect_eq("connect() to the listener without -r",
                  describe_result(c[0]), describe_result(0))
        # The connection is queued once connect() has returned.
        conn, _ = lsn.accept()
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                struct.calcsize("3i"))
        conn.close()
        expect_eq("the listener's peer", struct.unpack("3i", creds)[0],
                  srv.proc.pid)
        inject(srv, ("close", r[0]))
        expect_alive(srv, "after the calls without -r")

        srv, log = syslog_server(ctx, ["-r", ctx.root])
        r = inject(srv, ("socket", AF_UNIX, SOCK_STREAM, 0),
                   ("socket", AF_UNIX, socket.SOCK_DGRAM, 0),
                   ("connect", 0, addr, len(addr)))
        got = [describe_result(v) for v in r]
        expect_eq("socket(AF_UNIX, SOCK_STREAM), socket(AF_UNIX, "
                  "SOCK_DGRAM) and connect() to the listener under -r",
                  got, [describe_result(-errno.EPERM)] * 3)
        try:
            conn, _ = lsn.accept()
            conn.close()
            raise Failure("under -r, a connection reached the listener")
        except BlockingIOError:
            pass
        expect_alive(srv, "after the calls under -r")
        h = srv.open("/inside", SSH_FXF_READ)
        data = srv.call(req_read(h, 0, 1000))
        expect_eq("READ after the calls", getattr(data, "data", data),
                  INSIDE)
        srv.close_handle(h)
        # An ERROR line, the session's first: syslog(3) sends it over the
        # connection made at start, as it can make no other.
        expect_type(srv.call(req_extended(b"nothing@example.com")), Status,
                    "an unknown extended request")
        # (A kernel whose Landlock cannot hold the root adds its own.)
        lines = [l for l in syslog_lines(log) if "sandbox: " not in l]
        log.close()
        expect_eq("the system log's lines under -r", lines,
                  ['error: Unknown extended request "nothing@example.com"'])
    finally:
        lsn.close()


@test
def test_lookups_answer_as_without_sandbox(ctx):
    """Long names, users-groups-by-id, home-directory and ~user answer the
    same with the sandbox as with -S, with and without -r: the name
    service's modules were loaded before the filter, and under -r its files
    stay readable."""
    runs = [((), "")]
    if os.geteuid() == 0:
        if is_dynamic(SERVER):
            os.chown(os.path.join(ctx.root, "inside"), NOBODY_ID, NOBODY_ID)
        runs.append((("-r", ctx.root), " under -r"))
    me = pwd.getpwuid(os.getuid()).pw_name.encode()
    for args, label in runs:
        on = ctx.server(list(args))
        off = ctx.server(list(args) + ["-S"])
        got, want = lookups(on), lookups(off)
        expect_eq("name lookups%s, sandbox on (as with -S)" % label, got,
                  want)
        expect(any(b" %s " % me in l for l in got[0]),
               "no long name%s shows the user %s: %r" % (label, me, got[0]))
        expect_eq("users-groups-by-id of 0%s" % label,
                  (got[1][0][0], got[1][1][0]),
                  (pwd.getpwuid(0).pw_name.encode(),
                   grp.getgrgid(0).gr_name.encode()))
    return "%d runs" % len(runs)


@test
def test_off_with_S(ctx):
    """-S: no sandbox (NoNewPrivs 0, Seccomp 0; socket(AF_INET) works from
    inside), and the log says so."""
    srv = ctx.server(["-S"])
    expect_alive(srv)
    st = proc_status(srv.proc.pid)
    expect_eq("NoNewPrivs with -S", st.get("NoNewPrivs"), "0")
    expect_eq("Seccomp with -S", st.get("Seccomp"), "0")
    expect_lines(srv, ["sandbox: off (-S)"])
    if os.geteuid() == 0 and os.uname().machine == "x86_64" and \
            elf_machine(SERVER) in NR:
        r = inject(srv, ("socket", AF_INET, SOCK_STREAM, 0))
        expect(r[0] >= 0, "socket(AF_INET) with -S: expected a descriptor, "
               "got %s" % describe_result(r[0]))
        inject(srv, ("close", r[0]))
        expect_alive(srv, "after the calls")


@test
def test_kernel_without_seccomp_or_landlock(ctx):
    """A kernel without seccomp filters or Landlock (the shim): the server
    serves, says what is missing at VERBOSE, and at ERROR for -r."""
    enosys = os.strerror(errno.ENOSYS)
    env = ctx.shim_env(NO_SECCOMP=1, NO_LANDLOCK=1)
    srv = ctx.server(env=env)
    expect_alive(srv)
    st = proc_status(srv.proc.pid)
    expect_eq("Seccomp without seccomp", st.get("Seccomp"), "0")
    expect_eq("NoNewPrivs without seccomp", st.get("NoNewPrivs"), "1")
    expect_lines(srv, ["sandbox: seccomp filter missing (%s); landlock "
                       "missing (%s)" % (enosys, enosys)])
    if os.geteuid() != 0:
        return "without -r only: -r needs root"
    srv = ctx.server(["-r", ctx.root], env=env)
    expect_alive(srv)
    h = srv.open("/inside", SSH_FXF_READ)
    srv.close_handle(h)
    expect_lines(srv, [
        "sandbox: landlock missing (%s): files outside the -r root are not "
        "refused by the kernel" % enosys,
        "sandbox: seccomp filter missing (%s); landlock missing (%s)" %
        (enosys, enosys)])


@test
def test_kernel_without_landlock(ctx):
    """Seccomp without Landlock: the filter still applies; under -r the
    ERROR line says the root is not held by the kernel."""
    enosys = os.strerror(errno.ENOSYS)
    env = ctx.shim_env(NO_LANDLOCK=1)
    need_root("-r wants a root directory on a path only root can change")
    srv = ctx.server(["-r", ctx.root], env=env)
    expect_alive(srv)
    expect_eq("Seccomp", proc_status(srv.proc.pid).get("Seccomp"), "2")
    expect_lines(srv, [
        "sandbox: landlock missing (%s): files outside the -r root are not "
        "refused by the kernel" % enosys,
        "sandbox: seccomp filter on; landlock missing (%s)" % enosys])


@test
def test_older_landlock_abis(ctx):
    """Landlock ABIs 1, 3 and 5 (the shim answers the version; the kernel
    makes the rulesets): each gets what it can, and the session serves."""
    kind, real = landlock_abi()
    if kind == "errno":
        raise Skip("no Landlock here: %s" % os.strerror(real))
    need_root("-r wants a root directory on a path only root can change")
    seen = []
    for abi in (1, 3, 5):
        if abi > real:
            continue
        env = ctx.shim_env(LANDLOCK_ABI=abi)
        for args, root in (((), None), (("-r", ctx.root), ctx.root)):
            srv = ctx.server(list(args), env=env)
            expect_alive(srv, "with Landlock ABI %d" % abi)
            want = ["sandbox: seccomp filter on; " + landlock_line(root, abi)]
            if root is not None and abi < 2:
                want.insert(0, "sandbox: %s: files outside the -r root are "
                            "not refused by the kernel" %
                            landlock_line(root, abi))
            expect_lines(srv, want)
            if root is not None and abi >= 2 and \
                    elf_machine(SERVER) == X86_64:
                r = inject(srv, ("openat", AT_FDCWD,
                                 os.path.join(ctx.outside, "secret"),
                                 O_RDONLY))
                expect_errno("open of a file outside the root with Landlock "
                             "ABI %d" % abi, r[0], errno.EACCES)
                expect_alive(srv, "after the call")
        seen.append(str(abi))
    return "ABI %s" % ", ".join(seen)


if __name__ == "__main__":
    rc = suite.main(sys.argv, __doc__, Ctx)
    if "dir" in _TOOLS:
        shutil.rmtree(_TOOLS["dir"], ignore_errors=True)
    sys.exit(rc)
