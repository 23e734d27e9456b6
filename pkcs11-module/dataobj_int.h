/*  dataobj_int.h — what dataobj.c and dataobj_jobs.c share (internal to
 *  the module's certificates and data objects; dataobj.h is the API).
 *  Everything here runs under the library mutex.  */
#ifndef CS_MODULE_DATAOBJ_INT_H_INCLUDED
#define CS_MODULE_DATAOBJ_INT_H_INCLUDED

#include <stdbool.h>
#include "attrs.h"
#include "cs_p11.h"
#include "cs_obj_rules.h"

/*  One entry of the table: a certificate or data object.  Every attribute
 *  but CKA_CLASS and CKA_TOKEN is in attrs in its C form.  */
typedef struct {
    bool live;
    CK_OBJECT_CLASS klass;
    char *ref;                  /* token objects (kept while gone); NULL: session object */
    CK_SESSION_HANDLE session;  /* session objects: the session that made it */
    cs_attrs_t attrs;
} dataobj_t;

/*  The attribute table (kinds, change rules) is common/cs_obj_rules.h,
    which the broker reads too.  */

/*  A template's CKA_CLASS into *klass_p; false when it has none (or one
 *  of the wrong size, or without a value).  Safe on unchecked templates.  */
bool dataobj_template_class (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_CLASS *klass_p);

/*  The entry of a handle (NULL: not one of the table) and the handle of
 *  an entry.  */
dataobj_t *dataobj_object_inlock (CK_OBJECT_HANDLE handle);
CK_OBJECT_HANDLE dataobj_handle (const dataobj_t *object);

/*  True when object is live and, if CKA_PRIVATE, the user is logged in.  */
bool dataobj_visible_inlock (const dataobj_t *object);

/*  A new, empty entry (its handle is taken for good), or NULL.  */
dataobj_t *dataobj_add_inlock (void);

/*  Empties an entry (its handle and ref stay).  */
void dataobj_clear_inlock (dataobj_t *object);

/*  The token entry of ref, or NULL.  */
dataobj_t *dataobj_by_ref_inlock (const char *ref);

/*  Empties every token entry (before a new list).  */
void dataobj_clear_tokens_inlock (void);

/*  Points *data and *len at the value of type (CKA_CLASS and CKA_TOKEN in
 *  *number / *flag); false when the object has none.  */
bool dataobj_value (const dataobj_t *object, CK_ATTRIBUTE_TYPE type, const void **data, CK_ULONG *len,
                    CK_BBOOL *flag, CK_ULONG *number);

/*  Checks a template's entries for an object of klass: CKR_OK,
 *  CKR_ARGUMENTS_BAD, CKR_TEMPLATE_INCONSISTENT, CKR_ATTRIBUTE_TYPE_INVALID,
 *  CKR_ATTRIBUTE_VALUE_INVALID.  */
CK_RV dataobj_check_template (CK_OBJECT_CLASS klass, const CK_ATTRIBUTE *tmpl, CK_ULONG count);

/*  Copies the template's entries but CKA_CLASS and CKA_TOKEN over attrs.
 *  0, or -1 when out of memory.  */
int dataobj_attrs_add (cs_attrs_t *attrs, const CK_ATTRIBUTE *tmpl, CK_ULONG count);

#endif
