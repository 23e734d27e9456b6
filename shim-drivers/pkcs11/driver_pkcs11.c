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
 */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/core_names.h>
#include <openssl/objects.h>
#include <openssl/sha.h>
#include "cs_util.h"
#include "cs_wire.h"          /* cs_rv_name */
#include "drv_util.h"

/*  The dispatch table's functions, declared with the ABI's types (cs_driver.h):
 *  a definition that does not match its type does not compile.  */
static cs_drv_board_open_fn s_board_open;
static cs_drv_board_close_fn s_board_close;
static cs_drv_board_mechanisms_fn s_board_mechanisms;
static cs_drv_board_keys_fn s_board_keys;
static cs_drv_session_open_fn s_session_open;
static cs_drv_session_close_fn s_session_close;
static cs_drv_capabilities_fn s_capabilities;
static cs_drv_sign_key_fn s_sign;
static cs_drv_decrypt_key_fn s_decrypt;
static cs_drv_generate_resident_fn s_generate_resident;
static cs_drv_destroy_resident_fn s_destroy_resident;
static cs_drv_session_cached_fn s_session_cached;
static cs_drv_derive_key_fn s_derive;

#define S_PIN_MAX 256
#define S_CACHE_DEFAULT 256
#define S_CACHE_MAX 100000

/*  One loaded PKCS#11 library, shared by all boards that name its path.  */
typedef struct s_module_s {
    char *path;
    void *dl;
    CK_FUNCTION_LIST_PTR fl;
    int refs;
    struct s_module_s *next;
} s_module_t;

static pthread_mutex_t s_modules_lock = PTHREAD_MUTEX_INITIALIZER;
static s_module_t *s_modules = NULL;

struct cs_board_s {
    char *name;
    s_module_t *module;
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
} s_import_t;

struct cs_session_s {
    cs_board_t *board;
    CK_SESSION_HANDLE handle;
    zhashx_t *objects;              /* hex CKA_ID -> CK_OBJECT_HANDLE + 1 */
    zhashx_t *imports;              /* ref -> s_import_t */
    uint64_t tick;
};

/*  Loads the library and calls C_Initialize; returns NULL and logs on failure.  */
static s_module_t *
s_module_load (const char *path)
{
    s_module_t *self = calloc (1, sizeof *self);
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
static s_module_t *
s_module_get (const char *path)
{
    pthread_mutex_lock (&s_modules_lock);
    s_module_t *self = s_modules;
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
s_module_put (s_module_t *self)
{
    pthread_mutex_lock (&s_modules_lock);
    if (--self->refs == 0) {
        s_module_t **link = &s_modules;
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

/*  Reads attribute `type` of obj into a malloc'd buffer; NULL when absent.  */
static unsigned char *
s_attr_alloc (cs_board_t *self, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE obj,
              CK_ATTRIBUTE_TYPE type, size_t *len_p)
{
    CK_ATTRIBUTE attr = { type, NULL, 0 };
    if (self->fl->C_GetAttributeValue (session, obj, &attr, 1) != CKR_OK
    ||  attr.ulValueLen == CK_UNAVAILABLE_INFORMATION)
        return NULL;
    unsigned char *value = malloc (attr.ulValueLen + 1);
    attr.pValue = value;
    if (!value || self->fl->C_GetAttributeValue (session, obj, &attr, 1) != CKR_OK) {
        free (value);
        return NULL;
    }
    value [attr.ulValueLen] = 0;        /* so labels are C strings */
    *len_p = attr.ulValueLen;
    return value;
}

/*  Reads a fixed-size attribute; returns false when unavailable.  */
static bool
s_attr_get (cs_board_t *self, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE obj,
            CK_ATTRIBUTE_TYPE type, void *value, CK_ULONG len)
{
    CK_ATTRIBUTE attr = { type, value, len };
    return self->fl->C_GetAttributeValue (session, obj, &attr, 1) == CKR_OK;
}

/*  Finds up to max objects matching a template in `session`.  */
static CK_ULONG
s_find (cs_board_t *self, CK_SESSION_HANDLE session, CK_ATTRIBUTE *tmpl, CK_ULONG n,
        CK_OBJECT_HANDLE *objs, CK_ULONG max)
{
    CK_ULONG count = 0;
    if (self->fl->C_FindObjectsInit (session, tmpl, n) != CKR_OK)
        return 0;
    if (self->fl->C_FindObjects (session, objs, max, &count) != CKR_OK)
        count = 0;
    self->fl->C_FindObjectsFinal (session);
    return count;
}

/*  Field size in bits of a DER-encoded named curve; 0 when unknown.  */
static CK_ULONG
s_curve_bits (const unsigned char *der, size_t len)
{
    const unsigned char *p = der;
    ASN1_OBJECT *oid = d2i_ASN1_OBJECT (NULL, &p, (long) len);
    EC_GROUP *group = oid ? EC_GROUP_new_by_curve_name (OBJ_obj2nid (oid)) : NULL;
    CK_ULONG bits = group ? (CK_ULONG) EC_GROUP_get_degree (group) : 0;
    EC_GROUP_free (group);
    ASN1_OBJECT_free (oid);
    return bits;
}

/*  Reads CKA_EC_POINT from the public key object with the same CKA_ID.  */
static int
s_ec_public (cs_board_t *self, CK_SESSION_HANDLE session, cs_key_info_t *key)
{
    CK_OBJECT_CLASS cls = CKO_PUBLIC_KEY;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &cls, sizeof cls }, { CKA_ID, key->id, key->id_len }
    };
    CK_OBJECT_HANDLE pub;
    if (s_find (self, session, tmpl, 2, &pub, 1) != 1)
        return -1;
    key->ec_point = s_attr_alloc (self, session, pub, CKA_EC_POINT, &key->ec_point_len);
    return key->ec_point ? 0 : -1;
}

/*  Reads the public attributes of an RSA, EC or EdDSA private key object.  */
static int
s_key_public (cs_board_t *self, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE obj, cs_key_info_t *key)
{
    if (key->key_type == CKK_RSA) {
        key->modulus = s_attr_alloc (self, session, obj, CKA_MODULUS, &key->modulus_len);
        key->public_exponent = s_attr_alloc (self, session, obj, CKA_PUBLIC_EXPONENT,
                                             &key->public_exponent_len);
        key->bits = key->modulus_len * 8;
        return key->modulus && key->public_exponent ? 0 : -1;
    }
    if (key->key_type == CKK_EC || key->key_type == CKK_EC_EDWARDS) {
        key->ec_params = s_attr_alloc (self, session, obj, CKA_EC_PARAMS, &key->ec_params_len);
        if (key->key_type == CKK_EC_EDWARDS)
            key->bits = key->ec_params ? 256 : 0;
        else
            key->bits = key->ec_params ? s_curve_bits (key->ec_params, key->ec_params_len) : 0;
        if (key->bits && s_ec_public (self, session, key) == 0)
            return 0;
        zsys_warning ("pkcs11 %s: EC key '%s' has no public key with its CKA_ID (or an "
                      "unknown curve); skipped", self->name, key->label ? key->label : "");
    }
    return -1;
}

/*  Fills key from private key object obj; returns -1 to skip the key.  */
static int
s_key_read (cs_board_t *self, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE obj, cs_key_info_t *key)
{
    size_t id_len = 0;
    CK_BBOOL sign = CK_FALSE, decrypt = CK_FALSE, derive = CK_FALSE;
    unsigned char *id = s_attr_alloc (self, session, obj, CKA_ID, &id_len);
    if (!id || id_len == 0 || id_len > CS_KEY_ID_MAX) {
        free (id);
        return -1;
    }
    memcpy (key->id, id, id_len);
    key->id_len = id_len;
    free (id);
    size_t label_len;
    key->label = (char *) s_attr_alloc (self, session, obj, CKA_LABEL, &label_len);
    s_attr_get (self, session, obj, CKA_SIGN, &sign, sizeof sign);
    s_attr_get (self, session, obj, CKA_DECRYPT, &decrypt, sizeof decrypt);
    key->can_sign = sign == CK_TRUE;
    key->can_decrypt = decrypt == CK_TRUE;
    s_attr_get (self, session, obj, CKA_DERIVE, &derive, sizeof derive);
    key->can_derive = derive == CK_TRUE;
    if (!s_attr_get (self, session, obj, CKA_KEY_TYPE, &key->key_type, sizeof key->key_type))
        return -1;
    return s_key_public (self, session, obj, key);
}

/*  Lists every CKO_PRIVATE_KEY with a CKA_ID into self->keys.  */
static int
s_read_keys (cs_board_t *self)
{
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE tmpl [] = { { CKA_CLASS, &cls, sizeof cls } };
    CK_OBJECT_HANDLE objs [1024];
    CK_ULONG count = s_find (self, self->session, tmpl, 1, objs, 1024);
    self->keys = calloc (count ? count : 1, sizeof (cs_key_info_t));
    if (!self->keys)
        return -1;
    for (CK_ULONG i = 0; i < count; i++) {
        cs_key_info_t *key = &self->keys [self->n_keys];
        if (s_key_read (self, self->session, objs [i], key) == 0)
            self->n_keys++;
        else
            cs_key_info_free_members (key);
    }
    return 0;
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
    const char *material = drv_config_get (config, "key-material", "true");
    const char *size = drv_config_get (config, "cache-size", NULL);
    char *end = NULL;
    long value = size ? strtol (size, &end, 10) : S_CACHE_DEFAULT;
    self->material = streq (material, "true") || streq (material, "yes") || streq (material, "1");
    if (!self->material && !streq (material, "false") && !streq (material, "no")
    &&  !streq (material, "0")) {
        zsys_error ("pkcs11 %s: key-material: must be true or false", self->name);
        return -1;
    }
    if ((size && (end == size || *end)) || value < 1 || value > S_CACHE_MAX) {
        zsys_error ("pkcs11 %s: cache-size: must be 1..%d", self->name, S_CACHE_MAX);
        return -1;
    }
    self->cache_size = (size_t) value;
    return 0;
}

static void s_board_close (cs_board_t **board_p);

static int
s_board_open (const char *name, zconfig_t *config, const char *base_dir, cs_board_t **board_p)
{
    const char *module = drv_config_get (config, "module", NULL);
    const char *token = drv_config_get (config, "token", NULL);
    char *pin_path = cs_path_resolve (base_dir, drv_config_get (config, "pin-file", NULL));
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
    if (s_find_slot (self, token) || s_login (self, pin_path) || s_read_keys (self))
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
s_import_free (s_import_t **self_p)
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

static cs_session_t *
s_session_open (cs_board_t *board)
{
    cs_session_t *self = calloc (1, sizeof *self);
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
s_session_close (cs_session_t **session_p)
{
    cs_session_t *self = session_p ? *session_p : NULL;
    if (!self)
        return;
    self->board->fl->C_CloseSession (self->handle);     /* destroys the session objects */
    zhashx_destroy (&self->objects);
    zhashx_destroy (&self->imports);
    free (self);
    *session_p = NULL;
}

/*  Looks up the board's key description for key_id; NULL when absent.  */
static const cs_key_info_t *
s_key_info (cs_board_t *board, const unsigned char *key_id, size_t key_id_len)
{
    for (size_t i = 0; i < board->n_keys; i++)
        if (board->keys [i].id_len == key_id_len && !memcmp (board->keys [i].id, key_id, key_id_len))
            return &board->keys [i];
    return NULL;
}

/*  Returns the private key handle for key_id in this session (cached), or
 *  CK_INVALID_HANDLE.  `fresh` drops the cached handle first.  */
static CK_OBJECT_HANDLE
s_object (cs_session_t *self, const unsigned char *key_id, size_t key_id_len, bool fresh)
{
    char hex [2 * CS_KEY_ID_MAX + 1];
    if (!key_id || key_id_len == 0 || key_id_len > CS_KEY_ID_MAX)
        return CK_INVALID_HANDLE;
    cs_hex_encode (key_id, key_id_len, hex);
    if (fresh)
        zhashx_delete (self->objects, hex);
    uintptr_t cached = (uintptr_t) zhashx_lookup (self->objects, hex);
    if (cached)
        return (CK_OBJECT_HANDLE) (cached - 1);
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &cls, sizeof cls }, { CKA_ID, (void *) key_id, key_id_len }
    };
    CK_OBJECT_HANDLE obj;
    if (s_find (self->board, self->handle, tmpl, 2, &obj, 1) != 1)
        return CK_INVALID_HANDLE;
    zhashx_insert (self->objects, hex, (void *) (uintptr_t) (obj + 1));
    return obj;
}

/* ---- key material as session objects --------------------------------- */

/*  One attribute value made from the PKCS#8 key, wiped after import.  */
typedef struct {
    CK_ATTRIBUTE_TYPE type;
    unsigned char *value;
    size_t len;
} s_part_t;

#define S_PARTS_MAX 8

/*  Reads big-number parameter `name` of pkey into part (big-endian).  */
static int
s_part_bn (EVP_PKEY *pkey, const char *name, CK_ATTRIBUTE_TYPE type, s_part_t *part)
{
    BIGNUM *bn = NULL;
    part->type = type;
    if (!EVP_PKEY_get_bn_param (pkey, name, &bn))
        return -1;
    part->len = (size_t) BN_num_bytes (bn);
    part->value = OPENSSL_malloc (part->len ? part->len : 1);
    if (part->value)
        BN_bn2bin (bn, part->value);
    BN_clear_free (bn);
    return part->value ? 0 : -1;
}

/*  Copies bytes into part.  */
static int
s_part_bytes (const unsigned char *data, size_t len, CK_ATTRIBUTE_TYPE type, s_part_t *part)
{
    part->type = type;
    part->len = len;
    part->value = OPENSSL_memdup (data, len ? len : 1);
    return part->value ? 0 : -1;
}

/*  The RSA components of PKCS#11 2.40 §2.1.3 (CKK_RSA private key).  */
static int
s_parts_rsa (EVP_PKEY *pkey, s_part_t *parts, size_t *n)
{
    static const struct { const char *name; CK_ATTRIBUTE_TYPE type; } map [] = {
        { OSSL_PKEY_PARAM_RSA_N, CKA_MODULUS }, { OSSL_PKEY_PARAM_RSA_E, CKA_PUBLIC_EXPONENT },
        { OSSL_PKEY_PARAM_RSA_D, CKA_PRIVATE_EXPONENT }, { OSSL_PKEY_PARAM_RSA_FACTOR1, CKA_PRIME_1 },
        { OSSL_PKEY_PARAM_RSA_FACTOR2, CKA_PRIME_2 }, { OSSL_PKEY_PARAM_RSA_EXPONENT1, CKA_EXPONENT_1 },
        { OSSL_PKEY_PARAM_RSA_EXPONENT2, CKA_EXPONENT_2 },
        { OSSL_PKEY_PARAM_RSA_COEFFICIENT1, CKA_COEFFICIENT },
    };
    for (size_t i = 0; i < sizeof map / sizeof map [0]; i++)
        if (s_part_bn (pkey, map [i].name, map [i].type, &parts [(*n)++]))
            return -1;
    return 0;
}

/*  EC (§2.3.4: CKA_EC_PARAMS, CKA_VALUE = d) or EdDSA (3.0 §2.3.8: the raw
 *  private key as CKA_VALUE) components.  */
static int
s_parts_curve (EVP_PKEY *pkey, CK_KEY_TYPE type, s_part_t *parts, size_t *n)
{
    cs_key_info_t info = { 0 };
    int rc = drv_key_info_from_pkey (pkey, &info);
    if (rc == 0)
        rc = s_part_bytes (info.ec_params, info.ec_params_len, CKA_EC_PARAMS, &parts [(*n)++]);
    cs_key_info_free_members (&info);
    if (rc)
        return -1;
    if (type == CKK_EC) {
        if (s_part_bn (pkey, OSSL_PKEY_PARAM_PRIV_KEY, CKA_VALUE, &parts [*n]))
            return -1;
        (*n)++;
        return 0;
    }
    unsigned char raw [64];
    size_t raw_len = sizeof raw;
    rc = EVP_PKEY_get_raw_private_key (pkey, raw, &raw_len) ? 0 : -1;
    if (rc == 0)
        rc = s_part_bytes (raw, raw_len, CKA_VALUE, &parts [(*n)++]);
    OPENSSL_cleanse (raw, sizeof raw);
    return rc;
}

static void
s_parts_free (s_part_t *parts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        OPENSSL_clear_free (parts [i].value, parts [i].len ? parts [i].len : 1);
}

/*  Imports key material as a session object: sensitive, not extractable,
 *  never on the token; EC keys with CKA_DERIVE (ECDH).  Sets *bits_p to the
 *  RSA modulus bits (0 for curves) and *type_p to the key type.
 *  Returns CKR_OK, CKR_KEY_HANDLE_INVALID (unparsable DER) or the board's rv.  */
static CK_RV
s_import (cs_session_t *self, const cs_key_t *key, CK_OBJECT_HANDLE *obj_p, size_t *bits_p,
          CK_KEY_TYPE *type_p)
{
    EVP_PKEY *pkey = drv_pkey_from_pkcs8 (key->pkcs8, key->pkcs8_len);
    CK_KEY_TYPE type = pkey ? drv_evp_key_type (pkey) : CKK_VENDOR_DEFINED;
    if (!pkey || !(cs_kt_bit (type) & self->board->caps.material_types)) {
        EVP_PKEY_free (pkey);
        return CKR_KEY_HANDLE_INVALID;
    }
    s_part_t parts [S_PARTS_MAX] = { { 0 } };
    size_t n = 0;
    int rc = type == CKK_RSA ? s_parts_rsa (pkey, parts, &n) : s_parts_curve (pkey, type, parts, &n);
    *bits_p = type == CKK_RSA ? (size_t) EVP_PKEY_get_bits (pkey) : 0;
    *type_p = type;
    EVP_PKEY_free (pkey);
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE, decrypt = type == CKK_RSA ? CK_TRUE : CK_FALSE;
    CK_BBOOL derive = type == CKK_EC ? CK_TRUE : CK_FALSE;
    CK_ATTRIBUTE tmpl [9 + S_PARTS_MAX] = {
        { CKA_CLASS, &cls, sizeof cls }, { CKA_KEY_TYPE, &type, sizeof type },
        { CKA_TOKEN, &no, sizeof no }, { CKA_PRIVATE, &yes, sizeof yes },
        { CKA_SENSITIVE, &yes, sizeof yes }, { CKA_EXTRACTABLE, &no, sizeof no },
        { CKA_SIGN, &yes, sizeof yes }, { CKA_DECRYPT, &decrypt, sizeof decrypt },
        { CKA_DERIVE, &derive, sizeof derive },
    };
    for (size_t i = 0; i < n; i++)
        tmpl [9 + i] = (CK_ATTRIBUTE) { parts [i].type, parts [i].value, parts [i].len };
    CK_RV rv = rc ? CKR_KEY_HANDLE_INVALID
             : self->board->fl->C_CreateObject (self->handle, tmpl, 9 + n, obj_p);
    s_parts_free (parts, n);
    if (rv != CKR_OK && rc == 0)
        zsys_warning ("pkcs11 %s: cannot import a key as a session object: %s",
                      self->board->name, cs_rv_name (rv));
    return rv;
}

/*  Evicts the least recently used imported key, destroying its object.  */
static void
s_import_evict (cs_session_t *self)
{
    const char *oldest = NULL;
    s_import_t *victim = NULL;
    for (s_import_t *e = zhashx_first (self->imports); e; e = zhashx_next (self->imports))
        if (!victim || e->used < victim->used) {
            victim = e;
            oldest = zhashx_cursor (self->imports);
        }
    if (!victim)
        return;
    self->board->fl->C_DestroyObject (self->handle, victim->handle);
    char *copy = strdup (oldest);
    if (copy)
        zhashx_delete (self->imports, copy);
    free (copy);
}

/*  Returns the session object of a keystore key, importing it on a miss.  */
static CK_RV
s_import_cached (cs_session_t *self, const cs_key_t *key, CK_OBJECT_HANDLE *obj_p, size_t *bits_p,
                 CK_KEY_TYPE *type_p)
{
    unsigned char digest [SHA256_DIGEST_LENGTH];
    SHA256 (key->pkcs8, key->pkcs8_len, digest);
    s_import_t *entry = zhashx_lookup (self->imports, key->ref);
    if (entry && CRYPTO_memcmp (entry->digest, digest, sizeof digest) == 0) {
        entry->used = ++self->tick;
        *obj_p = entry->handle;
        *bits_p = entry->bits;
        *type_p = entry->type;
        return CKR_OK;
    }
    if (entry) {
        self->board->fl->C_DestroyObject (self->handle, entry->handle);
        zhashx_delete (self->imports, key->ref);
    }
    CK_RV rv = s_import (self, key, obj_p, bits_p, type_p);
    if (rv != CKR_OK)
        return rv;
    while (zhashx_size (self->imports) >= self->board->cache_size)
        s_import_evict (self);
    if (!(entry = calloc (1, sizeof *entry)))
        return CKR_OK;                      /* used uncached: destroyed with the session */
    *entry = (s_import_t) { *obj_p, *bits_p, *type_p, { 0 }, ++self->tick };
    memcpy (entry->digest, digest, sizeof digest);
    if (zhashx_insert (self->imports, key->ref, entry))
        free (entry);
    return CKR_OK;
}

/*  Runs C_XxxInit + C_Xxx once; `sign` picks C_Sign over C_Decrypt.  Empty
 *  input (in may be NULL then: protobuf-c's empty bytes) goes as a non-NULL
 *  pointer: SoftHSM 2.6 answers C_Sign/C_Decrypt (NULL, 0) with
 *  CKR_ARGUMENTS_BAD and leaves the operation active, so every later job on
 *  this worker's session failed with CKR_OPERATION_ACTIVE (found by
 *  tests/fuzz/cs-fuzz-frames).  */
static CK_RV
s_run (cs_session_t *self, CK_OBJECT_HANDLE obj, CK_MECHANISM *mech, bool sign,
       const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len)
{
    static const unsigned char empty [1];
    CK_FUNCTION_LIST_PTR fl = self->board->fl;
    CK_ULONG len = *out_len;
    if (!in)
        in = empty;
    CK_RV rv = sign ? fl->C_SignInit (self->handle, mech, obj)
                    : fl->C_DecryptInit (self->handle, mech, obj);
    if (rv != CKR_OK)
        return rv;
    rv = sign ? fl->C_Sign (self->handle, (CK_BYTE_PTR) in, in_len, out, &len)
              : fl->C_Decrypt (self->handle, (CK_BYTE_PTR) in, in_len, out, &len);
    if (rv == CKR_BUFFER_TOO_SMALL) {       /* the operation stays active: end it */
        unsigned char scratch [2048];
        CK_ULONG big = sizeof scratch;
        if (sign) fl->C_Sign (self->handle, (CK_BYTE_PTR) in, in_len, scratch, &big);
        else fl->C_Decrypt (self->handle, (CK_BYTE_PTR) in, in_len, scratch, &big);
        OPENSSL_cleanse (scratch, sizeof scratch);
    }
    if (rv == CKR_OK)
        *out_len = len;
    return rv;
}

/*  How an operation runs on the board.  */
typedef enum {
    S_NATIVE,                       /* the mechanism as given */
    S_OAEP_RAW,                     /* CKM_RSA_X_509 decrypt, then OpenSSL removes OAEP */
    S_PSS_RAW,                      /* OpenSSL encodes EMSA-PSS, then CKM_RSA_X_509 sign */
    S_DERIVE                        /* CKM_ECDH1_DERIVE with CKD_NULL: the raw Z */
} s_path_t;

/*  An operation to run on a key: the mechanism, the data, and the path
 *  (native, or one of the fallbacks for what the board lacks).  */
typedef struct {
    CK_MECHANISM mech;
    bool sign;
    s_path_t path;
    const cs_mech_t *params;        /* S_OAEP_RAW, S_PSS_RAW: hash, MGF, salt, label */
    const unsigned char *in;        /* S_DERIVE: the peer point 04||X||Y */
    size_t in_len;
    unsigned char *out;
    size_t *out_len;
} s_op_t;

/*  OAEP that the board cannot do natively: raw RSA on the board, then
 *  OpenSSL removes the padding.  The raw block is left-padded to k bytes.  */
static CK_RV
s_run_oaep_raw (cs_session_t *self, CK_OBJECT_HANDLE obj, size_t k, const s_op_t *op)
{
    if (op->in_len != k || k == 0 || k > 1024)
        return CKR_ENCRYPTED_DATA_LEN_RANGE;
    unsigned char raw [1024], em [1024];
    size_t raw_len = sizeof raw;
    CK_MECHANISM m = { CKM_RSA_X_509, NULL, 0 };
    CK_RV rv = s_run (self, obj, &m, false, op->in, op->in_len, raw, &raw_len);
    if (rv == CKR_OK && raw_len > k)
        rv = CKR_ENCRYPTED_DATA_INVALID;
    if (rv == CKR_OK) {
        memset (em, 0, k - raw_len);
        memcpy (em + k - raw_len, raw, raw_len);
        rv = drv_oaep_unpad (em, k, op->params, op->out, op->out_len);
    }
    OPENSSL_cleanse (raw, sizeof raw);
    OPENSSL_cleanse (em, sizeof em);
    return rv;
}

/*  PSS that the board cannot do natively (SoftHSM 2.6 wants the MGF1 hash
 *  equal to the hash): OpenSSL makes EM (RFC 8017 §9.1.1) and the board
 *  runs the RSA private-key primitive on it (CKM_RSA_X_509).  */
static CK_RV
s_run_pss_raw (cs_session_t *self, CK_OBJECT_HANDLE obj, size_t bits, const s_op_t *op)
{
    size_t k = (bits + 7) / 8;
    unsigned char em [1024];
    if (k == 0 || k > sizeof em)
        return CKR_KEY_SIZE_RANGE;
    CK_MECHANISM m = { CKM_RSA_X_509, NULL, 0 };
    CK_RV rv = drv_pss_encode (op->params, op->in, op->in_len, bits, em, k);
    if (rv == CKR_OK)
        rv = s_run (self, obj, &m, true, em, k, op->out, op->out_len);
    OPENSSL_cleanse (em, sizeof em);
    return rv;
}

/*  Reads CKA_VALUE of a derived secret into op->out and destroys it.  */
static CK_RV
s_take_secret (cs_session_t *self, CK_OBJECT_HANDLE secret, const s_op_t *op)
{
    CK_FUNCTION_LIST_PTR fl = self->board->fl;
    unsigned char value [256];
    CK_ATTRIBUTE attr = { CKA_VALUE, value, sizeof value };
    CK_RV rv = fl->C_GetAttributeValue (self->handle, secret, &attr, 1);
    fl->C_DestroyObject (self->handle, secret);
    if (rv == CKR_OK && attr.ulValueLen > *op->out_len)
        rv = CKR_BUFFER_TOO_SMALL;
    if (rv == CKR_OK) {
        memcpy (op->out, value, attr.ulValueLen);
        *op->out_len = attr.ulValueLen;
    }
    else
    if (rv != CKR_BUFFER_TOO_SMALL)
        rv = CKR_DEVICE_ERROR;
    OPENSSL_cleanse (value, sizeof value);
    return rv;
}

/*  ECDH on the board: C_DeriveKey with CKD_NULL into a session secret key
 *  of the field size (not sensitive, extractable: it must come out, as Z),
 *  read and destroyed at once.  The peer point goes as a DER OCTET STRING
 *  (PKCS#11 2.40 §2.3.14 allows either form; SoftHSM takes both); a token
 *  that refuses it gets the raw point.  */
static CK_RV
s_run_derive (cs_session_t *self, CK_OBJECT_HANDLE obj, const s_op_t *op)
{
    size_t der_len = 0;
    unsigned char *der = drv_der_octet_string (op->in, op->in_len, &der_len);
    CK_ECDH1_DERIVE_PARAMS params = { CKD_NULL, 0, NULL, der_len, der };
    CK_MECHANISM mech = { CKM_ECDH1_DERIVE, &params, sizeof params };
    CK_OBJECT_CLASS cls = CKO_SECRET_KEY;
    CK_KEY_TYPE type = CKK_GENERIC_SECRET;
    CK_ULONG len = (op->in_len - 1) / 2;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &cls, sizeof cls }, { CKA_KEY_TYPE, &type, sizeof type },
        { CKA_TOKEN, &no, sizeof no }, { CKA_PRIVATE, &yes, sizeof yes },
        { CKA_SENSITIVE, &no, sizeof no }, { CKA_EXTRACTABLE, &yes, sizeof yes },
        { CKA_VALUE_LEN, &len, sizeof len },
    };
    CK_OBJECT_HANDLE secret = CK_INVALID_HANDLE;
    if (!der)
        return CKR_HOST_MEMORY;
    CK_RV rv = self->board->fl->C_DeriveKey (self->handle, &mech, obj, tmpl, 7, &secret);
    if (rv == CKR_MECHANISM_PARAM_INVALID || rv == CKR_ARGUMENTS_BAD) {
        params.ulPublicDataLen = op->in_len;
        params.pPublicData = (CK_BYTE_PTR) op->in;
        rv = self->board->fl->C_DeriveKey (self->handle, &mech, obj, tmpl, 7, &secret);
    }
    free (der);
    if (rv != CKR_OK)
        return rv == CKR_ARGUMENTS_BAD ? CKR_MECHANISM_PARAM_INVALID : rv;
    return s_take_secret (self, secret, op);
}

/*  Refuses what the board may mis-report: a mechanism for another key type
 *  (PKCS#11 2.40 §5.11 C_SignInit, §5.9 C_DecryptInit:
 *  CKR_KEY_TYPE_INCONSISTENT), and PSS input that is not one hash long
 *  (PKCS#11 2.40 curr. mech. "PKCS #1 RSA PSS": the input is the hash;
 *  C_Sign: CKR_DATA_LEN_RANGE), as the openssl driver does (drv_util.c).
 *  SoftHSM 2.6 takes both and fails in C_Sign with
 *  CKR_GENERAL_ERROR.  `type` CKK_VENDOR_DEFINED (unknown) leaves the type
 *  to the board.  */
static CK_RV
s_op_check (const s_op_t *op, CK_KEY_TYPE type)
{
    CK_KEY_TYPE want = CKK_VENDOR_DEFINED;
    switch (op->mech.mechanism) {
        case CKM_RSA_PKCS: case CKM_RSA_PKCS_PSS: case CKM_RSA_X_509: case CKM_RSA_PKCS_OAEP:
            want = CKK_RSA;
            break;
        case CKM_ECDSA: case CKM_ECDH1_DERIVE:
            want = CKK_EC;
            break;
        case CKM_EDDSA:
            want = CKK_EC_EDWARDS;
            break;
    }
    if (type != CKK_VENDOR_DEFINED && want != CKK_VENDOR_DEFINED && type != want)
        return CKR_KEY_TYPE_INCONSISTENT;
    if (op->sign && op->mech.mechanism == CKM_RSA_PKCS_PSS
    &&  op->in_len != (size_t) EVP_MD_get_size (drv_md_from_ckm (op->params->hash)))
        return CKR_DATA_LEN_RANGE;
    return CKR_OK;
}

static CK_RV
s_run_op (cs_session_t *self, CK_OBJECT_HANDLE obj, size_t bits, s_op_t *op)
{
    switch (op->path) {
        case S_OAEP_RAW: return s_run_oaep_raw (self, obj, (bits + 7) / 8, op);
        case S_PSS_RAW:  return s_run_pss_raw (self, obj, bits, op);
        case S_DERIVE:   return s_run_derive (self, obj, op);
        default:
            return s_run (self, obj, &op->mech, op->sign, op->in, op->in_len, op->out, op->out_len);
    }
}

/*  Bits of a big-endian modulus.  */
static size_t
s_modulus_bits (const unsigned char *m, size_t len)
{
    while (len && !*m) {
        m++;
        len--;
    }
    size_t bits = len ? (len - 1) * 8 : 0;
    for (unsigned c = len ? m [0] : 0; c; c >>= 1)
        bits++;
    return bits;
}

/*  The RSA fallbacks need the modulus size.  */
static bool
s_needs_bits (const s_op_t *op)
{
    return op->path == S_OAEP_RAW || op->path == S_PSS_RAW;
}

/*  A resident key not found: CKR_USER_NOT_LOGGED_IN when the session lost
 *  its login (private objects are invisible then; the worker reopens its
 *  session and s_login_again logs in, issue #9), else CKR_KEY_HANDLE_INVALID.  */
static CK_RV
s_not_found (cs_session_t *self)
{
    CK_SESSION_INFO info;
    CK_RV rv = self->board->fl->C_GetSessionInfo (self->handle, &info);
    if (rv != CKR_OK)
        return rv;
    return info.state == CKS_RW_USER_FUNCTIONS || info.state == CKS_RO_USER_FUNCTIONS
         ? CKR_KEY_HANDLE_INVALID : CKR_USER_NOT_LOGGED_IN;
}

/*  Runs op on a resident key, re-finding the key once if its cached handle
 *  went stale (a token re-imported the key).  */
static CK_RV
s_run_resident (cs_session_t *self, const cs_key_t *key, s_op_t *op)
{
    const cs_key_info_t *info = s_key_info (self->board, key->id, key->id_len);
    CK_RV rv = CKR_KEY_HANDLE_INVALID;
    for (int attempt = 0; attempt < 2; attempt++) {
        CK_OBJECT_HANDLE obj = s_object (self, key->id, key->id_len, attempt > 0);
        if (obj == CK_INVALID_HANDLE)
            return s_not_found (self);
        CK_KEY_TYPE type = info ? info->key_type : CKK_VENDOR_DEFINED;
        if (!info && !s_attr_get (self->board, self->handle, obj, CKA_KEY_TYPE, &type, sizeof type))
            type = CKK_VENDOR_DEFINED;
        if ((rv = s_op_check (op, type)) != CKR_OK)
            return rv;
        size_t bits = info && info->key_type == CKK_RSA ? s_modulus_bits (info->modulus, info->modulus_len) : 0;
        if (s_needs_bits (op) && !info) {   /* generated after open: ask the object */
            size_t len = 0;
            unsigned char *modulus = s_attr_alloc (self->board, self->handle, obj, CKA_MODULUS, &len);
            bits = modulus ? s_modulus_bits (modulus, len) : 0;
            free (modulus);
        }
        if (s_needs_bits (op) && !bits)
            return CKR_KEY_TYPE_INCONSISTENT;
        rv = s_run_op (self, obj, bits, op);
        if (rv != CKR_OBJECT_HANDLE_INVALID && rv != CKR_KEY_HANDLE_INVALID)
            break;
    }
    return rv == CKR_OBJECT_HANDLE_INVALID || rv == CKR_KEY_HANDLE_INVALID ? s_not_found (self) : rv;
}

/*  Runs op on key material: a cached session object for a keystore key, a
 *  throw-away one for a per-request key.  */
static CK_RV
s_run_material (cs_session_t *self, const cs_key_t *key, s_op_t *op)
{
    CK_OBJECT_HANDLE obj = CK_INVALID_HANDLE;
    size_t bits = 0;
    CK_KEY_TYPE type = CKK_VENDOR_DEFINED;
    bool cached = key->ref && *key->ref;
    if (!(self->board->caps.flags & CS_CAP_KEY_MATERIAL))
        return CKR_KEY_HANDLE_INVALID;
    CK_RV rv = cached ? s_import_cached (self, key, &obj, &bits, &type)
                      : s_import (self, key, &obj, &bits, &type);
    if (rv != CKR_OK)
        return rv;
    if ((rv = s_op_check (op, type)) == CKR_OK)
        rv = s_needs_bits (op) && !bits ? CKR_KEY_TYPE_INCONSISTENT : s_run_op (self, obj, bits, op);
    if (!cached)
        self->board->fl->C_DestroyObject (self->handle, obj);
    return rv;
}

static CK_RV
s_run_key (cs_session_t *self, const cs_key_t *key, s_op_t *op)
{
    if (key->pkcs8 && key->pkcs8_len)
        return s_run_material (self, key, op);
    return s_run_resident (self, key, op);
}

/*  The MGF1 id that goes with hash (the only MGF SoftHSM 2.6 accepts).  */
static CK_RSA_PKCS_MGF_TYPE
s_mgf_of (CK_MECHANISM_TYPE hash)
{
    switch (hash) {
        case CKM_SHA_1:  return CKG_MGF1_SHA1;
        case CKM_SHA224: return CKG_MGF1_SHA224;
        case CKM_SHA256: return CKG_MGF1_SHA256;
        case CKM_SHA384: return CKG_MGF1_SHA384;
        case CKM_SHA512: return CKG_MGF1_SHA512;
        default:         return 0;
    }
}

/*  PSS runs natively when the board has CKM_RSA_PKCS_PSS and the MGF1 hash
 *  is the hash; otherwise EMSA-PSS is encoded here and the board runs raw
 *  RSA (when it has CKM_RSA_X_509 signing).  */
static CK_RV
s_sign (cs_session_t *self, const cs_key_t *key, const cs_mech_t *mech,
        const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len)
{
    CK_RSA_PKCS_PSS_PARAMS pss = { mech->hash, mech->mgf, mech->salt_len };
    s_op_t op = { { mech->type, NULL, 0 }, true, S_NATIVE, mech, in, in_len, out, out_len };
    if (mech->type == CKM_RSA_PKCS_PSS) {
        if (!drv_md_from_ckm (mech->hash) || !drv_md_from_mgf (mech->mgf))
            return CKR_MECHANISM_PARAM_INVALID;
        bool native = self->board->native_pss && s_mgf_of (mech->hash) == mech->mgf;
        if (!native && self->board->raw_sign)
            op.path = S_PSS_RAW;
        op.mech.pParameter = &pss;
        op.mech.ulParameterLen = sizeof pss;
    }
    else
    if (mech->type != CKM_RSA_PKCS && mech->type != CKM_ECDSA && mech->type != CKM_RSA_X_509
    &&  mech->type != CKM_EDDSA)
        return CKR_MECHANISM_INVALID;
    return s_run_key (self, key, &op);
}

static CK_RV
s_decrypt (cs_session_t *self, const cs_key_t *key, const cs_mech_t *mech,
           const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len)
{
    CK_RSA_PKCS_OAEP_PARAMS oaep = { CKM_SHA_1, CKG_MGF1_SHA1, CKZ_DATA_SPECIFIED, NULL, 0 };
    s_op_t op = { { mech->type, NULL, 0 }, false, S_NATIVE, mech, in, in_len, out, out_len };
    if (mech->type == CKM_RSA_PKCS || mech->type == CKM_RSA_X_509)
        return s_run_key (self, key, &op);
    if (mech->type != CKM_RSA_PKCS_OAEP)
        return CKR_MECHANISM_INVALID;
    if (!drv_md_from_ckm (mech->hash) || !drv_md_from_mgf (mech->mgf))
        return CKR_MECHANISM_PARAM_INVALID;
    bool sha1_plain = mech->hash == CKM_SHA_1 && mech->mgf == CKG_MGF1_SHA1 && mech->label_len == 0;
    if (sha1_plain && self->board->native_oaep) {
        op.mech.pParameter = &oaep;
        op.mech.ulParameterLen = sizeof oaep;
        return s_run_key (self, key, &op);
    }
    if (!self->board->raw_rsa)
        return CKR_MECHANISM_PARAM_INVALID;
    op.path = S_OAEP_RAW;
    return s_run_key (self, key, &op);
}

/*  CS_DRV_DERIVE_KEY (cs_driver.h): ECDH on the board, resident or material.  */
static CK_RV
s_derive (cs_session_t *self, const cs_key_t *key, const unsigned char *point, size_t point_len,
          unsigned char *out, size_t *out_len)
{
    s_op_t op = { { CKM_ECDH1_DERIVE, NULL, 0 }, false, S_DERIVE, NULL, point, point_len, out, out_len };
    if (!(self->board->caps.flags & CS_CAP_DERIVE))
        return CKR_FUNCTION_NOT_SUPPORTED;
    if (!point || point_len < 65 || point_len > 133 || point_len % 2 == 0 || point [0] != 0x04)
        return CKR_MECHANISM_PARAM_INVALID;
    if (*out_len < (point_len - 1) / 2)
        return CKR_BUFFER_TOO_SMALL;
    return s_run_key (self, key, &op);
}

/* ---- resident keys: generation and destruction ----------------------- */

/*  The public template of a resident key pair generation.  */
static CK_ULONG
s_gen_public (const cs_keygen_t *gen, CK_ATTRIBUTE *t, CK_BBOOL *yes, CK_ULONG *bits)
{
    static const unsigned char f4 [] = { 0x01, 0x00, 0x01 };
    CK_ULONG n = 0;
    t [n++] = (CK_ATTRIBUTE) { CKA_TOKEN, yes, sizeof *yes };
    t [n++] = (CK_ATTRIBUTE) { CKA_VERIFY, yes, sizeof *yes };
    t [n++] = (CK_ATTRIBUTE) { CKA_ID, (void *) gen->id, gen->id_len };
    if (gen->label)
        t [n++] = (CK_ATTRIBUTE) { CKA_LABEL, (void *) gen->label, strlen (gen->label) };
    if (gen->mechanism == CKM_RSA_PKCS_KEY_PAIR_GEN) {
        *bits = gen->modulus_bits;
        t [n++] = (CK_ATTRIBUTE) { CKA_ENCRYPT, yes, sizeof *yes };
        t [n++] = (CK_ATTRIBUTE) { CKA_MODULUS_BITS, bits, sizeof *bits };
        t [n++] = gen->public_exponent_len
                ? (CK_ATTRIBUTE) { CKA_PUBLIC_EXPONENT, (void *) gen->public_exponent,
                                   gen->public_exponent_len }
                : (CK_ATTRIBUTE) { CKA_PUBLIC_EXPONENT, (void *) f4, sizeof f4 };
    }
    else
        t [n++] = (CK_ATTRIBUTE) { CKA_EC_PARAMS, (void *) gen->ec_params, gen->ec_params_len };
    return n;
}

/*  The private template: a token key, private, sensitive, never extractable.  */
static CK_ULONG
s_gen_private (const cs_keygen_t *gen, CK_ATTRIBUTE *t, CK_BBOOL *yes, CK_BBOOL *no,
               CK_BBOOL *sign, CK_BBOOL *decrypt)
{
    CK_ULONG n = 0;
    *sign = gen->can_sign ? CK_TRUE : CK_FALSE;
    *decrypt = gen->can_decrypt && gen->mechanism == CKM_RSA_PKCS_KEY_PAIR_GEN ? CK_TRUE : CK_FALSE;
    t [n++] = (CK_ATTRIBUTE) { CKA_TOKEN, yes, sizeof *yes };
    t [n++] = (CK_ATTRIBUTE) { CKA_PRIVATE, yes, sizeof *yes };
    t [n++] = (CK_ATTRIBUTE) { CKA_SENSITIVE, yes, sizeof *yes };
    t [n++] = (CK_ATTRIBUTE) { CKA_EXTRACTABLE, no, sizeof *no };
    t [n++] = (CK_ATTRIBUTE) { CKA_SIGN, sign, sizeof *sign };
    t [n++] = (CK_ATTRIBUTE) { CKA_ID, (void *) gen->id, gen->id_len };
    if (gen->label)
        t [n++] = (CK_ATTRIBUTE) { CKA_LABEL, (void *) gen->label, strlen (gen->label) };
    if (gen->mechanism == CKM_RSA_PKCS_KEY_PAIR_GEN)
        t [n++] = (CK_ATTRIBUTE) { CKA_DECRYPT, decrypt, sizeof *decrypt };
    return n;
}

static CK_RV
s_generate_resident (cs_session_t *self, const cs_keygen_t *gen, cs_key_info_t *info)
{
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE, sign, decrypt;
    CK_ULONG bits = 0;
    CK_ATTRIBUTE pub [8], priv [8];
    CK_MECHANISM mech = { gen->mechanism, NULL, 0 };
    CK_OBJECT_HANDLE pub_obj, priv_obj;
    if (!gen->id || gen->id_len == 0 || gen->id_len > CS_KEY_ID_MAX)
        return CKR_ARGUMENTS_BAD;
    if (gen->mechanism != CKM_RSA_PKCS_KEY_PAIR_GEN && gen->mechanism != CKM_EC_KEY_PAIR_GEN
    &&  gen->mechanism != CKM_EC_EDWARDS_KEY_PAIR_GEN)
        return CKR_MECHANISM_INVALID;
    CK_ULONG n_pub = s_gen_public (gen, pub, &yes, &bits);
    CK_ULONG n_priv = s_gen_private (gen, priv, &yes, &no, &sign, &decrypt);
    CK_RV rv = self->board->fl->C_GenerateKeyPair (self->handle, &mech, pub, n_pub, priv, n_priv,
                                                   &pub_obj, &priv_obj);
    if (rv != CKR_OK) {
        zsys_warning ("pkcs11 %s: C_GenerateKeyPair: %s", self->board->name, cs_rv_name (rv));
        return rv;
    }
    memset (info, 0, sizeof *info);
    if (s_key_read (self->board, self->handle, priv_obj, info) == 0)
        return CKR_OK;
    cs_key_info_free_members (info);
    self->board->fl->C_DestroyObject (self->handle, priv_obj);
    self->board->fl->C_DestroyObject (self->handle, pub_obj);
    return CKR_DEVICE_ERROR;
}

static CK_RV
s_destroy_resident (cs_session_t *self, const unsigned char *id, size_t id_len)
{
    CK_ATTRIBUTE tmpl [] = { { CKA_ID, (void *) id, id_len } };
    CK_OBJECT_HANDLE objs [16];
    CK_RV rv = CKR_OK;
    if (!id || id_len == 0 || id_len > CS_KEY_ID_MAX)
        return CKR_ARGUMENTS_BAD;
    CK_ULONG count = s_find (self->board, self->handle, tmpl, 1, objs, 16);
    for (CK_ULONG i = 0; i < count; i++) {
        CK_RV one = self->board->fl->C_DestroyObject (self->handle, objs [i]);
        if (one != CKR_OK)
            rv = one;
    }
    char hex [2 * CS_KEY_ID_MAX + 1];
    cs_hex_encode (id, id_len, hex);
    zhashx_delete (self->objects, hex);
    return rv;
}

static size_t
s_session_cached (cs_session_t *self)
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
    { CS_DRV_SIGN_KEY, (cs_driver_fn_t) s_sign },
    { CS_DRV_DECRYPT_KEY, (cs_driver_fn_t) s_decrypt },
    { CS_DRV_GENERATE_RESIDENT, (cs_driver_fn_t) s_generate_resident },
    { CS_DRV_DESTROY_RESIDENT, (cs_driver_fn_t) s_destroy_resident },
    { CS_DRV_SESSION_CACHED, (cs_driver_fn_t) s_session_cached },
    { CS_DRV_DERIVE_KEY, (cs_driver_fn_t) s_derive },
    { 0, NULL }
};

CS_DRIVER_EXPORT ("pkcs11",
                  "PKCS#11 library token (SoftHSMv2 or a vendor HSM)",
                  s_dispatch)
