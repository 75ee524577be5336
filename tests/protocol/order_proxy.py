#!/usr/bin/env python3
"""A server that breaks the order of requests on purpose, for
tests/protocol/test_order.py to show that it catches it.

  order_proxy.py MODE SERVER [ARG ...]

runs SERVER and passes the client's packets to it and its replies back,
but changes the order of each batch of requests that arrived together:

  swap-exec     a READ followed by a WRITE (or a WRITE by a READ) are
                passed on in the other order, so the later
                one runs first; the replies still go back in request order,
                each with its own id, as a server that starts a request
                before an earlier one it depends on has finished would
                answer.
  swap-replies  requests run in order, but the replies of each READ and
                the reply after it go back swapped: replies out of request
                order.

Only the Python 3 standard library is used.
"""

import os
import struct
import subprocess
import sys

READ, WRITE = 5, 6


def read_exact(fd, n):
    buf = b""
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def packets(data):
    """Split complete packets off data: (list, rest)."""
    out = []
    while len(data) >= 4:
        n = struct.unpack(">I", data[:4])[0]
        if len(data) < 4 + n:
            break
        out.append(data[:4 + n])
        data = data[4 + n:]
    return out, data


def plan(batch, mode):
    """The order in which to pass the batch on, and in which to send the
    replies back (lists of indexes)."""
    run = list(range(len(batch)))
    back = list(range(len(batch)))
    i = 0
    while i + 1 < len(batch):
        a, b = batch[i][4], batch[i + 1][4]
        if mode == "swap-exec" and {a, b} == {READ, WRITE}:
            run[i], run[i + 1] = i + 1, i
            i += 2
        elif mode == "swap-replies" and a == READ:
            back[i], back[i + 1] = i + 1, i
            i += 2
        else:
            i += 1
    return run, back


def main(argv):
    if len(argv) < 3 or argv[1] not in ("swap-exec", "swap-replies"):
        sys.stderr.write(__doc__)
        return 2
    mode = argv[1]
    srv = subprocess.Popen(argv[2:], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE)
    to, frm = srv.stdin.fileno(), srv.stdout.fileno()
    data = b""
    first = True
    while True:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        data += chunk
        batch, data = packets(data)
        if first and batch:
            # INIT and VERSION pass as they are.
            write_all(to, batch[0])
            head = read_exact(frm, 4)
            write_all(1, head + read_exact(frm, struct.unpack(">I",
                                                              head)[0]))
            batch = batch[1:]
            first = False
        if not batch:
            continue
        run, back = plan(batch, mode)
        write_all(to, b"".join(batch[j] for j in run))
        replies = {}
        for j in run:
            head = read_exact(frm, 4)
            if head is None:
                return 1
            replies[j] = head + read_exact(frm,
                                           struct.unpack(">I", head)[0])
        write_all(1, b"".join(replies[j] for j in back))
    srv.stdin.close()
    return srv.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
