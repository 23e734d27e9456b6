/*  cs_wire_scan.c — what a Request frame would cost before protobuf-c
 *  decodes it: a bounds-checked walk of its wire fields (the protobuf
 *  encoding: https://protobuf.dev/programming-guides/encoding/) guided by
 *  the generated descriptors, which counts every repeated field and
 *  estimates the bytes cs__request__unpack would allocate, stopping at the
 *  first broken limit (docs/CONTRACTS.md "Limits").  Nothing is allocated.
 *  Then the decode itself runs under an allocation budget.  */
#include <stdlib.h>
#include <p11-kit/pkcs11.h>
#include "cs_wire.h"

#define S_SCANNED_MEMBER 32     /* bytes protobuf-c keeps per field occurrence while it
                                   decodes (its ScannedMember, on 64-bit hosts) */
#define S_MAX_DEPTH 8           /* nesting; the Request tree is 4 deep */
#define S_MAX_FIELDS 64         /* field counts tracked per message (ours have fewer) */
#define S_MAX_OCCURRENCES CS_WIRE_MAX_JOBS  /* of one singular field in one message (the
                                   module's coalesced frames repeat Request's) */
#define S_DECODE_BUDGET (2 * CS_WIRE_MAX_DECODED)  /* what the decoder may allocate: the
                                   estimate, with room for protobuf-c's growing slabs */

void (*cs_wire_decode_alloc_hook) (size_t size) = NULL;

typedef struct {
    const char *why;            /* the broken limit, or NULL */
    unsigned long rv;
    size_t cost;                /* bytes the decode would allocate, estimated */
} s_scan_t;

/*  Reads one varint at *p (at most 10 bytes, before end); false when it
 *  runs past end or over 10 bytes.  */
static bool
s_varint (const uint8_t **p, const uint8_t *end, uint64_t *value)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t byte = *(*p)++;
        v |= (uint64_t) (byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *value = v;
            return true;
        }
    }
    return false;
}

/*  Reads one field's key and steps *p over its payload; *payload and
 *  *len give a length-delimited field's bytes.  False when the frame is
 *  not well formed there (cut short, a group, wire type 6 or 7, field 0).  */
static bool
s_field (const uint8_t **p, const uint8_t *end, uint32_t *number, unsigned *wire_type,
         const uint8_t **payload, size_t *len)
{
    uint64_t key = 0, value = 0;
    if (!s_varint (p, end, &key) || (key >> 3) == 0 || (key >> 3) > UINT32_MAX)
        return false;
    *number = (uint32_t) (key >> 3);
    *wire_type = (unsigned) (key & 7);
    *payload = *p;
    *len = 0;
    switch (*wire_type) {
        case 0:
            return s_varint (p, end, &value);
        case 1:
        case 5: {
            size_t width = *wire_type == 1 ? 8 : 4;
            if ((size_t) (end - *p) < width)
                return false;
            *p += width;
            return true;
        }
        case 2:
            if (!s_varint (p, end, &value) || value > (uint64_t) (end - *p))
                return false;
            *payload = *p;
            *len = (size_t) value;
            *p += *len;
            return true;
        default:
            return false;       /* groups (3, 4) are not in proto3; 6, 7 do not exist */
    }
}

static bool
s_fail (s_scan_t *scan, const char *why, unsigned long rv)
{
    scan->why = why;
    scan->rv = rv;
    return false;
}

/*  The most times field may occur in one message of desc, and the refusal
 *  past it (docs/CONTRACTS.md "Limits").  */
static size_t
s_occurrences (const ProtobufCMessageDescriptor *desc, const ProtobufCFieldDescriptor *field,
               const char **why_p, unsigned long *rv_p)
{
    if (field->label != PROTOBUF_C_LABEL_REPEATED) {
        *why_p = "field repeated too often";
        *rv_p = CKR_DEVICE_ERROR;
        return S_MAX_OCCURRENCES;
    }
    if (field->type == PROTOBUF_C_TYPE_MESSAGE && field->descriptor == &cs__attribute__descriptor) {
        *why_p = "template over CS_WIRE_MAX_ATTRIBUTES attributes";
        *rv_p = CKR_TEMPLATE_INCONSISTENT;
        return CS_WIRE_MAX_ATTRIBUTES;
    }
    *why_p = desc == &cs__request__descriptor ? "request over CS_WIRE_MAX_JOBS jobs"
                                              : "repeated field over CS_WIRE_MAX_JOBS elements";
    *rv_p = CKR_DEVICE_MEMORY;
    return CS_WIRE_MAX_JOBS;
}

/*  The bytes the decoder allocates for one occurrence of a known field
 *  whose payload is len bytes (a length-delimited field's), besides its
 *  ScannedMember: a submessage's struct, a copy of bytes or a string, an
 *  array slot of a repeated field (packed scalars: up to one per byte).  */
static size_t
s_field_cost (const ProtobufCFieldDescriptor *field, unsigned wire_type, size_t len)
{
    size_t cost = field->label == PROTOBUF_C_LABEL_REPEATED ? sizeof (uint64_t) : 0;
    if (field->label == PROTOBUF_C_LABEL_REPEATED && wire_type == 2 && field->type != PROTOBUF_C_TYPE_MESSAGE
    &&  field->type != PROTOBUF_C_TYPE_BYTES && field->type != PROTOBUF_C_TYPE_STRING)
        return len * sizeof (uint64_t);
    if (wire_type != 2)
        return cost;
    if (field->type == PROTOBUF_C_TYPE_MESSAGE)
        return cost + ((const ProtobufCMessageDescriptor *) field->descriptor)->sizeof_message;
    return cost + len + 1;
}

static bool s_message (s_scan_t *scan, const ProtobufCMessageDescriptor *desc, const uint8_t *p,
                       const uint8_t *end, unsigned depth);

/*  Scans one field occurrence of a message of desc (counts: occurrences
 *  so far per field index).  */
static bool
s_member (s_scan_t *scan, const ProtobufCMessageDescriptor *desc, size_t *counts, uint32_t number,
          unsigned wire_type, const uint8_t *payload, size_t len, unsigned depth)
{
    const ProtobufCFieldDescriptor *field = protobuf_c_message_descriptor_get_field (desc, number);
    scan->cost += S_SCANNED_MEMBER;
    if (!field) {                           /* kept by protobuf-c as an unknown field */
        scan->cost += sizeof (ProtobufCMessageUnknownField) + len + 8;
        return true;
    }
    size_t index = (size_t) (field - desc->fields);
    const char *why = NULL;
    unsigned long rv = CKR_DEVICE_ERROR;
    if (index < S_MAX_FIELDS && ++counts [index] > s_occurrences (desc, field, &why, &rv))
        return s_fail (scan, why, rv);
    scan->cost += s_field_cost (field, wire_type, len);
    if (field->type == PROTOBUF_C_TYPE_MESSAGE && wire_type == 2)
        return s_message (scan, field->descriptor, payload, payload + len, depth + 1);
    return true;
}

/*  Scans the fields of one message of desc in [p, end).  */
static bool
s_message (s_scan_t *scan, const ProtobufCMessageDescriptor *desc, const uint8_t *p,
           const uint8_t *end, unsigned depth)
{
    size_t counts [S_MAX_FIELDS] = { 0 };
    if (depth > S_MAX_DEPTH)
        return s_fail (scan, "request is not a valid message", CKR_DEVICE_ERROR);
    while (p < end) {
        uint32_t number = 0;
        unsigned wire_type = 0;
        const uint8_t *payload = NULL;
        size_t len = 0;
        if (!s_field (&p, end, &number, &wire_type, &payload, &len))
            return s_fail (scan, "request is not a valid message", CKR_DEVICE_ERROR);
        if (!s_member (scan, desc, counts, number, wire_type, payload, len, depth))
            return false;
        if (scan->cost > CS_WIRE_MAX_DECODED)
            return s_fail (scan, "request over CS_WIRE_MAX_DECODED bytes decoded", CKR_DEVICE_MEMORY);
    }
    return true;
}

bool
cs_wire_request_scan (const void *data, size_t size, const char **why_p, unsigned long *rv_p)
{
    s_scan_t scan = { NULL, CKR_OK, cs__request__descriptor.sizeof_message };
    const uint8_t *p = data;
    bool ok = p && s_message (&scan, &cs__request__descriptor, p, p + size, 0);
    if (!p)
        s_fail (&scan, "empty request", CKR_DEVICE_ERROR);
    if (why_p)
        *why_p = scan.why;
    if (rv_p)
        *rv_p = scan.rv;
    return ok;
}

uint64_t
cs_wire_request_id (const void *data, size_t size)
{
    const uint8_t *p = data, *end = p ? p + size : NULL;
    uint64_t id = 0;
    while (p && p < end) {
        uint32_t number = 0;
        unsigned wire_type = 0;
        const uint8_t *payload = NULL;
        size_t len = 0;
        if (!s_field (&p, end, &number, &wire_type, &payload, &len))
            return 0;
        if (number == 3 && wire_type == 0) {    /* Request.request_id: the last one wins */
            const uint8_t *v = payload;
            s_varint (&v, end, &id);
        }
    }
    return id;
}

/* ---- the decode under a budget ------------------------------------------ */

typedef struct {
    size_t used;                /* bytes allocated so far */
} s_budget_t;

static void *
s_budget_alloc (void *data, size_t size)
{
    s_budget_t *budget = data;
    if (cs_wire_decode_alloc_hook)
        cs_wire_decode_alloc_hook (size);
    if (size > S_DECODE_BUDGET - budget->used)
        return NULL;            /* protobuf-c frees what it made and fails the decode */
    budget->used += size;
    return malloc (size ? size : 1);
}

static void
s_budget_free (void *data, void *pointer)
{
    (void) data;
    free (pointer);
}

Cs__Request *
cs_wire_request_unpack (const void *data, size_t size)
{
    s_budget_t budget = { 0 };
    ProtobufCAllocator allocator = { s_budget_alloc, s_budget_free, &budget };
    return cs__request__unpack (&allocator, size, data);
}
