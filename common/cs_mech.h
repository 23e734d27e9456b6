/*  cs_mech.h — the mechanism table: one row per PKCS#11 mechanism the
 *  project knows, the single source of truth for the module
 *  (C_GetMechanismList/Info, parameter validation, input-length and
 *  output-size rules, the mapping to a job mechanism on the wire) and the
 *  broker (which boards may run a job: board.h, board_runs).
 *
 *  Adding a plain mechanism: a row here, the driver code that runs its wire
 *  mechanism (if new), the list in man/cryptoserver-pkcs11.7 (checked by
 *  tests/unit/test_mech) and a test.  docs/CONTRACTS.md "Mechanisms".
 *
 *  Hash-and-sign rows (hash != 0) are hashed in the module and travel as
 *  their wire mechanism (RSA PKCS#1 v1.5: the DER DigestInfo, RFC 8017
 *  §9.2).  Digest rows (wire 0) run in the module only.
 */
#ifndef CS_MECH_H_INCLUDED
#define CS_MECH_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <p11-kit/pkcs11.h>
#include <openssl/evp.h>

/*  PKCS#11 3.0 numbers the 2.40 header of p11-kit lacks (3.0 §6.1 table 13).  */
#ifndef CKM_SHA3_256_RSA_PKCS
#define CKM_SHA3_256_RSA_PKCS   0x00000060UL
#define CKM_SHA3_384_RSA_PKCS   0x00000061UL
#define CKM_SHA3_512_RSA_PKCS   0x00000062UL
#define CKM_SHA3_224_RSA_PKCS   0x00000066UL
#endif
#ifndef CKM_ECDSA_SHA3_224
#define CKM_ECDSA_SHA3_224      0x00001047UL
#define CKM_ECDSA_SHA3_256      0x00001048UL
#define CKM_ECDSA_SHA3_384      0x00001049UL
#define CKM_ECDSA_SHA3_512      0x0000104AUL
#endif
#ifndef CKM_SHA3_256
#define CKM_SHA3_256            0x000002B0UL
#define CKM_SHA3_224            0x000002B5UL
#define CKM_SHA3_384            0x000002C0UL
#define CKM_SHA3_512            0x000002D0UL
#endif

#define CS_MECH_KEY_NONE ((CK_KEY_TYPE) -1)     /* digests and raw modexp take no key */

/*  The parameter block a mechanism takes (CK_MECHANISM.pParameter).  */
typedef enum {
    CS_MECH_PARAM_NONE,         /* ulParameterLen must be 0 */
    CS_MECH_PARAM_PSS,          /* CK_RSA_PKCS_PSS_PARAMS (2.40 curr. mech. §2.1.14) */
    CS_MECH_PARAM_OAEP,         /* CK_RSA_PKCS_OAEP_PARAMS (§2.1.8) */
    CS_MECH_PARAM_ECDH1,        /* CK_ECDH1_DERIVE_PARAMS (§2.3.16), C_DeriveKey only */
    CS_MECH_PARAM_MODEXP,       /* the vendor operand block (cryptoserver/pkcs11v.h) */
    CS_MECH_PARAM_IV,           /* an IV of one block: AES-CBC 16 bytes (2.40 curr. mech.
                                   §2.10.3), DES3-CBC 8 bytes (Triple-DES) */
    CS_MECH_PARAM_GCM,          /* CK_GCM_PARAMS (§2.10.5): IV 1..256 bytes, AAD, tag bits */
    CS_MECH_PARAM_CTR,          /* CK_AES_CTR_PARAMS (AES-CTR): ulCounterBits 1..128, cb[16] */
    CS_MECH_PARAM_MAC_LEN,      /* CK_MAC_GENERAL_PARAMS (a CK_ULONG): the
                                   MAC length in bytes, 1..the full MAC of the row's wire
                                   (_HMAC_GENERAL, CKM_AES_CMAC_GENERAL) */
    CS_MECH_PARAM_SIGN_CONTEXT, /* none, or CK_SIGN_ADDITIONAL_CONTEXT (PKCS#11 3.2, CKM_ML_DSA):
                                   hedge variant and a context of 0..255 bytes (FIPS 204 §5.2) */
    CS_MECH_PARAM_WRAP_IV,      /* AES key wrap (PKCS#11 3.0 curr. mech.): none (the RFC's default
                                   IV) or an IV of 8 bytes (RFC 3394) / 4 bytes (RFC 5649) */
} cs_mech_param_t;

/*  What the data given to C_Sign/C_Encrypt/C_Decrypt may be, with k the
 *  modulus bytes of the key.  */
typedef enum {
    CS_MECH_IN_NONE,            /* no data (generation, derivation) */
    CS_MECH_IN_ANY,             /* any length: hashed in the module first */
    CS_MECH_IN_PKCS1,           /* sign/encrypt: <= k - 11 bytes (RFC 8017 §8.2.1, §7.2.1) */
    CS_MECH_IN_RAW,             /* <= k bytes (raw RSA) */
    CS_MECH_IN_HASH,            /* exactly the size of the parameter's hash (PSS) */
    CS_MECH_IN_ECDSA,           /* 1..64 bytes (a digest, truncated by the curve) */
    CS_MECH_IN_MESSAGE,         /* the whole message, <= CS_WIRE_MAX_DATA bytes (EdDSA) */
    CS_MECH_IN_OAEP,            /* encrypt: <= k - 2 hLen - 2 bytes (RFC 8017 §7.1.1) */
    CS_MECH_IN_MODEXP,          /* vendor operand block (modexp.h) */
    CS_MECH_IN_BLOCK,           /* secret key: a multiple of the block (cs_mech_block_bytes),
                                   <= CS_MECH_SYM_MAX_DATA (ECB, CBC) */
    CS_MECH_IN_PAD,             /* CBC-PAD: encrypt any length <= CS_MECH_SYM_MAX_DATA, decrypt
                                   a non-zero multiple of the block */
    CS_MECH_IN_SYM,             /* secret key: any length <= CS_MECH_SYM_MAX_DATA (CTR, GCM, MACs) */
    CS_MECH_IN_KW,              /* RFC 3394 §2.2.1: encrypt a multiple of 8 bytes >= 16,
                                   decrypt a multiple of 8 bytes >= 24 */
    CS_MECH_IN_KWP,             /* RFC 5649 §4.1: encrypt 1..CS_MECH_SYM_MAX_DATA bytes,
                                   decrypt a multiple of 8 bytes >= 16 */
} cs_mech_input_t;

/*  The size of what C_Sign/C_Encrypt/C_Decrypt/C_Digest returns (the answer
 *  to a length query with a NULL output).  */
typedef enum {
    CS_MECH_OUT_NONE,           /* no output (generation, derivation) */
    CS_MECH_OUT_MODULUS,        /* k bytes (RSA signatures and ciphertexts) */
    CS_MECH_OUT_MODULUS_MAX,    /* at most k bytes (RSA decryption) */
    CS_MECH_OUT_EC,             /* 2 * field bytes: r || s (ECDSA), R || S (Ed25519) */
    CS_MECH_OUT_DIGEST,         /* the hash size */
    CS_MECH_OUT_MODEXP,         /* vendor: the modulus bytes per item (modexp.h) */
    CS_MECH_OUT_SYM,            /* secret-key cipher: cs_mech_sym_output_len */
    CS_MECH_OUT_KEY,            /* the key's own signature size (ML-DSA: FIPS 204 Table 2, by
                                   parameter set; the module's cs_key_signature_len): 0 here */
    CS_MECH_OUT_MAC,            /* secret-key MAC: cs_mech_mac_len (the _GENERAL rows: their
                                   parameter) */
} cs_mech_output_t;

/*  Secret-key operations (issue #10): the most input one job carries
 *  (bytes); multi-part calls are buffered in the module up to it.  */
#define CS_MECH_SYM_MAX_DATA    (64 * 1024)
#define CS_MECH_AES_BLOCK       16      /* bytes */
#define CS_MECH_DES3_BLOCK      8       /* bytes */
#define CS_MECH_DES3_KEY        24      /* bytes: three DES keys with parity (CKK_DES3) */
#define CS_MECH_DES_KEY         8       /* bytes: one DES key with parity (CKK_DES; legacy,
                                           docs/CONTRACTS.md "Legacy DES") */
/*  The most a secret-key job's result exceeds its input by (bytes): a
 *  padding block, a GCM tag, a key-wrap block, or a whole MAC (HMAC-SHA512:
 *  64).  The module and the broker size their result buffers with it.  */
#define CS_MECH_SYM_OUT_EXTRA   64

typedef struct {
    CK_MECHANISM_TYPE type;     /* what the application asks for */
    const char *name;           /* "CKM_SHA256_RSA_PKCS" */
    CK_MECHANISM_TYPE wire;     /* job mechanism on the wire when flags has CKF_HW (0 is
                                   CKM_RSA_PKCS_KEY_PAIR_GEN); module-only rows (digests,
                                   no CKF_HW) have 0 */
    CK_KEY_TYPE key_type;       /* CKK_RSA, CKK_EC, CKK_EC_EDWARDS, CKK_AES, CKK_DES3,
                                   CKK_GENERIC_SECRET or CS_MECH_KEY_NONE */
    CK_MECHANISM_TYPE hash;     /* hashed in the module first (CKM_SHA256 ...), 0 = none
                                   (HMAC rows too: the board computes the MAC) */
    CK_FLAGS flags;             /* what the module offers: CKF_SIGN|CKF_VERIFY,
                                   CKF_DECRYPT|CKF_ENCRYPT, CKF_DIGEST, CKF_DERIVE,
                                   CKF_GENERATE_KEY_PAIR, with CKF_HW when a board runs it */
    CK_ULONG min_bits;          /* key-size range of the project (bits; EC: field bits; */
    CK_ULONG max_bits;          /* secret keys: BYTES, as PKCS#11 reports them for CKK_AES,
                                   CKK_DES3 and CKK_GENERIC_SECRET); a board's own range narrows
                                   it (0, 0: no key) */
    cs_mech_param_t param;
    cs_mech_input_t input;
    cs_mech_output_t output;
} cs_mech_row_t;

/*  The whole table (static, read-only), *count_p rows, in the order
 *  C_GetMechanismList lists them.  */
const cs_mech_row_t *cs_mech_rows (size_t *count_p);

/*  The row of mechanism `type`, or NULL (→ CKR_MECHANISM_INVALID).  */
const cs_mech_row_t *cs_mech_row (CK_MECHANISM_TYPE type);

/*  cs_mech_name (cs_wire.h) names a mechanism from this table.  */

/*  The OpenSSL digest (static, never freed) of a PKCS#11 hash mechanism:
 *  CKM_SHA_1, CKM_SHA224 .. CKM_SHA512, CKM_SHA3_224 .. CKM_SHA3_512; NULL for
 *  any other type (callers answer CKR_MECHANISM_PARAM_INVALID).  PKCS#11 3.0
 *  curr. mech. §2.16 (SHA-2), §2.25 (SHA-3).  */
const EVP_MD *cs_mech_md (CK_MECHANISM_TYPE hash);

/*  The OpenSSL digest (static) of an MGF1 type, CKG_MGF1_SHA1 ..
 *  CKG_MGF1_SHA512 (PKCS#11 2.40 curr. mech. §2.1.7), or NULL.  */
const EVP_MD *cs_mech_mgf_md (CK_RSA_PKCS_MGF_TYPE mgf);


/*  Checks the length of the data given to a one-shot operation of `row`
 *  (`encrypt`: C_Encrypt, else C_Sign/C_Decrypt) with a key of modulus
 *  `k` bytes (0 for EC keys) and, for CS_MECH_IN_HASH and CS_MECH_IN_OAEP,
 *  the parameter's hash size `h` bytes.  Returns CKR_OK or CKR_DATA_LEN_RANGE
 *  (PKCS#11 2.40 §5.8 C_Encrypt, §5.11 C_Sign).  CS_MECH_IN_ANY and
 *  CS_MECH_IN_MODEXP are always CKR_OK here (checked elsewhere).  */
CK_RV cs_mech_input_check (const cs_mech_row_t *row, bool encrypt, size_t len, size_t k, size_t h);

/*  The output size in bytes of `row` with a key of modulus `k` bytes (RSA)
 *  or field `field` bytes (EC, Ed25519), and hash size `h` (digests);
 *  0 when the row has no fixed output (CS_MECH_OUT_NONE, CS_MECH_OUT_MODEXP).  */
size_t cs_mech_output_len (const cs_mech_row_t *row, size_t k, size_t field, size_t h);

/*  The output size in bytes of a secret-key cipher row (CS_MECH_OUT_SYM)
 *  for `len` bytes of input: ECB/CBC/CTR len; CBC-PAD encrypt the next
 *  multiple of the block above len, decrypt at most len; GCM encrypt
 *  len + tag_bytes, decrypt len - tag_bytes (0 when len < tag_bytes); key
 *  wrap encrypt len + 8 (RFC 5649: len rounded up to 8, + 8), decrypt at
 *  most len - 8 (0 when len < 8).  */
size_t cs_mech_sym_output_len (const cs_mech_row_t *row, bool encrypt, size_t len, size_t tag_bytes);

/*  True when `type` is a secret-key type of the table: CKK_AES,
 *  CKK_DES3, CKK_DES (legacy), CKK_GENERIC_SECRET.  */
bool cs_mech_secret_key_type (CK_KEY_TYPE type);

/*  True when a CKA_VALUE of `len` bytes is a key of secret-key type `type`
 *  (AES: 16, 24 or 32; DES3: 24; DES: 8; generic secret: the range of
 *  CKM_GENERIC_SECRET_KEY_GEN, 16..256).  The one rule for C_CreateObject,
 *  C_GenerateKey and the broker's job check; the generators' rows report
 *  the same range (PKCS#11 2.40 curr. mech.: AES, Triple-DES, generic secret).  */
bool cs_mech_secret_len_ok (CK_KEY_TYPE type, size_t len);

/*  The block size in bytes of a secret-key cipher row: 8 for CKK_DES3, CKK_DES and
 *  for the AES key-wrap rows (semiblocks, RFC 3394 §2), 16 for the other
 *  AES rows, 0 for the rest.  */
size_t cs_mech_block_bytes (const cs_mech_row_t *row);

/*  The full MAC length in bytes of a MAC row (CS_MECH_OUT_MAC): HMAC the
 *  size of its hash (SHA-1 20 ... SHA-512 64, RFC 2104 §2), CMAC 16 (NIST
 *  SP 800-38B); a _GENERAL row the full length of its wire row; 0 for
 *  other rows.  */
size_t cs_mech_mac_len (const cs_mech_row_t *row);

/*  AES-CTR (CK_AES_CTR_PARAMS, 2.40 curr. mech. AES-CTR): true when
 *  `blocks` blocks of keystream from counter block `cb` never carry out of
 *  its low `counter_bits` bits (1..128), so that incrementing the whole
 *  128-bit block (OpenSSL, NIST SP 800-38A B.1) equals incrementing the
 *  counter field.  False (CKR_DATA_LEN_RANGE) when the counter would wrap.  */
bool cs_mech_ctr_fits (const unsigned char cb [16], unsigned long counter_bits, size_t blocks);

/*  RSA key-pair generation: the modulus sizes generation accepts, the one
 *  place that decides them for C_GetMechanismInfo, the module's template
 *  check and the broker's job check.  policy_min is the broker's
 *  keys/rsa-min-bits (0 = CS_MECH_RSA_MIN_BITS_DEFAULT); board_min/board_max
 *  the union of the boards' CKM_RSA_PKCS_KEY_PAIR_GEN range (0 = no limit).
 *  Writes the range to min_p, max_p (bits; sizes inside it must also be a
 *  multiple of 8).  */
#define CS_MECH_RSA_MIN_BITS_DEFAULT 2048       /* keys/rsa-min-bits default */
#define CS_MECH_RSA_GEN_FLOOR        1024       /* lowest keys/rsa-min-bits allowed */
#define CS_MECH_RSA_GEN_MAX          4096       /* largest RSA key generated (cost) */
void cs_mech_rsa_gen_range (CK_ULONG policy_min, CK_ULONG board_min, CK_ULONG board_max,
                            CK_ULONG *min_p, CK_ULONG *max_p);

/*  True when `bits` is inside the range cs_mech_rsa_gen_range gives and a
 *  multiple of 8; else the caller answers CKR_KEY_SIZE_RANGE.  */
bool cs_mech_rsa_gen_ok (CK_ULONG bits, CK_ULONG policy_min, CK_ULONG board_min, CK_ULONG board_max);

#endif
