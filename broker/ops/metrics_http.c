/*  metrics_http.c — the metrics endpoint: URL parsing and a libmicrohttpd
 *  server on its own thread.  */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <czmq.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include "metrics_http.h"

#define S_CONNECTIONS 16                /* scrapers at once */
#define S_IDLE_S 10                     /* seconds before an idle connection is closed */
#define S_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct _metrics_http_t {
    metrics_t *metrics;
    struct MHD_Daemon *daemon;
    char path [256];
    char *url;                          /* the bound URL */
    char *token;                        /* bearer token that shows names, or NULL */
};

/*  Records a parse failure: -1.  */
static int
s_bad (char *why, size_t why_size, const char *format, const char *text)
{
    snprintf (why, why_size, format, text);
    return -1;
}

/*  HOST of the URL (without brackets) into addr; sets loopback.  */
static int
s_host (const char *host, metrics_http_url_t *out)
{
    struct sockaddr_in *v4 = (struct sockaddr_in *) &out->addr;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *) &out->addr;
    memset (&out->addr, 0, sizeof out->addr);
    if (strcmp (host, "localhost") == 0)
        host = "127.0.0.1";
    if (inet_pton (AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        out->addr_len = sizeof *v4;
        out->loopback = (ntohl (v4->sin_addr.s_addr) >> 24) == 127;
        return 0;
    }
    if (inet_pton (AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        out->addr_len = sizeof *v6;
        out->loopback = IN6_IS_ADDR_LOOPBACK (&v6->sin6_addr)
                     || (IN6_IS_ADDR_V4MAPPED (&v6->sin6_addr) && v6->sin6_addr.s6_addr [12] == 127);
        return 0;
    }
    return -1;
}

/*  ":PORT" (or nothing: the default) into addr.  */
static int
s_port (const char *text, size_t len, metrics_http_url_t *out)
{
    long port = METRICS_HTTP_DEFAULT_PORT;
    if (len == 1 && text [0] == '*')
        port = 0;
    else
    if (len > 0) {
        port = 0;
        for (size_t i = 0; i < len; i++) {
            if (text [i] < '0' || text [i] > '9' || i >= 5)
                return -1;
            port = port * 10 + (text [i] - '0');
        }
        if (port > 65535)
            return -1;
    }
    if (out->addr.ss_family == AF_INET)
        ((struct sockaddr_in *) &out->addr)->sin_port = htons ((uint16_t) port);
    else
        ((struct sockaddr_in6 *) &out->addr)->sin6_port = htons ((uint16_t) port);
    return 0;
}

/*  The path: printable ASCII, no spaces, '?' or '#', under 256 bytes.  */
static int
s_path (const char *path, metrics_http_url_t *out)
{
    if (!*path)
        path = "/metrics";
    if (strlen (path) >= sizeof out->path)
        return -1;
    for (const char *c = path; *c; c++)
        if (*c <= ' ' || *c > '~' || *c == '?' || *c == '#')
            return -1;
    snprintf (out->path, sizeof out->path, "%s", path);
    return 0;
}

int
metrics_http_url_parse (const char *url, metrics_http_url_t *out, char *why, size_t why_size)
{
    char host [128];
    memset (out, 0, sizeof *out);
    if (strncmp (url, "http://", 7) != 0)
        return s_bad (why, why_size, "must be http://HOST:PORT/PATH (got \"%s\"; https is not served: "
                      "put a TLS proxy in front)", url);
    const char *start = url + 7, *end = NULL, *rest = NULL;
    if (*start == '[') {                        /* [IPv6] */
        start++;
        end = strchr (start, ']');
        rest = end ? end + 1 : NULL;
    }
    else {
        end = start + strcspn (start, ":/");
        rest = end;
    }
    if (!end || end == start || (size_t) (end - start) >= sizeof host)
        return s_bad (why, why_size, "no host in \"%s\"", url);
    memcpy (host, start, (size_t) (end - start));
    host [end - start] = 0;
    if (s_host (host, out))
        return s_bad (why, why_size, "host \"%s\" must be an IP address or localhost (the endpoint binds "
                      "exactly that address)", host);
    const char *path = rest + strcspn (rest, "/");
    if (*rest && *rest != ':' && *rest != '/')
        return s_bad (why, why_size, "cannot parse \"%s\"", url);
    if ((*rest == ':' && path == rest + 1)
    ||  s_port (*rest == ':' ? rest + 1 : rest, *rest == ':' ? (size_t) (path - rest - 1) : 0, out))
        return s_bad (why, why_size, "bad port in \"%s\" (0..65535, or * for any free port)", url);
    if (s_path (path, out))
        return s_bad (why, why_size, "bad path in \"%s\" (printable, no spaces, '?' or '#')", url);
    return 0;
}

/* ------------------------------------------------------------------ */
/*  The server                                                         */

/*  libmicrohttpd's own messages (a client that went away, ...): info lines,
 *  so that a scraper cannot fill the log with warnings.  */
static void
s_log (void *cls, const char *format, va_list args)
{
    char line [512];
    vsnprintf (line, sizeof line, format, args);
    line [strcspn (line, "\r\n")] = 0;
    zsys_info ("metrics: %s", line);
}

/*  Queues a small static text response with `status`.  */
static enum MHD_Result
s_reply_text (struct MHD_Connection *connection, unsigned status, const char *text, const char *allow)
{
    struct MHD_Response *response = MHD_create_response_from_buffer (strlen (text), (void *) text,
                                                                     MHD_RESPMEM_PERSISTENT);
    if (!response)
        return MHD_NO;
    MHD_add_response_header (response, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    if (allow)
        MHD_add_response_header (response, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result rc = MHD_queue_response (connection, status, response);
    MHD_destroy_response (response);
    return rc;
}

/*  The view a scraper may see: names with the right bearer token, the
 *  aggregate without an Authorization header.  Returns -1 for a header
 *  that is not the right token (compared in constant time).  */
static int
s_authorization (metrics_http_t *self, struct MHD_Connection *connection, metrics_view_t *view)
{
    const char *header = MHD_lookup_connection_value (connection, MHD_HEADER_KIND,
                                                      MHD_HTTP_HEADER_AUTHORIZATION);
    if (!header)
        return 0;
    static const char scheme [] = "Bearer ";
    if (!self->token || strncasecmp (header, scheme, sizeof scheme - 1) != 0)
        return -1;
    const char *given = header + sizeof scheme - 1;
    size_t len = strlen (self->token);
    if (strlen (given) != len || CRYPTO_memcmp (given, self->token, len) != 0)
        return -1;
    *view = METRICS_VIEW_NAMES;
    return 0;
}

/*  One request: GET or HEAD of the path gets the metrics; any other path
 *  404, any other method 405.  Answered at its first call: nothing here
 *  reads a request body.  */
static enum MHD_Result
s_handle (void *cls, struct MHD_Connection *connection, const char *url, const char *method,
          const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
    metrics_http_t *self = cls;
    if (strcmp (method, MHD_HTTP_METHOD_GET) != 0 && strcmp (method, MHD_HTTP_METHOD_HEAD) != 0)
        return s_reply_text (connection, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n", "GET, HEAD");
    if (strcmp (url, self->path) != 0)
        return s_reply_text (connection, MHD_HTTP_NOT_FOUND, "not found\n", NULL);
    metrics_view_t view = METRICS_VIEW_AGGREGATE;
    if (s_authorization (self, connection, &view))
        return s_reply_text (connection, MHD_HTTP_UNAUTHORIZED, "wrong bearer token\n", NULL);
    size_t len = 0;
    char *text = metrics_render (self->metrics, view, &len);
    if (!text)
        return s_reply_text (connection, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n", NULL);
    struct MHD_Response *response = MHD_create_response_from_buffer (len, text, MHD_RESPMEM_MUST_FREE);
    if (!response) {
        free (text);
        return MHD_NO;
    }
    MHD_add_response_header (response, MHD_HTTP_HEADER_CONTENT_TYPE, S_CONTENT_TYPE);
    enum MHD_Result rc = MHD_queue_response (connection, MHD_HTTP_OK, response);
    MHD_destroy_response (response);
    return rc;
}

/*  The URL with the port the listening socket got.  */
static int
s_bound_url (metrics_http_t *self)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info (self->daemon, MHD_DAEMON_INFO_LISTEN_FD);
    struct sockaddr_storage bound;
    socklen_t len = sizeof bound;
    char host [INET6_ADDRSTRLEN];
    if (!info || getsockname (info->listen_fd, (struct sockaddr *) &bound, &len))
        return -1;
    bool v6 = bound.ss_family == AF_INET6;
    const void *addr = v6 ? (const void *) &((struct sockaddr_in6 *) &bound)->sin6_addr
                          : (const void *) &((struct sockaddr_in *) &bound)->sin_addr;
    unsigned port = ntohs (v6 ? ((struct sockaddr_in6 *) &bound)->sin6_port
                              : ((struct sockaddr_in *) &bound)->sin_port);
    if (!inet_ntop (bound.ss_family, addr, host, sizeof host))
        return -1;
    return asprintf (&self->url, v6 ? "http://[%s]:%u%s" : "http://%s:%u%s", host, port, self->path) < 0 ? -1 : 0;
}

metrics_http_t *
metrics_http_new (metrics_t *metrics, const char *url, bool public, const char *token)
{
    metrics_http_url_t parsed;
    char why [512];
    if (metrics_http_url_parse (url, &parsed, why, sizeof why)) {
        zsys_error ("broker/metrics: %s", why);
        return NULL;
    }
    if (!parsed.loopback && !public) {
        zsys_error ("broker/metrics: %s is not a loopback address (set broker/metrics-public = true "
                    "to serve the metrics beyond this host)", url);
        return NULL;
    }
    metrics_http_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->metrics = metrics;
    if (token && !(self->token = strdup (token))) {
        free (self);
        return NULL;
    }
    snprintf (self->path, sizeof self->path, "%s", parsed.path);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG
                   | (parsed.addr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    self->daemon = MHD_start_daemon (flags, 0, NULL, NULL, s_handle, self,
                                     MHD_OPTION_EXTERNAL_LOGGER, s_log, self,
                                     MHD_OPTION_SOCK_ADDR, (struct sockaddr *) &parsed.addr,
                                     MHD_OPTION_CONNECTION_LIMIT, (unsigned int) S_CONNECTIONS,
                                     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int) S_IDLE_S,
                                     MHD_OPTION_END);
    if (!self->daemon || s_bound_url (self)) {
        if (self->daemon)
            zsys_error ("broker/metrics: cannot serve %s: no bound address", url);
        else
            zsys_error ("broker/metrics: cannot serve %s: its port is in use or not allowed "
                        "(another broker or demo? set broker/metrics to another port, "
                        "port 0 for any free one, or empty for none)", url);
        metrics_http_destroy (&self);
        return NULL;
    }
    zsys_info ("metrics: serving %s", self->url);
    return self;
}

const char *
metrics_http_url (metrics_http_t *self)
{
    return self->url;
}

void
metrics_http_destroy (metrics_http_t **self_p)
{
    metrics_http_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    if (self->daemon)
        MHD_stop_daemon (self->daemon);
    free (self->url);
    if (self->token) {
        OPENSSL_cleanse (self->token, strlen (self->token));
        free (self->token);
    }
    free (self);
    *self_p = NULL;
}
