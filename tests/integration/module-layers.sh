#!/bin/bash
# module-layers.sh — the module's units form a DAG and the library mutex is
# taken and released in one function (issue #10, pkcs11-module/module.h).
#
# 1. Every pkcs11-module/*.c and *.h has a rank below; a file may include
#    (#include "X.h") only module headers of a lower rank, or of its own
#    unit.  A new file without a rank fails, so it gets placed.
# 2. In every function of pkcs11-module/*.c (but guard.c, which defines
#    them) cs_lock () and cs_unlock () come in pairs: a function that
#    releases the mutex also takes it, and one that takes it releases it
#    (at least once per cs_lock; early returns add unlocks), and at the
#    level of its last cs_lock; a function named *_inlock takes neither,
#    and one that calls a *_inlock function where it does not hold the
#    mutex (outside its cs_lock ... cs_unlock at the same level) must be
#    named *_inlock itself; and none calls the broker (cs_runner_run_job*,
#    cs_link_call) where it holds the mutex, or in a *_inlock function
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
    [link]=5
    [guard]=6
    [login]=7
    [dataobj_int]=8 [dataobj]=9
    [object_int]=10 [objattr]=10 [object]=10
    [session]=11
    [runner]=12
    [token]=13 [find]=13 [keyop]=13 [secret_token]=13 [modexp]=13 [dataobj_jobs]=13
    [derive]=14 [secret]=14 [secret_key]=14 [digest]=14
    [sign]=15
    [decrypt]=16 [wrap]=16 [local]=16 [recover]=16 [keymgmt]=16 [keymgmt_check]=16 [keymgmt_int]=1
    [module]=17 [verify_sig]=17
    [interface]=18
)
# files that implement part of another unit's header
declare -A own=([dataobj_jobs]="dataobj dataobj_int" [secret_key]="secret"
                [object]="object_int" [objattr]="object_int" [keymgmt_check]="keymgmt")

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

for file in "$dir"/*.c; do
    [ "$(basename "$file")" = guard.c ] && continue
    awk -v file="$(basename "$file")" '
        function indent(s) { match(s, /^ */); return RLENGTH }
        /^[A-Za-z_][A-Za-z0-9_]* \(/ { name = $1 }
        /^\{/ { inbody = 1; locks = unlocks = 0; lock_at = unlock_at = -1; held = 0; callee = ""; next }
        inbody && /^\}/ {
            inbody = 0
            if ((locks > 0) != (unlocks > 0) || unlocks < locks)
                { printf "FAIL: %s: %s takes the library mutex %d time(s) and releases it %d time(s)\n", file, name, locks, unlocks; bad = 1 }
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
            if ((n = gsub(/(^|[^A-Za-z0-9_])cs_(module_)?lock \(\)/, "", line)) > 0)
                { locks += n; lock_at = indent($0); lock_line = NR; held = 1 }
            # held: between a cs_lock and the cs_unlock at its level (an
            # unlock deeper in, before an early return, leaves it held
            # for the lines after that block)
            if (!held && callee == "" && match(line, /[A-Za-z0-9_]+_inlock \(/))
                callee = substr(line, RSTART, RLENGTH - 2)
            if ((held || name ~ /_inlock$/) && match(line, /(cs_runner_run_jobs?|cs_link_call) \(/))
                { printf "FAIL: %s: %s calls %s with the mutex held: no network I/O under it (docs/DESIGN.md section 5)\n", file, name, substr(line, RSTART, RLENGTH - 2); bad = 1 }
            if ((n = gsub(/(^|[^A-Za-z0-9_])cs_(module_)?unlock \(\)/, "", line)) > 0) {
                unlocks += n; unlock_at = indent($0); unlock_line = NR
                if (unlock_at <= lock_at) held = 0
            }
        }
        END { exit bad }' "$file" || fail=1
done

[ $fail = 0 ] && echo "PASS: the module's units form a DAG; the mutex is taken and released in one function"
exit $fail
