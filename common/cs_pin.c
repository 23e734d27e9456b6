/*  cs_pin.c — PBKDF2-HMAC-SHA256 PIN hashes via OpenSSL.  */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include "cs_pin.h"
#include "cs_util.h"

#define SALT_LEN 16
#define HASH_LEN 32

static bool
s_derive (const void *pin, size_t pin_len, const unsigned char *salt,
          unsigned iterations, unsigned char hash [HASH_LEN])
{
    return PKCS5_PBKDF2_HMAC (pin, (int) pin_len, salt, SALT_LEN, (int) iterations,
                              EVP_sha256 (), HASH_LEN, hash) == 1;
}

char *
cs_pin_hash (const void *pin, size_t pin_len)
{
    unsigned char salt [SALT_LEN], hash [HASH_LEN];
    char salt_hex [2 * SALT_LEN + 1], hash_hex [2 * HASH_LEN + 1];
    char *stored = NULL;
    if (RAND_bytes (salt, SALT_LEN) != 1
    ||  !s_derive (pin, pin_len, salt, CS_PIN_ITERATIONS, hash))
        return NULL;
    cs_hex_encode (salt, SALT_LEN, salt_hex);
    cs_hex_encode (hash, HASH_LEN, hash_hex);
    if (asprintf (&stored, "pbkdf2-sha256$%u$%s$%s", CS_PIN_ITERATIONS, salt_hex, hash_hex) < 0)
        stored = NULL;
    OPENSSL_cleanse (hash, sizeof hash);
    return stored;
}

bool
cs_pin_verify (const char *stored, const void *pin, size_t pin_len)
{
    unsigned iterations;
    char salt_hex [2 * SALT_LEN + 2], hash_hex [2 * HASH_LEN + 2];
    unsigned char salt [SALT_LEN], want [HASH_LEN], got [HASH_LEN];
    if (!stored
    ||  sscanf (stored, "pbkdf2-sha256$%u$%33[0-9a-fA-F]$%65[0-9a-fA-F]",
                &iterations, salt_hex, hash_hex) != 3
    ||  iterations < 1000 || iterations > 10000000
    ||  cs_hex_decode (salt_hex, salt, SALT_LEN) != SALT_LEN
    ||  cs_hex_decode (hash_hex, want, HASH_LEN) != HASH_LEN
    ||  !s_derive (pin, pin_len, salt, iterations, got))
        return false;
    bool match = CRYPTO_memcmp (want, got, HASH_LEN) == 0;
    OPENSSL_cleanse (got, sizeof got);
    return match;
}
