/*  cs_wire.h — the one codec of the cryptoserver wire (proto/cryptoserver.proto).
 *
 *  Module and broker both decode through these functions, so the limits a
 *  peer may send are checked in exactly one place.  docs/DESIGN.md §3.
 */
#ifndef CS_WIRE_H_INCLUDED
#define CS_WIRE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cryptoserver.pb-c.h"

#define CS_PROTOCOL_VERSION_MIN 1       /* oldest protocol this build speaks */
#define CS_PROTOCOL_VERSION     2       /* newest protocol this build speaks */
#define CS_PROTOCOL_PER_JOB     2       /* first protocol with Request.per_job_replies */
#define CS_WIRE_MAX_MESSAGE     (1024 * 1024)   /* bytes in one request frame */
#define CS_WIRE_MAX_REPLY       (16 * 1024 * 1024)  /* bytes in one reply frame (key lists) */
#define CS_WIRE_MAX_JOBS        1024    /* jobs in one request (a batch) */
#define CS_WIRE_MAX_DECODED     (4 * 1024 * 1024)   /* bytes protobuf-c may allocate for one
                                                       request (cs_wire_request_scan's estimate) */
#define CS_WIRE_MAX_DATA        8192    /* bytes of data in one sign/decrypt job */
#define CS_WIRE_MAX_SYM_DATA    (64 * 1024) /* bytes of data (and of AAD) in one SymJob
                                               (= CS_MECH_SYM_MAX_DATA) */
#define CS_WIRE_MAX_SYM_KEY     256     /* bytes of a SymJob's key value */
#define CS_WIRE_MAX_KEY_ID      64      /* bytes of a CKA_ID */
#define CS_WIRE_MAX_PIN         256     /* bytes of a PIN */
#define CS_WIRE_MAX_LABEL       1024    /* bytes of an OAEP label */
#define CS_WIRE_MAX_TICKET      256     /* bytes of a login ticket */
#define CS_WIRE_MAX_KEY_DER     8192    /* bytes of a PKCS#8 or SPKI key (RSA-8192 fits) */
#define CS_WIRE_MAX_ATTRIBUTES  64      /* attributes in one template */
#define CS_WIRE_MAX_ATTR_BYTES  4096    /* bytes of one attribute value */
#define CS_WIRE_MAX_REF         128     /* bytes of a KeyInfo.ref */
#define CS_WIRE_MAX_OBJECT_VALUE 65536  /* bytes of the CKA_VALUE of a certificate or data object */
#define CS_WIRE_MAX_EC_POINT    1024    /* bytes of a DeriveJob's peer point */
#define CS_WIRE_MAX_MODEXP_BYTES 1024   /* bytes of a ModexpJob exponent, modulus or CRT value */
#define CS_WIRE_MAX_RSA_BITS    8192    /* modulus bits of an RSA key sent in a job
                                           (per-request or imported) */

/*  Decodes and validates one Request frame of `size` bytes, once: its
 *  counts and sizes are checked first on the wire bytes
 *  (cs_wire_request_scan), so that a frame of too many jobs or attributes
 *  is refused before protobuf-c allocates anything for them.  Returns the
 *  request (caller frees with cs__request__free_unpacked (req, NULL)), or NULL
 *  when the frame is empty, over CS_WIRE_MAX_MESSAGE, not valid protobuf, or
 *  breaks a limit above (no jobs, too many jobs, a job with no kind, an
 *  oversized field, over CS_WIRE_MAX_DECODED decoded); then *why_p, if
 *  given, points at a static reason and
 *  *rv_p, if given, gets the CK_RV the broker answers with at request level
 *  (docs/CONTRACTS.md "Limits": CKR_KEY_SIZE_RANGE for an oversized key,
 *  CKR_DATA_LEN_RANGE / CKR_ENCRYPTED_DATA_LEN_RANGE for data,
 *  CKR_TEMPLATE_INCONSISTENT for too many attributes,
 *  CKR_ATTRIBUTE_VALUE_INVALID for an oversized attribute, CKR_PIN_LEN_RANGE,
 *  CKR_MECHANISM_PARAM_INVALID, CKR_DEVICE_MEMORY for too many jobs;
 *  CKR_DEVICE_ERROR for a malformed request); CKR_OK on success.  */
Cs__Request *cs_wire_request_check (const void *data, size_t size, const char **why_p,
                                    unsigned long *rv_p);

/*  Walks the protobuf fields of a Request frame of `size` bytes
 *  (https://protobuf.dev/programming-guides/encoding/) with the generated
 *  descriptors, allocating nothing, and stops at the first broken limit:
 *  Request.jobs over CS_WIRE_MAX_JOBS (CKR_DEVICE_MEMORY), a template over
 *  CS_WIRE_MAX_ATTRIBUTES attributes (CKR_TEMPLATE_INCONSISTENT), another
 *  repeated field over CS_WIRE_MAX_JOBS elements (CKR_DEVICE_MEMORY), a
 *  singular field more than CS_WIRE_MAX_JOBS times in one message
 *  (CKR_DEVICE_ERROR), an estimate of what cs__request__unpack would
 *  allocate (structs, copies, arrays, its per-field scratch) over
 *  CS_WIRE_MAX_DECODED (CKR_DEVICE_MEMORY), or bytes that are not protobuf
 *  (CKR_DEVICE_ERROR).  Returns true when none is broken; else false with
 *  a static reason in *why_p and the CK_RV in *rv_p (each if given).
 *  docs/CONTRACTS.md "Limits".  */
bool cs_wire_request_scan (const void *data, size_t size, const char **why_p, unsigned long *rv_p);

/*  cs__request__unpack under an allocation budget (twice
 *  CS_WIRE_MAX_DECODED): NULL when the frame does not decode or would take
 *  more.  Use after cs_wire_request_scan; cs_wire_request_check does
 *  both.  Caller frees with cs__request__free_unpacked (req, NULL).  */
Cs__Request *cs_wire_request_unpack (const void *data, size_t size);

/*  The request id of a Request frame (the last Request.request_id, as a
 *  decode would give), read from the top-level fields without decoding or
 *  allocating: for the error reply to a refused frame.  0 when it has none
 *  or is not well formed.  */
uint64_t cs_wire_request_id (const void *data, size_t size);

/*  Test hook: when set, called with the size of every allocation the
 *  request decoder (cs_wire_request_unpack) asks for, on the decoding
 *  thread.  Set it before requests are decoded, never while they are.  */
extern void (*cs_wire_decode_alloc_hook) (size_t size);

/*  cs_wire_request_check without the CK_RV.  */
Cs__Request *cs_wire_request_decode (const void *data, size_t size, const char **why_p);

/*  Decodes and validates one Reply frame, as cs_wire_request_decode does.
 *  Caller frees with cs__reply__free_unpacked (reply, NULL).  */
Cs__Reply *cs_wire_reply_decode (const void *data, size_t size, const char **why_p);

/*  Wipes the secrets a decoded reply carries (result data: signatures,
 *  plaintexts, ECDH secrets; generated private keys; login tickets) in
 *  place, before it is freed or dropped.  NULL-safe.  */
void cs_wire_reply_wipe (Cs__Reply *reply);

/*  cs_wire_reply_wipe, then cs__reply__free_unpacked; NULL-safe; nulls
 *  *reply_p.  */
void cs_wire_reply_free (Cs__Reply **reply_p);

/*  A zmq_free_fn (libzmq calls it when it is done with a zero-copy frame
 *  made by zmq_msg_init_data (msg, data, size, cs_wire_frame_free, hint)):
 *  wipes the frame's `size` bytes, passed as hint = (void *) (uintptr_t)
 *  size, with OPENSSL_cleanse, then releases data with
 *  cs_wire_frame_release.  For reply frames that carry plaintexts, shared
 *  secrets or generated private keys.  Called from libzmq's I/O thread.  */
void cs_wire_frame_free (void *data, void *hint);

/*  How cs_wire_frame_free releases a wiped buffer: free() by default.
 *  Tests replace it to see the bytes after the wipe; set it before any
 *  frame is sent, never while frames are in flight.  */
extern void (*cs_wire_frame_release) (void *data, size_t size);

/*  Encodes any message into a malloc'd buffer of *size_p bytes; caller frees.
 *  Returns NULL only when out of memory.  */
uint8_t *cs_wire_encode (const ProtobufCMessage *msg, size_t *size_p);

/*  Picks the protocol version to speak with a peer offering [min, max]:
 *  returns the highest version both speak, or 0 when the ranges do not meet.  */
uint32_t cs_wire_version_choose (uint32_t peer_min, uint32_t peer_max);

/*  Returns a static name for a CK_RV ("CKR_PIN_INCORRECT"), or "CKR_0x..." for
 *  unknown values (then from a static buffer that the next call overwrites).  */
const char *cs_rv_name (unsigned long rv);

/*  Returns a static name for a CK_MECHANISM_TYPE ("CKM_ECDSA"), for the
 *  rows of the mechanism table (cs_mech.h, which defines it), or "CKM_0x..."
 *  for other values (then from a per-thread static buffer that the thread's
 *  next call overwrites).  Names as in PKCS#11 2.40/3.0 pkcs11t.h.  */
const char *cs_mech_name (unsigned long mechanism);

#endif
