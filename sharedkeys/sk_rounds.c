/*  sk_rounds.c — the rounds up to trial division (sk_int.h): distributed
 *  sieving, the BGW computation of N, trial division; and the dispatch of
 *  every round (the later ones are in sk_rounds_test.c).
 *  docs/SHARED-KEYS.md, "Messages".
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "sk_int.h"

/* ---- message values ----------------------------------------------------- */

int
sk_msg_values (Cs__Sk__Message *msg, size_t count)
{
    msg->values = calloc (count ? count : 1, sizeof *msg->values);
    msg->n_values = 0;
    return msg->values ? 0 : CS_SK_ENOMEM;
}

int
sk_msg_add (Cs__Sk__Message *msg, const mpz_t z)
{
    return sk_put (&msg->values [msg->n_values++], z);
}

int
sk_msg_flags (Cs__Sk__Message *msg, size_t count)
{
    msg->flags.data = calloc (count ? count : 1, 1);
    msg->flags.len = count;
    return msg->flags.data ? 0 : CS_SK_ENOMEM;
}

int
sk_msg_check_values (const Cs__Sk__Message *msg, size_t count, const mpz_t bound)
{
    if (msg->n_values != count || msg->flags.len != 0)
        return -1;
    mpz_t z;
    mpz_init (z);
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++)
        rc = sk_get (z, &msg->values [i], bound);
    sk_wipe_clear (z);
    return rc;
}

int
sk_msg_check_flags (const Cs__Sk__Message *msg, size_t count)
{
    if (msg->n_values != 0 || msg->flags.len != count)
        return -1;
    for (size_t i = 0; i < count; i++)
        if (msg->flags.data [i] > 1)
            return -1;
    return 0;
}

/* ---- the BGW products (BF "computing N"; BGW over GF(P), degree 1) ------ */

/*  Products of a round: 2 per candidate (p and q) while sieving, 1 for N.  */
static unsigned
s_products (const cs_sk_party_t *self, unsigned round)
{
    return round >= SK_R_N_SHARES ? self->prm.batch : 2 * self->prm.batch;
}

/*  Who shares the factors x and y of a product.  Sieving step A computes
 *  a1 * a2, step B (u1 + u2 + u3) * a3, N is (sum p_j)(sum q_j).  */
static bool
s_has_x (unsigned round, unsigned party)
{
    return round == SK_R_SIEVE_A_SHARES ? party == 1 : true;
}

static bool
s_has_y (unsigned round, unsigned party)
{
    if (round == SK_R_SIEVE_A_SHARES)
        return party == 2;
    if (round == SK_R_SIEVE_B_SHARES)
        return party == 3;
    return true;
}

static sk_bgw_t *
s_bgw (cs_sk_party_t *self, unsigned round, unsigned k)
{
    return round >= SK_R_N_SHARES ? &self->cand [k].bgw [0] : &self->cand [k / 2].bgw [k % 2];
}

/*  p_i (or q_i) = b + M * r in [lo, lo + width), r chosen so that
 *  p_1 = 3 and p_2 = p_3 = 0 mod 4 (BF: p = q = 3 mod 4 for the test):
 *  r = 4 s + t with M t = target - b mod 4 (M odd: M^-1 = M mod 4).  */
static int
s_make_share (cs_sk_party_t *self, mpz_t out, const mpz_t b)
{
    const sk_public_t *pub = &self->pub;
    unsigned long target = self->index == 1 ? 3 : 0;
    unsigned long t = ((target + 4 - mpz_fdiv_ui (b, 4)) % 4) * mpz_fdiv_ui (pub->M, 4) % 4;
    mpz_t base, lo, hi, step;
    mpz_inits (base, lo, hi, step, NULL);
    mpz_mul_ui (base, pub->M, t);
    mpz_add (base, base, b);
    mpz_mul_ui (step, pub->M, 4);
    mpz_sub (lo, pub->lo, base);
    mpz_cdiv_q (lo, lo, step);                  /* s >= ceil ((lo - base) / 4M) */
    mpz_add (hi, pub->lo, pub->width);
    mpz_sub_ui (hi, hi, 1);
    mpz_sub (hi, hi, base);
    mpz_fdiv_q (hi, hi, step);                  /* s <= floor ((lo + width - 1 - base) / 4M) */
    mpz_sub (hi, hi, lo);
    mpz_add_ui (hi, hi, 1);
    int rc = sk_random_below (self, out, hi);
    mpz_add (out, out, lo);
    mpz_mul (out, out, step);
    mpz_add (out, out, base);
    sk_wipe_clear (base);
    mpz_clears (lo, hi, step, NULL);
    return rc;
}

/*  The secrets of a candidate for a shares round: sieving draws a_i in
 *  Z_M^* and masks; N turns the sieved b_i into p_i, q_i.  */
static int
s_prepare (cs_sk_party_t *self, unsigned round, sk_cand_t *c)
{
    int rc = 0;
    for (unsigned h = 0; h < 2 && rc == 0; h++) {
        if (round == SK_R_SIEVE_A_SHARES) {
            rc = sk_random_unit (self, c->a [h]);
            if (rc == 0)
                rc = sk_random_below (self, c->R [h], self->pub.mask_a);
        }
        else if (round == SK_R_SIEVE_B_SHARES)
            rc = sk_random_below (self, c->R [h], self->pub.mask_b);
        else {
            if (!self->prm.sieve)
                mpz_set_ui (c->u [h], 0);
            rc = s_make_share (self, c->pq [h], c->u [h]);
        }
    }
    return rc;
}

/*  Shares of one product: f(x) = x + alpha X, g(x) = y + beta X (degree 1),
 *  h(X) = R + gamma1 X + gamma2 X^2 (degree 2, hides the product's
 *  points); the party's own point is kept in the sums, the others' go to
 *  msg [j] in the order f, g, h.  */
static int
s_share_product (cs_sk_party_t *self, unsigned round, sk_bgw_t *b, const mpz_t x,
                 const mpz_t y, const mpz_t R, Cs__Sk__Message *msg [CS_SK_PARTIES + 1])
{
    const mpz_t *P = (const mpz_t *) &self->pub.P;
    mpz_t coef [4], val;
    mpz_inits (coef [0], coef [1], coef [2], coef [3], val, NULL);
    int rc = 0;
    for (unsigned i = 0; i < 4 && rc == 0; i++)
        rc = sk_random_below (self, coef [i], *P);
    bool hx = s_has_x (round, self->index), hy = s_has_y (round, self->index);
    for (unsigned j = 1; j <= CS_SK_PARTIES && rc == 0; j++) {
        bool own = j == self->index;
        if (hx) {
            mpz_mul_ui (val, coef [0], j);
            mpz_add (val, val, x);
            mpz_mod (val, val, *P);
            rc = own ? (mpz_set (b->F, val), 0) : sk_msg_add (msg [j], val);
        }
        if (hy && rc == 0) {
            mpz_mul_ui (val, coef [1], j);
            mpz_add (val, val, y);
            mpz_mod (val, val, *P);
            rc = own ? (mpz_set (b->G, val), 0) : sk_msg_add (msg [j], val);
        }
        if (rc == 0) {
            mpz_mul_ui (val, coef [3], j);
            mpz_add (val, val, coef [2]);
            mpz_mul_ui (val, val, j);
            mpz_add (val, val, R);
            mpz_mod (val, val, *P);
            rc = own ? (mpz_set (b->H, val), 0) : sk_msg_add (msg [j], val);
        }
    }
    for (unsigned i = 0; i < 4; i++)
        sk_wipe_clear (coef [i]);
    sk_wipe_clear (val);
    return rc;
}

static int
s_build_shares (cs_sk_party_t *self, unsigned round, Cs__Sk__Message *msg [CS_SK_PARTIES + 1])
{
    unsigned products = s_products (self, round);
    unsigned per = s_has_x (round, self->index) + s_has_y (round, self->index) + 1;
    int rc = 0;
    for (unsigned j = 1; j <= CS_SK_PARTIES && rc == 0; j++)
        if (j != self->index)
            rc = sk_msg_values (msg [j], products * per);
    for (unsigned c = 0; c < self->prm.batch && rc == 0; c++)
        rc = s_prepare (self, round, &self->cand [c]);
    mpz_t zero;
    mpz_init (zero);
    for (unsigned k = 0; k < products && rc == 0; k++) {
        sk_bgw_t *b = s_bgw (self, round, k);
        sk_cand_t *c = &self->cand [round >= SK_R_N_SHARES ? k : k / 2];
        unsigned h = round >= SK_R_N_SHARES ? 0 : k % 2;
        mpz_set_ui (b->F, 0);
        mpz_set_ui (b->G, 0);
        if (round == SK_R_SIEVE_A_SHARES)
            rc = s_share_product (self, round, b, c->a [h], c->a [h], c->R [h], msg);
        else if (round == SK_R_SIEVE_B_SHARES)
            rc = s_share_product (self, round, b, c->u [h], c->a [h], c->R [h], msg);
        else
            rc = s_share_product (self, round, b, c->pq [0], c->pq [1], zero, msg);
    }
    mpz_clear (zero);
    return rc;
}

/*  Sums the peers' shares into F, G, H; then F*G+H is this party's point
 *  of the product polynomial (degree 2).  */
static void
s_absorb_shares (cs_sk_party_t *self, unsigned round)
{
    unsigned products = s_products (self, round);
    mpz_t v;
    mpz_init (v);
    for (unsigned j = 1; j <= CS_SK_PARTIES; j++) {
        if (j == self->index)
            continue;
        const Cs__Sk__Message *m = self->inbox [j];
        size_t i = 0;
        for (unsigned k = 0; k < products; k++) {
            sk_bgw_t *b = s_bgw (self, round, k);
            if (s_has_x (round, j)) {
                sk_get (v, &m->values [i++], self->pub.P);
                mpz_add (b->F, b->F, v);
            }
            if (s_has_y (round, j)) {
                sk_get (v, &m->values [i++], self->pub.P);
                mpz_add (b->G, b->G, v);
            }
            sk_get (v, &m->values [i++], self->pub.P);
            mpz_add (b->H, b->H, v);
        }
    }
    for (unsigned k = 0; k < products; k++) {
        sk_bgw_t *b = s_bgw (self, round, k);
        mpz_mul (b->X [self->index - 1], b->F, b->G);
        mpz_add (b->X [self->index - 1], b->X [self->index - 1], b->H);
        mpz_mod (b->X [self->index - 1], b->X [self->index - 1], self->pub.P);
        sk_wipe (b->F);
        sk_wipe (b->G);
        sk_wipe (b->H);
    }
    sk_wipe_clear (v);
}

static int
s_build_reveal (cs_sk_party_t *self, unsigned round, Cs__Sk__Message *msg [CS_SK_PARTIES + 1])
{
    unsigned products = s_products (self, round);
    int rc = 0;
    for (unsigned j = 1; j <= CS_SK_PARTIES && rc == 0; j++) {
        if (j == self->index)
            continue;
        rc = sk_msg_values (msg [j], products);
        for (unsigned k = 0; k < products && rc == 0; k++)
            rc = sk_msg_add (msg [j], s_bgw (self, round, k)->X [self->index - 1]);
        if (rc == 0 && round == SK_R_N_REVEAL) {
            msg [j]->seed.data = malloc (SK_SEED_LEN);
            if (!msg [j]->seed.data)
                return CS_SK_ENOMEM;
            msg [j]->seed.len = SK_SEED_LEN;
            memcpy (msg [j]->seed.data, self->seed [self->index], SK_SEED_LEN);
        }
    }
    return rc;
}

/*  The product X = 3 X1 - 3 X2 + X3 mod P (Lagrange at 0 from the points
 *  1, 2, 3); then the sieving shares u_i = X - R (party 1), -R (others)
 *  mod M add up to the product mod M, or N is revealed.  */
static int
s_absorb_reveal (cs_sk_party_t *self, unsigned round)
{
    unsigned products = s_products (self, round);
    mpz_t X;
    mpz_init (X);
    int rc = 0;
    for (unsigned k = 0; k < products; k++) {
        sk_bgw_t *b = s_bgw (self, round, k);
        for (unsigned j = 1; j <= CS_SK_PARTIES; j++)
            if (j != self->index)
                sk_get (b->X [j - 1], &self->inbox [j]->values [k], self->pub.P);
        mpz_mul_ui (X, b->X [0], 3);
        mpz_submul_ui (X, b->X [1], 3);
        mpz_add (X, X, b->X [2]);
        mpz_mod (X, X, self->pub.P);
        sk_cand_t *c = &self->cand [round == SK_R_N_REVEAL ? k : k / 2];
        unsigned h = round == SK_R_N_REVEAL ? 0 : k % 2;
        if (round == SK_R_N_REVEAL) {
            mpz_set (c->N, X);
            if (mpz_sizeinbase (X, 2) != self->prm.bits)
                rc = CS_SK_EPROTO;          /* p_i, q_i were out of their ranges */
        }
        else {
            if (self->index == 1)
                mpz_sub (c->u [h], X, c->R [h]);
            else
                mpz_neg (c->u [h], c->R [h]);
            mpz_mod (c->u [h], c->u [h], self->pub.M);
            sk_wipe (c->R [h]);
        }
    }
    if (round == SK_R_N_REVEAL) {
        for (unsigned j = 1; j <= CS_SK_PARTIES; j++)
            if (j != self->index)
                memcpy (self->seed [j], self->inbox [j]->seed.data, SK_SEED_LEN);
        self->stats.candidates += self->prm.batch;
    }
    if (round == SK_R_SIEVE_B_REVEAL)
        for (unsigned c = 0; c < self->prm.batch; c++) {
            sk_wipe (self->cand [c].a [0]);
            sk_wipe (self->cand [c].a [1]);
        }
    sk_wipe_clear (X);
    return rc;
}

/* ---- trial division (MWB "parallel trial division") ------------------- */

/*  1 when no prime of this party's part of (B, td_bound] divides N: with
 *  parallel_td party i takes every third prime from the (i-1)th, else all.
 *  One long division per run of primes whose product fits a word.  */
unsigned char
sk_trial_divide (const cs_sk_party_t *self, const mpz_t N)
{
    size_t step = self->prm.parallel_td ? CS_SK_PARTIES : 1;
    size_t i = self->prm.parallel_td ? self->index - 1 : 0;
    const unsigned *pr = self->pub.td_primes;
    while (i < self->pub.td_count) {
        unsigned long prod = 1;
        size_t first = i;
        for (; i < self->pub.td_count && prod <= ULONG_MAX / pr [i]; i += step)
            prod *= pr [i];
        unsigned long r = mpz_fdiv_ui (N, prod);
        for (size_t k = first; k < i; k += step)
            if (r % pr [k] == 0)
                return 0;
    }
    return 1;
}

static int
s_build_trial (cs_sk_party_t *self, Cs__Sk__Message *msg [CS_SK_PARTIES + 1])
{
    for (unsigned c = 0; c < self->prm.batch; c++)
        self->cand [c].td_ok = sk_trial_divide (self, self->cand [c].N);
    for (unsigned j = 1; j <= CS_SK_PARTIES; j++) {
        if (j == self->index)
            continue;
        if (sk_msg_flags (msg [j], self->prm.batch))
            return CS_SK_ENOMEM;
        for (unsigned c = 0; c < self->prm.batch; c++)
            msg [j]->flags.data [c] = self->cand [c].td_ok;
    }
    return 0;
}

static void
s_absorb_trial (cs_sk_party_t *self)
{
    for (unsigned j = 1; j <= CS_SK_PARTIES; j++)
        if (j != self->index)
            for (unsigned c = 0; c < self->prm.batch; c++)
                self->cand [c].td_ok &= self->inbox [j]->flags.data [c];
}

/* ---- dispatch ----------------------------------------------------------- */

int
sk_round_build (cs_sk_party_t *self, Cs__Sk__Message *msg [CS_SK_PARTIES + 1])
{
    switch (self->round) {
    case SK_R_SIEVE_A_SHARES: case SK_R_SIEVE_B_SHARES: case SK_R_N_SHARES:
        return s_build_shares (self, self->round, msg);
    case SK_R_SIEVE_A_REVEAL: case SK_R_SIEVE_B_REVEAL: case SK_R_N_REVEAL:
        if (self->round == SK_R_N_REVEAL
            && self->rand (self->rand_ctx, self->seed [self->index], SK_SEED_LEN))
            return CS_SK_ERAND;
        return s_build_reveal (self, self->round, msg);
    case SK_R_TRIAL_DIVISION:
        return s_build_trial (self, msg);
    default:
        return sk_test_build (self, msg);
    }
}

int
sk_round_check (const cs_sk_party_t *self, const Cs__Sk__Message *msg)
{
    unsigned round = self->round, from = msg->sender;
    unsigned products = s_products (self, round);
    switch (round) {
    case SK_R_SIEVE_A_SHARES: case SK_R_SIEVE_B_SHARES: case SK_R_N_SHARES:
        return msg->seed.len ? -1
            : sk_msg_check_values (msg, products * (s_has_x (round, from) + s_has_y (round, from) + 1),
                                   self->pub.P);
    case SK_R_SIEVE_A_REVEAL: case SK_R_SIEVE_B_REVEAL:
        return msg->seed.len ? -1 : sk_msg_check_values (msg, products, self->pub.P);
    case SK_R_N_REVEAL:
        return msg->seed.len != SK_SEED_LEN ? -1 : sk_msg_check_values (msg, products, self->pub.P);
    case SK_R_TRIAL_DIVISION:
        return msg->seed.len ? -1 : sk_msg_check_flags (msg, self->prm.batch);
    default:
        return msg->seed.len ? -1 : sk_test_check (self, msg);
    }
}

int
sk_round_absorb (cs_sk_party_t *self)
{
    switch (self->round) {
    case SK_R_SIEVE_A_SHARES: case SK_R_SIEVE_B_SHARES: case SK_R_N_SHARES:
        s_absorb_shares (self, self->round);
        return 0;
    case SK_R_SIEVE_A_REVEAL: case SK_R_SIEVE_B_REVEAL: case SK_R_N_REVEAL:
        return s_absorb_reveal (self, self->round);
    case SK_R_TRIAL_DIVISION:
        s_absorb_trial (self);
        return 0;
    default:
        return sk_test_absorb (self);
    }
}

unsigned
sk_round_first (const cs_sk_party_t *self)
{
    return self->prm.sieve ? SK_R_SIEVE_A_SHARES : SK_R_N_SHARES;
}

unsigned
sk_round_next (const cs_sk_party_t *self)
{
    if (self->round < SK_R_TRIAL_DIVISION)
        return self->round + 1;
    if (self->round == SK_R_TRIAL_DIVISION) {
        for (unsigned c = 0; c < self->prm.batch; c++)
            if (self->cand [c].td_ok)
                return SK_R_BIPRIME_FIRST;
        return 0;
    }
    return sk_test_next (self);
}
