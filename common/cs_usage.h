/*  cs_usage.h — the usage rules of keys: which job a key may run, which
 *  role combinations a key may have, which role changes are allowed.  One
 *  table, read by the broker (broker/frontend/route.c, broker/keys/secretkeys.c,
 *  broker/keys/keyjobs.c: every job on a server-held key, whatever the client
 *  sends) and by the module (pkcs11-module/object.c, wrap.c: the same
 *  answers early, for session keys too).  docs/CONTRACTS.md "Usage
 *  separation".
 *
 *  Two policies, per tenant (broker config keys/usage-separation, sent to
 *  the module in HelloResult.usage_separation):
 *
 *    CS_USAGE_STRICT (default)  a key with a key role (CKA_WRAP,
 *        CKA_UNWRAP) never has a data role (CKA_ENCRYPT, CKA_DECRYPT,
 *        CKA_SIGN, CKA_SIGN_RECOVER) — of a key pair, the public half's
 *        CKA_WRAP counts with the private half's roles; a template that
 *        combines them is CKR_TEMPLATE_INCONSISTENT, a job of one class
 *        on a key holding the other is CKR_KEY_FUNCTION_NOT_PERMITTED (a
 *        row made before, or under `spec`, does neither); after creation a
 *        role attribute (those and CKA_DERIVE) only goes TRUE -> FALSE,
 *        and never so that a combined key regains a data use (shedding
 *        its last key role would let it decrypt what it wrapped;
 *        shedding its data roles is fine) (CKR_ATTRIBUTE_READ_ONLY).  This closes the attacks of Clulow
 *        ("On the security of PKCS#11", CHES 2003) and of Bortolozzo,
 *        Centenaro, Focardi, Steel ("Attacking and fixing PKCS#11 security
 *        tokens", CCS 2010): wrap/decrypt, encrypt/unwrap, wrap/sign-raw
 *        (CKM_RSA_X_509 "signing" of a wrapped key is its decryption),
 *        and the attribute-change variants of each.
 *    CS_USAGE_SPEC  exactly what PKCS#11 2.40 allows (§4.4 to §4.10,
 *        footnote 8: every role may change): for applications that need
 *        combined-role keys, open to the attacks above.
 *
 *  Both policies: the key needs the role of the job
 *  (CKR_KEY_FUNCTION_NOT_PERMITTED, PKCS#11 2.40 §5.8 ff.), CKA_SENSITIVE
 *  only goes FALSE -> TRUE and CKA_EXTRACTABLE only TRUE -> FALSE
 *  (cs_attr_rules.h, footnotes 11, 12), CKA_ALLOWED_MECHANISMS binds
 *  every job (cs_attr_wire_mech_allowed).
 *
 *  Every function is a few compares on a bit set: no allocation, no
 *  lookup beyond a constant table (the signing path pays nothing
 *  measurable).
 */
#ifndef CS_USAGE_H_INCLUDED
#define CS_USAGE_H_INCLUDED

#include <stdbool.h>
#include <p11-kit/pkcs11.h>

typedef enum {
    CS_USAGE_STRICT = 0,        /* the default; also what an older broker's Hello (0) means */
    CS_USAGE_SPEC = 1,
} cs_usage_policy_t;

/*  Role bits of a key (of a pair: its private half's, and the public
 *  half's CKA_WRAP as CS_ROLE_WRAP).  */
#define CS_ROLE_ENCRYPT       0x01u     /* CKA_ENCRYPT */
#define CS_ROLE_DECRYPT       0x02u     /* CKA_DECRYPT */
#define CS_ROLE_SIGN          0x04u     /* CKA_SIGN */
#define CS_ROLE_SIGN_RECOVER  0x08u     /* CKA_SIGN_RECOVER */
#define CS_ROLE_WRAP          0x10u     /* CKA_WRAP */
#define CS_ROLE_UNWRAP        0x20u     /* CKA_UNWRAP */
#define CS_ROLE_DERIVE        0x40u     /* CKA_DERIVE */
#define CS_ROLE_ENCAPSULATE   0x80u     /* CKA_ENCAPSULATE (PKCS#11 3.2; a pair's public half) */
#define CS_ROLE_DECAPSULATE  0x100u     /* CKA_DECAPSULATE (PKCS#11 3.2) */
#define CS_ROLE_DATA  (CS_ROLE_ENCRYPT | CS_ROLE_DECRYPT | CS_ROLE_SIGN | CS_ROLE_SIGN_RECOVER)
/*  Key roles: their result is a key object, never data the caller chose.
 *  The KEM roles count here (issue #23): a KEM makes a secret key, so a key
 *  that decapsulates never also decrypts or signs under strict, and its
 *  roles only go TRUE -> FALSE like CKA_UNWRAP's.  */
#define CS_ROLE_KEYS  (CS_ROLE_WRAP | CS_ROLE_UNWRAP | CS_ROLE_ENCAPSULATE | CS_ROLE_DECAPSULATE)

/*  What a job does with a key.  */
typedef enum {
    CS_USE_SIGN,                /* SignJob, SymJob MAC: caller-chosen data under CKA_SIGN */
    CS_USE_SIGN_RECOVER,        /* C_SignRecover */
    CS_USE_DECRYPT,             /* DecryptJob, SymJob decrypt */
    CS_USE_ENCRYPT,             /* SymJob encrypt */
    CS_USE_WRAP,                /* C_WrapKey, SymJob encrypt with key_wrap */
    CS_USE_UNWRAP,              /* C_UnwrapKey, DecryptJob.unwrap, SymJob decrypt with key_wrap */
    CS_USE_DERIVE,              /* DeriveJob, C_DeriveKey */
    CS_USE_ENCAPSULATE,         /* C_EncapsulateKey (PKCS#11 3.2) */
    CS_USE_DECAPSULATE,         /* DecapsulateJob, C_DecapsulateKey (PKCS#11 3.2) */
    CS_USE_COUNT
} cs_usage_use_t;

/*  The role bit of a role attribute (CKA_ENCRYPT ... CKA_DERIVE,
 *  CKA_ENCAPSULATE, CKA_DECAPSULATE), 0 for any
 *  other type.  */
unsigned cs_usage_role_bit (CK_ATTRIBUTE_TYPE type);

/*  The role a use needs (CS_ROLE_SIGN for CS_USE_SIGN ...); its name for
 *  logs ("sign", "unwrap" ...).  */
unsigned cs_usage_needs (cs_usage_use_t use);
const char *cs_usage_use_name (cs_usage_use_t use);

/*  True when `roles` hold a key role and a data role together.  */
bool cs_usage_combined (unsigned roles);

/*  Strict: true when C_UnwrapKey with `mechanism` would be a padding oracle
 *  (CKM_AES_CBC_PAD, CKM_DES3_CBC_PAD, CKM_DES_CBC_PAD): CBC-PAD checks no
 *  integrity, so whether an unwrap of a doctored ciphertext answers
 *  CKR_WRAPPED_KEY_INVALID tells whether its padding was good, and that
 *  recovers the plaintext of any key wrapped under the same KEK block by
 *  block without the KEK (Vaudenay, EUROCRYPT 2002; on tokens: Clulow,
 *  CHES 2003; Bardou et al., CRYPTO 2012).  The caller answers
 *  CKR_MECHANISM_INVALID.  Wrapping with CBC-PAD stays, and the RFC 3394 /
 *  RFC 5649 key wraps (CKM_AES_KEY_WRAP, _PAD), which check integrity,
 *  unwrap under both policies.  Under CS_USAGE_SPEC: false.  */
bool cs_usage_unwrap_oracle (cs_usage_policy_t policy, CK_MECHANISM_TYPE mechanism);

/*  Strict: may a key with `roles` run `mechanism` for a sign, sign-recover
 *  or decrypt job?  Raw RSA (CKM_RSA_X_509: m^d mod n, no padding) is both
 *  operations at once: "decrypting" chosen data yields a signature on it,
 *  and "signing" a ciphertext decrypts it.  So a raw job needs CKA_DECRYPT
 *  and CKA_SIGN (or CKA_SIGN_RECOVER) both, else a decrypt-only key would
 *  sign and a sign-only key would decrypt.  CKR_OK, or
 *  CKR_KEY_FUNCTION_NOT_PERMITTED; CKR_OK for every other mechanism and
 *  under CS_USAGE_SPEC.  */
CK_RV cs_usage_mech_check (cs_usage_policy_t policy, unsigned roles, CK_MECHANISM_TYPE mechanism);

/*  May a key with `roles` run `use` under `policy`?  CKR_OK, or
 *  CKR_KEY_FUNCTION_NOT_PERMITTED: the key lacks the role the use needs
 *  (both policies), or (strict) the key holds a role of the other class
 *  (a key role for a data use, a data role for a key use).  */
CK_RV cs_usage_job_check (cs_usage_policy_t policy, unsigned roles, cs_usage_use_t use);

/*  A new key's (pair's) roles: CKR_OK, or under strict
 *  CKR_TEMPLATE_INCONSISTENT when they combine a key and a data role
 *  (PKCS#11 2.40 §4.1.1: a template whose values contradict each other).  */
CK_RV cs_usage_create_check (cs_usage_policy_t policy, unsigned roles);

/*  A change of a key's roles from `before` to `after` (C_SetAttributeValue,
 *  C_CopyObject, after the whole template): CKR_OK, or under strict
 *  CKR_ATTRIBUTE_READ_ONLY when a role goes FALSE -> TRUE or when the key
 *  could run a data use (sign, sign-recover, decrypt, encrypt) after the
 *  change that it could not run before (a combined key losing its last
 *  key role would decrypt again; losing its data roles leaves a key that
 *  only wraps or unwraps, which is allowed).  */
CK_RV cs_usage_change_check (cs_usage_policy_t policy, unsigned before, unsigned after);

/*  Under strict, the roles a new key gets when its template asks for a key
 *  role and leaves a data role to the default: that data role's default
 *  is FALSE (and the reverse), so a template with CKA_UNWRAP TRUE alone
 *  makes an unwrapping key rather than an inconsistent one.  `given` are
 *  the roles the template names (TRUE or FALSE), `asked` those it sets
 *  TRUE; returns the role bits whose default must be FALSE.  Under spec: 0.  */
unsigned cs_usage_default_off (cs_usage_policy_t policy, unsigned given, unsigned asked);

/*  "strict" / "spec" and back (-1 for anything else).  */
const char *cs_usage_policy_name (cs_usage_policy_t policy);
int cs_usage_policy_parse (const char *text);

#endif
