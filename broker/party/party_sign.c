/*  party_sign.c — signing with a shared key (docs/SHARED-KEYS.md "Over the
 *  network"): the party the admin asks pads the input, sends the block m to
 *  the two peers (SIGN), computes its own m^(d_i) mod N, and releases the
 *  product of the three only after it verifies with (N, e) (cs_sk_combine).
 *  A wrong partial result fails the job with CKR_DEVICE_ERROR and an E:
 *  line, never a wrong signature.
 */
#include <czmq.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include "party_int.h"
#include "cs_util.h"
#include "cs_wire.h"
#include "cs_driver.h"
#include "drv_pad.h"
#include "keyattrs.h"

int
party_share_load (party_t *self, const char *tenant, const char *label, const char *ref,
                  Cs__KeyInfo **info_p, cs_sk_share_t **share_p, char err [PARTY_ERR_LEN])
{
    Cs__KeyInfo **infos = NULL;
    size_t count = 0;
    char *found = NULL;
    *info_p = NULL;
    *share_p = NULL;
    if (!party_tenant_allowed (self, tenant)) {
        snprintf (err, PARTY_ERR_LEN, "tenant %s has no keys/shared = 3 at party %u", tenant, self->index);
        return -1;
    }
    if (!label)
        found = strdup (ref);
    else
    if (keystore_key_list (self->ks, tenant, &infos, &count) == 0)
        for (size_t i = 0; i < count; i++) {
            if (!found && streq (infos [i]->label, label) && streq (infos [i]->home, "shared"))
                found = strdup (infos [i]->ref);
            cs__key_info__free_unpacked (infos [i], NULL);
        }
    free (infos);
    uint8_t *rec = NULL;
    size_t rec_len = 0;
    int rc = found ? keystore_key_get (self->ks, tenant, found, info_p, &rec, &rec_len) : -1;
    int dec = 0;
    if (rc == 0 && streq ((*info_p)->home, "shared"))
        *share_p = cs_sk_share_decode (rec, rec_len, &dec);
    if (rec) {
        OPENSSL_cleanse (rec, rec_len);
        free (rec);
    }
    if (!*share_p) {
        snprintf (err, PARTY_ERR_LEN, "no shared key %s \"%s\" of tenant %s at party %u%s",
                  label ? "labelled" : "with ref", label ? label : ref, tenant, self->index,
                  dec ? " (the share record does not decode)" : "");
        if (*info_p)
            cs__key_info__free_unpacked (*info_p, NULL);
        *info_p = NULL;
        free (found);
        return -1;
    }
    free (found);
    return 0;
}

static void
s_sign_free (party_sign_t **sign_p)
{
    party_sign_t *sign = *sign_p;
    if (!sign)
        return;
    cs_sk_share_destroy (&sign->share);
    for (unsigned i = 0; i <= CS_SK_PARTIES; i++)
        if (sign->partial [i]) {
            OPENSSL_cleanse (sign->partial [i], sign->k);
            free (sign->partial [i]);
        }
    free (sign->m);
    free (sign->label);
    free (sign->control_id);
    free (sign);
    *sign_p = NULL;
}

/*  Hex of data (malloc'd, caller frees), or NULL.  */
static char *
s_hex (const unsigned char *data, size_t len)
{
    char *hex = malloc (2 * len + 1);
    if (hex)
        cs_hex_encode (data, len, hex);
    return hex;
}

/*  This party's m^(d_i) mod N into out (k bytes); with party/test-fault =
 *  wrong-partial a flipped bit (tests of the combiner's check).  */
static int
s_partial (party_t *self, const cs_sk_share_t *share, const unsigned char *m, size_t k, unsigned char *out)
{
    int rc = cs_sk_partial (share, m, k, out, k);
    if (rc == 0 && self->fault_partial)
        out [k - 1] ^= 1;
    return rc;
}

/*  The padded block of `in` under mech (RFC 8017): "pkcs1" (in = DigestInfo,
 *  EMSA-PKCS1-v1_5 §9.2 steps 3-5), "pss-sha256" (in = a SHA-256 digest,
 *  EMSA-PSS §9.1.1, MGF1-SHA-256, 32-byte salt), "raw" (in = at most k bytes,
 *  left-padded with zeros).  Returns 0 or -1.  */
static int
s_pad (const char *mech, const unsigned char *in, size_t in_len, size_t bits, unsigned char *m, size_t k)
{
    if (streq (mech, "raw")) {
        if (in_len > k)
            return -1;
        memset (m, 0, k - in_len);
        memcpy (m + k - in_len, in, in_len);
        return 0;
    }
    if (streq (mech, "pkcs1")) {
        if (in_len + 11 > k)
            return -1;
        m [0] = 0;
        m [1] = 1;
        memset (m + 2, 0xff, k - in_len - 3);
        m [k - in_len - 1] = 0;
        memcpy (m + k - in_len, in, in_len);
        return 0;
    }
    if (streq (mech, "pss-sha256")) {
        cs_drv_mech_t pss = { 0 };
        pss.type = CKM_RSA_PKCS_PSS;
        pss.hash = CKM_SHA256;
        pss.mgf = CKG_MGF1_SHA256;
        pss.salt_len = 32;
        return drv_pss_encode (&pss, in, in_len, bits, m, k) == CKR_OK ? 0 : -1;
    }
    return -1;
}

/*  This party's row of a shared key allows `use` with wire mechanism
 *  `mech` (keyattrs_use_check under the tenant's keys/usage-separation):
 *  0, or -1 with err "CKR_NAME: why".  Every party checks its own row, so a
 *  role turned off through any of the three brokers is off for the key, and
 *  no party can have the others compute for a use their rows refuse
 *  (issue #19).  */
static int
s_use_refused (party_t *self, const char *tenant, const Cs__KeyInfo *info, cs_usage_use_t use,
               CK_MECHANISM_TYPE mech, char err [PARTY_ERR_LEN])
{
    cs_usage_policy_t policy = (cs_usage_policy_t) broker_config_usage (self->config, tenant);
    CK_RV rv = use < CS_USE_COUNT ? keyattrs_use_check (info, policy, use, mech) : CKR_KEY_FUNCTION_NOT_PERMITTED;
    if (rv == CKR_OK)
        return 0;
    snprintf (err, PARTY_ERR_LEN, "%s: key %s of tenant %s at party %u does not allow %s with mechanism 0x%lx",
              cs_rv_name (rv), info->ref, tenant, self->index, use < CS_USE_COUNT ? cs_usage_use_name (use) : "no use",
              (unsigned long) mech);
    return -1;
}

/*  The CK_RV name an error text starts with ("CKR_KEY_FUNCTION_NOT_PERMITTED:
 *  ..."), for the use refusals of s_use_refused; "CKR_DEVICE_ERROR" for
 *  anything else.  */
static const char *
s_rv_prefix (const char *text)
{
    static const char *names [] = { "CKR_KEY_FUNCTION_NOT_PERMITTED", "CKR_MECHANISM_INVALID" };
    for (size_t i = 0; text && i < sizeof names / sizeof names [0]; i++)
        if (strncmp (text, names [i], strlen (names [i])) == 0 && text [strlen (names [i])] == ':')
            return names [i];
    return "CKR_DEVICE_ERROR";
}

/*  The use named `text` ("sign", "decrypt", "unwrap"), or CS_USE_COUNT.  */
static cs_usage_use_t
s_use_parse (const char *text)
{
    for (int use = 0; use < CS_USE_COUNT; use++)
        if (streq (text, cs_usage_use_name ((cs_usage_use_t) use)))
            return (cs_usage_use_t) use;
    return CS_USE_COUNT;
}

/*  Sends SIGN of the session to both peers, with the use and mechanism
 *  their rows must allow; the first that cannot be reached, or 0.  */
static unsigned
s_fan_out (party_t *self, const char *tenant, const char *ref, cs_usage_use_t use, CK_MECHANISM_TYPE mech)
{
    party_sign_t *sign = self->sign;
    for (unsigned i = 1; i <= CS_SK_PARTIES; i++) {
        PARTY_FRAME_INIT (frame, CS__SK__FRAME_KIND__SIGN, sign->session);
        frame.tenant = (char *) tenant;
        frame.ref = (char *) ref;
        frame.data.data = sign->m;
        frame.data.len = sign->k;
        frame.use = (uint32_t) use + 1;
        frame.mechanism = mech;
        if (i != self->index && party_send (self, i, &frame))
            return i;
    }
    return 0;
}

static void
s_fail (party_t *self, const void *id, size_t id_len, const char *rv, const char *why)
{
    zsys_error ("party: shared-key signature failed: %s", why);
    party_reply (self, id, id_len, "ERR", rv, why, NULL);
}

/*  SIGN tenant label mech hex-input | PARTIAL tenant label mech hex-input
 *  party (one party's m^(d_i) mod N alone, for the tests that show a share
 *  alone signs nothing) | PUBLIC tenant label | RAW tenant ref hex-block
 *  use mechanism (the frontend's C_Sign and C_Decrypt: a block it padded,
 *  or a ciphertext, of the key with that ref, for use "sign", "decrypt" or
 *  "unwrap" with that wire mechanism (decimal); the answer x has x^e =
 *  block mod N).  SIGN and PARTIAL are uses "sign" with CKM_RSA_PKCS,
 *  CKM_RSA_PKCS_PSS or CKM_RSA_X_509; every party checks the use against
 *  its own row (s_use_refused).  */
void
party_sign_control (party_t *self, const void *id, size_t id_len, char **args, size_t n)
{
    bool sign_verb = streq (args [0], "SIGN"), partial = streq (args [0], "PARTIAL"), raw = streq (args [0], "RAW");
    if (!(sign_verb && n == 5) && !(partial && n == 6) && !(streq (args [0], "PUBLIC") && n == 3) && !(raw && n == 6)) {
        party_reply (self, id, id_len, "ERR", "CKR_ARGUMENTS_BAD",
                     "usage: SIGN TENANT LABEL MECH HEX | PARTIAL TENANT LABEL MECH HEX PARTY | PUBLIC TENANT LABEL"
                     " | RAW TENANT REF HEX USE MECHANISM", NULL);
        return;
    }
    const char *mech = raw ? "raw" : args [3], *hex_in = raw ? args [3] : args [4];
    cs_usage_use_t use = raw ? s_use_parse (args [4]) : CS_USE_SIGN;
    CK_MECHANISM_TYPE wire_mech = raw ? (CK_MECHANISM_TYPE) strtoull (args [5], NULL, 10)
                                : !mech ? 0 : streq (mech, "pkcs1") ? CKM_RSA_PKCS         /* PUBLIC: no mechanism */
                                : streq (mech, "pss-sha256") ? CKM_RSA_PKCS_PSS : CKM_RSA_X_509;
    char err [PARTY_ERR_LEN];
    Cs__KeyInfo *info = NULL;
    cs_sk_share_t *share = NULL;
    if (party_share_load (self, args [1], raw ? NULL : args [2], raw ? args [2] : NULL, &info, &share, err)) {
        party_reply (self, id, id_len, "ERR", "CKR_KEY_HANDLE_INVALID", err, NULL);
        return;
    }
    if (!streq (args [0], "PUBLIC") && s_use_refused (self, args [1], info, use, wire_mech, err)) {
        zsys_warning ("party: refused a signature: %s", err);
        party_reply (self, id, id_len, "ERR", s_rv_prefix (err), err, NULL);
        goto out;
    }
    unsigned char nbuf [PARTY_MAX_N], in [PARTY_MAX_N];
    size_t k = 0;
    unsigned long e = 0;
    cs_sk_share_public (share, nbuf, sizeof nbuf, &k, &e);
    if (streq (args [0], "PUBLIC")) {
        char *hex = s_hex (nbuf, k), num [32];
        snprintf (num, sizeof num, "%lu", e);
        party_reply (self, id, id_len, "OK", hex ? hex : "", num, NULL);
        free (hex);
        goto out;
    }
    if (self->sign) {
        party_reply (self, id, id_len, "ERR", "CKR_FUNCTION_FAILED", "busy with another signature", NULL);
        goto out;
    }
    long in_len = cs_hex_decode (hex_in, in, sizeof in);
    unsigned only = partial ? (unsigned) atoi (args [5]) : 0;
    party_sign_t *sign = self->sign = calloc (1, sizeof *sign);
    if (sign) {
        sign->k = k;
        sign->m = calloc (1, k);
        sign->only = only;
        sign->started = zclock_mono ();
        sign->label = strdup (args [2]);
        sign->control_id = malloc (id_len);
    }
    if (!sign || !sign->m || !sign->label || !sign->control_id || RAND_bytes (sign->session, CS_SK_SESSION_LEN) != 1) {
        party_reply (self, id, id_len, "ERR", "CKR_HOST_MEMORY", "out of memory", NULL);
        s_sign_free (&self->sign);
        goto out;
    }
    memcpy (sign->control_id, id, id_len);
    sign->control_id_len = id_len;
    if (in_len < 0 || (partial && (only < 1 || only > CS_SK_PARTIES))
    ||  s_pad (mech, in, (size_t) in_len, info->bits, sign->m, k)) {
        party_reply (self, id, id_len, "ERR", "CKR_DATA_LEN_RANGE",
                     "bad input: mechanism pkcs1, pss-sha256 or raw, hex of the right length", NULL);
        s_sign_free (&self->sign);
        goto out;
    }
    (void) party_session_fresh (self, sign->session);
    unsigned down = s_fan_out (self, args [1], info->ref, use, wire_mech);
    if (down) {
        snprintf (err, sizeof err, "party %u (%s) is not reachable", down, self->peer [down].endpoint);
        s_fail (self, id, id_len, "CKR_DEVICE_ERROR", err);
        s_sign_free (&self->sign);
        goto out;
    }
    sign->partial [self->index] = malloc (k);
    if (!sign->partial [self->index] || s_partial (self, share, sign->m, k, sign->partial [self->index])) {
        s_fail (self, id, id_len, "CKR_DATA_LEN_RANGE", "the block is not below N or not invertible");
        s_sign_free (&self->sign);
        goto out;
    }
    sign->share = share;
    share = NULL;
out:
    cs_sk_share_destroy (&share);
    cs__key_info__free_unpacked (info, NULL);
}

/*  Every partial result in: combine, verify, answer.  */
static void
s_finish (party_t *self)
{
    party_sign_t *sign = self->sign;
    for (unsigned i = 1; i <= CS_SK_PARTIES; i++)
        if (!sign->partial [i])
            return;
    if (sign->only) {
        char *hex = s_hex (sign->partial [sign->only], sign->k);
        party_reply (self, sign->control_id, sign->control_id_len, "OK", hex ? hex : "", NULL);
        free (hex);
        s_sign_free (&self->sign);
        return;
    }
    unsigned char n [PARTY_MAX_N], *sig = malloc (sign->k);
    size_t k = 0;
    unsigned long e = 0;
    cs_sk_share_public (sign->share, n, sizeof n, &k, &e);
    const unsigned char *const parts [CS_SK_PARTIES] = { sign->partial [1], sign->partial [2], sign->partial [3] };
    int rc = sig ? cs_sk_combine (n, k, e, sign->m, parts, sig) : CS_SK_ENOMEM;
    if (rc) {
        char why [PARTY_ERR_LEN];
        snprintf (why, sizeof why, "key \"%s\": the combined signature does not verify with (N, e): %s "
                  "(a party's share or result is wrong); nothing released", sign->label, cs_sk_strerror (rc));
        s_fail (self, sign->control_id, sign->control_id_len, "CKR_DEVICE_ERROR", why);
    }
    else {
        char *hex = s_hex (sig, k);
        party_reply (self, sign->control_id, sign->control_id_len, "OK", hex ? hex : "", NULL);
        free (hex);
    }
    free (sig);
    s_sign_free (&self->sign);
}

void
party_sign_frame (party_t *self, unsigned from, const Cs__Sk__Frame *frame)
{
    if (frame->kind == CS__SK__FRAME_KIND__PARTIAL) {
        party_sign_t *sign = self->sign;
        if (!sign || memcmp (sign->session, frame->session.data, CS_SK_SESSION_LEN) || sign->partial [from]) {
            zsys_warning ("party: refused a PARTIAL from party %u (no such signature, or a replay)", from);
            return;
        }
        if (frame->error && *frame->error) {
            char why [PARTY_ERR_LEN];
            snprintf (why, sizeof why, "party %u: %s", from, frame->error);
            s_fail (self, sign->control_id, sign->control_id_len, s_rv_prefix (frame->error), why);
            s_sign_free (&self->sign);
            return;
        }
        if (frame->data.len != sign->k || !(sign->partial [from] = malloc (sign->k))) {
            zsys_warning ("party: refused a PARTIAL of %zu bytes from party %u", frame->data.len, from);
            return;
        }
        memcpy (sign->partial [from], frame->data.data, sign->k);
        s_finish (self);
        return;
    }
    /*  SIGN from a peer: this party's partial result, or why not.  */
    PARTY_FRAME_INIT (reply, CS__SK__FRAME_KIND__PARTIAL, frame->session.data);
    char err [PARTY_ERR_LEN] = "";
    Cs__KeyInfo *info = NULL;
    cs_sk_share_t *share = NULL;
    unsigned char out [PARTY_MAX_N];
    size_t k = 0;
    if (!party_session_fresh (self, frame->session.data))
        snprintf (err, sizeof err, "replayed session id");
    else
    if (party_share_load (self, frame->tenant, NULL, frame->ref, &info, &share, err) == 0
    &&  s_use_refused (self, frame->tenant, info, frame->use ? (cs_usage_use_t) (frame->use - 1) : CS_USE_COUNT,
                       frame->mechanism, err) == 0) {
        unsigned char n [PARTY_MAX_N];
        unsigned long e;
        cs_sk_share_public (share, n, sizeof n, &k, &e);
        if (frame->data.len != k || s_partial (self, share, frame->data.data, k, out))
            snprintf (err, sizeof err, "the block is not k bytes below N");
    }
    if (*err) {
        zsys_warning ("party: refused a signature for party %u: %s", from, err);
        reply.error = err;
    }
    else {
        reply.data.data = out;
        reply.data.len = k;
    }
    (void) party_send (self, from, &reply);
    OPENSSL_cleanse (out, sizeof out);
    cs_sk_share_destroy (&share);
    if (info)
        cs__key_info__free_unpacked (info, NULL);
}

void
party_sign_drop (party_t *self, const char *why)
{
    if (!self->sign)
        return;
    party_reply (self, self->sign->control_id, self->sign->control_id_len, "ERR", "CKR_DEVICE_ERROR", why, NULL);
    s_sign_free (&self->sign);
}

/*  A signature whose peers do not all answer within party/round-timeout-ms
 *  fails naming the first missing party.  */
void
party_sign_tick (party_t *self)
{
    party_sign_t *sign = self->sign;
    if (!sign || zclock_mono () - sign->started < self->round_timeout_ms)
        return;
    unsigned missing = 1;
    while (missing < CS_SK_PARTIES && sign->partial [missing])
        missing++;
    char why [PARTY_ERR_LEN];
    snprintf (why, sizeof why, "party %u (%s) did not answer within %d ms", missing,
              self->peer [missing].endpoint, self->round_timeout_ms);
    s_fail (self, sign->control_id, sign->control_id_len, "CKR_DEVICE_ERROR", why);
    s_sign_free (&self->sign);
}
