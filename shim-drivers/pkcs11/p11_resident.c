/*  p11_resident.c — resident keys on a pkcs11 board (p11_int.h): generated
 *  on the token (C_GenerateKeyPair: a token key, private, sensitive, never
 *  extractable) and destroyed with every object of their CKA_ID.
 */
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include "cs_util.h"
#include "cs_wire.h"          /* cs_rv_name */
#include "p11_int.h"

/*  The public template of a resident key pair generation.  */
static CK_ULONG
s_gen_public (const cs_keygen_t *gen, CK_ATTRIBUTE *t, CK_BBOOL *yes, CK_ULONG *bits)
{
    static const unsigned char f4 [] = { 0x01, 0x00, 0x01 };
    CK_ULONG n = 0;
    t [n++] = (CK_ATTRIBUTE) { CKA_TOKEN, yes, sizeof *yes };
    t [n++] = (CK_ATTRIBUTE) { CKA_VERIFY, yes, sizeof *yes };
    t [n++] = (CK_ATTRIBUTE) { CKA_ID, (void *) gen->id, gen->id_len };
    if (gen->label)
        t [n++] = (CK_ATTRIBUTE) { CKA_LABEL, (void *) gen->label, strlen (gen->label) };
    if (gen->mechanism == CKM_RSA_PKCS_KEY_PAIR_GEN) {
        *bits = gen->modulus_bits;
        t [n++] = (CK_ATTRIBUTE) { CKA_ENCRYPT, yes, sizeof *yes };
        t [n++] = (CK_ATTRIBUTE) { CKA_MODULUS_BITS, bits, sizeof *bits };
        t [n++] = gen->public_exponent_len
                ? (CK_ATTRIBUTE) { CKA_PUBLIC_EXPONENT, (void *) gen->public_exponent,
                                   gen->public_exponent_len }
                : (CK_ATTRIBUTE) { CKA_PUBLIC_EXPONENT, (void *) f4, sizeof f4 };
    }
    else
        t [n++] = (CK_ATTRIBUTE) { CKA_EC_PARAMS, (void *) gen->ec_params, gen->ec_params_len };
    return n;
}

/*  The private template: a token key, private, sensitive, never extractable.  */
static CK_ULONG
s_gen_private (const cs_keygen_t *gen, CK_ATTRIBUTE *t, CK_BBOOL *yes, CK_BBOOL *no,
               CK_BBOOL *sign, CK_BBOOL *decrypt)
{
    CK_ULONG n = 0;
    *sign = gen->can_sign ? CK_TRUE : CK_FALSE;
    *decrypt = gen->can_decrypt && gen->mechanism == CKM_RSA_PKCS_KEY_PAIR_GEN ? CK_TRUE : CK_FALSE;
    t [n++] = (CK_ATTRIBUTE) { CKA_TOKEN, yes, sizeof *yes };
    t [n++] = (CK_ATTRIBUTE) { CKA_PRIVATE, yes, sizeof *yes };
    t [n++] = (CK_ATTRIBUTE) { CKA_SENSITIVE, yes, sizeof *yes };
    t [n++] = (CK_ATTRIBUTE) { CKA_EXTRACTABLE, no, sizeof *no };
    t [n++] = (CK_ATTRIBUTE) { CKA_SIGN, sign, sizeof *sign };
    t [n++] = (CK_ATTRIBUTE) { CKA_ID, (void *) gen->id, gen->id_len };
    if (gen->label)
        t [n++] = (CK_ATTRIBUTE) { CKA_LABEL, (void *) gen->label, strlen (gen->label) };
    if (gen->mechanism == CKM_RSA_PKCS_KEY_PAIR_GEN)
        t [n++] = (CK_ATTRIBUTE) { CKA_DECRYPT, decrypt, sizeof *decrypt };
    return n;
}

CK_RV
p11_generate_resident (cs_drv_session_t *self, const cs_keygen_t *gen, cs_key_info_t *info)
{
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE, sign, decrypt;
    CK_ULONG bits = 0;
    CK_ATTRIBUTE pub [8], priv [8];
    CK_MECHANISM mech = { gen->mechanism, NULL, 0 };
    CK_OBJECT_HANDLE pub_obj, priv_obj;
    if (!gen->id || gen->id_len == 0 || gen->id_len > CS_KEY_ID_MAX)
        return CKR_ARGUMENTS_BAD;
    if (gen->mechanism != CKM_RSA_PKCS_KEY_PAIR_GEN && gen->mechanism != CKM_EC_KEY_PAIR_GEN
    &&  gen->mechanism != CKM_EC_EDWARDS_KEY_PAIR_GEN)
        return CKR_MECHANISM_INVALID;
    CK_ULONG n_pub = s_gen_public (gen, pub, &yes, &bits);
    CK_ULONG n_priv = s_gen_private (gen, priv, &yes, &no, &sign, &decrypt);
    CK_RV rv = self->board->fl->C_GenerateKeyPair (self->handle, &mech, pub, n_pub, priv, n_priv,
                                                   &pub_obj, &priv_obj);
    if (rv != CKR_OK) {
        zsys_warning ("pkcs11 %s: C_GenerateKeyPair: %s", self->board->name, cs_rv_name (rv));
        return rv;
    }
    memset (info, 0, sizeof *info);
    if (p11_key_read (self->board, self->handle, priv_obj, info) == 0)
        return CKR_OK;
    cs_key_info_free_members (info);
    self->board->fl->C_DestroyObject (self->handle, priv_obj);
    self->board->fl->C_DestroyObject (self->handle, pub_obj);
    return CKR_DEVICE_ERROR;
}

CK_RV
p11_destroy_resident (cs_drv_session_t *self, const unsigned char *id, size_t id_len)
{
    CK_ATTRIBUTE tmpl [] = { { CKA_ID, (void *) id, id_len } };
    CK_OBJECT_HANDLE objs [16];
    CK_RV rv = CKR_OK;
    if (!id || id_len == 0 || id_len > CS_KEY_ID_MAX)
        return CKR_ARGUMENTS_BAD;
    CK_ULONG count = p11_find (self->board, self->handle, tmpl, 1, objs, 16);
    for (CK_ULONG i = 0; i < count; i++) {
        CK_RV one = self->board->fl->C_DestroyObject (self->handle, objs [i]);
        if (one != CKR_OK)
            rv = one;
    }
    char hex [2 * CS_KEY_ID_MAX + 1];
    cs_hex_encode (id, id_len, hex);
    zhashx_delete (self->objects, hex);
    return rv;
}

