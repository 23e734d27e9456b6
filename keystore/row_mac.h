/*  row_mac.h — integrity of keystore rows: HMAC-SHA256 (RFC 2104) over the
 *  security-relevant columns of a row and its identity, under a key derived
 *  from the master key with HKDF-SHA256 (RFC 5869).  Internal to the
 *  keystore (keystore.c); docs/CONTRACTS.md "Keystore rows" and
 *  cryptoserver-keystore(5) describe the inputs.
 *
 *  Every variable-length input is length-prefixed (4 bytes, big-endian), and
 *  every integer is 8 bytes big-endian, so no two rows share a MAC input.
 */
#ifndef ROW_MAC_H_INCLUDED
#define ROW_MAC_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ROW_MAC_LEN 32                              /* bytes */
#define ROW_MAC_INFO_ROWS "cryptoserver keystore row mac v1"   /* HKDF info */
#define ROW_MAC_INFO_PINS "cryptoserver keystore pin key v1"   /* HKDF info */
#define ROW_MAC_INFO_STATE "cryptoserver keystore state v1"    /* HKDF info (schema 5) */

/*  HKDF-SHA256 (RFC 5869) of the 32-byte master key with an empty salt and
 *  `info` (a NUL-terminated label), 32 bytes into out.  Returns 0 or -1.  */
int row_mac_derive (const uint8_t master [32], const char *info, uint8_t out [32]);

/*  The columns of a tenant row that decide who logs in.  Index 0 is the
 *  user (CKU_USER), 1 the SO (CKU_SO).  */
typedef struct {
    char *pin [2];              /* stored PIN forms (common/cs_pin.h) */
    int64_t failures [2];       /* wrong PINs in a row */
    int64_t epoch [2];          /* PIN epochs: tickets carry them (broker/keys/ticket.h) */
} row_mac_tenant_t;

/*  MAC of tenant row `name`: "cs-tenant-v1" || lp (name) || lp (user PIN) ||
 *  lp (SO PIN) || user failures || SO failures || user epoch || SO epoch.
 *  Returns 0 or -1.  */
int row_mac_tenant (const uint8_t key [32], const char *name, const row_mac_tenant_t *row,
                    uint8_t mac [ROW_MAC_LEN]);

/*  MAC of key row (tenant, ref): "cs-keyrow-v1" || lp (tenant) || lp (ref) ||
 *  lp (info) || 1 byte (1: a private blob follows, 0: none) || lp (private).
 *  `private` NULL means the row has none.  Returns 0 or -1.  */
int row_mac_key (const uint8_t key [32], const char *tenant, const char *ref,
                 const uint8_t *info, size_t info_len, const uint8_t *private, size_t private_len,
                 uint8_t mac [ROW_MAC_LEN]);

/*  MAC of idempotency row (tenant, id): "cs-idem-v1" || lp (tenant) ||
 *  lp (id) || lp (result) || created (seconds since the epoch).  Returns 0
 *  or -1.  */
int row_mac_idem (const uint8_t key [32], const char *tenant, const uint8_t *id, size_t id_len,
                  const uint8_t *result, size_t result_len, int64_t created,
                  uint8_t mac [ROW_MAC_LEN]);

/*  MAC of object row (tenant, ref) (certificates, data objects; schema 4):
 *  "cs-objrow-v1" || lp (tenant) || lp (ref) || lp (info) || has_private
 *  (1 byte) || lp (private), where lp is a 4-byte big-endian length and the
 *  bytes.  Its own prefix: a key row copied into the objects table (or
 *  back) does not verify.  Returns 0 or -1.  */
int row_mac_object (const uint8_t key [32], const char *tenant, const char *ref,
                    const uint8_t *info, size_t info_len, const uint8_t *private, size_t private_len,
                    uint8_t mac [ROW_MAC_LEN]);

/*  MAC of the keystore's state record (schema 5, ks_state.c):
 *  "cs-state-v1" || schema || counter || lp (row MAC format: ROW_MAC_INFO_ROWS)
 *  || lp (id) || lp (digest), where id is the SHA-256 of the master key
 *  check value (the keystore's identity) and digest the row digest
 *  (ks_state.c), so the record binds the schema version, the MAC format,
 *  the master check and the rows to the counter.  Returns 0 or -1.  */
int row_mac_state (const uint8_t key [32], uint64_t schema, uint64_t counter, const uint8_t id [32],
                   const uint8_t digest [32], uint8_t mac [ROW_MAC_LEN]);

/*  MAC of a counter file (ks_state.c): "cs-counter-v1" || lp (id) || counter.
 *  Returns 0 or -1.  */
int row_mac_counter (const uint8_t key [32], const uint8_t id [32], uint64_t counter,
                     uint8_t mac [ROW_MAC_LEN]);

/*  MAC of a tenant's change epoch (meta row "changes:TENANT", ks_changes.c):
 *  "cs-changes-v1" || lp (id) || lp (tenant) || counter, where counter is
 *  the state counter of the tenant's last committed change.  Returns 0 or
 *  -1.  */
int row_mac_changes (const uint8_t key [32], const uint8_t id [32], const char *tenant, uint64_t counter,
                     uint8_t mac [ROW_MAC_LEN]);

/*  MAC of an issued-key row (schema 5, keystore_issued_record):
 *  "cs-issued-v1" || lp (fingerprint) || lp (tenant) || created.  Returns 0
 *  or -1.  */
int row_mac_issued (const uint8_t key [32], const uint8_t fingerprint [32], const char *tenant,
                    int64_t created, uint8_t mac [ROW_MAC_LEN]);

/*  Constant-time check of a stored MAC (stored_len bytes, NULL allowed)
 *  against the expected one.  */
bool row_mac_equal (const uint8_t expected [ROW_MAC_LEN], const void *stored, size_t stored_len);

#endif
