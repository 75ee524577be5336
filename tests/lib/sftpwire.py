"""sftpwire: a small raw-protocol SFTP version 3 client for tests.

It speaks the wire format of draft-ietf-secsh-filexfer-02 plus OpenSSH's
extensions, directly over the stdin/stdout pipes of a server process, with
no SSH layer in between.  It is deliberately low level:

  * every request is a plain value built by a ``req_*`` function: a pair
    ``(packet type, body after the request id)``;
  * ``encode_request(rid, req)`` frames it; ``frame(payload)`` frames any
    bytes at all, so malformed input is easy to produce;
  * ``Server`` runs a server binary, sends requests (one at a time, or many
    before reading any reply), reads and parses replies, and reports the
    exit status.  Every read and write has a timeout: a hung server raises
    ``Timeout`` and is killed by ``Server.close``/``Server.kill``.

Replies are parsed strictly by ``parse_reply``: a short or over-long reply
raises ``ProtocolError``.

Only the Python 3 standard library is used.
"""

import os
import select
import shutil
import struct
import subprocess
import tempfile
import time

__all__ = []  # filled in at the end of the module

# Packet types (draft-02 section 3).
SSH_FXP_INIT = 1
SSH_FXP_VERSION = 2
SSH_FXP_OPEN = 3
SSH_FXP_CLOSE = 4
SSH_FXP_READ = 5
SSH_FXP_WRITE = 6
SSH_FXP_LSTAT = 7
SSH_FXP_FSTAT = 8
SSH_FXP_SETSTAT = 9
SSH_FXP_FSETSTAT = 10
SSH_FXP_OPENDIR = 11
SSH_FXP_READDIR = 12
SSH_FXP_REMOVE = 13
SSH_FXP_MKDIR = 14
SSH_FXP_RMDIR = 15
SSH_FXP_REALPATH = 16
SSH_FXP_STAT = 17
SSH_FXP_RENAME = 18
SSH_FXP_READLINK = 19
SSH_FXP_SYMLINK = 20
SSH_FXP_STATUS = 101
SSH_FXP_HANDLE = 102
SSH_FXP_DATA = 103
SSH_FXP_NAME = 104
SSH_FXP_ATTRS = 105
SSH_FXP_EXTENDED = 200
SSH_FXP_EXTENDED_REPLY = 201

PACKET_TYPE_NAMES = {
    v: k[len("SSH_FXP_"):] for k, v in globals().items()
    if k.startswith("SSH_FXP_")
}

# Status codes (draft-02 section 7).
SSH_FX_OK = 0
SSH_FX_EOF = 1
SSH_FX_NO_SUCH_FILE = 2
SSH_FX_PERMISSION_DENIED = 3
SSH_FX_FAILURE = 4
SSH_FX_BAD_MESSAGE = 5
SSH_FX_NO_CONNECTION = 6
SSH_FX_CONNECTION_LOST = 7
SSH_FX_OP_UNSUPPORTED = 8

STATUS_NAMES = {
    v: k[len("SSH_FX_"):] for k, v in globals().items()
    if k.startswith("SSH_FX_") and not k.startswith("SSH_FXP_")
}

# The fixed message OpenSSH's server sends with each status code.
STATUS_MESSAGES = {
    SSH_FX_OK: b"Success",
    SSH_FX_EOF: b"End of file",
    SSH_FX_NO_SUCH_FILE: b"No such file",
    SSH_FX_PERMISSION_DENIED: b"Permission denied",
    SSH_FX_FAILURE: b"Failure",
    SSH_FX_BAD_MESSAGE: b"Bad message",
    SSH_FX_NO_CONNECTION: b"No connection",
    SSH_FX_CONNECTION_LOST: b"Connection lost",
    SSH_FX_OP_UNSUPPORTED: b"Operation unsupported",
}

# OPEN pflags.
SSH_FXF_READ = 0x01
SSH_FXF_WRITE = 0x02
SSH_FXF_APPEND = 0x04
SSH_FXF_CREAT = 0x08
SSH_FXF_TRUNC = 0x10
SSH_FXF_EXCL = 0x20

# ATTRS flags.
SSH_FILEXFER_ATTR_SIZE = 0x00000001
SSH_FILEXFER_ATTR_UIDGID = 0x00000002
SSH_FILEXFER_ATTR_PERMISSIONS = 0x00000004
SSH_FILEXFER_ATTR_ACMODTIME = 0x00000008
SSH_FILEXFER_ATTR_EXTENDED = 0x80000000

# Limits of OpenSSH's server (and of a drop-in replacement).
SFTP_MAX_MSG_LENGTH = 262144
SFTP_MAX_READ_LENGTH = 261120
MAX_HANDLE_LENGTH = 256

# The extensions OpenSSH's server advertises, in its order, with their
# versions: a fact about the reference, which the server's VERSION begins
# with.  The server's own extensions follow them; they are not listed here
# but taken from the server (own_extensions()), as its request names are
# (request_names()), so that a new request is named in one test file only,
# tests/unit/test_requests.c.
OPENSSH_EXTENSIONS = [
    (b"posix-rename@openssh.com", b"1"),
    (b"statvfs@openssh.com", b"2"),
    (b"fstatvfs@openssh.com", b"2"),
    (b"hardlink@openssh.com", b"1"),
    (b"fsync@openssh.com", b"1"),
    (b"lsetstat@openssh.com", b"1"),
    (b"limits@openssh.com", b"1"),
    (b"expand-path@openssh.com", b"1"),
    (b"copy-data", b"1"),
    (b"home-directory", b"1"),
    (b"users-groups-by-id@openssh.com", b"1"),
]
OPENSSH_EXTENSION_NAMES = frozenset(n for n, _ in OPENSSH_EXTENSIONS)


def own_extensions(extensions):
    """A VERSION's extensions that OpenSSH's server does not have."""
    return [e for e in extensions if e[0] not in OPENSSH_EXTENSION_NAMES]


def without_own_extensions(extensions):
    """A VERSION's extensions less this server's own, to compare with
    OpenSSH's server."""
    return [e for e in extensions if e[0] in OPENSSH_EXTENSION_NAMES]


def request_names(binary):
    """The request names a server lists with -Q requests, as -P and -p
    take them, in its order."""
    r = subprocess.run([binary, "-Q", "requests"], capture_output=True,
                       timeout=DEFAULT_TIMEOUT)
    if r.returncode != 0:
        raise ProtocolError("%s -Q requests: exit status %d" %
                            (binary, r.returncode))
    return r.stdout.decode().split()

DEFAULT_TIMEOUT = float(os.environ.get("SFTP_TIMEOUT", "10"))

# OpenSSH's server, to compare behaviour with.
REFERENCE_SERVER = "/usr/lib/openssh/sftp-server"

# The repository's root (this file is tests/lib/sftpwire.py), where the
# server under test is built.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

# Largest reply the client accepts; far above anything legitimate.
_MAX_REPLY_LENGTH = 4 * SFTP_MAX_MSG_LENGTH


class WireError(Exception):
    """Base class of everything this module raises about the server."""


class ProtocolError(WireError):
    """The server sent bytes that do not parse as the expected reply."""


class Timeout(WireError):
    """The server did not answer (or exit) in time."""


class ServerClosed(WireError):
    """The server closed its end of a pipe (usually: it exited)."""


# ---------------------------------------------------------------------------
# Encoding


def to_bytes(s):
    """Return s as bytes: str is encoded as the file system does."""
    if isinstance(s, (bytes, bytearray, memoryview)):
        return bytes(s)
    if isinstance(s, str):
        return os.fsencode(s)
    raise TypeError("expected str or bytes, got %r" % type(s).__name__)


def u8(v):
    return struct.pack(">B", v)


def u32(v):
    return struct.pack(">I", v)


def u64(v):
    return struct.pack(">Q", v)


def string(s):
    """An SFTP string: uint32 length, then the bytes."""
    b = to_bytes(s)
    return u32(len(b)) + b


def frame(payload):
    """Prefix payload (type byte and body) with its uint32 length."""
    payload = bytes(payload)
    return u32(len(payload)) + payload


class Attrs:
    """The ATTRS structure of version 3.

    Fields left as None are absent.  ``flags`` is computed from the fields
    present unless given explicitly; an explicit value is sent as is and the
    fields its bits select are sent (0 when None), which allows inconsistent
    or unknown flag words.  ``extended`` is a list of (type, data) pairs;
    ``ext_count`` overrides the count word sent before them.
    """

    __slots__ = ("flags", "size", "uid", "gid", "permissions", "atime",
                 "mtime", "extended", "ext_count")

    def __init__(self, size=None, uid=None, gid=None, permissions=None,
                 atime=None, mtime=None, extended=None, flags=None,
                 ext_count=None):
        self.size = size
        self.uid = uid
        self.gid = gid
        self.permissions = permissions
        self.atime = atime
        self.mtime = mtime
        self.extended = extended
        self.ext_count = ext_count
        if flags is None:
            flags = 0
            if size is not None:
                flags |= SSH_FILEXFER_ATTR_SIZE
            if uid is not None or gid is not None:
                flags |= SSH_FILEXFER_ATTR_UIDGID
            if permissions is not None:
                flags |= SSH_FILEXFER_ATTR_PERMISSIONS
            if atime is not None or mtime is not None:
                flags |= SSH_FILEXFER_ATTR_ACMODTIME
            if extended is not None or ext_count is not None:
                flags |= SSH_FILEXFER_ATTR_EXTENDED
        self.flags = flags

    def encode(self):
        f = self.flags
        out = [u32(f)]
        if f & SSH_FILEXFER_ATTR_SIZE:
            out.append(u64(self.size or 0))
        if f & SSH_FILEXFER_ATTR_UIDGID:
            out.append(u32(self.uid or 0) + u32(self.gid or 0))
        if f & SSH_FILEXFER_ATTR_PERMISSIONS:
            out.append(u32(self.permissions or 0))
        if f & SSH_FILEXFER_ATTR_ACMODTIME:
            out.append(u32(self.atime or 0) + u32(self.mtime or 0))
        if f & SSH_FILEXFER_ATTR_EXTENDED:
            ext = self.extended or []
            count = len(ext) if self.ext_count is None else self.ext_count
            out.append(u32(count))
            for t, d in ext:
                out.append(string(t) + string(d))
        return b"".join(out)

    @classmethod
    def decode(cls, reader):
        flags = reader.u32()
        a = cls(flags=flags)
        if flags & SSH_FILEXFER_ATTR_SIZE:
            a.size = reader.u64()
        if flags & SSH_FILEXFER_ATTR_UIDGID:
            a.uid = reader.u32()
            a.gid = reader.u32()
        if flags & SSH_FILEXFER_ATTR_PERMISSIONS:
            a.permissions = reader.u32()
        if flags & SSH_FILEXFER_ATTR_ACMODTIME:
            a.atime = reader.u32()
            a.mtime = reader.u32()
        if flags & SSH_FILEXFER_ATTR_EXTENDED:
            count = reader.u32()
            a.extended = [(reader.string(), reader.string())
                          for _ in range(count)]
        return a

    @classmethod
    def from_stat(cls, st):
        """The 0x0F attributes OpenSSH sends for an os.stat_result."""
        return cls(size=st.st_size, uid=st.st_uid, gid=st.st_gid,
                   permissions=st.st_mode, atime=int(st.st_atime) & 0xFFFFFFFF,
                   mtime=int(st.st_mtime) & 0xFFFFFFFF)

    def _key(self):
        return tuple(getattr(self, k) for k in self.__slots__)

    def __eq__(self, other):
        return isinstance(other, Attrs) and self._key() == other._key()

    def __repr__(self):
        parts = ["flags=0x%x" % self.flags]
        for k in self.__slots__[1:]:
            v = getattr(self, k)
            if v is not None:
                parts.append("%s=%s" % (k, oct(v) if k == "permissions"
                                        else repr(v)))
        return "Attrs(%s)" % ", ".join(parts)


def _attrs(a):
    if a is None:
        return Attrs().encode()
    if isinstance(a, (bytes, bytearray)):
        return bytes(a)  # pre-encoded, possibly malformed on purpose
    return a.encode()


# ---------------------------------------------------------------------------
# Requests.  Each req_* returns (packet type, body after the request id).
# Paths and handles may be str or bytes; bytes are sent as they are.


def req_open(path, pflags, attrs=None):
    return SSH_FXP_OPEN, string(path) + u32(pflags) + _attrs(attrs)


def req_close(handle):
    return SSH_FXP_CLOSE, string(handle)


def req_read(handle, offset, length):
    return SSH_FXP_READ, string(handle) + u64(offset) + u32(length)


def req_write(handle, offset, data):
    return SSH_FXP_WRITE, string(handle) + u64(offset) + string(data)


def req_lstat(path):
    return SSH_FXP_LSTAT, string(path)


def req_fstat(handle):
    return SSH_FXP_FSTAT, string(handle)


def req_setstat(path, attrs):
    return SSH_FXP_SETSTAT, string(path) + _attrs(attrs)


def req_fsetstat(handle, attrs):
    return SSH_FXP_FSETSTAT, string(handle) + _attrs(attrs)


def req_opendir(path):
    return SSH_FXP_OPENDIR, string(path)


def req_readdir(handle):
    return SSH_FXP_READDIR, string(handle)


def req_remove(path):
    return SSH_FXP_REMOVE, string(path)


def req_mkdir(path, attrs=None):
    return SSH_FXP_MKDIR, string(path) + _attrs(attrs)


def req_rmdir(path):
    return SSH_FXP_RMDIR, string(path)


def req_realpath(path):
    return SSH_FXP_REALPATH, string(path)


def req_stat(path):
    return SSH_FXP_STAT, string(path)


def req_rename(oldpath, newpath):
    return SSH_FXP_RENAME, string(oldpath) + string(newpath)


def req_readlink(path):
    return SSH_FXP_READLINK, string(path)


def req_symlink(target, linkpath):
    """SYMLINK in OpenSSH's order: symlink(target, linkpath).

    OpenSSH (and every client talking to it) sends the target first,
    the reverse of what draft-02 says.
    """
    return SSH_FXP_SYMLINK, string(target) + string(linkpath)


def req_extended(name, body=b""):
    return SSH_FXP_EXTENDED, string(name) + bytes(body)


def req_posix_rename(oldpath, newpath):
    return req_extended(b"posix-rename@openssh.com",
                        string(oldpath) + string(newpath))


def req_statvfs(path):
    return req_extended(b"statvfs@openssh.com", string(path))


def req_fstatvfs(handle):
    return req_extended(b"fstatvfs@openssh.com", string(handle))


def req_hardlink(oldpath, newpath):
    return req_extended(b"hardlink@openssh.com",
                        string(oldpath) + string(newpath))


def req_fsync(handle):
    return req_extended(b"fsync@openssh.com", string(handle))


def req_lsetstat(path, attrs):
    return req_extended(b"lsetstat@openssh.com", string(path) + _attrs(attrs))


def req_limits():
    return req_extended(b"limits@openssh.com")


def req_expand_path(path):
    return req_extended(b"expand-path@openssh.com", string(path))


def req_copy_data(read_handle, read_offset, read_length, write_handle,
                  write_offset):
    return req_extended(b"copy-data",
                        string(read_handle) + u64(read_offset) +
                        u64(read_length) + string(write_handle) +
                        u64(write_offset))


def req_home_directory(username):
    return req_extended(b"home-directory", string(username))


def req_users_groups_by_id(uids, gids):
    return req_extended(b"users-groups-by-id@openssh.com",
                        string(b"".join(u32(u) for u in uids)) +
                        string(b"".join(u32(g) for g in gids)))


def encode_request(rid, req):
    """Frame request req (a (type, body) pair) with request id rid."""
    ptype, body = req
    return frame(u8(ptype) + u32(rid) + body)


def encode_init(version=3, extensions=()):
    """Frame an INIT packet (it has no request id)."""
    return frame(u8(SSH_FXP_INIT) + u32(version) +
                 b"".join(string(n) + string(d) for n, d in extensions))


# ---------------------------------------------------------------------------
# Decoding


class Reader:
    """A bounded cursor over one packet; reading past the end raises."""

    def __init__(self, data):
        self.data = bytes(data)
        self.pos = 0

    def left(self):
        return len(self.data) - self.pos

    def take(self, n):
        if n > self.left():
            raise ProtocolError("short packet: need %d bytes at offset %d, "
                                "%d left" % (n, self.pos, self.left()))
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u8(self):
        return self.take(1)[0]

    def u32(self):
        return struct.unpack(">I", self.take(4))[0]

    def u64(self):
        return struct.unpack(">Q", self.take(8))[0]

    def string(self):
        return self.take(self.u32())

    def attrs(self):
        return Attrs.decode(self)

    def rest(self):
        return self.take(self.left())

    def end(self):
        """Raise unless every byte was consumed."""
        if self.left():
            raise ProtocolError("%d trailing bytes: %r" %
                                (self.left(), self.data[self.pos:][:32]))


class Reply:
    """Base of the parsed replies; ``raw`` is the payload (type + body)."""

    type = None
    id = None
    raw = b""

    @property
    def type_name(self):
        return PACKET_TYPE_NAMES.get(self.type, str(self.type))

    def __repr__(self):
        fields = ", ".join("%s=%r" % (k, v) for k, v in vars(self).items()
                           if k != "raw")
        return "%s(%s)" % (type(self).__name__, fields)


class Version(Reply):
    type = SSH_FXP_VERSION

    def __init__(self, version, extensions):
        self.version = version
        self.extensions = extensions  # list of (name, data) byte pairs


class Status(Reply):
    type = SSH_FXP_STATUS

    def __init__(self, rid, code, message, lang):
        self.id = rid
        self.code = code
        self.message = message
        self.lang = lang

    def __repr__(self):
        return "Status(id=%d, %s %r, lang=%r)" % (
            self.id, STATUS_NAMES.get(self.code, self.code), self.message,
            self.lang)


class Handle(Reply):
    type = SSH_FXP_HANDLE

    def __init__(self, rid, handle):
        self.id = rid
        self.handle = handle


class Data(Reply):
    type = SSH_FXP_DATA

    def __init__(self, rid, data):
        self.id = rid
        self.data = data

    def __repr__(self):
        d = self.data
        shown = repr(d) if len(d) <= 32 else repr(d[:32]) + "..."
        return "Data(id=%d, len=%d, %s)" % (self.id, len(d), shown)


class NameEntry:
    __slots__ = ("filename", "longname", "attrs")

    def __init__(self, filename, longname, attrs):
        self.filename = filename
        self.longname = longname
        self.attrs = attrs

    def __repr__(self):
        return "NameEntry(%r, %r, %r)" % (self.filename, self.longname,
                                          self.attrs)


class Name(Reply):
    type = SSH_FXP_NAME

    def __init__(self, rid, entries):
        self.id = rid
        self.entries = entries

    @property
    def names(self):
        return [e.filename for e in self.entries]


class AttrsReply(Reply):
    type = SSH_FXP_ATTRS

    def __init__(self, rid, attrs):
        self.id = rid
        self.attrs = attrs


class ExtendedReply(Reply):
    type = SSH_FXP_EXTENDED_REPLY

    def __init__(self, rid, data):
        self.id = rid
        self.data = data


class UnknownReply(Reply):
    def __init__(self, ptype, rid, body):
        self.type = ptype
        self.id = rid
        self.body = body


def parse_reply(payload):
    """Parse one packet payload (type byte + body, no length word)."""
    r = Reader(payload)
    ptype = r.u8()
    if ptype == SSH_FXP_VERSION:
        version = r.u32()
        exts = []
        while r.left():
            exts.append((r.string(), r.string()))
        reply = Version(version, exts)
    elif ptype == SSH_FXP_STATUS:
        reply = Status(r.u32(), r.u32(), r.string(), r.string())
    elif ptype == SSH_FXP_HANDLE:
        reply = Handle(r.u32(), r.string())
    elif ptype == SSH_FXP_DATA:
        reply = Data(r.u32(), r.string())
    elif ptype == SSH_FXP_NAME:
        rid = r.u32()
        count = r.u32()
        if count > r.left():
            raise ProtocolError("NAME count %d larger than the packet" % count)
        entries = [NameEntry(r.string(), r.string(), r.attrs())
                   for _ in range(count)]
        reply = Name(rid, entries)
    elif ptype == SSH_FXP_ATTRS:
        reply = AttrsReply(r.u32(), r.attrs())
    elif ptype == SSH_FXP_EXTENDED_REPLY:
        reply = ExtendedReply(r.u32(), r.rest())
    else:
        rid = r.u32() if r.left() >= 4 else None
        reply = UnknownReply(ptype, rid, r.rest())
    r.end()
    reply.raw = bytes(payload)
    return reply


STATVFS_FIELDS = ("bsize", "frsize", "blocks", "bfree", "bavail", "files",
                  "ffree", "favail", "fsid", "flag", "namemax")
LIMITS_FIELDS = ("max_packet_length", "max_read_length", "max_write_length",
                 "max_open_handles")


def _u64_record(data, fields):
    r = Reader(data)
    out = {f: r.u64() for f in fields}
    r.end()
    return out


def parse_statvfs(data):
    """EXTENDED_REPLY of statvfs/fstatvfs -> dict of the 11 uint64 fields."""
    return _u64_record(data, STATVFS_FIELDS)


def parse_limits(data):
    """EXTENDED_REPLY of limits@openssh.com -> dict of the 4 fields."""
    return _u64_record(data, LIMITS_FIELDS)


def parse_users_groups(data):
    """EXTENDED_REPLY of users-groups-by-id -> (user names, group names)."""
    r = Reader(data)
    lists = []
    for _ in range(2):
        inner = Reader(r.string())
        names = []
        while inner.left():
            names.append(inner.string())
        lists.append(names)
    r.end()
    return lists[0], lists[1]


# ---------------------------------------------------------------------------
# The server process


def server_argv(default_path=None):
    """The command line of the server under test.

    $SFTP_SERVER names the binary (default_path when unset, else
    sftp-server in the repository's root), and
    $SFTP_SERVER_ARGS holds extra arguments, split on spaces; "@CWD@" in
    them becomes the directory the server is started in.  The binary
    is made absolute, since servers are started in other directories.
    """
    binary = os.path.abspath(os.environ.get("SFTP_SERVER") or default_path or
                             os.path.join(REPO, "sftp-server"))
    return [binary] + os.environ.get("SFTP_SERVER_ARGS", "").split()


def others_can_run(path):
    """Whether a user with no claim on path (nobody) can execute it: it and
    every directory above it are open to others."""
    p = os.path.abspath(path)
    while True:
        if not os.stat(p).st_mode & 0o001:
            return False
        if p == "/":
            return True
        p = os.path.dirname(p)


def binary_for_others(binary, parent):
    """binary where another user (nobody, a test user) can run it: binary
    itself when others can, else a copy of the same name (the name tells a
    sanitizer build) in a new directory of mode 0755 under parent, which
    they must reach.  A tree cloned into a home of mode 0700 is closed to
    them, and the suites run from there all the same."""
    if others_can_run(binary):
        return binary
    d = tempfile.mkdtemp(prefix="bin-", dir=parent)
    os.chmod(d, 0o755)
    copy = os.path.join(d, os.path.basename(binary))
    shutil.copyfile(binary, copy)
    os.chmod(copy, 0o755)
    return copy


def reference_argv():
    """The command line of the reference server ($SFTP_REFERENCE)."""
    return [os.environ.get("SFTP_REFERENCE") or REFERENCE_SERVER]



class Server:
    """A server binary run as a subprocess, spoken to over its pipes.

    argv is the full command line.  stderr goes to a temporary file
    (``stderr_output()``), so a chatty server cannot block.  Requests are
    sent with ``send``/``send_many`` (returning the ids used) and replies
    read with ``recv``; ``call`` does both for one request and checks the
    echoed id.  Sending also drains the server's output into an internal
    buffer, so pipelining many requests cannot deadlock on full pipes.
    """

    def __init__(self, argv, cwd=None, env=None, umask=None,
                 timeout=DEFAULT_TIMEOUT, preexec_fn=None):
        # "@CWD@" in an argument stands for the directory the server runs
        # in, so that a suite can be rerun with e.g. "-r / -d @CWD@".
        where = os.path.abspath(cwd or os.getcwd())
        self.argv = [a.replace("@CWD@", where) for a in argv]
        self.timeout = timeout
        self._stderr = tempfile.TemporaryFile()
        self._rbuf = bytearray()
        self._eof = False
        self._next_id = 1
        self.returncode = None
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr, cwd=cwd, env=env, close_fds=True,
            umask=-1 if umask is None else umask, preexec_fn=preexec_fn)
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        os.set_blocking(self._in, False)
        os.set_blocking(self._out, False)

    # -- context manager ---------------------------------------------------

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()
        return False

    # -- low level I/O -------------------------------------------------------

    def _deadline(self, timeout):
        return time.monotonic() + (self.timeout if timeout is None
                                   else timeout)

    def _drain_once(self):
        """Read what the server has written; False at end of file."""
        try:
            chunk = os.read(self._out, 1 << 20)
        except BlockingIOError:
            return True
        if not chunk:
            self._eof = True
            return False
        self._rbuf += chunk
        return True

    def send_raw(self, data, timeout=None):
        """Write bytes to the server's stdin, reading its stdout meanwhile.

        Raises ServerClosed if the server closed stdin (EPIPE) and Timeout
        if it stops reading for longer than the timeout.
        """
        view = memoryview(bytes(data))
        deadline = self._deadline(timeout)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout("server stopped reading its input "
                              "(%d bytes unsent)" % len(view))
            rlist = [] if self._eof else [self._out]
            rr, ww, _ = select.select(rlist, [self._in], [], left)
            if rr:
                self._drain_once()
            if ww:
                try:
                    n = os.write(self._in, view)
                except BlockingIOError:
                    continue
                except BrokenPipeError:
                    raise ServerClosed("server closed its input "
                                       "(%d bytes unsent)" % len(view))
                view = view[n:]

    def close_stdin(self):
        """Signal end of input to the server."""
        if not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass

    def buffer_exactly(self, n, timeout=None):
        """Read output until n bytes are buffered, and no more: what the
        server writes after them stays in its pipe, which fills, until
        recv() (which parses the buffered bytes first) reads on."""
        deadline = self._deadline(timeout)
        while len(self._rbuf) < n:
            left = deadline - time.monotonic()
            if self._eof or left <= 0:
                raise Timeout("waited for %d bytes of output, have %d" %
                              (n, len(self._rbuf)))
            rr, _, _ = select.select([self._out], [], [], left)
            if not rr:
                continue
            try:
                chunk = os.read(self._out, n - len(self._rbuf))
            except BlockingIOError:
                continue
            if not chunk:
                self._eof = True
            self._rbuf += chunk

    def send_unread(self, req, timeout=None):
        """Send one request without reading any output meanwhile (as
        send() does): the server's unread output stays where it is.
        Returns its id."""
        rid = self.next_id()
        view = memoryview(encode_request(rid, req))
        deadline = self._deadline(timeout)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout("server stopped reading its input")
            _, ww, _ = select.select([], [self._in], [], left)
            if ww:
                view = view[os.write(self._in, view):]
        return rid

    def _fill(self, need, deadline):
        while len(self._rbuf) < need:
            if self._eof:
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout("no reply from the server: waited for %d "
                              "bytes, have %d" % (need, len(self._rbuf)))
            rr, _, _ = select.select([self._out], [], [], left)
            if rr:
                self._drain_once()
        return True

    def _closed(self, what):
        """what, with how the server ended and the end of its stderr, so
        that a failure says why it closed."""
        try:
            rc = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            rc = "none: it still runs"
        err = self.stderr_output()[-800:].decode(errors="replace").strip()
        return "%s (exit status %s%s)" % (
            what, rc, "; its stderr ends: %r" % err if err else "")

    def recv_packet(self, timeout=None):
        """Read one reply packet and return its payload (type + body)."""
        deadline = self._deadline(timeout)
        if not self._fill(4, deadline):
            raise ServerClosed(self._closed(
                "server closed its output" +
                (" mid length word" if self._rbuf else "")))
        length = struct.unpack(">I", self._rbuf[:4])[0]
        if length == 0 or length > _MAX_REPLY_LENGTH:
            raise ProtocolError("reply length word %d" % length)
        if not self._fill(4 + length, deadline):
            raise ServerClosed(self._closed(
                "server closed its output mid packet (%d of %d bytes)" %
                (len(self._rbuf) - 4, length)))
        payload = bytes(self._rbuf[4:4 + length])
        del self._rbuf[:4 + length]
        return payload

    def recv(self, timeout=None):
        """Read and parse one reply."""
        return parse_reply(self.recv_packet(timeout))

    def read_output(self, timeout):
        """Return all output within timeout seconds, or until end of file.

        Used to check that the server stays silent.  Buffered output that
        was not consumed yet is included (and consumed).
        """
        deadline = time.monotonic() + timeout
        while not self._eof:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            rr, _, _ = select.select([self._out], [], [], left)
            if rr:
                self._drain_once()
        out = bytes(self._rbuf)
        del self._rbuf[:]
        return out

    def at_eof(self):
        """True once the server's output has ended and was all consumed."""
        return self._eof and not self._rbuf

    # -- requests ------------------------------------------------------------

    def next_id(self):
        rid = self._next_id
        self._next_id = (self._next_id + 1) & 0xFFFFFFFF
        return rid

    def init(self, version=3, extensions=(), timeout=None):
        """Send INIT and return the parsed VERSION (ProtocolError if not)."""
        self.send_raw(encode_init(version, extensions), timeout)
        reply = self.recv(timeout)
        if not isinstance(reply, Version):
            raise ProtocolError("expected VERSION, got %r" % (reply,))
        return reply

    def send(self, req, rid=None, timeout=None):
        """Send one request; return its id (a fresh one unless given)."""
        if rid is None:
            rid = self.next_id()
        self.send_raw(encode_request(rid, req), timeout)
        return rid

    def send_many(self, reqs, ids=None, timeout=None):
        """Send all requests before reading anything; return their ids."""
        reqs = list(reqs)
        if ids is None:
            ids = [self.next_id() for _ in reqs]
        self.send_raw(b"".join(encode_request(i, r)
                               for i, r in zip(ids, reqs)), timeout)
        return list(ids)

    def recv_many(self, n, timeout=None):
        return [self.recv(timeout) for _ in range(n)]

    def call(self, req, rid=None, timeout=None):
        """Send one request and return its reply, checking the echoed id."""
        rid = self.send(req, rid, timeout)
        reply = self.recv(timeout)
        if reply.id != rid:
            raise ProtocolError("reply to request %d carries id %r: %r" %
                                (rid, reply.id, reply))
        return reply

    def _call_expect(self, req, cls):
        reply = self.call(req)
        if not isinstance(reply, cls):
            raise ProtocolError("expected %s, got %r" % (cls.__name__, reply))
        return reply

    def open(self, path, pflags, attrs=None):
        """OPEN and return the handle; ProtocolError on any other reply."""
        return self._call_expect(req_open(path, pflags, attrs), Handle).handle

    def opendir(self, path):
        """OPENDIR and return the handle; ProtocolError on any other reply."""
        return self._call_expect(req_opendir(path), Handle).handle

    def close_handle(self, handle):
        """CLOSE and return the STATUS reply."""
        return self._call_expect(req_close(handle), Status)

    def readdir_all(self, handle, max_batches=100000):
        """READDIR until a STATUS; return (list of Name replies, Status)."""
        batches = []
        for _ in range(max_batches):
            reply = self.call(req_readdir(handle))
            if isinstance(reply, Status):
                return batches, reply
            if not isinstance(reply, Name):
                raise ProtocolError("READDIR got %r" % (reply,))
            batches.append(reply)
        raise ProtocolError("READDIR never ended")

    # -- process -------------------------------------------------------------

    def wait(self, timeout=None):
        """Wait for the server to exit and return its exit status.

        The status is as subprocess reports it (negative for a signal).
        On timeout the server is killed and Timeout raised.
        """
        try:
            self.returncode = self.proc.wait(
                self.timeout if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise Timeout("server did not exit")
        return self.returncode

    def close(self, timeout=None):
        """Close stdin, wait for the exit and return its status."""
        self.close_stdin()
        return self.wait(timeout)

    def kill(self):
        """Make sure the server is gone and its pipes closed."""
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self.returncode = self.proc.returncode
        self.close_stdin()
        if not self.proc.stdout.closed:
            self.proc.stdout.close()

    def stderr_output(self):
        """Everything the server wrote to stderr so far."""
        self._stderr.flush()
        self._stderr.seek(0)
        return self._stderr.read()


__all__ = [k for k in list(globals())
           if not k.startswith("_") and k not in ("os", "select", "struct",
                                                  "subprocess", "tempfile",
                                                  "time")]
