/*  cs_sharedkeys.h — shared RSA keys between three parties, without a
 *  dealer: generation (Boneh and Franklin, "Efficient generation of shared
 *  RSA keys", CRYPTO '97 / J. ACM 2001, with the improvements of Malkin, Wu
 *  and Boneh, "Experimenting with shared generation of RSA keys", NDSS '99)
 *  and signing with the shares d = d1 + d2 + d3.  docs/SHARED-KEYS.md.
 *
 *  Each party is a state machine that consumes and produces encoded
 *  messages (sharedkeys/sharedkeys.proto); how the bytes travel is the
 *  caller's: cs_sk_local_run passes them in-process, a broker will pass them
 *  over CurveZMQ.  Semi-honest model, at most one corrupt party.
 */
#ifndef CS_SHAREDKEYS_H_INCLUDED
#define CS_SHAREDKEYS_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CS_SK_PARTIES 3
#define CS_SK_PROTOCOL_VERSION 1
#define CS_SK_SHARE_VERSION 1
#define CS_SK_SESSION_LEN 16

/*  Errors (all negative; 0 is success).  */
enum {
    CS_SK_OK = 0,
    CS_SK_EINVAL = -1,      /* bad argument from the caller */
    CS_SK_EMALFORMED = -2,  /* a message or record that does not decode or has wrong fields */
    CS_SK_ESESSION = -3,    /* a message of another session, or not for this party */
    CS_SK_EREPLAY = -4,     /* a message whose sequence number was already seen (or skips ahead) */
    CS_SK_EPROTO = -5,      /* a well-formed message the protocol does not allow now: the session fails */
    CS_SK_ESTATE = -6,      /* the party has failed or finished */
    CS_SK_ERAND = -7,       /* the random source failed */
    CS_SK_EVERIFY = -8,     /* a combined signature fails verification with (N, e) */
    CS_SK_ENOMEM = -9,
    CS_SK_ELIMIT = -10      /* no key within the caller's candidate limit */
};

/*  What the session does; every party of a session must use the same.  */
typedef struct {
    unsigned bits;          /* modulus size: 512..4096, multiple of 64 */
    unsigned long e;        /* public exponent: an odd prime, 65537 by default */
    unsigned batch;         /* candidates carried together through the rounds (1..64) */
    unsigned tests;         /* biprimality tests a key must pass (error <= 2^-tests) */
    unsigned td_bound;      /* trial division of N up to this prime */
    unsigned max_batches;   /* give up (CS_SK_ELIMIT) after this many batches; 0: no limit */
    bool sieve;             /* distributed sieving (MWB: x10) */
    bool parallel_td;       /* each party divides by a third of the primes (MWB) */
    bool load_balance;      /* the heavy check of each test rotates among parties (MWB) */
} cs_sk_params_t;

/*  Fills params with the defaults for a modulus of `bits` bits:
 *  e = 65537, batch 8, 40 tests, trial division to 2^17, every optimisation on.  */
void cs_sk_params_default (cs_sk_params_t *params, unsigned bits);

/*  A random source: fills len bytes; returns 0, or -1 when it cannot.
 *  The default is OpenSSL's private DRBG (RAND_priv_bytes); tests give a
 *  fixed one.  */
typedef int (*cs_sk_rand_fn) (void *ctx, unsigned char *buf, size_t len);

/*  One encoded message for another party; data is malloc'ed.  */
typedef struct {
    unsigned receiver;      /* 1..3 */
    unsigned char *data;
    size_t len;
} cs_sk_wire_t;

/*  Messages a party produced: the caller sends them in order, then calls
 *  cs_sk_outbox_clear.  Zero-initialise before first use.  */
typedef struct {
    cs_sk_wire_t *msg;
    size_t count, cap;
} cs_sk_outbox_t;

/*  Overwrites and frees every message of out (they carry shares) and
 *  empties it; out itself stays usable.  */
void cs_sk_outbox_clear (cs_sk_outbox_t *out);

/*  What a party counted (docs/SHARED-KEYS.md, "Figures").  */
typedef struct {
    uint64_t candidates;    /* candidate N computed ("iterations" in MWB's table) */
    uint64_t biprime_tests; /* candidates that reached the biprimality test ("primality tests") */
    uint64_t bytes_sent;    /* encoded bytes this party sent */
    uint64_t messages_sent;
    uint64_t rounds;
    unsigned batches;
} cs_sk_stats_t;

typedef struct cs_sk_party_t cs_sk_party_t;

/*  A new party `index` (1..3) of the session `session` (CS_SK_SESSION_LEN
 *  random bytes the three parties agreed on, e.g. chosen by the one that
 *  asks for the key), or NULL on bad arguments or out of memory.  rand NULL
 *  means OpenSSL's private DRBG.  Destroy with cs_sk_party_destroy.  */
cs_sk_party_t *cs_sk_party_new (unsigned index, const unsigned char *session,
                                const cs_sk_params_t *params, cs_sk_rand_fn rand, void *rand_ctx);

/*  Wipes every secret of the party and frees it; NULL-safe; nulls *self_p.  */
void cs_sk_party_destroy (cs_sk_party_t **self_p);

/*  Starts the session: appends the party's first messages to out.
 *  Returns 0, CS_SK_ESTATE if already started, CS_SK_ERAND, CS_SK_ENOMEM.  */
int cs_sk_party_start (cs_sk_party_t *self, cs_sk_outbox_t *out);

/*  Consumes one encoded message from another party and appends what the
 *  party sends in answer (zero or more messages) to out.  `from` is the
 *  peer (1..3) the transport authenticated the bytes as coming from (its
 *  pinned CURVE key), or 0 when the transport is trusted (in-process): a
 *  message whose sender field is not `from` is refused.  Returns 0; or,
 *  leaving the party as it was, CS_SK_EMALFORMED (does not decode, wrong
 *  version, sender, value count or range), CS_SK_ESESSION (other session,
 *  parameters or receiver, or not from `from`), CS_SK_EREPLAY (not the next sequence
 *  number of its link: a replay or a gap), CS_SK_EPROTO (a second message
 *  for the round, or a round the party is neither in nor next to); or,
 *  failing the party for good (cs_sk_party_error), CS_SK_EPROTO (a message
 *  held one round early that does not fit its round, a modulus of the
 *  wrong size), CS_SK_EVERIFY (the trial signature fails), CS_SK_ERAND,
 *  CS_SK_ENOMEM, CS_SK_ELIMIT; CS_SK_ESTATE when the party is not started,
 *  has failed or has finished.  docs/SHARED-KEYS.md, "Messages".  */
int cs_sk_party_receive (cs_sk_party_t *self, unsigned from, const unsigned char *data, size_t len,
                         cs_sk_outbox_t *out);

/*  True once the party holds its share of a key.  */
bool cs_sk_party_done (const cs_sk_party_t *self);

/*  The error that failed the party, or 0.  */
int cs_sk_party_error (const cs_sk_party_t *self);

/*  The party's counters so far.  */
void cs_sk_party_stats (const cs_sk_party_t *self, cs_sk_stats_t *stats);

/*  A party's share of a key: public (N, e) and its secret d_i.  */
typedef struct cs_sk_share_t cs_sk_share_t;

/*  The party's share once done (caller destroys it), or NULL.  */
cs_sk_share_t *cs_sk_party_share (const cs_sk_party_t *self);

/*  Wipes d_i and frees the share; NULL-safe; nulls *self_p.  */
void cs_sk_share_destroy (cs_sk_share_t **self_p);

/*  1..3, the party that holds this share.  */
unsigned cs_sk_share_party (const cs_sk_share_t *self);

/*  The public key: N big-endian into n (n_cap bytes at least the modulus
 *  size), its length into *n_len, e into *e.  Returns 0 or CS_SK_EINVAL.  */
int cs_sk_share_public (const cs_sk_share_t *self, unsigned char *n, size_t n_cap,
                        size_t *n_len, unsigned long *e);

/*  Encodes the share record (version, party, N, e, d_i: sharedkeys.proto
 *  Share) for sealing at rest; *data is malloc'ed, the caller wipes
 *  (OPENSSL_cleanse) and frees it.  Returns 0 or CS_SK_ENOMEM.  */
int cs_sk_share_encode (const cs_sk_share_t *self, unsigned char **data, size_t *len);

/*  Decodes a share record: the share, or NULL with *err CS_SK_EMALFORMED
 *  (does not decode, unknown version, party not 1..3, N not odd or under
 *  512 bits, e not odd and > 2, d_i of the wrong sign for its party).  */
cs_sk_share_t *cs_sk_share_decode (const unsigned char *data, size_t len, int *err);

/*  The partial result m^(d_i) mod N of one party: m is the padded block
 *  (k = modulus bytes, big-endian, m < N), out receives k bytes.  Returns 0,
 *  CS_SK_EINVAL (lengths, m >= N, m not invertible mod N).  The raw modexp
 *  of the board path; constant-time exponentiation (mpz_powm_sec).  */
int cs_sk_partial (const cs_sk_share_t *self, const unsigned char *m, size_t m_len,
                   unsigned char *out, size_t out_len);

/*  The operands of the partial result m^(d_i) mod N as one plain raw
 *  modexp (cs_driver.h cs_modexp_t), for a board to compute it: the base
 *  (k bytes: m when d_i >= 0, else m^(-1) mod N, since m^(d_i) =
 *  (m^(-1))^|d_i| for BF's negative shares), the exponent |d_i| (big-endian
 *  without leading zeros, *exp_len bytes, at most k; 0 bytes when d_i = 0)
 *  and the modulus, cs_sk_share_public's N.  m is the padded block (k =
 *  modulus bytes, 0 < m < N); base and exp have room for k bytes each.  The
 *  exponent is a secret: the caller wipes exp (OPENSSL_cleanse) once the
 *  board has it.  Returns 0, CS_SK_EINVAL (lengths, m >= N or 0, m not
 *  invertible mod N).  Source: BF, "private key, small e" (signing with
 *  additive shares), the raw modexp of Berson et al.  */
int cs_sk_partial_operands (const cs_sk_share_t *self, const unsigned char *m, size_t m_len,
                            unsigned char *base, unsigned char *exp, size_t *exp_len);

/*  Combines the three partial results (each k bytes) of m into the
 *  signature sig (k bytes) = prod partial_i mod N, and releases it only if
 *  sig^e mod N == m.  Returns 0, CS_SK_EINVAL (lengths, a value >= N), or
 *  CS_SK_EVERIFY when a partial result is wrong (sig is zeroed).  */
int cs_sk_combine (const unsigned char *n, size_t k, unsigned long e,
                   const unsigned char *m, const unsigned char *const partial [CS_SK_PARTIES],
                   unsigned char *sig);

/*  What cs_sk_local_run measured.  */
typedef struct {
    cs_sk_stats_t party [CS_SK_PARTIES];
    double seconds;          /* wall clock, the three parties in this thread */
    double cpu_seconds;      /* this thread's CPU time for it (the wall clock less other load) */
    double critical_seconds; /* as on three machines with no latency: the longest chain of
                                party computations a message waits for */
    uint64_t bytes;          /* all messages, all parties */
} cs_sk_run_stats_t;

/*  Runs a whole generation with three in-process parties and an in-memory
 *  transport; rand/rand_ctx as cs_sk_party_new for every party (a test
 *  gives per-party sources through cs_sk_local_run_with).  On success
 *  shares[i] is party i+1's share (caller destroys).  Returns 0 or the first
 *  party error.  */
int cs_sk_local_run (const cs_sk_params_t *params, cs_sk_share_t *shares [CS_SK_PARTIES],
                     cs_sk_run_stats_t *stats);

/*  As cs_sk_local_run with one random source per party (NULL: the DRBG),
 *  and, if parties is not NULL, the three finished parties left for the
 *  caller (destroy each).  */
int cs_sk_local_run_with (const cs_sk_params_t *params, const unsigned char *session,
                          cs_sk_rand_fn rand [CS_SK_PARTIES], void *rand_ctx [CS_SK_PARTIES],
                          cs_sk_share_t *shares [CS_SK_PARTIES], cs_sk_party_t *parties [CS_SK_PARTIES],
                          cs_sk_run_stats_t *stats);

/*  A short name for an error code ("replayed message", ...).  */
const char *cs_sk_strerror (int err);

#endif
