# shellcheck shell=bash disable=SC2034
# A private sshd for the test suites (sourced by those of tests/sshd/,
# tests/fs/run-gluster-2host.sh and bench/): the system's /usr/sbin/sshd in
# the foreground on 127.0.0.1 and a free high port, with its own
# configuration, host key, user key and authorized_keys in a directory of the
# caller. It never reads or changes /etc/ssh and never touches the machine's
# own sshd.
#
# The caller defines pass/fail/skip and calls, in this order:
#   sshd_init DIR           keys and files go to DIR (created, mode 0755)
#   sshd_start NAME <<EOF   start sshd with the common settings plus the
#   ...lines...             lines read from stdin (Subsystem, Match blocks);
#   EOF                     returns 1 (reason in SSHD_ERROR) if it cannot
#   sshd_stop               stop it (also done by sshd_start and at exit)
# and connects with "ssh/sftp/scp ${SSH_OPTS[@]} USER@127.0.0.1".
# sshd_stop must be called from the caller's EXIT trap.
# sshd_settings prints the common settings, for an sshd started another way.
#
# Set by sshd_init/sshd_start:
#   SSHD_DIR SSHD_PORT SSHD_PID SSHD_LOG SSHD_CONFIG SSHD_ERROR
#   SSH_KEY (private user key), SSH_PUBKEY, SSH_KNOWN_HOSTS, SSH_OPTS (array)
#   SSHD_USERS (AllowUsers, default: the current user)

SSHD=/usr/sbin/sshd
SSHD_PID=""
SSHD_PORT=""
SSHD_ERROR=""
SSHD_USERS=${SSHD_USERS:-$(id -un)}

# sshd_missing: prints why a private sshd cannot run here (nothing if it can)
sshd_missing() {
    local c
    if [ ! -x "$SSHD" ]; then
        echo "no $SSHD (Debian package openssh-server)"
        return
    fi
    for c in ssh ssh-keygen timeout; do
        if ! command -v "$c" >/dev/null 2>&1; then
            echo "no $c in PATH"
            return
        fi
    done
    if [ ! -x /usr/bin/python3 ]; then
        echo "no /usr/bin/python3 (to find a free port)"
    fi
}

sshd_init() {
    SSHD_DIR=$1
    mkdir -p "$SSHD_DIR/authorized_keys" || return 1
    # sshd reads authorized_keys as the user logging in: keep it readable
    chmod 0755 "$SSHD_DIR" "$SSHD_DIR/authorized_keys"
    SSH_KEY=$SSHD_DIR/id_ed25519
    SSH_PUBKEY=$SSH_KEY.pub
    SSH_KNOWN_HOSTS=$SSHD_DIR/known_hosts
    SSHD_LOG=$SSHD_DIR/sshd.log
    ssh-keygen -q -t ed25519 -N '' -C sftp-test-host -f "$SSHD_DIR/host_ed25519" </dev/null >/dev/null || return 1
    ssh-keygen -q -t ed25519 -N '' -C sftp-test-user -f "$SSH_KEY" </dev/null >/dev/null || return 1
    # Privilege separation directory, normally made by systemd at boot.
    # Suites run side by side: another may make it between the look and
    # the mkdir.
    if [ "$(id -u)" -eq 0 ] && [ ! -d /run/sshd ]; then
        mkdir -m 0755 /run/sshd 2>/dev/null || [ -d /run/sshd ] || return 1
    fi
}

# sshd_authorize USER: USER may log in with the test key
sshd_authorize() {
    cp "$SSH_PUBKEY" "$SSHD_DIR/authorized_keys/$1" && chmod 0644 "$SSHD_DIR/authorized_keys/$1"
}

sshd_free_port() {
    /usr/bin/python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# sshd_settings: what every private sshd's configuration holds besides its
# address and PID file: the keys of SSHD_DIR, SSHD_USERS by public key only,
# no forwarding, verbose logs.
sshd_settings() {
    cat <<EOF
HostKey $SSHD_DIR/host_ed25519
AuthorizedKeysFile $SSHD_DIR/authorized_keys/%u
AuthorizedPrincipalsFile none
StrictModes no
UsePAM no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
HostbasedAuthentication no
PermitRootLogin prohibit-password
AllowUsers $SSHD_USERS
AllowAgentForwarding no
AllowTcpForwarding no
X11Forwarding no
PermitTunnel no
PrintMotd no
PrintLastLog no
UseDNS no
MaxStartups 100
MaxSessions 20
LogLevel VERBOSE
EOF
}

# sshd_start NAME < EXTRA-CONFIG-LINES
sshd_start() {
    local name=$1 extra waited
    extra=$(cat)
    sshd_stop
    SSHD_CONFIG=$SSHD_DIR/sshd_config.$name
    for _ in 1 2 3 4 5; do
        SSHD_PORT=$(sshd_free_port) || { SSHD_ERROR="could not find a free port"; return 1; }
        cat > "$SSHD_CONFIG" <<EOF
# sshd for the sftp-server tests: $name
Port $SSHD_PORT
ListenAddress 127.0.0.1
PidFile $SSHD_DIR/sshd.pid
$(sshd_settings)
$extra
EOF
        printf '[127.0.0.1]:%s %s\n' "$SSHD_PORT" "$(cut -d' ' -f1,2 "$SSHD_DIR/host_ed25519.pub")" > "$SSH_KNOWN_HOSTS"
        : > "$SSHD_LOG"
        "$SSHD" -D -f "$SSHD_CONFIG" -E "$SSHD_LOG" </dev/null >"$SSHD_DIR/sshd.out" 2>&1 &
        SSHD_PID=$!
        # wait (at most 10 s) for it to listen, or to die
        waited=0
        while [ $waited -lt 100 ]; do
            if grep -q "Server listening on 127.0.0.1 port $SSHD_PORT" "$SSHD_LOG" 2>/dev/null; then
                SSH_OPTS=(-F /dev/null -o "UserKnownHostsFile=$SSH_KNOWN_HOSTS"
                    -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes
                    -o BatchMode=yes -o IdentitiesOnly=yes -o IdentityAgent=none
                    -o PasswordAuthentication=no -o ConnectTimeout=20
                    -o LogLevel=ERROR -o "Port=$SSHD_PORT" -i "$SSH_KEY")
                return 0
            fi
            kill -0 "$SSHD_PID" 2>/dev/null || break
            sleep 0.1
            waited=$((waited + 1))
        done
        if kill -0 "$SSHD_PID" 2>/dev/null; then
            SSHD_ERROR="sshd did not listen within 10 s: $(tail -3 "$SSHD_LOG" "$SSHD_DIR/sshd.out" 2>/dev/null | tr '\n' ' ' | cut -c1-300)"
            sshd_stop
            return 1
        fi
        wait "$SSHD_PID" 2>/dev/null
        SSHD_PID=""
        # a port taken between the probe and the bind: try another one
        if grep -q "Address already in use" "$SSHD_LOG" "$SSHD_DIR/sshd.out" 2>/dev/null; then
            continue
        fi
        SSHD_ERROR="sshd exited: $(cat "$SSHD_LOG" "$SSHD_DIR/sshd.out" 2>/dev/null | tr '\n' ' ' | cut -c1-300)"
        return 1
    done
    SSHD_ERROR="no free port after 5 tries"
    return 1
}

# sshd_stop: stop the listener by its PID (at most 5 s, then SIGKILL)
sshd_stop() {
    local n=0
    [ -n "$SSHD_PID" ] || return 0
    kill "$SSHD_PID" 2>/dev/null
    while kill -0 "$SSHD_PID" 2>/dev/null && [ $n -lt 50 ]; do
        sleep 0.1
        n=$((n + 1))
    done
    kill -9 "$SSHD_PID" 2>/dev/null
    wait "$SSHD_PID" 2>/dev/null
    SSHD_PID=""
}

# sshd_test_user NAME HOME: an unprivileged account that sshd lets in by key
# (created if missing; the shell must exist and the account must not be
# locked: with UsePAM no, sshd refuses a password field starting with "!").
sshd_test_user() {
    local user=$1 home=$2 ent
    add_user "$user" -M -d "$home" -s /bin/sh -p '*' || return 1
    ent=$(getent passwd "$user")
    if [ "$(echo "$ent" | cut -d: -f6)" != "$home" ] || [ "$(echo "$ent" | cut -d: -f7)" != /bin/sh ]; then
        usermod -d "$home" -s /bin/sh "$user" >/dev/null 2>&1 || return 1
    fi
    case $(getent shadow "$user" | cut -d: -f2) in
        '!'*) usermod -p '*' "$user" >/dev/null 2>&1 || return 1 ;;
    esac
}
