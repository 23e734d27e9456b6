/*  ks_watch.c — inotify(7) on keystore.db and keystore.db-wal (ks_watch.h).  */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/inotify.h>
#include <czmq.h>
#include "ks_watch.h"

#define S_FILES 2                   /* the database and its -wal file */
#define S_EVENTS (IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)

struct _ks_watch_t {
    int fd;
    char *path [S_FILES];
    int wd [S_FILES];               /* -1: lost (file replaced or removed) */
};

/*  (Re)sets the watch of file i; false when it cannot.  */
static bool
s_add (ks_watch_t *self, size_t i)
{
    self->wd [i] = inotify_add_watch (self->fd, self->path [i], S_EVENTS);
    return self->wd [i] >= 0;
}

ks_watch_t *
ks_watch_new (const char *db_path)
{
    ks_watch_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->fd = inotify_init1 (IN_NONBLOCK | IN_CLOEXEC);
    self->path [0] = strdup (db_path);
    if (asprintf (&self->path [1], "%s-wal", db_path) < 0)
        self->path [1] = NULL;
    for (size_t i = 0; i < S_FILES; i++)
        self->wd [i] = -1;
    bool ok = self->fd >= 0 && self->path [0] && self->path [1];
    for (size_t i = 0; ok && i < S_FILES; i++)
        ok = s_add (self, i);
    if (!ok) {
        zsys_warning ("keystore %s: cannot watch it for changes (inotify: %s)", db_path, strerror (errno));
        ks_watch_destroy (&self);
    }
    return self;
}

void
ks_watch_destroy (ks_watch_t **self_p)
{
    ks_watch_t *self = *self_p;
    if (!self)
        return;
    if (self->fd >= 0)
        close (self->fd);
    for (size_t i = 0; i < S_FILES; i++)
        free (self->path [i]);
    free (self);
    *self_p = NULL;
}

/*  Notes a watch the kernel dropped (IN_IGNORED: the file went away).  */
static void
s_lost (ks_watch_t *self, int wd)
{
    for (size_t i = 0; i < S_FILES; i++)
        if (self->wd [i] == wd)
            self->wd [i] = -1;
}

bool
ks_watch_changed (ks_watch_t *self)
{
    char events [4096] __attribute__ ((aligned (__alignof__ (struct inotify_event))));
    bool changed = false;
    ssize_t len;
    while ((len = read (self->fd, events, sizeof events)) > 0) {
        changed = true;
        for (char *p = events; p < events + len; ) {
            const struct inotify_event *event = (const struct inotify_event *) p;
            if (event->mask & IN_IGNORED)
                s_lost (self, event->wd);
            p += sizeof *event + event->len;
        }
    }
    for (size_t i = 0; i < S_FILES; i++)
        if (self->wd [i] < 0 && !s_add (self, i))
            changed = true;         /* cannot watch: assume a change every time */
    return changed;
}
