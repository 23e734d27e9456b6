/*  cs-wire-objects.c — certificate and data-object jobs straight to the
 *  broker (cs-wire-objects.h).  */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <p11-kit/pkcs11.h>
#include "cs_attr_rules.h"
#include "cs_util.h"
#include "cs_wire.h"
#include "cs-wire-objects.h"

#define S_MAX_BYTES 4096
#define S_MAX_ATTRS 16

bool
cs_wire_objects_kind (const char *kind)
{
    return !strcmp (kind, "obj-new") || !strcmp (kind, "obj-set") || !strcmp (kind, "obj-destroy");
}

//  Hex into out (S_MAX_BYTES); the length or -1.
static long
s_hex (const char *text, uint8_t *out)
{
    return cs_hex_decode (text, out, S_MAX_BYTES);
}

//  CKA_ names of object attributes (cs_attr_rules.h has the key ones).
static CK_ATTRIBUTE_TYPE
s_type (const char *name)
{
    if (!strcmp (name, "CKA_VALUE"))
        return CKA_VALUE;
    size_t n = 0;
    const cs_attr_rule_t *rules = cs_attr_rules (&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp (rules [i].name, name))
            return rules [i].type;
    return (CK_ATTRIBUTE_TYPE) strtoull (name, NULL, 0);
}

//  Prints the result's CKR_ name; the exit status.
static int
s_print (Cs__Reply *reply)
{
    if (!reply) {
        fprintf (stderr, "cs-wire-client: no reply\n");
        return 2;
    }
    CK_RV rv = reply->n_results == 1 ? reply->results [0]->rv : reply->rv;
    printf ("%s\n", cs_rv_name (rv));
    cs__reply__free_unpacked (reply, NULL);
    return 0;
}

//  The object labelled label among the tenant's (caller frees the reply that holds it), or NULL.
static Cs__ObjectInfo *
s_find (void *client, cs_wire_call_fn *call, const char *label, Cs__Reply **reply_p)
{
    Cs__ListObjectsJob list = CS__LIST_OBJECTS_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    job.kind_case = CS__JOB__KIND_LIST_OBJECTS;
    job.list_objects = &list;
    Cs__Reply *reply = *reply_p = call (client, &job);
    const Cs__Result *result = reply && reply->n_results == 1 ? reply->results [0] : NULL;
    if (!result || result->kind_case != CS__RESULT__KIND_OBJECTS)
        return NULL;
    for (size_t i = 0; i < result->objects->n_objects; i++) {
        Cs__ObjectInfo *object = result->objects->objects [i];
        for (size_t a = 0; a < object->n_attributes; a++) {
            const Cs__Attribute *attr = object->attributes [a];
            if (attr->type == CKA_LABEL && attr->value_case == CS__ATTRIBUTE__VALUE_BYTES
            &&  attr->bytes.len == strlen (label) && !memcmp (attr->bytes.data, label, attr->bytes.len))
                return object;
        }
    }
    return NULL;
}

//  Sets attr from "0", "1" (a flag) or hex (bytes; CKA_CERTIFICATE_TYPE: a number).
static int
s_value (Cs__Attribute *attr, const char *text, uint8_t *buf)
{
    if (!strcmp (text, "0") || !strcmp (text, "1")) {
        attr->value_case = CS__ATTRIBUTE__VALUE_FLAG;
        attr->flag = text [0] == '1';
        return 0;
    }
    long len = s_hex (text, buf);
    if (len < 0)
        return -1;
    attr->value_case = CS__ATTRIBUTE__VALUE_BYTES;
    attr->bytes = (ProtobufCBinaryData) { (size_t) len, buf };
    return 0;
}

static int
s_new (void *client, cs_wire_call_fn *call, int argc, char **argv)
{
    static uint8_t value [S_MAX_BYTES];
    Cs__Attribute attrs [S_MAX_ATTRS], *ptrs [S_MAX_ATTRS];
    bool cert = !strcmp (argv [1], "cert");
    long len = s_hex (argv [3], value);
    if (len < 0 || argc - 4 > S_MAX_ATTRS - 4)
        return 2;
    size_t n = 0;
    for (size_t i = 0; i < S_MAX_ATTRS; i++) {
        cs__attribute__init (&attrs [i]);
        ptrs [i] = &attrs [i];
    }
    attrs [n].type = CKA_LABEL;
    attrs [n].value_case = CS__ATTRIBUTE__VALUE_BYTES;
    attrs [n++].bytes = (ProtobufCBinaryData) { strlen (argv [2]), (uint8_t *) argv [2] };
    attrs [n].type = CKA_VALUE;
    attrs [n].value_case = CS__ATTRIBUTE__VALUE_BYTES;
    attrs [n++].bytes = (ProtobufCBinaryData) { (size_t) len, value };
    attrs [n].type = CKA_PRIVATE;
    attrs [n].value_case = CS__ATTRIBUTE__VALUE_FLAG;
    attrs [n++].flag = false;
    if (cert) {
        attrs [n].type = CKA_CERTIFICATE_TYPE;
        attrs [n].value_case = CS__ATTRIBUTE__VALUE_NUMBER;
        attrs [n++].number = CKC_X_509;
    }
    for (int i = 4; i < argc; i++) {
        char *eq = strchr (argv [i], '=');
        if (!eq)
            return 2;
        *eq = 0;
        attrs [n].type = s_type (argv [i]);
        attrs [n].value_case = CS__ATTRIBUTE__VALUE_FLAG;
        attrs [n++].flag = eq [1] == '1';
    }
    Cs__ObjectInfo object = CS__OBJECT_INFO__INIT;
    Cs__PutObjectJob put = CS__PUT_OBJECT_JOB__INIT;
    Cs__Job job = CS__JOB__INIT;
    object.ref = "";
    object.object_class = cert ? CKO_CERTIFICATE : CKO_DATA;
    object.attributes = ptrs;
    object.n_attributes = n;
    put.object = &object;
    job.kind_case = CS__JOB__KIND_PUT_OBJECT;
    job.put_object = &put;
    return s_print (call (client, &job));
}

//  obj-set and obj-destroy of the object labelled argv [1].
static int
s_change (void *client, cs_wire_call_fn *call, int argc, char **argv)
{
    static uint8_t buf [S_MAX_BYTES];
    Cs__Reply *list = NULL;
    Cs__ObjectInfo *object = s_find (client, call, argv [1], &list);
    int status = 0;
    if (!object) {
        printf ("no object %s\n", argv [1]);
        status = list ? 1 : 2;
    }
    else
    if (!strcmp (argv [0], "obj-destroy")) {
        Cs__DestroyObjectJob destroy = CS__DESTROY_OBJECT_JOB__INIT;
        Cs__Job job = CS__JOB__INIT;
        destroy.ref = object->ref;
        job.kind_case = CS__JOB__KIND_DESTROY_OBJECT;
        job.destroy_object = &destroy;
        status = s_print (call (client, &job));
    }
    else {
        Cs__Attribute extra = CS__ATTRIBUTE__INIT;
        extra.type = s_type (argv [2]);
        Cs__Attribute **attrs = calloc (object->n_attributes + 1, sizeof *attrs);
        if (!attrs || argc != 4 || s_value (&extra, argv [3], buf)) {
            free (attrs);
            cs__reply__free_unpacked (list, NULL);
            return 2;
        }
        size_t n = 0;                   //  the object's attributes, that one replaced (the reply owns the others)
        for (size_t a = 0; a < object->n_attributes; a++)
            if (object->attributes [a]->type != extra.type)
                attrs [n++] = object->attributes [a];
        attrs [n++] = &extra;
        CK_ATTRIBUTE_TYPE type = extra.type;
        Cs__ObjectInfo copy = *object;
        copy.attributes = attrs;
        copy.n_attributes = n;
        if (type == CKA_PRIVATE)
            copy.is_private = argv [3][0] == '1';
        Cs__PutObjectJob put = CS__PUT_OBJECT_JOB__INIT;
        Cs__Job job = CS__JOB__INIT;
        put.object = &copy;
        job.kind_case = CS__JOB__KIND_PUT_OBJECT;
        job.put_object = &put;
        status = s_print (call (client, &job));
        free (attrs);
    }
    if (list)
        cs__reply__free_unpacked (list, NULL);
    return status;
}

int
cs_wire_objects_run (void *client, cs_wire_call_fn *call, int argc, char **argv)
{
    if (!strcmp (argv [0], "obj-new") && argc >= 4)
        return s_new (client, call, argc, argv);
    if ((!strcmp (argv [0], "obj-set") && argc == 4) || (!strcmp (argv [0], "obj-destroy") && argc == 2))
        return s_change (client, call, argc, argv);
    fprintf (stderr, "usage: obj-new cert|data LABEL HEX [CKA_NAME=0|1 ...] | obj-set LABEL CKA_NAME 0|1|HEX"
             " | obj-destroy LABEL\n");
    return 2;
}
