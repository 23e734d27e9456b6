/*  test_sharedkeys_harness.c — the test-only harness (test_sharedkeys.h).  */
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include <openssl/evp.h>
#include "test_sharedkeys.h"

void
th_rand_init (th_rand_t *r, const char *label, unsigned party)
{
    char in [128];
    snprintf (in, sizeof in, "%s/%u", label, party);
    EVP_Digest (in, strlen (in), r->key, NULL, EVP_sha256 (), NULL);
    r->ctr = 0;
}

int
th_rand (void *ctx, unsigned char *buf, size_t len)
{
    th_rand_t *r = ctx;
    while (len > 0) {
        unsigned char in [40], out [32];
        memcpy (in, r->key, 32);
        memcpy (in + 32, &r->ctr, 8);
        r->ctr++;
        if (!EVP_Digest (in, sizeof in, out, NULL, EVP_sha256 (), NULL))
            return -1;
        size_t n = len < 32 ? len : 32;
        memcpy (buf, out, n);
        buf += n;
        len -= n;
    }
    return 0;
}

void
th_reveal_init (th_reveal_t *rv)
{
    for (unsigned i = 0; i < CS_SK_PARTIES; i++)
        mpz_inits (rv->p [i], rv->q [i], NULL);
    mpz_init (rv->N);
}

void
th_reveal_clear (th_reveal_t *rv)
{
    for (unsigned i = 0; i < CS_SK_PARTIES; i++)
        mpz_clears (rv->p [i], rv->q [i], NULL);
    mpz_clear (rv->N);
}

void
th_start (const cs_sk_params_t *prm, const char *label, cs_sk_party_t *parties [CS_SK_PARTIES],
          th_rand_t rnd [CS_SK_PARTIES], cs_sk_outbox_t out [CS_SK_PARTIES])
{
    unsigned char sid [CS_SK_SESSION_LEN];
    memset (sid, 0x5a, sizeof sid);
    for (unsigned i = 0; i < CS_SK_PARTIES; i++) {
        th_rand_init (&rnd [i], label ? label : "th", i + 1);
        parties [i] = cs_sk_party_new (i + 1, sid, prm, label ? th_rand : NULL, &rnd [i]);
        ck_assert_ptr_nonnull (parties [i]);
        memset (&out [i], 0, sizeof out [i]);
        ck_assert_int_eq (cs_sk_party_start (parties [i], &out [i]), 0);
    }
}

typedef struct {
    unsigned from, to;
    unsigned char *data;
    size_t len;
} th_item_t;

/*  The message is for the round its receiver is in.  */
static bool
s_due (const cs_sk_party_t *p, const th_item_t *it)
{
    Cs__Sk__Message *m = cs__sk__message__unpack (NULL, it->len, it->data);
    bool due = m && m->batch == p->batch && (unsigned) m->type == p->round;
    if (m)
        cs__sk__message__free_unpacked (m, NULL);
    return due;
}

/*  The harness's peek: the key's p_i, q_i before they are wiped.  */
static void
s_reveal (cs_sk_party_t *p, void *ctx)
{
    th_reveal_t *rv = ctx;
    if (p->round == SK_R_TRIAL_SIGNATURE && !rv->seen [p->index - 1]) {
        rv->seen [p->index - 1] = true;
        mpz_set (rv->p [p->index - 1], p->cand [p->chosen].pq [0]);
        mpz_set (rv->q [p->index - 1], p->cand [p->chosen].pq [1]);
        mpz_set (rv->N, p->cand [p->chosen].N);
    }
}

int
th_run (const cs_sk_params_t *prm, const char *label, cs_sk_share_t *shares [CS_SK_PARTIES],
        th_reveal_t *rv)
{
    if (rv)
        memset (rv->seen, 0, sizeof rv->seen);
    return th_run_observed (prm, label, shares, rv ? s_reveal : NULL, rv);
}

int
th_run_observed (const cs_sk_params_t *prm, const char *label, cs_sk_share_t *shares [CS_SK_PARTIES],
                 th_observer_fn observe, void *ctx)
{
    cs_sk_party_t *party [CS_SK_PARTIES];
    th_rand_t rnd [CS_SK_PARTIES];
    cs_sk_outbox_t out [CS_SK_PARTIES];
    th_start (prm, label, party, rnd, out);
    size_t cap = 1 << 16, head = 0, tail = 0;
    th_item_t *q = malloc (cap * sizeof *q);
    for (unsigned i = 0; i < CS_SK_PARTIES; i++) {
        for (size_t k = 0; k < out [i].count; k++) {
            q [tail++ % cap] = (th_item_t) { i + 1, out [i].msg [k].receiver, out [i].msg [k].data, out [i].msg [k].len };
            out [i].msg [k].data = NULL;
        }
        cs_sk_outbox_clear (&out [i]);
    }
    int rc = 0;
    for (unsigned i = 0; observe && i < CS_SK_PARTIES; i++)
        observe (party [i], ctx);
    cs_sk_outbox_t o = { 0 };
    size_t held = 0;
    while (rc == 0 && head < tail) {
        th_item_t it = q [head++ % cap];
        cs_sk_party_t *p = party [it.to - 1];
        if (observe && !s_due (p, &it)) {
            /* lock step: a message for a later round waits, so that each
               delivery completes at most one round and the observer sees all */
            q [tail++ % cap] = it;
            if (++held > tail - head)
                rc = CS_SK_EPROTO;
            continue;
        }
        held = 0;
        rc = cs_sk_party_receive (p, it.from, it.data, it.len, &o);
        free (it.data);
        if (observe && rc == 0)
            observe (p, ctx);
        for (size_t k = 0; k < o.count; k++) {
            q [tail++ % cap] = (th_item_t) { it.to, o.msg [k].receiver, o.msg [k].data, o.msg [k].len };
            o.msg [k].data = NULL;
        }
        cs_sk_outbox_clear (&o);
    }
    while (head < tail)
        free (q [head++ % cap].data);
    free (q);
    for (unsigned i = 0; i < CS_SK_PARTIES; i++) {
        shares [i] = rc == 0 ? cs_sk_party_share (party [i]) : NULL;
        if (rc == 0 && !shares [i])
            rc = cs_sk_party_error (party [i]) ? cs_sk_party_error (party [i]) : CS_SK_EPROTO;
        cs_sk_party_destroy (&party [i]);
    }
    return rc;
}
