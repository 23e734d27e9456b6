/*  attrs.c — attribute kinds, stored lists, template checks, wire form (attrs.h).  */
#include <stdlib.h>
#include <string.h>
#include "cs_attr_rules.h"
#include "cryptoserver/pkcs11v.h"
#include "attrs.h"

cs_attr_kind_t
cs_attr_kind (CK_ATTRIBUTE_TYPE type)
{
    switch (type) {
        case CKA_TOKEN: case CKA_PRIVATE: case CKA_MODIFIABLE: case CKA_COPYABLE:
        case CKA_DESTROYABLE: case CKA_SENSITIVE: case CKA_EXTRACTABLE: case CKA_SIGN:
        case CKA_VERIFY: case CKA_ENCRYPT: case CKA_DECRYPT: case CKA_WRAP: case CKA_UNWRAP:
        case CKA_DERIVE: case CKA_SIGN_RECOVER: case CKA_VERIFY_RECOVER: case CKA_LOCAL:
        case CKA_ALWAYS_SENSITIVE: case CKA_NEVER_EXTRACTABLE: case CKA_ALWAYS_AUTHENTICATE:
        case CKA_WRAP_WITH_TRUSTED: case CKA_TRUSTED: case CKA_CS_SHARED:
        case CKA_ENCAPSULATE: case CKA_DECAPSULATE:
            return CS_ATTR_BOOL;
        case CKA_CLASS: case CKA_KEY_TYPE: case CKA_MODULUS_BITS: case CKA_KEY_GEN_MECHANISM:
        case CKA_VALUE_LEN: case CKA_PARAMETER_SET:
            return CS_ATTR_ULONG;
        case CKA_ID: case CKA_LABEL: case CKA_SUBJECT: case CKA_START_DATE: case CKA_END_DATE:
        case CKA_MODULUS: case CKA_PUBLIC_EXPONENT: case CKA_EC_PARAMS: case CKA_EC_POINT:
        case CKA_PUBLIC_KEY_INFO: case CKA_ALLOWED_MECHANISMS: case CKA_APPLICATION:
            return CS_ATTR_BYTES;
        case CKA_PRIVATE_EXPONENT: case CKA_PRIME_1: case CKA_PRIME_2: case CKA_EXPONENT_1:
        case CKA_EXPONENT_2: case CKA_COEFFICIENT: case CKA_VALUE:
            return CS_ATTR_SECRET;
        default:
            return CS_ATTR_UNKNOWN;
    }
}

/*  ---- stored lists -------------------------------------------------- */

const cs_attr_t *
cs_attrs_find (const cs_attrs_t *self, CK_ATTRIBUTE_TYPE type)
{
    for (size_t i = 0; self && i < self->count; i++)
        if (self->items [i].type == type)
            return &self->items [i];
    return NULL;
}

bool
cs_attrs_bool (const cs_attrs_t *self, CK_ATTRIBUTE_TYPE type, bool dflt)
{
    const cs_attr_t *attr = cs_attrs_find (self, type);
    return attr && attr->len == 1 ? attr->value [0] != 0 : dflt;
}

int
cs_attrs_set (cs_attrs_t *self, CK_ATTRIBUTE_TYPE type, const void *value, size_t len)
{
    cs_attr_t *attr = (cs_attr_t *) cs_attrs_find (self, type);
    uint8_t *copy = NULL;
    if (len && !(copy = malloc (len)))
        return -1;
    if (len)
        memcpy (copy, value, len);
    if (!attr) {
        cs_attr_t *items = realloc (self->items, (self->count + 1) * sizeof *items);
        if (!items) {
            free (copy);
            return -1;
        }
        self->items = items;
        attr = &items [self->count++];
        attr->type = type;
        attr->value = NULL;
    }
    free (attr->value);
    attr->value = copy;
    attr->len = len;
    return 0;
}

int
cs_attrs_set_bool (cs_attrs_t *self, CK_ATTRIBUTE_TYPE type, bool flag)
{
    CK_BBOOL value = flag ? CK_TRUE : CK_FALSE;
    return cs_attrs_set (self, type, &value, sizeof value);
}

int
cs_attrs_set_ulong (cs_attrs_t *self, CK_ATTRIBUTE_TYPE type, CK_ULONG number)
{
    return cs_attrs_set (self, type, &number, sizeof number);
}

int
cs_attrs_add_template (cs_attrs_t *self, const CK_ATTRIBUTE *tmpl, CK_ULONG count,
                       bool (*skip) (CK_ATTRIBUTE_TYPE type))
{
    for (CK_ULONG i = 0; i < count; i++) {
        cs_attr_kind_t kind = cs_attr_kind (tmpl [i].type);
        if (kind == CS_ATTR_SECRET || kind == CS_ATTR_UNKNOWN || (skip && skip (tmpl [i].type)))
            continue;
        if (cs_attrs_set (self, tmpl [i].type, tmpl [i].pValue, tmpl [i].ulValueLen))
            return -1;
    }
    return 0;
}

int
cs_attrs_copy (cs_attrs_t *dst, const cs_attrs_t *src)
{
    for (size_t i = 0; src && i < src->count; i++)
        if (cs_attrs_set (dst, src->items [i].type, src->items [i].value, src->items [i].len)) {
            cs_attrs_clear (dst);
            return -1;
        }
    return 0;
}

/*  CKA_ALLOWED_MECHANISMS from its wire form (cs_attr_rules.h); a list
 *  that is not whole is skipped.  0 or -1 (out of memory).  */
static int
s_set_mechs (cs_attrs_t *self, const uint8_t *wire, size_t len)
{
    size_t host_len = cs_attr_mechs_host_len (len);
    uint8_t *host = host_len ? malloc (host_len) : NULL;
    int rc = 0;
    if (host_len && !host)
        return -1;
    if (host_len || len == 0)
        rc = cs_attrs_set (self, CKA_ALLOWED_MECHANISMS, host, cs_attr_mechs_from_wire (wire, len, host));
    free (host);
    return rc;
}

int
cs_attrs_from_wire (cs_attrs_t *self, Cs__Attribute *const *wire, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        const Cs__Attribute *attr = wire [i];
        cs_attr_kind_t kind = cs_attr_kind (attr->type);
        int rc = 0;
        if (kind == CS_ATTR_BOOL && attr->value_case == CS__ATTRIBUTE__VALUE_FLAG)
            rc = cs_attrs_set_bool (self, attr->type, attr->flag);
        else
        if (kind == CS_ATTR_ULONG && attr->value_case == CS__ATTRIBUTE__VALUE_NUMBER)
            rc = cs_attrs_set_ulong (self, attr->type, (CK_ULONG) attr->number);
        else
        if (attr->type == CKA_ALLOWED_MECHANISMS && attr->value_case == CS__ATTRIBUTE__VALUE_BYTES)
            rc = s_set_mechs (self, attr->bytes.data, attr->bytes.len);
        else
        if (kind == CS_ATTR_BYTES && attr->value_case == CS__ATTRIBUTE__VALUE_BYTES)
            rc = cs_attrs_set (self, attr->type, attr->bytes.data, attr->bytes.len);
        if (rc)
            return -1;
    }
    return 0;
}

void
cs_attrs_clear (cs_attrs_t *self)
{
    for (size_t i = 0; self && i < self->count; i++)
        free (self->items [i].value);
    if (self)
        free (self->items);
    if (self)
        memset (self, 0, sizeof *self);
}

/*  ---- templates ---------------------------------------------------- */

static CK_RV
s_check_one (const CK_ATTRIBUTE *attr)
{
    cs_attr_kind_t kind = cs_attr_kind (attr->type);
    if (!attr->pValue && attr->ulValueLen)
        return CKR_ARGUMENTS_BAD;
    if (kind == CS_ATTR_UNKNOWN)
        return CKR_ATTRIBUTE_TYPE_INVALID;
    if (kind == CS_ATTR_BOOL
    && (attr->ulValueLen != sizeof (CK_BBOOL) || *(const CK_BBOOL *) attr->pValue > 1))
        return CKR_ATTRIBUTE_VALUE_INVALID;
    if (kind == CS_ATTR_ULONG && attr->ulValueLen != sizeof (CK_ULONG))
        return CKR_ATTRIBUTE_VALUE_INVALID;
    if (attr->type == CKA_ALLOWED_MECHANISMS && !cs_attr_mechs_len_ok (attr->ulValueLen))
        return CKR_ATTRIBUTE_VALUE_INVALID;         /* not a CK_MECHANISM_TYPE array */
    if (attr->ulValueLen > CS_WIRE_MAX_ATTR_BYTES)
        return CKR_ATTRIBUTE_VALUE_INVALID;
    return CKR_OK;
}

CK_RV
cs_template_check (const CK_ATTRIBUTE *tmpl, CK_ULONG count)
{
    if (!tmpl && count)
        return CKR_ARGUMENTS_BAD;
    if (count > CS_WIRE_MAX_ATTRIBUTES)
        return CKR_TEMPLATE_INCONSISTENT;
    for (CK_ULONG i = 0; i < count; i++) {
        CK_RV rv = s_check_one (&tmpl [i]);
        if (rv != CKR_OK)
            return rv;
        for (CK_ULONG j = 0; j < i; j++)
            if (tmpl [j].type == tmpl [i].type
            && (tmpl [j].ulValueLen != tmpl [i].ulValueLen
                || (tmpl [i].ulValueLen && memcmp (tmpl [j].pValue, tmpl [i].pValue, tmpl [i].ulValueLen))))
                return CKR_TEMPLATE_INCONSISTENT;
    }
    return CKR_OK;
}

const CK_ATTRIBUTE *
cs_template_find (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_ATTRIBUTE_TYPE type)
{
    const CK_ATTRIBUTE *found = NULL;
    for (CK_ULONG i = 0; tmpl && i < count; i++)
        if (tmpl [i].type == type)
            found = &tmpl [i];
    return found;
}

bool
cs_template_bool (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_ATTRIBUTE_TYPE type, bool dflt)
{
    const CK_ATTRIBUTE *attr = cs_template_find (tmpl, count, type);
    return attr && attr->ulValueLen == 1 ? *(const CK_BBOOL *) attr->pValue != 0 : dflt;
}

bool
cs_template_ulong (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_ATTRIBUTE_TYPE type, CK_ULONG *value_p)
{
    const CK_ATTRIBUTE *attr = cs_template_find (tmpl, count, type);
    if (!attr || attr->ulValueLen != sizeof (CK_ULONG))
        return false;
    memcpy (value_p, attr->pValue, sizeof (CK_ULONG));
    return true;
}

/*  ---- wire ---------------------------------------------------------- */

void
cs_attrs_wire_free (Cs__Attribute **wire, size_t count)
{
    for (size_t i = 0; wire && i < count; i++)
        free (wire [i]);
    free (wire);
}

/*  One typed wire Attribute pointing at `value` (borrowed); a mechanism
 *  list is converted to its wire form, stored after the message in the
 *  same block (one free).  */
static Cs__Attribute *
s_wire_one (CK_ATTRIBUTE_TYPE type, const void *value, size_t len)
{
    bool mechs = type == CKA_ALLOWED_MECHANISMS;
    Cs__Attribute *attr = malloc (sizeof *attr + (mechs ? cs_attr_mechs_wire_len (len) : 0));
    CK_ULONG number = 0;
    if (!attr)
        return NULL;
    cs__attribute__init (attr);
    attr->type = type;
    if (mechs) {
        attr->value_case = CS__ATTRIBUTE__VALUE_BYTES;
        attr->bytes.data = (uint8_t *) (attr + 1);
        attr->bytes.len = cs_attr_mechs_to_wire (value, len, attr->bytes.data);
        return attr;
    }
    switch (cs_attr_kind (type)) {
        case CS_ATTR_BOOL:
            attr->value_case = CS__ATTRIBUTE__VALUE_FLAG;
            attr->flag = len == 1 && *(const CK_BBOOL *) value;
            break;
        case CS_ATTR_ULONG:
            if (len == sizeof number)
                memcpy (&number, value, sizeof number);
            attr->value_case = CS__ATTRIBUTE__VALUE_NUMBER;
            attr->number = number;
            break;
        default:
            attr->value_case = CS__ATTRIBUTE__VALUE_BYTES;
            attr->bytes.data = (uint8_t *) value;
            attr->bytes.len = len;
    }
    return attr;
}

static CK_RV
s_wire_add (Cs__Attribute **wire, size_t *n, CK_ATTRIBUTE_TYPE type, const void *value, size_t len)
{
    cs_attr_kind_t kind = cs_attr_kind (type);
    if (kind == CS_ATTR_SECRET || kind == CS_ATTR_UNKNOWN)
        return CKR_OK;
    if (!(wire [*n] = s_wire_one (type, value, len)))
        return CKR_HOST_MEMORY;
    (*n)++;
    return CKR_OK;
}

CK_RV
cs_attrs_to_wire (const CK_ATTRIBUTE *tmpl, CK_ULONG count, Cs__Attribute ***wire_p, size_t *count_p)
{
    CK_RV rv = CKR_OK;
    size_t n = 0;
    Cs__Attribute **wire = calloc (count + 1, sizeof *wire);
    if (!wire)
        return CKR_HOST_MEMORY;
    for (CK_ULONG i = 0; rv == CKR_OK && i < count; i++)
        rv = s_wire_add (wire, &n, tmpl [i].type, tmpl [i].pValue, tmpl [i].ulValueLen);
    if (rv != CKR_OK) {
        cs_attrs_wire_free (wire, n);
        return rv;
    }
    *wire_p = wire;
    *count_p = n;
    return CKR_OK;
}

CK_RV
cs_attrs_list_to_wire (const cs_attrs_t *self, Cs__Attribute ***wire_p, size_t *count_p)
{
    CK_RV rv = CKR_OK;
    size_t n = 0;
    Cs__Attribute **wire = calloc (self->count + 1, sizeof *wire);
    if (!wire)
        return CKR_HOST_MEMORY;
    for (size_t i = 0; rv == CKR_OK && i < self->count; i++)
        rv = s_wire_add (wire, &n, self->items [i].type, self->items [i].value, self->items [i].len);
    if (rv != CKR_OK) {
        cs_attrs_wire_free (wire, n);
        return rv;
    }
    *wire_p = wire;
    *count_p = n;
    return CKR_OK;
}

void
cs_pad (unsigned char *field, size_t size, const char *text)
{
    size_t len = text ? strlen (text) : 0;
    memset (field, ' ', size);
    memcpy (field, text, len < size ? len : size);
}
