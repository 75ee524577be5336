#!/usr/bin/env bash
# The server in a chroot jail behind a real sshd (ChrootDirectory), logged
# into by a dedicated unprivileged user. The jail holds the static build as
# /sftp-server and nothing else of a system: no /etc/passwd, no /dev, no
# /proc, no libraries. Checks that put, get and ls work there, that ls -l
# shows numeric ids, and that no path (.., absolute, through symbolic links
# planted in the jail pointing outside it) reaches a file outside the jail.
#
# sshd runs a session's command through the user's login shell, looked up in
# the jail. Two set-ups are tested:
#   1. /bin/sh in the jail is a 30-line static "sh -c" built by this script
#      (with "2>>FILE" so that the server's -e log can be read), and
#      "ForceCommand /sftp-server -e -l INFO" in a "Match User" block;
#   2. /bin/sh in the jail is the server itself, which serves when started
#      as a login shell ("sftp-server -c ..."), with "Subsystem sftp
#      /sftp-server".  The jail now has an /etc/passwd and an /etc/group
#      of its own, with names the host does not have, which ls -l shows;
#      then also an /etc/nsswitch.conf naming "compat", which a musl build
#      ignores (a glibc build would need libnss_compat in the jail: that
#      check is skipped for one).
#
# Usage: tests/sshd/run-chroot.sh (as root)
#   SFTP_SERVER_STATIC  static server binary; default: sftp-server-static in
#                       the repository root (make static, with musl where
#                       musl-gcc is installed)
#
# sshd requires every directory up to the jail to be owned by root and not
# writable by group or others: the jail is made in a fresh directory under
# /srv (or / when /srv does not qualify), removed at the end. A user
# "sftpjail" (shell /bin/sh, home /upload, no password) is created if
# missing. Everything is skipped, with the reason, where it cannot work
# (not root, no sshd, chroot not permitted).
#
# Output: "ok - NAME" / "FAIL - NAME: ..." / "skip - NAME: ..." per check,
# then "N passed, M failed[, K skipped]". Exit status 1 if any failed.

set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/lib.sh
. "$HERE/../lib/lib.sh"
# shellcheck source=tests/lib/sshd-lib.sh
. "$HERE/../lib/sshd-lib.sh"

SFTP_SERVER_STATIC=$(server_path "${SFTP_SERVER_STATIC:-$REPO/sftp-server-static}")
JAIL_USER=sftpjail
HOST=127.0.0.1
MARK=OUTSIDE-THE-JAIL-7f3a9c

export LC_ALL=C
START=$SECONDS

if [ ! -x "$SFTP_SERVER_STATIC" ]; then
    fail "static server" "expected an executable at $SFTP_SERVER_STATIC (make static), got none"
    summary
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    skip "chroot tests" "not root: sshd's ChrootDirectory needs root"
    summary
    exit 0
fi
WHY=$(sshd_missing)
if [ -n "$WHY" ]; then
    skip "chroot tests" "$WHY"
    summary
    exit 0
fi

# a parent whose every component is root-owned and not group/world writable
# (sshd checks that), on a file system that allows exec
qualifies() {
    local d=$1
    while :; do
        [ "$(stat -c '%u' "$d" 2>/dev/null)" = 0 ] || return 1
        [ $((0$(stat -c '%a' "$d") & 022)) -eq 0 ] || return 1
        [ "$d" = / ] && break
        d=$(dirname "$d")
    done
    ! findmnt -no OPTIONS -T "$1" 2>/dev/null | grep -qw noexec
}
BASE=""
for b in /srv /; do
    if [ -d "$b" ] && qualifies "$b"; then
        BASE=$b
        break
    fi
done
if [ -z "$BASE" ]; then
    skip "chroot tests" "neither /srv nor / is root-owned, not group/world writable and exec-able"
    summary
    exit 0
fi

T=$(mktemp -d "${BASE%/}/sftpjail.XXXXXX") || setup_failed "expected mktemp -d under $BASE to work, got an error"
cleanup() {
    sshd_stop
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
chmod 0755 "$T"

if ! sshd_test_user "$JAIL_USER" /upload; then
    skip "chroot tests" "could not create user $JAIL_USER"
    summary
    exit 0
fi
JUID=$(id -u "$JAIL_USER")
JGID=$(id -g "$JAIL_USER")
SSHD_USERS=$JAIL_USER
S=$T/sshd
if ! sshd_init "$S"; then
    fail "sshd setup" "expected host and user keys made with ssh-keygen, got an error"
    summary
    exit 1
fi
sshd_authorize "$JAIL_USER"

J=$T/jail       # the jail: root-owned, 0755
L=$T/local      # the client's side
O=$T/outside    # next to the jail, readable by everyone
mkdir -m 0755 "$J" "$J/bin" "$J/pub" "$J/upload" "$J/log" "$L" "$O"
chown "$JAIL_USER:$JGID" "$J/upload" "$J/log"
install -m 0755 "$SFTP_SERVER_STATIC" "$J/sftp-server"
printf 'public file in the jail\n' > "$J/pub/readme"
printf '%s\n' "$MARK" > "$O/secret"
chmod 0644 "$O/secret"
# links planted inside the jail, pointing outside it
ln -s /etc "$J/upload/etc"
ln -s "$O" "$J/upload/outside"
ln -s ../.. "$J/upload/up"
ln -s "$O/secret" "$J/pub/secret-link"
head -c 3000017 /dev/urandom > "$L/big"
printf 'small\n' > "$L/small"
chmod 0644 "$L/big" "$L/small"

sftp_run() {      # sftp_run < BATCH: sftp as the jail's user; RC, out, err
    cat > "$T/batch"
    timeout 120 sftp "${SSH_OPTS[@]}" -q -b "$T/batch" "$JAIL_USER@$HOST" \
        > "$T/out" 2> "$T/err" < /dev/null
    RC=$?
}

# section NAME: the lines sftp printed after the batch command NAME
section() { awk -v c="sftp> $1" '$0 == c || $0 == "sftp> -" substr(c, 7) { f = 1; next } /^sftp> / { f = 0 } f' "$T/out"; }

# chroot_broken: sshd could not enter the jail (prints the reason)
chroot_broken() {
    grep -E 'chroot|ChrootDirectory' "$SSHD_LOG" | grep -iE 'bad ownership|fatal|not permitted|denied|error' | head -1
}

# ---------------------------------------------------------------------------
# 1. ForceCommand /sftp-server -e -l INFO, a minimal static sh in the jail
# ---------------------------------------------------------------------------
cat > "$T/jail-sh.c" <<'EOF'
/* "sh -c COMMAND" for a jail: splits COMMAND on blanks, applies a "2>>FILE"
 * word, execs the rest. Nothing else of a shell. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
	char *args[64], *p;
	int n = 0, fd;

	if (argc != 3 || strcmp(argv[1], "-c") != 0) {
		fprintf(stderr, "jail-sh: only sh -c COMMAND\n");
		return 2;
	}
	for (p = argv[2]; *p != '\0' && n < 63;) {
		while (*p == ' ' || *p == '\t')
			*p++ = '\0';
		if (*p == '\0')
			break;
		if (strncmp(p, "2>>", 3) == 0) {
			char *f = p + 3;
			p += strcspn(p, " \t");
			if (*p != '\0')
				*p++ = '\0';
			if ((fd = open(f, O_WRONLY | O_CREAT | O_APPEND, 0600)) == -1 ||
			    dup2(fd, 2) == -1)
				return 126;
			if (fd != 2)
				close(fd);
			continue;
		}
		args[n++] = p;
		p += strcspn(p, " \t");
	}
	args[n] = NULL;
	if (n == 0)
		return 0;
	execv(args[0], args);
	return 127;
}
EOF

forcecommand_tests() {
    local why
    if ! command -v cc >/dev/null 2>&1; then
        skip "jail with ForceCommand" "no C compiler for the jail's minimal sh"
        return
    fi
    if ! cc -static -O2 -o "$J/bin/sh" "$T/jail-sh.c" 2> "$T/cc.err"; then
        skip "jail with ForceCommand" "cannot build a static sh: $(oneline "$T/cc.err")"
        return
    fi
    if ! sshd_start jail-force <<EOF
Subsystem sftp /sftp-server
Match User $JAIL_USER
    ChrootDirectory $J
    ForceCommand /sftp-server -e -l INFO 2>>/log/server.log
EOF
    then
        fail "sshd starts (ForceCommand)" "expected sshd to listen on $HOST, got: $SSHD_ERROR"
        return
    fi

    sftp_try <<EOF
pwd
EOF
    why=$(chroot_broken)
    if [ "$RC" -ne 0 ] && [ -n "$why" ]; then
        skip "chroot tests" "ChrootDirectory cannot work here: $why"
        return 1
    fi
    check_rc "jail: session as $JAIL_USER"
    check_grep "jail: starts in the home directory /upload" '^Remote working directory: /upload$' "$T/out"

    sftp_try <<EOF
put "$L/big" big
put "$L/small" /upload/small
get big "$L/big.back"
get /pub/readme "$L/readme"
ls -l /upload
ls -1a /
mkdir newdir
rename small small2
EOF
    check_rc "jail: put, get, ls session"
    check_same "jail: put of 3 MB" "$L/big" "$J/upload/big"
    check_same "jail: put to an absolute jail path" "$L/small" "$J/upload/small2"
    check_same "jail: get of 3 MB" "$L/big" "$L/big.back"
    check_same "jail: get of a root-owned file" "$J/pub/readme" "$L/readme"
    check_eq "jail: uploads belong to the user" "$JUID $JGID" "$(stat -c '%u %g' "$J/upload/big" 2>&1)"
    if [ -d "$J/upload/newdir" ]; then pass "jail: mkdir"; else fail "jail: mkdir" "expected upload/newdir, got none"; fi
    check_eq "jail: ls -l shows numeric ids (no /etc/passwd)" "$JUID $JGID 3000017" \
        "$(section "ls -l /upload" | awk '$NF ~ /\/big$/ { print $3, $4, $5 }')"
    check_eq "jail: ls / shows the jail's root, nothing else" ". .. bin log pub sftp-server upload" \
        "$(section "ls -1a /" | sed 's|^/||' | sort | tr '\n' ' ' | sed 's/ $//')"

    # escapes: .., absolute host paths, planted symlinks, links made by the client
    sftp_try <<EOF
get ../../outside/secret "$L/e1"
get /../outside/secret "$L/e2"
get /../../../../../..$O/secret "$L/e3"
get $O/secret "$L/e4"
get etc/passwd "$L/e5"
get outside/secret "$L/e6"
get up/outside/secret "$L/e7"
get /pub/secret-link "$L/e8"
get /etc/passwd "$L/e9"
get /proc/self/environ "$L/e10"
ln -s $O/secret mylink
get mylink "$L/e11"
ln $O/secret myhard
ls -1 etc/
ls -1 up/
cd ..
cd ..
pwd
put "$L/small" ../../escaped
put "$L/small" $O/escaped
EOF
    check_rc "jail: escape attempts session"
    local i got=""
    for i in 1 2 3 4 5 6 7 8 9 10 11; do
        [ -e "$L/e$i" ] && got="$got e$i"
    done
    check_eq "jail: no escape path downloads anything" "" "$got"
    if grep -rqa "$MARK" "$L" "$J"; then
        fail "jail: nothing from outside the jail reached the client" "expected no copy of the marker, got $(grep -rla "$MARK" "$L" "$J" | tr '\n' ' ')"
    else
        pass "jail: nothing from outside the jail reached the client"
    fi
    check_grep "jail: .. above the home and the root stays in the jail" "File \"/upload/\.\./\.\./outside/secret\" not found" "$T/err"
    check_grep "jail: /.. is the jail's root" "File \"/\.\./outside/secret\" not found" "$T/err"
    check_grep "jail: a host path does not exist in the jail" "File \"$O/secret\" not found" "$T/err"
    check_grep "jail: symlink to /etc leads nowhere" "File \"/upload/etc/passwd\" not found" "$T/err"
    check_grep "jail: symlink to ../.. stops at the jail's root" "File \"/upload/up/outside/secret\" not found" "$T/err"
    check_grep "jail: no /proc" "File \"/proc/self/environ\" not found" "$T/err"
    check_eq "jail: planted and client-made symlinks to a host file lead nowhere" "2" "$(grep -c '^stat remote: No such file or directory' "$T/err")"
    check_grep "jail: hard link to a host file fails" "remote link \"$O/secret\" to \"/upload/myhard\": No such file or directory" "$T/err"
    check_grep "jail: ls through the /etc symlink fails" "Can't ls: \"/upload/etc/\" not found|/upload/etc/.* not found" "$T/err"
    check_eq "jail: ls through the ../.. symlink shows the jail's root" "bin log pub sftp-server upload" \
        "$(section "ls -1 up/" | sed 's|^up/||; s|^/upload/up/||' | sort | tr '\n' ' ' | sed 's/ $//')"
    check_grep "jail: cd .. twice ends at the jail's root" '^Remote working directory: /$' "$T/out"
    check_grep "jail: upload to a host path fails" "dest open \"$O/escaped\": No such file or directory" "$T/err"
    check_grep "jail: upload above the jail's root refused" "dest open \"/\.\./\.\./escaped\": Permission denied" "$T/err"
    if [ -e "$J/escaped" ] || [ -e "$T/escaped" ] || [ -e "$O/escaped" ] || [ -e "$BASE/escaped" ]; then
        fail "jail: no upload landed outside /upload" "expected no file 'escaped', got one"
    else
        pass "jail: no upload landed outside /upload"
    fi
    check_eq "jail: the outside file is untouched" "$MARK 1" "$(cat "$O/secret") $(stat -c %h "$O/secret")"

    tr -d '\r' < "$J/log/server.log" > "$T/server.txt" 2>/dev/null
    check_grep "jail: log names the user by number (no /etc/passwd)" "^session opened for local user $JUID from \[127\.0\.0\.1\]\$" "$T/server.txt"
    check_grep "jail: log of an upload, with the path in the jail" "^close \"/upload/big\" bytes read 0 written 3000017\$" "$T/server.txt"
    return 0
}
forcecommand_tests || { sshd_stop; printf '# %d s\n' $((SECONDS - START)); summary; exit $?; }

# ---------------------------------------------------------------------------
# 2. the server as the login shell in the jail, Subsystem sftp /sftp-server
# ---------------------------------------------------------------------------
shell_tests() {
    local why
    rm -f "$J/bin/sh" "$J/upload/big" "$L/big.back"
    install -m 0755 "$SFTP_SERVER_STATIC" "$J/bin/sh"
    # the jail's own names for the user and its group
    mkdir -m 0755 "$J/etc"
    printf 'root:x:0:0::/:/bin/sh\njailuser7:x:%s:%s::/upload:/bin/sh\n' "$JUID" "$JGID" > "$J/etc/passwd"
    printf 'root:x:0:\njailgroup7:x:%s:\n' "$JGID" > "$J/etc/group"
    chmod 0644 "$J/etc/passwd" "$J/etc/group"
    if ! sshd_start jail-shell <<EOF
Subsystem sftp /sftp-server
Match User $JAIL_USER
    ChrootDirectory $J
EOF
    then
        fail "sshd starts (login shell)" "expected sshd to listen on $HOST, got: $SSHD_ERROR"
        return
    fi
    sftp_try <<EOF
pwd
put "$L/big" big
get big "$L/big.back"
ls -1 /
ls -l /upload
EOF
    why=$(chroot_broken)
    if [ "$RC" -ne 0 ] && [ -n "$why" ]; then
        skip "jail with the server as login shell" "ChrootDirectory cannot work here: $why"
        return
    fi
    check_rc "login shell: session (sftp-server -c)"
    check_grep "login shell: starts in /upload" '^Remote working directory: /upload$' "$T/out"
    check_same "login shell: put" "$L/big" "$J/upload/big"
    check_same "login shell: get" "$L/big" "$L/big.back"
    check_eq "login shell: ls /" "/bin /etc /log /pub /sftp-server /upload" "$(section "ls -1 /" | sort | tr '\n' ' ' | sed 's/ $//')"
    check_eq "login shell: ls -l names from the jail's /etc/passwd and /etc/group" "jailuser7 jailgroup7 3000017" \
        "$(section "ls -l /upload" | awk '$NF ~ /\/big$/ { print $3, $4, $5 }')"

    printf 'passwd: compat\ngroup: compat\n' > "$J/etc/nsswitch.conf"
    if readelf -n "$SFTP_SERVER_STATIC" 2>/dev/null | grep -q NT_GNU_ABI_TAG; then
        skip "login shell: names with nsswitch.conf \"compat\" and no NSS module in the jail" "the static binary is built with glibc, which would load libnss_compat (make static with musl-gcc)"
        return
    fi
    sftp_try <<EOF
ls -l /upload
EOF
    check_eq "login shell: names with nsswitch.conf \"compat\" and no NSS module in the jail (musl)" "jailuser7 jailgroup7 3000017" \
        "$(section "ls -l /upload" | awk '$NF ~ /\/big$/ { print $3, $4, $5 }')"
}
shell_tests

sshd_stop
printf '# %d s\n' $((SECONDS - START))
summary
