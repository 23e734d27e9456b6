/*  slow_pool.h — the broker's threads for work too slow for the reactor
 *  (docs/DESIGN.md §5: the frontend never blocks): PIN checks (keyed scrypt,
 *  ~70 ms), keystore reads and writes (SQLite, AES-256-GCM unseal), key
 *  descriptions of generated keys.  Each thread owns its own keystore
 *  connection (keystore_open_again).  broker/slow-threads of them.
 *
 *  The pool lives in the frontend's thread and its zloop: the frontend
 *  submits an item (ownership moves with the pointer, as with workers),
 *  an idle thread runs it (item->run, with its keystore) and sends the
 *  pointer back over its actor pipe, and the pool hands it to the `done`
 *  callback, in the frontend's thread.  Two wake-ups per item.  Items wait
 *  in two queues: light ones (reads, a few µs; FIFO) go before heavy ones
 *  (PIN checks), so one login storm does not hold up a key read by more
 *  than the PIN check that is running.  Heavy items wait per owner (the
 *  tenant) and are served round robin across owners (fair_queue.h; issue
 *  #9), so a batch of 1,024 logins of one tenant delays another tenant's
 *  login by one PIN check per busy tenant, not by the whole batch.
 */
#ifndef SLOW_POOL_H_INCLUDED
#define SLOW_POOL_H_INCLUDED

#include <czmq.h>
#include "keystore.h"

typedef struct _slow_pool_t slow_pool_t;
typedef struct slow_item_s slow_item_t;

/*  Runs an item in a pool thread with that thread's keystore.  */
typedef void (slow_run_fn) (slow_item_t *item, keystore_t *ks);

/*  Gets an item back in the frontend's thread: `done` after it ran,
 *  `discard` (not run, or its result came too late) at destroy.  The
 *  callee owns the item.  */
typedef void (slow_done_fn) (slow_item_t *item, void *arg);

/*  The pool's part of an item: the first member of the caller's struct.  */
struct slow_item_s {
    slow_run_fn *run;
    bool heavy;                 /* waits behind light items (PIN checks) */
    const char *owner;          /* heavy items: round robin across owners (a tenant);
                                   borrowed, must outlive the item; NULL: one owner */
};

/*  Starts `threads` threads (1..BROKER_MAX_SLOW_THREADS), each with a
 *  keystore connection of its own opened on ks's file, and registers their
 *  pipes as readers of `loop` (the caller's thread runs it).  done and
 *  discard get `arg`.  Returns NULL after a log when a connection or a
 *  thread cannot be made.  Caller destroys.  */
slow_pool_t *slow_pool_new (keystore_t *ks, size_t threads, zloop_t *loop, slow_done_fn *done,
                            slow_done_fn *discard, void *arg);

/*  Stops the threads: waits up to 5 s for the items they run (those come
 *  back through `discard`), hands every queued item to `discard`, closes
 *  the connections.  NULL-safe; nulls *self_p.  */
void slow_pool_destroy (slow_pool_t **self_p);

/*  Gives item to an idle thread, or queues it (light: FIFO; heavy: FIFO
 *  per owner, round robin across owners).  Takes ownership until `done`
 *  returns it.  */
void slow_pool_submit (slow_pool_t *self, slow_item_t *item);

/*  Items waiting for a thread, and threads running one.  */
size_t slow_pool_queued (slow_pool_t *self);
size_t slow_pool_busy (slow_pool_t *self);

#endif
