/*  secretkeys.h — token secret keys (issue #10): CKO_SECRET_KEY objects of
 *  CKK_AES (16, 24 or 32 bytes) and CKK_GENERIC_SECRET (16..256 bytes)
 *  held by the broker, never by the module.
 *
 *  A token secret key is a key row of the tenant (cryptoserver-keystore(5)
 *  "keys"): its description, a cs.KeyInfo with key_type CKK_AES or
 *  CKK_GENERIC_SECRET, bits = 8 * CKA_VALUE_LEN, has_private TRUE (its one
 *  object, CKO_SECRET_KEY) and has_public FALSE, its attributes among
 *  private_attributes; and its value where a private key keeps its PKCS#8:
 *  sealed with AES-256-GCM under the master key, associated data
 *  "cs-key-v1" || tenant || NUL || ref.  So listing, destroying, the key
 *  cache, idempotency and tenant separation are those of key pairs.  The
 *  value reaches a board inside a SymJob's work item (route.c) and is
 *  never returned to a client: CKA_VALUE is not an attribute of the row.
 *
 *  Defaults (PKCS#11 2.40 §4.10, as SoftHSMv2): CKA_SENSITIVE TRUE,
 *  CKA_EXTRACTABLE FALSE, CKA_PRIVATE TRUE; CKA_ENCRYPT and CKA_DECRYPT TRUE
 *  for AES, CKA_SIGN and CKA_VERIFY TRUE for a generic secret, the others
 *  FALSE; the template overrides them (keyjobs_secret_apply).  These run in
 *  a slow-pool thread (slow_jobs.c) with its own keystore connection.
 */
#ifndef SECRETKEYS_H_INCLUDED
#define SECRETKEYS_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <p11-kit/pkcs11.h>
#include "cryptoserver.pb-c.h"
#include "keystore.h"
#include "cs_mech.h"
#include "cs_usage.h"

/*  True for the key types of token secret keys.  */
static inline bool
secretkeys_type (uint64_t key_type)
{
    return key_type == CKK_AES || key_type == CKK_GENERIC_SECRET;
}

/*  True when len bytes are a valid size for key_type (CKK_AES: 16, 24, 32;
 *  CKK_GENERIC_SECRET: 16..256).  */
bool secretkeys_size_ok (uint64_t key_type, size_t len);

/*  GenerateKeyJob: the value from OpenSSL's RAND_priv_bytes, described with
 *  the template (CKA_LOCAL TRUE, CKA_KEY_GEN_MECHANISM the job's) and
 *  stored durably.  *info_p gets the stored description (caller frees with
 *  cs__key_info__free_unpacked).  CKR_MECHANISM_INVALID (not
 *  CKM_AES_KEY_GEN / CKM_GENERIC_SECRET_KEY_GEN), CKR_KEY_SIZE_RANGE, the
 *  template's CK_RV (keyjobs_secret_apply), CKR_DEVICE_ERROR (the keystore
 *  write failed), CKR_HOST_MEMORY.  */
CK_RV secretkeys_generate (keystore_t *ks, const char *tenant, const Cs__GenerateKeyJob *job,
                           Cs__KeyInfo **info_p);

/*  ImportKeyJob with secret_value (C_CreateObject of a token secret key):
 *  the template's CKA_KEY_TYPE (CKR_TEMPLATE_INCOMPLETE without one) names
 *  the type; a size the type does not take is CKR_ATTRIBUTE_VALUE_INVALID;
 *  otherwise as secretkeys_generate (CKA_LOCAL FALSE).  */
CK_RV secretkeys_import (keystore_t *ks, const char *tenant, const Cs__ImportKeyJob *job,
                         Cs__KeyInfo **info_p);

/*  What a SymJob may do with a token secret key (route.c): CKR_OK when its
 *  type is the key type of the mechanism's `row` (else
 *  CKR_KEY_TYPE_INCONSISTENT), the usage rules of `policy` allow the use
 *  (cs_usage_job_check: data CS_SYM_ENCRYPT needs CKA_ENCRYPT,
 *  CS_SYM_DECRYPT CKA_DECRYPT, CS_SYM_SIGN CKA_SIGN; key_wrap CS_SYM_ENCRYPT
 *  CKA_WRAP, key_wrap CS_SYM_DECRYPT CKA_UNWRAP; under strict none of them
 *  on a key that also holds a role of the other class; else
 *  CKR_KEY_FUNCTION_NOT_PERMITTED), and its CKA_ALLOWED_MECHANISMS lists
 *  row->type for that operation (cs_attr_wire_mech_allowed; else
 *  CKR_MECHANISM_INVALID: a GCM-only key never answers ECB, whatever the
 *  client sends).  docs/CONTRACTS.md "Usage separation".  */
CK_RV secretkeys_usable (const Cs__KeyInfo *info, cs_usage_policy_t policy, const cs_mech_row_t *row, int operation,
                         bool key_wrap);

#endif
