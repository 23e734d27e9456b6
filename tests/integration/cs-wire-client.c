/*  cs-wire-client — sends one job straight to a broker, without the module,
 *  as any application holding a client's CURVE key can (issue 19: the
 *  broker is the policy point), and prints the job's result code.
 *
 *  cs-wire-client --endpoint E --broker-cert F --client-cert F [--pin PIN]
 *                 [--drop-ticket] [--context LABEL] [--deadline-ms N] [--burst N] JOB ARGS...
 *
 *  With --pin it logs in as CKU_USER first (a LoginJob, as C_Login does)
 *  and sends the ticket with the job; with --drop-ticket too, the ticket
 *  only finds the key (the key list) and the job goes without it, as from
 *  a client that never logged in but knows a ref (docs/CONTRACTS.md "Login
 *  tickets": a job naming a server-held key needs the ticket).  With
 *  --context LABEL (and --pin) it also makes a context-specific login
 *  (CKU_CONTEXT_SPECIFIC, the same PIN) for the key labelled LABEL and sends
 *  that context ticket with a sign or decrypt job (docs/CONTRACTS.md
 *  "Context-specific login"), whichever key the job names.  A key is named by its CKA_LABEL: the
 *  client lists the tenant's keys (ListKeysJob) and uses the ref of the
 *  first with that label.  Jobs (HEX: bytes in hex; MECH: a CKM_ name of
 *  common/cs_mech.h or a number; ATTR: a CKA_ name of
 *  common/cs_attr_rules.h):
 *
 *    sign LABEL MECH HEX            SignJob
 *    decrypt LABEL MECH HEX         DecryptJob (CKM_RSA_PKCS_OAEP: SHA-256, MGF1-SHA-256)
 *    unwrap LABEL MECH HEX          DecryptJob with unwrap (C_UnwrapKey's job)
 *    derive LABEL HEX               DeriveJob (the peer's point)
 *    decapsulate LABEL HEX          DecapsulateJob (an ML-KEM ciphertext; issue #23)
 *    sym LABEL MECH OP HEX          SymJob on a token secret key; OP encrypt, decrypt, mac;
 *                                   CBC: a zero IV; GCM: a 12-byte zero IV, 128-bit tag
 *    keywrap LABEL MECH OP HEX      SymJob with key_wrap (C_WrapKey / C_UnwrapKey)
 *    set LABEL OBJECT ATTR 0|1      SetKeyAttributesJob; OBJECT private, public, secret
 *    copy LABEL OBJECT ATTR 0|1     CopyKeyJob
 *    list PAGE                      ListKeysJob pages of PAGE keys (0: the whole list in one
 *                                   reply) until one says no more; prints "CKR_OK pages P
 *                                   keys K largest L" (L: keys in the largest page) or the
 *                                   first error (docs/CONTRACTS.md "Key lists in pages")
 *    genkp-ec LABEL                 GenerateKeyPairJob of a token EC P-256 pair labelled
 *                                   LABEL (C_GenerateKeyPair's job; tenant quotas)
 *    genkp-rsa BITS IDEM            GenerateKeyPairJob of a token RSA pair (e = 65537, no
 *                                   label: the broker picks one) with Job.idempotency_id
 *                                   the bytes of hex IDEM, as the module sends it again
 *                                   after a failover; prints " REF" of the key made
 *    obj-new, obj-set, obj-destroy  certificate and data-object jobs (cs-wire-objects.h)
 *
 *  --deadline-ms sets the job's Request.deadline_ms (default 10000; the
 *  client waits for the reply that long and 5 s more, at least 15 s); with
 *  --burst N the job is sent N times before any reply is read (tenant
 *  quotas: quota-tenants.sh) and a line is printed per reply.
 *
 *  Prints one line: the job's CKR_ name (cs_rv_name), or the request's when
 *  the whole request was refused; with a CKR_OK result of data also
 *  " HEX" of the data.  Exit 0 when a result came, 1 when the key was not
 *  found (prints "no key LABEL"), 2 on bad usage or no reply.
 */
#include <getopt.h>
#include <czmq.h>
#include <p11-kit/pkcs11.h>
#include "cs_attr_rules.h"
#include "cs_mech.h"
#include "cs_wire.h"
#include "cs-wire-objects.h"

#define S_WAIT_MS 15000
#define S_MAX_HEX 4096
/*  SymJob.operation (proto/cryptoserver.proto).  */
#define S_SYM_ENCRYPT 1
#define S_SYM_DECRYPT 2
#define S_SYM_SIGN 3

typedef struct {
    zsock_t *dealer;
    uint8_t ticket [256];
    size_t ticket_len;
    bool drop_ticket;               /* the ticket goes with key lists only */
    uint8_t context [256];          /* --context: a context ticket for sign and decrypt jobs */
    size_t context_len;
    uint64_t next_id;
    uint32_t deadline_ms;           /* Request.deadline_ms (--deadline-ms, default 10000) */
    int burst;                      /* --burst: the job goes this many times at once */
} s_client_t;

static void
s_usage (void)
{
    fprintf (stderr, "usage: cs-wire-client --endpoint E --broker-cert F --client-cert F [--pin PIN] [--drop-ticket] "
             "[--context LABEL] [--deadline-ms N] [--burst N] "
             "sign|decrypt|unwrap|derive|decapsulate|sym|keywrap|set|copy|list|genkp-ec|genkp-rsa|obj-new|obj-set|obj-destroy ARGS...\n");
}

/*  Sends a request of job; its id, or 0 when it could not be sent.  */
static uint64_t
s_send (s_client_t *self, Cs__Job *job)
{
    Cs__Request req = CS__REQUEST__INIT;
    Cs__Job *jobs [1] = { job };
    size_t size = 0;
    req.version_min = CS_PROTOCOL_VERSION_MIN;
    req.version_max = CS_PROTOCOL_VERSION;
    req.request_id = ++self->next_id;
    req.deadline_ms = self->deadline_ms;
    if (!self->drop_ticket || job->kind_case == CS__JOB__KIND_LIST_KEYS)
        req.ticket = (ProtobufCBinaryData) { self->ticket_len, self->ticket };
    req.n_jobs = 1;
    req.jobs = jobs;
    uint8_t *data = cs_wire_encode (&req.base, &size);
    zframe_t *frame = data ? zframe_new (data, size) : NULL;
    free (data);
    if (!frame || zframe_send (&frame, self->dealer, 0)) {
        zframe_destroy (&frame);
        return 0;
    }
    return req.request_id;
}

/*  Waits for the reply of request id (0: of any request), S_WAIT_MS or
 *  the job's deadline and 5 s when that is longer (a shared key's
 *  generation); NULL on timeout.  Caller frees with
 *  cs__reply__free_unpacked.  */
static Cs__Reply *
s_wait (s_client_t *self, uint64_t id)
{
    zpoller_t *poller = zpoller_new (self->dealer, NULL);
    int64_t wait = (int64_t) self->deadline_ms + 5000 > S_WAIT_MS ? (int64_t) self->deadline_ms + 5000 : S_WAIT_MS;
    int64_t end = zclock_mono () + wait;
    Cs__Reply *reply = NULL;
    while (!reply && zclock_mono () < end && zpoller_wait (poller, (int) (end - zclock_mono ())) == self->dealer) {
        zframe_t *got = zframe_recv (self->dealer);
        reply = got ? cs_wire_reply_decode (zframe_data (got), zframe_size (got), NULL) : NULL;
        if (reply && id && reply->request_id != id)
            cs__reply__free_unpacked (reply, NULL), reply = NULL;
        zframe_destroy (&got);
    }
    zpoller_destroy (&poller);
    return reply;
}

/*  Sends a request of job and waits for its reply; NULL on timeout.
 *  Caller frees with cs__reply__free_unpacked.  */
static Cs__Reply *
s_call (s_client_t *self, Cs__Job *job)
{
    uint64_t id = s_send (self, job);
    return id ? s_wait (self, id) : NULL;
}

/*  The one result of a reply, or NULL (then the request's rv says why).  */
static const Cs__Result *
s_result (const Cs__Reply *reply)
{
    return reply && reply->rv == CKR_OK && reply->n_results == 1 ? reply->results [0] : NULL;
}

/*  Logs in as CKU_USER and keeps the ticket; false when refused.  */
static bool
s_login (s_client_t *self, const char *pin)
{
    Cs__LoginJob login = CS__LOGIN_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    login.user_type = CKU_USER;
    login.pin = (ProtobufCBinaryData) { strlen (pin), (uint8_t *) pin };
    job.kind_case = CS__JOB__KIND_LOGIN;
    job.login = &login;
    Cs__Reply *reply = s_call (self, &job);
    const Cs__Result *result = s_result (reply);
    bool ok = result && result->rv == CKR_OK && result->kind_case == CS__RESULT__KIND_LOGIN
           && result->login->ticket.len <= sizeof self->ticket;
    if (ok) {
        memcpy (self->ticket, result->login->ticket.data, result->login->ticket.len);
        self->ticket_len = result->login->ticket.len;
    }
    else
        fprintf (stderr, "cs-wire-client: login failed: %s\n",
                 result ? cs_rv_name (result->rv) : reply ? cs_rv_name (reply->rv) : "no reply");
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return ok;
}

static bool s_find (s_client_t *self, const char *label, char ref [129]);

/*  A context-specific login with `pin` for the key labelled `label`; keeps
 *  the context ticket.  False when the key or the login fails.  */
static bool
s_login_context (s_client_t *self, const char *pin, const char *label)
{
    char ref [129];
    Cs__LoginJob login = CS__LOGIN_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    if (!s_find (self, label, ref)) {
        fprintf (stderr, "cs-wire-client: no key %s for --context\n", label);
        return false;
    }
    login.user_type = CKU_CONTEXT_SPECIFIC;
    login.pin = (ProtobufCBinaryData) { strlen (pin), (uint8_t *) pin };
    login.key_id = (ProtobufCBinaryData) { strlen (ref), (uint8_t *) ref };
    job.kind_case = CS__JOB__KIND_LOGIN;
    job.login = &login;
    Cs__Reply *reply = s_call (self, &job);
    const Cs__Result *result = s_result (reply);
    bool ok = result && result->rv == CKR_OK && result->kind_case == CS__RESULT__KIND_LOGIN
           && result->login->ticket.len <= sizeof self->context;
    if (ok) {
        memcpy (self->context, result->login->ticket.data, result->login->ticket.len);
        self->context_len = result->login->ticket.len;
    }
    else
        fprintf (stderr, "cs-wire-client: context login failed: %s\n",
                 result ? cs_rv_name (result->rv) : reply ? cs_rv_name (reply->rv) : "no reply");
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return ok;
}

/*  The ref of the tenant's first key labelled `label` into ref (129
 *  bytes); false when there is none.  */
static bool
s_find (s_client_t *self, const char *label, char ref [129])
{
    Cs__ListKeysJob list = CS__LIST_KEYS_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    job.kind_case = CS__JOB__KIND_LIST_KEYS;
    job.list_keys = &list;
    Cs__Reply *reply = s_call (self, &job);
    const Cs__Result *result = s_result (reply);
    bool found = false;
    for (size_t i = 0; result && result->kind_case == CS__RESULT__KIND_KEYS && !found
                       && i < result->keys->n_keys; i++) {
        const Cs__KeyInfo *key = result->keys->keys [i];
        if (key->label && streq (key->label, label) && strlen (key->ref) < 129) {
            strcpy (ref, key->ref);
            found = true;
        }
    }
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return found;
}

/*  A mechanism by CKM_ name (the table of cs_mech.h) or number; 0 if unknown.  */
static uint64_t
s_mech (const char *text)
{
    size_t n = 0;
    const cs_mech_row_t *rows = cs_mech_rows (&n);
    for (size_t i = 0; i < n; i++)
        if (streq (rows [i].name, text))
            return rows [i].type;
    return strtoull (text, NULL, 0);
}

/*  An attribute type by CKA_ name (cs_attr_rules.h); 0 (CKA_CLASS) if unknown.  */
static uint64_t
s_attr (const char *text)
{
    size_t n = 0;
    const cs_attr_rule_t *rules = cs_attr_rules (&n);
    for (size_t i = 0; i < n; i++)
        if (streq (rules [i].name, text))
            return rules [i].type;
    return strtoull (text, NULL, 0);
}

/*  Hex into out (S_MAX_HEX bytes); the length, or -1.  */
static long
s_hex (const char *text, uint8_t *out)
{
    size_t len = strlen (text);
    if (len % 2 || len / 2 > S_MAX_HEX)
        return -1;
    for (size_t i = 0; i < len / 2; i++) {
        unsigned byte;
        if (sscanf (text + 2 * i, "%2x", &byte) != 1)
            return -1;
        out [i] = (uint8_t) byte;
    }
    return (long) (len / 2);
}

/*  Prints the result line; returns the exit status.  */
static int
s_print (const Cs__Reply *reply)
{
    const Cs__Result *result = s_result (reply);
    if (!reply) {
        fprintf (stderr, "cs-wire-client: no reply\n");
        return 2;
    }
    if (!result) {
        printf ("%s\n", cs_rv_name (reply->rv));
        return 0;
    }
    printf ("%s", cs_rv_name (result->rv));
    if (result->rv == CKR_OK && result->kind_case == CS__RESULT__KIND_DATA)
        for (size_t i = 0; i < result->data.len; i++)
            printf ("%s%02x", i ? "" : " ", result->data.data [i]);
    printf ("\n");
    return 0;
}

/*  The list job: walks the key list in pages of `page` keys.  */
static int
s_list_walk (s_client_t *self, uint32_t page)
{
    Cs__ListKeysJob list = CS__LIST_KEYS_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    char *after = strdup ("");
    size_t pages = 0, keys = 0, largest = 0;
    job.kind_case = CS__JOB__KIND_LIST_KEYS;
    job.list_keys = &list;
    list.page_size = page;
    bool more = true;
    while (after && more) {
        list.after = after;
        Cs__Reply *reply = s_call (self, &job);
        const Cs__Result *result = s_result (reply);
        if (!result || result->rv != CKR_OK || result->kind_case != CS__RESULT__KIND_KEYS) {
            int status = s_print (reply);
            if (reply)
                cs__reply__free_unpacked (reply, NULL);
            free (after);
            return status;
        }
        pages++;
        keys += result->keys->n_keys;
        largest = result->keys->n_keys > largest ? result->keys->n_keys : largest;
        more = result->keys->more;
        free (after);
        after = strdup (result->keys->next);
        cs__reply__free_unpacked (reply, NULL);
    }
    free (after);
    printf ("CKR_OK pages %zu keys %zu largest %zu\n", pages, keys, largest);
    return 0;
}

/*  Sends a GenerateKeyPairJob of a token EC P-256 pair labelled `label`
 *  (CKA_SIGN on the private half), as C_GenerateKeyPair does.  */
static int
s_genkp_ec (s_client_t *self, const char *label)
{
    static uint8_t p256 [] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
    Cs__GenerateKeyPairJob gen = CS__GENERATE_KEY_PAIR_JOB__INIT;
    Cs__Attribute name = CS__ATTRIBUTE__INIT, sign = CS__ATTRIBUTE__INIT;
    Cs__Attribute *pub [1] = { &name }, *priv [2] = { &name, &sign };
    Cs__Job job = CS__JOB__INIT;
    name.type = CKA_LABEL;
    name.value_case = CS__ATTRIBUTE__VALUE_BYTES;
    name.bytes = (ProtobufCBinaryData) { strlen (label), (uint8_t *) label };
    sign.type = CKA_SIGN;
    sign.value_case = CS__ATTRIBUTE__VALUE_FLAG;
    sign.flag = true;
    gen.mechanism = CKM_EC_KEY_PAIR_GEN;
    gen.ec_params = (ProtobufCBinaryData) { sizeof p256, p256 };
    gen.token = true;
    gen.public_template = pub;
    gen.n_public_template = 1;
    gen.private_template = priv;
    gen.n_private_template = 2;
    job.kind_case = CS__JOB__KIND_GENERATE_KEY_PAIR;
    job.generate_key_pair = &gen;
    Cs__Reply *reply = s_call (self, &job);
    int status = s_print (reply);
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return status;
}

/*  Sends a GenerateKeyPairJob of a token RSA pair of `bits` with the
 *  idempotency id of hex `idem` (CKA_SIGN on the private half); prints the
 *  result and the new key's ref.  */
static int
s_genkp_rsa (s_client_t *self, const char *bits, const char *idem)
{
    static uint8_t id [S_MAX_HEX], f4 [] = { 0x01, 0x00, 0x01 };
    long id_len = s_hex (idem, id);
    if (id_len <= 0 || id_len > 64) {
        s_usage ();
        return 2;
    }
    Cs__GenerateKeyPairJob gen = CS__GENERATE_KEY_PAIR_JOB__INIT;
    Cs__Attribute sign = CS__ATTRIBUTE__INIT;
    Cs__Attribute *priv [1] = { &sign };
    Cs__Job job = CS__JOB__INIT;
    sign.type = CKA_SIGN;
    sign.value_case = CS__ATTRIBUTE__VALUE_FLAG;
    sign.flag = true;
    gen.mechanism = CKM_RSA_PKCS_KEY_PAIR_GEN;
    gen.modulus_bits = (uint32_t) atoi (bits);
    gen.public_exponent = (ProtobufCBinaryData) { sizeof f4, f4 };
    gen.token = true;
    gen.private_template = priv;
    gen.n_private_template = 1;
    job.kind_case = CS__JOB__KIND_GENERATE_KEY_PAIR;
    job.generate_key_pair = &gen;
    job.idempotency_id = (ProtobufCBinaryData) { (size_t) id_len, id };
    Cs__Reply *reply = s_call (self, &job);
    const Cs__Result *result = s_result (reply);
    int status = reply ? 0 : 2;
    if (!reply)
        fprintf (stderr, "cs-wire-client: no reply\n");
    else
    if (result && result->rv == CKR_OK && result->kind_case == CS__RESULT__KIND_GENERATED
    &&  result->generated->key)
        printf ("CKR_OK %s\n", result->generated->key->ref);
    else
        printf ("%s\n", cs_rv_name (result ? result->rv : reply->rv));
    if (reply)
        cs__reply__free_unpacked (reply, NULL);
    return status;
}

/*  s_call for cs-wire-objects.c.  */
static Cs__Reply *
s_object_call (void *self, Cs__Job *job)
{
    return s_call (self, job);
}

/*  Builds and sends the job of argv (after the options).  */
static int
s_job (s_client_t *self, int argc, char **argv)
{
    static uint8_t data [S_MAX_HEX], zero_iv [16];
    static CK_OBJECT_CLASS objects [] = { CKO_PRIVATE_KEY, CKO_PUBLIC_KEY, CKO_SECRET_KEY };
    static const char *object_names [] = { "private", "public", "secret" };
    const char *kind = argv [0];
    char ref [129];
    long len = 0;
    bool crypto = streq (kind, "sign") || streq (kind, "decrypt") || streq (kind, "unwrap");
    bool sym = streq (kind, "sym") || streq (kind, "keywrap"), change = streq (kind, "set") || streq (kind, "copy");
    if (streq (kind, "genkp-ec") && argc == 2)
        return s_genkp_ec (self, argv [1]);
    if (streq (kind, "genkp-rsa") && argc == 3)
        return s_genkp_rsa (self, argv [1], argv [2]);
    if (cs_wire_objects_kind (kind))
        return cs_wire_objects_run (self, s_object_call, argc, argv);
    int need = crypto ? 4 : sym || change ? 5 : streq (kind, "derive") || streq (kind, "decapsulate") ? 3 : 0;
    if (streq (kind, "list") && argc == 2)
        return s_list_walk (self, (uint32_t) strtoul (argv [1], NULL, 10));
    if (!need || argc != need) {
        s_usage ();
        return 2;
    }
    if (!s_find (self, argv [1], ref)) {
        printf ("no key %s\n", argv [1]);
        return 1;
    }
    if (!change && (len = s_hex (argv [argc - 1], data)) < 0) {
        s_usage ();
        return 2;
    }
    ProtobufCBinaryData key_id = { strlen (ref), (uint8_t *) ref }, in = { (size_t) len, data };
    Cs__Job job = CS__JOB__INIT;
    Cs__Mechanism mech = CS__MECHANISM__INIT;
    Cs__SignJob sign = CS__SIGN_JOB__INIT;
    Cs__DecryptJob decrypt = CS__DECRYPT_JOB__INIT;
    Cs__DeriveJob derive = CS__DERIVE_JOB__INIT;
    Cs__DecapsulateJob decap = CS__DECAPSULATE_JOB__INIT;
    Cs__SymJob symjob = CS__SYM_JOB__INIT;
    Cs__SetKeyAttributesJob set = CS__SET_KEY_ATTRIBUTES_JOB__INIT;
    Cs__CopyKeyJob copy = CS__COPY_KEY_JOB__INIT;
    Cs__Attribute attr = CS__ATTRIBUTE__INIT, *attrs [1] = { &attr };
    if (crypto) {
        mech.type = s_mech (argv [2]);
        if (mech.type == CKM_RSA_PKCS_OAEP) {
            mech.hash = CKM_SHA256;
            mech.mgf = CKG_MGF1_SHA256;
        }
    }
    if (streq (kind, "sign")) {
        sign.key_id = key_id;
        sign.mechanism = &mech;
        sign.data = in;
        sign.context_ticket = (ProtobufCBinaryData) { self->context_len, self->context };
        job.kind_case = CS__JOB__KIND_SIGN;
        job.sign = &sign;
    }
    else
    if (crypto) {
        decrypt.key_id = key_id;
        decrypt.mechanism = &mech;
        decrypt.data = in;
        decrypt.unwrap = streq (kind, "unwrap");
        decrypt.context_ticket = (ProtobufCBinaryData) { self->context_len, self->context };
        job.kind_case = CS__JOB__KIND_DECRYPT;
        job.decrypt = &decrypt;
    }
    else
    if (streq (kind, "derive")) {
        derive.key_id = key_id;
        derive.public_data = in;
        job.kind_case = CS__JOB__KIND_DERIVE;
        job.derive = &derive;
    }
    else
    if (streq (kind, "decapsulate")) {
        decap.key_id = key_id;
        decap.ciphertext = in;
        job.kind_case = CS__JOB__KIND_DECAPSULATE;
        job.decapsulate = &decap;
    }
    else
    if (sym) {
        const char *op = argv [3];
        symjob.mechanism = s_mech (argv [2]);
        symjob.operation = streq (op, "encrypt") ? S_SYM_ENCRYPT : streq (op, "decrypt") ? S_SYM_DECRYPT
                         : S_SYM_SIGN;
        symjob.key_id = key_id;
        symjob.data = in;
        symjob.key_wrap = streq (kind, "keywrap");
        if (symjob.mechanism == CKM_AES_CBC || symjob.mechanism == CKM_AES_CBC_PAD)
            symjob.iv = (ProtobufCBinaryData) { 16, zero_iv };
        if (symjob.mechanism == CKM_AES_GCM) {
            symjob.iv = (ProtobufCBinaryData) { 12, zero_iv };
            symjob.tag_length_bits = 128;
        }
        job.kind_case = CS__JOB__KIND_SYM;
        job.sym = &symjob;
    }
    else {
        uint64_t object = 0;
        for (size_t i = 0; i < 3; i++)
            if (streq (argv [2], object_names [i]))
                object = objects [i];
        attr.type = s_attr (argv [3]);
        attr.value_case = CS__ATTRIBUTE__VALUE_FLAG;
        attr.flag = streq (argv [4], "1");
        if (streq (kind, "set")) {
            set.ref = ref;
            set.object = object;
            set.attributes = attrs;
            set.n_attributes = 1;
            job.kind_case = CS__JOB__KIND_SET_KEY_ATTRIBUTES;
            job.set_key_attributes = &set;
        }
        else {
            copy.ref = ref;
            copy.object = object;
            copy.attributes = attrs;
            copy.n_attributes = 1;
            job.kind_case = CS__JOB__KIND_COPY_KEY;
            job.copy_key = &copy;
        }
    }
    int status = 0;
    for (int i = 0; i < self->burst; i++)       //  all sent before the first reply is read
        if (!s_send (self, &job))
            return 2;
    for (int i = 0; i < self->burst && status == 0; i++) {
        Cs__Reply *reply = s_wait (self, 0);
        status = s_print (reply);
        if (reply)
            cs__reply__free_unpacked (reply, NULL);
    }
    return status;
}

/*  The DEALER: CURVE client with the pinned broker key.  */
static zsock_t *
s_dealer (const char *endpoint, const char *broker_cert, const char *client_cert)
{
    zcert_t *broker = zcert_load (broker_cert), *client = zcert_load (client_cert);
    zsock_t *dealer = broker && client ? zsock_new (ZMQ_DEALER) : NULL;
    if (dealer) {
        zsock_set_linger (dealer, 0);
        zcert_apply (client, dealer);
        zsock_set_curve_serverkey (dealer, zcert_public_txt (broker));
        if (zsock_connect (dealer, "%s", endpoint))
            zsock_destroy (&dealer);
    }
    if (!dealer)
        fprintf (stderr, "cs-wire-client: cannot connect to %s with %s and %s\n", endpoint, broker_cert, client_cert);
    zcert_destroy (&broker);
    zcert_destroy (&client);
    return dealer;
}

int
main (int argc, char **argv)
{
    static const struct option options [] = {
        { "endpoint", required_argument, NULL, 'e' }, { "broker-cert", required_argument, NULL, 'b' },
        { "client-cert", required_argument, NULL, 'c' }, { "pin", required_argument, NULL, 'p' },
        { "drop-ticket", no_argument, NULL, 'd' }, { "context", required_argument, NULL, 'x' },
        { "deadline-ms", required_argument, NULL, 'D' }, { "burst", required_argument, NULL, 'B' },
        { NULL, 0, NULL, 0 }
    };
    const char *endpoint = NULL, *broker_cert = NULL, *client_cert = NULL, *pin = NULL, *context = NULL;
    bool drop_ticket = false;
    uint32_t deadline_ms = 10000;
    int burst = 1, opt;
    while ((opt = getopt_long (argc, argv, "+", options, NULL)) != -1)
        switch (opt) {
            case 'e': endpoint = optarg; break;
            case 'b': broker_cert = optarg; break;
            case 'c': client_cert = optarg; break;
            case 'p': pin = optarg; break;
            case 'd': drop_ticket = true; break;
            case 'x': context = optarg; break;
            case 'D': deadline_ms = (uint32_t) strtoul (optarg, NULL, 10); break;
            case 'B': burst = atoi (optarg); break;
            default: s_usage (); return 2;
        }
    if (!endpoint || !broker_cert || !client_cert || optind >= argc || burst < 1 || burst > 1000) {
        s_usage ();
        return 2;
    }
    zsys_init ();
    zsys_set_logstream (stderr);
    s_client_t self = { .next_id = (uint64_t) zclock_time () << 8, .drop_ticket = drop_ticket,
                        .deadline_ms = 10000, .burst = 1 };
    self.dealer = s_dealer (endpoint, broker_cert, client_cert);
    if (!self.dealer)
        return 2;
    bool in = (!pin || s_login (&self, pin)) && (!context || (pin && s_login_context (&self, pin, context)));
    self.deadline_ms = deadline_ms;             //  the logins and key list go with the default
    self.burst = burst;
    int status = in ? s_job (&self, argc - optind, argv + optind) : 2;
    zsock_destroy (&self.dealer);
    return status;
}
