/*  ks_pg.h — what ks_pg.c (the PostgreSQL back end), ks_pg_conn.c (its
 *  connections), ks_pg_migrations.c (its schema) and ks_pg_listen.c (its
 *  change listener) share; internal to keystore/.  */
#ifndef KS_PG_H_INCLUDED
#define KS_PG_H_INCLUDED

#include <libpq-fe.h>
#include "ks_backend.h"

#define KS_PG_CHANNEL "cryptoserver_keystore"   /* LISTEN/NOTIFY channel of the triggers */

/*  The first line of libpq's message of conn (its messages end in a
 *  newline), for "%.*s": the length, then the text.  */
#define KS_PG_MSG(conn) (int) strcspn (ks_pg_message (conn), "\n"), ks_pg_message (conn)

/*  libpq's last message of conn, or "failed" when there is none.  */
const char *ks_pg_message (PGconn *conn);

/*  This process's origin, "PID-RANDOM": the payload of the notifications
 *  of its commits.  Made again in a child after fork(), which is another
 *  writer.  Static storage: valid until the next fork.  */
const char *ks_pg_origin (void);

/*  A new connection to url (connect_timeout 5 s unless the URL sets one),
 *  set up (cryptoserver.origin, notices dropped), or NULL after a log line
 *  "keystore WHERE: database unreachable: ..." naming `where`.  Caller
 *  PQfinishes.  */
PGconn *ks_pg_connect (const char *url, const char *where);

/*  keystore_listener_new for the database at url: connected and LISTENing
 *  when it returns, or NULL after a log line.  Caller destroys
 *  (ks_listener_destroy).  */
keystore_listener_t *ks_pg_listen (const char *url, const char *where);

/*  The migrations: each brings the database from the version before it to
 *  its own; their versions are the keystore's schema versions (2 is the
 *  schema of the SQLite file's version 2: the first one here).  Append,
 *  never change one that was released.  */
typedef struct {
    int version;
    const char *description;
    const char *sql;                /* statements separated by ";" */
} ks_pg_migration_t;

/*  Every migration in version order (ks_pg_migrations.c), and how many.  */
extern const ks_pg_migration_t ks_pg_migrations [];
extern const size_t ks_pg_migrations_count;

#endif
