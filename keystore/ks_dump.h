/*  ks_dump.h — what ks_dump.c (reading and checking a dump),
 *  ks_dump_load.c (writing one into a keystore) and ks_dump_file.c (the
 *  sealed backup file) share; internal to keystore/.  */
#ifndef KS_DUMP_H_INCLUDED
#define KS_DUMP_H_INCLUDED

#include "keystore_dump.h"
#include "keystore_int.h"

//  A key or object row with its tenant (malloc'd).
typedef struct {
    char *tenant;
    ks_key_rec_t rec;
} ks_dump_row_t;

//  An issued pool key's row (tenant malloc'd).
typedef struct {
    uint8_t fingerprint [32];
    char *tenant;
    int64_t created;
    uint8_t mac [ROW_MAC_LEN];
} ks_dump_issued_t;

struct _keystore_dump_t {
    uint64_t schema, counter;           /* the source's state record */
    uint8_t *check;                     /* its master key check value (meta
                                           master_check: its identity) */
    size_t check_len;
    uint8_t *data_key;                  /* meta data_key, sealed under the master key
                                           (schema 7), or NULL (a backup of schema 6) */
    size_t data_key_len;
    uint8_t *identity;                  /* meta identity (schema 7, 32 bytes), or NULL:
                                           SHA-256 of check */
    size_t identity_len;
    char **names;                       /* tenants: names [i], tenants [i] */
    ks_tenant_rec_t *tenants;
    ks_dump_row_t *keys, *objects;
    ks_dump_issued_t *issued;
    keystore_audit_row_t *audit;
    keystore_dump_counts_t n;           /* the lengths of the arrays above */
};

/*  Appends a zeroed element of `size` bytes to *array_p (n elements): the
 *  new element, or NULL (out of memory: *array_p unchanged).  */
void *ks_dump_grow (void *array_p, size_t n, size_t size);

#endif
