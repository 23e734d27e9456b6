/*  broker_config_values.c — the config loader's value readers: integers in
 *  a range, booleans, paths, and the first error (broker_config_int.h).  */
#include <errno.h>
#include <stdarg.h>
#include <czmq.h>
#include "cs_util.h"
#include "broker_config_int.h"

/*  Records the first error as "FILE: PATH: problem".  Returns -1.  */
int
bc_fail (bc_loader_t *self, const char *path, const char *format, ...)
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
int
bc_int (bc_loader_t *self, const char *path, int fallback, int min, int max, int *value_p)
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
        return bc_fail (self, path, "must be %d..%d (got \"%s\")", min, max, text);
    *value_p = (int) value;
    return 0;
}

/*  Reads boolean `path` (true/false/yes/no/1/0) into *value_p.  */
int
bc_bool (bc_loader_t *self, const char *path, bool fallback, bool *value_p)
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
        return bc_fail (self, path, "must be true or false (got \"%s\")", text);
    return 0;
}

/*  Resolves path-valued key `path` against the config dir; NULL if absent.  */
char *
bc_path (bc_loader_t *self, const char *path)
{
    const char *text = zconfig_get (self->config->root, path, NULL);
    return text && *text ? cs_path_resolve (self->config->dir, text) : NULL;
}
