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
    sanitizer build aborts, naming it);
  - under -r, open of a file outside the root and of /etc/shadow, and a
    file created outside: EACCES;
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
NR = {
    X86_64: {"close": 3, "mmap": 9, "socket": 41, "getpid": 39,
             "execve": 59, "kill": 62, "ptrace": 101, "openat": 257,
             "fcntl": 72, "madvise": 28, "getppid": 110},
    I386: {"close": 6, "mmap": 192, "socket": 359, "getpid": 20,
           "execve": 11, "kill": 37, "ptrace": 26, "openat": 295,
           "socketcall": 102, "fcntl": 221, "madvise": 219,
           "getppid": 64},
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
PTRACE_ATTACH = 16
O_RDONLY, O_WRONLY_CREAT = 0, 0o101
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


def inject(srv, *calls):
    """Makes calls (tuples: a name of NR, then arguments; a str is text
    copied into the process) from inside the server; returns what each
    returned (-errno on failure)."""
    argv = [injector(), str(srv.proc.pid)]
    for name, *args in calls:
        nr = NR[elf_machine(SERVER)][name]
        argv.append(",".join([str(nr)] + [
            "@" + a if isinstance(a, str) else str(a) for a in args]))
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
