/*  worker_call.h — a worker's driver call on its own copies of a work
 *  item's inputs (worker.c runs it): the reactor may abandon an item while
 *  its call runs (health.h), so the call never reads or writes memory the
 *  reactor frees.  Key material in the copies is wiped when cleared.
 */
#ifndef WORKER_CALL_H_INCLUDED
#define WORKER_CALL_H_INCLUDED

#include "board.h"
#include "pq_work.h"
#include "scheduler.h"

#define WORKER_CALL_OUT_MAX 4864          /* bytes: an ML-DSA-87 signature (4627, FIPS 204 Table 2);
                                   a 16384-bit RSA result is 2048 */

/*  One driver call on the worker's own copies of the item's inputs: the
 *  reactor may abandon the item while the call runs (health.h), and then
 *  the call must not read or write memory the reactor frees.  */
typedef struct {
    work_kind_t kind;
    cs_drv_key_t key;                   /* points into id/ref/material below */
    unsigned char id [CS_KEY_ID_MAX];
    char ref [129];
    unsigned char *material;        /* copy of the PKCS#8, wiped */
    size_t material_len;
    cs_drv_mech_t mech;                 /* label points into label */
    unsigned char *label;
    unsigned char *in;              /* data to sign or decrypt, or the ECDH point */
    size_t in_len;
    cs_keygen_t gen;                /* pointers into gen_buf */
    unsigned char *gen_buf;
    cs_modexp_t modexp;             /* WORK_MODEXP: operands, pointers into modexp_buf */
    unsigned char *modexp_buf;      /* wiped: may hold a CRT private key */
    size_t modexp_buf_len;
    cs_sym_t sym;                   /* WORK_SYM: pointers into sym_buf */
    unsigned char *sym_buf;         /* wiped: holds the secret key */
    size_t sym_buf_len;
    CK_RV rv;
    unsigned char *out;             /* malloc'd result, wiped when discarded */
    size_t out_len;
    size_t out_cap;                 /* bytes allocated for out */
    cs_key_info_t generated;
    bool wrong;
    pq_work_inputs_t pq;            /* ML-DSA / ML-KEM: copies of the context, public key and
                                       signature (issue #23) */
    unsigned char *pub_out;         /* WORK_GENERATE of a PQ key pair: its public key */
    size_t pub_out_len;
} worker_call_t;

/*  Fills call with copies of item's inputs.  Returns CKR_OK, or the CK_RV
 *  the item fails with unrun.  */
CK_RV worker_call_prepare (worker_call_t *call, const work_item_t *item);

/*  Frees the call's copies (wiping key material and any result left).  */
void worker_call_clear (worker_call_t *call);

/*  Moves the call's results into item and frees the rest.  */
void worker_call_finish (worker_call_t *call, work_item_t *item);

#endif
