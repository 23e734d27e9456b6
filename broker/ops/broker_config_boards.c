/*  broker_config_boards.c — the "drivers" section of broker.conf: one
 *  board per child, its driver type, tenant, threads, host flag and health
 *  settings (cryptoserver-broker.conf(5) KEYS "drivers" and BOARD HEALTH;
 *  broker_config_int.h).  */
#include <ctype.h>
#include <czmq.h>
#include "broker_config_int.h"

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
s_verify (bc_loader_t *self, const char *path, int *pct_p)
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
        return bc_fail (self, path, "must be always, never or sample N%% with N 0..100 (got \"%s\")", text);
    *pct_p = pct;
    return 0;
}

/*  The board-health settings of a "drivers/<name>" section (health.h).  */
static int
s_board_health (bc_loader_t *self, broker_board_conf_t *board)
{
    char path [256];
    int pct;
    snprintf (path, sizeof path, "drivers/%s/trusted", board->name);
    if (bc_bool (self, path, true, &board->trusted))
        return -1;
    snprintf (path, sizeof path, "drivers/%s/verify", board->name);
    if (s_verify (self, path, &pct))
        return -1;
    board->verify_rsa = pct >= 0 ? pct : 100;
    board->verify_ec = pct >= 0 ? pct : board->trusted ? 0 : 100;
    snprintf (path, sizeof path, "drivers/%s/call-timeout-ms", board->name);
    if (bc_int (self, path, 0, 0, 3600000, &board->call_timeout_ms))
        return -1;
    snprintf (path, sizeof path, "drivers/%s/generate-timeout-ms", board->name);
    if (bc_int (self, path, 300000, 1, 3600000, &board->generate_timeout_ms))
        return -1;
    snprintf (path, sizeof path, "drivers/%s/probe-min-ms", board->name);
    if (bc_int (self, path, 100, 1, 3600000, &board->probe_min_ms))
        return -1;
    snprintf (path, sizeof path, "drivers/%s/probe-max-ms", board->name);
    if (bc_int (self, path, 30000, 1, 3600000, &board->probe_max_ms))
        return -1;
    if (board->probe_max_ms < board->probe_min_ms)
        return bc_fail (self, path, "must be at least probe-min-ms (%d)", board->probe_min_ms);
    return 0;
}

/*  One "drivers/<name>" section.  */
static int
s_board (bc_loader_t *self, zconfig_t *section, broker_board_conf_t *board)
{
    char path [256];
    board->name = strdup (zconfig_name (section));
    board->config = section;
    const char *type = zconfig_get (section, "type", NULL);
    snprintf (path, sizeof path, "drivers/%s/type", board->name);
    if (!s_type_ok (type))
        return bc_fail (self, path, "required: a driver name such as pkcs11 or sim");
    board->type = strdup (type);
    const char *tenant = zconfig_get (section, "tenant", NULL);
    board->tenant = tenant && *tenant ? strdup (tenant) : NULL;
    snprintf (path, sizeof path, "drivers/%s/threads", board->name);
    if (bc_int (self, path, 1, 1, BROKER_MAX_THREADS, &board->threads))
        return -1;
    snprintf (path, sizeof path, "drivers/%s/host", board->name);
    if (bc_bool (self, path, streq (type, "openssl") || streq (type, "gmp"), &board->host))
        return -1;
    return s_board_health (self, board);
}

/*  The "drivers" section: 1..64 boards.  */
int
bc_boards (bc_loader_t *self)
{
    broker_config_t *config = self->config;
    zconfig_t *section = zconfig_locate (config->root, "drivers");
    size_t count = 0;
    for (zconfig_t *d = section ? zconfig_child (section) : NULL; d; d = zconfig_next (d))
        count++;
    if (count == 0 || count > BROKER_MAX_BOARDS)
        return bc_fail (self, "drivers", "must name 1..%d boards (got %zu)", BROKER_MAX_BOARDS, count);
    config->boards = calloc (count, sizeof (broker_board_conf_t));
    if (!config->boards)
        return bc_fail (self, "drivers", "out of memory");
    for (zconfig_t *d = zconfig_child (section); d; d = zconfig_next (d))
        if (s_board (self, d, &config->boards [config->n_boards++]))
            return -1;
    return 0;
}

const broker_board_conf_t *
broker_config_board (const broker_config_t *self, const char *name)
{
    for (size_t i = 0; name && i < self->n_boards; i++)
        if (streq (self->boards [i].name, name))
            return &self->boards [i];
    return NULL;
}
