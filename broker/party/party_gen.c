/*  party_gen.c — a shared key's generation between three brokers
 *  (docs/SHARED-KEYS.md "Over the network"): the coordinator opens the
 *  session, the library's rounds travel as ROUND frames, and a share is
 *  sealed in a party's keystore only after all three hold theirs
 *  (READY -> COMMIT -> STORED), so that a party that dies mid-generation
 *  leaves no key anywhere.
 */
#include <czmq.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include "party_int.h"
#include "cs_util.h"

static void
s_gen_free (party_gen_t **gen_p)
{
    party_gen_t *gen = *gen_p;
    if (!gen)
        return;
    cs_sk_party_destroy (&gen->party);
    cs_sk_share_destroy (&gen->share);
    free (gen->tenant);
    free (gen->label);
    free (gen->ref);
    free (gen->templ);
    free (gen->control_id);
    free (gen->waiter_id);
    free (gen);
    *gen_p = NULL;
}

/*  Sends every message of out as ROUND frames; -1 naming the first peer
 *  that cannot be reached.  */
static int
s_flush (party_t *self, cs_sk_outbox_t *out, unsigned *unreachable)
{
    int rc = 0;
    for (size_t i = 0; i < out->count && rc == 0; i++) {
        PARTY_FRAME_INIT (frame, CS__SK__FRAME_KIND__ROUND, self->gen->session);
        frame.round.data = out->msg [i].data;
        frame.round.len = out->msg [i].len;
        if (party_send (self, out->msg [i].receiver, &frame)) {
            *unreachable = out->msg [i].receiver;
            rc = -1;
        }
    }
    cs_sk_outbox_clear (out);
    return rc;
}

/*  Answers the admin or frontend that asked for the generation, and the
 *  one that sent it again with the same idempotency id meanwhile.  */
static void
s_answer (party_t *self, const char *status, const char *a, const char *b)
{
    party_gen_t *gen = self->gen;
    if (gen && gen->control_id)
        party_reply (self, gen->control_id, gen->control_id_len, status, a, b, NULL);
    if (gen && gen->waiter_id)
        party_reply (self, gen->waiter_id, gen->waiter_id_len, status, a, b, NULL);
}

void
party_gen_drop (party_t *self, const char *why, bool tell_peers)
{
    party_gen_t *gen = self->gen;
    if (!gen)
        return;
    if (gen->state == GEN_STORED && gen->ref)       /* a commit that failed elsewhere */
        (void) keystore_key_delete (self->ks, gen->tenant, gen->ref);
    if (tell_peers)
        for (unsigned i = 1; i <= CS_SK_PARTIES; i++) {
            PARTY_FRAME_INIT (frame, CS__SK__FRAME_KIND__ABORT, gen->session);
            frame.error = (char *) why;
            if (i != self->index)
                (void) party_send (self, i, &frame);
        }
    zsys_error ("party: generation of \"%s\" for tenant %s dropped: %s", gen->label ? gen->label : "",
                gen->tenant ? gen->tenant : "", why);
    s_answer (self, "ERR", "CKR_DEVICE_ERROR", why);
    s_gen_free (&self->gen);
}

/*  A label the tenant's keystore already has.  */
static bool
s_label_taken (party_t *self, const char *tenant, const char *label)
{
    Cs__KeyInfo **infos = NULL;
    size_t count = 0;
    bool taken = false;
    if (keystore_key_list (self->ks, tenant, &infos, &count))
        return true;
    for (size_t i = 0; i < count; i++) {
        taken = taken || streq (infos [i]->label, label);
        cs__key_info__free_unpacked (infos [i], NULL);
    }
    free (infos);
    return taken;
}

/*  Why this party cannot take part in a generation for tenant/label, or NULL.  */
static const char *
s_refusal (party_t *self, const char *tenant, const char *label, unsigned bits)
{
    if (self->gen)
        return "busy with another generation";
    if (!party_tenant_allowed (self, tenant))
        return "tenant has no keys/shared = 3 here";
    if (!keystore_tenant_exists (self->ks, tenant))
        return "tenant unknown to this party's keystore";
    if (bits != 512 && bits != 1024 && bits != 2048 && bits != 3072 && bits != 4096)
        return "bits must be 512, 1024, 2048, 3072 or 4096";
    if (s_label_taken (self, tenant, label))
        return "label taken in this party's keystore";
    return NULL;
}

/*  Opens the session here: the library party, started; its first messages sent.  */
static int
s_open (party_t *self, const unsigned char *session, unsigned coordinator, const char *tenant,
        const char *label, const char *ref, unsigned bits, ProtobufCBinaryData templ,
        ProtobufCBinaryData idem, const void *id, size_t id_len)
{
    party_gen_t *gen = self->gen = calloc (1, sizeof *gen);
    cs_sk_params_t prm;
    cs_sk_params_default (&prm, bits);
    if (!gen)
        return -1;
    if (id && (gen->control_id = malloc (id_len))) {      /* the admin to answer */
        memcpy (gen->control_id, id, id_len);
        gen->control_id_len = id_len;
    }
    memcpy (gen->session, session, CS_SK_SESSION_LEN);
    gen->coordinator = coordinator;
    gen->tenant = strdup (tenant);
    gen->label = strdup (label);
    gen->ref = strdup (ref);
    gen->bits = bits;
    if (idem.len && idem.len <= sizeof gen->idem) {
        memcpy (gen->idem, idem.data, idem.len);
        gen->idem_len = idem.len;
    }
    if (templ.len && (gen->templ = malloc (templ.len))) {
        memcpy (gen->templ, templ.data, templ.len);
        gen->templ_len = templ.len;
    }
    gen->started = zclock_mono ();
    for (unsigned i = 1; i <= CS_SK_PARTIES; i++)
        self->peer [i].last_heard = gen->started;
    gen->party = cs_sk_party_new (self->index, session, &prm, NULL, NULL);
    cs_sk_outbox_t out = { 0 };
    unsigned unreachable = 0;
    if (!gen->tenant || !gen->label || !gen->ref || !gen->party || (templ.len && !gen->templ)
    ||  cs_sk_party_start (gen->party, &out))
        return -1;
    if (s_flush (self, &out, &unreachable)) {
        char why [PARTY_ERR_LEN];
        snprintf (why, sizeof why, "party %u (%s) is not reachable", unreachable,
                  self->peer [unreachable].endpoint);
        party_gen_drop (self, why, true);
        return 1;
    }
    return 0;
}

/*  A GENERATE whose idempotency id is known here: answered with the key
 *  that id made (recorded with its row, party_idem.c), or held until the
 *  generation in flight with that id (this party coordinating it or not)
 *  ends.  True when it was answered or held.  */
static bool
s_idem_known (party_t *self, const void *id, size_t id_len, const char *tenant, const uint8_t *idem,
              size_t idem_len)
{
    char ref [PARTY_REF_LEN];
    party_gen_t *gen = self->gen;
    if (!idem_len)
        return false;
    if (party_idem_ref (self, tenant, idem, idem_len, ref) == 1) {
        zsys_info ("party: a generation for tenant %s sent again: its key %s, made before", tenant, ref);
        party_reply (self, id, id_len, "OK", ref, "", NULL);
        return true;
    }
    if (!gen || gen->waiter_id || gen->idem_len != idem_len || memcmp (gen->idem, idem, idem_len)
    ||  !streq (gen->tenant, tenant) || !(gen->waiter_id = malloc (id_len ? id_len : 1)))
        return false;
    memcpy (gen->waiter_id, id, id_len);
    gen->waiter_id_len = id_len;
    zsys_info ("party: a generation for tenant %s sent again: waits for the one in flight", tenant);
    return true;
}

/*  GENERATE tenant label bits [hex-template [hex-idempotency-id]]: the
 *  template is a packed GenerateKeyPairJob (the frontend's
 *  C_GenerateKeyPair), sent to the peers in the GENERATE frame so that the
 *  three rows take the same attributes; the idempotency id (the module's
 *  Job.idempotency_id) goes with it and is recorded with each row.  */
void
party_gen_control (party_t *self, const void *id, size_t id_len, char **args, size_t n)
{
    uint8_t idem_id [KEYSTORE_IDEM_ID_MAX];
    long idem_len = n == 6 ? cs_hex_decode (args [5], idem_id, sizeof idem_id) : 0;
    ProtobufCBinaryData idem = { idem_len > 0 ? (size_t) idem_len : 0, idem_id };
    if (n == 6 && idem_len > 0 && s_idem_known (self, id, id_len, args [1], idem_id, (size_t) idem_len))
        return;
    unsigned bits = n >= 4 && n <= 6 ? (unsigned) atoi (args [3]) : 0;
    const char *why = n >= 4 && n <= 6 ? s_refusal (self, args [1], args [2], bits)
                    : "usage: GENERATE TENANT LABEL BITS [TEMPLATE [IDEMPOTENCY-ID]]";
    unsigned char *templ = NULL;
    long templ_len = 0;
    if (!why && idem_len < 0)
        why = "the idempotency id is not hex of 1 to 64 bytes";
    if (!why && n >= 5) {
        size_t max = strlen (args [4]) / 2 + 1;
        templ = malloc (max);
        templ_len = templ ? cs_hex_decode (args [4], templ, max) : -1;
        if (templ_len < 0)
            why = "the template is not hex";
    }
    if (why) {
        party_reply (self, id, id_len, "ERR", "CKR_ARGUMENTS_BAD", why, NULL);
        free (templ);
        return;
    }
    ProtobufCBinaryData tb = { (size_t) templ_len, templ };
    unsigned char session [CS_SK_SESSION_LEN];
    char ref [36];
    keystore_ref_new (ref);
    if (RAND_bytes (session, sizeof session) != 1 || !party_session_fresh (self, session)) {
        party_reply (self, id, id_len, "ERR", "CKR_DEVICE_ERROR", "no random session id", NULL);
        free (templ);
        return;
    }
    for (unsigned i = 1; i <= CS_SK_PARTIES; i++) {
        PARTY_FRAME_INIT (frame, CS__SK__FRAME_KIND__GENERATE, session);
        frame.tenant = args [1];
        frame.label = args [2];
        frame.ref = ref;
        frame.bits = bits;
        frame.data = tb;
        frame.idempotency_id = idem;
        if (i != self->index && party_send (self, i, &frame)) {
            char text [PARTY_ERR_LEN];
            snprintf (text, sizeof text, "party %u (%s) is not reachable", i, self->peer [i].endpoint);
            zsys_error ("party: generation of \"%s\" for tenant %s: %s", args [2], args [1], text);
            party_reply (self, id, id_len, "ERR", "CKR_DEVICE_ERROR", text, NULL);
            free (templ);
            return;
        }
    }
    zsys_info ("party: generating %u-bit shared key \"%s\" for tenant %s as coordinator", bits, args [2], args [1]);
    /*  s_open answers the admin when the generation fails (party_gen_drop).  */
    if (s_open (self, session, self->index, args [1], args [2], ref, bits, tb, idem, id, id_len) < 0) {
        if (!self->gen || !self->gen->control_id)
            party_reply (self, id, id_len, "ERR", "CKR_HOST_MEMORY", "out of memory", NULL);
        party_gen_drop (self, "out of memory", true);
    }
    free (templ);
}

static void
s_remember_commit (party_t *self)
{
    party_gen_t *gen = self->gen;
    party_committed_t *c = &self->committed [self->n_committed++ % PARTY_COMMITTED];
    memcpy (c->session, gen->session, CS_SK_SESSION_LEN);
    c->coordinator = gen->coordinator;
    snprintf (c->tenant, sizeof c->tenant, "%s", gen->tenant);
    snprintf (c->ref, sizeof c->ref, "%s", gen->ref);
}

/*  The coordinator's ABORT after this party sealed its share (it could not
 *  seal its own): the row goes, so no party keeps a part of the key.  Only
 *  the session's own coordinator can undo, and only that session's row.  */
static void
s_undo_commit (party_t *self, unsigned from, const unsigned char *session)
{
    size_t n = self->n_committed < PARTY_COMMITTED ? self->n_committed : PARTY_COMMITTED;
    for (size_t i = 0; i < n; i++) {
        party_committed_t *c = &self->committed [i];
        if (c->coordinator != from || memcmp (c->session, session, CS_SK_SESSION_LEN))
            continue;
        if (keystore_key_delete (self->ks, c->tenant, c->ref) == 0)
            zsys_error ("party: deleted my share %s of tenant %s: the coordinator, party %u, aborted after "
                        "the commit", c->ref, c->tenant, from);
        c->coordinator = 0;
        return;
    }
}

/*  Round frames that came before the session's GENERATE (another link may
 *  be faster): held, then replayed when it opens.  */
static void
s_hold (party_t *self, unsigned from, const Cs__Sk__Frame *frame)
{
    if (self->n_pending == PARTY_PENDING)
        return;
    party_pending_t *p = &self->pending [self->n_pending];
    if (!(p->data = malloc (frame->round.len ? frame->round.len : 1)))
        return;
    memcpy (p->session, frame->session.data, CS_SK_SESSION_LEN);
    memcpy (p->data, frame->round.data, frame->round.len);
    p->len = frame->round.len;
    p->from = from;
    self->n_pending++;
}

static void s_round (party_t *self, unsigned from, const unsigned char *data, size_t len);

static void
s_replay_held (party_t *self)
{
    for (size_t i = 0; i < self->n_pending; i++) {
        party_pending_t p = self->pending [i];
        if (self->gen && memcmp (p.session, self->gen->session, CS_SK_SESSION_LEN) == 0)
            s_round (self, p.from, p.data, p.len);
        OPENSSL_cleanse (p.data, p.len);
        free (p.data);
    }
    self->n_pending = 0;
}

/*  The coordinator: every party ready -> COMMIT; every peer stored -> store here.  */
static void
s_coordinate (party_t *self)
{
    party_gen_t *gen = self->gen;
    if (gen->state == GEN_READY && gen->ready [1] + gen->ready [2] + gen->ready [3] == CS_SK_PARTIES) {
        gen->state = GEN_COMMITTING;
        for (unsigned i = 1; i <= CS_SK_PARTIES; i++) {
            PARTY_FRAME_INIT (frame, CS__SK__FRAME_KIND__COMMIT, gen->session);
            if (i != self->index && party_send (self, i, &frame)) {
                party_gen_drop (self, "a party left before the commit", true);
                return;
            }
        }
    }
    if (gen->state == GEN_COMMITTING && gen->stored [1] + gen->stored [2] + gen->stored [3] == CS_SK_PARTIES - 1) {
        if (party_row_store (self)) {
            party_gen_drop (self, "the coordinator cannot seal its share", true);
            return;
        }
        unsigned char n [PARTY_MAX_N];
        size_t n_len = 0;
        unsigned long e = 0;
        cs_sk_share_public (gen->share, n, sizeof n, &n_len, &e);
        char *hex = malloc (2 * n_len + 1);
        if (hex)
            cs_hex_encode (n, n_len, hex);
        zsys_info ("party: shared key \"%s\" (%s) of tenant %s stored at the three parties in %.1f s",
                   gen->label, gen->ref, gen->tenant, (double) (zclock_mono () - gen->started) / 1000);
        s_answer (self, "OK", gen->ref, hex ? hex : "");
        free (hex);
        s_gen_free (&self->gen);
    }
}

static void
s_now_ready (party_t *self)
{
    party_gen_t *gen = self->gen;
    gen->share = cs_sk_party_share (gen->party);
    cs_sk_party_destroy (&gen->party);
    if (!gen->share) {
        party_gen_drop (self, "no share at the end of the rounds", true);
        return;
    }
    gen->state = GEN_READY;
    gen->ready [self->index] = true;
    if (gen->coordinator == self->index) {
        s_coordinate (self);
        return;
    }
    PARTY_FRAME_INIT (frame, CS__SK__FRAME_KIND__READY, gen->session);
    if (party_send (self, gen->coordinator, &frame))
        party_gen_drop (self, "the coordinator is not reachable", true);
}

static void
s_round (party_t *self, unsigned from, const unsigned char *data, size_t len)
{
    party_gen_t *gen = self->gen;
    if (gen->state != GEN_ROUNDS) {
        zsys_warning ("party: refused a round message from party %u after the rounds", from);
        return;
    }
    cs_sk_outbox_t out = { 0 };
    unsigned unreachable = 0;
    int rc = cs_sk_party_receive (gen->party, from, data, len, &out);
    if (rc && cs_sk_party_error (gen->party)) {
        cs_sk_outbox_clear (&out);
        char why [PARTY_ERR_LEN];
        snprintf (why, sizeof why, "party %u failed: %s", self->index, cs_sk_strerror (rc));
        party_gen_drop (self, why, true);
        return;
    }
    if (rc)
        zsys_warning ("party: refused a round message from party %u: %s", from, cs_sk_strerror (rc));
    if (s_flush (self, &out, &unreachable)) {
        char why [PARTY_ERR_LEN];
        snprintf (why, sizeof why, "party %u (%s) is not reachable", unreachable, self->peer [unreachable].endpoint);
        party_gen_drop (self, why, true);
        return;
    }
    if (cs_sk_party_done (gen->party))
        s_now_ready (self);
}

void
party_gen_frame (party_t *self, unsigned from, const Cs__Sk__Frame *frame)
{
    party_gen_t *gen = self->gen;
    bool ours = gen && memcmp (gen->session, frame->session.data, CS_SK_SESSION_LEN) == 0;
    if (ours)
        self->peer [from].last_heard = zclock_mono ();
    switch (frame->kind) {
        case CS__SK__FRAME_KIND__GENERATE: {
            const char *why = !party_session_fresh (self, frame->session.data) ? "replayed session id"
                            : s_refusal (self, frame->tenant, frame->label, frame->bits);
            if (!why && strlen (frame->ref) != 35)
                why = "malformed key ref";
            if (why) {
                zsys_warning ("party: refused a generation from party %u: %s", from, why);
                PARTY_FRAME_INIT (abort, CS__SK__FRAME_KIND__ABORT, frame->session.data);
                abort.error = (char *) why;
                (void) party_send (self, from, &abort);
                return;
            }
            zsys_info ("party: generating %u-bit shared key \"%s\" for tenant %s, coordinator party %u",
                       frame->bits, frame->label, frame->tenant, from);
            if (s_open (self, frame->session.data, from, frame->tenant, frame->label, frame->ref, frame->bits,
                        frame->data, frame->idempotency_id, NULL, 0) < 0)
                party_gen_drop (self, "out of memory", true);
            else
                s_replay_held (self);
            return;
        }
        case CS__SK__FRAME_KIND__ROUND:
            if (ours)
                s_round (self, from, frame->round.data, frame->round.len);
            else
            if (party_session_seen (self, frame->session.data))
                zsys_warning ("party: refused a round message of a closed session from party %u", from);
            else
                s_hold (self, from, frame);
            return;
        case CS__SK__FRAME_KIND__READY:
            if (ours && self->index == gen->coordinator && !gen->ready [from]) {
                gen->ready [from] = true;
                s_coordinate (self);
            }
            else
                zsys_warning ("party: refused a READY from party %u", from);
            return;
        case CS__SK__FRAME_KIND__COMMIT:
            if (!ours || from != gen->coordinator || gen->state != GEN_READY) {
                zsys_warning ("party: refused a COMMIT from party %u", from);
                return;
            }
            if (party_row_store (self)) {
                party_gen_drop (self, "a party cannot seal its share", true);
                return;
            }
            gen->state = GEN_STORED;
            s_remember_commit (self);
            {
                PARTY_FRAME_INIT (stored, CS__SK__FRAME_KIND__STORED, gen->session);
                (void) party_send (self, from, &stored);
            }
            zsys_info ("party: sealed my share of \"%s\" (%s) for tenant %s", gen->label, gen->ref, gen->tenant);
            s_answer (self, "OK", gen->ref, "");        /* a module's attempt sent here meanwhile */
            s_gen_free (&self->gen);
            return;
        case CS__SK__FRAME_KIND__STORED:
            if (ours && self->index == gen->coordinator && gen->state == GEN_COMMITTING && !gen->stored [from]) {
                gen->stored [from] = true;
                s_coordinate (self);
            }
            return;
        case CS__SK__FRAME_KIND__ABORT:
            if (ours) {
                char why [PARTY_ERR_LEN];
                snprintf (why, sizeof why, "party %u: %s", from, frame->error);
                party_gen_drop (self, why, false);
            }
            else
                s_undo_commit (self, from, frame->session.data);
            return;
        default:
            zsys_warning ("party: refused a frame of kind %d from party %u", (int) frame->kind, from);
    }
}

/*  The deadline: a session whose peers are silent for party/round-timeout-ms
 *  fails, naming the peer heard from least recently.  */
void
party_gen_tick (party_t *self)
{
    party_gen_t *gen = self->gen;
    if (!gen)
        return;
    int64_t now = zclock_mono ();
    unsigned silent = 0;
    for (unsigned i = 1; i <= CS_SK_PARTIES; i++)
        if (i != self->index && (!silent || self->peer [i].last_heard < self->peer [silent].last_heard))
            silent = i;
    if (now - self->peer [silent].last_heard < self->round_timeout_ms)
        return;
    char why [PARTY_ERR_LEN];
    snprintf (why, sizeof why, "party %u (%s) did not answer within %d ms", silent,
              self->peer [silent].endpoint, self->round_timeout_ms);
    party_gen_drop (self, why, true);
}
