/*  cs_admin_util.c — files, paths and ZPL helpers for cryptoserver-admin,
 *  and the `config get|set` verb that scripts use instead of editing ZPL
 *  with sed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cs_admin.h"

void
cs_admin_error (const char *format, ...)
{
    va_list args;
    va_start (args, format);
    fputs ("cryptoserver-admin: ", stderr);
    vfprintf (stderr, format, args);
    fputc ('\n', stderr);
    va_end (args);
}

bool
cs_admin_name_ok (const char *name)
{
    size_t len = name ? strlen (name) : 0;
    if (len == 0 || len > 64 || name [0] == '.' || name [0] == '-')
        return false;
    return strspn (name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                         "0123456789_.-") == len;
}

char *
cs_admin_path (const char *dir, const char *name)
{
    char *path = zsys_sprintf ("%s/%s", dir, name);
    assert (path);
    return path;
}

bool
cs_admin_is_dir (const char *dir)
{
    struct stat st;
    return stat (dir, &st) == 0 && S_ISDIR (st.st_mode);
}

zconfig_t *
cs_admin_conf_load (const char *dir)
{
    char *path = cs_admin_path (dir, "broker.conf");
    zconfig_t *config = NULL;
    if (access (path, R_OK) != 0)
        cs_admin_error ("%s: %s (is %s a deployment made by 'cryptoserver-admin init'?)",
                        path, strerror (errno), dir);
    else
    if (!(config = zconfig_load (path)))
        cs_admin_error ("%s: not a valid ZPL config file", path);
    zstr_free (&path);
    return config;
}

//  Section nodes (with children) come back from zconfig_load with the value
//  "" and would then print as `name = ""`; give them no value again so the
//  saved file looks like the one `init` wrote.  Top-level nodes are sections.
static void
s_normalise (zconfig_t *node, int depth)
{
    for (; node; node = zconfig_next (node)) {
        const char *value = zconfig_value (node);
        bool section = zconfig_child (node) || depth == 0;
        if (section && value && *value == 0)
            zconfig_set_value (node, NULL);
        s_normalise (zconfig_child (node), depth + 1);
    }
}

int
cs_admin_conf_save (zconfig_t *config, const char *path, mode_t mode)
{
    s_normalise (zconfig_child (config), 0);
    char *text = zconfig_str_save (config);
    if (!text) {
        cs_admin_error ("%s: cannot serialise the config", path);
        return -1;
    }
    char *tmp = zsys_sprintf ("%s.tmp", path);
    int rc = cs_admin_file_write (tmp, text, strlen (text), mode);
    if (rc == 0 && rename (tmp, path) != 0) {
        cs_admin_error ("%s: %s", path, strerror (errno));
        unlink (tmp);
        rc = -1;
    }
    zstr_free (&tmp);
    zstr_free (&text);
    return rc;
}

int
cs_admin_file_write (const char *path, const void *data, size_t len, mode_t mode)
{
    unlink (path);      //  a fresh inode gets exactly `mode`
    int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) {
        cs_admin_error ("%s: %s", path, strerror (errno));
        return -1;
    }
    const char *bytes = data;
    size_t done = 0;
    while (done < len) {
        ssize_t n = write (fd, bytes + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t) n;
    }
    int rc = (done == len && fchmod (fd, mode) == 0) ? 0 : -1;
    if (close (fd) != 0)
        rc = -1;
    if (rc != 0)
        cs_admin_error ("%s: write failed: %s", path, strerror (errno));
    return rc;
}

int
cs_admin_file_copy (const char *from, const char *to, mode_t mode)
{
    zchunk_t *chunk = NULL;
    FILE *file = fopen (from, "rb");
    if (file) {
        chunk = zchunk_read (file, 1024 * 1024);
        fclose (file);
    }
    if (!chunk) {
        cs_admin_error ("%s: cannot read: %s", from, strerror (errno));
        return -1;
    }
    int rc = cs_admin_file_write (to, zchunk_data (chunk), zchunk_size (chunk), mode);
    zchunk_destroy (&chunk);
    return rc;
}

char *
cs_admin_path_for_config (const char *dir, const char *path)
{
    char file_real [PATH_MAX], dir_real [PATH_MAX];
    if (!realpath (path, file_real)) {
        cs_admin_error ("%s: %s", path, strerror (errno));
        return NULL;
    }
    if (realpath (dir, dir_real)) {
        size_t len = strlen (dir_real);
        if (strncmp (file_real, dir_real, len) == 0 && file_real [len] == '/')
            return strdup (file_real + len + 1);
    }
    return strdup (file_real);
}

static int
s_config_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-admin config get FILE PATH\n"
        "       cryptoserver-admin config set FILE PATH VALUE\n"
        "\n"
        "Reads or changes one value of a ZPL config file; PATH names the item,\n"
        "e.g. broker/endpoint or client/endpoints.  'get' prints the value and\n"
        "fails (1) when the item is absent; 'set' creates missing items.\n");
    return status;
}

int
cs_admin_config (int argc, char **argv)
{
    if (argc >= 2 && (streq (argv [1], "--help") || streq (argv [1], "-h")))
        return s_config_usage (stdout, CS_ADMIN_OK);
    bool get = argc == 4 && streq (argv [1], "get");
    bool set = argc == 5 && streq (argv [1], "set");
    if (!get && !set)
        return s_config_usage (stderr, CS_ADMIN_USAGE);
    const char *file = argv [2], *path = argv [3];
    zconfig_t *config = zconfig_load (file);
    if (!config) {
        cs_admin_error ("%s: cannot load (missing or not valid ZPL)", file);
        return CS_ADMIN_FAIL;
    }
    int status = CS_ADMIN_OK;
    if (get) {
        zconfig_t *item = zconfig_locate (config, path);
        if (item)
            printf ("%s\n", zconfig_value (item) ? zconfig_value (item) : "");
        else {
            cs_admin_error ("%s: no item %s", file, path);
            status = CS_ADMIN_FAIL;
        }
    }
    else {
        struct stat st;
        mode_t mode = stat (file, &st) == 0 ? (st.st_mode & 07777) : 0644;
        zconfig_put (config, path, argv [4]);
        if (cs_admin_conf_save (config, file, mode) != 0)
            status = CS_ADMIN_FAIL;
    }
    zconfig_destroy (&config);
    return status;
}
