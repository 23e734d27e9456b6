/*  path_watch.h — inotify(7) on a few paths, read without blocking: the
 *  part clients_watch.h (the allow-list directory) and ks_watch.h (the
 *  keystore file and its -wal file) share.  One non-blocking read(2) per
 *  call drains every queued event; a watch the kernel drops (the path was
 *  removed or replaced) is set again on the path at the next call.  Linux
 *  only, like the broker.
 */
#ifndef PATH_WATCH_H_INCLUDED
#define PATH_WATCH_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct _path_watch_t path_watch_t;

/*  What else, besides the kernel dropping a watch (IN_IGNORED), makes a
 *  watch lost and set again on its path.  */
typedef enum {
    PATH_WATCH_INODE = 0,           /* nothing: a renamed file stays watched */
    PATH_WATCH_PATH = 1             /* IN_MOVE_SELF: watch the path, not the moved inode */
} path_watch_follow_t;

/*  Watches the `count` paths (1..4; each must exist) for the inotify
 *  `events` (IN_* bits; IN_IGNORED always comes).  Returns NULL, with errno
 *  set by the call that failed, when inotify is not available, a path
 *  cannot be watched, or memory runs out: the caller logs.  Caller
 *  destroys.  */
path_watch_t *path_watch_new (const char *const *paths, size_t count, uint32_t events,
                              path_watch_follow_t follow);

/*  Closes the inotify descriptor; NULL-safe; nulls *self_p.  */
void path_watch_destroy (path_watch_t **self_p);

/*  The inotify descriptor (non-blocking, close-on-exec), readable when an
 *  event is queued: for zloop_poller.  Owned by the watch.  */
int path_watch_fd (path_watch_t *self);

/*  True when any event came since the last call (the kernel's queue
 *  overflowing is one), when a lost watch was set again (what is now at
 *  the path may be new), or when a lost watch cannot be set again (then
 *  every call says true until it can).  Reads every pending event; never
 *  blocks.  */
bool path_watch_changed (path_watch_t *self);

#endif
