/*  cs_bench.h — cryptoserver-bench: signing throughput and latency of any
 *  PKCS#11 module (ours, or a board's own library for the baseline), with
 *  the signatures checked by OpenSSL outside the module's code.
 *
 *  Units: cs_bench_p11.c (load a module, find token, key and public key),
 *  cs_bench_driver.c (one board through its shim driver, no broker),
 *  cs_bench_verify.c (OpenSSL verification), cs_bench_stats.c (latency
 *  percentiles), cs_bench_tls.c (TLS handshakes per second of a server),
 *  cs_bench_paper.c (the `paper` subcommand), cs_metrics_scrape.c (a
 *  broker's metrics endpoint), cs_bench_sign.c (threads, blocks, the
 *  report), cs_bench.c (options, main).
 */
#ifndef CS_BENCH_H_INCLUDED
#define CS_BENCH_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <p11-kit/pkcs11.h>

/*  ---- mechanisms ------------------------------------------------------ */

typedef enum {
    CS_BENCH_SHA256_RSA_PKCS,       /* CKM_SHA256_RSA_PKCS */
    CS_BENCH_RSA_PSS_SHA256,        /* CKM_SHA256_RSA_PKCS_PSS, MGF1-SHA256, sLen 32 */
    CS_BENCH_ECDSA_SHA256,          /* CKM_ECDSA_SHA256, raw r||s */
    CS_BENCH_ECDSA                  /* CKM_ECDSA over a SHA-256 digest made by the bench
                                       (for modules without CKM_ECDSA_SHA256: SoftHSM 2.6) */
} cs_bench_mech_t;

/*  Parses a mechanism name ("sha256-rsa-pkcs", "rsa-pkcs-pss-sha256",
 *  "ecdsa-sha256", "ecdsa") into *mech.  Returns false for an unknown name.  */
bool cs_bench_mech_parse (const char *name, cs_bench_mech_t *mech);

/*  Returns the mechanism's canonical name (static).  */
const char *cs_bench_mech_name (cs_bench_mech_t mech);

/*  True for the ECDSA mechanisms (EC keys, r||s signatures).  */
bool cs_bench_mech_is_ec (cs_bench_mech_t mech);

/*  Fills *mechanism (and *pss, which must outlive it) for C_SignInit.  */
void cs_bench_mech_fill (cs_bench_mech_t mech, CK_MECHANISM *mechanism,
                         CK_RSA_PKCS_PSS_PARAMS *pss);

/*  ---- the PKCS#11 module (cs_bench_p11.c) ----------------------------- */

typedef struct {
    void *dl;                       /* dlopen handle */
    CK_FUNCTION_LIST *p11;          /* the module's function list */
    CK_SLOT_ID slot;                /* the slot whose token has the label */
    bool initialized;               /* C_Initialize succeeded */
} cs_bench_module_t;

/*  Public key material read with C_GetAttributeValue, big-endian bytes.
 *  All buffers malloc'd; free with cs_bench_pubkey_clear.  */
typedef struct {
    CK_KEY_TYPE key_type;           /* CKK_RSA or CKK_EC */
    unsigned char *modulus;   size_t modulus_len;
    unsigned char *exponent;  size_t exponent_len;
    unsigned char *ec_params; size_t ec_params_len;    /* DER OID */
    unsigned char *ec_point;  size_t ec_point_len;     /* DER OCTET STRING or raw */
} cs_bench_pubkey_t;

/*  dlopens `path`, calls C_GetFunctionList and C_Initialize (CKF_OS_LOCKING_OK)
 *  and finds the slot whose token label is `token`.  Returns 0, or -1 with a
 *  message in err (err_size bytes); call cs_bench_module_close either way.  */
int cs_bench_module_open (cs_bench_module_t *module, const char *path, const char *token,
                          char *err, size_t err_size);

/*  C_Finalize and dlclose; safe on a half-opened or zeroed module.  */
void cs_bench_module_close (cs_bench_module_t *module);

/*  The module's PKCS#11 3.2 function list (C_GetInterface "PKCS 11" 3.2;
 *  the type is cs_p11_3.h's), or NULL when it has none.  The module keeps
 *  it.  */
struct CK_FUNCTION_LIST_3_2 *cs_bench_list_3_2 (cs_bench_module_t *module);

/*  Opens a R/W session on module->slot and logs in as CKU_USER with `pin`
 *  (CKR_USER_ALREADY_LOGGED_IN counts as success: login state is per
 *  application, PKCS#11 v2.40 §5.6).  Returns CKR_OK and the session in
 *  *session, else the failing CK_RV (the session is then closed).  */
CK_RV cs_bench_session_open (cs_bench_module_t *module, const char *pin,
                             CK_SESSION_HANDLE *session);

/*  Finds the one object of class `klass` labelled `label`.  Returns CKR_OK
 *  and *object; CKR_KEY_HANDLE_INVALID when there is none.  */
CK_RV cs_bench_find (cs_bench_module_t *module, CK_SESSION_HANDLE session,
                     CK_OBJECT_CLASS klass, const char *label, CK_OBJECT_HANDLE *object);

/*  Reads the public half of the key labelled `label`: from the public key
 *  object if there is one, else from the private key object.  Returns CKR_OK
 *  and fills *pubkey (caller clears), else the failing CK_RV.  */
CK_RV cs_bench_pubkey_read (cs_bench_module_t *module, CK_SESSION_HANDLE session,
                            const char *label, cs_bench_pubkey_t *pubkey);

void cs_bench_pubkey_clear (cs_bench_pubkey_t *pubkey);

/*  ---- one board through its driver (cs_bench_driver.c) --------------- */

typedef struct cs_bench_driver cs_bench_driver_t;

/*  Opens board NAME of the broker config CONF (spec "CONF:NAME") through its
 *  shim driver: DRIVER_DIR/TYPE.so (env CRYPTOSERVER_DRIVER_DIR, else the
 *  config's broker/driver-dir, else the installed drivers), opened with its
 *  drivers/NAME section and the config's directory, as the broker opens it.
 *  The key: the board's resident key labelled `label`, or, when key_file is
 *  not NULL, the RSA private key in that PEM file as key material (cached by
 *  the driver under a ref made from its hash).  Returns the board (caller
 *  closes), or NULL with a message in err.  */
cs_bench_driver_t *cs_bench_driver_open (const char *spec, const char *label, const char *key_file,
                                         char *err, size_t err_size);

/*  Closes the board, wipes the key material, unloads the driver; NULL-safe.  */
void cs_bench_driver_close (cs_bench_driver_t **self_p);

/*  The public half of the key (caller clears *pubkey).  Returns CKR_OK,
 *  CKR_KEY_TYPE_INCONSISTENT (material that is not RSA) or CKR_HOST_MEMORY.  */
CK_RV cs_bench_driver_pubkey (cs_bench_driver_t *self, cs_bench_pubkey_t *pubkey);

/*  A driver session for the calling thread only (a broker worker's);
 *  NULL on failure.  Close it with cs_bench_driver_session_close.  */
void *cs_bench_driver_session_open (cs_bench_driver_t *self);
void cs_bench_driver_session_close (cs_bench_driver_t *self, void **session_p);

/*  Signs `data` (data_len bytes, what C_Sign would get for mech: the message,
 *  or for CS_BENCH_ECDSA its SHA-256 digest) as the module would: hashes it,
 *  builds the DigestInfo, and calls the driver's raw sign.  *sig_len:
 *  capacity in, length out.  Returns the driver's CK_RV.  */
CK_RV cs_bench_driver_sign (cs_bench_driver_t *self, void *session, cs_bench_mech_t mech,
                            const unsigned char *data, size_t data_len,
                            unsigned char *sig, CK_ULONG *sig_len);

/*  ---- verification (cs_bench_verify.c) -------------------------------- */

typedef struct cs_bench_verifier cs_bench_verifier_t;

/*  Builds an OpenSSL public key from `pubkey` for mechanism `mech`.  Returns
 *  the verifier (caller destroys), or NULL with a message in err.  The
 *  verifier is read-only and may be shared by threads.  */
cs_bench_verifier_t *cs_bench_verifier_new (const cs_bench_pubkey_t *pubkey, cs_bench_mech_t mech,
                                            char *err, size_t err_size);

/*  Like cs_bench_verifier_new, with the public key read from the PEM file
 *  `path` (SubjectPublicKeyInfo, made outside the module under test), which
 *  must be the same key as `token_key` (the token's public key of the
 *  signing key): a mismatch is an error.  Caller destroys the result; NULL
 *  with a message in err.  */
cs_bench_verifier_t *cs_bench_verifier_from_pem (const char *path, const cs_bench_pubkey_t *token_key,
                                                 cs_bench_mech_t mech, char *err, size_t err_size);

void cs_bench_verifier_destroy (cs_bench_verifier_t **self_p);

/*  True when `sig` (sig_len bytes, as C_Sign returned it) is a valid
 *  signature of `msg` (msg_len bytes).  Thread-safe.  */
bool cs_bench_verify (const cs_bench_verifier_t *self, const void *msg, size_t msg_len,
                      const void *sig, size_t sig_len);

/*  Key size in bits (RSA modulus, EC group order), for the report.  */
int cs_bench_verifier_bits (const cs_bench_verifier_t *self);

/*  ---- latency statistics (cs_bench_stats.c) --------------------------- */

typedef struct {
    double *ms;                     /* samples in milliseconds */
    size_t count, size;
} cs_bench_samples_t;

/*  Seconds on the monotonic clock (CLOCK_MONOTONIC): what every run of
 *  cryptoserver-bench times with.  */
double cs_bench_now (void);

/*  Appends one sample; grows the array.  Returns false when out of memory.  */
bool cs_bench_samples_add (cs_bench_samples_t *samples, double ms);

/*  Appends all of `from` to `to`.  Returns false when out of memory.  */
bool cs_bench_samples_merge (cs_bench_samples_t *to, const cs_bench_samples_t *from);

/*  Sorts the samples and returns the p-th percentile (0 < p <= 100) by the
 *  nearest-rank method; 0 when there are none.  */
double cs_bench_percentile (cs_bench_samples_t *samples, double p);

void cs_bench_samples_free (cs_bench_samples_t *samples);

/*  ---- key generation latency (cs_bench_keygen.c) --------------------- */

typedef enum {
    CS_BENCH_KEYGEN_RSA2048,        /* CKM_RSA_PKCS_KEY_PAIR_GEN, 2048 bits, e = 65537 */
    CS_BENCH_KEYGEN_P256,           /* CKM_EC_KEY_PAIR_GEN, CKA_EC_PARAMS prime256v1 OID */
    CS_BENCH_KEYGEN_ED25519         /* CKM_EC_EDWARDS_KEY_PAIR_GEN, OID 1.3.101.112 */
} cs_bench_keygen_t;

typedef struct {
    cs_bench_keygen_t keygen;
    long count;                     /* key pairs to generate */
    long interval_ms;               /* pause between generations (not timed), ms */
    bool token;                     /* CKA_TOKEN TRUE (server-held) or FALSE (per-request) */
    bool csv;
    const char *metrics;            /* --metrics URL: count the pairs the broker's pre-generated
                                       pool served (cryptoserver_pool_keys_*_total), or NULL */
} cs_bench_keygen_options_t;

/*  Parses "rsa:2048", "ec:prime256v1", "ed25519".  False for other names.  */
bool cs_bench_keygen_parse (const char *name, cs_bench_keygen_t *keygen);

/*  The canonical name of a key type (static).  */
const char *cs_bench_keygen_name (cs_bench_keygen_t keygen);

/*  Generates options->count key pairs in `session` (logged in), timing each
 *  C_GenerateKeyPair in ms and destroying both objects after it (untimed),
 *  then prints p50/p90/p99/max (or CSV); with options->metrics also how
 *  many of them the broker's key pool served (the difference of
 *  cryptoserver_pool_keys_taken_total and _missed_total before and after).
 *  Returns 0, or 1 when any generation failed or the metrics could not be
 *  read.  */
int cs_bench_keygen_run (cs_bench_module_t *module, CK_SESSION_HANDLE session,
                         const cs_bench_keygen_options_t *options);

/*  ---- the signing run (cs_bench_sign.c) ------------------------------- */

#define CS_BENCH_MAX_THREADS   256
#define CS_BENCH_MAX_BLOCKS    64

/*  The options of a signing run (or of --keygen), as the command line gave
 *  them (cs_bench.c).  */
typedef struct {
    const char *module_path, *token, *pin, *key;
    const char *driver_board;       /* --driver-board CONF:NAME, or NULL: the module */
    const char *key_file;           /* --key-file PEM: key material for --driver-board */
    cs_bench_mech_t mech;
    int threads;
    long count;                     /* signatures per thread and block; 0 = use seconds */
    int blocks;                     /* --blocks: timed blocks of count signatures */
    double seconds;
    bool verify, csv;
    const char *verify_key;         /* --verify-key PEM, or NULL: the token's */
    const char *metrics;            /* --metrics URL: the broker's CPU per op, or NULL */
    bool progress;                  /* progress lines even when stderr is no terminal */
    bool stop_on_error;             /* all threads stop at the first failure */
    bool share;                     /* --share: a block's threads x count operations
                                       come from one counter */
    bool keygen;                    /* --keygen: time C_GenerateKeyPair instead */
    cs_bench_keygen_options_t gen;
    const char *beside;             /* --beside LABEL: the same run with this key after
                                       the first (a shared key beside an ordinary one) */
    bool csv_no_header;             /* set for the run of --beside: one CSV header */
    int async;                      /* --async N: then one thread keeps N signatures in
                                       flight (PKCS#11 3.2 asynchronous sessions) */
    double *ops_per_s;              /* when set, cs_bench_sign_run leaves its rate there */
} cs_bench_options_t;

/*  Runs options->threads threads signing through module (or driver, with
 *  module NULL), verifies the signatures with verifier when not NULL, and
 *  prints the report; bits is the key size for it.  Returns the exit
 *  status.  */
int cs_bench_sign_run (const cs_bench_options_t *options, cs_bench_module_t *module,
                       cs_bench_driver_t *driver, const cs_bench_verifier_t *verifier, int bits);

/*  --async N (cs_bench_async.c): one application thread opens N async
 *  sessions of the module's 3.2 interface and keeps a C_Sign in flight in
 *  each, polling C_AsyncComplete; the same total of signatures as the
 *  threaded run (threads x count) or --seconds S; verified after the clock
 *  stops when `verifier` is set; reported as the threaded run is, with the
 *  ratio to `threaded_ops_per_s` when it is above 0.  Returns the exit
 *  status.  */
int cs_bench_async_run (const cs_bench_options_t *options, cs_bench_module_t *module,
                        const cs_bench_verifier_t *verifier, int bits, double threaded_ops_per_s);

/*  ---- subcommands ----------------------------------------------------- */

/*  `cryptoserver-bench tls ...` (argv[0] is "tls"): TLS handshakes per
 *  second of a server (cs_bench_tls.c).  Returns the exit status.  */
int cs_bench_tls_main (int argc, char **argv);

/*  `cryptoserver-bench paper ...` (argv[0] is "paper"): runs
 *  tools/bench-paper.sh of the source tree with the build tree's programs
 *  (cs_bench_paper.c).  Returns only on failure, with the exit status.  */
int cs_bench_paper_main (int argc, char **argv);

/*  `cryptoserver-bench shared-keygen ...` (cs_bench_shared.c): shared RSA
 *  key generation timed beside Malkin, Wu and Boneh's table.  Returns the
 *  exit status.  */
int cs_bench_shared_main (int argc, char **argv);

/*  `cryptoserver-bench idle-associations ...` (cs_bench_idle.c): N idle
 *  client associations and the broker's RSS per association.  Returns the
 *  exit status.  */
int cs_bench_idle_main (int argc, char **argv);

/*  `cryptoserver-bench find-objects ...` (cs_bench_find.c): the time of a
 *  find over every private key of a token.  Returns the exit status.  */
int cs_bench_find_main (int argc, char **argv);

/*  `cryptoserver-bench transport-floor ...` (cs_bench_floor.c): round trips
 *  of a UNIX socket pair and of ZeroMQ (TCP, CURVE, ipc) alone, the floor
 *  of the client's latency.  Returns the exit status.  */
int cs_bench_floor_main (int argc, char **argv);

/*  `cryptoserver-bench pq ...` (cs_bench_pq.c): ML-DSA-65 signatures or
 *  ML-KEM-768 decapsulations through a PKCS#11 3.2 module, ops/s and
 *  latency (issue #23).  Returns the exit status.  */
int cs_bench_pq_main (int argc, char **argv);

#endif
