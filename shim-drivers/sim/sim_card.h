/*  sim_card.h — the model of a simulated crypto card (the paper's boards,
 *  Berson et al. §4.2.5 and §5.1): N coprocessors, a latency per operation
 *  kind and key size, an optional rated throughput of the card's interface,
 *  jitter, and the queue inside the card.  Time is virtual (nanoseconds on
 *  the caller's clock): sim_card_reserve says when an operation completes,
 *  and the driver sleeps until then, so the model is tested without sleeping.
 *
 *  The model of one operation that arrives at time t:
 *    1. it joins the card's queue (FIFO, in the order of arrival);
 *    2. it passes the card's interface, one operation at a time, taking
 *       1 / max-rate seconds (no time when there is no rated throughput);
 *    3. it runs on the first free coprocessor for the rest of its latency.
 *  An operation alone on the card thus takes exactly its latency; a loaded
 *  card completes min(max-rate, N / (latency - 1 / max-rate)) operations per
 *  second.  The card is independent of how many threads feed it: a caller
 *  blocks for its own operation only (the paper's shim is synchronous per
 *  thread), so the broker needs at least N worker threads on the board to
 *  keep N coprocessors busy.
 */
#ifndef SIM_CARD_H_INCLUDED
#define SIM_CARD_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <czmq.h>
#include <p11-kit/pkcs11.h>

#define SIM_CARD_MAX_COPROCESSORS 4096
#define SIM_CARD_MAX_LATENCY_MS   60000.0

/*  What one board's card does with its one key, resolved at board open.  */
typedef struct {
    const char *preset;             /* "axl200", "nfast300" or NULL; static */
    long coprocessors;              /* 1..SIM_CARD_MAX_COPROCESSORS */
    bool crt;                       /* RSA private operations with CRT */
    const char *kind;               /* "modexp", "crt" or "other" (EC, EdDSA); static */
    double latency_ms;              /* one operation alone, milliseconds */
    double max_rate;                /* operations per second through the card's
                                       interface; 0 = no limit */
    double jitter_pct;              /* each latency uniformly within +-jitter_pct % */
} sim_card_params_t;

/*  Resolves the parameters of a card from its board config node `config`
 *  (the drivers/<name> section) for a key of type key_type (CKK_RSA, CKK_EC,
 *  CKK_EC_EDWARDS) and `bits` bits, into *params.  Keys read:
 *    preset = axl200 | nfast300      (defaults below; explicit keys win)
 *    coprocessors = N                (default: the preset's, else `threads`,
 *                                     else 1: a card as parallel as the
 *                                     threads that feed it, the old behaviour)
 *    crt = true | false              (default false: RSA uses the modexp table)
 *    latency-ms = MS                 (every operation, any kind and size;
 *                                     replaces the latency tables)
 *    latency-modexp-BITS-ms = MS, latency-crt-BITS-ms = MS
 *    max-rate-modexp-BITS = OPS, max-rate-crt-BITS = OPS   (operations/s)
 *    jitter-pct = P                  (0..100, default 0)
 *  Presets (the paper's boards, 1024-bit RSA): axl200 = 26 coprocessors,
 *  modexp 92.19 ms, max-rate 265/s, no CRT table (the AXL200 ignores the CRT
 *  coefficients, §5.1: crt = true uses the modexp figures); nfast300 = 10
 *  coprocessors, modexp 85.68 ms, max-rate 93/s, crt 27.03 ms, max-rate
 *  300/s (Table 2 latencies, §5 rated throughputs, §5.1 coprocessor counts).
 *  A key size without its own entry takes the entry of the nearest size
 *  (by ratio) of its kind, latency scaled by (bits / size)^3 and max-rate by
 *  (size / bits)^3: a modular exponentiation with a k-bit exponent and
 *  k-bit multiplications costs k * k^2.  crt without any crt entry uses the
 *  modexp entries; EC and EdDSA keys use latency-ms only (default 0).
 *  Returns 0, or -1 with a message in err (err_size bytes): an unknown
 *  preset, a value out of range, a key starting with latency- or max-rate-
 *  that is none of the above (a typo would otherwise be ignored).  */
int sim_card_params_resolve (zconfig_t *config, CK_KEY_TYPE key_type, unsigned long bits,
                             sim_card_params_t *params, char *err, size_t err_size);

typedef struct _sim_card_t sim_card_t;

/*  A card with the given parameters, idle.  Returns NULL when out of memory
 *  or when params->coprocessors is out of range.  Caller destroys.  */
sim_card_t *sim_card_new (const sim_card_params_t *params);

/*  NULL-safe; nulls *self_p.  */
void sim_card_destroy (sim_card_t **self_p);

/*  Queues one operation that arrives at now_ns (nanoseconds, any clock the
 *  caller uses throughout) and returns when it completes, in the same clock.
 *  u in [-1, 1] picks its jitter: the latency becomes latency * (1 + u *
 *  jitter_pct / 100).  Thread-safe (one mutex, a few comparisons).  */
int64_t sim_card_reserve (sim_card_t *self, int64_t now_ns, double u);

#endif
