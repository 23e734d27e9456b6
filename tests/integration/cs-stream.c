/*  cs-stream.c — multi-part encryption and decryption of any length through
 *  the module under test (issue #21, docs/CONTRACTS.md "Multi-part
 *  streams"), every result checked by OpenSSL's EVP in this process:
 *    - AES-128/256 ECB, CBC, CBC-PAD, CTR and DES3-CBC-PAD, inputs of 0 to
 *      300,000 bytes (several 64 KiB jobs) cut into random parts of 1 to
 *      70,000 bytes, each Update after a length query that must answer what
 *      it then returns: the ciphertext equals EVP's one-shot result and
 *      decrypts back in other random parts;
 *    - a token AES key whose CKA_ALLOWED_MECHANISMS is CKM_AES_CBC_PAD alone
 *      streams 300,000 bytes (the broker checks the parts' mechanism);
 *    - a wrong CBC-PAD padding at the end is CKR_ENCRYPTED_DATA_INVALID,
 *      a CBC input that is no whole number of blocks CKR_DATA_LEN_RANGE at
 *      C_EncryptFinal; GCM stays buffered: more than 64 KiB is
 *      CKR_DATA_LEN_RANGE;
 *    - THREADS threads at once, each MIB MiB through AES-256-CBC-PAD in
 *      1 MiB updates in its own session, compared with EVP as they go;
 *      the process's resident memory (VmRSS) may grow by less than 16 MiB.
 *  It writes OUTDIR/key.bin, iv.bin, plain.bin (thread 0's input) and
 *  ct.bin (its ciphertext) for the shell test's `openssl enc` check.
 *
 *  usage: cs-stream MODULE.so TOKEN PIN OUTDIR THREADS MIB
 *  The module is dlopen'ed.  Prints one line per step; exit 0 when all pass.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <p11-kit/pkcs11.h>
#include "cs-test-client.h"
#include "cs-test-slot.h"

#define S_MAX_LEN       300000
#define S_CHUNK         (1024 * 1024)

static CK_FUNCTION_LIST *p11;
static CK_SLOT_ID s_slot_id;
static CK_SESSION_HANDLE s;
static const char *s_outdir;

/*  A secret key of `type` with `value` (a session key, or with allowed set
 *  a token key limited to that one mechanism).  */
static CK_OBJECT_HANDLE
s_key (CK_SESSION_HANDLE h, CK_KEY_TYPE type, const unsigned char *value, CK_ULONG len,
       const CK_MECHANISM_TYPE *allowed)
{
    CK_OBJECT_CLASS klass = CKO_SECRET_KEY;
    CK_BBOOL no = CK_FALSE, yes = CK_TRUE;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &klass, sizeof klass }, { CKA_KEY_TYPE, &type, sizeof type },
        { CKA_TOKEN, allowed ? &yes : &no, sizeof no }, { CKA_VALUE, (void *) value, len },
        { CKA_ENCRYPT, &yes, sizeof yes }, { CKA_DECRYPT, &yes, sizeof yes },
        { CKA_ALLOWED_MECHANISMS, (void *) allowed, sizeof *allowed },
    };
    CK_OBJECT_HANDLE key;
    CHECK (p11->C_CreateObject (h, tmpl, allowed ? 7 : 6, &key), "C_CreateObject (secret key)");
    return key;
}

/*  A random part length, 1 .. 70,000 bytes, small ones often.  */
static size_t
s_part (void)
{
    unsigned r = 0;
    RAND_bytes ((unsigned char *) &r, sizeof r);
    return r % 4 == 0 ? 1 + r % 17 : r % 4 == 1 ? 1 + r % 300 : 1 + r % 70000;
}

/*  `n` bytes of `in` through Update in random parts (each after a length
 *  query) and Final into `out`; returns the output length.  */
static size_t
s_stream (CK_SESSION_HANDLE h, bool enc, CK_MECHANISM *mech, CK_OBJECT_HANDLE k, const unsigned char *in,
          size_t n, unsigned char *out, size_t cap, CK_RV want_final)
{
    CK_RV (*update) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG, CK_BYTE_PTR, CK_ULONG_PTR)
        = enc ? p11->C_EncryptUpdate : p11->C_DecryptUpdate;
    CK_RV (*final) (CK_SESSION_HANDLE, CK_BYTE_PTR, CK_ULONG_PTR) = enc ? p11->C_EncryptFinal : p11->C_DecryptFinal;
    size_t at = 0, done = 0;
    CHECK ((enc ? p11->C_EncryptInit : p11->C_DecryptInit) (h, mech, k), "Init");
    while (at < n) {
        size_t part = s_part ();
        CK_ULONG ask = 0, got;
        if (part > n - at)
            part = n - at;
        CHECK (update (h, (CK_BYTE_PTR) in + at, part, NULL, &ask), "Update (length query)");
        if (ask > 0) {
            got = ask - 1;
            EXPECT (update (h, (CK_BYTE_PTR) in + at, part, out + done, &got), CKR_BUFFER_TOO_SMALL,
                    "Update into a buffer one byte short");
            if (got != ask)
                cs_test_fail ("CKR_BUFFER_TOO_SMALL did not give the size");
        }
        got = cap - done;
        CHECK (update (h, (CK_BYTE_PTR) in + at, part, out + done, &got), "Update");
        if (got != ask)
            cs_test_fail ("an Update returned another length than its query answered");
        done += got;
        at += part;
    }
    CK_ULONG last = cap - done;
    EXPECT (final (h, out + done, &last), want_final, "Final");
    return done + last;
}

/*  EVP's one-shot result of cipher `name` (-1 on failure).  */
static int
s_evp (const char *name, bool enc, bool pad, const unsigned char *key, const unsigned char *iv,
       const unsigned char *in, int n, unsigned char *out)
{
    EVP_CIPHER *c = EVP_CIPHER_fetch (NULL, name, NULL);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new ();
    int len = 0, fin = 0, ok = c && ctx && EVP_CipherInit_ex (ctx, c, NULL, key, iv, enc)
        && EVP_CIPHER_CTX_set_padding (ctx, pad) && EVP_CipherUpdate (ctx, out, &len, in, n)
        && EVP_CipherFinal_ex (ctx, out + len, &fin);
    EVP_CIPHER_CTX_free (ctx);
    EVP_CIPHER_free (c);
    return ok ? len + fin : -1;
}

static const struct {
    CK_MECHANISM_TYPE mech;
    CK_KEY_TYPE type;
    size_t key_len, block;
    const char *evp;
    bool pad, whole_blocks;
} s_modes [] = {
    { CKM_AES_ECB, CKK_AES, 16, 16, "AES-128-ECB", false, true },
    { CKM_AES_CBC, CKK_AES, 32, 16, "AES-256-CBC", false, true },
    { CKM_AES_CBC_PAD, CKK_AES, 16, 16, "AES-128-CBC", true, false },
    { CKM_AES_CBC_PAD, CKK_AES, 32, 16, "AES-256-CBC", true, false },
    { CKM_AES_CTR, CKK_AES, 32, 16, "AES-256-CTR", false, false },
    { CKM_DES3_CBC_PAD, CKK_DES3, 24, 8, "DES-EDE3-CBC", true, false },
};

static void
s_modes_check (void)
{
    static unsigned char in [S_MAX_LEN], ct [S_MAX_LEN + 64], want [S_MAX_LEN + 64], back [S_MAX_LEN + 64];
    static const size_t lens [] = { 0, 1, 15, 16, 17, 1000, 65536, 65537, 200000, S_MAX_LEN };
    RAND_bytes (in, sizeof in);
    for (size_t m = 0; m < sizeof s_modes / sizeof s_modes [0]; m++) {
        unsigned char key [32], iv [16];
        CK_AES_CTR_PARAMS ctr = { 128, { 0 } };
        RAND_bytes (key, sizeof key);
        RAND_bytes (iv, sizeof iv);
        memcpy (ctr.cb, iv, 16);
        CK_OBJECT_HANDLE k = s_key (s, s_modes [m].type, key, s_modes [m].key_len, NULL);
        CK_MECHANISM mech = { s_modes [m].mech, NULL, 0 };
        if (s_modes [m].mech == CKM_AES_CTR)
            mech = (CK_MECHANISM) { CKM_AES_CTR, &ctr, sizeof ctr };
        else
        if (s_modes [m].mech != CKM_AES_ECB)
            mech = (CK_MECHANISM) { s_modes [m].mech, iv, s_modes [m].block };
        for (size_t l = 0; l < sizeof lens / sizeof lens [0]; l++) {
            size_t n = lens [l];
            if (s_modes [m].whole_blocks)
                n -= n % s_modes [m].block;
            int wl = s_evp (s_modes [m].evp, true, s_modes [m].pad, key, iv, in, (int) n, want);
            if (wl < 0)
                cs_test_fail ("EVP encryption");
            size_t cl = s_stream (s, true, &mech, k, in, n, ct, sizeof ct, CKR_OK);
            if (cl != (size_t) wl || memcmp (ct, want, cl))
                cs_test_fail ("the streamed ciphertext differs from EVP's");
            size_t bl = s_stream (s, false, &mech, k, ct, cl, back, sizeof back, CKR_OK);
            if (bl != n || memcmp (back, in, n))
                cs_test_fail ("the streamed decryption does not give the plaintext back");
        }
        printf ("%s (%s): 0 to %d bytes in random parts equal EVP's and decrypt back\n", s_modes [m].evp,
                s_modes [m].pad ? "CBC-PAD" : "no padding", S_MAX_LEN);
        CHECK (p11->C_DestroyObject (s, k), "C_DestroyObject");
    }
}

/*  The rules at the ends of a stream, and a token key's allowed mechanism.  */
static void
s_rules_check (void)
{
    static unsigned char in [S_MAX_LEN], ct [S_MAX_LEN + 64], want [S_MAX_LEN + 64], back [S_MAX_LEN + 64];
    unsigned char key [32], iv [16];
    RAND_bytes (in, sizeof in);
    RAND_bytes (key, sizeof key);
    RAND_bytes (iv, sizeof iv);
    CK_MECHANISM_TYPE only = CKM_AES_CBC_PAD;
    CK_OBJECT_HANDLE tk = s_key (s, CKK_AES, key, 32, &only);
    CK_MECHANISM pad = { CKM_AES_CBC_PAD, iv, 16 }, cbc = { CKM_AES_CBC, iv, 16 };
    int wl = s_evp ("AES-256-CBC", true, true, key, iv, in, S_MAX_LEN, want);
    size_t cl = s_stream (s, true, &pad, tk, in, S_MAX_LEN, ct, sizeof ct, CKR_OK);
    if (wl < 0 || cl != (size_t) wl || memcmp (ct, want, cl))
        cs_test_fail ("a token key's streamed CBC-PAD differs from EVP's");
    if (s_stream (s, false, &pad, tk, ct, cl, back, sizeof back, CKR_OK) != S_MAX_LEN || memcmp (back, in, S_MAX_LEN))
        cs_test_fail ("a token key's streamed CBC-PAD does not decrypt back");
    EXPECT (p11->C_EncryptInit (s, &cbc, tk), CKR_MECHANISM_INVALID, "CKM_AES_CBC with a CBC-PAD-only key");
    printf ("a token key allowed CKM_AES_CBC_PAD alone streams %d bytes both ways; CKM_AES_CBC is refused\n",
            S_MAX_LEN);
    /*  A wrong padding: flipping the top bit of the second-to-last
     *  ciphertext block's last byte flips it in the last plaintext block's
     *  padding length, which can then not be valid (over 16).  */
    ct [cl - 17] ^= 0x80;
    s_stream (s, false, &pad, tk, ct, cl, back, sizeof back, CKR_ENCRYPTED_DATA_INVALID);
    printf ("a wrong CBC-PAD padding after %zu streamed bytes: CKR_ENCRYPTED_DATA_INVALID at C_DecryptFinal\n", cl);
    CHECK (p11->C_DestroyObject (s, tk), "C_DestroyObject (token key)");
    /*  CBC without padding: a partial block left at Final.  */
    CK_OBJECT_HANDLE k = s_key (s, CKK_AES, key, 16, NULL);
    s_stream (s, true, &cbc, k, in, 1000 + 5, ct, sizeof ct, CKR_DATA_LEN_RANGE);
    s_stream (s, false, &cbc, k, in, 1000 + 5, ct, sizeof ct, CKR_ENCRYPTED_DATA_LEN_RANGE);
    printf ("CKM_AES_CBC: a partial block at Final is CKR_DATA_LEN_RANGE / CKR_ENCRYPTED_DATA_LEN_RANGE\n");
    /*  GCM: buffered, 64 KiB at most (its tag covers the whole message).  */
    CK_GCM_PARAMS gcm = { iv, 12, 96, NULL, 0, 128 };
    CK_MECHANISM mgcm = { CKM_AES_GCM, &gcm, sizeof gcm };
    CK_ULONG got = sizeof ct;
    CHECK (p11->C_EncryptInit (s, &mgcm, k), "C_EncryptInit (GCM)");
    CHECK (p11->C_EncryptUpdate (s, in, 65536, ct, &got), "C_EncryptUpdate (GCM, 64 KiB)");
    if (got != 0)
        cs_test_fail ("a GCM update returned output");
    got = sizeof ct;
    EXPECT (p11->C_EncryptUpdate (s, in, 1, ct, &got), CKR_DATA_LEN_RANGE, "C_EncryptUpdate (GCM, 64 KiB + 1)");
    printf ("CKM_AES_GCM: multi-part input past 64 KiB is CKR_DATA_LEN_RANGE\n");
    CHECK (p11->C_DestroyObject (s, k), "C_DestroyObject");
}

/*  ---- many threads, constant memory ---------------------------------- */

typedef struct {
    int index;
    size_t mib;
    unsigned char key [32], iv [16];
    const char *error;
} s_thread_t;

static long
s_rss_kib (void)
{
    char line [256];
    long kib = -1;
    FILE *f = fopen ("/proc/self/status", "r");
    while (f && fgets (line, sizeof line, f))
        if (sscanf (line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose (f);
    return kib;
}

static void
s_write (const char *name, const unsigned char *data, size_t len, const char *mode)
{
    char path [4096];
    snprintf (path, sizeof path, "%s/%s", s_outdir, name);
    FILE *f = fopen (path, mode);
    if (!f || fwrite (data, 1, len, f) != len || fclose (f) != 0)
        cs_test_fail ("cannot write the output files");
}

/*  MIB MiB of a fixed-seed stream through AES-256-CBC-PAD in 1 MiB updates,
 *  each part compared with EVP run alongside.  */
static void *
s_thread_run (void *arg)
{
    s_thread_t *t = arg;
    CK_SESSION_HANDLE h;
    unsigned char *in = malloc (S_CHUNK), *out = malloc (S_CHUNK + 32), *want = malloc (S_CHUNK + 32);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new ();
    CK_MECHANISM mech = { CKM_AES_CBC_PAD, t->iv, 16 };
    int wl = 0;
    if (!in || !out || !want || !ctx || !EVP_EncryptInit_ex (ctx, EVP_aes_256_cbc (), NULL, t->key, t->iv)
    ||  p11->C_OpenSession (s_slot_id, CKF_SERIAL_SESSION, NULL, NULL, &h) != CKR_OK) {
        t->error = "setup";
        return NULL;
    }
    CK_OBJECT_HANDLE k = s_key (h, CKK_AES, t->key, 32, NULL);
    if (p11->C_EncryptInit (h, &mech, k) != CKR_OK)
        t->error = "C_EncryptInit";
    for (size_t i = 0; !t->error && i < t->mib; i++) {
        CK_ULONG got = S_CHUNK + 32;
        memset (in, (int) (i + (size_t) t->index), S_CHUNK);
        in [i % S_CHUNK] ^= 0x55;
        if (p11->C_EncryptUpdate (h, in, S_CHUNK, out, &got) != CKR_OK)
            t->error = "C_EncryptUpdate";
        else
        if (!EVP_EncryptUpdate (ctx, want, &wl, in, S_CHUNK) || got != (CK_ULONG) wl || memcmp (out, want, got))
            t->error = "an update's ciphertext differs from EVP's";
        else
        if (t->index == 0) {
            s_write ("plain.bin", in, S_CHUNK, "ab");
            s_write ("ct.bin", out, got, "ab");
        }
    }
    CK_ULONG got = S_CHUNK;
    if (!t->error && (p11->C_EncryptFinal (h, out, &got) != CKR_OK || !EVP_EncryptFinal_ex (ctx, want, &wl)
                      || got != (CK_ULONG) wl || memcmp (out, want, got)))
        t->error = "C_EncryptFinal differs from EVP's";
    else
    if (!t->error && t->index == 0)
        s_write ("ct.bin", out, got, "ab");
    p11->C_CloseSession (h);
    EVP_CIPHER_CTX_free (ctx);
    free (in);
    free (out);
    free (want);
    return NULL;
}

static void
s_threads_check (int threads, size_t mib)
{
    s_thread_t *t = calloc ((size_t) threads, sizeof *t);
    pthread_t *id = calloc ((size_t) threads, sizeof *id);
    long before, after;
    s_write ("plain.bin", NULL, 0, "w");
    s_write ("ct.bin", NULL, 0, "w");
    before = s_rss_kib ();
    for (int i = 0; i < threads; i++) {
        t [i].index = i;
        t [i].mib = mib;
        RAND_bytes (t [i].key, sizeof t [i].key);
        RAND_bytes (t [i].iv, sizeof t [i].iv);
        if (pthread_create (&id [i], NULL, s_thread_run, &t [i]) != 0)
            cs_test_fail ("pthread_create");
    }
    for (int i = 0; i < threads; i++) {
        pthread_join (id [i], NULL);
        if (t [i].error)
            cs_test_fail (t [i].error);
    }
    after = s_rss_kib ();
    s_write ("key.bin", t [0].key, 32, "w");
    s_write ("iv.bin", t [0].iv, 16, "w");
    printf ("%d threads x %zu MiB through AES-256-CBC-PAD in 1 MiB updates equal EVP's; VmRSS %ld -> %ld KiB\n",
            threads, mib, before, after);
    if (before < 0 || after - before >= 16 * 1024)
        cs_test_fail ("the process grew by 16 MiB or more");
    free (t);
    free (id);
}

int
main (int argc, char **argv)
{
    if (argc != 7) {
        fprintf (stderr, "usage: cs-stream MODULE.so TOKEN PIN OUTDIR THREADS MIB\n");
        return 2;
    }
    p11 = cs_test_module (argv [1]);
    s_outdir = argv [4];
    CHECK (p11->C_Initialize (NULL), "C_Initialize");
    CK_RV rv = cs_test_slot (p11, argv [2], &s_slot_id);
    if (rv == CKR_TOKEN_NOT_PRESENT)
        cs_test_fail ("no token with that label");
    CHECK (rv, "C_GetSlotList");
    CHECK (p11->C_OpenSession (s_slot_id, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s), "C_OpenSession");
    CHECK (p11->C_Login (s, CKU_USER, (CK_UTF8CHAR_PTR) argv [3], strlen (argv [3])), "C_Login");
    s_modes_check ();
    s_rules_check ();
    s_threads_check (atoi (argv [5]), (size_t) atol (argv [6]));
    CHECK (p11->C_Logout (s), "C_Logout");
    CHECK (p11->C_Finalize (NULL), "C_Finalize");
    return 0;
}
