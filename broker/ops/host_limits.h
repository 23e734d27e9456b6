/*  host_limits.h — the broker process's own resources on its host: the
 *  file-descriptor limit raised at start (every client association is a
 *  TCP connection, one descriptor), and the heap that closed associations
 *  freed given back to the system (issue #25: 10,000 idle associations;
 *  man cryptoserver-broker(8) "Resources").
 */
#ifndef HOST_LIMITS_H_INCLUDED
#define HOST_LIMITS_H_INCLUDED

#include <stddef.h>

/*  Raises the soft RLIMIT_NOFILE to the hard limit (getrlimit(2)); an
 *  unprivileged process may.  Returns the soft limit in force afterwards
 *  (descriptors), or 0 when it cannot be read.  */
size_t host_limits_raise_nofile (void);

/*  When the heap holds at least min_free bytes that were freed but not
 *  returned (glibc keeps what a thread arena freed, e.g. libzmq's ~36 KiB
 *  of buffers and pipes per closed connection, mallinfo2(3)), gives them
 *  back with malloc_trim(3).  Returns the free bytes seen before the trim
 *  (0: nothing done).  Takes every arena's lock for a moment: call it from
 *  an idle thread on a timer, not per request.  */
size_t host_limits_trim (size_t min_free);

#endif
