#!/usr/bin/env python3
"""The server's check-file against coreutils, on the same file, in one run.

Usage: bench/check-file.py [--server PATH] [--size MiB] [--rounds N]
                           [--algos md5,sha256,...]

Makes a file of --size MiB (default 1024) in $TMPDIR, reads it once so that
it is cached, then for each algorithm and round times, alternately, one
check-file-name request to the server (from sending it to the reply) and
the coreutils tool (md5sum, sha256sum, ...) on the same file, and checks
that both digests are equal.  Prints the best rate of each in MB/s and the
ratio server/coreutils.  The whole request runs in the server, hashing in
256 KiB reads through the same code as READ.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
import sftpwire  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default=os.path.join(HERE, "..",
                                                     "sftp-server"))
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--algos", default="md5,sha1,sha256,sha512")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="check-file-bench-")
    path = os.path.join(d, "data")
    try:
        with open(path, "wb") as f:
            block = os.urandom(1 << 20)
            for _ in range(a.size):
                f.write(block)
        with open(path, "rb") as f:
            while f.read(1 << 22):
                pass
        srv = sftpwire.Server([os.path.abspath(a.server)], cwd=d,
                              timeout=600)
        srv.init()
        nbytes = a.size << 20
        print("check-file-name over %d MiB, best of %d rounds, MB/s" %
              (a.size, a.rounds))
        print("%-8s %10s %10s %7s  %s" % ("algo", "server", "coreutils",
                                          "ratio", "digests"))
        bad = 0
        for alg in a.algos.split(","):
            best_s = best_c = 0.0
            same = True
            for _ in range(a.rounds):
                t = time.monotonic()
                r = srv.call(sftpwire.req_extended(
                    "check-file-name", sftpwire.string("data") +
                    sftpwire.string(alg) + sftpwire.u64(0) +
                    sftpwire.u64(0) + sftpwire.u32(0)), timeout=600)
                ts = time.monotonic() - t
                rd = sftpwire.Reader(r.data)
                rd.string()
                rd.string()
                ours = rd.rest().hex()
                t = time.monotonic()
                out = subprocess.run([alg + "sum", path], check=True,
                                     capture_output=True).stdout
                tc = time.monotonic() - t
                same = same and out.split()[0].decode() == ours
                best_s = max(best_s, nbytes / ts / 1e6)
                best_c = max(best_c, nbytes / tc / 1e6)
            bad += not same
            print("%-8s %10.1f %10.1f %7.2f  %s" % (
                alg, best_s, best_c, best_s / best_c,
                "equal" if same else "DIFFER"))
        srv.close()
        return 1 if bad else 0
    finally:
        os.unlink(path) if os.path.exists(path) else None
        os.rmdir(d)


if __name__ == "__main__":
    sys.exit(main())
