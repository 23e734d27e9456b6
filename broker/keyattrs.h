/*  keyattrs.h — private to keyjobs.c and keyattrs.c: the attribute
 *  templates of key-management jobs applied to a Cs__KeyInfo under the
 *  rules of keyjobs.h (common/cs_attr_rules.h), and the bounds of a stored
 *  key object (KEYJOBS_MAX_ATTRIBUTES, KEYJOBS_MAX_ATTR_BYTES).  The
 *  public entry points built on these (keyjobs_secret_apply,
 *  keyjobs_limit_problem) stay declared in keyjobs.h.  */
#ifndef KEYATTRS_H_INCLUDED
#define KEYATTRS_H_INCLUDED

#include <stdbool.h>
#include "keyjobs.h"

/*  Which operation a template comes with: a creation (generation, import),
 *  C_SetAttributeValue or C_CopyObject.  */
typedef enum { KEYATTRS_CREATE, KEYATTRS_SET, KEYATTRS_COPY } keyattrs_mode_t;

/*  Applies a template to one side of info (priv: the private object);
 *  stops at the first failure and returns its CK_RV.  */
CK_RV keyattrs_apply_all (Cs__KeyInfo *info, bool priv, Cs__Attribute **attrs, size_t n,
                          keyattrs_mode_t mode, bool token, bool import);

/*  Keeps CKA_ALWAYS_SENSITIVE / CKA_NEVER_EXTRACTABLE of the private side
 *  right after a set or copy (cs_attr_follow).  */
CK_RV keyattrs_follow (Cs__KeyInfo *info);

/*  Checks the bounds of a key about to be stored (keyjobs.h); records why
 *  for keyjobs_limit_problem.  */
CK_RV keyattrs_limits (Cs__KeyInfo *info);

/*  Sets the "how it was made" flags (CKA_ALWAYS_SENSITIVE,
 *  CKA_NEVER_EXTRACTABLE) of the private side after the templates.  */
CK_RV keyattrs_origin (Cs__KeyInfo *info, bool generated);

/*  The flag `type` of a side, or fallback when absent.  */
bool keyattrs_flag (Cs__KeyInfo *info, bool priv, CK_ATTRIBUTE_TYPE type, bool fallback);

/*  Strips leading zero bytes (big-endian integers compare by value).  */
ProtobufCBinaryData keyattrs_strip (ProtobufCBinaryData value);

/*  Clears this thread's keyjobs_limit_problem at the start of a job.  */
void keyattrs_limit_reset (void);

#endif
