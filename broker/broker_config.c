/*  broker_config.c — load and validate the broker's ZPL config.  */
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include "cs_util.h"
#include "broker_config.h"

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

/*  Reads the 32-byte ticket key (64 hex digits) or makes a random one.  */
static int
s_ticket_key (s_loader_t *self)
{
    broker_config_t *config = self->config;
    char *path = s_path (self, "broker/ticket-key");
    int rc = 0;
    if (!path) {
        config->ticket_key_random = true;
        if (RAND_bytes (config->ticket_key, sizeof config->ticket_key) != 1)
            rc = s_fail (self, "broker/ticket-key", "no random bytes for a ticket key");
        return rc;
    }
    char *hex = cs_file_read_secret (path, 256);
    if (!hex)
        rc = s_fail (self, "broker/ticket-key", "cannot read %s", path);
    else
    if (strlen (hex) != 64 || cs_hex_decode (hex, config->ticket_key, 32) != 32)
        rc = s_fail (self, "broker/ticket-key", "%s must hold 64 hex digits", path);
    if (hex) {
        OPENSSL_cleanse (hex, strlen (hex));
        free (hex);
    }
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
    config->driver_dir = s_path (self, "broker/driver-dir");
    if (s_int (self, "broker/default-deadline-ms", 10000, 1, 3600000, &config->default_deadline_ms)
    ||  s_int (self, "broker/max-queue", 10000, 1, 1000000, &config->max_queue)
    ||  s_int (self, "broker/stats-interval-ms", 10000, 0, 86400000, &config->stats_interval_ms)
    ||  s_ticket_key (self))
        return -1;
    return s_curve (self);
}

/*  Checks that a stored PIN hash has the cs_pin.h form.  */
static bool
s_pin_form_ok (const char *stored)
{
    return stored && strncmp (stored, "pbkdf2-sha256$", 14) == 0;
}

/*  The "tenants" section: at least one, each with a user-pin.  */
static int
s_tenants (s_loader_t *self)
{
    broker_config_t *config = self->config;
    zconfig_t *section = zconfig_locate (config->root, "tenants");
    size_t count = 0;
    for (zconfig_t *t = section ? zconfig_child (section) : NULL; t; t = zconfig_next (t))
        count++;
    if (count == 0)
        return s_fail (self, "tenants", "at least one tenant is required");
    config->tenants = calloc (count, sizeof (broker_tenant_t));
    for (zconfig_t *t = zconfig_child (section); t && config->tenants; t = zconfig_next (t)) {
        broker_tenant_t *tenant = &config->tenants [config->n_tenants++];
        char path [256];
        tenant->name = strdup (zconfig_name (t));
        const char *user = zconfig_get (t, "user-pin", NULL);
        const char *so = zconfig_get (t, "so-pin", NULL);
        snprintf (path, sizeof path, "tenants/%s/user-pin", tenant->name);
        if (!s_pin_form_ok (user))
            return s_fail (self, path, "required, in the form pbkdf2-sha256$ITER$SALT$HASH");
        snprintf (path, sizeof path, "tenants/%s/so-pin", tenant->name);
        if (so && !s_pin_form_ok (so))
            return s_fail (self, path, "must be in the form pbkdf2-sha256$ITER$SALT$HASH");
        tenant->user_pin = strdup (user);
        tenant->so_pin = so ? strdup (so) : NULL;
    }
    return config->tenants ? 0 : s_fail (self, "tenants", "out of memory");
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
    snprintf (path, sizeof path, "drivers/%s/threads", board->name);
    return s_int (self, path, 1, 1, BROKER_MAX_THREADS, &board->threads);
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
    if (s_broker (&loader) == 0 && s_tenants (&loader) == 0)
        s_boards (&loader);
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
    for (size_t i = 0; i < self->n_tenants; i++) {
        free (self->tenants [i].name);
        free (self->tenants [i].user_pin);
        free (self->tenants [i].so_pin);
    }
    for (size_t i = 0; i < self->n_boards; i++) {
        free (self->boards [i].name);
        free (self->boards [i].type);
    }
    free (self->tenants);
    free (self->boards);
    OPENSSL_cleanse (self->ticket_key, sizeof self->ticket_key);
    zconfig_destroy (&self->root);
    free (self->file);
    free (self->dir);
    free (self->endpoint);
    free (self->endpoint_file);
    free (self->driver_dir);
    free (self->secret_key);
    free (self->clients_dir);
    free (self);
    *self_p = NULL;
}

const broker_tenant_t *
broker_config_tenant (const broker_config_t *self, const char *name)
{
    for (size_t i = 0; name && i < self->n_tenants; i++)
        if (streq (self->tenants [i].name, name))
            return &self->tenants [i];
    return NULL;
}
