/*  cs-fork.c — fork() safety of a PKCS#11 module, for tests/integration/fork.sh.
 *
 *  usage: cs-fork MODULE.so TOKEN PIN PUB.pem [KEY-LABEL]   (default key: rsa2048)
 *
 *  PKCS#11 2.40 §6.7.7 and the nginx/libp11 way of using a token: after
 *  fork() the child is not initialised (CKR_CRYPTOKI_NOT_INITIALIZED from
 *  every call, including on the parent's session handles) until it calls
 *  C_Initialize, which then works with a fresh association; the parent goes
 *  on unaffected.
 *
 *  1. The parent initialises, logs in and signs (CKM_SHA256_RSA_PKCS with
 *     the RSA key KEY-LABEL; OpenSSL verifies with PUB.pem, the public key
 *     made outside the module when the key was made: never one read from
 *     the token under test).
 *  2. It forks 4 children and keeps signing in a thread while they run and
 *     after they exit.  Each child: C_GetSlotList and C_Sign (parent's
 *     session) give CKR_CRYPTOKI_NOT_INITIALIZED; then C_Initialize, login,
 *     20 signatures each verified, C_Finalize.
 *  3. Fork during activity: 4 parent threads sign in a loop (each in its own
 *     session); while they are inside C_Sign the parent forks a child that
 *     does as in 2.  Twice.  Then the threads stop and their signatures are
 *     verified.
 *
 *  Links only OpenSSL and pthreads; the module is dlopen'ed.  A child that
 *  hangs is killed by alarm() and counts as a failure.  Prints one line per
 *  step; exit 0 when all pass.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <p11-kit/pkcs11.h>
#include "cs-test-slot.h"

#define S_CHILDREN          4       /* forked children of step 2 */
#define S_CHILD_SIGNATURES  20      /* signatures per child */
#define S_BUSY_THREADS      4       /* signing threads of step 3 */
#define S_BUSY_FORKS        2       /* children forked during step 3 */
#define S_CHILD_ALARM_S     240     /* a child that takes longer is hung */
#define S_SIG_MAX           1024

static CK_FUNCTION_LIST *p11;
static const char *s_token, *s_pin, *s_label = "rsa2048";
static EVP_PKEY *s_pub;             /* from PUB.pem; children inherit it */
static bool s_in_child;

static void __attribute__ ((format (printf, 1, 2)))
s_fail (const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    fprintf (stderr, "cs-fork[%d]: FAIL: ", (int) getpid ());
    vfprintf (stderr, fmt, args);
    va_end (args);
    fputc ('\n', stderr);
    fflush (NULL);
    if (s_in_child)
        _exit (1);
    exit (1);
}

#define CHECK(call, what) do { CK_RV rv_ = (call); if (rv_ != CKR_OK) \
    s_fail ("%s: CK_RV 0x%lx", what, (unsigned long) rv_); } while (0)

//  The slot whose token label is s_token (blank-padded compare).
static CK_SLOT_ID
s_slot (void)
{
    CK_SLOT_ID slot = 0;
    CK_RV rv = cs_test_slot (p11, s_token, &slot);
    if (rv == CKR_TOKEN_NOT_PRESENT)
        s_fail ("no token with that label");
    CHECK (rv, "C_GetSlotList");
    return slot;
}

//  The one object of class `klass` labelled s_label.
static CK_OBJECT_HANDLE
s_find (CK_SESSION_HANDLE session, CK_OBJECT_CLASS klass)
{
    CK_ATTRIBUTE tmpl [] = { { CKA_CLASS, &klass, sizeof klass },
                             { CKA_LABEL, (void *) s_label, strlen (s_label) } };
    CK_OBJECT_HANDLE object = CK_INVALID_HANDLE;
    CK_ULONG found = 0;
    CHECK (p11->C_FindObjectsInit (session, tmpl, 2), "C_FindObjectsInit");
    CHECK (p11->C_FindObjects (session, &object, 1, &found), "C_FindObjects");
    CHECK (p11->C_FindObjectsFinal (session), "C_FindObjectsFinal");
    if (found != 1)
        s_fail ("key not found on the token");
    return object;
}

//  The public key of PUB.pem (made by OpenSSL with the key pair).
static EVP_PKEY *
s_read_public (const char *path)
{
    FILE *file = fopen (path, "re");
    EVP_PKEY *pkey = file ? PEM_read_PUBKEY (file, NULL, NULL, NULL) : NULL;
    if (file)
        fclose (file);
    if (!pkey)
        s_fail ("cannot read the public key %s", path);
    return pkey;
}

static bool
s_verify (EVP_PKEY *pub, const char *msg, const CK_BYTE *sig, CK_ULONG len)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
    bool ok = ctx && EVP_DigestVerifyInit (ctx, NULL, EVP_sha256 (), NULL, pub) == 1
           && EVP_DigestVerify (ctx, sig, len, (const unsigned char *) msg, strlen (msg)) == 1;
    EVP_MD_CTX_free (ctx);
    return ok;
}

//  C_SignInit + C_Sign (CKM_SHA256_RSA_PKCS) of `msg` into sig; returns the
//  CK_RV and the length in *len_p.
static CK_RV
s_sign (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key, const char *msg, CK_BYTE *sig, CK_ULONG *len_p)
{
    CK_MECHANISM mechanism = { CKM_SHA256_RSA_PKCS, NULL, 0 };
    CK_RV rv = p11->C_SignInit (session, &mechanism, key);
    *len_p = S_SIG_MAX;
    if (rv == CKR_OK)
        rv = p11->C_Sign (session, (CK_BYTE_PTR) msg, strlen (msg), sig, len_p);
    return rv;
}

//  Signs a fresh message and verifies it with `pub`; fails the process
//  on any error.
static void
s_sign_verify (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key, EVP_PKEY *pub, unsigned n)
{
    char msg [96];
    CK_BYTE sig [S_SIG_MAX];
    CK_ULONG len;
    snprintf (msg, sizeof msg, "cs-fork: pid %d signature %u", (int) getpid (), n);
    CHECK (s_sign (session, key, msg, sig, &len), "C_Sign");
    if (!s_verify (pub, msg, sig, len))
        s_fail ("a signature does not verify");
}

//  Opens a session on the token; logs in when `login`.
static CK_SESSION_HANDLE
s_open (bool login)
{
    CK_SESSION_HANDLE session;
    CHECK (p11->C_OpenSession (s_slot (), CKF_SERIAL_SESSION, NULL, NULL, &session), "C_OpenSession");
    if (login)
        CHECK (p11->C_Login (session, CKU_USER, (CK_UTF8CHAR_PTR) s_pin, strlen (s_pin)), "C_Login");
    return session;
}

//  ---- the child ----------------------------------------------------------

static void
s_expect_not_initialized (CK_RV rv, const char *what)
{
    if (rv != CKR_CRYPTOKI_NOT_INITIALIZED)
        s_fail ("%s in the child before C_Initialize: CK_RV 0x%lx, not CKR_CRYPTOKI_NOT_INITIALIZED",
                what, (unsigned long) rv);
}

//  What every forked child does; never returns.  `parent_session` and
//  `parent_key` are the parent's handles (must be refused).
static void
s_child (const char *name, CK_SESSION_HANDLE parent_session, CK_OBJECT_HANDLE parent_key)
{
    CK_SLOT_ID slots [8];
    CK_ULONG count = 8;
    CK_BYTE data [] = "x", sig [S_SIG_MAX];
    CK_ULONG len = sizeof sig;
    CK_MECHANISM mechanism = { CKM_SHA256_RSA_PKCS, NULL, 0 };
    s_in_child = true;
    alarm (S_CHILD_ALARM_S);
    s_expect_not_initialized (p11->C_GetSlotList (CK_TRUE, slots, &count), "C_GetSlotList");
    s_expect_not_initialized (p11->C_SignInit (parent_session, &mechanism, parent_key), "C_SignInit");
    s_expect_not_initialized (p11->C_Sign (parent_session, data, 1, sig, &len), "C_Sign");
    CHECK (p11->C_Initialize (NULL), "C_Initialize in the child");
    CK_SESSION_HANDLE session = s_open (true);
    CK_OBJECT_HANDLE key = s_find (session, CKO_PRIVATE_KEY);
    for (unsigned i = 0; i < S_CHILD_SIGNATURES; i++)
        s_sign_verify (session, key, s_pub, i);
    CHECK (p11->C_CloseSession (session), "C_CloseSession in the child");
    CHECK (p11->C_Finalize (NULL), "C_Finalize in the child");
    printf ("%s (pid %d): CKR_CRYPTOKI_NOT_INITIALIZED until C_Initialize; "
            "then %d signatures verified\n", name, (int) getpid (), S_CHILD_SIGNATURES);
    fflush (NULL);
    _exit (0);
}

static pid_t
s_fork_child (const char *name, CK_SESSION_HANDLE parent_session, CK_OBJECT_HANDLE parent_key)
{
    fflush (NULL);
    pid_t pid = fork ();
    if (pid < 0)
        s_fail ("fork failed");
    if (pid == 0)
        s_child (name, parent_session, parent_key);
    return pid;
}

//  Waits for `pid`; true when it exited 0.
static bool
s_reap (pid_t pid, const char *name)
{
    int status;
    if (waitpid (pid, &status, 0) != pid) {
        fprintf (stderr, "cs-fork: %s: waitpid failed\n", name);
        return false;
    }
    if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
        return true;
    if (WIFSIGNALED (status))
        fprintf (stderr, "cs-fork: FAIL: %s (pid %d) killed by signal %d%s\n", name, (int) pid,
                 WTERMSIG (status), WTERMSIG (status) == SIGALRM ? " (hung: alarm)" : "");
    else
        fprintf (stderr, "cs-fork: FAIL: %s (pid %d) exited with %d\n", name, (int) pid,
                 WEXITSTATUS (status));
    return false;
}

//  ---- parent threads -----------------------------------------------------

typedef struct {
    CK_SESSION_HANDLE session;
    CK_OBJECT_HANDLE key;
    bool verify;                /* verify each signature in the loop */
    atomic_bool stop;
    atomic_uint done;           /* signatures made */
    _Atomic CK_RV rv;           /* first error */
    char msg [96];              /* the last message and signature */
    CK_BYTE sig [S_SIG_MAX];
    CK_ULONG sig_len;
} s_signer_t;

static void *
s_signer (void *arg)
{
    s_signer_t *self = arg;
    while (!atomic_load (&self->stop)) {
        snprintf (self->msg, sizeof self->msg, "cs-fork: thread %p signature %u",
                  (void *) self, atomic_load (&self->done));
        CK_RV rv = s_sign (self->session, self->key, self->msg, self->sig, &self->sig_len);
        if (rv != CKR_OK) {
            atomic_store (&self->rv, rv);
            break;
        }
        if (self->verify && !s_verify (s_pub, self->msg, self->sig, self->sig_len)) {
            atomic_store (&self->rv, CKR_SIGNATURE_INVALID);
            break;
        }
        atomic_fetch_add (&self->done, 1);
    }
    return NULL;
}

static void
s_start (s_signer_t *self, pthread_t *thread, CK_OBJECT_HANDLE key, bool verify)
{
    memset (self, 0, sizeof *self);
    self->session = s_open (false);     /* login is per token: already done */
    self->key = key;
    self->verify = verify;
    if (pthread_create (thread, NULL, s_signer, self) != 0)
        s_fail ("pthread_create failed");
}

//  Waits (bounded, 120 s) until `self` has made `count` signatures.
static void
s_wait_done (s_signer_t *self, unsigned count)
{
    for (int waited = 0; atomic_load (&self->done) < count; waited++) {
        if (self->rv != CKR_OK || waited > 12000)
            s_fail ("a parent thread stopped signing: CK_RV 0x%lx", (unsigned long) atomic_load (&self->rv));
        nanosleep (&(struct timespec) { 0, 10 * 1000 * 1000 }, NULL);
    }
}

//  Stops and joins the thread; fails on its error; verifies its last signature.
static unsigned
s_stop (s_signer_t *self, pthread_t thread)
{
    atomic_store (&self->stop, true);
    pthread_join (thread, NULL);
    if (self->rv != CKR_OK)
        s_fail ("C_Sign in a parent thread: CK_RV 0x%lx", (unsigned long) atomic_load (&self->rv));
    if (!s_verify (s_pub, self->msg, self->sig, self->sig_len))
        s_fail ("a parent thread's signature does not verify");
    CHECK (p11->C_CloseSession (self->session), "C_CloseSession");
    return atomic_load (&self->done);
}

//  ---- steps --------------------------------------------------------------

//  Step 2: 4 children while a parent thread signs; the parent signs after.
static bool
s_step_children (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key)
{
    pid_t pids [S_CHILDREN];
    char names [S_CHILDREN][16];
    bool ok = true;
    for (int i = 0; i < S_CHILDREN; i++) {
        snprintf (names [i], sizeof names [i], "child %d", i + 1);
        pids [i] = s_fork_child (names [i], session, key);
    }
    s_signer_t signer;
    pthread_t thread;
    s_start (&signer, &thread, key, true);
    for (int i = 0; i < S_CHILDREN; i++)
        ok &= s_reap (pids [i], names [i]);
    s_wait_done (&signer, 1);
    unsigned during = s_stop (&signer, thread);
    for (unsigned i = 0; i < 5; i++)
        s_sign_verify (session, key, s_pub, 1000 + i);
    printf ("parent: %u signatures verified while the children ran, 5 after they exited\n", during);
    return ok;
}

//  Step 3: fork while 4 threads are inside C_Sign.
static bool
s_step_busy (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key)
{
    s_signer_t signers [S_BUSY_THREADS];
    pthread_t threads [S_BUSY_THREADS];
    bool ok = true;
    for (int i = 0; i < S_BUSY_THREADS; i++)
        s_start (&signers [i], &threads [i], key, false);
    for (int round = 0; round < S_BUSY_FORKS; round++) {
        char name [32];
        for (int i = 0; i < S_BUSY_THREADS; i++)
            s_wait_done (&signers [i], 3 * (unsigned) (round + 1));
        snprintf (name, sizeof name, "busy child %d", round + 1);
        ok &= s_reap (s_fork_child (name, session, key), name);
    }
    unsigned total = 0;
    for (int i = 0; i < S_BUSY_THREADS; i++)
        total += s_stop (&signers [i], threads [i]);
    s_sign_verify (session, key, s_pub, 2000);
    printf ("parent: %d threads made %u signatures around %d forks; the parent signs after\n",
            S_BUSY_THREADS, total, S_BUSY_FORKS);
    return ok;
}

int
main (int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf (stderr, "usage: cs-fork MODULE.so TOKEN PIN PUB.pem [KEY-LABEL]\n");
        return 2;
    }
    s_token = argv [2];
    s_pin = argv [3];
    if (argc == 6)
        s_label = argv [5];
    setvbuf (stdout, NULL, _IOLBF, 0);
    void *dl = dlopen (argv [1], RTLD_NOW | RTLD_LOCAL);
    CK_C_GetFunctionList get = dl ? (CK_C_GetFunctionList) dlsym (dl, "C_GetFunctionList") : NULL;
    if (!get || get (&p11) != CKR_OK)
        s_fail ("cannot load the module");
    CK_C_INITIALIZE_ARGS args = { .flags = CKF_OS_LOCKING_OK };
    CHECK (p11->C_Initialize (&args), "C_Initialize");
    CK_SESSION_HANDLE session = s_open (true);
    s_pub = s_read_public (argv [4]);
    CK_OBJECT_HANDLE key = s_find (session, CKO_PRIVATE_KEY);
    s_sign_verify (session, key, s_pub, 0);
    printf ("parent (pid %d): logged in, %s signature verified by OpenSSL\n", (int) getpid (), s_label);

    bool ok = s_step_children (session, key);
    ok &= s_step_busy (session, key);

    CHECK (p11->C_CloseSession (session), "C_CloseSession");
    CHECK (p11->C_Finalize (NULL), "C_Finalize");
    EVP_PKEY_free (s_pub);
    if (!ok)
        return 1;
    printf ("ok\n");
    return 0;
}
