/*  cs-sym-mechs-rules.c — the cs-sym-mechs client's checks of what the
 *  module offers and refuses (cs-sym-mechs.h): C_GetMechanismList/Info of
 *  the new rows, parameter blocks and input lengths the spec refuses, a
 *  CTR counter that would wrap, key types that do not match, and
 *  C_GenerateKey with CKM_DES3_KEY_GEN.
 */
#include <string.h>
#include <openssl/rand.h>
#include "cs-sym-mechs.h"

/*  Every new mechanism is listed, with its flags and key sizes in bytes.  */
void
sm_infos (CK_SLOT_ID slot)
{
    static const struct {
        CK_MECHANISM_TYPE type;
        CK_FLAGS flags;
        CK_ULONG min, max;
    } want [] = {
        { CKM_AES_CTR, CKF_ENCRYPT | CKF_DECRYPT, 16, 32 },
        { CKM_AES_KEY_WRAP, CKF_ENCRYPT | CKF_DECRYPT | CKF_WRAP | CKF_UNWRAP, 16, 32 },
        { CKM_AES_KEY_WRAP_PAD, CKF_ENCRYPT | CKF_DECRYPT | CKF_WRAP | CKF_UNWRAP, 16, 32 },
        { CKM_AES_CMAC, CKF_SIGN | CKF_VERIFY, 16, 32 },
        { CKM_AES_CMAC_GENERAL, CKF_SIGN | CKF_VERIFY, 16, 32 },
        { CKM_DES3_ECB, CKF_ENCRYPT | CKF_DECRYPT, 24, 24 },
        { CKM_DES3_CBC, CKF_ENCRYPT | CKF_DECRYPT, 24, 24 },
        /*  strict usage separation (the demo tenant's): CBC-PAD wraps but never
         *  unwraps, a padding oracle (cs_usage_unwrap_oracle), so no CKF_UNWRAP  */
        { CKM_DES3_CBC_PAD, CKF_ENCRYPT | CKF_DECRYPT | CKF_WRAP, 24, 24 },
        { CKM_DES3_KEY_GEN, CKF_GENERATE, 24, 24 },
        { CKM_AES_KEY_GEN, CKF_GENERATE, 16, 32 },
        { CKM_SHA_1_HMAC, CKF_SIGN | CKF_VERIFY, 16, 256 },
        { CKM_SHA_1_HMAC_GENERAL, CKF_SIGN | CKF_VERIFY, 16, 256 },
        { CKM_SHA224_HMAC, CKF_SIGN | CKF_VERIFY, 16, 256 },
        { CKM_SHA224_HMAC_GENERAL, CKF_SIGN | CKF_VERIFY, 16, 256 },
        { CKM_SHA256_HMAC_GENERAL, CKF_SIGN | CKF_VERIFY, 16, 256 },
        { CKM_SHA384_HMAC, CKF_SIGN | CKF_VERIFY, 16, 256 },
        { CKM_SHA384_HMAC_GENERAL, CKF_SIGN | CKF_VERIFY, 16, 256 },
        { CKM_SHA512_HMAC, CKF_SIGN | CKF_VERIFY, 16, 256 },
        { CKM_SHA512_HMAC_GENERAL, CKF_SIGN | CKF_VERIFY, 16, 256 },
        { CKM_GENERIC_SECRET_KEY_GEN, CKF_GENERATE, 16, 256 },
    };
    CK_MECHANISM_TYPE list [256];
    CK_ULONG count = 256;
    CHECK (p11->C_GetMechanismList (slot, list, &count), "C_GetMechanismList");
    for (size_t i = 0; i < sizeof want / sizeof want [0]; i++) {
        CK_MECHANISM_INFO info;
        bool listed = false;
        for (CK_ULONG j = 0; j < count; j++)
            listed |= list [j] == want [i].type;
        CHECK (p11->C_GetMechanismInfo (slot, want [i].type, &info), "C_GetMechanismInfo");
        if (!listed || (info.flags & want [i].flags) != want [i].flags || info.ulMinKeySize != want [i].min
        ||  info.ulMaxKeySize != want [i].max
        ||  (info.flags & (CKF_WRAP | CKF_UNWRAP)) != (want [i].flags & (CKF_WRAP | CKF_UNWRAP))) {
            fprintf (stderr, "mechanism 0x%lx: listed %d flags 0x%lx sizes %lu..%lu\n", want [i].type, listed,
                     info.flags, info.ulMinKeySize, info.ulMaxKeySize);
            sm_fail ("C_GetMechanismList/Info of a secret-key mechanism");
        }
    }
    printf ("C_GetMechanismList/Info: %zu secret-key rows with their flags and key sizes in bytes; "
            "CKF_WRAP/CKF_UNWRAP on key wrap, CKF_WRAP alone on CBC-PAD\n", sizeof want / sizeof want [0]);
}

/*  `mech` with key `k`: C_EncryptInit (or C_SignInit) gives `want`.  */
static void
s_init_refused (CK_MECHANISM_TYPE type, const void *param, CK_ULONG param_len, CK_OBJECT_HANDLE k, CK_RV want,
                const char *what)
{
    CK_MECHANISM m = { type, (void *) param, param_len };
    CK_RV rv = p11->C_EncryptInit (s, &m, k);
    if (rv == CKR_MECHANISM_INVALID || rv == CKR_KEY_FUNCTION_NOT_PERMITTED)
        rv = p11->C_SignInit (s, &m, k);                /* a MAC */
    EXPECT (rv, want, what);
    if (rv == CKR_OK)
        sm_fail (what);
}

/*  `n` bytes through `mech`: encryption gives `enc_rv`, decryption `dec_rv`,
 *  single- and multi-part.  */
static void
s_len_refused (CK_MECHANISM *mech, CK_OBJECT_HANDLE k, CK_ULONG n, CK_RV enc_rv, CK_RV dec_rv, const char *what)
{
    unsigned char in [80], out [160];
    memset (in, 0x5a, sizeof in);
    for (int multi = 0; multi < 2; multi++) {
        CK_ULONG len = sizeof out;
        EXPECT (sm_crypt (true, mech, k, in, n, out, &len, multi), enc_rv, what);
        len = sizeof out;
        EXPECT (sm_crypt (false, mech, k, in, n, out, &len, multi), dec_rv, what);
    }
}

void
sm_refusals (void)
{
    unsigned char aes [32], des [24], gs [32], iv [16];
    RAND_bytes (aes, sizeof aes);
    RAND_bytes (des, sizeof des);
    RAND_bytes (gs, sizeof gs);
    RAND_bytes (iv, sizeof iv);
    CK_OBJECT_HANDLE ka = sm_import (CKK_AES, aes, 16, CKR_OK), kd = sm_import (CKK_DES3, des, 24, CKR_OK);
    CK_OBJECT_HANDLE kg = sm_import (CKK_GENERIC_SECRET, gs, 32, CKR_OK);
    /*  Parameter blocks.  */
    CK_AES_CTR_PARAMS ctr = { 0, { 0 } };
    s_init_refused (CKM_AES_CTR, &ctr, sizeof ctr, ka, CKR_MECHANISM_PARAM_INVALID, "CTR ulCounterBits 0");
    ctr.ulCounterBits = 129;
    s_init_refused (CKM_AES_CTR, &ctr, sizeof ctr, ka, CKR_MECHANISM_PARAM_INVALID, "CTR ulCounterBits 129");
    ctr.ulCounterBits = 64;
    s_init_refused (CKM_AES_CTR, &ctr, sizeof ctr - 1, ka, CKR_MECHANISM_PARAM_INVALID, "CTR short parameter");
    s_init_refused (CKM_AES_CTR, iv, 16, ka, CKR_MECHANISM_PARAM_INVALID, "CTR with a bare IV");
    s_init_refused (CKM_DES3_CBC, iv, 16, kd, CKR_MECHANISM_PARAM_INVALID, "DES3-CBC with a 16-byte IV");
    s_init_refused (CKM_DES3_CBC_PAD, NULL, 0, kd, CKR_MECHANISM_PARAM_INVALID, "DES3-CBC-PAD without an IV");
    s_init_refused (CKM_DES3_ECB, iv, 8, kd, CKR_MECHANISM_PARAM_INVALID, "DES3-ECB with an IV");
    s_init_refused (CKM_AES_KEY_WRAP, iv, 4, ka, CKR_MECHANISM_PARAM_INVALID, "key wrap with a 4-byte IV");
    s_init_refused (CKM_AES_KEY_WRAP_PAD, iv, 8, ka, CKR_MECHANISM_PARAM_INVALID, "key wrap pad with an 8-byte IV");
    CK_ULONG mac_len = 0;
    s_init_refused (CKM_SHA256_HMAC_GENERAL, &mac_len, sizeof mac_len, kg, CKR_MECHANISM_PARAM_INVALID,
                    "HMAC_GENERAL length 0");
    mac_len = 16;
    s_init_refused (CKM_SHA256_HMAC_GENERAL, &mac_len, 4, kg, CKR_MECHANISM_PARAM_INVALID,
                    "HMAC_GENERAL with a 4-byte parameter");
    s_init_refused (CKM_SHA256_HMAC_GENERAL, NULL, 0, kg, CKR_MECHANISM_PARAM_INVALID, "HMAC_GENERAL without one");
    s_init_refused (CKM_SHA512_HMAC, &mac_len, sizeof mac_len, kg, CKR_MECHANISM_PARAM_INVALID,
                    "HMAC with a parameter");
    mac_len = 17;
    s_init_refused (CKM_AES_CMAC_GENERAL, &mac_len, sizeof mac_len, ka, CKR_MECHANISM_PARAM_INVALID,
                    "CMAC_GENERAL length 17");
    printf ("parameter blocks of CTR, DES3-CBC, key wrap, HMAC/CMAC _GENERAL: CKR_MECHANISM_PARAM_INVALID\n");
    /*  Key types.  */
    s_init_refused (CKM_AES_CBC, iv, 16, kd, CKR_KEY_TYPE_INCONSISTENT, "AES-CBC with a DES3 key");
    s_init_refused (CKM_DES3_CBC, iv, 8, ka, CKR_KEY_TYPE_INCONSISTENT, "DES3-CBC with an AES key");
    s_init_refused (CKM_SHA384_HMAC, NULL, 0, ka, CKR_KEY_TYPE_INCONSISTENT, "HMAC with an AES key");
    s_init_refused (CKM_AES_CMAC, NULL, 0, kg, CKR_KEY_TYPE_INCONSISTENT, "CMAC with a generic secret");
    sm_import (CKK_DES3, des, 16, CKR_ATTRIBUTE_VALUE_INVALID);
    printf ("key types: CKR_KEY_TYPE_INCONSISTENT; a 16-byte CKK_DES3 value is CKR_ATTRIBUTE_VALUE_INVALID\n");
    /*  Input lengths.  */
    CK_MECHANISM ecb = { CKM_AES_ECB, NULL, 0 }, dcbc = { CKM_DES3_CBC, iv, 8 }, dpad = { CKM_DES3_CBC_PAD, iv, 8 };
    CK_MECHANISM decb = { CKM_DES3_ECB, NULL, 0 }, kw = { CKM_AES_KEY_WRAP, NULL, 0 };
    CK_MECHANISM kwp = { CKM_AES_KEY_WRAP_PAD, NULL, 0 };
    s_len_refused (&ecb, ka, 17, CKR_DATA_LEN_RANGE, CKR_ENCRYPTED_DATA_LEN_RANGE, "AES-ECB, 17 bytes");
    s_len_refused (&decb, kd, 12, CKR_DATA_LEN_RANGE, CKR_ENCRYPTED_DATA_LEN_RANGE, "DES3-ECB, 12 bytes");
    s_len_refused (&dcbc, kd, 20, CKR_DATA_LEN_RANGE, CKR_ENCRYPTED_DATA_LEN_RANGE, "DES3-CBC, 20 bytes");
    s_len_refused (&dpad, kd, 20, CKR_OK, CKR_ENCRYPTED_DATA_LEN_RANGE, "DES3-CBC-PAD, 20 bytes");
    s_len_refused (&kw, ka, 8, CKR_DATA_LEN_RANGE, CKR_ENCRYPTED_DATA_LEN_RANGE, "key wrap, 8 bytes");
    s_len_refused (&kw, ka, 20, CKR_DATA_LEN_RANGE, CKR_ENCRYPTED_DATA_LEN_RANGE, "key wrap, 20 bytes");
    s_len_refused (&kwp, ka, 0, CKR_DATA_LEN_RANGE, CKR_ENCRYPTED_DATA_LEN_RANGE, "key wrap pad, 0 bytes");
    s_len_refused (&kwp, ka, 12, CKR_OK, CKR_ENCRYPTED_DATA_LEN_RANGE, "key wrap pad, 12 bytes");
    unsigned char out [64];
    CK_ULONG len = sizeof out;
    EXPECT (sm_crypt (false, &kw, ka, aes, 16, out, &len, false), CKR_ENCRYPTED_DATA_LEN_RANGE, "unwrap of 16 bytes");
    printf ("input lengths of ECB, CBC, key wrap: CKR_DATA_LEN_RANGE / CKR_ENCRYPTED_DATA_LEN_RANGE\n");
    /*  A CTR counter of 8 bits at 0xff has room for one block, not two.  */
    ctr.ulCounterBits = 8;
    memset (ctr.cb, 0, sizeof ctr.cb);
    ctr.cb [15] = 0xff;
    CK_MECHANISM mctr = { CKM_AES_CTR, &ctr, sizeof ctr };
    s_len_refused (&mctr, ka, 17, CKR_DATA_LEN_RANGE, CKR_ENCRYPTED_DATA_LEN_RANGE, "CTR counter wrap");
    len = sizeof out;
    CHECK (sm_crypt (true, &mctr, ka, aes, 16, out, &len, false), "CTR, one block at the counter's end");
    ctr.ulCounterBits = 9;
    len = sizeof out;
    CHECK (sm_crypt (true, &mctr, ka, aes, 32, out, &len, true), "CTR, 9-bit counter");
    printf ("AES-CTR: a counter that would carry out of ulCounterBits is refused\n");
    CHECK (p11->C_DestroyObject (s, ka), "C_DestroyObject");
    CHECK (p11->C_DestroyObject (s, kd), "C_DestroyObject");
    CHECK (p11->C_DestroyObject (s, kg), "C_DestroyObject");
}

/*  CKM_DES3_KEY_GEN: 24 bytes, every byte of odd parity, usable.  */
void
sm_des3_keygen (void)
{
    CK_MECHANISM gen = { CKM_DES3_KEY_GEN, NULL, 0 };
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_ULONG bad = 16;
    CK_ATTRIBUTE tmpl [] = { { CKA_EXTRACTABLE, &yes, sizeof yes }, { CKA_SENSITIVE, &no, sizeof no },
                             { CKA_TOKEN, &no, sizeof no }, { CKA_VALUE_LEN, &bad, sizeof bad } };
    CK_OBJECT_HANDLE k = CK_INVALID_HANDLE;
    EXPECT (p11->C_GenerateKey (s, &gen, tmpl, 4, &k), CKR_ATTRIBUTE_VALUE_INVALID, "DES3 key of 16 bytes");
    CHECK (p11->C_GenerateKey (s, &gen, tmpl, 3, &k), "C_GenerateKey (CKM_DES3_KEY_GEN)");
    unsigned char value [32], iv [8], data [40], want [48], out [48];
    CK_KEY_TYPE type = 0;
    CK_ATTRIBUTE get [] = { { CKA_VALUE, value, sizeof value }, { CKA_KEY_TYPE, &type, sizeof type } };
    CHECK (p11->C_GetAttributeValue (s, k, get, 2), "CKA_VALUE of a generated DES3 key");
    if (get [0].ulValueLen != 24 || type != CKK_DES3)
        sm_fail ("a generated DES3 key is not 24 bytes of CKK_DES3");
    for (int i = 0; i < 24; i++)
        if (__builtin_popcount (value [i]) % 2 != 1)
            sm_fail ("a generated DES3 key byte has even parity");
    RAND_bytes (iv, sizeof iv);
    RAND_bytes (data, sizeof data);
    CK_MECHANISM cbc = { CKM_DES3_CBC, iv, 8 };
    CK_ULONG len = sizeof out;
    int wl = sm_evp ("DES-EDE3-CBC", true, false, value, iv, data, 40, want);
    CHECK (sm_crypt (true, &cbc, k, data, 40, out, &len, false), "C_Encrypt (generated DES3 key)");
    if (len != (CK_ULONG) wl || memcmp (out, want, len))
        sm_fail ("a generated DES3 key encrypts otherwise than EVP with its value");
    CHECK (p11->C_DestroyObject (s, k), "C_DestroyObject");
    printf ("CKM_DES3_KEY_GEN: 24 bytes of odd parity, encrypts as EVP with its value; 16 bytes refused\n");
}
