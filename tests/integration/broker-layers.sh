#!/bin/bash
# broker-layers.sh — the broker's files form a DAG: every #include and
# every call between broker files runs down, never back up or around in a
# circle (issue #20; the frontend's pipeline: docs/FRONTEND.md).
#
# 1. Every .c and .h file under broker/ (its folders: broker/README.md) has
#    a rank below: its unit's (X.c and X.h are unit X), or its own where a
#    header sits lower than its .c (a header of types, included by files
#    below the .c).  A new file without a rank fails, so it gets placed.
#    File names are unique across the folders (headers are included by
#    name).
# 2. A file may include (#include "X.h") only broker headers of a lower
#    rank, or of its own unit.
# 3. A .c file may use (call, or take the address of) a function defined
#    in another broker .c file only when that file's rank is lower.  What
#    comes back up goes through a function pointer set by the room above:
#    the `done` of a slow job or work item (slow_jobs.h, scheduler.h).
# No broker, no build: it reads the sources (comments and strings are
# ignored).  Prints every violation and their count.
set -u
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
dir=$top_srcdir/broker
fail=0

# unit rank: a file may include and call only lower ranks.  Grouped by
# concern, bottom to top.
declare -A rank=(
    # foundations: no broker file below them
    [path_watch]=1 [fair_queue]=1 [health]=1 [ticket]=1 [client_load]=1 [ks_cache]=1
    [modexp_job]=1 [objjobs]=1 [symjobs]=1 [host_limits]=1 [quota]=1
    # keys: attribute rules, key jobs, token secret keys
    [keyattrs]=2 [keyjobs]=3 [secretkeys]=3 [context_auth]=3
    # operations: watches
    [clients_watch]=2 [ks_watch]=2 [ks_settle]=2
    # scheduling and placement
    [scheduler_int]=3 [placement]=4 [scheduler]=5
    # operations: metrics, config
    [metrics_quota]=5 [metrics_int]=5 [metrics]=6 [metrics_render]=6 [metrics_http]=7
    [broker_config_int]=5 [broker_config_values]=6 [broker_config_boards]=7 [broker_config]=8
    # boards and their health
    [board]=9 [verify]=10 [pq_work]=10 [worker_call]=11 [worker]=12 [board_watch]=12 [cross_check]=13
    # the keystore side: audit chain, slow pool, key pool, slow jobs
    [audit_uses]=8 [audit]=9 [slow_pool]=9 [pool]=9 [pool_store]=10 [slow_jobs]=14
    # the frontend pipeline, bottom to top (docs/FRONTEND.md)
    [frontend_int]=15
    [fast_lane]=16 [dispatch]=17 [slow_link]=17
    [reply]=18
    [quota_link]=19
    [inventory]=20
    [key_route]=21 [shared_link]=21 [shared_boards]=21
    [route]=22 [pool_jobs]=22 [login]=22
    [keymgmt_jobs]=23
    [job_kinds]=24
    [admission]=25
    [request]=26
    [frontend]=27
    # shared keys: the party service of a broker (its own thread, party/README.md)
    [party_int]=9 [party_net]=10 [party_idem]=10 [party_use]=10 [party_row]=12 [party_sign]=12 [party_gen]=13 [party]=14
    # the daemon
    [server]=28 [main]=29
)
# headers ranked below their unit's .c: types and prototypes that lower
# files include
declare -A hrank=(
    [broker_config.h]=1 [scheduler.h]=2 [keyjobs.h]=1 [secretkeys.h]=1 [slow_pool.h]=1
    [pool.h]=1 [frontend.h]=13 [metrics.h]=4 [party.h]=8
)

# the rank of file $1 (a basename), or "" when it has none
s_rank () {
    local unit=${1%.*}
    if [ "${1##*.}" = h ] && [ -n "${hrank[$1]-}" ]; then echo "${hrank[$1]}"; return; fi
    echo "${rank[$unit]-}"
}

# the file's text without comments, string and character literals
s_code () {
    awk '
        BEGIN { incomment = 0 }
        {
            out = ""; line = $0; n = length(line); i = 1
            while (i <= n) {
                c = substr(line, i, 1); d = substr(line, i, 2)
                if (incomment) {
                    if (d == "*/") { incomment = 0; i += 2 } else i++
                    continue
                }
                if (d == "/*") { incomment = 1; i += 2; continue }
                if (d == "//") break
                if (c == "\"" || c == "'\''") {
                    q = c; i++
                    while (i <= n && substr(line, i, 1) != q) i += substr(line, i, 1) == "\\" ? 2 : 1
                    i++; out = out q q; continue
                }
                out = out c; i++
            }
            print out
        }' "$1"
}

mapfile -t sources < <(find "$dir" -name '*.c' | sort)
mapfile -t headers < <(find "$dir" -name '*.h' | sort)
declare -A present=()
for file in "${sources[@]}" "${headers[@]}"; do
    base=$(basename "$file")
    if [ -n "${present[$base]-}" ]; then
        echo "FAIL: two broker files named $base: ${present[$base]} and $file"; fail=$((fail + 1))
    fi
    present[$base]=$file
done

for file in "${sources[@]}" "${headers[@]}"; do
    base=$(basename "$file")
    r=$(s_rank "$base")
    if [ -z "$r" ]; then
        echo "FAIL: broker/$base has no rank in $0"; fail=$((fail + 1)); continue
    fi
    while read -r inc; do
        [ -n "$inc" ] || continue
        [ -n "${present[$inc]-}" ] || continue      # common/, keystore/, proto/: not the broker's
        [ "${inc%.h}" = "${base%.*}" ] && continue  # its own unit's header
        ir=$(s_rank "$inc")
        if [ -z "$ir" ] || [ "$ir" -ge "$r" ]; then
            echo "FAIL: broker/$base (rank $r) includes $inc (rank ${ir:-none})"
            fail=$((fail + 1))
        fi
    done < <(sed -n 's/^#include "\([A-Za-z0-9_]*\.h\)".*/\1/p' "$file")
done

# Functions defined (not static) in each .c: "name (" at the start of a
# line whose previous line (its return type) is not static.
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for file in "${sources[@]}"; do
    base=$(basename "$file")
    s_code "$file" > "$tmp/$base"
    awk -v file="$base" '
        /^[A-Za-z_][A-Za-z0-9_]* \(/ && prev !~ /^static/ && prev !~ /^#/ && prev ~ /[A-Za-z0-9_*]$/ {
            sub(/ .*/, ""); print $0, file
        }
        { if ($0 != "") prev = $0 }' "$tmp/$base"
done > "$tmp/defs"

for file in "${sources[@]}"; do
    base=$(basename "$file")
    r=$(s_rank "$base")
    [ -n "$r" ] || continue
    # identifiers used in the file that another broker file defines
    grep -o '[A-Za-z_][A-Za-z0-9_]*' "$tmp/$base" | sort -u \
    | awk -v file="$base" 'NR == FNR { def [$1] = $2; next }
                            ($1 in def) && def [$1] != file { print def [$1], $1 }' "$tmp/defs" - \
    | sort > "$tmp/uses"
    while read -r callee names; do
        cr=$(s_rank "$callee")
        if [ -z "$cr" ] || [ "$cr" -ge "$r" ]; then
            echo "FAIL: broker/$base (rank $r) calls up into $callee (rank ${cr:-none}): $names"
            fail=$((fail + 1))
        fi
    done < <(awk '{ a [$1] = a [$1] " " $2 } END { for (f in a) print f a [f] }' "$tmp/uses" | sort)
done

if [ $fail = 0 ]; then
    echo "PASS: the broker's includes and calls all run down (no circle)"
    exit 0
fi
echo "FAIL: $fail include(s) or calling pair(s) run up or around"
exit 1
