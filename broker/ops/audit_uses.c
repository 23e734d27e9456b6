/*  audit_uses.c — the audit log's key-use counters (audit_uses.h): found
 *  by their fields with nothing formatted or allocated per job.  */
#include <stdlib.h>
#include <string.h>
#include "audit_uses.h"

//  zhashx destructor of a counter (the item; its key is the same pointer).
static void
s_use_destroy (void **item)
{
    audit_use_t *use = *item;
    if (use) {
        free (use->tenant);
        free (use->key);
        free (use->mechanism);
        free (use->client);
        free (use->client_key);
        free (use->order);
        free (use);
    }
    *item = NULL;
}

//  zhashx's hasher and comparator of audit_use_t keys.  The hash takes the
//  short names, each with a separator after it ("ab" "c" and "a" "bc"
//  differ), not the 40 characters of client_key (a client's key and name go
//  together: the allow-list); the comparator takes all five, the most
//  varied first.
static size_t
s_use_hash (const void *item)
{
    const audit_use_t *use = item;
    const char *names [] = { use->tenant, use->key, use->mechanism, use->client };
    size_t hash = 5381;
    for (size_t i = 0; i < sizeof names / sizeof names [0]; i++) {
        for (const char *c = names [i]; *c; c++)
            hash = (hash * 33) ^ (unsigned char) *c;
        hash = (hash * 33) ^ 0x1f;
    }
    return hash;
}

static int
s_use_cmp (const void *item1, const void *item2)
{
    const audit_use_t *a = item1, *b = item2;
    int diff = strcmp (a->key, b->key);
    if (!diff) diff = strcmp (a->client_key, b->client_key);
    if (!diff) diff = strcmp (a->mechanism, b->mechanism);
    if (!diff) diff = strcmp (a->tenant, b->tenant);
    if (!diff) diff = strcmp (a->client, b->client);
    return diff;
}

//  A new counter with copies of `like`'s names, in uses, or NULL.
static audit_use_t *
s_use_new (zhashx_t *uses, const audit_use_t *like)
{
    audit_use_t *use = calloc (1, sizeof *use);
    if (!use)
        return NULL;
    use->tenant = strdup (like->tenant);
    use->key = strdup (like->key);
    use->mechanism = strdup (like->mechanism);
    use->client = strdup (like->client);
    use->client_key = strdup (like->client_key);
    if (asprintf (&use->order, "%s\x1f%s\x1f%s\x1f%s\x1f%s", like->tenant, like->key, like->mechanism,
                  like->client, like->client_key) < 0)
        use->order = NULL;
    void *item = use;
    if (!use->tenant || !use->key || !use->mechanism || !use->client || !use->client_key || !use->order
    ||  zhashx_insert (uses, use, use) != 0) {
        s_use_destroy (&item);
        return NULL;
    }
    return use;
}

void
audit_uses_count (zhashx_t *uses, const char *tenant, const char *key, const char *mechanism,
                  const char *client, const char *client_key, CK_RV rv)
{
    //  The names borrowed for the lookup only.
    audit_use_t like = {
        .tenant = (char *) (tenant ? tenant : ""), .key = (char *) key, .mechanism = (char *) mechanism,
        .client = (char *) (client ? client : ""), .client_key = (char *) (client_key ? client_key : ""),
    };
    audit_use_t *use = zhashx_lookup (uses, &like);
    if (!use && !(use = s_use_new (uses, &like)))
        return;
    use->count++;
    if (rv != CKR_OK) {
        use->failures++;
        use->last_failure = rv;
    }
}

zhashx_t *
audit_uses_new (void)
{
    zhashx_t *uses = zhashx_new ();
    if (uses) {
        zhashx_set_destructor (uses, s_use_destroy);
        zhashx_set_key_duplicator (uses, NULL);        //  a counter is its own key
        zhashx_set_key_destructor (uses, NULL);
        zhashx_set_key_hasher (uses, s_use_hash);
        zhashx_set_key_comparator (uses, s_use_cmp);
    }
    return uses;
}

static int
s_use_order (const void *a, const void *b)
{
    return strcmp ((*(audit_use_t * const *) a)->order, (*(audit_use_t * const *) b)->order);
}

void
audit_uses_take (zhashx_t *uses_table, audit_use_record_fn *record, void *arg)
{
    size_t size = zhashx_size (uses_table), used = 0, idle = 0;
    audit_use_t **uses = size ? calloc (size, sizeof *uses) : NULL;
    if (!uses)
        return;                     //  none, or no memory: counted on, taken next time
    for (audit_use_t *use = zhashx_first (uses_table); use; use = zhashx_next (uses_table))
        if (use->count)
            uses [used++] = use;
        else
            uses [size - ++idle] = use;
    for (size_t i = size - idle; i < size; i++)
        zhashx_delete (uses_table, uses [i]);
    qsort (uses, used, sizeof *uses, s_use_order);
    for (size_t i = 0; i < used; i++) {
        record (uses [i], arg);
        uses [i]->count = uses [i]->failures = 0;
        uses [i]->last_failure = CKR_OK;
    }
    free (uses);
}
