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
#include "cs_usage.h"

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

/*  Puts `text` (malloc'd; ownership moves to the field) in a string field of
 *  an unpacked KeyInfo, freeing the old value unless it is protobuf-c's
 *  static default of an absent field (protobuf_c_empty_string, which must
 *  never be freed: a row without CKA_LABEL has it).  CKR_HOST_MEMORY when
 *  text is NULL (the field is left as it was), else CKR_OK.  */
CK_RV keyattrs_string_take (char **field, char *text);

/*  Checks the bounds of a key about to be stored (keyjobs.h); records why
 *  for keyjobs_limit_problem.  */
CK_RV keyattrs_limits (Cs__KeyInfo *info);

/*  CKA_ALLOWED_MECHANISMS of a key's private object (PKCS#11 2.40 §4.4
 *  table 25): CKR_OK when the list is absent or allows `mech` for `flag`
 *  (CKF_SIGN, CKF_DECRYPT, CKF_UNWRAP, CKF_DERIVE, ...:
 *  cs_attr_wire_mech_allowed), else CKR_MECHANISM_INVALID.  */
CK_RV keyattrs_mech_allowed (const Cs__KeyInfo *info, CK_MECHANISM_TYPE mech, CK_FLAGS flag);

/*  May a private key (info) run `use` (CS_USE_SIGN, CS_USE_DECRYPT,
 *  CS_USE_UNWRAP, CS_USE_DERIVE) with wire mechanism `mech` under `policy`?
 *  Its roles (cs_usage_job_check; raw RSA needs both roles,
 *  cs_usage_mech_check), then its CKA_ALLOWED_MECHANISMS.  CKR_OK,
 *  CKR_KEY_FUNCTION_NOT_PERMITTED (also for another use) or
 *  CKR_MECHANISM_INVALID (docs/contracts/keys.md "Usage separation").  The
 *  parties of a shared key check their own rows with it (party_sign.c).  */
CK_RV keyattrs_use_check (const Cs__KeyInfo *info, cs_usage_policy_t policy, cs_usage_use_t use, CK_MECHANISM_TYPE mech);

/*  Sets the "how it was made" flags (CKA_ALWAYS_SENSITIVE,
 *  CKA_NEVER_EXTRACTABLE) of the private side after the templates.  */
CK_RV keyattrs_origin (Cs__KeyInfo *info, bool generated);

/*  The flag `type` of a side, or fallback when absent.  */
bool keyattrs_flag (Cs__KeyInfo *info, bool priv, CK_ATTRIBUTE_TYPE type, bool fallback);

/*  The role bits (cs_usage.h) of a keystore key as the module shows them:
 *  a token secret key's stored flags (absent: FALSE); a pair's CKA_SIGN,
 *  CKA_DECRYPT (KeyInfo.can_sign, .can_decrypt), CKA_SIGN_RECOVER
 *  (absent: CKA_SIGN of an RSA key), CKA_UNWRAP, CKA_DERIVE of the private
 *  half and CKA_WRAP of the public half (absent: FALSE).  The public
 *  half's CKA_ENCRYPT is left out: anyone holding the public key encrypts
 *  without the token.  No allocation.  */
unsigned keyattrs_roles (const Cs__KeyInfo *info);

/*  The usage-separation policy (cs_usage.h) of the tenant whose key job
 *  this thread runs next: slow_jobs.c sets it before every import,
 *  generation, set or copy (default CS_USAGE_STRICT).  Thread-local, like
 *  keyjobs_limit_problem.  */
void keyattrs_usage_set (cs_usage_policy_t policy);

/*  Under that policy, a new key's role defaults (cs_usage_default_off),
 *  applied to info before its templates: a template that asks for a key
 *  role leaves the data roles it does not name FALSE, and the reverse.  */
CK_RV keyattrs_usage_defaults (Cs__KeyInfo *info, Cs__Attribute **pub, size_t n_pub,
                               Cs__Attribute **priv, size_t n_priv);

/*  The new key's roles under that policy (cs_usage_create_check):
 *  CKR_OK or CKR_TEMPLATE_INCONSISTENT.  */
CK_RV keyattrs_usage_create (const Cs__KeyInfo *info);

/*  A set or copy that took the roles from `before` to info's
 *  (cs_usage_change_check): CKR_OK or CKR_ATTRIBUTE_READ_ONLY.  */
CK_RV keyattrs_usage_change (unsigned before, const Cs__KeyInfo *info);

/*  Strips leading zero bytes (big-endian integers compare by value).  */
ProtobufCBinaryData keyattrs_strip (ProtobufCBinaryData value);

/*  Clears this thread's keyjobs_limit_problem at the start of a job.  */
void keyattrs_limit_reset (void);

#endif
