#!/bin/bash
# login-tickets.sh — logins end (issue #7, docs/CONTRACTS.md "Login tickets"),
# seen by real PKCS#11 application processes (cs-p11-shell, pkcs11-tool):
#  1. broker/ticket-lifetime-ms = 2000: a session in use stays logged in
#     past the lifetime (the module stores the renewed tickets); an idle one
#     gets CKR_USER_NOT_LOGGED_IN on its next C_Sign, and can log in again;
#  2. C_InitPIN by the SO (another process) ends a logged-in user session
#     of the tenant; C_SetPIN keeps the caller logged in and ends the other
#     sessions that logged in with the old PIN;
#  3. a lockout ends logins, and the broker log names every client that gave
#     a wrong PIN, with the count, and the one whose PIN locked the tenant.
. "$(dirname "$0")/lib.sh"

cs_setup
cs_require sqlite3
T=$WORK/tmp
mkdir -p "$T"
"$CS_ADMIN" client add mallory --dir "$WORK" --tenant demo > "$T/client.log" \
    || { cat "$T/client.log"; cs_fail "client add mallory failed"; }

# ---- 1. expiry and renewal --------------------------------------------------
LIFETIME_MS=$((2000 * CS_TIME_FACTOR))
"$CS_ADMIN" config set "$WORK/broker.conf" broker/ticket-lifetime-ms "$LIFETIME_MS"
cs_start
# sleep_ms N: N ms (scaled like the lifetime).
sleep_ms () { sleep "$(awk -v ms="$1" -v f="$CS_TIME_FACTOR" 'BEGIN { printf "%.3f", ms * f / 1000 }')"; }

cs_shell_start app demo
cs_shell app CKR_OK login "$CRYPTOSERVER_PIN"
cs_shell app CKR_OK sign 01
sleep_ms 1200                                # 0.8 s left: the broker renews
cs_shell app CKR_OK sign 01
sleep_ms 1200                                # 2.4 s since login: only the renewed ticket is valid
cs_shell app CKR_OK sign 01
cs_log "a session in use stays logged in past the 2 s lifetime"
sleep_ms 2300                                # idle for longer than the lifetime
cs_shell app CKR_USER_NOT_LOGGED_IN sign 01
cs_shell app CKR_OK login "$CRYPTOSERVER_PIN"  # the module ended its login: C_Login works again
cs_shell app CKR_OK sign 01
cs_shell_stop app
cs_log "an idle login expires: CKR_USER_NOT_LOGGED_IN, then C_Login again works"
cs_stop

# ---- 2. C_InitPIN by the SO, C_SetPIN ---------------------------------------
# The default lifetime (4 h) from here on: what ends a login below is the PIN
# epoch, never the clock.
"$CS_ADMIN" config set "$WORK/broker.conf" broker/ticket-lifetime-ms 14400000
cs_start
cs_shell_start app demo
cs_shell_start other demo
cs_shell app CKR_OK login 1234
cs_shell app CKR_OK sign 01
$P11 --init-pin --login --login-type so --so-pin 123456 --new-pin 4321 > "$T/init.log" 2>&1 \
    || { cat "$T/init.log"; cs_fail "C_InitPIN by the SO failed"; }
cs_shell app CKR_USER_NOT_LOGGED_IN sign 01
cs_log "C_InitPIN by the SO (another process) ended the user session"
cs_shell app CKR_OK login 4321
cs_shell other CKR_OK login 4321
cs_shell other CKR_OK sign 01
cs_shell app CKR_OK set-pin 4321 5678
cs_shell app CKR_OK sign 01
cs_shell other CKR_USER_NOT_LOGGED_IN sign 01
cs_shell other CKR_PIN_INCORRECT login 4321
cs_shell other CKR_OK login 5678
cs_shell other CKR_OK sign 01
cs_log "C_SetPIN keeps the caller logged in and ends the logins of the old PIN"

# ---- 3. lockout and the log of who gave wrong PINs --------------------------
wrong_pin () {         # CLIENT: one wrong user PIN through pkcs11-tool
    cs_expect_refusal CKR_PIN_INCORRECT "wrong PIN from $1" "$T/wrong.log" \
        env CRYPTOSERVER_CONF="$WORK/clients/$1/client.conf" \
        pkcs11-tool --module "$CRYPTOSERVER_MODULE" --token-label demo --login --pin 0000 -O
}
cs_expect_broker_log '^W: .* login: CKR_PIN_INCORRECT as user from client (mallory|demo) \(tenant demo\): [1-5] of 5 wrong PINs in a row$'
cs_expect_broker_log '^E: .* tenant demo: user PIN locked after 5 wrong PINs in a row, the last from client demo; every user login of the tenant ends'
cs_expect_broker_log '^W: .* login: CKR_PIN_LOCKED as user from client demo \(tenant demo\)$'
for i in 1 2 3; do wrong_pin mallory; done
cs_shell app CKR_OK sign 01                  # 3 wrong PINs: not locked yet
wrong_pin demo
wrong_pin demo
cs_shell app CKR_USER_NOT_LOGGED_IN sign 01
cs_shell other CKR_USER_NOT_LOGGED_IN sign 01
cs_shell app CKR_PIN_LOCKED login 5678
cs_log "the lockout ended every user login of the tenant"
for n in 1 2 3; do
    grep -q "W: .* login: CKR_PIN_INCORRECT as user from client mallory (tenant demo): $n of 5 wrong PINs in a row$" \
        "$WORK/broker.log" || cs_fail "the broker log does not show wrong PIN $n of 5 from client mallory"
done
for n in 4 5; do
    grep -q "W: .* login: CKR_PIN_INCORRECT as user from client demo (tenant demo): $n of 5 wrong PINs in a row$" \
        "$WORK/broker.log" || cs_fail "the broker log does not show wrong PIN $n of 5 from client demo"
done
grep -q "E: .* tenant demo: user PIN locked after 5 wrong PINs in a row, the last from client demo;" \
    "$WORK/broker.log" || cs_fail "the broker log does not say which client locked the PIN"
cs_log "the broker log names each client that gave a wrong PIN and the one that locked the tenant"

# The SO unlocks; the user logs in again.
cs_shell_start so demo
cs_shell so CKR_OK login-so 123456
cs_shell so CKR_OK init-pin 1234
cs_shell app CKR_OK login 1234
cs_shell app CKR_OK sign 01
cs_shell_stop so
cs_shell_stop other
cs_shell_stop app
cs_stop
