/*  sk_int.h — the inside of a shared-key party (cs_sharedkeys.h): its state,
 *  the number helpers and the rounds.  Not installed; the test-only harness
 *  (sk_testing.c) reads it too.
 */
#ifndef SK_INT_H_INCLUDED
#define SK_INT_H_INCLUDED

#include <gmp.h>
#include "cs_sharedkeys.h"
#include "sharedkeys/sharedkeys.pb-c.h"

#define SK_MAX_BATCH 64
#define SK_MASK_BITS 80         /* statistical hiding of the sieving masks: 2^-80 */
#define SK_SEED_LEN 32
#define SK_PARAMS_ID_LEN 8

/*  Rounds: the message types of sharedkeys.proto.  */
enum {
    SK_R_SIEVE_A_SHARES = CS__SK__TYPE__SIEVE_A_SHARES,
    SK_R_SIEVE_A_REVEAL = CS__SK__TYPE__SIEVE_A_REVEAL,
    SK_R_SIEVE_B_SHARES = CS__SK__TYPE__SIEVE_B_SHARES,
    SK_R_SIEVE_B_REVEAL = CS__SK__TYPE__SIEVE_B_REVEAL,
    SK_R_N_SHARES = CS__SK__TYPE__N_SHARES,
    SK_R_N_REVEAL = CS__SK__TYPE__N_REVEAL,
    SK_R_TRIAL_DIVISION = CS__SK__TYPE__TRIAL_DIVISION,
    SK_R_BIPRIME_FIRST = CS__SK__TYPE__BIPRIME_FIRST,
    SK_R_BIPRIME_FIRST_VERDICT = CS__SK__TYPE__BIPRIME_FIRST_VERDICT,
    SK_R_BIPRIME_REST = CS__SK__TYPE__BIPRIME_REST,
    SK_R_BIPRIME_REST_VERDICT = CS__SK__TYPE__BIPRIME_REST_VERDICT,
    SK_R_PHI_MOD_E = CS__SK__TYPE__PHI_MOD_E,
    SK_R_TRIAL_SIGNATURE = CS__SK__TYPE__TRIAL_SIGNATURE,
    SK_R_DONE = 100
};

/*  Public numbers of a session, the same at every party.  */
typedef struct {
    mpz_t P;                /* the prime field of the BGW products: P > 2^(bits+2) */
    mpz_t M;                /* product of the odd primes 3..sieve_bound (1 without sieving) */
    mpz_t mask_a, mask_b;   /* upper bounds of the sieving masks R */
    mpz_t lo, width;        /* p_i, q_i in [lo, lo + width) */
    unsigned sieve_bound;   /* largest prime of M (2 without sieving) */
    unsigned *td_primes;    /* primes in (sieve_bound, td_bound] */
    size_t td_count;
} sk_public_t;

/*  One BGW product over GF(P) (BF "computing N"; Ben-Or, Goldwasser and
 *  Wigderson): sums of the shares received at this party's point.  */
typedef struct {
    mpz_t F, G, H;          /* sum f_j(i), sum g_j(i), sum h_j(i) */
    mpz_t X [CS_SK_PARTIES];/* the revealed points F*G+H of the parties */
} sk_bgw_t;

/*  A candidate of the batch.  Index 0 is p, 1 is q where two.  */
typedef struct {
    mpz_t a [2];            /* sieving: multiplicative share, in Z_M^* */
    mpz_t R [2];            /* sieving: this round's mask */
    mpz_t u [2];            /* sieving: additive share mod M of a1*a2, then of a1*a2*a3 */
    mpz_t pq [2];           /* p_i, q_i */
    mpz_t N;                /* public once revealed */
    sk_bgw_t bgw [2];
    mpz_t *vt;              /* biprimality: g_t^(e_j) of party j at [t * 3 + j - 1] */
    unsigned char td_ok;    /* survived trial division at every party */
    unsigned char first_ok; /* and the first biprimality test */
    unsigned char rest_ok;  /* and the other tests */
    unsigned long phi_mod_e;
} sk_cand_t;

struct cs_sk_party_t {
    unsigned index;         /* 1..3 */
    unsigned char session [CS_SK_SESSION_LEN];
    cs_sk_params_t prm;
    unsigned char params_id [SK_PARAMS_ID_LEN];  /* SHA-256 of prm, truncated */
    cs_sk_rand_fn rand;
    void *rand_ctx;
    sk_public_t pub;
    int error;              /* the error that failed the party */
    bool started, done;
    unsigned batch, round;
    uint64_t seq_out [CS_SK_PARTIES + 1], seq_in [CS_SK_PARTIES + 1];
    Cs__Sk__Message *inbox [CS_SK_PARTIES + 1];  /* this round's message of each peer */
    Cs__Sk__Message *ahead [CS_SK_PARTIES + 1];  /* the next round's, arrived early */
    sk_cand_t cand [SK_MAX_BATCH];
    unsigned char seed [CS_SK_PARTIES + 1][SK_SEED_LEN];
    unsigned chosen;        /* the candidate that became the key */
    mpz_t N;                /* the key's modulus once done */
    mpz_t d;                /* this party's d_i once done */
    cs_sk_stats_t stats;
};

struct cs_sk_share_t {
    unsigned party;         /* 1..3 */
    mpz_t n;
    unsigned long e;
    mpz_t d;                /* d_i, negative for parties 2 and 3 */
};

/*  A share of (N, e, d) for party (sk_share.c): NULL when out of memory.  */
cs_sk_share_t *sk_share_new (unsigned party, const mpz_t n, unsigned long e, const mpz_t d);

/* ---- sk_num.c: numbers ------------------------------------------------- */
void sk_wipe (mpz_t z);                           /* overwrite the limbs, value 0 */
void sk_wipe_clear (mpz_t z);                     /* overwrite the limbs and clear */
int sk_random_below (cs_sk_party_t *self, mpz_t r, const mpz_t bound);   /* 0 / CS_SK_ERAND */
int sk_random_unit (cs_sk_party_t *self, mpz_t r);                         /* uniform in Z_M^* */
int sk_public_init (sk_public_t *pub, const cs_sk_params_t *prm);
void sk_public_clear (sk_public_t *pub);
/*  big-endian bytes of z >= 0 (malloc'ed) into a protobuf bytes field  */
int sk_put (ProtobufCBinaryData *b, const mpz_t z);
/*  a value of a message: 0 when it decodes to [0, bound), else -1  */
int sk_get (mpz_t z, const ProtobufCBinaryData *b, const mpz_t bound);
/*  the bases g of the biprimality tests: from the three seeds, (g/N) = 1  */
int sk_test_base (const cs_sk_party_t *self, mpz_t g, const mpz_t N, unsigned cand, unsigned test);
/*  the trial-signature message m in [2, N)  */
int sk_trial_message (const cs_sk_party_t *self, mpz_t m, const mpz_t N);
/*  r = m^d mod N for a secret d of either sign (constant-time powm)  */
int sk_powm_signed (mpz_t r, const mpz_t m, const mpz_t d, const mpz_t N);

/* ---- sk_cand.c: candidates ---------------------------------------------- */
void sk_cand_init (sk_cand_t *c, unsigned tests);
void sk_cand_wipe (sk_cand_t *c, unsigned tests);   /* wipes secrets, keeps initialised */
void sk_cand_clear (sk_cand_t *c, unsigned tests);

/* ---- sk_rounds.c, sk_rounds_test.c: the rounds ---------------------------- */
/*  Fills msg [j] (j != self->index) with the party's values of `round`.
 *  Returns 0, CS_SK_ERAND, CS_SK_ENOMEM.  */
int sk_round_build (cs_sk_party_t *self, Cs__Sk__Message *msg [CS_SK_PARTIES + 1]);
/*  0 when the values of msg (from its sender) fit the current round, else -1.  */
int sk_round_check (const cs_sk_party_t *self, const Cs__Sk__Message *msg);
/*  Absorbs the inbox of the current round (checked).  Returns 0 or an error.  */
int sk_round_absorb (cs_sk_party_t *self);
/*  The round after the current one, from public state: a round type, or
 *  0 for "next batch", or SK_R_DONE.  */
unsigned sk_round_next (const cs_sk_party_t *self);
/*  The first round of a batch.  */
unsigned sk_round_first (const cs_sk_party_t *self);

/*  1 when no prime of this party's part of (B, td_bound] divides N.  */
unsigned char sk_trial_divide (const cs_sk_party_t *self, const mpz_t N);

/*  For sk_rounds_test.c (the biprimality test, d).  */
int sk_test_build (cs_sk_party_t *self, Cs__Sk__Message *msg [CS_SK_PARTIES + 1]);
int sk_test_check (const cs_sk_party_t *self, const Cs__Sk__Message *msg);
int sk_test_absorb (cs_sk_party_t *self);
unsigned sk_test_next (const cs_sk_party_t *self);
int sk_msg_values (Cs__Sk__Message *msg, size_t count);        /* room for count values */
int sk_msg_add (Cs__Sk__Message *msg, const mpz_t z);
int sk_msg_flags (Cs__Sk__Message *msg, size_t count);         /* count zero flags */
/*  0 when msg has count values, each < bound (for value i: bound (i)).  */
int sk_msg_check_values (const Cs__Sk__Message *msg, size_t count, const mpz_t bound);
int sk_msg_check_flags (const Cs__Sk__Message *msg, size_t count);

#endif
