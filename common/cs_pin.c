/*  cs_pin.c — scrypt and PBKDF2 PIN hashes, keyed with HMAC (cs_pin.h),
 *  via OpenSSL (EVP_KDF "SCRYPT", PKCS5_PBKDF2_HMAC, HMAC).  */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include "cs_pin.h"
#include "cs_util.h"

#define SALT_LEN 16
#define HASH_LEN 32
#define SCRYPT_MAXMEM ((uint64_t) 1 << 30)  /* bytes: above LOGN 20 at R 32 */

#define FORM_SCRYPT      "scrypt-hmac$"
#define FORM_PBKDF2_HMAC "pbkdf2-sha256-hmac$"
#define FORM_PBKDF2      "pbkdf2-sha256$"

/*  A parsed stored form.  */
typedef struct {
    enum { S_SCRYPT, S_PBKDF2_HMAC, S_PBKDF2 } kind;
    unsigned cost [3];              /* LOGN R P, or ITER */
    unsigned char salt [SALT_LEN];
    unsigned char hash [HASH_LEN];  /* TAG or HASH */
} s_form_t;

static bool
s_has_prefix (const char *text, const char *prefix)
{
    return strncmp (text, prefix, strlen (prefix)) == 0;
}

//  Parses `stored` into *form.  Returns false when it is malformed or its
//  cost is out of the accepted bounds (cs_pin.h).
static bool
s_parse (const char *stored, s_form_t *form)
{
    char salt_hex [2 * SALT_LEN + 2], hash_hex [2 * HASH_LEN + 2];
    int end = 0;
    bool ok = false;
    if (!stored)
        return false;
    if (s_has_prefix (stored, FORM_SCRYPT)) {
        form->kind = S_SCRYPT;
        ok = sscanf (stored, FORM_SCRYPT "%u$%u$%u$%33[0-9a-fA-F]$%65[0-9a-fA-F]%n", &form->cost [0],
                     &form->cost [1], &form->cost [2], salt_hex, hash_hex, &end) == 5
          && form->cost [0] >= 10 && form->cost [0] <= 20 && form->cost [1] >= 1
          && form->cost [1] <= 32 && form->cost [2] >= 1 && form->cost [2] <= 16;
    }
    else {
        form->kind = s_has_prefix (stored, FORM_PBKDF2_HMAC) ? S_PBKDF2_HMAC : S_PBKDF2;
        int got = form->kind == S_PBKDF2_HMAC
                ? sscanf (stored, FORM_PBKDF2_HMAC "%u$%33[0-9a-fA-F]$%65[0-9a-fA-F]%n",
                          &form->cost [0], salt_hex, hash_hex, &end)
                : sscanf (stored, FORM_PBKDF2 "%u$%33[0-9a-fA-F]$%65[0-9a-fA-F]%n",
                          &form->cost [0], salt_hex, hash_hex, &end);
        ok = got == 3 && form->cost [0] >= 1000 && form->cost [0] <= 10000000;
    }
    return ok && stored [end] == 0
        && cs_hex_decode (salt_hex, form->salt, SALT_LEN) == SALT_LEN
        && cs_hex_decode (hash_hex, form->hash, HASH_LEN) == HASH_LEN;
}

//  scrypt (RFC 7914) of pin with salt, N = 2^log_n, r, p; 32 bytes out.
static bool
s_scrypt (const void *pin, size_t pin_len, const unsigned char *salt, unsigned log_n,
          unsigned r, unsigned p, unsigned char out [HASH_LEN])
{
    uint64_t n = (uint64_t) 1 << log_n, maxmem = SCRYPT_MAXMEM;
    uint32_t r32 = r, p32 = p;
    EVP_KDF *kdf = EVP_KDF_fetch (NULL, "SCRYPT", NULL);
    EVP_KDF_CTX *ctx = kdf ? EVP_KDF_CTX_new (kdf) : NULL;
    OSSL_PARAM params [] = {
        OSSL_PARAM_construct_octet_string (OSSL_KDF_PARAM_PASSWORD, (void *) pin, pin_len),
        OSSL_PARAM_construct_octet_string (OSSL_KDF_PARAM_SALT, (void *) salt, SALT_LEN),
        OSSL_PARAM_construct_uint64 (OSSL_KDF_PARAM_SCRYPT_N, &n),
        OSSL_PARAM_construct_uint32 (OSSL_KDF_PARAM_SCRYPT_R, &r32),
        OSSL_PARAM_construct_uint32 (OSSL_KDF_PARAM_SCRYPT_P, &p32),
        OSSL_PARAM_construct_uint64 (OSSL_KDF_PARAM_SCRYPT_MAXMEM, &maxmem),
        OSSL_PARAM_construct_end ()
    };
    bool ok = ctx && EVP_KDF_derive (ctx, out, HASH_LEN, params) == 1;
    EVP_KDF_CTX_free (ctx);
    EVP_KDF_free (kdf);
    return ok;
}

//  The slow hash of a parsed form, keyed with HMAC-SHA256 for the keyed
//  forms, into out.
static bool
s_derive (const s_form_t *form, const uint8_t key [CS_PIN_KEY_LEN], const void *pin,
          size_t pin_len, unsigned char out [HASH_LEN])
{
    unsigned char slow [HASH_LEN];
    unsigned int mac_len = 0;
    bool ok = form->kind == S_SCRYPT
            ? s_scrypt (pin, pin_len, form->salt, form->cost [0], form->cost [1], form->cost [2], slow)
            : PKCS5_PBKDF2_HMAC (pin, (int) pin_len, form->salt, SALT_LEN, (int) form->cost [0],
                                 EVP_sha256 (), HASH_LEN, slow) == 1;
    if (ok && form->kind == S_PBKDF2)
        memcpy (out, slow, HASH_LEN);
    else
    if (ok)
        ok = key && HMAC (EVP_sha256 (), key, CS_PIN_KEY_LEN, slow, HASH_LEN, out, &mac_len)
          && mac_len == HASH_LEN;
    OPENSSL_cleanse (slow, sizeof slow);
    return ok;
}

char *
cs_pin_hash (const uint8_t key [CS_PIN_KEY_LEN], const void *pin, size_t pin_len)
{
    s_form_t form = { S_SCRYPT, { CS_PIN_SCRYPT_LOG_N, CS_PIN_SCRYPT_R, CS_PIN_SCRYPT_P } };
    unsigned char tag [HASH_LEN];
    char salt_hex [2 * SALT_LEN + 1], tag_hex [2 * HASH_LEN + 1];
    char *stored = NULL;
    if (!key || RAND_bytes (form.salt, SALT_LEN) != 1 || !s_derive (&form, key, pin, pin_len, tag))
        return NULL;
    cs_hex_encode (form.salt, SALT_LEN, salt_hex);
    cs_hex_encode (tag, HASH_LEN, tag_hex);
    if (asprintf (&stored, FORM_SCRYPT "%u$%u$%u$%s$%s", form.cost [0], form.cost [1],
                  form.cost [2], salt_hex, tag_hex) < 0)
        stored = NULL;
    OPENSSL_cleanse (tag, sizeof tag);
    return stored;
}

bool
cs_pin_verify (const char *stored, const uint8_t key [CS_PIN_KEY_LEN], const void *pin, size_t pin_len)
{
    s_form_t form;
    unsigned char got [HASH_LEN];
    if (!pin || !s_parse (stored, &form) || !s_derive (&form, key, pin, pin_len, got))
        return false;
    bool match = CRYPTO_memcmp (form.hash, got, HASH_LEN) == 0;
    OPENSSL_cleanse (got, sizeof got);
    return match;
}

bool
cs_pin_current (const char *stored)
{
    s_form_t form;
    return s_parse (stored, &form) && form.kind == S_SCRYPT && form.cost [0] == CS_PIN_SCRYPT_LOG_N
        && form.cost [1] == CS_PIN_SCRYPT_R && form.cost [2] == CS_PIN_SCRYPT_P;
}

char *
cs_pin_wrap (const char *stored, const uint8_t key [CS_PIN_KEY_LEN])
{
    s_form_t form;
    unsigned char tag [HASH_LEN];
    unsigned int mac_len = 0;
    char salt_hex [2 * SALT_LEN + 1], tag_hex [2 * HASH_LEN + 1];
    char *wrapped = NULL;
    if (!s_parse (stored, &form) || !key)
        return NULL;
    if (form.kind != S_PBKDF2)
        return strdup (stored);
    if (!HMAC (EVP_sha256 (), key, CS_PIN_KEY_LEN, form.hash, HASH_LEN, tag, &mac_len)
    ||  mac_len != HASH_LEN)
        return NULL;
    cs_hex_encode (form.salt, SALT_LEN, salt_hex);
    cs_hex_encode (tag, HASH_LEN, tag_hex);
    if (asprintf (&wrapped, FORM_PBKDF2_HMAC "%u$%s$%s", form.cost [0], salt_hex, tag_hex) < 0)
        wrapped = NULL;
    OPENSSL_cleanse (tag, sizeof tag);
    OPENSSL_cleanse (&form, sizeof form);
    return wrapped;
}
