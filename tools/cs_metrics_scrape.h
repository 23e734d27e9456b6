/*  cs_metrics_scrape.h — reads a broker's metrics endpoint
 *  (cryptoserver-broker(8), METRICS; Prometheus text format 0.0.4) for the
 *  tools: cryptoserver-bench --metrics (one number) and cryptoserver-admin
 *  status (boards, queues, clients).  An HTTP/1.0 GET over one TCP
 *  connection, http:// only, bounded in time and size; no HTTP library.
 */
#ifndef CS_METRICS_SCRAPE_H_INCLUDED
#define CS_METRICS_SCRAPE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

/*  One sample line: "NAME{LABELS} VALUE".  */
typedef struct {
    char name [128];                /* the metric name, e.g. cryptoserver_jobs_total */
    char labels [1024];             /* what is between the braces, "" when none */
    double value;
} cs_metrics_sample_t;

/*  Fetches `url` ("http://HOST[:PORT][/PATH]", port 9464 and path /metrics
 *  by default; no https) with one HTTP/1.0 GET: 10 s time-outs for
 *  connect, send and each receive, at most 16 MiB.  `token` (NULL: none)
 *  goes as "Authorization: Bearer TOKEN" (RFC 6750): the broker then shows
 *  client and tenant names (broker/metrics-token-file).  Returns the body
 *  of a 200 response (malloc'd, NUL-terminated; caller frees), or NULL with
 *  a one-line reason in err (err_size bytes): not an http:// URL, name not
 *  resolved, connection refused or timed out, HTTP status not 200 (401: a
 *  wrong token).  */
char *cs_metrics_fetch (const char *url, const char *token, char *err, size_t err_size);

/*  The value of the sample whose "NAME{LABELS}" is exactly `series` (e.g.
 *  "process_cpu_seconds_total", or "cryptoserver_queue_depth{queue=\"client\"}")
 *  in a Prometheus text body; false when the text has no such line.  */
bool cs_metrics_value (const char *text, const char *series, double *value);

/*  The next sample line at or after *cursor (start with the body); comment
 *  and blank lines, and lines too long for *sample, are skipped.  Returns
 *  false at the end.  Advances *cursor past the line.  */
bool cs_metrics_next (const char **cursor, cs_metrics_sample_t *sample);

/*  The value of label `key` in a sample's labels (escapes \\ \" \n undone)
 *  into out (out_size bytes, NUL-terminated, truncated); false when the
 *  labels have no such key.  */
bool cs_metrics_label (const char *labels, const char *key, char *out, size_t out_size);

/*  cs_metrics_fetch, then cs_metrics_value of `series` into *value.  Returns
 *  0, or -1 with a reason in err (also "URL: no SERIES").  */
int cs_metrics_read (const char *url, const char *series, double *value, char *err, size_t err_size);

#endif
