#!/usr/bin/env python3
"""pykcs11_test.py -- Python PyKCS11 against cryptoserver-pkcs11.so (issue #4).

usage: pykcs11_test.py MODULE TOKEN PIN KEYS_DIR WORK_DIR

Opens the library, finds the token by its label, logs in, lists the objects,
signs with CKM_SHA256_RSA_PKCS and CKM_ECDSA_SHA256 and verifies through the
module (C_Verify) and with OpenSSL on the demo public PEMs, decrypts
OpenSSL-made RSA-OAEP ciphertexts (SHA-1 and SHA-256); checks that closing
the last session logs out and C_SeedRandom/C_GenerateRandom; then generates key
pairs (RSA 2048 token and session keys, EC P-256), signs, verifies, encrypts
and decrypts with them (and C_DigestKey of a secret key derived with ECDH
from the EC key, against the value OpenSSL derives), and destroys them.

Prints one line per check.  Exit status: 0 all passed, 1 a check failed,
3 C_GenerateKeyPair is not supported by the module (everything before it
passed; reported separately so the shell test can say so clearly).
"""

import os
import subprocess
import sys

import PyKCS11
from PyKCS11 import LowLevel

EXIT_NO_KEYGEN = 3
P256_OID_DER = bytes.fromhex("06082a8648ce3d030107")  # prime256v1


class CheckFailed(Exception):
    pass


def log(msg):
    print("[pykcs11] " + msg, flush=True)


def check(cond, what):
    if not cond:
        raise CheckFailed(what)


def run(args, stdin=None):
    """Runs an external command (openssl); returns its stdout, fails on error."""
    proc = subprocess.run(args, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode != 0:
        raise CheckFailed("%s failed: %s" % (" ".join(args), proc.stderr.decode(errors="replace")))
    return proc.stdout


def openssl_verifies(args):
    return subprocess.run(["openssl"] + args, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


# ---- DER helpers (no third-party Python packages needed) ------------------
def der_len(n):
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def der_int(value):
    b = value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")
    if b[0] & 0x80:
        b = b"\x00" + b
    return b"\x02" + der_len(len(b)) + b


def der_seq(*items):
    body = b"".join(items)
    return b"\x30" + der_len(len(body)) + body


def ecdsa_raw_to_der(sig):
    """PKCS#11 r||s to the DER ECDSA-Sig-Value OpenSSL verifies."""
    half = len(sig) // 2
    return der_seq(der_int(int.from_bytes(sig[:half], "big")),
                   der_int(int.from_bytes(sig[half:], "big")))


def rsa_public_pem(work, name, modulus, exponent):
    """Writes the RSA public key (CKA_MODULUS, CKA_PUBLIC_EXPONENT) as PEM."""
    der_path = os.path.join(work, name + ".rsapub.der")
    pem_path = os.path.join(work, name + ".pub.pem")
    with open(der_path, "wb") as f:
        f.write(der_seq(der_int(int.from_bytes(modulus, "big")),
                        der_int(int.from_bytes(exponent, "big"))))
    run(["openssl", "rsa", "-RSAPublicKey_in", "-inform", "DER", "-in", der_path,
         "-pubout", "-out", pem_path])
    return pem_path


def ec_public_pem(work, name, ec_point):
    """Writes a P-256 public key (CKA_EC_POINT, DER OCTET STRING) as PEM."""
    point = bytes(ec_point)
    if point[0] == 0x04 and len(point) != 65:      # DER-wrapped uncompressed point
        point = point[2:] if point[1] < 0x80 else point[3:]
    check(len(point) == 65 and point[0] == 0x04, "%s: CKA_EC_POINT is not an uncompressed P-256 point" % name)
    algid = der_seq(bytes.fromhex("06072a8648ce3d0201"), P256_OID_DER)
    spki = der_seq(algid, b"\x03" + der_len(len(point) + 1) + b"\x00" + point)
    der_path = os.path.join(work, name + ".spki.der")
    pem_path = os.path.join(work, name + ".pub.pem")
    with open(der_path, "wb") as f:
        f.write(spki)
    run(["openssl", "pkey", "-pubin", "-inform", "DER", "-in", der_path, "-out", pem_path])
    return pem_path


# ---- the checks ------------------------------------------------------------
class Test:
    def __init__(self, module, token, pin, keys, work):
        self.module, self.token, self.pin, self.keys, self.work = module, token, pin, keys, work
        self.lib = PyKCS11.PyKCS11Lib()
        self.session = None
        self.generated = []

    def path(self, name):
        return os.path.join(self.work, name)

    def write(self, name, data):
        with open(self.path(name), "wb") as f:
            f.write(bytes(data))
        return self.path(name)

    def open(self):
        self.lib.load(self.module)
        info = self.lib.getInfo()
        log("library: %s / %s, Cryptoki %s" % (info.manufacturerID.strip(),
            info.libraryDescription.strip(), info.cryptokiVersion))
        slot = None
        for s in self.lib.getSlotList(tokenPresent=True):
            if self.lib.getTokenInfo(s).label.strip() == self.token:
                slot = s
        check(slot is not None, "no slot holds token %r" % self.token)
        log("token %r found in slot %d" % (self.token, slot))
        self.session = self.lib.openSession(slot, PyKCS11.CKF_SERIAL_SESSION | PyKCS11.CKF_RW_SESSION)
        self.session.login(self.pin)
        log("logged in as user")

    def relogin(self):
        """PKCS#11 2.40 §5.6 C_CloseSession: closing the last session logs
        the application out, so a new session starts public and C_Login
        works again (not CKR_USER_ALREADY_LOGGED_IN)."""
        slot = self.session.getSessionInfo().slotID
        self.session.closeSession()
        self.session = self.lib.openSession(slot, PyKCS11.CKF_SERIAL_SESSION | PyKCS11.CKF_RW_SESSION)
        state = self.session.getSessionInfo().state
        check(state == PyKCS11.CKS_RW_PUBLIC_SESSION,
              "a new session after the last one closed is in state %s, not CKS_RW_PUBLIC_SESSION"
              % PyKCS11.CKS.get(state, state))
        self.session.login(self.pin)
        check(self.session.getSessionInfo().state == PyKCS11.CKS_RW_USER_FUNCTIONS, "C_Login did not log in")
        log("closing the last session logged out; a new session logged in again")

    def random(self):
        """C_SeedRandom mixes the seed in (CKR_OK); C_GenerateRandom gives
        the bytes asked for, different each time."""
        self.session.seedRandom(os.urandom(32))
        a, b = bytes(self.session.generateRandom(48)), bytes(self.session.generateRandom(48))
        check(len(a) == 48 and len(b) == 48 and a != b, "C_GenerateRandom: %d and %d bytes, %s"
              % (len(a), len(b), "equal" if a == b else "different"))
        log("C_SeedRandom accepted 32 bytes; C_GenerateRandom gave 48 random bytes twice")

    def find(self, cls, label):
        objs = self.session.findObjects([(PyKCS11.CKA_CLASS, cls), (PyKCS11.CKA_LABEL, label)])
        check(len(objs) == 1, "expected one %s object %r, found %d" % (PyKCS11.CKO[cls], label, len(objs)))
        return objs[0]

    def list_objects(self):
        listed = set()
        for obj in self.session.findObjects():
            cls, label, key_id = self.session.getAttributeValue(
                obj, [PyKCS11.CKA_CLASS, PyKCS11.CKA_LABEL, PyKCS11.CKA_ID])
            listed.add((PyKCS11.CKO[cls], label, bytes(key_id).hex()))
        for label, key_id in (("rsa2048", "01"), ("rsa3072", "02"), ("p256", "03")):
            for cls in ("CKO_PRIVATE_KEY", "CKO_PUBLIC_KEY"):
                check((cls, label, key_id) in listed, "%s %s (id %s) not listed" % (cls, label, key_id))
        log("objects listed: %s" % ", ".join("%s %s id=%s" % o for o in sorted(listed)))

    def sign_verify(self, what, priv, pub, mech, pub_pem, openssl_md, ecdsa=False):
        msg = os.urandom(1500)
        other = os.urandom(1500)
        sig = bytes(self.session.sign(priv, msg, PyKCS11.Mechanism(mech, None)))
        check(self.session.verify(pub, msg, sig, PyKCS11.Mechanism(mech, None)),
              "%s: C_Verify rejects the token's signature" % what)
        check(not self.session.verify(pub, other, sig, PyKCS11.Mechanism(mech, None)),
              "%s: C_Verify accepts the signature for another message" % what)
        msg_file = self.write(what + ".msg", msg)
        other_file = self.write(what + ".other", other)
        sig_file = self.write(what + ".sig", ecdsa_raw_to_der(sig) if ecdsa else sig)
        check(openssl_verifies(["dgst", "-" + openssl_md, "-verify", pub_pem, "-signature", sig_file, msg_file]),
              "%s: openssl does not verify the signature" % what)
        check(not openssl_verifies(["dgst", "-" + openssl_md, "-verify", pub_pem, "-signature", sig_file, other_file]),
              "%s: openssl verifies the signature for another message" % what)
        log("%s: signed (%d bytes), verified by C_Verify and by openssl" % (what, len(sig)))

    def oaep_decrypt(self, what, priv, pub_pem, md, ck_hash, ck_mgf, pub=None):
        plain = b"cryptoserver pykcs11 secret " + os.urandom(8).hex().encode()
        if pub is not None:    # C_Encrypt through the module (local public-key operation)
            cipher = bytes(self.session.encrypt(pub, plain, PyKCS11.RSAOAEPMechanism(ck_hash, ck_mgf)))
            how = "C_Encrypt"
        else:
            cipher = run(["openssl", "pkeyutl", "-encrypt", "-pubin", "-inkey", pub_pem,
                          "-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:" + md,
                          "-pkeyopt", "rsa_mgf1_md:" + md], stdin=plain)
            how = "openssl"
        out = bytes(self.session.decrypt(priv, cipher, PyKCS11.RSAOAEPMechanism(ck_hash, ck_mgf)))
        check(out == plain, "%s: OAEP %s decryption gave other bytes" % (what, md))
        log("%s: RSA-OAEP %s ciphertext made by %s decrypted on the token" % (what, md.upper(), how))

    def demo_keys(self):
        priv = self.find(PyKCS11.CKO_PRIVATE_KEY, "rsa2048")
        pub = self.find(PyKCS11.CKO_PUBLIC_KEY, "rsa2048")
        pem = os.path.join(self.keys, "rsa2048.pub.pem")
        self.sign_verify("rsa2048 CKM_SHA256_RSA_PKCS", priv, pub, PyKCS11.CKM_SHA256_RSA_PKCS, pem, "sha256")
        self.oaep_decrypt("rsa2048", priv, pem, "sha256", PyKCS11.CKM_SHA256, PyKCS11.CKG_MGF1_SHA256)
        self.oaep_decrypt("rsa2048", priv, pem, "sha1", PyKCS11.CKM_SHA_1, PyKCS11.CKG_MGF1_SHA1)
        ecpriv = self.find(PyKCS11.CKO_PRIVATE_KEY, "p256")
        ecpub = self.find(PyKCS11.CKO_PUBLIC_KEY, "p256")
        self.sign_verify("p256 CKM_ECDSA_SHA256", ecpriv, ecpub, PyKCS11.CKM_ECDSA_SHA256,
                         os.path.join(self.keys, "p256.pub.pem"), "sha256", ecdsa=True)

    def digest_key(self, ecpriv, pub_pem):
        """C_DigestKey (PKCS#11 2.40 §5.10) between C_DigestUpdate calls: the
        value of an ECDH secret key derived on the token (CKD_NULL: Z) with
        a P-256 key (CKA_DERIVE) and a peer key OpenSSL made; the digest must be
        SHA-256 of the data around Z as OpenSSL derives it.  A private key is
        not a secret key: CKR_KEY_INDIGESTIBLE."""
        import hashlib
        peer = self.path("peer.pem")
        run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", peer])
        point = run(["openssl", "pkey", "-in", peer, "-pubout", "-outform", "DER"])[-65:]
        z = run(["openssl", "pkeyutl", "-derive", "-inkey", peer, "-peerkey", pub_pem])
        secret = self.session.deriveKey(ecpriv, [
            (PyKCS11.CKA_CLASS, PyKCS11.CKO_SECRET_KEY), (PyKCS11.CKA_KEY_TYPE, PyKCS11.CKK_GENERIC_SECRET),
            (PyKCS11.CKA_TOKEN, False), (PyKCS11.CKA_SENSITIVE, True), (PyKCS11.CKA_EXTRACTABLE, False)],
            PyKCS11.ECDH1_DERIVE_Mechanism(point))
        digest = bytes(self.session.digestSession(PyKCS11.Mechanism(PyKCS11.CKM_SHA256))
                       .update(b"before ").digestKey(secret).update(b" after").final())
        check(digest == hashlib.sha256(b"before " + z + b" after").digest(),
              "C_DigestKey: the digest is not SHA-256 of the data around the ECDH value openssl derives")
        try:
            self.session.digestSession(PyKCS11.Mechanism(PyKCS11.CKM_SHA256)).digestKey(ecpriv)
            raise CheckFailed("C_DigestKey of a private key succeeded")
        except PyKCS11.PyKCS11Error as e:
            check(e.value == PyKCS11.CKR_KEY_INDIGESTIBLE,
                  "C_DigestKey of a private key: %s, not CKR_KEY_INDIGESTIBLE" % e)
        self.session.destroyObject(secret)
        log("C_DigestKey: an ECDH secret key digested between updates matches openssl's Z; "
            "a private key is CKR_KEY_INDIGESTIBLE")

    # -- key generation --------------------------------------------------------
    def generate(self, what, mech, pub_tmpl, priv_tmpl):
        try:
            pub, priv = self.session.generateKeyPair(pub_tmpl, priv_tmpl, mecha=mech)
        except PyKCS11.PyKCS11Error as e:
            if e.value == PyKCS11.CKR_FUNCTION_NOT_SUPPORTED:
                log("KEYGEN NOT SUPPORTED: C_GenerateKeyPair (%s) returned CKR_FUNCTION_NOT_SUPPORTED"
                    " -- the module has no key generation yet" % what)
                sys.exit(EXIT_NO_KEYGEN)
            raise CheckFailed("%s: C_GenerateKeyPair failed: %s" % (what, e))
        self.generated += [pub, priv]
        return pub, priv

    def destroy(self, what, label, *objs):
        for obj in objs:
            self.session.destroyObject(obj)
            self.generated.remove(obj)
        left = self.session.findObjects([(PyKCS11.CKA_LABEL, label)])
        check(not left, "%s: %d objects labelled %r left after C_DestroyObject" % (what, len(left), label))
        log("%s: both objects destroyed; none labelled %r is left" % (what, label))

    def keygen_rsa(self, token):
        kind = "token" if token else "session"
        label = "pykcs11-rsa-%s-%s" % (kind, os.urandom(3).hex())
        what = "generated RSA 2048 %s key %s" % (kind, label)
        common = [(PyKCS11.CKA_TOKEN, token), (PyKCS11.CKA_LABEL, label),
                  (PyKCS11.CKA_ID, bytes.fromhex("7e01" if token else "7e02"))]
        pub_tmpl = common + [(PyKCS11.CKA_CLASS, PyKCS11.CKO_PUBLIC_KEY),
                             (PyKCS11.CKA_KEY_TYPE, PyKCS11.CKK_RSA),
                             (PyKCS11.CKA_MODULUS_BITS, 2048),
                             (PyKCS11.CKA_PUBLIC_EXPONENT, (0x01, 0x00, 0x01)),
                             (PyKCS11.CKA_VERIFY, True), (PyKCS11.CKA_ENCRYPT, True)]
        priv_tmpl = common + [(PyKCS11.CKA_CLASS, PyKCS11.CKO_PRIVATE_KEY),
                              (PyKCS11.CKA_KEY_TYPE, PyKCS11.CKK_RSA),
                              (PyKCS11.CKA_PRIVATE, True), (PyKCS11.CKA_SENSITIVE, True),
                              (PyKCS11.CKA_SIGN, True), (PyKCS11.CKA_DECRYPT, True)]
        pub, priv = self.generate(what, PyKCS11.MechanismRSAGENERATEKEYPAIR, pub_tmpl, priv_tmpl)
        found = self.session.findObjects([(PyKCS11.CKA_LABEL, label)])
        check(len(found) == 2, "%s: find by label gives %d objects, not 2" % (what, len(found)))
        modulus, exponent = self.session.getAttributeValue(
            pub, [PyKCS11.CKA_MODULUS, PyKCS11.CKA_PUBLIC_EXPONENT])
        check(len(bytes(modulus)) == 256, "%s: modulus is %d bytes" % (what, len(bytes(modulus))))
        log("%s: generated (modulus %d bits, e=%d)" % (what, len(bytes(modulus)) * 8,
                                                        int.from_bytes(bytes(exponent), "big")))
        pem = rsa_public_pem(self.work, label, bytes(modulus), bytes(exponent))
        self.sign_verify(what + " CKM_SHA256_RSA_PKCS", priv, pub, PyKCS11.CKM_SHA256_RSA_PKCS, pem, "sha256")
        self.oaep_decrypt(what, priv, pem, "sha256", PyKCS11.CKM_SHA256, PyKCS11.CKG_MGF1_SHA256)
        self.oaep_decrypt(what, priv, pem, "sha256", PyKCS11.CKM_SHA256, PyKCS11.CKG_MGF1_SHA256, pub=pub)
        self.destroy(what, label, priv, pub)

    def keygen_ec(self):
        label = "pykcs11-p256-%s" % os.urandom(3).hex()
        what = "generated EC P-256 token key %s" % label
        common = [(PyKCS11.CKA_TOKEN, True), (PyKCS11.CKA_LABEL, label),
                  (PyKCS11.CKA_ID, bytes.fromhex("7e03"))]
        pub_tmpl = common + [(PyKCS11.CKA_CLASS, PyKCS11.CKO_PUBLIC_KEY),
                             (PyKCS11.CKA_KEY_TYPE, PyKCS11.CKK_EC),
                             (PyKCS11.CKA_EC_PARAMS, P256_OID_DER), (PyKCS11.CKA_VERIFY, True)]
        priv_tmpl = common + [(PyKCS11.CKA_CLASS, PyKCS11.CKO_PRIVATE_KEY),
                              (PyKCS11.CKA_KEY_TYPE, PyKCS11.CKK_EC),
                              (PyKCS11.CKA_PRIVATE, True), (PyKCS11.CKA_SENSITIVE, True),
                              (PyKCS11.CKA_SIGN, True), (PyKCS11.CKA_DERIVE, True)]
        pub, priv = self.generate(what, PyKCS11.MechanismECGENERATEKEYPAIR, pub_tmpl, priv_tmpl)
        point = self.session.getAttributeValue(pub, [PyKCS11.CKA_EC_POINT])[0]
        pem = ec_public_pem(self.work, label, point)
        log("%s: generated" % what)
        self.sign_verify(what + " CKM_ECDSA_SHA256", priv, pub, PyKCS11.CKM_ECDSA_SHA256, pem, "sha256",
                         ecdsa=True)
        self.digest_key(priv, pem)
        self.destroy(what, label, priv, pub)

    def cleanup(self):
        for obj in list(self.generated):
            try:
                self.session.destroyObject(obj)
            except PyKCS11.PyKCS11Error:
                pass
        if self.session is not None:
            try:
                self.session.logout()
                self.session.closeSession()
            except PyKCS11.PyKCS11Error:
                pass


def main():
    if len(sys.argv) != 6:
        sys.stderr.write(__doc__)
        return 2
    test = Test(*sys.argv[1:])
    try:
        test.open()
        test.relogin()
        test.random()
        test.list_objects()
        test.demo_keys()
        log("demo keys: all checks passed")
        test.keygen_rsa(token=True)
        test.keygen_rsa(token=False)
        test.keygen_ec()
        log("key generation: all checks passed")
    except CheckFailed as e:
        log("FAIL: %s" % e)
        return 1
    except PyKCS11.PyKCS11Error as e:
        log("FAIL: PKCS#11 error %s" % e)
        return 1
    finally:
        test.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
