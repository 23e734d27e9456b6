# demo-pg.sh — a private PostgreSQL cluster for a demo or a test (sourced,
# bash): the one copy of this logic, used by tools/demo-deploy.sh (--ha) and
# by tests/integration/lib.sh (cs_pg_start, cs_pg_stop).
#
# Layout under BASE (DIR/pg of a demo, $WORK/pg of a test):
#   BASE/data        the cluster (initdb on first use; trust authentication,
#                    superuser "cs"), mode 0700
#   BASE/sock        the Unix socket directory: the cluster listens there and
#                    on no TCP address (listen_addresses = '')
#   BASE/sock.link   when BASE/sock is too long for a socket path (107 bytes):
#                    the name of a symbolic link in /tmp to BASE/sock, which
#                    the URL uses instead (made at start, removed at stop)
#   BASE/server.log  the server's log; BASE/initdb.log, BASE/pg_ctl.log
#
# initdb and postgres refuse to run as root: as root the cluster's owner is
# the system user "postgres" (Debian's postgresql package makes it), else
# "nobody", and the server programs run as that user through runuser(1);
# BASE and every directory above it must then be searchable by it.
#
# Functions return 0 on success; on failure they print the reason on
# stderr (prefixed "demo-pg: ") and return 1, or 2 when the PostgreSQL
# server is not installed (package postgresql).  Variables set:
#   CS_PG_BINDIR  the server's programs: $PG_BINDIR (configure's), else the
#                 newest /usr/lib/postgresql/*/bin
#   CS_PG_USER    the owner as root (empty otherwise)
#   CS_PG_DATA, CS_PG_SOCKET (the directory the URL names), CS_PG_LINK
#   CS_PG_PID     the postmaster's pid
#   CS_PG_URL     postgresql:///DBNAME?host=CS_PG_SOCKET&user=cs

CS_PG_BINDIR=${CS_PG_BINDIR:-${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}}
CS_PG_DATA=${CS_PG_DATA:-}
CS_PG_PID=${CS_PG_PID:-}
CS_PG_USER=${CS_PG_USER:-}

# cs_pg_as COMMAND...: runs a server program as the cluster's owner.
cs_pg_as () {
    if [ "$(id -u)" = 0 ]; then
        runuser -u "$CS_PG_USER" -- "$@"
    else
        "$@"
    fi
}

# cs_pg_alive PID: the process runs and is not a zombie.
cs_pg_alive () {
    [ -n "$1" ] && kill -0 "$1" 2>/dev/null \
        && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}

# cs_pg_cluster_pid BASE: prints the pid of BASE's running postmaster
# (BASE/data/postmaster.pid, checked alive); prints nothing when none runs.
cs_pg_cluster_pid () {
    local pid
    pid=$(head -n 1 "$1/data/postmaster.pid" 2>/dev/null || true)
    if cs_pg_alive "$pid"; then echo "$pid"; fi
}

# cs_pg_owner: sets CS_PG_USER (as root: postgres, else nobody).
cs_pg_owner () {
    CS_PG_USER=
    if [ "$(id -u)" = 0 ]; then
        CS_PG_USER=nobody
        getent passwd postgres >/dev/null 2>&1 && CS_PG_USER=postgres
    fi
}

# cs_pg_paths BASE: sets CS_PG_USER, CS_PG_DATA and CS_PG_SOCKET (through
# the /tmp link named in BASE/sock.link when the path is long; the link is
# made or renewed here, under the same name at every start so that a URL
# stays valid).
cs_pg_paths () {
    local base=$1
    cs_pg_owner
    CS_PG_DATA=$base/data
    CS_PG_SOCKET=$base/sock
    CS_PG_LINK=
    # A Unix socket's path has at most 107 bytes: a deep directory (make
    # distcheck) reaches its socket directory through a short symbolic link
    # in /tmp; the socket itself stays in BASE.
    if [ ${#CS_PG_SOCKET} -ge 90 ]; then
        CS_PG_LINK=$(cat "$base/sock.link" 2>/dev/null || true)
        [ -n "$CS_PG_LINK" ] || CS_PG_LINK=$(mktemp -u /tmp/cs-pg.XXXXXX)
        ln -sfn "$CS_PG_SOCKET" "$CS_PG_LINK"
        echo "$CS_PG_LINK" > "$base/sock.link"
        CS_PG_SOCKET=$CS_PG_LINK
    fi
}

# cs_pg_cluster_start BASE [DBNAME] [SECONDS]: starts the private cluster of
# BASE (made by initdb on first use) with pg_ctl, waiting up to SECONDS
# (default 60) for it, unless it runs already; creates database DBNAME
# (default cryptoserver) when missing.  fsync is off: a demo or test
# cluster, stopped cleanly by cs_pg_cluster_stop.
cs_pg_cluster_start () {
    local base=$1 db=${2:-cryptoserver} seconds=${3:-60}
    if [ ! -x "$CS_PG_BINDIR/initdb" ] || [ ! -x "$CS_PG_BINDIR/pg_ctl" ]; then
        echo "demo-pg: the PostgreSQL server (initdb, pg_ctl: package postgresql) is not installed" >&2
        return 2
    fi
    command -v psql >/dev/null 2>&1 \
        || { echo "demo-pg: psql (package postgresql-client) is not installed" >&2; return 2; }
    mkdir -p "$base"
    base=$(cd "$base" && pwd)
    cs_pg_paths "$base"
    if [ ! -f "$CS_PG_DATA/PG_VERSION" ]; then
        rm -rf "$CS_PG_DATA"
        mkdir -p "$CS_PG_DATA" "$base/sock"
        chmod 0700 "$CS_PG_DATA"
        [ -z "$CS_PG_USER" ] || chown "$CS_PG_USER" "$base" "$CS_PG_DATA" "$base/sock"
        if ! cs_pg_as test -w "$CS_PG_DATA" -a -x "$base/sock"; then
            echo "demo-pg: user ${CS_PG_USER:-$(id -un)} cannot reach $CS_PG_DATA (a parent directory is not searchable by it)" >&2
            return 1
        fi
        if ! cs_pg_as "$CS_PG_BINDIR/initdb" -D "$CS_PG_DATA" -U cs --auth=trust -E UTF8 --no-sync \
                > "$base/initdb.log" 2>&1; then
            cat "$base/initdb.log" >&2
            echo "demo-pg: initdb failed" >&2
            return 1
        fi
    fi
    CS_PG_PID=$(cs_pg_cluster_pid "$base")
    if [ -z "$CS_PG_PID" ]; then
        if ! cs_pg_as "$CS_PG_BINDIR/pg_ctl" -D "$CS_PG_DATA" -l "$base/server.log" -w -t "$seconds" \
                -o "-c listen_addresses='' -k $CS_PG_SOCKET -c fsync=off -c max_connections=40" start \
                > "$base/pg_ctl.log" 2>&1; then
            cat "$base/pg_ctl.log" >&2
            tail -n 20 "$base/server.log" >&2 2>/dev/null
            echo "demo-pg: PostgreSQL did not start (log $base/server.log)" >&2
            return 1
        fi
        CS_PG_PID=$(cs_pg_cluster_pid "$base")
        if [ -z "$CS_PG_PID" ]; then
            echo "demo-pg: PostgreSQL started but does not run (log $base/server.log)" >&2
            return 1
        fi
    fi
    if [ "$(cs_psql postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'")" != 1 ]; then
        cs_psql postgres -qc "CREATE DATABASE $db" \
            || { echo "demo-pg: cannot create database $db" >&2; return 1; }
    fi
    CS_PG_URL="postgresql:///$db?host=$CS_PG_SOCKET&user=cs"
}

# cs_psql DBNAME ARGS...: psql on the cluster of the last
# cs_pg_cluster_start as its superuser.
cs_psql () {
    local db=$1
    shift
    psql -X -h "$CS_PG_SOCKET" -U cs -d "$db" -v ON_ERROR_STOP=1 "$@"
}

# cs_pg_cluster_stop BASE [SECONDS]: stops BASE's cluster if it runs
# (pg_ctl stop -m fast; SIGKILL of its postmaster when that fails) and waits
# up to SECONDS (default 30) until it is gone; removes the /tmp link (its
# name stays in BASE/sock.link for the next start).  Keeps
# the data: cs_pg_cluster_start starts it again.  Returns 1 when the
# postmaster had to be killed or is still there.
cs_pg_cluster_stop () {
    local base=$1 seconds=${2:-30} pid waited=0 rc=0
    pid=$(cs_pg_cluster_pid "$base")
    cs_pg_owner
    if [ -n "$pid" ]; then
        if ! cs_pg_as "$CS_PG_BINDIR/pg_ctl" -D "$base/data" -m fast -w -t "$seconds" stop \
                >> "$base/pg_ctl.log" 2>&1; then
            echo "demo-pg: pg_ctl stop failed: PostgreSQL (pid $pid) killed" >&2
            kill -KILL "$pid" 2>/dev/null
            rc=1
        fi
        while cs_pg_alive "$pid" && [ $waited -lt $((seconds * 10)) ]; do
            sleep 0.1
            waited=$((waited + 1))
        done
        if cs_pg_alive "$pid"; then
            echo "demo-pg: PostgreSQL (pid $pid) did not stop" >&2
            rc=1
        fi
    fi
    if [ -f "$base/sock.link" ]; then
        rm -f "$(cat "$base/sock.link")"
    fi
    CS_PG_PID=
    return $rc
}
