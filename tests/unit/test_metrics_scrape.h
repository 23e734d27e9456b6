/*  test_metrics_scrape.h — scraping the broker's metrics endpoint in unit
 *  tests: a plain HTTP/1.0 GET over loopback and the value of one sample
 *  line of the Prometheus text format.  */
#ifndef TEST_METRICS_SCRAPE_H_INCLUDED
#define TEST_METRICS_SCRAPE_H_INCLUDED

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

/*  The port of "http://127.0.0.1:PORT/...".  */
static inline unsigned
tm_url_port (const char *url)
{
    const char *colon = strrchr (url, ':');
    ck_assert_ptr_nonnull (colon);
    return (unsigned) atoi (colon + 1);
}

/*  Sends "METHOD PATH HTTP/1.0" to 127.0.0.1:port, with one more header
 *  line (without its CRLF; NULL: none); returns the whole response (caller
 *  frees) and its status code in *status_p.  */
static inline char *
tm_http_header (unsigned port, const char *method, const char *path, const char *header, int *status_p)
{
    int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) port) };
    struct timeval timeout = { 10, 0 };
    addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    ck_assert_int_ge (fd, 0);
    setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ck_assert_int_eq (connect (fd, (struct sockaddr *) &addr, sizeof addr), 0);
    char request [512];
    int len = snprintf (request, sizeof request, "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\n%s%s\r\n",
                        method, path, header ? header : "", header ? "\r\n" : "");
    ck_assert_int_eq (send (fd, request, (size_t) len, MSG_NOSIGNAL), len);
    size_t size = 0, room = 65536;
    char *response = malloc (room);
    ck_assert_ptr_nonnull (response);
    for (ssize_t got; (got = recv (fd, response + size, room - size - 1, 0)) > 0; ) {
        size += (size_t) got;
        if (room - size < 4096)
            ck_assert_ptr_nonnull (response = realloc (response, room *= 2));
    }
    close (fd);
    response [size] = 0;
    ck_assert_int_eq (sscanf (response, "HTTP/1.%*d %d", status_p), 1);
    return response;
}

/*  tm_http without an extra header.  */
static inline char *
tm_http (unsigned port, const char *method, const char *path, int *status_p)
{
    return tm_http_header (port, method, path, NULL, status_p);
}

/*  The body of a response (after the blank line), or "".  */
static inline const char *
tm_body (const char *response)
{
    const char *end = strstr (response, "\r\n\r\n");
    return end ? end + 4 : "";
}

/*  The value of the sample line that starts with `series` (the metric
 *  name with its labels, exactly as rendered); -1 when there is none.  */
static inline double
tm_sample (const char *text, const char *series)
{
    size_t len = strlen (series);
    for (const char *line = text; line && *line; line = strchr (line, '\n') ? strchr (line, '\n') + 1 : NULL)
        if (strncmp (line, series, len) == 0 && line [len] == ' ')
            return strtod (line + len + 1, NULL);
    return -1;
}

#endif
