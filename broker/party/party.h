/*  party.h — this broker as one of the three parties of shared RSA keys
 *  (issue #24, docs/SHARED-KEYS.md "Over the network").
 *
 *  With a `party` section in broker.conf, the broker runs a party service on
 *  its own thread: a ROUTER that only the two peers' pinned CURVE keys may
 *  reach, a DEALER to each peer, and a control socket for
 *  cryptoserver-admin(8) `shared`.  The reactor never waits for it.
 */
#ifndef PARTY_H_INCLUDED
#define PARTY_H_INCLUDED

#include <stdbool.h>
#include "broker_config.h"
#include "keystore.h"

typedef struct _party_t party_t;

/*  True when config has a `party` section.  */
bool party_configured (const broker_config_t *config);

/*  True when tenant opted in to shared keys in config: keys/shared/TENANT,
 *  or else keys/shared, is 3 (cryptoserver-broker.conf(5) "SHARED KEYS").  */
bool party_shared_tenant (const broker_config_t *config, const char *tenant);

/*  The endpoint of the party service's control socket (party/control,
 *  default ipc://DIR/party.ipc, or a path in a private directory when that
 *  one is too long for a socket: cs_ipc_party_control_default): malloc'd,
 *  caller frees; NULL when out of memory, the directory is gone, or the
 *  endpoint may not be the control socket: not ipc:// with an absolute path
 *  that fits a socket's path (cs_ipc_path_max, unix(7)), then after an E:
 *  line naming party/control (the service and the frontend each ask, so
 *  the broker stops at start whichever side runs first).  The
 *  frontend sends C_GenerateKeyPair and C_Sign/C_Decrypt of shared keys
 *  there, as cryptoserver-admin(8) `shared` does.  */
char *party_control_endpoint (const broker_config_t *config);

#define PARTY_LANE_TOKEN_LEN 16

/*  The token the frontend's board lane shows in its BOARDS hello to the
 *  party service of this process (docs/SHARED-KEYS.md "Partial results on
 *  the boards"): 16 random bytes drawn once per process (OpenSSL's DRBG),
 *  so that another process that can reach the control socket cannot take
 *  the lane and receive share exponents.  Copies it into token; 0, or -1
 *  when no randomness could be drawn.  */
int party_lane_token (unsigned char token [PARTY_LANE_TOKEN_LEN]);

/*  Starts the party service of config (cryptoserver-broker.conf(5),
 *  "party"), on its own thread with its own connection to ks's keystore
 *  (keystore_open_again).  Returns the service (caller destroys), or NULL
 *  after an error log line naming the bad key or endpoint.  config must
 *  outlive the service.  */
party_t *party_new (const broker_config_t *config, keystore_t *ks);

/*  Stops the service: sessions in flight are dropped (nothing half made is
 *  stored), their secrets wiped.  NULL-safe; nulls *self_p.  */
void party_destroy (party_t **self_p);

#endif
