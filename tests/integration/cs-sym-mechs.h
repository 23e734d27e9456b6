/*  cs-sym-mechs.h — what the two files of the cs-sym-mechs test client
 *  share (cs-sym-mechs.c: known answers; cs-sym-mechs-rules.c: mechanism
 *  infos, refusals, DES3 generation).  */
#ifndef CS_SYM_MECHS_H_INCLUDED
#define CS_SYM_MECHS_H_INCLUDED

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <p11-kit/pkcs11.h>

extern CK_FUNCTION_LIST *p11;           /* the module under test */
extern CK_SESSION_HANDLE s;             /* a logged-in R/W session */

#define CHECK(call, what) EXPECT (call, CKR_OK, what)
#define EXPECT(call, want, what) do { CK_RV rv_ = (call); if (rv_ != (CK_RV) (want)) { \
    fprintf (stderr, "cs-sym-mechs: %s: CK_RV 0x%lx, expected 0x%lx\n", what, (unsigned long) rv_, \
             (unsigned long) (want)); exit (1); } } while (0)

/*  Prints the failure and exits 1.  */
void sm_fail (const char *what);

/*  Writes OUTDIR/name.  */
void sm_write (const char *name, const unsigned char *data, size_t len);

/*  C_CreateObject of a session secret key with all four usages; expects `want`.  */
CK_OBJECT_HANDLE sm_import (CK_KEY_TYPE type, const unsigned char *value, CK_ULONG len, CK_RV want);

/*  One encryption (enc) or decryption through the module, single- or
 *  multi-part; *len in: capacity, out: the result's length.  Returns the
 *  first error.  */
CK_RV sm_crypt (bool enc, CK_MECHANISM *mech, CK_OBJECT_HANDLE k, const unsigned char *in, CK_ULONG n,
                unsigned char *out, CK_ULONG *len, bool multi);

/*  EVP's result of cipher `name` (exits on failure).  */
int sm_evp (const char *name, bool enc, bool pad, const unsigned char *key, const unsigned char *iv,
            const unsigned char *in, int n, unsigned char *out);

/*  cs-sym-mechs-rules.c  */
void sm_infos (CK_SLOT_ID slot);
void sm_refusals (void);
void sm_des3_keygen (void);

#endif
