#!/usr/bin/env python3
"""acvp_subset.py -- cuts acvp-subset.txt out of the NIST ACVP vector files.

The vectors are NIST's (ACVP-Server, gen-val/json-files, vsId 42, the FIPS 203
and FIPS 204 final revisions); the copies used here are the ones that the
PyPI source distributions dilithium-py 1.5.1 and kyber-py 1.2.0 ship in their
assets/ folders.  Usage: acvp_subset.py DILITHIUM_ASSETS KYBER_ASSETS > acvp-subset.txt

Output: one line per field, "<parameter set> <test> <tcId> <field> <value>",
values in hex (testPassed as 01/00).  ML-DSA sigGen/sigVer are the ACVP
"internal" interface (ML-DSA.Sign_internal / Verify_internal, FIPS 204
Alg. 7/8, message M' given as is).
"""
import json
import sys


def load(folder, name):
    with open(f"{folder}/{name}/internalProjection.json") as f:
        return json.load(f)


def emit(ps, test, tc, fields):
    for k, v in fields:
        if isinstance(v, bool):
            v = "01" if v else "00"
        print(f"{ps} {test} {tc} {k} {v.lower()}")


def main(dil, kyb):
    print("# NIST ACVP vectors (usnistgov/ACVP-Server gen-val/json-files, FIPS 203/204),")
    print("# a subset cut by acvp_subset.py from the copies in the PyPI sdists")
    print("# dilithium-py 1.5.1 and kyber-py 1.2.0 (assets/*/internalProjection.json).")
    for g in load(dil, "ML-DSA-keyGen-FIPS204")["testGroups"]:
        for t in g["tests"][:2]:
            emit(g["parameterSet"], "keyGen", t["tcId"], [("seed", t["seed"]), ("pk", t["pk"]), ("sk", t["sk"])])
    for g in load(dil, "ML-DSA-sigGen-FIPS204")["testGroups"]:
        t = min(g["tests"], key=lambda t: len(t["message"]))
        f = [("sk", t["sk"]), ("message", t["message"])]
        f.append(("rnd", "00" * 32 if g["deterministic"] else t["rnd"]))
        emit(g["parameterSet"], "sigGen", t["tcId"], f + [("signature", t["signature"])])
    for g in load(dil, "ML-DSA-sigVer-FIPS204")["testGroups"]:
        good = [t for t in g["tests"] if t["testPassed"]][:1]
        bad = [t for t in g["tests"] if t["reason"] == "modify signature"][:1]
        for t in good + bad:
            emit(g["parameterSet"], "sigVer", t["tcId"], [("pk", g["pk"]), ("message", t["message"]),
                                                          ("signature", t["signature"]), ("testPassed", t["testPassed"])])
    for g in load(kyb, "ML-KEM-keyGen-FIPS203")["testGroups"]:
        for t in g["tests"][:2]:
            emit(g["parameterSet"], "keyGen", t["tcId"], [("d", t["d"]), ("z", t["z"]), ("ek", t["ek"]), ("dk", t["dk"])])
    for g in load(kyb, "ML-KEM-encapDecap-FIPS203")["testGroups"]:
        if g["function"] == "encapsulation":
            t = g["tests"][0]
            emit(g["parameterSet"], "encap", t["tcId"], [("ek", t["ek"]), ("m", t["m"]), ("c", t["c"]), ("k", t["k"])])
        else:
            good = [t for t in g["tests"] if t["reason"] == "no modification"][:1]
            bad = [t for t in g["tests"] if t["reason"] == "modify ciphertext"][:1]
            for t in good + bad:
                emit(g["parameterSet"], "decap", t["tcId"], [("dk", g["dk"]), ("c", t["c"]), ("k", t["k"])])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
