/*  dataobj.h — certificates (CKO_CERTIFICATE, CKC_X_509) and data objects
 *  (CKO_DATA) of the token (issue #10; PKCS#11 2.40 §4.4-§4.6).
 *
 *  Session objects live in this table only; token objects are rows of the
 *  tenant's keystore that the broker lists (ListObjectsJob), writes
 *  (PutObjectJob) and removes (DestroyObjectJob).  Their handles are
 *  CS_DATAOBJ_HANDLE_BASE + n, apart from the key objects' (object.h), and
 *  stay the same for the life of the process (a token object keeps its
 *  handle across refreshes by its ref).  Who may do what: reading public
 *  objects needs no login; a CKA_PRIVATE object is visible to a logged-in
 *  user only; token objects are written, changed and destroyed in R/W
 *  sessions of a logged-in user (CKR_SESSION_READ_ONLY,
 *  CKR_USER_NOT_LOGGED_IN).  A certificate's CKA_SUBJECT, CKA_ISSUER,
 *  CKA_SERIAL_NUMBER, CKA_PUBLIC_KEY_INFO and CKA_CHECK_VALUE come from its
 *  CKA_VALUE (OpenSSL d2i_X509) when the template does not give them;
 *  CKA_VALUE and CKA_CERTIFICATE_TYPE never change (§4.6 table 21, 23).
 */
#ifndef CS_MODULE_DATAOBJ_H_INCLUDED
#define CS_MODULE_DATAOBJ_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include "cs_p11.h"
#include "cs_wire.h"
#include "attrs.h"

#define CS_DATAOBJ_HANDLE_BASE  0x40000000UL    /* handles of this table: BASE + 1 ... */

/*  True when handle names an object of this table (live or not).  */
bool cs_dataobj_is_handle (CK_OBJECT_HANDLE handle);

/*  True when a template's CKA_CLASS is CKO_CERTIFICATE or CKO_DATA.  */
bool cs_dataobj_is_template (const CK_ATTRIBUTE *tmpl, CK_ULONG count);

/*  Without the mutex, from C_FindObjectsInit: fetches the tenant's token
 *  objects (ListObjectsJob) unless tmpl names a class of another kind.  A
 *  broker that does not know the job (older than issue #10), a stale
 *  login or a link failure leave the list as it was (logged at debug
 *  level): key searches never fail because of objects.  Returns CKR_OK or
 *  CKR_HOST_MEMORY.  */
CK_RV cs_dataobj_refresh (const CK_ATTRIBUTE *tmpl, CK_ULONG count);

/*  Under the mutex.  Replaces the token objects by `objects` (from the
 *  broker, or a test; NULL: none); a ref seen before keeps its handle.
 *  CKR_OK or CKR_HOST_MEMORY.  */
CK_RV cs_dataobj_load_inlock (const Cs__ObjectList *objects);

/*  The attribute list of a new object of klass made by template tmpl
 *  (C_CreateObject): the template checked (the codes of
 *  cs_dataobj_create), its entries but CKA_CLASS and CKA_TOKEN, the
 *  defaults of the class (CKA_PRIVATE FALSE; CKA_MODIFIABLE, CKA_COPYABLE,
 *  CKA_DESTROYABLE TRUE; empty byte arrays; category 0), and for a
 *  certificate CKA_SUBJECT, CKA_ISSUER, CKA_SERIAL_NUMBER (DER, as X.509
 *  has them), CKA_PUBLIC_KEY_INFO and CKA_CHECK_VALUE from CKA_VALUE where
 *  the template has none.  *attrs (empty on entry) is the caller's to
 *  clear, also on failure.  */
CK_RV cs_dataobj_attrs_new (CK_OBJECT_CLASS klass, const CK_ATTRIBUTE *tmpl, CK_ULONG count, cs_attrs_t *attrs);

/*  Under the mutex.  C_GetAttributeValue of an object of this table
 *  (PKCS#11 2.40 §5.7 rules per entry); CKR_OBJECT_HANDLE_INVALID when it
 *  is gone or not visible.  */
CK_RV cs_dataobj_get_attributes_inlock (CK_OBJECT_HANDLE handle, CK_ATTRIBUTE_PTR tmpl, CK_ULONG count);

/*  Under the mutex.  The number of entries (an upper bound of a find).  */
size_t cs_dataobj_count_inlock (void);

/*  Under the mutex.  Writes the handles of the visible objects matching
 *  every entry of tmpl to out (room for cs_dataobj_count_inlock ()); returns how
 *  many.  */
size_t cs_dataobj_find_inlock (const CK_ATTRIBUTE *tmpl, CK_ULONG count, CK_OBJECT_HANDLE *out);

/*  Under the mutex.  Session `session` closed (0: every session): its
 *  session objects go.  */
void cs_dataobj_session_closed_inlock (CK_SESSION_HANDLE session);

/*  Under the mutex, at logout: private session objects go.  */
void cs_dataobj_logged_out_inlock (void);

/*  Forgets everything (C_Finalize, fork).  */
void cs_dataobj_reset_inlock (void);

/*  Entry points, called without the mutex by C_CreateObject,
 *  C_DestroyObject, C_SetAttributeValue and C_CopyObject for templates
 *  (cs_dataobj_is_template) and handles (cs_dataobj_is_handle) of this
 *  table.  Return the CK_RV of the entry point: besides the session and
 *  login codes, CKR_TEMPLATE_INCOMPLETE (a certificate without
 *  CKA_CERTIFICATE_TYPE or CKA_VALUE), CKR_ATTRIBUTE_TYPE_INVALID (an
 *  attribute the class does not have), CKR_ATTRIBUTE_VALUE_INVALID (not a
 *  DER X.509 certificate, a type other than CKC_X_509, a wrong
 *  CKA_CHECK_VALUE), CKR_ATTRIBUTE_READ_ONLY (CKA_TRUSTED TRUE, changing
 *  CKA_VALUE of a certificate), CKR_ACTION_PROHIBITED (CKA_MODIFIABLE,
 *  CKA_DESTROYABLE, CKA_COPYABLE FALSE), and what the broker answers.  */
CK_RV cs_dataobj_create (CK_SESSION_HANDLE session, const CK_ATTRIBUTE *tmpl, CK_ULONG count,
                         CK_OBJECT_HANDLE *object_p);
CK_RV cs_dataobj_destroy (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE object);
CK_RV cs_dataobj_set (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE object, const CK_ATTRIBUTE *tmpl,
                      CK_ULONG count);
CK_RV cs_dataobj_copy (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE object, const CK_ATTRIBUTE *tmpl,
                       CK_ULONG count, CK_OBJECT_HANDLE *object_p);

#endif
