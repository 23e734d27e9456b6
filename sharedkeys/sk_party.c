/*  sk_party.c — a shared-key party as a state machine (cs_sharedkeys.h):
 *  its life, the framing of its messages (session, sender, receiver,
 *  sequence number, batch, round) and the refusal of what does not fit.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include "sk_int.h"

void
cs_sk_params_default (cs_sk_params_t *params, unsigned bits)
{
    *params = (cs_sk_params_t) {
        .bits = bits, .e = 65537, .batch = 8, .tests = 40, .td_bound = 1u << 17,
        .max_batches = 0, .sieve = true, .parallel_td = true, .load_balance = true
    };
}

void
cs_sk_outbox_clear (cs_sk_outbox_t *out)
{
    if (!out)
        return;
    for (size_t i = 0; i < out->count; i++) {
        if (out->msg [i].data)
            OPENSSL_cleanse (out->msg [i].data, out->msg [i].len);
        free (out->msg [i].data);
    }
    free (out->msg);
    *out = (cs_sk_outbox_t) { 0 };
}

static int
s_drbg (void *ctx, unsigned char *buf, size_t len)
{
    (void) ctx;
    return len <= INT_MAX && RAND_priv_bytes (buf, (int) len) == 1 ? 0 : -1;
}

/* ---- candidates ---------------------------------------------------------- */

void
sk_cand_init (sk_cand_t *c, unsigned tests)
{
    memset (c, 0, sizeof *c);
    for (unsigned h = 0; h < 2; h++) {
        mpz_inits (c->a [h], c->R [h], c->u [h], c->pq [h], NULL);
        mpz_inits (c->bgw [h].F, c->bgw [h].G, c->bgw [h].H, NULL);
        for (unsigned j = 0; j < CS_SK_PARTIES; j++)
            mpz_init (c->bgw [h].X [j]);
    }
    mpz_init (c->N);
    c->vt = malloc ((size_t) tests * CS_SK_PARTIES * sizeof *c->vt);
    for (unsigned i = 0; c->vt && i < tests * CS_SK_PARTIES; i++)
        mpz_init (c->vt [i]);
}

void
sk_cand_wipe (sk_cand_t *c, unsigned tests)
{
    for (unsigned h = 0; h < 2; h++) {
        sk_wipe (c->a [h]);
        sk_wipe (c->R [h]);
        sk_wipe (c->u [h]);
        sk_wipe (c->pq [h]);
        sk_wipe (c->bgw [h].F);
        sk_wipe (c->bgw [h].G);
        sk_wipe (c->bgw [h].H);
        for (unsigned j = 0; j < CS_SK_PARTIES; j++)
            sk_wipe (c->bgw [h].X [j]);
    }
    mpz_set_ui (c->N, 0);
    for (unsigned i = 0; c->vt && i < tests * CS_SK_PARTIES; i++)
        sk_wipe (c->vt [i]);
    c->td_ok = c->first_ok = c->rest_ok = 0;
    c->phi_mod_e = 0;
}

void
sk_cand_clear (sk_cand_t *c, unsigned tests)
{
    sk_cand_wipe (c, tests);
    for (unsigned h = 0; h < 2; h++) {
        mpz_clears (c->a [h], c->R [h], c->u [h], c->pq [h], NULL);
        mpz_clears (c->bgw [h].F, c->bgw [h].G, c->bgw [h].H, NULL);
        for (unsigned j = 0; j < CS_SK_PARTIES; j++)
            mpz_clear (c->bgw [h].X [j]);
    }
    mpz_clear (c->N);
    for (unsigned i = 0; c->vt && i < tests * CS_SK_PARTIES; i++)
        mpz_clear (c->vt [i]);
    free (c->vt);
    c->vt = NULL;
}

/* ---- life ---------------------------------------------------------------- */

static bool
s_params_ok (const cs_sk_params_t *p)
{
    return p->bits >= 512 && p->bits <= 4096 && p->bits % 64 == 0
        && p->e >= 3 && p->e % 2 == 1 && p->e <= UINT32_MAX
        && p->batch >= 1 && p->batch <= SK_MAX_BATCH
        && p->tests >= 1 && p->tests <= 256
        && p->td_bound >= 3 && p->td_bound <= (1u << 24);
}

/*  The parameters in a fixed order, hashed: what every message carries.  */
static int
s_params_id (const cs_sk_params_t *p, unsigned char id [SK_PARAMS_ID_LEN])
{
    char text [160];
    unsigned char md [32];
    int n = snprintf (text, sizeof text, "cs-sk params v1 %u %lu %u %u %u %d %d %d", p->bits, p->e,
                      p->batch, p->tests, p->td_bound, p->sieve, p->parallel_td, p->load_balance);
    if (n < 0 || (size_t) n >= sizeof text || !EVP_Digest (text, (size_t) n, md, NULL, EVP_sha256 (), NULL))
        return -1;
    memcpy (id, md, SK_PARAMS_ID_LEN);
    return 0;
}

cs_sk_party_t *
cs_sk_party_new (unsigned index, const unsigned char *session, const cs_sk_params_t *params,
                 cs_sk_rand_fn rand, void *rand_ctx)
{
    if (index < 1 || index > CS_SK_PARTIES || !session || !params || !s_params_ok (params))
        return NULL;
    cs_sk_party_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->index = index;
    memcpy (self->session, session, CS_SK_SESSION_LEN);
    self->prm = *params;
    self->rand = rand ? rand : s_drbg;
    self->rand_ctx = rand ? rand_ctx : NULL;
    self->chosen = UINT_MAX;
    mpz_inits (self->N, self->d, NULL);
    for (unsigned c = 0; c < SK_MAX_BATCH; c++)
        sk_cand_init (&self->cand [c], params->tests);
    bool ok = sk_public_init (&self->pub, params) == 0 && s_params_id (params, self->params_id) == 0;
    for (unsigned c = 0; c < SK_MAX_BATCH; c++)
        ok = ok && self->cand [c].vt;
    if (!ok)
        cs_sk_party_destroy (&self);
    return self;
}

/*  Frees a received message after overwriting its values (shares).  */
static void
s_free_received (Cs__Sk__Message *m)
{
    for (size_t i = 0; i < m->n_values; i++)
        OPENSSL_cleanse (m->values [i].data, m->values [i].len);
    cs__sk__message__free_unpacked (m, NULL);
}

static void
s_drop_messages (cs_sk_party_t *self)
{
    for (unsigned j = 0; j <= CS_SK_PARTIES; j++) {
        if (self->inbox [j])
            s_free_received (self->inbox [j]);
        if (self->ahead [j])
            s_free_received (self->ahead [j]);
        self->inbox [j] = self->ahead [j] = NULL;
    }
}

void
cs_sk_party_destroy (cs_sk_party_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cs_sk_party_t *self = *self_p;
    s_drop_messages (self);
    for (unsigned c = 0; c < SK_MAX_BATCH; c++)
        sk_cand_clear (&self->cand [c], self->prm.tests);
    sk_public_clear (&self->pub);
    sk_wipe_clear (self->d);
    mpz_clear (self->N);
    OPENSSL_cleanse (self, sizeof *self);
    free (self);
    *self_p = NULL;
}

/* ---- sending ------------------------------------------------------------- */

static int
s_push (cs_sk_outbox_t *out, unsigned receiver, unsigned char *data, size_t len)
{
    if (out->count == out->cap) {
        size_t cap = out->cap ? 2 * out->cap : 4;
        cs_sk_wire_t *msg = realloc (out->msg, cap * sizeof *msg);
        if (!msg)
            return CS_SK_ENOMEM;
        out->msg = msg;
        out->cap = cap;
    }
    out->msg [out->count++] = (cs_sk_wire_t) { receiver, data, len };
    return 0;
}

static void
s_free_built (Cs__Sk__Message *m)
{
    for (size_t i = 0; i < m->n_values; i++) {
        OPENSSL_cleanse (m->values [i].data, m->values [i].len);
        free (m->values [i].data);
    }
    free (m->values);
    free (m->flags.data);
    free (m->seed.data);
}

/*  Builds, encodes and queues the current round's message to each peer.  */
static int
s_send (cs_sk_party_t *self, cs_sk_outbox_t *out)
{
    Cs__Sk__Message m [CS_SK_PARTIES + 1], *msg [CS_SK_PARTIES + 1] = { NULL };
    for (unsigned j = 1; j <= CS_SK_PARTIES; j++) {
        cs__sk__message__init (&m [j]);
        m [j].version = CS_SK_PROTOCOL_VERSION;
        m [j].type = (Cs__Sk__Type) self->round;
        m [j].sender = self->index;
        m [j].receiver = j;
        m [j].session = (ProtobufCBinaryData) { CS_SK_SESSION_LEN, self->session };
        m [j].batch = self->batch;
        m [j].params = (ProtobufCBinaryData) { SK_PARAMS_ID_LEN, self->params_id };
        msg [j] = &m [j];
    }
    int rc = sk_round_build (self, msg);
    for (unsigned j = 1; j <= CS_SK_PARTIES && rc == 0; j++) {
        if (j == self->index)
            continue;
        m [j].seq = ++self->seq_out [j];
        size_t len = cs__sk__message__get_packed_size (&m [j]);
        unsigned char *data = malloc (len ? len : 1);
        if (!data)
            rc = CS_SK_ENOMEM;
        else {
            cs__sk__message__pack (&m [j], data);
            rc = s_push (out, j, data, len);
            if (rc)
                free (data);
            self->stats.bytes_sent += len;
            self->stats.messages_sent++;
        }
    }
    for (unsigned j = 1; j <= CS_SK_PARTIES; j++)
        if (j != self->index)
            s_free_built (&m [j]);
    return rc;
}

int
cs_sk_party_start (cs_sk_party_t *self, cs_sk_outbox_t *out)
{
    if (!self || !out)
        return CS_SK_EINVAL;
    if (self->started || self->error)
        return CS_SK_ESTATE;
    self->started = true;
    self->stats.batches = 1;
    self->round = sk_round_first (self);
    int rc = s_send (self, out);
    if (rc)
        self->error = rc;
    return rc;
}

/* ---- receiving ----------------------------------------------------------- */

/*  (batch, round) of m is after the party's, by at most one round's worth.  */
static bool
s_later (const cs_sk_party_t *self, const Cs__Sk__Message *m)
{
    return m->batch == self->batch + 1 || (m->batch == self->batch && m->type > self->round);
}

/*  Places m in the inbox (checked against the round) or, one round early,
 *  in `ahead`; or refuses it with the party unchanged.  */
static int
s_accept (cs_sk_party_t *self, Cs__Sk__Message *m)
{
    if (m->version != CS_SK_PROTOCOL_VERSION || m->type < CS__SK__TYPE__SIEVE_A_SHARES
        || m->type > CS__SK__TYPE__TRIAL_SIGNATURE
        || m->sender < 1 || m->sender > CS_SK_PARTIES || m->sender == self->index)
        return CS_SK_EMALFORMED;
    if (m->receiver != self->index || m->session.len != CS_SK_SESSION_LEN
        || memcmp (m->session.data, self->session, CS_SK_SESSION_LEN) != 0
        || m->params.len != SK_PARAMS_ID_LEN
        || memcmp (m->params.data, self->params_id, SK_PARAMS_ID_LEN) != 0)
        return CS_SK_ESESSION;
    if (m->seq != self->seq_in [m->sender] + 1)
        return CS_SK_EREPLAY;
    if (m->batch == self->batch && (unsigned) m->type == self->round) {
        if (self->inbox [m->sender])
            return CS_SK_EPROTO;
        if (sk_round_check (self, m))
            return CS_SK_EMALFORMED;
        self->inbox [m->sender] = m;
    }
    else if (s_later (self, m) && !self->ahead [m->sender])
        self->ahead [m->sender] = m;
    else
        return CS_SK_EPROTO;
    self->seq_in [m->sender]++;
    return 0;
}

static bool
s_inbox_full (const cs_sk_party_t *self)
{
    for (unsigned j = 1; j <= CS_SK_PARTIES; j++)
        if (j != self->index && !self->inbox [j])
            return false;
    return true;
}

static int
s_next_batch (cs_sk_party_t *self)
{
    for (unsigned c = 0; c < self->prm.batch; c++)
        sk_cand_wipe (&self->cand [c], self->prm.tests);
    self->batch++;
    self->stats.batches++;
    if (self->prm.max_batches && self->batch >= self->prm.max_batches)
        return CS_SK_ELIMIT;
    return 0;
}

static void
s_finish (cs_sk_party_t *self)
{
    mpz_set (self->N, self->cand [self->chosen].N);
    for (unsigned c = 0; c < self->prm.batch; c++)
        sk_cand_wipe (&self->cand [c], self->prm.tests);
    self->round = SK_R_DONE;
    self->done = true;
}

/*  Completes rounds while every peer's message of the round is in.  */
static int
s_progress (cs_sk_party_t *self, cs_sk_outbox_t *out)
{
    while (s_inbox_full (self)) {
        int rc = sk_round_absorb (self);
        for (unsigned j = 1; j <= CS_SK_PARTIES; j++) {
            if (self->inbox [j])
                s_free_received (self->inbox [j]);
            self->inbox [j] = NULL;
        }
        if (rc)
            return rc;
        self->stats.rounds++;
        unsigned next = sk_round_next (self);
        if (next == SK_R_DONE) {
            s_finish (self);
            return 0;
        }
        if (next == 0) {
            if ((rc = s_next_batch (self)) != 0)
                return rc;
            next = sk_round_first (self);
        }
        self->round = next;
        if ((rc = s_send (self, out)) != 0)
            return rc;
        for (unsigned j = 1; j <= CS_SK_PARTIES; j++) {
            Cs__Sk__Message *m = self->ahead [j];
            if (!m || s_later (self, m))
                continue;
            if (m->batch != self->batch || (unsigned) m->type != self->round || sk_round_check (self, m))
                return CS_SK_EPROTO;
            self->inbox [j] = m;
            self->ahead [j] = NULL;
        }
    }
    return 0;
}

int
cs_sk_party_receive (cs_sk_party_t *self, unsigned from, const unsigned char *data, size_t len,
                     cs_sk_outbox_t *out)
{
    if (!self || !data || !out || from > CS_SK_PARTIES)
        return CS_SK_EINVAL;
    if (!self->started || self->done || self->error)
        return CS_SK_ESTATE;
    Cs__Sk__Message *m = cs__sk__message__unpack (NULL, len, data);
    if (!m)
        return CS_SK_EMALFORMED;
    int rc = from && m->sender != from ? CS_SK_ESESSION : s_accept (self, m);
    if (rc) {
        s_free_received (m);
        return rc;
    }
    rc = s_progress (self, out);
    if (rc) {
        self->error = rc;
        s_drop_messages (self);
        for (unsigned c = 0; c < self->prm.batch; c++)
            sk_cand_wipe (&self->cand [c], self->prm.tests);
        sk_wipe (self->d);
    }
    return rc;
}

bool
cs_sk_party_done (const cs_sk_party_t *self)
{
    return self && self->done;
}

int
cs_sk_party_error (const cs_sk_party_t *self)
{
    return self ? self->error : CS_SK_EINVAL;
}

void
cs_sk_party_stats (const cs_sk_party_t *self, cs_sk_stats_t *stats)
{
    *stats = self->stats;
}

cs_sk_share_t *
cs_sk_party_share (const cs_sk_party_t *self)
{
    if (!self || !self->done)
        return NULL;
    return sk_share_new (self->index, self->N, self->prm.e, self->d);
}

const char *
cs_sk_strerror (int err)
{
    switch (err) {
    case CS_SK_OK: return "success";
    case CS_SK_EINVAL: return "invalid argument";
    case CS_SK_EMALFORMED: return "malformed message or record";
    case CS_SK_ESESSION: return "message of another session or party";
    case CS_SK_EREPLAY: return "replayed or out-of-sequence message";
    case CS_SK_EPROTO: return "message the protocol does not allow now";
    case CS_SK_ESTATE: return "party not running";
    case CS_SK_ERAND: return "random source failed";
    case CS_SK_EVERIFY: return "combined result fails verification";
    case CS_SK_ENOMEM: return "out of memory";
    case CS_SK_ELIMIT: return "no key within the candidate limit";
    default: return "unknown error";
    }
}
