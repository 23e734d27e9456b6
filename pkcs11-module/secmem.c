/*  secmem.c — one locked, non-dumpable anonymous mapping per secret (secmem.h).  */
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <openssl/crypto.h>
#include "log.h"
#include "secmem.h"

static size_t
s_mapped_len (size_t len)
{
    size_t page = (size_t) sysconf (_SC_PAGESIZE);
    return (len + page - 1) / page * page;
}

void *
cs_secmem_alloc (size_t len)
{
    static int s_warned;
    void *block;
    if (len == 0)
        return NULL;
    block = mmap (NULL, s_mapped_len (len), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED)
        return NULL;
    if (mlock (block, s_mapped_len (len)) != 0 && !__atomic_exchange_n (&s_warned, 1, __ATOMIC_SEQ_CST))
        cs_log_debug ("cannot lock key memory (RLIMIT_MEMLOCK?); keys stay in ordinary memory");
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
