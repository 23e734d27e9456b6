/*  cs_secmem.h — locked, non-dumpable memory for secrets: the module's
 *  per-request keys (docs/DESIGN.md §1), the broker's master key, ticket key and
 *  pre-generated pool keys (docs/DESIGN.md §6).
 *
 *  Each block is its own anonymous mapping (whole pages): mlock'd where
 *  RLIMIT_MEMLOCK allows (a refusal is counted, see cs_secmem_lock_failures;
 *  the block is still usable), excluded from core dumps (MADV_DONTDUMP) and
 *  wiped with OPENSSL_cleanse before it is unmapped.  A mapping per block
 *  means mlock never pins a page that holds unrelated heap data, and freeing
 *  one secret never unlocks a page another secret still uses: never mlock a
 *  malloc'd buffer, allocate the secret here instead.
 */
#ifndef CS_SECMEM_H_INCLUDED
#define CS_SECMEM_H_INCLUDED

#include <stddef.h>

/*  Returns `len` (> 0) zeroed bytes of locked memory, or NULL when len is 0
 *  or out of memory.  Free with cs_secmem_free (block, len).  */
void *cs_secmem_alloc (size_t len);

/*  Copies `len` bytes of `data` into a new locked block, or NULL (OOM).  */
void *cs_secmem_dup (const void *data, size_t len);

/*  Wipes, unlocks and unmaps a block of `len` bytes from cs_secmem_alloc.
 *  NULL-safe.  */
void cs_secmem_free (void *block, size_t len);

/*  How many blocks could not be locked since the process started
 *  (RLIMIT_MEMLOCK); callers that must warn compare it before and after
 *  an allocation.  */
size_t cs_secmem_lock_failures (void);

/*  Protects a daemon that holds secrets (the broker): the process becomes
 *  non-dumpable (prctl PR_SET_DUMPABLE 0: no core file, /proc/PID/mem and
 *  ptrace attach refused to other processes of the same user) and its core
 *  size limit is 0.  A debugger that started the process keeps working.
 *  Returns 0, or -1 (errno set) when the kernel refuses.  */
int cs_secmem_protect_process (void);

#endif
