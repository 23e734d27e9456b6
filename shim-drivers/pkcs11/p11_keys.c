/*  p11_keys.c — the keys of a pkcs11 board (p11_int.h): attributes read
 *  from the token, the description of each private key with a CKA_ID
 *  (read once at open: id, label, type, usage flags and its public half,
 *  PKCS#11 2.40 §2.1.2, §2.3.3), and the per-session handle of a
 *  resident key found by CKA_ID.
 */
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/objects.h>
#include "cs_util.h"
#include "p11_int.h"

/*  Reads attribute `type` of obj into a malloc'd buffer; NULL when absent.  */
unsigned char *
p11_attr_alloc (cs_board_t *self, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE obj,
              CK_ATTRIBUTE_TYPE type, size_t *len_p)
{
    CK_ATTRIBUTE attr = { type, NULL, 0 };
    if (self->fl->C_GetAttributeValue (session, obj, &attr, 1) != CKR_OK
    ||  attr.ulValueLen == CK_UNAVAILABLE_INFORMATION)
        return NULL;
    unsigned char *value = malloc (attr.ulValueLen + 1);
    attr.pValue = value;
    if (!value || self->fl->C_GetAttributeValue (session, obj, &attr, 1) != CKR_OK) {
        free (value);
        return NULL;
    }
    value [attr.ulValueLen] = 0;        /* so labels are C strings */
    *len_p = attr.ulValueLen;
    return value;
}

/*  Reads a fixed-size attribute; returns false when unavailable.  */
bool
p11_attr_get (cs_board_t *self, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE obj,
            CK_ATTRIBUTE_TYPE type, void *value, CK_ULONG len)
{
    CK_ATTRIBUTE attr = { type, value, len };
    return self->fl->C_GetAttributeValue (session, obj, &attr, 1) == CKR_OK;
}

/*  Finds up to max objects matching a template in `session`.  */
CK_ULONG
p11_find (cs_board_t *self, CK_SESSION_HANDLE session, CK_ATTRIBUTE *tmpl, CK_ULONG n,
        CK_OBJECT_HANDLE *objs, CK_ULONG max)
{
    CK_ULONG count = 0;
    if (self->fl->C_FindObjectsInit (session, tmpl, n) != CKR_OK)
        return 0;
    if (self->fl->C_FindObjects (session, objs, max, &count) != CKR_OK)
        count = 0;
    self->fl->C_FindObjectsFinal (session);
    return count;
}

/*  Field size in bits of a DER-encoded named curve; 0 when unknown.  */
static CK_ULONG
s_curve_bits (const unsigned char *der, size_t len)
{
    const unsigned char *p = der;
    ASN1_OBJECT *oid = d2i_ASN1_OBJECT (NULL, &p, (long) len);
    EC_GROUP *group = oid ? EC_GROUP_new_by_curve_name (OBJ_obj2nid (oid)) : NULL;
    CK_ULONG bits = group ? (CK_ULONG) EC_GROUP_get_degree (group) : 0;
    EC_GROUP_free (group);
    ASN1_OBJECT_free (oid);
    return bits;
}

/*  Reads CKA_EC_POINT from the public key object with the same CKA_ID.  */
static int
s_ec_public (cs_board_t *self, CK_SESSION_HANDLE session, cs_key_info_t *key)
{
    CK_OBJECT_CLASS cls = CKO_PUBLIC_KEY;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &cls, sizeof cls }, { CKA_ID, key->id, key->id_len }
    };
    CK_OBJECT_HANDLE pub;
    if (p11_find (self, session, tmpl, 2, &pub, 1) != 1)
        return -1;
    key->ec_point = p11_attr_alloc (self, session, pub, CKA_EC_POINT, &key->ec_point_len);
    return key->ec_point ? 0 : -1;
}

/*  Reads the public attributes of an RSA, EC or EdDSA private key object.  */
static int
s_key_public (cs_board_t *self, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE obj, cs_key_info_t *key)
{
    if (key->key_type == CKK_RSA) {
        key->modulus = p11_attr_alloc (self, session, obj, CKA_MODULUS, &key->modulus_len);
        key->public_exponent = p11_attr_alloc (self, session, obj, CKA_PUBLIC_EXPONENT,
                                             &key->public_exponent_len);
        key->bits = key->modulus_len * 8;
        return key->modulus && key->public_exponent ? 0 : -1;
    }
    if (key->key_type == CKK_EC || key->key_type == CKK_EC_EDWARDS) {
        key->ec_params = p11_attr_alloc (self, session, obj, CKA_EC_PARAMS, &key->ec_params_len);
        if (key->key_type == CKK_EC_EDWARDS)
            key->bits = key->ec_params ? 256 : 0;
        else
            key->bits = key->ec_params ? s_curve_bits (key->ec_params, key->ec_params_len) : 0;
        if (key->bits && s_ec_public (self, session, key) == 0)
            return 0;
        zsys_warning ("pkcs11 %s: EC key '%s' has no public key with its CKA_ID (or an "
                      "unknown curve); skipped", self->name, key->label ? key->label : "");
    }
    return -1;
}

/*  Fills key from private key object obj; returns -1 to skip the key.  */
int
p11_key_read (cs_board_t *self, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE obj, cs_key_info_t *key)
{
    size_t id_len = 0;
    CK_BBOOL sign = CK_FALSE, decrypt = CK_FALSE, derive = CK_FALSE;
    unsigned char *id = p11_attr_alloc (self, session, obj, CKA_ID, &id_len);
    if (!id || id_len == 0 || id_len > CS_KEY_ID_MAX) {
        free (id);
        return -1;
    }
    memcpy (key->id, id, id_len);
    key->id_len = id_len;
    free (id);
    size_t label_len;
    key->label = (char *) p11_attr_alloc (self, session, obj, CKA_LABEL, &label_len);
    p11_attr_get (self, session, obj, CKA_SIGN, &sign, sizeof sign);
    p11_attr_get (self, session, obj, CKA_DECRYPT, &decrypt, sizeof decrypt);
    key->can_sign = sign == CK_TRUE;
    key->can_decrypt = decrypt == CK_TRUE;
    p11_attr_get (self, session, obj, CKA_DERIVE, &derive, sizeof derive);
    key->can_derive = derive == CK_TRUE;
    if (!p11_attr_get (self, session, obj, CKA_KEY_TYPE, &key->key_type, sizeof key->key_type))
        return -1;
    return s_key_public (self, session, obj, key);
}

/*  Lists every CKO_PRIVATE_KEY with a CKA_ID into self->keys.  */
int
p11_read_keys (cs_board_t *self)
{
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE tmpl [] = { { CKA_CLASS, &cls, sizeof cls } };
    CK_OBJECT_HANDLE objs [1024];
    CK_ULONG count = p11_find (self, self->session, tmpl, 1, objs, 1024);
    self->keys = calloc (count ? count : 1, sizeof (cs_key_info_t));
    if (!self->keys)
        return -1;
    for (CK_ULONG i = 0; i < count; i++) {
        cs_key_info_t *key = &self->keys [self->n_keys];
        if (p11_key_read (self, self->session, objs [i], key) == 0)
            self->n_keys++;
        else
            cs_key_info_free_members (key);
    }
    return 0;
}

/*  Looks up the board's key description for key_id; NULL when absent.  */
const cs_key_info_t *
p11_key_info (cs_board_t *board, const unsigned char *key_id, size_t key_id_len)
{
    for (size_t i = 0; i < board->n_keys; i++)
        if (board->keys [i].id_len == key_id_len && !memcmp (board->keys [i].id, key_id, key_id_len))
            return &board->keys [i];
    return NULL;
}

/*  Returns the private key handle for key_id in this session (cached), or
 *  CK_INVALID_HANDLE.  `fresh` drops the cached handle first.  */
CK_OBJECT_HANDLE
p11_object (cs_drv_session_t *self, const unsigned char *key_id, size_t key_id_len, bool fresh)
{
    char hex [2 * CS_KEY_ID_MAX + 1];
    if (!key_id || key_id_len == 0 || key_id_len > CS_KEY_ID_MAX)
        return CK_INVALID_HANDLE;
    cs_hex_encode (key_id, key_id_len, hex);
    if (fresh)
        zhashx_delete (self->objects, hex);
    uintptr_t cached = (uintptr_t) zhashx_lookup (self->objects, hex);
    if (cached)
        return (CK_OBJECT_HANDLE) (cached - 1);
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE tmpl [] = {
        { CKA_CLASS, &cls, sizeof cls }, { CKA_ID, (void *) key_id, key_id_len }
    };
    CK_OBJECT_HANDLE obj;
    if (p11_find (self->board, self->handle, tmpl, 2, &obj, 1) != 1)
        return CK_INVALID_HANDLE;
    zhashx_insert (self->objects, hex, (void *) (uintptr_t) (obj + 1));
    return obj;
}

