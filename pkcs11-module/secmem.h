/*  secmem.h — locked memory for private key material held by the module
 *  (per-request keys, DESIGN.md §1 and §6).
 *
 *  Each block is its own anonymous mapping: mlock'd where RLIMIT_MEMLOCK
 *  allows (a failure is logged once at debug level, the block is still
 *  usable), excluded from core dumps (MADV_DONTDUMP) and wiped with
 *  OPENSSL_cleanse before it is unmapped.  A mapping per block means freeing
 *  one key never unlocks a page another key still uses.
 */
#ifndef CS_MODULE_SECMEM_H_INCLUDED
#define CS_MODULE_SECMEM_H_INCLUDED

#include <stddef.h>

/*  Returns `len` (> 0) zeroed bytes of locked memory, or NULL when out of
 *  memory.  Free with cs_secmem_free.  */
void *cs_secmem_alloc (size_t len);

/*  Copies `len` bytes of `data` into a new locked block, or NULL (OOM).  */
void *cs_secmem_dup (const void *data, size_t len);

/*  Wipes and frees a block of `len` bytes from cs_secmem_alloc.  NULL-safe.  */
void cs_secmem_free (void *block, size_t len);

#endif
