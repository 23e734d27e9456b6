/*  broker_config.c — load and validate the broker's ZPL config.  */
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include "cs_mech.h"
#include "cs_secmem.h"
#include "cs_util.h"
#include "broker_config.h"
#include "quota.h"
#include "fair_queue.h"
#include "keystore.h"
#include "cs_usage.h"
#include "metrics_http.h"

/*  Loader state: the config under construction and the first error.  */
typedef struct {
    broker_config_t *config;
    char *error;
} s_loader_t;

/*  Records the first error as "FILE: PATH: problem".  Returns -1.  */
static int
s_fail (s_loader_t *self, const char *path, const char *format, ...)
{
    if (self->error)
        return -1;
    char problem [512];
    va_list args;
    va_start (args, format);
    vsnprintf (problem, sizeof problem, format, args);
    va_end (args);
    if (asprintf (&self->error, "%s: %s%s%s", self->config->file, path ? path : "",
                  path ? ": " : "", problem) < 0)
        self->error = NULL;
    return -1;
}

/*  Reads integer `path` into *value_p (default when absent) within [min, max].  */
static int
s_int (s_loader_t *self, const char *path, int fallback, int min, int max, int *value_p)
{
    const char *text = zconfig_get (self->config->root, path, NULL);
    if (!text) {
        *value_p = fallback;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    long value = strtol (text, &end, 10);
    if (errno || end == text || *end || value < min || value > max)
        return s_fail (self, path, "must be %d..%d (got \"%s\")", min, max, text);
    *value_p = (int) value;
    return 0;
}

/*  broker/worker-nice: "auto" (or absent) is BROKER_WORKER_NICE_AUTO,
 *  else 0..19.  */
static int
s_worker_nice (s_loader_t *self)
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
        return s_fail (self, "broker/worker-nice", "must be auto or 0..19 (got \"%s\")", text);
    self->config->worker_nice = (int) value;
    return 0;
}

/*  Reads boolean `path` (true/false/yes/no/1/0) into *value_p.  */
static int
s_bool (s_loader_t *self, const char *path, bool fallback, bool *value_p)
{
    const char *text = zconfig_get (self->config->root, path, NULL);
    *value_p = fallback;
    if (!text)
        return 0;
    if (streq (text, "true") || streq (text, "yes") || streq (text, "1"))
        *value_p = true;
    else
    if (streq (text, "false") || streq (text, "no") || streq (text, "0"))
        *value_p = false;
    else
        return s_fail (self, path, "must be true or false (got \"%s\")", text);
    return 0;
}

/*  Resolves path-valued key `path` against the config dir; NULL if absent.  */
static char *
s_path (s_loader_t *self, const char *path)
{
    const char *text = zconfig_get (self->config->root, path, NULL);
    return text && *text ? cs_path_resolve (self->config->dir, text) : NULL;
}

/*  Reads the 32-byte ticket key (64 hex digits, a private file) into locked
 *  memory (cs_secmem.h), or makes a random one.  */
static int
s_ticket_key (s_loader_t *self)
{
    broker_config_t *config = self->config;
    char *path = s_path (self, "broker/ticket-key");
    char why [512];
    int rc = 0;
    if (!(config->ticket_key = cs_secmem_alloc (BROKER_TICKET_KEY_LEN))) {
        free (path);
        return s_fail (self, "broker/ticket-key", "out of memory");
    }
    if (!path) {
        config->ticket_key_random = true;
        if (RAND_bytes (config->ticket_key, BROKER_TICKET_KEY_LEN) != 1)
            rc = s_fail (self, "broker/ticket-key", "no random bytes for a ticket key");
        return rc;
    }
    int got = cs_file_check_private (path, why, sizeof why) ? -3
            : cs_file_read_hex (path, config->ticket_key, BROKER_TICKET_KEY_LEN);
    if (got == -3)
        rc = s_fail (self, "broker/ticket-key", "%s", why);
    else
    if (got == -1)
        rc = s_fail (self, "broker/ticket-key", "cannot read %s", path);
    else
    if (got == -2)
        rc = s_fail (self, "broker/ticket-key", "%s must hold 64 hex digits", path);
    free (path);
    return rc;
}

/*  broker/curve: enabled, secret-key (a loadable zcert), clients (a dir).  */
static int
s_curve (s_loader_t *self)
{
    broker_config_t *config = self->config;
    struct stat st;
    if (s_bool (self, "broker/curve/enabled", true, &config->curve) || !config->curve)
        return self->error ? -1 : 0;
    config->secret_key = s_path (self, "broker/curve/secret-key");
    config->clients_dir = s_path (self, "broker/curve/clients");
    if (!config->secret_key)
        return s_fail (self, "broker/curve/secret-key", "required when curve is enabled");
    char why [512];
    if (cs_file_check_private (config->secret_key, why, sizeof why))
        return s_fail (self, "broker/curve/secret-key", "%s", why);
    zcert_t *cert = zcert_load (config->secret_key);
    bool has_secret = cert && !streq (zcert_secret_txt (cert),
                                      "0000000000000000000000000000000000000000");
    zcert_destroy (&cert);
    if (!has_secret)
        return s_fail (self, "broker/curve/secret-key", "%s is not a zcert secret key file",
                       config->secret_key);
    if (!config->clients_dir)
        return s_fail (self, "broker/curve/clients", "required when curve is enabled");
    if (stat (config->clients_dir, &st) || !S_ISDIR (st.st_mode))
        return s_fail (self, "broker/curve/clients", "%s is not a directory", config->clients_dir);
    return 0;
}

/*  broker/metrics (a URL, or absent/empty: off), metrics-public and
 *  metrics-file.  An address that is not loopback is refused unless
 *  metrics-public is true: the metrics name clients and tenants.  */
static int
s_metrics (s_loader_t *self)
{
    broker_config_t *config = self->config;
    const char *url = zconfig_get (config->root, "broker/metrics", NULL);
    metrics_http_url_t parsed;
    char why [512];
    if (s_bool (self, "broker/metrics-public", false, &config->metrics_public))
        return -1;
    if (!url || !*url)
        return 0;
    if (metrics_http_url_parse (url, &parsed, why, sizeof why))
        return s_fail (self, "broker/metrics", "%s", why);
    if (!parsed.loopback && !config->metrics_public)
        return s_fail (self, "broker/metrics", "%s is not a loopback address: the metrics name clients "
                       "and tenants; set broker/metrics-public = true to serve them beyond this host", url);
    config->metrics_url = strdup (url);
    config->metrics_file = s_path (self, "broker/metrics-file");
    return config->metrics_url ? 0 : s_fail (self, "broker/metrics", "out of memory");
}

/*  broker/metrics-token-file: a private file (chmod 600) holding the bearer
 *  token (16..256 printable characters, no spaces) that a scraper presents
 *  to see client and tenant names (RFC 6750 "Authorization: Bearer").  */
static int
s_metrics_token (s_loader_t *self)
{
    broker_config_t *config = self->config;
    char *path = s_path (self, "broker/metrics-token-file");
    if (!path)
        return 0;
    char why [512];
    int rc = 0;
    if (cs_file_check_private (path, why, sizeof why))
        rc = s_fail (self, "broker/metrics-token-file", "%s", why);
    else
    if (!(config->metrics_token = cs_file_read_secret (path, 512)))
        rc = s_fail (self, "broker/metrics-token-file", "cannot read %s", path);
    else {
        size_t len = strlen (config->metrics_token);
        bool printable = len >= 16 && len <= 256;
        for (size_t i = 0; printable && i < len; i++)
            printable = config->metrics_token [i] > ' ' && config->metrics_token [i] < 127;
        if (!printable)
            rc = s_fail (self, "broker/metrics-token-file", "%s must hold 16..256 printable "
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
s_cross_check_pct (s_loader_t *self)
{
    const char *text = zconfig_get (self->config->root, "broker/cross-check", "0");
    int pct = -1, used = 0;
    if ((sscanf (text, "%d%%%n", &pct, &used) != 1 || used != (int) strlen (text))
    &&  (sscanf (text, "%d%n", &pct, &used) != 1 || used != (int) strlen (text)))
        pct = -1;
    if (pct < 0 || pct > 100)
        return s_fail (self, "broker/cross-check", "must be N%% with N 0..100 (got \"%s\")", text);
    self->config->cross_check = pct;
    return 0;
}

/*  broker/tenant-weight: one child per tenant, its DRR weight
 *  (1..FAIR_QUEUE_MAX_WEIGHT); tenants not named weigh 1.  */
static int
s_tenant_weights (s_loader_t *self)
{
    zconfig_t *section = zconfig_locate (self->config->root, "broker/tenant-weight");
    self->config->tenant_weights = section;
    for (zconfig_t *child = section ? zconfig_child (section) : NULL; child; child = zconfig_next (child)) {
        char path [300];
        int weight = 0;
        snprintf (path, sizeof path, "broker/tenant-weight/%s", zconfig_name (child));
        if (!zconfig_value (child) || !*zconfig_value (child))
            return s_fail (self, path, "must be a weight 1..%d", FAIR_QUEUE_MAX_WEIGHT);
        if (s_int (self, path, 1, 1, FAIR_QUEUE_MAX_WEIGHT, &weight))
            return -1;
    }
    return 0;
}

/*  The "broker" section.  */
static int
s_broker (s_loader_t *self)
{
    broker_config_t *config = self->config;
    config->endpoint = strdup (zconfig_get (config->root, "broker/endpoint", "tcp://127.0.0.1:5555"));
    if (strncmp (config->endpoint, "tcp://", 6) && strncmp (config->endpoint, "ipc://", 6)
    &&  strncmp (config->endpoint, "inproc://", 9))
        return s_fail (self, "broker/endpoint", "must start with tcp://, ipc:// or inproc:// (got \"%s\")",
                       config->endpoint);
    config->endpoint_file = s_path (self, "broker/endpoint-file");
    const char *local = zconfig_get (config->root, "broker/local-endpoint", NULL);
    if (local && *local && strncmp (local, "ipc:///", 7))
        return s_fail (self, "broker/local-endpoint", "must be ipc:// with an absolute path (got \"%s\")", local);
    config->local_endpoint = local && *local ? strdup (local) : NULL;
    config->driver_dir = s_path (self, "broker/driver-dir");
    if (s_int (self, "broker/default-deadline-ms", 10000, 1, 3600000, &config->default_deadline_ms)
    ||  s_int (self, "broker/max-deadline-ms", config->default_deadline_ms > 60000
                                               ? config->default_deadline_ms : 60000,
               1, 3600000, &config->max_deadline_ms)
    ||  s_int (self, "broker/max-queue", 10000, 1, 1000000, &config->max_queue)
    ||  s_int (self, "broker/max-client-bytes", 16 * 1024 * 1024, 4096, INT_MAX, &config->max_client_bytes)
    ||  s_int (self, "broker/max-client-jobs", 256, 1, 1000000, &config->max_client_jobs)
    ||  s_cross_check_pct (self)
    ||  s_int (self, "broker/host-cores", s_online_cpus (), 0, 4096, &config->host_cores)
    ||  s_int (self, "broker/fast-lane-us", 100, 0, 10000, &config->fast_lane_us)
    ||  s_worker_nice (self)
    ||  s_tenant_weights (self)
    ||  s_int (self, "broker/max-list-page", 1000, 1, 100000, &config->max_list_page)
    ||  s_int (self, "broker/router-rcvhwm", 100, 1, 100000, &config->router_rcvhwm)
    ||  s_int (self, "broker/router-sndhwm", 1000, 1, 100000, &config->router_sndhwm)
    ||  s_int (self, "broker/stats-interval-ms", 10000, 0, 86400000, &config->stats_interval_ms)
    ||  s_int (self, "broker/ticket-lifetime-ms", 14400000, 1000, 604800000, &config->ticket_lifetime_ms)
    ||  s_int (self, "broker/slow-threads", 1, 1, BROKER_MAX_SLOW_THREADS, &config->slow_threads)
    ||  s_ticket_key (self) || s_metrics (self) || s_metrics_token (self))
        return -1;
    if (config->default_deadline_ms > config->max_deadline_ms)
        return s_fail (self, "broker/default-deadline-ms", "must not exceed broker/max-deadline-ms (%d)",
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
s_master_key (s_loader_t *self)
{
    broker_config_t *config = self->config;
    const char *text = zconfig_get (config->root, "keystore/master-key", "master.key");
    if (strncmp (text, "board:", 6)) {
        config->master_key_file = s_path (self, "keystore/master-key");
        if (!config->master_key_file)
            config->master_key_file = cs_path_resolve (config->dir, "master.key");
        return config->master_key_file ? 0 : s_fail (self, "keystore/master-key", "out of memory");
    }
    const char *colon = strchr (text + 6, ':');
    if (!colon || colon == text + 6 || !colon [1])
        return s_fail (self, "keystore/master-key", "must be FILE or board:NAME:LABEL (got \"%s\")",
                       text);
    config->master_key_board = strndup (text + 6, (size_t) (colon - text - 6));
    config->master_key_label = strdup (colon + 1);
    config->master_key_wrapped = s_path (self, "keystore/master-key-wrapped");
    if (!config->master_key_wrapped)
        return s_fail (self, "keystore/master-key-wrapped",
                       "required with master-key = board:NAME:LABEL");
    return 0;
}

/*  The "keystore" section: path (default keystore.db) and the master key.  */
static int
s_keystore (s_loader_t *self)
{
    broker_config_t *config = self->config;
    const char *url = zconfig_get (config->root, "keystore/url", NULL);
    if (url && *url) {
        if (zconfig_get (config->root, "keystore/path", NULL))
            return s_fail (self, "keystore/url", "give keystore/path (SQLite) or keystore/url "
                           "(PostgreSQL), not both");
        if (!keystore_is_url (url))
            return s_fail (self, "keystore/url", "must be a PostgreSQL URL postgresql://... "
                           "(got \"%.*s\")", (int) strcspn (url, ":@"), url);
        config->keystore_path = strdup (url);
    }
    else
        config->keystore_path = s_path (self, "keystore/path");
    if (!config->keystore_path)
        config->keystore_path = cs_path_resolve (config->dir, "keystore.db");
    config->keystore_name = keystore_location_name (config->keystore_path);
    if (!config->keystore_path || !config->keystore_name)
        return s_fail (self, "keystore/path", "out of memory");
    if (s_int (self, "keystore/key-cache", 1024, 0, BROKER_MAX_KEY_CACHE, &config->key_cache))
        return -1;
    return s_master_key (self);
}

/*  keys/usage-separation = strict | spec (default strict), with one child
 *  NAME = strict | spec per tenant that differs (cs_usage.h).  */
static int
s_usage_separation (s_loader_t *self)
{
    zconfig_t *node = zconfig_locate (self->config->root, "keys/usage-separation");
    const char *value = node ? zconfig_value (node) : NULL;
    int policy = value && *value ? cs_usage_policy_parse (value) : CS_USAGE_STRICT;
    if (policy < 0)
        return s_fail (self, "keys/usage-separation", "must be strict or spec (got \"%s\")", value);
    self->config->usage_separation = policy;
    self->config->usage_tenants = node && zconfig_child (node) ? node : NULL;
    for (zconfig_t *child = node ? zconfig_child (node) : NULL; child; child = zconfig_next (child))
        if (cs_usage_policy_parse (zconfig_value (child)) < 0) {
            char path [300];
            snprintf (path, sizeof path, "keys/usage-separation/%s", zconfig_name (child));
            return s_fail (self, path, "must be strict or spec (got \"%s\")", zconfig_value (child));
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
s_keys (s_loader_t *self)
{
    broker_config_t *config = self->config;
    config->keys_home = strdup (zconfig_get (config->root, "keys/home", "keystore"));
    if (s_int (self, "keys/rsa-min-bits", CS_MECH_RSA_MIN_BITS_DEFAULT, CS_MECH_RSA_GEN_FLOOR,
               CS_MECH_RSA_GEN_MAX, &config->rsa_min_bits))
        return -1;
    if (config->rsa_min_bits % 8)
        return s_fail (self, "keys/rsa-min-bits", "must be a multiple of 8");
    for (size_t i = 0; i < BROKER_POOL_SIZES; i++) {
        char path [64];
        snprintf (path, sizeof path, "keys/pool-rsa-%u", broker_pool_bits (i));
        if (s_int (self, path, 0, 0, BROKER_POOL_MAX, &config->pool_rsa [i]))
            return -1;
    }
    if (s_usage_separation (self))
        return -1;
    return config->keys_home ? 0 : s_fail (self, "keys/home", "out of memory");
}

/*  Cross-checks after the boards are known: keys/home and the board of a
 *  wrapped master key must name boards.  */
static int
s_cross_check (s_loader_t *self)
{
    broker_config_t *config = self->config;
    if (!streq (config->keys_home, "keystore") && !broker_config_board (config, config->keys_home))
        return s_fail (self, "keys/home", "must be keystore or a board name (got \"%s\")",
                       config->keys_home);
    if (config->master_key_board && !broker_config_board (config, config->master_key_board))
        return s_fail (self, "keystore/master-key", "no board named \"%s\"", config->master_key_board);
    //  tenants/NAME/audit is the tenant's audit policy (broker/ops/audit.h),
    //  tenants/NAME/max-* its quotas (quota.h); anything else there (PINs
    //  of old configs) is ignored.
    char path [300];
    bool other = false;
    if (quota_tenants_check (config->root, path, sizeof path, &other) != 0)
        return s_fail (self, path, "must be a number in 0..4294967295 (0: none)");
    if (other)
        zsys_warning ("%s: the 'tenants' section is ignored: tenants and PINs live in the keystore "
                      "(cryptoserver-admin tenant add)", config->file);
    return 0;
}

/*  Checks a driver type: a plain file name (letters, digits, '_', '-').  */
static bool
s_type_ok (const char *type)
{
    if (!type || !*type || strlen (type) > 64)
        return false;
    for (const char *c = type; *c; c++)
        if (!isalnum ((unsigned char) *c) && *c != '_' && *c != '-')
            return false;
    return true;
}

/*  drivers/<name>/verify: "always", "never" or "sample N%" (N 0..100);
 *  -1 when absent.  */
static int
s_verify (s_loader_t *self, const char *path, int *pct_p)
{
    const char *text = zconfig_get (self->config->root, path, NULL);
    int pct = -1, used = 0;
    *pct_p = -1;
    if (!text)
        return 0;
    if (streq (text, "always"))
        pct = 100;
    else
    if (streq (text, "never"))
        pct = 0;
    else
    if (sscanf (text, "sample %d%%%n", &pct, &used) != 1 || used != (int) strlen (text) || pct < 0 || pct > 100)
        return s_fail (self, path, "must be always, never or sample N%% with N 0..100 (got \"%s\")", text);
    *pct_p = pct;
    return 0;
}

/*  The board-health settings of a "drivers/<name>" section (health.h).  */
static int
s_board_health (s_loader_t *self, broker_board_conf_t *board)
{
    char path [256];
    int pct;
    snprintf (path, sizeof path, "drivers/%s/trusted", board->name);
    if (s_bool (self, path, true, &board->trusted))
        return -1;
    snprintf (path, sizeof path, "drivers/%s/verify", board->name);
    if (s_verify (self, path, &pct))
        return -1;
    board->verify_rsa = pct >= 0 ? pct : 100;
    board->verify_ec = pct >= 0 ? pct : board->trusted ? 0 : 100;
    snprintf (path, sizeof path, "drivers/%s/call-timeout-ms", board->name);
    if (s_int (self, path, 0, 0, 3600000, &board->call_timeout_ms))
        return -1;
    snprintf (path, sizeof path, "drivers/%s/generate-timeout-ms", board->name);
    if (s_int (self, path, 300000, 1, 3600000, &board->generate_timeout_ms))
        return -1;
    snprintf (path, sizeof path, "drivers/%s/probe-min-ms", board->name);
    if (s_int (self, path, 100, 1, 3600000, &board->probe_min_ms))
        return -1;
    snprintf (path, sizeof path, "drivers/%s/probe-max-ms", board->name);
    if (s_int (self, path, 30000, 1, 3600000, &board->probe_max_ms))
        return -1;
    if (board->probe_max_ms < board->probe_min_ms)
        return s_fail (self, path, "must be at least probe-min-ms (%d)", board->probe_min_ms);
    return 0;
}

/*  One "drivers/<name>" section.  */
static int
s_board (s_loader_t *self, zconfig_t *section, broker_board_conf_t *board)
{
    char path [256];
    board->name = strdup (zconfig_name (section));
    board->config = section;
    const char *type = zconfig_get (section, "type", NULL);
    snprintf (path, sizeof path, "drivers/%s/type", board->name);
    if (!s_type_ok (type))
        return s_fail (self, path, "required: a driver name such as pkcs11 or sim");
    board->type = strdup (type);
    const char *tenant = zconfig_get (section, "tenant", NULL);
    board->tenant = tenant && *tenant ? strdup (tenant) : NULL;
    snprintf (path, sizeof path, "drivers/%s/threads", board->name);
    if (s_int (self, path, 1, 1, BROKER_MAX_THREADS, &board->threads))
        return -1;
    snprintf (path, sizeof path, "drivers/%s/host", board->name);
    if (s_bool (self, path, streq (type, "openssl") || streq (type, "gmp"), &board->host))
        return -1;
    return s_board_health (self, board);
}

/*  The "drivers" section: 1..64 boards.  */
static int
s_boards (s_loader_t *self)
{
    broker_config_t *config = self->config;
    zconfig_t *section = zconfig_locate (config->root, "drivers");
    size_t count = 0;
    for (zconfig_t *d = section ? zconfig_child (section) : NULL; d; d = zconfig_next (d))
        count++;
    if (count == 0 || count > BROKER_MAX_BOARDS)
        return s_fail (self, "drivers", "must name 1..%d boards (got %zu)", BROKER_MAX_BOARDS, count);
    config->boards = calloc (count, sizeof (broker_board_conf_t));
    if (!config->boards)
        return s_fail (self, "drivers", "out of memory");
    for (zconfig_t *d = zconfig_child (section); d; d = zconfig_next (d))
        if (s_board (self, d, &config->boards [config->n_boards++]))
            return -1;
    return 0;
}

broker_config_t *
broker_config_load (const char *file, char **error_p)
{
    s_loader_t loader = { calloc (1, sizeof (broker_config_t)), NULL };
    broker_config_t *config = loader.config;
    if (!config)
        return NULL;
    config->file = strdup (file);
    config->dir = cs_path_dirname (file);
    if (access (file, R_OK))
        s_fail (&loader, NULL, "cannot read: %s", strerror (errno));
    else
    if (!(config->root = zconfig_load (file)))
        s_fail (&loader, NULL, "not a valid ZPL file");
    else
    if (s_broker (&loader) == 0 && s_keystore (&loader) == 0 && s_keys (&loader) == 0
    &&  s_boards (&loader) == 0)
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

const broker_board_conf_t *
broker_config_board (const broker_config_t *self, const char *name)
{
    for (size_t i = 0; name && i < self->n_boards; i++)
        if (streq (self->boards [i].name, name))
            return &self->boards [i];
    return NULL;
}

int
broker_config_worker_nice (const broker_config_t *self, size_t n_tenants)
{
    if (self->worker_nice != BROKER_WORKER_NICE_AUTO)
        return self->worker_nice;
    return n_tenants >= 2 ? BROKER_WORKER_NICE_SHARED : 0;
}
