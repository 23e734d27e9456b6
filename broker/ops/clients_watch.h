/*  clients_watch.h — notices at once that the allow-list directory
 *  (broker/curve/clients, the deployment's clients.d) changed: a client
 *  added or removed by cryptoserver-admin, a cert edited, replaced or
 *  renamed (issue #11, "Admission at once").
 *
 *  inotify(7) on the directory (IN_CREATE, IN_CLOSE_WRITE, IN_MODIFY,
 *  IN_ATTRIB, IN_DELETE, IN_MOVED_FROM, IN_MOVED_TO, and the directory's own
 *  IN_DELETE_SELF / IN_MOVE_SELF).  The kernel queues an event during the
 *  writer's system call, so when `cryptoserver-admin client add` returns,
 *  the event is queued: the frontend calls clients_watch_changed before it
 *  looks up the sender of every request, and the first request of a client
 *  added before it connected finds it in the list.  Its descriptor is also
 *  polled by the reactor, so a removed client's connection is cut off
 *  without waiting for its next request.  The watch itself is
 *  path_watch.h, shared with ks_watch.h.  Linux only, like the broker.
 */
#ifndef CLIENTS_WATCH_H_INCLUDED
#define CLIENTS_WATCH_H_INCLUDED

#include <stdbool.h>
#include "path_watch.h"

typedef path_watch_t clients_watch_t;

/*  Watches directory `dir`, which must exist.  Returns NULL after a warning
 *  line when inotify is not available (the caller then re-reads the
 *  directory on a timer).  Caller destroys.  */
clients_watch_t *clients_watch_new (const char *dir);

/*  Closes the watch; NULL-safe; nulls *self_p.  */
void clients_watch_destroy (clients_watch_t **self_p);

/*  The inotify descriptor (non-blocking, close-on-exec), readable when an
 *  event is queued: for zloop_poller.  Owned by the watch.  */
int clients_watch_fd (clients_watch_t *self);

/*  True when the directory or a file in it changed since the last call, the
 *  kernel's queue overflowed, or the directory's watch is lost and cannot be
 *  set again (then every call says true).  Reads every pending event; never
 *  blocks.  */
bool clients_watch_changed (clients_watch_t *self);

#endif
