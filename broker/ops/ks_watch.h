/*  ks_watch.h — notices that the keystore file changed, whoever changed it
 *  (cryptoserver-admin, another broker on the same file, the broker's own
 *  slow pool, someone with sqlite3), so that the frontend's cache
 *  (ks_cache.h) never serves a key or a PIN epoch the file no longer holds.
 *
 *  inotify(7) on the database and its -wal file (IN_MODIFY: every write
 *  of a transaction, in WAL or rollback mode, writes one of them; SQLite
 *  writes no content through mmap).  ks_watch_changed is one non-blocking
 *  read(2): the frontend calls it for every request before it looks at its
 *  cache, so a change made before a request was sent is always seen by that
 *  request (the watch itself is path_watch.h, shared with clients_watch.h).  A write is seen when it starts, before its transaction
 *  commits: the caller holds its cache until a reader is sure to see the
 *  commit (ks_cache_hold, then a slow-pool item that takes the write lock).
 *  Linux only, like the rest of the broker.
 */
#ifndef KS_WATCH_H_INCLUDED
#define KS_WATCH_H_INCLUDED

#include <stdbool.h>
#include "path_watch.h"

typedef path_watch_t ks_watch_t;

/*  Watches the SQLite database at db_path and its "-wal" file, which must
 *  exist (the broker keeps connections open, so it does).  Returns NULL
 *  after a log line when inotify is not available (then nothing may be
 *  cached).  Caller destroys.  */
ks_watch_t *ks_watch_new (const char *db_path);

/*  Closes the watch; NULL-safe; nulls *self_p.  */
void ks_watch_destroy (ks_watch_t **self_p);

/*  True when either file was written, replaced or removed since the last
 *  call, or when the kernel's event queue overflowed, or when a watch is
 *  lost and cannot be set again (then every call says true).  Reads every
 *  pending event; never blocks.  */
bool ks_watch_changed (ks_watch_t *self);

#endif
