/*  metrics_http.h — the broker's metrics endpoint (broker/metrics,
 *  cryptoserver-broker.conf(5)): libmicrohttpd serves metrics_render's text
 *  on GET (and HEAD) of one path, from a thread of its own, so the frontend
 *  reactor never serves HTTP.  It binds only the address of its URL; an
 *  address that is not loopback needs broker/metrics-public = true (the
 *  config refuses it otherwise: metrics_http_url_parse tells).
 *
 *  Client and tenant names (cryptoserver_inflight_jobs per client) are
 *  shown only to a scraper that sends "Authorization: Bearer TOKEN" (RFC
 *  6750 section 2.1; Prometheus' scrape_config authorization /
 *  bearer_token_file) with the token of broker/metrics-token-file; any
 *  other scraper gets the same metrics with those lines summed into one
 *  (client="(all)", tenant="(all)"), and a wrong token gets 401.
 */
#ifndef METRICS_HTTP_H_INCLUDED
#define METRICS_HTTP_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include "metrics.h"

#define METRICS_HTTP_DEFAULT_PORT 9464      /* Prometheus' registry of exporter ports */

/*  A parsed metrics URL "http://HOST[:PORT][/PATH]".  */
typedef struct {
    struct sockaddr_storage addr;   /* the address and port to bind; port 0: any free one */
    socklen_t addr_len;
    bool loopback;                  /* 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104 */
    char path [256];                /* "/metrics" when the URL names none */
} metrics_http_url_t;

/*  Parses a metrics URL: scheme http only; HOST an IPv4 address, an IPv6
 *  address in brackets, or "localhost" (127.0.0.1) — no name lookups, the
 *  endpoint binds exactly that address; PORT 0..65535, 0 or "*" for any
 *  free port (default 9464); PATH printable, no spaces, '?' or '#'
 *  (default /metrics).  Returns 0, or -1 with the reason in why (why_size
 *  bytes).  */
int metrics_http_url_parse (const char *url, metrics_http_url_t *out, char *why, size_t why_size);

typedef struct _metrics_http_t metrics_http_t;

/*  Starts serving `metrics` at `url` (metrics_http_url_parse) from a thread
 *  of libmicrohttpd (at most 16 connections, 10 s idle timeout).  `token`
 *  (NUL-terminated, copied; NULL: none) is the bearer token that shows
 *  client and tenant names.  Refuses (NULL, logged) a non-loopback address
 *  unless `public`, and logs and returns NULL when the address cannot be
 *  bound.  `metrics` must outlive the server.  Caller destroys.  */
metrics_http_t *metrics_http_new (metrics_t *metrics, const char *url, bool public, const char *token);

/*  The URL it serves, with the bound port (a "*" or 0 port resolved), e.g.
 *  "http://127.0.0.1:40211/metrics".  Owned by self.  */
const char *metrics_http_url (metrics_http_t *self);

/*  Stops the server thread (waits for a scrape in progress); NULL-safe;
 *  nulls *self_p.  */
void metrics_http_destroy (metrics_http_t **self_p);

#endif
