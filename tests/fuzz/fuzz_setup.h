/*  fuzz_setup.h — what the libFuzzer targets (docs/FUZZING.md) share: a
 *  private deployment directory (tmpfs when there is one: keystore writes
 *  cost no disk), a keystore made as the unit tests make theirs (tenant
 *  demo, user PIN 1234, SO PIN 123456; tenant other), and a failure
 *  report that aborts, so libFuzzer saves the input.  Header-only (static).
 */
#ifndef FUZZ_SETUP_H_INCLUDED
#define FUZZ_SETUP_H_INCLUDED

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include "keystore.h"

/*  Reports a broken invariant of the target and aborts (libFuzzer keeps
 *  the input as a crash; the replay driver fails).  */
static inline void
fz_fail (const char *format, ...)
{
    va_list args;
    va_start (args, format);
    fprintf (stderr, "FUZZ INVARIANT: ");
    vfprintf (stderr, format, args);
    fprintf (stderr, "\n");
    va_end (args);
    abort ();
}

/*  Ends the process when a setup step failed: not the input's fault.  */
static inline void
fz_setup_check (bool ok, const char *what)
{
    if (!ok) {
        fprintf (stderr, "fuzz setup: %s failed\n", what);
        exit (2);
    }
}

/*  A fresh directory, under /dev/shm when it exists (caller frees).  */
static inline char *
fz_tmpdir (void)
{
    struct stat st;
    char *dir = strdup (stat ("/dev/shm", &st) == 0 && S_ISDIR (st.st_mode) && access ("/dev/shm", W_OK) == 0
                        ? "/dev/shm/cs-fuzz-XXXXXX" : "/tmp/cs-fuzz-XXXXXX");
    fz_setup_check (dir && mkdtemp (dir), "mkdtemp");
    return dir;
}

/*  Removes dir and what is in it (one level: the targets make no
 *  subdirectories).  */
static inline void
fz_tmpdir_remove (const char *dir)
{
    char command [4200];
    snprintf (command, sizeof command, "rm -rf '%s'", dir);
    if (system (command) != 0)
        fprintf (stderr, "fuzz: could not remove %s\n", dir);
}

/*  Writes text to dir/name, mode 0600.  */
static inline void
fz_write (const char *dir, const char *name, const char *text)
{
    char path [4096];
    snprintf (path, sizeof path, "%s/%s", dir, name);
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    fz_setup_check (fd >= 0, path);
    size_t len = strlen (text);
    fz_setup_check (write (fd, text, len) == (ssize_t) len, path);
    close (fd);
}

/*  A 2048-bit RSA key saved as PEM in dir/name; returns it (caller frees).  */
static inline EVP_PKEY *
fz_key_pem (const char *dir, const char *name)
{
    char path [4096];
    EVP_PKEY *pkey = EVP_RSA_gen (2048);
    fz_setup_check (pkey != NULL, "RSA key");
    snprintf (path, sizeof path, "%s/%s", dir, name);
    FILE *file = fopen (path, "w");
    fz_setup_check (file && PEM_write_PrivateKey (file, pkey, NULL, NULL, 0, NULL, NULL) == 1, path);
    fclose (file);
    return pkey;
}

/*  DIR/master.key and DIR/keystore.db with tenant demo (user PIN 1234, SO
 *  PIN 123456) and tenant other (5678, 567890), as th_keystore
 *  (tests/unit/test_broker_helpers.h); the master key is left in master.  */
static inline void
fz_keystore (const char *dir, uint8_t master [KEYSTORE_MASTER_KEY_LEN])
{
    char path [4096];
    snprintf (path, sizeof path, "%s/master.key", dir);
    fz_setup_check (keystore_master_key_create (path, master) == 0, "master key");
    snprintf (path, sizeof path, "%s/keystore.db", dir);
    keystore_t *ks = keystore_open (path, master);
    fz_setup_check (ks != NULL, "keystore_open");
    fz_setup_check (keystore_tenant_add (ks, "demo", "1234", 4, "123456", 6) == 0
                 && keystore_tenant_add (ks, "other", "5678", 4, "567890", 6) == 0, "tenants");
    keystore_destroy (&ks);
}

#endif
