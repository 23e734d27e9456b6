/*  cs_ipc.h — paths of ipc:// endpoints (AF_UNIX sockets, unix(7)) that
 *  must fit the kernel's limit: sun_path holds 108 bytes with its NUL, so a
 *  deployment in a deep directory (a distcheck tree, a CI checkout) cannot
 *  put its socket beside its files.  Used by the party service's control
 *  socket (broker/party/party.c) and by cryptoserver-admin(8) `shared`,
 *  which must compute the same endpoint.  cryptoserver-broker.conf(5)
 *  "party/control".
 */
#ifndef CS_IPC_H_INCLUDED
#define CS_IPC_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

/*  The longest path an ipc:// endpoint can bind: sun_path less its NUL
 *  (107 bytes on Linux, unix(7)).  */
size_t cs_ipc_path_max (void);

/*  The default control endpoint of the party service of the deployment in
 *  directory dir: "ipc://DIR/party.ipc" (DIR made absolute) when that path
 *  fits cs_ipc_path_max; else "ipc://RUN/party-HASH.ipc", where RUN is
 *  cs_ipc_private_dir and HASH the first 16 hex digits of the SHA-256 of
 *  the absolute DIR (the same for every process of the deployment, other
 *  for another deployment).  Malloc'd, caller frees; NULL when dir does not
 *  exist or out of memory.  The directory RUN is not created here: the
 *  binding side calls cs_ipc_prepare.  */
char *cs_ipc_party_control_default (const char *dir);

/*  The per-user directory for sockets that cannot live beside their files:
 *  "$TMPDIR/cryptoserver-UID" (TMPDIR, else /tmp; UID the effective uid),
 *  as tmux(1) does.  Malloc'd, caller frees; NULL when out of memory.  */
char *cs_ipc_private_dir (void);

/*  Before binding the socket file path: when path lies in cs_ipc_private_dir,
 *  creates that directory (mode 0700) if missing and checks that it is a
 *  directory (not a link), owned by this user, with no permission bit for
 *  group or others, so no other user can plant or reach the socket there.
 *  A path elsewhere is the operator's choice and is left alone.  Returns 0;
 *  or -1 with a one-line reason in why (why_size bytes).  */
int cs_ipc_prepare (const char *path, char *why, size_t why_size);

#endif
