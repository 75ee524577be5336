#!/usr/bin/env python3
"""Raw-protocol probes for tests/clients/run-parity.sh, over
tests/lib/sftpwire.py.

  parity_wire.py ugid SERVER
      Runs SERVER -e -l VERBOSE, sends one users-groups-by-id request with
      3 user ids and 2 group ids, and prints the server's
      "users-groups-by-id: ..." log line (nothing if there is none).
      Exit status 0 if the reply was an EXTENDED_REPLY, 1 otherwise.
  parity_wire.py log SERVER SCENARIO
      Runs SERVER -e -l VERBOSE in the current directory, plays SCENARIO,
      then prints "exit status N" and everything the server logged:
        forced       open a file for writing and write 5 bytes, open it
                     again for reading and read 3, open "." as a directory,
                     then end the input (the "forced close" lines);
        oversize     a length word of 262145 after INIT (exit 11);
        before-init  a STAT before INIT (exit 255);
        unknown-ext  an extended request "parity@example.com".
"""

import os
import struct
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "lib"))

import sftpwire  # noqa: E402


def ugid(server):
    srv = sftpwire.Server([server, "-e", "-l", "VERBOSE"], umask=0o022)
    try:
        srv.init()
        reply = srv.call(sftpwire.req_users_groups_by_id(
            [0, os.getuid(), 4000000000], [0, 4000000001]))
        ok = isinstance(reply, sftpwire.ExtendedReply)
        srv.close()
    finally:
        srv.kill()
    for line in srv.stderr_output().split(b"\n"):
        line = line.rstrip(b"\r")
        if line.startswith(b"users-groups-by-id:"):
            sys.stdout.buffer.write(line + b"\n")
    return 0 if ok else 1


def log(server, scenario):
    srv = sftpwire.Server([server, "-e", "-l", "VERBOSE"], cwd=os.getcwd(),
                          umask=0o022)
    try:
        if scenario != "before-init":
            srv.init()
        if scenario == "forced":
            h = srv.open("forced.txt", sftpwire.SSH_FXF_WRITE |
                         sftpwire.SSH_FXF_CREAT | sftpwire.SSH_FXF_TRUNC)
            srv.call(sftpwire.req_write(h, 0, b"hello"))
            h = srv.open("forced.txt", sftpwire.SSH_FXF_READ)
            srv.call(sftpwire.req_read(h, 0, 3))
            srv.opendir(".")
        elif scenario == "oversize":
            srv.send_raw(struct.pack(">I", 262145) + b"\x11" + bytes(100))
        elif scenario == "before-init":
            srv.send(sftpwire.req_stat("."))
        elif scenario == "unknown-ext":
            srv.call(sftpwire.req_extended("parity@example.com"))
        else:
            raise SystemExit("unknown scenario %s" % scenario)
        try:
            code = srv.close()
        except sftpwire.WireError:
            code = srv.wait()
    finally:
        srv.kill()
    sys.stdout.buffer.write(b"exit status %d\n" % code + srv.stderr_output())
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == "ugid":
        return ugid(argv[2])
    if len(argv) == 4 and argv[1] == "log":
        return log(argv[2], argv[3])
    print(__doc__)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except sftpwire.WireError as e:
        print("wire error: %s" % e)
        sys.exit(1)
