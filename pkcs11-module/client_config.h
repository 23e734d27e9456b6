/*  client_config.h — the module's client config (ZPL, docs/CONTRACTS.md
 *  "Client config", man page cryptoserver-client.conf(5)).
 *
 *  Read once per C_Initialize from the file named by CRYPTOSERVER_CONF
 *  (default CS_CLIENT_CONF_DEFAULT).  Relative paths are relative to the
 *  config file's directory.
 */
#ifndef CS_CLIENT_CONFIG_H_INCLUDED
#define CS_CLIENT_CONFIG_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CS_CLIENT_CONF_DEFAULT    "/etc/cryptoserver/client.conf"
#define CS_CLIENT_TIMEOUT_DEFAULT 10000     /* ms */
#define CS_CLIENT_TIMEOUT_MAX     3600000   /* ms: one hour */
#define CS_CLIENT_MAX_ENDPOINTS   16
#define CS_CLIENT_HEARTBEAT_IVL_DEFAULT     1000    /* ms */
#define CS_CLIENT_HEARTBEAT_TIMEOUT_DEFAULT 5000    /* ms */
#define CS_CLIENT_LIST_PAGE_DEFAULT 1000    /* keys (docs/CONTRACTS.md "Key lists in pages") */

typedef struct {
    char *path;                 /* the file read */
    char **endpoints;           /* n_endpoints ZeroMQ endpoints, owned */
    size_t n_endpoints;
    bool curve;                 /* client/curve, default true */
    uint8_t broker_key [32];    /* broker's CURVE public key (raw), when curve */
    uint8_t public_key [32];    /* this client's CURVE key pair (raw), when curve */
    uint8_t secret_key [32];    /* wiped by cs_client_config_destroy */
    int64_t timeout_ms;         /* client/timeout-ms, default 10000 */
    int64_t heartbeat_ivl_ms;   /* client/heartbeat-ivl-ms, default 1000 (ZMQ_HEARTBEAT_IVL) */
    int64_t heartbeat_timeout_ms;   /* client/heartbeat-timeout-ms, default 5000 */
    int64_t attempt_timeout_ms; /* client/attempt-timeout-ms, default timeout_ms / 4 */
    int log_level;              /* cs_log_level_t, default warning */
    int64_t list_page;          /* client/list-page: keys per ListKeys page, 0 = whole lists,
                                   0..100000, default CS_CLIENT_LIST_PAGE_DEFAULT */
} cs_client_config_t;

/*  Returns the path to read: $CRYPTOSERVER_CONF when set and not empty, else
 *  CS_CLIENT_CONF_DEFAULT.  Static or environment storage; do not free.  */
const char *cs_client_config_path (void);

/*  Loads and validates the config file at `path`.  Returns a new config
 *  (caller destroys), or NULL after logging one line naming the file and the
 *  key at fault ("/x/client.conf: client/timeout-ms: not a number"); the
 *  caller maps NULL to CKR_GENERAL_ERROR (PKCS#11 2.40 §5.4 C_Initialize).  */
cs_client_config_t *cs_client_config_load (const char *path);

/*  Frees a config and wipes its secret key; NULL-safe, nulls *self_p.  */
void cs_client_config_destroy (cs_client_config_t **self_p);

#endif
