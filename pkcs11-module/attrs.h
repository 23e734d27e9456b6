/*  attrs.h — PKCS#11 attribute values as the module stores and sends them.
 *
 *  Every attribute type the module understands has a kind (PKCS#11 2.40
 *  §4.2 to §4.9, tables of common object, storage, key, public and private
 *  key attributes): CK_BBOOL, CK_ULONG, a byte array, or a secret byte array
 *  (private key components: never stored in an attribute list, never sent
 *  as a wire Attribute, always CKR_ATTRIBUTE_SENSITIVE unless the key is a
 *  local, non-sensitive, extractable session key).  A stored list keeps
 *  CK_BBOOL values as one byte and CK_ULONG values in host order, as
 *  C_GetAttributeValue returns them.
 */
#ifndef CS_MODULE_ATTRS_H_INCLUDED
#define CS_MODULE_ATTRS_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cs_p11.h"
#include "cs_wire.h"

typedef enum {
    CS_ATTR_UNKNOWN,            /* → CKR_ATTRIBUTE_TYPE_INVALID */
    CS_ATTR_BOOL,
    CS_ATTR_ULONG,
    CS_ATTR_BYTES,
    CS_ATTR_SECRET              /* private key components */
} cs_attr_kind_t;

typedef struct {
    CK_ATTRIBUTE_TYPE type;
    uint8_t *value;             /* owned; NULL when len is 0 */
    size_t len;
} cs_attr_t;

typedef struct {
    cs_attr_t *items;           /* owned */
    size_t count;
} cs_attrs_t;

/*  The kind of attribute `type`.  */
cs_attr_kind_t cs_attr_kind (CK_ATTRIBUTE_TYPE type);

/*  The entry of `type` in `self`, or NULL.  */
const cs_attr_t *cs_attrs_find (const cs_attrs_t *self, CK_ATTRIBUTE_TYPE type);

/*  The CK_BBOOL of `type` in `self`, or `dflt` when absent.  */
bool cs_attrs_bool (const cs_attrs_t *self, CK_ATTRIBUTE_TYPE type, bool dflt);

/*  Sets (adds or replaces) `type` to a copy of `len` bytes.  Returns 0, or
 *  -1 when out of memory (then `self` is unchanged).  */
int cs_attrs_set (cs_attrs_t *self, CK_ATTRIBUTE_TYPE type, const void *value, size_t len);

/*  Sets a CK_BBOOL / CK_ULONG.  0 or -1 (out of memory).  */
int cs_attrs_set_bool (cs_attrs_t *self, CK_ATTRIBUTE_TYPE type, bool flag);
int cs_attrs_set_ulong (cs_attrs_t *self, CK_ATTRIBUTE_TYPE type, CK_ULONG number);

/*  Copies every non-secret entry of an application template (already
 *  checked by cs_template_check) into `self`, skipping the types for which
 *  `skip` returns true (may be NULL).  0 or -1 (out of memory).  */
int cs_attrs_add_template (cs_attrs_t *self, const CK_ATTRIBUTE *tmpl, CK_ULONG count,
                           bool (*skip) (CK_ATTRIBUTE_TYPE type));

/*  Deep copy of `src` into an empty `dst`.  0 or -1 (out of memory).  */
int cs_attrs_copy (cs_attrs_t *dst, const cs_attrs_t *src);

/*  Converts wire Attributes (KeyInfo.private_attributes ...) into `self`
 *  (empty).  Entries of unknown type or secret kind, and values of the wrong
 *  kind, are skipped.  0 or -1 (out of memory).  */
int cs_attrs_from_wire (cs_attrs_t *self, Cs__Attribute *const *wire, size_t count);

/*  Frees every entry; `self` becomes empty.  NULL-safe.  */
void cs_attrs_clear (cs_attrs_t *self);

/*  Checks an application template (PKCS#11 2.40 §4.1.1): CKR_ARGUMENTS_BAD
 *  for a NULL value with a length; CKR_ATTRIBUTE_TYPE_INVALID for an unknown
 *  type; CKR_ATTRIBUTE_VALUE_INVALID for a CK_BBOOL that is not one byte of
 *  0 or 1, a CK_ULONG of the wrong size, or a value over
 *  CS_WIRE_MAX_ATTR_BYTES; CKR_TEMPLATE_INCONSISTENT for one type given
 *  twice with different values.  */
CK_RV cs_template_check (const CK_ATTRIBUTE *tmpl, CK_ULONG count);

/*  The last entry of `type` in a template, or NULL.  */
const CK_ATTRIBUTE *cs_template_find (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_ATTRIBUTE_TYPE type);

/*  A checked template's CK_BBOOL of `type`, or `dflt` when absent.  */
bool cs_template_bool (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_ATTRIBUTE_TYPE type, bool dflt);

/*  A checked template's CK_ULONG of `type` into *value_p; false when absent.  */
bool cs_template_ulong (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_ATTRIBUTE_TYPE type, CK_ULONG *value_p);

/*  Converts the non-secret entries of a checked template into wire
 *  Attributes (typed: flag, number, bytes) pointing INTO the template:
 *  *wire_p is a malloc'd array of *count_p pointers to malloc'd messages;
 *  free with cs_attrs_wire_free before the template goes away.  Returns
 *  CKR_OK or CKR_HOST_MEMORY.  */
CK_RV cs_attrs_to_wire (const CK_ATTRIBUTE *tmpl, CK_ULONG count, Cs__Attribute ***wire_p, size_t *count_p);

/*  The same for a stored list.  */
CK_RV cs_attrs_list_to_wire (const cs_attrs_t *self, Cs__Attribute ***wire_p, size_t *count_p);

/*  Frees what cs_attrs_to_wire made.  NULL-safe.  */
void cs_attrs_wire_free (Cs__Attribute **wire, size_t count);

/*  Copies `text` (NULL: empty) into a blank-padded, not terminated PKCS#11
 *  string field of `size` bytes (truncating): CK_INFO, CK_SLOT_INFO,
 *  CK_TOKEN_INFO.  */
void cs_pad (unsigned char *field, size_t size, const char *text);

#endif
