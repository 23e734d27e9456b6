/*  board.h — one configured board: its driver module, the driver's board
 *  object, and the keys and mechanisms it reported once at open (used for
 *  routing and for Hello/ListKeys answers).  docs/DESIGN.md §1, cs_driver.h.
 */
#ifndef BOARD_H_INCLUDED
#define BOARD_H_INCLUDED

#include <pthread.h>
#include "cs_driver.h"
#include "broker_config.h"

/*  A key resident on a board that the board did not list at open
 *  (board_key_register).  */
typedef struct board_registered_s board_registered_t;

typedef struct {
    char *name;                     /* drivers/<name> */
    char *type;                     /* driver type */
    char *tenant;                   /* drivers/<name>/tenant: owner of its resident keys, or NULL */
    int threads;                    /* worker threads to start */
    bool host;                      /* computes on the broker host's cores (placement.h) */
    void *dl;                       /* the driver module */
    const cs_driver_t *driver;
    cs_board_t *handle;             /* the driver's board object */
    cs_key_info_t *keys;            /* read once at open */
    size_t n_keys;
    bool *reserved;                 /* NULL, or n_keys flags: keys the broker keeps for
                                       itself (board_key_reserve) */
    pthread_mutex_t registered_lock;    /* guards `registered`: the reactor adds, workers read */
    board_registered_t *registered; /* keys registered after open, newest first; each entry
                                       stays until the board is destroyed */
    cs_mech_info_t *mechs;          /* read once at open */
    size_t n_mechs;
    cs_drv_session_open_fn *session_open;
    cs_drv_session_close_fn *session_close;
    cs_caps_t caps;                 /* read once at open; zero when the driver has no
                                       CS_DRV_CAPABILITIES (resident keys only) */
    cs_drv_sign_key_fn *sign;       /* NULL when the driver cannot sign */
    cs_drv_decrypt_key_fn *decrypt; /* NULL when the driver cannot decrypt */
    cs_drv_derive_key_fn *derive;   /* ECDH (CS_DRV_DERIVE_KEY); NULL when the driver has none */
    cs_drv_modexp_fn *modexp;       /* raw modexp (CS_DRV_MODEXP); NULL when the driver has none */
    cs_drv_symmetric_fn *symmetric; /* secret-key operations (CS_DRV_SYMMETRIC); NULL when none */
    cs_drv_generate_material_fn *generate_material;     /* optional */
    cs_drv_generate_resident_fn *generate_resident;     /* optional */
    cs_drv_destroy_resident_fn *destroy_resident;       /* optional */
    cs_drv_board_close_fn *close;
    cs_drv_public_key_fn *public_key;   /* CS_DRV_PUBLIC_KEY (issue #23); NULL when none */
    cs_drv_verify_fn *verify;       /* CS_DRV_VERIFY (issue #23); NULL when none */
    cs_drv_encapsulate_fn *encapsulate; /* CS_DRV_ENCAPSULATE (issue #23); NULL when none */
    cs_drv_decapsulate_fn *decapsulate; /* CS_DRV_DECAPSULATE (issue #23); NULL when none */
    int verify_rsa;                 /* health settings of the config (broker_board_conf_t): */
    int verify_ec;                  /*   percent of results checked (verify.h) */
    int call_timeout_ms;            /*   0 = automatic (frontend_health.c) */
    int generate_timeout_ms;
    int probe_min_ms;               /*   back-off (health.h) */
    int probe_max_ms;
} board_t;

/*  Picks the driver directory: the config's broker/driver-dir, else env
 *  CRYPTOSERVER_DRIVER_DIR, else the compiled-in CS_DRIVER_DIR.  The result
 *  is owned by the config, the environment or the program.  */
const char *board_driver_dir (const broker_config_t *config);

/*  Loads DRIVER_DIR/<type>.so, checks its ABI version and required functions,
 *  opens the board described by `conf` and reads its keys and mechanisms.
 *  Returns a new board (caller destroys) or NULL after logging why.  */
board_t *board_new (const broker_board_conf_t *conf, const char *driver_dir, const char *base_dir);

/*  Closes the board (all its worker sessions must be closed) and unloads the
 *  driver; NULL-safe; nulls *self_p.  */
void board_destroy (board_t **self_p);

/*  True when the board can sign/decrypt with key material of key_type
 *  (CKK_RSA, CKK_EC, CKK_EC_EDWARDS).  */
bool board_takes_material (const board_t *self, CK_KEY_TYPE key_type);

/*  True when the board runs ECDH (CS_DRV_DERIVE_KEY, CS_CAP_DERIVE): with
 *  its resident keys (material false) or with key material of key_type
 *  (material true, which also needs CS_CAP_KEY_MATERIAL for that type:
 *  CKK_EC, or CKK_EC_MONTGOMERY for X25519/X448).  */
bool board_derives (const board_t *self, bool material, CK_KEY_TYPE key_type);

/*  True when the board can generate a key pair of key_type as material
 *  (resident = false) or as a resident key (resident = true).  */
bool board_generates (const board_t *self, CK_KEY_TYPE key_type, bool resident);

/*  True when the board runs the job mechanism `mechanism` for `flag`
 *  (CKF_SIGN: a sign job, CKF_DECRYPT: a decrypt job, CKF_DERIVE: ECDH,
 *  CKF_VERIFY: a verification job, with CS_CAP_PUBLIC_OPS; CKF_ENCAPSULATE,
 *  CKF_DECAPSULATE: a KEM job, with CS_CAP_KEM): its
 *  driver reported it with that flag at open (CS_DRV_BOARD_MECHANISMS) and
 *  has the function that runs it.  Routing (docs/CONTRACTS.md "Routing").  */
bool board_runs (const board_t *self, CK_MECHANISM_TYPE mechanism, CK_FLAGS flag);

/*  True when the board runs raw modular exponentiation (CS_DRV_MODEXP with
 *  CS_CAP_MODEXP).  */
bool board_modexps (const board_t *self);

/*  True when the board runs secret-key mechanism `mechanism` (CKM_AES_CBC,
 *  CKM_SHA256_HMAC ...): its driver has CS_DRV_SYMMETRIC and its mechanism
 *  list names the mechanism (issue #10).  */
bool board_runs_sym (const board_t *self, CK_MECHANISM_TYPE mechanism);

/*  Reserves key number `index` of the board's key list for the broker
 *  itself (the master key's wrapping key, server.c; issue #7): the frontend
 *  neither lists it to any tenant nor routes any client job to it.  Returns
 *  0, or -1 when out of memory.  */
int board_key_reserve (board_t *self, size_t index);

/*  True when the board holds a reserved key with CKA_ID key_id (key_id_len
 *  bytes): a job with that CKA_ID on this board could reach it.  */
bool board_id_reserved (const board_t *self, const unsigned char *key_id, size_t key_id_len);

/*  Returns the board's key with CKA_ID key_id (key_id_len bytes): one it
 *  listed at open, else one registered since (board_key_register), or
 *  NULL.  The result stays valid until the board is destroyed.  Any
 *  thread.  */
const cs_key_info_t *board_key (const board_t *self, const unsigned char *key_id, size_t key_id_len);

/*  Registers the public half of a key resident on the board that the board
 *  did not list at open: a key generated there since (keys/home, by this
 *  broker or another one on the same keystore), so that its results are
 *  verified before release like any other (verify.h; issue #19 item 8).
 *  Copies info (id, type, bits, modulus and exponent, or curve and point;
 *  not the label).  A key already known is left as it is.  Any thread.
 *  Returns 0, or -1 when out of memory.  */
int board_key_register (board_t *self, const cs_key_info_t *info);

#endif
