/*  cryptoserver/pkcs11v.h — the vendor-defined PKCS#11 mechanisms of the
 *  cryptoserver token (cryptoserver-pkcs11.so): raw modular exponentiation
 *  as a service, the RPCs of Berson et al., "Cryptography as a Network
 *  Service" (NDSS 2001), Figure 2.  Man page: cryptoserver-pkcs11(7).
 *
 *  Include it after the PKCS#11 header you use (OASIS pkcs11.h, p11-kit's
 *  <p11-kit/pkcs11.h>, OpenSC's ...): it needs CK_ULONG, CK_BYTE_PTR and
 *  CKM_VENDOR_DEFINED.
 *
 *  The mechanisms run as C_DigestInit / C_Digest (a keyless single-part
 *  call: the mechanism parameter carries the operands that stay the same
 *  over an array, the data carries the base(s), the output the result(s));
 *  they need a CKU_USER login, like C_SignInit.  Every number is an
 *  unsigned big-endian byte string; leading zeros are allowed.  With
 *  k = the byte length of the modulus without leading zero bytes (RSA_CRT:
 *  of p*q):
 *
 *    CKM_CS_MODEXP            param CK_CS_MODEXP_PARAMS; data: one base of
 *                             1..8192 bytes; output: base^e mod m, k bytes.
 *    CKM_CS_MODEXP_ARRAY      param CK_CS_MODEXP_PARAMS; data: n bases of k
 *                             bytes each; output: n results of k bytes.
 *    CKM_CS_RSA_CRT           param CK_CS_RSA_CRT_PARAMS; data: one base of
 *                             1..8192 bytes; output: base^d mod p*q, k bytes.
 *    CKM_CS_RSA_CRT_ARRAY     param CK_CS_RSA_CRT_PARAMS; data: n bases of k
 *                             bytes each; output: n results of k bytes.
 *    CKM_CS_MULTI_MODEXP_ARRAY  param CK_CS_MULTI_MODEXP_PARAMS (n pairs of
 *                             exponent and modulus); data: base i in k_i
 *                             bytes, one after the other; output: result i
 *                             in k_i bytes, likewise.
 *
 *  RPCGETMAXMODULUSLEN is C_GetMechanismInfo (CKM_CS_MODEXP).ulMaxKeySize:
 *  the largest modulus, in bits, some board of the broker takes.
 *  Arrays hold 1..CS_MODEXP_MAX_ITEMS items.
 */
#ifndef CRYPTOSERVER_PKCS11V_H_INCLUDED
#define CRYPTOSERVER_PKCS11V_H_INCLUDED

#ifndef CKM_VENDOR_DEFINED
#error "include your PKCS#11 header (pkcs11.h) before <cryptoserver/pkcs11v.h>"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*  The cryptoserver's vendor range: CKM_VENDOR_DEFINED + 'C' 'S' 0 0.
 *  The low numbers are the paper's RPC numbers.  */
#define CKM_CS_VENDOR_BASE          (CKM_VENDOR_DEFINED + 0x43530000UL)
#define CKM_CS_MODEXP               (CKM_CS_VENDOR_BASE + 1)     /* RPCMODEXP */
#define CKM_CS_MODEXP_ARRAY         (CKM_CS_VENDOR_BASE + 2)     /* RPCMODEXPARRAY */
#define CKM_CS_RSA_CRT              (CKM_CS_VENDOR_BASE + 3)     /* RPCRSAPCRTEXP */
#define CKM_CS_RSA_CRT_ARRAY        (CKM_CS_VENDOR_BASE + 4)     /* RPCRSACRTARRAY */
#define CKM_CS_MULTI_MODEXP_ARRAY   (CKM_CS_VENDOR_BASE + 5)     /* RPCMULTIMODEXPARRAY */

/*  A vendor attribute (CKA_VENDOR_DEFINED + 'C' 'S' 0 0 + 1), CK_BBOOL, read
 *  only: TRUE on the private key of a shared RSA key, whose private exponent
 *  exists only as three additive shares held by three brokers (issue #24,
 *  docs/SHARED-KEYS.md); FALSE or absent on every other key.  */
#define CKA_CS_VENDOR_BASE          (CKA_VENDOR_DEFINED + 0x43530000UL)
#define CKA_CS_SHARED               (CKA_CS_VENDOR_BASE + 1)

#define CS_MODEXP_MAX_ITEMS         100000UL    /* items in one array call */
#define CS_MODEXP_MAX_BYTES         1024UL      /* bytes of a modulus, prime or exponent */

/*  The paper's QCS_mod_exp_coef: base^pExponent mod pModulus.  */
typedef struct CK_CS_MODEXP_PARAMS {
    CK_BYTE_PTR pExponent;          /* e, 0..CS_MODEXP_MAX_BYTES bytes (none = 0) */
    CK_ULONG ulExponentLen;
    CK_BYTE_PTR pModulus;           /* m > 0, 1..CS_MODEXP_MAX_BYTES bytes */
    CK_ULONG ulModulusLen;
} CK_CS_MODEXP_PARAMS;
typedef CK_CS_MODEXP_PARAMS *CK_CS_MODEXP_PARAMS_PTR;

/*  The paper's QCS_rsa_private_key: the CRT form of an RSA private key
 *  (RFC 8017 §3.2 second representation).  pPublicExponent is optional
 *  (NULL, 0): with it each result m is checked as m^e = base mod p*q before
 *  it is released; without it as m^(dP^-1 mod p-1) = base mod p and the
 *  same mod q (as costly again as the operation).  */
typedef struct CK_CS_RSA_CRT_PARAMS {
    CK_BYTE_PTR pPrime1;            /* p */
    CK_ULONG ulPrime1Len;
    CK_BYTE_PTR pPrime2;            /* q */
    CK_ULONG ulPrime2Len;
    CK_BYTE_PTR pExponent1;         /* dP = d mod (p-1) */
    CK_ULONG ulExponent1Len;
    CK_BYTE_PTR pExponent2;         /* dQ = d mod (q-1) */
    CK_ULONG ulExponent2Len;
    CK_BYTE_PTR pCoefficient;       /* qInv = q^-1 mod p */
    CK_ULONG ulCoefficientLen;
    CK_BYTE_PTR pPublicExponent;    /* e, optional */
    CK_ULONG ulPublicExponentLen;
} CK_CS_RSA_CRT_PARAMS;
typedef CK_CS_RSA_CRT_PARAMS *CK_CS_RSA_CRT_PARAMS_PTR;

/*  The paper's QCS_mod_exp_coef_array: one exponent and modulus per base.  */
typedef struct CK_CS_MULTI_MODEXP_PARAMS {
    CK_ULONG ulCount;               /* items, 1..CS_MODEXP_MAX_ITEMS */
    CK_CS_MODEXP_PARAMS_PTR pItems;
} CK_CS_MULTI_MODEXP_PARAMS;
typedef CK_CS_MULTI_MODEXP_PARAMS *CK_CS_MULTI_MODEXP_PARAMS_PTR;

/*  PKCS#11 3.2 (OASIS Committee Specification, 2025) post-quantum values,
 *  for PKCS#11 headers older than 3.2 (Debian 12's p11-kit 0.24 has none of
 *  them).  Each is defined only when the header lacks it.  The numbers are
 *  those of the OASIS 3.2 pkcs11t.h (CKK_ML_KEM 0x49, CKK_ML_DSA 0x4a,
 *  CKM_ML_KEM_KEY_PAIR_GEN 0x0f, CKM_ML_KEM 0x17, CKM_ML_DSA_KEY_PAIR_GEN
 *  0x1c, CKM_ML_DSA 0x1d, CKA_PARAMETER_SET 0x61d, CKA_ENCAPSULATE 0x633,
 *  CKA_DECAPSULATE 0x634, CKA_SEED 0x637, CKF_ENCAPSULATE 1<<28,
 *  CKF_DECAPSULATE 1<<29, CKH_* hedge types 0..2, CKP_* 1..3), checked
 *  against several independent copies of that header; docs/PQ-DRIVER.md
 *  says which.  ML-DSA is FIPS 204, ML-KEM FIPS 203.  */
#ifndef CKK_ML_KEM
#define CKK_ML_KEM                  0x00000049UL
#endif
/*  PKCS#11 3.0 §2.3.7: X25519 and X448 keys (RFC 7748), which p11-kit 0.24's
 *  header does not have yet.  */
#ifndef CKK_EC_MONTGOMERY
#define CKK_EC_MONTGOMERY           0x00000041UL
#endif
#ifndef CKM_EC_MONTGOMERY_KEY_PAIR_GEN
#define CKM_EC_MONTGOMERY_KEY_PAIR_GEN 0x00001056UL
#endif
#ifndef CKK_ML_DSA
#define CKK_ML_DSA                  0x0000004aUL
#endif
#ifndef CKM_ML_KEM_KEY_PAIR_GEN
#define CKM_ML_KEM_KEY_PAIR_GEN     0x0000000fUL
#endif
#ifndef CKM_ML_KEM
#define CKM_ML_KEM                  0x00000017UL
#endif
#ifndef CKM_ML_DSA_KEY_PAIR_GEN
#define CKM_ML_DSA_KEY_PAIR_GEN     0x0000001cUL
#endif
#ifndef CKM_ML_DSA
#define CKM_ML_DSA                  0x0000001dUL
#endif
#ifndef CKA_PARAMETER_SET
#define CKA_PARAMETER_SET           0x0000061dUL
#endif
#ifndef CKA_ENCAPSULATE
#define CKA_ENCAPSULATE             0x00000633UL
#endif
#ifndef CKA_DECAPSULATE
#define CKA_DECAPSULATE             0x00000634UL
#endif
#ifndef CKA_SEED
#define CKA_SEED                    0x00000637UL
#endif
#ifndef CKF_ENCAPSULATE
#define CKF_ENCAPSULATE             0x10000000UL
#endif
#ifndef CKF_DECAPSULATE
#define CKF_DECAPSULATE             0x20000000UL
#endif
#ifndef CKH_HEDGE_PREFERRED
#define CKH_HEDGE_PREFERRED         0x00000000UL    /* CK_HEDGE_TYPE */
#define CKH_HEDGE_REQUIRED          0x00000001UL
#define CKH_DETERMINISTIC_REQUIRED  0x00000002UL
/*  PKCS#11 3.2 (ML-DSA, CKM_ML_DSA): the mechanism parameter, an optional
 *  hedge variant and context string (FIPS 204 §5.2: ctx of 0..255 bytes);
 *  a header with the CKH_ values has these types too.  */
typedef CK_ULONG CK_HEDGE_TYPE;
typedef struct CK_SIGN_ADDITIONAL_CONTEXT {
    CK_HEDGE_TYPE hedgeVariant;     /* CKH_HEDGE_PREFERRED, _REQUIRED, CKH_DETERMINISTIC_REQUIRED */
    CK_BYTE_PTR pContext;           /* ctx, may be NULL when ulContextLen is 0 */
    CK_ULONG ulContextLen;          /* bytes, 0..255 */
} CK_SIGN_ADDITIONAL_CONTEXT;
#endif
#ifndef CKP_ML_DSA_44
#define CKP_ML_DSA_44               0x00000001UL    /* CK_ML_DSA_PARAMETER_SET_TYPE */
#define CKP_ML_DSA_65               0x00000002UL
#define CKP_ML_DSA_87               0x00000003UL
#endif
#ifndef CKP_ML_KEM_512
#define CKP_ML_KEM_512              0x00000001UL    /* CK_ML_KEM_PARAMETER_SET_TYPE */
#define CKP_ML_KEM_768              0x00000002UL
#define CKP_ML_KEM_1024             0x00000003UL
#endif

/*  PKCS#11 3.2 asynchronous sessions (cryptoserver-pkcs11(7) "PKCS#11 3.2"),
 *  for headers older than 3.2: the C_OpenSession flag, the token flag, the
 *  two return values, and CK_ASYNC_DATA, which C_AsyncComplete fills.  The
 *  values are those of the OASIS 3.2 pkcs11t.h (CKF_ASYNC_SESSION 1<<3,
 *  CKF_ASYNC_SESSION_SUPPORTED 0x04000000, CKR_PENDING 0x204,
 *  CKR_SESSION_ASYNC_NOT_SUPPORTED 0x205; CK_ASYNC_DATA's five members in
 *  this order), checked against several independent copies of that header
 *  and of the 3.2 text; docs/PQ-DRIVER.md says which.  Defined only when
 *  the header lacks CKR_PENDING.  */
#ifndef CKR_PENDING
#define CS_PKCS11V_ASYNC 1
#define CKF_ASYNC_SESSION               0x00000008UL    /* C_OpenSession flags */
#define CKF_ASYNC_SESSION_SUPPORTED     0x04000000UL    /* CK_TOKEN_INFO flags */
#define CKR_PENDING                     0x00000204UL
#define CKR_SESSION_ASYNC_NOT_SUPPORTED 0x00000205UL
#endif
#if defined (CS_PKCS11V_ASYNC) && !defined (CS_P11_ASYNC_DATA)
#define CS_P11_ASYNC_DATA 1
typedef struct CK_ASYNC_DATA {
    CK_ULONG ulVersion;                 /* 0 */
    CK_BYTE_PTR pValue;                 /* the output buffer given to the function (also on
                                           an error, so that it may be freed) */
    CK_ULONG ulValue;                   /* bytes of the result in it */
    CK_OBJECT_HANDLE hObject;           /* C_GenerateKeyPair: the public key */
    CK_OBJECT_HANDLE hAdditionalObject; /* C_GenerateKeyPair: the private key */
} CK_ASYNC_DATA;
typedef CK_ASYNC_DATA *CK_ASYNC_DATA_PTR;
#endif

#ifdef __cplusplus
}
#endif
#endif
