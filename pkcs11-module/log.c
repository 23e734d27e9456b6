/*  log.c — stderr logging for the PKCS#11 module (see log.h).  */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"

static volatile int s_level = CS_LOG_WARNING;

static int
s_env_debug (void)
{
    const char *debug = getenv ("CRYPTOSERVER_DEBUG");
    return debug && *debug && strcmp (debug, "0") != 0;
}

void
cs_log_set_level (cs_log_level_t level)
{
    s_level = s_env_debug () ? CS_LOG_DEBUG : (int) level;
}

int
cs_log_level_parse (const char *name)
{
    static const char *names [] = { "error", "warning", "info", "debug" };
    for (int i = 0; name && i < 4; i++)
        if (strcmp (name, names [i]) == 0)
            return i;
    return -1;
}

void
cs_log (cs_log_level_t level, const char *format, ...)
{
    char line [1024];
    va_list args;
    if ((int) level > s_level && !s_env_debug ())
        return;
    va_start (args, format);
    vsnprintf (line, sizeof line, format, args);
    va_end (args);
    fprintf (stderr, "cryptoserver-pkcs11: %s\n", line);
}

void
cs_log_precondition (const char *func, const char *expr)
{
    const char *abort_env = getenv ("CRYPTOSERVER_PRECONDITION_ABORT");
    cs_log (CS_LOG_WARNING, "%s: precondition failed: %s", func, expr);
    if (abort_env && strcmp (abort_env, "1") == 0)
        abort ();
}
