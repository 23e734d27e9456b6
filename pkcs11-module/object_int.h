/*  object_int.h — inside the key object table (object.c): one object, and
 *  the values of its attributes (objattr.c).  Not for other units.  The
 *  functions here read one object only; the object table, which owns it,
 *  is read under the library mutex.
 */
#ifndef CS_MODULE_OBJECT_INT_H_INCLUDED
#define CS_MODULE_OBJECT_INT_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>
#include "cs_p11.h"
#include "attrs.h"
#include "key.h"
#include "cs_usage.h"

typedef struct {
    CK_OBJECT_CLASS klass;
    cs_key_t *key;              /* NULL: gone */
    cs_attrs_t attrs;           /* stored attributes: over the defaults */
    char *ref;                  /* token objects (kept while gone); NULL: session object */
    CK_SESSION_HANDLE session;  /* session objects: the session that made it */
    size_t chain;               /* hash chain: index + 1 of the next, 0 = end */
    unsigned walk;              /* token objects: the last key-list walk that put it */
} cs_object_t;

/*  The entry of handle in the table, or NULL (object.c; object_change.c
 *  edits entries through these).  */
cs_object_t *cs_object_entry_inlock (CK_OBJECT_HANDLE handle);

/*  True when the entry is live and visible to this login state.  */
bool cs_object_visible_inlock (const cs_object_t *object);

/*  Empties an entry (its handle stays taken).  */
void cs_object_entry_clear_inlock (cs_object_t *object);

typedef enum { CS_OBJATTR_OK, CS_OBJATTR_SENSITIVE, CS_OBJATTR_INVALID } cs_objattr_result_t;

typedef struct {
    const void *data;
    CK_ULONG len;
    CK_BBOOL flag;              /* storage for booleans */
    CK_ULONG number;            /* storage for CK_ULONG values */
    uint8_t secret [CS_MAX_RSA_BYTES];  /* extractable private components; wiped */
} cs_objattr_value_t;

/*  The value of one attribute of a (live) object: key material, secrets,
 *  then the stored attributes, then the defaults of its class (PKCS#11
 *  2.40 §4.4 to §4.10).  CS_OBJATTR_OK with value->data, value->len (into
 *  the object or into *value: wipe it with cs_objattr_value_wipe);
 *  CS_OBJATTR_SENSITIVE; CS_OBJATTR_INVALID for a type the object lacks.  */
cs_objattr_result_t cs_objattr_get (const cs_object_t *object, CK_ATTRIBUTE_TYPE type, cs_objattr_value_t *value);

/*  A CK_BBOOL attribute of the object as cs_objattr_get gives it; `dflt`
 *  when it has none.  */
bool cs_objattr_flag (const cs_object_t *object, CK_ATTRIBUTE_TYPE type, bool dflt);

/*  Wipes the private component cs_objattr_get may have copied into *value.  */
void cs_objattr_value_wipe (cs_objattr_value_t *value);

/*  True for the key material types (never stored, never changed).  */
bool cs_objattr_is_material (CK_ATTRIBUTE_TYPE type);

/*  True when `type` counts among the roles (common/cs_usage.h) of a
 *  `klass` object: the role attributes the class has (cs_attr_rules.c),
 *  of a public key CKA_WRAP only (its CKA_ENCRYPT, CKA_VERIFY are public
 *  operations).  */
bool cs_objattr_role_of (CK_OBJECT_CLASS klass, CK_ATTRIBUTE_TYPE type);

/*  The role bits of the object (cs_objattr_flag of each role attribute).  */
unsigned cs_objattr_roles (const cs_object_t *object);

/*  cs_object_usage_defaults under `policy` (object.h).  */
int cs_objattr_usage_defaults (cs_usage_policy_t policy, CK_OBJECT_CLASS klass, const CK_ATTRIBUTE *tmpl,
                               CK_ULONG count, cs_attrs_t *attrs);

#endif
