/*  test_ks_cache.c — the frontend's cache of keystore keys and tenant rows
 *  (broker/keys/ks_cache.h) and the watch of the keystore file
 *  (broker/ops/ks_watch.h), without a broker:
 *    - at most max_keys keys, the least recently used unpinned one out
 *      first, its slot wiped; a pinned key stays readable until released;
 *    - private keys in locked, non-dumpable slabs (/proc/self/smaps), as
 *      many slabs as the bound needs whatever the number of puts, and none
 *      left once the keys are gone;
 *    - a read whose token is older than a drop, or taken on hold, is not
 *      cached;
 *    - after another writer's commit only the tenants whose change epoch
 *      moved are dropped; the broker's own commits are followed;
 *    - a write by another SQLite connection is seen by the watch;
 *    - the watch under it and under the allow-list's (broker/ops/path_watch.h):
 *      a renamed file stays watched, a renamed directory gives way to the
 *      one made at its path.
 */
#include <check.h>
#include <sqlite3.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <czmq.h>
#include "ks_cache.h"
#include "ks_watch.h"
#include "path_watch.h"
#include "test_smaps.h"
#include "test_run.h"

/*  A description with ref `ref` (caller owns, as ks_cache_key_put takes).  */
static Cs__KeyInfo *
s_info (const char *ref)
{
    Cs__KeyInfo *info = calloc (1, sizeof *info);
    cs__key_info__init (info);
    info->ref = strdup (ref);
    info->has_private = true;
    return info;
}

/*  Puts key `ref` of tenant demo with len (<= 1024) bytes of `fill`;
 *  returns it pinned (NULL when refused).  */
static ks_key_t *
s_put_len (ks_cache_t *cache, uint64_t token, const char *ref, uint8_t fill, size_t len)
{
    uint8_t der [1024];
    memset (der, fill, sizeof der);
    Cs__KeyInfo *info = s_info (ref);
    ks_key_t *key = ks_cache_key_put (cache, token, "demo", ref, &info, der, len);
    if (info)
        cs__key_info__free_unpacked (info, NULL);
    return key;
}

/*  s_put_len of 200 bytes (a slot of 256).  */
static ks_key_t *
s_put (ks_cache_t *cache, uint64_t token, const char *ref, uint8_t fill)
{
    return s_put_len (cache, token, ref, fill, 200);
}

/*  True when the n bytes at p are all zero.  */
static bool
s_zero (const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p [i])
            return false;
    return true;
}

START_TEST (test_lru_bound_and_wipe)
{
    ks_cache_t *cache = ks_cache_new (2);
    ck_assert_ptr_nonnull (cache);
    uint64_t token = ks_cache_token (cache);
    ks_key_t *a = s_put (cache, token, "ks:a", 0xa1);
    ks_key_t *b = s_put (cache, token, "ks:b", 0xb2);
    ck_assert (a && b);
    size_t len = 0;
    const uint8_t *a_der = ks_key_pkcs8 (a, &len);
    ck_assert_uint_eq (len, 200);
    ck_assert_uint_eq (a_der [0], 0xa1);
    ck_assert_str_eq (ks_key_info (a)->ref, "ks:a");
    ks_cache_key_release (cache, &a);
    ck_assert_ptr_null (a);
    ks_cache_key_release (cache, &b);
    /*  a is used again: b becomes the least recently used.  */
    a = ks_cache_key_get (cache, "demo", "ks:a");
    ck_assert_ptr_nonnull (a);
    ks_cache_key_release (cache, &a);
    ck_assert_ptr_null (ks_cache_key_get (cache, "other", "ks:a"));     /* another tenant's */
    b = ks_cache_key_get (cache, "demo", "ks:b");
    const uint8_t *b_der = ks_key_pkcs8 (b, &len);
    ks_cache_key_release (cache, &b);
    a = ks_cache_key_get (cache, "demo", "ks:a");
    ks_cache_key_release (cache, &a);
    /*  A third key (of another slot size, so that it does not take b's
        slot): b goes, and its slot is wiped (its slab stays mapped: a
        still lives in it).  */
    ks_key_t *c = s_put_len (cache, ks_cache_token (cache), "ks:c", 0xc3, 300);
    ck_assert_ptr_nonnull (c);
    ck_assert_uint_eq (ks_cache_keys (cache), 2);
    ck_assert_ptr_null (ks_cache_key_get (cache, "demo", "ks:b"));
    ck_assert_msg (s_zero (b_der, 200), "the evicted key's slot is not wiped");
    /*  Pinned keys are not evicted: with a and c pinned, a put is refused.  */
    a = ks_cache_key_get (cache, "demo", "ks:a");
    ck_assert_ptr_null (s_put (cache, ks_cache_token (cache), "ks:d", 0xd4));
    ck_assert_uint_eq (ks_cache_keys (cache), 2);
    /*  A pinned key dropped leaves the cache at once, readable until released.  */
    a_der = ks_key_pkcs8 (a, &len);
    ks_cache_key_drop (cache, "demo", "ks:a");
    ck_assert_ptr_null (ks_cache_key_get (cache, "demo", "ks:a"));
    ck_assert_uint_eq (ks_cache_keys (cache), 1);
    ks_key_t *d = s_put (cache, ks_cache_token (cache), "ks:d", 0xd4);   /* keeps a's slab mapped */
    ck_assert_ptr_nonnull (d);
    ck_assert_uint_eq (a_der [199], 0xa1);
    ks_cache_key_release (cache, &a);
    ck_assert_msg (s_zero (a_der, 200), "a dropped key's slot is not wiped at its last release");
    ks_cache_key_release (cache, &d);
    ks_cache_key_release (cache, &c);
    ks_cache_destroy (&cache);
    ck_assert_ptr_null (cache);
}
END_TEST

START_TEST (test_tokens)
{
    ks_cache_t *cache = ks_cache_new (8);
    keystore_tenant_t state = { { 7, 8 }, { 1, 0 }, 42 }, got;
    /*  A drop between the token and the put: refused.  */
    uint64_t token = ks_cache_token (cache);
    ks_cache_key_drop (cache, "demo", "ks:other");
    ck_assert_ptr_null (s_put (cache, token, "ks:a", 1));
    ks_cache_tenant_put (cache, token, "demo", &state);
    ck_assert (!ks_cache_tenant_get (cache, "demo", &got));
    /*  On hold: token 0, nothing cached; after unhold, fresh tokens work.  */
    ks_cache_hold (cache);
    token = ks_cache_token (cache);
    ck_assert_uint_eq (token, 0);
    ck_assert_ptr_null (s_put (cache, token, "ks:a", 1));
    ks_cache_unhold (cache, false);
    token = ks_cache_token (cache);
    ks_key_t *a = s_put (cache, token, "ks:a", 1);
    ck_assert_ptr_nonnull (a);
    ks_cache_key_release (cache, &a);
    ks_cache_tenant_put (cache, token, "demo", &state);
    ck_assert (ks_cache_tenant_get (cache, "demo", &got));
    ck_assert_uint_eq (got.epoch [1], 8);
    ck_assert_uint_eq (got.keys_version, 42);
    /*  Held, what is cached is not used; unheld without a drop, it is again;
        with a drop, it is gone.  */
    ks_cache_hold (cache);
    ck_assert_ptr_null (ks_cache_key_get (cache, "demo", "ks:a"));
    ck_assert (!ks_cache_tenant_get (cache, "demo", &got));
    ks_cache_unhold (cache, false);
    a = ks_cache_key_get (cache, "demo", "ks:a");
    ck_assert_ptr_nonnull (a);
    ks_cache_key_release (cache, &a);
    ck_assert (ks_cache_tenant_get (cache, "demo", &got));
    ks_cache_hold (cache);
    ks_cache_unhold (cache, true);
    ck_assert_ptr_null (ks_cache_key_get (cache, "demo", "ks:a"));
    ck_assert (!ks_cache_tenant_get (cache, "demo", &got));
    ks_cache_tenant_put (cache, ks_cache_token (cache), "demo", &state);
    /*  drop_all takes everything.  */
    ks_cache_drop_all (cache);
    ck_assert (!ks_cache_tenant_get (cache, "demo", &got));
    ck_assert_uint_eq (ks_cache_keys (cache), 0);
    /*  No key cache: tenant rows only; a DER over KS_CACHE_MAX_DER is never cached.  */
    ks_cache_destroy (&cache);
    cache = ks_cache_new (0);
    ck_assert_ptr_null (s_put (cache, ks_cache_token (cache), "ks:a", 1));
    ks_cache_destroy (&cache);
    cache = ks_cache_new (8);
    uint8_t *big = calloc (1, KS_CACHE_MAX_DER + 1);
    Cs__KeyInfo *info = s_info ("ks:big");
    ck_assert_ptr_null (ks_cache_key_put (cache, ks_cache_token (cache), "demo", "ks:big", &info, big,
                                          KS_CACHE_MAX_DER + 1));
    ck_assert_ptr_nonnull (info);
    cs__key_info__free_unpacked (info, NULL);
    free (big);
    ks_cache_destroy (&cache);
}
END_TEST

/*  Keys live in locked, non-dumpable slabs of 64 KiB: 100 keys through a
 *  cache of 2 hold one slab, and none once the cache is gone.  */
START_TEST (test_locked_and_bounded)
{
    ts_locked_t before = ts_locked ();
    ks_cache_t *cache = ks_cache_new (2);
    for (int i = 0; i < 100; i++) {
        char ref [32];
        snprintf (ref, sizeof ref, "ks:%d", i);
        ks_key_t *key = s_put (cache, ks_cache_token (cache), ref, (uint8_t) (i + 1));
        ck_assert_ptr_nonnull (key);
        size_t len = 0;
        char flags [256];
        long locked_kb = 0;
        ck_assert (ts_mapping_of (ks_key_pkcs8 (key, &len), flags, sizeof flags, &locked_kb));
        ck_assert_msg (strstr (flags, " dd"), "a cached key is in a dumpable mapping: %s", flags);
        ks_cache_key_release (cache, &key);
    }
    ck_assert_uint_eq (ks_cache_keys (cache), 2);
    ts_locked_t during = ts_locked ();
    ck_assert_int_eq (during.secret_kb - before.secret_kb, 64);
    if (during.secret_locked_kb > before.secret_locked_kb)      /* RLIMIT_MEMLOCK allowing */
        ck_assert_int_eq (during.secret_locked_kb - before.secret_locked_kb, 64);
    ck_assert_int_eq (during.other_locked_kb, before.other_locked_kb);
    ks_cache_destroy (&cache);
    ts_locked_t after = ts_locked ();
    ck_assert_int_eq (after.secret_kb, before.secret_kb);
}
END_TEST

/*  A write by another connection, and only a write, is seen.  */
START_TEST (test_watch)
{
    char dir [] = "/tmp/test_ks_watch.XXXXXX", path [128], command [160];
    ck_assert_ptr_nonnull (mkdtemp (dir));
    snprintf (path, sizeof path, "%s/keystore.db", dir);
    sqlite3 *mine = NULL, *other = NULL;
    ck_assert_int_eq (sqlite3_open (path, &mine), SQLITE_OK);
    ck_assert_int_eq (sqlite3_exec (mine, "PRAGMA journal_mode = WAL; CREATE TABLE t (x);", NULL, NULL, NULL),
                      SQLITE_OK);
    ks_watch_t *watch = ks_watch_new (path);
    ck_assert_ptr_nonnull (watch);
    ck_assert (!ks_watch_changed (watch));
    ck_assert_int_eq (sqlite3_exec (mine, "SELECT count (*) FROM t", NULL, NULL, NULL), SQLITE_OK);
    ck_assert (!ks_watch_changed (watch));              /* reads are not changes */
    ck_assert_int_eq (sqlite3_open (path, &other), SQLITE_OK);
    ck_assert_int_eq (sqlite3_exec (other, "INSERT INTO t VALUES (1)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close (other);
    ck_assert (ks_watch_changed (watch));
    ck_assert (!ks_watch_changed (watch));              /* each change is told once */
    ks_watch_destroy (&watch);
    ck_assert_ptr_null (watch);
    sqlite3_close (mine);
    snprintf (command, sizeof command, "rm -rf '%s'", dir);
    ck_assert_int_eq (system (command), 0);
}
END_TEST

/*  Writes one byte to path (creating it).  */
static void
s_touch (const char *path)
{
    FILE *file = fopen (path, "a");
    ck_assert_ptr_nonnull (file);
    fputc ('x', file);
    fclose (file);
}

/*  PATH_WATCH_INODE (the keystore files): a file renamed away is still
 *  watched.  PATH_WATCH_PATH (clients.d): a directory renamed away is not;
 *  until a directory is at the path again every call says changed, then
 *  changes in the new one are seen and changes in the old one are not.
 *  The call that sets the watch again says changed: a file written into
 *  the new directory before it is not missed.  */
START_TEST (test_path_watch_follow)
{
    char dir [] = "/tmp/test_path_watch.XXXXXX", file [128], moved [128], sub [128], old [128],
         path [192], command [160];
    ck_assert_ptr_nonnull (mkdtemp (dir));
    snprintf (file, sizeof file, "%s/file", dir);
    snprintf (moved, sizeof moved, "%s/file.moved", dir);
    s_touch (file);
    const char *files [1] = { file };
    path_watch_t *watch = path_watch_new (files, 1, IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF,
                                          PATH_WATCH_INODE);
    ck_assert_ptr_nonnull (watch);
    ck_assert (!path_watch_changed (watch));
    s_touch (file);
    ck_assert (path_watch_changed (watch));
    ck_assert (!path_watch_changed (watch));
    ck_assert_int_eq (rename (file, moved), 0);
    ck_assert (path_watch_changed (watch));
    ck_assert (!path_watch_changed (watch));
    s_touch (moved);
    ck_assert (path_watch_changed (watch));             /* the inode is watched */
    path_watch_destroy (&watch);
    ck_assert_ptr_null (watch);

    snprintf (sub, sizeof sub, "%s/clients.d", dir);
    snprintf (old, sizeof old, "%s/clients.old", dir);
    ck_assert_int_eq (mkdir (sub, 0700), 0);
    const char *dirs [1] = { sub };
    watch = path_watch_new (dirs, 1, IN_CREATE | IN_CLOSE_WRITE | IN_MODIFY | IN_DELETE | IN_MOVE_SELF
                            | IN_DELETE_SELF | IN_ONLYDIR, PATH_WATCH_PATH);
    ck_assert_ptr_nonnull (watch);
    ck_assert_int_ge (path_watch_fd (watch), 0);
    ck_assert (!path_watch_changed (watch));
    snprintf (path, sizeof path, "%s/a.cert", sub);
    s_touch (path);
    ck_assert (path_watch_changed (watch));
    ck_assert (!path_watch_changed (watch));
    ck_assert_int_eq (rename (sub, old), 0);
    ck_assert (path_watch_changed (watch));
    ck_assert (path_watch_changed (watch));             /* nothing at the path */
    ck_assert_int_eq (mkdir (sub, 0700), 0);
    ck_assert (path_watch_changed (watch));             /* watched again: what it holds may be new */
    ck_assert (!path_watch_changed (watch));
    snprintf (path, sizeof path, "%s/b.cert", old);
    s_touch (path);
    ck_assert (!path_watch_changed (watch));            /* the old directory is not watched */
    snprintf (path, sizeof path, "%s/b.cert", sub);
    s_touch (path);
    ck_assert (path_watch_changed (watch));
    path_watch_destroy (&watch);
    ck_assert (path_watch_new (dirs, 0, IN_CREATE, PATH_WATCH_PATH) == NULL);
    snprintf (command, sizeof command, "rm -rf '%s'", dir);
    ck_assert_int_eq (system (command), 0);
}
END_TEST

/*  Puts key `ref` of `tenant` (200 bytes) and releases it: cached, unpinned.  */
static void
s_cached (ks_cache_t *cache, const char *tenant, const char *ref)
{
    uint8_t der [200] = { 1 };
    Cs__KeyInfo *info = s_info (ref);
    ks_key_t *key = ks_cache_key_put (cache, ks_cache_token (cache), tenant, ref, &info, der, sizeof der);
    ck_assert_ptr_nonnull (key);
    ks_cache_key_release (cache, &key);
}

/*  True when (tenant, ref) is cached (the lookup's pin released).  */
static bool
s_has (ks_cache_t *cache, const char *tenant, const char *ref)
{
    ks_key_t *key = ks_cache_key_get (cache, tenant, ref);
    bool has = key != NULL;
    ks_cache_key_release (cache, &key);
    return has;
}

/*  Tenants' change epochs (issue 19 item 8): a look drops only the
 *  tenants whose epoch moved or that are gone; the broker's own commits
 *  are followed without a drop unless someone wrote between; a foreign
 *  commit or an unknown look drops everything.  */
START_TEST (test_tenant_epochs)
{
    ks_cache_t *cache = ks_cache_new (16);
    keystore_change_t start [] = { { "a", 10, 0 }, { "ab", 10, 0 }, { "b", 10, 0 } };
    ks_cache_epochs_baseline (cache, start, 3);
    s_cached (cache, "a", "ks:1");
    s_cached (cache, "a", "ks:2");
    s_cached (cache, "ab", "ks:1");             /* "a" is a prefix of "ab": not the same tenant */
    s_cached (cache, "b", "ks:1");
    /*  Nobody else committed: nothing dropped.  */
    ks_cache_hold (cache);
    ck_assert_uint_eq (ks_cache_settle (cache, 0, NULL, 0, false), 0);
    ck_assert_uint_eq (ks_cache_keys (cache), 4);
    /*  a moved: its two keys go, ab and b stay; the hold ends.  */
    keystore_change_t look [] = { { "a", 12, 0 }, { "ab", 10, 0 }, { "b", 10, 0 } };
    ks_cache_hold (cache);
    ck_assert (!s_has (cache, "b", "ks:1"));    /* held: every lookup misses */
    ck_assert_uint_eq (ks_cache_settle (cache, 1, look, 3, false), 2);
    ck_assert (!s_has (cache, "a", "ks:1") && !s_has (cache, "a", "ks:2"));
    ck_assert (s_has (cache, "ab", "ks:1") && s_has (cache, "b", "ks:1"));
    /*  An older look coming back late says nothing new.  */
    ks_cache_hold (cache);
    ck_assert_uint_eq (ks_cache_settle (cache, 1, start, 3, false), 0);
    /*  Our own commit on b after 10: followed; one after 11 (someone wrote
     *  between): b dropped.  */
    keystore_change_t own [] = { { "b", 13, 10 } };
    ck_assert_uint_eq (ks_cache_own_changes (cache, own, 1), 0);
    ck_assert (s_has (cache, "b", "ks:1"));
    keystore_change_t own2 [] = { { "b", 15, 14 } };
    ck_assert_uint_eq (ks_cache_own_changes (cache, own2, 1), 1);
    ck_assert (!s_has (cache, "b", "ks:1"));
    /*  ab gone from the keystore: dropped.  */
    s_cached (cache, "b", "ks:1");
    keystore_change_t gone [] = { { "a", 12, 0 }, { "b", 15, 0 } };
    ks_cache_hold (cache);
    ck_assert_uint_eq (ks_cache_settle (cache, 1, gone, 2, false), 1);
    ck_assert (!s_has (cache, "ab", "ks:1") && s_has (cache, "b", "ks:1"));
    /*  A commit that raised no state counter, or a failed look: everything.  */
    ks_cache_hold (cache);
    ck_assert_uint_eq (ks_cache_settle (cache, 1, gone, 2, true), 1);
    ck_assert_uint_eq (ks_cache_keys (cache), 0);
    s_cached (cache, "a", "ks:1");
    ks_cache_hold (cache);
    ck_assert_uint_eq (ks_cache_settle (cache, -1, NULL, 0, false), 1);
    ck_assert_uint_eq (ks_cache_keys (cache), 0);
    ks_cache_destroy (&cache);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("ks_cache");
    TCase *tc = tcase_create ("cache");
    tcase_add_test (tc, test_lru_bound_and_wipe);
    tcase_add_test (tc, test_tokens);
    tcase_add_test (tc, test_tenant_epochs);
    tcase_add_test (tc, test_locked_and_bounded);
    tcase_add_test (tc, test_watch);
    tcase_add_test (tc, test_path_watch_follow);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
