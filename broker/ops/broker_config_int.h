/*  broker_config_int.h — what the parts of the config loader share: the
 *  loader's state and the value readers (broker_config_values.c), and the
 *  "drivers" section (broker_config_boards.c), which broker_config.c calls
 *  in its order of sections.  Each reader records the first error as
 *  "FILE: PATH: problem" (cryptoserver-broker.conf(5) names every path).
 */
#ifndef BROKER_CONFIG_INT_H_INCLUDED
#define BROKER_CONFIG_INT_H_INCLUDED

#include <stdbool.h>
#include "broker_config.h"

/*  Loader state: the config under construction and the first error
 *  (malloc'd, handed to broker_config_load's caller).  */
typedef struct {
    broker_config_t *config;
    char *error;
} bc_loader_t;

/*  Records the first error as "FILE: PATH: problem" (path may be NULL).
 *  Returns -1.  */
int bc_fail (bc_loader_t *self, const char *path, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

/*  Reads integer `path` into *value_p (fallback when absent) within
 *  [min, max].  0, or -1 after bc_fail.  */
int bc_int (bc_loader_t *self, const char *path, int fallback, int min, int max, int *value_p);

/*  Reads boolean `path` (true/false/yes/no/1/0) into *value_p (fallback
 *  when absent).  0, or -1 after bc_fail.  */
int bc_bool (bc_loader_t *self, const char *path, bool fallback, bool *value_p);

/*  Resolves path-valued key `path` against the config's directory:
 *  malloc'd, NULL when absent or empty.  */
char *bc_path (bc_loader_t *self, const char *path);

/*  The "drivers" section: 1..BROKER_MAX_BOARDS boards, each with its type,
 *  tenant, threads, host flag and health settings.  0, or -1 after bc_fail.  */
int bc_boards (bc_loader_t *self);

#endif
