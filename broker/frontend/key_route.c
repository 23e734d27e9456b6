/*  key_route.c — a crypto job's key and the boards it allows: the key of
 *  a sign, decrypt or derive job (per-request PKCS#8, "board:" ref of the
 *  tenant, "ks:" keystore ref from the cache, whose CKA_ALLOWED_MECHANISMS
 *  and the tenant's usage policy must allow the job), the boards that take
 *  its material or hold it, narrowed to the boards that run its mechanism
 *  (docs/CONTRACTS.md "Routing"); a token secret key's rules for a
 *  secret-key job (secretkeys.h).  route.c, the job room, asks and goes on.
 *
 *  Owns: the pinning of a cached key by the item it routes.
 *  May call: board.h capabilities, ks_cache.h, keyattrs.h, secretkeys.h,
 *  inventory.c (fe_board_key_find, fe_boards_that), reply.c (fe_log_due).  */
#include <openssl/objects.h>
#include <openssl/x509.h>
#include "cs_attr_rules.h"
#include "cs_keyfacts.h"
#include "cs_usage.h"
/*  p11-kit's compatibility names: its header (just included) maps
 *  public_data to pPublicData, which would rename DeriveJob.public_data in
 *  the wire header included next.  */
#undef public_data
#undef public_data_len
#include "secretkeys.h"
#include "symjobs.h"
#include "context_auth.h"
#include "frontend_int.h"
#include "keyattrs.h"

#define S_REF_MAX 128                   /* bytes of a ref (CS_WIRE_MAX_REF) */

/*  The mechanism on the wire of a sign, decrypt or derive item.  */
static CK_MECHANISM_TYPE
s_item_mechanism (const work_item_t *item)
{
    return item->kind == WORK_DERIVE ? CKM_ECDH1_DERIVE : item->kind == WORK_DECAPSULATE ? CKM_ML_KEM : item->mech.type;
}

/*  Boards that run the job mechanism of a crypto item (board_runs).  */
uint64_t
fe_mech_boards (frontend_t *self, const work_item_t *item)
{
    CK_MECHANISM_TYPE type = s_item_mechanism (item);
    CK_FLAGS flag = item->kind == WORK_SIGN ? CKF_SIGN : item->kind == WORK_DECRYPT ? CKF_DECRYPT
                  : item->kind == WORK_DECAPSULATE ? CKF_DECAPSULATE : CKF_DERIVE;
    return fe_boards_that (self, FE_CAN_RUN, type, flag, NULL);
}

/*  The modulus bits of an RSAPrivateKey (RFC 8017 A.1.2: SEQUENCE {
 *  version INTEGER, modulus INTEGER, ... }) read from its DER header, with
 *  no big-number parsing; 0 when it does not parse that far.  */
static unsigned
s_rsa_modulus_bits (const unsigned char *der, long len)
{
    const unsigned char *p = der, *end = der + len;
    long item = 0;
    int tag = 0, xclass = 0;
    if (ASN1_get_object (&p, &item, &tag, &xclass, len) & 0x80 || tag != V_ASN1_SEQUENCE)
        return 0;
    if (ASN1_get_object (&p, &item, &tag, &xclass, end - p) & 0x80 || tag != V_ASN1_INTEGER)
        return 0;
    p += item;                                  /* version */
    if (ASN1_get_object (&p, &item, &tag, &xclass, end - p) & 0x80 || tag != V_ASN1_INTEGER)
        return 0;
    while (item > 0 && *p == 0) {               /* leading zeros */
        p++;
        item--;
    }
    if (item <= 0)
        return 0;
    unsigned bits = (unsigned) (item - 1) * 8;
    for (unsigned top = *p; top; top >>= 1)
        bits++;
    return bits;
}

/*  CKK_ML_DSA or CKK_ML_KEM for the NIST OIDs of their PKCS#8 (RFC 9881;
 *  the LAMPS ML-KEM profile: id-ml-dsa-44/65/87 2.16.840.1.101.3.4.3.17..19,
 *  id-alg-ml-kem-512/768/1024 2.16.840.1.101.3.4.4.1..3), which OpenSSL 3.0
 *  does not name; CKK_VENDOR_DEFINED for any other.  */
static CK_KEY_TYPE
s_pq_key_type (const ASN1_OBJECT *oid)
{
    char text [64];
    if (!oid || OBJ_obj2txt (text, sizeof text, oid, 1) <= 0)
        return CKK_VENDOR_DEFINED;
    static const char *const dsa [] = { "2.16.840.1.101.3.4.3.17", "2.16.840.1.101.3.4.3.18", "2.16.840.1.101.3.4.3.19" };
    static const char *const kem [] = { "2.16.840.1.101.3.4.4.1", "2.16.840.1.101.3.4.4.2", "2.16.840.1.101.3.4.4.3" };
    for (size_t i = 0; i < 3; i++) {
        if (streq (text, dsa [i]))
            return CKK_ML_DSA;
        if (streq (text, kem [i]))
            return CKK_ML_KEM;
    }
    return CKK_VENDOR_DEFINED;
}

/*  The key type in a PKCS#8 key's algorithm identifier, and for RSA the
 *  modulus bits (*rsa_bits_p, 0 when unknown), without parsing the key
 *  itself; CKK_VENDOR_DEFINED when unknown or malformed.  */
static CK_KEY_TYPE
s_pkcs8_key_type (const uint8_t *der, size_t len, unsigned *rsa_bits_p)
{
    const unsigned char *p = der, *pk = NULL;
    int pk_len = 0;
    const ASN1_OBJECT *oid = NULL;
    PKCS8_PRIV_KEY_INFO *p8 = d2i_PKCS8_PRIV_KEY_INFO (NULL, &p, (long) len);
    int nid = p8 && PKCS8_pkey_get0 (&oid, &pk, &pk_len, NULL, p8) ? OBJ_obj2nid (oid) : NID_undef;
    bool rsa = nid == NID_rsaEncryption || nid == NID_rsassaPss;
    *rsa_bits_p = rsa ? s_rsa_modulus_bits (pk, pk_len) : 0;
    CK_KEY_TYPE pq = nid == NID_undef ? s_pq_key_type (oid) : CKK_VENDOR_DEFINED;
    PKCS8_PRIV_KEY_INFO_free (p8);
    return pq != CKK_VENDOR_DEFINED ? pq : rsa ? CKK_RSA : nid == NID_X9_62_id_ecPublicKey ? CKK_EC : nid == NID_ED25519 || nid == NID_ED448 ? CKK_EC_EDWARDS
         : nid == NID_X25519 || nid == NID_X448 ? CKK_EC_MONTGOMERY
         : CKK_VENDOR_DEFINED;
}

/*  Copies a ref from the wire (bytes) into a C string; -1 if too long.  */
static int
s_ref_copy (ProtobufCBinaryData ref, char out [S_REF_MAX + 1])
{
    if (ref.len == 0 || ref.len > S_REF_MAX || memchr (ref.data, 0, ref.len))
        return -1;
    memcpy (out, ref.data, ref.len);
    out [ref.len] = 0;
    return 0;
}

/*  A per-request key: any board that takes material of its type (and, for
 *  ECDH, derives with EC material).  An RSA key over CS_WIRE_MAX_RSA_BITS
 *  is CKR_KEY_SIZE_RANGE: its cost on a board grows with the cube of its
 *  size.  */
static CK_RV
s_route_per_request (frontend_t *self, fe_request_t *request, work_item_t *item, ProtobufCBinaryData der)
{
    unsigned bits = 0;
    CK_KEY_TYPE type = s_pkcs8_key_type (der.data, der.len, &bits);
    if (type == CKK_VENDOR_DEFINED)
        return CKR_KEY_HANDLE_INVALID;
    if (bits > CS_WIRE_MAX_RSA_BITS) {
        if (fe_log_due (self, request, "max-rsa-bits"))
            zsys_warning ("client %s (tenant %s): per-request RSA key of %u bits over the %d-bit limit: "
                          "answered with CKR_KEY_SIZE_RANGE", request->client_name, request->tenant, bits,
                          CS_WIRE_MAX_RSA_BITS);
        return CKR_KEY_SIZE_RANGE;
    }
    if ((item->kind == WORK_DERIVE && type != CKK_EC && type != CKK_EC_MONTGOMERY)
    ||  (item->kind == WORK_DECAPSULATE) != (type == CKK_ML_KEM))
        return CKR_KEY_TYPE_INCONSISTENT;
    item->key = (cs_drv_key_t) { NULL, 0, der.data, der.len, NULL };
    item->bits = bits;
    fe_can_t can = item->kind == WORK_DERIVE ? FE_CAN_DERIVE_MATERIAL : FE_CAN_TAKE_MATERIAL;
    item->boards = fe_boards_that (self, can, type, 0, request->tenant);
    return item->boards ? CKR_OK : CKR_KEY_TYPE_INCONSISTENT;
}

/*  A keystore key resident on `board` (keys/home): the board learns its
 *  public half from the row when it did not list the key at open (a key
 *  generated there since), so that its results are verified before
 *  release (board_key_register).  CKR_HOST_MEMORY when it cannot.  */
static CK_RV
s_register_resident (board_t *board, const unsigned char id [16], const Cs__KeyInfo *info)
{
    if (board_key (board, id, 16))
        return CKR_OK;
    cs_key_info_t pub = { .id_len = 16, .key_type = info->key_type, .bits = info->bits,
                          .modulus = info->modulus.data, .modulus_len = info->modulus.len,
                          .public_exponent = info->public_exponent.data,
                          .public_exponent_len = info->public_exponent.len,
                          .ec_params = info->ec_params.data, .ec_params_len = info->ec_params.len,
                          .ec_point = info->ec_point.data, .ec_point_len = info->ec_point.len,
                          .can_sign = info->can_sign, .can_decrypt = info->can_decrypt };
    memcpy (pub.id, id, 16);
    return board_key_register (board, &pub) == 0 ? CKR_OK : CKR_HOST_MEMORY;
}

/*  True for the DecryptJob of a C_UnwrapKey (DecryptJob.unwrap).  */
static bool
s_unwrap_job (const fe_request_t *request, const work_item_t *item)
{
    return item->kind == WORK_DECRYPT && request->req->jobs [item->index]->decrypt->unwrap;
}

/*  What a sign, decrypt or derive item does with its key (cs_usage.h).  */
static cs_usage_use_t
s_item_use (const fe_request_t *request, const work_item_t *item)
{
    return item->kind == WORK_SIGN ? CS_USE_SIGN : item->kind == WORK_DERIVE ? CS_USE_DERIVE
         : item->kind == WORK_DECAPSULATE ? CS_USE_DECAPSULATE
         : s_unwrap_job (request, item) ? CS_USE_UNWRAP : CS_USE_DECRYPT;
}

/*  A job refused because its key holds a key role and a data role (made
 *  under spec, or before the rules): logged (once a minute per client), as
 *  it is what the attacks of docs/CONTRACTS.md "Usage separation" look
 *  like.  A key lacking the job's role is an application's mistake: not
 *  logged.  */
static void
s_usage_log (frontend_t *self, fe_request_t *request, unsigned roles, cs_usage_use_t use)
{
    if (cs_usage_combined (roles) && (roles & cs_usage_needs (use)) && fe_log_due (self, request, "usage-separation"))
        zsys_warning ("client %s (tenant %s): %s job on a key that both wraps or unwraps and works on data refused "
                      "(keys/usage-separation = strict): answered with CKR_KEY_FUNCTION_NOT_PERMITTED",
                      request->client_name, request->tenant, cs_usage_use_name (use));
}

/*  The usage rules of the tenant's policy for an item on a key with
 *  `roles` (cs_usage_job_check; a raw RSA sign or decrypt needs both roles,
 *  cs_usage_mech_check): CKR_OK or CKR_KEY_FUNCTION_NOT_PERMITTED.  */
static CK_RV
s_usage_check (frontend_t *self, fe_request_t *request, const work_item_t *item, unsigned roles)
{
    cs_usage_use_t use = s_item_use (request, item);
    cs_usage_policy_t policy = (cs_usage_policy_t) broker_config_usage (self->config, request->tenant);
    CK_RV rv = cs_usage_job_check (policy, roles, use);
    if (rv != CKR_OK)
        s_usage_log (self, request, roles, use);
    if (rv == CKR_OK && use != CS_USE_DERIVE && use != CS_USE_UNWRAP)
        rv = cs_usage_mech_check (policy, roles, item->mech.type);      /* raw RSA is sign and decrypt */
    return rv;
}

/*  "board:<hex CKA_ID>": the tenant's boards holding that listed key, whose
 *  board flags (CKA_SIGN, CKA_DECRYPT, CKA_DERIVE; never CKA_UNWRAP: no
 *  unwrap job) allow the job.  */
static CK_RV
s_route_board_ref (frontend_t *self, fe_request_t *request, work_item_t *item, const char *ref)
{
    size_t len = 0;
    const fe_board_key_t *key = fe_board_key_find (self, request->tenant, ref, item->id, &len);
    if (!key)
        return CKR_KEY_HANDLE_INVALID;
    if (s_usage_check (self, request, item, keyattrs_roles (&key->info)) != CKR_OK)
        return CKR_KEY_FUNCTION_NOT_PERMITTED;
    item->key = (cs_drv_key_t) { item->id, len, NULL, 0, NULL };
    item->bits = key->info.bits;
    item->boards = key->boards;
    if (item->boards && item->kind == WORK_DERIVE) {
        item->boards &= fe_boards_that (self, FE_CAN_DERIVE_RESIDENT, key->info.key_type, 0, NULL);
        return item->boards ? CKR_OK : CKR_KEY_FUNCTION_NOT_PERMITTED;    /* no board derives */
    }
    return item->boards ? CKR_OK : CKR_KEY_HANDLE_INVALID;
}

/*  CKA_ALLOWED_MECHANISMS of a keystore key's private object (PKCS#11 2.40
 *  §4.4 table 25, cs_attr_rules.h): `mech` must be one the list allows for
 *  `flag` (CKF_SIGN, CKF_DECRYPT, CKF_UNWRAP, CKF_DERIVE, CKF_ENCRYPT,
 *  CKF_WRAP), whatever the module checked; CKR_MECHANISM_INVALID.  (Token
 *  secret keys: secretkeys_usable.)  */
static CK_RV
s_mechanism_allowed (const Cs__KeyInfo *info, CK_MECHANISM_TYPE mech, CK_FLAGS flag)
{
    return keyattrs_mech_allowed (info, mech, flag);
}

/*  True for a mechanism C_UnwrapKey takes (its row has CKF_UNWRAP:
 *  CKM_RSA_PKCS_OAEP), so that an unwrap job is no raw RSA decryption
 *  (CKM_RSA_X_509) and no PKCS#1 v1.5 padding oracle (CKM_RSA_PKCS, Bardou
 *  et al., CRYPTO 2012) for a client that skips the module.  */
static bool
s_unwrap_mechanism (CK_MECHANISM_TYPE type)
{
    const cs_mech_row_t *row = cs_mech_row (type);
    return row && (row->flags & CKF_UNWRAP);
}

/*  The CKF_ flag of an item for CKA_ALLOWED_MECHANISMS.  */
static CK_FLAGS
s_item_flag (const fe_request_t *request, const work_item_t *item)
{
    return item->kind == WORK_SIGN ? CKF_SIGN : item->kind == WORK_DERIVE ? CKF_DERIVE
         : item->kind == WORK_DECAPSULATE ? CKF_DECAPSULATE
         : s_unwrap_job (request, item) ? CKF_UNWRAP : CKF_DECRYPT;
}

/*  A key with CKA_ALWAYS_AUTHENTICATE needs the job's context ticket
 *  (context_auth_check; a derive job carries none).  */
static CK_RV
s_context_auth (frontend_t *self, fe_request_t *request, const work_item_t *item, const char *ref,
                const Cs__KeyInfo *info)
{
    const Cs__Job *job = request->req->jobs [item->index];
    const ProtobufCBinaryData *ticket = item->kind == WORK_SIGN && job->kind_case == CS__JOB__KIND_SIGN
                                      ? &job->sign->context_ticket
                                      : item->kind == WORK_DECRYPT && job->kind_case == CS__JOB__KIND_DECRYPT
                                      ? &job->decrypt->context_ticket
                                      : item->kind == WORK_DECAPSULATE && job->kind_case == CS__JOB__KIND_DECAPSULATE
                                      ? &job->decapsulate->context_ticket : NULL;
    CK_RV rv = context_auth_check (self->tickets, request->client_key, request->tenant, ref, (Cs__KeyInfo *) info,
                                   ticket ? ticket->data : NULL, ticket ? ticket->len : 0,
                                   request->has_state ? request->tenant_state.epoch [0] : 0,
                                   (uint64_t) zclock_time ());
    if (rv != CKR_OK && fe_log_due (self, request, "context-login"))
        zsys_warning ("client %s (tenant %s): key %s has CKA_ALWAYS_AUTHENTICATE and the job no valid "
                      "context ticket (C_Login CKU_CONTEXT_SPECIFIC): CKR_USER_NOT_LOGGED_IN",
                      request->client_name, request->tenant, ref);
    return rv;
}

/*  A keystore row of the tenant (info, and its private key: pkcs8, len
 *  bytes, borrowed from item->cached or item->material until the item is
 *  back): its material goes with the item (home keystore) or its resident
 *  copy is used (home board:NAME); a shared key (home "shared") is
 *  FE_CKR_SHARED with its ref in item->ref, for the party service
 *  (shared_link.c).  The key's rules apply first to all of them.  */
CK_RV
fe_route_keystore_key (frontend_t *self, fe_request_t *request, work_item_t *item, const char *ref,
                       const Cs__KeyInfo *info, const uint8_t *pkcs8, size_t len)
{
    CK_RV rv = CKR_OK;
    item->bits = info->bits;
    if (secretkeys_type (info->key_type))
        rv = CKR_KEY_TYPE_INCONSISTENT;         /* a token secret key: SymJobs only */
    else
    if (!info->has_private)
        rv = CKR_KEY_HANDLE_INVALID;
    else
    if (item->kind == WORK_DERIVE && info->key_type != CKK_EC && info->key_type != CKK_EC_MONTGOMERY)
        rv = CKR_KEY_TYPE_INCONSISTENT;         /* ECDH with an EC, X25519 or X448 key only */
    else
    if ((item->kind == WORK_DECAPSULATE) != (info->key_type == CKK_ML_KEM))
        rv = CKR_KEY_TYPE_INCONSISTENT;         /* ML-KEM keys decapsulate and do nothing else */
    else
    if (s_unwrap_job (request, item) && !s_unwrap_mechanism (item->mech.type))
        rv = CKR_MECHANISM_INVALID;             /* C_UnwrapKey's mechanisms only (CKF_UNWRAP rows) */
    else
    if ((rv = s_usage_check (self, request, item, keyattrs_roles (info))) != CKR_OK)
        ;                                       /* docs/CONTRACTS.md "Usage separation" */
    else
    if ((rv = s_mechanism_allowed (info, s_item_mechanism (item), s_item_flag (request, item))) != CKR_OK)
        ;
    else
    if ((rv = s_context_auth (self, request, item, ref, info)) != CKR_OK)
        ;                                       /* CKA_ALWAYS_AUTHENTICATE: context_auth.h */
    else
    if (streq (info->home, "shared")) {         /* issue #24: the party service, not a board */
        snprintf (item->ref, sizeof item->ref, "%s", ref);
        rv = info->key_type == CKK_RSA ? FE_CKR_SHARED : CKR_KEY_HANDLE_INVALID;
    }
    else
    if (strncmp (info->home, "board:", 6) == 0) {
        int board = fe_board_index (self, info->home + 6);
        if (board < 0 || keyjobs_resident_id (ref, item->id)
        ||  board_id_reserved (self->args->boards [board], item->id, 16))
            rv = CKR_KEY_HANDLE_INVALID;
        item->key = (cs_drv_key_t) { item->id, 16, NULL, 0, NULL };
        item->boards = board >= 0 ? UINT64_C (1) << board : 0;
        if (item->kind == WORK_DERIVE)
            item->boards &= fe_boards_that (self, FE_CAN_DERIVE_RESIDENT, info->key_type, 0, NULL);
        if (rv == CKR_OK && !item->boards)
            rv = CKR_KEY_FUNCTION_NOT_PERMITTED;
        if (rv == CKR_OK)
            rv = s_register_resident (self->args->boards [board], item->id, info);
    }
    else {
        snprintf (item->ref, sizeof item->ref, "%s", ref);
        item->key = (cs_drv_key_t) { NULL, 0, pkcs8, len, item->ref };
        if (info->key_type == CKK_ML_DSA && info->public_value.len) {
            item->pub = info->public_value.data;    /* the check before release (pq_work.h) */
            item->pub_len = info->public_value.len;
            item->parameter_set = info->parameter_set;
        }
        fe_can_t can = item->kind == WORK_DERIVE ? FE_CAN_DERIVE_MATERIAL : FE_CAN_TAKE_MATERIAL;
        item->boards = !pkcs8 ? 0 : fe_boards_that (self, can, info->key_type, 0, request->tenant);
        if (rv == CKR_OK && !item->boards) {
            zsys_warning ("key %s of tenant %s: no board open to the tenant takes keys of its type",
                          ref, request->tenant);
            rv = CKR_DEVICE_ERROR;
        }
    }
    return rv;
}

/*  "ks:...": the tenant's keystore row from the cache, pinned by the item
 *  (fe_route_keystore_key); FE_CKR_PENDING with the ref in item->ref when
 *  it is not cached (route.c has the slow pool read it).  */
static CK_RV
s_route_keystore_ref (frontend_t *self, fe_request_t *request, work_item_t *item, const char *ref)
{
    ks_key_t *key = ks_cache_key_get (self->cache, request->tenant, ref);
    size_t len = 0;
    metrics_key_cache (self->args->metrics, key != NULL);
    if (!key) {
        snprintf (item->ref, sizeof item->ref, "%s", ref);
        return FE_CKR_PENDING;
    }
    item->cached = key;
    const uint8_t *pkcs8 = ks_key_pkcs8 (key, &len);
    return fe_route_keystore_key (self, request, item, ref, ks_key_info (key), pkcs8, len);
}

/*  Fills the item's mechanism and input from a sign/decrypt/derive job:
 *  past this point no room below routing sees the wire job (scheduler.h).
 *  The OAEP label and the input stay borrowed from the request.  */
void
fe_item_inputs (work_item_t *item, const Cs__Job *job)
{
    if (item->kind == WORK_DERIVE) {
        item->in = job->derive->public_data.data;
        item->in_len = job->derive->public_data.len;
        return;
    }
    if (item->kind == WORK_DECAPSULATE) {
        item->in = job->decapsulate->ciphertext.data;
        item->in_len = job->decapsulate->ciphertext.len;
        item->mech = (cs_drv_mech_t) { .type = CKM_ML_KEM };
        return;
    }
    const Cs__Mechanism *wire = item->kind == WORK_SIGN ? job->sign->mechanism : job->decrypt->mechanism;
    ProtobufCBinaryData in = item->kind == WORK_SIGN ? job->sign->data : job->decrypt->data;
    item->in = in.data;
    item->in_len = in.len;
    if (!wire)
        return;                     /* type 0: no board runs it (CKR_MECHANISM_INVALID) */
    item->mech = (cs_drv_mech_t) { .type = wire->type, .hash = wire->hash, .mgf = wire->mgf,
                               .salt_len = wire->salt_len, .hedge = wire->hedge,
                               .context = wire->context.len ? wire->context.data : NULL,
                               .context_len = wire->context.len };
    if (wire->oaep_label.len) {
        item->mech.label = wire->oaep_label.data;
        item->mech.label_len = wire->oaep_label.len;
    }
}

/*  Routes a sign/decrypt/derive job by its key: per-request key, board ref
 *  or keystore ref (docs/CONTRACTS.md "Routing").  */
CK_RV
fe_route_crypto (frontend_t *self, fe_request_t *request, work_item_t *item, const Cs__Job *job)
{
    ProtobufCBinaryData key_id = item->kind == WORK_SIGN ? job->sign->key_id
                               : item->kind == WORK_DECRYPT ? job->decrypt->key_id
                               : item->kind == WORK_DECAPSULATE ? job->decapsulate->key_id : job->derive->key_id;
    ProtobufCBinaryData der = item->kind == WORK_SIGN ? job->sign->key_pkcs8
                            : item->kind == WORK_DECRYPT ? job->decrypt->key_pkcs8
                            : item->kind == WORK_DECAPSULATE ? job->decapsulate->key_pkcs8 : job->derive->key_pkcs8;
    char ref [S_REF_MAX + 1];
    if (der.len)
        return s_route_per_request (self, request, item, der);
    if (s_ref_copy (key_id, ref))
        return CKR_KEY_HANDLE_INVALID;
    if (strncmp (ref, "board:", 6) == 0)
        return s_route_board_ref (self, request, item, ref);
    if (strncmp (ref, "ks:", 3) == 0)
        return s_route_keystore_ref (self, request, item, ref);
    return CKR_KEY_HANDLE_INVALID;
}

/*  The security strength in bits (cs_key_strength) of the `len` bytes a
 *  key_wrap SymJob wraps: a private key's when they are PKCS#8 (C_WrapKey
 *  of a session private key: an RSA-2048 key is 112 bits, so an AES-128
 *  KEK may wrap it), else a secret key's value of that many bytes.  */
static unsigned
s_wrapped_strength (const unsigned char *data, size_t len)
{
    EVP_PKEY *pkey = len > 32 ? cs_pkey_from_pkcs8 (data, len) : NULL;
    unsigned bits = pkey ? cs_pkey_strength (pkey) : 0;
    EVP_PKEY_free (pkey);
    return bits ? bits : cs_key_strength (CKK_GENERIC_SECRET, len * 8);
}

/*  A token secret key for a SymJob (secretkeys.h): its type, the usage
 *  rules of the tenant's policy (of a wrap or unwrap when the job says
 *  key_wrap) and its CKA_ALLOWED_MECHANISMS, then its value (borrowed from
 *  item->cached or item->material until the item is back) becomes the
 *  job's key.  */
CK_RV
fe_sym_key (frontend_t *self, work_item_t *item, const Cs__KeyInfo *info, const uint8_t *value, size_t len)
{
    const cs_mech_row_t *row = cs_mech_row (item->sym.mechanism);
    fe_request_t *request = item->request;
    bool key_wrap = request->req->jobs [item->index]->sym->key_wrap;      /* C_WrapKey / C_UnwrapKey */
    cs_usage_policy_t policy = (cs_usage_policy_t) broker_config_usage (self->config, request->tenant);
    CK_RV rv = row ? secretkeys_usable (info, policy, row, item->sym.operation, key_wrap)
                   : CKR_MECHANISM_INVALID;
    if (rv == CKR_KEY_FUNCTION_NOT_PERMITTED)
        s_usage_log (self, request, keyattrs_roles (info),
                     key_wrap ? (item->sym.operation == CS_SYM_ENCRYPT ? CS_USE_WRAP : CS_USE_UNWRAP)
                     : item->sym.operation == CS_SYM_ENCRYPT ? CS_USE_ENCRYPT
                     : item->sym.operation == CS_SYM_DECRYPT ? CS_USE_DECRYPT : CS_USE_SIGN);
    if (rv == CKR_OK && value && policy == CS_USAGE_STRICT && key_wrap && item->sym.operation == CS_SYM_ENCRYPT
    &&  s_wrapped_strength (item->sym.in, item->sym.in_len) > cs_key_strength (CKK_AES, len * 8))
        rv = CKR_WRAPPING_KEY_SIZE_RANGE;       /* a key under a weaker key (docs/contracts/keys.md) */
    if (rv == CKR_OK && !value)
        rv = CKR_KEY_HANDLE_INVALID;
    return rv == CKR_OK ? symjob_key (row, value, len, &item->sym) : rv;
}

/*  The "ks:" ref of a SymJob: the key from the cache (pinned by the item),
 *  or FE_CKR_PENDING with the ref in item->ref (the slow pool reads it:
 *  route.c has the slow pool read it).  Another ref form is
 *  CKR_KEY_HANDLE_INVALID.  */
CK_RV
fe_route_sym_ref (frontend_t *self, fe_request_t *request, work_item_t *item)
{
    char ref [S_REF_MAX + 1];
    size_t len = 0;
    if (s_ref_copy (request->req->jobs [item->index]->sym->key_id, ref) || strncmp (ref, "ks:", 3))
        return CKR_KEY_HANDLE_INVALID;
    ks_key_t *key = ks_cache_key_get (self->cache, request->tenant, ref);
    metrics_key_cache (self->args->metrics, key != NULL);
    if (!key) {
        snprintf (item->ref, sizeof item->ref, "%s", ref);
        return FE_CKR_PENDING;
    }
    item->cached = key;
    const uint8_t *value = ks_key_pkcs8 (key, &len);
    return fe_sym_key (self, item, ks_key_info (key), value, len);
}
