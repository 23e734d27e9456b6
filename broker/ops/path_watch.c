/*  path_watch.c — inotify(7) on a few paths (path_watch.h).  */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/inotify.h>
#include "path_watch.h"

#define S_PATHS_MAX 4

struct _path_watch_t {
    int fd;
    uint32_t events;
    path_watch_follow_t follow;
    size_t count;
    char *path [S_PATHS_MAX];
    int wd [S_PATHS_MAX];           /* -1: lost (path removed, replaced or renamed) */
};

/*  (Re)sets the watch of path i; false when it cannot.  */
static bool
s_add (path_watch_t *self, size_t i)
{
    self->wd [i] = inotify_add_watch (self->fd, self->path [i], self->events);
    return self->wd [i] >= 0;
}

path_watch_t *
path_watch_new (const char *const *paths, size_t count, uint32_t events, path_watch_follow_t follow)
{
    if (count == 0 || count > S_PATHS_MAX) {
        errno = EINVAL;
        return NULL;
    }
    path_watch_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->fd = inotify_init1 (IN_NONBLOCK | IN_CLOEXEC);
    self->events = events;
    self->follow = follow;
    self->count = count;
    bool ok = self->fd >= 0;
    for (size_t i = 0; i < count; i++) {
        self->wd [i] = -1;
        self->path [i] = strdup (paths [i]);
        ok = ok && self->path [i];
    }
    for (size_t i = 0; ok && i < count; i++)
        ok = s_add (self, i);
    if (!ok) {
        int error = errno;
        path_watch_destroy (&self);
        errno = error;
    }
    return self;
}

void
path_watch_destroy (path_watch_t **self_p)
{
    path_watch_t *self = *self_p;
    if (!self)
        return;
    if (self->fd >= 0)
        close (self->fd);
    for (size_t i = 0; i < self->count; i++)
        free (self->path [i]);
    free (self);
    *self_p = NULL;
}

int
path_watch_fd (path_watch_t *self)
{
    return self->fd;
}

/*  Notes what an event on watch wd says of it: the kernel dropped it
 *  (IN_IGNORED), or, when the path is followed, the watched inode moved
 *  away from the path (IN_MOVE_SELF: the watch is removed).  */
static void
s_event (path_watch_t *self, const struct inotify_event *event)
{
    for (size_t i = 0; i < self->count; i++) {
        if (self->wd [i] != event->wd)
            continue;
        if (self->follow == PATH_WATCH_PATH && (event->mask & IN_MOVE_SELF)) {
            inotify_rm_watch (self->fd, self->wd [i]);
            self->wd [i] = -1;
        }
        if (event->mask & IN_IGNORED)
            self->wd [i] = -1;
    }
}

bool
path_watch_changed (path_watch_t *self)
{
    char events [4096] __attribute__ ((aligned (__alignof__ (struct inotify_event))));
    bool changed = false;
    ssize_t len;
    while ((len = read (self->fd, events, sizeof events)) > 0) {
        changed = true;
        for (char *p = events; p < events + len; ) {
            const struct inotify_event *event = (const struct inotify_event *) p;
            s_event (self, event);
            p += sizeof *event + event->len;
        }
    }
    /*  A lost watch set again is a change too: what is at the path now
        (a new clients.d, a new keystore file) may hold anything, and
        nothing reported what came before the watch.  One that cannot be
        set says changed at every call until it can.  */
    for (size_t i = 0; i < self->count; i++)
        if (self->wd [i] < 0) {
            s_add (self, i);
            changed = true;
        }
    return changed;
}
