/*  cs_driver.h — the shim driver ABI: how the broker drives one kind of board.
 *
 *  A driver is a shared object named "<type>.so" in the broker's driver
 *  directory.  It exports one symbol, cs_driver_entry(), returning a static
 *  cs_driver_t: an ABI version and a dispatch table of { id, function } pairs
 *  ending in { 0, NULL }.  Ids are never reused; optional functions may be
 *  missing.  (STYLE.md item 7, after OpenSSL providers and OpenSC.)
 *
 *  Objects and threads:
 *    - cs_board_t   one configured board (one "drivers" entry of the broker
 *                   config).  Opened once at broker start from the main thread;
 *                   read-only afterwards except for what the driver guards.
 *    - cs_session_t one worker thread's context on a board (e.g. its own
 *                   PKCS#11 session).  Used only by the thread that opened it.
 *
 *  Error regime (STYLE.md item 3): life-cycle functions return 0 on success
 *  and -1 on failure (after logging why with zsys_error).  Crypto operations
 *  return the CK_RV that becomes the job's result on the wire.
 */
#ifndef CS_DRIVER_H_INCLUDED
#define CS_DRIVER_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <czmq.h>
#include <p11-kit/pkcs11.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CS_DRIVER_ABI_VERSION 1
#define CS_DRIVER_ENTRY_SYMBOL "cs_driver_entry"
#define CS_KEY_ID_MAX 64        /* bytes of CKA_ID we accept */

typedef struct cs_board_s cs_board_t;
typedef struct cs_session_s cs_session_t;

/*  A raw mechanism with its parameters (mirrors cs.Mechanism on the wire).  */
typedef struct {
    CK_MECHANISM_TYPE type;          /* CKM_RSA_PKCS, CKM_RSA_PKCS_PSS, CKM_RSA_X_509,
                                        CKM_ECDSA, CKM_RSA_PKCS_OAEP */
    CK_MECHANISM_TYPE hash;          /* PSS/OAEP hash, CKM_SHA256 ... */
    CK_RSA_PKCS_MGF_TYPE mgf;        /* PSS/OAEP CKG_MGF1_* */
    CK_ULONG salt_len;               /* PSS sLen, bytes */
    const unsigned char *label;      /* OAEP label, may be NULL */
    size_t label_len;                /* bytes */
} cs_mech_t;

/*  One mechanism a board supports, as PKCS#11 CK_MECHANISM_INFO reports it.  */
typedef struct {
    CK_MECHANISM_TYPE type;
    CK_ULONG min_key_bits;
    CK_ULONG max_key_bits;
    CK_FLAGS flags;                  /* CKF_SIGN, CKF_DECRYPT, ... */
} cs_mech_info_t;

/*  Public description of one key a board holds.  Every pointer is owned by
 *  the structure; release arrays with cs_key_info_free_array().  */
typedef struct {
    unsigned char id [CS_KEY_ID_MAX];   /* CKA_ID */
    size_t id_len;
    char *label;                        /* CKA_LABEL, NUL-terminated, may be NULL */
    CK_KEY_TYPE key_type;               /* CKK_RSA or CKK_EC */
    CK_ULONG bits;                      /* modulus bits, or field size for EC */
    unsigned char *modulus;             /* RSA, big-endian */
    size_t modulus_len;
    unsigned char *public_exponent;     /* RSA, big-endian */
    size_t public_exponent_len;
    unsigned char *ec_params;           /* EC: DER OID of the curve */
    size_t ec_params_len;
    unsigned char *ec_point;            /* EC: DER OCTET STRING of the point */
    size_t ec_point_len;
    bool can_sign;
    bool can_decrypt;
} cs_key_info_t;

/*  Frees the members of count keys and the array itself; NULL-safe.  */
static inline void
cs_key_info_free_array (cs_key_info_t *keys, size_t count)
{
    if (!keys)
        return;
    for (size_t i = 0; i < count; i++) {
        free (keys [i].label);
        free (keys [i].modulus);
        free (keys [i].public_exponent);
        free (keys [i].ec_params);
        free (keys [i].ec_point);
    }
    free (keys);
}

/*  Function ids of the dispatch table.  Never reuse or renumber an id.  */
enum {
    CS_DRV_BOARD_OPEN = 1,        /* required */
    CS_DRV_BOARD_CLOSE = 2,       /* required */
    CS_DRV_BOARD_MECHANISMS = 3,  /* required */
    CS_DRV_BOARD_KEYS = 4,        /* required */
    CS_DRV_SESSION_OPEN = 5,      /* required */
    CS_DRV_SESSION_CLOSE = 6,     /* required */
    CS_DRV_SIGN = 7,              /* optional */
    CS_DRV_DECRYPT = 8,           /* optional */
};

/*  CS_DRV_BOARD_OPEN: opens the board named `name` from its config section
 *  `config` (the "drivers/<name>" node of the broker config; relative paths in
 *  it are relative to `base_dir`).  On success stores a new board in *board_p
 *  and returns 0; returns -1 and logs why on failure.  Caller closes the board.  */
typedef int (cs_drv_board_open_fn) (const char *name, zconfig_t *config,
                                    const char *base_dir, cs_board_t **board_p);

/*  CS_DRV_BOARD_CLOSE: closes a board after all its sessions are closed;
 *  NULL-safe; nulls *board_p.  */
typedef void (cs_drv_board_close_fn) (cs_board_t **board_p);

/*  CS_DRV_BOARD_MECHANISMS: stores in *mechs_p a malloc'd array of the board's
 *  usable raw mechanisms and in *count_p its length.  Caller frees the array.
 *  Returns 0, or -1 on failure.  */
typedef int (cs_drv_board_mechanisms_fn) (cs_board_t *board,
                                          cs_mech_info_t **mechs_p, size_t *count_p);

/*  CS_DRV_BOARD_KEYS: stores in *keys_p a malloc'd array of the private keys
 *  the board can use (with their public attributes) and in *count_p its length.
 *  Caller frees with cs_key_info_free_array().  Returns 0, or -1.  */
typedef int (cs_drv_board_keys_fn) (cs_board_t *board,
                                    cs_key_info_t **keys_p, size_t *count_p);

/*  CS_DRV_SESSION_OPEN: opens a worker context on the board, to be used by
 *  the calling thread only.  Returns NULL on failure.  Caller closes it.  */
typedef cs_session_t *(cs_drv_session_open_fn) (cs_board_t *board);

/*  CS_DRV_SESSION_CLOSE: closes a worker context; NULL-safe; nulls *session_p.  */
typedef void (cs_drv_session_close_fn) (cs_session_t **session_p);

/*  CS_DRV_SIGN / CS_DRV_DECRYPT: runs one raw private-key operation with the
 *  key whose CKA_ID is key_id (key_id_len bytes).  `in` is the digest,
 *  DigestInfo or raw block to sign, or the ciphertext to decrypt.  On entry
 *  *out_len is the capacity of `out` in bytes; on CKR_OK it is the length
 *  written.  Returns CKR_OK or the board's CK_RV (CKR_KEY_HANDLE_INVALID when
 *  the board lacks the key, CKR_BUFFER_TOO_SMALL, CKR_DATA_LEN_RANGE,
 *  CKR_ENCRYPTED_DATA_INVALID, CKR_MECHANISM_INVALID, CKR_DEVICE_ERROR ...).  */
typedef CK_RV (cs_drv_sign_fn) (cs_session_t *session,
                                const unsigned char *key_id, size_t key_id_len,
                                const cs_mech_t *mech,
                                const unsigned char *in, size_t in_len,
                                unsigned char *out, size_t *out_len);
typedef cs_drv_sign_fn cs_drv_decrypt_fn;

typedef void (*cs_driver_fn_t) (void);

typedef struct {
    int id;                          /* CS_DRV_*; 0 ends the table */
    cs_driver_fn_t fn;
} cs_driver_dispatch_t;

typedef struct {
    unsigned abi_version;            /* CS_DRIVER_ABI_VERSION the driver was built for */
    const char *type;                /* "pkcs11", "sim", ... = the config's "type" */
    const char *description;         /* one line, for logs */
    const cs_driver_dispatch_t *dispatch;
} cs_driver_t;

/*  The one exported symbol of a driver .so.  */
typedef const cs_driver_t *(cs_driver_entry_fn) (void);

/*  Looks up function `id` in a driver's table; NULL when missing.  */
static inline cs_driver_fn_t
cs_driver_lookup (const cs_driver_t *driver, int id)
{
    for (const cs_driver_dispatch_t *d = driver->dispatch; d && d->id; d++)
        if (d->id == id)
            return d->fn;
    return NULL;
}

#ifdef __cplusplus
}
#endif
#endif
