/*  object.h — the token objects: two per server-held key of the tenant, a
 *  CKO_PUBLIC_KEY (always visible) and a CKO_PRIVATE_KEY (CKA_PRIVATE, only
 *  visible while the user is logged in).  Keys come from a ListKeysJob,
 *  fetched lazily and cached, fetched again after C_Login.  Object handles
 *  are stable for the life of the process (same key id and class, same
 *  handle).  Everything runs under the library mutex unless said otherwise.
 */
#ifndef CS_MODULE_OBJECT_H_INCLUDED
#define CS_MODULE_OBJECT_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cs_p11.h"
#include "cs_wire.h"

/*  One server-held key's public facts.  Immutable after creation and
 *  reference counted, so an operation can keep it while the table changes.  */
typedef struct {
    int refs;
    uint8_t id [CS_WIRE_MAX_KEY_ID];
    size_t id_len;
    char *label;
    CK_KEY_TYPE key_type;       /* CKK_RSA or CKK_EC */
    CK_ULONG bits;              /* modulus bits, or curve bits */
    uint8_t *modulus;           /* RSA, big-endian without leading zeros */
    size_t modulus_len;         /* = k, the modulus length in bytes */
    uint8_t *exponent;
    size_t exponent_len;
    uint8_t *ec_params;         /* EC: DER named-curve OID */
    size_t ec_params_len;
    uint8_t *ec_point;          /* EC: DER OCTET STRING of the uncompressed point */
    size_t ec_point_len;
    size_t field_len;           /* EC: bytes of one coordinate */
    bool can_sign;
    bool can_decrypt;
} cs_key_t;

/*  Bytes of a signature by this key: k for RSA, 2 × field bytes for ECDSA
 *  (raw r||s, PKCS#11 2.40 curr. mech. §2.3.1).  */
size_t cs_key_signature_len (const cs_key_t *key);

/*  The uncompressed EC point (04 || X || Y) inside the key's CKA_EC_POINT,
 *  which is a DER OCTET STRING (a bare point is accepted too).  Returns false
 *  when it is malformed.  *raw_p points into the key.  */
bool cs_key_ec_point_raw (const cs_key_t *key, const uint8_t **raw_p, size_t *len_p);

/*  New reference to `key` (atomic).  */
cs_key_t *cs_key_ref (cs_key_t *key);

/*  Drops a reference and nulls *key_p; frees the key on the last one.  */
void cs_key_unref (cs_key_t **key_p);

/*  Builds a key from a KeyInfo of the wire.  Returns NULL when out of memory
 *  or when the KeyInfo is unusable (no id, unknown type, missing public
 *  parts).  Caller unrefs.  */
cs_key_t *cs_key_new (const Cs__KeyInfo *info);

/*  Without the mutex: makes sure the key list is fetched (a ListKeysJob on
 *  first use and after each login).  Returns CKR_OK or the job's error.  */
CK_RV cs_object_ensure (void);

/*  Replaces the key list by `result` (from the broker, or from a test),
 *  keeping handles stable.  Returns CKR_OK or CKR_HOST_MEMORY.  */
CK_RV cs_object_load (const Cs__ListKeysResult *result);

/*  The key behind a visible object, as a new reference (caller unrefs), and
 *  the object's class in *class_p; NULL when the handle is unknown or not
 *  visible now.  */
cs_key_t *cs_object_key (CK_OBJECT_HANDLE handle, CK_OBJECT_CLASS *class_p);

/*  C_GetAttributeValue semantics (PKCS#11 2.40 §5.7) on a visible object.  */
CK_RV cs_object_get_attributes (CK_OBJECT_HANDLE handle, CK_ATTRIBUTE_PTR tmpl, CK_ULONG count);

/*  Handles of the visible objects matching every attribute of `tmpl`
 *  (malloc'd array of *count_p, caller frees; may be NULL when 0).
 *  Returns CKR_OK or CKR_HOST_MEMORY.  */
CK_RV cs_object_find (const CK_ATTRIBUTE *tmpl, CK_ULONG count,
                      CK_OBJECT_HANDLE **handles_p, size_t *count_p);

/*  Marks the key list stale so the next cs_object_ensure fetches it.  */
void cs_object_invalidate (void);

/*  Forgets every object and handle (C_Finalize, fork).  */
void cs_object_reset (void);

#endif
