/*  secret_int.h — what secret.c (one job per operation) and secret_stream.c
 *  (multi-part encryption and decryption in parts) share: the operation of
 *  a secret-key mechanism and the calls that run its jobs.  Internal to the
 *  two; the rest of the module uses secret.h.
 */
#ifndef CS_MODULE_SECRET_INT_H_INCLUDED
#define CS_MODULE_SECRET_INT_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cs_mech.h"
#include "key.h"
#include "session.h"

typedef struct {
    cs_key_t *key;
    const cs_mech_row_t *row;
    int operation;              /* CS_SYM_* of cs_driver.h: 1 encrypt, 2 decrypt, 3 sign */
    uint8_t iv [256];           /* CBC: one block; GCM: 1..256; CTR: the counter block;
                                   key wrap: none, 8 or 4 bytes */
    size_t iv_bytes;
    unsigned long counter_bits; /* CTR: ulCounterBits */
    bool ctr_spent;             /* CTR: a stream used the counter's last value (secret_stream.c) */
    size_t mac_len;             /* MAC rows: the length returned (bytes) */
    uint8_t *aad;               /* GCM */
    size_t aad_bytes;
    size_t tag_length_bits;            /* GCM */
    uint8_t *in;                /* buffered input (cs_secmem: it may be plaintext) */
    size_t in_len;
    size_t in_cap;              /* bytes allocated for in */
    uint8_t *out;               /* result kept after CKR_BUFFER_TOO_SMALL (cs_secmem) */
    size_t out_len;
    size_t out_cap;             /* bytes allocated for out */
    bool has_out;
    bool updated;               /* an Update call buffered input (multi-part) */
    bool single;                /* C_Encrypt/C_Decrypt/C_Sign buffered its data (single-part) */
    bool key_wrap;              /* C_WrapKey/C_UnwrapKey: SymJob.key_wrap (the broker checks
                                   CKA_WRAP/CKA_UNWRAP of a token key) */
    bool partial;               /* the job is a part of a stream (SymJob.partial,
                                   secret_stream.c): no padding, output as long as input */
} cs_secret_op_t;

#define CS_SECRET_ENCRYPT 1     /* = CS_SYM_ENCRYPT ... (cs_driver.h, proto SymJob) */
#define CS_SECRET_DECRYPT 2
#define CS_SECRET_SIGN    3

/*  Frees an operation (a cs_op_free_fn: the session's destructor of
 *  secret-key operations, which cs_secret_active recognises).  */
void cs_secret_op_free (void *op);

/*  Appends `len` bytes of `data` to the op's input (locked memory, grown up
 *  to CS_MECH_SYM_MAX_DATA bytes; CKR_DATA_LEN_RANGE beyond, CKR_HOST_MEMORY).  */
CK_RV cs_secret_op_buffer (cs_secret_op_t *op, const CK_BYTE *data, CK_ULONG len);

/*  Under the mutex, an Update that keeps its input for the final call
 *  (MACs, GCM): CKR_OPERATION_ACTIVE while a single-part call is under way;
 *  a buffer error ends the operation; else *out_len_p (when not NULL) = 0.  */
CK_RV cs_secret_op_append_inlock (cs_session_t *session, cs_op_kind_t kind, cs_secret_op_t *op,
                                  const CK_BYTE *data, CK_ULONG len, CK_ULONG_PTR out_len_p);

/*  Runs the op's SymJob on its input (op->in, op->in_len), with
 *  SymJob.partial = op->partial; on CKR_OK op->out holds the result (an
 *  earlier one is freed first).  A partial job's result must be exactly as
 *  long as its input (else CKR_DEVICE_ERROR: an old broker padded it).
 *  Errors: the job's (cs_runner_run_job), CKR_DEVICE_ERROR (malformed
 *  result), CKR_HOST_MEMORY.  Without the mutex.  */
CK_RV cs_secret_op_run (cs_secret_op_t *op);

/*  True when an empty remainder ends the op with no output: a stream of
 *  ECB, CBC or CTR (secret_stream.c); CBC-PAD still pads or unpads.  */
bool cs_secret_stream_done (const cs_secret_op_t *op);

#endif
