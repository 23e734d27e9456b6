/*  ks_watch.c — inotify(7) on keystore.db and keystore.db-wal (ks_watch.h),
 *  through path_watch.h.  */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <czmq.h>
#include "ks_watch.h"

#define S_EVENTS (IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)

ks_watch_t *
ks_watch_new (const char *db_path)
{
    char *wal = NULL;
    ks_watch_t *self = NULL;
    if (asprintf (&wal, "%s-wal", db_path) < 0)
        wal = NULL;
    else {
        /*  A renamed file stays watched (its IN_MOVE_SELF is a change).  */
        const char *paths [2] = { db_path, wal };
        self = path_watch_new (paths, 2, S_EVENTS, PATH_WATCH_INODE);
    }
    if (!self)
        zsys_warning ("keystore %s: cannot watch it for changes (inotify: %s)", db_path, strerror (errno));
    free (wal);
    return self;
}

void
ks_watch_destroy (ks_watch_t **self_p)
{
    path_watch_destroy (self_p);
}

bool
ks_watch_changed (ks_watch_t *self)
{
    return path_watch_changed (self);
}
