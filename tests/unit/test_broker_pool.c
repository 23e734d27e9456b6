/*  test_broker_pool.c — the pool of pre-generated RSA keys (broker/keys/pool.h):
 *  keys in and out, refill bookkeeping, and where the keys live: locked,
 *  non-dumpable pages of their own, never an mlock of heap pages (issue #7
 *  item 7).  */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include "broker_config.h"
#include "cs_secmem.h"
#include "pool.h"
#include "pool_store.h"
#include "test_broker_helpers.h"
#include "test_smaps.h"
#include "test_run.h"

#define S_DER_LEN 1200                  /* about an RSA-2048 PKCS#8 */

/*  A malloc'd stand-in for a generated key, filled with `fill`.  */
static unsigned char *
s_der (int fill)
{
    unsigned char *der = malloc (S_DER_LEN);
    ck_assert_ptr_nonnull (der);
    memset (der, fill, S_DER_LEN);
    return der;
}

START_TEST (test_put_take)
{
    const int targets [BROKER_POOL_SIZES] = { 2, 0, 0 };
    pool_t *pool = pool_new (targets);
    ck_assert_ptr_nonnull (pool);
    ck_assert_uint_eq (pool_next_refill (pool, 4), 2048);
    ck_assert_uint_eq (pool_next_refill (pool, 4), 2048);
    ck_assert_uint_eq (pool_next_refill (pool, 4), 0);     /* ready + running = target */
    pool_put (pool, 2048, s_der (1), S_DER_LEN);
    pool_put (pool, 2048, s_der (2), S_DER_LEN);
    pool_put (pool, 2048, s_der (3), S_DER_LEN);            /* full: wiped, dropped */
    ck_assert_uint_eq (pool_ready (pool, 2048), 2);
    size_t len = 0;
    unsigned char *der = pool_take (pool, 2048, &len);
    ck_assert_ptr_nonnull (der);
    ck_assert_uint_eq (len, S_DER_LEN);
    ck_assert_uint_eq (der [0], 2);                         /* the last one put */
    OPENSSL_cleanse (der, len);
    free (der);
    ck_assert_uint_eq (pool_ready (pool, 2048), 1);
    ck_assert_ptr_null (pool_take (pool, 3072, &len));      /* a size it does not keep */
    pool_destroy (&pool);
    ck_assert_ptr_null (pool);
}
END_TEST

/*  Ready keys sit in secret pages (cs_secmem.h); no page of the heap gets
 *  locked, before or after a key is taken out.  */
START_TEST (test_keys_in_secret_pages)
{
    long page_kb = sysconf (_SC_PAGESIZE) / 1024;
    const int targets [BROKER_POOL_SIZES] = { 3, 0, 0 };
    pool_t *pool = pool_new (targets);
    size_t failures = cs_secmem_lock_failures ();
    ts_locked_t before = ts_locked ();
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq (pool_next_refill (pool, 4), 2048);
        pool_put (pool, 2048, s_der (0x40 + i), S_DER_LEN);
    }
    ts_locked_t full = ts_locked ();
    ck_assert_int_eq (full.secret_kb, before.secret_kb + 3 * page_kb);
    if (cs_secmem_lock_failures () == failures)
        ck_assert_int_eq (full.secret_locked_kb, before.secret_locked_kb + 3 * page_kb);
    ck_assert_int_eq (full.other_locked_kb, before.other_locked_kb);
    size_t len = 0;
    unsigned char *der = pool_take (pool, 2048, &len);
    ts_locked_t taken = ts_locked ();
    ck_assert_int_eq (taken.secret_kb, before.secret_kb + 2 * page_kb);
    ck_assert_int_eq (taken.other_locked_kb, before.other_locked_kb);
    OPENSSL_cleanse (der, len);
    free (der);
    pool_destroy (&pool);
    ck_assert_int_eq (ts_locked ().secret_kb, before.secret_kb);
}
END_TEST

/*  Counts the reserved tenant's keystore rows.  */
static size_t
s_rows (keystore_t *ks)
{
    Cs__KeyInfo **infos = NULL;
    size_t count = 0;
    if (!keystore_tenant_exists (ks, POOL_STORE_TENANT))
        return 0;
    ck_assert_int_eq (keystore_key_list (ks, POOL_STORE_TENANT, &infos, &count), 0);
    for (size_t i = 0; i < count; i++)
        cs__key_info__free_unpacked (infos [i], NULL);
    free (infos);
    return count;
}

/*  pool_store.h: a stop seals the ready keys (the pool is then empty), a
 *  start restores as many as the pool has room for and deletes exactly
 *  those rows; the bytes come back unchanged; '@' names are reserved.  */
START_TEST (test_store_seal_restore)
{
    char *dir = th_tmpdir ();
    th_keystore (dir);
    keystore_t *ks = th_keystore_open (dir);
    const int three [BROKER_POOL_SIZES] = { 3, 1, 0 }, two [BROKER_POOL_SIZES] = { 2, 0, 0 };
    pool_t *pool = pool_new (three);
    int made = 0;
    for (unsigned bits; (bits = pool_next_refill (pool, 8)) != 0; made++)
        pool_put (pool, bits, s_der (bits == 2048 ? 0x40 + made : 0x50), S_DER_LEN);
    ck_assert_int_eq (made, 4);
    ck_assert_uint_eq (pool_ready (pool, 2048), 3);
    size_t n = 0;
    ck_assert_int_eq (pool_store_seal (ks, pool, &n), 0);
    ck_assert_uint_eq (n, 4);
    ck_assert_uint_eq (pool_ready (pool, 2048) + pool_ready (pool, 3072), 0);
    ck_assert_uint_eq (s_rows (ks), 4);
    pool_destroy (&pool);
    /*  A smaller pool at the next start: 2 of the 3 RSA-2048 keys, none of
        the size it no longer keeps; the other rows stay for later.  */
    pool = pool_new (two);
    ck_assert_int_eq (pool_store_restore (ks, pool, &n), 0);
    ck_assert_uint_eq (n, 2);
    ck_assert_uint_eq (pool_ready (pool, 2048), 2);
    ck_assert_uint_eq (s_rows (ks), 2);
    ck_assert_uint_eq (pool_next_refill (pool, 8), 0);        /* full: no refill */
    size_t len = 0;
    unsigned char *der = pool_take (pool, 2048, &len);
    ck_assert_uint_eq (len, S_DER_LEN);
    ck_assert (der [0] >= 0x40 && der [0] <= 0x43 && der [S_DER_LEN - 1] == der [0]);
    free (der);
    pool_destroy (&pool);
    pool = pool_new (three);
    ck_assert_int_eq (pool_store_restore (ks, pool, &n), 0);
    ck_assert_uint_eq (n, 2);
    ck_assert_uint_eq (s_rows (ks), 0);
    pool_destroy (&pool);
    ck_assert (pool_store_reserved ("@pool") && !pool_store_reserved ("demo") && !pool_store_reserved (NULL));
    keystore_destroy (&ks);
    th_tmpdir_remove (&dir);
}
END_TEST

/*  Issue 19 item 7: a sealed key whose fingerprint the keystore recorded as
 *  issued (a replayed @pool row, a restored backup) is not restored: its
 *  row is deleted, the other key comes back.  */
START_TEST (test_store_issued_once)
{
    char *dir = th_tmpdir ();
    th_keystore (dir);
    keystore_t *ks = th_keystore_open (dir);
    const int two [BROKER_POOL_SIZES] = { 2, 0, 0 };
    pool_t *pool = pool_new (two);
    pool_put (pool, pool_next_refill (pool, 8), s_der (0x61), S_DER_LEN);
    pool_put (pool, pool_next_refill (pool, 8), s_der (0x62), S_DER_LEN);
    size_t n = 0;
    ck_assert_int_eq (pool_store_seal (ks, pool, &n), 0);
    ck_assert_uint_eq (n, 2);
    pool_destroy (&pool);
    uint8_t fp [32];
    char hex [17];
    unsigned char *issued = s_der (0x61);
    ck_assert_int_eq (pool_store_fingerprint (issued, S_DER_LEN, fp, hex), 0);
    free (issued);
    ck_assert_int_eq (keystore_issued_record (ks, "demo", fp), 0);
    pool = pool_new (two);
    ck_assert_int_eq (pool_store_restore (ks, pool, &n), 0);
    ck_assert_uint_eq (n, 1);
    ck_assert_uint_eq (s_rows (ks), 0);                       /* the issued one deleted */
    size_t len = 0;
    unsigned char *der = pool_take (pool, 2048, &len);
    ck_assert_uint_eq (der [0], 0x62);
    free (der);
    pool_destroy (&pool);
    keystore_destroy (&ks);
    th_tmpdir_remove (&dir);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("pool");
    TCase *tc = tcase_create ("pool");
    tcase_add_test (tc, test_put_take);
    tcase_add_test (tc, test_keys_in_secret_pages);
    tcase_add_test (tc, test_store_seal_restore);
    tcase_add_test (tc, test_store_issued_once);
    tcase_set_timeout (tc, 60);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
