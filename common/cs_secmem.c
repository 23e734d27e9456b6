/*  cs_secmem.c — one locked, non-dumpable anonymous mapping per secret
 *  (cs_secmem.h).  */
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <openssl/crypto.h>
#include "cs_secmem.h"

static size_t s_lock_failures;          /* atomic */

static size_t
s_mapped_len (size_t len)
{
    size_t page = (size_t) sysconf (_SC_PAGESIZE);
    return (len + page - 1) / page * page;
}

void *
cs_secmem_alloc (size_t len)
{
    void *block;
    if (len == 0)
        return NULL;
    block = mmap (NULL, s_mapped_len (len), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED)
        return NULL;
    if (mlock (block, s_mapped_len (len)) != 0)
        __atomic_add_fetch (&s_lock_failures, 1, __ATOMIC_SEQ_CST);
#ifdef MADV_DONTDUMP
    madvise (block, s_mapped_len (len), MADV_DONTDUMP);
#endif
    return block;
}

void *
cs_secmem_dup (const void *data, size_t len)
{
    void *block = cs_secmem_alloc (len);
    if (block)
        memcpy (block, data, len);
    return block;
}

void
cs_secmem_free (void *block, size_t len)
{
    if (!block)
        return;
    OPENSSL_cleanse (block, len);
    munlock (block, s_mapped_len (len));
    munmap (block, s_mapped_len (len));
}

size_t
cs_secmem_lock_failures (void)
{
    return __atomic_load_n (&s_lock_failures, __ATOMIC_SEQ_CST);
}

int
cs_secmem_protect_process (void)
{
    struct rlimit core;
    if (prctl (PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 || getrlimit (RLIMIT_CORE, &core) != 0)
        return -1;
    core.rlim_cur = 0;              /* the hard limit stays: a shell may raise it again */
    return setrlimit (RLIMIT_CORE, &core);
}
