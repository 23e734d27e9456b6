/*  driver_fault.c — a board that misbehaves on purpose (issue #9): it loads
 *  another driver as its inner board and passes every call through, then
 *  adds the faults its config asks for, so the broker's health checks
 *  (verify before release, quarantine, time limits, probes) can be tested
 *  with the same faults in unit tests, integration tests and by hand.
 *
 *  Config (drivers/<name>, cryptoserver-broker.conf(5) "The fault driver"):
 *    inner        a section: the inner board's own config, with its `type`
 *                 (any driver of the broker's driver directory but `fault`)
 *    flip-every   N: flip one bit of every Nth successful result (0: never)
 *    fail         true: every operation returns CKR_DEVICE_ERROR
 *    fail-file    PATH: operations fail (CKR_DEVICE_ERROR) while PATH exists
 *    hang         true: every operation blocks until the board is closed,
 *                 then returns CKR_DEVICE_REMOVED
 *    hang-after   N: the same for every operation after the first N
 *    delay-ms     N: every operation sleeps N ms before it runs
 *    die          true: the first operation dies (below)
 *    die-after    N: the operation after the first N dies
 *    stuck-every  N: every Nth operation fails inside the operation and
 *                 leaves it open, as a vendor library can (C_SignInit
 *                 worked, C_Sign failed and the session still holds the
 *                 operation): it answers CKR_DEVICE_ERROR, and from then on
 *                 every operation on that session answers
 *                 CKR_OPERATION_ACTIVE until the session is closed
 *  Operations are sign, decrypt, derive, raw modexp (when the inner board
 *  has it: a shared key's partial results, issue #24), generate and
 *  destroy; opening,
 *  keys, mechanisms and capabilities are the inner board's.  The counters
 *  are per board (all its sessions), atomic.
 *
 *  "Die" is a vendor library whose internal thread crashed inside a call:
 *  the dying call never returns to the broker (it blocks until the board is
 *  closed, which the broker never does while a worker is stuck in it, then
 *  answers CKR_DEVICE_REMOVED), and from then on the device is gone: every
 *  other operation on any session of the board answers CKR_DEVICE_REMOVED
 *  at once and no new session opens.  It is not a pthread_exit of the
 *  worker thread: a thread that ends inside a driver call never gives its
 *  ZeroMQ sockets and its actor pipe back, so nothing could stop the broker
 *  afterwards; a thread stuck in the call is what a real dying library
 *  leaves, and the broker survives it (the call's time limit abandons it,
 *  the item is re-run on another board, the board leaves rotation, and at
 *  exit the worker is left behind with a warning: board_watch.h, server.c).
 *
 *  A fault board may be closed while an operation hangs (the broker closes
 *  it only after its sessions, but tests do not): the close wakes the hung
 *  calls and the inner board is closed by the last of close and session
 *  closes.
 */
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#include "cs_util.h"
#include "cs_driver.h"

struct cs_board_s {
    char *name;
    void *dl;                           /* the inner driver */
    const cs_driver_t *inner;
    cs_board_t *handle;                 /* the inner board */
    unsigned long flip_every;
    unsigned long hang_after;           /* ULONG_MAX: never */
    bool fail;
    char *fail_file;
    long delay_ms;
    unsigned long die_after;            /* ULONG_MAX: never */
    unsigned long stuck_every;          /* 0: never */
    atomic_bool dead;                   /* an operation died: the device is gone */
    atomic_ulong calls;                 /* operations started */
    atomic_ulong results;               /* successful results */
    pthread_mutex_t lock;
    pthread_cond_t closed_cond;
    bool closed;                        /* under lock */
    unsigned users;                     /* under lock: 1 (open) + sessions */
};

struct cs_drv_session_s {
    cs_board_t *board;
    cs_drv_session_t *inner;
    bool stuck;                         /* an operation was left open (stuck-every) */
};

static cs_drv_board_open_fn s_board_open;
static cs_drv_board_close_fn s_board_close;
static cs_drv_board_mechanisms_fn s_board_mechanisms;
static cs_drv_board_keys_fn s_board_keys;
static cs_drv_session_open_fn s_session_open;
static cs_drv_session_close_fn s_session_close;
static cs_drv_capabilities_fn s_capabilities;
static cs_drv_sign_key_fn s_sign_key;
static cs_drv_decrypt_key_fn s_decrypt_key;
static cs_drv_derive_key_fn s_derive_key;
static cs_drv_generate_material_fn s_generate_material;
static cs_drv_generate_resident_fn s_generate_resident;
static cs_drv_destroy_resident_fn s_destroy_resident;
static cs_drv_session_cached_fn s_session_cached;

/*  The inner driver's function `id`, or NULL.  */
static cs_driver_fn_t
s_fn (const cs_board_t *self, int id)
{
    return cs_driver_lookup (self->inner, id);
}

/*  Closes the inner board and unloads it, once nobody uses it.  */
static void
s_release (cs_board_t *self)
{
    pthread_mutex_lock (&self->lock);
    bool last = --self->users == 0;
    pthread_mutex_unlock (&self->lock);
    if (!last)
        return;
    cs_drv_board_close_fn *close = (cs_drv_board_close_fn *) (self->inner ? s_fn (self, CS_DRV_BOARD_CLOSE) : NULL);
    if (close && self->handle)
        close (&self->handle);
    if (self->dl)
        dlclose (self->dl);
    pthread_mutex_destroy (&self->lock);
    pthread_cond_destroy (&self->closed_cond);
    free (self->fail_file);
    free (self->name);
    free (self);
}

/*  The directory this driver was loaded from: the inner driver's too.  */
static int
s_driver_dir (char *dir, size_t size)
{
    Dl_info info;
    if (!dladdr ((void *) s_fn, &info) || !info.dli_fname)
        return -1;
    snprintf (dir, size, "%s", info.dli_fname);
    char *slash = strrchr (dir, '/');
    if (!slash)
        snprintf (dir, size, ".");
    else
        *slash = 0;
    return 0;
}

/*  Loads and opens the inner board of the "inner" section.  */
static int
s_inner_open (cs_board_t *self, zconfig_t *config, const char *base_dir)
{
    zconfig_t *inner = zconfig_locate (config, "inner");
    const char *type = inner ? zconfig_get (inner, "type", NULL) : NULL;
    char dir [4096], path [4200];
    if (!type || !*type || streq (type, "fault") || strchr (type, '/')) {
        zsys_error ("fault %s: needs an 'inner' section with the type of another driver", self->name);
        return -1;
    }
    if (s_driver_dir (dir, sizeof dir))
        return -1;
    snprintf (path, sizeof path, "%s/%s.so", dir, type);
    if (!(self->dl = dlopen (path, RTLD_NOW | RTLD_LOCAL))) {
        zsys_error ("fault %s: cannot load the inner driver %s: %s", self->name, path, dlerror ());
        return -1;
    }
    cs_driver_entry_fn *entry = (cs_driver_entry_fn *) dlsym (self->dl, CS_DRIVER_ENTRY_SYMBOL);
    self->inner = entry ? entry () : NULL;
    cs_drv_board_open_fn *open = self->inner && self->inner->abi_version == CS_DRIVER_ABI_VERSION
                               ? (cs_drv_board_open_fn *) s_fn (self, CS_DRV_BOARD_OPEN) : NULL;
    if (!open) {
        zsys_error ("fault %s: %s is not a driver of ABI version %d", self->name, path, CS_DRIVER_ABI_VERSION);
        self->inner = NULL;
        return -1;
    }
    return open (self->name, inner, base_dir, &self->handle);
}

/*  Parses a non-negative number; -1 when it is not one.  */
static long
s_number (const char *value)
{
    char *end = NULL;
    errno = 0;
    long n = strtol (value, &end, 10);
    return errno || end == value || *end || n < 0 ? -1 : n;
}

/*  Reads the fault settings.  */
static int
s_settings (cs_board_t *self, zconfig_t *config)
{
    const char *fail = zconfig_get (config, "fail", "false");
    const char *hang = zconfig_get (config, "hang", "false");
    const char *die = zconfig_get (config, "die", "false");
    long die_after = s_number (zconfig_get (config, "die-after", "-"));
    long flip = s_number (zconfig_get (config, "flip-every", "0"));
    long after = s_number (zconfig_get (config, "hang-after", "-"));
    long delay = s_number (zconfig_get (config, "delay-ms", "0"));
    long stuck = s_number (zconfig_get (config, "stuck-every", "0"));
    bool bools_ok = (streq (fail, "true") || streq (fail, "false"))
                 && (streq (hang, "true") || streq (hang, "false"))
                 && (streq (die, "true") || streq (die, "false"));
    if (!bools_ok || flip < 0 || delay < 0 || stuck < 0
    ||  (after < 0 && !streq (zconfig_get (config, "hang-after", "-"), "-"))
    ||  (die_after < 0 && !streq (zconfig_get (config, "die-after", "-"), "-"))) {
        zsys_error ("fault %s: flip-every, stuck-every, hang-after, die-after and delay-ms take a number >= 0, "
                    "fail, hang and die take true or false", self->name);
        return -1;
    }
    self->fail = streq (fail, "true");
    self->flip_every = (unsigned long) flip;
    self->stuck_every = (unsigned long) stuck;
    self->hang_after = streq (hang, "true") ? 0 : after >= 0 ? (unsigned long) after : ULONG_MAX;
    self->delay_ms = delay;
    self->die_after = streq (die, "true") ? 0 : die_after >= 0 ? (unsigned long) die_after : ULONG_MAX;
    const char *fail_file = zconfig_get (config, "fail-file", NULL);
    if (fail_file && !(self->fail_file = strdup (fail_file)))
        return -1;
    return 0;
}

static int
s_board_open (const char *name, zconfig_t *config, const char *base_dir, cs_board_t **board_p)
{
    cs_board_t *self = calloc (1, sizeof *self);
    if (!self || !(self->name = strdup (name))) {
        free (self);
        return -1;
    }
    pthread_mutex_init (&self->lock, NULL);
    pthread_cond_init (&self->closed_cond, NULL);
    self->users = 1;
    if (s_settings (self, config) || s_inner_open (self, config, base_dir)) {
        s_release (self);
        return -1;
    }
    zsys_info ("fault %s: over a %s board: flip-every %lu, stuck-every %lu, fail %s%s%s, hang-after %ld, "
               "die-after %ld, delay %ld ms", name, self->inner->type, self->flip_every, self->stuck_every,
               self->fail ? "true" : "false",
               self->fail_file ? ", fail-file " : "", self->fail_file ? self->fail_file : "",
               self->hang_after == ULONG_MAX ? -1L : (long) self->hang_after,
               self->die_after == ULONG_MAX ? -1L : (long) self->die_after, self->delay_ms);
    *board_p = self;
    return 0;
}

static void
s_board_close (cs_board_t **board_p)
{
    cs_board_t *self = board_p ? *board_p : NULL;
    if (!self)
        return;
    pthread_mutex_lock (&self->lock);
    self->closed = true;
    pthread_cond_broadcast (&self->closed_cond);
    pthread_mutex_unlock (&self->lock);
    s_release (self);
    *board_p = NULL;
}

static int
s_board_mechanisms (cs_board_t *self, cs_mech_info_t **mechs_p, size_t *count_p)
{
    return ((cs_drv_board_mechanisms_fn *) s_fn (self, CS_DRV_BOARD_MECHANISMS)) (self->handle, mechs_p, count_p);
}

static int
s_board_keys (cs_board_t *self, cs_key_info_t **keys_p, size_t *count_p)
{
    return ((cs_drv_board_keys_fn *) s_fn (self, CS_DRV_BOARD_KEYS)) (self->handle, keys_p, count_p);
}

static int
s_capabilities (cs_board_t *self, cs_caps_t *caps)
{
    cs_drv_capabilities_fn *fn = (cs_drv_capabilities_fn *) s_fn (self, CS_DRV_CAPABILITIES);
    if (!fn) {
        memset (caps, 0, sizeof *caps);
        return 0;
    }
    return fn (self->handle, caps);
}

static cs_drv_session_t *
s_session_open (cs_board_t *board)
{
    if (atomic_load (&board->dead))
        return NULL;                    /* the device is gone */
    cs_drv_session_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->board = board;
    self->inner = ((cs_drv_session_open_fn *) s_fn (board, CS_DRV_SESSION_OPEN)) (board->handle);
    if (!self->inner) {
        free (self);
        return NULL;
    }
    pthread_mutex_lock (&board->lock);
    board->users++;
    pthread_mutex_unlock (&board->lock);
    return self;
}

static void
s_session_close (cs_drv_session_t **session_p)
{
    cs_drv_session_t *self = session_p ? *session_p : NULL;
    if (!self)
        return;
    cs_board_t *board = self->board;
    ((cs_drv_session_close_fn *) s_fn (board, CS_DRV_SESSION_CLOSE)) (&self->inner);
    free (self);
    *session_p = NULL;
    s_release (board);
}

/*  Blocks until the board is closed (a hung or dying call).  */
static void
s_block (cs_board_t *self)
{
    pthread_mutex_lock (&self->lock);
    while (!self->closed)
        pthread_cond_wait (&self->closed_cond, &self->lock);
    pthread_mutex_unlock (&self->lock);
}

/*  The faults before an operation on `session`: CKR_OK to run it, else
 *  its result.  */
static CK_RV
s_before (cs_board_t *self, cs_drv_session_t *session)
{
    if (session->stuck)
        return CKR_OPERATION_ACTIVE;    /* the operation left open is still there */
    unsigned long call = atomic_fetch_add (&self->calls, 1);
    if (self->stuck_every && (call + 1) % self->stuck_every == 0) {
        session->stuck = true;
        return CKR_DEVICE_ERROR;
    }
    if (atomic_load (&self->dead) || (self->die_after != ULONG_MAX && call > self->die_after))
        return CKR_DEVICE_REMOVED;      /* after a call died: the device is gone */
    if (call == self->die_after) {
        atomic_store (&self->dead, true);
        zsys_info ("fault %s: operation %lu dies: it never returns, the device is gone", self->name, call + 1);
        s_block (self);
        return CKR_DEVICE_REMOVED;
    }
    if (self->delay_ms > 0) {
        struct timespec ts = { self->delay_ms / 1000, (self->delay_ms % 1000) * 1000000 };
        while (nanosleep (&ts, &ts) && errno == EINTR)
            ;
    }
    if (self->fail || (self->fail_file && access (self->fail_file, F_OK) == 0))
        return CKR_DEVICE_ERROR;
    if (call >= self->hang_after) {
        s_block (self);
        return CKR_DEVICE_REMOVED;
    }
    return CKR_OK;
}

/*  The faults after a successful operation: flips the lowest bit of the
 *  middle byte of every flip_every-th result.  */
static void
s_after (cs_board_t *self, unsigned char *out, size_t len)
{
    unsigned long n = atomic_fetch_add (&self->results, 1) + 1;
    if (self->flip_every && n % self->flip_every == 0 && len)
        out [len / 2] ^= 0x01;
}

/*  Sign or decrypt (id: the inner function).  */
static CK_RV
s_crypto (int id, cs_drv_session_t *session, const cs_drv_key_t *key, const cs_drv_mech_t *mech,
          const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len)
{
    cs_board_t *self = session->board;
    cs_drv_sign_key_fn *fn = (cs_drv_sign_key_fn *) s_fn (self, id);
    CK_RV rv = s_before (self, session);
    if (rv == CKR_OK)
        rv = fn ? fn (session->inner, key, mech, in, in_len, out, out_len) : CKR_FUNCTION_NOT_SUPPORTED;
    if (rv == CKR_OK)
        s_after (self, out, *out_len);
    return rv;
}

static CK_RV
s_sign_key (cs_drv_session_t *session, const cs_drv_key_t *key, const cs_drv_mech_t *mech,
            const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len)
{
    return s_crypto (CS_DRV_SIGN_KEY, session, key, mech, in, in_len, out, out_len);
}

static CK_RV
s_decrypt_key (cs_drv_session_t *session, const cs_drv_key_t *key, const cs_drv_mech_t *mech,
               const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len)
{
    return s_crypto (CS_DRV_DECRYPT_KEY, session, key, mech, in, in_len, out, out_len);
}

/*  Raw modexp (CS_DRV_MODEXP), with the same faults; a board whose inner
 *  board has none answers CKR_FUNCTION_NOT_SUPPORTED (and its
 *  capabilities, the inner's, have no CS_CAP_MODEXP: the broker sends it
 *  no modexp).  */
static CK_RV
s_modexp (cs_drv_session_t *session, const cs_modexp_t *op, unsigned char *out, size_t *out_len)
{
    cs_board_t *self = session->board;
    cs_drv_modexp_fn *fn = (cs_drv_modexp_fn *) s_fn (self, CS_DRV_MODEXP);
    CK_RV rv = s_before (self, session);
    if (rv == CKR_OK)
        rv = fn ? fn (session->inner, op, out, out_len) : CKR_FUNCTION_NOT_SUPPORTED;
    if (rv == CKR_OK)
        s_after (self, out, *out_len);
    return rv;
}

static CK_RV
s_derive_key (cs_drv_session_t *session, const cs_drv_key_t *key, const unsigned char *point,
              size_t point_len, unsigned char *out, size_t *out_len)
{
    cs_board_t *self = session->board;
    cs_drv_derive_key_fn *fn = (cs_drv_derive_key_fn *) s_fn (self, CS_DRV_DERIVE_KEY);
    CK_RV rv = s_before (self, session);
    if (rv == CKR_OK)
        rv = fn ? fn (session->inner, key, point, point_len, out, out_len) : CKR_FUNCTION_NOT_SUPPORTED;
    if (rv == CKR_OK)
        s_after (self, out, *out_len);
    return rv;
}

static CK_RV
s_generate_material (cs_drv_session_t *session, const cs_keygen_t *gen, unsigned char **pkcs8_p, size_t *len_p)
{
    cs_board_t *self = session->board;
    cs_drv_generate_material_fn *fn = (cs_drv_generate_material_fn *) s_fn (self, CS_DRV_GENERATE_MATERIAL);
    CK_RV rv = s_before (self, session);
    return rv != CKR_OK ? rv : fn ? fn (session->inner, gen, pkcs8_p, len_p) : CKR_FUNCTION_NOT_SUPPORTED;
}

static CK_RV
s_generate_resident (cs_drv_session_t *session, const cs_keygen_t *gen, cs_key_info_t *info)
{
    cs_board_t *self = session->board;
    cs_drv_generate_resident_fn *fn = (cs_drv_generate_resident_fn *) s_fn (self, CS_DRV_GENERATE_RESIDENT);
    CK_RV rv = s_before (self, session);
    return rv != CKR_OK ? rv : fn ? fn (session->inner, gen, info) : CKR_FUNCTION_NOT_SUPPORTED;
}

static CK_RV
s_destroy_resident (cs_drv_session_t *session, const unsigned char *id, size_t id_len)
{
    cs_board_t *self = session->board;
    cs_drv_destroy_resident_fn *fn = (cs_drv_destroy_resident_fn *) s_fn (self, CS_DRV_DESTROY_RESIDENT);
    CK_RV rv = s_before (self, session);
    return rv != CKR_OK ? rv : fn ? fn (session->inner, id, id_len) : CKR_FUNCTION_NOT_SUPPORTED;
}

/*  The public operations of a pq inner board (issue #23) pass through
 *  without faults: they are what the broker checks an ML-DSA result with
 *  (broker/boards/pq_work.h), so a flipped signature is caught as an RSA
 *  one is by OpenSSL.  */
static CK_RV
s_public_key (cs_drv_session_t *session, const cs_drv_key_t *key, CK_KEY_TYPE *key_type, CK_ULONG *parameter_set,
              unsigned char *out, size_t *out_len)
{
    cs_drv_public_key_fn *fn = (cs_drv_public_key_fn *) s_fn (session->board, CS_DRV_PUBLIC_KEY);
    return fn ? fn (session->inner, key, key_type, parameter_set, out, out_len) : CKR_FUNCTION_NOT_SUPPORTED;
}

static CK_RV
s_verify (cs_drv_session_t *session, const cs_drv_mech_t *mech, CK_ULONG parameter_set,
          const unsigned char *pub, size_t pub_len, const unsigned char *in, size_t in_len,
          const unsigned char *sig, size_t sig_len)
{
    cs_drv_verify_fn *fn = (cs_drv_verify_fn *) s_fn (session->board, CS_DRV_VERIFY);
    return fn ? fn (session->inner, mech, parameter_set, pub, pub_len, in, in_len, sig, sig_len)
              : CKR_FUNCTION_NOT_SUPPORTED;
}

static size_t
s_session_cached (cs_drv_session_t *session)
{
    cs_drv_session_cached_fn *fn = (cs_drv_session_cached_fn *) s_fn (session->board, CS_DRV_SESSION_CACHED);
    return fn ? fn (session->inner) : 0;
}

/*  Every optional function is offered; those the inner driver lacks answer
 *  CKR_FUNCTION_NOT_SUPPORTED, and the capabilities are the inner board's,
 *  so the broker routes nothing to them.  */
static const cs_driver_dispatch_t s_dispatch [] = {
    { CS_DRV_BOARD_OPEN, (cs_driver_fn_t) s_board_open },
    { CS_DRV_BOARD_CLOSE, (cs_driver_fn_t) s_board_close },
    { CS_DRV_BOARD_MECHANISMS, (cs_driver_fn_t) s_board_mechanisms },
    { CS_DRV_BOARD_KEYS, (cs_driver_fn_t) s_board_keys },
    { CS_DRV_SESSION_OPEN, (cs_driver_fn_t) s_session_open },
    { CS_DRV_SESSION_CLOSE, (cs_driver_fn_t) s_session_close },
    { CS_DRV_CAPABILITIES, (cs_driver_fn_t) s_capabilities },
    { CS_DRV_SIGN_KEY, (cs_driver_fn_t) s_sign_key },
    { CS_DRV_DECRYPT_KEY, (cs_driver_fn_t) s_decrypt_key },
    { CS_DRV_DERIVE_KEY, (cs_driver_fn_t) s_derive_key },
    { CS_DRV_MODEXP, (cs_driver_fn_t) s_modexp },
    { CS_DRV_GENERATE_MATERIAL, (cs_driver_fn_t) s_generate_material },
    { CS_DRV_GENERATE_RESIDENT, (cs_driver_fn_t) s_generate_resident },
    { CS_DRV_DESTROY_RESIDENT, (cs_driver_fn_t) s_destroy_resident },
    { CS_DRV_SESSION_CACHED, (cs_driver_fn_t) s_session_cached },
    { CS_DRV_PUBLIC_KEY, (cs_driver_fn_t) s_public_key },
    { CS_DRV_VERIFY, (cs_driver_fn_t) s_verify },
    { 0, NULL }
};

CS_DRIVER_EXPORT ("fault", "a board that wraps another and injects faults (tests)", s_dispatch)
