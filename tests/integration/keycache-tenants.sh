#!/bin/bash
# keycache-tenants.sh — keystore write storms by one tenant do not drop every
# tenant's key cache (issue #19 item 8): each tenant has a change epoch in the
# keystore (docs/CONTRACTS.md "Keystore state"), and after another writer
# committed the broker drops only the tenants whose epoch moved.
#  1. beta caches 8 keys and signs with all of them in a loop while
#     cryptoserver-admin (another process) generates and deletes alpha's
#     keys: beta's lookups keep hitting the cache (at most one miss per
#     alpha write: a lookup made while the broker waits for the writer's
#     commit), and cryptoserver_key_cache_dropped_total never counts beta's;
#  2. alpha's key, cached by the broker and held by alpha's session, deleted
#     by cryptoserver-admin: the next sign with the held handle is refused
#     with CKR_KEY_HANDLE_INVALID at once (no stale key signs), and the
#     broker logs that alpha's cached key was dropped.
# keycache-tenants-pg.sh does the same with two brokers on PostgreSQL.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-keycache.sh"

cs_require curl
cs_setup --tenant alpha --tenant beta
cs_start
T=$WORK/tmp
mkdir -p "$T"
PIN=$CRYPTOSERVER_PIN           # demo-deploy gives extra tenants PIN 1234 too

kc_warm

# ---- 1. alpha's write storm through cryptoserver-admin, beta signing ------------
# admin_write R: one key of alpha generated and deleted by cryptoserver-admin.
admin_write () {
    "$CS_ADMIN" key generate --tenant alpha --type ec:prime256v1 --label "storm-$1" --dir "$WORK" > "$T/gen-$1.log" 2>&1 \
        || { cat "$T/gen-$1.log"; cs_fail "cryptoserver-admin key generate for alpha failed"; }
    "$CS_ADMIN" key delete --tenant alpha --label "storm-$1" --dir "$WORK" > "$T/del-$1.log" 2>&1 \
        || { cat "$T/del-$1.log"; cs_fail "cryptoserver-admin key delete for alpha failed"; }
}
kc_storm 6 admin_write

# ---- 2. alpha's held key deleted by cryptoserver-admin -----------------------------
admin_delete_held () {
    "$CS_ADMIN" key delete --tenant alpha --label alpha-held --dir "$WORK" > "$T/del-held.log" 2>&1 \
        || { cat "$T/del-held.log"; cs_fail "cryptoserver-admin key delete alpha-held failed"; }
}
kc_held_deleted admin_delete_held
cs_wait_until $((10 * CS_TIME_FACTOR)) grep -q "keystore/key-cache: tenant alpha changed in the keystore: its 1 cached keys dropped" \
    "$WORK/broker.log" || cs_fail "no log line of alpha's cached key dropped"

cs_shell_stop a
cs_shell_stop b
cs_stop
cs_log "PASS"
