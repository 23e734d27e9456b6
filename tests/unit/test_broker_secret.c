/*  test_broker_secret.c — token secret keys at the broker (issue #10;
 *  broker/keys/secretkeys.h), whole broker in-process with one openssl board:
 *  GenerateKeyJob and ImportKeyJob with secret_value make keystore rows
 *  with the defaults and the template's rules; a SymJob naming the key's
 *  ref runs with the sealed value (AES-ECB checked with OpenSSL's EVP);
 *  usage flags, key type and size are enforced; another tenant's ref and a
 *  destroyed key are CKR_KEY_HANDLE_INVALID; a sign job with a secret
 *  key's ref is CKR_KEY_TYPE_INCONSISTENT; a generation re-sent with its
 *  idempotency id makes one key; attributes change and the key copies as
 *  the row's CKO_SECRET_KEY object.  Two clients: alice (tenant
 *  demo) and eve (tenant other).  Needs CRYPTOSERVER_DRIVER_DIR.
 */
#include <openssl/evp.h>
#include "cs_attr_rules.h"
#include "cs_driver.h"
#include "test_broker_fixture.h"
#include "test_run.h"

static char *s_dir;
static broker_config_t *s_config;
static server_t *s_server;
static zsock_t *s_alice, *s_eve;
static uint8_t *s_ticket, *s_eve_ticket;
static size_t s_ticket_len, s_eve_ticket_len;

static const uint8_t s_key [16] = { 0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6,
                                    0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c };

static void
s_setup (void)
{
    uint64_t rv = 0;
    s_dir = th_tmpdir ();
    th_certs (s_dir, "alice", "demo");
    th_client_add (s_dir, "eve", "other");
    th_keystore (s_dir);
    tb_conf_write (s_dir, "", "keys\n    usage-separation = strict\n        other = spec\n"
                   "drivers\n    cpu\n        type = openssl\n        threads = 1\n");
    s_server = tb_start (s_dir, &s_config);
    s_alice = th_dealer (s_dir, "alice", server_endpoint (s_server));
    s_eve = th_dealer (s_dir, "eve", server_endpoint (s_server));
    s_ticket = th_login_ok (s_alice, "1234", &s_ticket_len);
    s_eve_ticket = th_login (s_eve, "5678", &s_eve_ticket_len, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
}

static void
s_teardown (void)
{
    zsock_destroy (&s_alice);
    zsock_destroy (&s_eve);
    tb_stop (&s_server, &s_config);
    free (s_ticket);
    free (s_eve_ticket);
    th_tmpdir_remove (&s_dir);
}

static Cs__Attribute
s_number (CK_ATTRIBUTE_TYPE type, uint64_t value)
{
    Cs__Attribute attr = CS__ATTRIBUTE__INIT;
    attr.type = type;
    attr.value_case = CS__ATTRIBUTE__VALUE_NUMBER;
    attr.number = value;
    return attr;
}

static Cs__Attribute
s_flag (CK_ATTRIBUTE_TYPE type, bool value)
{
    Cs__Attribute attr = CS__ATTRIBUTE__INIT;
    attr.type = type;
    attr.value_case = CS__ATTRIBUTE__VALUE_FLAG;
    attr.flag = value;
    return attr;
}

/*  Sends one job as client (with ticket) and returns its result's rv; the
 *  reply goes to *reply_p (caller frees) when given.  */
static uint64_t
s_call (zsock_t *client, const uint8_t *ticket, size_t ticket_len, Cs__Job *job, Cs__Reply **reply_p)
{
    Cs__Request req = CS__REQUEST__INIT;
    Cs__Job *jobs [1] = { job };
    req.version_min = CS_PROTOCOL_VERSION_MIN;
    req.version_max = CS_PROTOCOL_VERSION;
    req.request_id = 7;
    req.ticket = (ProtobufCBinaryData) { ticket_len, (uint8_t *) ticket };
    req.n_jobs = 1;
    req.jobs = jobs;
    Cs__Reply *reply = th_call (client, &req);
    ck_assert_uint_eq (reply->rv, CKR_OK);
    ck_assert_uint_eq (reply->n_results, 1);
    uint64_t rv = reply->results [0]->rv;
    if (reply_p)
        *reply_p = reply;
    else
        cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  The flag `type` among a key's private attributes (-1: absent).  */
static int
s_key_flag (const Cs__KeyInfo *info, CK_ATTRIBUTE_TYPE type)
{
    for (size_t i = 0; i < info->n_private_attributes; i++)
        if (info->private_attributes [i]->type == type)
            return info->private_attributes [i]->flag ? 1 : 0;
    return -1;
}

/*  alice's ImportKeyJob of value (len bytes) with the template; the ref
 *  of the stored key (caller frees) or NULL, *rv_p the job's rv.  */
static char *s_import_by (zsock_t *client, const uint8_t *ticket, size_t ticket_len, const uint8_t *value,
                          size_t len, Cs__Attribute **tmpl, size_t n, uint64_t *rv_p);

static char *
s_import (const uint8_t *value, size_t len, Cs__Attribute **tmpl, size_t n, uint64_t *rv_p)
{
    return s_import_by (s_alice, s_ticket, s_ticket_len, value, len, tmpl, n, rv_p);
}

/*  As s_import, as client.  */
static char *
s_import_by (zsock_t *client, const uint8_t *ticket, size_t ticket_len, const uint8_t *value, size_t len,
             Cs__Attribute **tmpl, size_t n, uint64_t *rv_p)
{
    Cs__ImportKeyJob import = CS__IMPORT_KEY_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    Cs__Reply *reply = NULL;
    char *ref = NULL;
    import.secret_value = (ProtobufCBinaryData) { len, (uint8_t *) value };
    import.template_ = tmpl;
    import.n_template_ = n;
    job.kind_case = CS__JOB__KIND_IMPORT_KEY;
    job.import_key = &import;
    *rv_p = s_call (client, ticket, ticket_len, &job, &reply);
    if (*rv_p == CKR_OK) {
        const Cs__KeyInfo *info = reply->results [0]->imported->key;
        ck_assert_uint_eq (info->key_type, CKK_AES);
        ck_assert_uint_eq (info->bits, len * 8);
        ck_assert (info->has_private && !info->has_public);
        ck_assert_int_eq (s_key_flag (info, CKA_SENSITIVE), 1);
        ck_assert_int_eq (s_key_flag (info, CKA_EXTRACTABLE), 0);
        ck_assert_int_eq (s_key_flag (info, CKA_LOCAL), 0);
        ck_assert_int_eq (s_key_flag (info, CKA_SIGN_RECOVER), -1);    /* no attribute of a secret key */
        ref = strdup (info->ref);
    }
    cs__reply__free_unpacked (reply, NULL);
    return ref;
}

/*  A SymJob by ref as client: AES-ECB (or `mech`) of 16 bytes; the
 *  result into out (16 bytes) on CKR_OK.  */
static uint64_t
s_sym (zsock_t *client, const uint8_t *ticket, size_t ticket_len, const char *ref, uint64_t mech,
       uint64_t operation, uint8_t out [16])
{
    static const uint8_t plain [16] = "cryptoserver-16b";
    Cs__SymJob sym = CS__SYM_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    Cs__Reply *reply = NULL;
    sym.mechanism = mech;
    sym.operation = operation;
    sym.key_id = (ProtobufCBinaryData) { strlen (ref), (uint8_t *) ref };
    sym.data = (ProtobufCBinaryData) { sizeof plain, (uint8_t *) plain };
    job.kind_case = CS__JOB__KIND_SYM;
    job.sym = &sym;
    uint64_t rv = s_call (client, ticket, ticket_len, &job, &reply);
    if (rv == CKR_OK && mech == CKM_AES_ECB) {
        ck_assert_uint_eq (reply->results [0]->data.len, 16);
        memcpy (out, reply->results [0]->data.data, 16);
    }
    cs__reply__free_unpacked (reply, NULL);
    return rv;
}

START_TEST (test_import_and_use_by_ref)
{
    Cs__Attribute klass = s_number (CKA_CLASS, CKO_SECRET_KEY), type = s_number (CKA_KEY_TYPE, CKK_AES);
    Cs__Attribute no_encrypt = s_flag (CKA_ENCRYPT, false);
    Cs__Attribute *tmpl [] = { &klass, &type, &no_encrypt };
    uint64_t rv = 0;
    uint8_t got [16], want [16];
    int want_len = 0;
    char *ref = s_import (s_key, sizeof s_key, tmpl, 2, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
    /*  The ciphertext of the sealed value is EVP's of the same key.  */
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new ();
    ck_assert (EVP_EncryptInit_ex (ctx, EVP_aes_128_ecb (), NULL, s_key, NULL) == 1);
    EVP_CIPHER_CTX_set_padding (ctx, 0);
    ck_assert (EVP_EncryptUpdate (ctx, want, &want_len, (const uint8_t *) "cryptoserver-16b", 16) == 1);
    EVP_CIPHER_CTX_free (ctx);
    ck_assert_uint_eq (s_sym (s_alice, s_ticket, s_ticket_len, ref, CKM_AES_ECB, CS_SYM_ENCRYPT, got), CKR_OK);
    ck_assert_mem_eq (got, want, 16);
    /*  Twice: the second run comes from the key cache.  */
    ck_assert_uint_eq (s_sym (s_alice, s_ticket, s_ticket_len, ref, CKM_AES_ECB, CS_SYM_ENCRYPT, got), CKR_OK);
    ck_assert_mem_eq (got, want, 16);
    /*  An AES key does not HMAC; a key without CKA_ENCRYPT does not encrypt.  */
    ck_assert_uint_eq (s_sym (s_alice, s_ticket, s_ticket_len, ref, CKM_SHA256_HMAC, CS_SYM_SIGN, got),
                       CKR_KEY_TYPE_INCONSISTENT);
    char *locked = s_import (s_key, sizeof s_key, tmpl, 3, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
    ck_assert_uint_eq (s_sym (s_alice, s_ticket, s_ticket_len, locked, CKM_AES_ECB, CS_SYM_ENCRYPT, got),
                       CKR_KEY_FUNCTION_NOT_PERMITTED);
    ck_assert_uint_eq (s_sym (s_alice, s_ticket, s_ticket_len, locked, CKM_AES_ECB, CS_SYM_DECRYPT, got), CKR_OK);
    /*  A sign job naming a secret key is no key pair's.  */
    uint8_t di [51];
    th_digest_info ("secret", di);
    Cs__Job job = CS__JOB__INIT;
    Cs__Mechanism *mech = th_job_crypto (&job, true, (const uint8_t *) ref, strlen (ref), CKM_RSA_PKCS, di, 51);
    ck_assert_uint_eq (s_call (s_alice, s_ticket, s_ticket_len, &job, NULL), CKR_KEY_TYPE_INCONSISTENT);
    free (mech);
    free (job.sign);
    /*  eve (tenant other) gets the answer of a ref nobody has.  */
    ck_assert_uint_eq (s_sym (s_eve, s_eve_ticket, s_eve_ticket_len, ref, CKM_AES_ECB, CS_SYM_ENCRYPT, got),
                       CKR_KEY_HANDLE_INVALID);
    ck_assert_uint_eq (s_sym (s_eve, s_eve_ticket, s_eve_ticket_len, "ks:00112233445566778899aabbccddeeff",
                              CKM_AES_ECB, CS_SYM_ENCRYPT, got), CKR_KEY_HANDLE_INVALID);
    /*  Destroyed (as the CKO_SECRET_KEY object; not as a private key): gone.  */
    Cs__DestroyKeyJob destroy = CS__DESTROY_KEY_JOB__INIT;
    Cs__Job djob = CS__JOB__INIT;
    destroy.ref = ref;
    destroy.object = CKO_PRIVATE_KEY;
    djob.kind_case = CS__JOB__KIND_DESTROY_KEY;
    djob.destroy_key = &destroy;
    ck_assert_uint_eq (s_call (s_alice, s_ticket, s_ticket_len, &djob, NULL), CKR_OBJECT_HANDLE_INVALID);
    destroy.object = CKO_SECRET_KEY;
    ck_assert_uint_eq (s_call (s_eve, s_eve_ticket, s_eve_ticket_len, &djob, NULL), CKR_OBJECT_HANDLE_INVALID);
    ck_assert_uint_eq (s_call (s_alice, s_ticket, s_ticket_len, &djob, NULL), CKR_OK);
    ck_assert_uint_eq (s_sym (s_alice, s_ticket, s_ticket_len, ref, CKM_AES_ECB, CS_SYM_ENCRYPT, got),
                       CKR_KEY_HANDLE_INVALID);
    free (ref);
    free (locked);
}
END_TEST

/*  C_SetAttributeValue and C_CopyObject of a token secret key go to its
 *  row as the CKO_SECRET_KEY object: the copy is a new key of the same
 *  value, a usage flag turned off holds at once, and CKA_EXTRACTABLE does
 *  not go back to TRUE.  */
START_TEST (test_set_and_copy)
{
    Cs__Attribute klass = s_number (CKA_CLASS, CKO_SECRET_KEY), type = s_number (CKA_KEY_TYPE, CKK_AES);
    Cs__Attribute *tmpl [] = { &klass, &type };
    uint64_t rv = 0;
    uint8_t want [16], got [16];
    char *ref = s_import (s_key, sizeof s_key, tmpl, 2, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
    ck_assert_uint_eq (s_sym (s_alice, s_ticket, s_ticket_len, ref, CKM_AES_ECB, CS_SYM_ENCRYPT, want), CKR_OK);
    Cs__CopyKeyJob copy = CS__COPY_KEY_JOB__INIT;
    Cs__Job cjob = CS__JOB__INIT;
    Cs__Reply *reply = NULL;
    copy.ref = ref;
    copy.object = CKO_SECRET_KEY;
    cjob.kind_case = CS__JOB__KIND_COPY_KEY;
    cjob.copy_key = &copy;
    ck_assert_uint_eq (s_call (s_alice, s_ticket, s_ticket_len, &cjob, &reply), CKR_OK);
    char *copied = strdup (reply->results [0]->key->key->ref);
    ck_assert_str_ne (copied, ref);
    cs__reply__free_unpacked (reply, NULL);
    ck_assert_uint_eq (s_sym (s_alice, s_ticket, s_ticket_len, copied, CKM_AES_ECB, CS_SYM_ENCRYPT, got), CKR_OK);
    ck_assert_mem_eq (got, want, 16);
    Cs__Attribute off = s_flag (CKA_ENCRYPT, false), extractable = s_flag (CKA_EXTRACTABLE, true);
    Cs__Attribute *set_off [] = { &off }, *set_extractable [] = { &extractable };
    Cs__SetKeyAttributesJob set = CS__SET_KEY_ATTRIBUTES_JOB__INIT;
    Cs__Job sjob = CS__JOB__INIT;
    set.ref = copied;
    set.object = CKO_SECRET_KEY;
    set.attributes = set_off;
    set.n_attributes = 1;
    sjob.kind_case = CS__JOB__KIND_SET_KEY_ATTRIBUTES;
    sjob.set_key_attributes = &set;
    ck_assert_uint_eq (s_call (s_alice, s_ticket, s_ticket_len, &sjob, NULL), CKR_OK);
    ck_assert_uint_eq (s_sym (s_alice, s_ticket, s_ticket_len, copied, CKM_AES_ECB, CS_SYM_ENCRYPT, got),
                       CKR_KEY_FUNCTION_NOT_PERMITTED);
    ck_assert_uint_eq (s_sym (s_alice, s_ticket, s_ticket_len, ref, CKM_AES_ECB, CS_SYM_ENCRYPT, got), CKR_OK);
    set.attributes = set_extractable;
    ck_assert_uint_eq (s_call (s_alice, s_ticket, s_ticket_len, &sjob, NULL), CKR_ATTRIBUTE_READ_ONLY);
    set.object = CKO_PRIVATE_KEY;
    ck_assert_uint_eq (s_call (s_alice, s_ticket, s_ticket_len, &sjob, NULL), CKR_OBJECT_HANDLE_INVALID);
    free (copied);
    free (ref);
}
END_TEST

START_TEST (test_template_rules)
{
    Cs__Attribute klass = s_number (CKA_CLASS, CKO_SECRET_KEY), type = s_number (CKA_KEY_TYPE, CKK_AES);
    Cs__Attribute wrong_class = s_number (CKA_CLASS, CKO_PRIVATE_KEY), len = s_number (CKA_VALUE_LEN, 32);
    Cs__Attribute local = s_flag (CKA_LOCAL, true);
    Cs__Attribute *good [] = { &klass, &type }, *bad_class [] = { &wrong_class, &type };
    Cs__Attribute *bad_len [] = { &type, &len }, *no_type [] = { &klass }, *read_only [] = { &type, &local };
    uint64_t rv = 0;
    uint8_t twenty [20] = { 0 };
    ck_assert_ptr_null (s_import (twenty, sizeof twenty, good, 2, &rv));
    ck_assert_uint_eq (rv, CKR_ATTRIBUTE_VALUE_INVALID);
    ck_assert_ptr_null (s_import (s_key, sizeof s_key, bad_class, 2, &rv));
    ck_assert_uint_eq (rv, CKR_TEMPLATE_INCONSISTENT);
    ck_assert_ptr_null (s_import (s_key, sizeof s_key, bad_len, 2, &rv));
    ck_assert_uint_eq (rv, CKR_TEMPLATE_INCONSISTENT);
    ck_assert_ptr_null (s_import (s_key, sizeof s_key, no_type, 1, &rv));
    ck_assert_uint_eq (rv, CKR_TEMPLATE_INCOMPLETE);
    ck_assert_ptr_null (s_import (s_key, sizeof s_key, read_only, 2, &rv));
    ck_assert_uint_eq (rv, CKR_ATTRIBUTE_READ_ONLY);
}
END_TEST

START_TEST (test_generate)
{
    Cs__GenerateKeyJob gen = CS__GENERATE_KEY_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    Cs__Reply *reply = NULL;
    uint8_t out [16];
    job.kind_case = CS__JOB__KIND_GENERATE_KEY;
    job.generate_key = &gen;
    gen.mechanism = CKM_AES_KEY_GEN;
    gen.value_len = 20;
    ck_assert_uint_eq (s_call (s_alice, s_ticket, s_ticket_len, &job, NULL), CKR_KEY_SIZE_RANGE);
    gen.mechanism = CKM_RSA_PKCS_KEY_PAIR_GEN;
    gen.value_len = 32;
    ck_assert_uint_eq (s_call (s_alice, s_ticket, s_ticket_len, &job, NULL), CKR_MECHANISM_INVALID);
    ck_assert_uint_eq (s_call (s_alice, NULL, 0, &job, NULL), CKR_USER_NOT_LOGGED_IN);
    gen.mechanism = CKM_AES_KEY_GEN;
    ck_assert_uint_eq (s_call (s_alice, s_ticket, s_ticket_len, &job, &reply), CKR_OK);
    const Cs__KeyInfo *info = reply->results [0]->key->key;
    ck_assert_uint_eq (info->key_type, CKK_AES);
    ck_assert_uint_eq (info->bits, 256);
    ck_assert_str_eq (info->home, "keystore");
    ck_assert_int_eq (s_key_flag (info, CKA_LOCAL), 1);
    ck_assert_int_eq (s_key_flag (info, CKA_ALWAYS_SENSITIVE), 1);
    ck_assert_int_eq (s_key_flag (info, CKA_NEVER_EXTRACTABLE), 1);
    ck_assert_int_eq (s_key_flag (info, CKA_ENCRYPT), 1);
    ck_assert_int_eq (s_key_flag (info, CKA_SIGN), 0);
    char *ref = strdup (info->ref);
    cs__reply__free_unpacked (reply, NULL);
    ck_assert_uint_eq (s_sym (s_alice, s_ticket, s_ticket_len, ref, CKM_AES_ECB, CS_SYM_ENCRYPT, out), CKR_OK);
    /*  The row is listed with the tenant's keys, not with eve's.  */
    Cs__ListKeysJob list = CS__LIST_KEYS_JOB__INIT;
    Cs__Job ljob = CS__JOB__INIT;
    ljob.kind_case = CS__JOB__KIND_LIST_KEYS;
    ljob.list_keys = &list;
    ck_assert_uint_eq (s_call (s_alice, s_ticket, s_ticket_len, &ljob, &reply), CKR_OK);
    ck_assert_uint_eq (reply->results [0]->keys->n_keys, 1);
    ck_assert_str_eq (reply->results [0]->keys->keys [0]->ref, ref);
    cs__reply__free_unpacked (reply, NULL);
    ck_assert_uint_eq (s_call (s_eve, s_eve_ticket, s_eve_ticket_len, &ljob, &reply), CKR_OK);
    ck_assert_uint_eq (reply->results [0]->keys->n_keys, 0);
    cs__reply__free_unpacked (reply, NULL);
    free (ref);
}
END_TEST

/*  A GenerateKeyJob sent twice with one idempotency id (a retry after a
 *  lost reply) makes one key: the second answer is the first's.  */
START_TEST (test_generate_once)
{
    Cs__GenerateKeyJob gen = CS__GENERATE_KEY_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    Cs__Reply *first = NULL, *again = NULL;
    uint8_t id [16] = "seckey-idem-0001";
    gen.mechanism = CKM_GENERIC_SECRET_KEY_GEN;
    gen.value_len = 48;
    job.kind_case = CS__JOB__KIND_GENERATE_KEY;
    job.generate_key = &gen;
    job.idempotency_id = (ProtobufCBinaryData) { sizeof id, id };
    ck_assert_uint_eq (s_call (s_alice, s_ticket, s_ticket_len, &job, &first), CKR_OK);
    ck_assert_uint_eq (s_call (s_alice, s_ticket, s_ticket_len, &job, &again), CKR_OK);
    const Cs__KeyInfo *a = first->results [0]->key->key, *b = again->results [0]->key->key;
    ck_assert_uint_eq (a->key_type, CKK_GENERIC_SECRET);
    ck_assert_uint_eq (a->bits, 384);
    ck_assert_str_eq (a->ref, b->ref);
    keystore_t *ks = th_keystore_open (s_dir);
    Cs__KeyInfo **infos = NULL;
    size_t count = 0;
    ck_assert_int_eq (keystore_key_list (ks, "demo", &infos, &count), 0);
    ck_assert_uint_eq (count, 1);
    /*  The row's sealed value is the key: 48 bytes once unsealed.  */
    uint8_t *value = NULL;
    size_t len = 0;
    Cs__KeyInfo *info = NULL;
    ck_assert_int_eq (keystore_key_get (ks, "demo", a->ref, &info, &value, &len), 0);
    ck_assert_uint_eq (len, 48);
    OPENSSL_cleanse (value, len);
    free (value);
    cs__key_info__free_unpacked (info, NULL);
    for (size_t i = 0; i < count; i++)
        cs__key_info__free_unpacked (infos [i], NULL);
    free (infos);
    keystore_destroy (&ks);
    cs__reply__free_unpacked (first, NULL);
    cs__reply__free_unpacked (again, NULL);
}
END_TEST

/*  A SymJob by ref with key_wrap (C_WrapKey / C_UnwrapKey) or without, of
 *  CKM_AES_KEY_WRAP on in (len bytes); the result's data in out (up to 64
 *  bytes, *out_len_p).  */
static uint64_t s_kw_by (zsock_t *client, const uint8_t *ticket, size_t ticket_len, const char *ref,
                         uint64_t operation, bool key_wrap, const uint8_t *in, size_t len, uint8_t *out,
                         size_t *out_len_p);

static uint64_t
s_kw (const char *ref, uint64_t operation, bool key_wrap, const uint8_t *in, size_t len, uint8_t *out,
      size_t *out_len_p)
{
    return s_kw_by (s_alice, s_ticket, s_ticket_len, ref, operation, key_wrap, in, len, out, out_len_p);
}

/*  As s_kw, as client.  */
static uint64_t
s_kw_by (zsock_t *client, const uint8_t *ticket, size_t ticket_len, const char *ref, uint64_t operation,
         bool key_wrap, const uint8_t *in, size_t len, uint8_t *out, size_t *out_len_p)
{
    Cs__SymJob sym = CS__SYM_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    Cs__Reply *reply = NULL;
    sym.mechanism = CKM_AES_KEY_WRAP;
    sym.operation = operation;
    sym.key_wrap = key_wrap;
    sym.key_id = (ProtobufCBinaryData) { strlen (ref), (uint8_t *) ref };
    sym.data = (ProtobufCBinaryData) { len, (uint8_t *) in };
    job.kind_case = CS__JOB__KIND_SYM;
    job.sym = &sym;
    uint64_t rv = s_call (client, ticket, ticket_len, &job, &reply);
    if (rv == CKR_OK && out) {
        ck_assert_uint_le (reply->results [0]->data.len, 64);
        memcpy (out, reply->results [0]->data.data, reply->results [0]->data.len);
        *out_len_p = reply->results [0]->data.len;
    }
    cs__reply__free_unpacked (reply, NULL);
    return rv;
}

/*  One flag change of a token secret key as client; the job's rv.  */
static uint64_t
s_set_flag (zsock_t *client, const uint8_t *ticket, size_t ticket_len, const char *ref, CK_ATTRIBUTE_TYPE type,
            bool value)
{
    Cs__Attribute flag = s_flag (type, value), *attrs [] = { &flag };
    Cs__SetKeyAttributesJob set = CS__SET_KEY_ATTRIBUTES_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    set.ref = (char *) ref;
    set.object = CKO_SECRET_KEY;
    set.attributes = attrs;
    set.n_attributes = 1;
    job.kind_case = CS__JOB__KIND_SET_KEY_ATTRIBUTES;
    job.set_key_attributes = &set;
    return s_call (client, ticket, ticket_len, &job, NULL);
}

/*  Usage separation on token secret keys (docs/CONTRACTS.md "Usage
 *  separation", common/cs_usage.h), sent straight to the broker as a
 *  client that skips the module would: under strict (tenant demo, alice)
 *  a key that wraps or unwraps never encrypts or decrypts data (Tookan
 *  wrap/decrypt, encrypt/unwrap), a template combining them is
 *  CKR_TEMPLATE_INCONSISTENT, roles only go off, and never so that a
 *  combined key regains a data use; under spec (tenant other, eve) PKCS#11's
 *  own rules.  A job's key_wrap needs a key-wrap mechanism.  */
START_TEST (test_wrap_policy)
{
    Cs__Attribute klass = s_number (CKA_CLASS, CKO_SECRET_KEY), type = s_number (CKA_KEY_TYPE, CKK_AES);
    Cs__Attribute wrap = s_flag (CKA_WRAP, true), unwrap = s_flag (CKA_UNWRAP, true);
    Cs__Attribute enc_on = s_flag (CKA_ENCRYPT, true), dec_on = s_flag (CKA_DECRYPT, true);
    Cs__Attribute *kek_tmpl [] = { &klass, &type, &wrap, &unwrap };     /* data roles default FALSE */
    Cs__Attribute *enc_unwrap [] = { &klass, &type, &unwrap, &enc_on };  /* Tookan encrypt/unwrap */
    Cs__Attribute *wrap_dec [] = { &klass, &type, &wrap, &dec_on };      /* Tookan wrap/decrypt */
    Cs__Attribute *wrap_only [] = { &klass, &type, &wrap };
    static const uint8_t value [16] = "a key to wrap 16";
    uint8_t wrapped [64], back [64], got [16];
    size_t wrapped_len = 0, back_len = 0;
    uint64_t rv = 0;
    char *kek = s_import (s_key, sizeof s_key, kek_tmpl, 4, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
    ck_assert_ptr_null (s_import (s_key, sizeof s_key, enc_unwrap, 4, &rv));
    ck_assert_uint_eq (rv, CKR_TEMPLATE_INCONSISTENT);
    ck_assert_ptr_null (s_import (s_key, sizeof s_key, wrap_dec, 4, &rv));
    ck_assert_uint_eq (rv, CKR_TEMPLATE_INCONSISTENT);
    char *wrapper = s_import (s_key, sizeof s_key, wrap_only, 3, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
    char *data = s_import (s_key, sizeof s_key, (Cs__Attribute *[]) { &klass, &type }, 2, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
    /*  The wrapping key wraps and unwraps, and does nothing else.  */
    ck_assert_uint_eq (s_kw (kek, CS_SYM_ENCRYPT, true, value, 16, wrapped, &wrapped_len), CKR_OK);
    ck_assert_uint_eq (wrapped_len, 24);
    ck_assert_uint_eq (s_kw (kek, CS_SYM_DECRYPT, true, wrapped, 24, back, &back_len), CKR_OK);
    ck_assert_uint_eq (back_len, 16);
    ck_assert_mem_eq (back, value, 16);
    ck_assert_uint_eq (s_kw (kek, CS_SYM_DECRYPT, false, wrapped, 24, NULL, NULL), CKR_KEY_FUNCTION_NOT_PERMITTED);
    ck_assert_uint_eq (s_kw (kek, CS_SYM_ENCRYPT, false, value, 16, NULL, NULL), CKR_KEY_FUNCTION_NOT_PERMITTED);
    ck_assert_uint_eq (s_sym (s_alice, s_ticket, s_ticket_len, kek, CKM_AES_ECB, CS_SYM_DECRYPT, got),
                       CKR_KEY_FUNCTION_NOT_PERMITTED);
    /*  Roles only go off: CKA_DECRYPT on is refused; CKA_UNWRAP off is
        allowed and leaves a key that only wraps.  */
    ck_assert_uint_eq (s_set_flag (s_alice, s_ticket, s_ticket_len, kek, CKA_DECRYPT, true), CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_set_flag (s_alice, s_ticket, s_ticket_len, kek, CKA_UNWRAP, false), CKR_OK);
    ck_assert_uint_eq (s_kw (kek, CS_SYM_DECRYPT, true, wrapped, 24, NULL, NULL), CKR_KEY_FUNCTION_NOT_PERMITTED);
    ck_assert_uint_eq (s_set_flag (s_alice, s_ticket, s_ticket_len, kek, CKA_DECRYPT, true), CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_kw (kek, CS_SYM_DECRYPT, false, wrapped, 24, NULL, NULL), CKR_KEY_FUNCTION_NOT_PERMITTED);
    /*  A wrap-only key wraps, nothing else; a data key never gets CKA_WRAP.  */
    ck_assert_uint_eq (s_kw (wrapper, CS_SYM_ENCRYPT, true, value, 16, NULL, NULL), CKR_OK);
    ck_assert_uint_eq (s_kw (wrapper, CS_SYM_DECRYPT, true, wrapped, 24, NULL, NULL), CKR_KEY_FUNCTION_NOT_PERMITTED);
    ck_assert_uint_eq (s_sym (s_alice, s_ticket, s_ticket_len, wrapper, CKM_AES_ECB, CS_SYM_ENCRYPT, got),
                       CKR_KEY_FUNCTION_NOT_PERMITTED);
    ck_assert_uint_eq (s_set_flag (s_alice, s_ticket, s_ticket_len, data, CKA_WRAP, true), CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_set_flag (s_alice, s_ticket, s_ticket_len, data, CKA_UNWRAP, true), CKR_ATTRIBUTE_READ_ONLY);
    ck_assert_uint_eq (s_kw (data, CS_SYM_ENCRYPT, true, value, 16, NULL, NULL), CKR_KEY_FUNCTION_NOT_PERMITTED);
    ck_assert_uint_eq (s_sym (s_alice, s_ticket, s_ticket_len, data, CKM_AES_ECB, CS_SYM_ENCRYPT, got), CKR_OK);
    /*  Off, then on again: refused.  */
    ck_assert_uint_eq (s_set_flag (s_alice, s_ticket, s_ticket_len, data, CKA_ENCRYPT, false), CKR_OK);
    ck_assert_uint_eq (s_set_flag (s_alice, s_ticket, s_ticket_len, data, CKA_ENCRYPT, true), CKR_ATTRIBUTE_READ_ONLY);
    /*  key_wrap with a mechanism that is no key wrap.  */
    Cs__SymJob sym = CS__SYM_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    sym.mechanism = CKM_AES_ECB;
    sym.operation = CS_SYM_ENCRYPT;
    sym.key_wrap = true;
    sym.key_id = (ProtobufCBinaryData) { strlen (wrapper), (uint8_t *) wrapper };
    sym.data = (ProtobufCBinaryData) { 16, (uint8_t *) value };
    job.kind_case = CS__JOB__KIND_SYM;
    job.sym = &sym;
    ck_assert_uint_eq (s_call (s_alice, s_ticket, s_ticket_len, &job, NULL), CKR_MECHANISM_INVALID);
    /*  Tenant other runs `spec`: the combined key of PKCS#11 (open to the
        attacks above, docs/CONTRACTS.md) wraps, unwraps and decrypts.  */
    char *both = s_import_by (s_eve, s_eve_ticket, s_eve_ticket_len, s_key, sizeof s_key, kek_tmpl, 4, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
    ck_assert_uint_eq (s_kw_by (s_eve, s_eve_ticket, s_eve_ticket_len, both, CS_SYM_ENCRYPT, true, value, 16,
                                wrapped, &wrapped_len), CKR_OK);
    ck_assert_uint_eq (s_kw_by (s_eve, s_eve_ticket, s_eve_ticket_len, both, CS_SYM_DECRYPT, false, wrapped, 24,
                                back, &back_len), CKR_OK);
    ck_assert_uint_eq (s_set_flag (s_eve, s_eve_ticket, s_eve_ticket_len, both, CKA_SIGN, true), CKR_OK);
    free (kek);
    free (wrapper);
    free (data);
    free (both);
}
END_TEST

/*  CKA_ALLOWED_MECHANISMS binds SymJobs on token secret keys at the
 *  broker (issue 19 item 4): an AES key limited to CKM_AES_GCM answers no
 *  CKM_AES_ECB (whose output of a zero block is GCM's GHASH key), sent
 *  straight to the broker; CKR_MECHANISM_INVALID.  Both policies.  */
START_TEST (test_allowed_mechanisms)
{
    Cs__Attribute klass = s_number (CKA_CLASS, CKO_SECRET_KEY), type = s_number (CKA_KEY_TYPE, CKK_AES);
    uint8_t gcm_only [CS_ATTR_MECH_WIRE_BYTES];
    CK_MECHANISM_TYPE gcm = CKM_AES_GCM;
    cs_attr_mechs_to_wire (&gcm, sizeof gcm, gcm_only);
    Cs__Attribute mechs = CS__ATTRIBUTE__INIT;
    mechs.type = CKA_ALLOWED_MECHANISMS;
    mechs.value_case = CS__ATTRIBUTE__VALUE_BYTES;
    mechs.bytes = (ProtobufCBinaryData) { sizeof gcm_only, gcm_only };
    Cs__Attribute *tmpl [] = { &klass, &type, &mechs };
    uint8_t got [16];
    uint64_t rv = 0;
    char *ref = s_import (s_key, sizeof s_key, tmpl, 3, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
    ck_assert_uint_eq (s_sym (s_alice, s_ticket, s_ticket_len, ref, CKM_AES_ECB, CS_SYM_ENCRYPT, got),
                       CKR_MECHANISM_INVALID);
    ck_assert_uint_eq (s_sym (s_alice, s_ticket, s_ticket_len, ref, CKM_AES_ECB, CS_SYM_DECRYPT, got),
                       CKR_MECHANISM_INVALID);
    char *spec = s_import_by (s_eve, s_eve_ticket, s_eve_ticket_len, s_key, sizeof s_key, tmpl, 3, &rv);
    ck_assert_uint_eq (rv, CKR_OK);
    ck_assert_uint_eq (s_sym (s_eve, s_eve_ticket, s_eve_ticket_len, spec, CKM_AES_ECB, CS_SYM_ENCRYPT, got),
                       CKR_MECHANISM_INVALID);
    free (ref);
    free (spec);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("broker_secret");
    TCase *tc = tcase_create ("secret");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 120);
    tcase_add_test (tc, test_import_and_use_by_ref);
    tcase_add_test (tc, test_template_rules);
    tcase_add_test (tc, test_set_and_copy);
    tcase_add_test (tc, test_generate);
    tcase_add_test (tc, test_generate_once);
    tcase_add_test (tc, test_wrap_policy);
    tcase_add_test (tc, test_allowed_mechanisms);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    if (!tr_driver_dir_set ())
        return 77;
    zsys_init ();
    return tr_run (s_suite ());
}
