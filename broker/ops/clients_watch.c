/*  clients_watch.c — inotify(7) on the allow-list directory (clients_watch.h),
 *  through path_watch.h.  */
#include <errno.h>
#include <string.h>
#include <sys/inotify.h>
#include <czmq.h>
#include "clients_watch.h"

#define S_EVENTS (IN_CREATE | IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_DELETE | IN_MOVED_FROM \
                  | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

clients_watch_t *
clients_watch_new (const char *dir)
{
    /*  A directory renamed away is no longer the allow-list: watch the path.  */
    clients_watch_t *self = path_watch_new (&dir, 1, S_EVENTS, PATH_WATCH_PATH);
    if (!self)
        zsys_warning ("allow-list %s: cannot watch it for changes (inotify: %s); re-read every 2 s",
                      dir, strerror (errno));
    return self;
}

void
clients_watch_destroy (clients_watch_t **self_p)
{
    path_watch_destroy (self_p);
}

int
clients_watch_fd (clients_watch_t *self)
{
    return path_watch_fd (self);
}

bool
clients_watch_changed (clients_watch_t *self)
{
    return path_watch_changed (self);
}
