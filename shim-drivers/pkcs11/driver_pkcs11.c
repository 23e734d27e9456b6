/*  driver_pkcs11.c — drives any PKCS#11 library (SoftHSMv2, a vendor HSM) as
 *  a board: one token of that library, its private keys found by CKA_ID.
 *
 *  Config keys (under drivers/<name>): module (path of the .so), token (token
 *  label), pin-file (board user PIN, relative to the config dir); "threads" is
 *  the broker's.  Several boards may be tokens of one library in one process,
 *  so a loaded library is shared per module path with a refcount: C_Initialize
 *  once, C_Finalize when its last board closes.  Login state is per application
 *  (PKCS#11 v2.40 §5.6), so one C_Login on the board session serves every
 *  worker session.  OAEP with other than SHA-1/MGF1-SHA1/no label runs as a raw
 *  CKM_RSA_X_509 decrypt plus OpenSSL unpadding, since SoftHSM 2.6 supports only
 *  SHA-1 OAEP natively; PSS whose MGF1 hash differs from its hash (SoftHSM 2.6
 *  refuses those) is encoded by OpenSSL and signed with CKM_RSA_X_509.  ECDH
 *  (CS_DRV_DERIVE_KEY) derives a throw-away session secret of the field size
 *  with CKD_NULL and returns its value, the raw Z.
 *
 *  This file holds the library, the board and its worker sessions and the
 *  dispatch table; the board's keys, key material, running operations and
 *  resident keys have rooms of their own (p11_int.h lists them).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <openssl/crypto.h>
#include "cs_util.h"
#include "cs_wire.h"          /* cs_rv_name */
#include "drv_key_cache.h"
#include "p11_int.h"

/*  The dispatch table's functions, declared with the ABI's types (cs_driver.h):
 *  a definition that does not match its type does not compile.  */
static cs_drv_board_open_fn s_board_open;
static cs_drv_board_close_fn s_board_close;
static cs_drv_board_mechanisms_fn s_board_mechanisms;
static cs_drv_board_keys_fn s_board_keys;
static cs_drv_session_open_fn s_session_open;
static cs_drv_session_close_fn s_session_close;
static cs_drv_capabilities_fn s_capabilities;
static cs_drv_session_cached_fn s_session_cached;

#define S_PIN_MAX 256

/*  One loaded PKCS#11 library, shared by all boards that name its path.  */
typedef struct p11_module_s {
    char *path;
    void *dl;
    CK_FUNCTION_LIST_PTR fl;
    int refs;
    struct p11_module_s *next;
} p11_module_t;

static pthread_mutex_t s_modules_lock = PTHREAD_MUTEX_INITIALIZER;
static p11_module_t *s_modules = NULL;


/*  Loads the library and calls C_Initialize; returns NULL and logs on failure.  */
static p11_module_t *
s_module_load (const char *path)
{
    p11_module_t *self = calloc (1, sizeof *self);
    CK_C_GetFunctionList get_list = NULL;
    CK_C_INITIALIZE_ARGS args = { .flags = CKF_OS_LOCKING_OK };
    if (!self || !(self->path = strdup (path)))
        goto fail;
    if (!(self->dl = dlopen (path, RTLD_NOW | RTLD_LOCAL))) {
        zsys_error ("pkcs11: cannot load %s: %s", path, dlerror ());
        goto fail;
    }
    get_list = (CK_C_GetFunctionList) dlsym (self->dl, "C_GetFunctionList");
    if (!get_list || get_list (&self->fl) != CKR_OK || !self->fl) {
        zsys_error ("pkcs11: %s: no usable C_GetFunctionList", path);
        goto fail;
    }
    CK_RV rv = self->fl->C_Initialize (&args);
    if (rv != CKR_OK && rv != CKR_CRYPTOKI_ALREADY_INITIALIZED) {
        zsys_error ("pkcs11: %s: C_Initialize: %s", path, cs_rv_name (rv));
        goto fail;
    }
    return self;
fail:
    if (self && self->dl)
        dlclose (self->dl);
    if (self)
        free (self->path);
    free (self);
    return NULL;
}

/*  Returns the shared instance of the library at path (refcount + 1).  */
static p11_module_t *
s_module_get (const char *path)
{
    pthread_mutex_lock (&s_modules_lock);
    p11_module_t *self = s_modules;
    while (self && strcmp (self->path, path))
        self = self->next;
    if (!self && (self = s_module_load (path))) {
        self->next = s_modules;
        s_modules = self;
    }
    if (self)
        self->refs++;
    pthread_mutex_unlock (&s_modules_lock);
    return self;
}

/*  Drops one reference; the last one finalizes and unloads the library.  */
static void
s_module_put (p11_module_t *self)
{
    pthread_mutex_lock (&s_modules_lock);
    if (--self->refs == 0) {
        p11_module_t **link = &s_modules;
        while (*link != self)
            link = &(*link)->next;
        *link = self->next;
        self->fl->C_Finalize (NULL);
        dlclose (self->dl);
        free (self->path);
        free (self);
    }
    pthread_mutex_unlock (&s_modules_lock);
}

/*  Finds the slot whose token label (32 bytes, space padded) is `label`.  */
static int
s_find_slot (cs_board_t *self, const char *label)
{
    CK_ULONG count = 0;
    CK_SLOT_ID slots [64];
    CK_RV rv = self->fl->C_GetSlotList (CK_TRUE, NULL, &count);
    if (rv == CKR_OK) {
        count = count > 64 ? 64 : count;
        rv = self->fl->C_GetSlotList (CK_TRUE, slots, &count);
    }
    for (CK_ULONG i = 0; rv == CKR_OK && i < count; i++) {
        CK_TOKEN_INFO info;
        if (self->fl->C_GetTokenInfo (slots [i], &info) != CKR_OK)
            continue;
        size_t len = sizeof info.label;
        while (len > 0 && info.label [len - 1] == ' ')
            len--;
        if (len == strlen (label) && memcmp (info.label, label, len) == 0) {
            self->slot = slots [i];
            return 0;
        }
    }
    zsys_error ("pkcs11 %s: no token labelled '%s' (%s)", self->name, label, cs_rv_name (rv));
    return -1;
}

/*  Opens the board session and logs in as CKU_USER with the PIN file.  */
static int
s_login (cs_board_t *self, const char *pin_path)
{
    char *pin = pin_path ? cs_file_read_secret (pin_path, S_PIN_MAX) : NULL;
    CK_RV rv = self->fl->C_OpenSession (self->slot, CKF_SERIAL_SESSION, NULL, NULL, &self->session);
    if (rv != CKR_OK) {
        zsys_error ("pkcs11 %s: C_OpenSession: %s", self->name, cs_rv_name (rv));
        goto out;
    }
    if (!pin) {
        char why [512] = "missing";
        if (pin_path && cs_file_check_private (pin_path, why, sizeof why) == 0)
            snprintf (why, sizeof why, "cannot read %s", pin_path);
        zsys_error ("pkcs11 %s: pin-file: %s", self->name, why);
        rv = CKR_PIN_INCORRECT;
        goto out;
    }
    rv = self->fl->C_Login (self->session, CKU_USER, (CK_UTF8CHAR_PTR) pin, strlen (pin));
    if (rv == CKR_USER_ALREADY_LOGGED_IN)
        rv = CKR_OK;
    if (rv != CKR_OK)
        zsys_error ("pkcs11 %s: C_Login: %s", self->name, cs_rv_name (rv));
out:
    if (pin) {
        OPENSSL_cleanse (pin, strlen (pin));
        free (pin);
    }
    return rv == CKR_OK ? 0 : -1;
}

/*  True when the slot has mechanism `type` with all of `flags`.  */
static bool
s_has_mech (cs_board_t *self, CK_MECHANISM_TYPE type, CK_FLAGS flags)
{
    CK_MECHANISM_INFO info;
    return self->fl->C_GetMechanismInfo (self->slot, type, &info) == CKR_OK
        && (info.flags & flags) == flags;
}

/*  Notes which RSA decrypt paths the slot offers, for OAEP routing, and
 *  what the board can do with key material and key generation.  */
static void
s_probe_mechanisms (cs_board_t *self)
{
    self->native_oaep = s_has_mech (self, CKM_RSA_PKCS_OAEP, CKF_DECRYPT);
    self->raw_rsa = s_has_mech (self, CKM_RSA_X_509, CKF_DECRYPT);
    self->raw_sign = s_has_mech (self, CKM_RSA_X_509, CKF_SIGN);
    self->native_pss = s_has_mech (self, CKM_RSA_PKCS_PSS, CKF_SIGN);
    self->derive = s_has_mech (self, CKM_ECDH1_DERIVE, CKF_DERIVE);
    unsigned usable = (s_has_mech (self, CKM_RSA_PKCS, CKF_SIGN) ? CS_KT_RSA : 0)
                    | (s_has_mech (self, CKM_ECDSA, CKF_SIGN) ? CS_KT_EC : 0)
                    | (s_has_mech (self, CKM_EDDSA, CKF_SIGN) ? CS_KT_EC_EDWARDS : 0);
    unsigned gen = (s_has_mech (self, CKM_RSA_PKCS_KEY_PAIR_GEN, CKF_GENERATE_KEY_PAIR) ? CS_KT_RSA : 0)
                 | (s_has_mech (self, CKM_EC_KEY_PAIR_GEN, CKF_GENERATE_KEY_PAIR) ? CS_KT_EC : 0)
                 | (s_has_mech (self, CKM_EC_EDWARDS_KEY_PAIR_GEN, CKF_GENERATE_KEY_PAIR)
                    ? CS_KT_EC_EDWARDS : 0);
    self->caps.flags = (self->material && usable ? CS_CAP_KEY_MATERIAL : 0)
                     | (gen ? CS_CAP_GENERATE_RESIDENT : 0)
                     | (self->derive ? CS_CAP_DERIVE : 0);
    self->caps.material_types = self->material ? usable : 0;
    self->caps.generate_types = gen & usable;
}

/*  Reads key-material (true/false) and cache-size of the board section.  */
static int
s_options (cs_board_t *self, zconfig_t *config)
{
    const char *material = zconfig_get (config, "key-material", "true");
    self->material = streq (material, "true") || streq (material, "yes") || streq (material, "1");
    if (!self->material && !streq (material, "false") && !streq (material, "no")
    &&  !streq (material, "0")) {
        zsys_error ("pkcs11 %s: key-material: must be true or false", self->name);
        return -1;
    }
    return drv_key_cache_size (config, "pkcs11", self->name, 1, &self->cache_size);
}

static void s_board_close (cs_board_t **board_p);

static int
s_board_open (const char *name, zconfig_t *config, const char *base_dir, cs_board_t **board_p)
{
    const char *module = zconfig_get (config, "module", NULL);
    const char *token = zconfig_get (config, "token", NULL);
    char *pin_path = cs_path_resolve (base_dir, zconfig_get (config, "pin-file", NULL));
    cs_board_t *self = calloc (1, sizeof *self);
    int rc = -1;
    if (!self || !(self->name = strdup (name)))
        goto out;
    self->session = CK_INVALID_HANDLE;
    pthread_mutex_init (&self->login_lock, NULL);
    if (pin_path && !(self->pin_path = strdup (pin_path)))
        goto out;
    if (!module || !token) {
        zsys_error ("pkcs11 %s: 'module' and 'token' are required", name);
        goto out;
    }
    if (s_options (self, config) || !(self->module = s_module_get (module)))
        goto out;
    self->fl = self->module->fl;
    if (s_find_slot (self, token) || s_login (self, pin_path) || p11_read_keys (self))
        goto out;
    s_probe_mechanisms (self);
    zsys_info ("pkcs11 %s: token '%s' of %s: %zu keys%s%s", name, token, module, self->n_keys,
               self->caps.flags & CS_CAP_KEY_MATERIAL ? ", takes key material" : "",
               self->caps.flags & CS_CAP_GENERATE_RESIDENT ? ", generates keys" : "");
    *board_p = self;
    self = NULL;
    rc = 0;
out:
    free (pin_path);
    s_board_close (&self);
    return rc;
}

static void
s_board_close (cs_board_t **board_p)
{
    cs_board_t *self = board_p ? *board_p : NULL;
    if (!self)
        return;
    if (self->session != CK_INVALID_HANDLE)
        self->fl->C_CloseSession (self->session);
    if (self->module)
        s_module_put (self->module);
    cs_key_info_free_array (self->keys, self->n_keys);
    free (self->pin_path);
    pthread_mutex_destroy (&self->login_lock);
    free (self->name);
    free (self);
    *board_p = NULL;
}

/*  Clamps a board's key-size range to what the broker and module use: EC
 *  keys on P-256/384/521 (field bits 256..521), Ed25519 only (255 bits, as
 *  the openssl driver and OpenSC say), RSA up to 8192 bits (module limit).  */
static void
s_mech_clamp (cs_mech_info_t *info)
{
    CK_ULONG lo = 0, hi = 0;
    switch (info->type) {
        case CKM_ECDSA: case CKM_ECDH1_DERIVE: case CKM_EC_KEY_PAIR_GEN:
            lo = 256; hi = 521; break;
        case CKM_EDDSA: case CKM_EC_EDWARDS_KEY_PAIR_GEN:
            lo = 255; hi = 255; break;
        default:
            hi = 8192;
    }
    if (lo && (info->min_key_bits < lo || info->min_key_bits > hi))
        info->min_key_bits = lo;
    if (info->max_key_bits > hi || (lo && info->max_key_bits < lo))
        info->max_key_bits = hi;
}

/*  Adds one mechanism of the broker's raw set if the slot has it.  */
static void
s_mech_add (cs_board_t *self, CK_MECHANISM_TYPE type, CK_MECHANISM_TYPE probe,
            cs_mech_info_t *mechs, size_t *count)
{
    CK_MECHANISM_INFO info;
    if (self->fl->C_GetMechanismInfo (self->slot, probe, &info) != CKR_OK)
        return;
    mechs [*count] = (cs_mech_info_t) { type, info.ulMinKeySize, info.ulMaxKeySize,
                                        info.flags & (CKF_SIGN | CKF_DECRYPT | CKF_DERIVE | CKF_HW) };
    if (type == CKM_RSA_PKCS_OAEP)
        mechs [*count].flags &= ~(CK_FLAGS) (CKF_SIGN | CKF_DERIVE);
    if (type == CKM_RSA_PKCS_PSS)
        mechs [*count].flags &= ~(CK_FLAGS) (CKF_DECRYPT | CKF_DERIVE);
    s_mech_clamp (&mechs [*count]);
    if (mechs [*count].flags & (CKF_SIGN | CKF_DECRYPT | CKF_DERIVE))
        (*count)++;
}

/*  Adds a key-pair generation mechanism if the slot has it.  */
static void
s_mech_add_gen (cs_board_t *self, CK_MECHANISM_TYPE type, cs_mech_info_t *mechs, size_t *count)
{
    CK_MECHANISM_INFO info;
    if (self->fl->C_GetMechanismInfo (self->slot, type, &info) == CKR_OK
    &&  (info.flags & CKF_GENERATE_KEY_PAIR)) {
        mechs [*count] = (cs_mech_info_t) { type, info.ulMinKeySize, info.ulMaxKeySize,
                                            CKF_GENERATE_KEY_PAIR };
        s_mech_clamp (&mechs [(*count)++]);
    }
}

static int
s_board_mechanisms (cs_board_t *self, cs_mech_info_t **mechs_p, size_t *count_p)
{
    cs_mech_info_t *mechs = calloc (12, sizeof *mechs);
    size_t count = 0;
    if (!mechs)
        return -1;
    s_mech_add (self, CKM_RSA_PKCS, CKM_RSA_PKCS, mechs, &count);
    if (self->native_pss || self->raw_sign)     /* PSS falls back to raw RSA + OpenSSL EMSA-PSS */
        s_mech_add (self, CKM_RSA_PKCS_PSS, self->native_pss ? CKM_RSA_PKCS_PSS : CKM_RSA_X_509,
                    mechs, &count);
    s_mech_add (self, CKM_RSA_X_509, CKM_RSA_X_509, mechs, &count);
    s_mech_add (self, CKM_ECDSA, CKM_ECDSA, mechs, &count);
    s_mech_add (self, CKM_EDDSA, CKM_EDDSA, mechs, &count);
    s_mech_add (self, CKM_ECDH1_DERIVE, CKM_ECDH1_DERIVE, mechs, &count);
    s_mech_add_gen (self, CKM_RSA_PKCS_KEY_PAIR_GEN, mechs, &count);
    s_mech_add_gen (self, CKM_EC_KEY_PAIR_GEN, mechs, &count);
    s_mech_add_gen (self, CKM_EC_EDWARDS_KEY_PAIR_GEN, mechs, &count);
    if (self->native_oaep || self->raw_rsa)
        s_mech_add (self, CKM_RSA_PKCS_OAEP,
                    self->native_oaep ? CKM_RSA_PKCS_OAEP : CKM_RSA_X_509, mechs, &count);
    *mechs_p = mechs;
    *count_p = count;
    return 0;
}

/*  Deep-copies one key description; returns -1 when out of memory.  */
static int
s_key_copy (cs_key_info_t *to, const cs_key_info_t *from)
{
    *to = *from;
    to->label = from->label ? strdup (from->label) : NULL;
    to->modulus = from->modulus ? OPENSSL_memdup (from->modulus, from->modulus_len) : NULL;
    to->public_exponent = from->public_exponent
        ? OPENSSL_memdup (from->public_exponent, from->public_exponent_len) : NULL;
    to->ec_params = from->ec_params ? OPENSSL_memdup (from->ec_params, from->ec_params_len) : NULL;
    to->ec_point = from->ec_point ? OPENSSL_memdup (from->ec_point, from->ec_point_len) : NULL;
    return (from->label && !to->label) || (from->modulus && !to->modulus) ? -1 : 0;
}

static int
s_board_keys (cs_board_t *self, cs_key_info_t **keys_p, size_t *count_p)
{
    cs_key_info_t *keys = calloc (self->n_keys ? self->n_keys : 1, sizeof *keys);
    if (!keys)
        return -1;
    for (size_t i = 0; i < self->n_keys; i++)
        if (s_key_copy (&keys [i], &self->keys [i])) {
            cs_key_info_free_array (keys, i + 1);
            return -1;
        }
    *keys_p = keys;
    *count_p = self->n_keys;
    return 0;
}

static int
s_capabilities (cs_board_t *self, cs_caps_t *caps)
{
    *caps = self->caps;
    return 0;
}

/*  Frees a cache entry (its object dies with the session or is destroyed
 *  by the evicting code).  */
static void
s_import_free (p11_import_t **self_p)
{
    free (*self_p);
    *self_p = NULL;
}

/*  A worker session that is not logged in means the token lost its login
 *  (all the application's sessions were closed, the token was reset or
 *  re-inserted; PKCS#11 v2.40 §5.6): the board session is opened again and
 *  logs in with the PIN file, once, under the board's lock.  Returns the
 *  CK_RV of the login (CKR_OK when the session was logged in).  */
static CK_RV
s_login_again (cs_board_t *board, CK_SESSION_HANDLE worker)
{
    CK_SESSION_INFO info;
    CK_RV rv = board->fl->C_GetSessionInfo (worker, &info);
    if (rv != CKR_OK || info.state == CKS_RW_USER_FUNCTIONS || info.state == CKS_RO_USER_FUNCTIONS)
        return rv;
    pthread_mutex_lock (&board->login_lock);
    rv = board->fl->C_GetSessionInfo (worker, &info);
    if (rv == CKR_OK && info.state != CKS_RW_USER_FUNCTIONS && info.state != CKS_RO_USER_FUNCTIONS) {
        if (board->session != CK_INVALID_HANDLE)
            board->fl->C_CloseSession (board->session);
        board->session = CK_INVALID_HANDLE;
        rv = s_login (board, board->pin_path) ? CKR_USER_NOT_LOGGED_IN : CKR_OK;
        zsys_info ("pkcs11 %s: the token had lost its login: %s", board->name,
                   rv == CKR_OK ? "logged in again" : "cannot log in again");
    }
    pthread_mutex_unlock (&board->login_lock);
    return rv;
}

static cs_drv_session_t *
s_session_open (cs_board_t *board)
{
    cs_drv_session_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->board = board;
    self->objects = zhashx_new ();
    self->imports = zhashx_new ();
    CK_RV rv = board->fl->C_OpenSession (board->slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL,
                                         NULL, &self->handle);
    if (rv == CKR_OK && s_login_again (board, self->handle) != CKR_OK) {
        board->fl->C_CloseSession (self->handle);
        rv = CKR_USER_NOT_LOGGED_IN;
    }
    if (rv != CKR_OK || !self->objects || !self->imports) {
        zsys_error ("pkcs11 %s: worker C_OpenSession: %s", board->name, cs_rv_name (rv));
        zhashx_destroy (&self->objects);
        zhashx_destroy (&self->imports);
        free (self);
        return NULL;
    }
    zhashx_set_destructor (self->imports, (zhashx_destructor_fn *) s_import_free);
    return self;
}

static void
s_session_close (cs_drv_session_t **session_p)
{
    cs_drv_session_t *self = session_p ? *session_p : NULL;
    if (!self)
        return;
    self->board->fl->C_CloseSession (self->handle);     /* destroys the session objects */
    zhashx_destroy (&self->objects);
    zhashx_destroy (&self->imports);
    free (self);
    *session_p = NULL;
}

static size_t
s_session_cached (cs_drv_session_t *self)
{
    return zhashx_size (self->imports);
}

static const cs_driver_dispatch_t s_dispatch [] = {
    { CS_DRV_BOARD_OPEN, (cs_driver_fn_t) s_board_open },
    { CS_DRV_BOARD_CLOSE, (cs_driver_fn_t) s_board_close },
    { CS_DRV_BOARD_MECHANISMS, (cs_driver_fn_t) s_board_mechanisms },
    { CS_DRV_BOARD_KEYS, (cs_driver_fn_t) s_board_keys },
    { CS_DRV_SESSION_OPEN, (cs_driver_fn_t) s_session_open },
    { CS_DRV_SESSION_CLOSE, (cs_driver_fn_t) s_session_close },
    { CS_DRV_CAPABILITIES, (cs_driver_fn_t) s_capabilities },
    { CS_DRV_SIGN_KEY, (cs_driver_fn_t) p11_sign },
    { CS_DRV_DECRYPT_KEY, (cs_driver_fn_t) p11_decrypt },
    { CS_DRV_GENERATE_RESIDENT, (cs_driver_fn_t) p11_generate_resident },
    { CS_DRV_DESTROY_RESIDENT, (cs_driver_fn_t) p11_destroy_resident },
    { CS_DRV_SESSION_CACHED, (cs_driver_fn_t) s_session_cached },
    { CS_DRV_DERIVE_KEY, (cs_driver_fn_t) p11_derive },
    { 0, NULL }
};

CS_DRIVER_EXPORT ("pkcs11",
                  "PKCS#11 library token (SoftHSMv2 or a vendor HSM)",
                  s_dispatch)

