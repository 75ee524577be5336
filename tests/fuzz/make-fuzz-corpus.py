#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz harnesses.

tests/fuzz/fuzz-corpus/session/ gets whole client sessions for fuzz_session:
INIT first, then requests sent without waiting for replies, covering every
request type, the options the INIT version word selects (see the comment
at the top of tests/fuzz/fuzz_session.c) and the ways a session ends.
tests/fuzz/fuzz-corpus/session-wait/ gets sessions on storage that waits
(the version word's CFG_WAIT): deep pipelines that fill the job ring and
the arena, READs past the end of files, slow CLOSEs, signals while storage
hangs, and some of the sessions above again.
tests/fuzz/fuzz-corpus/packet/ gets inputs for fuzz_packet: three bytes that
set its input buffer, read sizes and reply queue, then a session.

Sessions act on the tree fuzz_session puts in its jail before each
session (file, dir/, link, home/alice/...).  Handles are known before the
replies: they follow the server's handle table, which is modelled here
(slots handed out in order, freed slots reused last in, first out, the
generation bumped at each close).

Reproducers of the bugs found (bug-*) are seeds too, written from a
function here that says what each one does.  Files are rewritten, never
deleted, so inputs added by hand (a crash file from a fuzzing run) stay.
Every file is a few KiB at most.

Usage: make-fuzz-corpus.py [--check FUZZ_SESSION]
  --check runs each session seed through the given fuzz_session binary
  with FUZZ_SESSION_OUT and prints the replies it got, per type and status.
"""

import collections
import os
import struct
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))

from sftpwire import *  # noqa: E402,F401,F403

CORPUS = os.path.join(HERE, "fuzz-corpus")
MAX_SEED = 6 * 1024

# The INIT version word's option bits (tests/fuzz/fuzz_session.c).
CFG_DEVNULL = 0x00000100
LOG_SYSLOG = 1 << 9
LOG_INFO = 2 << 9
LOG_QUIET = 3 << 9
CFG_READONLY = 0x00000800
CFG_DENY = 0x00001000
CFG_ALLOW = 0x00002000
CFG_UMASK = 0x00004000
DIR_HOME = 1 << 15
DIR_ALICE = 2 << 15
DIR_MISSING = 3 << 15
CFG_ROOT = 0x00020000
CFG_WAIT = 0x00040000
OPS_2 = 1 << 19
OPS_4 = 2 << 19
OPS_128 = 3 << 19
CFG_SLOW_READER = 0x00200000
CFG_ATOMIC = 0x00400000
CFG_MODES = 0x00800000
CFG_BWLIMIT = 0x01000000

# Request ids under CFG_WAIT: what the storage of the request's job does.
WAIT_HANG = 0x40000000
WAIT_SIGNAL = 0x80000000

INT64_MAX = (1 << 63) - 1
RW = SSH_FXF_READ | SSH_FXF_WRITE
CREATE = SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC


class Session:
    """A session's bytes, with the handles the server will hand out."""

    def __init__(self, version=3, extensions=()):
        self.parts = [encode_init(version, extensions)]
        self.rid = 0
        self.gens = []
        self.free = []

    def raw(self, data):
        self.parts.append(bytes(data))

    def req(self, request, wait=None, flags=0):
        """A request; under CFG_WAIT, its id says how long its storage
        waits: 20 us times the square of the id's low 4 bits (wait, 0 to
        15), which otherwise run 1, 2, ... 15, 0 with the requests; flags:
        WAIT_HANG, WAIT_SIGNAL.
        """
        self.rid += 1
        rid = self.rid if wait is None else self.rid << 4 | wait
        self.parts.append(encode_request(rid | flags, request))

    def _new_handle(self):
        if self.free:
            slot = self.free.pop()
        else:
            slot = len(self.gens)
            self.gens.append(0)
        return u32(slot) + u32(self.gens[slot])

    def open(self, path, pflags, attrs=None):
        """OPEN that succeeds; returns the handle it will get."""
        self.req(req_open(path, pflags, attrs))
        return self._new_handle()

    def opendir(self, path):
        """OPENDIR that succeeds; returns the handle it will get."""
        self.req(req_opendir(path))
        return self._new_handle()

    def close(self, handle):
        self.req(req_close(handle))
        slot = struct.unpack(">I", handle[:4])[0]
        self.gens[slot] += 1
        self.free.append(slot)

    def close_in_flight(self, handle, wait=None, flags=0):
        """CLOSE under CFG_WAIT: its slot is freed when its job is done,
        which may come after later OPENs took new slots: none is reused."""
        self.req(req_close(handle), wait, flags)

    def data(self):
        return b"".join(self.parts)


def full_attrs(**kw):
    return Attrs(size=kw.get("size", 10), uid=0, gid=0, permissions=0o640,
                 atime=1000000000, mtime=1700000000,
                 extended=[(b"vendor@example.com", b"value")])


# ---------------------------------------------------------------------------
# Session seeds


def s_init():
    return Session()


def s_init_extensions():
    s = Session(3, [(b"client-ext@example.com", b"1"), (b"", b"")])
    s.req(req_realpath("."))
    return s


def s_file_io():
    s = Session()
    h = s.open("f", RW | SSH_FXF_CREAT | SSH_FXF_TRUNC)
    s.req(req_write(h, 0, b"0123456789" * 40))
    s.req(req_write(h, 1000, b"after a hole"))
    s.req(req_write(h, 0, b""))
    s.req(req_fstat(h))
    s.req(req_read(h, 0, 100))
    s.req(req_read(h, 390, 1000))
    s.req(req_read(h, 5000, 10))
    s.req(req_read(h, 0, 0))
    s.req(req_fsetstat(h, Attrs(size=50)))
    s.req(req_fsync(h))
    s.req(req_fstatvfs(h))
    s.close(h)
    s.req(req_close(h))
    s.req(req_read(h, 0, 10))
    s.req(req_write(h, 0, b"x"))
    return s


def s_open_flags():
    s = Session()
    h1 = s.open("file", SSH_FXF_READ)
    h2 = s.open("new", SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_EXCL,
                Attrs(permissions=0o600))
    s.req(req_open("new", SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_EXCL))
    h3 = s.open("new", SSH_FXF_WRITE | SSH_FXF_APPEND)
    s.req(req_write(h3, 12345, b"appended"))
    s.req(req_write(h2, 0, b"A" * 300))
    # A write-only handle read: by sendfile for 16 KiB and more.
    s.req(req_read(h2, 0, 20000))
    s.req(req_read(h2, 0, 10))
    s.req(req_write(h1, 0, b"read-only"))
    h4 = s.open("dir", SSH_FXF_READ)
    s.req(req_read(h4, 0, 20000))
    s.req(req_read(h4, 0, 10))
    s.req(req_open("missing", SSH_FXF_READ))
    s.req(req_open("dir/nope/x", CREATE))
    s.req(req_open("", SSH_FXF_READ))
    s.req(req_open("link", SSH_FXF_READ | SSH_FXF_TRUNC | SSH_FXF_WRITE))
    s.req(req_open("new", 0xffffffff, Attrs(permissions=0o7777)))
    for h in (h4, h3, h2, h1):
        s.close(h)
    return s


def reads_of_file(s):
    h = s.open("file", SSH_FXF_READ)
    s.req(req_read(h, 0, 16384))
    s.req(req_read(h, 0, 20000))
    s.req(req_read(h, 100, 30000))
    s.req(req_read(h, 19999, 16384))
    s.req(req_read(h, 20000, 16384))
    s.req(req_read(h, 16, 100))
    s.req(req_read(h, 1 << 40, 16384))
    s.req(req_read(h, 1 << 63, 16))
    s.req(req_read(h, 0, 0xffffffff))
    s.close(h)


def s_read_sendfile():
    s = Session()
    reads_of_file(s)
    return s


def s_read_devnull():
    s = Session(3 | CFG_DEVNULL)
    reads_of_file(s)
    return s


def s_big_reads():
    s = Session()
    h = s.open("big", RW | SSH_FXF_CREAT)
    s.req(req_fsetstat(h, Attrs(size=1 << 20)))
    s.req(req_write(h, 300000, b"data in the middle"))
    for i in range(6):
        s.req(req_read(h, i * 200000, 262144))
    s.close(h)
    return s


def s_readdir():
    s = Session()
    h = s.opendir(".")
    for _ in range(3):
        s.req(req_readdir(h))
    h2 = s.opendir("dir")
    s.req(req_readdir(h2))
    s.req(req_readdir(h2))
    s.req(req_opendir("file"))
    s.req(req_opendir("missing"))
    s.req(req_fstat(h2))
    s.req(req_read(h2, 0, 10))
    s.close(h2)
    s.req(req_readdir(h2))
    s.close(h)
    return s


def s_readdir_big():
    s = Session()
    s.req(req_mkdir("big"))
    for i in range(110):
        s.req(req_mkdir("big/%03d" % i))
    h = s.opendir("big")
    for _ in range(3):
        s.req(req_readdir(h))
    s.close(h)
    return s


def s_stat():
    s = Session()
    for p in ("file", "link", "dangling", "loop", "dir", "dir/", "",
              "/", "missing", "file/x", "/etc/passwd"):
        s.req(req_stat(p))
        s.req(req_lstat(p))
    return s


def s_setstat():
    s = Session()
    s.req(req_setstat("file", full_attrs()))
    s.req(req_setstat("file", Attrs(size=1 << 63)))
    s.req(req_setstat("file", Attrs(permissions=0o4755)))
    s.req(req_setstat("file", Attrs(atime=0, mtime=0xffffffff)))
    s.req(req_setstat("file", Attrs(uid=1000, gid=100)))
    s.req(req_setstat("missing", full_attrs()))
    s.req(req_setstat("dir", Attrs(size=0)))
    s.req(req_setstat("file", Attrs(flags=0x7ffffff0)))
    h = s.open("file", RW)
    s.req(req_fsetstat(h, full_attrs(size=5)))
    s.req(req_fsetstat(h, Attrs(size=1 << 63)))
    s.close(h)
    s.req(req_lsetstat("link", Attrs(permissions=0o600)))
    s.req(req_lsetstat("link", Attrs(size=1)))
    s.req(req_lsetstat("link", Attrs(atime=1, mtime=2)))
    s.req(req_lsetstat("link", Attrs(uid=0, gid=0)))
    s.req(req_lsetstat("dir", Attrs(permissions=0o700)))
    s.req(req_lsetstat("missing", Attrs(permissions=0o700)))
    return s


def s_dirs():
    s = Session()
    s.req(req_mkdir("m", Attrs(permissions=0o700)))
    s.req(req_mkdir("m"))
    s.req(req_mkdir("m/n", Attrs(permissions=0o7777)))
    s.req(req_mkdir("missing/n"))
    s.req(req_rmdir("m"))
    s.req(req_rmdir("m/n"))
    s.req(req_rmdir("m"))
    s.req(req_rmdir("file"))
    s.req(req_rmdir("."))
    s.req(req_remove("dir/a"))
    s.req(req_remove("dir"))
    s.req(req_remove("missing"))
    s.req(req_remove("link"))
    return s


def s_rename():
    s = Session()
    s.req(req_rename("file", "file2"))
    s.req(req_rename("file2", "link"))
    s.req(req_rename("dir", "dir2"))
    s.req(req_rename("dir2", "dir2/sub/x"))
    s.req(req_rename("missing", "x"))
    s.req(req_rename("dangling", "dangling2"))
    s.req(req_posix_rename("file2", "link"))
    s.req(req_posix_rename("link", "dir2/a"))
    s.req(req_posix_rename("dir2", "."))
    return s


def s_links():
    s = Session()
    s.req(req_symlink("file", "s1"))
    s.req(req_symlink("file", "s1"))
    s.req(req_symlink("/etc/passwd", "s2"))
    s.req(req_readlink("s1"))
    s.req(req_readlink("s2"))
    s.req(req_readlink("file"))
    s.req(req_readlink("loop"))
    s.req(req_readlink("missing"))
    s.req(req_hardlink("file", "h1"))
    s.req(req_hardlink("file", "h1"))
    s.req(req_hardlink("dir", "h2"))
    s.req(req_hardlink("missing", "h3"))
    s.req(req_stat("h1"))
    return s


def s_realpath():
    s = Session()
    for p in ("", ".", "..", "/", "//", "dir/../file", "link", "loop",
              "dangling", "missing", "missing/x", "file/.", "file/..",
              "file/x", "/home/alice/", "./dir/./sub/../", "/../../etc",
              "home/alice/up", "home/alice/abs"):
        s.req(req_realpath(p))
    return s


def s_expand_home():
    s = Session()
    for p in ("~", "~/", "~/x", "~alice", "~alice/notes", "~nosuch/x", "",
              "/abs", "dir/../..", "~root"):
        s.req(req_expand_path(p))
    for u in ("", "alice", "root", "nosuch"):
        s.req(req_home_directory(u))
    return s


def s_statvfs_limits():
    s = Session()
    s.req(req_statvfs("."))
    s.req(req_statvfs("missing"))
    h = s.open("file", SSH_FXF_READ)
    s.req(req_fstatvfs(h))
    s.close(h)
    s.req(req_fstatvfs(h))
    s.req(req_limits())
    return s


def s_users_groups():
    s = Session()
    s.req(req_users_groups_by_id([0, 1000, 4242, 65534], [0, 100, 4242]))
    s.req(req_users_groups_by_id([], []))
    s.req(req_users_groups_by_id(list(range(300)), [1000] * 50))
    s.req(req_extended(b"users-groups-by-id@openssh.com",
                       string(b"\0\0\0") + string(b"")))
    return s


def s_copy_data():
    s = Session()
    r = s.open("file", SSH_FXF_READ)
    w = s.open("copy", RW | SSH_FXF_CREAT)
    a = s.open("app", SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_APPEND)
    s.req(req_copy_data(r, 0, 0, w, 0))
    s.req(req_copy_data(r, 100, 1000, w, 50000))
    s.req(req_copy_data(r, 19000, 70000, w, 0))
    s.req(req_copy_data(r, 30000, 10, w, 0))
    s.req(req_copy_data(r, 0, 300, a, 0))
    s.req(req_copy_data(r, 0, 0, a, 0))
    s.req(req_copy_data(r, 0, 10, r, 0))
    s.req(req_copy_data(w, 0, 10, r, 0))
    s.req(req_copy_data(r, 1 << 63, 10, w, 0))
    s.req(req_copy_data(r, INT64_MAX, 10, w, 0))
    s.req(req_copy_data(r, 0, 10, w, 1 << 63))
    s.req(req_copy_data(b"bogus", 0, 10, w, 0))
    h = s.open("link", SSH_FXF_READ)
    s.req(req_copy_data(r, 0, 10, h, 0))
    for x in (h, a, w, r):
        s.close(x)
    return s


def s_handles_exhausted():
    s = Session()
    handles = [s.open("file", SSH_FXF_READ) for _ in range(59)]
    s.req(req_open("file", SSH_FXF_READ))
    s.req(req_opendir("dir"))
    s.req(req_limits())
    s.close(handles[3])
    s.close(handles[7])
    d = s.opendir("dir")
    s.req(req_readdir(d))
    s.req(req_readdir(handles[3]))
    return s


def s_malformed():
    s = Session()
    for t in (SSH_FXP_OPEN, SSH_FXP_CLOSE, SSH_FXP_READ, SSH_FXP_WRITE,
              SSH_FXP_LSTAT, SSH_FXP_FSTAT, SSH_FXP_SETSTAT,
              SSH_FXP_FSETSTAT, SSH_FXP_OPENDIR, SSH_FXP_READDIR,
              SSH_FXP_REMOVE, SSH_FXP_MKDIR, SSH_FXP_RMDIR,
              SSH_FXP_REALPATH, SSH_FXP_STAT, SSH_FXP_RENAME,
              SSH_FXP_READLINK, SSH_FXP_SYMLINK, SSH_FXP_EXTENDED):
        s.req((t, b""))
        s.req((t, u32(1000) + b"x"))
    for name, _ in OPENSSH_EXTENSIONS:
        s.req(req_extended(name, u32(7)))
    s.req(req_open("f\0nul", SSH_FXF_READ))
    s.req(req_setstat("file", Attrs(ext_count=0x100001)))
    s.req(req_setstat("file", Attrs(ext_count=3, extended=[(b"a", b"b")])))
    s.req(req_close(b"\0" * 7))
    s.req(req_close(b"\0\0\0\0\0\0\0\5"))
    s.req(req_close(b"\xff" * 8))
    s.req((99, b""))
    s.req((SSH_FXP_VERSION, b""))
    s.req(req_extended(b"nosuch@example.com", b"abc"))
    s.req(req_extended(b"\x01bad\nname\\" + b"z" * 120))
    s.raw(frame(u8(SSH_FXP_STAT)))
    s.raw(frame(u8(SSH_FXP_STAT) + b"\0\0"))
    s.raw(encode_init(3))
    return s


def s_path_too_long():
    s = Session()
    s.req(req_stat(b"x" * 4096))
    return s


def s_frame_zero():
    s = Session()
    s.req(req_realpath("."))
    s.raw(u32(0))
    s.req(req_realpath("never answered"))
    return s


def s_frame_huge():
    s = Session()
    s.req(req_realpath("."))
    s.raw(u32(SFTP_MAX_MSG_LENGTH + 1) + u8(SSH_FXP_STAT))
    return s


def s_frame_max():
    s = Session()
    s.raw(u32(SFTP_MAX_MSG_LENGTH) + u8(SSH_FXP_WRITE) + b"\0" * 300)
    return s


def s_no_init():
    s = Session()
    s.parts = [encode_request(1, req_realpath("."))]
    return s


def s_init_short():
    s = Session()
    s.parts = [frame(u8(SSH_FXP_INIT) + b"\0\0")]
    return s


def s_truncated_tail():
    s = Session()
    s.req(req_stat("file"))
    s.raw(encode_request(9, req_stat("file"))[:-3])
    return s


def s_readonly():
    s = Session(3 | CFG_READONLY | LOG_INFO)
    s.req(req_open("new", CREATE))
    s.req(req_open("file", SSH_FXF_READ | SSH_FXF_TRUNC))
    h = s.open("file", SSH_FXF_READ)
    s.req(req_read(h, 0, 10))
    s.req(req_write(h, 0, b"no"))
    s.req(req_remove("file"))
    s.req(req_mkdir("m"))
    s.req(req_setstat("file", Attrs(permissions=0o600)))
    s.req(req_posix_rename("file", "x"))
    s.req(req_copy_data(h, 0, 1, h, 0))
    s.req(req_limits())
    s.close(h)
    return s


def s_deny_allow():
    s = Session(3 | CFG_DENY | CFG_ALLOW | LOG_QUIET)
    h = s.open("file", SSH_FXF_READ)
    s.req(req_read(h, 0, 10))
    s.req(req_write(h, 0, b"no"))
    s.req(req_stat("file"))
    s.req(req_readlink("link"))
    s.req(req_mkdir("m"))
    s.req(req_statvfs("."))
    s.req(req_hardlink("file", "x"))
    s.close(h)
    return s


def s_syslog_umask_home():
    s = Session(3 | LOG_SYSLOG | CFG_UMASK | DIR_HOME)
    s.req(req_realpath("."))
    s.req(req_mkdir("made"))
    h = s.open("made/f", CREATE)
    s.req(req_fstat(h))
    s.close(h)
    s.req(req_expand_path("~"))
    return s


def s_start_dirs():
    s = Session(3 | DIR_ALICE)
    s.req(req_realpath("."))
    s.req(req_stat("notes"))
    s.req(req_expand_path("~/notes"))
    return s


def s_start_dir_missing():
    s = Session(3 | DIR_MISSING | LOG_INFO)
    s.req(req_realpath("."))
    return s


def confined_requests(s):
    for p in ("/", "..", "../..", "up", "abs", "/etc", "../../etc/passwd",
              "notes"):
        s.req(req_realpath(p))
        s.req(req_stat(p))
    h = s.opendir("/")
    s.req(req_readdir(h))
    s.req(req_readdir(h))
    s.close(h)
    s.req(req_open("up", SSH_FXF_READ))
    s.req(req_open("abs", SSH_FXF_READ))
    s.req(req_open("../../file", SSH_FXF_READ))
    s.req(req_symlink("/etc/passwd", "pw"))
    s.req(req_open("pw", SSH_FXF_READ))
    s.req(req_readlink("up"))
    s.req(req_mkdir("/sub"))
    s.req(req_rename("notes", "../notes"))
    s.req(req_rename("notes", "/sub/notes"))
    s.req(req_hardlink("../../file", "hl"))
    s.req(req_setstat("..", Attrs(permissions=0o700)))
    s.req(req_lsetstat("abs", Attrs(atime=1, mtime=2)))
    s.req(req_remove("../../file"))
    s.req(req_rmdir("/"))
    s.req(req_statvfs("/"))
    s.req(req_home_directory("alice"))
    s.req(req_home_directory("root"))
    s.req(req_expand_path("~"))
    s.req(req_expand_path("~root/x"))
    h = s.open("/sub/new", CREATE)
    s.req(req_write(h, 0, b"inside"))
    s.close(h)


def s_confined():
    s = Session(3 | CFG_ROOT)
    confined_requests(s)
    return s


def s_confined_start_dir():
    s = Session(3 | CFG_ROOT | DIR_ALICE | LOG_QUIET)
    confined_requests(s)
    return s


def s_log_escapes():
    s = Session()
    names = [b"ctl\x01\x1b[31m", b"back\\slash", b"hi\xff\xfe", b"%s%n%x",
             b"tab\tnl\nret\r"]
    for n in names:
        s.req(req_mkdir(n))
    h = s.opendir(".")
    s.req(req_readdir(h))
    s.close(h)
    for n in names:
        s.req(req_open(n + b"/f", CREATE))
        s.req(req_realpath(n))
    return s


def s_write_offsets():
    s = Session()
    h = s.open("w", RW | SSH_FXF_CREAT)
    s.req(req_write(h, (1 << 40) + 5, b"far"))
    s.req(req_write(h, INT64_MAX - 1, b"xx"))
    s.req(req_write(h, 1 << 63, b"x"))
    s.req(req_write(h, 5 << 20, b"beyond the file size limit"))
    s.req(req_read(h, (1 << 40) + 5, 3))
    a = s.open("w", SSH_FXF_WRITE | SSH_FXF_APPEND)
    s.req(req_write(a, INT64_MAX - 10, b"appended"))
    s.close(a)
    s.close(h)
    return s


# Reproducers of bugs the fuzzers or their review found; each must run
# clean once the bug is fixed.


def bug_copy_data_append_woff():
    """copy-data to an O_APPEND handle with write-to-offset near INT64_MAX.

    copy_range() leaves appends to copy_loop(), which adds each chunk to
    the off_t write offset although the offset is never used for appends:
    signed overflow (UBSan) once woff + n > INT64_MAX.
    """
    s = Session()
    r = s.open("file", SSH_FXF_READ)
    a = s.open("app", SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_APPEND)
    s.req(req_copy_data(r, 0, 100, a, INT64_MAX))
    return s


# Storage that waits (CFG_WAIT): requests go to the server's workers, and
# the ids say how long each job's storage waits, so that later ones finish
# first.  Deep pipelines fill the job ring (128 jobs) and the 4 MiB arena;
# the end of the input comes with jobs in flight.


def w_reads_pipeline():
    s = Session(3 | CFG_WAIT)
    h = s.open("file", SSH_FXF_READ)
    for i in range(60):
        s.req(req_read(h, i * 997 % 24000, 4096 if i % 5 else 0))
    s.req(req_read(h, 20000, 16384))
    s.req(req_read(h, 1 << 30, 10))
    s.req(req_fstat(h))
    s.close_in_flight(h)
    s.req(req_read(h, 0, 10))
    return s


def w_arena_full():
    """READs of 256 KiB hold the arena's 4 MiB: later ones wait for room."""
    s = Session(3 | CFG_WAIT)
    h = s.open("file", SSH_FXF_READ)
    for i in range(40):
        s.req(req_read(h, (i % 3) * 10000, 262144))
    s.req(req_read(h, 0, 100000))
    for i in range(20):
        s.req(req_read(h, 30000 + i, 200000 + i * 1000))
    s.close_in_flight(h)
    return s


def w_arena_wrap():
    """The arena wraps while READs that hold bytes are in flight."""
    s = Session(3 | CFG_WAIT)
    h = s.open("file", SSH_FXF_READ)
    for i in range(15):
        s.req(req_read(h, 0, 262144), wait=1)
    s.req(req_read(h, 0, 200000), wait=15)
    for i in range(30):
        s.req(req_read(h, i * 100, 262144 - i * 4096), wait=i % 16)
    s.close_in_flight(h)
    return s


def w_ring_full():
    """More jobs than the ring holds, behind a slow one: zero-sized ones,
    then stats."""
    s = Session(3 | CFG_WAIT)
    h = s.open("file", SSH_FXF_READ)
    s.req(req_fstat(h), wait=15)
    for i in range(150):
        s.req(req_fstat(h), wait=i % 3)
    for p in ("file", "dir", "link", "missing", "dir/a") * 10:
        s.req(req_stat(p))
        s.req(req_lstat(p))
    s.close_in_flight(h)
    return s


def w_past_eof():
    """READs past the end of an empty file: jobs that read nothing."""
    s = Session(3 | CFG_WAIT)
    e = s.open("empty", RW | SSH_FXF_CREAT)
    h = s.open("file", SSH_FXF_READ)
    for i in range(40):
        s.req(req_read(e, i * 65536, 65536))
        s.req(req_read(h, 20000 + i, 262144))
    s.req(req_read(e, 0, 0))
    s.close_in_flight(h, wait=15)
    s.req(req_write(e, 0, b"now it holds this"))
    for i in range(20):
        s.req(req_read(e, i, 262144))
    s.close_in_flight(e)
    return s


def w_turns_fast():
    """Storage that stops waiting: 32 calls in a row that did not wait
    send the session back to the loop, and the requests behind one still
    in flight are jobs run there."""
    s = Session(3 | CFG_WAIT)
    h = s.open("file", SSH_FXF_READ)
    for i in range(40):
        s.req(req_fstat(h), wait=0)
    s.req(req_realpath("."))
    s.req(req_read(h, 0, 1000), wait=15)
    for i in range(10):
        s.req(req_fstat(h), wait=0)
        s.req(req_stat("file"), wait=0)
        s.req(req_read(h, i * 100, 100), wait=0)
    s.close_in_flight(h)
    return s


def w_writes():
    s = Session(3 | CFG_WAIT)
    h = s.open("w", RW | SSH_FXF_CREAT | SSH_FXF_TRUNC)
    a = s.open("a", SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_APPEND)
    for i in range(40):
        s.req(req_write(h, i * 48 % 1000, bytes([65 + i % 26]) * 64))
        if i % 4 == 0:
            s.req(req_read(h, i * 40, 128))
            s.req(req_write(a, 0, b"append %d\n" % i))
    s.req(req_fstat(h))
    s.req(req_fsetstat(h, Attrs(size=500)))
    s.req(req_read(h, 0, 2000))
    s.req(req_write(h, 1 << 63, b"x"))
    s.close_in_flight(h)
    s.close_in_flight(a)
    s.req(req_stat("w"))
    return s


def w_open_close():
    """OPENs and CLOSEs in flight beside each other, and the rule between
    creating OPENs."""
    s = Session(3 | CFG_WAIT)
    hs = []
    for i in range(12):
        hs.append(s.open("n%d" % (i % 4), SSH_FXF_WRITE | SSH_FXF_CREAT))
        s.req(req_open("x%d" % (i % 3), SSH_FXF_WRITE | SSH_FXF_CREAT |
                       SSH_FXF_EXCL))
        s.req(req_open("missing/%d" % i, SSH_FXF_READ))
        s.req(req_stat("n%d" % (i % 4)))
    for i, h in enumerate(hs):
        s.req(req_write(h, 0, b"w"))
        s.close_in_flight(h, wait=15 if i % 3 == 0 else None)
        s.req(req_open("file", SSH_FXF_READ))
    s.req(req_open("dir", SSH_FXF_READ))
    return s


def w_readdir():
    s = Session(3 | CFG_WAIT)
    for i in range(40):
        s.req(req_mkdir("d/%02d" % i) if i else req_mkdir("d"))
    h = s.opendir("d")
    h2 = s.opendir("dir")
    h3 = s.open("file", SSH_FXF_READ)
    for _ in range(3):
        s.req(req_readdir(h))
        s.req(req_readdir(h2))
        s.req(req_read(h3, 0, 8192))
    s.req(req_lstat("d/05"))
    s.close(h)
    s.close(h2)
    s.close_in_flight(h3)
    return s


def w_few_workers():
    """-T 2: the jobs queue for two workers."""
    s = Session(3 | CFG_WAIT | OPS_2)
    h = s.open("file", SSH_FXF_READ)
    w = s.open("w", RW | SSH_FXF_CREAT)
    for i in range(50):
        s.req(req_read(h, i * 400, 4096))
        s.req(req_write(w, i * 10, b"0123456789"))
        s.req(req_fstat(w))
    s.close_in_flight(w, wait=15)
    s.close_in_flight(h)
    return s


def w_slow_reader():
    """Replies of 255 KiB to a client that reads them slowly: the writes
    block while READs are in flight.  1.5 MiB in all: with FUZZ_SESSION_OUT
    (--check), replies go to a file, which RLIMIT_FSIZE bounds."""
    s = Session(3 | CFG_WAIT | CFG_SLOW_READER | OPS_4)
    b = s.open("big", RW | SSH_FXF_CREAT)
    s.req(req_fsetstat(b, Attrs(size=3 << 20)))
    h = s.open("big", SSH_FXF_READ)
    for i in range(6):
        s.req(req_read(h, i * 261120, 261120), wait=i * 7 % 16)
    s.close_in_flight(h)
    s.close_in_flight(b)
    return s


def w_signal_in_flight():
    """SIGTERM while READs and a slow CLOSE are in flight: the end of the
    session waits for them and answers them."""
    s = Session(3 | CFG_WAIT | LOG_INFO | CFG_DEVNULL)
    h = s.open("file", SSH_FXF_READ)
    w = s.open("w", RW | SSH_FXF_CREAT)
    s.req(req_write(w, 0, b"written before the signal"))
    for i in range(30):
        s.req(req_read(h, i * 600, 32768))
    s.req(req_read(h, 0, 4096), wait=15, flags=WAIT_SIGNAL)
    for i in range(30):
        s.req(req_read(h, i * 600, 262144))
    s.close_in_flight(w, wait=15)
    s.close_in_flight(h)
    return s


def w_signal_hang():
    """SIGTERM while storage hangs: the session gives up the calls that
    hang (a READ, a WRITE, a CLOSE, an OPEN, a STAT) and ends without
    them; the parts of a READDIR are answered or given up."""
    s = Session(3 | CFG_WAIT | LOG_INFO | CFG_DEVNULL)
    d = s.opendir("dir")
    h = s.open("file", SSH_FXF_READ)
    w = s.open("w", RW | SSH_FXF_CREAT)
    c = s.open("c", RW | SSH_FXF_CREAT)
    s.req(req_write(c, 0, b"before"), wait=0)
    for i in range(10):
        s.req(req_read(h, i * 900, 8192))
    s.req(req_write(w, 100, b"hangs"), flags=WAIT_HANG)
    s.close_in_flight(c, flags=WAIT_HANG)
    s.req(req_read(h, 0, 4096), flags=WAIT_HANG)
    s.req(req_open("file", SSH_FXF_READ), flags=WAIT_HANG)
    s.req(req_stat("file"), flags=WAIT_HANG)
    s.req(req_readdir(d), wait=3)
    s.req(req_read(h, 100, 4096), wait=3, flags=WAIT_SIGNAL)
    for i in range(10):
        s.req(req_read(h, i * 900, 8192))
    return s


def w_signal_hang_close():
    """The one call that hangs is a CLOSE; the signal comes from a job
    beside it."""
    s = Session(3 | CFG_WAIT | CFG_DEVNULL)
    h = s.open("file", SSH_FXF_READ)
    s.req(req_read(h, 0, 100))
    s.close_in_flight(h, flags=WAIT_HANG)
    s.req(req_stat("file"), wait=2, flags=WAIT_SIGNAL)
    return s


def s_atomic():
    """-A: uploads over a file, through symlinks (dangling, a loop, out of
    the root's reach), onto a directory, EXCL, in place; the target renamed
    and removed while an upload is open; requests on the uploads."""
    s = Session(3 | CFG_ATOMIC)
    up = SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC
    hs = [s.open(p, up) for p in ("file", "link", "dangling", "new")]
    for p in ("loop", "dir", "dir/", "", "missing/x"):
        s.req(req_open(p, up))
    hs.append(s.open("file", RW | SSH_FXF_CREAT | SSH_FXF_TRUNC,
                     Attrs(permissions=0o600)))
    hs.append(s.open("file", SSH_FXF_WRITE | SSH_FXF_CREAT))
    s.req(req_open("file", SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_EXCL))
    hs.append(s.open("x", SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_EXCL))
    for i, h in enumerate(hs):
        s.req(req_write(h, i * 100, b"upload %d" % i))
        s.req(req_read(h, 0, 100))
        s.req(req_fstat(h))
    s.req(req_fsetstat(hs[4], Attrs(permissions=0o640, size=3)))
    s.req(req_rename("new", "new2"))
    s.req(req_remove("file"))
    s.req(req_stat("file"))
    s.req(req_open("x", SSH_FXF_WRITE | SSH_FXF_CREAT))
    for h in hs:
        s.close(h)
    s.req(req_close(hs[0]))
    h = s.open("left", up)
    s.req(req_write(h, 0, b"never closed"))
    return s


def configured(make, cfg):
    """A session of make's with the options of cfg's bits as well."""
    def variant():
        s = make()
        version = struct.unpack(">I", s.parts[0][5:9])[0]
        s.parts[0] = s.parts[0][:5] + u32(version | cfg) + s.parts[0][9:]
        return s
    return variant


# Sessions above, with storage that waits.
WAITING = ["file-io", "open-flags", "read-sendfile", "big-reads", "readdir",
           "readdir-big", "stat", "copy-data", "handles-exhausted",
           "confined", "write-offsets"]


def waiting(make):
    def variant():
        s = make()
        version = struct.unpack(">I", s.parts[0][5:9])[0]
        s.parts[0] = s.parts[0][:5] + u32(version | CFG_WAIT) + \
            s.parts[0][9:]
        return s
    return variant


SESSIONS = [
    ("init", s_init),
    ("init-extensions", s_init_extensions),
    ("file-io", s_file_io),
    ("open-flags", s_open_flags),
    ("read-sendfile", s_read_sendfile),
    ("read-devnull", s_read_devnull),
    ("big-reads", s_big_reads),
    ("readdir", s_readdir),
    ("readdir-big", s_readdir_big),
    ("stat", s_stat),
    ("setstat", s_setstat),
    ("dirs", s_dirs),
    ("rename", s_rename),
    ("links", s_links),
    ("realpath", s_realpath),
    ("expand-home", s_expand_home),
    ("statvfs-limits", s_statvfs_limits),
    ("users-groups", s_users_groups),
    ("copy-data", s_copy_data),
    ("handles-exhausted", s_handles_exhausted),
    ("malformed", s_malformed),
    ("path-too-long", s_path_too_long),
    ("frame-zero", s_frame_zero),
    ("frame-huge", s_frame_huge),
    ("frame-max", s_frame_max),
    ("no-init", s_no_init),
    ("init-short", s_init_short),
    ("truncated-tail", s_truncated_tail),
    ("readonly", s_readonly),
    ("deny-allow", s_deny_allow),
    ("syslog-umask-home", s_syslog_umask_home),
    ("start-dir", s_start_dirs),
    ("start-dir-missing", s_start_dir_missing),
    ("confined", s_confined),
    ("confined-start-dir", s_confined_start_dir),
    ("log-escapes", s_log_escapes),
    ("write-offsets", s_write_offsets),
    ("bug-copy-data-append-woff", bug_copy_data_append_woff),
    ("atomic", s_atomic),
    ("atomic-confined", configured(s_atomic, CFG_ROOT)),
    ("atomic-open-flags", configured(s_open_flags, CFG_ATOMIC)),
    ("atomic-file-io", configured(s_file_io, CFG_ATOMIC)),
    ("atomic-readonly", configured(s_readonly, CFG_ATOMIC)),
    ("modes", configured(s_setstat, CFG_MODES)),
    ("modes-dirs", configured(s_dirs, CFG_MODES)),
    ("modes-atomic-confined", configured(s_atomic, CFG_MODES | CFG_ROOT)),
    ("bwlimit-file-io", configured(s_file_io, CFG_BWLIMIT)),
    ("bwlimit-big-reads", configured(s_big_reads, CFG_BWLIMIT)),
]

# fuzz-corpus/session-wait/: storage that waits.
WAIT_SESSIONS = [
    ("wait-reads-pipeline", w_reads_pipeline),
    ("wait-arena-full", w_arena_full),
    ("wait-arena-wrap", w_arena_wrap),
    ("wait-ring-full", w_ring_full),
    ("wait-past-eof", w_past_eof),
    ("wait-writes", w_writes),
    ("wait-open-close", w_open_close),
    ("wait-readdir-lstats", w_readdir),
    ("wait-few-workers", w_few_workers),
    ("wait-turns-fast", w_turns_fast),
    ("wait-slow-reader", w_slow_reader),
    ("wait-signal-in-flight", w_signal_in_flight),
    ("wait-signal-hang", w_signal_hang),
    ("wait-signal-hang-close", w_signal_hang_close),
]
WAIT_SESSIONS += [("wait-" + name, waiting(make)) for name, make in SESSIONS
                  if name in WAITING]
WAIT_SESSIONS += [
    ("wait-atomic", waiting(s_atomic)),
    ("wait-atomic-open-close", configured(w_open_close, CFG_ATOMIC)),
    ("wait-atomic-writes", configured(w_writes, CFG_ATOMIC)),
    ("wait-atomic-signal-in-flight", configured(w_signal_in_flight, CFG_ATOMIC)),
    ("wait-atomic-signal-hang-close", configured(w_signal_hang_close, CFG_ATOMIC)),
    ("wait-bwlimit-writes", configured(w_writes, CFG_BWLIMIT)),
    ("wait-bwlimit-signal-in-flight", configured(w_signal_in_flight,
                                                 CFG_BWLIMIT)),
]


# ---------------------------------------------------------------------------
# Packet seeds: input buffer read-ahead, read sizes, queue size, then bytes.


def p_attrs_edges():
    s = Session()
    s.req(req_setstat("a", full_attrs()))
    s.req(req_setstat("a", Attrs(flags=0xffffffff)))
    s.req(req_setstat("a", Attrs(ext_count=0x100000)))
    s.req(req_setstat("a", Attrs(ext_count=0x100001)))
    s.req(req_setstat("a", Attrs(ext_count=2, extended=[(b"x", b"")])))
    s.req(req_mkdir("a", b"\x80\0\0\0\0\0\0\1\0\0\0\1x"))
    s.req(req_fsetstat(b"h", Attrs(size=1)))
    return s


def p_big_write():
    s = Session()
    s.req(req_write(b"h" * 8, 7, b"w" * 3000))
    s.req(req_read(b"h" * 8, 0, 0xffffffff))
    return s


PACKETS = [
    ("default-file-io", b"\0\0\0", s_file_io),
    ("tiny-buffers-malformed", b"\x03\x80\x01", s_malformed),
    ("soft1-realpath", b"\x01\x07\x00", s_realpath),
    ("soft2-small-reads-open", b"\x02\x00\x00", s_open_flags),
    ("attrs", b"\0\x01\0", p_attrs_edges),
    ("attrs-small-queue", b"\x10\x81\x02", p_attrs_edges),
    ("frame-zero", b"\0\0\0", s_frame_zero),
    ("frame-huge-soft7", b"\x07\x80\0", s_frame_huge),
    ("big-write", b"\0\x80\0", p_big_write),
    ("big-write-queue-1k", b"\x40\x80\x10", p_big_write),
    ("extensions", b"\0\x22\0", s_copy_data),
    ("users-groups", b"\x05\x05\x05", s_users_groups),
    ("init-extensions", b"\0\0\0", s_init_extensions),
    ("links-renames", b"\0\x33\0", s_links),
]


def write_seed(directory, name, data):
    if len(data) > MAX_SEED:
        raise SystemExit("%s/%s: %d bytes, more than %d" %
                         (directory, name, len(data), MAX_SEED))
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def check(binary):
    """Runs each session seed and prints what the server answered."""
    for directory, name in ([("session", n) for n, _ in SESSIONS] +
                            [("session-wait", n) for n, _ in WAIT_SESSIONS]):
        path = os.path.join(CORPUS, directory, name)
        with tempfile.NamedTemporaryFile() as out:
            env = dict(os.environ, FUZZ_SESSION_OUT=out.name)
            run = subprocess.run([binary, path], env=env,
                                 stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
            replies = out.read()
        counts = collections.Counter()
        while len(replies) >= 4:
            n = struct.unpack(">I", replies[:4])[0]
            reply = parse_reply(replies[4:4 + n])
            replies = replies[4 + n:]
            if isinstance(reply, Status):
                counts[STATUS_NAMES.get(reply.code, str(reply.code))] += 1
            else:
                counts[reply.type_name] += 1
        print("%-22s exit %d: %s" % (
            name, run.returncode,
            " ".join("%s=%d" % kv for kv in sorted(counts.items()))))
        if run.returncode != 0:
            sys.stderr.write(run.stderr.decode(errors="replace"))


def main():
    args = sys.argv[1:]
    if args and args[0] == "--check" and len(args) == 2:
        check(args[1])
        return
    if args:
        raise SystemExit("usage: make-fuzz-corpus.py [--check FUZZ_SESSION]")
    for name, make in SESSIONS:
        write_seed(os.path.join(CORPUS, "session"), name, make().data())
    for name, make in WAIT_SESSIONS:
        write_seed(os.path.join(CORPUS, "session-wait"), name,
                   make().data())
    for name, head, make in PACKETS:
        write_seed(os.path.join(CORPUS, "packet"), name,
                   head + make().data())
    print("%d session seeds, %d with storage that waits, %d packet seeds "
          "in %s" % (len(SESSIONS), len(WAIT_SESSIONS), len(PACKETS),
                     os.path.relpath(CORPUS)))


if __name__ == "__main__":
    main()
