/*  log.h — stderr logging of the PKCS#11 module, prefix "cryptoserver-pkcs11: ".
 *
 *  Levels follow the client config key client/log-level; the environment
 *  variable CRYPTOSERVER_DEBUG=1 forces debug.  PINs, tickets and key material
 *  are never passed to these functions.
 */
#ifndef CS_MODULE_LOG_H_INCLUDED
#define CS_MODULE_LOG_H_INCLUDED

typedef enum {
    CS_LOG_ERROR = 0,
    CS_LOG_WARNING = 1,
    CS_LOG_INFO = 2,
    CS_LOG_DEBUG = 3
} cs_log_level_t;

/*  Sets the threshold: messages above `level` are dropped.  CRYPTOSERVER_DEBUG=1
 *  in the environment overrides it with CS_LOG_DEBUG.  */
void cs_log_set_level (cs_log_level_t level);

/*  Parses "error", "warning", "info" or "debug".  Returns the level, or -1 for
 *  any other text (including NULL).  */
int cs_log_level_parse (const char *name);

/*  Writes one line "cryptoserver-pkcs11: MESSAGE\n" to stderr when `level` is
 *  at or below the threshold.  printf-style.  Thread-safe (one fprintf).  */
void cs_log (cs_log_level_t level, const char *format, ...)
    __attribute__ ((format (printf, 2, 3)));

#define cs_log_error(...)   cs_log (CS_LOG_ERROR, __VA_ARGS__)
#define cs_log_warning(...) cs_log (CS_LOG_WARNING, __VA_ARGS__)
#define cs_log_info(...)    cs_log (CS_LOG_INFO, __VA_ARGS__)
#define cs_log_debug(...)   cs_log (CS_LOG_DEBUG, __VA_ARGS__)

/*  Logs a failed precondition of `func`; aborts only when the environment has
 *  CRYPTOSERVER_PRECONDITION_ABORT=1 (for tests).  Never called directly.  */
void cs_log_precondition (const char *func, const char *expr);

/*  p11-kit style argument check: logs and returns `val` when `expr` is false.  */
#define return_val_if_fail(expr, val) \
    do { if (!(expr)) { cs_log_precondition (__func__, #expr); return (val); } } while (0)

#endif
