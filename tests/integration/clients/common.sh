# common.sh — helpers of the client-*.sh tests (issue #4), sourced after
# ../lib.sh.  Each client test runs real PKCS#11 applications against the
# built module and a broker on 127.0.0.1 (lib.sh's cs_setup/cs_start).
#
# What this file adds to lib.sh: a trap that stops the test's own servers
# before lib.sh's cs_cleanup stops the broker, bounded waits for servers,
# free loopback ports, and finding programs outside $PATH (/usr/sbin).

CS_CLIENTS_DIR=$top_srcdir/tests/integration/clients
CS_CLIENT_PIDS=
CS_CLIENT_CLEANUP_HOOKS=

# cs_client_trap: installs the EXIT trap (call after cs_setup): stops the
# processes registered with cs_client_track, runs the cleanup hooks, then
# lib.sh's cs_cleanup (which stops the broker and keeps the exit status).
cs_client_trap () {
    trap cs_client_cleanup EXIT
}

cs_client_cleanup () {
    local rc=$? pid hook
    set +e
    for hook in $CS_CLIENT_CLEANUP_HOOKS; do "$hook"; done
    for pid in $CS_CLIENT_PIDS; do cs_stop_pid "$pid" || true; done
    (exit "$rc")
    cs_cleanup
}

# cs_client_track PID: PID is stopped on exit.
cs_client_track () { CS_CLIENT_PIDS="$CS_CLIENT_PIDS $1"; }

# cs_client_untrack PID: PID has been reaped (its number may be reused).
cs_client_untrack () {
    CS_CLIENT_PIDS=$(echo " $CS_CLIENT_PIDS " | sed "s/ $1 / /g")
}

# cs_client_on_exit FUNCTION: FUNCTION runs on exit (before the broker stops).
cs_client_on_exit () { CS_CLIENT_CLEANUP_HOOKS="$CS_CLIENT_CLEANUP_HOOKS $1"; }

# cs_stop_pid PID [SIGNAL]: SIGTERM (or SIGNAL), up to 10 s (scaled), then
# SIGKILL (lib.sh's cs_stop_child).  Returns its exit status (0 for a
# process that is not our child), 137 when it had to be killed.
cs_stop_pid () {
    local status=0
    cs_stop_child "$1" "${2:-TERM}" $((10 * CS_TIME_FACTOR)) || status=$?
    [ "$status" != 124 ] || status=137
    return "$status"
}

# cs_find_program NAME: the path of NAME in $PATH or the sbin folders
# (nginx is /usr/sbin/nginx, outside a normal user's $PATH).
cs_find_program () {
    local dir
    command -v "$1" 2>/dev/null && return 0
    for dir in /usr/sbin /sbin /usr/local/sbin; do
        [ -x "$dir/$1" ] && { echo "$dir/$1"; return 0; }
    done
    return 1
}

# cs_free_port: a TCP port free on 127.0.0.1 right now (the kernel picks it).
# A server started on it may still lose a race: callers retry.
cs_free_port () {
    local py
    py=$(command -v python3 || echo /usr/bin/python3)
    "$py" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# cs_wait_grep SECONDS PID FILE PATTERN: waits until FILE has a line matching
# PATTERN (grep -E); fails early when PID dies.
cs_wait_grep () {
    local limit=$(( $1 * 10 )) pid=$2 file=$3 pattern=$4 waited=0
    until grep -Eq -- "$pattern" "$file" 2>/dev/null; do
        cs_pid_alive "$pid" || return 1
        [ $waited -lt $limit ] || return 1
        sleep 0.1
        waited=$((waited + 1))
    done
}

# cs_wait_for SECONDS COMMAND...: polls COMMAND every 0.1 s: status 0 ends
# the wait with success, 1 means "not yet", any other status ends it at once
# with failure (the thing waited for died); also fails after SECONDS.
cs_wait_for () {
    local limit=$(( $1 * 10 )) waited=0 rc
    shift
    while :; do
        rc=0
        "$@" || rc=$?
        [ $rc = 0 ] && return 0
        [ $rc = 1 ] || return 1
        [ $waited -lt $limit ] || return 1
        sleep 0.1
        waited=$((waited + 1))
    done
}

# cs_expect FILE PATTERN WHAT: FILE must have a line matching PATTERN (grep -E).
cs_expect () {
    grep -Eq -- "$2" "$1" || { echo "---- $1 ----"; cat "$1"; cs_fail "$3"; }
}

# cs_key_uri LABEL: the PKCS#11 URI of the demo token's private key LABEL,
# with the PIN (RFC 7512 pin-value).
cs_key_uri () {
    echo "pkcs11:token=$CRYPTOSERVER_TOKEN;object=$1;type=private?pin-value=$CRYPTOSERVER_PIN"
}

# cs_pkcs11_engine_ok: OpenSSL can load the "pkcs11" engine
# (libengine-pkcs11-openssl).
cs_pkcs11_engine_ok () {
    openssl engine -t pkcs11 >/dev/null 2>&1
}

# cs_dump_threads PID WHAT: writes the threads' states and stacks of PID
# (gdb, when installed) to the test's log: for a client that takes too long
# to exit (nginx, openssl s_server: seen under make -j to take 5-12 s to
# exit, not understood yet), so the log shows where it waits.
cs_dump_threads () {
    local pid=$1 what=$2 task
    echo "---- $what $pid still running: its threads ----"
    for task in /proc/"$pid"/task/*; do
        echo "task ${task##*/}: $(cut -d' ' -f2,3 "$task/stat" 2>/dev/null) wchan=$(cat "$task/wchan" 2>/dev/null)"
    done
    command -v gdb >/dev/null \
        && timeout 60 gdb -p "$pid" -batch -ex "thread apply all bt" 2>&1 | tail -n 60
}
