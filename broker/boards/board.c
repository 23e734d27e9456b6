/*  board.c — load a driver module and open one board through it.  */
#include <assert.h>
#include <dlfcn.h>
#include "board.h"

struct board_registered_s {
    cs_key_info_t info;
    board_registered_t *next;
};

#ifndef CS_DRIVER_DIR
#define CS_DRIVER_DIR "/usr/local/lib/cryptoserver/drivers"
#endif

const char *
board_driver_dir (const broker_config_t *config)
{
    const char *env = getenv ("CRYPTOSERVER_DRIVER_DIR");
    if (config && config->driver_dir)
        return config->driver_dir;
    return env && *env ? env : CS_DRIVER_DIR;
}

/*  dlopens the driver and resolves its entry and dispatch table.  */
static int
s_load_driver (board_t *self, const char *driver_dir)
{
    char path [4096];
    snprintf (path, sizeof path, "%s/%s.so", driver_dir, self->type);
    if (!(self->dl = dlopen (path, RTLD_NOW | RTLD_LOCAL))) {
        zsys_error ("board %s: cannot load driver %s: %s", self->name, path, dlerror ());
        return -1;
    }
    cs_driver_entry_fn *entry = (cs_driver_entry_fn *) dlsym (self->dl, CS_DRIVER_ENTRY_SYMBOL);
    self->driver = entry ? entry () : NULL;
    if (!self->driver || self->driver->abi_version != CS_DRIVER_ABI_VERSION) {
        zsys_error ("board %s: %s: no %s of ABI version %d", self->name, path,
                    CS_DRIVER_ENTRY_SYMBOL, CS_DRIVER_ABI_VERSION);
        return -1;
    }
    self->session_open = (cs_drv_session_open_fn *) cs_driver_lookup (self->driver, CS_DRV_SESSION_OPEN);
    self->session_close = (cs_drv_session_close_fn *) cs_driver_lookup (self->driver, CS_DRV_SESSION_CLOSE);
    self->sign = (cs_drv_sign_key_fn *) cs_driver_lookup (self->driver, CS_DRV_SIGN_KEY);
    self->modexp = (cs_drv_modexp_fn *) cs_driver_lookup (self->driver, CS_DRV_MODEXP);
    self->symmetric = (cs_drv_symmetric_fn *) cs_driver_lookup (self->driver, CS_DRV_SYMMETRIC);
    self->decrypt = (cs_drv_decrypt_key_fn *) cs_driver_lookup (self->driver, CS_DRV_DECRYPT_KEY);
    self->derive = (cs_drv_derive_key_fn *) cs_driver_lookup (self->driver, CS_DRV_DERIVE_KEY);
    self->generate_material = (cs_drv_generate_material_fn *)
        cs_driver_lookup (self->driver, CS_DRV_GENERATE_MATERIAL);
    self->generate_resident = (cs_drv_generate_resident_fn *)
        cs_driver_lookup (self->driver, CS_DRV_GENERATE_RESIDENT);
    self->destroy_resident = (cs_drv_destroy_resident_fn *)
        cs_driver_lookup (self->driver, CS_DRV_DESTROY_RESIDENT);
    self->close = (cs_drv_board_close_fn *) cs_driver_lookup (self->driver, CS_DRV_BOARD_CLOSE);
    self->public_key = (cs_drv_public_key_fn *) cs_driver_lookup (self->driver, CS_DRV_PUBLIC_KEY);
    self->verify = (cs_drv_verify_fn *) cs_driver_lookup (self->driver, CS_DRV_VERIFY);
    self->encapsulate = (cs_drv_encapsulate_fn *) cs_driver_lookup (self->driver, CS_DRV_ENCAPSULATE);
    self->decapsulate = (cs_drv_decapsulate_fn *) cs_driver_lookup (self->driver, CS_DRV_DECAPSULATE);
    if (!self->session_open || !self->session_close || !self->close
    ||  !cs_driver_lookup (self->driver, CS_DRV_BOARD_OPEN)
    ||  !cs_driver_lookup (self->driver, CS_DRV_BOARD_KEYS)
    ||  !cs_driver_lookup (self->driver, CS_DRV_BOARD_MECHANISMS)) {
        zsys_error ("board %s: driver %s lacks a required function", self->name, path);
        return -1;
    }
    return 0;
}

/*  Opens the board and reads its keys and mechanisms once.  */
static int
s_open (board_t *self, zconfig_t *config, const char *base_dir)
{
    cs_drv_board_open_fn *open = (cs_drv_board_open_fn *) cs_driver_lookup (self->driver, CS_DRV_BOARD_OPEN);
    cs_drv_board_keys_fn *keys = (cs_drv_board_keys_fn *) cs_driver_lookup (self->driver, CS_DRV_BOARD_KEYS);
    cs_drv_board_mechanisms_fn *mechs
        = (cs_drv_board_mechanisms_fn *) cs_driver_lookup (self->driver, CS_DRV_BOARD_MECHANISMS);
    if (open (self->name, config, base_dir, &self->handle)) {
        zsys_error ("board %s: the %s driver could not open it", self->name, self->type);
        return -1;
    }
    cs_drv_capabilities_fn *caps
        = (cs_drv_capabilities_fn *) cs_driver_lookup (self->driver, CS_DRV_CAPABILITIES);
    if (keys (self->handle, &self->keys, &self->n_keys)
    ||  mechs (self->handle, &self->mechs, &self->n_mechs)
    ||  (caps && caps (self->handle, &self->caps))) {
        zsys_error ("board %s: cannot read its keys, mechanisms or capabilities", self->name);
        return -1;
    }
    if (!self->generate_material)
        self->caps.flags &= ~CS_CAP_GENERATE_MATERIAL;
    if (!self->generate_resident)
        self->caps.flags &= ~CS_CAP_GENERATE_RESIDENT;
    if (!self->derive)
        self->caps.flags &= ~CS_CAP_DERIVE;
    if (!self->modexp)
        self->caps.flags &= ~CS_CAP_MODEXP;
    zsys_info ("board %s: %s driver, %zu keys, %zu mechanisms, %d threads%s%s%s", self->name,
               self->type, self->n_keys, self->n_mechs, self->threads,
               self->caps.flags & CS_CAP_KEY_MATERIAL ? ", key material" : "",
               self->caps.flags & (CS_CAP_GENERATE_MATERIAL | CS_CAP_GENERATE_RESIDENT)
               ? ", key generation" : "",
               self->caps.flags & CS_CAP_MODEXP ? ", raw modexp" : "");
    if (self->n_keys && !self->tenant)
        zsys_warning ("board %s: no 'tenant': its %zu resident keys are visible to no tenant",
                      self->name, self->n_keys);
    return 0;
}

board_t *
board_new (const broker_board_conf_t *conf, const char *driver_dir, const char *base_dir)
{
    board_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    pthread_mutex_init (&self->registered_lock, NULL);
    self->name = strdup (conf->name);
    self->type = strdup (conf->type);
    self->tenant = conf->tenant ? strdup (conf->tenant) : NULL;
    self->threads = conf->threads;
    self->verify_rsa = conf->verify_rsa;
    self->host = conf->host;
    self->verify_ec = conf->verify_ec;
    self->call_timeout_ms = conf->call_timeout_ms;
    self->generate_timeout_ms = conf->generate_timeout_ms;
    self->probe_min_ms = conf->probe_min_ms;
    self->probe_max_ms = conf->probe_max_ms;
    if (!self->name || !self->type || (conf->tenant && !self->tenant) || s_load_driver (self, driver_dir)
    ||  s_open (self, conf->config, base_dir))
        board_destroy (&self);
    return self;
}

void
board_destroy (board_t **self_p)
{
    board_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    if (self->handle && self->close)
        self->close (&self->handle);
    cs_key_info_free_array (self->keys, self->n_keys);
    while (self->registered) {
        board_registered_t *next = self->registered->next;
        cs_key_info_free_members (&self->registered->info);
        free (self->registered);
        self->registered = next;
    }
    pthread_mutex_destroy (&self->registered_lock);
    free (self->reserved);
    free (self->mechs);
    if (self->dl)
        dlclose (self->dl);
    free (self->name);
    free (self->type);
    free (self->tenant);
    free (self);
    *self_p = NULL;
}

int
board_key_reserve (board_t *self, size_t index)
{
    assert (index < self->n_keys);
    if (!self->reserved && !(self->reserved = calloc (self->n_keys, sizeof (bool))))
        return -1;
    self->reserved [index] = true;
    return 0;
}

bool
board_id_reserved (const board_t *self, const unsigned char *key_id, size_t key_id_len)
{
    for (size_t i = 0; self->reserved && i < self->n_keys; i++)
        if (self->reserved [i] && self->keys [i].id_len == key_id_len
        &&  memcmp (self->keys [i].id, key_id, key_id_len) == 0)
            return true;
    return false;
}

/*  The registered key with CKA_ID key_id, or NULL; under registered_lock.  */
static const cs_key_info_t *
s_registered_key (const board_t *self, const unsigned char *key_id, size_t key_id_len)
{
    for (board_registered_t *r = self->registered; r; r = r->next)
        if (r->info.id_len == key_id_len && memcmp (r->info.id, key_id, key_id_len) == 0)
            return &r->info;
    return NULL;
}

const cs_key_info_t *
board_key (const board_t *self, const unsigned char *key_id, size_t key_id_len)
{
    for (size_t i = 0; i < self->n_keys; i++)
        if (self->keys [i].id_len == key_id_len && memcmp (self->keys [i].id, key_id, key_id_len) == 0)
            return &self->keys [i];
    /*  The lock guards the list, not the board's description: a lookup
        changes nothing.  */
    pthread_mutex_t *lock = (pthread_mutex_t *) &self->registered_lock;
    pthread_mutex_lock (lock);
    const cs_key_info_t *key = s_registered_key (self, key_id, key_id_len);
    pthread_mutex_unlock (lock);
    return key;
}

/*  A malloc'd copy of len bytes at data into *out (NULL for none).  */
static int
s_copy_bytes (const unsigned char *data, size_t len, unsigned char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (!data || !len)
        return 0;
    if (!(*out = malloc (len)))
        return -1;
    memcpy (*out, data, len);
    *out_len = len;
    return 0;
}

int
board_key_register (board_t *self, const cs_key_info_t *info)
{
    if (board_key (self, info->id, info->id_len))
        return 0;
    board_registered_t *entry = calloc (1, sizeof *entry);
    if (!entry || info->id_len > CS_KEY_ID_MAX) {
        free (entry);
        return -1;
    }
    cs_key_info_t *copy = &entry->info;
    *copy = *info;                      /* the numbers; the pointers are copied below */
    copy->label = NULL;
    if (s_copy_bytes (info->modulus, info->modulus_len, &copy->modulus, &copy->modulus_len)
    ||  s_copy_bytes (info->public_exponent, info->public_exponent_len, &copy->public_exponent,
                      &copy->public_exponent_len)
    ||  s_copy_bytes (info->ec_params, info->ec_params_len, &copy->ec_params, &copy->ec_params_len)
    ||  s_copy_bytes (info->ec_point, info->ec_point_len, &copy->ec_point, &copy->ec_point_len)) {
        cs_key_info_free_members (copy);
        free (entry);
        return -1;
    }
    pthread_mutex_lock (&self->registered_lock);
    if (s_registered_key (self, info->id, info->id_len)) {     /* another thread was first */
        pthread_mutex_unlock (&self->registered_lock);
        cs_key_info_free_members (copy);
        free (entry);
        return 0;
    }
    entry->next = self->registered;
    self->registered = entry;
    pthread_mutex_unlock (&self->registered_lock);
    return 0;
}

bool
board_takes_material (const board_t *self, CK_KEY_TYPE key_type)
{
    return (self->caps.flags & CS_CAP_KEY_MATERIAL) && (self->caps.material_types & cs_kt_bit (key_type))
        && self->sign;
}

bool
board_derives (const board_t *self, bool material, CK_KEY_TYPE key_type)
{
    if (!self->derive || !(self->caps.flags & CS_CAP_DERIVE))
        return false;
    return !material || ((self->caps.flags & CS_CAP_KEY_MATERIAL) && (self->caps.material_types & cs_kt_bit (key_type)));
}

bool
board_generates (const board_t *self, CK_KEY_TYPE key_type, bool resident)
{
    unsigned flag = resident ? CS_CAP_GENERATE_RESIDENT : CS_CAP_GENERATE_MATERIAL;
    return (self->caps.flags & flag) && (self->caps.generate_types & cs_kt_bit (key_type));
}

bool
board_runs (const board_t *self, CK_MECHANISM_TYPE mechanism, CK_FLAGS flag)
{
    if ((flag == CKF_SIGN && !self->sign) || (flag == CKF_DECRYPT && !self->decrypt)
    ||  (flag == CKF_DERIVE && !self->derive))
        return false;
    if ((flag == CKF_VERIFY || (flag == CKF_SIGN && mechanism == CKM_ML_DSA))
    &&  (!self->verify || !(self->caps.flags & CS_CAP_PUBLIC_OPS)))
        return false;                   /* a verification job, or an ML-DSA signature the worker
                                           checks on the board before release (issue #23) */
    if ((flag == CKF_ENCAPSULATE && !self->encapsulate) || (flag == CKF_DECAPSULATE && !self->decapsulate)
    ||  ((flag == CKF_ENCAPSULATE || flag == CKF_DECAPSULATE) && !(self->caps.flags & CS_CAP_KEM)))
        return false;                   /* a KEM job (issue #23) */
    for (size_t i = 0; i < self->n_mechs; i++)
        if (self->mechs [i].type == mechanism)
            return (self->mechs [i].flags & flag) != 0;
    return false;
}

bool
board_runs_sym (const board_t *self, CK_MECHANISM_TYPE mechanism)
{
    if (!self->symmetric)
        return false;
    for (size_t i = 0; i < self->n_mechs; i++)
        if (self->mechs [i].type == mechanism)
            return true;
    return false;
}

bool
board_modexps (const board_t *self)
{
    return self->modexp && (self->caps.flags & CS_CAP_MODEXP);
}
