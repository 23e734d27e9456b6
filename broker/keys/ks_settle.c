/*  ks_settle.c — the keystore connection that looks for other writers'
 *  commits on behalf of the frontend's cache (ks_settle.h).  */
#include <pthread.h>
#include <stdlib.h>
#include <czmq.h>
#include "ks_settle.h"

struct _ks_settle_t {
    pthread_mutex_t lock;           /* one look at a time: the connection is not shared */
    keystore_t *ks;
    uint64_t counter;               /* the state counter at the last look */
    keystore_listener_t *listener;  /* PostgreSQL: foreign commits are counted there */
    uint64_t foreign;               /* keystore_listener_foreign at the last look */
};

ks_settle_t *
ks_settle_new (keystore_t *ks, keystore_listener_t *listener, keystore_change_t **changes_p, size_t *n_p)
{
    ks_settle_t *self = calloc (1, sizeof *self);
    *changes_p = NULL;
    *n_p = 0;
    if (!self || !(self->ks = keystore_open_again (ks))) {
        free (self);
        return NULL;
    }
    pthread_mutex_init (&self->lock, NULL);
    self->listener = listener;
    self->foreign = keystore_listener_foreign (listener);
    keystore_settle (self->ks);             //  data_version from now on
    if (keystore_tenant_changes (self->ks, changes_p, n_p, &self->counter) != 0)
        *changes_p = NULL;
    return self;
}

void
ks_settle_destroy (ks_settle_t **self_p)
{
    ks_settle_t *self = *self_p;
    if (!self)
        return;
    keystore_destroy (&self->ks);
    pthread_mutex_destroy (&self->lock);
    free (self);
    *self_p = NULL;
}

int
ks_settle_look (ks_settle_t *self, keystore_change_t **changes_p, size_t *n_p, bool *foreign_p)
{
    uint64_t counter = 0;
    *changes_p = NULL;
    *n_p = 0;
    *foreign_p = false;
    pthread_mutex_lock (&self->lock);
    int rc = keystore_settle (self->ks);
    if (rc == 1 && keystore_tenant_changes (self->ks, changes_p, n_p, &counter) != 0)
        rc = -1;
    if (rc == 1 && self->listener) {
        uint64_t foreign = keystore_listener_foreign (self->listener);
        *foreign_p = foreign != self->foreign;
        self->foreign = foreign;
    }
    else
    if (rc == 1)
        *foreign_p = counter == self->counter;
    if (rc == 1)
        self->counter = counter;
    pthread_mutex_unlock (&self->lock);
    return rc;
}
