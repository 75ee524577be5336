#!/usr/bin/env bash
# Packaging tests, each in a copy of the source tree (so that no build
# artefact lands in the tree itself):
#   1. make install / make uninstall with DESTDIR, PREFIX, libexecdir, mandir:
#      the binary and the manual page, nothing else, and nothing left after;
#   2. reproducible builds: byte-identical binaries from two builds of the
#      same tree, and from two copies at different paths;
#   3. hardening: built with dpkg-buildflags, the binary is PIE, has RELRO,
#      BIND_NOW, the stack protector and fortified functions;
#   4. the Debian package (debian/): dpkg-buildpackage -us -uc -b, lintian
#      (no error or warning), its file list, the same .deb from two copies,
#      and, as root, dpkg -i next to openssh-sftp-server, a transfer through
#      the installed server, then removal with nothing left.
#
# Usage: tests/packaging/run-package.sh
# As root, missing build tools (debhelper devscripts lintian dpkg-dev
# fakeroot) are installed with apt-get. A fast-sftp-server package that is
# already installed is left alone (the install checks are skipped).
#
# Output: "ok - NAME" / "FAIL - NAME: ..." / "skip - NAME: ..." per check,
# then "N passed, M failed[, K skipped]". Exit status 1 if any failed.

set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/lib.sh
. "$HERE/../lib/lib.sh"

PKG=fast-sftp-server
LIBEXEC=/usr/libexec/$PKG

export LC_ALL=C
# from "make check": no make flags or compiler flags of the caller
unset MAKEFLAGS MFLAGS MAKELEVEL CFLAGS CPPFLAGS LDFLAGS DEB_BUILD_OPTIONS
START=$SECONDS

T=$(mktemp -d) || setup_failed "expected mktemp -d to work, got an error"
INSTALLED=""
cleanup() {
    if [ -n "$INSTALLED" ]; then
        dpkg --purge "$PKG" >/dev/null 2>&1
    fi
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# copy_tree DIR: the source tree without build artefacts
copy_tree() {
    mkdir -p "$1" || return 1
    if git -C "$REPO" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        (cd "$REPO" && git ls-files -z --cached --others --exclude-standard) |
            grep -zvE '^debian/(\.debhelper/|'"$PKG"'/|files$|.*\.substvars$|.*\.log$|debhelper-build-stamp$)' |
            (cd "$REPO" && tar --null -T - -cf -) | tar -xf - -C "$1"
    else
        (cd "$REPO" && tar -cf - .) | tar -xf - -C "$1" && make -s -C "$1" clean >/dev/null 2>&1
    fi
}

build() {         # build DIR [MAKE-ARGS]: make clean, make; log in DIR/build.log
    local d=$1
    shift
    make -C "$d" clean >/dev/null 2>&1
    make -C "$d" "$@" sftp-server > "$d/build.log" 2>&1
}

# ---------------------------------------------------------------------------
# 1. make install / uninstall
# ---------------------------------------------------------------------------
A=$T/a/src
if ! copy_tree "$A"; then
    fail "copy of the source tree" "expected a copy in a temporary directory, got an error"
    summary
    exit 1
fi
if ! build "$A"; then
    fail "make" "expected the build to succeed, got: $(tail -5 "$A/build.log" | tr '\n' ' ')"
    summary
    exit 1
fi

files_in() { (cd "$1" && find . \( -type f -o -type l \) -printf '%P %m\n' | sort | tr '\n' ';'); }

D=$T/dest
make -C "$A" install DESTDIR="$D" PREFIX=/usr libexecdir="$LIBEXEC" > "$T/out" 2>&1
RC=$?
check_eq "make install DESTDIR PREFIX=/usr libexecdir: exit status" "0" "$RC"
check_eq "make install: the binary and the manual page, nothing else" \
    "usr/libexec/$PKG/sftp-server 755;usr/share/man/man8/sftp-server.8 644;" "$(files_in "$D")"
if cmp -s "$A/sftp-server" "$D$LIBEXEC/sftp-server"; then
    pass "make install: the installed binary is the one built"
else
    fail "make install: the installed binary is the one built" "expected identical files, got $(cmp "$A/sftp-server" "$D$LIBEXEC/sftp-server" 2>&1)"
fi
make -C "$A" uninstall DESTDIR="$D" PREFIX=/usr libexecdir="$LIBEXEC" > "$T/out" 2>&1
RC=$?
check_eq "make uninstall: exit status" "0" "$RC"
check_eq "make uninstall: no file left" "" "$(files_in "$D")"

D=$T/dest-default
make -C "$A" install DESTDIR="$D" > "$T/out" 2>&1
check_eq "make install with the default PREFIX" \
    "usr/local/libexec/sftp-server 755;usr/local/share/man/man8/sftp-server.8 644;" "$(files_in "$D")"
make -C "$A" uninstall DESTDIR="$D" > "$T/out" 2>&1
check_eq "make uninstall with the default PREFIX" "" "$(files_in "$D")"

D=$T/dest-mandir
make -C "$A" install DESTDIR="$D" PREFIX=/opt/x mandir=/opt/man > "$T/out" 2>&1
check_eq "make install with PREFIX and mandir" \
    "opt/man/man8/sftp-server.8 644;opt/x/libexec/sftp-server 755;" "$(files_in "$D")"
make -C "$A" uninstall DESTDIR="$D" PREFIX=/opt/x mandir=/opt/man > "$T/out" 2>&1
check_eq "make uninstall with PREFIX and mandir" "" "$(files_in "$D")"

# ---------------------------------------------------------------------------
# 2. reproducible builds
# ---------------------------------------------------------------------------
B=$T/b/elsewhere/src
copy_tree "$B"
sum() { sha256sum "$1" 2>/dev/null | cut -c1-16; }

S1=$(sum "$A/sftp-server")
build "$A"
check_eq "reproducible: same tree built twice (make clean between)" "$S1" "$(sum "$A/sftp-server")"
build "$B"
if [ "$S1" = "$(sum "$B/sftp-server")" ]; then
    pass "reproducible: two copies at different paths, default flags"
else
    fail "reproducible: two copies at different paths, default flags" \
        "expected identical binaries, got $S1 and $(sum "$B/sftp-server") (the build directory is in the debug info: -ffile-prefix-map=\$(CURDIR)=. is needed)"
fi

HAVE_BUILDFLAGS=""
if command -v dpkg-buildflags >/dev/null 2>&1; then
    HAVE_BUILDFLAGS=1
fi
# dpkg_flags DIR: the distribution's hardened flags for a build in DIR
dpkg_flags() {
    (cd "$1" && DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get "$2")
}
build_dpkg() {
    build "$1" CFLAGS="$(dpkg_flags "$1" CFLAGS)" CPPFLAGS="$(dpkg_flags "$1" CPPFLAGS)" \
        LDFLAGS="$(dpkg_flags "$1" LDFLAGS)"
}
if [ -n "$HAVE_BUILDFLAGS" ]; then
    build_dpkg "$A"
    build_dpkg "$B"
    check_eq "reproducible: two copies at different paths, dpkg-buildflags" \
        "$(sum "$A/sftp-server")" "$(sum "$B/sftp-server")"
else
    skip "reproducible with dpkg-buildflags" "no dpkg-buildflags (dpkg-dev)"
fi

# ---------------------------------------------------------------------------
# 3. hardening with dpkg-buildflags
# ---------------------------------------------------------------------------
# readelf_hardening BINARY: the hardening features found, one word each
readelf_hardening() {
    local f=$1 out=""
    readelf -hW "$f" | grep -q 'Type:.*DYN' && readelf -dW "$f" | grep -q 'FLAGS_1.*PIE' && out="$out pie"
    readelf -lW "$f" | grep -q GNU_RELRO && out="$out relro"
    readelf -dW "$f" | grep -qE 'BIND_NOW|FLAGS_1.*NOW' && out="$out bindnow"
    readelf --dyn-syms -W "$f" | grep -q '__stack_chk_fail' && out="$out stackprotector"
    readelf --dyn-syms -W "$f" | grep -qE '__[a-z_]+_chk(@|$)' && out="$out fortify"
    echo "${out# }"
}
# hardening NAME BINARY
hardening() {
    local name=$1 f=$2 got
    if command -v hardening-check >/dev/null 2>&1; then
        hardening-check "$f" > "$T/hc.out" 2>&1
        got=""
        grep -q 'Position Independent Executable: yes' "$T/hc.out" && got="$got pie"
        grep -q 'Read-only relocations: yes' "$T/hc.out" && got="$got relro"
        grep -q 'Immediate binding: yes' "$T/hc.out" && got="$got bindnow"
        grep -q 'Stack protected: yes' "$T/hc.out" && got="$got stackprotector"
        grep -q 'Fortify Source functions: yes' "$T/hc.out" && got="$got fortify"
        check_eq "$name (hardening-check)" "pie relro bindnow stackprotector fortify" "${got# }"
    fi
    if command -v readelf >/dev/null 2>&1; then
        check_eq "$name (readelf)" "pie relro bindnow stackprotector fortify" "$(readelf_hardening "$f")"
    else
        skip "$name (readelf)" "no readelf (binutils)"
    fi
}
if [ -n "$HAVE_BUILDFLAGS" ]; then
    hardening "hardening: built with dpkg-buildflags" "$A/sftp-server"
fi

# ---------------------------------------------------------------------------
# 4. the Debian package
# ---------------------------------------------------------------------------
TOOLS="dpkg-buildpackage:dpkg-dev dh:debhelper lintian:lintian fakeroot:fakeroot hardening-check:devscripts"
missing_pkgs() {
    local t
    for t in $TOOLS; do
        command -v "${t%%:*}" >/dev/null 2>&1 || printf '%s ' "${t#*:}"
    done
}
MISSING=$(missing_pkgs)
if [ -n "$MISSING" ] && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "# installing $MISSING"
    # shellcheck disable=SC2086
    if ! DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y --no-install-recommends $MISSING > "$T/apt.log" 2>&1; then
        timeout 300 apt-get update > "$T/apt.log" 2>&1
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y --no-install-recommends $MISSING >> "$T/apt.log" 2>&1
    fi
    MISSING=$(missing_pkgs)
fi

package_tests() {
    local version deb changes P1 P2 f want got
    if [ -n "$MISSING" ]; then
        skip "Debian package" "missing build tools: $MISSING"
        return
    fi
    version=$(dpkg-parsechangelog -l "$REPO/debian/changelog" -S Version 2>/dev/null)
    if [ -z "$version" ]; then
        fail "debian/changelog" "expected a version, got none"
        return
    fi
    P1=$T/p1/$PKG-$version
    P2=$T/p2/other/$PKG-$version
    copy_tree "$P1" && copy_tree "$P2"
    (cd "$P1" && timeout 300 dpkg-buildpackage -us -uc -b) > "$T/p1.log" 2>&1
    RC=$?
    if [ "$RC" -ne 0 ]; then
        fail "dpkg-buildpackage -us -uc -b" "expected exit status 0, got $RC: $(tail -5 "$T/p1.log" | tr '\n' ' ')"
        return
    fi
    pass "dpkg-buildpackage -us -uc -b"
    deb=$(ls "$T/p1/${PKG}_${version}_"*.deb 2>/dev/null | head -1)
    changes=$(ls "$T/p1/${PKG}_${version}_"*.changes 2>/dev/null | head -1)
    if [ -z "$deb" ] || [ -z "$changes" ]; then
        fail "package files" "expected ${PKG}_${version}_ARCH.deb and .changes, got $(ls "$T/p1" | tr '\n' ' ')"
        return
    fi
    # P2 is an untouched copy: every file of it is still in P1
    got=$(cd "$P2" && find . -type f | while IFS= read -r f; do [ -e "$P1/$f" ] || echo "$f"; done | head -3 | tr '\n' ' ')
    check_eq "package build: debian/rules clean keeps the sources" "" "$got"

    # lintian: errors and warnings fail, the rest is shown
    timeout 300 lintian --info --pedantic "$changes" > "$T/lintian.out" 2>&1
    sed -n 's/^\([EWIPX]\): /# lintian \1: /p' "$T/lintian.out"
    got=$(grep -E '^[EW]: ' "$T/lintian.out" | head -5 | tr '\n' ' ')
    check_eq "lintian: no error and no warning" "" "$got"

    # contents
    want="./usr/libexec/$PKG/sftp-server 755;./usr/share/doc/$PKG/README.Debian 644;./usr/share/doc/$PKG/changelog.gz 644;./usr/share/doc/$PKG/copyright 644;./usr/share/lintian/overrides/$PKG 644;./usr/share/man/man8/$PKG.8.gz 644;"
    got=$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { m = 0; p = substr($1, 2); for (i = 0; i < 9; i++) { c = substr(p, i + 1, 1); if (c != "-") m += 2 ^ (8 - i) } printf "%s %o\n", $NF, m }' | sort | tr '\n' ';')
    check_eq "package contents" "$want" "$got"
    dpkg-deb -x "$deb" "$T/unpacked"
    hardening "hardening: the packaged binary" "$T/unpacked$LIBEXEC/sftp-server"
    if zcat "$T/unpacked/usr/share/man/man8/$PKG.8.gz" | grep -q "^\.Nm $PKG\$" &&
        ! zcat "$T/unpacked/usr/share/man/man8/$PKG.8.gz" | grep -q /usr/local/libexec; then
        pass "packaged manual page: named $PKG, examples with $LIBEXEC"
    else
        fail "packaged manual page: named $PKG, examples with $LIBEXEC" "expected .Nm $PKG and no /usr/local/libexec, got $(zcat "$T/unpacked/usr/share/man/man8/$PKG.8.gz" | grep -E '^\.Nm|/usr/local' | head -3 | tr '\n' ' ')"
    fi
    check_eq "package: architecture-dependent, depends on libc" "yes" \
        "$(dpkg-deb -f "$deb" Depends | grep -q 'libc6' && echo yes)"

    # the same package from a copy at another path
    (cd "$P2" && timeout 300 dpkg-buildpackage -us -uc -b) > "$T/p2.log" 2>&1
    RC=$?
    if [ "$RC" -eq 0 ] && cmp -s "$deb" "$T/p2/other/$(basename "$deb")"; then
        pass "reproducible: the same .deb from a copy at another path"
    else
        fail "reproducible: the same .deb from a copy at another path" \
            "expected identical .deb files, got exit $RC, $(cmp "$deb" "$T/p2/other/$(basename "$deb")" 2>&1 | head -1)"
    fi

    install_tests "$deb"
}

install_tests() {
    local deb=$1 f left
    if [ "$(id -u)" -ne 0 ]; then
        skip "dpkg -i" "not root"
        return
    fi
    if dpkg-query -W -f '${Status}' "$PKG" 2>/dev/null | grep -q 'installed$'; then
        skip "dpkg -i" "$PKG is already installed on this machine: left alone"
        return
    fi
    INSTALLED=1
    dpkg -i "$deb" > "$T/dpkg.log" 2>&1
    RC=$?
    check_eq "dpkg -i: exit status" "0" "$RC"
    [ "$RC" -eq 0 ] || { oneline "$T/dpkg.log"; echo; return; }
    dpkg -L "$PKG" | sort > "$T/files"
    left=""
    while IFS= read -r f; do
        [ -f "$f" ] && left="$left $f"
    done < "$T/files"
    check_eq "dpkg -i: the package's files" \
        " $LIBEXEC/sftp-server /usr/share/doc/$PKG/README.Debian /usr/share/doc/$PKG/changelog.gz /usr/share/doc/$PKG/copyright /usr/share/lintian/overrides/$PKG /usr/share/man/man8/$PKG.8.gz" "$left"
    if dpkg-query -W -f '${Status}' openssh-sftp-server 2>/dev/null | grep -q 'installed$'; then
        check_eq "openssh-sftp-server still owns sftp-server(8) and its server" \
            "openssh-sftp-server openssh-sftp-server" \
            "$(dpkg -S /usr/share/man/man8/sftp-server.8.gz 2>/dev/null | cut -d: -f1) $(dpkg -S /usr/lib/openssh/sftp-server 2>/dev/null | cut -d: -f1)"
    fi
    if command -v sftp >/dev/null 2>&1; then
        mkdir "$T/run"
        head -c 1000003 /dev/urandom > "$T/run/orig"
        printf 'put orig copy\nget copy back\n' > "$T/run/batch"
        (cd "$T/run" && timeout 60 sftp -q -b batch -D "$LIBEXEC/sftp-server" > out 2> err < /dev/null)
        if cmp -s "$T/run/orig" "$T/run/copy" && cmp -s "$T/run/orig" "$T/run/back"; then
            pass "the installed server: put and get through sftp -D"
        else
            fail "the installed server: put and get through sftp -D" "expected copy and back identical to orig, got $(oneline "$T/run/err")"
        fi
    fi
    dpkg -r "$PKG" > "$T/dpkg.log" 2>&1
    RC=$?
    check_eq "dpkg -r: exit status" "0" "$RC"
    dpkg --purge "$PKG" > "$T/dpkg.log" 2>&1
    left=""
    while IFS= read -r f; do
        [ -f "$f" ] || [ -L "$f" ] && left="$left $f"
    done < "$T/files"
    [ -d "$LIBEXEC" ] && left="$left $LIBEXEC/"
    check_eq "dpkg -r/--purge: no file left" "" "$left"
    check_eq "dpkg --purge: the package is gone" "" \
        "$(dpkg-query -W -f '${Status}' "$PKG" 2>/dev/null | grep -v 'not-installed')"
    INSTALLED=""
}
package_tests

printf '# %d s\n' $((SECONDS - START))
summary
