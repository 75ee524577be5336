#!/usr/bin/env python3
"""Parity on one file system: the same requests on files that were there
before the session, by our server and by OpenSSH's, on twin fixtures.

Used by tests/fs/run-fs-matrix.sh on each file system of its matrix.  On
overlayfs the fixtures are made in the lower layer before the mount, so
that every change is a copy-up and a directory rename meets EXDEV, as in
a container whose image holds the files.

  fs_probe.py make DIR          makes the fixture tree in DIR
  fs_probe.py run OURS REF      runs the requests with our server in OURS
                                and the reference in REF (two twin
                                fixtures), compares answers and the trees
                                left behind

$SFTP_SERVER names our server, $SFTP_REFERENCE the reference (default
/usr/lib/openssh/sftp-server).  Prints "ok - NAME" / "FAIL - NAME: ..." /
"skip - NAME: ..." lines and "N passed, M failed[, K skipped]".
"""

import os
import stat
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ in the tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))

from sftpwire import *  # noqa: E402,F401,F403

SERVER_ARGV = server_argv()
REFERENCE = reference_argv()[0]

BIG = bytes(range(256)) * 1200        # 300 KiB, for copy-data


def make(d):
    """The fixture: files, directories and a symlink."""
    os.makedirs(os.path.join(d, "dir", "sub"))
    os.mkdir(os.path.join(d, "emptydir"))
    os.mkdir(os.path.join(d, "movedir"))
    for name, data in (("file", b"0123456789"), ("other", b"other"),
                       ("victim", b"victim"), ("big", BIG),
                       ("dir/inner", b"inner"), ("dir/sub/deep", b"deep"),
                       ("movedir/x", b"x")):
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
        os.chmod(os.path.join(d, name), 0o644)
    os.symlink("file", os.path.join(d, "link"))


def shape(reply):
    if isinstance(reply, Status):
        return "STATUS " + STATUS_NAMES.get(reply.code, str(reply.code))
    if isinstance(reply, Data):
        return "DATA %r" % reply.data[:32]
    if isinstance(reply, Handle):
        return "HANDLE"
    if isinstance(reply, AttrsReply):
        a = reply.attrs
        return "ATTRS size=%s perm=%s" % (a.size, oct(a.permissions or 0))
    if isinstance(reply, Name):
        return "NAME %d" % len(reply.entries)
    return reply.type_name


def session(srv):
    """The requests, in order; returns [(label, answer)]."""
    out = []

    def call(label, req):
        out.append((label, shape(srv.call(req))))

    def opened(label, path, flags):
        r = srv.call(req_open(path, flags))
        out.append((label, shape(r)))
        return r.handle if isinstance(r, Handle) else None

    h = opened("open file rw", "file", SSH_FXF_READ | SSH_FXF_WRITE)
    if h:
        call("write into file", req_write(h, 5, b"ABC"))
        call("fsync file", req_fsync(h))
        call("read file", req_read(h, 0, 100))
        call("fstat file", req_fstat(h))
        call("close file", req_close(h))
    call("setstat file mode", req_setstat("file", Attrs(permissions=0o600)))
    call("setstat file times", req_setstat("file", Attrs(atime=1000000,
                                                         mtime=2000000)))
    call("lsetstat other", req_lsetstat("other", Attrs(permissions=0o640)))
    call("setstat dir mode", req_setstat("dir", Attrs(permissions=0o750)))
    call("truncate other", req_setstat("other", Attrs(size=2)))
    call("rmdir dir (not empty)", req_rmdir("dir"))
    call("mkdir in dir", req_mkdir("dir/new"))
    rh = opened("open big", "big", SSH_FXF_READ)
    wh = opened("open copy", "big.copy", SSH_FXF_WRITE | SSH_FXF_CREAT)
    if rh and wh:
        call("copy-data big", req_copy_data(rh, 0, 0, wh, 0))
        call("copy-data part", req_copy_data(rh, 1000, 70000, wh, 5))
    for hh, label in ((rh, "close big"), (wh, "close copy")):
        if hh:
            call(label, req_close(hh))
    r = srv.call(req_opendir("dir/sub"))
    out.append(("opendir dir/sub", shape(r)))
    if isinstance(r, Handle):
        batches, end = srv.readdir_all(r.handle)
        names = sorted(e.filename for b in batches for e in b.entries)
        out.append(("readdir dir/sub", repr(names)))
        out.append(("readdir end", shape(end)))
        call("closedir", req_close(r.handle))
    call("hardlink file", req_hardlink("file", "file.hl"))
    call("rename dir", req_rename("movedir", "moveddir"))
    call("posix-rename dir", req_posix_rename("dir", "dir2"))
    call("rename file onto other", req_rename("victim", "other"))
    call("posix-rename onto other", req_posix_rename("victim", "other"))
    call("remove link", req_remove("link"))
    call("rmdir emptydir", req_rmdir("emptydir"))
    r = srv.call(req_statvfs("."))
    out.append(("statvfs", r.type_name))
    call("remove big", req_remove("big"))
    call("stat removed big", req_stat("big"))
    return out


def tree(root):
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            st = os.lstat(p)
            kind = stat.S_IFMT(st.st_mode)
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    extra = f.read()
            elif stat.S_ISLNK(st.st_mode):
                extra = os.readlink(p)
            else:
                extra = None
            out[os.path.relpath(p, root)] = (kind, stat.S_IMODE(st.st_mode),
                                             st.st_nlink if kind ==
                                             stat.S_IFREG else 0, extra)
        dirs[:] = [x for x in dirs if not os.path.islink(os.path.join(d, x))]
    return out


def run(ours_dir, ref_dir):
    results = []
    if not os.access(REFERENCE, os.X_OK):
        print("skip - parity probe: no reference server at %s" % REFERENCE)
        print("0 passed, 0 failed, 1 skipped")
        return 0
    answers = {}
    for which, argv, d in (("ours", SERVER_ARGV, ours_dir),
                           ("ref", [REFERENCE], ref_dir)):
        with Server(argv, cwd=d, umask=0o022) as srv:
            srv.init()
            answers[which] = session(srv)
            srv.close()
    diffs = ["%s: ours %s, OpenSSH %s" % (o[0], o[1], r[1])
             for o, r in zip(answers["ours"], answers["ref"]) if o != r]
    results.append(("parity probe: answers", diffs))
    t_ours, t_ref = tree(ours_dir), tree(ref_dir)
    tdiffs = ["%s: ours %s, OpenSSH %s" % (k, str(t_ours.get(k))[:60],
                                          str(t_ref.get(k))[:60])
              for k in sorted(set(t_ours) | set(t_ref))
              if t_ours.get(k) != t_ref.get(k)]
    results.append(("parity probe: files left", tdiffs))
    failed = 0
    for name, problems in results:
        if problems:
            failed += 1
            print("FAIL - %s: %s" % (name, "; ".join(problems[:5])))
        else:
            print("ok - %s" % name)
    print("%d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


def main(argv):
    if len(argv) == 3 and argv[1] == "make":
        make(argv[2])
        return 0
    if len(argv) == 4 and argv[1] == "run":
        return run(argv[2], argv[3])
    print(__doc__.strip())
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
