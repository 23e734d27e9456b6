/*  cs_obj_rules.h — the one table of the attributes of certificates and
 *  data objects (PKCS#11 2.40 §4.4 table 16, §4.5 table 18, §4.6 tables 20,
 *  21): which class has each attribute, its value kind, and how it may
 *  change.  Read by the module (pkcs11-module/dataobj.c, dataobj_jobs.c:
 *  templates, C_SetAttributeValue, C_CopyObject) and by the broker
 *  (broker/keys/objjobs.c: PutObjectJob and DestroyObjectJob, whatever the
 *  client sends; issue #19), so a client that skips the module meets the
 *  same rules.  docs/contracts/keys.md "Certificates and data objects".
 */
#ifndef CS_OBJ_RULES_H_INCLUDED
#define CS_OBJ_RULES_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <p11-kit/pkcs11.h>

typedef enum { CS_OBJ_BYTES, CS_OBJ_BOOL, CS_OBJ_ULONG } cs_obj_kind_t;

/*  How one attribute may change after creation: freely; only by
 *  C_CopyObject (CKA_PRIVATE, CKA_MODIFIABLE, CKA_DESTROYABLE); only to
 *  FALSE (CKA_COPYABLE); never (CKA_TRUSTED, a certificate's CKA_VALUE ...).  */
typedef enum { CS_OBJ_FREE, CS_OBJ_COPY_ONLY, CS_OBJ_ONLY_FALSE, CS_OBJ_FIXED } cs_obj_rule_t;

typedef struct {
    CK_ATTRIBUTE_TYPE type;
    cs_obj_kind_t kind;
    cs_obj_rule_t rule;
    bool cert, data;            /* an attribute of certificates, of data objects */
} cs_obj_def_t;

/*  The table (n_p: its row count); static, never freed.  */
const cs_obj_def_t *cs_obj_defs (size_t *n_p);

/*  The row of attribute `type` for objects of `klass` (CKO_CERTIFICATE or
 *  CKO_DATA), or NULL when the class has no such attribute.  */
const cs_obj_def_t *cs_obj_def (CK_OBJECT_CLASS klass, CK_ATTRIBUTE_TYPE type);

/*  How `def` may change on an object of `klass` (a certificate's CKA_VALUE
 *  never changes: §4.6.3).  */
cs_obj_rule_t cs_obj_rule (CK_OBJECT_CLASS klass, const cs_obj_def_t *def);

/*  The CK_BBOOL an object has for a flag it does not carry: TRUE for
 *  CKA_MODIFIABLE, CKA_COPYABLE, CKA_DESTROYABLE (§4.4 table 16), FALSE for
 *  the others.  */
bool cs_obj_flag_default (CK_ATTRIBUTE_TYPE type);

#endif
