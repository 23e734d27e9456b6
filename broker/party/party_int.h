/*  party_int.h — the party service's state, shared by party.c (sockets,
 *  ZAP, the loop), party_gen.c (generation) and party_sign.c (signing).
 *  Everything here lives on the service's one thread.
 */
#ifndef PARTY_INT_H_INCLUDED
#define PARTY_INT_H_INCLUDED

#include <zmq.h>
#include "party.h"
#include "cs_sharedkeys.h"
#include "cs_usage.h"
#include "sharedkeys/sharedkeys.pb-c.h"

#define PARTY_SEEN 256              /* session ids remembered against replays */
#define PARTY_PENDING 64            /* round frames held for a session not opened yet */
#define PARTY_ERR_LEN 256
#define PARTY_REF_LEN 40            /* bytes of a key ref and its NUL ("ks:" and 32 hex digits) */
/*  Declares Frame f of kind_ for session_ (CS_SK_SESSION_LEN bytes, borrowed).  */
#define PARTY_FRAME_INIT(f, kind_, session_) \
    Cs__Sk__Frame f = CS__SK__FRAME__INIT; \
    f.version = CS_SK_PROTOCOL_VERSION; f.kind = (kind_); \
    f.session.data = (uint8_t *) (session_); f.session.len = CS_SK_SESSION_LEN
#define PARTY_MAX_N 513              /* bytes of the largest modulus (4096 bits) + 1 */
#define PARTY_SIGNS 16              /* signing sessions in flight at once (coordinator side) */
#define PARTY_BOARD_JOBS 48         /* partial results out on this broker's boards at once */

typedef struct {
    char *endpoint;                 /* party/peers/N/endpoint */
    char public_key [41];           /* Z85 of its CURVE public key, pinned */
    void *dealer;                   /* this party -> that peer */
    int64_t last_heard;             /* zclock_mono of its last frame in the session */
} party_peer_t;

typedef enum { GEN_ROUNDS, GEN_READY, GEN_COMMITTING, GEN_STORED } party_gen_state_t;

/*  The one generation session in flight.  */
typedef struct {
    unsigned char session [CS_SK_SESSION_LEN];
    unsigned coordinator;           /* the party that the admin asked */
    char *tenant, *label, *ref;
    unsigned bits;
    unsigned char *templ;           /* a packed GenerateKeyPairJob whose templates the row
                                       takes (C_GenerateKeyPair), or NULL (cryptoserver-admin) */
    size_t templ_len;
    uint8_t idem [KEYSTORE_IDEM_ID_MAX];    /* the module's Job.idempotency_id, recorded with the
                                               row (party_idem.c); idem_len 0: none */
    size_t idem_len;
    void *waiter_id; size_t waiter_id_len;  /* a GENERATE with the same idempotency id sent here
                                               meanwhile (the module's failover): answered too */
    cs_sk_party_t *party;
    cs_sk_share_t *share;           /* once the rounds are done */
    party_gen_state_t state;
    bool ready [CS_SK_PARTIES + 1], stored [CS_SK_PARTIES + 1];
    void *control_id; size_t control_id_len;   /* coordinator: the admin to answer */
    int64_t started;
} party_gen_t;

/*  One signing session in flight (coordinator side), found by its
 *  session id; at most PARTY_SIGNS at once.  */
typedef struct {
    unsigned char session [CS_SK_SESSION_LEN];
    unsigned char n [PARTY_MAX_N];  /* the key's N (k bytes) and e, for the check */
    unsigned long e;
    unsigned char *m;               /* the padded block, k bytes */
    unsigned char *partial [CS_SK_PARTIES + 1];
    size_t k;
    char *label;
    unsigned only;                  /* PARTIAL request: the one party whose result to return */
    void *control_id; size_t control_id_len;
    int64_t started;
} party_sign_t;

/*  A partial result m^(d_i) mod N out on one of this broker's boards
 *  (docs/SHARED-KEYS.md "Partial results on the boards"): for a signing
 *  this party coordinates (`from` 0: the session's own partial) or for the
 *  peer `from` (answered with PARTIAL).  Found by its tag when the
 *  frontend's board lane answers.  */
typedef struct {
    uint64_t tag;                   /* 0: a free slot */
    unsigned char session [CS_SK_SESSION_LEN];
    unsigned from;
    char tenant [256];
    bool sent;                      /* out on the board lane (else waiting for its BOARDS) */
    cs_sk_share_t *share;           /* owned: for the send, and the CPU fallback (no board
                                       runs modexp) */
    unsigned char *m;               /* the block, k bytes, owned */
    size_t k;
    int64_t started;
} party_board_job_t;

typedef struct {
    unsigned char session [CS_SK_SESSION_LEN];
    unsigned from;
    unsigned char *data; size_t len;
} party_pending_t;

#define PARTY_COMMITTED 16          /* recent sealed shares a coordinator's ABORT may undo */

/*  A share this party sealed on a coordinator's COMMIT: an ABORT of the
 *  same session (the coordinator could not seal its own) deletes it.  */
typedef struct {
    unsigned char session [CS_SK_SESSION_LEN];
    unsigned coordinator;
    char tenant [256];
    char ref [40];
} party_committed_t;

struct _party_t {
    const broker_config_t *config;
    keystore_t *ks;                 /* this thread's connection */
    unsigned index;                 /* party/index, 1..3 */
    char *endpoint, *control_endpoint;
    zcert_t *cert;                  /* party/secret-key */
    int round_timeout_ms;           /* party/round-timeout-ms */
    party_peer_t peer [CS_SK_PARTIES + 1];      /* [index] unused */
    void *ctx, *router, *control, *zap;
    pthread_t thread;
    volatile int stop;
    party_gen_t *gen;
    party_sign_t *sign [PARTY_SIGNS];
    party_board_job_t board_job [PARTY_BOARD_JOBS];
    uint64_t board_tag;             /* the last tag given */
    void *board_lane; size_t board_lane_len;    /* control id of the frontend's board lane
                                                   (its BOARDS hello), or NULL */
    bool board_fallback_said;       /* the CPU fallback was logged */
    unsigned char seen [PARTY_SEEN][CS_SK_SESSION_LEN];
    size_t n_seen;
    party_pending_t pending [PARTY_PENDING];
    size_t n_pending;
    party_committed_t committed [PARTY_COMMITTED];
    size_t n_committed;
    bool fault_partial;             /* party/test-fault = wrong-partial: tests only */
};

/*  party.c: sends frame to peer `to`; 0, or -1 when the peer is not
 *  connected within a second (ZMQ_IMMEDIATE, ZMQ_SNDTIMEO: it may be
 *  reconnecting) or the send fails.  Blocks only the party thread.  */
int party_send (party_t *self, unsigned to, const Cs__Sk__Frame *frame);

/*  Answers the admin request of control id `id` with the strings of the
 *  NULL-terminated list (frees nothing).  */
void party_reply (party_t *self, const void *id, size_t id_len, const char *first, ...);

/*  The frontend's BOARDS hello on the control socket: args [1] must be
 *  the process's lane token (party_lane_token, hex); then id is where
 *  party_board_send sends.  Returns 0; -1 for a wrong token (refused
 *  with a W: line) or out of memory.  */
int party_board_hello (party_t *self, const void *id, size_t id_len, char **args, size_t n);

/*  Sends MODEXP of job `tag` to the frontend's board lane: base^exp mod n
 *  (k, exp_len bytes; borrowed, the caller wipes exp) on a board open to
 *  tenant, within deadline_ms.  The frontend answers BOARD tag rv hex on
 *  the control socket (party_sign_board).  Returns 0, or -1 when no lane
 *  said BOARDS yet or the send failed.  Never blocks.  */
int party_board_send (party_t *self, uint64_t tag, const char *tenant, const unsigned char *base,
                      const unsigned char *exp, size_t exp_len, const unsigned char *n, size_t k,
                      int deadline_ms);

/*  True when tenant may hold shared keys here (keys/shared[/TENANT] = 3).  */
bool party_tenant_allowed (party_t *self, const char *tenant);

/*  Remembers session; false when it was seen before (a replay).  */
bool party_session_fresh (party_t *self, const unsigned char *session);

/*  True when session was opened here before (without remembering it).  */
bool party_session_seen (party_t *self, const unsigned char *session);

/*  The key of tenant labelled `label` (or with ref `ref` when label is
 *  NULL) that is a shared key of this party: its row (*info_p, caller frees)
 *  and share (caller destroys).  Returns 0, or -1 with why in err.  */
int party_share_load (party_t *self, const char *tenant, const char *label, const char *ref,
                      Cs__KeyInfo **info_p, cs_sk_share_t **share_p, char err [PARTY_ERR_LEN]);

/*  party_use.c: 0 when this party's row of a shared key (info) allows
 *  `use` with wire mechanism `mech` (keyattrs_use_check under the tenant's
 *  keys/usage-separation); else -1 with err "CKR_NAME: why".  Every party
 *  checks its own row, so a role turned off through any of the three
 *  brokers is off for the key, and no party can have the others compute
 *  for a use their rows refuse (issue #19).  */
int party_use_refused (party_t *self, const char *tenant, const Cs__KeyInfo *info, cs_usage_use_t use,
                       CK_MECHANISM_TYPE mech, char err [PARTY_ERR_LEN]);

/*  party_use.c: the CK_RV name an error text starts with
 *  ("CKR_KEY_FUNCTION_NOT_PERMITTED: ..."), for party_use_refused's
 *  refusals; "CKR_DEVICE_ERROR" for anything else.  Static string.  */
const char *party_rv_prefix (const char *text);

/*  party_use.c: the use named `text` ("sign", "decrypt", "unwrap"), or
 *  CS_USE_COUNT.  */
cs_usage_use_t party_use_parse (const char *text);

/*  party_idem.c: the ref of the key that a shared generation of tenant
 *  with idempotency id `id` (1..KEYSTORE_IDEM_ID_MAX bytes) made at this
 *  party, recorded with its row (keystore_idem_begin) and the row still
 *  there: 1 with ref set; 0 when not recorded or its row was undone; -1
 *  on a keystore error (logged by the keystore).  Never leaves a
 *  transaction open.  */
int party_idem_ref (party_t *self, const char *tenant, const uint8_t *id, size_t id_len, char ref [PARTY_REF_LEN]);

/*  party_idem.c: runs put (which stores the generation's row) in the one
 *  keystore transaction that also records (tenant, id) -> ref
 *  (keystore_idem_begin / _end), so the id is recorded exactly when the
 *  row is; id_len 0: put alone.  An id already recorded (for a key since
 *  undone) is not recorded again: the row is stored without it.  Returns
 *  put's 0, or -1 (put failed, or the record: rolled back).  */
int party_idem_put (party_t *self, const char *tenant, const uint8_t *id, size_t id_len, const char *ref,
                    int (*put) (party_t *self));

/*  party_row.c: seals this party's share of the generation in flight as
 *  the tenant's key row gen->ref (KeyInfo of (N, e) with the templates
 *  applied, home "shared", CKA_CS_SHARED TRUE, the share record as sealed
 *  private material), its idempotency id recorded with it.  0 or -1.  */
int party_row_store (party_t *self);

/*  party_gen.c */
void party_gen_control (party_t *self, const void *id, size_t id_len, char **args, size_t n);
void party_gen_frame (party_t *self, unsigned from, const Cs__Sk__Frame *frame);
void party_gen_tick (party_t *self);
void party_gen_drop (party_t *self, const char *why, bool tell_peers);

/*  party_sign.c */
void party_sign_control (party_t *self, const void *id, size_t id_len, char **args, size_t n);
void party_sign_frame (party_t *self, unsigned from, const Cs__Sk__Frame *frame);
void party_sign_tick (party_t *self);
/*  The frontend's board lane said BOARDS: the partial results that wait
 *  for it are sent.  */
void party_sign_lane_up (party_t *self);
/*  The frontend's answer BOARD tag rv hex to a party_board_send: the
 *  partial result goes to its signing or its peer.  */
void party_sign_board (party_t *self, char **args, size_t n);
/*  Fails every signature in flight with why and drops the partial
 *  results out on boards (the broker stops).  */
void party_sign_drop (party_t *self, const char *why);

#endif
