#!/usr/bin/env python3
"""Compare what two SFTP servers logged (or what a client printed) for the
same scripted session, for tests/clients/run-parity.sh.

  parity_logcmp.py cmp [--client] [--mask FROM=TO]... TEST REFERENCE
      Exit 0 if the two files are the same after normalisation, else print
      one line describing the first differences and exit 1.
  parity_logcmp.py transfer LOG
      Check the "transfer" line that follows every file close in LOG:
      print "closes=N transfers=M" and exit 0 if each close "NAME" line is
      followed by transfer "NAME" S s R MiB/s, else print what is wrong and
      exit 1.
  parity_logcmp.py lines REGEX LOG
      Print the lines of LOG (CR LF stripped) that match REGEX.

Normalisation (cmp):
  * --mask FROM=TO replaces every FROM by TO in both files (temporary
    directories, the user name, ...).
  * Documented, intended differences from OpenSSH 9.2's server:
    - the server under test adds a VERBOSE line
        transfer "NAME" S s R MiB/s
      right after each [forced ]close "NAME" bytes read R written W line;
      such lines are dropped from TEST (the reference has none);
    - OpenSSH 9.2 miscounts "users-groups-by-id: N users, M groups" (it adds
      the group ids to the users and always says 0 groups; fixed in
      10.3); the two numbers are masked in both files and checked by a
      separate test;
    - OpenSSH logs "debug3: process_read: allocate 0 => N" when it grows
      its READ buffer, which this server does not have (READs go straight
      into the reply queue); the line is dropped from REF.
    - the server under test says at VERBOSE what confines it once it
      serves ("sandbox: ..."), where OpenSSH's server confines nothing on
      Linux; such lines are dropped from TEST (tests/protocol/
      test_sandbox.py checks them).
    - the server's own requests (check-file), which $PARITY_OWN_REQUESTS
      names (run-parity.sh takes them from the two servers' -Q requests):
      listed by -Q, and refused or advertised where OpenSSH has nothing;
      lines that name one are dropped from TEST.
  * --client: what the sftp client printed, with the numbers of df rows
    and the dates of ls -l lines masked (they depend on the moment and on
    what else uses the file system).
Lines are compared byte for byte otherwise, including the CR of CR LF.
"""

import os
import re
import sys

sys.dont_write_bytecode = True

# A log line may carry a syslog prefix added by the parity-syslog shim.
PREFIX = rb"(?:[^ \[]*\[PID\] fac=\d+ pri=\d+: )?"
CLOSE_RE = re.compile(rb"^" + PREFIX +
                      rb'(?:forced )?close "(.*)" bytes read \d+ written \d+\r?$')
TRANSFER_RE = re.compile(rb"^(" + PREFIX + rb')transfer "(.*)" (\S+) s (\S+) MiB/s\r?$')
TRANSFER_FORMAT = re.compile(rb"^\d+\.\d{3}$"), re.compile(rb"^\d+\.\d$")
ALLOCATE_RE = re.compile(rb"debug3: process_read: allocate \d+ => \d+")
UGID_RE = re.compile(rb"users-groups-by-id: \d+ users, \d+ groups")
DF_ROW_RE = re.compile(rb"^ *(?:[0-9.]+[A-Za-z]* +){4}\d+%\r?$")
LS_DATE_RE = re.compile(rb"[A-Z][a-z][a-z] [ 0-9]\d (?: \d{4}|\d\d:\d\d) ")


# The server's own requests, by name: a line naming one (or one of its
# extensions, whose names start with it) has no counterpart in OpenSSH's.
OWN_REQUESTS = os.environ.get("PARITY_OWN_REQUESTS", "").split()
OWN_EXT_RE = re.compile(rb"\b(?:" + b"|".join(
    re.escape(n.encode()) for n in OWN_REQUESTS) + rb")") \
    if OWN_REQUESTS else None
SANDBOX_RE = re.compile(rb"^" + PREFIX + rb"sandbox: ")


def read_lines(path):
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def drop_transfer_lines(lines):
    """Drop transfer "NAME" lines that directly follow close "NAME"."""
    out = []
    prev_close = None
    for line in lines:
        m = TRANSFER_RE.match(line)
        if m and prev_close is not None and m.group(2) == prev_close:
            prev_close = None
            continue
        c = CLOSE_RE.match(line)
        prev_close = c.group(1) if c else None
        out.append(line)
    return out


def normalise(lines, masks, client, is_test):
    out = []
    for line in lines:
        for src, dst in masks:
            line = line.replace(src, dst)
        line = UGID_RE.sub(b"users-groups-by-id: # users, # groups", line)
        if client:
            if DF_ROW_RE.match(line):
                line = b"<df numbers>"
            line = LS_DATE_RE.sub(b"<date> ", line)
        out.append(line)
    if is_test:
        out = drop_transfer_lines(out)
        # Documented exception: check-file is this server's own extension,
        # listed by -Q and refused or advertised where OpenSSH has nothing.
        if OWN_EXT_RE is not None:
            out = [l for l in out if not OWN_EXT_RE.search(l)]
        out = [l for l in out if not SANDBOX_RE.match(l)]
    else:
        out = [l for l in out if not ALLOCATE_RE.search(l)]
    return out


def show(line):
    s = repr(line)[2:-1]
    return s if len(s) <= 160 else s[:157] + "..."


def cmd_cmp(args):
    masks = []
    client = False
    files = []
    it = iter(args)
    for a in it:
        if a == "--client":
            client = True
        elif a == "--mask":
            src, _, dst = next(it).partition("=")
            if src:
                masks.append((src.encode("utf-8", "surrogateescape"),
                              dst.encode("utf-8", "surrogateescape")))
        else:
            files.append(a)
    if len(files) != 2:
        print("usage: parity_logcmp.py cmp [--client] [--mask FROM=TO]... "
              "TEST REFERENCE")
        return 2
    masks.sort(key=lambda m: -len(m[0]))
    test = normalise(read_lines(files[0]), masks, client, True)
    ref = normalise(read_lines(files[1]), masks, client, False)
    if test == ref:
        return 0
    import difflib
    diff = [d for d in difflib.diff_bytes(difflib.unified_diff, ref, test,
                                          lineterm=b"", n=0)
            if not d.startswith((b"---", b"+++", b"@@"))]
    shown = []
    for d in diff[:8]:
        shown.append(("reference " if d[:1] == b"-" else "ours ") +
                     "'" + show(d[1:]) + "'")
    more = "" if len(diff) <= 8 else " (and %d more)" % (len(diff) - 8)
    only_ref = sum(1 for d in diff if d[:1] == b"-")
    print("%d line(s) only in the reference's, %d only in ours: %s%s" %
          (only_ref, len(diff) - only_ref, "; ".join(shown), more))
    return 1


def cmd_transfer(args):
    lines = read_lines(args[0])
    closes = transfers = 0
    problems = []
    for i, line in enumerate(lines):
        c = CLOSE_RE.match(line)
        if c:
            closes += 1
            nxt = lines[i + 1] if i + 1 < len(lines) else b""
            m = TRANSFER_RE.match(nxt)
            if not m or m.group(2) != c.group(1):
                problems.append("no transfer line after '%s' (next: '%s')" %
                                (show(line), show(nxt)))
            elif not (TRANSFER_FORMAT[0].match(m.group(3)) and
                      TRANSFER_FORMAT[1].match(m.group(4))):
                problems.append("malformed '%s'" % show(nxt))
        if TRANSFER_RE.match(line):
            transfers += 1
    print("closes=%d transfers=%d%s" % (closes, transfers,
                                        "".join("; " + p for p in problems[:3])))
    return 1 if problems else 0


def cmd_lines(args):
    rx = re.compile(args[0].encode())
    for line in read_lines(args[1]):
        line = line.rstrip(b"\r")
        if rx.search(line):
            sys.stdout.buffer.write(line + b"\n")
    return 0


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    cmd = {"cmp": cmd_cmp, "transfer": cmd_transfer, "lines": cmd_lines}.get(argv[1])
    if cmd is None:
        print(__doc__)
        return 2
    return cmd(argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
