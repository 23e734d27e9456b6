/*  ks_pg_listen.c — the listener of the PostgreSQL keystore's change
 *  notifications (keystore_listener_new, keystore.h): a connection of its
 *  own that LISTENs on channel "cryptoserver_keystore" (ks_pg.c's triggers
 *  notify it at every commit on tenants and keys, with the writer's
 *  origin), and a thread that waits on its socket and counts the
 *  notifications of other origins (and apart those without an origin:
 *  psql); after a lost connection it tries again every second and counts
 *  one change of each kind when it is back.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <czmq.h>
#include <libpq-fe.h>
#include "keystore.h"
#include "ks_backend.h"
#include "ks_pg.h"

struct _keystore_listener_t {
    char *url;
    char *where;
    pthread_t thread;
    int stop [2];               /* a pipe: destroy writes to it */
    uint64_t changes;           /* atomic */
    uint64_t foreign;           /* atomic: commits without an origin (psql), reconnections */
    bool connected;             /* atomic */
    PGconn *conn;               /* the thread's */
};

//  Connects and LISTENs.  Returns 0, or -1 after a log line.
static int
s_listener_connect (keystore_listener_t *self)
{
    self->conn = ks_pg_connect (self->url, self->where);
    PGresult *res = self->conn ? PQexec (self->conn, "LISTEN " KS_PG_CHANNEL) : NULL;
    bool ok = res && PQresultStatus (res) == PGRES_COMMAND_OK;
    if (res && !ok)
        zsys_error ("keystore %s: LISTEN: %.*s", self->where, KS_PG_MSG (self->conn));
    PQclear (res);
    if (!ok) {
        PQfinish (self->conn);
        self->conn = NULL;
        return -1;
    }
    __atomic_store_n (&self->connected, true, __ATOMIC_SEQ_CST);
    return 0;
}

//  Reads what arrived; counts the notifications of other origins.  False
//  when the connection dropped.
static bool
s_listener_read (keystore_listener_t *self)
{
    if (!PQconsumeInput (self->conn) || PQstatus (self->conn) != CONNECTION_OK)
        return false;
    PGnotify *notify;
    while ((notify = PQnotifies (self->conn))) {
        if (!*notify->extra)            //  before `changes`: a reader of both sees it with it
            __atomic_add_fetch (&self->foreign, 1, __ATOMIC_SEQ_CST);
        if (strcmp (notify->extra, ks_pg_origin ()) != 0)
            __atomic_add_fetch (&self->changes, 1, __ATOMIC_SEQ_CST);
        PQfreemem (notify);
    }
    return true;
}

//  The thread: waits for notifications (or the stop pipe); after a lost
//  connection tries again every second, and counts a change when it is
//  back (what happened meanwhile was not seen).
static void *
s_listener_thread (void *arg)
{
    keystore_listener_t *self = arg;
    bool warned = false;
    while (true) {
        struct pollfd fds [2] = { { self->stop [0], POLLIN, 0 }, { -1, POLLIN, 0 } };
        if (self->conn)
            fds [1].fd = PQsocket (self->conn);
        if (poll (fds, 2, self->conn ? -1 : 1000) < 0 && errno != EINTR)
            break;
        if (fds [0].revents)
            break;
        if (self->conn && fds [1].revents && !s_listener_read (self)) {
            __atomic_store_n (&self->connected, false, __ATOMIC_SEQ_CST);
            PQfinish (self->conn);
            self->conn = NULL;
            zsys_warning ("keystore %s: change notifications lost (database unreachable): cached keys "
                          "and tenant rows are served until it is back", self->where);
            warned = true;
            continue;
        }
        if (!self->conn && s_listener_connect (self) == 0) {
            __atomic_add_fetch (&self->foreign, 1, __ATOMIC_SEQ_CST);
            __atomic_add_fetch (&self->changes, 1, __ATOMIC_SEQ_CST);
            if (warned)
                zsys_info ("keystore %s: change notifications back: caches dropped", self->where);
            warned = false;
        }
    }
    return NULL;
}

keystore_listener_t *
ks_pg_listen (const char *url, const char *where)
{
    keystore_listener_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->stop [0] = self->stop [1] = -1;
    if (!(self->url = strdup (url)) || !(self->where = strdup (where))
    ||  pipe2 (self->stop, O_CLOEXEC) != 0 || s_listener_connect (self) != 0
    ||  pthread_create (&self->thread, NULL, s_listener_thread, self) != 0) {
        if (self->stop [0] >= 0) {
            close (self->stop [0]);
            close (self->stop [1]);
        }
        PQfinish (self->conn);
        free (self->url);
        free (self->where);
        free (self);
        return NULL;
    }
    return self;
}

uint64_t
ks_listener_changes (keystore_listener_t *self)
{
    return self ? __atomic_load_n (&self->changes, __ATOMIC_SEQ_CST) : 0;
}

uint64_t
ks_listener_foreign (keystore_listener_t *self)
{
    return self ? __atomic_load_n (&self->foreign, __ATOMIC_SEQ_CST) : 0;
}

bool
ks_listener_connected (keystore_listener_t *self)
{
    return self && __atomic_load_n (&self->connected, __ATOMIC_SEQ_CST);
}

void
ks_listener_destroy (keystore_listener_t **self_p)
{
    keystore_listener_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    if (write (self->stop [1], "", 1) == 1)
        pthread_join (self->thread, NULL);
    close (self->stop [0]);
    close (self->stop [1]);
    PQfinish (self->conn);
    free (self->url);
    free (self->where);
    free (self);
    *self_p = NULL;
}
