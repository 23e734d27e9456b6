/*  ks_settle.h — what changed in the keystore since the last look, for the
 *  frontend's cache (ks_cache.h; issue 19 item 8): one keystore connection
 *  of its own, used by the slow-pool thread that runs a SLOW_SETTLE (one
 *  at a time, under a mutex), which
 *    - waits for any writer and tells whether another connection committed
 *      since its last look (keystore_settle: SQLite's data_version is per
 *      connection, so one connection must do all the looking);
 *    - reads every tenant's change epoch and the state counter
 *      (keystore_tenant_changes);
 *    - calls a commit "foreign" when it came from a writer without the
 *      master key (sqlite3, psql), which may have changed any row: SQLite,
 *      someone committed but the state counter did not move (every commit
 *      of cryptoserver raises it); PostgreSQL, the listener counted a
 *      commit without an origin or connected again
 *      (keystore_listener_foreign: there every look says "someone
 *      committed", so the counter cannot tell).
 */
#ifndef KS_SETTLE_H_INCLUDED
#define KS_SETTLE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include "keystore.h"

typedef struct _ks_settle_t ks_settle_t;

/*  Opens a connection of its own to ks's database (keystore_open_again)
 *  and takes the first look (listener: PostgreSQL's, borrowed; NULL for
 *  SQLite): *changes_p, *n_p get every tenant's epoch
 *  (free with keystore_changes_free; NULL and 0 when they could not be
 *  read).  NULL after a log line on failure.  Caller destroys (after the
 *  slow pool stopped).  */
ks_settle_t *ks_settle_new (keystore_t *ks, keystore_listener_t *listener, keystore_change_t **changes_p,
                           size_t *n_p);

/*  Closes the connection; NULL-safe; nulls *self_p.  */
void ks_settle_destroy (ks_settle_t **self_p);

/*  One look, in a slow-pool thread (any; serialised here).  Returns 1 with
 *  *changes_p, *n_p (as for ks_settle_new) and *foreign_p, 0 when nobody
 *  else committed since the last look, -1 when it failed (assume every
 *  tenant changed).  */
int ks_settle_look (ks_settle_t *self, keystore_change_t **changes_p, size_t *n_p, bool *foreign_p);

#endif
