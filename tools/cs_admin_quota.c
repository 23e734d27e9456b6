/*  cs_admin_quota.c — `cryptoserver-admin tenant set|show NAME`: a
 *  tenant's quotas (issue 22 item 2), kept in DIR/broker.conf as
 *  tenants/NAME/max-ops-per-s, max-inflight, max-keys, max-objects (0 or
 *  absent = none), beside the tenant's other policies (tenants/NAME/audit).
 *  The broker reads them at start (cryptoserver-admin(8), docs/CONTRACTS.md
 *  "Tenant quotas").
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cs_admin.h"
#include "cs_util.h"
#include "../broker/ops/quota.h"

//  `tenant set`: writes each limit given.
static int
s_set (const char *dir, const char *name, char *const values [4])
{
    zconfig_t *config = cs_admin_conf_load (dir);
    if (!config)
        return CS_ADMIN_FAIL;
    for (int i = 0; i < 4; i++)
        if (values [i]) {
            char path [300];
            snprintf (path, sizeof path, "tenants/%s/%s", name, quota_names [i]);
            zconfig_put (config, path, values [i]);
        }
    char *path = cs_admin_path (dir, "broker.conf");
    int status = cs_admin_conf_save (config, path, 0600) == 0 ? CS_ADMIN_OK : CS_ADMIN_FAIL;
    if (status == CS_ADMIN_OK)
        printf ("tenant %s: quotas written to %s (the broker reads them at its next start)\n", name, path);
    free (path);
    zconfig_destroy (&config);
    return status;
}

//  `tenant show`: the limits, and what the keystore holds now.
static int
s_show (const char *dir, const char *name)
{
    zconfig_t *config = cs_admin_conf_load (dir);
    if (!config)
        return CS_ADMIN_FAIL;
    quota_limits_t limits;
    const char *why = NULL;
    int status = CS_ADMIN_OK;
    if (quota_limits_read (config, name, &limits, &why) != 0) {
        cs_admin_error ("tenants/%s/%s in broker.conf is not a number in 0..4294967295", name, why);
        status = CS_ADMIN_FAIL;
    }
    zconfig_destroy (&config);
    if (status != CS_ADMIN_OK)
        return status;
    keystore_t *keystore = cs_admin_keystore_open (dir, NULL);
    if (!keystore)
        return CS_ADMIN_FAIL;
    if (!keystore_tenant_exists (keystore, name)) {
        cs_admin_error ("no tenant %s", name);
        keystore_destroy (&keystore);
        return CS_ADMIN_FAIL;
    }
    Cs__KeyInfo **keys = NULL;
    Cs__ObjectInfo **objects = NULL;
    size_t n_keys = 0, n_objects = 0;
    bool counted = keystore_key_list (keystore, name, &keys, &n_keys) == 0
                && keystore_object_list (keystore, name, &objects, &n_objects) == 0;
    uint32_t values [4] = { limits.max_ops_per_s, limits.max_inflight, limits.max_keys, limits.max_objects };
    printf ("tenant %s\n", name);
    for (int i = 0; i < 4; i++)
        if (values [i])
            printf ("    %s = %u\n", quota_names [i], values [i]);
        else
            printf ("    %s = 0 (none)\n", quota_names [i]);
    if (counted)
        printf ("    keys stored = %zu\n    objects stored = %zu\n", n_keys, n_objects);
    for (size_t i = 0; i < n_keys; i++)
        cs__key_info__free_unpacked (keys [i], NULL);
    for (size_t i = 0; i < n_objects; i++)
        cs__object_info__free_unpacked (objects [i], NULL);
    free (keys);
    free (objects);
    keystore_destroy (&keystore);
    return counted ? CS_ADMIN_OK : CS_ADMIN_FAIL;
}

int
cs_admin_tenant_quota (int argc, char **argv)
{
    static const struct option options [] = {
        { "max-ops-per-s", required_argument, NULL, 0 }, { "max-inflight", required_argument, NULL, 1 },
        { "max-keys", required_argument, NULL, 2 },      { "max-objects", required_argument, NULL, 3 },
        { "dir", required_argument, NULL, 'd' },         { NULL, 0, NULL, 0 }
    };
    const char *verb = argv [0], *dir = ".";
    char *values [4] = { NULL, NULL, NULL, NULL };
    int opt;
    optind = 1;
    while ((opt = getopt_long (argc, argv, "", options, NULL)) != -1) {
        if (opt == '?')
            return CS_ADMIN_USAGE;
        if (opt == 'd')
            dir = optarg;
        else {
            uint32_t value = 0;
            if (quota_value_parse (optarg, &value) != 0) {
                cs_admin_error ("--%s needs a number in 0..4294967295 (0: none)", quota_names [opt]);
                return CS_ADMIN_USAGE;
            }
            values [opt] = optarg;
        }
    }
    const char *name = optind == argc - 1 ? argv [optind] : NULL;
    if (!name || !cs_admin_name_ok (name) || strlen (name) > 32) {
        cs_admin_error ("usage: cryptoserver-admin tenant %s NAME%s [--dir DIR]", verb,
                        streq (verb, "set") ? " [--max-ops-per-s N] [--max-inflight N] [--max-keys N] "
                                              "[--max-objects N]" : "");
        return CS_ADMIN_USAGE;
    }
    if (streq (verb, "set") && !values [0] && !values [1] && !values [2] && !values [3]) {
        cs_admin_error ("tenant set: give at least one of --max-ops-per-s, --max-inflight, --max-keys, --max-objects");
        return CS_ADMIN_USAGE;
    }
    return streq (verb, "set") ? s_set (dir, name, values) : s_show (dir, name);
}
