/*  clients_watch.c — inotify(7) on the allow-list directory (clients_watch.h).  */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/inotify.h>
#include <czmq.h>
#include "clients_watch.h"

#define S_EVENTS (IN_CREATE | IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_DELETE | IN_MOVED_FROM \
                  | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

struct _clients_watch_t {
    int fd;
    char *dir;
    int wd;                         /* -1: lost (directory removed or renamed) */
};

/*  (Re)sets the watch of the directory; false when it cannot.  */
static bool
s_add (clients_watch_t *self)
{
    self->wd = inotify_add_watch (self->fd, self->dir, S_EVENTS);
    return self->wd >= 0;
}

clients_watch_t *
clients_watch_new (const char *dir)
{
    clients_watch_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->fd = inotify_init1 (IN_NONBLOCK | IN_CLOEXEC);
    self->dir = strdup (dir);
    self->wd = -1;
    if (self->fd < 0 || !self->dir || !s_add (self)) {
        zsys_warning ("allow-list %s: cannot watch it for changes (inotify: %s); re-read every 2 s",
                      dir, strerror (errno));
        clients_watch_destroy (&self);
    }
    return self;
}

void
clients_watch_destroy (clients_watch_t **self_p)
{
    clients_watch_t *self = *self_p;
    if (!self)
        return;
    if (self->fd >= 0)
        close (self->fd);
    free (self->dir);
    free (self);
    *self_p = NULL;
}

int
clients_watch_fd (clients_watch_t *self)
{
    return self->fd;
}

bool
clients_watch_changed (clients_watch_t *self)
{
    char events [4096] __attribute__ ((aligned (__alignof__ (struct inotify_event))));
    bool changed = false;
    ssize_t len;
    while ((len = read (self->fd, events, sizeof events)) > 0) {
        changed = true;
        for (char *p = events; p < events + len; ) {
            const struct inotify_event *event = (const struct inotify_event *) p;
            if (event->wd == self->wd && (event->mask & IN_MOVE_SELF))
                inotify_rm_watch (self->fd, self->wd);  /* watch the path, not the moved inode */
            if (event->wd == self->wd && (event->mask & (IN_IGNORED | IN_MOVE_SELF)))
                self->wd = -1;
            p += sizeof *event + event->len;
        }
    }
    if (self->wd < 0 && !s_add (self))
        changed = true;             /* cannot watch: assume a change every time */
    return changed;
}
