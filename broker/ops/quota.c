/*  quota.c — per-tenant limits from broker.conf and the token bucket of
 *  operations per second (quota.h).  */
#include <errno.h>
#include <stdlib.h>
#include "quota.h"
#include "cs_driver.h"

const char *const quota_names [4] = { "max-ops-per-s", "max-inflight", "max-keys", "max-objects" };

int
quota_value_parse (const char *text, uint32_t *value_p)
{
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull (text, &end, 10);
    if (!*text || *text == '-' || *end || errno || value > UINT32_MAX)
        return -1;
    *value_p = (uint32_t) value;
    return 0;
}

int
quota_limits_read (zconfig_t *root, const char *tenant, quota_limits_t *limits, const char **why_p)
{
    uint32_t *fields [4] = { &limits->max_ops_per_s, &limits->max_inflight, &limits->max_keys,
                             &limits->max_objects };
    memset (limits, 0, sizeof *limits);
    for (int i = 0; i < 4; i++) {
        char path [400];
        snprintf (path, sizeof path, "tenants/%s/%s", tenant, quota_names [i]);
        zconfig_t *node = root && tenant ? zconfig_locate (root, path) : NULL;
        const char *text = node ? zconfig_value (node) : NULL;
        if (text && *text && quota_value_parse (text, fields [i]) != 0) {
            *why_p = quota_names [i];
            return -1;
        }
    }
    return 0;
}

int
quota_tenants_check (zconfig_t *root, char *path, size_t size, bool *other_p)
{
    zconfig_t *tenants = root ? zconfig_locate (root, "tenants") : NULL;
    *other_p = tenants && !zconfig_child (tenants);
    for (zconfig_t *t = tenants ? zconfig_child (tenants) : NULL; t; t = zconfig_next (t)) {
        quota_limits_t limits;
        const char *bad = NULL;
        if (quota_limits_read (root, zconfig_name (t), &limits, &bad) != 0) {
            snprintf (path, size, "tenants/%s/%s", zconfig_name (t), bad);
            return -1;
        }
        for (zconfig_t *k = zconfig_child (t); k && !*other_p; k = zconfig_next (k)) {
            bool known = streq (zconfig_name (k), "audit");
            for (int i = 0; i < 4 && !known; i++)
                known = streq (zconfig_name (k), quota_names [i]);
            *other_p = !known;
        }
    }
    return 0;
}

void
quota_bucket_init (quota_bucket_t *self, uint32_t rate, uint32_t burst, int64_t now_ms)
{
    self->rate = rate ? rate : 1;
    self->burst = burst ? burst : self->rate / 10;
    if (self->burst < 1)
        self->burst = 1;
    self->tokens = self->burst;
    self->last_ms = now_ms;
}

int64_t
quota_bucket_reserve (quota_bucket_t *self, int64_t now_ms, uint32_t n)
{
    if (now_ms > self->last_ms) {
        self->tokens += (double) (now_ms - self->last_ms) * self->rate / 1000.0;
        if (self->tokens > self->burst)
            self->tokens = self->burst;
        self->last_ms = now_ms;
    }
    self->tokens -= n;
    if (self->tokens >= 0)
        return 0;
    int64_t wait = (int64_t) (-self->tokens * 1000.0 / self->rate + 0.999999);
    return wait < 1 ? 1 : wait;
}

void
quota_bucket_refund (quota_bucket_t *self, uint32_t n)
{
    self->tokens += n;
    if (self->tokens > self->burst)
        self->tokens = self->burst;
}

//  How many keys (objects false) or objects the tenant stores: 0, or -1.
static int
s_count (keystore_t *ks, const char *tenant, bool objects, size_t *n_p)
{
    void **rows = NULL;
    int rc = objects ? keystore_object_list (ks, tenant, (Cs__ObjectInfo ***) &rows, n_p)
                     : keystore_key_list (ks, tenant, (Cs__KeyInfo ***) &rows, n_p);
    for (size_t i = 0; rc == 0 && i < *n_p; i++)
        if (objects)
            cs__object_info__free_unpacked (rows [i], NULL);
        else
            cs__key_info__free_unpacked (rows [i], NULL);
    free (rows);
    return rc;
}

//  quota_keys_check and quota_objects_check.
static unsigned long
s_check (keystore_t *ks, const char *tenant, uint32_t max, bool objects)
{
    size_t n = 0;
    if (max == 0)
        return CKR_OK;
    if (s_count (ks, tenant, objects, &n) != 0)
        return CKR_DEVICE_ERROR;
    if (n < max)
        return CKR_OK;
    zsys_warning ("tenant %s: quota %s = %u reached: new %s refused with CKR_DEVICE_MEMORY", tenant,
                  objects ? "max-objects" : "max-keys", max, objects ? "object" : "key");
    return CKR_DEVICE_MEMORY;
}

unsigned long
quota_keys_check (keystore_t *ks, const char *tenant, uint32_t max_keys)
{
    return s_check (ks, tenant, max_keys, false);
}

unsigned long
quota_objects_check (keystore_t *ks, const char *tenant, uint32_t max_objects)
{
    return s_check (ks, tenant, max_objects, true);
}
