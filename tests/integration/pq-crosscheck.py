#!/usr/bin/env python3
"""pq-crosscheck.py -- the pq driver against an independent implementation.

Loads DRIVER_DIR/pq.so with ctypes and calls its dispatch table
(shim-drivers/cs_driver.h) as the broker does; checks every parameter set
against the pure-Python dilithium-py (ML-DSA, FIPS 204) and kyber-py
(ML-KEM, FIPS 203):
  - the public key the driver derives from its seed equals theirs;
  - a driver signature (hedged, with a context) verifies with dilithium-py,
    and a deterministic one is byte-equal to dilithium-py's;
  - a dilithium-py signature verifies with the driver (CS_DRV_VERIFY);
  - a driver ciphertext decapsulates with kyber-py to the driver's secret;
  - a kyber-py ciphertext decapsulates with the driver to kyber-py's secret.
Usage: pq-crosscheck.py DRIVER_DIR.  Prints "N passed, 0 failed"; exit 1 on
a failure.
"""
import ctypes as C
import os
import sys

from dilithium_py.ml_dsa import ML_DSA_44, ML_DSA_65, ML_DSA_87
from kyber_py.ml_kem import ML_KEM_512, ML_KEM_768, ML_KEM_1024

CKR_OK = 0
CKM_ML_KEM_KEY_PAIR_GEN, CKM_ML_KEM = 0x0F, 0x17
CKM_ML_DSA_KEY_PAIR_GEN, CKM_ML_DSA = 0x1C, 0x1D
CKH_HEDGE_REQUIRED, CKH_DETERMINISTIC_REQUIRED = 1, 2
ULONG, SIZE, PTR = C.c_ulong, C.c_size_t, C.c_void_p


class Mech(C.Structure):       # cs_drv_mech_t
    _fields_ = [("type", ULONG), ("hash", ULONG), ("mgf", ULONG), ("salt_len", ULONG),
                ("label", PTR), ("label_len", SIZE), ("hedge", ULONG),
                ("context", C.c_char_p), ("context_len", SIZE)]


class Key(C.Structure):        # cs_drv_key_t
    _fields_ = [("id", PTR), ("id_len", SIZE), ("pkcs8", C.c_char_p), ("pkcs8_len", SIZE), ("ref", PTR)]


class Keygen(C.Structure):     # cs_keygen_t
    _fields_ = [("mechanism", ULONG), ("modulus_bits", ULONG), ("public_exponent", PTR),
                ("public_exponent_len", SIZE), ("ec_params", PTR), ("ec_params_len", SIZE),
                ("id", PTR), ("id_len", SIZE), ("label", PTR), ("can_sign", C.c_bool),
                ("can_decrypt", C.c_bool), ("parameter_set", ULONG)]


class Dispatch(C.Structure):   # cs_driver_dispatch_t
    _fields_ = [("id", C.c_int), ("fn", PTR)]


class Driver(C.Structure):     # cs_driver_t
    _fields_ = [("abi_version", C.c_uint), ("type", C.c_char_p), ("description", C.c_char_p),
                ("dispatch", C.POINTER(Dispatch))]


class Board:
    """pq.so loaded, one board and one session open."""

    def __init__(self, driver_dir):
        lib = C.CDLL(os.path.join(driver_dir, "pq.so"))
        lib.cs_driver_entry.restype = C.POINTER(Driver)
        drv = lib.cs_driver_entry().contents
        assert drv.abi_version == 2 and drv.type == b"pq"
        table, i = {}, 0
        while drv.dispatch[i].id:
            table[drv.dispatch[i].id] = drv.dispatch[i].fn
            i += 1
        proto = C.CFUNCTYPE
        fns = {
            1: proto(C.c_int, C.c_char_p, PTR, C.c_char_p, C.POINTER(PTR)),
            5: proto(PTR, PTR),
            10: proto(ULONG, PTR, C.POINTER(Key), C.POINTER(Mech), C.c_char_p, SIZE, C.c_char_p, C.POINTER(SIZE)),
            12: proto(ULONG, PTR, C.POINTER(Keygen), C.POINTER(C.POINTER(C.c_ubyte)), C.POINTER(SIZE)),
            19: proto(ULONG, PTR, C.POINTER(Key), C.POINTER(ULONG), C.POINTER(ULONG), C.c_char_p, C.POINTER(SIZE)),
            20: proto(ULONG, PTR, C.POINTER(Mech), ULONG, C.c_char_p, SIZE, C.c_char_p, SIZE, C.c_char_p, SIZE),
            21: proto(ULONG, PTR, C.POINTER(Mech), ULONG, C.c_char_p, SIZE, C.c_char_p, C.POINTER(SIZE),
                      C.c_char_p, C.POINTER(SIZE)),
            22: proto(ULONG, PTR, C.POINTER(Key), C.POINTER(Mech), C.c_char_p, SIZE, C.c_char_p, C.POINTER(SIZE)),
        }
        self.fn = {k: t(table[k]) for k, t in fns.items()}
        self.lib = lib
        board = PTR()
        assert self.fn[1](b"pq0", None, b"/tmp", C.byref(board)) == 0
        self.board = board
        self.session = self.fn[5](board)
        assert self.session

    def generate(self, mechanism, parameter_set):
        gen = Keygen(mechanism=mechanism, parameter_set=parameter_set)
        out, n = C.POINTER(C.c_ubyte)(), SIZE()
        assert self.fn[12](self.session, C.byref(gen), C.byref(out), C.byref(n)) == CKR_OK
        der = bytes(out[:n.value])
        C.CDLL(None).free(out)
        return der

    def public(self, der):
        key, kt, ps = Key(pkcs8=der, pkcs8_len=len(der)), ULONG(), ULONG()
        buf, n = C.create_string_buffer(4096), SIZE(4096)
        assert self.fn[19](self.session, C.byref(key), C.byref(kt), C.byref(ps), buf, C.byref(n)) == CKR_OK
        return buf.raw[:n.value]

    def sign(self, der, msg, ctx, hedge):
        key = Key(pkcs8=der, pkcs8_len=len(der))
        mech = Mech(type=CKM_ML_DSA, hedge=hedge, context=ctx, context_len=len(ctx))
        buf, n = C.create_string_buffer(5000), SIZE(5000)
        assert self.fn[10](self.session, C.byref(key), C.byref(mech), msg, len(msg), buf, C.byref(n)) == CKR_OK
        return buf.raw[:n.value]

    def verify(self, ps, pk, msg, ctx, sig):
        mech = Mech(type=CKM_ML_DSA, context=ctx, context_len=len(ctx))
        return self.fn[20](self.session, C.byref(mech), ps, pk, len(pk), msg, len(msg), sig, len(sig))

    def encaps(self, ps, ek):
        mech = Mech(type=CKM_ML_KEM)
        ct, nc, k, nk = C.create_string_buffer(1600), SIZE(1600), C.create_string_buffer(32), SIZE(32)
        assert self.fn[21](self.session, C.byref(mech), ps, ek, len(ek), ct, C.byref(nc), k, C.byref(nk)) == CKR_OK
        return ct.raw[:nc.value], k.raw[:nk.value]

    def decaps(self, der, ct):
        key, mech = Key(pkcs8=der, pkcs8_len=len(der)), Mech(type=CKM_ML_KEM)
        k, nk = C.create_string_buffer(32), SIZE(32)
        assert self.fn[22](self.session, C.byref(key), C.byref(mech), ct, len(ct), k, C.byref(nk)) == CKR_OK
        return k.raw[:nk.value]


def seed_of(der):
    """The seed of the driver's seed-only PKCS#8 (docs/PQ-DRIVER.md): the
    content of the [0] IMPLICIT OCTET STRING (tag 0x80) that ends it."""
    size = 64 if der[-66:-64] == b"\x80\x40" else 32
    assert der[-size - 2:-size] == bytes([0x80, size]), der.hex()
    return der[-size:]


def main(driver_dir):
    board = Board(driver_dir)
    passed, failed = 0, 0

    def check(ok, what):
        nonlocal passed, failed
        print(("ok    " if ok else "FAIL  ") + what)
        passed, failed = passed + bool(ok), failed + (not ok)

    msg, ctx = b"cross-checked message", b"cryptoserver context"
    for ps, name, ref in ((1, "ML-DSA-44", ML_DSA_44), (2, "ML-DSA-65", ML_DSA_65), (3, "ML-DSA-87", ML_DSA_87)):
        der = board.generate(CKM_ML_DSA_KEY_PAIR_GEN, ps)
        pk = board.public(der)
        ref_pk, ref_sk = ref.key_derive(seed_of(der))
        check(pk == ref_pk, f"{name}: public key of the seed equals dilithium-py's")
        sig = board.sign(der, msg, ctx, CKH_HEDGE_REQUIRED)
        check(ref.verify(pk, msg, sig, ctx=ctx), f"{name}: driver signature verifies with dilithium-py")
        check(not ref.verify(pk, msg, sig, ctx=b"other"), f"{name}: ... and not under another context")
        det = board.sign(der, msg, ctx, CKH_DETERMINISTIC_REQUIRED)
        check(det == ref.sign(ref_sk, msg, ctx=ctx, deterministic=True),
              f"{name}: deterministic signature equals dilithium-py's")
        theirs = ref.sign(ref_sk, msg, ctx=ctx)
        check(board.verify(ps, pk, msg, ctx, theirs) == CKR_OK, f"{name}: dilithium-py signature verifies with the driver")
    for ps, name, ref in ((1, "ML-KEM-512", ML_KEM_512), (2, "ML-KEM-768", ML_KEM_768), (3, "ML-KEM-1024", ML_KEM_1024)):
        der = board.generate(CKM_ML_KEM_KEY_PAIR_GEN, ps)
        ek = board.public(der)
        ref_ek, ref_dk = ref.key_derive(seed_of(der))
        check(ek == ref_ek, f"{name}: encapsulation key of the seed equals kyber-py's")
        ct, k = board.encaps(ps, ek)
        check(ref.decaps(ref_dk, ct) == k, f"{name}: driver ciphertext decapsulates with kyber-py")
        k2, ct2 = ref.encaps(ek)
        check(board.decaps(der, ct2) == k2, f"{name}: kyber-py ciphertext decapsulates with the driver")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
