/*  cs_mech.c — the mechanism table (cs_mech.h) and its length rules.  */
#include <stdio.h>
#include <openssl/evp.h>
#include "cs_mech.h"
#include "cs_wire.h"
#include "cryptoserver/pkcs11v.h"

/*  CKF_HW: the private-key side runs on the broker's boards, not in the
 *  module (OpenSC's pkcs11-tool --test only tests signing with HW mechanisms).  */
#define S_SIGN    (CKF_HW | CKF_SIGN | CKF_VERIFY)
#define S_CRYPT   (CKF_HW | CKF_DECRYPT | CKF_ENCRYPT)
#define S_GEN     (CKF_HW | CKF_GENERATE_KEY_PAIR)
#define S_VENDOR  (CKF_HW | CKF_DIGEST)
#define S_WRAP    (CKF_WRAP | CKF_UNWRAP)                   /* secret keys (pkcs11-module/wrap.c) */
#define S_RECOVER (CKF_SIGN_RECOVER | CKF_VERIFY_RECOVER)     /* raw RSA only (pkcs11-module/recover.c) */

#define RSA_MIN   512
#define RSA_MAX   CS_WIRE_MAX_RSA_BITS
#define EC_MIN    256                   /* P-256 .. P-521 (field bits) */
#define EC_MAX    521
#define ED_MIN    255                   /* Ed25519 (RFC 8032 §5.1) .. */
#define ED_MAX    448                   /* Ed448 (RFC 8032 §5.2) */
#define X_MIN     255                   /* X25519 (RFC 7748 §5) .. */
#define X_MAX     448                   /* X448 */
#define PQ_MIN    1                     /* CKP_ML_DSA_44, CKP_ML_KEM_512 .. */
#define PQ_MAX    3                     /* CKP_ML_DSA_87, CKP_ML_KEM_1024 (PKCS#11 3.2) */

#define ROW(T) CKM_ ## T, "CKM_" #T
#define P_NONE    CS_MECH_PARAM_NONE
#define SIGN_RSA(T, WIRE, HASH, PARAM, IN) \
    { ROW (T), WIRE, CKK_RSA, HASH, S_SIGN, RSA_MIN, RSA_MAX, PARAM, IN, CS_MECH_OUT_MODULUS }
#define SIGN_EC(T, HASH, IN) \
    { ROW (T), CKM_ECDSA, CKK_EC, HASH, S_SIGN, EC_MIN, EC_MAX, P_NONE, IN, CS_MECH_OUT_EC }
#define DIGEST(T) \
    { ROW (T), 0, CS_MECH_KEY_NONE, CKM_ ## T, CKF_DIGEST, 0, 0, P_NONE, CS_MECH_IN_ANY, CS_MECH_OUT_DIGEST }
#define MODEXP(T) \
    { ROW (T), CKM_ ## T, CS_MECH_KEY_NONE, 0, S_VENDOR, 0, 0, CS_MECH_PARAM_MODEXP, \
      CS_MECH_IN_MODEXP, CS_MECH_OUT_MODEXP }

/*  Secret keys (issue #10): sizes in bytes (PKCS#11 2.40 curr. mech.
 *  §2.10 AES: 16..32; Triple-DES: 24, three keys with odd parity;
 *  generic secret / HMAC: 16..256 here).  AES, DES3 and HMAC run on boards
 *  (the openssl driver); the session-key generators run in the module (its
 *  RNG), so they are not CKF_HW.  */
#define AES_MIN   16
#define AES_MAX   32
#define GS_MIN    16
#define GS_MAX    256
#define DES3_LEN  CS_MECH_DES3_KEY
#define DES_LEN   CS_MECH_DES_KEY
#define AES(T, PARAM, IN) \
    { ROW (T), CKM_ ## T, CKK_AES, 0, S_CRYPT, AES_MIN, AES_MAX, PARAM, IN, CS_MECH_OUT_SYM }
#define AES_KW(T, IN) \
    { ROW (T), CKM_ ## T, CKK_AES, 0, S_CRYPT | S_WRAP, AES_MIN, AES_MAX, CS_MECH_PARAM_WRAP_IV, IN, \
      CS_MECH_OUT_SYM }
#define DES3(T, PARAM, IN) \
    { ROW (T), CKM_ ## T, CKK_DES3, 0, S_CRYPT, DES3_LEN, DES3_LEN, PARAM, IN, CS_MECH_OUT_SYM }
/*  CBC-PAD also wraps (PKCS#11 2.40 curr. mech. §2.10.4, §2.13: the padded
    CKA_VALUE of a secret key, or the PKCS#8 of a private key).  */
#define CBC_PAD_WRAP(T, KT, MIN, MAX) \
    { ROW (T), CKM_ ## T, KT, 0, S_CRYPT | S_WRAP, MIN, MAX, CS_MECH_PARAM_IV, CS_MECH_IN_PAD, CS_MECH_OUT_SYM }
/*  Single DES (FIPS 46-3, withdrawn 2005: legacy, docs/CONTRACTS.md "Legacy
    DES"): OpenSSL 3 keeps it in its legacy provider, which the openssl
    driver loads unless a board says legacy-des = false.  */
#define DES(T, PARAM, IN) \
    { ROW (T), CKM_ ## T, CKK_DES, 0, S_CRYPT, DES_LEN, DES_LEN, PARAM, IN, CS_MECH_OUT_SYM }
/*  MACs: a _GENERAL row (CK_MAC_GENERAL_PARAMS) travels as its full-length
    row; the module cuts the MAC to the length asked for.  */
#define MAC(T, WIRE, KT, MIN, MAX, PARAM) \
    { ROW (T), WIRE, KT, 0, S_SIGN, MIN, MAX, PARAM, CS_MECH_IN_SYM, CS_MECH_OUT_MAC }
#define HMAC_ROWS(H) \
    MAC (H ## _HMAC, CKM_ ## H ## _HMAC, CKK_GENERIC_SECRET, GS_MIN, GS_MAX, P_NONE), \
    MAC (H ## _HMAC_GENERAL, CKM_ ## H ## _HMAC, CKK_GENERIC_SECRET, GS_MIN, GS_MAX, CS_MECH_PARAM_MAC_LEN)

static const cs_mech_row_t s_rows [] = {
    { ROW (RSA_PKCS), CKM_RSA_PKCS, CKK_RSA, 0, S_SIGN | S_CRYPT | S_RECOVER, RSA_MIN, RSA_MAX, P_NONE,
      CS_MECH_IN_PKCS1, CS_MECH_OUT_MODULUS },
    { ROW (RSA_X_509), CKM_RSA_X_509, CKK_RSA, 0, S_SIGN | S_CRYPT | S_RECOVER, RSA_MIN, RSA_MAX, P_NONE,
      CS_MECH_IN_RAW, CS_MECH_OUT_MODULUS },
    SIGN_RSA (SHA1_RSA_PKCS,       CKM_RSA_PKCS, CKM_SHA_1,  P_NONE, CS_MECH_IN_ANY),
    SIGN_RSA (SHA224_RSA_PKCS,     CKM_RSA_PKCS, CKM_SHA224, P_NONE, CS_MECH_IN_ANY),
    SIGN_RSA (SHA256_RSA_PKCS,     CKM_RSA_PKCS, CKM_SHA256, P_NONE, CS_MECH_IN_ANY),
    SIGN_RSA (SHA384_RSA_PKCS,     CKM_RSA_PKCS, CKM_SHA384, P_NONE, CS_MECH_IN_ANY),
    SIGN_RSA (SHA512_RSA_PKCS,     CKM_RSA_PKCS, CKM_SHA512, P_NONE, CS_MECH_IN_ANY),
    SIGN_RSA (SHA3_224_RSA_PKCS,   CKM_RSA_PKCS, CKM_SHA3_224, P_NONE, CS_MECH_IN_ANY),
    SIGN_RSA (SHA3_256_RSA_PKCS,   CKM_RSA_PKCS, CKM_SHA3_256, P_NONE, CS_MECH_IN_ANY),
    SIGN_RSA (SHA3_384_RSA_PKCS,   CKM_RSA_PKCS, CKM_SHA3_384, P_NONE, CS_MECH_IN_ANY),
    SIGN_RSA (SHA3_512_RSA_PKCS,   CKM_RSA_PKCS, CKM_SHA3_512, P_NONE, CS_MECH_IN_ANY),
    SIGN_RSA (RSA_PKCS_PSS,        CKM_RSA_PKCS_PSS, 0,          CS_MECH_PARAM_PSS, CS_MECH_IN_HASH),
    SIGN_RSA (SHA1_RSA_PKCS_PSS,   CKM_RSA_PKCS_PSS, CKM_SHA_1,  CS_MECH_PARAM_PSS, CS_MECH_IN_ANY),
    SIGN_RSA (SHA224_RSA_PKCS_PSS, CKM_RSA_PKCS_PSS, CKM_SHA224, CS_MECH_PARAM_PSS, CS_MECH_IN_ANY),
    SIGN_RSA (SHA256_RSA_PKCS_PSS, CKM_RSA_PKCS_PSS, CKM_SHA256, CS_MECH_PARAM_PSS, CS_MECH_IN_ANY),
    SIGN_RSA (SHA384_RSA_PKCS_PSS, CKM_RSA_PKCS_PSS, CKM_SHA384, CS_MECH_PARAM_PSS, CS_MECH_IN_ANY),
    SIGN_RSA (SHA512_RSA_PKCS_PSS, CKM_RSA_PKCS_PSS, CKM_SHA512, CS_MECH_PARAM_PSS, CS_MECH_IN_ANY),
    { ROW (RSA_PKCS_OAEP), CKM_RSA_PKCS_OAEP, CKK_RSA, 0, S_CRYPT | S_WRAP, RSA_MIN, RSA_MAX, CS_MECH_PARAM_OAEP,
      CS_MECH_IN_OAEP, CS_MECH_OUT_MODULUS },
    SIGN_EC (ECDSA,        0,          CS_MECH_IN_ECDSA),
    SIGN_EC (ECDSA_SHA1,   CKM_SHA_1,  CS_MECH_IN_ANY),
    SIGN_EC (ECDSA_SHA224, CKM_SHA224, CS_MECH_IN_ANY),
    SIGN_EC (ECDSA_SHA256, CKM_SHA256, CS_MECH_IN_ANY),
    SIGN_EC (ECDSA_SHA384, CKM_SHA384, CS_MECH_IN_ANY),
    SIGN_EC (ECDSA_SHA512, CKM_SHA512, CS_MECH_IN_ANY),
    SIGN_EC (ECDSA_SHA3_224, CKM_SHA3_224, CS_MECH_IN_ANY),
    SIGN_EC (ECDSA_SHA3_256, CKM_SHA3_256, CS_MECH_IN_ANY),
    SIGN_EC (ECDSA_SHA3_384, CKM_SHA3_384, CS_MECH_IN_ANY),
    SIGN_EC (ECDSA_SHA3_512, CKM_SHA3_512, CS_MECH_IN_ANY),
    { ROW (EDDSA), CKM_EDDSA, CKK_EC_EDWARDS, 0, S_SIGN, ED_MIN, ED_MAX, P_NONE,
      CS_MECH_IN_MESSAGE, CS_MECH_OUT_EC },
    /*  PKCS#11 3.2 ML-DSA (FIPS 204), pure: the whole message and its context
        go to a board (the pq driver); verification too (the module has no
        ML-DSA code).  Key "sizes" are the range of CKP_ML_DSA_* parameter
        sets, 1..3, as the board reports them (docs/PQ-DRIVER.md).  */
    { ROW (ML_DSA), CKM_ML_DSA, CKK_ML_DSA, 0, S_SIGN, PQ_MIN, PQ_MAX, CS_MECH_PARAM_SIGN_CONTEXT,
      CS_MECH_IN_MESSAGE, CS_MECH_OUT_KEY },
    { ROW (ML_DSA_KEY_PAIR_GEN), CKM_ML_DSA_KEY_PAIR_GEN, CKK_ML_DSA, 0, S_GEN, PQ_MIN, PQ_MAX, P_NONE,
      CS_MECH_IN_NONE, CS_MECH_OUT_NONE },
    /*  PKCS#11 3.2 ML-KEM (FIPS 203): C_EncapsulateKey / C_DecapsulateKey
        (pkcs11-module/kem.c) on a board, no parameter.  */
    { ROW (ML_KEM), CKM_ML_KEM, CKK_ML_KEM, 0, CKF_HW | CKF_ENCAPSULATE | CKF_DECAPSULATE, PQ_MIN, PQ_MAX, P_NONE,
      CS_MECH_IN_NONE, CS_MECH_OUT_NONE },
    { ROW (ML_KEM_KEY_PAIR_GEN), CKM_ML_KEM_KEY_PAIR_GEN, CKK_ML_KEM, 0, S_GEN, PQ_MIN, PQ_MAX, P_NONE,
      CS_MECH_IN_NONE, CS_MECH_OUT_NONE },
    /*  CKK_EC keys, and CKK_EC_MONTGOMERY keys (PKCS#11 3.0 §2.3.7; X25519
        from 255 bits): pkcs11-module/derive.c checks the key type.  */
    { ROW (ECDH1_DERIVE), CKM_ECDH1_DERIVE, CKK_EC, 0, CKF_HW | CKF_DERIVE, X_MIN, EC_MAX,
      CS_MECH_PARAM_ECDH1, CS_MECH_IN_NONE, CS_MECH_OUT_NONE },
    { ROW (RSA_PKCS_KEY_PAIR_GEN), CKM_RSA_PKCS_KEY_PAIR_GEN, CKK_RSA, 0, S_GEN,
      CS_MECH_RSA_GEN_FLOOR, CS_MECH_RSA_GEN_MAX, P_NONE, CS_MECH_IN_NONE, CS_MECH_OUT_NONE },
    { ROW (EC_KEY_PAIR_GEN), CKM_EC_KEY_PAIR_GEN, CKK_EC, 0, S_GEN, EC_MIN, EC_MAX, P_NONE,
      CS_MECH_IN_NONE, CS_MECH_OUT_NONE },
    { ROW (EC_EDWARDS_KEY_PAIR_GEN), CKM_EC_EDWARDS_KEY_PAIR_GEN, CKK_EC_EDWARDS, 0, S_GEN,
      ED_MIN, ED_MAX, P_NONE, CS_MECH_IN_NONE, CS_MECH_OUT_NONE },
    { ROW (EC_MONTGOMERY_KEY_PAIR_GEN), CKM_EC_MONTGOMERY_KEY_PAIR_GEN, CKK_EC_MONTGOMERY, 0, S_GEN,
      X_MIN, X_MAX, P_NONE, CS_MECH_IN_NONE, CS_MECH_OUT_NONE },
    AES (AES_ECB,     P_NONE,             CS_MECH_IN_BLOCK),
    AES (AES_CBC,     CS_MECH_PARAM_IV,   CS_MECH_IN_BLOCK),
    CBC_PAD_WRAP (AES_CBC_PAD, CKK_AES, AES_MIN, AES_MAX),
    AES (AES_GCM,     CS_MECH_PARAM_GCM,  CS_MECH_IN_SYM),
    AES (AES_CTR,     CS_MECH_PARAM_CTR,  CS_MECH_IN_SYM),
    /*  Key wrap: data (C_Encrypt/C_Decrypt) and C_WrapKey/C_UnwrapKey
        (pkcs11-module/wrap.c, docs/CONTRACTS.md "Wrapping").  */
    AES_KW (AES_KEY_WRAP,     CS_MECH_IN_KW),
    AES_KW (AES_KEY_WRAP_PAD, CS_MECH_IN_KWP),
    MAC (AES_CMAC,         CKM_AES_CMAC, CKK_AES, AES_MIN, AES_MAX, P_NONE),
    MAC (AES_CMAC_GENERAL, CKM_AES_CMAC, CKK_AES, AES_MIN, AES_MAX, CS_MECH_PARAM_MAC_LEN),
    DES3 (DES3_ECB,     P_NONE,           CS_MECH_IN_BLOCK),
    DES3 (DES3_CBC,     CS_MECH_PARAM_IV, CS_MECH_IN_BLOCK),
    CBC_PAD_WRAP (DES3_CBC_PAD, CKK_DES3, DES3_LEN, DES3_LEN),
    DES (DES_ECB,       P_NONE,           CS_MECH_IN_BLOCK),
    DES (DES_CBC,       CS_MECH_PARAM_IV, CS_MECH_IN_BLOCK),
    DES (DES_CBC_PAD,   CS_MECH_PARAM_IV, CS_MECH_IN_PAD),
    HMAC_ROWS (SHA_1),
    HMAC_ROWS (SHA224),
    HMAC_ROWS (SHA256),
    HMAC_ROWS (SHA384),
    HMAC_ROWS (SHA512),
    { ROW (AES_KEY_GEN), 0, CKK_AES, 0, CKF_GENERATE, AES_MIN, AES_MAX, P_NONE, CS_MECH_IN_NONE,
      CS_MECH_OUT_NONE },
    { ROW (DES3_KEY_GEN), 0, CKK_DES3, 0, CKF_GENERATE, DES3_LEN, DES3_LEN, P_NONE, CS_MECH_IN_NONE,
      CS_MECH_OUT_NONE },
    { ROW (DES_KEY_GEN), 0, CKK_DES, 0, CKF_GENERATE, DES_LEN, DES_LEN, P_NONE, CS_MECH_IN_NONE,
      CS_MECH_OUT_NONE },
    { ROW (GENERIC_SECRET_KEY_GEN), 0, CKK_GENERIC_SECRET, 0, CKF_GENERATE, GS_MIN, GS_MAX, P_NONE,
      CS_MECH_IN_NONE, CS_MECH_OUT_NONE },
    DIGEST (SHA_1),
    DIGEST (SHA224),
    DIGEST (SHA256),
    DIGEST (SHA384),
    DIGEST (SHA512),
    DIGEST (SHA3_224),
    DIGEST (SHA3_256),
    DIGEST (SHA3_384),
    DIGEST (SHA3_512),
    /*  Vendor raw modexp (cryptoserver/pkcs11v.h): C_Digest on the boards.
        Last: generic callers (pkcs11-tool --test) digest with the first
        CKF_DIGEST mechanism of the list, which must then be a real digest.  */
    MODEXP (CS_MODEXP),
    MODEXP (CS_MODEXP_ARRAY),
    MODEXP (CS_RSA_CRT),
    MODEXP (CS_RSA_CRT_ARRAY),
    MODEXP (CS_MULTI_MODEXP_ARRAY),
};

const cs_mech_row_t *
cs_mech_rows (size_t *count_p)
{
    *count_p = sizeof s_rows / sizeof s_rows [0];
    return s_rows;
}

const cs_mech_row_t *
cs_mech_row (CK_MECHANISM_TYPE type)
{
    for (size_t i = 0; i < sizeof s_rows / sizeof s_rows [0]; i++)
        if (s_rows [i].type == type)
            return &s_rows [i];
    return NULL;
}

/*  Declared in cs_wire.h (logs, metrics): the table's name, else "CKM_0x...".  */
const char *
cs_mech_name (unsigned long mechanism)
{
    const cs_mech_row_t *row = cs_mech_row (mechanism);
    static __thread char buf [32];
    if (row)
        return row->name;
    snprintf (buf, sizeof buf, "CKM_0x%lx", mechanism);
    return buf;
}

CK_RV
cs_mech_input_check (const cs_mech_row_t *row, bool encrypt, size_t len, size_t k, size_t h)
{
    bool ok = true;
    switch (row->input) {
        case CS_MECH_IN_PKCS1:  ok = len + 11 <= k; break;
        case CS_MECH_IN_RAW:    ok = len <= k; break;
        case CS_MECH_IN_HASH:   ok = len == h; break;
        case CS_MECH_IN_ECDSA:  ok = len > 0 && len <= 64; break;
        case CS_MECH_IN_MESSAGE: ok = len <= CS_WIRE_MAX_DATA; break;
        case CS_MECH_IN_OAEP:   ok = !encrypt || len + 2 * h + 2 <= k; break;
        case CS_MECH_IN_NONE:   ok = len == 0; break;
        case CS_MECH_IN_BLOCK:  ok = len % cs_mech_block_bytes (row) == 0 && len <= CS_MECH_SYM_MAX_DATA; break;
        case CS_MECH_IN_PAD:    ok = len <= CS_MECH_SYM_MAX_DATA
                                  && (encrypt || (len % cs_mech_block_bytes (row) == 0 && len > 0)); break;
        case CS_MECH_IN_SYM:    ok = len <= CS_MECH_SYM_MAX_DATA; break;
        case CS_MECH_IN_KW:     ok = len <= CS_MECH_SYM_MAX_DATA && len % 8 == 0 && len >= (encrypt ? 16u : 24u);
                                break;
        case CS_MECH_IN_KWP:    ok = len <= CS_MECH_SYM_MAX_DATA
                                  && (encrypt ? len > 0 : len % 8 == 0 && len >= 16); break;
        case CS_MECH_IN_ANY:
        case CS_MECH_IN_MODEXP: break;
    }
    return ok ? CKR_OK : CKR_DATA_LEN_RANGE;
}

size_t
cs_mech_output_len (const cs_mech_row_t *row, size_t k, size_t field, size_t h)
{
    switch (row->output) {
        case CS_MECH_OUT_MODULUS:
        case CS_MECH_OUT_MODULUS_MAX: return k;
        case CS_MECH_OUT_EC:          return 2 * field;
        case CS_MECH_OUT_DIGEST:
        case CS_MECH_OUT_MAC:         return h;
        case CS_MECH_OUT_SYM:         return 0;       /* cs_mech_sym_output_len */
        case CS_MECH_OUT_KEY:         return 0;       /* the key's (ML-DSA: the module's cs_key_signature_len) */
        case CS_MECH_OUT_NONE:
        case CS_MECH_OUT_MODEXP:      return 0;
    }
    return 0;
}

size_t
cs_mech_sym_output_len (const cs_mech_row_t *row, bool encrypt, size_t len, size_t tag_bytes)
{
    size_t block = cs_mech_block_bytes (row);
    if (row->input == CS_MECH_IN_PAD && encrypt)
        return (len / block + 1) * block;
    if (row->type == CKM_AES_GCM)
        return encrypt ? len + tag_bytes : len >= tag_bytes ? len - tag_bytes : 0;
    if (row->input == CS_MECH_IN_KW || row->input == CS_MECH_IN_KWP)
        return encrypt ? (len + 7) / 8 * 8 + 8 : len >= 8 ? len - 8 : 0;
    return len;
}

bool
cs_mech_secret_key_type (CK_KEY_TYPE type)
{
    return type == CKK_AES || type == CKK_DES3 || type == CKK_DES || type == CKK_GENERIC_SECRET;
}

bool
cs_mech_secret_len_ok (CK_KEY_TYPE type, size_t len)
{
    switch (type) {
        case CKK_AES:            return len == 16 || len == 24 || len == 32;
        case CKK_DES3:           return len == DES3_LEN;
        case CKK_DES:            return len == DES_LEN;
        case CKK_GENERIC_SECRET: return len >= GS_MIN && len <= GS_MAX;
        default:                 return false;
    }
}

size_t
cs_mech_block_bytes (const cs_mech_row_t *row)
{
    if (row->key_type == CKK_DES3 || row->key_type == CKK_DES || row->input == CS_MECH_IN_KW || row->input == CS_MECH_IN_KWP)
        return CS_MECH_DES3_BLOCK;
    return row->key_type == CKK_AES ? CS_MECH_AES_BLOCK : 0;
}

size_t
cs_mech_mac_len (const cs_mech_row_t *row)
{
    if (row->output != CS_MECH_OUT_MAC)
        return 0;
    switch (row->wire) {
        case CKM_SHA_1_HMAC:  return 20;
        case CKM_SHA224_HMAC: return 28;
        case CKM_SHA256_HMAC: return 32;
        case CKM_SHA384_HMAC: return 48;
        case CKM_SHA512_HMAC: return 64;
        case CKM_AES_CMAC:    return 16;
        default:              return 0;
    }
}

bool
cs_mech_ctr_fits (const unsigned char cb [16], unsigned long counter_bits, size_t blocks)
{
    /*  Adds blocks - 1 (the last block's offset) to the counter field, byte
        by byte from the end, and looks for a carry out of the field.  */
    size_t add = blocks ? blocks - 1 : 0;
    unsigned carry = 0;
    if (counter_bits == 0 || counter_bits > 128)
        return false;
    if (counter_bits == 128)
        return true;            /* the field is the whole block: both wrap alike */
    for (unsigned long bit = 0, i = 15; bit < counter_bits; bit += 8, i--) {
        unsigned field = counter_bits - bit >= 8 ? 8 : (unsigned) (counter_bits - bit);
        unsigned v = (cb [i] & ((1u << field) - 1)) + (unsigned) (add & 0xff) + carry;
        add >>= 8;
        carry = v >> field;
    }
    return carry == 0 && add == 0;
}

void
cs_mech_rsa_gen_range (CK_ULONG policy_min, CK_ULONG board_min, CK_ULONG board_max,
                       CK_ULONG *min_p, CK_ULONG *max_p)
{
    CK_ULONG min = policy_min ? policy_min : CS_MECH_RSA_MIN_BITS_DEFAULT;
    CK_ULONG max = CS_MECH_RSA_GEN_MAX;
    if (min < CS_MECH_RSA_GEN_FLOOR)
        min = CS_MECH_RSA_GEN_FLOOR;
    if (board_min > min)
        min = board_min;
    if (board_max && board_max < max)
        max = board_max;
    *min_p = min;
    *max_p = max;
}

bool
cs_mech_rsa_gen_ok (CK_ULONG bits, CK_ULONG policy_min, CK_ULONG board_min, CK_ULONG board_max)
{
    CK_ULONG min, max;
    cs_mech_rsa_gen_range (policy_min, board_min, board_max, &min, &max);
    return bits >= min && bits <= max && bits % 8 == 0;
}

/* ---- hash mechanisms to OpenSSL digests ----------------------------- */

const EVP_MD *
cs_mech_md (CK_MECHANISM_TYPE hash)
{
    switch (hash) {
        case CKM_SHA_1:  return EVP_sha1 ();
        case CKM_SHA224: return EVP_sha224 ();
        case CKM_SHA256: return EVP_sha256 ();
        case CKM_SHA384: return EVP_sha384 ();
        case CKM_SHA512: return EVP_sha512 ();
        case CKM_SHA3_224: return EVP_sha3_224 ();
        case CKM_SHA3_256: return EVP_sha3_256 ();
        case CKM_SHA3_384: return EVP_sha3_384 ();
        case CKM_SHA3_512: return EVP_sha3_512 ();
        default:         return NULL;
    }
}

const EVP_MD *
cs_mech_mgf_md (CK_RSA_PKCS_MGF_TYPE mgf)
{
    switch (mgf) {
        case CKG_MGF1_SHA1:   return EVP_sha1 ();
        case CKG_MGF1_SHA224: return EVP_sha224 ();
        case CKG_MGF1_SHA256: return EVP_sha256 ();
        case CKG_MGF1_SHA384: return EVP_sha384 ();
        case CKG_MGF1_SHA512: return EVP_sha512 ();
        default:              return NULL;
    }
}
