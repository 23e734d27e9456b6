/*  sk_rounds_test.c — the rounds after trial division (sk_int.h): the
 *  Boneh–Franklin biprimality test with MWB's load balancing, and the
 *  private-key shares for a small e with the trial signature that fixes
 *  their rounding.  docs/SHARED-KEYS.md, "Messages".
 */
#include <limits.h>
#include <stdlib.h>
#include "sk_int.h"

/*  The party whose turn it is to make the heavy check of test t of
 *  candidate c: rotating (MWB "load balancing"), or always party 1.  */
static unsigned
s_checker (const cs_sk_party_t *self, unsigned c, unsigned t)
{
    return self->prm.load_balance ? (c + t) % CS_SK_PARTIES + 1 : 1;
}

/*  The candidates alive going into the current round.  */
static bool
s_alive (const cs_sk_party_t *self, unsigned c)
{
    const sk_cand_t *k = &self->cand [c];
    switch (self->round) {
    case SK_R_BIPRIME_FIRST: case SK_R_BIPRIME_FIRST_VERDICT:
        return k->td_ok;
    case SK_R_BIPRIME_REST: case SK_R_BIPRIME_REST_VERDICT:
        return k->first_ok;
    case SK_R_PHI_MOD_E:
        return self->prm.tests > 1 ? k->rest_ok : k->first_ok;
    default:
        return c == self->chosen;
    }
}

static unsigned
s_count (const cs_sk_party_t *self)
{
    unsigned n = 0;
    for (unsigned c = 0; c < self->prm.batch; c++)
        n += s_alive (self, c);
    return n;
}

/*  The tests of the round: test 0, or tests 1..tests-1.  */
static void
s_tests (const cs_sk_party_t *self, unsigned *first, unsigned *end)
{
    bool rest = self->round == SK_R_BIPRIME_REST || self->round == SK_R_BIPRIME_REST_VERDICT;
    *first = rest ? 1 : 0;
    *end = rest ? self->prm.tests : 1;
}

/*  BF "biprimality test", split so that the secret exponents are short:
 *  phi/4 = (N-1)/4 - e_1 - e_2 - e_3 with e_1 = (p_1 + q_1 - 2)/4 and
 *  e_j = (p_j + q_j)/4 (integers as p_1 = q_1 = 3, p_j = q_j = 0 mod 4).
 *  Each party reveals g^(e_j); g^(phi/4) = +-1 iff g^((N-1)/4) = +-prod.  */
static int
s_power (cs_sk_party_t *self, sk_cand_t *k, unsigned c, unsigned t)
{
    mpz_t g, x;
    mpz_inits (g, x, NULL);
    int rc = sk_test_base (self, g, k->N, c, t);
    mpz_add (x, k->pq [0], k->pq [1]);
    if (self->index == 1)
        mpz_sub_ui (x, x, 2);
    mpz_fdiv_q_2exp (x, x, 2);
    if (rc == 0)
        rc = sk_powm_signed (k->vt [t * CS_SK_PARTIES + self->index - 1], g, x, k->N);
    sk_wipe_clear (x);
    mpz_clear (g);
    return rc;
}

/*  The heavy half: g^((N-1)/4) against +-(v_1 v_2 v_3) mod N.  */
static unsigned char
s_check (const cs_sk_party_t *self, const sk_cand_t *k, unsigned c, unsigned t)
{
    mpz_t g, x, w;
    mpz_inits (g, x, w, NULL);
    unsigned char ok = 0;
    if (sk_test_base (self, g, k->N, c, t) == 0) {
        mpz_sub_ui (x, k->N, 1);
        mpz_fdiv_q_2exp (x, x, 2);
        mpz_powm (x, g, x, k->N);
        mpz_mul (w, k->vt [t * CS_SK_PARTIES], k->vt [t * CS_SK_PARTIES + 1]);
        mpz_mod (w, w, k->N);
        mpz_mul (w, w, k->vt [t * CS_SK_PARTIES + 2]);
        mpz_mod (w, w, k->N);
        if (mpz_cmp (x, w) == 0)
            ok = 1;
        mpz_add (w, w, x);
        if (mpz_cmp (w, k->N) == 0)
            ok = 1;
    }
    mpz_clears (g, x, w, NULL);
    return ok;
}

static int
s_build_powers (cs_sk_party_t *self, Cs__Sk__Message *msg [CS_SK_PARTIES + 1])
{
    unsigned first, end, n = s_count (self);
    s_tests (self, &first, &end);
    if (self->round == SK_R_BIPRIME_FIRST)
        self->stats.biprime_tests += n;
    int rc = 0;
    for (unsigned j = 1; j <= CS_SK_PARTIES && rc == 0; j++)
        if (j != self->index)
            rc = sk_msg_values (msg [j], (size_t) n * (end - first));
    for (unsigned c = 0; c < self->prm.batch && rc == 0; c++) {
        if (!s_alive (self, c))
            continue;
        sk_cand_t *k = &self->cand [c];
        for (unsigned t = first; t < end && rc == 0; t++) {
            rc = s_power (self, k, c, t);
            for (unsigned j = 1; j <= CS_SK_PARTIES && rc == 0; j++)
                if (j != self->index)
                    rc = sk_msg_add (msg [j], k->vt [t * CS_SK_PARTIES + self->index - 1]);
        }
    }
    return rc;
}

static int
s_build_verdicts (cs_sk_party_t *self, Cs__Sk__Message *msg [CS_SK_PARTIES + 1])
{
    unsigned first, end, n = s_count (self);
    s_tests (self, &first, &end);
    unsigned char *flags = calloc ((size_t) n * (end - first) + 1, 1);
    if (!flags)
        return CS_SK_ENOMEM;
    size_t i = 0;
    for (unsigned c = 0; c < self->prm.batch; c++) {
        if (!s_alive (self, c))
            continue;
        sk_cand_t *k = &self->cand [c];
        unsigned char *ok = first == 0 ? &k->first_ok : &k->rest_ok;
        *ok = 1;
        for (unsigned t = first; t < end; t++, i++) {
            flags [i] = 1;
            if (s_checker (self, c, t) == self->index) {
                flags [i] = s_check (self, k, c, t);
                *ok &= flags [i];
            }
        }
    }
    int rc = 0;
    for (unsigned j = 1; j <= CS_SK_PARTIES && rc == 0; j++)
        if (j != self->index && (rc = sk_msg_flags (msg [j], i)) == 0)
            for (size_t f = 0; f < i; f++)
                msg [j]->flags.data [f] = flags [f];
    free (flags);
    return rc;
}

/*  phi_1 = N + 1 - p_1 - q_1, phi_j = -(p_j + q_j): shares of phi (BF
 *  "private key, small e").  */
static void
s_phi (const cs_sk_party_t *self, const sk_cand_t *k, mpz_t phi)
{
    mpz_add (phi, k->pq [0], k->pq [1]);
    mpz_neg (phi, phi);
    if (self->index == 1) {
        mpz_add (phi, phi, k->N);
        mpz_add_ui (phi, phi, 1);
    }
}

static int
s_build_phi (cs_sk_party_t *self, Cs__Sk__Message *msg [CS_SK_PARTIES + 1])
{
    unsigned n = s_count (self);
    int rc = 0;
    for (unsigned j = 1; j <= CS_SK_PARTIES && rc == 0; j++)
        if (j != self->index)
            rc = sk_msg_values (msg [j], n);
    mpz_t phi;
    mpz_init (phi);
    for (unsigned c = 0; c < self->prm.batch && rc == 0; c++) {
        if (!s_alive (self, c))
            continue;
        s_phi (self, &self->cand [c], phi);
        self->cand [c].phi_mod_e = mpz_fdiv_ui (phi, self->prm.e);
        mpz_set_ui (phi, self->cand [c].phi_mod_e);
        for (unsigned j = 1; j <= CS_SK_PARTIES && rc == 0; j++)
            if (j != self->index)
                rc = sk_msg_add (msg [j], phi);
    }
    sk_wipe_clear (phi);
    return rc;
}

/*  BF "private key, small e": zeta = -phi^-1 mod e, d = (1 + zeta phi)/e;
 *  d_1 = floor ((1 + zeta phi_1)/e), d_j = floor (zeta phi_j / e), so
 *  d = d_1 + d_2 + d_3 + r with r in {0, 1, 2}, fixed by a trial signature.  */
static int
s_build_trial_signature (cs_sk_party_t *self, Cs__Sk__Message *msg [CS_SK_PARTIES + 1])
{
    sk_cand_t *k = &self->cand [self->chosen];
    mpz_t zeta, phi, m, s;
    mpz_inits (zeta, phi, m, s, NULL);
    mpz_set_ui (zeta, k->phi_mod_e);
    mpz_set_ui (m, self->prm.e);
    int rc = mpz_invert (zeta, zeta, m) ? 0 : CS_SK_EPROTO;
    mpz_sub (zeta, m, zeta);
    s_phi (self, k, phi);
    mpz_mul (self->d, phi, zeta);
    if (self->index == 1)
        mpz_add_ui (self->d, self->d, 1);
    mpz_fdiv_q_ui (self->d, self->d, self->prm.e);
    if (rc == 0)
        rc = sk_trial_message (self, m, k->N);
    if (rc == 0)
        rc = sk_powm_signed (k->vt [self->index - 1], m, self->d, k->N);
    for (unsigned j = 1; j <= CS_SK_PARTIES && rc == 0; j++)
        if (j != self->index && (rc = sk_msg_values (msg [j], 1)) == 0)
            rc = sk_msg_add (msg [j], k->vt [self->index - 1]);
    sk_wipe_clear (zeta);
    sk_wipe_clear (phi);
    mpz_clears (m, s, NULL);
    return rc;
}

int
sk_test_build (cs_sk_party_t *self, Cs__Sk__Message *msg [CS_SK_PARTIES + 1])
{
    switch (self->round) {
    case SK_R_BIPRIME_FIRST: case SK_R_BIPRIME_REST:
        return s_build_powers (self, msg);
    case SK_R_BIPRIME_FIRST_VERDICT: case SK_R_BIPRIME_REST_VERDICT:
        return s_build_verdicts (self, msg);
    case SK_R_PHI_MOD_E:
        return s_build_phi (self, msg);
    case SK_R_TRIAL_SIGNATURE:
        return s_build_trial_signature (self, msg);
    default:
        return CS_SK_EPROTO;
    }
}

/*  Values of candidate-dependent bounds: each < N of its candidate.  */
static int
s_check_powers (const cs_sk_party_t *self, const Cs__Sk__Message *msg, unsigned per)
{
    if (msg->n_values != (size_t) s_count (self) * per || msg->flags.len)
        return -1;
    mpz_t z;
    mpz_init (z);
    size_t i = 0;
    int rc = 0;
    for (unsigned c = 0; c < self->prm.batch && rc == 0; c++)
        for (unsigned t = 0; s_alive (self, c) && t < per && rc == 0; t++)
            rc = sk_get (z, &msg->values [i++], self->cand [c].N);
    mpz_clear (z);
    return rc;
}

int
sk_test_check (const cs_sk_party_t *self, const Cs__Sk__Message *msg)
{
    unsigned first, end;
    s_tests (self, &first, &end);
    mpz_t e;
    int rc;
    switch (self->round) {
    case SK_R_BIPRIME_FIRST: case SK_R_BIPRIME_REST: case SK_R_TRIAL_SIGNATURE:
        return s_check_powers (self, msg, self->round == SK_R_TRIAL_SIGNATURE ? 1 : end - first);
    case SK_R_BIPRIME_FIRST_VERDICT: case SK_R_BIPRIME_REST_VERDICT:
        return sk_msg_check_flags (msg, (size_t) s_count (self) * (end - first));
    case SK_R_PHI_MOD_E:
        mpz_init_set_ui (e, self->prm.e);
        rc = sk_msg_check_values (msg, s_count (self), e);
        mpz_clear (e);
        return rc;
    default:
        return -1;
    }
}

static void
s_absorb_powers (cs_sk_party_t *self)
{
    unsigned first, end;
    s_tests (self, &first, &end);
    for (unsigned j = 1; j <= CS_SK_PARTIES; j++) {
        if (j == self->index)
            continue;
        size_t i = 0;
        for (unsigned c = 0; c < self->prm.batch; c++)
            for (unsigned t = first; s_alive (self, c) && t < end; t++)
                sk_get (self->cand [c].vt [t * CS_SK_PARTIES + j - 1],
                        &self->inbox [j]->values [i++], self->cand [c].N);
    }
}

static void
s_absorb_verdicts (cs_sk_party_t *self)
{
    unsigned first, end;
    s_tests (self, &first, &end);
    for (unsigned j = 1; j <= CS_SK_PARTIES; j++) {
        if (j == self->index)
            continue;
        size_t i = 0;
        for (unsigned c = 0; c < self->prm.batch; c++) {
            if (!s_alive (self, c))
                continue;
            sk_cand_t *k = &self->cand [c];
            unsigned char *ok = first == 0 ? &k->first_ok : &k->rest_ok;
            for (unsigned t = first; t < end; t++, i++)
                if (s_checker (self, c, t) == j)
                    *ok &= self->inbox [j]->flags.data [i];
        }
    }
}

static unsigned long
s_gcd (unsigned long a, unsigned long b)
{
    while (b) {
        unsigned long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/*  phi mod e from the three parts; the key is the first candidate with
 *  gcd (phi, e) = 1 (BF: otherwise e has no inverse mod phi).  */
static void
s_absorb_phi (cs_sk_party_t *self)
{
    mpz_t v;
    mpz_init (v);
    for (unsigned j = 1; j <= CS_SK_PARTIES; j++) {
        if (j == self->index)
            continue;
        size_t i = 0;
        for (unsigned c = 0; c < self->prm.batch; c++)
            if (s_alive (self, c)) {
                mpz_set_ui (v, self->prm.e);
                sk_get (v, &self->inbox [j]->values [i++], v);
                self->cand [c].phi_mod_e = (self->cand [c].phi_mod_e + mpz_get_ui (v)) % self->prm.e;
            }
    }
    mpz_clear (v);
    self->chosen = UINT_MAX;
    for (unsigned c = 0; c < self->prm.batch && self->chosen == UINT_MAX; c++)
        if (s_alive (self, c) && s_gcd (self->cand [c].phi_mod_e, self->prm.e) == 1)
            self->chosen = c;
}

/*  S = s_1 s_2 s_3 = m^(d - r): the r in {0, 1, 2} with (S m^r)^e = m;
 *  party 1 adds it to its share, so that d = d_1 + d_2 + d_3.  */
static int
s_absorb_trial_signature (cs_sk_party_t *self)
{
    sk_cand_t *k = &self->cand [self->chosen];
    mpz_t m, S, t;
    mpz_inits (m, S, t, NULL);
    int rc = sk_trial_message (self, m, k->N);
    for (unsigned j = 1; j <= CS_SK_PARTIES; j++)
        if (j != self->index)
            sk_get (k->vt [j - 1], &self->inbox [j]->values [0], k->N);
    mpz_mul (S, k->vt [0], k->vt [1]);
    mpz_mul (S, S, k->vt [2]);
    mpz_mod (S, S, k->N);
    int r = -1;
    for (int i = 0; i < 3 && rc == 0 && r < 0; i++) {
        mpz_powm_ui (t, S, self->prm.e, k->N);
        if (mpz_cmp (t, m) == 0)
            r = i;
        mpz_mul (S, S, m);
        mpz_mod (S, S, k->N);
    }
    if (rc == 0 && r < 0)
        rc = CS_SK_EVERIFY;
    if (rc == 0 && self->index == 1)
        mpz_add_ui (self->d, self->d, (unsigned long) r);
    mpz_clears (m, S, t, NULL);
    return rc;
}

int
sk_test_absorb (cs_sk_party_t *self)
{
    switch (self->round) {
    case SK_R_BIPRIME_FIRST: case SK_R_BIPRIME_REST:
        s_absorb_powers (self);
        return 0;
    case SK_R_BIPRIME_FIRST_VERDICT: case SK_R_BIPRIME_REST_VERDICT:
        s_absorb_verdicts (self);
        return 0;
    case SK_R_PHI_MOD_E:
        s_absorb_phi (self);
        return 0;
    case SK_R_TRIAL_SIGNATURE:
        return s_absorb_trial_signature (self);
    default:
        return CS_SK_EPROTO;
    }
}

unsigned
sk_test_next (const cs_sk_party_t *self)
{
    bool any = false;
    switch (self->round) {
    case SK_R_BIPRIME_FIRST: case SK_R_BIPRIME_REST:
        return self->round + 1;
    case SK_R_BIPRIME_FIRST_VERDICT:
        for (unsigned c = 0; c < self->prm.batch; c++)
            any |= self->cand [c].first_ok;
        return !any ? 0 : self->prm.tests > 1 ? SK_R_BIPRIME_REST : SK_R_PHI_MOD_E;
    case SK_R_BIPRIME_REST_VERDICT:
        for (unsigned c = 0; c < self->prm.batch; c++)
            any |= self->cand [c].rest_ok;
        return any ? SK_R_PHI_MOD_E : 0;
    case SK_R_PHI_MOD_E:
        return self->chosen == UINT_MAX ? 0 : SK_R_TRIAL_SIGNATURE;
    default:
        return SK_R_DONE;
    }
}
