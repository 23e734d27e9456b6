#!/bin/bash
# client-ssh.sh — OpenSSH's `ssh-keygen -D cryptoserver-pkcs11.so` prints the
# token's public keys; each must be exactly the demo key's public key
# (ssh-keygen -i -m PKCS8 of DIR/keys/LABEL.pub.pem): rsa2048, rsa3072 (RSA)
# and p256 (ecdsa-sha2-nistp256), with the key labels as comments, and
# nothing else.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/clients/common.sh"

cs_require ssh-keygen
cs_setup
cs_client_trap
cs_start
T=$WORK/tmp
mkdir -p "$T"

cs_run_bounded 60 "$T/keys.txt" ssh-keygen -D "$CRYPTOSERVER_MODULE" \
    || { cat "$T/keys.txt"; cs_fail "ssh-keygen -D failed"; }
# Only the key lines (ssh-keygen may print notes on stderr).
grep -E '^(ssh-|ecdsa-)' "$T/keys.txt" > "$T/token.txt" || true
cs_log "ssh-keygen -D printed $(wc -l < "$T/token.txt") keys:"
cut -c1-60 "$T/token.txt" | sed 's/^/    /'

for label in rsa2048 rsa3072 p256; do
    ssh-keygen -i -m PKCS8 -f "$KEYS/$label.pub.pem" > "$T/$label.ssh" \
        || cs_fail "ssh-keygen -i could not read $KEYS/$label.pub.pem"
    expect=$(cut -d' ' -f1,2 "$T/$label.ssh")
    grep -qxF "$expect $label" "$T/token.txt" || grep -qxF "$expect" "$T/token.txt" \
        || { cat "$T/keys.txt"; cs_fail "$label: the token's key is not printed or differs from $label.pub.pem ($expect)"; }
    cs_log "$label: $(cut -d' ' -f1 "$T/$label.ssh") key from the token equals $label.pub.pem"
done
[ "$(wc -l < "$T/token.txt")" = 3 ] || { cat "$T/keys.txt"; cs_fail "expected exactly 3 keys"; }
grep -q "^ecdsa-sha2-nistp256 " "$T/token.txt" || cs_fail "no ECDSA key printed"
cs_log "all ssh-keygen -D checks passed"
