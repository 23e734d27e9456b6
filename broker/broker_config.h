/*  broker_config.h — the broker's ZPL config (docs/CONTRACTS.md "Broker
 *  config"), loaded and validated once at start.  Relative paths are resolved
 *  against the config file's directory.  Every bad value is reported as
 *  "FILE: PATH: problem" so the operator can fix it without reading code.
 */
#ifndef BROKER_CONFIG_H_INCLUDED
#define BROKER_CONFIG_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <czmq.h>

#define BROKER_MAX_BOARDS  64        /* routing keeps a 64-bit board set per key */
#define BROKER_MAX_THREADS 256       /* worker threads per board */

/*  One "drivers/<name>" section.  */
typedef struct {
    char *name;
    char *type;                 /* driver type: loads DRIVER_DIR/<type>.so */
    int threads;                /* worker threads, 1..256 (default 1) */
    zconfig_t *config;          /* the section itself; owned by the config root */
} broker_board_conf_t;

/*  One "tenants/<name>" section; PINs in cs_pin.h's stored form.  */
typedef struct {
    char *name;
    char *user_pin;             /* "pbkdf2-sha256$..." */
    char *so_pin;               /* may be NULL: SO login is then refused */
} broker_tenant_t;

typedef struct {
    char *file;                 /* the path given to broker_config_load */
    char *dir;                  /* its directory: base of relative paths */
    zconfig_t *root;
    char *endpoint;             /* broker/endpoint, default tcp://127.0.0.1:5555 */
    char *endpoint_file;        /* resolved broker/endpoint-file, or NULL */
    unsigned char ticket_key [32];
    bool ticket_key_random;     /* no broker/ticket-key: random per start */
    int default_deadline_ms;    /* 1..3600000, default 10000 */
    int max_queue;              /* work items, 1..1000000, default 10000 */
    int stats_interval_ms;      /* 0 (only at exit) .. 86400000, default 10000 */
    char *driver_dir;           /* resolved broker/driver-dir, or NULL */
    bool curve;                 /* broker/curve/enabled, default true */
    char *secret_key;           /* resolved broker/curve/secret-key (zcert file) */
    char *clients_dir;          /* resolved broker/curve/clients (allow-list dir) */
    broker_tenant_t *tenants;
    size_t n_tenants;
    broker_board_conf_t *boards;
    size_t n_boards;
} broker_config_t;

/*  Loads and validates the config at `file`.  Returns a new config (caller
 *  destroys), or NULL with *error_p set to a malloc'd "FILE: PATH: problem"
 *  message (caller frees) when the file is unreadable or any value is bad.  */
broker_config_t *broker_config_load (const char *file, char **error_p);

/*  Destroys a config; NULL-safe; nulls *self_p.  Wipes the ticket key.  */
void broker_config_destroy (broker_config_t **self_p);

/*  Returns the tenant called `name`, or NULL.  The result is owned by self.  */
const broker_tenant_t *broker_config_tenant (const broker_config_t *self, const char *name);

#endif
