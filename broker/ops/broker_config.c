/*  broker_config.c — load and validate the broker's ZPL config: the
 *  "broker", "keystore" and "keys" sections and the checks across them; the
 *  value readers are broker_config_values.c, the "drivers" section
 *  broker_config_boards.c (broker_config_int.h).  */
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include "cs_mech.h"
#include "cs_secmem.h"
#include "cs_util.h"
#include "broker_config_int.h"
#include "quota.h"
#include "fair_queue.h"
#include "keystore.h"
#include "cs_usage.h"
#include "metrics_http.h"

/*  broker/worker-nice: "auto" (or absent) is BROKER_WORKER_NICE_AUTO,
 *  else 0..19.  */
static int
s_worker_nice (bc_loader_t *self)
{
    const char *text = zconfig_get (self->config->root, "broker/worker-nice", NULL);
    if (!text || streq (text, "auto")) {
        self->config->worker_nice = BROKER_WORKER_NICE_AUTO;
        return 0;
    }
    const char *end = text;
    while (*end >= '0' && *end <= '9')
        end++;
    long value = end > text && end - text <= 2 ? strtol (text, NULL, 10) : -1;
    if (*end || value < 0 || value > 19)    /* digits only: strtol would take " 5" or "+5" */
        return bc_fail (self, "broker/worker-nice", "must be auto or 0..19 (got \"%s\")", text);
    self->config->worker_nice = (int) value;
    return 0;
}

/*  Reads the 32-byte ticket key (64 hex digits, a private file) into locked
 *  memory (cs_secmem.h), or makes a random one.  */
static int
s_ticket_key (bc_loader_t *self)
{
    broker_config_t *config = self->config;
    char *path = bc_path (self, "broker/ticket-key");
    char why [512];
    int rc = 0;
    if (!(config->ticket_key = cs_secmem_alloc (BROKER_TICKET_KEY_LEN))) {
        free (path);
        return bc_fail (self, "broker/ticket-key", "out of memory");
    }
    if (!path) {
        config->ticket_key_random = true;
        if (RAND_bytes (config->ticket_key, BROKER_TICKET_KEY_LEN) != 1)
            rc = bc_fail (self, "broker/ticket-key", "no random bytes for a ticket key");
        return rc;
    }
    int got = cs_file_check_private (path, why, sizeof why) ? -3
            : cs_file_read_hex (path, config->ticket_key, BROKER_TICKET_KEY_LEN);
    if (got == -3)
        rc = bc_fail (self, "broker/ticket-key", "%s", why);
    else
    if (got == -1)
        rc = bc_fail (self, "broker/ticket-key", "cannot read %s", path);
    else
    if (got == -2)
        rc = bc_fail (self, "broker/ticket-key", "%s must hold 64 hex digits", path);
    free (path);
    return rc;
}

/*  broker/curve: enabled, secret-key (a loadable zcert), clients (a dir).  */
static int
s_curve (bc_loader_t *self)
{
    broker_config_t *config = self->config;
    struct stat st;
    if (bc_bool (self, "broker/curve/enabled", true, &config->curve) || !config->curve)
        return self->error ? -1 : 0;
    config->secret_key = bc_path (self, "broker/curve/secret-key");
    config->clients_dir = bc_path (self, "broker/curve/clients");
    if (!config->secret_key)
        return bc_fail (self, "broker/curve/secret-key", "required when curve is enabled");
    char why [512];
    if (cs_file_check_private (config->secret_key, why, sizeof why))
        return bc_fail (self, "broker/curve/secret-key", "%s", why);
    zcert_t *cert = zcert_load (config->secret_key);
    bool has_secret = cert && !streq (zcert_secret_txt (cert),
                                      "0000000000000000000000000000000000000000");
    zcert_destroy (&cert);
    if (!has_secret)
        return bc_fail (self, "broker/curve/secret-key", "%s is not a zcert secret key file",
                       config->secret_key);
    if (!config->clients_dir)
        return bc_fail (self, "broker/curve/clients", "required when curve is enabled");
    if (stat (config->clients_dir, &st) || !S_ISDIR (st.st_mode))
        return bc_fail (self, "broker/curve/clients", "%s is not a directory", config->clients_dir);
    return 0;
}

/*  broker/metrics (a URL, or absent/empty: off), metrics-public and
 *  metrics-file.  An address that is not loopback is refused unless
 *  metrics-public is true: the metrics name clients and tenants.  */
static int
s_metrics (bc_loader_t *self)
{
    broker_config_t *config = self->config;
    const char *url = zconfig_get (config->root, "broker/metrics", NULL);
    metrics_http_url_t parsed;
    char why [512];
    if (bc_bool (self, "broker/metrics-public", false, &config->metrics_public))
        return -1;
    if (!url || !*url)
        return 0;
    if (metrics_http_url_parse (url, &parsed, why, sizeof why))
        return bc_fail (self, "broker/metrics", "%s", why);
    if (!parsed.loopback && !config->metrics_public)
        return bc_fail (self, "broker/metrics", "%s is not a loopback address: the metrics name clients "
                       "and tenants; set broker/metrics-public = true to serve them beyond this host", url);
    config->metrics_url = strdup (url);
    config->metrics_file = bc_path (self, "broker/metrics-file");
    return config->metrics_url ? 0 : bc_fail (self, "broker/metrics", "out of memory");
}

/*  broker/metrics-token-file: a private file (chmod 600) holding the bearer
 *  token (16..256 printable characters, no spaces) that a scraper presents
 *  to see client and tenant names (RFC 6750 "Authorization: Bearer").  */
static int
s_metrics_token (bc_loader_t *self)
{
    broker_config_t *config = self->config;
    char *path = bc_path (self, "broker/metrics-token-file");
    if (!path)
        return 0;
    char why [512];
    int rc = 0;
    if (cs_file_check_private (path, why, sizeof why))
        rc = bc_fail (self, "broker/metrics-token-file", "%s", why);
    else
    if (!(config->metrics_token = cs_file_read_secret (path, 512)))
        rc = bc_fail (self, "broker/metrics-token-file", "cannot read %s", path);
    else {
        size_t len = strlen (config->metrics_token);
        bool printable = len >= 16 && len <= 256;
        for (size_t i = 0; printable && i < len; i++)
            printable = config->metrics_token [i] > ' ' && config->metrics_token [i] < 127;
        if (!printable)
            rc = bc_fail (self, "broker/metrics-token-file", "%s must hold 16..256 printable "
                         "characters without spaces (e.g. openssl rand -hex 32)", path);
    }
    free (path);
    return rc;
}

/*  The CPUs online (the default of broker/host-cores), at least 1.  */
static int
s_online_cpus (void)
{
    long n = sysconf (_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 4096 ? 4096 : (int) n;
}

/*  broker/cross-check: "N%" or "N", N 0..100 (default 0).  */
static int
s_cross_check_pct (bc_loader_t *self)
{
    const char *text = zconfig_get (self->config->root, "broker/cross-check", "0");
    int pct = -1, used = 0;
    if ((sscanf (text, "%d%%%n", &pct, &used) != 1 || used != (int) strlen (text))
    &&  (sscanf (text, "%d%n", &pct, &used) != 1 || used != (int) strlen (text)))
        pct = -1;
    if (pct < 0 || pct > 100)
        return bc_fail (self, "broker/cross-check", "must be N%% with N 0..100 (got \"%s\")", text);
    self->config->cross_check = pct;
    return 0;
}

/*  broker/tenant-weight: one child per tenant, its DRR weight
 *  (1..FAIR_QUEUE_MAX_WEIGHT); tenants not named weigh 1.  */
static int
s_tenant_weights (bc_loader_t *self)
{
    zconfig_t *section = zconfig_locate (self->config->root, "broker/tenant-weight");
    self->config->tenant_weights = section;
    for (zconfig_t *child = section ? zconfig_child (section) : NULL; child; child = zconfig_next (child)) {
        char path [300];
        int weight = 0;
        snprintf (path, sizeof path, "broker/tenant-weight/%s", zconfig_name (child));
        if (!zconfig_value (child) || !*zconfig_value (child))
            return bc_fail (self, path, "must be a weight 1..%d", FAIR_QUEUE_MAX_WEIGHT);
        if (bc_int (self, path, 1, 1, FAIR_QUEUE_MAX_WEIGHT, &weight))
            return -1;
    }
    return 0;
}

/*  The "broker" section.  */
static int
s_broker (bc_loader_t *self)
{
    broker_config_t *config = self->config;
    config->endpoint = strdup (zconfig_get (config->root, "broker/endpoint", "tcp://127.0.0.1:5555"));
    if (strncmp (config->endpoint, "tcp://", 6) && strncmp (config->endpoint, "ipc://", 6)
    &&  strncmp (config->endpoint, "inproc://", 9))
        return bc_fail (self, "broker/endpoint", "must start with tcp://, ipc:// or inproc:// (got \"%s\")",
                       config->endpoint);
    config->endpoint_file = bc_path (self, "broker/endpoint-file");
    const char *local = zconfig_get (config->root, "broker/local-endpoint", NULL);
    if (local && *local && strncmp (local, "ipc:///", 7))
        return bc_fail (self, "broker/local-endpoint", "must be ipc:// with an absolute path (got \"%s\")", local);
    config->local_endpoint = local && *local ? strdup (local) : NULL;
    config->driver_dir = bc_path (self, "broker/driver-dir");
    if (bc_int (self, "broker/default-deadline-ms", 10000, 1, 3600000, &config->default_deadline_ms)
    ||  bc_int (self, "broker/max-deadline-ms", config->default_deadline_ms > 60000
                                               ? config->default_deadline_ms : 60000,
               1, 3600000, &config->max_deadline_ms)
    ||  bc_int (self, "broker/max-queue", 10000, 1, 1000000, &config->max_queue)
    ||  bc_int (self, "broker/max-client-bytes", 16 * 1024 * 1024, 4096, INT_MAX, &config->max_client_bytes)
    ||  bc_int (self, "broker/max-client-jobs", 256, 1, 1000000, &config->max_client_jobs)
    ||  s_cross_check_pct (self)
    ||  bc_int (self, "broker/host-cores", s_online_cpus (), 0, 4096, &config->host_cores)
    ||  bc_int (self, "broker/fast-lane-us", 100, 0, 10000, &config->fast_lane_us)
    ||  s_worker_nice (self)
    ||  s_tenant_weights (self)
    ||  bc_int (self, "broker/max-list-page", 1000, 1, 100000, &config->max_list_page)
    ||  bc_int (self, "broker/router-rcvhwm", 100, 1, 100000, &config->router_rcvhwm)
    ||  bc_int (self, "broker/router-sndhwm", 1000, 1, 100000, &config->router_sndhwm)
    ||  bc_int (self, "broker/stats-interval-ms", 10000, 0, 86400000, &config->stats_interval_ms)
    ||  bc_int (self, "broker/ticket-lifetime-ms", 14400000, 1000, 604800000, &config->ticket_lifetime_ms)
    ||  bc_int (self, "broker/slow-threads", 1, 1, BROKER_MAX_SLOW_THREADS, &config->slow_threads)
    ||  s_ticket_key (self) || s_metrics (self) || s_metrics_token (self))
        return -1;
    if (config->default_deadline_ms > config->max_deadline_ms)
        return bc_fail (self, "broker/default-deadline-ms", "must not exceed broker/max-deadline-ms (%d)",
                       config->max_deadline_ms);
    return s_curve (self);
}

unsigned
broker_pool_bits (size_t i)
{
    static const unsigned bits [BROKER_POOL_SIZES] = { 2048, 3072, 4096 };
    return i < BROKER_POOL_SIZES ? bits [i] : 0;
}

/*  keystore/master-key: a file, or board:NAME:LABEL with master-key-wrapped.  */
static int
s_master_key (bc_loader_t *self)
{
    broker_config_t *config = self->config;
    const char *text = zconfig_get (config->root, "keystore/master-key", "master.key");
    if (strncmp (text, "board:", 6)) {
        config->master_key_file = bc_path (self, "keystore/master-key");
        if (!config->master_key_file)
            config->master_key_file = cs_path_resolve (config->dir, "master.key");
        return config->master_key_file ? 0 : bc_fail (self, "keystore/master-key", "out of memory");
    }
    const char *colon = strchr (text + 6, ':');
    if (!colon || colon == text + 6 || !colon [1])
        return bc_fail (self, "keystore/master-key", "must be FILE or board:NAME:LABEL (got \"%s\")",
                       text);
    config->master_key_board = strndup (text + 6, (size_t) (colon - text - 6));
    config->master_key_label = strdup (colon + 1);
    config->master_key_wrapped = bc_path (self, "keystore/master-key-wrapped");
    if (!config->master_key_wrapped)
        return bc_fail (self, "keystore/master-key-wrapped",
                       "required with master-key = board:NAME:LABEL");
    return 0;
}

/*  The "keystore" section: path (default keystore.db) and the master key.  */
static int
s_keystore (bc_loader_t *self)
{
    broker_config_t *config = self->config;
    const char *url = zconfig_get (config->root, "keystore/url", NULL);
    if (url && *url) {
        if (zconfig_get (config->root, "keystore/path", NULL))
            return bc_fail (self, "keystore/url", "give keystore/path (SQLite) or keystore/url "
                           "(PostgreSQL), not both");
        if (!keystore_is_url (url))
            return bc_fail (self, "keystore/url", "must be a PostgreSQL URL postgresql://... "
                           "(got \"%.*s\")", (int) strcspn (url, ":@"), url);
        config->keystore_path = strdup (url);
    }
    else
        config->keystore_path = bc_path (self, "keystore/path");
    if (!config->keystore_path)
        config->keystore_path = cs_path_resolve (config->dir, "keystore.db");
    config->keystore_name = keystore_location_name (config->keystore_path);
    if (!config->keystore_path || !config->keystore_name)
        return bc_fail (self, "keystore/path", "out of memory");
    if (bc_int (self, "keystore/key-cache", 1024, 0, BROKER_MAX_KEY_CACHE, &config->key_cache))
        return -1;
    return s_master_key (self);
}

/*  keys/usage-separation = strict | spec (default strict), with one child
 *  NAME = strict | spec per tenant that differs (cs_usage.h).  */
static int
s_usage_separation (bc_loader_t *self)
{
    zconfig_t *node = zconfig_locate (self->config->root, "keys/usage-separation");
    const char *value = node ? zconfig_value (node) : NULL;
    int policy = value && *value ? cs_usage_policy_parse (value) : CS_USAGE_STRICT;
    if (policy < 0)
        return bc_fail (self, "keys/usage-separation", "must be strict or spec (got \"%s\")", value);
    self->config->usage_separation = policy;
    self->config->usage_tenants = node && zconfig_child (node) ? node : NULL;
    for (zconfig_t *child = node ? zconfig_child (node) : NULL; child; child = zconfig_next (child))
        if (cs_usage_policy_parse (zconfig_value (child)) < 0) {
            char path [300];
            snprintf (path, sizeof path, "keys/usage-separation/%s", zconfig_name (child));
            return bc_fail (self, path, "must be strict or spec (got \"%s\")", zconfig_value (child));
        }
    return 0;
}

int
broker_config_usage (const broker_config_t *self, const char *tenant)
{
    for (zconfig_t *child = self->usage_tenants ? zconfig_child (self->usage_tenants) : NULL; child && tenant;
         child = zconfig_next (child))
        if (streq (zconfig_name (child), tenant))
            return cs_usage_policy_parse (zconfig_value (child));
    return self->usage_separation;
}

/*  The "keys" section: home of generated token keys, the RSA pool, the
 *  smallest RSA key generated.  */
static int
s_keys (bc_loader_t *self)
{
    broker_config_t *config = self->config;
    config->keys_home = strdup (zconfig_get (config->root, "keys/home", "keystore"));
    if (bc_int (self, "keys/rsa-min-bits", CS_MECH_RSA_MIN_BITS_DEFAULT, CS_MECH_RSA_GEN_FLOOR,
               CS_MECH_RSA_GEN_MAX, &config->rsa_min_bits))
        return -1;
    if (config->rsa_min_bits % 8)
        return bc_fail (self, "keys/rsa-min-bits", "must be a multiple of 8");
    for (size_t i = 0; i < BROKER_POOL_SIZES; i++) {
        char path [64];
        snprintf (path, sizeof path, "keys/pool-rsa-%u", broker_pool_bits (i));
        if (bc_int (self, path, 0, 0, BROKER_POOL_MAX, &config->pool_rsa [i]))
            return -1;
    }
    if (s_usage_separation (self))
        return -1;
    return config->keys_home ? 0 : bc_fail (self, "keys/home", "out of memory");
}

/*  Cross-checks after the boards are known: keys/home and the board of a
 *  wrapped master key must name boards.  */
static int
s_cross_check (bc_loader_t *self)
{
    broker_config_t *config = self->config;
    if (!streq (config->keys_home, "keystore") && !broker_config_board (config, config->keys_home))
        return bc_fail (self, "keys/home", "must be keystore or a board name (got \"%s\")",
                       config->keys_home);
    if (config->master_key_board && !broker_config_board (config, config->master_key_board))
        return bc_fail (self, "keystore/master-key", "no board named \"%s\"", config->master_key_board);
    //  tenants/NAME/audit is the tenant's audit policy (broker/ops/audit.h),
    //  tenants/NAME/max-* its quotas (quota.h); anything else there (PINs
    //  of old configs) is ignored.
    char path [300];
    bool other = false;
    if (quota_tenants_check (config->root, path, sizeof path, &other) != 0)
        return bc_fail (self, path, "must be a number in 0..4294967295 (0: none)");
    if (other)
        zsys_warning ("%s: the 'tenants' section is ignored: tenants and PINs live in the keystore "
                      "(cryptoserver-admin tenant add)", config->file);
    return 0;
}

broker_config_t *
broker_config_load (const char *file, char **error_p)
{
    bc_loader_t loader = { calloc (1, sizeof (broker_config_t)), NULL };
    broker_config_t *config = loader.config;
    if (!config)
        return NULL;
    config->file = strdup (file);
    config->dir = cs_path_dirname (file);
    if (access (file, R_OK))
        bc_fail (&loader, NULL, "cannot read: %s", strerror (errno));
    else
    if (!(config->root = zconfig_load (file)))
        bc_fail (&loader, NULL, "not a valid ZPL file");
    else
    if (s_broker (&loader) == 0 && s_keystore (&loader) == 0 && s_keys (&loader) == 0
    &&  bc_boards (&loader) == 0)
        s_cross_check (&loader);
    if (loader.error) {
        broker_config_destroy (&config);
        if (error_p)
            *error_p = loader.error;
        else
            free (loader.error);
    }
    return config;
}

void
broker_config_destroy (broker_config_t **self_p)
{
    broker_config_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    for (size_t i = 0; i < self->n_boards; i++) {
        free (self->boards [i].name);
        free (self->boards [i].type);
        free (self->boards [i].tenant);
    }
    free (self->boards);
    free (self->keystore_path);
    free (self->keystore_name);
    free (self->master_key_file);
    free (self->master_key_board);
    free (self->master_key_label);
    free (self->master_key_wrapped);
    free (self->keys_home);
    cs_secmem_free (self->ticket_key, BROKER_TICKET_KEY_LEN);
    zconfig_destroy (&self->root);
    free (self->file);
    free (self->dir);
    free (self->endpoint);
    free (self->local_endpoint);
    free (self->endpoint_file);
    free (self->metrics_url);
    free (self->metrics_file);
    if (self->metrics_token) {
        OPENSSL_cleanse (self->metrics_token, strlen (self->metrics_token));
        free (self->metrics_token);
    }
    free (self->driver_dir);
    free (self->secret_key);
    free (self->clients_dir);
    free (self);
    *self_p = NULL;
}

int
broker_config_worker_nice (const broker_config_t *self, size_t n_tenants)
{
    if (self->worker_nice != BROKER_WORKER_NICE_AUTO)
        return self->worker_nice;
    return n_tenants >= 2 ? BROKER_WORKER_NICE_SHARED : 0;
}
