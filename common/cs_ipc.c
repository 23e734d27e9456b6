/*  cs_ipc.c — ipc:// socket paths that fit the kernel's limit (cs_ipc.h).  */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <openssl/evp.h>
#include "cs_ipc.h"
#include "cs_util.h"

size_t
cs_ipc_path_max (void)
{
    return sizeof ((struct sockaddr_un *) 0)->sun_path - 1;
}

char *
cs_ipc_private_dir (void)
{
    const char *tmp = getenv ("TMPDIR");
    char *dir = NULL;
    if (!tmp || tmp [0] != '/')
        tmp = "/tmp";
    if (asprintf (&dir, "%s/cryptoserver-%u", tmp, (unsigned) geteuid ()) < 0)
        return NULL;
    return dir;
}

char *
cs_ipc_party_control_default (const char *dir)
{
    char absolute [PATH_MAX], *path = NULL, *endpoint = NULL;
    if (!realpath (dir, absolute))
        return NULL;
    if (asprintf (&path, "%s/party.ipc", absolute) < 0)
        return NULL;
    if (strlen (path) > cs_ipc_path_max ()) {
        unsigned char digest [32];
        char hex [65], *run = cs_ipc_private_dir ();
        free (path);
        path = NULL;
        if (!run || !EVP_Digest (absolute, strlen (absolute), digest, NULL, EVP_sha256 (), NULL)) {
            free (run);
            return NULL;
        }
        cs_hex_encode (digest, 8, hex);
        if (asprintf (&path, "%s/party-%s.ipc", run, hex) < 0)
            path = NULL;
        free (run);
        if (!path)
            return NULL;
    }
    if (asprintf (&endpoint, "ipc://%s", path) < 0)
        endpoint = NULL;
    free (path);
    return endpoint;
}

int
cs_ipc_prepare (const char *path, char *why, size_t why_size)
{
    char *run = cs_ipc_private_dir ();
    if (!run) {
        snprintf (why, why_size, "out of memory");
        return -1;
    }
    size_t len = strlen (run);
    int rc = 0;
    if (strncmp (path, run, len) == 0 && path [len] == '/') {
        struct stat st;
        if (mkdir (run, 0700) && errno != EEXIST) {
            snprintf (why, why_size, "cannot create %s: %s", run, strerror (errno));
            rc = -1;
        }
        else
        if (lstat (run, &st)) {
            snprintf (why, why_size, "cannot read %s: %s", run, strerror (errno));
            rc = -1;
        }
        else
        if (!S_ISDIR (st.st_mode) || st.st_uid != geteuid () || (st.st_mode & 077)) {
            snprintf (why, why_size, "%s must be a directory of this user with mode 700 (it is %s, uid %u, "
                      "mode %04o): another user may have made it; remove it or set party/control",
                      run, S_ISDIR (st.st_mode) ? "a directory" : "not a directory", (unsigned) st.st_uid,
                      (unsigned) (st.st_mode & 07777));
            rc = -1;
        }
    }
    free (run);
    return rc;
}
