/*  party_sign.c — signing with a shared key (docs/SHARED-KEYS.md "Over the
 *  network"): the party the admin or the frontend asks pads the input,
 *  sends the block m to the two peers (SIGN), has its own m^(d_i) mod N
 *  computed on one of this broker's boards open to the tenant (the raw
 *  modexp through the frontend's board lane, party_net.c), and releases
 *  the product of the three only after it verifies with (N, e)
 *  (cs_sk_combine).  A peer's SIGN is answered the same way: its partial
 *  result on a board, then PARTIAL.  Up to PARTY_SIGNS signings at once,
 *  each found by its session id, and PARTY_BOARD_JOBS partial results out
 *  on boards, each found by its tag; the thread never waits for a board.
 *  A wrong partial result fails the job with CKR_DEVICE_ERROR and an E:
 *  line, never a wrong signature.
 */
#include <czmq.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include "party_int.h"
#include "cs_util.h"
#include "cs_driver.h"
#include "drv_pad.h"

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

/*  The slot of the signing of session id `session`, or -1.  */
static int
s_sign_find (party_t *self, const unsigned char *session)
{
    for (int i = 0; i < PARTY_SIGNS; i++)
        if (self->sign [i] && memcmp (self->sign [i]->session, session, CS_SK_SESSION_LEN) == 0)
            return i;
    return -1;
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

/*  Sends SIGN of the signing to both peers, with the use and mechanism
 *  their rows must allow; the first that cannot be reached, or 0.  */
static unsigned
s_fan_out (party_t *self, const party_sign_t *sign, const char *tenant, const char *ref, cs_usage_use_t use,
           CK_MECHANISM_TYPE mech)
{
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

/*  Fails the signing in slot `slot` with rv and why, and frees it.  */
static void
s_sign_fail (party_t *self, int slot, const char *rv, const char *why)
{
    party_sign_t *sign = self->sign [slot];
    s_fail (self, sign->control_id, sign->control_id_len, rv, why);
    s_sign_free (&self->sign [slot]);
}

static void s_finish (party_t *self, int slot);

/*  Wipes and frees what a board job holds; its slot is free again.  */
static void
s_job_clear (party_board_job_t *job)
{
    cs_sk_share_destroy (&job->share);
    if (job->m) {
        OPENSSL_cleanse (job->m, job->k);
        free (job->m);
    }
    memset (job, 0, sizeof *job);
}

/*  This party's partial result of board job `job` is `out` (k bytes), or
 *  failed for `why` (out NULL): it goes to the signing of the session
 *  (from 0) or to the peer as PARTIAL; then the job is cleared.  With
 *  party/test-fault = wrong-partial a flipped bit (tests of the
 *  combiner's check).  */
static void
s_partial_done (party_t *self, party_board_job_t *job, const unsigned char *out, const char *why)
{
    unsigned char part [PARTY_MAX_N];
    if (out) {
        memcpy (part, out, job->k);
        if (self->fault_partial)
            part [job->k - 1] ^= 1;
    }
    if (!job->from) {
        int slot = s_sign_find (self, job->session);
        party_sign_t *sign = slot >= 0 ? self->sign [slot] : NULL;
        char msg [PARTY_ERR_LEN];
        if (sign && !out) {
            snprintf (msg, sizeof msg, "party %u: %s", self->index, why);
            s_sign_fail (self, slot, "CKR_DEVICE_ERROR", msg);
        }
        else
        if (sign && !sign->partial [self->index] && (sign->partial [self->index] = malloc (job->k))) {
            memcpy (sign->partial [self->index], part, job->k);
            s_finish (self, slot);
        }
    }
    else {
        PARTY_FRAME_INIT (reply, CS__SK__FRAME_KIND__PARTIAL, job->session);
        if (out) {
            reply.data.data = part;
            reply.data.len = job->k;
        }
        else {
            zsys_warning ("party: refused a signature for party %u: %s", job->from, why);
            reply.error = (char *) why;
        }
        (void) party_send (self, job->from, &reply);
    }
    OPENSSL_cleanse (part, sizeof part);
    s_job_clear (job);
}

/*  The partial result of `job` on this thread (cs_sk_partial: no board of
 *  this broker open to the tenant runs modexp).  */
static void
s_partial_cpu (party_t *self, party_board_job_t *job)
{
    unsigned char out [PARTY_MAX_N];
    int rc = cs_sk_partial (job->share, job->m, job->k, out, job->k);
    s_partial_done (self, job, rc ? NULL : out, "the block is not below N or not invertible");
    OPENSSL_cleanse (out, sizeof out);
}

/*  Sends board job `job` to the frontend's board lane as a plain modexp
 *  (cs_sk_partial_operands; the exponent |d_i| is wiped here once sent).
 *  Without a lane yet (the frontend's BOARDS comes just after the broker
 *  starts) it stays unsent until party_sign_lane_up; a block that has no
 *  operands fails it.  */
static void
s_job_send (party_t *self, party_board_job_t *job)
{
    unsigned char base [PARTY_MAX_N], exp [PARTY_MAX_N], n [PARTY_MAX_N];
    size_t exp_len = 0, n_len = 0;
    unsigned long e = 0;
    if (cs_sk_share_public (job->share, n, sizeof n, &n_len, &e) || n_len != job->k
    ||  cs_sk_partial_operands (job->share, job->m, job->k, base, exp, &exp_len)) {
        s_partial_done (self, job, NULL, "the block is not k bytes below N or not invertible");
        return;
    }
    job->sent = party_board_send (self, job->tag, job->tenant, base, exp, exp_len, n, job->k,
                                  self->round_timeout_ms) == 0;
    OPENSSL_cleanse (exp, sizeof exp);
}

/*  Starts this party's m^(d_i) mod N (m: k bytes) for the signing of
 *  `session` (from 0) or for the peer `from`: a board job that takes
 *  *share_p (nulled) and a copy of m, sent to the frontend's board lane
 *  (s_job_send) and answered by party_sign_board.  Returns NULL when the
 *  job is out, waits for the lane, or was answered (s_partial_done); else
 *  the CK_RV name, with why, and nothing answered.  */
static const char *
s_partial_start (party_t *self, const char *tenant, const unsigned char *session, unsigned from,
                 cs_sk_share_t **share_p, const unsigned char *m, size_t k, char why [PARTY_ERR_LEN])
{
    party_board_job_t *job = NULL;
    for (size_t i = 0; !job && i < PARTY_BOARD_JOBS; i++)
        if (!self->board_job [i].tag)
            job = &self->board_job [i];
    unsigned char n [PARTY_MAX_N];
    size_t n_len = 0;
    unsigned long e = 0;
    if (!job) {
        snprintf (why, PARTY_ERR_LEN, "busy: party %u has %d partial results out on its boards", self->index,
                  PARTY_BOARD_JOBS);
        return "CKR_FUNCTION_FAILED";
    }
    static const unsigned char zero [PARTY_MAX_N];
    if (cs_sk_share_public (*share_p, n, sizeof n, &n_len, &e) || n_len != k || memcmp (m, n, k) >= 0
    ||  memcmp (m, zero, k) == 0 || strlen (tenant) >= sizeof job->tenant) {
        snprintf (why, PARTY_ERR_LEN, "the block is not k bytes below N");
        return "CKR_DATA_LEN_RANGE";
    }
    if (!(job->m = malloc (k))) {
        snprintf (why, PARTY_ERR_LEN, "out of memory");
        return "CKR_HOST_MEMORY";
    }
    memcpy (job->m, m, k);
    memcpy (job->session, session, CS_SK_SESSION_LEN);
    snprintf (job->tenant, sizeof job->tenant, "%s", tenant);
    job->tag = ++self->board_tag;
    job->from = from;
    job->k = k;
    job->share = *share_p;
    *share_p = NULL;
    job->started = zclock_mono ();
    s_job_send (self, job);
    return NULL;
}

void
party_sign_lane_up (party_t *self)
{
    for (size_t i = 0; i < PARTY_BOARD_JOBS; i++)
        if (self->board_job [i].tag && !self->board_job [i].sent)
            s_job_send (self, &self->board_job [i]);
}

/*  SIGN tenant label mech hex-input | PARTIAL tenant label mech hex-input
 *  party (one party's m^(d_i) mod N alone, for the tests that show a share
 *  alone signs nothing) | PUBLIC tenant label | RAW tenant ref hex-block
 *  use mechanism (the frontend's C_Sign and C_Decrypt: a block it padded,
 *  or a ciphertext, of the key with that ref, for use "sign", "decrypt" or
 *  "unwrap" with that wire mechanism (decimal); the answer x has x^e =
 *  block mod N).  SIGN and PARTIAL are uses "sign" with CKM_RSA_PKCS,
 *  CKM_RSA_PKCS_PSS or CKM_RSA_X_509; every party checks the use against
 *  its own row (party_use_refused).  */
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
    cs_usage_use_t use = raw ? party_use_parse (args [4]) : CS_USE_SIGN;
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
    if (!streq (args [0], "PUBLIC") && party_use_refused (self, args [1], info, use, wire_mech, err)) {
        zsys_warning ("party: refused a signature: %s", err);
        party_reply (self, id, id_len, "ERR", party_rv_prefix (err), err, NULL);
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
    int slot;
    for (slot = 0; slot < PARTY_SIGNS && self->sign [slot]; slot++)
        ;
    if (slot == PARTY_SIGNS) {
        party_reply (self, id, id_len, "ERR", "CKR_FUNCTION_FAILED", "busy: as many signatures in flight as "
                     "the party takes at once", NULL);
        goto out;
    }
    long in_len = cs_hex_decode (hex_in, in, sizeof in);
    unsigned only = partial ? (unsigned) atoi (args [5]) : 0;
    party_sign_t *sign = self->sign [slot] = calloc (1, sizeof *sign);
    if (sign) {
        sign->k = k;
        memcpy (sign->n, nbuf, k);
        sign->e = e;
        sign->m = calloc (1, k);
        sign->only = only;
        sign->started = zclock_mono ();
        sign->label = strdup (args [2]);
        sign->control_id = malloc (id_len);
    }
    if (!sign || !sign->m || !sign->label || !sign->control_id || RAND_bytes (sign->session, CS_SK_SESSION_LEN) != 1) {
        party_reply (self, id, id_len, "ERR", "CKR_HOST_MEMORY", "out of memory", NULL);
        s_sign_free (&self->sign [slot]);
        goto out;
    }
    memcpy (sign->control_id, id, id_len);
    sign->control_id_len = id_len;
    if (in_len < 0 || (partial && (only < 1 || only > CS_SK_PARTIES))
    ||  s_pad (mech, in, (size_t) in_len, info->bits, sign->m, k)) {
        party_reply (self, id, id_len, "ERR", "CKR_DATA_LEN_RANGE",
                     "bad input: mechanism pkcs1, pss-sha256 or raw, hex of the right length", NULL);
        s_sign_free (&self->sign [slot]);
        goto out;
    }
    (void) party_session_fresh (self, sign->session);
    unsigned down = s_fan_out (self, sign, args [1], info->ref, use, wire_mech);
    const char *rv = NULL;
    if (down) {
        rv = "CKR_DEVICE_ERROR";
        snprintf (err, sizeof err, "party %u (%s) is not reachable", down, self->peer [down].endpoint);
    }
    else
        rv = s_partial_start (self, args [1], sign->session, 0, &share, sign->m, k, err);
    if (rv)
        s_sign_fail (self, slot, rv, err);
out:
    cs_sk_share_destroy (&share);
    cs__key_info__free_unpacked (info, NULL);
}

/*  Every partial result of the signing in slot `slot` in: combine, verify,
 *  answer, free.  */
static void
s_finish (party_t *self, int slot)
{
    party_sign_t *sign = self->sign [slot];
    for (unsigned i = 1; i <= CS_SK_PARTIES; i++)
        if (!sign->partial [i])
            return;
    if (sign->only) {
        char *hex = s_hex (sign->partial [sign->only], sign->k);
        party_reply (self, sign->control_id, sign->control_id_len, "OK", hex ? hex : "", NULL);
        free (hex);
        s_sign_free (&self->sign [slot]);
        return;
    }
    unsigned char *sig = malloc (sign->k);
    const unsigned char *const parts [CS_SK_PARTIES] = { sign->partial [1], sign->partial [2], sign->partial [3] };
    int rc = sig ? cs_sk_combine (sign->n, sign->k, sign->e, sign->m, parts, sig) : CS_SK_ENOMEM;
    if (rc) {
        char why [PARTY_ERR_LEN];
        snprintf (why, sizeof why, "key \"%s\": the combined signature does not verify with (N, e): %s "
                  "(a party's share or result is wrong); nothing released", sign->label, cs_sk_strerror (rc));
        s_fail (self, sign->control_id, sign->control_id_len, "CKR_DEVICE_ERROR", why);
    }
    else {
        char *hex = s_hex (sig, sign->k);
        party_reply (self, sign->control_id, sign->control_id_len, "OK", hex ? hex : "", NULL);
        free (hex);
    }
    free (sig);
    s_sign_free (&self->sign [slot]);
}

/*  A PARTIAL from peer `from` for a signing this party coordinates.  */
static void
s_peer_partial (party_t *self, unsigned from, const Cs__Sk__Frame *frame)
{
    int slot = s_sign_find (self, frame->session.data);
    party_sign_t *sign = slot >= 0 ? self->sign [slot] : NULL;
    if (!sign || sign->partial [from]) {
        zsys_warning ("party: refused a PARTIAL from party %u (no such signature, or a replay)", from);
        return;
    }
    if (frame->error && *frame->error) {
        char why [PARTY_ERR_LEN];
        snprintf (why, sizeof why, "party %u: %s", from, frame->error);
        s_sign_fail (self, slot, party_rv_prefix (frame->error), why);
        return;
    }
    if (frame->data.len != sign->k || !(sign->partial [from] = malloc (sign->k))) {
        zsys_warning ("party: refused a PARTIAL of %zu bytes from party %u", frame->data.len, from);
        return;
    }
    memcpy (sign->partial [from], frame->data.data, sign->k);
    s_finish (self, slot);
}

void
party_sign_frame (party_t *self, unsigned from, const Cs__Sk__Frame *frame)
{
    if (frame->kind == CS__SK__FRAME_KIND__PARTIAL) {
        s_peer_partial (self, from, frame);
        return;
    }
    /*  SIGN from a peer: this party's partial result on a board (answered
     *  by s_partial_done), or why not now.  */
    char err [PARTY_ERR_LEN] = "";
    Cs__KeyInfo *info = NULL;
    cs_sk_share_t *share = NULL;
    if (!party_session_fresh (self, frame->session.data))
        snprintf (err, sizeof err, "replayed session id");
    else
    if (party_share_load (self, frame->tenant, NULL, frame->ref, &info, &share, err) == 0
    &&  party_use_refused (self, frame->tenant, info, frame->use ? (cs_usage_use_t) (frame->use - 1) : CS_USE_COUNT,
                       frame->mechanism, err) == 0
    &&  !s_partial_start (self, frame->tenant, frame->session.data, from, &share, frame->data.data,
                          frame->data.len, err))
        *err = 0;
    if (*err) {
        PARTY_FRAME_INIT (reply, CS__SK__FRAME_KIND__PARTIAL, frame->session.data);
        zsys_warning ("party: refused a signature for party %u: %s", from, err);
        reply.error = err;
        (void) party_send (self, from, &reply);
    }
    cs_sk_share_destroy (&share);
    if (info)
        cs__key_info__free_unpacked (info, NULL);
}

void
party_sign_board (party_t *self, char **args, size_t n)
{
    uint64_t tag = n == 4 ? strtoull (args [1], NULL, 10) : 0;
    party_board_job_t *job = NULL;
    for (size_t i = 0; tag && !job && i < PARTY_BOARD_JOBS; i++)
        if (self->board_job [i].tag == tag)
            job = &self->board_job [i];
    if (!job) {
        zsys_warning ("party: a board result for no partial result out (late, past its deadline?)");
        return;
    }
    if (streq (args [2], "CKR_MECHANISM_INVALID")) {
        if (!self->board_fallback_said)
            zsys_warning ("party %u: no board of this broker open to the tenant runs raw modexp: "
                          "partial results on the party's own thread", self->index);
        self->board_fallback_said = true;
        s_partial_cpu (self, job);
        return;
    }
    unsigned char out [PARTY_MAX_N];
    char why [PARTY_ERR_LEN];
    if (streq (args [2], "CKR_OK") && cs_hex_decode (args [3], out, sizeof out) == (long) job->k)
        s_partial_done (self, job, out, NULL);
    else {
        snprintf (why, sizeof why, "its board failed the partial result: %s", args [2]);
        s_partial_done (self, job, NULL, why);
    }
    OPENSSL_cleanse (out, sizeof out);
}

void
party_sign_drop (party_t *self, const char *why)
{
    for (int slot = 0; slot < PARTY_SIGNS; slot++)
        if (self->sign [slot]) {
            party_sign_t *sign = self->sign [slot];
            party_reply (self, sign->control_id, sign->control_id_len, "ERR", "CKR_DEVICE_ERROR", why, NULL);
            s_sign_free (&self->sign [slot]);
        }
    for (size_t i = 0; i < PARTY_BOARD_JOBS; i++)
        s_job_clear (&self->board_job [i]);
}

/*  A signature whose peers do not all answer within party/round-timeout-ms
 *  fails naming the first missing party; a partial result whose board does
 *  not answer within it fails its signing or its peer's.  */
void
party_sign_tick (party_t *self)
{
    int64_t now = zclock_mono ();
    for (size_t i = 0; i < PARTY_BOARD_JOBS; i++)
        if (self->board_job [i].tag && now - self->board_job [i].started >= self->round_timeout_ms) {
            char why [PARTY_ERR_LEN];
            snprintf (why, sizeof why, "its boards did not answer within %d ms", self->round_timeout_ms);
            s_partial_done (self, &self->board_job [i], NULL, why);
        }
    for (int slot = 0; slot < PARTY_SIGNS; slot++) {
        party_sign_t *sign = self->sign [slot];
        if (!sign || now - sign->started < self->round_timeout_ms)
            continue;
        unsigned missing = 1;
        while (missing < CS_SK_PARTIES && sign->partial [missing])
            missing++;
        char why [PARTY_ERR_LEN];
        if (missing == self->index)
            snprintf (why, sizeof why, "party %u: its boards did not answer within %d ms", missing,
                      self->round_timeout_ms);
        else
            snprintf (why, sizeof why, "party %u (%s) did not answer within %d ms", missing,
                      self->peer [missing].endpoint, self->round_timeout_ms);
        s_sign_fail (self, slot, "CKR_DEVICE_ERROR", why);
    }
}
