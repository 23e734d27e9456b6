/*  client_load.c — queued bytes per client and the log rate limit
 *  (client_load.h).  */
#include <czmq.h>
#include "client_load.h"

struct _client_load_t {
    size_t max_bytes;
    size_t peak;
    zhashx_t *bytes;            /* client -> size_t * (only clients holding bytes) */
    zhashx_t *logged;           /* "limit client" -> int64_t * time of the last line */
};

static void
s_free (void **item_p)
{
    free (*item_p);
    *item_p = NULL;
}

client_load_t *
client_load_new (size_t max_bytes)
{
    client_load_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->max_bytes = max_bytes;
    self->bytes = zhashx_new ();
    self->logged = zhashx_new ();
    if (!self->bytes || !self->logged) {
        client_load_destroy (&self);
        return NULL;
    }
    zhashx_set_destructor (self->bytes, s_free);
    zhashx_set_destructor (self->logged, s_free);
    return self;
}

void
client_load_destroy (client_load_t **self_p)
{
    client_load_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    zhashx_destroy (&self->bytes);
    zhashx_destroy (&self->logged);
    free (self);
    *self_p = NULL;
}

int
client_load_charge (client_load_t *self, const char *client, size_t bytes)
{
    size_t *held = zhashx_lookup (self->bytes, client);
    size_t now = held ? *held : 0;
    if (bytes > self->max_bytes || now > self->max_bytes - bytes)
        return -1;
    if (!held) {
        if (!(held = calloc (1, sizeof *held)))
            return -1;
        zhashx_insert (self->bytes, client, held);
    }
    *held += bytes;
    if (*held > self->peak)
        self->peak = *held;
    return 0;
}

void
client_load_release (client_load_t *self, const char *client, size_t bytes)
{
    size_t *held = zhashx_lookup (self->bytes, client);
    assert (held && *held >= bytes);
    *held -= bytes;
    if (*held == 0)
        zhashx_delete (self->bytes, client);
}

size_t
client_load_bytes (client_load_t *self, const char *client)
{
    size_t *held = zhashx_lookup (self->bytes, client);
    return held ? *held : 0;
}

size_t
client_load_total (client_load_t *self)
{
    size_t total = 0;
    for (size_t *held = zhashx_first (self->bytes); held; held = zhashx_next (self->bytes))
        total += *held;
    return total;
}

size_t
client_load_peak (client_load_t *self)
{
    return self->peak;
}

bool
client_load_log_due (client_load_t *self, const char *client, const char *limit, int64_t now_ms)
{
    char key [512];
    snprintf (key, sizeof key, "%s %s", limit, client);
    int64_t *last = zhashx_lookup (self->logged, key);
    if (last && now_ms - *last < CLIENT_LOAD_LOG_PERIOD_MS)
        return false;
    if (!last) {
        if (zhashx_size (self->logged) >= CLIENT_LOAD_LOG_CLIENTS)
            zhashx_purge (self->logged);
        if (!(last = calloc (1, sizeof *last)))
            return true;
        zhashx_insert (self->logged, key, last);
    }
    *last = now_ms;
    return true;
}
