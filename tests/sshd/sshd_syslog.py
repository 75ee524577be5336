#!/usr/bin/python3
"""A throwaway syslog socket for tests/sshd/run-sshd.sh.

Usage: sshd_syslog.py SOCKET OUTPUT

Binds a Unix datagram socket at SOCKET (which must not exist), appends every
message received to OUTPUT, one per line, and on SIGTERM or SIGINT removes
SOCKET and exits. Gives up by itself after 10 minutes.
"""

import os
import signal
import socket
import sys


def main():
    path, out = sys.argv[1], sys.argv[2]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    os.chmod(path, 0o666)

    def stop(*_):
        try:
            os.unlink(path)
        except OSError:
            pass
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGALRM, stop)
    signal.alarm(600)
    with open(out, "ab", buffering=0) as f:
        while True:
            msg = sock.recv(65536)
            f.write(msg.rstrip(b"\n").replace(b"\n", b" ") + b"\n")


if __name__ == "__main__":
    main()
