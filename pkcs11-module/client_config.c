/*  client_config.c — loads the client config with CZMQ zconfig and zcert.
 *
 *  Only zconfig and zcert_load are used from CZMQ: they do not start CZMQ's
 *  global zsys state, which must not exist inside a library loaded by nginx
 *  or a JVM.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <czmq.h>
#include <openssl/crypto.h>
#include "cs_util.h"
#include "log.h"
#include "client_config.h"

const char *
cs_client_config_path (void)
{
    const char *path = getenv ("CRYPTOSERVER_CONF");
    return path && *path ? path : CS_CLIENT_CONF_DEFAULT;
}

/*  Logs the standard "file: key: why" line and returns -1.  */
static int
s_fail (const cs_client_config_t *self, const char *key, const char *why)
{
    cs_log_error ("%s: %s: %s", self->path, key, why);
    return -1;
}

static bool
s_blank (const char *text)
{
    return !text || text [strspn (text, " \t")] == 0;
}

static char *
s_trim (char *text)
{
    char *end;
    while (*text == ' ' || *text == '\t')
        text++;
    end = text + strlen (text);
    while (end > text && (end [-1] == ' ' || end [-1] == '\t'))
        *--end = 0;
    return text;
}

/*  Splits client/endpoints on commas into self->endpoints.  */
static int
s_parse_endpoints (cs_client_config_t *self, const char *value)
{
    int rc = -1;
    char *copy = value ? strdup (value) : NULL;
    char *saveptr = NULL;
    if (s_blank (value))
        return s_fail (self, "client/endpoints", "missing (at least one endpoint is required)");
    if (!copy)
        return s_fail (self, "client/endpoints", "out of memory");
    self->endpoints = calloc (CS_CLIENT_MAX_ENDPOINTS, sizeof (char *));
    if (!self->endpoints)
        goto out;
    for (char *item = strtok_r (copy, ",", &saveptr); item; item = strtok_r (NULL, ",", &saveptr)) {
        item = s_trim (item);
        if (!*item)
            continue;
        if (self->n_endpoints == CS_CLIENT_MAX_ENDPOINTS) {
            s_fail (self, "client/endpoints", "too many endpoints (at most 16)");
            goto out;
        }
        if (!strstr (item, "://")) {
            s_fail (self, "client/endpoints", "not an endpoint (expected tcp://HOST:PORT or ipc://PATH)");
            goto out;
        }
        if (!(self->endpoints [self->n_endpoints++] = strdup (item)))
            goto out;
    }
    if (self->n_endpoints == 0) {
        s_fail (self, "client/endpoints", "missing (at least one endpoint is required)");
        goto out;
    }
    rc = 0;
out:
    free (copy);
    return rc;
}

static int
s_parse_bool (cs_client_config_t *self, const char *key, const char *value, bool *out)
{
    if (!value || !*value)
        return 0;       /* keep the default */
    if (!strcmp (value, "true") || !strcmp (value, "1") || !strcmp (value, "yes"))
        *out = true;
    else
    if (!strcmp (value, "false") || !strcmp (value, "0") || !strcmp (value, "no"))
        *out = false;
    else
        return s_fail (self, key, "not a boolean (true or false)");
    return 0;
}

/*  Parses the integer `value` of `key` (in `unit`) into *out when given:
 *  min..max.  */
static int
s_parse_int (cs_client_config_t *self, const char *key, const char *value,
             long long min, long long max, const char *unit, int64_t *out)
{
    char *end = NULL, *why = NULL;
    long long ms;
    if (!value || !*value)
        return 0;       /* keep the default */
    errno = 0;
    ms = strtoll (value, &end, 10);
    if (errno || end == value || *s_trim (end))
        return s_fail (self, key, "not a number");
    if (ms < min || ms > max) {
        if (asprintf (&why, "out of range (%lld .. %lld %s)", min, max, unit) > 0)
            s_fail (self, key, why);
        free (why);
        return -1;
    }
    *out = ms;
    return 0;
}

/*  Parses the milliseconds `value` of `key` into *out when given.  */
static int
s_parse_ms (cs_client_config_t *self, const char *key, const char *value,
            long long min, long long max, int64_t *out)
{
    return s_parse_int (self, key, value, min, max, "ms", out);
}

/*  The failover settings (man cryptoserver-client.conf(5)): the heartbeat
 *  timeout must exceed the interval; the per-attempt timeout defaults to a
 *  quarter of the deadline.  */
static int
s_parse_failover (cs_client_config_t *self, zconfig_t *root)
{
    self->attempt_timeout_ms = 0;
    if (s_parse_ms (self, "client/heartbeat-ivl-ms", zconfig_get (root, "client/heartbeat-ivl-ms", NULL),
                    100, 600000, &self->heartbeat_ivl_ms)
    ||  s_parse_ms (self, "client/heartbeat-timeout-ms",
                    zconfig_get (root, "client/heartbeat-timeout-ms", NULL),
                    100, 600000, &self->heartbeat_timeout_ms)
    ||  s_parse_ms (self, "client/attempt-timeout-ms", zconfig_get (root, "client/attempt-timeout-ms", NULL),
                    100, CS_CLIENT_TIMEOUT_MAX, &self->attempt_timeout_ms))
        return -1;
    if (self->heartbeat_timeout_ms <= self->heartbeat_ivl_ms)
        return s_fail (self, "client/heartbeat-timeout-ms", "must be longer than client/heartbeat-ivl-ms");
    if (self->attempt_timeout_ms == 0)
        self->attempt_timeout_ms = self->timeout_ms / 4 > 0 ? self->timeout_ms / 4 : 1;
    return 0;
}

static int
s_parse_log_level (cs_client_config_t *self, const char *value)
{
    int level;
    if (!value || !*value)
        return 0;
    level = cs_log_level_parse (value);
    if (level < 0)
        return s_fail (self, "client/log-level", "not one of error, warning, info, debug");
    self->log_level = level;
    return 0;
}

/*  Loads the zcert at `value` (relative to `dir`); copies its public key and,
 *  when `secret` is given, its secret key (which must be present).  */
static int
s_load_cert (cs_client_config_t *self, const char *dir, const char *key,
             const char *value, uint8_t *public_key, uint8_t *secret)
{
    static const uint8_t zero [32] = { 0 };
    int rc = -1;
    char *path = NULL, *why = NULL;
    zcert_t *cert = NULL;
    if (s_blank (value))
        return s_fail (self, key, "missing (required when client/curve is true)");
    path = cs_path_resolve (dir, value);
    if (!path || !(cert = zcert_load (path))) {
        if (asprintf (&why, "cannot load certificate %s", path ? path : value) > 0)
            s_fail (self, key, why);
        goto out;
    }
    memcpy (public_key, zcert_public_key (cert), 32);
    if (secret) {
        memcpy (secret, zcert_secret_key (cert), 32);
        if (!memcmp (secret, zero, 32)) {
            if (asprintf (&why, "no secret key in %s (expected %s_secret)", path, path) > 0)
                s_fail (self, key, why);
            goto out;
        }
    }
    rc = 0;
out:
    free (why);
    free (path);
    zcert_destroy (&cert);
    return rc;
}

/*  Reads the "client" section of an already parsed file.  */
static int
s_parse (cs_client_config_t *self, zconfig_t *root, const char *dir)
{
    if (!zconfig_locate (root, "client"))
        return s_fail (self, "client", "missing section");
    if (s_parse_endpoints (self, zconfig_get (root, "client/endpoints", NULL))
    ||  s_parse_bool (self, "client/curve", zconfig_get (root, "client/curve", NULL), &self->curve)
    ||  s_parse_ms (self, "client/timeout-ms", zconfig_get (root, "client/timeout-ms", NULL),
                    1, CS_CLIENT_TIMEOUT_MAX, &self->timeout_ms)
    ||  s_parse_failover (self, root)
    ||  s_parse_int (self, "client/list-page", zconfig_get (root, "client/list-page", NULL), 0, 100000,
                     "keys", &self->list_page)
    ||  s_parse_log_level (self, zconfig_get (root, "client/log-level", NULL)))
        return -1;
    if (!self->curve)
        return 0;
    if (s_load_cert (self, dir, "client/broker-cert",
                     zconfig_get (root, "client/broker-cert", NULL), self->broker_key, NULL)
    ||  s_load_cert (self, dir, "client/certificate",
                     zconfig_get (root, "client/certificate", NULL), self->public_key, self->secret_key))
        return -1;
    return 0;
}

cs_client_config_t *
cs_client_config_load (const char *path)
{
    cs_client_config_t *self = NULL;
    zconfig_t *root = NULL;
    char *dir = NULL;
    if (!path || !(self = calloc (1, sizeof *self)) || !(self->path = strdup (path)))
        goto fail;
    self->curve = true;
    self->timeout_ms = CS_CLIENT_TIMEOUT_DEFAULT;
    self->heartbeat_ivl_ms = CS_CLIENT_HEARTBEAT_IVL_DEFAULT;
    self->heartbeat_timeout_ms = CS_CLIENT_HEARTBEAT_TIMEOUT_DEFAULT;
    self->log_level = CS_LOG_WARNING;
    self->list_page = CS_CLIENT_LIST_PAGE_DEFAULT;
    if (access (path, R_OK) != 0) {
        cs_log_error ("%s: cannot read client config: %s (set CRYPTOSERVER_CONF)", path, strerror (errno));
        goto fail;
    }
    if (!(root = zconfig_load (path))) {
        cs_log_error ("%s: not a valid ZPL config file", path);
        goto fail;
    }
    if (!(dir = cs_path_dirname (path)) || s_parse (self, root, dir) != 0)
        goto fail;
    goto out;
fail:
    cs_client_config_destroy (&self);
out:
    free (dir);
    zconfig_destroy (&root);
    return self;
}

void
cs_client_config_destroy (cs_client_config_t **self_p)
{
    cs_client_config_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    for (size_t i = 0; self->endpoints && i < self->n_endpoints; i++)
        free (self->endpoints [i]);
    free (self->endpoints);
    free (self->path);
    OPENSSL_cleanse (self->secret_key, sizeof self->secret_key);
    free (self);
    *self_p = NULL;
}
