/*  test_sharedkeys.h — the test-only harness of the shared-key tests
 *  (test_sharedkeys_harness.c): fixed randomness per party, and an
 *  in-process run that reveals each party's p_i, q_i so that a test can
 *  check p and q are prime and N = pq (production code never combines them).
 */
#ifndef TEST_SHAREDKEYS_H_INCLUDED
#define TEST_SHAREDKEYS_H_INCLUDED

#include <gmp.h>
#include "sk_int.h"

/*  A fixed random source: SHA-256 in counter mode over a label.  */
typedef struct {
    unsigned char key [32];
    uint64_t ctr;
} th_rand_t;

void th_rand_init (th_rand_t *r, const char *label, unsigned party);
int th_rand (void *ctx, unsigned char *buf, size_t len);

/*  What a harnessed run reveals.  */
typedef struct {
    mpz_t p [CS_SK_PARTIES], q [CS_SK_PARTIES];   /* each party's p_i, q_i of the key */
    mpz_t N;
    bool seen [CS_SK_PARTIES];
} th_reveal_t;

void th_reveal_init (th_reveal_t *rv);
void th_reveal_clear (th_reveal_t *rv);

/*  Runs a generation with the three parties in-process and fixed
 *  randomness from `label` (NULL: the DRBG); fills shares and, if rv, the
 *  revealed p_i, q_i.  Returns 0 or the first party error.  */
int th_run (const cs_sk_params_t *prm, const char *label, cs_sk_share_t *shares [CS_SK_PARTIES],
            th_reveal_t *rv);

/*  Called after every message a party took (and after the start), with
 *  the party; it may read the party's state (sk_int.h), never change it.  */
typedef void (*th_observer_fn) (cs_sk_party_t *party, void *ctx);

/*  th_run with an observer instead of a reveal.  */
int th_run_observed (const cs_sk_params_t *prm, const char *label, cs_sk_share_t *shares [CS_SK_PARTIES],
                     th_observer_fn observe, void *ctx);

/*  A started party set for message tests: parties [i] with their first
 *  messages in out [i].  */
void th_start (const cs_sk_params_t *prm, const char *label, cs_sk_party_t *parties [CS_SK_PARTIES],
               th_rand_t rnd [CS_SK_PARTIES], cs_sk_outbox_t out [CS_SK_PARTIES]);

#endif
