/*  cs_util.h — small helpers shared by every component: hex, paths, clocks.  */
#ifndef CS_UTIL_H_INCLUDED
#define CS_UTIL_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

/*  Writes 2*len lowercase hex digits and a NUL into out (2*len+1 bytes).  */
void cs_hex_encode (const void *data, size_t len, char *out);

/*  Decodes hex text into at most max bytes of out.  Returns the byte count,
 *  or -1 when the text has an odd length, a non-hex digit, or does not fit.  */
long cs_hex_decode (const char *hex, void *out, size_t max);

/*  Resolves `path` against directory `base` unless it is absolute.  Returns a
 *  malloc'd path (caller frees), or NULL when path is NULL or out of memory.  */
char *cs_path_resolve (const char *base, const char *path);

/*  Returns the directory part of `file` as a malloc'd string ("." if none).  */
char *cs_path_dirname (const char *file);

/*  Milliseconds on the monotonic clock.  */
int64_t cs_clock_ms (void);

/*  Checks that the secret file at `path` (a key, PIN or ticket key file) is
 *  private to its owner: no permission bit for group or others (mode & 077
 *  == 0, as ssh demands of private keys).  Returns 0; or -1 with a one-line
 *  reason in why (why_size bytes, may be 0): "cannot read PATH: ERROR", or
 *  "PATH can be read by group or others (mode 0644): chmod 600 PATH".  */
int cs_file_check_private (const char *path, char *why, size_t why_size);

/*  Reads a whole small file (at most max bytes) into a malloc'd NUL-terminated
 *  buffer; trailing newlines and spaces are stripped.  Returns NULL on error,
 *  with errno EACCES when the file is not private (cs_file_check_private).
 *  Used for PIN files: the caller wipes and frees the result.  */
char *cs_file_read_secret (const char *path, size_t max);

/*  Reads a secret file holding exactly 2*len hex digits (trailing newline
 *  allowed) into len bytes of out; the text copy is wiped.  Returns 0, -1
 *  when the file cannot be read or is not private (cs_file_check_private),
 *  -2 when it is not 2*len hex digits (then out is wiped).  Used for the
 *  ticket key and the master key files.  */
int cs_file_read_hex (const char *path, void *out, size_t len);

#endif
