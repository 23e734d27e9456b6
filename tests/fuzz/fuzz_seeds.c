/*  fuzz_seeds.c — writes the seed corpora of the libFuzzer targets
 *  (docs/FUZZING.md) by encoding real requests and rows with the
 *  project's codec (common/cs_wire.h, proto/cryptoserver.proto):
 *
 *    fuzz-seeds FRONTEND-DIR KEYSTORE-DIR
 *
 *  Frontend inputs are frames as fuzz_frontend.c reads them (2-byte
 *  big-endian length, then the frame); the ticket of a logged-in request is
 *  fuzz_frontend.c's placeholder, which the target replaces by its real
 *  ticket.  Keystore inputs are rows as fuzz_keystore.c reads them.
 *  tools/fuzz.sh seeds runs it; the files are kept in the repository
 *  (tests/fuzz/corpus/).  Exit 0, or 1 when a file cannot be written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <p11-kit/pkcs11.h>
#include "cs_wire.h"

#define S_TICKET_LEN 50
static const uint8_t S_PLACEHOLDER [S_TICKET_LEN] = "\x02\x01" "cs-fuzz: the real CKU_USER ticket goes here....";

/*  SHA-256 DigestInfo of the empty string (a CKM_RSA_PKCS sign input).  */
static const uint8_t s_digest_info [51] = {
    0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01,
    0x05, 0x00, 0x04, 0x20, 0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4,
    0xc8, 0x99, 0x6f, 0xb9, 0x24, 0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95,
    0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55
};

static const char *s_dir;
static int s_failed;

/*  An input being built: frames appended with their length prefix.  */
typedef struct {
    uint8_t data [65536];
    size_t len;
} s_input_t;

static void
s_save (const char *dir, const char *name, const uint8_t *data, size_t len)
{
    char path [4096];
    snprintf (path, sizeof path, "%s/%s", dir, name);
    FILE *file = fopen (path, "wb");
    if (!file || fwrite (data, 1, len, file) != len) {
        perror (path);
        s_failed = 1;
    }
    if (file)
        fclose (file);
}

static void
s_append (s_input_t *input, const uint8_t *frame, size_t len)
{
    if (input->len + 2 + len > sizeof input->data || len > 0xffff) {
        fprintf (stderr, "fuzz-seeds: an input is too big\n");
        exit (1);
    }
    input->data [input->len++] = (uint8_t) (len >> 8);
    input->data [input->len++] = (uint8_t) len;
    memcpy (input->data + input->len, frame, len);
    input->len += len;
}

/*  Encodes a request of the n jobs and appends it as a frame.  */
static void
s_request (s_input_t *input, uint64_t id, bool ticket, bool per_job, Cs__Job **jobs, size_t n)
{
    Cs__Request req = CS__REQUEST__INIT;
    req.version_min = CS_PROTOCOL_VERSION_MIN;
    req.version_max = CS_PROTOCOL_VERSION;
    req.request_id = id;
    req.per_job_replies = per_job;
    req.n_jobs = n;
    req.jobs = jobs;
    if (ticket)
        req.ticket = (ProtobufCBinaryData) { S_TICKET_LEN, (uint8_t *) S_PLACEHOLDER };
    size_t size = 0;
    uint8_t *data = cs_wire_encode (&req.base, &size);
    if (!data)
        exit (1);
    s_append (input, data, size);
    free (data);
}

/*  One frame of one job, saved as `name`.  */
static void
s_one (const char *name, bool ticket, Cs__Job *job)
{
    s_input_t input = { .len = 0 };
    s_request (&input, 7, ticket, false, &job, 1);
    s_save (s_dir, name, input.data, input.len);
}

static void
s_frontend (void)
{
    Cs__HelloJob hello = CS__HELLO_JOB__INIT;
    Cs__Job j_hello = CS__JOB__INIT;
    j_hello.kind_case = CS__JOB__KIND_HELLO;
    j_hello.hello = &hello;
    s_one ("hello", false, &j_hello);

    Cs__ListKeysJob list = CS__LIST_KEYS_JOB__INIT;
    Cs__Job j_list = CS__JOB__INIT;
    j_list.kind_case = CS__JOB__KIND_LIST_KEYS;
    j_list.list_keys = &list;
    s_one ("list-keys", false, &j_list);
    s_one ("list-keys-ticket", true, &j_list);

    Cs__Mechanism pkcs = CS__MECHANISM__INIT;
    pkcs.type = CKM_RSA_PKCS;
    Cs__SignJob sign = CS__SIGN_JOB__INIT;
    sign.key_id = (ProtobufCBinaryData) { 8, (uint8_t *) "board:01" };
    sign.mechanism = &pkcs;
    sign.data = (ProtobufCBinaryData) { sizeof s_digest_info, (uint8_t *) s_digest_info };
    Cs__Job j_sign = CS__JOB__INIT;
    j_sign.kind_case = CS__JOB__KIND_SIGN;
    j_sign.sign = &sign;
    s_one ("sign-ticket", true, &j_sign);
    s_one ("sign-no-ticket", false, &j_sign);

    Cs__Mechanism oaep = CS__MECHANISM__INIT;
    oaep.type = CKM_RSA_PKCS_OAEP;
    oaep.hash = CKM_SHA256;
    oaep.mgf = CKG_MGF1_SHA256;
    uint8_t block [256] = { 0x42 };
    Cs__DecryptJob decrypt = CS__DECRYPT_JOB__INIT;
    decrypt.key_id = sign.key_id;
    decrypt.mechanism = &oaep;
    decrypt.data = (ProtobufCBinaryData) { sizeof block, block };
    Cs__Job j_decrypt = CS__JOB__INIT;
    j_decrypt.kind_case = CS__JOB__KIND_DECRYPT;
    j_decrypt.decrypt = &decrypt;
    s_one ("decrypt-ticket", true, &j_decrypt);

    Cs__ListObjectsJob lobj = CS__LIST_OBJECTS_JOB__INIT;
    Cs__Job j_lobj = CS__JOB__INIT;
    j_lobj.kind_case = CS__JOB__KIND_LIST_OBJECTS;
    j_lobj.list_objects = &lobj;
    s_one ("list-objects", false, &j_lobj);

    Cs__Attribute label = CS__ATTRIBUTE__INIT;
    label.type = CKA_LABEL;
    label.value_case = CS__ATTRIBUTE__VALUE_BYTES;
    label.bytes = (ProtobufCBinaryData) { 4, (uint8_t *) "note" };
    Cs__Attribute value = CS__ATTRIBUTE__INIT, *attrs [2] = { &label, &value };
    value.type = CKA_VALUE;
    value.value_case = CS__ATTRIBUTE__VALUE_BYTES;
    value.bytes = (ProtobufCBinaryData) { 5, (uint8_t *) "hello" };
    Cs__ObjectInfo object = CS__OBJECT_INFO__INIT;
    object.ref = "";
    object.object_class = CKO_DATA;
    object.n_attributes = 2;
    object.attributes = attrs;
    Cs__PutObjectJob put = CS__PUT_OBJECT_JOB__INIT;
    put.object = &object;
    Cs__Job j_put = CS__JOB__INIT;
    j_put.kind_case = CS__JOB__KIND_PUT_OBJECT;
    j_put.put_object = &put;
    s_one ("put-object-ticket", true, &j_put);

    Cs__DestroyKeyJob destroy = CS__DESTROY_KEY_JOB__INIT;
    destroy.ref = "ks:no-such-key";
    Cs__Job j_destroy = CS__JOB__INIT;
    j_destroy.kind_case = CS__JOB__KIND_DESTROY_KEY;
    j_destroy.destroy_key = &destroy;
    s_one ("destroy-key-ticket", true, &j_destroy);

    Cs__Attribute sign_off = CS__ATTRIBUTE__INIT, *set_attrs [1] = { &sign_off };
    sign_off.type = CKA_SIGN;
    sign_off.value_case = CS__ATTRIBUTE__VALUE_FLAG;
    sign_off.flag = false;
    Cs__SetKeyAttributesJob set = CS__SET_KEY_ATTRIBUTES_JOB__INIT;
    set.ref = "board:01";
    set.n_attributes = 1;
    set.attributes = set_attrs;
    Cs__Job j_set = CS__JOB__INIT;
    j_set.kind_case = CS__JOB__KIND_SET_KEY_ATTRIBUTES;
    j_set.set_key_attributes = &set;
    s_one ("set-attributes-ticket", true, &j_set);

    uint8_t aes [16] = { 1, 2, 3 }, data [32] = { 0 };
    Cs__SymJob sym = CS__SYM_JOB__INIT;
    sym.mechanism = CKM_AES_ECB;
    sym.operation = 1;
    sym.key_value = (ProtobufCBinaryData) { sizeof aes, aes };
    sym.data = (ProtobufCBinaryData) { sizeof data, data };
    Cs__Job j_sym = CS__JOB__INIT;
    j_sym.kind_case = CS__JOB__KIND_SYM;
    j_sym.sym = &sym;
    s_one ("sym-ecb-ticket", true, &j_sym);
    s_one ("sym-ecb-no-ticket", false, &j_sym);

    Cs__GenerateKeyJob gen = CS__GENERATE_KEY_JOB__INIT;
    gen.mechanism = CKM_AES_KEY_GEN;
    gen.value_len = 32;
    Cs__Job j_gen = CS__JOB__INIT;
    j_gen.kind_case = CS__JOB__KIND_GENERATE_KEY;
    j_gen.generate_key = &gen;
    s_one ("generate-aes-ticket", true, &j_gen);

    uint8_t byte = 3;
    Cs__ModexpJob modexp = CS__MODEXP_JOB__INIT;
    modexp.base_value = (ProtobufCBinaryData) { 1, &byte };
    modexp.exponent = (ProtobufCBinaryData) { 1, &byte };
    modexp.modulus = (ProtobufCBinaryData) { sizeof block, block };
    Cs__Job j_modexp = CS__JOB__INIT;
    j_modexp.kind_case = CS__JOB__KIND_MODEXP;
    j_modexp.modexp = &modexp;
    s_one ("modexp-ticket", true, &j_modexp);

    Cs__InitPinJob init = CS__INIT_PIN_JOB__INIT;
    init.pin = (ProtobufCBinaryData) { 4, (uint8_t *) "9999" };
    Cs__Job j_init = CS__JOB__INIT;
    j_init.kind_case = CS__JOB__KIND_INIT_PIN;
    j_init.init_pin = &init;
    s_one ("init-pin-user-ticket", true, &j_init);

    //  A batch, with one reply per job; and three frames in one input.
    Cs__Job *batch [5] = { &j_hello, &j_sign, &j_list, &j_lobj, &j_sym };
    s_input_t input = { .len = 0 };
    s_request (&input, 9, true, true, batch, 5);
    s_save (s_dir, "batch-per-job-ticket", input.data, input.len);
    input.len = 0;
    s_request (&input, 9, true, false, batch, 5);
    s_save (s_dir, "batch-ticket", input.data, input.len);
    input.len = 0;
    Cs__Job *one_hello [1] = { &j_hello }, *one_sign [1] = { &j_sign };
    s_request (&input, 1, false, false, one_hello, 1);
    s_request (&input, 2, true, false, one_sign, 1);
    s_request (&input, 3, false, false, one_sign, 1);
    s_request (&input, 4, true, true, batch, 5);
    s_save (s_dir, "sequence", input.data, input.len);
}

/*  Keystore rows (fuzz_keystore.c): mode byte, then length-prefixed fields.  */
static void
s_field (s_input_t *input, const void *data, size_t len)
{
    s_append (input, data, len);
}

static void
s_keystore (void)
{
    EVP_PKEY *pkey = EVP_EC_gen ("P-256");
    uint8_t *der = NULL;
    int der_len = pkey ? i2d_PrivateKey (pkey, &der) : -1;
    uint8_t *pkcs8 = NULL;
    PKCS8_PRIV_KEY_INFO *p8 = pkey ? EVP_PKEY2PKCS8 (pkey) : NULL;
    int pkcs8_len = p8 ? i2d_PKCS8_PRIV_KEY_INFO (p8, &pkcs8) : -1;
    if (der_len < 0 || pkcs8_len < 0)
        exit (1);
    Cs__Attribute sensitive = CS__ATTRIBUTE__INIT, *attrs [1] = { &sensitive };
    sensitive.type = CKA_SENSITIVE;
    sensitive.value_case = CS__ATTRIBUTE__VALUE_FLAG;
    sensitive.flag = true;
    Cs__KeyInfo info = CS__KEY_INFO__INIT;
    info.ref = "ks:fuzz";
    info.key_type = CKK_EC;
    info.bits = 256;
    info.has_private = info.has_public = true;
    info.can_sign = true;
    info.home = "keystore";
    info.n_private_attributes = 1;
    info.private_attributes = attrs;
    size_t info_len = cs__key_info__get_packed_size (&info);
    uint8_t *info_data = malloc (info_len);
    cs__key_info__pack (&info, info_data);
    static const struct { const char *name; unsigned mode; bool private; } keys [] = {
        { "key-mac-sealed", 4 | 8, true }, { "key-mac-public", 4 | 16, false },
        { "key-no-mac", 8, true }, { "key-mac-raw-private", 4, true }, { "key-text-mac", 3 | 4 | 16, false },
    };
    uint8_t junk_mac [32] = { 0xee };
    for (size_t i = 0; i < sizeof keys / sizeof keys [0]; i++) {
        s_input_t input = { .len = 1, .data = { (uint8_t) keys [i].mode } };
        s_field (&input, "ks:fuzz", 7);
        s_field (&input, info_data, info_len);
        s_field (&input, pkcs8, keys [i].private ? (size_t) pkcs8_len : 0);
        s_field (&input, junk_mac, sizeof junk_mac);
        s_save (s_dir, keys [i].name, input.data, input.len);
    }
    Cs__ObjectInfo object = CS__OBJECT_INFO__INIT;
    object.ref = "obj:0123456789abcdef0123456789abcdef";
    object.object_class = CKO_CERTIFICATE;
    size_t obj_len = cs__object_info__get_packed_size (&object);
    uint8_t *obj = malloc (obj_len);
    cs__object_info__pack (&object, obj);
    static const struct { const char *name; unsigned mode; } objects [] = {
        { "object-mac", 1 | 4 | 16 }, { "object-mac-sealed", 1 | 4 | 8 }, { "object-no-mac", 1 | 16 },
    };
    for (size_t i = 0; i < sizeof objects / sizeof objects [0]; i++) {
        s_input_t input = { .len = 1, .data = { (uint8_t) objects [i].mode } };
        s_field (&input, object.ref, strlen (object.ref));
        s_field (&input, obj, obj_len);
        s_field (&input, obj, obj_len);
        s_field (&input, junk_mac, sizeof junk_mac);
        s_save (s_dir, objects [i].name, input.data, input.len);
    }
    static const char *pin = "scrypt$15$8$1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g";
    for (unsigned mode = 2; mode <= 6; mode += 4) {
        s_input_t input = { .len = 1, .data = { (uint8_t) mode } };
        s_field (&input, pin, strlen (pin));
        s_field (&input, pin, strlen (pin));
        s_field (&input, junk_mac, sizeof junk_mac);
        static const uint8_t counts [32] = { [7] = 1, [15] = 0, [23] = 5, [31] = 6 };
        memcpy (input.data + input.len, counts, sizeof counts);
        input.len += sizeof counts;
        s_save (s_dir, mode & 4 ? "tenant-mac" : "tenant-no-mac", input.data, input.len);
    }
    free (obj);
    free (info_data);
    OPENSSL_free (der);
    OPENSSL_free (pkcs8);
    PKCS8_PRIV_KEY_INFO_free (p8);
    EVP_PKEY_free (pkey);
}

int
main (int argc, char **argv)
{
    if (argc != 3) {
        fprintf (stderr, "usage: fuzz-seeds FRONTEND-DIR KEYSTORE-DIR\n");
        return 2;
    }
    s_dir = argv [1];
    s_frontend ();
    s_dir = argv [2];
    s_keystore ();
    return s_failed;
}
