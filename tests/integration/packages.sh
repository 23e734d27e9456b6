#!/bin/bash
# packages.sh — the Debian packages (issue #11; README.md, "Installing from
# packages"): builds cryptoserver-broker, libcryptoserver-pkcs11 and
# cryptoserver-tools with `dpkg-buildpackage -b -us -uc` from the
# distribution files (make distdir, into this test's work folder: the source
# and build trees are not touched), then checks, without installing anything
# and without starting any system service:
#   - each package's files (dpkg-deb -c): daemon, drivers, unit, sysusers.d,
#     conffile; the module in the multiarch pkcs11/ directory and its p11-kit
#     .module where p11-kit looks (its own pkg-config variables); admin, bench;
#     every man page; no libtool archive; no file in two packages;
#   - the unit: its hardening settings, `systemd-analyze verify` and
#     `systemd-analyze security --offline` (exposure at most 2.0);
#   - the default /etc/cryptoserver/broker.conf listens on loopback only;
#   - p11-kit and a pkcs11: URI find the module as installed (the packaged
#     directories bind-mounted over the system's in a private mount
#     namespace);
#   - the packaged programs work together: extracted with dpkg-deb -x into a
#     temporary root, the packaged cryptoserver-admin makes a deployment, the
#     packaged broker runs the packaged broker.conf (its state directory moved
#     to the work folder, a free port), and pkcs11-tool loads the packaged
#     module and signs with a key imported by the packaged admin (verified by
#     openssl with the PEM the test made); the packaged `cryptoserver-admin
#     status` shows it.
#
# Slow (a full package build: about a minute on 2 cores): make check runs it
# only with CS_PACKAGES=1 (tools/check.sh sets it in a step of its own).
. "$(dirname "$0")/lib.sh"

cs_require dpkg-buildpackage dpkg-deb dpkg-architecture dh fakeroot systemd-analyze pkg-config \
    pkcs11-tool openssl
trap cs_cleanup EXIT
rm -rf "$WORK"
mkdir -p "$WORK/pkg" "$WORK/tmp"
T=$WORK/tmp

VERSION=$(sed -n 's/^PACKAGE_VERSION = //p' "$top_builddir/Makefile")
[ -n "$VERSION" ] || cs_fail "no PACKAGE_VERSION in $top_builddir/Makefile"
TRIPLET=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
ARCH=$(dpkg-architecture -qDEB_HOST_ARCH)
SRC=$WORK/pkg/cryptoserver-$VERSION

# ---- build --------------------------------------------------------------------
# The files `make dist` would pack, without the tarball; a make of its own
# (not the jobserver of the make check that runs this test).
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$top_builddir" distdir \
    distdir="$SRC" top_distdir="$SRC" > "$T/distdir.log" 2>&1 \
    || { cat "$T/distdir.log"; cs_fail "make distdir failed"; }
[ -x "$SRC/debian/rules" ] || cs_fail "the distribution has no executable debian/rules"
started=$(date +%s)
build () {
    cd "$SRC" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
        DEB_BUILD_OPTIONS="nocheck noautodbgsym parallel=2" nice dpkg-buildpackage -b -us -uc
}
cs_run_bounded $((900 * CS_TIME_FACTOR)) "$WORK/dpkg-buildpackage.log" build \
    || { tail -n 40 "$WORK/dpkg-buildpackage.log"; cs_fail "dpkg-buildpackage -b -us -uc failed (log: $WORK/dpkg-buildpackage.log)"; }
cs_log "dpkg-buildpackage -b -us -uc: $(( $(date +%s) - started )) s"
# The build tree is of no further use (the packages are beside it), and the
# EXIT trap would take its sources that name PEM markers for leaked keys.
rm -rf "$SRC"
BROKER_DEB=$WORK/pkg/cryptoserver-broker_${VERSION}_$ARCH.deb
MODULE_DEB=$WORK/pkg/libcryptoserver-pkcs11_${VERSION}_$ARCH.deb
TOOLS_DEB=$WORK/pkg/cryptoserver-tools_${VERSION}_$ARCH.deb
for deb in "$BROKER_DEB" "$MODULE_DEB" "$TOOLS_DEB"; do
    [ -f "$deb" ] || cs_fail "no $(basename "$deb") (built: $(ls "$WORK/pkg"/*.deb 2>/dev/null | xargs -n1 basename | tr '\n' ' '))"
done

# ---- contents -----------------------------------------------------------------
# contents DEB: its file paths, one a line, without the leading "."
contents () { dpkg-deb -c "$1" | awk '{ print $6 }' | sed 's|^\.||'; }
# expect_files DEB PATH...: each PATH is a file of DEB.
expect_files () {
    local deb=$1 path
    shift
    contents "$deb" > "$T/contents"
    for path in "$@"; do
        grep -qx -- "$path" "$T/contents" || { cat "$T/contents"; cs_fail "$(basename "$deb") has no $path"; }
    done
}
expect_files "$BROKER_DEB" /usr/sbin/cryptoserver-broker \
    "/usr/lib/$TRIPLET/cryptoserver/drivers/pkcs11.so" "/usr/lib/$TRIPLET/cryptoserver/drivers/openssl.so" \
    "/usr/lib/$TRIPLET/cryptoserver/drivers/gmp.so" "/usr/lib/$TRIPLET/cryptoserver/drivers/sim.so" \
    /lib/systemd/system/cryptoserver-broker.service /usr/lib/sysusers.d/cryptoserver-broker.conf \
    /etc/cryptoserver/broker.conf /var/lib/cryptoserver/ \
    /usr/share/man/man8/cryptoserver-broker.8.gz /usr/share/man/man5/cryptoserver-broker.conf.5.gz \
    /usr/share/man/man5/cryptoserver-keystore.5.gz /usr/share/man/man5/cryptoserver-audit.5.gz \
    /usr/share/cryptoserver/monitoring/cryptoserver.rules.yml \
    /usr/share/cryptoserver/monitoring/cryptoserver-dashboard.json
expect_files "$MODULE_DEB" "/usr/lib/$TRIPLET/pkcs11/cryptoserver-pkcs11.so" \
    /usr/share/p11-kit/modules/cryptoserver.module \
    /usr/share/man/man7/cryptoserver-pkcs11.7.gz /usr/share/man/man5/cryptoserver-client.conf.5.gz \
    /usr/include/cryptoserver/pkcs11v.h
expect_files "$TOOLS_DEB" /usr/bin/cryptoserver-admin /usr/bin/cryptoserver-bench /usr/bin/cryptoserver-modexp \
    /usr/bin/cryptoserver-p11 \
    /usr/share/man/man1/cryptoserver-admin.1.gz /usr/share/man/man1/cryptoserver-bench.1.gz \
    /usr/share/man/man1/cryptoserver-modexp.1.gz /usr/share/man/man1/cryptoserver-p11.1.gz
for deb in "$BROKER_DEB" "$MODULE_DEB" "$TOOLS_DEB"; do
    contents "$deb" | grep -v '/$' | sed "s|^|$(basename "$deb") |"
done > "$T/all-files"
! grep -q '\.la$' "$T/all-files" || cs_fail "libtool archives in the packages: $(grep '\.la$' "$T/all-files")"
dups=$(awk '{ print $2 }' "$T/all-files" | sort | uniq -d)
[ -z "$dups" ] || cs_fail "files in two packages: $dups"
cs_log "contents: $(wc -l < "$T/all-files") files where they belong (daemon, 4 drivers, unit, sysusers.d, conffile; module, .module, pkcs11v.h; admin, bench, modexp; 8 man pages)"

dpkg-deb -e "$BROKER_DEB" "$T/broker-control"
grep -qx /etc/cryptoserver/broker.conf "$T/broker-control/conffiles" \
    || cs_fail "/etc/cryptoserver/broker.conf is not a conffile"
grep -q 'systemd-sysusers.*cryptoserver-broker.conf\|adduser --system' "$T/broker-control/postinst" \
    || cs_fail "the broker's postinst does not create its system user"
dpkg-deb -f "$MODULE_DEB" Multi-Arch | grep -qx same || cs_fail "libcryptoserver-pkcs11 is not Multi-Arch: same"

# p11-kit finds the module after install: the .module names it by file name
# only, which p11-kit resolves in its module path, and lies in p11-kit's
# directory of package module configs (p11-kit-1.pc says where both are).
ROOT=$WORK/root
mkdir -p "$ROOT"
for deb in "$BROKER_DEB" "$MODULE_DEB" "$TOOLS_DEB"; do dpkg-deb -x "$deb" "$ROOT"; done
p11_path=$(pkg-config --variable=p11_module_path p11-kit-1)
p11_configs=$(pkg-config --variable=p11_module_configs p11-kit-1)
[ "$p11_path" = "/usr/lib/$TRIPLET/pkcs11" ] \
    || cs_fail "p11-kit loads modules from $p11_path, the package installs into /usr/lib/$TRIPLET/pkcs11"
[ "$p11_configs" = /usr/share/p11-kit/modules ] \
    || cs_fail "p11-kit reads package module configs from $p11_configs, not /usr/share/p11-kit/modules"
grep -qx 'module: cryptoserver-pkcs11.so' "$ROOT/usr/share/p11-kit/modules/cryptoserver.module" \
    || cs_fail "cryptoserver.module does not name the module as p11-kit resolves it: $(cat "$ROOT/usr/share/p11-kit/modules/cryptoserver.module")"
cs_log "p11-kit: $p11_configs/cryptoserver.module -> $p11_path/cryptoserver-pkcs11.so"

# ---- the unit -----------------------------------------------------------------
UNIT=$ROOT/lib/systemd/system/cryptoserver-broker.service
for setting in 'User=cryptoserver' 'StateDirectory=cryptoserver' 'ProtectSystem=strict' \
               'NoNewPrivileges=yes' 'PrivateTmp=yes' 'ProtectHome=yes' \
               'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6' 'CapabilityBoundingSet=' \
               'MemoryDenyWriteExecute=yes' 'LockPersonality=yes' 'SystemCallFilter=@system-service' \
               'ExecStart=/usr/sbin/cryptoserver-broker --config /etc/cryptoserver/broker.conf --foreground'; do
    grep -qx -- "$setting" "$UNIT" || cs_fail "the unit has no line '$setting'"
done
memlock=$(sed -n 's/^LimitMEMLOCK=\([0-9]*\)M$/\1/p' "$UNIT")
[ -n "$memlock" ] && [ "$memlock" -ge 16 ] || cs_fail "LimitMEMLOCK is not at least 16M: $(grep LimitMEMLOCK "$UNIT")"
grep -q '^u cryptoserver ' "$ROOT/usr/lib/sysusers.d/cryptoserver-broker.conf" \
    || cs_fail "sysusers.d does not make user cryptoserver"
# systemd-analyze checks that ExecStart's program exists: the unit as it is,
# but run from the extracted root.
sed "s|=/usr/sbin/cryptoserver-broker |=$ROOT/usr/sbin/cryptoserver-broker |" "$UNIT" \
    > "$T/cryptoserver-broker.service"
systemd-analyze verify --man=no "$T/cryptoserver-broker.service" > "$T/verify.out" 2>&1 \
    || { cat "$T/verify.out"; cs_fail "systemd-analyze verify rejects the unit"; }
[ ! -s "$T/verify.out" ] || { cat "$T/verify.out"; cs_fail "systemd-analyze verify has remarks on the unit"; }
systemd-analyze security --offline=yes --threshold=20 "$T/cryptoserver-broker.service" > "$T/security.out" 2>&1 \
    || { cat "$T/security.out"; cs_fail "systemd-analyze security: exposure over 2.0"; }
cs_log "unit: hardened, verified; $(grep -o 'Overall exposure level.*' "$T/security.out")"

# ---- the default config --------------------------------------------------------
ADMIN=$ROOT/usr/bin/cryptoserver-admin
CONF=$ROOT/etc/cryptoserver/broker.conf
for key in broker/endpoint broker/metrics; do
    value=$("$ADMIN" config get "$CONF" "$key") || cs_fail "$key: not in the default broker.conf"
    case $value in
        tcp://127.0.0.1:*|http://127.0.0.1:*) ;;
        *) cs_fail "the default broker.conf's $key is $value, not on 127.0.0.1" ;;
    esac
done
[ "$("$ADMIN" config get "$CONF" broker/curve/enabled)" = true ] || cs_fail "the default broker.conf has CURVE off"
cs_log "default broker.conf: endpoint and metrics on 127.0.0.1, CURVE on"

# ---- the packaged programs together --------------------------------------------
STATE=$WORK/state                           # /var/lib/cryptoserver of the unit
"$ADMIN" init "$STATE" --tenant demo --pin 1234 --so-pin 123456 > "$T/init.out" 2>&1 \
    || { cat "$T/init.out"; cs_fail "the packaged cryptoserver-admin init failed"; }
sed "s|/var/lib/cryptoserver|$STATE|g" "$CONF" > "$WORK/broker.conf"
"$ADMIN" config set "$WORK/broker.conf" broker/endpoint "$CS_TEST_ENDPOINT"
"$ADMIN" config set "$WORK/broker.conf" broker/endpoint-file "$STATE/broker.endpoint"
"$ADMIN" config set "$WORK/broker.conf" broker/metrics 'http://127.0.0.1:0/metrics'
"$ADMIN" config set "$WORK/broker.conf" broker/metrics-file "$STATE/broker.metrics"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T/key.pem" 2>/dev/null
openssl pkey -in "$T/key.pem" -pubout -out "$T/key.pub.pem"
"$ADMIN" key import --tenant demo --file "$T/key.pem" --label packaged --id 42 --dir "$STATE" \
    > "$T/import.out" 2>&1 || { cat "$T/import.out"; cs_fail "key import failed"; }
shred -u "$T/key.pem"

CRYPTOSERVER_DRIVER_DIR=$ROOT/usr/lib/$TRIPLET/cryptoserver/drivers \
    "$ROOT/usr/sbin/cryptoserver-broker" --config "$WORK/broker.conf" --foreground > "$WORK/broker.log" 2>&1 &
CRYPTOSERVER_BROKER_PID=$!
cs_wait_until $((30 * CS_TIME_FACTOR)) test -s "$STATE/broker.endpoint" \
    || cs_fail "the packaged broker did not start with the packaged broker.conf"
endpoint=$(cat "$STATE/broker.endpoint")
cs_log "the packaged broker runs the packaged broker.conf on $endpoint"

"$ADMIN" client add app --dir "$STATE" --tenant demo --endpoint "$endpoint" > "$T/client.out" 2>&1 \
    || { cat "$T/client.out"; cs_fail "client add failed"; }
MODULE=$ROOT/usr/lib/$TRIPLET/pkcs11/cryptoserver-pkcs11.so
export CRYPTOSERVER_CONF=$STATE/clients/app/client.conf CRYPTOSERVER_PIN=1234
pkcs11-tool --module "$MODULE" --show-info > "$T/info.out" 2>&1 \
    || { cat "$T/info.out"; cs_fail "pkcs11-tool cannot load the packaged module"; }
grep -q 'Cryptoki version' "$T/info.out" || { cat "$T/info.out"; cs_fail "no C_GetInfo from the packaged module"; }
cs_sign_verify "pkcs11-tool --module $MODULE --token-label demo" 42 rsa "$T/key.pub.pem" "$T" \
    || cs_fail "the packaged module did not sign through the packaged broker"
cs_log "the packaged module signs through the packaged broker (verified by openssl)"
# p11-kit itself finds the installed module: in a mount namespace of its
# own (unshare -m: nothing changes outside it), the packaged pkcs11/ and
# p11-kit modules/ directories are bind-mounted over the system's, as if
# installed; then p11-kit list-modules (from cryptoserver.module as
# shipped) and GnuTLS's p11tool with the URI pkcs11:token=demo.
# as_installed COMMAND...: COMMAND in that namespace.
as_installed () {
    unshare -m sh -c 'mount --make-rprivate / && mount --bind "$1" "$2" && mount --bind "$3" "$4" \
        && shift 4 && exec "$@"' sh "$ROOT/usr/share/p11-kit/modules" "$p11_configs" \
        "$ROOT/usr/lib/$TRIPLET/pkcs11" "$p11_path" "$@"
}
cs_require unshare p11-kit p11tool
[ -d "$p11_configs" ] && [ -d "$p11_path" ] || cs_fail "$p11_configs or $p11_path missing (p11-kit installs them)"
as_installed p11-kit list-modules > "$T/list-modules.out" 2>&1 \
    || { cat "$T/list-modules.out"; cs_fail "p11-kit list-modules failed with the packaged module installed"; }
awk '/^[^ ]/ { m = $0 == "cryptoserver: cryptoserver-pkcs11.so" } m && /^    token: demo$/ { found = 1 }
     END { exit !found }' "$T/list-modules.out" \
    || { cat "$T/list-modules.out"; cs_fail "p11-kit list-modules does not show module cryptoserver with token demo"; }
as_installed p11tool --list-all 'pkcs11:token=demo' > "$T/p11tool.out" 2>&1 \
    || { cat "$T/p11tool.out"; cs_fail "p11tool --list-all pkcs11:token=demo failed"; }
grep -q 'pkcs11:.*token=demo.*object=packaged' "$T/p11tool.out" \
    || { cat "$T/p11tool.out"; cs_fail "the URI pkcs11:token=demo does not find the key 'packaged'"; }
cs_log "installed (in a mount namespace): p11-kit list-modules shows cryptoserver with token demo; pkcs11:token=demo finds its key"
"$ADMIN" status --metrics "$(cat "$STATE/broker.metrics")" > "$T/status.out" 2>&1 \
    || { cat "$T/status.out"; cs_fail "the packaged cryptoserver-admin status failed"; }
awk '$1 == "cpu" && $2 == "ok" && $3 >= 1 { found = 1 } END { exit !found }' "$T/status.out" \
    || { cat "$T/status.out"; cs_fail "status does not show board cpu with the signature"; }
cs_log "the packaged cryptoserver-admin status shows board cpu ok"
cs_stop
