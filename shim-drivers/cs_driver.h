/*  cs_driver.h — the shim driver ABI: how the broker drives one kind of board.
 *
 *  A driver is a shared object named "<type>.so" in the broker's driver
 *  directory.  It exports one symbol, cs_driver_entry(), returning a static
 *  cs_driver_t: an ABI version and a dispatch table of { id, function } pairs
 *  ending in { 0, NULL }.  Ids are never reused; optional functions may be
 *  missing.  (After OpenSSL providers and OpenSC; docs/DESIGN.md §2.)
 *
 *  Objects and threads:
 *    - cs_board_t   one configured board (one "drivers" entry of the broker
 *                   config).  Opened once at broker start from the main thread;
 *                   read-only afterwards except for what the driver guards.
 *    - cs_drv_session_t one worker thread's context on a board (e.g. its own
 *                   PKCS#11 session).  Used only by the thread that opened it.
 *
 *  Error regime (docs/DESIGN.md §6): life-cycle functions return 0 on success
 *  and -1 on failure (after logging why with zsys_error).  Crypto operations
 *  return the CK_RV that becomes the job's result on the wire.
 */
#ifndef CS_DRIVER_H_INCLUDED
#define CS_DRIVER_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <czmq.h>
#include <p11-kit/pkcs11.h>
#include "cryptoserver/pkcs11v.h"    /* PKCS#11 3.2 values the header may lack */

#ifdef __cplusplus
extern "C" {
#endif

#define CS_DRIVER_ABI_VERSION 2       /* 2: keys as cs_drv_key_t, capabilities, generation */
#define CS_DRIVER_ENTRY_SYMBOL "cs_driver_entry"
#define CS_KEY_ID_MAX 64        /* bytes of CKA_ID we accept */

typedef struct cs_board_s cs_board_t;
typedef struct cs_drv_session_s cs_drv_session_t;

/*  A raw mechanism with its parameters (mirrors cs.Mechanism on the wire).  */
typedef struct {
    CK_MECHANISM_TYPE type;          /* CKM_RSA_PKCS, CKM_RSA_PKCS_PSS, CKM_RSA_X_509,
                                        CKM_ECDSA, CKM_RSA_PKCS_OAEP, CKM_EDDSA
                                        (CKM_ECDH1_DERIVE runs as CS_DRV_DERIVE_KEY) */
    CK_MECHANISM_TYPE hash;          /* PSS/OAEP hash, CKM_SHA256 ... */
    CK_RSA_PKCS_MGF_TYPE mgf;        /* PSS/OAEP CKG_MGF1_* */
    CK_ULONG salt_len;               /* PSS sLen, bytes */
    const unsigned char *label;      /* OAEP label, may be NULL */
    size_t label_len;                /* bytes */
    /* CKM_ML_DSA only (PKCS#11 3.2 CK_SIGN_ADDITIONAL_CONTEXT; FIPS 204 §5.2).
     * Appended after v2's fields: drivers that predate them never read them,
     * and a caller that zero-initialises the structure asks for the default. */
    CK_ULONG hedge;                  /* CKH_HEDGE_PREFERRED (0), CKH_HEDGE_REQUIRED,
                                        CKH_DETERMINISTIC_REQUIRED */
    const unsigned char *context;    /* ctx, 0..255 bytes; may be NULL when context_len is 0 */
    size_t context_len;              /* bytes */
} cs_drv_mech_t;

/*  One mechanism a board supports, as PKCS#11 CK_MECHANISM_INFO reports it.  */
typedef struct {
    CK_MECHANISM_TYPE type;
    CK_ULONG min_key_bits;
    CK_ULONG max_key_bits;
    CK_FLAGS flags;                  /* CKF_SIGN, CKF_DECRYPT, ... */
} cs_mech_info_t;

/*  Public description of one key a board holds.  Every pointer is owned by
 *  the structure; release arrays with cs_key_info_free_array().  */
typedef struct {
    unsigned char id [CS_KEY_ID_MAX];   /* CKA_ID */
    size_t id_len;
    char *label;                        /* CKA_LABEL, NUL-terminated, may be NULL */
    CK_KEY_TYPE key_type;               /* CKK_RSA, CKK_EC or CKK_EC_EDWARDS */
    CK_ULONG bits;                      /* modulus bits, or field size for EC */
    unsigned char *modulus;             /* RSA, big-endian */
    size_t modulus_len;
    unsigned char *public_exponent;     /* RSA, big-endian */
    size_t public_exponent_len;
    unsigned char *ec_params;           /* EC, EdDSA: DER OID of the curve */
    size_t ec_params_len;
    unsigned char *ec_point;            /* EC, EdDSA: DER OCTET STRING of the point */
    size_t ec_point_len;
    bool can_sign;
    bool can_decrypt;
    bool can_derive;                    /* CKA_DERIVE of the private key (ECDH).  Added in
                                           v2's trailing padding: the size and the offsets of
                                           the fields above are unchanged, and drivers that
                                           zero their arrays (all in-tree ones) report false */
} cs_key_info_t;

/*  Frees the members of one key description and zeroes it; NULL-safe.  */
static inline void
cs_key_info_free_members (cs_key_info_t *key)
{
    if (!key)
        return;
    free (key->label);
    free (key->modulus);
    free (key->public_exponent);
    free (key->ec_params);
    free (key->ec_point);
    memset (key, 0, sizeof *key);
}

/*  Frees the members of count keys and the array itself; NULL-safe.  */
static inline void
cs_key_info_free_array (cs_key_info_t *keys, size_t count)
{
    if (!keys)
        return;
    for (size_t i = 0; i < count; i++)
        cs_key_info_free_members (&keys [i]);
    free (keys);
}

/*  The key of one sign or decrypt operation (ABI v2).  Exactly one form:
 *    resident  id/id_len: the CKA_ID of a private key that lives on the board
 *              (found there, or generated there with CS_DRV_GENERATE_RESIDENT);
 *    material  pkcs8/pkcs8_len: the private key as PKCS#8 DER (a keystore key
 *              or a per-request key, docs/DESIGN.md §1).  `ref` is a stable name of
 *              that key (the keystore ref "ks:..."): the driver may cache what
 *              it made of the material under it, per session.  ref == NULL is
 *              a per-request key: use it for this call only, cache nothing.
 *              ML-DSA and ML-KEM keys are PKCS#8 with the seed, the expanded
 *              key or both (RFC 9881 and the LAMPS ML-KEM profile; the exact
 *              shapes in docs/PQ-DRIVER.md).
 *  Everything is borrowed for the call; the caller wipes the material.  */
typedef struct {
    const unsigned char *id;            /* resident: CKA_ID, else NULL */
    size_t id_len;
    const unsigned char *pkcs8;         /* material: PKCS#8 DER, else NULL */
    size_t pkcs8_len;
    const char *ref;                    /* material: cache name, NULL = do not cache */
} cs_drv_key_t;

/*  Key-type bits of cs_caps_t.material_types.  */
#define CS_KT_RSA          0x1u         /* CKK_RSA */
#define CS_KT_EC           0x2u         /* CKK_EC: P-256, P-384, P-521 */
#define CS_KT_EC_EDWARDS   0x4u         /* CKK_EC_EDWARDS: Ed25519 */
#define CS_KT_ML_DSA       0x8u         /* CKK_ML_DSA: ML-DSA-44/65/87 (FIPS 204) */
#define CS_KT_ML_KEM      0x10u         /* CKK_ML_KEM: ML-KEM-512/768/1024 (FIPS 203) */
#define CS_KT_EC_MONTGOMERY 0x20u       /* CKK_EC_MONTGOMERY: X25519, X448 (RFC 7748) */

/*  Capability flags of cs_caps_t.flags.  */
#define CS_CAP_KEY_MATERIAL      0x1u   /* sign/decrypt with cs_drv_key_t material */
#define CS_CAP_GENERATE_RESIDENT 0x2u   /* CS_DRV_GENERATE_RESIDENT */
#define CS_CAP_GENERATE_MATERIAL 0x4u   /* CS_DRV_GENERATE_MATERIAL */
#define CS_CAP_DERIVE            0x8u   /* CS_DRV_DERIVE_KEY: ECDH with CKK_EC keys (resident,
                                           and material when CS_CAP_KEY_MATERIAL has CS_KT_EC) */
#define CS_CAP_MODEXP           0x10u   /* CS_DRV_MODEXP: raw modular exponentiation (issue #12) */
#define CS_CAP_KEM              0x20u   /* CS_DRV_ENCAPSULATE and CS_DRV_DECAPSULATE (issue #23) */
#define CS_CAP_PUBLIC_OPS       0x40u   /* CS_DRV_VERIFY and CS_DRV_PUBLIC_KEY (issue #23) */

/*  What a board can do beyond its resident keys; read once at open and used
 *  by the broker for routing (docs/DESIGN.md §2).  */
typedef struct {
    unsigned flags;                     /* CS_CAP_* */
    unsigned material_types;            /* CS_KT_* it can use as material */
    unsigned generate_types;            /* CS_KT_* it can generate (either form) */
} cs_caps_t;

/*  Maps a PKCS#11 key type to its CS_KT_* bit; 0 when unsupported.  */
static inline unsigned
cs_kt_bit (CK_KEY_TYPE key_type)
{
    return key_type == CKK_RSA ? CS_KT_RSA : key_type == CKK_EC ? CS_KT_EC
         : key_type == CKK_EC_EDWARDS ? CS_KT_EC_EDWARDS : key_type == CKK_EC_MONTGOMERY ? CS_KT_EC_MONTGOMERY
         : key_type == CKK_ML_DSA ? CS_KT_ML_DSA : key_type == CKK_ML_KEM ? CS_KT_ML_KEM : 0;
}

/*  A key pair to generate (C_GenerateKeyPair, PKCS#11 2.40 §2.1.4, §2.3.6,
 *  3.0 §2.3.10).  Borrowed for the call.  */
typedef struct {
    CK_MECHANISM_TYPE mechanism;        /* CKM_RSA_PKCS_KEY_PAIR_GEN, CKM_EC_KEY_PAIR_GEN,
                                           CKM_EC_EDWARDS_KEY_PAIR_GEN */
    CK_ULONG modulus_bits;              /* RSA */
    const unsigned char *public_exponent;   /* RSA, big-endian; NULL = 65537 */
    size_t public_exponent_len;
    const unsigned char *ec_params;     /* EC/EdDSA: DER OID of the curve */
    size_t ec_params_len;
    /* CS_DRV_GENERATE_RESIDENT only: */
    const unsigned char *id;            /* CKA_ID to give the key pair on the board */
    size_t id_len;
    const char *label;                  /* CKA_LABEL on the board, may be NULL */
    bool can_sign;                      /* CKA_SIGN of the private key */
    bool can_decrypt;                   /* CKA_DECRYPT of the private key */
    /* Appended after v2's fields (drivers that predate it never read it): */
    CK_ULONG parameter_set;             /* CKM_ML_DSA_KEY_PAIR_GEN: CKP_ML_DSA_44/65/87;
                                           CKM_ML_KEM_KEY_PAIR_GEN: CKP_ML_KEM_512/768/1024
                                           (CKA_PARAMETER_SET, PKCS#11 3.2) */
} cs_keygen_t;

/*  Function ids of the dispatch table.  Never reuse or renumber an id.
 *  7 and 8 were ABI v1's sign/decrypt by CKA_ID; they are retired.  */
enum {
    CS_DRV_BOARD_OPEN = 1,        /* required */
    CS_DRV_BOARD_CLOSE = 2,       /* required */
    CS_DRV_BOARD_MECHANISMS = 3,  /* required */
    CS_DRV_BOARD_KEYS = 4,        /* required */
    CS_DRV_SESSION_OPEN = 5,      /* required */
    CS_DRV_SESSION_CLOSE = 6,     /* required */
    /* 7, 8: retired (v1 sign/decrypt) */
    CS_DRV_CAPABILITIES = 9,      /* optional: absent = resident keys only */
    CS_DRV_SIGN_KEY = 10,         /* optional */
    CS_DRV_DECRYPT_KEY = 11,      /* optional */
    CS_DRV_GENERATE_MATERIAL = 12,    /* optional; needs CS_CAP_GENERATE_MATERIAL */
    CS_DRV_GENERATE_RESIDENT = 13,    /* optional; needs CS_CAP_GENERATE_RESIDENT */
    CS_DRV_DESTROY_RESIDENT = 14,     /* optional */
    CS_DRV_SESSION_CACHED = 15,       /* optional: keys a session caches (tests, stats) */
    CS_DRV_DERIVE_KEY = 16,           /* optional; needs CS_CAP_DERIVE (issue #4) */
    CS_DRV_MODEXP = 17,               /* optional; needs CS_CAP_MODEXP (issue #12) */
    CS_DRV_SYMMETRIC = 18,            /* optional: secret-key operations (issue #10); the
                                         board's mechanism list names what it runs */
    CS_DRV_PUBLIC_KEY = 19,           /* optional; needs CS_CAP_PUBLIC_OPS (issue #23) */
    CS_DRV_VERIFY = 20,               /* optional; needs CS_CAP_PUBLIC_OPS (issue #23) */
    CS_DRV_ENCAPSULATE = 21,          /* optional; needs CS_CAP_KEM (issue #23) */
    CS_DRV_DECAPSULATE = 22,          /* optional; needs CS_CAP_KEM (issue #23) */
};

/*  Operations of cs_sym_t.  */
#define CS_SYM_ENCRYPT 1
#define CS_SYM_DECRYPT 2
#define CS_SYM_SIGN    3                /* a MAC (HMAC, CMAC) */
/*  The capacity of a CS_DRV_SYMMETRIC output beyond the input (bytes): a
 *  padding block, a GCM tag, a key-wrap block, or a whole MAC (HMAC-SHA512
 *  64).  Equals CS_MECH_SYM_OUT_EXTRA (common/cs_mech.h, checked in
 *  broker/keys/symjobs.c).  */
#define CS_SYM_OUT_EXTRA 64

/*  One secret-key operation with the key's value (issue #10), all of the
 *  input at once (jobs are stateless, docs/DESIGN.md §1).  Everything is
 *  borrowed for the call and wiped by the caller.  */
typedef struct {
    CK_MECHANISM_TYPE mechanism;        /* a secret-key row of common/cs_mech.c that travels as
                                           itself (CKM_AES_*, CKM_DES3_*, CKM_SHA*_HMAC, CKM_AES_CMAC;
                                           never a _GENERAL MAC) */
    int operation;                      /* CS_SYM_* */
    const unsigned char *key;           /* CKA_VALUE: AES 16, 24 or 32 bytes, DES3 24 */
    size_t key_len;
    const unsigned char *iv;            /* CBC: one block (AES 16, DES3 8 bytes); GCM: 1..256
                                           bytes; CTR: the 16-byte counter block; key wrap: NULL
                                           (the RFC's IV), 8 bytes (RFC 3394) or 4 (RFC 5649) */
    size_t iv_bytes;
    const unsigned char *aad;           /* GCM, may be NULL */
    size_t aad_bytes;
    size_t tag_length_bits;                    /* GCM: 96..128, a multiple of 8 */
    const unsigned char *in;
    size_t in_len;
    int partial;                        /* not the last part of a stream (ECB, CBC, CBC-PAD,
                                           CTR): in_len a multiple of the block, and CBC-PAD
                                           adds or removes no padding (docs/CONTRACTS.md
                                           "Multi-part streams") */
} cs_sym_t;

/*  CS_DRV_SYMMETRIC: runs one cs_sym_t.  Output: ciphertext (GCM:
 *  ciphertext || tag), plaintext or the full MAC; on entry *out_len is the
 *  capacity of `out` (at least in_len + CS_SYM_OUT_EXTRA bytes),
 *  on CKR_OK the length written.  Returns CKR_OK; CKR_MECHANISM_INVALID;
 *  CKR_KEY_SIZE_RANGE; CKR_MECHANISM_PARAM_INVALID (IV or tag size);
 *  CKR_DATA_LEN_RANGE (ECB/CBC input not a multiple of the block, key-wrap
 *  input lengths of RFC 3394/5649); CKR_ENCRYPTED_DATA_LEN_RANGE,
 *  CKR_ENCRYPTED_DATA_INVALID (bad padding, GCM tag or key-wrap integrity
 *  check failed);
 *  CKR_BUFFER_TOO_SMALL; CKR_DEVICE_ERROR.  */
typedef CK_RV (cs_drv_symmetric_fn) (cs_drv_session_t *session, const cs_sym_t *op,
                                     unsigned char *out, size_t *out_len);

/*  One raw modular exponentiation (the paper's RPCMODEXP and RPCRSAPCRTEXP,
 *  Berson et al. Figure 2; cryptoserver/pkcs11v.h).  Every number is an
 *  unsigned big-endian byte string (leading zeros allowed); everything is
 *  borrowed for the call and wiped by the caller.  Exactly one form:
 *    plain  modulus != NULL: base^exponent mod modulus, any modulus > 0
 *           (even ones too), any exponent (0 gives 1 mod modulus), a base
 *           at or above the modulus is reduced first;
 *    crt    p != NULL: base^d mod p*q with d given by dp = d mod p-1,
 *           dq = d mod q-1 and qinv = q^-1 mod p (RFC 8017 §5.1.2 2.b);
 *           the base is reduced mod p*q.  public_exponent (may be NULL) is
 *           e of the key: with it the result m is checked as m^e = base mod
 *           p*q; without it as m^(dp^-1 mod p-1) = base mod p and the same
 *           mod q.  A result that fails its check never leaves the driver.  */
typedef struct {
    const unsigned char *base;          /* both forms */
    size_t base_len;
    const unsigned char *exponent, *modulus;            /* plain */
    size_t exponent_len, modulus_len;
    const unsigned char *p, *q, *dp, *dq, *qinv;        /* crt */
    size_t p_len, q_len, dp_len, dq_len, qinv_len;
    const unsigned char *public_exponent;               /* crt, optional */
    size_t public_exponent_len;
} cs_modexp_t;

/*  CS_DRV_MODEXP: runs one cs_modexp_t.  The result is written left-padded
 *  with zeros to exactly the byte length of the modulus (plain: modulus
 *  without its leading zero bytes; crt: of p*q); on entry *out_len is the
 *  capacity of `out`, on CKR_OK the length written.  Returns CKR_OK;
 *  CKR_MECHANISM_PARAM_INVALID (modulus 0, a prime 0 or 1, CRT values that
 *  are not an RSA key: no inverse for the check); CKR_DATA_LEN_RANGE (a
 *  modulus over the board's maximum, mechanism info); CKR_BUFFER_TOO_SMALL;
 *  CKR_HOST_MEMORY; CKR_DEVICE_ERROR (a result that failed its check,
 *  logged).  */
typedef CK_RV (cs_drv_modexp_fn) (cs_drv_session_t *session, const cs_modexp_t *op,
                                  unsigned char *out, size_t *out_len);

/*  CS_DRV_BOARD_OPEN: opens the board named `name` from its config section
 *  `config` (the "drivers/<name>" node of the broker config; relative paths in
 *  it are relative to `base_dir`).  On success stores a new board in *board_p
 *  and returns 0; returns -1 and logs why on failure.  Caller closes the board.  */
typedef int (cs_drv_board_open_fn) (const char *name, zconfig_t *config,
                                    const char *base_dir, cs_board_t **board_p);

/*  CS_DRV_BOARD_CLOSE: closes a board after all its sessions are closed;
 *  NULL-safe; nulls *board_p.  */
typedef void (cs_drv_board_close_fn) (cs_board_t **board_p);

/*  CS_DRV_BOARD_MECHANISMS: stores in *mechs_p a malloc'd array of the board's
 *  usable raw mechanisms and in *count_p its length.  Caller frees the array.
 *  Returns 0, or -1 on failure.  */
typedef int (cs_drv_board_mechanisms_fn) (cs_board_t *board,
                                          cs_mech_info_t **mechs_p, size_t *count_p);

/*  CS_DRV_BOARD_KEYS: stores in *keys_p a malloc'd array of the private keys
 *  the board can use (with their public attributes) and in *count_p its length.
 *  Caller frees with cs_key_info_free_array().  Returns 0, or -1.  */
typedef int (cs_drv_board_keys_fn) (cs_board_t *board,
                                    cs_key_info_t **keys_p, size_t *count_p);

/*  CS_DRV_SESSION_OPEN: opens a worker context on the board, to be used by
 *  the calling thread only.  Returns NULL on failure.  Caller closes it.  */
typedef cs_drv_session_t *(cs_drv_session_open_fn) (cs_board_t *board);

/*  CS_DRV_SESSION_CLOSE: closes a worker context; NULL-safe; nulls *session_p.  */
typedef void (cs_drv_session_close_fn) (cs_drv_session_t **session_p);

/*  CS_DRV_CAPABILITIES: fills *caps.  Returns 0, or -1.  */
typedef int (cs_drv_capabilities_fn) (cs_board_t *board, cs_caps_t *caps);

/*  CS_DRV_SIGN_KEY / CS_DRV_DECRYPT_KEY: runs one raw private-key operation
 *  with `key` (resident or material, see cs_drv_key_t).  `in` is the digest,
 *  DigestInfo, raw block or (CKM_EDDSA, CKM_ML_DSA) whole message to sign, or the
 *  ciphertext to decrypt.  On entry *out_len is the capacity of `out` in
 *  bytes; on CKR_OK it is the length written.  Returns CKR_OK or a CK_RV
 *  (CKR_KEY_HANDLE_INVALID when the board lacks a resident key or cannot parse
 *  the material, CKR_KEY_TYPE_INCONSISTENT, CKR_BUFFER_TOO_SMALL,
 *  CKR_DATA_LEN_RANGE, CKR_ENCRYPTED_DATA_INVALID, CKR_MECHANISM_INVALID,
 *  CKR_MECHANISM_PARAM_INVALID, CKR_DEVICE_ERROR ...).  */
typedef CK_RV (cs_drv_sign_key_fn) (cs_drv_session_t *session, const cs_drv_key_t *key,
                                    const cs_drv_mech_t *mech,
                                    const unsigned char *in, size_t in_len,
                                    unsigned char *out, size_t *out_len);
typedef cs_drv_sign_key_fn cs_drv_decrypt_key_fn;

/*  CS_DRV_DERIVE_KEY: the raw ECDH shared secret Z (PKCS#11 2.40 curr. mech.
 *  §2.3.14 CKM_ECDH1_DERIVE with CKD_NULL; SEC 1 §3.3.1: the X coordinate of
 *  d * Q, left-padded to the field size) of the private key `key` (resident or
 *  material, as for signing; CKK_EC only) and the peer's public point `point`
 *  (point_len bytes, uncompressed 04 || X || Y, not DER).  The driver checks
 *  that the point is on the key's curve.  No KDF here: the module applies it.
 *  On entry *out_len is the capacity of `out` in bytes; on CKR_OK it is the
 *  length written (the field size: 32, 48 or 66).  The caller wipes `out`.
 *  Returns CKR_OK, CKR_KEY_HANDLE_INVALID, CKR_KEY_TYPE_INCONSISTENT (not an EC
 *  key), CKR_KEY_FUNCTION_NOT_PERMITTED (the board key has CKA_DERIVE false),
 *  CKR_MECHANISM_PARAM_INVALID (a point that is malformed or not on the
 *  curve), CKR_BUFFER_TOO_SMALL or CKR_DEVICE_ERROR.  */
typedef CK_RV (cs_drv_derive_key_fn) (cs_drv_session_t *session, const cs_drv_key_t *key,
                                      const unsigned char *point, size_t point_len,
                                      unsigned char *out, size_t *out_len);

/*  CS_DRV_PUBLIC_KEY: the public key of the private key `key` (material
 *  only; resident keys describe theirs in cs_key_info_t): its CKA_KEY_TYPE
 *  in *key_type, its CKA_PARAMETER_SET in *parameter_set, and its bytes in
 *  `out` exactly as the standard encodes them (ML-DSA pk, FIPS 204 Alg. 22:
 *  1312, 1952 or 2592 bytes; ML-KEM ek, FIPS 203 Alg. 16: 800, 1184 or 1568
 *  bytes), which is CKA_VALUE of the PKCS#11 3.2 public key object.  On
 *  entry *out_len is the capacity of `out`, on CKR_OK the length written.
 *  Returns CKR_OK, CKR_KEY_HANDLE_INVALID (material it cannot parse, or a
 *  resident key), CKR_BUFFER_TOO_SMALL or CKR_DEVICE_ERROR.  */
typedef CK_RV (cs_drv_public_key_fn) (cs_drv_session_t *session, const cs_drv_key_t *key,
                                      CK_KEY_TYPE *key_type, CK_ULONG *parameter_set,
                                      unsigned char *out, size_t *out_len);

/*  CS_DRV_VERIFY: verifies signature `sig` (sig_len bytes) over `in`
 *  (in_len bytes, the whole message for CKM_ML_DSA: pure ML-DSA, FIPS 204
 *  Alg. 3, with mech->context) with the public key `pub` (pub_len bytes, as
 *  CS_DRV_PUBLIC_KEY gives it) of parameter set `parameter_set`.  Returns
 *  CKR_OK (valid), CKR_SIGNATURE_INVALID, CKR_SIGNATURE_LEN_RANGE (not the
 *  parameter set's signature size), CKR_MECHANISM_INVALID,
 *  CKR_MECHANISM_PARAM_INVALID (context over 255 bytes),
 *  CKR_DOMAIN_PARAMS_INVALID (unknown parameter set), CKR_PUBLIC_KEY_INVALID
 *  (a key of the wrong size or encoding) or CKR_DEVICE_ERROR.  */
typedef CK_RV (cs_drv_verify_fn) (cs_drv_session_t *session, const cs_drv_mech_t *mech,
                                  CK_ULONG parameter_set,
                                  const unsigned char *pub, size_t pub_len,
                                  const unsigned char *in, size_t in_len,
                                  const unsigned char *sig, size_t sig_len);

/*  CS_DRV_ENCAPSULATE: a fresh shared secret for the holder of the public
 *  key `pub` (pub_len bytes, the ML-KEM ek of `parameter_set`):
 *  ML-KEM.Encaps (FIPS 203 Alg. 20, with its §7.2 input check).  The
 *  ciphertext goes to `ct` (768, 1088 or 1568 bytes) and the 32-byte secret
 *  to `secret`; on entry *ct_len and *secret_len are the capacities, on
 *  CKR_OK the lengths written.  The caller wipes `secret`.  Returns CKR_OK,
 *  CKR_MECHANISM_INVALID (not CKM_ML_KEM), CKR_DOMAIN_PARAMS_INVALID,
 *  CKR_PUBLIC_KEY_INVALID (wrong size, or coefficients not reduced),
 *  CKR_BUFFER_TOO_SMALL or CKR_DEVICE_ERROR (no randomness).  */
typedef CK_RV (cs_drv_encapsulate_fn) (cs_drv_session_t *session, const cs_drv_mech_t *mech,
                                       CK_ULONG parameter_set,
                                       const unsigned char *pub, size_t pub_len,
                                       unsigned char *ct, size_t *ct_len,
                                       unsigned char *secret, size_t *secret_len);

/*  CS_DRV_DECAPSULATE: the shared secret in ciphertext `ct` (ct_len bytes)
 *  for the private key `key` (material, an ML-KEM key): ML-KEM.Decaps
 *  (FIPS 203 Alg. 21).  A ciphertext that was tampered with yields FIPS
 *  203's implicit-rejection secret, not an error.  On entry *secret_len is
 *  the capacity of `secret` (32 bytes needed), on CKR_OK the length written;
 *  the caller wipes it.  Returns CKR_OK, CKR_KEY_HANDLE_INVALID,
 *  CKR_KEY_TYPE_INCONSISTENT (not an ML-KEM key), CKR_MECHANISM_INVALID,
 *  CKR_ENCRYPTED_DATA_LEN_RANGE (not the parameter set's ciphertext size),
 *  CKR_BUFFER_TOO_SMALL or CKR_DEVICE_ERROR.  */
typedef CK_RV (cs_drv_decapsulate_fn) (cs_drv_session_t *session, const cs_drv_key_t *key,
                                       const cs_drv_mech_t *mech,
                                       const unsigned char *ct, size_t ct_len,
                                       unsigned char *secret, size_t *secret_len);

/*  CS_DRV_GENERATE_MATERIAL: generates a key pair in the broker's memory and
 *  stores its private key as PKCS#8 DER in *pkcs8_p (malloc'd, *pkcs8_len_p
 *  bytes; the caller wipes it with OPENSSL_cleanse and frees it).  Returns
 *  CKR_OK, CKR_MECHANISM_INVALID, CKR_KEY_SIZE_RANGE, CKR_DOMAIN_PARAMS_INVALID
 *  (unknown curve), CKR_ATTRIBUTE_VALUE_INVALID (bad exponent, or a
 *  parameter_set that is not a CKP_* of the mechanism), CKR_HOST_MEMORY
 *  or CKR_DEVICE_ERROR.  */
typedef CK_RV (cs_drv_generate_material_fn) (cs_drv_session_t *session, const cs_keygen_t *gen,
                                             unsigned char **pkcs8_p, size_t *pkcs8_len_p);

/*  CS_DRV_GENERATE_RESIDENT: generates a token key pair on the board
 *  (CKA_TOKEN, sensitive, not extractable) with CKA_ID gen->id and fills
 *  *info with its public description (caller frees the members with
 *  cs_key_info_free_members).  Returns the CK_RV of the board.  */
typedef CK_RV (cs_drv_generate_resident_fn) (cs_drv_session_t *session, const cs_keygen_t *gen,
                                             cs_key_info_t *info);

/*  CS_DRV_DESTROY_RESIDENT: destroys the private and public key objects
 *  with CKA_ID id (id_len bytes) on the board.  Returns CKR_OK (also when
 *  none exists) or the board's CK_RV.  */
typedef CK_RV (cs_drv_destroy_resident_fn) (cs_drv_session_t *session,
                                            const unsigned char *id, size_t id_len);

/*  CS_DRV_SESSION_CACHED: how many keys the session holds in its cache of
 *  material keys (parsed keys, imported session objects).  */
typedef size_t (cs_drv_session_cached_fn) (cs_drv_session_t *session);

typedef void (*cs_driver_fn_t) (void);

typedef struct {
    int id;                          /* CS_DRV_*; 0 ends the table */
    cs_driver_fn_t fn;
} cs_driver_dispatch_t;

typedef struct {
    unsigned abi_version;            /* CS_DRIVER_ABI_VERSION the driver was built for */
    const char *type;                /* "pkcs11", "sim", ... = the config's "type" */
    const char *description;         /* one line, for logs */
    const cs_driver_dispatch_t *dispatch;
} cs_driver_t;

/*  The one exported symbol of a driver .so.  */
typedef const cs_driver_t *(cs_driver_entry_fn) (void);

/*  Defines a driver's cs_driver_t and its one exported symbol,
 *  cs_driver_entry(), at the end of the driver's source file:
 *  CS_DRIVER_EXPORT ("openssl", "one line for logs", s_dispatch).  */
#define CS_DRIVER_EXPORT(TYPE, DESCRIPTION, DISPATCH) \
    static const cs_driver_t s_driver = { CS_DRIVER_ABI_VERSION, TYPE, DESCRIPTION, DISPATCH }; \
    const cs_driver_t *cs_driver_entry (void); \
    const cs_driver_t *cs_driver_entry (void) { return &s_driver; }

/*  Looks up function `id` in a driver's table; NULL when missing.  */
static inline cs_driver_fn_t
cs_driver_lookup (const cs_driver_t *driver, int id)
{
    for (const cs_driver_dispatch_t *d = driver->dispatch; d && d->id; d++)
        if (d->id == id)
            return d->fn;
    return NULL;
}

#ifdef __cplusplus
}
#endif
#endif
