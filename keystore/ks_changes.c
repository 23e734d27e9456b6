/*  ks_changes.c — each tenant's change epoch (issue 19 item 8): a meta row
 *  "changes:TENANT" = "cs-changes-v1 COUNTER MAC" (decimal, 64 hex) that
 *  every committing write transaction touching the tenant's row, keys or
 *  objects sets to the new state counter (ks_state.c), in the same
 *  transaction.  A broker that caches keys compares them after another
 *  writer committed and drops only the tenants whose epoch moved
 *  (broker/keys/ks_cache.h), instead of every tenant's keys; its own commits
 *  come back to it with the epoch they replaced (keystore_own_changes_take),
 *  so that it follows them without dropping.  The MAC is row_mac_changes
 *  under the state key (docs/CONTRACTS.md "Keystore state").
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <czmq.h>
#include <openssl/crypto.h>
#include "keystore_int.h"
#include "cs_util.h"

#define CHANGES_PREFIX  "cs-changes-v1"
#define CHANGES_META    "changes:"

void
ks_changes_touch (keystore_t *self, const char *tenant)
{
    for (size_t i = 0; i < self->n_touched; i++)
        if (strcmp (self->touched [i].tenant, tenant) == 0)
            return;
    keystore_change_t *grown = realloc (self->touched, (self->n_touched + 1) * sizeof *grown);
    char *copy = strdup (tenant);
    if (grown)
        self->touched = grown;
    if (!grown || !copy) {
        free (copy);
        self->touch_lost = true;        //  the commit fails rather than leave a stale cache
        return;
    }
    self->touched [self->n_touched++] = (keystore_change_t) { .tenant = copy };
}

//  The meta row name of tenant's epoch (malloc'd), or NULL.
static char *
s_name (const char *tenant)
{
    char *name = NULL;
    return asprintf (&name, CHANGES_META "%s", tenant) < 0 ? NULL : name;
}

//  The epoch of one tenant: 0 when it has no record, UINT64_MAX (logged)
//  when its record does not verify.  -1 on a database failure.
static int
s_read (keystore_t *self, const char *tenant, uint64_t *epoch_p)
{
    uint8_t *value = NULL, mac [ROW_MAC_LEN];
    size_t len = 0;
    char stored [2 * ROW_MAC_LEN + 2] = "", hex [2 * ROW_MAC_LEN + 1];
    char *name = s_name (tenant);
    int got = name ? self->be->meta_get (self->store, name, &value, &len) : -1;
    free (name);
    *epoch_p = 0;
    if (got != 1)
        return got < 0 ? -1 : 0;
    uint64_t counter = 0;
    bool ok = sscanf ((char *) value, CHANGES_PREFIX " %" SCNu64 " %65s", &counter, stored) == 2
           && strlen (stored) == 2 * ROW_MAC_LEN
           && row_mac_changes (self->keys->state_key, self->id, tenant, counter, mac) == 0;
    free (value);
    if (ok) {
        cs_hex_encode (mac, ROW_MAC_LEN, hex);
        ok = CRYPTO_memcmp (hex, stored, 2 * ROW_MAC_LEN) == 0;
    }
    if (!ok)
        zsys_warning ("keystore %s: the change epoch of tenant %s does not verify (changed without "
                      "the master key): its cached rows are dropped", ks_where (self), tenant);
    *epoch_p = ok ? counter : UINT64_MAX;
    return 0;
}

int
ks_changes_write (keystore_t *self, uint64_t counter)
{
    if (self->touch_lost)
        return -1;
    for (size_t i = 0; i < self->n_touched; i++) {
        uint8_t mac [ROW_MAC_LEN];
        char hex [2 * ROW_MAC_LEN + 1], text [120];
        keystore_change_t *change = &self->touched [i];
        if (s_read (self, change->tenant, &change->prev) != 0)
            return -1;
        change->epoch = counter;
        char *name = s_name (change->tenant);
        if (!name || row_mac_changes (self->keys->state_key, self->id, change->tenant, counter, mac) != 0) {
            free (name);
            return -1;
        }
        cs_hex_encode (mac, ROW_MAC_LEN, hex);
        snprintf (text, sizeof text, CHANGES_PREFIX " %" PRIu64 " %s", counter, hex);
        int rc = self->be->meta_put (self->store, name, text, strlen (text));
        free (name);
        if (rc != 0)
            return -1;
    }
    return 0;
}

//  Adds a committed change to the connection's own list (merging with an
//  earlier one of the same tenant: prev stays known only when the two
//  follow each other).  Takes change->tenant.
static void
s_own_add (keystore_t *self, keystore_change_t *change)
{
    for (size_t i = 0; i < self->n_own; i++)
        if (strcmp (self->own [i].tenant, change->tenant) == 0) {
            if (self->own [i].epoch != change->prev)
                self->own [i].prev = UINT64_MAX;
            self->own [i].epoch = change->epoch;
            free (change->tenant);
            return;
        }
    keystore_change_t *grown = realloc (self->own, (self->n_own + 1) * sizeof *grown);
    if (!grown) {
        free (change->tenant);          //  forgotten: the next look at the keystore drops it
        return;
    }
    self->own = grown;
    self->own [self->n_own++] = *change;
}

void
ks_changes_reset (keystore_t *self, bool committed)
{
    for (size_t i = 0; i < self->n_touched; i++)
        if (committed)
            s_own_add (self, &self->touched [i]);
        else
            free (self->touched [i].tenant);
    free (self->touched);
    self->touched = NULL;
    self->n_touched = 0;
    self->touch_lost = false;
}

int
keystore_own_changes_take (keystore_t *self, keystore_change_t **changes_p, size_t *count_p)
{
    *changes_p = self ? self->own : NULL;
    *count_p = self ? self->n_own : 0;
    if (self) {
        self->own = NULL;
        self->n_own = 0;
    }
    return 0;
}

int
keystore_tenant_changes (keystore_t *self, keystore_change_t **changes_p, size_t *count_p,
                         uint64_t *counter_p)
{
    uint64_t schema = 0;
    uint8_t digest [32];
    *changes_p = NULL;
    *count_p = 0;
    ks_hook ("tenant_changes");
    if (ks_state_get (self, &schema, counter_p, digest) != 1)
        return -1;                      //  logged, or no state record: unknown
    char **names = self->be->tenant_list (self->store);
    size_t n = 0;
    while (names && names [n])
        n++;
    keystore_change_t *changes = names ? calloc (n ? n : 1, sizeof *changes) : NULL;
    int rc = changes ? 0 : -1;
    for (size_t i = 0; i < n; i++) {
        if (rc == 0 && s_read (self, names [i], &changes [i].epoch) != 0)
            rc = -1;
        if (changes)
            changes [i].tenant = names [i];     //  handed over (freed below on failure)
        else
            free (names [i]);
    }
    free (names);
    if (rc != 0) {
        keystore_changes_free (&changes, n);
        zsys_error ("keystore %s: cannot read the tenants' change epochs", ks_where (self));
        return -1;
    }
    *changes_p = changes;
    *count_p = n;
    return 0;
}

void
keystore_changes_free (keystore_change_t **changes_p, size_t count)
{
    keystore_change_t *changes = *changes_p;
    if (!changes)
        return;
    for (size_t i = 0; i < count; i++)
        free (changes [i].tenant);
    free (changes);
    *changes_p = NULL;
}
