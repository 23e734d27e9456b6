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

#ifdef __cplusplus
}
#endif
#endif
