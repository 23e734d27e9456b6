/*  test_sharedkeys.c — the rounds of shared RSA generation with fixed
 *  randomness (sharedkeys/): public parameters, sieving, N = pq with p and q
 *  prime (revealed by the test-only harness), the shares of d, and the
 *  messages a party refuses (replayed, other session, malformed).
 */
#include <check.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "test_sharedkeys.h"
#include "test_run.h"

static cs_sk_params_t
s_params (unsigned bits)
{
    cs_sk_params_t prm;
    cs_sk_params_default (&prm, bits);
    return prm;
}

START_TEST (test_public_parameters)
{
    cs_sk_params_t prm = s_params (512);
    sk_public_t pub;
    ck_assert_int_eq (sk_public_init (&pub, &prm), 0);
    ck_assert (mpz_probab_prime_p (pub.P, 30));
    ck_assert_uint_eq (mpz_sizeinbase (pub.P, 2), 515);     /* P > 2^514 > 4N */
    ck_assert (mpz_odd_p (pub.M));
    ck_assert_uint_le (mpz_sizeinbase (pub.M, 2), 256 - 48);
    ck_assert (mpz_divisible_ui_p (pub.M, pub.sieve_bound));
    ck_assert_uint_gt (pub.sieve_bound, 100);
    ck_assert_uint_gt (pub.td_primes [0], pub.sieve_bound);
    ck_assert_uint_le (pub.td_primes [pub.td_count - 1], prm.td_bound);
    /* three shares in [lo, lo + width) sum to p below 2^256, and p >= 1.5 * 2^255 */
    mpz_t t;
    mpz_init (t);
    mpz_add (t, pub.lo, pub.width);
    mpz_mul_ui (t, t, 3);
    ck_assert_uint_le (mpz_sizeinbase (t, 2), 256);
    mpz_mul_ui (t, pub.lo, 3);
    ck_assert_uint_eq (mpz_sizeinbase (t, 2), 256);          /* 3 lo = 1.5 * 2^255 */
    mpz_clear (t);
    sk_public_clear (&pub);
    prm.sieve = false;
    ck_assert_int_eq (sk_public_init (&pub, &prm), 0);
    ck_assert_int_eq (mpz_cmp_ui (pub.M, 1), 0);
    ck_assert_uint_eq (pub.td_primes [0], 3);
    sk_public_clear (&pub);
}
END_TEST

/*  Every prime of (B, td_bound] is found by exactly one party (parallel),
 *  or by every party (serial); a prime above the bound by none.  */
START_TEST (test_trial_division)
{
    cs_sk_params_t prm = s_params (512);
    prm.parallel_td = _i == 0;
    unsigned char sid [CS_SK_SESSION_LEN] = { 0 };
    cs_sk_party_t *p [CS_SK_PARTIES];
    for (unsigned i = 0; i < CS_SK_PARTIES; i++)
        p [i] = cs_sk_party_new (i + 1, sid, &prm, NULL, NULL);
    mpz_t N, big;
    mpz_inits (N, big, NULL);
    mpz_set_ui (big, 1);
    mpz_mul_2exp (big, big, 400);
    mpz_nextprime (big, big);
    const sk_public_t *pub = &p [0]->pub;
    for (size_t k = 0; k < pub->td_count; k++) {
        mpz_mul_ui (N, big, pub->td_primes [k]);
        unsigned found = 0;
        for (unsigned i = 0; i < CS_SK_PARTIES; i++)
            found += !sk_trial_divide (p [i], N);
        ck_assert_msg (found == (prm.parallel_td ? 1 : 3), "prime %u found %u times", pub->td_primes [k], found);
    }
    mpz_mul_ui (N, big, 131101);                /* the first prime above 2^17 */
    mpz_mul_ui (N, N, pub->sieve_bound);        /* sieving's job, not trial division's */
    for (unsigned i = 0; i < CS_SK_PARTIES; i++) {
        ck_assert_uint_eq (sk_trial_divide (p [i], N), 1);
        cs_sk_party_destroy (&p [i]);
    }
    mpz_clears (N, big, NULL);
}
END_TEST

/*  p, q prime with the shares' residues mod 4 and M, N = pq of `bits`,
 *  e d = 1 mod phi for d = d_1 + d_2 + d_3.  */
static void
s_check_key (const cs_sk_params_t *prm, th_reveal_t *rv, cs_sk_share_t *sh [CS_SK_PARTIES])
{
    mpz_t p, q, n, d, phi, t;
    mpz_inits (p, q, n, d, phi, t, NULL);
    for (unsigned i = 0; i < CS_SK_PARTIES; i++) {
        ck_assert_uint_eq (mpz_fdiv_ui (rv->p [i], 4), i == 0 ? 3 : 0);
        ck_assert_uint_eq (mpz_fdiv_ui (rv->q [i], 4), i == 0 ? 3 : 0);
        mpz_add (p, p, rv->p [i]);
        mpz_add (q, q, rv->q [i]);
        mpz_add (d, d, sh [i]->d);
        ck_assert_int_eq (mpz_cmp (sh [i]->n, rv->N), 0);
        ck_assert_uint_eq (cs_sk_share_party (sh [i]), i + 1);
    }
    ck_assert (mpz_probab_prime_p (p, 40));
    ck_assert (mpz_probab_prime_p (q, 40));
    mpz_mul (n, p, q);
    ck_assert_int_eq (mpz_cmp (n, rv->N), 0);
    ck_assert_uint_eq (mpz_sizeinbase (n, 2), prm->bits);
    sk_public_t pub;
    ck_assert_int_eq (sk_public_init (&pub, prm), 0);
    mpz_gcd (t, p, pub.M);
    ck_assert_int_eq (mpz_cmp_ui (t, 1), 0);                  /* sieved: no factor <= B */
    sk_public_clear (&pub);
    mpz_sub_ui (p, p, 1);
    mpz_sub_ui (q, q, 1);
    mpz_mul (phi, p, q);
    mpz_mul_ui (t, d, prm->e);
    mpz_mod (t, t, phi);
    ck_assert_int_eq (mpz_cmp_ui (t, 1), 0);
    ck_assert_int_gt (mpz_sgn (sh [0]->d), 0);
    ck_assert_int_lt (mpz_sgn (sh [1]->d), 0);
    ck_assert_int_lt (mpz_sgn (sh [2]->d), 0);
    mpz_clears (p, q, n, d, phi, t, NULL);
}

START_TEST (test_generation_fixed_randomness)
{
    cs_sk_params_t prm = s_params (512);
    cs_sk_share_t *sh [CS_SK_PARTIES], *again [CS_SK_PARTIES];
    th_reveal_t rv, rv2;
    th_reveal_init (&rv);
    th_reveal_init (&rv2);
    ck_assert_int_eq (th_run (&prm, "fixed-1", sh, &rv), 0);
    s_check_key (&prm, &rv, sh);
    /* the same randomness gives the same key */
    ck_assert_int_eq (th_run (&prm, "fixed-1", again, &rv2), 0);
    ck_assert_int_eq (mpz_cmp (rv.N, rv2.N), 0);
    for (unsigned i = 0; i < CS_SK_PARTIES; i++) {
        ck_assert_int_eq (mpz_cmp (sh [i]->d, again [i]->d), 0);
        cs_sk_share_destroy (&sh [i]);
        cs_sk_share_destroy (&again [i]);
        ck_assert_ptr_null (sh [i]);
    }
    th_reveal_clear (&rv);
    th_reveal_clear (&rv2);
}
END_TEST

START_TEST (test_generation_each_switch)
{
    /* every optimisation off in turn, other randomness: still a valid key */
    const char *label [] = { "nosieve", "serialtd", "nobalance", "onetest" };
    cs_sk_params_t prm = s_params (512);
    if (_i == 0)
        prm.sieve = false;
    if (_i == 1)
        prm.parallel_td = false;
    if (_i == 2)
        prm.load_balance = false;
    if (_i == 3)
        prm.tests = 1, prm.batch = 1;
    cs_sk_share_t *sh [CS_SK_PARTIES];
    th_reveal_t rv;
    th_reveal_init (&rv);
    ck_assert_int_eq (th_run (&prm, label [_i], sh, &rv), 0);
    s_check_key (&prm, &rv, sh);
    for (unsigned i = 0; i < CS_SK_PARTIES; i++)
        cs_sk_share_destroy (&sh [i]);
    th_reveal_clear (&rv);
}
END_TEST

START_TEST (test_candidate_limit)
{
    cs_sk_params_t prm = s_params (512);
    prm.max_batches = 1;
    prm.batch = 1;
    cs_sk_share_t *sh [CS_SK_PARTIES];
    /* this label's first candidate is no key (checked: 1 batch of 1 fails) */
    ck_assert_int_eq (th_run (&prm, "fixed-1", sh, NULL), CS_SK_ELIMIT);
    ck_assert_ptr_null (sh [0]);
}
END_TEST

/* ---- the rounds, observed (lock step) ------------------------------------ */

#define S_BATCH 4

/*  What the parties held at each step of batch 0 and of the key's batch.  */
typedef struct {
    mpz_t a [CS_SK_PARTIES][S_BATCH][2];    /* sieving: a_i */
    mpz_t b [CS_SK_PARTIES][S_BATCH][2];    /* sieving: additive shares b_i */
    mpz_t pq [CS_SK_PARTIES][S_BATCH][2];   /* p_i, q_i */
    mpz_t N [CS_SK_PARTIES][S_BATCH];       /* N as each party interpolated it */
    mpz_t kpq [CS_SK_PARTIES][S_BATCH][2];  /* the key's batch */
    mpz_t kN [S_BATCH];
    unsigned char td [CS_SK_PARTIES][S_BATCH], first [CS_SK_PARTIES][S_BATCH],
                  rest [CS_SK_PARTIES][S_BATCH];
    bool got_a [CS_SK_PARTIES], got_b [CS_SK_PARTIES], got_n [CS_SK_PARTIES], got_k [CS_SK_PARTIES];
    bool wiped [CS_SK_PARTIES];
} s_steps_t;

/*  Every limb z ever had is zero (sk_wipe, not only mpz_set_ui).  */
static bool
s_zero_limbs (const mpz_t z)
{
    for (int i = 0; i < z->_mp_alloc; i++)
        if (z->_mp_d [i])
            return false;
    return mpz_sgn (z) == 0;
}

/*  Once done, no secret of any candidate is left in the party.  */
static bool
s_all_wiped (const cs_sk_party_t *p)
{
    for (unsigned c = 0; c < SK_MAX_BATCH; c++) {
        const sk_cand_t *k = &p->cand [c];
        for (unsigned h = 0; h < 2; h++) {
            if (!s_zero_limbs (k->a [h]) || !s_zero_limbs (k->R [h]) || !s_zero_limbs (k->u [h])
                || !s_zero_limbs (k->pq [h]) || !s_zero_limbs (k->bgw [h].F)
                || !s_zero_limbs (k->bgw [h].G) || !s_zero_limbs (k->bgw [h].H))
                return false;
            for (unsigned j = 0; j < CS_SK_PARTIES; j++)
                if (!s_zero_limbs (k->bgw [h].X [j]))
                    return false;
        }
        for (unsigned t = 0; t < p->prm.tests * CS_SK_PARTIES; t++)
            if (!s_zero_limbs (k->vt [t]))
                return false;
    }
    return true;
}

static void
s_observe (cs_sk_party_t *p, void *ctx)
{
    s_steps_t *st = ctx;
    unsigned i = p->index - 1;
    for (unsigned c = 0; c < S_BATCH; c++) {
        sk_cand_t *k = &p->cand [c];
        for (unsigned h = 0; h < 2; h++) {
            if (p->batch == 0 && p->round == SK_R_SIEVE_B_SHARES)
                mpz_set (st->a [i][c][h], k->a [h]);
            if (p->batch == 0 && p->round == SK_R_N_SHARES) {
                mpz_set (st->b [i][c][h], k->u [h]);
                mpz_set (st->pq [i][c][h], k->pq [h]);
            }
            if (p->round == SK_R_TRIAL_SIGNATURE)
                mpz_set (st->kpq [i][c][h], k->pq [h]);
        }
        if (p->batch == 0 && p->round == SK_R_TRIAL_DIVISION)
            mpz_set (st->N [i][c], k->N);
        if (p->round == SK_R_TRIAL_SIGNATURE) {
            mpz_set (st->kN [c], k->N);
            st->td [i][c] = k->td_ok;
            st->first [i][c] = k->first_ok;
            st->rest [i][c] = k->rest_ok;
        }
    }
    st->got_a [i] |= p->batch == 0 && p->round == SK_R_SIEVE_B_SHARES;
    st->got_b [i] |= p->batch == 0 && p->round == SK_R_N_SHARES;
    st->got_n [i] |= p->batch == 0 && p->round == SK_R_TRIAL_DIVISION;
    st->got_k [i] |= p->round == SK_R_TRIAL_SIGNATURE;
    if (p->done)
        st->wiped [i] = s_all_wiped (p);
}

static bool
s_prime (const mpz_t x)
{
    return mpz_probab_prime_p (x, 40) != 0;
}

START_TEST (test_rounds_observed)
{
    cs_sk_params_t prm = s_params (512);
    prm.batch = S_BATCH;
    s_steps_t *st = calloc (1, sizeof *st);
    mpz_t *all = (mpz_t *) st;                  /* the struct starts with its mpz_t */
    size_t count = (offsetof (s_steps_t, td)) / sizeof (mpz_t);
    for (size_t k = 0; k < count; k++)
        mpz_init (all [k]);
    cs_sk_share_t *sh [CS_SK_PARTIES];
    ck_assert_int_eq (th_run_observed (&prm, "steps", sh, s_observe, st), 0);
    sk_public_t pub;
    ck_assert_int_eq (sk_public_init (&pub, &prm), 0);
    mpz_t x, y, t;
    mpz_inits (x, y, t, NULL);
    unsigned rejected = 0;
    for (unsigned i = 0; i < CS_SK_PARTIES; i++)
        ck_assert (st->got_a [i] && st->got_b [i] && st->got_n [i] && st->got_k [i] && st->wiped [i]);
    for (unsigned c = 0; c < S_BATCH; c++) {
        /* sieving (BF/MWB): b_1 + b_2 + b_3 = a_1 a_2 a_3 mod M, a unit */
        for (unsigned h = 0; h < 2; h++) {
            mpz_set_ui (x, 1);
            mpz_set_ui (y, 0);
            for (unsigned i = 0; i < CS_SK_PARTIES; i++) {
                mpz_gcd (t, st->a [i][c][h], pub.M);
                ck_assert_int_eq (mpz_cmp_ui (t, 1), 0);
                mpz_mul (x, x, st->a [i][c][h]);
                mpz_add (y, y, st->b [i][c][h]);
                /* p_i = b_i mod M, with its residue mod 4 and in its range */
                ck_assert (mpz_congruent_p (st->pq [i][c][h], st->b [i][c][h], pub.M));
                ck_assert_uint_eq (mpz_fdiv_ui (st->pq [i][c][h], 4), i == 0 ? 3 : 0);
                ck_assert_int_ge (mpz_cmp (st->pq [i][c][h], pub.lo), 0);
                mpz_sub (t, st->pq [i][c][h], pub.lo);
                ck_assert_int_lt (mpz_cmp (t, pub.width), 0);
            }
            ck_assert (mpz_congruent_p (x, y, pub.M));
        }
        /* N by BGW: every party interpolated (sum p_i)(sum q_i) */
        mpz_set_ui (x, 0);
        mpz_set_ui (y, 0);
        for (unsigned i = 0; i < CS_SK_PARTIES; i++) {
            mpz_add (x, x, st->pq [i][c][0]);
            mpz_add (y, y, st->pq [i][c][1]);
        }
        mpz_mul (t, x, y);
        for (unsigned i = 0; i < CS_SK_PARTIES; i++)
            ck_assert_int_eq (mpz_cmp (st->N [i][c], t), 0);
        /* the key's batch: trial division and the biprimality test agree
           with the truth, the same at every party */
        mpz_set_ui (x, 0);
        mpz_set_ui (y, 0);
        for (unsigned i = 0; i < CS_SK_PARTIES; i++) {
            mpz_add (x, x, st->kpq [i][c][0]);
            mpz_add (y, y, st->kpq [i][c][1]);
            ck_assert_uint_eq (st->td [i][c], st->td [0][c]);
            ck_assert_uint_eq (st->first [i][c], st->first [0][c]);
            ck_assert_uint_eq (st->rest [i][c], st->rest [0][c]);
        }
        bool small = false;
        for (size_t k = 0; k < pub.td_count; k++)
            small |= mpz_divisible_ui_p (x, pub.td_primes [k]) || mpz_divisible_ui_p (y, pub.td_primes [k]);
        ck_assert_uint_eq (st->td [0][c], !small);
        bool biprime = s_prime (x) && s_prime (y);
        rejected += st->td [0][c] && !biprime && !st->first [0][c];
        if (biprime)
            ck_assert (st->td [0][c] && st->first [0][c] && st->rest [0][c]);
        if (st->rest [0][c])
            ck_assert (biprime);
    }
    /* with this randomness the key's batch holds a candidate that passed
       trial division, is no product of two primes, and failed the test */
    ck_assert_uint_ge (rejected, 1);
    mpz_clears (x, y, t, NULL);
    sk_public_clear (&pub);
    for (size_t k = 0; k < count; k++)
        mpz_clear (all [k]);
    free (st);
    for (unsigned i = 0; i < CS_SK_PARTIES; i++)
        cs_sk_share_destroy (&sh [i]);
}
END_TEST

/* ---- messages refused ---------------------------------------------------- */

typedef struct {
    cs_sk_party_t *party [CS_SK_PARTIES];
    th_rand_t rnd [CS_SK_PARTIES];
    cs_sk_outbox_t out [CS_SK_PARTIES];
} s_trio_t;

/*  The first message from party `from` (1..3) to party `to`.  */
static cs_sk_wire_t *
s_first (s_trio_t *t, unsigned from, unsigned to)
{
    for (size_t k = 0; k < t->out [from - 1].count; k++)
        if (t->out [from - 1].msg [k].receiver == to)
            return &t->out [from - 1].msg [k];
    return NULL;
}

static void
s_trio_free (s_trio_t *t)
{
    for (unsigned i = 0; i < CS_SK_PARTIES; i++) {
        cs_sk_party_destroy (&t->party [i]);
        cs_sk_outbox_clear (&t->out [i]);
    }
}

/*  Re-encodes m after `edit`; caller frees.  */
static unsigned char *
s_edit (const cs_sk_wire_t *w, void (*edit) (Cs__Sk__Message *), size_t *len)
{
    Cs__Sk__Message *m = cs__sk__message__unpack (NULL, w->len, w->data);
    ck_assert_ptr_nonnull (m);
    edit (m);
    *len = cs__sk__message__get_packed_size (m);
    unsigned char *data = malloc (*len + 1);
    cs__sk__message__pack (m, data);
    cs__sk__message__free_unpacked (m, NULL);
    return data;
}

static void s_other_session (Cs__Sk__Message *m) { m->session.data [0] ^= 1; }
static void s_wrong_receiver (Cs__Sk__Message *m) { m->receiver = 1; }
static void s_from_self (Cs__Sk__Message *m) { m->sender = m->receiver; }
static void s_bad_version (Cs__Sk__Message *m) { m->version = 99; }
static void s_skip_seq (Cs__Sk__Message *m) { m->seq = 2; }
static void s_one_value_less (Cs__Sk__Message *m) { free (m->values [--m->n_values].data); }
static void
s_value_too_big (Cs__Sk__Message *m)
{
    free (m->values [0].data);                  /* 2^520 - 1 > P */
    m->values [0].data = malloc (65);
    memset (m->values [0].data, 0xff, 65);
    m->values [0].len = 65;
}
static void s_leading_zero (Cs__Sk__Message *m) { m->values [0].data [0] = 0; }
static void s_unknown_type (Cs__Sk__Message *m) { m->type = (Cs__Sk__Type) 77; }
static void s_early (Cs__Sk__Message *m) { m->type = CS__SK__TYPE__SIEVE_A_REVEAL; m->seq = 2; }
static void s_early_again (Cs__Sk__Message *m) { m->type = CS__SK__TYPE__SIEVE_A_REVEAL; m->seq = 3; }

START_TEST (test_messages_refused)
{
    cs_sk_params_t prm = s_params (512);
    s_trio_t t;
    th_start (&prm, "refuse", t.party, t.rnd, t.out);
    cs_sk_wire_t *w = s_first (&t, 1, 2);     /* SIEVE_A_SHARES, seq 1, 1 -> 2 */
    ck_assert_ptr_nonnull (w);
    cs_sk_outbox_t o = { 0 };
    cs_sk_party_t *p2 = t.party [1];
    struct { void (*edit) (Cs__Sk__Message *); int rc; } cases [] = {
        { s_other_session, CS_SK_ESESSION }, { s_wrong_receiver, CS_SK_ESESSION },
        { s_from_self, CS_SK_EMALFORMED }, { s_bad_version, CS_SK_EMALFORMED },
        { s_skip_seq, CS_SK_EREPLAY }, { s_one_value_less, CS_SK_EMALFORMED },
        { s_value_too_big, CS_SK_EMALFORMED }, { s_leading_zero, CS_SK_EMALFORMED },
        { s_unknown_type, CS_SK_EMALFORMED },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases [0]; k++) {
        size_t len;
        unsigned char *data = s_edit (w, cases [k].edit, &len);
        ck_assert_msg (cs_sk_party_receive (p2, 0, data, len, &o) == cases [k].rc, "case %zu", k);
        free (data);
        ck_assert_uint_eq (o.count, 0);
    }
    /* bytes that are no message, and a truncated one */
    ck_assert_int_eq (cs_sk_party_receive (p2, 0, (const unsigned char *) "\xff\xff\xff", 3, &o),
                      CS_SK_EMALFORMED);
    ck_assert_int_eq (cs_sk_party_receive (p2, 0, w->data, w->len / 2, &o), CS_SK_EMALFORMED);
    /* party 1's message as if party 3 had sent it (the transport authenticated 3) */
    ck_assert_int_eq (cs_sk_party_receive (p2, 3, w->data, w->len, &o), CS_SK_ESESSION);
    /* the party is unharmed: the genuine message is taken, then replayed */
    ck_assert_int_eq (cs_sk_party_receive (p2, 1, w->data, w->len, &o), 0);
    ck_assert_int_eq (cs_sk_party_error (p2), 0);
    ck_assert_int_eq (cs_sk_party_receive (p2, 0, w->data, w->len, &o), CS_SK_EREPLAY);
    /* a second message of a round from the same sender is not allowed */
    size_t len;
    unsigned char *data = s_edit (w, s_skip_seq, &len);
    ck_assert_int_eq (cs_sk_party_receive (p2, 0, data, len, &o), CS_SK_EPROTO);
    free (data);
    /* one early message (the next round) is held; a second early one is not */
    data = s_edit (w, s_early, &len);
    ck_assert_int_eq (cs_sk_party_receive (p2, 0, data, len, &o), 0);
    free (data);
    data = s_edit (w, s_early_again, &len);
    ck_assert_int_eq (cs_sk_party_receive (p2, 0, data, len, &o), CS_SK_EPROTO);
    free (data);
    ck_assert_int_eq (cs_sk_party_error (p2), 0);
    cs_sk_outbox_clear (&o);
    s_trio_free (&t);
}
END_TEST

/*  An early message is checked when its round comes: one that does not fit
 *  fails the party (its sequence number was taken: nothing can replace it).  */
START_TEST (test_early_message_checked_later)
{
    cs_sk_params_t prm = s_params (512);
    s_trio_t t;
    th_start (&prm, "early", t.party, t.rnd, t.out);
    cs_sk_outbox_t o = { 0 };
    cs_sk_party_t *p2 = t.party [1];
    cs_sk_wire_t *w1 = s_first (&t, 1, 2), *w3 = s_first (&t, 3, 2);
    ck_assert_int_eq (cs_sk_party_receive (p2, 0, w1->data, w1->len, &o), 0);
    size_t len;
    /* SIEVE_A_REVEAL carrying the shares' values: 3 per product, not 1 */
    unsigned char *data = s_edit (w1, s_early, &len);
    ck_assert_int_eq (cs_sk_party_receive (p2, 0, data, len, &o), 0);
    free (data);
    ck_assert_int_eq (cs_sk_party_receive (p2, 0, w3->data, w3->len, &o), CS_SK_EPROTO);
    ck_assert_int_eq (cs_sk_party_error (p2), CS_SK_EPROTO);
    ck_assert_int_eq (cs_sk_party_receive (p2, 0, w3->data, w3->len, &o), CS_SK_ESTATE);
    cs_sk_outbox_clear (&o);
    s_trio_free (&t);
}
END_TEST

START_TEST (test_stopped_party_refuses)
{
    cs_sk_params_t prm = s_params (512);
    s_trio_t t;
    th_start (&prm, "stopped", t.party, t.rnd, t.out);
    cs_sk_outbox_t o = { 0 };
    ck_assert_int_eq (cs_sk_party_start (t.party [0], &o), CS_SK_ESTATE);
    unsigned char sid [CS_SK_SESSION_LEN] = { 0 };
    cs_sk_party_t *fresh = cs_sk_party_new (2, sid, &prm, NULL, NULL);
    cs_sk_wire_t *w = s_first (&t, 1, 2);
    ck_assert_int_eq (cs_sk_party_receive (fresh, 0, w->data, w->len, &o), CS_SK_ESTATE);
    cs_sk_party_destroy (&fresh);
    /* a party of the same session with other parameters refuses them */
    cs_sk_params_t other = prm;
    other.tests = 39;
    unsigned char same [CS_SK_SESSION_LEN];
    memset (same, 0x5a, sizeof same);
    cs_sk_party_t *odd = cs_sk_party_new (2, same, &other, NULL, NULL);
    ck_assert_int_eq (cs_sk_party_start (odd, &o), 0);
    ck_assert_int_eq (cs_sk_party_receive (odd, 1, w->data, w->len, &o), CS_SK_ESESSION);
    cs_sk_party_t *even = cs_sk_party_new (2, same, &prm, NULL, NULL);
    ck_assert_int_eq (cs_sk_party_start (even, &o), 0);
    ck_assert_int_eq (cs_sk_party_receive (even, 1, w->data, w->len, &o), 0);
    cs_sk_party_destroy (&odd);
    cs_sk_party_destroy (&even);
    cs_sk_outbox_clear (&o);
    ck_assert_ptr_null (cs_sk_party_new (4, sid, &prm, NULL, NULL));
    prm.bits = 500;
    ck_assert_ptr_null (cs_sk_party_new (1, sid, &prm, NULL, NULL));
    s_trio_free (&t);
}
END_TEST

/* ---- the share record ---------------------------------------------------- */

START_TEST (test_share_record)
{
    cs_sk_params_t prm = s_params (512);
    cs_sk_share_t *sh [CS_SK_PARTIES];
    ck_assert_int_eq (th_run (&prm, "record", sh, NULL), 0);
    for (unsigned i = 0; i < CS_SK_PARTIES; i++) {
        unsigned char *data;
        size_t len;
        int err = 1;
        ck_assert_int_eq (cs_sk_share_encode (sh [i], &data, &len), 0);
        cs_sk_share_t *back = cs_sk_share_decode (data, len, &err);
        ck_assert_int_eq (err, 0);
        ck_assert_ptr_nonnull (back);
        ck_assert_uint_eq (back->party, i + 1);
        ck_assert_uint_eq (back->e, 65537);
        ck_assert_int_eq (mpz_cmp (back->n, sh [i]->n), 0);
        ck_assert_int_eq (mpz_cmp (back->d, sh [i]->d), 0);
        cs_sk_share_destroy (&back);
        /* a record with another version, or a party's sign flipped, is refused */
        Cs__Sk__Share *rec = cs__sk__share__unpack (NULL, len, data);
        rec->version = 2;
        unsigned char buf [2048];
        size_t n = cs__sk__share__pack (rec, buf);
        ck_assert_ptr_null (cs_sk_share_decode (buf, n, &err));
        ck_assert_int_eq (err, CS_SK_EMALFORMED);
        rec->version = CS_SK_SHARE_VERSION;
        rec->d_negative = !rec->d_negative;
        n = cs__sk__share__pack (rec, buf);
        ck_assert_ptr_null (cs_sk_share_decode (buf, n, &err));
        cs__sk__share__free_unpacked (rec, NULL);
        ck_assert_ptr_null (cs_sk_share_decode (data, len - 3, &err));
        ck_assert_int_eq (err, CS_SK_EMALFORMED);
        free (data);
        cs_sk_share_destroy (&sh [i]);
    }
}
END_TEST

int
main (void)
{
    Suite *s = suite_create ("sharedkeys");
    TCase *tc = tcase_create ("generation");
    tcase_set_timeout (tc, 120);
    tcase_add_test (tc, test_public_parameters);
    tcase_add_loop_test (tc, test_trial_division, 0, 2);
    tcase_add_test (tc, test_generation_fixed_randomness);
    tcase_add_test (tc, test_rounds_observed);
    tcase_add_loop_test (tc, test_generation_each_switch, 0, 4);
    tcase_add_test (tc, test_candidate_limit);
    tcase_add_test (tc, test_share_record);
    suite_add_tcase (s, tc);
    TCase *msg = tcase_create ("messages");
    tcase_add_test (msg, test_messages_refused);
    tcase_add_test (msg, test_early_message_checked_later);
    tcase_add_test (msg, test_stopped_party_refuses);
    suite_add_tcase (s, msg);
    return tr_run (s);
}
