/*  test_broker_helpers.h — shared by the broker's Check tests: temp
 *  deployments (keys, certs, broker.conf), a DEALER client speaking the wire,
 *  and OpenSSL verification of what comes back.  Header-only (static).
 */
#ifndef TEST_BROKER_HELPERS_H_INCLUDED
#define TEST_BROKER_HELPERS_H_INCLUDED

#include <check.h>
#include <fcntl.h>
#include <czmq.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include "cs_pin.h"
#include "cs_util.h"
#include "cs_wire.h"
#include "keystore.h"
#include <p11-kit/pkcs11.h>

/*  How long a test waits for a reply: 15 s, or CS_TEST_TIMEOUT_MS (make
 *  memcheck sets it: under valgrind a SoftHSM key generation takes longer).  */
static inline int
th_timeout_ms (void)
{
    const char *env = getenv ("CS_TEST_TIMEOUT_MS");
    return env && atoi (env) > 0 ? atoi (env) : 15000;
}
#define TH_TIMEOUT_MS th_timeout_ms ()

/*  A fresh temp directory (caller frees the string).  */
static inline char *
th_tmpdir (void)
{
    char *dir = strdup ("/tmp/cs-broker-test-XXXXXX");
    ck_assert_ptr_nonnull (mkdtemp (dir));
    return dir;
}

/*  Removes the temp directory *dir_p and all in it (rm -rf; fails the test
 *  when that fails), frees the string and nulls *dir_p.  NULL-safe.  */
static inline void
th_tmpdir_remove (char **dir_p)
{
    if (!*dir_p)
        return;
    char command [4200];
    snprintf (command, sizeof command, "rm -rf '%s'", *dir_p);
    ck_assert_int_eq (system (command), 0);
    free (*dir_p);
    *dir_p = NULL;
}

/*  Writes text to dir/name, mode 0600 (the broker refuses secret files that
 *  group or others can read).  */
static inline void
th_write (const char *dir, const char *name, const char *text)
{
    char path [4096];
    snprintf (path, sizeof path, "%s/%s", dir, name);
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ck_assert_int_ge (fd, 0);
    FILE *file = fdopen (fd, "w");
    ck_assert_ptr_nonnull (file);
    fputs (text, file);
    fclose (file);
}

/*  Generates a key (RSA bits, or P-256 when bits == 0), saves it as PEM in
 *  dir/name, returns it (caller frees).  */
static inline EVP_PKEY *
th_key_pem (const char *dir, const char *name, unsigned bits)
{
    char path [4096];
    EVP_PKEY *pkey = bits ? EVP_RSA_gen (bits) : EVP_EC_gen ("P-256");
    ck_assert_ptr_nonnull (pkey);
    snprintf (path, sizeof path, "%s/%s", dir, name);
    FILE *file = fopen (path, "w");
    ck_assert_ptr_nonnull (file);
    ck_assert (PEM_write_PrivateKey (file, pkey, NULL, NULL, 0, NULL, NULL));
    fclose (file);
    return pkey;
}

/*  Adds one more client: DIR/clients.d/NAME.cert and DIR/NAME.cert(_secret)
 *  with metadata name and tenant (after th_certs made the directory).  */
/*  PKCS#8 DER of pkey (caller frees with OPENSSL_free).  */
static inline uint8_t *
th_pkcs8 (EVP_PKEY *pkey, size_t *len_p)
{
    PKCS8_PRIV_KEY_INFO *p8 = EVP_PKEY2PKCS8 (pkey);
    uint8_t *der = NULL;
    int len = i2d_PKCS8_PRIV_KEY_INFO (p8, &der);
    PKCS8_PRIV_KEY_INFO_free (p8);
    ck_assert_int_gt (len, 0);
    *len_p = (size_t) len;
    return der;
}

static inline void
th_client_add (const char *dir, const char *client, const char *tenant)
{
    char path [4096];
    zcert_t *cert = zcert_new ();
    zcert_set_meta (cert, "name", "%s", client);
    if (tenant)
        zcert_set_meta (cert, "tenant", "%s", tenant);
    snprintf (path, sizeof path, "%s/%s.cert", dir, client);
    ck_assert_int_eq (zcert_save (cert, path), 0);
    snprintf (path, sizeof path, "%s/clients.d/%s.cert", dir, client);
    ck_assert_int_eq (zcert_save_public (cert, path), 0);
    zcert_destroy (&cert);
}

/*  Makes DIR/broker.cert(_secret), DIR/clients.d/NAME.cert and
 *  DIR/NAME.cert(_secret) with metadata name and tenant.  */
static inline void
th_certs (const char *dir, const char *client, const char *tenant)
{
    char path [4096];
    zcert_t *broker = zcert_new ();
    snprintf (path, sizeof path, "%s/broker.cert", dir);
    ck_assert_int_eq (zcert_save (broker, path), 0);
    zcert_destroy (&broker);
    snprintf (path, sizeof path, "%s/clients.d", dir);
    ck_assert_int_eq (mkdir (path, 0700), 0);
    zcert_t *cert = zcert_new ();
    zcert_set_meta (cert, "name", "%s", client);
    if (tenant)
        zcert_set_meta (cert, "tenant", "%s", tenant);
    snprintf (path, sizeof path, "%s/%s.cert", dir, client);
    ck_assert_int_eq (zcert_save (cert, path), 0);
    snprintf (path, sizeof path, "%s/clients.d/%s.cert", dir, client);
    ck_assert_int_eq (zcert_save_public (cert, path), 0);
    zcert_destroy (&cert);
}

/*  The broker.conf head: endpoint on a free port, curve, the keystore
 *  (keystore.db under master.key, see th_keystore), with broker_lines (keys
 *  of the broker section, 4-space indented lines; "" for none) right after
 *  the "broker" line.  Drivers are appended by the caller, who frees the
 *  result.  */
static inline char *
th_conf_head_with (bool curve, const char *broker_lines)
{
    char *text = NULL;
    ck_assert_int_ge (asprintf (&text,
        "broker\n"
        "%s"
        "    endpoint = tcp://127.0.0.1:!\n"
        "    stats-interval-ms = 0\n"
        "    curve\n"
        "        enabled = %s\n"
        "        secret-key = broker.cert_secret\n"
        "        clients = clients.d\n"
        "keystore\n"
        "    path = keystore.db\n"
        "    master-key = master.key\n", broker_lines, curve ? "true" : "false"), 0);
    return text;
}

/*  th_conf_head_with no more broker keys (caller frees).  */
static inline char *
th_conf_head (bool curve)
{
    return th_conf_head_with (curve, "");
}

/*  Makes DIR/master.key and DIR/keystore.db with tenant demo (user PIN 1234,
 *  SO PIN 123456) and tenant other (user PIN 5678, SO PIN 567890).  */
static inline void
th_keystore (const char *dir)
{
    char path [4096];
    uint8_t key [KEYSTORE_MASTER_KEY_LEN];
    snprintf (path, sizeof path, "%s/master.key", dir);
    ck_assert_int_eq (keystore_master_key_create (path, key), 0);
    snprintf (path, sizeof path, "%s/keystore.db", dir);
    keystore_t *ks = keystore_open (path, key);
    ck_assert_ptr_nonnull (ks);
    ck_assert_int_eq (keystore_tenant_add (ks, "demo", "1234", 4, "123456", 6), 0);
    ck_assert_int_eq (keystore_tenant_add (ks, "other", "5678", 4, "567890", 6), 0);
    keystore_destroy (&ks);
    OPENSSL_cleanse (key, sizeof key);
}

/*  Opens DIR/keystore.db with the master key DIR/master.key (as
 *  cryptoserver-admin does); fails the test when it cannot.  Caller
 *  destroys.  */
static inline keystore_t *
th_keystore_open (const char *dir)
{
    char path [4096];
    uint8_t master [KEYSTORE_MASTER_KEY_LEN];
    snprintf (path, sizeof path, "%s/master.key", dir);
    ck_assert_int_eq (keystore_master_key_read (path, master), 0);
    snprintf (path, sizeof path, "%s/keystore.db", dir);
    keystore_t *ks = keystore_open (path, master);
    OPENSSL_cleanse (master, sizeof master);
    ck_assert_ptr_nonnull (ks);
    return ks;
}

/*  A DEALER connected to endpoint with CURVE (broker and client certs in dir).  */
static inline zsock_t *
th_dealer (const char *dir, const char *client, const char *endpoint)
{
    char path [4096];
    zsock_t *dealer = zsock_new (ZMQ_DEALER);
    snprintf (path, sizeof path, "%s/%s.cert", dir, client);
    zcert_t *cert = zcert_load (path);
    snprintf (path, sizeof path, "%s/broker.cert", dir);
    zcert_t *broker = zcert_load (path);
    ck_assert (dealer && cert && broker);
    zcert_apply (cert, dealer);
    zsock_set_curve_serverkey (dealer, zcert_public_txt (broker));
    zsock_set_linger (dealer, 0);
    ck_assert_int_eq (zsock_connect (dealer, "%s", endpoint), 0);
    zcert_destroy (&cert);
    zcert_destroy (&broker);
    return dealer;
}

/*  A request with n empty job slots; the caller fills jobs [i] kinds.  */
static inline Cs__Request *
th_request (size_t n, uint64_t id)
{
    Cs__Request *req = calloc (1, sizeof *req);
    cs__request__init (req);
    req->version_min = CS_PROTOCOL_VERSION_MIN;
    req->version_max = CS_PROTOCOL_VERSION;
    req->request_id = id;
    req->n_jobs = n;
    req->jobs = calloc (n, sizeof (Cs__Job *));
    for (size_t i = 0; i < n; i++) {
        req->jobs [i] = calloc (1, sizeof (Cs__Job));
        cs__job__init (req->jobs [i]);
    }
    return req;
}

static inline void
th_request_free (Cs__Request *req)
{
    for (size_t i = 0; i < req->n_jobs; i++) {
        Cs__Job *job = req->jobs [i];
        if (job->kind_case == CS__JOB__KIND_SIGN) {
            free (job->sign->mechanism);
            free (job->sign);
        }
        else
        if (job->kind_case == CS__JOB__KIND_DECRYPT) {
            free (job->decrypt->mechanism);
            free (job->decrypt);
        }
        else
            free (job->hello);      /* every other kind is one small struct */
        free (job);
    }
    free (req->jobs);
    free (req);
}

static inline void
th_job_hello (Cs__Job *job)
{
    job->kind_case = CS__JOB__KIND_HELLO;
    job->hello = calloc (1, sizeof (Cs__HelloJob));
    cs__hello_job__init (job->hello);
}

static inline void
th_job_list_keys (Cs__Job *job)
{
    job->kind_case = CS__JOB__KIND_LIST_KEYS;
    job->list_keys = calloc (1, sizeof (Cs__ListKeysJob));
    cs__list_keys_job__init (job->list_keys);
}

static inline void
th_job_login (Cs__Job *job, unsigned long user_type, const char *pin)
{
    job->kind_case = CS__JOB__KIND_LOGIN;
    job->login = calloc (1, sizeof (Cs__LoginJob));
    cs__login_job__init (job->login);
    job->login->user_type = user_type;
    job->login->pin.data = (uint8_t *) pin;
    job->login->pin.len = strlen (pin);
}

/*  A sign (or decrypt when !sign) job; data and key id are borrowed.  */
static inline Cs__Mechanism *
th_job_crypto (Cs__Job *job, bool sign, const uint8_t *key_id, size_t key_id_len,
               unsigned long mech, const uint8_t *data, size_t len)
{
    Cs__Mechanism *m = calloc (1, sizeof *m);
    cs__mechanism__init (m);
    m->type = mech;
    if (sign) {
        job->kind_case = CS__JOB__KIND_SIGN;
        job->sign = calloc (1, sizeof (Cs__SignJob));
        cs__sign_job__init (job->sign);
        *job->sign = (Cs__SignJob) { job->sign->base, { key_id_len, (uint8_t *) key_id }, m,
                                     { len, (uint8_t *) data } };
    }
    else {
        job->kind_case = CS__JOB__KIND_DECRYPT;
        job->decrypt = calloc (1, sizeof (Cs__DecryptJob));
        cs__decrypt_job__init (job->decrypt);
        *job->decrypt = (Cs__DecryptJob) { job->decrypt->base, { key_id_len, (uint8_t *) key_id }, m,
                                           { len, (uint8_t *) data } };
    }
    return m;
}

/*  Sends raw bytes as one frame.  */
static inline void
th_send_raw (zsock_t *dealer, const void *data, size_t size)
{
    zframe_t *frame = zframe_new (data, size);
    ck_assert_int_eq (zframe_send (&frame, dealer, 0), 0);
}

static inline void
th_send (zsock_t *dealer, Cs__Request *req)
{
    size_t size = 0;
    uint8_t *data = cs_wire_encode (&req->base, &size);
    th_send_raw (dealer, data, size);
    free (data);
}

/*  Receives and decodes one reply; fails the test after TH_TIMEOUT_MS.  */
static inline Cs__Reply *
th_recv (zsock_t *dealer)
{
    zpoller_t *poller = zpoller_new (dealer, NULL);
    void *which = zpoller_wait (poller, TH_TIMEOUT_MS);
    zpoller_destroy (&poller);
    ck_assert_msg (which == dealer, "no reply within %d ms", TH_TIMEOUT_MS);
    zframe_t *frame = zframe_recv (dealer);
    const char *why = NULL;
    Cs__Reply *reply = cs_wire_reply_decode (zframe_data (frame), zframe_size (frame), &why);
    ck_assert_msg (reply != NULL, "bad reply: %s", why);
    zframe_destroy (&frame);
    return reply;
}

/*  Sends req, returns its reply (caller frees with cs__reply__free_unpacked).  */
static inline Cs__Reply *
th_call (zsock_t *dealer, Cs__Request *req)
{
    th_send (dealer, req);
    Cs__Reply *reply = th_recv (dealer);
    ck_assert_uint_eq (reply->request_id, req->request_id);
    return reply;
}

/*  Logs in as CKU_USER with pin; returns the ticket bytes (caller frees) or
 *  NULL, and the rv in *rv_p.  */
static inline uint8_t *
th_login (zsock_t *dealer, const char *pin, size_t *len_p, uint64_t *rv_p)
{
    Cs__Request *req = th_request (1, 7);
    th_job_login (req->jobs [0], CKU_USER, pin);
    Cs__Reply *reply = th_call (dealer, req);
    ck_assert_uint_eq (reply->rv, CKR_OK);
    ck_assert_uint_eq (reply->n_results, 1);
    uint8_t *ticket = NULL;
    *rv_p = reply->results [0]->rv;
    if (*rv_p == CKR_OK) {
        ck_assert_int_eq (reply->results [0]->kind_case, CS__RESULT__KIND_LOGIN);
        *len_p = reply->results [0]->login->ticket.len;
        ticket = malloc (*len_p);
        memcpy (ticket, reply->results [0]->login->ticket.data, *len_p);
    }
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
    return ticket;
}

/*  th_login that must succeed: fails the test unless the rv is CKR_OK;
 *  returns the ticket (caller frees), its length in *len_p.  */
static inline uint8_t *
th_login_ok (zsock_t *dealer, const char *pin, size_t *len_p)
{
    uint64_t rv = 0;
    uint8_t *ticket = th_login (dealer, pin, len_p, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
    return ticket;
}

/*  DER DigestInfo of SHA-256 (msg) into out (51 bytes).  */
static inline size_t th_digest_info (const char *msg, uint8_t out [51]);

/*  th_ref_probe: every job kind that names a key by ref, in one request.  */
enum { TH_PROBE_SIGN, TH_PROBE_DECRYPT, TH_PROBE_DERIVE, TH_PROBE_DESTROY, TH_PROBE_SET,
       TH_PROBE_COPY, TH_PROBE_JOBS };

/*  Sends one request naming `ref` in every job kind that takes a key ref
 *  (sign, decrypt, ECDH derive, destroy, set attributes, copy) with the
 *  ticket (ticket_len bytes, may be NULL) and writes their rvs into rvs.
 *  Issue #7: a ref the client's tenant does not own must get exactly the
 *  answers of a ref that does not exist (th_probe_unknown).  */
static inline void
th_ref_probe (zsock_t *dealer, const uint8_t *ticket, size_t ticket_len, const char *ref,
              uint64_t rvs [TH_PROBE_JOBS])
{
    static uint8_t cipher [256] = { 1 }, point [65] = { 0x04, 1 };
    static uint8_t di [51];
    static Cs__Attribute label = CS__ATTRIBUTE__INIT;
    static Cs__Attribute *attrs [] = { &label };
    label.type = CKA_LABEL;
    label.value_case = CS__ATTRIBUTE__VALUE_BYTES;
    label.bytes = (ProtobufCBinaryData) { 5, (uint8_t *) "probe" };
    th_digest_info ("probe", di);
    size_t len = strlen (ref);
    Cs__Request *req = th_request (TH_PROBE_JOBS, 90);
    req->ticket = (ProtobufCBinaryData) { ticket_len, (uint8_t *) ticket };
    th_job_crypto (req->jobs [TH_PROBE_SIGN], true, (const uint8_t *) ref, len, CKM_RSA_PKCS, di, 51);
    th_job_crypto (req->jobs [TH_PROBE_DECRYPT], false, (const uint8_t *) ref, len, CKM_RSA_PKCS,
                   cipher, sizeof cipher);
    Cs__DeriveJob *derive = calloc (1, sizeof *derive);
    cs__derive_job__init (derive);
    /*  Positional: p11-kit's header #defines the name of the point field.  */
    *derive = (Cs__DeriveJob) { derive->base, { len, (uint8_t *) ref }, { 0, NULL }, { sizeof point, point } };
    req->jobs [TH_PROBE_DERIVE]->kind_case = CS__JOB__KIND_DERIVE;
    req->jobs [TH_PROBE_DERIVE]->derive = derive;
    Cs__DestroyKeyJob *destroy = calloc (1, sizeof *destroy);
    cs__destroy_key_job__init (destroy);
    destroy->ref = (char *) ref;
    destroy->object = CKO_PRIVATE_KEY;
    req->jobs [TH_PROBE_DESTROY]->kind_case = CS__JOB__KIND_DESTROY_KEY;
    req->jobs [TH_PROBE_DESTROY]->destroy_key = destroy;
    Cs__SetKeyAttributesJob *set = calloc (1, sizeof *set);
    cs__set_key_attributes_job__init (set);
    set->ref = (char *) ref;
    set->object = CKO_PRIVATE_KEY;
    set->n_attributes = 1;
    set->attributes = attrs;
    req->jobs [TH_PROBE_SET]->kind_case = CS__JOB__KIND_SET_KEY_ATTRIBUTES;
    req->jobs [TH_PROBE_SET]->set_key_attributes = set;
    Cs__CopyKeyJob *copy = calloc (1, sizeof *copy);
    cs__copy_key_job__init (copy);
    copy->ref = (char *) ref;
    copy->object = CKO_PRIVATE_KEY;
    req->jobs [TH_PROBE_COPY]->kind_case = CS__JOB__KIND_COPY_KEY;
    req->jobs [TH_PROBE_COPY]->copy_key = copy;
    Cs__Reply *reply = th_call (dealer, req);
    ck_assert_uint_eq (reply->rv, CKR_OK);
    ck_assert_uint_eq (reply->n_results, TH_PROBE_JOBS);
    for (size_t i = 0; i < TH_PROBE_JOBS; i++)
        rvs [i] = reply->results [i]->rv;
    cs__reply__free_unpacked (reply, NULL);
    th_request_free (req);
}

/*  Asserts that `ref` gets, in every job kind, the answers of a ref that
 *  does not exist (CKR_KEY_HANDLE_INVALID for sign, decrypt and derive,
 *  CKR_OBJECT_HANDLE_INVALID for key jobs: docs/CONTRACTS.md "Key refs and
 *  routing"), and the same answers as `unknown`, a ref nobody has.  */
static inline void
th_probe_unknown (zsock_t *dealer, const uint8_t *ticket, size_t ticket_len, const char *ref,
                  const char *unknown)
{
    static const uint64_t expect [TH_PROBE_JOBS] = {
        CKR_KEY_HANDLE_INVALID, CKR_KEY_HANDLE_INVALID, CKR_KEY_HANDLE_INVALID,
        CKR_OBJECT_HANDLE_INVALID, CKR_OBJECT_HANDLE_INVALID, CKR_OBJECT_HANDLE_INVALID };
    uint64_t got [TH_PROBE_JOBS], none [TH_PROBE_JOBS];
    th_ref_probe (dealer, ticket, ticket_len, ref, got);
    th_ref_probe (dealer, ticket, ticket_len, unknown, none);
    for (size_t i = 0; i < TH_PROBE_JOBS; i++) {
        ck_assert_msg (got [i] == expect [i], "ref %s, job %zu: %s, want %s", ref, i,
                       cs_rv_name (got [i]), cs_rv_name (expect [i]));
        ck_assert_msg (got [i] == none [i], "ref %s, job %zu: %s, but %s for unknown %s", ref, i,
                       cs_rv_name (got [i]), cs_rv_name (none [i]), unknown);
    }
}

/*  DER DigestInfo of SHA-256 (msg) into out (51 bytes).  */
static inline size_t
th_digest_info (const char *msg, uint8_t out [51])
{
    static const uint8_t prefix [19] = { 0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48,
        0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20 };
    memcpy (out, prefix, 19);
    SHA256 ((const uint8_t *) msg, strlen (msg), out + 19);
    return 51;
}

/*  Verifies an RSA PKCS#1 v1.5 signature over a DigestInfo (raw, no md).  */
static inline bool
th_verify_rsa_pkcs1 (EVP_PKEY *pkey, const uint8_t *di, size_t di_len, const uint8_t *sig, size_t sig_len)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (pkey, NULL);
    bool ok = ctx && EVP_PKEY_verify_init (ctx) > 0
           && EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_PADDING) > 0
           && EVP_PKEY_verify (ctx, sig, sig_len, di, di_len) == 1;
    EVP_PKEY_CTX_free (ctx);
    return ok;
}

/*  Verifies RSA-PSS (SHA-256, MGF1-SHA256, salt 32) over a SHA-256 digest.  */
static inline bool
th_verify_rsa_pss (EVP_PKEY *pkey, const uint8_t *digest, const uint8_t *sig, size_t sig_len)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (pkey, NULL);
    bool ok = ctx && EVP_PKEY_verify_init (ctx) > 0
           && EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_PSS_PADDING) > 0
           && EVP_PKEY_CTX_set_signature_md (ctx, EVP_sha256 ()) > 0
           && EVP_PKEY_CTX_set_rsa_mgf1_md (ctx, EVP_sha256 ()) > 0
           && EVP_PKEY_CTX_set_rsa_pss_saltlen (ctx, 32) > 0
           && EVP_PKEY_verify (ctx, sig, sig_len, digest, 32) == 1;
    EVP_PKEY_CTX_free (ctx);
    return ok;
}

/*  Verifies a raw r||s ECDSA signature over a digest.  */
static inline bool
th_verify_ecdsa (EVP_PKEY *pkey, const uint8_t *digest, size_t dlen, const uint8_t *sig, size_t sig_len)
{
    ECDSA_SIG *es = ECDSA_SIG_new ();
    ECDSA_SIG_set0 (es, BN_bin2bn (sig, (int) sig_len / 2, NULL),
                    BN_bin2bn (sig + sig_len / 2, (int) sig_len / 2, NULL));
    unsigned char *der = NULL;
    int der_len = i2d_ECDSA_SIG (es, &der);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (pkey, NULL);
    bool ok = der_len > 0 && ctx && EVP_PKEY_verify_init (ctx) > 0
           && EVP_PKEY_verify (ctx, der, (size_t) der_len, digest, dlen) == 1;
    EVP_PKEY_CTX_free (ctx);
    OPENSSL_free (der);
    ECDSA_SIG_free (es);
    return ok;
}

/*  Encrypts with RSA OAEP (md, mgf1 md, optional label) or PKCS#1 v1.5 when
 *  md is NULL.  Returns the ciphertext length written to out.  */
static inline size_t
th_rsa_encrypt (EVP_PKEY *pkey, const EVP_MD *md, const char *label, const char *msg,
                uint8_t *out, size_t cap)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new (pkey, NULL);
    size_t len = cap;
    ck_assert (ctx && EVP_PKEY_encrypt_init (ctx) > 0);
    if (md) {
        ck_assert (EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_OAEP_PADDING) > 0);
        ck_assert (EVP_PKEY_CTX_set_rsa_oaep_md (ctx, md) > 0);
        ck_assert (EVP_PKEY_CTX_set_rsa_mgf1_md (ctx, md) > 0);
        if (label)
            ck_assert (EVP_PKEY_CTX_set0_rsa_oaep_label (ctx, OPENSSL_strdup (label), (int) strlen (label)) > 0);
    }
    else
        ck_assert (EVP_PKEY_CTX_set_rsa_padding (ctx, RSA_PKCS1_PADDING) > 0);
    ck_assert (EVP_PKEY_encrypt (ctx, out, &len, (const uint8_t *) msg, strlen (msg)) > 0);
    EVP_PKEY_CTX_free (ctx);
    return len;
}

/*  Asks the frontend actor for its counters: jobs of board `name`.  */
static inline uint64_t
th_board_jobs (zactor_t *frontend, const char *name, uint64_t *errors_p)
{
    zstr_send (frontend, "STATS");
    zmsg_t *msg = zmsg_recv (frontend);
    uint64_t jobs = UINT64_MAX;
    char prefix [128];
    snprintf (prefix, sizeof prefix, "board=%s ", name);
    for (char *line = zmsg_popstr (msg); line; line = zmsg_popstr (msg)) {
        unsigned long long j, e;
        if (strncmp (line, prefix, strlen (prefix)) == 0
        &&  sscanf (line + strlen (prefix), "jobs=%llu errors=%llu", &j, &e) == 2) {
            jobs = j;
            if (errors_p)
                *errors_p = e;
        }
        free (line);
    }
    zmsg_destroy (&msg);
    return jobs;
}

#endif
