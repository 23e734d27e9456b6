/*  p11_int.h — the pkcs11 driver's own header, shared by its rooms (one
 *  driver: shim-drivers/pkcs11.so; the broker sees only cs_driver_entry):
 *
 *    driver_pkcs11.c  the library (loaded once per path), the board (slot,
 *                     login, mechanisms, capabilities), worker sessions;
 *                     the dispatch table
 *    p11_keys.c       the board's keys: attributes, descriptions read at
 *                     open, resident key handles per session
 *    p11_material.c   key material (keystore and per-request keys)
 *                     imported as session objects, with a per-session cache
 *    p11_run.c        running sign, decrypt and derive, natively or through
 *                     the OAEP/PSS fallbacks
 *    p11_resident.c   generating and destroying resident keys
 */
#ifndef P11_INT_H_INCLUDED
#define P11_INT_H_INCLUDED

#include <pthread.h>
#include <openssl/sha.h>
#include "cs_mech.h"
#include "cs_keyfacts.h"
#include "drv_keys.h"
#include "drv_pad.h"

struct p11_module_s;

struct cs_board_s {
    char *name;
    struct p11_module_s *module;  /* the loaded library (driver_pkcs11.c) */
    CK_FUNCTION_LIST_PTR fl;
    CK_SLOT_ID slot;
    CK_SESSION_HANDLE session;      /* the board session: login, key listing */
    bool native_oaep;               /* CKM_RSA_PKCS_OAEP with CKF_DECRYPT */
    bool raw_rsa;                   /* CKM_RSA_X_509 with CKF_DECRYPT */
    bool raw_sign;                  /* CKM_RSA_X_509 with CKF_SIGN (PSS fallback) */
    bool native_pss;                /* CKM_RSA_PKCS_PSS with CKF_SIGN */
    bool derive;                    /* CKM_ECDH1_DERIVE with CKF_DERIVE */
    bool material;                  /* key-material: import keys as session objects */
    size_t cache_size;              /* imported keys kept per session */
    cs_caps_t caps;                 /* probed at open */
    cs_key_info_t *keys;            /* read once at open */
    size_t n_keys;
    char *pin_path;                 /* to log in again after the token lost its login */
    pthread_mutex_t login_lock;     /* guards session and the login again */
};

/*  A keystore key imported into a worker session.  */
typedef struct {
    CK_OBJECT_HANDLE handle;
    size_t bits;                    /* RSA modulus bits (OAEP, PSS fallbacks), else 0 */
    CK_KEY_TYPE type;               /* CKK_RSA, CKK_EC or CKK_EC_EDWARDS */
    unsigned char digest [SHA256_DIGEST_LENGTH];    /* of the PKCS#8 DER */
    uint64_t used;                  /* session tick of the last use */
} p11_import_t;

struct cs_drv_session_s {
    cs_board_t *board;
    CK_SESSION_HANDLE handle;
    zhashx_t *objects;              /* hex CKA_ID -> CK_OBJECT_HANDLE + 1 */
    zhashx_t *imports;              /* ref -> p11_import_t */
    uint64_t tick;
};

/*  p11_keys.c.  Reads attribute `type` of obj into a malloc'd buffer
 *  (NUL-terminated, *len_p bytes without the NUL; caller frees), NULL when
 *  absent or unreadable.  */
unsigned char *p11_attr_alloc (cs_board_t *self, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE obj,
                               CK_ATTRIBUTE_TYPE type, size_t *len_p);

/*  Reads a fixed-size attribute (len bytes into value); false when
 *  unavailable.  */
bool p11_attr_get (cs_board_t *self, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE obj,
                   CK_ATTRIBUTE_TYPE type, void *value, CK_ULONG len);

/*  Finds up to max objects matching tmpl (n attributes) in `session` into
 *  objs; returns how many (0 on any error).  */
CK_ULONG p11_find (cs_board_t *self, CK_SESSION_HANDLE session, CK_ATTRIBUTE *tmpl, CK_ULONG n,
                   CK_OBJECT_HANDLE *objs, CK_ULONG max);

/*  Describes private key obj into *key (members owned by key:
 *  cs_key_info_free_members).  0, or -1 when it lacks what a board key
 *  needs (CKA_ID, a known key type, its public half).  */
int p11_key_read (cs_board_t *self, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE obj, cs_key_info_t *key);

/*  Lists every CKO_PRIVATE_KEY with a CKA_ID of the board session into
 *  self->keys (p11_key_read; keys it cannot describe are left out).  0, or
 *  -1 out of memory.  */
int p11_read_keys (cs_board_t *self);

/*  The board's description of key_id (read at open; borrowed), or NULL.  */
const cs_key_info_t *p11_key_info (cs_board_t *board, const unsigned char *key_id, size_t key_id_len);

/*  The private key handle for key_id in this session (cached per session),
 *  or CK_INVALID_HANDLE.  `fresh` drops the cached handle first.  */
CK_OBJECT_HANDLE p11_object (cs_drv_session_t *self, const unsigned char *key_id, size_t key_id_len, bool fresh);

/*  p11_material.c.  Imports key->pkcs8 as a session object: sensitive, not
 *  extractable, never on the token; EC keys with CKA_DERIVE.  *obj_p the
 *  object (caller destroys it), *bits_p the RSA modulus bits (0 for
 *  curves), *type_p the key type.  CKR_OK, CKR_KEY_HANDLE_INVALID (DER the
 *  board cannot take) or the board's rv.  */
CK_RV p11_import (cs_drv_session_t *self, const cs_drv_key_t *key, CK_OBJECT_HANDLE *obj_p, size_t *bits_p,
                  CK_KEY_TYPE *type_p);

/*  p11_import for a keystore key (key->ref set): the session keeps the
 *  object, by ref and a SHA-256 of the DER, up to board->cache_size per
 *  session (least recently used evicted); the caller must not destroy it.  */
CK_RV p11_import_cached (cs_drv_session_t *self, const cs_drv_key_t *key, CK_OBJECT_HANDLE *obj_p,
                         size_t *bits_p, CK_KEY_TYPE *type_p);

/*  p11_run.c and p11_resident.c: the driver ABI's functions (cs_driver.h).  */
cs_drv_sign_key_fn p11_sign;
cs_drv_decrypt_key_fn p11_decrypt;
cs_drv_derive_key_fn p11_derive;
cs_drv_generate_resident_fn p11_generate_resident;
cs_drv_destroy_resident_fn p11_destroy_resident;

#endif
