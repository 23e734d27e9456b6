/*  object_change.c — the checks and local edits of key objects
 *  (C_SetAttributeValue, C_CopyObject, C_CreateObject, C_DestroyObject of a
 *  session object) over the table of object.c, by the rules of
 *  cs_attr_rules.h and docs/CONTRACTS.md "Usage separation".
 */
#include <stdlib.h>
#include <string.h>
#include "cs_attr_rules.h"
#include "cs_usage.h"
#include "login.h"
#include "object.h"
#include "object_int.h"

/*  ---- changing objects ------------------------------------------------------ */

/*  Checks one attribute of a change against the object's current value
 *  with the rules of cs_attr_rules.h (the broker applies the same table to
 *  server-held keys).  */
static CK_RV
s_check_one_change_inlock (const cs_object_t *object, const CK_ATTRIBUTE *attr, bool copy)
{
    cs_objattr_value_t value = { 0 };
    cs_objattr_result_t kind = cs_objattr_get (object, attr->type, &value);
    bool flag = cs_attr_kind (attr->type) == CS_ATTR_BOOL;
    cs_attr_change_t change = {
        .now = flag && kind == CS_OBJATTR_OK && value.len == 1 ? *(const CK_BBOOL *) value.data != 0 : -1,
        .to = flag ? *(const CK_BBOOL *) attr->pValue != 0 : -1,
        .same = kind == CS_OBJATTR_OK && value.len == attr->ulValueLen
             && (!value.len || memcmp (value.data, attr->pValue, value.len) == 0),
        .so = cs_login_so_logged_in_inlock () };
    cs_objattr_value_wipe (&value);
    if (kind == CS_OBJATTR_INVALID)
        return CKR_ATTRIBUTE_TYPE_INVALID;      /* not an attribute of this object */
    return cs_attr_rule_check (object->klass, attr->type, copy ? CS_ATTR_OP_COPY : CS_ATTR_OP_SET, &change);
}

CK_RV
cs_object_check_change_inlock (CK_OBJECT_HANDLE handle, const CK_ATTRIBUTE *tmpl, CK_ULONG count, bool copy)
{
    const cs_object_t *object = cs_object_entry_inlock (handle);
    CK_RV rv;
    if (!cs_object_visible_inlock (object))
        return CKR_OBJECT_HANDLE_INVALID;
    if ((rv = cs_template_check (tmpl, count)) != CKR_OK)
        return rv;
    if (!cs_objattr_flag (object, copy ? CKA_COPYABLE : CKA_MODIFIABLE, false))
        return CKR_ACTION_PROHIBITED;
    for (CK_ULONG i = 0; i < count; i++)
        if ((rv = s_check_one_change_inlock (object, &tmpl [i], copy)) != CKR_OK)
            return rv;
    /*  The roles after the whole template (cs_usage_change_check).  */
    unsigned before = cs_objattr_roles (object), after = before;
    for (CK_ULONG i = 0; i < count; i++)
        if (cs_objattr_role_of (object->klass, tmpl [i].type))
            after = *(const CK_BBOOL *) tmpl [i].pValue ? after | cs_usage_role_bit (tmpl [i].type)
                                                       : after & ~cs_usage_role_bit (tmpl [i].type);
    return cs_usage_change_check (cs_object_usage (), before, after);
}

CK_RV
cs_object_check_create (CK_OBJECT_CLASS klass, const CK_ATTRIBUTE *tmpl, CK_ULONG count, bool so)
{
    unsigned asked = 0;
    for (CK_ULONG i = 0; tmpl && i < count; i++) {
        const cs_attr_rule_t *rule = cs_attr_rule (tmpl [i].type);
        bool flag = rule && rule->value == CS_ATTR_V_BOOL && tmpl [i].pValue && tmpl [i].ulValueLen == 1;
        cs_attr_change_t change = { .now = -1, .so = so,
                                    .to = flag ? *(const CK_BBOOL *) tmpl [i].pValue != 0 : -1 };
        if (!rule)
            continue;
        if ((rule->rules & CS_ATTR_COMPUTED)
        ||  (cs_attr_rule_has (klass, tmpl [i].type)
             && cs_attr_rule_check (klass, tmpl [i].type, CS_ATTR_OP_CREATE, &change) == CKR_ATTRIBUTE_READ_ONLY))
            return CKR_ATTRIBUTE_READ_ONLY;
        if (flag && change.to == 1 && cs_objattr_role_of (klass, tmpl [i].type))
            asked |= cs_usage_role_bit (tmpl [i].type);
    }
    return cs_usage_create_check (cs_object_usage (), asked);   /* docs/CONTRACTS.md "Usage separation" */
}

/*  Types a session object never stores: they come from its key or entry.  */
static bool
s_not_stored (CK_ATTRIBUTE_TYPE type)
{
    return cs_objattr_is_material (type) || type == CKA_TOKEN;
}

CK_RV
cs_object_set_local_inlock (CK_OBJECT_HANDLE handle, const CK_ATTRIBUTE *tmpl, CK_ULONG count)
{
    cs_object_t *object = cs_object_entry_inlock (handle);
    cs_attrs_t attrs = { 0 };
    if (!cs_object_visible_inlock (object) || object->ref)
        return CKR_OBJECT_HANDLE_INVALID;
    if (cs_attrs_copy (&attrs, &object->attrs) || cs_attrs_add_template (&attrs, tmpl, count, s_not_stored)
    ||  cs_object_attrs_follow (object->klass, &attrs)) {
        cs_attrs_clear (&attrs);
        return CKR_HOST_MEMORY;
    }
    cs_attrs_clear (&object->attrs);
    object->attrs = attrs;
    return CKR_OK;
}

int
cs_object_attrs_follow (CK_OBJECT_CLASS klass, cs_attrs_t *attrs)
{
    bool always = cs_attrs_bool (attrs, CKA_ALWAYS_SENSITIVE, false);
    bool never = cs_attrs_bool (attrs, CKA_NEVER_EXTRACTABLE, false);
    if (klass != CKO_PRIVATE_KEY && klass != CKO_SECRET_KEY)
        return 0;
    cs_attr_follow (cs_attrs_bool (attrs, CKA_SENSITIVE, true), cs_attrs_bool (attrs, CKA_EXTRACTABLE, false),
                    &always, &never);
    if ((cs_attrs_find (attrs, CKA_ALWAYS_SENSITIVE) && cs_attrs_set_bool (attrs, CKA_ALWAYS_SENSITIVE, always))
    ||  (cs_attrs_find (attrs, CKA_NEVER_EXTRACTABLE) && cs_attrs_set_bool (attrs, CKA_NEVER_EXTRACTABLE, never)))
        return -1;
    return 0;
}

bool
cs_object_mech_allowed_inlock (CK_OBJECT_HANDLE handle, CK_MECHANISM_TYPE mech)
{
    const cs_object_t *object = cs_object_entry_inlock (handle);
    const cs_attr_t *list = cs_object_visible_inlock (object) ? cs_attrs_find (&object->attrs, CKA_ALLOWED_MECHANISMS) : NULL;
    return !list || cs_attr_mech_allowed (list->value, list->len, mech);
}

CK_RV
cs_object_destroy_local_inlock (CK_OBJECT_HANDLE handle)
{
    cs_object_t *object = cs_object_entry_inlock (handle);
    if (!cs_object_visible_inlock (object) || object->ref)
        return CKR_OBJECT_HANDLE_INVALID;
    cs_object_entry_clear_inlock (object);
    return CKR_OK;
}
