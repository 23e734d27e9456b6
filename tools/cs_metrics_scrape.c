/*  cs_metrics_scrape.c — a broker's metrics endpoint, read by
 *  cryptoserver-bench --metrics and cryptoserver-admin status
 *  (cs_metrics_scrape.h).  No HTTP library: the tools stay small programs.  */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include "cs_metrics_scrape.h"

#define S_TIMEOUT_S 10                  /* connect, send and each receive */
#define S_MAX_RESPONSE (16 * 1024 * 1024)

/*  Splits "http://HOST[:PORT][/PATH]" into host (brackets removed), port
 *  (default 9464) and path (default /metrics).  Returns 0 or -1.  */
static int
s_url_split (const char *url, char host [256], char port [8], char path [1024])
{
    if (strncmp (url, "http://", 7) != 0)
        return -1;
    const char *start = url + 7, *end;
    if (*start == '[') {
        end = strchr (++start, ']');
        if (!end)
            return -1;
    }
    else
        end = start + strcspn (start, ":/");
    size_t len = (size_t) (end - start);
    if (len == 0 || len >= 256)
        return -1;
    memcpy (host, start, len);
    host [len] = 0;
    const char *rest = *end == ']' ? end + 1 : end;
    const char *slash = rest + strcspn (rest, "/");
    snprintf (port, 8, "9464");
    if (*rest == ':') {
        len = (size_t) (slash - rest - 1);
        if (len == 0 || len >= 8)
            return -1;
        memcpy (port, rest + 1, len);
        port [len] = 0;
    }
    else
    if (rest != slash)
        return -1;
    snprintf (path, 1024, "%s", *slash ? slash : "/metrics");
    return 0;
}

/*  A connected TCP socket to host:port with timeouts, or -1.  */
static int
s_connect (const char *host, const char *port, char *err, size_t err_size)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *list = NULL;
    int rc = getaddrinfo (host, port, &hints, &list), fd = -1;
    if (rc) {
        snprintf (err, err_size, "%s: %s", host, gai_strerror (rc));
        return -1;
    }
    struct timeval timeout = { S_TIMEOUT_S, 0 };
    for (struct addrinfo *ai = list; ai && fd < 0; ai = ai->ai_next) {
        fd = socket (ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        /*  Linux applies SO_SNDTIMEO to connect () too.  */
        setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
        setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
        if (connect (fd, ai->ai_addr, ai->ai_addrlen)) {
            snprintf (err, err_size, "connect to %s port %s: %s", host, port, strerror (errno));
            close (fd);
            fd = -1;
        }
    }
    freeaddrinfo (list);
    return fd;
}

/*  GETs path; returns the whole response (malloc'd, NUL-terminated) or NULL.  */
static char *
s_get (int fd, const char *host, const char *path, const char *token, char *err, size_t err_size)
{
    char request [1800];
    int len = snprintf (request, sizeof request, "GET %s HTTP/1.0\r\nHost: %s\r\nAccept: text/plain\r\n"
                        "User-Agent: cryptoserver-tools\r\n%s%s%s\r\n", path, host,
                        token ? "Authorization: Bearer " : "", token ? token : "", token ? "\r\n" : "");
    if (len < 0 || (size_t) len >= sizeof request || send (fd, request, (size_t) len, MSG_NOSIGNAL) != len) {
        snprintf (err, err_size, "cannot send the request: %s", strerror (errno));
        return NULL;
    }
    size_t size = 0, room = 65536;
    char *response = malloc (room);
    for (ssize_t got = 1; response && got > 0; ) {
        if (room - size < 4096) {
            char *grown = room < S_MAX_RESPONSE ? realloc (response, room * 2) : NULL;
            if (!grown) {
                snprintf (err, err_size, "response over %d bytes", S_MAX_RESPONSE);
                free (response);
                return NULL;
            }
            response = grown;
            room *= 2;
        }
        got = recv (fd, response + size, room - size - 1, 0);
        if (got < 0) {
            snprintf (err, err_size, "no complete response: %s", strerror (errno));
            free (response);
            return NULL;
        }
        size += (size_t) got;
    }
    if (response)
        response [size] = 0;
    return response;
}

bool
cs_metrics_value (const char *text, const char *series, double *value)
{
    size_t len = strlen (series);
    for (const char *line = text; line && *line; ) {
        if (strncmp (line, series, len) == 0 && line [len] == ' ') {
            char *end = NULL;
            *value = strtod (line + len + 1, &end);
            return end != line + len + 1;
        }
        line = strchr (line, '\n');
        line = line ? line + 1 : NULL;
    }
    return false;
}

bool
cs_metrics_next (const char **cursor, cs_metrics_sample_t *sample)
{
    while (*cursor && **cursor) {
        const char *line = *cursor, *end = strchr (line, '\n');
        size_t len = end ? (size_t) (end - line) : strlen (line);
        *cursor = end ? end + 1 : line + len;
        size_t name_len = strcspn (line, "{ \n");
        if (*line == '#' || name_len == 0 || name_len >= sizeof sample->name || name_len >= len)
            continue;
        const char *rest = line + name_len, *labels = "";
        size_t labels_len = 0;
        if (*rest == '{') {
            const char *close = memchr (rest, '}', len - name_len);
            if (!close || (size_t) (close - rest - 1) >= sizeof sample->labels)
                continue;
            labels = rest + 1;
            labels_len = (size_t) (close - labels);
            rest = close + 1;
        }
        char *number_end = NULL;
        double value = strtod (rest, &number_end);
        if (*rest != ' ' || number_end == rest)
            continue;
        memcpy (sample->name, line, name_len);
        sample->name [name_len] = 0;
        memcpy (sample->labels, labels, labels_len);
        sample->labels [labels_len] = 0;
        sample->value = value;
        return true;
    }
    return false;
}

bool
cs_metrics_label (const char *labels, const char *key, char *out, size_t out_size)
{
    size_t key_len = strlen (key);
    for (const char *p = labels; p && *p; ) {
        bool match = strncmp (p, key, key_len) == 0 && p [key_len] == '=' && p [key_len + 1] == '"';
        const char *q = strchr (p, '"');
        if (!q)
            return false;
        size_t n = 0;
        for (q++; *q && *q != '"'; q++) {
            char c = *q;
            if (c == '\\' && q [1]) {
                q++;
                c = *q == 'n' ? '\n' : *q;
            }
            if (match && n + 1 < out_size)
                out [n++] = c;
        }
        if (match) {
            if (out_size)
                out [n] = 0;
            return true;
        }
        p = *q ? q + 1 : q;
        if (*p == ',')
            p++;
    }
    return false;
}

char *
cs_metrics_fetch (const char *url, const char *token, char *err, size_t err_size)
{
    char host [256], port [8], path [1024];
    if (s_url_split (url, host, port, path)) {
        snprintf (err, err_size, "%s: not http://HOST[:PORT][/PATH] (only http:// is read)", url);
        return NULL;
    }
    int fd = s_connect (host, port, err, err_size);
    if (fd < 0)
        return NULL;
    char *response = s_get (fd, host, path, token, err, err_size);
    close (fd);
    int status = 0;
    char *body = response ? strstr (response, "\r\n\r\n") : NULL;
    if (response && (sscanf (response, "HTTP/1.%*d %d", &status) != 1 || status != 200 || !body)) {
        snprintf (err, err_size, "%s: HTTP status %d", url, status);
        free (response);
        return NULL;
    }
    if (!response)
        return NULL;
    memmove (response, body + 4, strlen (body + 4) + 1);
    return response;
}

int
cs_metrics_read (const char *url, const char *series, double *value, char *err, size_t err_size)
{
    char *body = cs_metrics_fetch (url, NULL, err, err_size);
    int rc = -1;
    if (body && !cs_metrics_value (body, series, value))
        snprintf (err, err_size, "%s: no %s", url, series);
    else
    if (body)
        rc = 0;
    free (body);
    return rc;
}
