#!/usr/bin/env python3
"""public_session_test.py -- public session objects without C_Login (issue 21).

usage: public_session_test.py MODULE TOKEN PIN WORK_DIR

PKCS#11 3.0 section 4.4 and 5.6: in a public session (no C_Login, read-only
or read-write) an application creates, generates, finds, reads and uses
session objects with CKA_TOKEN and CKA_PRIVATE FALSE; private objects need
the user login (CKR_USER_NOT_LOGGED_IN) and token objects a read-write
session (CKR_SESSION_READ_ONLY).  For a read-only and then a read-write
public session, without C_Login:

  - an AES-256 key (CKM_AES_KEY_GEN) encrypts with CKM_AES_CBC_PAD (equal to
    `openssl enc -aes-256-cbc`) and CKM_AES_GCM (equal to OpenSSL's EVP
    through libcrypto), and decrypts both back;
  - a generic secret key made with C_CreateObject gives the HMAC-SHA256 of
    `openssl dgst -mac HMAC`;
  - an EC P-256 and an RSA-2048 session pair (CKA_PRIVATE FALSE on the
    private key) sign, OpenSSL verifies; a P-256 pair derives (ECDH,
    CKD_NULL) the Z OpenSSL derives;
  - CKA_PRIVATE TRUE (also by default, as SoftHSMv2) is
    CKR_USER_NOT_LOGGED_IN, CKA_TOKEN TRUE is CKR_SESSION_READ_ONLY in the
    read-only session and CKR_USER_NOT_LOGGED_IN in the read-write one.

Then a token key found while logged in (the demo RSA key) cannot sign once
logged out: CKR_USER_NOT_LOGGED_IN.  Templates keep the data and wrap roles
apart (docs/CONTRACTS.md "Usage separation").  Prints one line per check;
exit 0 when all pass, 1 otherwise.
"""

import ctypes
import ctypes.util
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import PyKCS11  # noqa: E402
from pykcs11_test import (CheckFailed, P256_OID_DER, check, ec_public_pem,  # noqa: E402
                          ecdsa_raw_to_der, rsa_public_pem, run)

A = PyKCS11


def log(msg):
    print("[public-session] " + msg, flush=True)


def rv_of(call):
    """The CKR_ code a PyKCS11 call fails with, or CKR_OK."""
    try:
        call()
    except A.PyKCS11Error as e:
        return e.value
    return A.CKR_OK


def expect_rv(want, call, what):
    got = rv_of(call)
    check(got == want, "%s: %s, expected %s" % (what, A.CKR.get(got, got), A.CKR.get(want, want)))
    log("%s: %s" % (what, A.CKR[want]))


def gcm_encrypt(key, iv, aad, data):
    """AES-GCM with OpenSSL's EVP (libcrypto through ctypes): ciphertext||tag (16 bytes)."""
    lib = ctypes.CDLL(ctypes.util.find_library("crypto") or "libcrypto.so.3")
    lib.EVP_CIPHER_CTX_new.restype = ctypes.c_void_p
    lib.EVP_aes_256_gcm.restype = ctypes.c_void_p
    for name in ("EVP_EncryptInit_ex", "EVP_EncryptUpdate", "EVP_EncryptFinal_ex",
                 "EVP_CIPHER_CTX_ctrl", "EVP_CIPHER_CTX_free"):
        getattr(lib, name).argtypes = None
    ctx = ctypes.c_void_p(lib.EVP_CIPHER_CTX_new())
    out, n, tag = ctypes.create_string_buffer(len(data) + 16), ctypes.c_int(0), ctypes.create_string_buffer(16)
    ok = lib.EVP_EncryptInit_ex(ctx, ctypes.c_void_p(lib.EVP_aes_256_gcm()), None, None, None) == 1
    ok = ok and lib.EVP_CIPHER_CTX_ctrl(ctx, 0x9, len(iv), None) == 1          # EVP_CTRL_GCM_SET_IVLEN
    ok = ok and lib.EVP_EncryptInit_ex(ctx, None, None, key, iv) == 1
    ok = ok and lib.EVP_EncryptUpdate(ctx, None, ctypes.byref(n), aad, len(aad)) == 1
    ok = ok and lib.EVP_EncryptUpdate(ctx, out, ctypes.byref(n), data, len(data)) == 1
    total = n.value
    ok = ok and lib.EVP_EncryptFinal_ex(ctx, ctypes.byref(out, total), ctypes.byref(n)) == 1
    total += n.value
    ok = ok and lib.EVP_CIPHER_CTX_ctrl(ctx, 0x10, 16, tag) == 1                # EVP_CTRL_GCM_GET_TAG
    lib.EVP_CIPHER_CTX_free(ctx)
    check(ok, "libcrypto AES-GCM failed")
    return out.raw[:total] + tag.raw


class Test:
    def __init__(self, module, token, pin, work):
        self.token, self.pin, self.work = token, pin, work
        self.lib = A.PyKCS11Lib()
        self.lib.load(module)
        self.slot = None
        for s in self.lib.getSlotList(tokenPresent=True):
            if self.lib.getTokenInfo(s).label.strip() == token:
                self.slot = s
        check(self.slot is not None, "no slot holds token %r" % token)

    def path(self, name):
        return os.path.join(self.work, name)

    def write(self, name, data):
        with open(self.path(name), "wb") as f:
            f.write(bytes(data))
        return self.path(name)

    def aes(self, s, kind):
        label = "pub-aes-%s" % kind
        tmpl = [(A.CKA_CLASS, A.CKO_SECRET_KEY), (A.CKA_KEY_TYPE, A.CKK_AES), (A.CKA_VALUE_LEN, 32),
                (A.CKA_TOKEN, False), (A.CKA_PRIVATE, False), (A.CKA_LABEL, label),
                (A.CKA_SENSITIVE, False), (A.CKA_EXTRACTABLE, True),
                (A.CKA_ENCRYPT, True), (A.CKA_DECRYPT, True)]
        key = s.generateKey(tmpl, A.Mechanism(A.CKM_AES_KEY_GEN))
        found = s.findObjects([(A.CKA_CLASS, A.CKO_SECRET_KEY), (A.CKA_LABEL, label)])
        check(len(found) == 1, "%s: C_FindObjects found %d keys" % (label, len(found)))
        value, private = s.getAttributeValue(key, [A.CKA_VALUE, A.CKA_PRIVATE])
        value = bytes(value)
        check(len(value) == 32 and private is False, "%s: CKA_VALUE of %d bytes, CKA_PRIVATE %r"
              % (label, len(value), private))
        data, iv = os.urandom(100), os.urandom(16)
        ct = bytes(s.encrypt(key, data, A.Mechanism(A.CKM_AES_CBC_PAD, iv)))
        want = run(["openssl", "enc", "-aes-256-cbc", "-K", value.hex(), "-iv", iv.hex(),
                    "-in", self.write("cbc.in", data)])
        check(ct == want, "%s: CKM_AES_CBC_PAD differs from openssl enc -aes-256-cbc" % label)
        check(bytes(s.decrypt(key, ct, A.Mechanism(A.CKM_AES_CBC_PAD, iv))) == data,
              "%s: CKM_AES_CBC_PAD decrypt" % label)
        log("%s session: AES-256 key generated, found, read; CBC-PAD equal to openssl enc, decrypts"
            % kind)
        nonce, aad = os.urandom(12), b"public session"
        mech = A.AES_GCM_Mechanism(nonce, aad, 128)
        ct = bytes(s.encrypt(key, data, mech))
        check(ct == gcm_encrypt(value, nonce, aad, data), "%s: CKM_AES_GCM differs from OpenSSL" % label)
        check(bytes(s.decrypt(key, ct, A.AES_GCM_Mechanism(nonce, aad, 128))) == data,
              "%s: CKM_AES_GCM decrypt" % label)
        log("%s session: AES-GCM equal to OpenSSL EVP, decrypts" % kind)
        s.destroyObject(key)

    def hmac(self, s, kind):
        value = os.urandom(32)
        tmpl = [(A.CKA_CLASS, A.CKO_SECRET_KEY), (A.CKA_KEY_TYPE, A.CKK_GENERIC_SECRET),
                (A.CKA_VALUE, value), (A.CKA_TOKEN, False), (A.CKA_PRIVATE, False),
                (A.CKA_SIGN, True), (A.CKA_VERIFY, True)]
        key = s.createObject(tmpl)
        data = os.urandom(77)
        mac = bytes(s.sign(key, data, A.Mechanism(A.CKM_SHA256_HMAC)))
        out = run(["openssl", "dgst", "-sha256", "-mac", "HMAC", "-macopt", "hexkey:" + value.hex(),
                   "-r", self.write("hmac.in", data)]).decode()
        check(mac.hex() == out.split()[0], "%s: CKM_SHA256_HMAC differs from openssl" % kind)
        log("%s session: C_CreateObject generic secret; HMAC-SHA256 equal to openssl dgst -mac HMAC" % kind)
        s.destroyObject(key)

    def verify(self, what, pem, data, sig):
        proc = subprocess.run(["openssl", "dgst", "-sha256", "-verify", pem, "-signature",
                               self.write("sig.bin", sig), self.write("sig.in", data)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        check(proc.returncode == 0, "%s: OpenSSL does not verify the signature" % what)

    def pairs(self, s, kind):
        pub_t = [(A.CKA_TOKEN, False), (A.CKA_VERIFY, True)]
        priv_t = [(A.CKA_TOKEN, False), (A.CKA_PRIVATE, False), (A.CKA_SIGN, True)]
        data = os.urandom(50)
        pub, priv = s.generateKeyPair(pub_t + [(A.CKA_EC_PARAMS, P256_OID_DER)], priv_t,
                                      A.MechanismECGENERATEKEYPAIR)
        pem = ec_public_pem(self.work, "ec-" + kind, s.getAttributeValue(pub, [A.CKA_EC_POINT])[0])
        sig = bytes(s.sign(priv, data, A.Mechanism(A.CKM_ECDSA_SHA256)))
        self.verify("EC P-256", pem, data, ecdsa_raw_to_der(sig))
        log("%s session: EC P-256 pair (CKA_PRIVATE FALSE) signs CKM_ECDSA_SHA256; OpenSSL verifies" % kind)
        for o in (priv, pub):
            s.destroyObject(o)
        pub, priv = s.generateKeyPair([(A.CKA_TOKEN, False), (A.CKA_EC_PARAMS, P256_OID_DER)],
                                      [(A.CKA_TOKEN, False), (A.CKA_PRIVATE, False), (A.CKA_DERIVE, True)],
                                      A.MechanismECGENERATEKEYPAIR)
        pem = ec_public_pem(self.work, "ecdh-" + kind, s.getAttributeValue(pub, [A.CKA_EC_POINT])[0])
        peer = self.path("peer.pem")
        run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", peer])
        point = run(["openssl", "pkey", "-in", peer, "-pubout", "-outform", "DER"])[-65:]
        z = run(["openssl", "pkeyutl", "-derive", "-inkey", peer, "-peerkey", pem])
        secret = s.deriveKey(priv, [(A.CKA_CLASS, A.CKO_SECRET_KEY), (A.CKA_KEY_TYPE, A.CKK_GENERIC_SECRET),
                                    (A.CKA_TOKEN, False), (A.CKA_PRIVATE, False), (A.CKA_SENSITIVE, False),
                                    (A.CKA_EXTRACTABLE, True)], A.ECDH1_DERIVE_Mechanism(point))
        check(bytes(s.getAttributeValue(secret, [A.CKA_VALUE])[0]) == z,
              "ECDH: the derived value is not the Z openssl derives")
        log("%s session: ECDH (CKD_NULL) of a public P-256 key gives the Z openssl derives" % kind)
        for o in (secret, priv, pub):
            s.destroyObject(o)
        pub, priv = s.generateKeyPair(pub_t + [(A.CKA_MODULUS_BITS, 2048),
                                               (A.CKA_PUBLIC_EXPONENT, (1, 0, 1))], priv_t,
                                      A.MechanismRSAGENERATEKEYPAIR)
        n, e = s.getAttributeValue(pub, [A.CKA_MODULUS, A.CKA_PUBLIC_EXPONENT])
        pem = rsa_public_pem(self.work, "rsa-" + kind, bytes(n), bytes(e))
        sig = bytes(s.sign(priv, data, A.Mechanism(A.CKM_SHA256_RSA_PKCS)))
        self.verify("RSA-2048", pem, data, sig)
        log("%s session: RSA-2048 pair (CKA_PRIVATE FALSE) signs CKM_SHA256_RSA_PKCS; OpenSSL verifies" % kind)
        for o in (priv, pub):
            s.destroyObject(o)

    def refusals(self, s, kind):
        aes = [(A.CKA_CLASS, A.CKO_SECRET_KEY), (A.CKA_KEY_TYPE, A.CKK_AES), (A.CKA_VALUE_LEN, 16),
               (A.CKA_ENCRYPT, True), (A.CKA_DECRYPT, True)]
        gen = A.Mechanism(A.CKM_AES_KEY_GEN)
        expect_rv(A.CKR_USER_NOT_LOGGED_IN, lambda: s.generateKey(aes + [(A.CKA_PRIVATE, True)], gen),
                  "%s session: AES key with CKA_PRIVATE TRUE" % kind)
        expect_rv(A.CKR_USER_NOT_LOGGED_IN, lambda: s.generateKey(aes, gen),
                  "%s session: AES key with CKA_PRIVATE by default (TRUE, as SoftHSMv2)" % kind)
        expect_rv(A.CKR_USER_NOT_LOGGED_IN, lambda: s.createObject(
                  aes[:2] + [(A.CKA_VALUE, os.urandom(16)), (A.CKA_ENCRYPT, True)]),
                  "%s session: C_CreateObject AES key, CKA_PRIVATE by default" % kind)
        token_rv = A.CKR_SESSION_READ_ONLY if kind == "RO" else A.CKR_USER_NOT_LOGGED_IN
        expect_rv(token_rv, lambda: s.generateKey(aes + [(A.CKA_PRIVATE, False), (A.CKA_TOKEN, True)], gen),
                  "%s session: AES token key" % kind)
        expect_rv(A.CKR_USER_NOT_LOGGED_IN, lambda: s.generateKeyPair(
                  [(A.CKA_EC_PARAMS, P256_OID_DER), (A.CKA_VERIFY, True)], [(A.CKA_SIGN, True)],
                  A.MechanismECGENERATEKEYPAIR),
                  "%s session: EC pair with the private key's CKA_PRIVATE by default" % kind)
        expect_rv(token_rv, lambda: s.generateKeyPair(
                  [(A.CKA_EC_PARAMS, P256_OID_DER), (A.CKA_VERIFY, True), (A.CKA_TOKEN, True)],
                  [(A.CKA_SIGN, True), (A.CKA_PRIVATE, False), (A.CKA_TOKEN, True)],
                  A.MechanismECGENERATEKEYPAIR), "%s session: EC token pair" % kind)

    def public_sessions(self):
        for kind, flags in (("RO", A.CKF_SERIAL_SESSION), ("RW", A.CKF_SERIAL_SESSION | A.CKF_RW_SESSION)):
            s = self.lib.openSession(self.slot, flags)
            want = A.CKS_RO_PUBLIC_SESSION if kind == "RO" else A.CKS_RW_PUBLIC_SESSION
            check(s.getSessionInfo().state == want, "%s session: not a public session" % kind)
            self.aes(s, kind)
            self.hmac(s, kind)
            self.pairs(s, kind)
            self.refusals(s, kind)
            s.closeSession()

    def token_key_after_logout(self):
        s = self.lib.openSession(self.slot, A.CKF_SERIAL_SESSION)
        s.login(self.pin)
        keys = s.findObjects([(A.CKA_CLASS, A.CKO_PRIVATE_KEY), (A.CKA_KEY_TYPE, A.CKK_RSA),
                              (A.CKA_TOKEN, True), (A.CKA_SIGN, True)])
        check(len(keys) > 0, "logged in: no RSA token key that signs")
        s.logout()
        expect_rv(A.CKR_USER_NOT_LOGGED_IN, lambda: s.sign(keys[0], b"x", A.Mechanism(A.CKM_SHA256_RSA_PKCS)),
                  "logged out: C_SignInit with a token RSA key")
        s.closeSession()


def main():
    if len(sys.argv) != 5:
        sys.stderr.write(__doc__)
        return 2
    test = Test(*sys.argv[1:])
    try:
        test.public_sessions()
        test.token_key_after_logout()
    except CheckFailed as e:
        log("FAIL: %s" % e)
        return 1
    except A.PyKCS11Error as e:
        log("FAIL: PKCS#11 error %s" % e)
        return 1
    log("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
