/*  cs-p11-shell.c — one PKCS#11 application process that stays alive and
 *  takes commands, for tests that need a logged-in session to outlive what
 *  other processes do meanwhile (tests/integration/login-tickets.sh,
 *  keystore-tamper.sh): a C_InitPIN by the SO, wrong PINs, an expiry, a
 *  change of keystore.db.
 *
 *  usage: cs-p11-shell MODULE.so TOKEN-LABEL
 *
 *  Opens one R/W session on the token and reads commands from stdin, one a
 *  line; answers each with one line "COMMAND CKR_NAME" (flushed):
 *    login PIN          C_Login (CKU_USER)
 *    login-so PIN       C_Login (CKU_SO)
 *    logout             C_Logout
 *    sign ID            C_Sign, CKM_SHA256_RSA_PKCS, with the private key whose
 *                       CKA_ID is the hex ID (CKR_OBJECT_HANDLE_INVALID when
 *                       the token lists none)
 *    hold ID            finds that key (as sign does) and keeps its handle
 *    sign-held          C_Sign with the handle kept by hold, without a find:
 *                       the module's key list is not refreshed (keystore-shared.sh)
 *    destroy-held       C_DestroyObject of the handle kept by hold, without a
 *                       find (keys-idempotent.sh)
 *    keygen-signer ID LABEL   C_GenerateKeyPair of a token RSA-2048 pair with
 *                       CKA_ID ID (hex) and CKA_LABEL LABEL whose private key
 *                       signs and does not decrypt (CKA_DECRYPT FALSE)
 *    keygen-rsa BITS EXP   C_GenerateKeyPair of a session RSA pair of BITS
 *                       bits with CKA_PUBLIC_EXPONENT the hex bytes EXP (as
 *                       given, leading zeros kept); CKR_GENERAL_ERROR when the
 *                       public key's exponent is not that number
 *    encrypt ID LEN     C_Encrypt (CKM_RSA_PKCS) of LEN bytes with the public
 *                       key whose CKA_ID is the hex ID (pkcs11-tool 0.23
 *                       encrypts with secret keys only)
 *    hold-secret ID     finds the secret key (CKO_SECRET_KEY) whose CKA_ID is
 *                       the hex ID and keeps its handle (as hold does)
 *    encrypt-held       C_EncryptInit + C_Encrypt (CKM_AES_CBC_PAD, IV of
 *                       zeros) of 16 bytes with the handle kept by hold-secret
 *    value-held         C_GetAttributeValue (CKA_VALUE) of the handle kept
 *    shared ID TRUE|FALSE   C_GetAttributeValue (CKA_CS_SHARED, the vendor
 *                       attribute of cryptoserver/pkcs11v.h) of the private key
 *                       whose CKA_ID is the hex ID: CKR_OK when it reads that
 *                       value, CKR_GENERAL_ERROR when it reads the other
 *    init-pin PIN       C_InitPIN
 *    set-pin OLD NEW    C_SetPIN
 *    quit               ends (C_Finalize), exit 0
 *  Links nothing of the project; the module is dlopen'ed.  Exit 1 when the
 *  module or the token cannot be opened.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <p11-kit/pkcs11.h>
#include "cryptoserver/pkcs11v.h"
#include "cs-test-slot.h"

static CK_FUNCTION_LIST *p11;
static CK_SESSION_HANDLE s_session;

//  The CKR_* name of the values the tests expect, else "CKR_0x...".
static const char *
s_rv_name (CK_RV rv)
{
    static char other [32];
    static const struct { CK_RV rv; const char *name; } names [] = {
        { CKR_OK, "CKR_OK" }, { CKR_USER_NOT_LOGGED_IN, "CKR_USER_NOT_LOGGED_IN" },
        { CKR_USER_ALREADY_LOGGED_IN, "CKR_USER_ALREADY_LOGGED_IN" },
        { CKR_PIN_INCORRECT, "CKR_PIN_INCORRECT" }, { CKR_PIN_LOCKED, "CKR_PIN_LOCKED" },
        { CKR_DEVICE_ERROR, "CKR_DEVICE_ERROR" }, { CKR_OBJECT_HANDLE_INVALID, "CKR_OBJECT_HANDLE_INVALID" },
        { CKR_KEY_HANDLE_INVALID, "CKR_KEY_HANDLE_INVALID" },
        { CKR_KEY_FUNCTION_NOT_PERMITTED, "CKR_KEY_FUNCTION_NOT_PERMITTED" },
        { CKR_ARGUMENTS_BAD, "CKR_ARGUMENTS_BAD" }, { CKR_ATTRIBUTE_SENSITIVE, "CKR_ATTRIBUTE_SENSITIVE" },
        { CKR_KEY_TYPE_INCONSISTENT, "CKR_KEY_TYPE_INCONSISTENT" }, { CKR_PIN_LEN_RANGE, "CKR_PIN_LEN_RANGE" },
        { CKR_KEY_SIZE_RANGE, "CKR_KEY_SIZE_RANGE" }, { CKR_GENERAL_ERROR, "CKR_GENERAL_ERROR" },
        { CKR_ATTRIBUTE_VALUE_INVALID, "CKR_ATTRIBUTE_VALUE_INVALID" },
        { CKR_DATA_LEN_RANGE, "CKR_DATA_LEN_RANGE" }, { CKR_DEVICE_MEMORY, "CKR_DEVICE_MEMORY" },
    };
    for (size_t i = 0; i < sizeof names / sizeof names [0]; i++)
        if (names [i].rv == rv)
            return names [i].name;
    snprintf (other, sizeof other, "CKR_0x%lx", (unsigned long) rv);
    return other;
}

//  The slot whose token label is `label` (blank-padded compare), or exits.
static CK_SLOT_ID
s_slot (const char *label)
{
    CK_SLOT_ID slot = 0;
    if (cs_test_slot (p11, label, &slot) != CKR_OK) {
        fprintf (stderr, "cs-p11-shell: no token %s\n", label);
        exit (1);
    }
    return slot;
}

//  Decodes hex into id (at most max bytes); returns the byte count.
static CK_ULONG
s_unhex (const char *hex, CK_BYTE *id, CK_ULONG max)
{
    CK_ULONG len = 0;
    unsigned byte;
    while (hex [2 * len] && len < max && sscanf (hex + 2 * len, "%2x", &byte) == 1)
        id [len++] = (CK_BYTE) byte;
    return len;
}

static CK_OBJECT_HANDLE s_held;    /* "hold": a key handle kept for "sign-held" */

//  The first object of class `klass` with CKA_ID `hex` in *key_p.
static CK_RV
s_find (CK_OBJECT_CLASS klass, const char *hex, CK_OBJECT_HANDLE *key_p)
{
    CK_BYTE id [64];
    CK_ULONG id_len = s_unhex (hex, id, sizeof id), found = 0;
    CK_ATTRIBUTE template [] = { { CKA_CLASS, &klass, sizeof klass }, { CKA_ID, id, id_len } };
    CK_RV rv = p11->C_FindObjectsInit (s_session, template, 2);
    if (rv != CKR_OK)
        return rv;
    rv = p11->C_FindObjects (s_session, key_p, 1, &found);
    p11->C_FindObjectsFinal (s_session);
    return rv == CKR_OK && found == 0 ? CKR_OBJECT_HANDLE_INVALID : rv;
}

//  C_Encrypt (CKM_RSA_PKCS) of `len_text` bytes with the public key `hex`.
static CK_RV
s_encrypt (const char *hex, const char *len_text)
{
    CK_BYTE data [1024] = { 0 }, out [1024];
    CK_ULONG len = strtoul (len_text, NULL, 10), out_len = sizeof out;
    CK_MECHANISM mechanism = { CKM_RSA_PKCS, NULL, 0 };
    CK_OBJECT_HANDLE key;
    CK_RV rv = len <= sizeof data ? s_find (CKO_PUBLIC_KEY, hex, &key) : CKR_ARGUMENTS_BAD;
    memset (data, 0x5a, sizeof data);
    if (rv != CKR_OK || (rv = p11->C_EncryptInit (s_session, &mechanism, key)) != CKR_OK)
        return rv;
    return p11->C_Encrypt (s_session, data, len, out, &out_len);
}

//  C_Encrypt (CKM_AES_CBC_PAD, IV of zeros) of 16 bytes with the held handle.
static CK_RV
s_encrypt_held (void)
{
    CK_BYTE iv [16] = { 0 }, data [16], out [64];
    CK_ULONG out_len = sizeof out;
    CK_MECHANISM mechanism = { CKM_AES_CBC_PAD, iv, sizeof iv };
    memset (data, 0x5a, sizeof data);
    CK_RV rv = p11->C_EncryptInit (s_session, &mechanism, s_held);
    return rv == CKR_OK ? p11->C_Encrypt (s_session, data, sizeof data, out, &out_len) : rv;
}

//  C_GetAttributeValue of CKA_VALUE of the held handle (wiped).
static CK_RV
s_value_held (void)
{
    CK_BYTE value [512];
    CK_ATTRIBUTE attr = { CKA_VALUE, value, sizeof value };
    CK_RV rv = p11->C_GetAttributeValue (s_session, s_held, &attr, 1);
    memset (value, 0, sizeof value);
    return rv;
}

//  CKA_CS_SHARED of the private key `hex` must read `want` ("TRUE", "FALSE").
static CK_RV
s_shared (const char *hex, const char *want)
{
    CK_BBOOL value = 2;
    CK_ATTRIBUTE attr = { CKA_CS_SHARED, &value, sizeof value };
    CK_OBJECT_HANDLE key;
    CK_RV rv = s_find (CKO_PRIVATE_KEY, hex, &key);
    if (rv == CKR_OK)
        rv = p11->C_GetAttributeValue (s_session, key, &attr, 1);
    if (rv == CKR_OK && (attr.ulValueLen != 1 || value != (strcmp (want, "TRUE") == 0 ? CK_TRUE : CK_FALSE)))
        rv = CKR_GENERAL_ERROR;
    return rv;
}

//  C_Sign of a fixed message (CKM_SHA256_RSA_PKCS) with key handle `key`.
static CK_RV
s_sign_with (CK_OBJECT_HANDLE key)
{
    CK_BYTE sig [1024];
    CK_ULONG sig_len = sizeof sig;
    CK_MECHANISM mechanism = { CKM_SHA256_RSA_PKCS, NULL, 0 };
    static const char msg [] = "cs-p11-shell";
    CK_RV rv = p11->C_SignInit (s_session, &mechanism, key);
    if (rv != CKR_OK)
        return rv;
    return p11->C_Sign (s_session, (CK_BYTE_PTR) msg, sizeof msg - 1, sig, &sig_len);
}

//  C_Sign of a fixed message with the private key of CKA_ID `hex`.
static CK_RV
s_sign (const char *hex)
{
    CK_OBJECT_HANDLE key;
    CK_RV rv = s_find (CKO_PRIVATE_KEY, hex, &key);
    return rv == CKR_OK ? s_sign_with (key) : rv;
}

//  C_GenerateKeyPair: a token RSA-2048 signing key that does not decrypt.
static CK_RV
s_keygen_signer (const char *hex, const char *label)
{
    CK_BYTE id [64], exponent [] = { 1, 0, 1 };
    CK_ULONG id_len = s_unhex (hex, id, sizeof id), bits = 2048;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_MECHANISM mechanism = { CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0 };
    CK_OBJECT_HANDLE pub, priv;
    CK_ATTRIBUTE pub_template [] = {
        { CKA_TOKEN, &yes, sizeof yes }, { CKA_MODULUS_BITS, &bits, sizeof bits },
        { CKA_PUBLIC_EXPONENT, exponent, sizeof exponent }, { CKA_VERIFY, &yes, sizeof yes },
        { CKA_ENCRYPT, &no, sizeof no }, { CKA_ID, id, id_len },
        { CKA_LABEL, (void *) label, strlen (label) },
    };
    CK_ATTRIBUTE priv_template [] = {
        { CKA_TOKEN, &yes, sizeof yes }, { CKA_PRIVATE, &yes, sizeof yes },
        { CKA_SIGN, &yes, sizeof yes }, { CKA_DECRYPT, &no, sizeof no },
        { CKA_ID, id, id_len }, { CKA_LABEL, (void *) label, strlen (label) },
    };
    return p11->C_GenerateKeyPair (s_session, &mechanism, pub_template, 7, priv_template, 6, &pub, &priv);
}

//  C_GenerateKeyPair: a session RSA pair of `bits_text` bits with exponent
//  `hex`; checks the public key's CKA_PUBLIC_EXPONENT.
static CK_RV
s_keygen_rsa (const char *bits_text, const char *hex)
{
    CK_BYTE exponent [16], got [16];
    CK_ULONG len = s_unhex (hex, exponent, sizeof exponent), bits = strtoul (bits_text, NULL, 10);
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_MECHANISM mechanism = { CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0 };
    CK_OBJECT_HANDLE pub, priv;
    CK_ATTRIBUTE pub_template [] = {
        { CKA_TOKEN, &no, sizeof no }, { CKA_MODULUS_BITS, &bits, sizeof bits },
        { CKA_PUBLIC_EXPONENT, exponent, len }, { CKA_VERIFY, &yes, sizeof yes },
    };
    CK_ATTRIBUTE priv_template [] = { { CKA_TOKEN, &no, sizeof no }, { CKA_SIGN, &yes, sizeof yes } };
    CK_ATTRIBUTE read = { CKA_PUBLIC_EXPONENT, got, sizeof got };
    CK_RV rv = p11->C_GenerateKeyPair (s_session, &mechanism, pub_template, 4, priv_template, 2, &pub, &priv);
    if (rv != CKR_OK || (rv = p11->C_GetAttributeValue (s_session, pub, &read, 1)) != CKR_OK)
        return rv;
    CK_ULONG skip = 0, got_skip = 0;
    while (skip < len && !exponent [skip])
        skip++;
    while (got_skip < read.ulValueLen && !got [got_skip])
        got_skip++;
    if (len - skip != read.ulValueLen - got_skip || memcmp (exponent + skip, got + got_skip, len - skip))
        return CKR_GENERAL_ERROR;
    return CKR_OK;
}

//  Runs one command line; returns 0, or 1 for "quit".
static int
s_command (char *line)
{
    char *command = strtok (line, " \t\r\n"), *a = strtok (NULL, " \t\r\n"), *b = strtok (NULL, " \t\r\n");
    CK_RV rv = CKR_ARGUMENTS_BAD;
    if (!command)
        return 0;
    if (strcmp (command, "quit") == 0)
        return 1;
    if (strcmp (command, "login") == 0 && a)
        rv = p11->C_Login (s_session, CKU_USER, (CK_UTF8CHAR_PTR) a, strlen (a));
    else
    if (strcmp (command, "login-so") == 0 && a)
        rv = p11->C_Login (s_session, CKU_SO, (CK_UTF8CHAR_PTR) a, strlen (a));
    else
    if (strcmp (command, "logout") == 0)
        rv = p11->C_Logout (s_session);
    else
    if (strcmp (command, "sign") == 0 && a)
        rv = s_sign (a);
    else
    if (strcmp (command, "hold") == 0 && a)
        rv = s_find (CKO_PRIVATE_KEY, a, &s_held);
    else
    if (strcmp (command, "hold-secret") == 0 && a)
        rv = s_find (CKO_SECRET_KEY, a, &s_held);
    else
    if (strcmp (command, "encrypt-held") == 0)
        rv = s_encrypt_held ();
    else
    if (strcmp (command, "value-held") == 0)
        rv = s_value_held ();
    else
    if (strcmp (command, "shared") == 0 && a && b)
        rv = s_shared (a, b);
    else
    if (strcmp (command, "sign-held") == 0)
        rv = s_sign_with (s_held);
    else
    if (strcmp (command, "destroy-held") == 0)
        rv = p11->C_DestroyObject (s_session, s_held);
    else
    if (strcmp (command, "keygen-signer") == 0 && a && b)
        rv = s_keygen_signer (a, b);
    else
    if (strcmp (command, "encrypt") == 0 && a && b)
        rv = s_encrypt (a, b);
    else
    if (strcmp (command, "keygen-rsa") == 0 && a && b)
        rv = s_keygen_rsa (a, b);
    else
    if (strcmp (command, "init-pin") == 0 && a)
        rv = p11->C_InitPIN (s_session, (CK_UTF8CHAR_PTR) a, strlen (a));
    else
    if (strcmp (command, "set-pin") == 0 && a && b)
        rv = p11->C_SetPIN (s_session, (CK_UTF8CHAR_PTR) a, strlen (a), (CK_UTF8CHAR_PTR) b, strlen (b));
    printf ("%s %s\n", command, s_rv_name (rv));
    fflush (stdout);
    return 0;
}

int
main (int argc, char **argv)
{
    char line [512];
    if (argc != 3) {
        fprintf (stderr, "usage: cs-p11-shell MODULE.so TOKEN-LABEL\n");
        return 2;
    }
    void *lib = dlopen (argv [1], RTLD_NOW | RTLD_LOCAL);
    CK_C_GetFunctionList get = lib ? (CK_C_GetFunctionList) dlsym (lib, "C_GetFunctionList") : NULL;
    if (!get || get (&p11) != CKR_OK || p11->C_Initialize (NULL) != CKR_OK) {
        fprintf (stderr, "cs-p11-shell: cannot load %s: %s\n", argv [1], lib ? "no C_GetFunctionList" : dlerror ());
        return 1;
    }
    CK_SLOT_ID slot = s_slot (argv [2]);
    if (p11->C_OpenSession (slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s_session) != CKR_OK) {
        fprintf (stderr, "cs-p11-shell: C_OpenSession failed\n");
        return 1;
    }
    while (fgets (line, sizeof line, stdin) && s_command (line) == 0)
        ;
    p11->C_CloseSession (s_session);
    p11->C_Finalize (NULL);
    dlclose (lib);
    return 0;
}
