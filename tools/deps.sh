# deps.sh — the Debian 12 packages cryptoserver needs to build, test and run
# its demo, and a function that installs the missing ones.  Sourced by
# tools/quickstart.sh and tools/check.sh (POSIX sh; not run on its own).

# Build: compiler, autotools, every PKG_CHECK_MODULES of configure.ac.
# Run/test: SoftHSMv2 (the demo boards), OpenSC's pkcs11-tool, openssl, and
# the PKCS#11 applications of the client tests (below).
CS_DEB_PACKAGES="gcc make autoconf automake libtool pkg-config
    libzmq3-dev libczmq-dev libssl-dev libp11-kit-dev
    libprotobuf-c-dev protobuf-c-compiler check libsubunit-dev libsqlite3-dev libgmp-dev
    libmicrohttpd-dev
    softhsm2 opensc openssl procps"

# Client tests (tests/clients.am, issue #4): the OpenSSL engine "pkcs11"
# (libp11), GnuTLS's p11tool, p11-kit (p11-kit command and p11-kit-proxy.so),
# curl, Python PyKCS11, OpenSSH's ssh-keygen.
CS_DEB_PACKAGES="$CS_DEB_PACKAGES
    libengine-pkcs11-openssl gnutls-bin p11-kit curl python3-pykcs11 openssh-client"
# The sqlite3 CLI: tests change keystore.db behind the broker's back
# (keystore-tamper.sh, login-tickets.sh, issue #7), and the online backup of
# cryptoserver-keystore(5) uses it.
CS_DEB_PACKAGES="$CS_DEB_PACKAGES sqlite3"
# The PostgreSQL keystore (keystore/url, issue #11): libpq to build it; the
# server (initdb, pg_ctl, postgres under /usr/lib/postgresql/VERSION/bin) and
# psql for its tests, which start a private cluster in the build tree
# (tests/integration/lib.sh cs_pg_start).  No system cluster is used.
CS_DEB_PACKAGES="$CS_DEB_PACKAGES libpq-dev postgresql postgresql-client"
# cryptoserver-bench paper (tools/bench-paper.sh, tests/integration/bench-paper.sh):
# gnuplot for its plot (gnuplot-nox: no X11), taskset (util-linux) to pin
# the TLS server of Table 4 to its CPU.
CS_DEB_PACKAGES="$CS_DEB_PACKAGES gnuplot-nox util-linux"
# The Debian packages (debian/, tests/integration/packages.sh, issue #11):
# dpkg-buildpackage (dpkg-dev) with debhelper (dh, dh_autoreconf,
# dh_installsystemd) under fakeroot; systemd-analyze checks the unit.  The
# Build-Depends of debian/control are the build packages above.
CS_DEB_PACKAGES="$CS_DEB_PACKAGES debhelper dpkg-dev fakeroot systemd"
# The pq driver's cross-check (tests/integration/pq-crosscheck.sh, issue #23)
# installs dilithium-py and kyber-py into a virtualenv: python3 -m venv.
CS_DEB_PACKAGES="$CS_DEB_PACKAGES python3-venv"
# The libFuzzer targets (tools/fuzz.sh, docs/FUZZING.md): clang, whose
# -fsanitize=fuzzer gcc lacks.  A build and test tool only; nothing that
# is installed or run in production needs it.
CS_DEB_PACKAGES="$CS_DEB_PACKAGES clang"
# nginx (client-nginx.sh): nginx-light, unless an nginx flavour (nginx-core,
# nginx-full, ...) is installed already: they conflict with each other.
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
    CS_DEB_PACKAGES="$CS_DEB_PACKAGES nginx-light"
fi
# Java's keytool (client-java.sh): any JDK or JRE will do, and machine images
# often carry one; a headless JRE only when no keytool is found.
if ! command -v keytool >/dev/null 2>&1 && ! ls /usr/lib/jvm/*/bin/keytool >/dev/null 2>&1; then
    CS_DEB_PACKAGES="$CS_DEB_PACKAGES openjdk-17-jre-headless"
fi

# cs_deps_missing: prints the packages of CS_DEB_PACKAGES not installed.
cs_deps_missing () {
    for cs_pkg in $CS_DEB_PACKAGES; do
        dpkg-query -W -f='${Status}\n' "$cs_pkg" 2>/dev/null | grep -q 'install ok installed' \
            || printf '%s\n' "$cs_pkg"
    done
}

# cs_deps_install: installs what is missing with apt-get (through sudo when
# not root); runs apt-get update first only when something is missing.
# Returns non-zero when packages are missing and cannot be installed.
cs_deps_install () {
    if ! command -v dpkg-query >/dev/null 2>&1; then
        echo "note: not a Debian system; make sure these are installed: $(echo $CS_DEB_PACKAGES)"
        return 0
    fi
    cs_missing=$(cs_deps_missing | tr '\n' ' ')
    if [ -z "$cs_missing" ]; then
        echo "packages: all present"
        return 0
    fi
    echo "packages: installing $cs_missing"
    cs_sudo=
    if [ "$(id -u)" != 0 ]; then
        if ! command -v sudo >/dev/null 2>&1; then
            echo "error: need root or sudo to install: $cs_missing" >&2
            return 1
        fi
        cs_sudo=sudo
    fi
    $cs_sudo apt-get update -q || return 1
    # shellcheck disable=SC2086
    $cs_sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $cs_missing || return 1
}

# cs_deps_rust: says whether the pq board driver (shim-drivers/pq, Rust;
# docs/PQ-DRIVER.md) will be built.  Rust is no Debian package here (Debian
# 12's rustc is older than the 1.85 its crates need): it comes from rustup,
# which puts cargo in ~/.cargo/bin.  Without it everything else builds and
# configure's summary says "pq driver: no (cargo not found)".  Always 0.
cs_deps_rust () {
    if command -v cargo >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/cargo" ]; then
        echo "rust: cargo found: the pq driver (ML-DSA, ML-KEM) will be built"
    else
        echo "note: cargo not found: the pq driver (ML-DSA, ML-KEM) will not be built;" \
             "install Rust >= 1.85 with rustup to build it (docs/PQ-DRIVER.md)"
    fi
    return 0
}

# cs_deps_versions: "package version" of each package of CS_DEB_PACKAGES
# ("package -" when absent); tools/check.sh configures again when it changes.
cs_deps_versions () {
    for cs_pkg in $CS_DEB_PACKAGES; do
        cs_ver=$(dpkg-query -W -f='${Status} ${Version}\n' "$cs_pkg" 2>/dev/null \
                     | sed -n 's/^install ok installed //p')
        printf '%s %s\n' "$cs_pkg" "${cs_ver:--}"
    done
}

# cs_promtool DIR: the path of promtool (tests/integration/monitoring.sh
# checks and tests the alert rules of monitoring/ with it): the installed
# one, else the one of Debian's prometheus package unpacked into DIR (apt-get
# download + dpkg-deb -x, once).  The package itself is not installed: on a
# machine running systemd it would start a Prometheus server on all
# addresses.  Prints nothing and returns 1 when neither can be had.
cs_promtool () {
    if command -v promtool >/dev/null 2>&1; then
        command -v promtool
        return 0
    fi
    if [ ! -x "$1/usr/bin/promtool" ]; then
        mkdir -p "$1/deb" || return 1
        (cd "$1/deb" && apt-get download -q prometheus >/dev/null 2>&1 \
            || { apt-get update -q >/dev/null 2>&1 && apt-get download -q prometheus >/dev/null 2>&1; }) \
            || return 1
        dpkg-deb -x "$1"/deb/prometheus_*.deb "$1/deb/x" || return 1
        mkdir -p "$1/usr/bin" && mv "$1/deb/x/usr/bin/promtool" "$1/usr/bin/promtool" || return 1
        rm -rf "$1/deb"
    fi
    [ -x "$1/usr/bin/promtool" ] && echo "$1/usr/bin/promtool"
}
