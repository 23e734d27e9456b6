/*  cs-test-files.h — for the test clients (cs-wrap, cs-des-wrap): files of
 *  the test's directory that the shell and the client hand each other.  */
#ifndef CS_TEST_FILES_H_INCLUDED
#define CS_TEST_FILES_H_INCLUDED

#include <stdbool.h>
#include <stdio.h>

/*  Reads at most `max` bytes of DIR/name into buf: the length read, or
 *  -1 when the file cannot be opened.  */
static inline long
cs_test_read (const char *dir, const char *name, unsigned char *buf, size_t max)
{
    char path [4096];
    snprintf (path, sizeof path, "%s/%s", dir, name);
    FILE *file = fopen (path, "rb");
    if (!file)
        return -1;
    size_t len = fread (buf, 1, max, file);
    fclose (file);
    return (long) len;
}

/*  Writes `len` bytes of data to DIR/name: true when all were written.  */
static inline bool
cs_test_write (const char *dir, const char *name, const unsigned char *data, size_t len)
{
    char path [4096];
    snprintf (path, sizeof path, "%s/%s", dir, name);
    FILE *file = fopen (path, "wb");
    bool ok = file && fwrite (data, 1, len, file) == len;
    return file && fclose (file) == 0 && ok;
}

#endif
