/*  test_broker_fixture.h — the whole broker in-process for a Check test
 *  (server.h, as cryptoserver-broker runs it, on tcp://127.0.0.1:!): its
 *  broker.conf in a test_broker_helpers.h deployment, started and stopped.
 *  Needs the broker's include path (-I broker), which the driver tests do
 *  not have: what they share too stays in test_broker_helpers.h.
 *  Header-only (static).
 */
#ifndef TEST_BROKER_FIXTURE_H_INCLUDED
#define TEST_BROKER_FIXTURE_H_INCLUDED

#include <stdarg.h>
#include <sqlite3.h>
#include "test_broker_helpers.h"
#include "broker_config.h"
#include "server.h"

/*  Writes DIR/broker.conf (mode 0600): th_conf_head_with (true,
 *  broker_lines), then the printf-style rest (more keystore keys, "keys",
 *  "drivers" ...).  */
static inline void
tb_conf_write (const char *dir, const char *broker_lines, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

static inline void
tb_conf_write (const char *dir, const char *broker_lines, const char *format, ...)
{
    char *head = th_conf_head_with (true, broker_lines), *rest = NULL, *conf = NULL;
    va_list args;
    va_start (args, format);
    ck_assert_int_ge (vasprintf (&rest, format, args), 0);
    va_end (args);
    ck_assert_int_ge (asprintf (&conf, "%s%s", head, rest), 0);
    th_write (dir, "broker.conf", conf);
    free (head);
    free (rest);
    free (conf);
}

/*  Loads DIR/broker.conf; fails the test with the loader's message when it
 *  does not load.  Caller destroys.  */
static inline broker_config_t *
tb_config_load (const char *dir)
{
    char path [4096], *error = NULL;
    snprintf (path, sizeof path, "%s/broker.conf", dir);
    broker_config_t *config = broker_config_load (path, &error);
    ck_assert_msg (config != NULL, "config: %s", error ? error : "");
    return config;
}

/*  Starts the whole broker of config in-process (server_new, config
 *  borrowed: it must outlive the server); fails the test when it does not
 *  start.  Caller destroys.  */
static inline server_t *
tb_server_new (broker_config_t *config)
{
    server_t *server = server_new (config, false);
    ck_assert_ptr_nonnull (server);
    return server;
}

/*  tb_config_load (dir) then tb_server_new: the config goes to *config_p
 *  (destroy it after the server, tb_stop).  Returns the server.  */
static inline server_t *
tb_start (const char *dir, broker_config_t **config_p)
{
    *config_p = tb_config_load (dir);
    return tb_server_new (*config_p);
}

/*  Stops the server, then destroys its config; both are nulled (NULL-safe).  */
static inline void
tb_stop (server_t **server_p, broker_config_t **config_p)
{
    server_destroy (server_p);
    broker_config_destroy (config_p);
}

/*  Runs sql on DIR/keystore.db behind the broker's back (a connection of
 *  its own, 5 s busy timeout); fails the test unless it succeeds and
 *  changes exactly one row.  */
static inline void
tb_keystore_sql (const char *dir, const char *sql)
{
    char path [4096];
    sqlite3 *db = NULL;
    snprintf (path, sizeof path, "%s/keystore.db", dir);
    ck_assert_int_eq (sqlite3_open (path, &db), SQLITE_OK);
    sqlite3_busy_timeout (db, 5000);
    ck_assert_msg (sqlite3_exec (db, sql, NULL, NULL, NULL) == SQLITE_OK, "%s", sqlite3_errmsg (db));
    ck_assert_int_eq (sqlite3_changes (db), 1);
    sqlite3_close (db);
}

#endif
