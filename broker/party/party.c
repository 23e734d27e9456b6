/*  party.c — the party service's thread: config, the CurveZMQ sockets to
 *  the two peers with a ZAP handler that admits only their pinned keys, the
 *  admin control socket, and the loop that hands frames to party_gen.c and
 *  party_sign.c (docs/SHARED-KEYS.md "Over the network"); on the control
 *  socket the frontend's board lane also says BOARDS and brings back the
 *  partial results its boards computed (BOARD, "Partial results on the
 *  boards").  What those two call back (sending, answering the admin, the
 *  board lane, sessions) is party_net.c.
 *
 *  The service has its own ZeroMQ context: a context has one ZAP handler,
 *  and the broker's (zauth) admits the clients of broker/curve/clients,
 *  which must never reach the party socket, while the peers must never reach
 *  the client socket.
 */
#include <stdarg.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#include <czmq.h>
#include <openssl/crypto.h>
#include "cs_ipc.h"
#include "party_int.h"

#define S_DEFAULT_ROUND_TIMEOUT_MS 10000
#define S_POLL_MS 100
#define S_SEND_WAIT_MS 1000         /* a peer not connected: wait this long (it may be
                                       reconnecting) before it counts as unreachable */

bool
party_configured (const broker_config_t *config)
{
    return config && zconfig_locate (config->root, "party") != NULL;
}

/*  path resolved against the config's directory; malloc'd.  */
static char *
s_resolve (const broker_config_t *config, const char *path)
{
    if (path [0] == '/')
        return strdup (path);
    char *out = NULL;
    return asprintf (&out, "%s/%s", config->dir, path) < 0 ? NULL : out;
}

/*  True when endpoint may be the control socket: ipc:// with an absolute
 *  path that fits a socket's path (cs_ipc_path_max, unix(7)); else false
 *  after an E: line naming party/control.  */
static bool
s_control_valid (const char *endpoint)
{
    if (strncmp (endpoint, "ipc:///", 7)) {
        zsys_error ("party/control: must be ipc:// with an absolute path (got \"%s\"): the control socket "
                    "has no authentication, whoever reaches it signs and decrypts with every shared key",
                    endpoint);
        return false;
    }
    if (strlen (endpoint + 6) > cs_ipc_path_max ()) {
        zsys_error ("party/control: the path of %s is %zu bytes, over the %zu an ipc socket's path holds "
                    "(unix(7)): set party/control to a shorter ipc:///path", endpoint, strlen (endpoint + 6),
                    cs_ipc_path_max ());
        return false;
    }
    return true;
}

char *
party_control_endpoint (const broker_config_t *config)
{
    const char *given = zconfig_get (config->root, "party/control", NULL);
    char *endpoint = given ? strdup (given) : cs_ipc_party_control_default (config->dir);
    if (endpoint && !s_control_valid (endpoint)) {
        free (endpoint);
        endpoint = NULL;
    }
    return endpoint;
}

static int
s_config (party_t *self)
{
    zconfig_t *root = self->config->root;
    self->index = (unsigned) atoi (zconfig_get (root, "party/index", "0"));
    if (self->index < 1 || self->index > CS_SK_PARTIES) {
        zsys_error ("party/index: must be 1, 2 or 3");
        return -1;
    }
    const char *endpoint = zconfig_get (root, "party/endpoint", NULL);
    const char *secret = zconfig_get (root, "party/secret-key", NULL);
    if (!endpoint || !secret) {
        zsys_error ("party: endpoint and secret-key are required");
        return -1;
    }
    self->endpoint = strdup (endpoint);
    self->control_endpoint = party_control_endpoint (self->config);
    if (!self->control_endpoint)
        return -1;
    char *secret_path = s_resolve (self->config, secret);
    self->cert = secret_path ? zcert_load (secret_path) : NULL;
    if (!self->cert)
        zsys_error ("party/secret-key: cannot read the certificate %s", secret_path ? secret_path : secret);
    free (secret_path);
    self->round_timeout_ms = atoi (zconfig_get (root, "party/round-timeout-ms", "10000"));
    if (self->round_timeout_ms < 100 || self->round_timeout_ms > 3600000) {
        zsys_error ("party/round-timeout-ms: must be 100..3600000");
        return -1;
    }
    self->fault_partial = streq (zconfig_get (root, "party/test-fault", ""), "wrong-partial");
    for (unsigned i = 1; i <= CS_SK_PARTIES; i++) {
        if (i == self->index)
            continue;
        char path [64];
        snprintf (path, sizeof path, "party/peers/%u/endpoint", i);
        const char *ep = zconfig_get (root, path, NULL);
        snprintf (path, sizeof path, "party/peers/%u/public-key", i);
        const char *key = zconfig_get (root, path, NULL);
        if (!ep || !key || strlen (key) != 40) {
            zsys_error ("party/peers/%u: endpoint and public-key (40 Z85 characters) are required", i);
            return -1;
        }
        self->peer [i].endpoint = strdup (ep);
        memcpy (self->peer [i].public_key, key, 41);
    }
    return self->cert && self->endpoint && self->control_endpoint ? 0 : -1;
}

/*  ZAP (RFC 27): CURVE clients whose key is a pinned peer's get that peer's
 *  index as User-Id; anything else is refused.  */
static void
s_zap (party_t *self)
{
    zmq_msg_t part [7];
    int n = 0;
    for (int more = 1; more && n < 7; n++) {
        zmq_msg_init (&part [n]);
        if (zmq_msg_recv (&part [n], self->zap, 0) < 0) {
            zmq_msg_close (&part [n]);
            break;
        }
        more = zmq_msg_more (&part [n]);
    }
    char user [4] = "";
    if (n == 7 && zmq_msg_size (&part [5]) == 5 && memcmp (zmq_msg_data (&part [5]), "CURVE", 5) == 0
    &&  zmq_msg_size (&part [6]) == 32) {
        char z85 [41];
        zmq_z85_encode (z85, zmq_msg_data (&part [6]), 32);
        for (unsigned i = 1; i <= CS_SK_PARTIES; i++)
            if (i != self->index && streq (z85, self->peer [i].public_key))
                snprintf (user, sizeof user, "%u", i);
        if (!*user)
            zsys_warning ("party: refused a connection with CURVE key %s (not a pinned peer)", z85);
    }
    const char *status = *user ? "200" : "400";
    zmq_send (self->zap, "1.0", 3, ZMQ_SNDMORE);
    zmq_send (self->zap, n > 1 ? zmq_msg_data (&part [1]) : "", n > 1 ? zmq_msg_size (&part [1]) : 0,
              ZMQ_SNDMORE);
    zmq_send (self->zap, status, 3, ZMQ_SNDMORE);
    zmq_send (self->zap, *user ? "OK" : "not a peer", *user ? 2 : 10, ZMQ_SNDMORE);
    zmq_send (self->zap, user, strlen (user), ZMQ_SNDMORE);
    zmq_send (self->zap, "", 0, 0);
    for (int i = 0; i < n; i++)
        zmq_msg_close (&part [i]);
}

/*  Binds the control socket (ipc://PATH, s_config) for this user and root
 *  only: the socket has no authentication and its RAW verb decrypts or
 *  signs with any tenant's shared key, without a PIN (issue #19).  So the
 *  kernel's peer credentials must be the broker's user or root
 *  (ZMQ_IPC_FILTER_UID, checked at accept: no window), and the socket file
 *  is chmod 0600 after bind (whatever the umask).  0, or -1 with an E:
 *  line naming party/control.  */
static int
s_control_bind (party_t *self)
{
    const char *path = self->control_endpoint + 6;          /* "ipc://" */
    int uids [2] = { (int) geteuid (), 0 };
    char why [512];
    if (cs_ipc_prepare (path, why, sizeof why)) {
        zsys_error ("party/control: %s", why);
        return -1;
    }
    for (int i = 0; i < (uids [0] ? 2 : 1); i++)
        if (zmq_setsockopt (self->control, ZMQ_IPC_FILTER_UID, &uids [i], sizeof uids [i])) {
            zsys_error ("party/control: cannot limit %s to this user (ZMQ_IPC_FILTER_UID): %s",
                        self->control_endpoint, zmq_strerror (errno));
            return -1;
        }
    if (zmq_bind (self->control, self->control_endpoint)) {
        zsys_error ("party/control: cannot bind %s: %s", self->control_endpoint, zmq_strerror (errno));
        return -1;
    }
    if (chmod (path, 0600)) {
        zsys_error ("party/control: cannot chmod 600 %s: %s", path, strerror (errno));
        return -1;
    }
    return 0;
}

static int
s_sockets (party_t *self)
{
    int zero = 0, one = 1, server = 1, ivl = 1000, ttl = 3000, send_wait = S_SEND_WAIT_MS;
    if (!(self->ctx = zmq_ctx_new ()) || !(self->zap = zmq_socket (self->ctx, ZMQ_REP))
    ||  zmq_bind (self->zap, "inproc://zeromq.zap.01"))
        return -1;
    self->router = zmq_socket (self->ctx, ZMQ_ROUTER);
    zmq_setsockopt (self->router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt (self->router, ZMQ_CURVE_SERVER, &server, sizeof server);
    zmq_setsockopt (self->router, ZMQ_CURVE_SECRETKEY, zcert_secret_key (self->cert), 32);
    zmq_setsockopt (self->router, ZMQ_ZAP_DOMAIN, "party", 5);
    if (zmq_bind (self->router, self->endpoint)) {
        zsys_error ("party/endpoint: cannot bind %s: %s", self->endpoint, zmq_strerror (errno));
        return -1;
    }
    self->control = zmq_socket (self->ctx, ZMQ_ROUTER);
    zmq_setsockopt (self->control, ZMQ_LINGER, &zero, sizeof zero);
    if (s_control_bind (self))
        return -1;
    for (unsigned i = 1; i <= CS_SK_PARTIES; i++) {
        if (i == self->index)
            continue;
        uint8_t peer_key [32];
        zmq_z85_decode (peer_key, self->peer [i].public_key);
        void *dealer = self->peer [i].dealer = zmq_socket (self->ctx, ZMQ_DEALER);
        zmq_setsockopt (dealer, ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt (dealer, ZMQ_IMMEDIATE, &one, sizeof one);
        zmq_setsockopt (dealer, ZMQ_SNDTIMEO, &send_wait, sizeof send_wait);
        zmq_setsockopt (dealer, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl);
        zmq_setsockopt (dealer, ZMQ_HEARTBEAT_TIMEOUT, &ttl, sizeof ttl);
        zmq_setsockopt (dealer, ZMQ_CURVE_SERVERKEY, peer_key, 32);
        zmq_setsockopt (dealer, ZMQ_CURVE_PUBLICKEY, zcert_public_key (self->cert), 32);
        zmq_setsockopt (dealer, ZMQ_CURVE_SECRETKEY, zcert_secret_key (self->cert), 32);
        if (zmq_connect (dealer, self->peer [i].endpoint)) {
            zsys_error ("party/peers/%u/endpoint: cannot connect %s", i, self->peer [i].endpoint);
            return -1;
        }
    }
    return 0;
}

/*  One frame from a peer: the ROUTER gives [routing id, payload]; the
 *  sender is the User-Id our ZAP handler gave its key.  */
static void
s_peer_frame (party_t *self)
{
    zmq_msg_t id, body;
    zmq_msg_init (&id);
    zmq_msg_init (&body);
    if (zmq_msg_recv (&id, self->router, 0) < 0 || !zmq_msg_more (&id)
    ||  zmq_msg_recv (&body, self->router, 0) < 0) {
        zmq_msg_close (&id);
        zmq_msg_close (&body);
        return;
    }
    bool multi = zmq_msg_more (&body);     /* a frame in more than one part is malformed */
    for (int more = multi; more; ) {
        zmq_msg_t rest;
        zmq_msg_init (&rest);
        more = zmq_msg_recv (&rest, self->router, 0) >= 0 && zmq_msg_more (&rest);
        zmq_msg_close (&rest);
    }
    const char *user = zmq_msg_gets (&body, "User-Id");
    unsigned from = user ? (unsigned) atoi (user) : 0;
    Cs__Sk__Frame *frame = from && !multi ? cs__sk__frame__unpack (NULL, zmq_msg_size (&body), zmq_msg_data (&body)) : NULL;
    if (!frame || frame->version != CS_SK_PROTOCOL_VERSION || frame->session.len != CS_SK_SESSION_LEN)
        zsys_warning ("party: refused a malformed frame from party %u (%zu bytes)", from, zmq_msg_size (&body));
    else
    if (frame->kind == CS__SK__FRAME_KIND__SIGN || frame->kind == CS__SK__FRAME_KIND__PARTIAL)
        party_sign_frame (self, from, frame);
    else
        party_gen_frame (self, from, frame);
    if (frame)
        cs__sk__frame__free_unpacked (frame, NULL);
    OPENSSL_cleanse (zmq_msg_data (&body), zmq_msg_size (&body));
    zmq_msg_close (&id);
    zmq_msg_close (&body);
}

/*  One admin request: [id, empty, verb, args...] from a REQ socket.  */
static void
s_control (party_t *self)
{
    char *args [8] = { NULL };
    size_t n = 0;
    zmq_msg_t id;
    zmq_msg_init (&id);
    zmq_msg_recv (&id, self->control, 0);
    int more = zmq_msg_more (&id);
    while (more) {
        zmq_msg_t part;
        zmq_msg_init (&part);
        if (zmq_msg_recv (&part, self->control, 0) < 0)
            break;
        more = zmq_msg_more (&part);
        if (n < 8 && (n > 0 || zmq_msg_size (&part) > 0 || args [0]))
            args [n++] = strndup (zmq_msg_data (&part), zmq_msg_size (&part));
        zmq_msg_close (&part);
    }
    if (n == 0)
        party_reply (self, zmq_msg_data (&id), zmq_msg_size (&id), "ERR", "CKR_ARGUMENTS_BAD", "empty request", NULL);
    else
    if (streq (args [0], "GENERATE"))
        party_gen_control (self, zmq_msg_data (&id), zmq_msg_size (&id), args, n);
    else
    if (streq (args [0], "BOARDS")) {       /* the frontend's board lane (party_net.c) */
        if (party_board_hello (self, zmq_msg_data (&id), zmq_msg_size (&id), args, n) == 0)
            party_sign_lane_up (self);
    }
    else
    if (streq (args [0], "BOARD")) {        /* a partial result back from a board */
        if (self->board_lane && self->board_lane_len == zmq_msg_size (&id)
        &&  memcmp (self->board_lane, zmq_msg_data (&id), self->board_lane_len) == 0)
            party_sign_board (self, args, n);
        else
            zsys_warning ("party: refused a BOARD answer from another than the frontend's board lane");
    }
    else
        party_sign_control (self, zmq_msg_data (&id), zmq_msg_size (&id), args, n);
    for (size_t i = 0; i < n; i++) {
        OPENSSL_cleanse (args [i], strlen (args [i]));
        free (args [i]);
    }
    zmq_msg_close (&id);
}

static void *
s_thread (void *arg)
{
    party_t *self = arg;
    zmq_pollitem_t items [] = {
        { self->zap, 0, ZMQ_POLLIN, 0 }, { self->router, 0, ZMQ_POLLIN, 0 },
        { self->control, 0, ZMQ_POLLIN, 0 }
    };
    while (!self->stop) {
        if (zmq_poll (items, 3, S_POLL_MS) < 0 && errno != EINTR)
            break;
        if (items [0].revents & ZMQ_POLLIN)
            s_zap (self);
        if (items [1].revents & ZMQ_POLLIN)
            s_peer_frame (self);
        if (items [2].revents & ZMQ_POLLIN)
            s_control (self);
        party_gen_tick (self);
        party_sign_tick (self);
    }
    party_gen_drop (self, "the broker stops", true);
    party_sign_drop (self, "the broker stops");
    return NULL;
}

party_t *
party_new (const broker_config_t *config, keystore_t *ks)
{
    party_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->config = config;
    if (s_config (self) || !(self->ks = keystore_open_again (ks)) || s_sockets (self)
    ||  pthread_create (&self->thread, NULL, s_thread, self)) {
        self->thread = 0;
        party_destroy (&self);
        return NULL;
    }
    zsys_info ("party %u of 3 on %s (control %s)", self->index, self->endpoint, self->control_endpoint);
    return self;
}

void
party_destroy (party_t **self_p)
{
    party_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    if (self->thread) {
        self->stop = 1;
        pthread_join (self->thread, NULL);
    }
    void *sockets [] = { self->router, self->control, self->zap, self->peer [1].dealer,
                         self->peer [2].dealer, self->peer [3].dealer };
    for (size_t i = 0; i < sizeof sockets / sizeof sockets [0]; i++)
        if (sockets [i])
            zmq_close (sockets [i]);
    if (self->ctx)
        zmq_ctx_term (self->ctx);
    for (size_t i = 0; i < self->n_pending; i++) {
        OPENSSL_cleanse (self->pending [i].data, self->pending [i].len);
        free (self->pending [i].data);
    }
    for (unsigned i = 1; i <= CS_SK_PARTIES; i++)
        free (self->peer [i].endpoint);
    if (self->control_endpoint && strncmp (self->control_endpoint, "ipc://", 6) == 0)
        unlink (self->control_endpoint + 6);
    free (self->endpoint);
    free (self->control_endpoint);
    zcert_destroy (&self->cert);
    free (self->board_lane);
    keystore_destroy (&self->ks);
    free (self);
    *self_p = NULL;
}
