/*  test_driver_helpers.h — shared by the driver Check tests (with
 *  test_broker_helpers.h, which it includes): a driver loaded from
 *  CRYPTOSERVER_DRIVER_DIR through its dispatch table as the broker loads
 *  it (cs_driver.h), one board and one session on it, key material for it.
 *  Header-only (static).
 */
#ifndef TEST_DRIVER_HELPERS_H_INCLUDED
#define TEST_DRIVER_HELPERS_H_INCLUDED

#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <czmq.h>
#include "cs_driver.h"
#include "test_broker_helpers.h"

/*  dlopen()s CRYPTOSERVER_DRIVER_DIR/TYPE.so (RTLD_NOW | RTLD_LOCAL) and
 *  calls its entry point; fails the test unless the table has our ABI
 *  version and the type `type`.  The handle goes to *dl_p (dlclose it
 *  after the last use of the table).  */
static inline const cs_driver_t *
td_load (const char *type, void **dl_p)
{
    char path [4096];
    snprintf (path, sizeof path, "%s/%s.so", getenv ("CRYPTOSERVER_DRIVER_DIR"), type);
    *dl_p = dlopen (path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg (*dl_p != NULL, "%s", dlerror ());
    cs_driver_entry_fn *entry = (cs_driver_entry_fn *) dlsym (*dl_p, CS_DRIVER_ENTRY_SYMBOL);
    ck_assert_ptr_nonnull (entry);
    const cs_driver_t *driver = entry ();
    ck_assert_uint_eq (driver->abi_version, CS_DRIVER_ABI_VERSION);
    ck_assert_str_eq (driver->type, type);
    return driver;
}

/*  One loaded driver with a board, a session, and the functions the tests
 *  call (NULL when the driver has none).  */
typedef struct {
    void *dl;
    const cs_driver_t *driver;
    cs_board_t *board;
    cs_drv_session_t *session;
    cs_drv_sign_key_fn *sign;
    cs_drv_decrypt_key_fn *decrypt;
    cs_drv_session_cached_fn *cached;
    cs_drv_modexp_fn *modexp;
} td_board_t;

/*  A key-material description of pkey for a board (ref may be NULL): its
 *  PKCS#8 DER goes to *der_p, for the caller to free (OPENSSL_free).  */
static inline cs_drv_key_t
td_key (EVP_PKEY *pkey, const char *ref, unsigned char **der_p)
{
    size_t len = 0;
    *der_p = th_pkcs8 (pkey, &len);
    return (cs_drv_key_t) { NULL, 0, *der_p, len, ref };
}

/*  td_load (type), then board `name` with config (borrowed) and dir (the
 *  folder its file settings are relative to), then a session on it; fails
 *  the test when any step fails.  */
static inline void
td_open (td_board_t *drv, const char *type, const char *name, zconfig_t *config, const char *dir)
{
    drv->driver = td_load (type, &drv->dl);
    cs_drv_board_open_fn *open = (cs_drv_board_open_fn *) cs_driver_lookup (drv->driver, CS_DRV_BOARD_OPEN);
    ck_assert_int_eq (open (name, config, dir, &drv->board), 0);
    cs_drv_session_open_fn *session_open
        = (cs_drv_session_open_fn *) cs_driver_lookup (drv->driver, CS_DRV_SESSION_OPEN);
    drv->session = session_open (drv->board);
    ck_assert_ptr_nonnull (drv->session);
    drv->sign = (cs_drv_sign_key_fn *) cs_driver_lookup (drv->driver, CS_DRV_SIGN_KEY);
    drv->decrypt = (cs_drv_decrypt_key_fn *) cs_driver_lookup (drv->driver, CS_DRV_DECRYPT_KEY);
    drv->cached = (cs_drv_session_cached_fn *) cs_driver_lookup (drv->driver, CS_DRV_SESSION_CACHED);
    drv->modexp = (cs_drv_modexp_fn *) cs_driver_lookup (drv->driver, CS_DRV_MODEXP);
}

/*  td_open of a key-material board of TYPE (named TYPE, cache-size 4,
 *  files in /tmp) that must sign, decrypt and tell its cache.  */
static inline void
td_open_cached (td_board_t *drv, const char *type)
{
    zconfig_t *config = zconfig_new ("root", NULL);
    zconfig_put (config, "cache-size", "4");
    td_open (drv, type, type, config, "/tmp");
    zconfig_destroy (&config);
    ck_assert (drv->sign && drv->decrypt && drv->cached);
}

/*  Closes the session and the board (both must come back NULL), unloads
 *  the driver and zeroes *drv.  */
static inline void
td_close (td_board_t *drv)
{
    cs_drv_session_close_fn *close_session
        = (cs_drv_session_close_fn *) cs_driver_lookup (drv->driver, CS_DRV_SESSION_CLOSE);
    cs_drv_board_close_fn *close_board
        = (cs_drv_board_close_fn *) cs_driver_lookup (drv->driver, CS_DRV_BOARD_CLOSE);
    close_session (&drv->session);
    ck_assert_ptr_null (drv->session);
    close_board (&drv->board);
    ck_assert_ptr_null (drv->board);
    dlclose (drv->dl);
    memset (drv, 0, sizeof *drv);
}

#endif
