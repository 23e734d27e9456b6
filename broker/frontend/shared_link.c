/*  shared_link.c — the frontend's link to this broker's party service
 *  (broker/party/, docs/SHARED-KEYS.md "Through PKCS#11"): a token RSA
 *  C_GenerateKeyPair of a tenant with keys/shared = 3 goes to the party as
 *  GENERATE (the three parties make the key and each seals its share), and
 *  C_Sign / C_Decrypt with a key whose home is "shared" as RAW: the
 *  frontend pads (sign) or checks the length (decrypt), the party combines
 *  the three partial results and releases x only when x^e = block mod N,
 *  and the frontend removes a decryption's padding.  The key's rules were
 *  applied before, by key_route.c, as for any keystore key.
 *
 *  Lanes over the party's control socket, one DEALER each, with one
 *  request out at a time: one for generations and S_OPS_LANES for
 *  private-key operations (several signatures in flight at the party at
 *  once, each on its own lane, so answers need no tag); the answers come
 *  back on the reactor (s_on_lane).  The other way, the party's partial
 *  results to this broker's boards, is shared_boards.c.
 *
 *  Owns: the lanes and their queues of items (borrowed from their slots;
 *  each counted in its request's `pending` until its completion).
 *  May call: party.h (the endpoint, the tenant's opt-in), drv_pad.h,
 *  dispatch.c (fe_item_wipe_material), reply.c (fe_log_due).  What comes
 *  back goes up through the item's `done`, set by the room that made it
 *  (route.c, keymgmt_jobs.c).  */
#include <stdarg.h>
#include <openssl/rand.h>
#include "drv_pad.h"
#include "party.h"
#include "frontend_int.h"

#define S_GEN 0                     /* the generation queue, and its lane */
#define S_OPS 1                     /* the sign / decrypt queue; its lanes are 1..S_OPS_LANES */
#define S_OPS_LANES 8               /* signatures and decryptions out at the party at once */
#define S_LANES (1 + S_OPS_LANES)
#define S_LABEL_MAX 256             /* bytes of a label sent to the party */
#define S_ID_MAX 64                 /* bytes of Job.idempotency_id */

struct _fe_shared_t {
    zsock_t *lane [S_LANES];        /* DEALERs to party/control: lane 0 generations, then ops */
    work_item_t *out [S_LANES];     /* the item whose request a lane has out, or NULL */
    zlist_t *queue [2];             /* work_item_t * waiting, S_GEN and S_OPS */
};

/*  The idempotency id of a generation item's job.  */
static ProtobufCBinaryData
s_idempotency_id (const work_item_t *item)
{
    const fe_request_t *request = item->request;
    return request->req->jobs [item->index]->idempotency_id;
}

/*  Sends a request on lane `lane` to the party: the frames after the
 *  empty delimiter, NULL-terminated.  */
static int
s_send (fe_shared_t *shared, int lane, const char *first, ...)
{
    zmsg_t *msg = zmsg_new ();
    va_list args;
    va_start (args, first);
    zmsg_addmem (msg, "", 0);
    for (const char *s = first; s; s = va_arg (args, const char *))
        zmsg_addstr (msg, s);
    va_end (args);
    return zmsg_send (&msg, shared->lane [lane]);
}

/*  Hex of data (malloc'd, caller frees), or NULL.  */
static char *
s_hex (const void *data, size_t len)
{
    char *hex = malloc (2 * len + 1);
    if (hex)
        cs_hex_encode (data, len, hex);
    return hex;
}

/*  The label of a generation: CKA_LABEL of the private template, else of
 *  the public one, else "shared-" and 8 random hex digits (the party
 *  refuses a label the tenant already has).  */
static void
s_label (const Cs__GenerateKeyPairJob *job, char out [S_LABEL_MAX + 1])
{
    Cs__Attribute *const *sides [2] = { job->private_template, job->public_template };
    size_t counts [2] = { job->n_private_template, job->n_public_template };
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < counts [s]; i++) {
            const Cs__Attribute *attr = sides [s][i];
            if (attr->type == CKA_LABEL && attr->value_case == CS__ATTRIBUTE__VALUE_BYTES && attr->bytes.len
            &&  attr->bytes.len <= S_LABEL_MAX && !memchr (attr->bytes.data, 0, attr->bytes.len)) {
                memcpy (out, attr->bytes.data, attr->bytes.len);
                out [attr->bytes.len] = 0;
                return;
            }
        }
    unsigned char r [4] = { 0 };
    (void) RAND_bytes (r, sizeof r);
    snprintf (out, S_LABEL_MAX + 1, "shared-%02x%02x%02x%02x", r [0], r [1], r [2], r [3]);
}

/*  GENERATE tenant label bits template [idempotency-id]: the template is
 *  the job without its exponent and curve (only the attribute templates
 *  matter); the module's idempotency id (hex) is recorded by each party
 *  with its row, so that an attempt the module sends to another of the
 *  three brokers gets this key (party_idem.c).  */
static int
s_send_generate (fe_shared_t *shared, work_item_t *item)
{
    fe_request_t *request = item->request;
    const Cs__GenerateKeyPairJob *job = request->req->jobs [item->index]->generate_key_pair;
    Cs__GenerateKeyPairJob templ = *job;
    templ.public_exponent.len = 0;
    templ.ec_params.len = 0;
    size_t len = cs__generate_key_pair_job__get_packed_size (&templ);
    unsigned char *packed = malloc (len ? len : 1);
    char label [S_LABEL_MAX + 1], bits [16], *hex = NULL;
    s_label (job, label);
    snprintf (bits, sizeof bits, "%u", job->modulus_bits);
    if (packed) {
        cs__generate_key_pair_job__pack (&templ, packed);
        hex = s_hex (packed, len);
    }
    ProtobufCBinaryData idem = s_idempotency_id (item);
    char *idem_hex = idem.len && idem.len <= S_ID_MAX ? s_hex (idem.data, idem.len) : NULL;
    int rc = hex ? s_send (shared, 0, "GENERATE", request->tenant, label, bits, hex, idem_hex, NULL) : -1;
    free (packed);
    free (hex);
    free (idem_hex);
    return rc;
}

/*  RAW tenant ref block use mechanism: the padded block of a signature, or
 *  the ciphertext of a decryption (k bytes, k = the modulus length), with
 *  what it is for, which every party checks against its own row.  */
static int
s_send_raw (fe_shared_t *shared, int lane, work_item_t *item)
{
    size_t k = (item->bits + 7) / 8;
    unsigned char *block = malloc (k);
    char *hex = NULL;
    int rc = -1;
    if (block && item->kind == WORK_SIGN) {
        item->rv = drv_rsa_sign_block (&item->mech, item->in, item->in_len, item->bits, block, k);
        hex = item->rv == CKR_OK ? s_hex (block, k) : NULL;
    }
    else
    if (block)
        hex = s_hex (item->in, item->in_len);
    fe_request_t *request = item->request;
    bool unwrap = item->kind == WORK_DECRYPT && request->req->jobs [item->index]->decrypt->unwrap;
    char mech [24];
    snprintf (mech, sizeof mech, "%lu", (unsigned long) item->mech.type);
    if (hex)        /* the use and mechanism each party checks against its own row */
        rc = s_send (shared, lane, "RAW", request->tenant, item->ref, hex,
                     item->kind == WORK_SIGN ? "sign" : unwrap ? "unwrap" : "decrypt", mech, NULL);
    if (block) {
        OPENSSL_cleanse (block, k);
        free (block);
    }
    free (hex);
    return rc;
}

static void s_finish (frontend_t *self, work_item_t *item);

/*  Sends the head of queue `kind` on each of its lanes that has none out;
 *  a head that cannot be sent is finished with its error
 *  (CKR_DEVICE_ERROR unless the padding said otherwise) and the next one
 *  tried.  A generation the parties made already (the module's attempt
 *  again, here or at another party) is answered by the party with that
 *  key (its idempotency id is recorded with the rows).  */
static void
s_pump (frontend_t *self, int kind)
{
    fe_shared_t *shared = self->shared;
    int first = kind == S_GEN ? 0 : 1, end = kind == S_GEN ? 1 : S_LANES;
    for (int lane = first; lane < end; lane++) {
        work_item_t *item;
        while (!shared->out [lane] && (item = zlist_pop (shared->queue [kind]))) {
            item->rv = CKR_OK;
            if ((kind == S_GEN ? s_send_generate (shared, item) : s_send_raw (shared, lane, item)) == 0) {
                shared->out [lane] = item;
                break;
            }
            if (item->rv == CKR_OK)
                item->rv = CKR_DEVICE_ERROR;
            s_finish (self, item);
        }
    }
}

/*  The item is back for good: its key unpinned, then its completion.  */
static void
s_finish (frontend_t *self, work_item_t *item)
{
    fe_item_wipe_material (self, item);
    item->done (item->done_arg, item);
}

/*  The CK_RV the party named ("CKR_KEY_HANDLE_INVALID"); CKR_DEVICE_ERROR
 *  for any other name.  */
static CK_RV
s_rv_of (const char *name)
{
    static const struct { const char *name; CK_RV rv; } names [] = {
        { "CKR_KEY_HANDLE_INVALID", CKR_KEY_HANDLE_INVALID }, { "CKR_DATA_LEN_RANGE", CKR_DATA_LEN_RANGE },
        { "CKR_ARGUMENTS_BAD", CKR_TEMPLATE_INCONSISTENT }, { "CKR_HOST_MEMORY", CKR_DEVICE_MEMORY },
        { "CKR_KEY_FUNCTION_NOT_PERMITTED", CKR_KEY_FUNCTION_NOT_PERMITTED },
        { "CKR_MECHANISM_INVALID", CKR_MECHANISM_INVALID }
    };
    for (size_t i = 0; name && i < sizeof names / sizeof names [0]; i++)
        if (streq (name, names [i].name))
            return names [i].rv;
    return CKR_DEVICE_ERROR;
}

/*  The party's OK of a sign or decrypt item: x (hex, k bytes), with x^e =
 *  the block it was sent, checked by the party.  A signature is x; a
 *  plaintext is x without its padding (drv_rsa_unpad).  */
static void
s_ops_result (work_item_t *item, const char *hex)
{
    size_t k = (item->bits + 7) / 8;
    unsigned char *x = malloc (k ? k : 1);
    long len = x ? cs_hex_decode (hex, x, k) : -1;
    if (len != (long) k) {
        item->rv = CKR_DEVICE_ERROR;
        zsys_error ("shared key %s: the party's answer is not %zu bytes", item->ref, k);
    }
    else
    if (item->kind == WORK_SIGN) {
        item->out = x;
        item->out_len = k;
        return;
    }
    else {
        size_t out_len = k;
        unsigned char *plain = malloc (k);
        item->rv = plain ? drv_rsa_unpad (&item->mech, x, k, plain, &out_len) : CKR_DEVICE_MEMORY;
        if (item->rv == CKR_OK) {
            item->out = plain;
            item->out_len = out_len;
        }
        else
        if (plain) {
            OPENSSL_cleanse (plain, k);
            free (plain);
        }
    }
    if (x) {
        OPENSSL_cleanse (x, k);
        free (x);
    }
}

/*  An answer of the party on a lane: ["", "OK", ...] or ["", "ERR",
 *  CKR name, why]; it belongs to the item the lane has out.  */
static int
s_on_lane (zloop_t *loop, zsock_t *reader, void *arg)
{
    (void) loop;
    frontend_t *self = arg;
    fe_shared_t *shared = self->shared;
    int lane = 0;
    while (lane < S_LANES - 1 && reader != shared->lane [lane])
        lane++;
    int kind = lane == 0 ? S_GEN : S_OPS;
    zmsg_t *msg = zmsg_recv (reader);
    work_item_t *item = shared->out [lane];
    shared->out [lane] = NULL;
    if (!msg || !item) {
        zmsg_destroy (&msg);
        return 0;
    }
    free (zmsg_popstr (msg));               /* the delimiter */
    char *status = zmsg_popstr (msg), *a = zmsg_popstr (msg), *b = zmsg_popstr (msg);
    if (status && streq (status, "OK") && a) {
        if (kind == S_GEN) {
            item->out = (unsigned char *) a;        /* the new key's ref */
            item->out_len = strlen (a);
            a = NULL;
        }
        else
            s_ops_result (item, a);
    }
    else {
        fe_request_t *request = item->request;
        item->rv = s_rv_of (a);
        if (fe_log_due (self, request, "shared-key"))      /* once a minute per client */
            zsys_error ("client %s (tenant %s): shared key %s: %s: %s", request->client_name, request->tenant,
                        kind == S_GEN ? "generation" : item->ref, a ? a : "?", b ? b : "?");
    }
    if (a)
        OPENSSL_cleanse (a, strlen (a));
    free (status);
    free (a);
    free (b);
    zmsg_destroy (&msg);
    s_finish (self, item);
    s_pump (self, kind);
    return 0;
}

int
fe_shared_start (frontend_t *self)
{
    if (!party_configured (self->config))
        return 0;
    char *endpoint = party_control_endpoint (self->config);
    if (!endpoint)
        return -1;                  /* party_control_endpoint said why */
    fe_shared_t *shared = self->shared = calloc (1, sizeof *shared);
    int rc = shared ? 0 : -1;
    for (int kind = 0; rc == 0 && kind < 2; kind++)
        if (!(shared->queue [kind] = zlist_new ()))
            rc = -1;
    for (int lane = 0; rc == 0 && lane < S_LANES; lane++) {
        shared->lane [lane] = zsock_new (ZMQ_DEALER);
        if (!shared->lane [lane] || zsock_connect (shared->lane [lane], "%s", endpoint)
        ||  zloop_reader (self->loop, shared->lane [lane], s_on_lane, self))
            rc = -1;
    }
    if (rc)
        zsys_error ("cannot connect to the party service's control socket %s", endpoint);
    free (endpoint);
    return rc;
}

void
fe_shared_stop (frontend_t *self)
{
    fe_shared_t *shared = self->shared;
    if (!shared)
        return;
    for (int lane = 0; lane < S_LANES; lane++) {
        work_item_t *item = shared->out [lane];
        shared->out [lane] = NULL;
        if (item) {
            item->rv = CKR_DEVICE_ERROR;
            s_finish (self, item);
        }
        if (shared->lane [lane] && self->loop)
            zloop_reader_end (self->loop, shared->lane [lane]);
        zsock_destroy (&shared->lane [lane]);
    }
    for (int kind = 0; kind < 2; kind++) {
        for (work_item_t *item; shared->queue [kind] && (item = zlist_pop (shared->queue [kind])); ) {
            item->rv = CKR_DEVICE_ERROR;
            s_finish (self, item);
        }
        zlist_destroy (&shared->queue [kind]);
    }
    free (shared);
    self->shared = NULL;
}

bool
fe_shared_tenant (frontend_t *self, const char *tenant)
{
    return party_configured (self->config) && party_shared_tenant (self->config, tenant);
}

/*  Queues item on queue `kind`, counted in its request's pending.  */
static CK_RV
s_queue (frontend_t *self, int kind, work_item_t *item)
{
    fe_shared_t *shared = self->shared;
    if (!shared)
        return CKR_DEVICE_ERROR;            /* the loopback core: no party service */
    if (zlist_append (shared->queue [kind], item))
        return CKR_DEVICE_MEMORY;
    ((fe_request_t *) item->request)->pending++;
    s_pump (self, kind);
    return CKR_OK;
}

CK_RV
fe_shared_generate (frontend_t *self, work_item_t *item)
{
    fe_request_t *request = item->request;
    const Cs__GenerateKeyPairJob *job = request->req->jobs [item->index]->generate_key_pair;
    if (!keyjobs_default_exponent (job))
        return CKR_TEMPLATE_INCONSISTENT;   /* the protocol's e is 65537 (docs/SHARED-KEYS.md) */
    return s_queue (self, S_GEN, item);
}

CK_RV
fe_shared_crypto (frontend_t *self, work_item_t *item)
{
    size_t k = (item->bits + 7) / 8;
    CK_MECHANISM_TYPE type = item->mech.type;
    if (item->kind == WORK_SIGN ? type != CKM_RSA_PKCS && type != CKM_RSA_PKCS_PSS && type != CKM_RSA_X_509
      : item->kind == WORK_DECRYPT ? type != CKM_RSA_PKCS && type != CKM_RSA_PKCS_OAEP && type != CKM_RSA_X_509
      : true)
        return CKR_MECHANISM_INVALID;
    if (item->kind == WORK_DECRYPT && item->in_len != k)
        return CKR_ENCRYPTED_DATA_LEN_RANGE;
    return s_queue (self, S_OPS, item);
}
