/*  audit.c — the broker's side of the audit log (audit.h; the key-use
 *  counters are audit_uses.c;
 *  cryptoserver-audit(5)).
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <czmq.h>
#include "audit.h"
#include "audit_uses.h"
#include "cs_util.h"
#include "cs_wire.h"
#include "keystore_audit.h"

#define S_OBJECT_MAX 160            /* bytes of an object name kept */

struct _broker_audit_batch_t {
    char **bodies;
    size_t count;
    bool checkpoint;
    bool stored;                    /* appended (broker_audit_run) */
    const char *broker;             /* borrowed from the audit */
    EVP_PKEY *key;                  /* borrowed */
    int facility;                   /* syslog facility, or -1: none */
    keystore_audit_head_t head;     /* the chain's head as this broker left it; moved: it was not */
};

struct _broker_audit_t {
    char *broker;                   /* this broker's chain (audit/broker-id) */
    EVP_PKEY *key;                  /* the audit key (Ed25519) */
    int facility;
    zlistx_t *events;               /* char *bodies, in order */
    zhashx_t *uses;                 /* the key-use counters (audit_uses.h) */
    zhashx_t *every_use;            /* tenants whose policy is audit = every-use */
    size_t interval_ms;
    size_t ckpt_records;
    int64_t ckpt_ms;
    size_t since_ckpt;              /* records stored since the last checkpoint */
    int64_t last_ckpt;              /* cs_clock_ms of the last checkpoint (or start) */
    bool out;                       /* a batch is with the slow pool */
    bool failing;                   /* the last batch could not be stored (logged) */
    keystore_audit_head_t head;     /* the chain's head after this broker's last append */
    metrics_t *metrics;             /* cryptoserver_audit_chain_breaks_total; borrowed, may be NULL */
};

/* ---- record bodies ------------------------------------------------------ */

//  Appends `text` as a JSON string (quoted, escaped) to buf.
static void
s_json_str (zchunk_t *buf, const char *text)
{
    zchunk_extend (buf, "\"", 1);
    for (const unsigned char *c = (const unsigned char *) (text ? text : ""); *c; c++) {
        char esc [8];
        if (*c == '"' || *c == '\\')
            snprintf (esc, sizeof esc, "\\%c", *c);
        else
        if (*c < 0x20 || *c >= 0x7f)
            snprintf (esc, sizeof esc, "\\u%04x", *c);
        else {
            esc [0] = (char) *c;
            esc [1] = 0;
        }
        zchunk_extend (buf, esc, strlen (esc));
    }
    zchunk_extend (buf, "\"", 1);
}

static void
s_json_member (zchunk_t *buf, const char *name, const char *value)
{
    if (zchunk_size (buf))
        zchunk_extend (buf, ",", 1);
    s_json_str (buf, name);
    zchunk_extend (buf, ":", 1);
    s_json_str (buf, value);
}

//  The current time, UTC, ISO 8601 with milliseconds.
static void
s_now (char *out, size_t size)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime (CLOCK_REALTIME, &ts);
    gmtime_r (&ts.tv_sec, &tm);
    char secs [24];
    strftime (secs, sizeof secs, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf (out, size, "%s.%03ldZ", secs, ts.tv_nsec / 1000000);
}

//  A new body with the members every record has.  Caller destroys.
static zchunk_t *
s_body (broker_audit_t *self, const char *client, const char *client_key, const char *tenant,
        const char *action, const char *object)
{
    char when [40];
    s_now (when, sizeof when);
    zchunk_t *buf = zchunk_new (NULL, 256);
    s_json_member (buf, "time", when);
    s_json_member (buf, "broker", self->broker);
    s_json_member (buf, "client", client);
    s_json_member (buf, "client_key", client_key);
    s_json_member (buf, "tenant", tenant);
    s_json_member (buf, "action", action);
    s_json_member (buf, "object", object);
    return buf;
}

static void
s_queue (broker_audit_t *self, zchunk_t **buf_p)
{
    zchunk_extend (*buf_p, "", 1);
    zlistx_add_end (self->events, strdup ((char *) zchunk_data (*buf_p)));
    zchunk_destroy (buf_p);
}

void
broker_audit_event (broker_audit_t *self, const char *client, const char *client_key,
                    const char *tenant, const char *action, const char *object,
                    const char *mechanism, CK_RV rv)
{
    if (!self)
        return;
    zchunk_t *buf = s_body (self, client, client_key, tenant, action, object);
    if (mechanism)
        s_json_member (buf, "mechanism", mechanism);
    s_json_member (buf, "result", cs_rv_name (rv));
    s_queue (self, &buf);
}

/* ---- jobs ---------------------------------------------------------------- */

//  A key or object name for a record: printable bytes as they are, else
//  hex (CKA_ID).  Never key material: only refs, ids and labels go here.
static void
s_name (const uint8_t *data, size_t len, char *out, size_t size)
{
    bool printable = len > 0;
    for (size_t i = 0; i < len && printable; i++)
        printable = data [i] >= 0x20 && data [i] < 0x7f;
    //  (memcpy and a digit table: this runs for every job, snprintf cost
    //  as much as the rest of the audit's work on it together.)
    size_t n = 0;
    if (printable) {
        n = len < size - 1 ? len : size - 1;
        memcpy (out, data, n);
    }
    else
        for (size_t i = 0; i < len && 2 * i + 3 < size; i++) {
            out [n++] = "0123456789abcdef" [data [i] >> 4];
            out [n++] = "0123456789abcdef" [data [i] & 15];
        }
    out [n] = 0;
}

//  "ref id=HEX label=L" of a key description.
static void
s_key_name (const Cs__KeyInfo *info, char *out, size_t size)
{
    char id [2 * 32 + 1] = "";
    for (size_t i = 0; info && i < info->id.len && i < 32; i++)
        snprintf (id + 2 * i, 3, "%02x", info->id.data [i]);
    if (info)
        snprintf (out, size, "%s id=%s label=%s", info->ref ? info->ref : "", id, info->label ? info->label : "");
    else
        out [0] = 0;
}

static void
s_use (broker_audit_t *self, const char *client, const char *client_key, const char *tenant,
       const char *key, const char *mechanism, CK_RV rv)
{
    if (tenant && zhashx_size (self->every_use) && zhashx_lookup (self->every_use, tenant)) {
        zchunk_t *buf = s_body (self, client, client_key, tenant, "use", key);
        s_json_member (buf, "mechanism", mechanism);
        s_json_member (buf, "result", cs_rv_name (rv));
        s_queue (self, &buf);
        return;
    }
    audit_uses_count (self->uses, tenant, key, mechanism, client, client_key, rv);
}

void
broker_audit_job (broker_audit_t *self, const char *client, const char *client_key,
                  const char *tenant, const Cs__Job *job, const Cs__Result *result)
{
    if (!self || !job || !result)
        return;
    char object [S_OBJECT_MAX + 80] = "";
    const char *action = NULL, *mech = NULL;
    const ProtobufCBinaryData *key_id = NULL;
    CK_RV rv = (CK_RV) result->rv;
    switch (job->kind_case) {
        case CS__JOB__KIND_LOGIN:
            action = "login";
            snprintf (object, sizeof object, "%s", job->login->user_type == CKU_SO ? "CKU_SO"
                      : job->login->user_type == CKU_CONTEXT_SPECIFIC ? "CKU_CONTEXT_SPECIFIC" : "CKU_USER");
            break;
        case CS__JOB__KIND_SET_PIN:
            action = "set-pin";
            snprintf (object, sizeof object, "%s", job->set_pin->user_type == CKU_SO ? "CKU_SO" : "CKU_USER");
            break;
        case CS__JOB__KIND_INIT_PIN:
            action = "init-pin";
            snprintf (object, sizeof object, "CKU_USER");
            break;
        case CS__JOB__KIND_GENERATE_KEY_PAIR:
        case CS__JOB__KIND_GENERATE_KEY:
        case CS__JOB__KIND_IMPORT_KEY:
            action = job->kind_case == CS__JOB__KIND_IMPORT_KEY ? "import" : "generate";
            if (result->kind_case == CS__RESULT__KIND_GENERATED && result->generated)
                s_key_name (result->generated->key, object, sizeof object);
            else
            if (result->kind_case == CS__RESULT__KIND_IMPORTED && result->imported)
                s_key_name (result->imported->key, object, sizeof object);
            if (job->kind_case == CS__JOB__KIND_GENERATE_KEY_PAIR)
                mech = cs_mech_name ((unsigned long) job->generate_key_pair->mechanism);
            else
            if (job->kind_case == CS__JOB__KIND_GENERATE_KEY)
                mech = cs_mech_name ((unsigned long) job->generate_key->mechanism);
            break;
        case CS__JOB__KIND_DESTROY_KEY:
            action = "destroy";
            snprintf (object, sizeof object, "%s", job->destroy_key->ref);
            break;
        case CS__JOB__KIND_SET_KEY_ATTRIBUTES:
            action = "set-attributes";
            snprintf (object, sizeof object, "%s", job->set_key_attributes->ref);
            break;
        case CS__JOB__KIND_COPY_KEY:
            action = "copy";
            snprintf (object, sizeof object, "%s", job->copy_key->ref);
            break;
        case CS__JOB__KIND_PUT_OBJECT:
            action = "put-object";
            if (result->kind_case == CS__RESULT__KIND_OBJECT && result->object)
                snprintf (object, sizeof object, "%s", result->object->ref);
            break;
        case CS__JOB__KIND_DESTROY_OBJECT:
            action = "destroy-object";
            snprintf (object, sizeof object, "%s", job->destroy_object->ref);
            break;
        case CS__JOB__KIND_SIGN:
            key_id = &job->sign->key_id;
            mech = cs_mech_name (job->sign->mechanism ? (unsigned long) job->sign->mechanism->type : 0);
            break;
        case CS__JOB__KIND_DECRYPT:
            key_id = &job->decrypt->key_id;
            mech = cs_mech_name (job->decrypt->mechanism ? (unsigned long) job->decrypt->mechanism->type : 0);
            action = job->decrypt->unwrap ? "unwrap" : NULL;
            break;
        case CS__JOB__KIND_DERIVE:
            key_id = &job->derive->key_id;
            mech = "derive";
            break;
        case CS__JOB__KIND_SYM:
            key_id = &job->sym->key_id;
            mech = cs_mech_name ((unsigned long) job->sym->mechanism);
            action = !job->sym->key_wrap ? NULL : job->sym->operation == 1 ? "wrap" : "unwrap";
            break;
        case CS__JOB__KIND_MODEXP:
            mech = "modexp";
            snprintf (object, sizeof object, "(key in the job)");
            break;
        default:
            return;                 //  hello, lists: no record
    }
    if (key_id)
        s_name (key_id->data, key_id->len, object, S_OBJECT_MAX);
    if (key_id && !object [0])
        snprintf (object, sizeof object, "(session key)");
    if (action)
        broker_audit_event (self, client, client_key, tenant, action, object, mech, rv);
    else
        s_use (self, client, client_key, tenant, object, mech ? mech : "", rv);
}

/* ---- batches -------------------------------------------------------------- */

size_t
broker_audit_interval_ms (const broker_audit_t *self)
{
    return self->interval_ms;
}

size_t
broker_audit_counters (const broker_audit_t *self)
{
    return self ? zhashx_size (self->uses) : 0;
}

const char *
broker_audit_batch_record (const broker_audit_batch_t *batch, size_t index)
{
    return batch && index < batch->count ? batch->bodies [index] : NULL;
}

static void
s_batch_free (broker_audit_batch_t **batch_p)
{
    broker_audit_batch_t *batch = *batch_p;
    if (!batch)
        return;
    for (size_t i = 0; i < batch->count; i++)
        free (batch->bodies [i]);
    free (batch->bodies);
    free (batch);
    *batch_p = NULL;
}

//  One record of an interval's use counts (audit_uses_take).
static void
s_use_record (const audit_use_t *use, void *arg)
{
    broker_audit_t *self = arg;
    zchunk_t *buf = s_body (self, use->client, use->client_key, use->tenant, "use", use->key);
    char n [24];
    s_json_member (buf, "mechanism", use->mechanism);
    snprintf (n, sizeof n, "%" PRIu64, use->count);
    s_json_member (buf, "count", n);
    snprintf (n, sizeof n, "%" PRIu64, use->failures);
    s_json_member (buf, "failures", n);
    s_json_member (buf, "result", cs_rv_name (use->failures ? use->last_failure : CKR_OK));
    s_queue (self, &buf);
}

broker_audit_batch_t *
broker_audit_take (broker_audit_t *self, bool final)
{
    if (!self || self->out)
        return NULL;
    audit_uses_take (self->uses, s_use_record, self);
    size_t count = zlistx_size (self->events);
    bool due = self->since_ckpt + count > 0
            && (final || self->since_ckpt + count >= self->ckpt_records
                || cs_clock_ms () - self->last_ckpt >= self->ckpt_ms);
    if (count == 0 && !due)
        return NULL;
    broker_audit_batch_t *batch = calloc (1, sizeof *batch);
    if (!batch || !(batch->bodies = calloc (count ? count : 1, sizeof (char *)))) {
        free (batch);
        return NULL;
    }
    for (char *body; (body = zlistx_detach (self->events, NULL)); )
        batch->bodies [batch->count++] = body;
    batch->checkpoint = due;
    batch->broker = self->broker;
    batch->key = self->key;
    batch->facility = self->facility;
    batch->head = self->head;                   /* checked against the database's (keystore_audit_append) */
    batch->head.moved = false;
    self->out = true;
    return batch;
}

static void
s_emit (const char *record, void *arg)
{
    broker_audit_batch_t *batch = arg;
    syslog (batch->facility | LOG_INFO, "%s", record);
}

void
broker_audit_run (broker_audit_batch_t *batch, keystore_t *ks)
{
    batch->stored = keystore_audit_append (ks, batch->broker, batch->bodies, batch->count, batch->key,
                                           batch->checkpoint, &batch->head,
                                           batch->facility >= 0 ? s_emit : NULL, batch) == 0;
}

void
broker_audit_done (broker_audit_t *self, broker_audit_batch_t *batch)
{
    if (!self) {
        s_batch_free (&batch);
        return;
    }
    self->out = false;
    if (batch->stored && batch->head.moved) {
        zsys_error ("audit: the chain of broker %s was changed by another writer since this broker's "
                    "record %" PRId64 " (rows deleted, edited or added): run cryptoserver-admin audit "
                    "verify; new records follow the chain as it is now", self->broker, self->head.seq);
        metrics_audit_break (self->metrics);
    }
    if (batch->stored)
        self->head = batch->head;
    if (batch->stored) {
        if (self->failing)
            zsys_notice ("audit: records are stored again");
        self->failing = false;
        self->since_ckpt += batch->count;
        if (batch->checkpoint) {
            self->since_ckpt = 0;
            self->last_ckpt = cs_clock_ms ();
        }
    }
    else {
        if (!self->failing)
            zsys_error ("audit: %zu records could not be stored in the keystore: kept, tried again "
                        "every %zu ms", batch->count, self->interval_ms);
        self->failing = true;
        for (size_t i = batch->count; i-- > 0; ) {
            zlistx_add_start (self->events, batch->bodies [i]);
            batch->bodies [i] = NULL;
        }
    }
    s_batch_free (&batch);
}

/* ---- lifecycle ------------------------------------------------------------- */

//  The syslog facility named `name` ("authpriv", "local0".."local7",
//  "daemon", "auth", "user"), "none" -1, or -2 unknown.
static int
s_facility (const char *name)
{
    static const struct { const char *name; int facility; } names [] = {
        { "authpriv", LOG_AUTHPRIV }, { "auth", LOG_AUTH }, { "daemon", LOG_DAEMON }, { "user", LOG_USER },
        { "local0", LOG_LOCAL0 }, { "local1", LOG_LOCAL1 }, { "local2", LOG_LOCAL2 }, { "local3", LOG_LOCAL3 },
        { "local4", LOG_LOCAL4 }, { "local5", LOG_LOCAL5 }, { "local6", LOG_LOCAL6 }, { "local7", LOG_LOCAL7 },
        { "none", -1 },
    };
    for (size_t i = 0; i < sizeof names / sizeof names [0]; i++)
        if (streq (name, names [i].name))
            return names [i].facility;
    return -2;
}

//  Reads the audit key (keystore_audit_key_read).  NULL after the E: line.
static EVP_PKEY *
s_key_load (const char *path)
{
    char why [600];
    EVP_PKEY *key = keystore_audit_key_read (path, why, sizeof why);
    if (!key)
        zsys_error ("audit/key: %s", why);
    return key;
}

static int64_t
s_number (zconfig_t *conf, const char *path, int64_t fallback)
{
    const char *value = zconfig_get (conf, path, NULL);
    return value && *value ? strtoll (value, NULL, 10) : fallback;
}

broker_audit_t *
broker_audit_new (const broker_config_t *config, metrics_t *metrics, bool *off_p)
{
    *off_p = false;
    zconfig_t *conf = zconfig_load (config->file);
    const char *key = conf ? zconfig_get (conf, "audit/key", NULL) : NULL;
    if (!conf || !key || !*key || streq (zconfig_get (conf, "audit/enabled", "1"), "0")) {
        zsys_notice ("audit: off (%s)", !conf ? "broker.conf unreadable" : key && *key
                     ? "audit/enabled = 0" : "no audit/key in broker.conf");
        zconfig_destroy (&conf);
        *off_p = true;
        return NULL;
    }
    broker_audit_t *self = calloc (1, sizeof *self);
    if (self)
        self->metrics = metrics;
    char *path = NULL, host [256] = "localhost";
    gethostname (host, sizeof host - 1);
    const char *id = zconfig_get (conf, "audit/broker-id", NULL);
    if (!self || asprintf (&path, "%s%s%s", key [0] == '/' ? "" : config->dir, key [0] == '/' ? "" : "/", key) < 0)
        path = NULL;
    const char *facility = zconfig_get (conf, "audit/syslog-facility", "authpriv");
    bool ok = self && path && (self->key = s_key_load (path));
    if (ok) {
        self->facility = s_facility (facility);
        if (self->facility == -2) {
            zsys_error ("audit/syslog-facility: unknown facility '%s'", facility);
            ok = false;
        }
    }
    if (ok) {
        if (id && *id)
            self->broker = strdup (id);
        else
        {
            //  HOST:/path/of/broker.conf: a restart continues its chain, a
            //  second broker (another config) keeps its own.
            char *real = realpath (config->file, NULL);
            if (asprintf (&self->broker, "%s:%s", host, real ? real : config->file) < 0)
                self->broker = NULL;
            free (real);
        }
        self->events = zlistx_new ();
        self->uses = audit_uses_new ();
        self->every_use = zhashx_new ();
        self->interval_ms = (size_t) s_number (conf, "audit/interval-ms", 10000);
        self->ckpt_records = (size_t) s_number (conf, "audit/checkpoint-records", 1000);
        self->ckpt_ms = 1000 * s_number (conf, "audit/checkpoint-seconds", 60);
        self->last_ckpt = cs_clock_ms ();
        ok = self->broker && self->events && self->uses && self->every_use
          && self->interval_ms >= 10 && self->ckpt_records >= 1 && self->ckpt_ms >= 1000;
        if (!ok)
            zsys_error ("audit: interval-ms must be >= 10, checkpoint-records >= 1, checkpoint-seconds >= 1");
    }
    if (ok) {
        zlistx_set_destructor (self->events, (czmq_destructor *) zstr_free);
        zconfig_t *tenants = zconfig_locate (conf, "tenants");
        for (zconfig_t *t = tenants ? zconfig_child (tenants) : NULL; t; t = zconfig_next (t)) {
            const char *policy = zconfig_get (t, "audit", "aggregate");
            if (streq (policy, "every-use"))
                zhashx_insert (self->every_use, zconfig_name (t), (void *) "every-use");
            else
            if (!streq (policy, "aggregate")) {
                zsys_error ("tenants/%s/audit: '%s' is neither aggregate nor every-use", zconfig_name (t), policy);
                ok = false;
            }
        }
    }
    if (ok)
        zsys_info ("audit: chain %s, a record batch every %zu ms, a signed checkpoint every %zu "
                   "records or %" PRId64 " s, syslog %s", self->broker, self->interval_ms,
                   self->ckpt_records, self->ckpt_ms / 1000, facility);
    free (path);
    zconfig_destroy (&conf);
    if (!ok)
        broker_audit_destroy (&self);
    return self;
}

void
broker_audit_destroy (broker_audit_t **self_p)
{
    broker_audit_t *self = *self_p;
    if (!self)
        return;
    EVP_PKEY_free (self->key);
    free (self->broker);
    zlistx_destroy (&self->events);
    zhashx_destroy (&self->uses);
    zhashx_destroy (&self->every_use);
    free (self);
    *self_p = NULL;
}
