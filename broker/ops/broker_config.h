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
#define BROKER_TICKET_KEY_LEN 32     /* bytes of the login ticket key */
#define BROKER_MAX_SLOW_THREADS 16   /* broker/slow-threads */
#define BROKER_MAX_KEY_CACHE 1000000 /* keystore/key-cache, keys */

/*  One "drivers/<name>" section.  */
typedef struct {
    char *name;
    char *type;                 /* driver type: loads DRIVER_DIR/<type>.so */
    int threads;                /* worker threads, 1..256 (default 1) */
    char *tenant;               /* tenant owning the board's resident keys, or NULL */
    bool host;                  /* host: computes on the broker host's cores (default true
                                   for the openssl and gmp drivers, false otherwise) */
    zconfig_t *config;          /* the section itself; owned by the config root */
    /*  Board health (issue #9; health.h, verify.h): */
    bool trusted;               /* trusted, default true */
    int verify_rsa;             /* verify: percent of RSA results checked, default 100 */
    int verify_ec;              /* ... of ECDSA/EdDSA signatures: default 0, 100 when untrusted */
    int call_timeout_ms;        /* call-timeout-ms: 0 = automatic (default), else 1..3600000 */
    int generate_timeout_ms;    /* generate-timeout-ms: key generation, default 300000 */
    int probe_min_ms;           /* probe-min-ms: first back-off, default 100 */
    int probe_max_ms;           /* probe-max-ms: longest back-off, default 30000 */
} broker_board_conf_t;

#define BROKER_POOL_SIZES 3         /* pool-rsa-2048, -3072, -4096 */
#define BROKER_POOL_MAX 1000        /* keys per size */

/*  RSA modulus bits of pool size index i (2048, 3072, 4096).  */
unsigned broker_pool_bits (size_t i);

typedef struct {
    char *file;                 /* the path given to broker_config_load */
    char *dir;                  /* its directory: base of relative paths */
    zconfig_t *root;
    char *endpoint;             /* broker/endpoint, default tcp://127.0.0.1:5555 */
    char *endpoint_file;        /* resolved broker/endpoint-file, or NULL */
    char *local_endpoint;       /* broker/local-endpoint: a second listener for clients on
                                   this host (ipc://PATH), or NULL */
    unsigned char *ticket_key;  /* BROKER_TICKET_KEY_LEN bytes in locked memory (cs_secmem.h) */
    bool ticket_key_random;     /* no broker/ticket-key: random per start */
    int ticket_lifetime_ms;     /* 1000..604800000, default 14400000 (4 h) */
    int default_deadline_ms;    /* 1..3600000, default 10000; at most max_deadline_ms */
    int max_deadline_ms;        /* cap of a request's deadline, 1..3600000, default
                                   60000 (or default_deadline_ms when larger) */
    int max_queue;              /* work items, 1..1000000, default 10000 */
    int max_client_bytes;       /* bytes one client may have queued, 4096..2^31-1,
                                   default 16 MiB (client_load.h) */
    int max_client_jobs;        /* jobs one client may have out with workers before its
                                   further requests wait in its backlog, 1..1000000,
                                   default 256 (client_load.h) */
    int host_cores;             /* broker/host-cores: cores the host boards share, 0 = no
                                   budget; default the online CPUs (placement.h) */
    int fast_lane_us;           /* broker/fast-lane-us: items expected to take at most this many
                                   us on an openssl board run on the reactor (fast_lane.c),
                                   0..10000, default 100, 0 = off */
    int worker_nice;            /* broker/worker-nice: worker threads run this many nice steps
                                   below the reactor, under SCHED_BATCH (worker.h), 0..19,
                                   0 = as the reactor; BROKER_WORKER_NICE_AUTO (the default,
                                   "auto"): broker_config_worker_nice decides at start */
    int cross_check;            /* broker/cross-check: percent of sign, decrypt and derive
                                   jobs also run on a second board and compared
                                   (cross_check.h), 0..100, default 0 */
    zconfig_t *tenant_weights;  /* broker/tenant-weight: children NAME = weight 1..1000
                                   (fair_queue.h), or NULL; owned by root */
    int max_list_page;          /* broker/max-list-page: keystore rows in one page of a paged
                                   key list (ListKeysJob.page_size is capped at it),
                                   1..100000, default 1000 */
    int router_rcvhwm;          /* ROUTER ZMQ_RCVHWM, messages per connection, 1..100000, default 100 */
    int router_sndhwm;          /* ROUTER ZMQ_SNDHWM, likewise, default 100 */
    int stats_interval_ms;      /* 0 (only at exit) .. 86400000, default 10000 */
    char *metrics_url;          /* broker/metrics (metrics_http.h), or NULL: no endpoint */
    bool metrics_public;        /* broker/metrics-public: a non-loopback address allowed */
    char *metrics_file;         /* resolved broker/metrics-file, or NULL */
    char *metrics_token;        /* broker/metrics-token-file's bearer token, or NULL:
                                   client and tenant names are shown to no scraper */
    int slow_threads;           /* broker/slow-threads: threads for PIN checks, keystore reads
                                   and writes (slow_pool.h), 1..16, default 1 */
    char *driver_dir;           /* resolved broker/driver-dir, or NULL */
    bool curve;                 /* broker/curve/enabled, default true */
    char *secret_key;           /* resolved broker/curve/secret-key (zcert file) */
    char *clients_dir;          /* resolved broker/curve/clients (allow-list dir) */
    char *keystore_path;        /* keystore/url (a postgresql:// URL), or resolved
                                   keystore/path (default keystore.db) */
    char *keystore_name;        /* keystore_path for log lines (no password) */
    int key_cache;              /* keystore/key-cache: decrypted keys kept in locked memory
                                   (ks_cache.h), 0..1000000, default 1024; 0 = none */
    char *master_key_file;      /* resolved keystore/master-key (file form), or NULL */
    char *master_key_board;     /* keystore/master-key = board:NAME:LABEL: NAME, or NULL */
    char *master_key_label;     /* ... and LABEL (CKA_LABEL of the wrapping RSA key) */
    char *master_key_wrapped;   /* resolved keystore/master-key-wrapped (board form) */
    char *keys_home;            /* keys/home: "keystore" (default) or a board name */
    int pool_rsa [BROKER_POOL_SIZES];   /* keys/pool-rsa-2048/3072/4096, 0..1000, default 0 */
    int rsa_min_bits;           /* keys/rsa-min-bits: smallest RSA modulus generated, bits,
                                   CS_MECH_RSA_GEN_FLOOR..CS_MECH_RSA_GEN_MAX, default 2048
                                   (cs_mech.h; sent to modules in HelloResult) */
    int usage_separation;       /* keys/usage-separation: CS_USAGE_STRICT (default) or
                                   CS_USAGE_SPEC (cs_usage.h) */
    zconfig_t *usage_tenants;   /* ... its node when it has per-tenant children NAME = strict|spec,
                                   else NULL; owned by root */
    broker_board_conf_t *boards;
    size_t n_boards;
} broker_config_t;

/*  Loads and validates the config at `file`.  Returns a new config (caller
 *  destroys), or NULL with *error_p set to a malloc'd "FILE: PATH: problem"
 *  message (caller frees) when the file is unreadable or any value is bad.  */
broker_config_t *broker_config_load (const char *file, char **error_p);

/*  Destroys a config; NULL-safe; nulls *self_p.  Wipes the ticket key.  */
void broker_config_destroy (broker_config_t **self_p);

/*  The usage-separation policy of `tenant` (a cs_usage_policy_t:
 *  keys/usage-separation/TENANT, else keys/usage-separation, else strict;
 *  docs/CONTRACTS.md "Usage separation").  A walk of the tenants named in
 *  the config, no allocation.  */
int broker_config_usage (const broker_config_t *self, const char *tenant);

/*  broker/worker-nice "auto" (the default), kept as this value.  */
#define BROKER_WORKER_NICE_AUTO (-1)
#define BROKER_WORKER_NICE_SHARED 10    /* what "auto" means for two or more tenants */

/*  The nice steps the workers run below the reactor (0..19) for a broker
 *  that serves `n_tenants` tenants (the keystore's, at start): the
 *  configured value, or for "auto" BROKER_WORKER_NICE_SHARED when there
 *  are two or more tenants to keep fair to each other (one tenant's flood
 *  must not hold the reactor back from another's requests: docs/DESIGN.md
 *  section 5), else 0, so a single tenant's workers keep their full share
 *  of cores that clients may share (cryptoserver-broker.conf(5)).  */
int broker_config_worker_nice (const broker_config_t *self, size_t n_tenants);

/*  Returns the board config called `name`, or NULL.  Owned by self.  */
const broker_board_conf_t *broker_config_board (const broker_config_t *self, const char *name);

#endif
