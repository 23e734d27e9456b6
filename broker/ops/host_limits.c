/*  host_limits.c — the broker's file limit and heap trim (host_limits.h).  */
#include <malloc.h>
#include <sys/resource.h>
#include "host_limits.h"

size_t
host_limits_raise_nofile (void)
{
    struct rlimit limit;
    if (getrlimit (RLIMIT_NOFILE, &limit))
        return 0;
    if (limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        (void) setrlimit (RLIMIT_NOFILE, &limit);
        if (getrlimit (RLIMIT_NOFILE, &limit))
            return 0;
    }
    return (size_t) limit.rlim_cur;
}

size_t
host_limits_trim (size_t min_free)
{
    struct mallinfo2 info = mallinfo2 ();
    if (info.fordblks < min_free)
        return 0;
    malloc_trim (0);
    return info.fordblks;
}
