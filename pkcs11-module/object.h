/*  object.h — the objects of the token: key objects only.
 *
 *  Token objects (CKA_TOKEN TRUE) are the tenant's server-held keys, from a
 *  ListKeysJob: each KeyInfo gives a CKO_PRIVATE_KEY object when has_private
 *  and a CKO_PUBLIC_KEY object when has_public, with the attributes of its
 *  private_attributes / public_attributes over the defaults of a board key
 *  (PKCS#11 2.40 §4.8, §4.9); a token secret key (KeyInfo key_type CKK_AES
 *  or CKK_GENERIC_SECRET) gives one CKO_SECRET_KEY object, whose CKA_VALUE
 *  is always CKR_ATTRIBUTE_SENSITIVE: the broker holds it (§4.10).  Jobs name a token key by KeyInfo.ref.  The
 *  list is cached with its version and refreshed with ListKeysJob
 *  {known_version} on every C_FindObjectsInit (find.c) (an unchanged list costs one
 *  small round trip) and after login; key changes (generate, import, copy,
 *  set, destroy) put their reply's KeyInfo into the table at once.
 *
 *  Session objects (CKA_TOKEN FALSE) are made by C_CreateObject,
 *  C_GenerateKeyPair, C_CopyObject and C_DeriveKey and live in the module
 *  only; C_DeriveKey makes CKO_SECRET_KEY objects, whose CKA_VALUE sits in
 *  locked memory and is readable only when CKA_SENSITIVE is FALSE and
 *  CKA_EXTRACTABLE TRUE (PKCS#11 2.40 §4.10).  A
 *  private one is a per-request key: its PKCS#8 DER sits in locked memory
 *  (cs_secmem.h) and travels in every job that uses it (docs/DESIGN.md §1); it is
 *  wiped when the session that made it closes (PKCS#11 2.40 §6.7.4).
 *
 *  Handles: a token object keeps its handle for the life of the process
 *  (same ref and class, same handle, found through a hash index); session
 *  objects get fresh handles; handles are never reused.  A handle whose
 *  object is gone gives CKR_OBJECT_HANDLE_INVALID.  A CKA_PRIVATE object is
 *  visible only while the user is logged in.  Everything runs under the
 *  library mutex unless said otherwise.
 */
#ifndef CS_MODULE_OBJECT_H_INCLUDED
#define CS_MODULE_OBJECT_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cs_p11.h"
#include "cs_wire.h"
#include "attrs.h"
#include "key.h"
#include "cs_usage.h"

/*  ---- the token objects ---------------------------------------------- */

/*  The version of the key list held, for ListKeysJob.known_version: 0
 *  while no list is held or after cs_object_invalidate_inlock (the broker's
 *  versions start at 1, so it answers 0 with the whole list).  */
uint64_t cs_object_list_version_inlock (void);

/*  Replaces the token objects by `result` (from the broker, or from a test),
 *  keeping handles stable; an `unchanged` result keeps the cached list.
 *  Returns CKR_OK or CKR_HOST_MEMORY.  */
CK_RV cs_object_load_inlock (const Cs__ListKeysResult *result);

/*  Keys per ListKeysJob page this module asks for (client/list-page,
 *  docs/CONTRACTS.md "Key lists in pages"): 0 = the whole list in one
 *  reply.  Any thread.  */
#define CS_OBJECT_LIST_PAGE_DEFAULT 1000      /* = CS_CLIENT_LIST_PAGE_DEFAULT */
void cs_object_list_page_set (uint32_t keys);
uint32_t cs_object_list_page (void);

/*  A paged walk of the key list (find.c): begin, then one
 *  cs_object_walk_page_inlock per page as C_FindObjects needs it, then
 *  cs_object_walk_end_inlock after the last page (a walk left early just
 *  ends: the list is then not held, and the next refresh starts again).
 *  Token objects keep their handles across walks.
 *
 *  begin: marks the list not held and starts walk number W; *handles_p
 *  (malloc'd, caller frees) and *count_p get the session and data objects
 *  matching tmpl (the token objects come with the pages).  Returns W, or 0
 *  when out of memory.  */
unsigned cs_object_walk_begin_inlock (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_HANDLE **handles_p,
                                      size_t *count_p);

/*  Puts the page's keys (kept or changed, handles stable) and appends the
 *  handles of their visible objects matching tmpl to *handles_p (grown) and
 *  *count_p.  CKR_OK or CKR_HOST_MEMORY.  */
CK_RV cs_object_walk_page_inlock (const Cs__ListKeysResult *page, const CK_ATTRIBUTE *tmpl, CK_ULONG count,
                                  CK_OBJECT_HANDLE **handles_p, size_t *count_p);

/*  Walk W saw every page: token objects that no page of it (nor a key
 *  change since it began) put are gone; when W is still the latest walk,
 *  the list is held at `version` (its first page's).  */
void cs_object_walk_end_inlock (unsigned walk, uint64_t version);

/*  Puts one server-held key from a key-change reply into the table (its
 *  objects appear, change or go as its has_private/has_public say).  When
 *  handle_p is given it gets the handle of the key's `klass` object (0 when
 *  that object does not exist).  CKR_OK, CKR_HOST_MEMORY, or CKR_DEVICE_ERROR
 *  for an unusable KeyInfo.  */
CK_RV cs_object_put_inlock (const Cs__KeyInfo *info, CK_OBJECT_CLASS klass, CK_OBJECT_HANDLE *handle_p);

/*  Marks a token object gone (after DestroyKeyJob).  */
void cs_object_forget_inlock (CK_OBJECT_HANDLE handle);

/*  Marks the key list stale so the next refresh fetches it whole.  */
void cs_object_invalidate_inlock (void);

/*  Forgets every object and handle (C_Finalize, fork).  */
void cs_object_reset_inlock (void);

/*  ---- session objects ------------------------------------------------- */

/*  Adds a session object of `klass` made by session `session`, holding a new
 *  reference to `key` and taking the stored attributes *attrs (emptied).
 *  Returns CKR_OK with *handle_p, or CKR_HOST_MEMORY.  */
CK_RV cs_object_add_session_inlock (CK_SESSION_HANDLE session, CK_OBJECT_CLASS klass, cs_key_t *key,
                             cs_attrs_t *attrs, CK_OBJECT_HANDLE *handle_p);

/*  Destroys (and wipes) the session objects made by `session`, or all of
 *  them when session is 0 (C_CloseSession, C_CloseAllSessions).  */
void cs_object_session_closed_inlock (CK_SESSION_HANDLE session);

/*  Under the mutex, at C_Logout: destroys (and wipes) every private session
 *  object (CKA_PRIVATE TRUE): PKCS#11 2.40 §5.6 C_Logout.  */
void cs_object_logged_out_inlock (void);

/*  ---- looking at objects ---------------------------------------------- */

/*  What key management needs to know of one visible object: a snapshot.  */
typedef struct {
    CK_OBJECT_CLASS klass;
    cs_key_t *key;              /* reference */
    bool token;                 /* token object (then key->ref names it) */
    cs_attrs_t attrs;           /* copy of the object's stored attributes */
} cs_object_info_t;

/*  Snapshot of a visible object.  CKR_OK, CKR_OBJECT_HANDLE_INVALID,
 *  CKR_HOST_MEMORY.  Clear with cs_object_info_clear.  */
CK_RV cs_object_info_inlock (CK_OBJECT_HANDLE handle, cs_object_info_t *info);
void cs_object_info_clear (cs_object_info_t *info);

/*  A CK_BBOOL attribute of a visible object as C_GetAttributeValue would
 *  return it (stored, else the default); `dflt` for types it does not have.  */
bool cs_object_flag_inlock (CK_OBJECT_HANDLE handle, CK_ATTRIBUTE_TYPE type, bool dflt);

/*  The key behind a visible object, as a new reference (caller unrefs), and
 *  the object's class in *class_p; NULL when the handle is unknown or not
 *  visible now.  */
cs_key_t *cs_object_key_inlock (CK_OBJECT_HANDLE handle, CK_OBJECT_CLASS *class_p);

/*  Under the mutex, before an operation `want` (CKF_SIGN, CKF_DECRYPT, ...)
 *  with the key object `handle`: CKR_USER_NOT_LOGGED_IN without a CKU_USER
 *  login when the object is private (CKA_PRIVATE TRUE: PKCS#11 3.0 §4.4),
 *  or when it is a token key whose operation runs on a key the broker holds
 *  (a private-key operation, or any use of a token secret key); CKR_OK
 *  otherwise, also for an unknown handle (cs_object_use_inlock answers it).
 *  Public session objects need no login (docs/CONTRACTS.md "Login
 *  tickets" and "Public session objects", cryptoserver-pkcs11(7)).  */
CK_RV cs_object_login_check_inlock (CK_OBJECT_HANDLE handle, CK_FLAGS want);

/*  The key of a visible object for an operation `want` (CKF_SIGN, CKF_DECRYPT,
 *  CKF_DERIVE, CKF_SIGN_RECOVER on a private key; CKF_VERIFY, CKF_ENCRYPT,
 *  CKF_VERIFY_RECOVER on a public key), whose usage attribute (CKA_SIGN, ...,
 *  CKA_DERIVE, CKA_SIGN_RECOVER, CKA_VERIFY_RECOVER) must be TRUE.  CKR_OK with *key_p a new
 *  reference; CKR_KEY_HANDLE_INVALID; CKR_KEY_FUNCTION_NOT_PERMITTED, also
 *  when the tenant's usage rules refuse the use on a private or secret key
 *  (cs_object_usage_check_inlock: under strict a key with CKA_WRAP or
 *  CKA_UNWRAP never signs, decrypts or encrypts data, Bortolozzo et al.,
 *  CCS 2010; docs/CONTRACTS.md "Usage separation").  */
CK_RV cs_object_use_inlock (CK_OBJECT_HANDLE handle, CK_FLAGS want, cs_key_t **key_p);

/*  C_GetAttributeValue semantics (PKCS#11 2.40 §5.7) on a visible object.  */
CK_RV cs_object_get_attributes_inlock (CK_OBJECT_HANDLE handle, CK_ATTRIBUTE_PTR tmpl, CK_ULONG count);

/*  Handles of the visible objects matching every attribute of `tmpl`
 *  (malloc'd array of *count_p, caller frees; may be NULL when 0).
 *  Returns CKR_OK or CKR_HOST_MEMORY.  */
CK_RV cs_object_find_inlock (const CK_ATTRIBUTE *tmpl, CK_ULONG count,
                      CK_OBJECT_HANDLE **handles_p, size_t *count_p);

/*  ---- changing objects ------------------------------------------------ */

/*  Checks a C_SetAttributeValue (copy false) or C_CopyObject (copy true)
 *  template against a visible object with the one table of attribute rules
 *  (common/cs_attr_rules.h, PKCS#11 2.40 §4.4 to §4.10, §5.7):
 *  CKR_OBJECT_HANDLE_INVALID; CKR_ACTION_PROHIBITED when the object is not
 *  CKA_MODIFIABLE (set) or not CKA_COPYABLE (copy);
 *  CKR_ATTRIBUTE_TYPE_INVALID for a type the object does not have;
 *  CKR_ATTRIBUTE_READ_ONLY for a change the table forbids (CKA_CLASS,
 *  CKA_KEY_TYPE, key material, CKA_LOCAL, CKA_ALWAYS_SENSITIVE,
 *  CKA_NEVER_EXTRACTABLE, CKA_KEY_GEN_MECHANISM, CKA_ALLOWED_MECHANISMS,
 *  CKA_SENSITIVE and CKA_WRAP_WITH_TRUSTED TRUE→FALSE, CKA_EXTRACTABLE
 *  FALSE→TRUE, CKA_TRUSTED TRUE without the SO ..., and under the strict
 *  usage separation a role going FALSE→TRUE or a combined key regaining
 *  a use over the whole template, cs_usage_change_check); a copy may also set
 *  CKA_TOKEN, CKA_PRIVATE, CKA_MODIFIABLE, CKA_DESTROYABLE and give
 *  read-only ones their current value); the template's own errors
 *  (cs_template_check).  */
CK_RV cs_object_check_change_inlock (CK_OBJECT_HANDLE handle, const CK_ATTRIBUTE *tmpl, CK_ULONG count, bool copy);

/*  The tenant's usage-separation policy (common/cs_usage.h), from
 *  HelloResult.usage_separation (token.c; CS_USAGE_STRICT until a Hello and
 *  from older brokers).  An atomic: no mutex needed.  */
void cs_object_usage_set (cs_usage_policy_t policy);
cs_usage_policy_t cs_object_usage (void);

/*  The role bits (cs_usage.h) of a visible object: a secret key's seven
 *  role attributes, a private key's CKA_SIGN, CKA_SIGN_RECOVER,
 *  CKA_DECRYPT, CKA_UNWRAP, CKA_DERIVE, a public key's CKA_WRAP (its
 *  CKA_ENCRYPT and CKA_VERIFY are public operations); 0 when not visible.  */
unsigned cs_object_roles_inlock (CK_OBJECT_HANDLE handle);

/*  cs_usage_job_check of the tenant's policy for `use` of a visible
 *  object: CKR_OK or CKR_KEY_FUNCTION_NOT_PERMITTED.  */
CK_RV cs_object_usage_check_inlock (CK_OBJECT_HANDLE handle, cs_usage_use_t use);

/*  Under strict, a new private or secret key's role defaults
 *  (cs_usage_default_off): a template that asks for a key role (CKA_WRAP,
 *  CKA_UNWRAP) stores FALSE for each data role it does not name, and the
 *  reverse, in attrs.  0, or -1 when out of memory.  */
int cs_object_usage_defaults (CK_OBJECT_CLASS klass, const CK_ATTRIBUTE *tmpl, CK_ULONG count, cs_attrs_t *attrs);

/*  The creation rules of common/cs_attr_rules.h for a template of a new
 *  key object of `klass` (C_CreateObject, C_GenerateKey(Pair)):
 *  CKR_ATTRIBUTE_READ_ONLY for a computed attribute (CKA_LOCAL,
 *  CKA_KEY_GEN_MECHANISM, CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE) or
 *  CKA_TRUSTED TRUE unless `so` (the caller read cs_login_so_logged_in*:
 *  CKU_SO is logged in); else CKR_OK (types the class does not have, and
 *  the values' form, are the callers' to check).  Reads no shared state:
 *  no mutex needed.  */
CK_RV cs_object_check_create (CK_OBJECT_CLASS klass, const CK_ATTRIBUTE *tmpl, CK_ULONG count, bool so);
/*  (cs_object_check_create also: a template that sets a key role and a data
 *  role TRUE together under the strict policy is CKR_TEMPLATE_INCONSISTENT,
 *  cs_usage_create_check.)  */

/*  Applies a checked template to a session object.  CKR_OK, CKR_HOST_MEMORY,
 *  CKR_OBJECT_HANDLE_INVALID.  */
CK_RV cs_object_set_local_inlock (CK_OBJECT_HANDLE handle, const CK_ATTRIBUTE *tmpl, CK_ULONG count);

/*  Keeps the computed CKA_ALWAYS_SENSITIVE / CKA_NEVER_EXTRACTABLE of a
 *  private or secret key's stored list right after its CKA_SENSITIVE or
 *  CKA_EXTRACTABLE changed (cs_attr_follow).  0, or -1 (out of memory).  */
int cs_object_attrs_follow (CK_OBJECT_CLASS klass, cs_attrs_t *attrs);

/*  CKA_ALLOWED_MECHANISMS (PKCS#11 2.40 §4.4 table 25): true when the
 *  visible key object `handle` has no list, an empty one, or one naming
 *  `mech` (the application's mechanism); the C_*Init and C_DeriveKey
 *  callers answer CKR_MECHANISM_INVALID otherwise.  Under the mutex.  */
bool cs_object_mech_allowed_inlock (CK_OBJECT_HANDLE handle, CK_MECHANISM_TYPE mech);

/*  Destroys a session object (wiping a per-request key).  CKR_OK, or
 *  CKR_OBJECT_HANDLE_INVALID.  */
CK_RV cs_object_destroy_local_inlock (CK_OBJECT_HANDLE handle);

#endif
