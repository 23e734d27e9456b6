#!/usr/bin/env python3
"""pq-keys.py -- the independent side of pq-keys.sh (issue #23).

dilithium-py (ML-DSA, FIPS 204) and kyber-py (ML-KEM, FIPS 203), pure
Python, check what came out of the PKCS#11 module:
  dsa-verify SET PK MSG SIG CTXHEX   exit 0 when SIG over MSG verifies under
                                      the raw public key PK with context CTXHEX
                                      (pure ML-DSA, FIPS 204 Alg. 3), 1 if not
  kem-encaps SET EK CT SS             encapsulates to the raw ek EK (FIPS 203
                                      Alg. 20): ciphertext to CT, secret to SS
SET is 44, 65, 87 (ML-DSA) or 512, 768, 1024 (ML-KEM).  Files are raw bytes.
"""
import sys

from dilithium_py.ml_dsa import ML_DSA_44, ML_DSA_65, ML_DSA_87
from kyber_py.ml_kem import ML_KEM_512, ML_KEM_768, ML_KEM_1024

DSA = {"44": ML_DSA_44, "65": ML_DSA_65, "87": ML_DSA_87}
KEM = {"512": ML_KEM_512, "768": ML_KEM_768, "1024": ML_KEM_1024}


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def main(argv):
    if len(argv) == 7 and argv[1] == "dsa-verify":
        _, _, ps, pk, msg, sig, ctx = argv
        ok = DSA[ps].verify(read(pk), read(msg), read(sig), ctx=bytes.fromhex(ctx))
        return 0 if ok else 1
    if len(argv) == 6 and argv[1] == "kem-encaps":
        _, _, ps, ek, ct, ss = argv
        k, c = KEM[ps].encaps(read(ek))
        write(ct, c)
        write(ss, k)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
