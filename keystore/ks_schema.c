/*  ks_schema.c — opening a keystore's database (issue 19; keystore_int.h):
 *  a new one is made (tables, master key check value, schema 5, state
 *  record); an existing one must have the master key's check value and is
 *  checked as it is (authenticated schema, tables and MAC columns, rows and
 *  counter: ks_state.c), or upgraded by the operator's keystore_upgrade
 *  (schema 1 to 4: tables added, schema 1 rows MACed as they stand).  No
 *  open ever changes the tables of an existing database.
 *  cryptoserver-keystore(5) "Authenticated schema" is the user's view.
 *
 *  Schemas: 1 had no row MACs, epochs, keyed PIN hashes; 2 no idempotency
 *  table; 3 no objects table; 4 no issued table and no state record; 5 no
 *  audit table (keystore_audit.h).
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <czmq.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include "keystore_int.h"

#define CHECK_AAD        "cs-master-check-v1"
#define CHECK_PLAINTEXT  "cryptoserver keystore master key check value"

//  Schema 1 to 2 (SQLite only; the back end added the columns), inside the
//  open's write transaction: gives every tenant fresh epochs, wraps its
//  unkeyed PBKDF2 hashes under the PIN key (cs_pin_wrap: a copy of the
//  file no longer allows guessing them offline), and MACs every tenant and
//  key row as it is now (trust on first use: the upgrade cannot tell an
//  earlier change).  Returns 0, or -1 after a log.
static int
s_upgrade_1_to_2 (keystore_t *self)
{
    char **names = self->be->tenant_list (self->store);
    size_t keys = 0;
    int rc = names ? 0 : -1;
    for (size_t i = 0; rc == 0 && names [i]; i++) {
        ks_tenant_row_t row;
        if (ks_tenant_read (self, names [i], false, true, &row, NULL) != 1) {
            rc = -1;
            break;
        }
        bool ok = true;
        for (int role = 0; role < 2 && ok; role++) {
            char *wrapped = cs_pin_wrap (row.pin [role], self->keys->pin_key);
            free (row.pin [role]);
            row.pin [role] = wrapped;
            row.epoch [role] = ks_epoch_next (self, 0);
            ok = wrapped && row.epoch [role] > 0;
        }
        ok = ok && ks_tenant_write (self, names [i], &row) == 0;
        ks_tenant_row_free (&row);
        if (!ok) {
            zsys_error ("keystore %s: upgrade: tenant %s has a malformed PIN hash", ks_where (self), names [i]);
            rc = -1;
            break;
        }
        ks_key_rec_t *recs = NULL;
        size_t count = 0;
        if (self->be->key_list (self->store, names [i], &recs, &count) != 0) {
            rc = -1;
            break;
        }
        for (size_t k = 0; k < count; k++) {
            uint8_t mac [ROW_MAC_LEN];
            if (rc == 0
            &&  (ks_key_mac (self, names [i], recs [k].ref, recs [k].info, recs [k].info_len,
                             recs [k].private, recs [k].private_len, mac) != 0
                 || self->be->key_update (self->store, names [i], recs [k].ref, recs [k].info,
                                          recs [k].info_len, mac) != 1))
                rc = -1;
            ks_key_rec_free (&recs [k]);
        }
        free (recs);
        keys += count;
    }
    if (rc == 0)
        rc = self->be->version_set (self->store, 2);
    if (rc == 0)
        zsys_info ("keystore %s: upgraded from schema 1 to 2 (row MACs, PIN epochs, keyed PIN "
                   "hashes; %zu key rows)", ks_where (self), keys);
    for (size_t i = 0; names && names [i]; i++)
        free (names [i]);
    free (names);
    return rc;
}

//  A new keystore: makes the tables, the master key check value, schema
//  KS_SCHEMA_VERSION and the state record, whose counter starts above the
//  counter file's (a file left by an earlier keystore of the same key
//  does not verify: its identity differs).  0 or -1.
static int
s_init (keystore_t *self)
{
    int found = 0;
    size_t len = 0;
    uint64_t base = 0;
    if (self->be->migrate (self->store, &found) != 0)
        return -1;
    uint8_t *check = ks_seal (self->keys->master, CHECK_AAD, strlen (CHECK_AAD),
                              (const uint8_t *) CHECK_PLAINTEXT, strlen (CHECK_PLAINTEXT), &len);
    int rc = check && self->be->version_set (self->store, KS_SCHEMA_VERSION) == 0
                   && self->be->meta_put (self->store, "master_check", check, len) == 0 ? 0 : -1;
    if (rc == 0)
        EVP_Digest (check, len, self->id, NULL, EVP_sha256 (), NULL);
    free (check);
    //  Schema 7: a random data key under the master key, from which the
    //  row, PIN and state keys come (a master key rotation re-seals it).
    uint8_t data_key [32];
    if (rc == 0 && (RAND_priv_bytes (data_key, sizeof data_key) != 1
                    || ks_data_key_put (self, self->keys->master, data_key) != 0
                    || self->be->meta_put (self->store, "identity", self->id, sizeof self->id) != 0))
        rc = -1;
    OPENSSL_cleanse (data_key, sizeof data_key);
    uint8_t rows [32];
    if (rc == 0 && ks_counter_base (self, &base) == 0 && ks_digest_compute (self, rows) == 0
    &&  ks_state_put (self, KS_SCHEMA_VERSION, base + 1, rows) == 0)
        self->counter = base + 1;
    else
        rc = -1;
    return rc;
}

//  True (after the E: line) when a keystore that says schema `stored`
//  (without a state record) shows that it was at a later one: a counter
//  file of this very keystore (it verifies under its identity: only schema
//  5 and later write one), or with `rows`, for schema 1 (its columns added), a PIN
//  hash keyed with the PIN key (schema 1 had none).  An older copy of this keystore restored after its upgrade
//  needs its counter file moved away first (cryptoserver-keystore(5)).
static bool
s_was_current (keystore_t *self, int stored, bool rows)
{
    uint64_t base = 0;
    if (!rows && (ks_counter_base (self, &base) != 0 || base > 0)) {
        zsys_error ("keystore %s: schema %d, but its counter file %s (counter %" PRIu64 ") shows it "
                    "was at schema 5 or later: refused (changed without the master key): no upgrade",
                    ks_where (self), stored, self->counter_path, base);
        return true;
    }
    char **names = rows && stored == 1 ? self->be->tenant_list (self->store) : NULL;
    bool keyed = rows && stored == 1 && !names;
    for (size_t i = 0; names && names [i]; i++) {
        ks_tenant_row_t row;
        if (!keyed && ks_tenant_read (self, names [i], false, false, &row, NULL) != 1)
            keyed = true;           //  logged
        else
        if (!keyed) {
            for (int role = 0; role < 2 && !keyed; role++)
                keyed = strncmp (row.pin [role], "pbkdf2-sha256$", 14) != 0;
            if (keyed)
                zsys_error ("keystore %s: schema 1, but tenant %s has a PIN hash of a later schema: "
                            "refused (changed without the master key): no upgrade", ks_where (self), names [i]);
            ks_tenant_row_free (&row);
        }
        free (names [i]);
    }
    free (names);
    return keyed;
}

//  At open: loads the data key when the keystore has one (ks_master.c);
//  at schema 7 it must.  0 or -1 after an E: line.
static int
s_has_data_key (keystore_t *self, int stored)
{
    uint8_t *value = NULL;
    size_t len = 0;
    int got = self->be->meta_get (self->store, "data_key", &value, &len);
    free (value);
    //  Its identity, fixed when it was made or upgraded to 7: a master key
    //  rotation does not change it (authenticated by the state record).
    int has_id = got == 1 ? self->be->meta_get (self->store, "identity", &value, &len) : 0;
    if (has_id == 1 && len == sizeof self->id)
        memcpy (self->id, value, sizeof self->id);
    free (value);
    if (got == 1 && has_id < 0)
        return -1;
    if (got == 1)
        return ks_data_key_load (self);
    if (got == 0 && stored >= 7)
        zsys_error ("keystore %s: schema %d without its data key (changed without the master key?): "
                    "refused", ks_where (self), stored);
    return got == 0 && stored < 7 ? 0 : -1;
}

//  An upgrade to schema 7 of a keystore without a data key: the master key
//  itself becomes it, so that every row MAC, PIN form and the state
//  record stay as they are.  0 or -1.
static int
s_data_key_first (keystore_t *self)
{
    uint8_t *value = NULL;
    size_t len = 0;
    int got = self->be->meta_get (self->store, "data_key", &value, &len);
    free (value);
    return got == 0 ? (ks_data_key_put (self, self->keys->master, self->keys->master) == 0
                       && self->be->meta_put (self->store, "identity", self->id, sizeof self->id) == 0 ? 0 : -1)
         : got == 1 ? 0 : -1;
}

//  The operator's upgrade (keystore_upgrade) of a keystore at schema
//  `stored` whose state record is absent (got 0) or verified (got 1).
//  Refused: a record that says otherwise than the database (a downgrade),
//  a schema lower than the tables show, a table or column its schema has
//  missing.  Upgraded: the back end brings the tables to KS_SCHEMA_VERSION,
//  schema 1 rows are MACed as they stand (the operator vouches for them),
//  the state record is written.  0 or -1 after the E: line.
static int
s_upgrade (keystore_t *self, int stored, int got, uint64_t auth, uint64_t counter, const uint8_t digest [32])
{
    int shows = 0, found = 0;
    char missing [96];
    uint64_t base = 0;
    uint8_t rows [32];
    if (ks_schema_inspect (self, stored, &stored, &shows, missing, sizeof missing) != 0)
        return -1;
    if (got == 1) {
        if (auth == KS_SCHEMA_VERSION && stored == KS_SCHEMA_VERSION && !missing [0]) {
            zsys_info ("keystore %s: schema %d already: nothing to upgrade", ks_where (self), stored);
            return ks_counter_check (self, auth, counter, digest, KS_OPEN_NORMAL);
        }
        //  Schema 5 or 6 (authenticated, its rows and counter as its
        //  record says) to 7: the audit table is added (5); the data key
        //  is the master key itself, so that every row MAC, PIN form and
        //  the state record stay as they are; the record says 7.
        if ((auth == 5 || auth == 6) && stored == (int) auth && !missing [0]) {
            if (self->be->migrate (self->store, &found) != 0      //  an empty audit table
            ||  ks_counter_check (self, auth, counter, digest, KS_OPEN_NORMAL) != 0
            ||  s_data_key_first (self) != 0
            ||  self->be->version_set (self->store, KS_SCHEMA_VERSION) != 0
            ||  ks_state_put (self, KS_SCHEMA_VERSION, counter + 1, digest) != 0)
                return -1;
            self->counter = counter + 1;
            self->upgraded_from = stored;
            zsys_notice ("keystore %s: upgraded by the operator from schema %d to %d", ks_where (self),
                         stored, KS_SCHEMA_VERSION);
            return 0;
        }
        zsys_error ("keystore %s: its authenticated schema is %" PRIu64 " but the database says %d%s%s: "
                    "refused (changed without the master key): no upgrade", ks_where (self), auth, stored,
                    missing [0] ? " and has no " : "", missing);
        return -1;
    }
    if (stored < 1 || stored >= KS_SCHEMA_VERSION) {
        zsys_error ("keystore %s: schema %d without a state record: refused (changed without the "
                    "master key): no upgrade", ks_where (self), stored);
        return -1;
    }
    if (shows > stored) {
        zsys_error ("keystore %s: schema %d is lower than its contents show (schema %d): refused "
                    "(changed without the master key): no upgrade", ks_where (self), stored, shows);
        return -1;
    }
    if (missing [0]) {
        zsys_error ("keystore %s: %s is missing (schema %d has it): refused (changed without the "
                    "master key): no upgrade", ks_where (self), missing, stored);
        return -1;
    }
    if (s_was_current (self, stored, false))
        return -1;
    //  The schema 1 rows are read once the back end added their columns
    //  (a refusal rolls that back with the rest).
    if (self->be->migrate (self->store, &found) != 0
    ||  (stored == 1 && (s_was_current (self, stored, true) || s_upgrade_1_to_2 (self) != 0))
    ||  s_data_key_first (self) != 0
    ||  self->be->version_set (self->store, KS_SCHEMA_VERSION) != 0
    ||  ks_counter_base (self, &base) != 0
    ||  ks_digest_compute (self, rows) != 0
    ||  ks_state_put (self, KS_SCHEMA_VERSION, base + 1, rows) != 0)
        return -1;
    self->counter = base + 1;
    self->upgraded_from = stored;
    zsys_notice ("keystore %s: upgraded by the operator from schema %d to %d%s", ks_where (self), stored,
                 KS_SCHEMA_VERSION, stored == 1 ? " (schema 1 rows MACed as they stood)" : "");
    return 0;
}

//  An existing keystore opened as it is: its state record must verify and
//  say the schema the database says, which must be this code's, with every
//  table and column of it; then the counter against the counter file.
static int
s_check (keystore_t *self, int got, uint64_t auth, uint64_t counter, const uint8_t digest [32],
         ks_open_mode_t mode)
{
    int stored = 0, shows = 0;
    char missing [96];
    if (got < 0 || ks_schema_inspect (self, KS_SCHEMA_VERSION, &stored, &shows, missing, sizeof missing) != 0)
        return -1;
    if (got == 0)
        zsys_error ("keystore %s: schema %d is not authenticated (made by an earlier version, or "
                    "changed without the master key): refused; an operator upgrades a genuine old "
                    "keystore with 'cryptoserver-admin keystore upgrade'", ks_where (self), stored);
    else
    if (auth != KS_SCHEMA_VERSION)
        zsys_error ("keystore %s: authenticated schema %" PRIu64 " is not %d (made by another "
                    "version?): refused", ks_where (self), auth, KS_SCHEMA_VERSION);
    else
    if (stored != (int) auth)
        zsys_error ("keystore %s: schema %d in the database is not its authenticated schema %" PRIu64
                    " (changed without the master key): refused", ks_where (self), stored, auth);
    else
    if (missing [0])
        zsys_error ("keystore %s: %s is missing (schema %" PRIu64 " has it; changed without the "
                    "master key): refused", ks_where (self), missing, auth);
    else
        return ks_counter_check (self, auth, counter, digest, mode);
    return -1;
}

//  Inside one write transaction: a new database is made; an existing one
//  must have the master key's check value, then is checked as it is
//  (s_check), or upgraded (s_upgrade) by the operator's keystore_upgrade.
//  Returns 0, or -1 after a log (the documented "master key does not
//  match" line included).
int
ks_schema_open (keystore_t *self, ks_open_mode_t mode)
{
    if (self->be->begin (self->store) != 0)
        return -1;
    uint8_t *value = NULL, *plain = NULL;
    size_t len = 0, plain_len = 0;
    int rc = -1, stored = 0, shows = 0, found = 0;
    uint64_t auth = 0, counter = 0;
    char missing [96];
    if (ks_schema_inspect (self, KS_SCHEMA_VERSION, &stored, &shows, missing, sizeof missing) != 0)
        goto out;
    if (stored == 0 && shows == 0) {                //  a new keystore
        rc = s_init (self);
        goto out;
    }
    found = self->be->meta_get (self->store, "master_check", &value, &len);
    if (found == 0)
        zsys_error ("keystore %s: no master key check value (changed without the master key?): "
                    "refused", ks_where (self));
    if (found != 1)
        goto out;
    plain = ks_open (self->keys->master, CHECK_AAD, strlen (CHECK_AAD), value, len, &plain_len);
    if (!plain || plain_len != strlen (CHECK_PLAINTEXT) || memcmp (plain, CHECK_PLAINTEXT, plain_len)) {
        zsys_error ("keystore %s: master key does not match", ks_where (self));
        goto out;
    }
    EVP_Digest (value, len, self->id, NULL, EVP_sha256 (), NULL);
    //  A data key, wherever there is one (a schema taken back below 7 is
    //  then refused by its state record, as any other): the row, PIN and
    //  state keys come from it.
    if (s_has_data_key (self, stored) != 0)
        goto out;
    uint8_t digest [32] = { 0 };
    int got = ks_state_get (self, &auth, &counter, digest);
    if (mode == KS_OPEN_UPGRADE)
        rc = got < 0 ? -1 : s_upgrade (self, stored, got, auth, counter, digest);
    else
        rc = s_check (self, got, auth, counter, digest, mode);
out:
    free (value);
    free (plain);
    memset (self->delta, 0, sizeof self->delta);       //  the digest was computed whole
    if (self->be->end (self->store, rc == 0) != 0)
        rc = -1;
    if (rc == 0)
        rc = ks_state_opened (self, mode);
    return rc;
}
