#!/bin/bash
# module-layers.sh — the module's units form a DAG and the library mutex is
# taken and released in one function (issue #10, pkcs11-module/module.h).
#
# 1. Every pkcs11-module/*.c and *.h has a rank below; a file may include
#    (#include "X.h") only module headers of a lower rank, or of its own
#    unit.  A new file without a rank fails, so it gets placed.
# 2. In every function of pkcs11-module/*.c (but guard.c, which defines
#    them) cs_lock () and cs_unlock () come in pairs, and so do the
#    entry-point prologue CS_BEGIN_CALL / CS_BEGIN_SESSION_CALL /
#    CS_BEGIN_OP_CALL (guard.h, session.h: it takes the mutex) and
#    CS_END_CALL () (it releases it), each kind with its own: a function that
#    releases the mutex also takes it, and one that takes it releases it
#    (at least once per cs_lock; early returns add unlocks), and at the
#    level of its last cs_lock; a function named *_inlock takes neither,
#    and one that calls a *_inlock function where it does not hold the
#    mutex (outside its cs_lock ... cs_unlock at the same level) must be
#    named *_inlock itself; and none calls the broker (cs_runner_run_job*,
#    cs_link_call, and the asynchronous cs_runner_submit, cs_runner_complete,
#    cs_link_submit, cs_link_complete) where it holds the mutex, or in a *_inlock function
#    (docs/DESIGN.md §5: no network I/O under it).  The helpers that returned
#    with the mutex held (cs_session_enter, cs_session_op_enter) are gone.
# No broker, no build: it reads the sources.
set -u
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
dir=$top_srcdir/pkcs11-module
fail=0

# unit rank: higher ranks may include lower ones.
declare -A rank=(
    [cs_p11]=0 [cs_p11_3]=1 [log]=1
    [mechanism]=2 [client_config]=2 [coalesce]=2 [key]=2 [attrs]=2
    [association]=3 [keyder]=3
    [waitq]=4
    [link]=5 [link_int]=5 [link_call]=5
    [guard]=6
    [login]=7
    [dataobj_int]=8 [dataobj]=9
    [object_int]=10 [objattr]=10 [object]=10 [object_change]=10
    [session]=11
    [runner]=12
    [token]=13 [async]=13 [find]=13 [keyop]=13 [secret_token]=13 [modexp]=13 [dataobj_jobs]=13
    [derive]=14 [secret]=14 [secret_key]=14 [secret_stream]=14 [secret_int]=13 [digest]=14 [random]=14
    [sign]=15
    [decrypt]=16 [wrap]=17 [encrypt]=16 [verify]=16 [recover]=16 [keymgmt]=16 [keymgmt_check]=16 [kem]=16 [keymgmt_int]=1
    [module]=17
    [interface]=18
)
# files that implement part of another unit's header
declare -A own=([link_call]="link link_int" [link]="link_int" [link_int]="link" [dataobj_jobs]="dataobj dataobj_int" [secret_key]="secret" [secret_stream]="secret secret_int" [verify]="verify"
                [object]="object_int" [objattr]="object_int" [object_change]="object object_int" [keymgmt_check]="keymgmt")

for file in "$dir"/*.c "$dir"/*.h; do
    unit=$(basename "$file"); unit=${unit%.*}
    r=${rank[$unit]-}
    if [ -z "$r" ]; then
        echo "FAIL: $file has no rank in $0"; fail=1; continue
    fi
    while read -r inc; do
        [ -n "$inc" ] || continue
        [ -f "$dir/$inc.h" ] || continue            # common/, proto/: not the module's
        [ "$inc" = "$unit" ] && continue
        case " ${own[$unit]-} " in *" $inc "*) continue;; esac
        ir=${rank[$inc]-}
        if [ -z "$ir" ] || [ "$ir" -ge "$r" ]; then
            echo "FAIL: $(basename "$file") (rank $r) includes $inc.h (rank ${ir:-none})"
            fail=1
        fi
    done < <(sed -n 's/^#include "\([A-Za-z0-9_]*\)\.h".*/\1/p' "$file")
done

if grep -n '\bcs_session_enter\b\|\bcs_session_op_enter\b' "$dir"/*.c "$dir"/*.h; then
    echo "FAIL: a helper that returns with the library mutex held"; fail=1
fi

# The lock-pairing check of one .c file (rule 2); exits non-zero and says
# why when a function breaks it.
lock_awk='
        function indent(s) { match(s, /^ */); return RLENGTH }
        /^[A-Za-z_][A-Za-z0-9_]* \(/ { name = $1 }
        /^\{/ { inbody = 1; locks = unlocks = begins = ends = raw_locks = raw_unlocks = 0; lock_at = unlock_at = -1; held = 0; callee = ""; opened = ""; next }
        inbody && /^\}/ {
            inbody = 0
            if ((begins > 0) != (ends > 0) || ends < begins)
                { printf "FAIL: %s: %s opens CS_BEGIN_*CALL %d time(s) and closes it with CS_END_CALL %d time(s)\n", file, name, begins, ends; bad = 1 }
            else
            if ((raw_locks > 0) != (raw_unlocks > 0) || raw_unlocks < raw_locks)
                { printf "FAIL: %s: %s takes the library mutex %d time(s) and releases it %d time(s) (cs_lock / cs_unlock)\n", file, name, raw_locks, raw_unlocks; bad = 1 }
            else
            if (locks > 0 && (unlock_line < lock_line || unlock_at != lock_at))
                { printf "FAIL: %s: %s may return with the library mutex held (its last cs_unlock is not at the level of its last cs_lock)\n", file, name; bad = 1 }
            if (name !~ /_inlock$/ && callee != "")
                { printf "FAIL: %s: %s calls %s where it does not hold the mutex: take it around the call, or (if its caller holds it) name %s *_inlock\n", file, name, callee, name; bad = 1 }
            if (name ~ /_inlock$/ && locks + unlocks > 0)
                { printf "FAIL: %s: %s is *_inlock but takes or releases the mutex\n", file, name; bad = 1 }
            next
        }
        inbody {
            line = $0; sub(/\/\*.*\*\//, "", line)
            b = gsub(/(^|[^A-Za-z0-9_])CS_BEGIN_[A-Z_]*CALL \(/, "", line)
            n = gsub(/(^|[^A-Za-z0-9_])cs_(module_)?lock \(\)/, "", line)
            if (n + b > 0)
                { begins += b; raw_locks += n; locks += n + b; lock_at = indent($0); lock_line = NR; held = 1
                  opened = b ? "CS_BEGIN_*CALL" : "cs_lock" }
            # held: between a cs_lock and the cs_unlock at its level (an
            # unlock deeper in, before an early return, leaves it held
            # for the lines after that block)
            if (!held && callee == "" && match(line, /[A-Za-z0-9_]+_inlock \(/))
                callee = substr(line, RSTART, RLENGTH - 2)
            if ((held || name ~ /_inlock$/) && match(line, /(cs_runner_run_jobs?|cs_runner_submit|cs_runner_complete|cs_link_call|cs_link_submit|cs_link_complete) \(/))
                { printf "FAIL: %s: %s calls %s with the mutex held: no network I/O under it (docs/DESIGN.md section 5)\n", file, name, substr(line, RSTART, RLENGTH - 2); bad = 1 }
            e = gsub(/(^|[^A-Za-z0-9_])CS_END_CALL \(\)/, "", line)
            n = gsub(/(^|[^A-Za-z0-9_])cs_(module_)?unlock \(\)/, "", line)
            if (n + e > 0) {
                ends += e; raw_unlocks += n; unlocks += n + e; unlock_at = indent($0); unlock_line = NR
                if ((e ? "CS_BEGIN_*CALL" : "cs_lock") != opened)
                    { printf "FAIL: %s: %s closes what %s opened with %s\n", file, name, opened, e ? "CS_END_CALL" : "cs_unlock"; bad = 1 }
                if (unlock_at <= lock_at) held = 0
            }
        }
        END { exit bad }'
check_locks () { awk -v file="$(basename "$1")" "$lock_awk" "$1"; }

for file in "$dir"/*.c; do
    [ "$(basename "$file")" = guard.c ] && continue
    check_locks "$file" || fail=1
done

# The check itself: each broken function below must fail it, the sound one
# must pass (so a check that has gone blind does not pass the tree).
selftest=$(mktemp -d)
trap 'rm -rf "$selftest"' EXIT
cat >"$selftest/sound.c" <<'EOF_C'
CK_RV
s_sound (CK_SESSION_HANDLE handle)
{
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    if (x) {
        CS_END_CALL ();
        return rv;
    }
    CS_END_CALL ();
    return cs_runner_run_job (&job, true, &reply);
}
EOF_C
cat >"$selftest/no_end.c" <<'EOF_C'
CK_RV
s_no_end (CK_SESSION_HANDLE handle)
{
    CS_BEGIN_SESSION_CALL (rv, handle, &session);
    rv = cs_object_use_inlock (key, want, &key);
    return rv;
}
EOF_C
cat >"$selftest/end_early_only.c" <<'EOF_C'
CK_RV
s_end_early_only (CK_SESSION_HANDLE handle)
{
    CS_BEGIN_OP_CALL (rv, handle, CS_OP_SIGN, true, &session, &op);
    if (x) {
        CS_END_CALL ();
        return rv;
    }
    return rv;
}
EOF_C
cat >"$selftest/mixed.c" <<'EOF_C'
CK_RV
s_mixed (void)
{
    CS_BEGIN_CALL (rv);
    cs_unlock ();
    return rv;
}
EOF_C
cat >"$selftest/io_held.c" <<'EOF_C'
CK_RV
s_io_held (void)
{
    CS_BEGIN_CALL (rv);
    rv = cs_runner_run_job (&job, true, &reply);
    CS_END_CALL ();
    return rv;
}
EOF_C
if ! check_locks "$selftest/sound.c" >/dev/null; then
    echo "FAIL: the lock check fails a sound function"; fail=1
fi
for broken in no_end end_early_only mixed io_held; do
    if check_locks "$selftest/$broken.c" >/dev/null; then
        echo "FAIL: the lock check passes the broken function s_$broken"; fail=1
    fi
done

[ $fail = 0 ] && echo "PASS: the module's units form a DAG; the mutex is taken and released in one function"
exit $fail
