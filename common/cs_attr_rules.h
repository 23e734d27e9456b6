/*  cs_attr_rules.h — the attribute rules of key objects: one table, read
 *  by the module (pkcs11-module/object.c, keymgmt.c: session keys and the
 *  first check of every change) and by the broker (broker/keys/keyattrs.c:
 *  server-held keys, so that a modified module cannot get around them).
 *
 *  One row per attribute type: the key classes that have it and how it may
 *  be given or changed, after PKCS#11 2.40 §4.4 to §4.10 (tables 10 "common
 *  footnotes", 17 storage objects, 25 common key, 28 public key, 33 private
 *  key, 36 secret key attributes):
 *
 *    CS_ATTR_CREATE      may be given when the object is made (C_CreateObject,
 *                        C_GenerateKey(Pair), C_DeriveKey, C_UnwrapKey)
 *    CS_ATTR_SET         may change with C_SetAttributeValue (footnote 8)
 *    CS_ATTR_COPY        may change in C_CopyObject (footnote 8; §4.4.1 for
 *                        CKA_TOKEN, CKA_PRIVATE, CKA_MODIFIABLE, ...)
 *    CS_ATTR_ONLY_TRUE   once TRUE, read-only (footnote 11): CKA_SENSITIVE,
 *                        CKA_WRAP_WITH_TRUSTED
 *    CS_ATTR_ONLY_FALSE  once FALSE, read-only (footnote 12): CKA_EXTRACTABLE,
 *                        CKA_COPYABLE (§4.4 table 17)
 *    CS_ATTR_SO_TRUE     only the SO may make it TRUE (footnote 10): CKA_TRUSTED
 *    CS_ATTR_COMPUTED    the token sets it, nobody else (footnotes 2, 4, 6):
 *                        CKA_LOCAL, CKA_KEY_GEN_MECHANISM, CKA_ALWAYS_SENSITIVE,
 *                        CKA_NEVER_EXTRACTABLE
 *    CS_ATTR_SENSITIVE   reading it is CKR_ATTRIBUTE_SENSITIVE while the key is
 *                        CKA_SENSITIVE or not CKA_EXTRACTABLE (footnote 7)
 *
 *  Every refusal of a change is CKR_ATTRIBUTE_READ_ONLY (PKCS#11 2.40 §5.7
 *  C_SetAttributeValue, C_CopyObject; C_CreateObject for computed ones); a
 *  type the class does not have is CKR_ATTRIBUTE_TYPE_INVALID.  The table
 *  is printed in docs/CONTRACTS.md "Attribute rules" and
 *  cryptoserver-pkcs11(7).
 *
 *  CKA_ALLOWED_MECHANISMS (§4.4 table 25) is a CK_MECHANISM_TYPE array in
 *  the application's (host) form; on the wire (Attribute.bytes, keystore
 *  rows) each mechanism is 8 bytes little-endian: cs_attr_mechs_to_wire,
 *  cs_attr_mechs_from_wire.  An empty or absent list allows every mechanism.
 */
#ifndef CS_ATTR_RULES_H_INCLUDED
#define CS_ATTR_RULES_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <p11-kit/pkcs11.h>

/*  Rule bits (above).  */
#define CS_ATTR_CREATE      0x001u
#define CS_ATTR_SET         0x002u
#define CS_ATTR_COPY        0x004u
#define CS_ATTR_ONLY_TRUE   0x008u
#define CS_ATTR_ONLY_FALSE  0x010u
#define CS_ATTR_SO_TRUE     0x020u
#define CS_ATTR_COMPUTED    0x040u
#define CS_ATTR_SENSITIVE   0x080u

/*  Class bits: which key classes have the attribute.  */
#define CS_ATTR_PUB         0x1u        /* CKO_PUBLIC_KEY */
#define CS_ATTR_PRIV        0x2u        /* CKO_PRIVATE_KEY */
#define CS_ATTR_SECRET_KEY  0x4u        /* CKO_SECRET_KEY */
#define CS_ATTR_KEYS        0x7u

/*  The value of an attribute.  */
typedef enum {
    CS_ATTR_V_BOOL,             /* CK_BBOOL */
    CS_ATTR_V_ULONG,            /* CK_ULONG */
    CS_ATTR_V_BYTES,            /* byte array */
    CS_ATTR_V_MECHS,            /* CK_MECHANISM_TYPE array (CKA_ALLOWED_MECHANISMS) */
} cs_attr_value_t;

typedef struct {
    CK_ATTRIBUTE_TYPE type;
    const char *name;           /* "CKA_SENSITIVE" */
    cs_attr_value_t value;
    unsigned classes;           /* CS_ATTR_PUB | ... */
    unsigned rules;             /* CS_ATTR_CREATE | ... */
    int dflt;                   /* CK_BBOOL default of a key that does not store it: 0, 1;
                                   -1 when it depends on the key (usage flags) or is not a flag */
} cs_attr_rule_t;

/*  The operation a template comes with.  */
typedef enum {
    CS_ATTR_OP_CREATE,          /* C_CreateObject, C_GenerateKey(Pair), C_DeriveKey, C_UnwrapKey */
    CS_ATTR_OP_SET,             /* C_SetAttributeValue */
    CS_ATTR_OP_COPY,            /* C_CopyObject */
} cs_attr_op_t;

/*  One attribute of a template against the object it would change.  */
typedef struct {
    int now;                    /* current CK_BBOOL value: 0, 1; -1 at creation or not a flag */
    int to;                     /* the template's CK_BBOOL: 0, 1; -1 when not a flag */
    bool same;                  /* the template gives the current value (copy: then always allowed) */
    bool so;                    /* the SO is logged in (CS_ATTR_SO_TRUE) */
} cs_attr_change_t;

/*  The whole table (static, read-only), *count_p rows.  */
const cs_attr_rule_t *cs_attr_rules (size_t *count_p);

/*  The row of `type`, or NULL (not an attribute of any key class).  */
const cs_attr_rule_t *cs_attr_rule (CK_ATTRIBUTE_TYPE type);

/*  The class bit of a key class (CS_ATTR_PUB ...), 0 for other classes.  */
unsigned cs_attr_class_bit (CK_OBJECT_CLASS klass);

/*  True when objects of `klass` have attribute `type` in the table.  */
bool cs_attr_rule_has (CK_OBJECT_CLASS klass, CK_ATTRIBUTE_TYPE type);

/*  Checks one attribute of a template for `op` on an object of `klass`.
 *  Returns CKR_OK; CKR_ATTRIBUTE_TYPE_INVALID when the class does not have
 *  the type; CKR_ATTRIBUTE_READ_ONLY when the rules forbid it: a computed
 *  attribute in any template, a non-CS_ATTR_CREATE one at creation, a
 *  non-CS_ATTR_SET one in C_SetAttributeValue (even with its current
 *  value), a C_CopyObject change of one neither CS_ATTR_SET nor
 *  CS_ATTR_COPY (its current value is fine), a latched flag going back
 *  (CS_ATTR_ONLY_TRUE 1 → 0, CS_ATTR_ONLY_FALSE 0 → 1), TRUE for a
 *  CS_ATTR_SO_TRUE flag without the SO.  The value's own form is the
 *  caller's to check (CKR_ATTRIBUTE_VALUE_INVALID).  */
CK_RV cs_attr_rule_check (CK_OBJECT_CLASS klass, CK_ATTRIBUTE_TYPE type, cs_attr_op_t op,
                          const cs_attr_change_t *change);

/*  Footnote 7: true when reading `type` of a `klass` object that is
 *  `sensitive` (CKA_SENSITIVE) or not `extractable` must give
 *  CKR_ATTRIBUTE_SENSITIVE.  */
bool cs_attr_read_sensitive (CK_OBJECT_CLASS klass, CK_ATTRIBUTE_TYPE type, bool sensitive, bool extractable);

/*  Keeps the computed flags right after CKA_SENSITIVE / CKA_EXTRACTABLE
 *  changed (§4.9 table 33 footnotes): CKA_ALWAYS_SENSITIVE stays TRUE only
 *  while CKA_SENSITIVE is TRUE, CKA_NEVER_EXTRACTABLE only while
 *  CKA_EXTRACTABLE is FALSE; neither ever becomes TRUE again.  */
void cs_attr_follow (bool sensitive, bool extractable, bool *always_sensitive, bool *never_extractable);

/*  ---- CKA_ALLOWED_MECHANISMS --------------------------------------------- */

#define CS_ATTR_MECH_WIRE_BYTES 8       /* bytes of one mechanism on the wire */

/*  True when `len` bytes are a whole host CK_MECHANISM_TYPE array.  */
bool cs_attr_mechs_len_ok (size_t len);

/*  Host array (`len` bytes) → wire form into `out` (cs_attr_mechs_wire_len
 *  bytes).  Returns the bytes written.  */
size_t cs_attr_mechs_wire_len (size_t len);
size_t cs_attr_mechs_to_wire (const void *mechs, size_t len, uint8_t *out);

/*  Wire form (`len` bytes, a multiple of CS_ATTR_MECH_WIRE_BYTES, else 0 is
 *  returned) → host array into `out` (cs_attr_mechs_host_len bytes).
 *  Returns the bytes written.  */
size_t cs_attr_mechs_host_len (size_t len);
size_t cs_attr_mechs_from_wire (const uint8_t *wire, size_t len, void *out);

/*  True when a host list (`len` bytes; empty allows all) allows `mech`:
 *  the module's check at C_SignInit, C_VerifyInit, C_EncryptInit,
 *  C_DecryptInit, C_DeriveKey (CKR_MECHANISM_INVALID otherwise).  */
bool cs_attr_mech_allowed (const void *mechs, size_t len, CK_MECHANISM_TYPE mech);

/*  The broker's check of a wire list (`len` bytes; empty allows all; a
 *  length that is not whole allows nothing) against the mechanism of a job
 *  on the wire doing `flag` (CKF_SIGN, CKF_DECRYPT, CKF_DERIVE): allowed
 *  when a listed mechanism of the table (cs_mech.h) does `flag` and is
 *  `wire_mech` or travels as `wire_mech` (the module hashes
 *  CKM_ECDSA_SHA256 and sends CKM_ECDSA: the broker cannot tell them
 *  apart, docs/CONTRACTS.md), or a listed mechanism the table does not
 *  know is `wire_mech` itself.  */
bool cs_attr_wire_mech_allowed (const uint8_t *wire, size_t len, CK_MECHANISM_TYPE wire_mech, CK_FLAGS flag);

#endif
