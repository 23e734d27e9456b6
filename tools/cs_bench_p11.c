/*  cs_bench_p11.c — cryptoserver-bench's view of a PKCS#11 module: load it
 *  with dlopen, find the token by label, log in, find keys by label and read
 *  their public attributes.  Nothing here is specific to cryptoserver, so the
 *  same code measures our module and a board's own library.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cs_p11_3.h"
#include "cs_bench.h"
#include "cs_wire.h"

bool
cs_bench_mech_parse (const char *name, cs_bench_mech_t *mech)
{
    if (strcmp (name, "sha256-rsa-pkcs") == 0)
        *mech = CS_BENCH_SHA256_RSA_PKCS;
    else
    if (strcmp (name, "rsa-pkcs-pss-sha256") == 0)
        *mech = CS_BENCH_RSA_PSS_SHA256;
    else
    if (strcmp (name, "ecdsa-sha256") == 0)
        *mech = CS_BENCH_ECDSA_SHA256;
    else
    if (strcmp (name, "ecdsa") == 0)
        *mech = CS_BENCH_ECDSA;
    else
        return false;
    return true;
}

const char *
cs_bench_mech_name (cs_bench_mech_t mech)
{
    switch (mech) {
        case CS_BENCH_SHA256_RSA_PKCS: return "sha256-rsa-pkcs";
        case CS_BENCH_RSA_PSS_SHA256:  return "rsa-pkcs-pss-sha256";
        case CS_BENCH_ECDSA_SHA256:    return "ecdsa-sha256";
        case CS_BENCH_ECDSA:           return "ecdsa";
    }
    return "?";
}

bool
cs_bench_mech_is_ec (cs_bench_mech_t mech)
{
    return mech == CS_BENCH_ECDSA_SHA256 || mech == CS_BENCH_ECDSA;
}

void
cs_bench_mech_fill (cs_bench_mech_t mech, CK_MECHANISM *mechanism, CK_RSA_PKCS_PSS_PARAMS *pss)
{
    memset (mechanism, 0, sizeof *mechanism);
    switch (mech) {
        case CS_BENCH_SHA256_RSA_PKCS:
            mechanism->mechanism = CKM_SHA256_RSA_PKCS;
            break;
        case CS_BENCH_RSA_PSS_SHA256:
            pss->hashAlg = CKM_SHA256;
            pss->mgf = CKG_MGF1_SHA256;
            pss->sLen = 32;
            mechanism->mechanism = CKM_SHA256_RSA_PKCS_PSS;
            mechanism->pParameter = pss;
            mechanism->ulParameterLen = sizeof *pss;
            break;
        case CS_BENCH_ECDSA_SHA256:
            mechanism->mechanism = CKM_ECDSA_SHA256;
            break;
        case CS_BENCH_ECDSA:
            mechanism->mechanism = CKM_ECDSA;
            break;
    }
}

//  True when the 32-byte blank-padded token label equals `label`.
static bool
s_label_eq (const unsigned char padded [32], const char *label)
{
    size_t len = strlen (label);
    if (len > 32 || memcmp (padded, label, len) != 0)
        return false;
    for (size_t i = len; i < 32; i++)
        if (padded [i] != ' ')
            return false;
    return true;
}

//  Finds the slot holding the token labelled `token`.  Returns 0 or -1.
static int
s_find_slot (cs_bench_module_t *module, const char *token, char *err, size_t err_size)
{
    CK_ULONG count = 0;
    CK_RV rv = module->p11->C_GetSlotList (CK_TRUE, NULL, &count);
    CK_SLOT_ID *slots = rv == CKR_OK ? calloc (count + 1, sizeof *slots) : NULL;
    if (slots)
        rv = module->p11->C_GetSlotList (CK_TRUE, slots, &count);
    int found = -1;
    for (CK_ULONG i = 0; slots && rv == CKR_OK && i < count && found < 0; i++) {
        CK_TOKEN_INFO info;
        if (module->p11->C_GetTokenInfo (slots [i], &info) == CKR_OK
        &&  s_label_eq (info.label, token)) {
            module->slot = slots [i];
            found = 0;
        }
    }
    if (rv != CKR_OK)
        snprintf (err, err_size, "C_GetSlotList: %s", cs_rv_name (rv));
    else
    if (found < 0)
        snprintf (err, err_size, "no token labelled '%s' (%lu slots with a token)",
                  token, (unsigned long) count);
    free (slots);
    return found;
}

int
cs_bench_module_open (cs_bench_module_t *module, const char *path, const char *token,
                      char *err, size_t err_size)
{
    memset (module, 0, sizeof *module);
    module->dl = dlopen (path, RTLD_NOW | RTLD_LOCAL);
    if (!module->dl) {
        snprintf (err, err_size, "dlopen %s: %s", path, dlerror ());
        return -1;
    }
    CK_C_GetFunctionList get_list = (CK_C_GetFunctionList) dlsym (module->dl, "C_GetFunctionList");
    CK_RV rv = get_list ? get_list (&module->p11) : CKR_GENERAL_ERROR;
    if (rv != CKR_OK || !module->p11) {
        snprintf (err, err_size, "%s: no usable C_GetFunctionList", path);
        return -1;
    }
    CK_C_INITIALIZE_ARGS args = { .flags = CKF_OS_LOCKING_OK };
    rv = module->p11->C_Initialize (&args);
    if (rv != CKR_OK) {
        snprintf (err, err_size, "C_Initialize: %s", cs_rv_name (rv));
        return -1;
    }
    module->initialized = true;
    return s_find_slot (module, token, err, err_size);
}

void
cs_bench_module_close (cs_bench_module_t *module)
{
    if (module->initialized)
        module->p11->C_Finalize (NULL);
    if (module->dl)
        dlclose (module->dl);
    memset (module, 0, sizeof *module);
}

CK_RV
cs_bench_session_open (cs_bench_module_t *module, const char *pin, CK_SESSION_HANDLE *session)
{
    CK_RV rv = module->p11->C_OpenSession (module->slot, CKF_SERIAL_SESSION | CKF_RW_SESSION,
                                           NULL, NULL, session);
    if (rv != CKR_OK)
        return rv;
    rv = module->p11->C_Login (*session, CKU_USER, (CK_UTF8CHAR *) pin, strlen (pin));
    if (rv == CKR_USER_ALREADY_LOGGED_IN)
        rv = CKR_OK;
    if (rv != CKR_OK)
        module->p11->C_CloseSession (*session);
    return rv;
}

CK_RV
cs_bench_find (cs_bench_module_t *module, CK_SESSION_HANDLE session,
               CK_OBJECT_CLASS klass, const char *label, CK_OBJECT_HANDLE *object)
{
    CK_ATTRIBUTE template [] = {
        { CKA_CLASS, &klass, sizeof klass },
        { CKA_LABEL, (void *) label, strlen (label) }
    };
    CK_ULONG found = 0;
    CK_RV rv = module->p11->C_FindObjectsInit (session, template, 2);
    if (rv != CKR_OK)
        return rv;
    rv = module->p11->C_FindObjects (session, object, 1, &found);
    module->p11->C_FindObjectsFinal (session);
    if (rv == CKR_OK && found == 0)
        rv = CKR_KEY_HANDLE_INVALID;
    return rv;
}

//  Reads one variable-length attribute into a malloc'd buffer.  Returns
//  CKR_OK, or the failing CK_RV (then *value_p stays NULL).
static CK_RV
s_attribute (cs_bench_module_t *module, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE object,
             CK_ATTRIBUTE_TYPE type, unsigned char **value_p, size_t *len_p)
{
    CK_ATTRIBUTE attribute = { type, NULL, 0 };
    CK_RV rv = module->p11->C_GetAttributeValue (session, object, &attribute, 1);
    if (rv != CKR_OK)
        return rv;
    if (attribute.ulValueLen == CK_UNAVAILABLE_INFORMATION || attribute.ulValueLen == 0)
        return CKR_ATTRIBUTE_TYPE_INVALID;
    attribute.pValue = malloc (attribute.ulValueLen);
    if (!attribute.pValue)
        return CKR_HOST_MEMORY;
    rv = module->p11->C_GetAttributeValue (session, object, &attribute, 1);
    if (rv != CKR_OK) {
        free (attribute.pValue);
        return rv;
    }
    *value_p = attribute.pValue;
    *len_p = attribute.ulValueLen;
    return CKR_OK;
}

//  Reads the RSA or EC public attributes of `object` into *pubkey.
static CK_RV
s_pubkey_from (cs_bench_module_t *module, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE object,
               cs_bench_pubkey_t *pubkey)
{
    CK_ATTRIBUTE type = { CKA_KEY_TYPE, &pubkey->key_type, sizeof pubkey->key_type };
    CK_RV rv = module->p11->C_GetAttributeValue (session, object, &type, 1);
    if (rv != CKR_OK)
        return rv;
    if (pubkey->key_type == CKK_RSA) {
        rv = s_attribute (module, session, object, CKA_MODULUS, &pubkey->modulus, &pubkey->modulus_len);
        if (rv == CKR_OK)
            rv = s_attribute (module, session, object, CKA_PUBLIC_EXPONENT,
                              &pubkey->exponent, &pubkey->exponent_len);
    }
    else
    if (pubkey->key_type == CKK_EC) {
        rv = s_attribute (module, session, object, CKA_EC_PARAMS, &pubkey->ec_params, &pubkey->ec_params_len);
        if (rv == CKR_OK)
            rv = s_attribute (module, session, object, CKA_EC_POINT, &pubkey->ec_point, &pubkey->ec_point_len);
    }
    else
        rv = CKR_KEY_TYPE_INCONSISTENT;
    if (rv != CKR_OK)
        cs_bench_pubkey_clear (pubkey);
    return rv;
}

CK_RV
cs_bench_pubkey_read (cs_bench_module_t *module, CK_SESSION_HANDLE session,
                      const char *label, cs_bench_pubkey_t *pubkey)
{
    memset (pubkey, 0, sizeof *pubkey);
    CK_OBJECT_HANDLE object;
    CK_RV rv = cs_bench_find (module, session, CKO_PUBLIC_KEY, label, &object);
    if (rv == CKR_OK)
        rv = s_pubkey_from (module, session, object, pubkey);
    if (rv != CKR_OK) {        //  no public object: RSA private keys carry n and e
        CK_RV again = cs_bench_find (module, session, CKO_PRIVATE_KEY, label, &object);
        if (again == CKR_OK)
            again = s_pubkey_from (module, session, object, pubkey);
        if (again == CKR_OK)
            rv = CKR_OK;
    }
    return rv;
}

void
cs_bench_pubkey_clear (cs_bench_pubkey_t *pubkey)
{
    free (pubkey->modulus);
    free (pubkey->exponent);
    free (pubkey->ec_params);
    free (pubkey->ec_point);
    CK_KEY_TYPE key_type = pubkey->key_type;
    memset (pubkey, 0, sizeof *pubkey);
    pubkey->key_type = key_type;
}

CK_FUNCTION_LIST_3_2 *
cs_bench_list_3_2 (cs_bench_module_t *module)
{
    CK_RV (*get) (CK_UTF8CHAR_PTR, CK_VERSION_PTR, CK_INTERFACE_PTR_PTR, CK_FLAGS)
        = (CK_RV (*) (CK_UTF8CHAR_PTR, CK_VERSION_PTR, CK_INTERFACE_PTR_PTR, CK_FLAGS)) dlsym (module->dl, "C_GetInterface");
    CK_VERSION version = { 3, 2 };
    CK_INTERFACE *iface = NULL;
    return get && get ((CK_UTF8CHAR *) "PKCS 11", &version, &iface, 0) == CKR_OK && iface ? iface->pFunctionList : NULL;
}
