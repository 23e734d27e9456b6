/*  client_load.c — queued bytes per client and the log rate limit
 *  (client_load.h).  */
#include <czmq.h>
#include "client_load.h"

/*  What one client holds: bytes, jobs out, requests waiting.  */
typedef struct {
    char *name;
    size_t bytes;
    size_t jobs;
    zlistx_t *backlog;              /* deferred requests, oldest first; NULL when none yet */
    bool in_round;                  /* in self->round (has a backlog) */
} s_client_t;

struct _client_load_t {
    size_t max_bytes;
    size_t max_jobs;
    size_t peak;
    size_t deferred;                /* requests in all backlogs */
    zhashx_t *clients;              /* client -> s_client_t (only clients holding something) */
    zlistx_t *round;                /* s_client_t * with a backlog, next to serve first */
    zhashx_t *logged;               /* "limit client" -> int64_t * time of the last line */
};

static void
s_free (void **item_p)
{
    free (*item_p);
    *item_p = NULL;
}

static void
s_client_free (void **item_p)
{
    s_client_t *client = *item_p;
    if (client) {
        zlistx_destroy (&client->backlog);
        free (client->name);
        free (client);
    }
    *item_p = NULL;
}

client_load_t *
client_load_new (size_t max_bytes, size_t max_jobs)
{
    client_load_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->max_bytes = max_bytes;
    self->max_jobs = max_jobs ? max_jobs : 1;
    self->clients = zhashx_new ();
    self->round = zlistx_new ();
    self->logged = zhashx_new ();
    if (!self->clients || !self->round || !self->logged) {
        client_load_destroy (&self);
        return NULL;
    }
    zhashx_set_destructor (self->clients, s_client_free);
    zhashx_set_destructor (self->logged, s_free);
    return self;
}

void
client_load_destroy (client_load_t **self_p)
{
    client_load_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    zlistx_destroy (&self->round);
    zhashx_destroy (&self->clients);
    zhashx_destroy (&self->logged);
    free (self);
    *self_p = NULL;
}

/*  The record of `client`, made when new (make); NULL when absent or out
 *  of memory.  */
static s_client_t *
s_client (client_load_t *self, const char *name, bool make)
{
    s_client_t *client = zhashx_lookup (self->clients, name);
    if (client || !make)
        return client;
    if (!(client = calloc (1, sizeof *client)) || !(client->name = strdup (name))) {
        free (client);
        return NULL;
    }
    zhashx_insert (self->clients, name, client);
    return client;
}

/*  Forgets a client that holds nothing any more.  */
static void
s_client_gc (client_load_t *self, s_client_t *client)
{
    if (client->bytes == 0 && client->jobs == 0 && !client->in_round)
        zhashx_delete (self->clients, client->name);
}

int
client_load_charge (client_load_t *self, const char *name, size_t bytes)
{
    s_client_t *client = s_client (self, name, false);
    size_t now = client ? client->bytes : 0;
    if (bytes > self->max_bytes || now > self->max_bytes - bytes)
        return -1;
    if (!client && !(client = s_client (self, name, true)))
        return -1;
    client->bytes += bytes;
    if (client->bytes > self->peak)
        self->peak = client->bytes;
    return 0;
}

void
client_load_release (client_load_t *self, const char *name, size_t bytes)
{
    s_client_t *client = s_client (self, name, false);
    assert (client && client->bytes >= bytes);
    client->bytes -= bytes;
    s_client_gc (self, client);
}

size_t
client_load_bytes (client_load_t *self, const char *name)
{
    s_client_t *client = s_client (self, name, false);
    return client ? client->bytes : 0;
}

int
client_load_jobs_add (client_load_t *self, const char *name, int delta)
{
    s_client_t *client = s_client (self, name, delta > 0);
    if (!client)
        return delta > 0 ? -1 : 0;
    assert (delta >= 0 || client->jobs >= (size_t) -delta);
    client->jobs = (size_t) ((long) client->jobs + delta);
    s_client_gc (self, client);
    return 0;
}

size_t
client_load_jobs (client_load_t *self, const char *name)
{
    s_client_t *client = s_client (self, name, false);
    return client ? client->jobs : 0;
}

bool
client_load_may_start (client_load_t *self, const char *name)
{
    s_client_t *client = s_client (self, name, false);
    return !client || (client->jobs < self->max_jobs && !client->in_round);
}

int
client_load_defer (client_load_t *self, const char *name, void *request)
{
    s_client_t *client = s_client (self, name, true);
    if (!client || (!client->backlog && !(client->backlog = zlistx_new ())))
        return -1;
    if (!zlistx_add_end (client->backlog, request))
        return -1;
    if (!client->in_round) {
        zlistx_add_end (self->round, client);
        client->in_round = true;
    }
    self->deferred++;
    return 0;
}

/*  Removes the first request of the backlog of the client at the round's
 *  cursor; the client leaves the round when its backlog is empty.  */
static void *
s_take (client_load_t *self, s_client_t *client)
{
    void *request = zlistx_detach (client->backlog, NULL);
    self->deferred--;
    if (zlistx_size (client->backlog) == 0) {
        zlistx_delete (self->round, zlistx_cursor (self->round));
        client->in_round = false;
    }
    else
        zlistx_move_end (self->round, zlistx_cursor (self->round));
    return request;
}

void *
client_load_next (client_load_t *self)
{
    for (s_client_t *client = zlistx_first (self->round); client; client = zlistx_next (self->round))
        if (client->jobs < self->max_jobs)
            return s_take (self, client);
    return NULL;
}

void *
client_load_pop (client_load_t *self)
{
    s_client_t *client = zlistx_first (self->round);
    return client ? s_take (self, client) : NULL;
}

size_t
client_load_deferred (client_load_t *self)
{
    return self->deferred;
}

size_t
client_load_client_deferred (client_load_t *self, const char *name)
{
    s_client_t *client = s_client (self, name, false);
    return client && client->backlog ? zlistx_size (client->backlog) : 0;
}

size_t
client_load_total (client_load_t *self)
{
    size_t total = 0;
    for (s_client_t *client = zhashx_first (self->clients); client; client = zhashx_next (self->clients))
        total += client->bytes;
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
