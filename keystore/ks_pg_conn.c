/*  ks_pg_conn.c — a connection to the PostgreSQL keystore (ks_pg.h), as
 *  the store (ks_pg.c) and the change listener (ks_pg_listen.c) open it:
 *  connect timeout, notices dropped, and this process's origin set for the
 *  change triggers.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <czmq.h>
#include <openssl/rand.h>
#include "ks_pg.h"
#include "cs_util.h"

#define S_CONNECT_TIMEOUT "5"           /* seconds, unless the URL says otherwise */

/* ---- the origin of this process's writes --------------------------------- */

static char s_origin [48];
static pid_t s_origin_pid;                      /* the process s_origin was made for */
static pthread_mutex_t s_origin_lock = PTHREAD_MUTEX_INITIALIZER;

const char *
ks_pg_origin (void)
{
    pthread_mutex_lock (&s_origin_lock);
    if (s_origin_pid != getpid ()) {
        uint8_t random [8] = { 0 };
        char hex [17];
        if (RAND_bytes (random, sizeof random) != 1)
            memcpy (random, &(int64_t) { zclock_time () }, 8);
        cs_hex_encode (random, sizeof random, hex);
        s_origin_pid = getpid ();
        snprintf (s_origin, sizeof s_origin, "%d-%s", (int) s_origin_pid, hex);
    }
    pthread_mutex_unlock (&s_origin_lock);
    return s_origin;
}

/* ---- connections --------------------------------------------------------- */

const char *
ks_pg_message (PGconn *conn)
{
    const char *message = conn ? PQerrorMessage (conn) : NULL;
    return message && *message ? message : "failed";
}

//  Drops notices (CREATE ... IF NOT EXISTS and the like): nothing to log.
static void
s_notice (void *arg, const char *message)
{
}

PGconn *
ks_pg_connect (const char *url, const char *where)
{
    const char *keys [] = { "connect_timeout", "application_name", "dbname", NULL };
    const char *values [] = { S_CONNECT_TIMEOUT, "cryptoserver", url, NULL };
    PGconn *conn = PQconnectdbParams (keys, values, 1);
    if (!conn || PQstatus (conn) != CONNECTION_OK) {
        zsys_error ("keystore %s: database unreachable: %.*s", where, KS_PG_MSG (conn));
        PQfinish (conn);
        return NULL;
    }
    PQsetNoticeProcessor (conn, s_notice, NULL);
    char sql [128];
    snprintf (sql, sizeof sql, "SET cryptoserver.origin = '%s'", ks_pg_origin ());
    PGresult *res = PQexec (conn, sql);
    bool ok = PQresultStatus (res) == PGRES_COMMAND_OK;
    PQclear (res);
    if (!ok) {
        zsys_error ("keystore %s: %.*s", where, KS_PG_MSG (conn));
        PQfinish (conn);
        return NULL;
    }
    return conn;
}
