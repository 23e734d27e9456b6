/*  cs_util.c — hex, paths, clocks, small secret files.  */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <openssl/crypto.h>
#include "cs_util.h"

void
cs_hex_encode (const void *data, size_t len, char *out)
{
    static const char digits [] = "0123456789abcdef";
    const unsigned char *bytes = data;
    for (size_t i = 0; i < len; i++) {
        out [2 * i] = digits [bytes [i] >> 4];
        out [2 * i + 1] = digits [bytes [i] & 15];
    }
    out [2 * len] = 0;
}

static int
s_hex_digit (char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

long
cs_hex_decode (const char *hex, void *out, size_t max)
{
    size_t len = strlen (hex);
    unsigned char *bytes = out;
    if (len % 2 || len / 2 > max)
        return -1;
    for (size_t i = 0; i < len / 2; i++) {
        int high = s_hex_digit (hex [2 * i]), low = s_hex_digit (hex [2 * i + 1]);
        if (high < 0 || low < 0)
            return -1;
        bytes [i] = (unsigned char) (high << 4 | low);
    }
    return (long) (len / 2);
}

char *
cs_path_resolve (const char *base, const char *path)
{
    char *out = NULL;
    if (!path)
        return NULL;
    if (path [0] == '/' || !base || !*base)
        return strdup (path);
    if (asprintf (&out, "%s/%s", base, path) < 0)
        return NULL;
    return out;
}

char *
cs_path_dirname (const char *file)
{
    const char *slash = file ? strrchr (file, '/') : NULL;
    if (!slash)
        return strdup (".");
    if (slash == file)
        return strdup ("/");
    return strndup (file, (size_t) (slash - file));
}

int64_t
cs_clock_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int
cs_file_check_private (const char *path, char *why, size_t why_size)
{
    struct stat st;
    if (stat (path, &st) != 0) {
        if (why_size)
            snprintf (why, why_size, "cannot read %s: %s", path, strerror (errno));
        return -1;
    }
    if (st.st_mode & 077) {
        if (why_size)
            snprintf (why, why_size, "%s can be read by group or others (mode %04o): chmod 600 %s",
                      path, (unsigned) (st.st_mode & 07777), path);
        return -1;
    }
    return 0;
}

char *
cs_file_read_secret (const char *path, size_t max)
{
    struct stat st;
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    if (fstat (fd, &st) != 0 || (st.st_mode & 077)) {
        close (fd);
        errno = EACCES;
        return NULL;
    }
    FILE *file = fdopen (fd, "r");
    if (!file) {
        close (fd);
        return NULL;
    }
    char *buf = calloc (1, max + 1);
    size_t len = buf ? fread (buf, 1, max + 1, file) : 0;
    fclose (file);
    if (!buf || len > max) {
        if (buf)
            OPENSSL_cleanse (buf, max + 1);
        free (buf);
        return NULL;
    }
    while (len > 0 && (buf [len - 1] == '\n' || buf [len - 1] == '\r' || buf [len - 1] == ' '))
        buf [--len] = 0;
    return buf;
}

int
cs_file_read_hex (const char *path, void *out, size_t len)
{
    /*  A generous cap, so that an over-long file reads as malformed (-2)
        rather than unreadable.  */
    char *hex = cs_file_read_secret (path, 2 * len + 4096);
    if (!hex)
        return -1;
    int rc = strlen (hex) == 2 * len && cs_hex_decode (hex, out, len) == (long) len ? 0 : -2;
    OPENSSL_cleanse (hex, strlen (hex));
    free (hex);
    if (rc)
        OPENSSL_cleanse (out, len);
    return rc;
}
