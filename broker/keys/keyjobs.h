/*  keyjobs.h — key-management jobs of the broker on keystore rows.  Every
 *  template of an import, generation, set or copy job follows the one table
 *  of attribute rules the module follows too (common/cs_attr_rules.h,
 *  PKCS#11 2.40 §4.4 to §4.10), checked here again so that a modified
 *  module cannot get around them:
 *
 *    - a type outside the table, or one the object's class does not have
 *      in a set or copy: CKR_ATTRIBUTE_TYPE_INVALID (in a creation template
 *      an attribute of the other class of the pair is not kept; CKA_SIGN or
 *      CKA_DECRYPT on the public side: CKR_TEMPLATE_INCONSISTENT);
 *    - a change the table forbids (latched CKA_SENSITIVE, CKA_EXTRACTABLE,
 *      CKA_WRAP_WITH_TRUSTED, CKA_COPYABLE; computed CKA_LOCAL,
 *      CKA_KEY_GEN_MECHANISM, CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE;
 *      CKA_TRUSTED TRUE, which only the SO may set and the SO runs no key
 *      jobs; CKA_CLASS, CKA_KEY_TYPE, the key's values,
 *      CKA_ALLOWED_MECHANISMS after creation): CKR_ATTRIBUTE_READ_ONLY; a
 *      flag a row does not store is read with the table's default;
 *    - in a creation template the key's values must agree with the key
 *      (CKR_TEMPLATE_INCONSISTENT); CKA_ALLOWED_MECHANISMS must be a whole
 *      wire list (CKR_ATTRIBUTE_VALUE_INVALID);
 *    - private key components (CKA_VALUE, CKA_PRIVATE_EXPONENT, CKA_PRIME_1 ...)
 *      are never stored among the attributes;
 *    - after a set or copy, CKA_ALWAYS_SENSITIVE / CKA_NEVER_EXTRACTABLE are
 *      kept right (cs_attr_follow);
 *    - the usage rules of the tenant's policy (common/cs_usage.h,
 *      docs/CONTRACTS.md "Usage separation"): under strict a creation that
 *      combines a key role and a data role is CKR_TEMPLATE_INCONSISTENT, a
 *      role going FALSE -> TRUE (or a combined key regaining a use) in a
 *      set or copy CKR_ATTRIBUTE_READ_ONLY.
 *
 *  Each server-held key is a pair of objects (KeyInfo.has_private /
 *  has_public); the private object owns KeyInfo.id and .label, the public one
 *  carries its own CKA_ID/CKA_LABEL among public_attributes when they differ.
 *  The functions that touch the keystore run in a slow-pool thread with its
 *  own connection (slow_jobs.c), never in the frontend's; every failure is
 *  a CK_RV for the job's result.
 */
#ifndef KEYJOBS_H_INCLUDED
#define KEYJOBS_H_INCLUDED

/*  Bounds of one stored key object (issue #7 item 5), so that one key's
 *  KeyInfo stays under about 40 KiB and can never make a ListKeys reply
 *  reach the module's frame limit (CS_WIRE_MAX_REPLY, 16 MiB) on its own:
 *  attributes kept on each object (private, public) of a pair, and the
 *  bytes of their values.  Over either: CKR_TEMPLATE_INCONSISTENT (count)
 *  or CKR_ATTRIBUTE_VALUE_INVALID (bytes), nothing stored.  RSA keys made,
 *  imported or copied hold at most CS_WIRE_MAX_RSA_BITS: CKR_KEY_SIZE_RANGE.  */
#define KEYJOBS_MAX_ATTRIBUTES   64         /* attributes per object */
#define KEYJOBS_MAX_ATTR_BYTES   16384      /* bytes of attribute values per object */

#include <stdbool.h>
#include <openssl/evp.h>
#include "cs_driver.h"
#include "cs_mech.h"
#include "keystore.h"

/*  What decides the RSA sizes generation accepts (cs_mech_rsa_gen_range):
 *  keys/rsa-min-bits and the union of the boards' CKM_RSA_PKCS_KEY_PAIR_GEN
 *  range (bits; 0 = no limit), the same figures the modules get in Hello.  */
typedef struct {
    CK_ULONG policy_min;
    CK_ULONG board_min;
    CK_ULONG board_max;
} keyjobs_rsa_range_t;

/*  Checks a GenerateKeyPairJob and fills gen (pointing into job; the
 *  ec_params pointer may point at static DER of the curve) and *key_type_p.
 *  RSA: the sizes cs_mech_rsa_gen_ok accepts with `rsa` (default policy:
 *  2048..4096 bits, multiples of 8); EC P-256/384/521; Ed25519.  Returns
 *  CKR_OK, CKR_MECHANISM_INVALID, CKR_KEY_SIZE_RANGE,
 *  CKR_DOMAIN_PARAMS_INVALID, CKR_ATTRIBUTE_VALUE_INVALID (exponent) or
 *  CKR_TEMPLATE_INCOMPLETE.  */
CK_RV keyjobs_keygen (const Cs__GenerateKeyPairJob *job, const keyjobs_rsa_range_t *rsa, cs_keygen_t *gen,
                      CK_KEY_TYPE *key_type_p);

/*  True when the public exponent of job is 65537 (or left to the default):
 *  then a pre-generated pool key may serve it.  */
bool keyjobs_default_exponent (const Cs__GenerateKeyPairJob *job);

/*  Builds the KeyInfo of a new key pair made from pkey (private or public)
 *  with the application's templates applied (key_info_from_pkey, then the
 *  rules above).  `ref` and `home` may be NULL (a fresh "ks:" ref, home
 *  "keystore"); `generated` sets CKA_LOCAL, CKA_KEY_GEN_MECHANISM and
 *  CKA_ALWAYS_SENSITIVE / CKA_NEVER_EXTRACTABLE from the final CKA_SENSITIVE
 *  and CKA_EXTRACTABLE; `token` is the CKA_TOKEN the templates must agree
 *  with.  *info_p gets the result (caller frees with
 *  cs__key_info__free_unpacked).  Returns CKR_OK or the template's CK_RV.  */
CK_RV keyjobs_info_new (EVP_PKEY *pkey, const char *ref, const char *home, bool generated,
                        bool token, bool import,
                        Cs__Attribute **public_template, size_t n_public,
                        Cs__Attribute **private_template, size_t n_private,
                        Cs__KeyInfo **info_p);

/*  keyjobs_info_new for a generated ML-DSA or ML-KEM key pair (issue #23),
 *  whose public key pub (pub_len bytes, the raw FIPS 204 pk / FIPS 203 ek
 *  the generating board gave) and CKP_* parameter_set OpenSSL 3.0 cannot
 *  read from its PKCS#8 (key_info_from_pq); a fresh "ks:" ref.  */
CK_RV keyjobs_info_new_pq (CK_KEY_TYPE key_type, CK_ULONG parameter_set, const unsigned char *pub, size_t pub_len,
                           const char *home, bool token,
                           Cs__Attribute **public_template, size_t n_public,
                           Cs__Attribute **private_template, size_t n_private,
                           Cs__KeyInfo **info_p);

/*  Builds a public EVP_PKEY from a board key's public values (for
 *  key_info_from_pkey of a key generated on a board).  NULL on failure.  */
EVP_PKEY *keyjobs_pkey_from_board_key (const cs_key_info_t *key);

/*  ImportKeyJob: parses the PKCS#8 private key (its public half derived) or
 *  the SPKI public key with OpenSSL, applies the template (CKA_CLASS must
 *  match the kind of key sent, CKA_KEY_TYPE and the key's values must agree:
 *  CKR_TEMPLATE_INCONSISTENT; an unparsable key: CKR_ATTRIBUTE_VALUE_INVALID)
 *  and stores it durably.  *info_p gets the stored description.  */
CK_RV keyjobs_import (keystore_t *ks, const char *tenant, const Cs__ImportKeyJob *job,
                      Cs__KeyInfo **info_p);

/*  SetKeyAttributesJob on a keystore row of tenant: all attributes or none
 *  (CKR_ATTRIBUTE_READ_ONLY, CKR_ATTRIBUTE_VALUE_INVALID,
 *  CKR_ATTRIBUTE_TYPE_INVALID, CKR_ACTION_PROHIBITED when CKA_MODIFIABLE is
 *  FALSE, CKR_OBJECT_HANDLE_INVALID for a ref the tenant does not have).  */
CK_RV keyjobs_set (keystore_t *ks, const char *tenant, const Cs__SetKeyAttributesJob *job,
                   Cs__KeyInfo **info_p);

/*  CopyKeyJob: a new row (fresh ref) with the same material and the
 *  template applied as C_CopyObject allows; CKR_ACTION_PROHIBITED when
 *  CKA_COPYABLE is FALSE or the key lives on a board.  Copying the private
 *  object copies the pair; copying the public object makes a public key.  */
CK_RV keyjobs_copy (keystore_t *ks, const char *tenant, const Cs__CopyKeyJob *job,
                    Cs__KeyInfo **info_p);

/*  DestroyKeyJob: drops one half of the pair; the private half takes the
 *  private material with it; the row goes when both are gone (then *info_p
 *  is NULL).  CKR_ACTION_PROHIBITED when CKA_DESTROYABLE is FALSE.  When the
 *  private key lived on a board, *resident_board_p gets that board's name
 *  (malloc'd, caller frees): the caller destroys the resident key there.  */
CK_RV keyjobs_destroy (keystore_t *ks, const char *tenant, const Cs__DestroyKeyJob *job,
                       Cs__KeyInfo **info_p, char **resident_board_p);

/*  Applies a creation template to the description of a token secret key
 *  (secretkeys.h: key_type CKK_AES or CKK_GENERIC_SECRET, bits set, its
 *  defaults already among private_attributes) under the rules above, with
 *  a secret key's own: CKA_CLASS must be CKO_SECRET_KEY, CKA_KEY_TYPE and
 *  CKA_VALUE_LEN must agree (CKR_TEMPLATE_INCONSISTENT), CKA_VALUE_LEN is
 *  read-only afterwards; the usage flags are stored as given.  Then the
 *  "how it was made" flags (`generated`) and the bounds.  CKR_OK or the
 *  template's CK_RV.  */
CK_RV keyjobs_secret_apply (Cs__KeyInfo *info, Cs__Attribute **tmpl, size_t n, bool generated);

/*  Why the last keyjobs_* call of this thread broke a bound above (a
 *  static string for a log line), or NULL when it did not.  The frontend
 *  logs it with the client's name.  */
const char *keyjobs_limit_problem (void);

/*  The 16-byte CKA_ID a key generated on a board has there: the random
 *  bytes of its ref "ks:<32 hex>".  Returns 0, or -1 for another ref form.  */
int keyjobs_resident_id (const char *ref, unsigned char id [16]);

#endif
