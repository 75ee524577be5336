#!/usr/bin/env bash
# Packaging tests, each in a copy of the source tree (so that no build
# artefact lands in the tree itself):
#   1. make install / make uninstall with DESTDIR, PREFIX, libexecdir, mandir:
#      the binary and the manual page, nothing else, and nothing left after;
#   2. reproducible builds: byte-identical binaries from two builds of the
#      same tree, and from two copies at different paths;
#   3. hardening: built with dpkg-buildflags, the binary is PIE, has RELRO,
#      BIND_NOW, the stack protector and fortified functions;
#   4. the Debian package (debian/): dpkg-buildpackage -us -uc -b, whose
#      dh_auto_test runs the unit tests and the protocol suites (make
#      check-build), lintian (no error or warning), its file list, the same
#      .deb from two copies (the second built with nocheck), and, as root,
#      dpkg -i next to openssh-sftp-server, a transfer through the installed
#      server, then removal with nothing left;
#   5. a cross build, dpkg-buildpackage -a armhf: an armhf package, clean
#      for lintian, whose server passes the raw protocol suite under
#      qemu-arm-static;
#   6. with AUTOPKGTEST=1, as root: autopkgtest of the package with the
#      null runner (debian/tests: the client and sshd suites against the
#      installed server), about a minute and a half; then the package is
#      purged;
#   7. the RPM (rpm/fast-sftp-server.spec) with rpmbuild -ba (Debian's rpm,
#      --nodeps: there is no RPM database of what is installed): %check
#      runs make check-build (its raw suite: the Debian build ran the
#      others), and the package holds the server, the manual
#      page, the licence and the README, nothing else.
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
# The unit tests that dh_auto_test runs (from the Makefile).
UNIT_TESTS=${UNIT_TESTS:-$(cd "$REPO" && ls tests/unit/test_*.c | sed 's/\.c$//')}

export LC_ALL=C
# from "make check": no make flags or compiler flags of the caller
unset MAKEFLAGS MFLAGS MAKELEVEL CFLAGS CPPFLAGS LDFLAGS DEB_BUILD_OPTIONS
START=$SECONDS

T=$(mktemp -d) || setup_failed "expected mktemp -d to work, got an error"
# The package builds' tests run sessions as other users (nobody, a test
# user), who must reach the server built in here.
chmod 0755 "$T"
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

# make deps and make test-deps on a machine that has every package: neither
# apt-get nor dpkg runs (as root with another apt running, apt-get would fail
# on the dpkg lock).
for target in deps test-deps; do
    out=$(make -s -C "$A" "$target" SUDO=false APT_GET=false 2>&1)
    RC=$?
    case $out in
    *"not installed:"*)
        skip "make $target with every package installed" "this machine lacks some: $out" ;;
    *)
        check_eq "make $target with every package installed: no apt-get" \
            "0 $target: every package is installed" "$RC $out" ;;
    esac
done

# What the packages install: the manual renamed, its examples naming the
# installed server.
D=$T/dest-manname
make -C "$A" install DESTDIR="$D" PREFIX=/usr libexecdir="$LIBEXEC" \
    MANNAME="$PKG" > "$T/out" 2>&1
check_eq "make install MANNAME: the manual under that name" \
    "usr/libexec/$PKG/sftp-server 755;usr/share/man/man8/$PKG.8 644;" "$(files_in "$D")"
check_eq "make install MANNAME: .Nm and the examples' path" \
    ".Nm $PKG;Subsystem sftp $LIBEXEC/sftp-server" \
    "$(grep -m1 '^\.Nm' "$D/usr/share/man/man8/$PKG.8");$(grep -m1 -o "Subsystem sftp [^ ]*" "$D/usr/share/man/man8/$PKG.8")"
make -C "$A" uninstall DESTDIR="$D" PREFIX=/usr libexecdir="$LIBEXEC" \
    MANNAME="$PKG" > "$T/out" 2>&1
check_eq "make uninstall MANNAME" "" "$(files_in "$D")"

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
    # dh_auto_test: the unit tests and the suites, each with its closing line
    got=$(grep -cE '^\[  PASSED  \] [0-9]+ test' "$T/p1.log")
    check_eq "dh_auto_test: every unit test binary passed" "$(echo "$UNIT_TESTS" | wc -w)" "$got"
    check_grep "dh_auto_test: the protocol suites passed (make check-build)" '^[1-9][0-9]* passed, 0 failed' "$T/p1.log"
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
    (cd "$P2" && DEB_BUILD_OPTIONS=nocheck timeout 300 dpkg-buildpackage -us -uc -b) > "$T/p2.log" 2>&1
    RC=$?
    if [ "$RC" -eq 0 ] && cmp -s "$deb" "$T/p2/other/$(basename "$deb")"; then
        pass "reproducible: the same .deb from a copy at another path"
    else
        fail "reproducible: the same .deb from a copy at another path" \
            "expected identical .deb files, got exit $RC, $(cmp "$deb" "$T/p2/other/$(basename "$deb")" 2>&1 | head -1)"
    fi

    install_tests "$deb"
    autopkgtest_tests "$deb" "$P1"
}

# installed_here: the package is installed on this machine already
installed_here() {
    dpkg-query -W -f '${Status}' "$PKG" 2>/dev/null | grep -q 'installed$'
}

install_tests() {
    local deb=$1 f left
    if [ "$(id -u)" -ne 0 ]; then
        skip "dpkg -i" "not root"
        return
    fi
    if installed_here; then
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
autopkgtest_tests() {
    local deb=$1 src=$2
    if [ "${AUTOPKGTEST:-}" != 1 ]; then
        skip "autopkgtest" "AUTOPKGTEST=1 runs it (about 90 s; as root, installs the package with the null runner)"
        return
    fi
    if [ "$(id -u)" -ne 0 ] || ! command -v autopkgtest >/dev/null 2>&1; then
        skip "autopkgtest" "needs root and autopkgtest"
        return
    fi
    if installed_here; then
        skip "autopkgtest" "$PKG is already installed on this machine: left alone"
        return
    fi
    INSTALLED=1
    timeout 900 autopkgtest --no-built-binaries "$deb" "$src/" -- null > "$T/autopkgtest.log" 2>&1
    RC=$?
    grep -E '^   [a-z-]+: |^(FAIL|skip) ' "$T/autopkgtest.log" | sed 's/^/# autopkgtest: /'
    check_eq "autopkgtest -- null: exit status" "0" "$RC"
    check_grep "autopkgtest: installed-server PASS" '^installed-server +PASS' "$T/autopkgtest.log"
    check_grep "autopkgtest: the suites' total" '^[1-9][0-9]* passed, 0 failed' "$T/autopkgtest.log"
    dpkg --purge "$PKG" > "$T/dpkg.log" 2>&1
    INSTALLED=""
}

# 5. dpkg-buildpackage -a armhf with Debian's cross toolchain
cross_tests() {
    local P version deb
    if [ -n "$MISSING" ]; then
        return
    fi
    if ! command -v arm-linux-gnueabihf-gcc >/dev/null 2>&1; then
        skip "cross build -a armhf" "no arm-linux-gnueabihf-gcc (Debian: crossbuild-essential-armhf)"
        return
    fi
    if ! (cd "$REPO" && dpkg-checkbuilddeps -a armhf) > "$T/cross-deps.log" 2>&1; then
        skip "cross build -a armhf" "build dependencies for armhf missing: $(oneline "$T/cross-deps.log")"
        return
    fi
    version=$(dpkg-parsechangelog -l "$REPO/debian/changelog" -S Version 2>/dev/null)
    P=$T/px/$PKG-$version
    copy_tree "$P"
    (cd "$P" && timeout 300 dpkg-buildpackage -a armhf -us -uc -b) > "$T/px.log" 2>&1
    RC=$?
    if [ "$RC" -ne 0 ]; then
        fail "dpkg-buildpackage -a armhf -us -uc -b" "expected exit status 0, got $RC: $(tail -5 "$T/px.log" | tr '\n' ' ')"
        return
    fi
    pass "dpkg-buildpackage -a armhf -us -uc -b"
    deb=$T/px/${PKG}_${version}_armhf.deb
    check_eq "cross build: an armhf package that depends on libc6" "armhf yes" \
        "$(dpkg-deb -f "$deb" Architecture 2>&1) $(dpkg-deb -f "$deb" Depends | grep -q libc6 && echo yes)"
    dpkg-deb -x "$deb" "$T/px/unpacked"
    check_eq "cross build: the server is an ARM binary" "ARM" \
        "$(readelf -hW "$T/px/unpacked$LIBEXEC/sftp-server" 2>&1 | sed -n 's/^ *Machine: *//p')"
    timeout 300 lintian --pedantic "$T/px/${PKG}_${version}_armhf.changes" > "$T/lintian-x.out" 2>&1
    check_eq "cross build: lintian, no error and no warning" "" "$(grep -E '^[EW]: ' "$T/lintian-x.out" | head -5 | tr '\n' ' ')"
    if ! command -v qemu-arm-static >/dev/null 2>&1 || [ ! -e /lib/ld-linux-armhf.so.3 ]; then
        skip "cross build: the armhf server under qemu" "needs qemu-arm-static and libc6:armhf (make test-deps)"
        return
    fi
    printf '#!/bin/sh\nexec qemu-arm-static %s "$@"\n' "$T/px/unpacked$LIBEXEC/sftp-server" > "$T/px/server"
    chmod 0755 "$T/px/server"
    SFTP_EMULATED=qemu-arm-static SFTP_SERVER=$T/px/server timeout 300 /usr/bin/python3 "$REPO/tests/protocol/test_raw.py" > "$T/px-raw.out" 2>&1
    RC=$?
    check_eq "cross build: the packaged armhf server passes test_raw.py under qemu ($(closing_line "$(cat "$T/px-raw.out")"))" "0" "$RC"
}

# 7. the RPM, with Debian's rpmbuild
rpm_tests() {
    local version src top rpmfile got want
    if ! command -v rpmbuild >/dev/null 2>&1; then
        skip "rpmbuild" "no rpmbuild (Debian: rpm)"
        return
    fi
    version=$(sed -n 's/^Version: *//p' "$REPO/rpm/$PKG.spec")
    top=$T/rpm
    src=$top/src/$PKG-$version
    mkdir -p "$top/SOURCES"
    copy_tree "$src"
    tar -C "$top/src" -czf "$top/SOURCES/$PKG-$version.tar.gz" "$PKG-$version"
    # %check runs make check-build: the Debian build above ran its suites
    # on the same sources, so here the raw suite alone shows that it runs.
    CHECK_BUILD_SUITES=raw timeout 600 rpmbuild -ba --nodeps --define "_topdir $top" "$REPO/rpm/$PKG.spec" > "$T/rpm.log" 2>&1
    RC=$?
    if [ "$RC" -ne 0 ]; then
        fail "rpmbuild -ba rpm/$PKG.spec" "expected exit status 0, got $RC: $(tail -5 "$T/rpm.log" | tr '\n' ' ')"
        return
    fi
    pass "rpmbuild -ba rpm/$PKG.spec"
    check_grep "rpm %check: the protocol suites passed (make check-build)" '^[1-9][0-9]* passed, 0 failed' "$T/rpm.log"
    rpmfile=$(ls "$top"/RPMS/*/"$PKG-$version"-*.rpm 2>/dev/null | head -1)
    if [ -z "$rpmfile" ]; then
        fail "rpm file" "expected RPMS/ARCH/$PKG-$version-*.rpm, got $(find "$top/RPMS" -type f | tr '\n' ' ')"
        return
    fi
    # the files and their modes, less build-id links and the version in
    # the doc and licence directories (which rpm's macros set per system)
    got=$(rpm -qp --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$rpmfile" 2>/dev/null |
        grep -v '^[^ ]* /usr/lib/\.build-id' |
        sed -E "s|/$PKG-$version/|/$PKG/|; s|/$PKG-$version\$|/$PKG|; s|\.gz\$||" | sort | tr '\n' ';')
    want="-rw-r--r-- /usr/share/doc/$PKG/README.md;-rw-r--r-- /usr/share/licenses/$PKG/LICENSE;-rw-r--r-- /usr/share/man/man8/$PKG.8;-rwxr-xr-x $LIBEXEC/sftp-server;drwxr-xr-x $LIBEXEC;drwxr-xr-x /usr/share/doc/$PKG;drwxr-xr-x /usr/share/licenses/$PKG;"
    check_eq "rpm: the server, its manual page, the licence and the README" "$want" "$got"
    mkdir -p "$top/x"
    rpm2archive - < "$rpmfile" | tar -xzf - -C "$top/x"
    if [ "$("$top/x$LIBEXEC/sftp-server" -Q requests 2>/dev/null | head -1)" = open ]; then
        pass "rpm: the packaged server runs"
    else
        fail "rpm: the packaged server runs" "expected sftp-server -Q requests to start with open, got $("$top/x$LIBEXEC/sftp-server" -Q requests 2>&1 | head -2 | tr '\n' ' ')"
    fi
    if grep -q "^\.Nm $PKG\$" "$top/x/usr/share/man/man8/$PKG.8" 2>/dev/null ||
        zcat "$top/x/usr/share/man/man8/$PKG.8.gz" 2>/dev/null | grep -q "^\.Nm $PKG\$"; then
        pass "rpm: the manual page is $PKG(8)"
    else
        fail "rpm: the manual page is $PKG(8)" "expected .Nm $PKG in usr/share/man/man8/$PKG.8"
    fi
}

package_tests
cross_tests
rpm_tests

printf '# %d s\n' $((SECONDS - START))
summary
