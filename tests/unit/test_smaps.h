/*  test_smaps.h — what the kernel says about this process's memory
 *  (/proc/self/smaps, proc(5)): which mappings are locked ("Locked:", VmFlags
 *  "lo") and excluded from core dumps (VmFlags "dd"), to check that secrets
 *  live in locked, non-dumpable pages of their own (common/cs_secmem.h) and
 *  that no page of ordinary heap is ever locked.  Header-only (static).
 */
#ifndef TEST_SMAPS_H_INCLUDED
#define TEST_SMAPS_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/*  Sums over the mappings that are excluded from core dumps (secret
 *  pages): their size and the kB locked; and the kB locked in all other
 *  mappings (heap, stacks, libraries).  */
typedef struct {
    long secret_kb;
    long secret_locked_kb;
    long other_locked_kb;
} ts_locked_t;

/*  Reads /proc/self/smaps.  A mapping's "Locked:" line comes before its
 *  "VmFlags:" line, which ends its entry.  */
static inline ts_locked_t
ts_locked (void)
{
    ts_locked_t sums = { 0, 0, 0 };
    FILE *file = fopen ("/proc/self/smaps", "re");
    char line [1024];
    long locked = 0, size = 0;
    while (file && fgets (line, sizeof line, file)) {
        if (sscanf (line, "Locked: %ld kB", &locked) == 1 || sscanf (line, "Size: %ld kB", &size) == 1)
            continue;
        if (strncmp (line, "VmFlags:", 8) == 0) {
            if (strstr (line, " dd")) {
                sums.secret_kb += size;
                sums.secret_locked_kb += locked;
            }
            else
                sums.other_locked_kb += locked;
            locked = size = 0;
        }
    }
    if (file)
        fclose (file);
    return sums;
}

/*  The VmFlags and Locked kB of the mapping holding addr; false if none.  */
static inline bool
ts_mapping_of (const void *addr, char *flags, size_t flags_size, long *locked_kb_p)
{
    FILE *file = fopen ("/proc/self/smaps", "re");
    char line [1024];
    bool in = false, found = false;
    uintptr_t at = (uintptr_t) addr;
    while (file && !found && fgets (line, sizeof line, file)) {
        unsigned long start = 0, end = 0;
        if (sscanf (line, "%lx-%lx ", &start, &end) == 2)      /* a mapping's first line */
            in = at >= start && at < end;
        else
        if (in && sscanf (line, "Locked: %ld kB", locked_kb_p) == 1)
            continue;
        else
        if (in && strncmp (line, "VmFlags:", 8) == 0) {
            size_t len = strlen (line + 8) < flags_size ? strlen (line + 8) : flags_size - 1;
            memcpy (flags, line + 8, len);
            flags [len] = 0;
            found = true;
        }
    }
    if (file)
        fclose (file);
    return found;
}

#endif
