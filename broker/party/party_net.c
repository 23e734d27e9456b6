/*  party_net.c — what generation (party_gen.c) and signing (party_sign.c)
 *  use of the service (party_int.h): sending a frame to a peer, answering
 *  the admin on the control socket, the frontend's board lane (a partial
 *  result's modexp out to this broker's boards), the sessions seen
 *  (replays), and the tenants that opted in (keys/shared).  Below party.c,
 *  which runs the loop that calls them.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <czmq.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include "cs_util.h"
#include "party_int.h"

static unsigned char s_token [PARTY_LANE_TOKEN_LEN];
static int s_token_rc = -1;
static pthread_once_t s_token_once = PTHREAD_ONCE_INIT;

static void
s_token_draw (void)
{
    s_token_rc = RAND_bytes (s_token, sizeof s_token) == 1 ? 0 : -1;
}

int
party_lane_token (unsigned char token [PARTY_LANE_TOKEN_LEN])
{
    pthread_once (&s_token_once, s_token_draw);
    if (s_token_rc == 0)
        memcpy (token, s_token, PARTY_LANE_TOKEN_LEN);
    return s_token_rc;
}

int
party_board_hello (party_t *self, const void *id, size_t id_len, char **args, size_t n)
{
    unsigned char token [PARTY_LANE_TOKEN_LEN], given [PARTY_LANE_TOKEN_LEN];
    if (n != 2 || party_lane_token (token) || cs_hex_decode (args [1], given, sizeof given) != (long) sizeof given
    ||  CRYPTO_memcmp (token, given, sizeof token) != 0) {
        zsys_warning ("party: refused a BOARDS hello on the control socket (not this broker's frontend)");
        return -1;
    }
    void *copy = malloc (id_len ? id_len : 1);
    if (!copy)
        return -1;
    memcpy (copy, id, id_len);
    free (self->board_lane);
    self->board_lane = copy;
    self->board_lane_len = id_len;
    return 0;
}

int
party_board_send (party_t *self, uint64_t tag, const char *tenant, const unsigned char *base,
                  const unsigned char *exp, size_t exp_len, const unsigned char *n, size_t k,
                  int deadline_ms)
{
    if (!self->board_lane)
        return -1;
    char tag_s [24], deadline_s [16];
    snprintf (tag_s, sizeof tag_s, "%" PRIu64, tag);
    snprintf (deadline_s, sizeof deadline_s, "%d", deadline_ms);
    struct { const void *data; size_t len; } part [] = {
        { self->board_lane, self->board_lane_len }, { "", 0 }, { "MODEXP", 6 }, { tag_s, strlen (tag_s) },
        { tenant, strlen (tenant) }, { base, k }, { exp, exp_len }, { n, k }, { deadline_s, strlen (deadline_s) }
    };
    size_t count = sizeof part / sizeof part [0];
    for (size_t i = 0; i < count; i++)
        if (zmq_send (self->control, part [i].data, part [i].len, ZMQ_DONTWAIT | (i + 1 < count ? ZMQ_SNDMORE : 0)) < 0)
            return -1;      /* a ROUTER drops what it cannot route: nothing half sent */
    return 0;
}

bool
party_shared_tenant (const broker_config_t *config, const char *tenant)
{
    char path [300];
    snprintf (path, sizeof path, "keys/shared/%s", tenant);
    zconfig_t *node = zconfig_locate (config->root, path);
    const char *value = node ? zconfig_value (node) : zconfig_get (config->root, "keys/shared", "");
    return value && streq (value, "3");
}

bool
party_tenant_allowed (party_t *self, const char *tenant)
{
    return party_shared_tenant (self->config, tenant);
}

bool
party_session_seen (party_t *self, const unsigned char *session)
{
    size_t n = self->n_seen < PARTY_SEEN ? self->n_seen : PARTY_SEEN;
    for (size_t i = 0; i < n; i++)
        if (memcmp (self->seen [i], session, CS_SK_SESSION_LEN) == 0)
            return true;
    return false;
}

bool
party_session_fresh (party_t *self, const unsigned char *session)
{
    if (party_session_seen (self, session))
        return false;
    memcpy (self->seen [self->n_seen++ % PARTY_SEEN], session, CS_SK_SESSION_LEN);
    return true;
}

int
party_send (party_t *self, unsigned to, const Cs__Sk__Frame *frame)
{
    if (to < 1 || to > CS_SK_PARTIES || to == self->index)
        return -1;
    size_t len = cs__sk__frame__get_packed_size (frame);
    unsigned char *buf = malloc (len ? len : 1);
    if (!buf)
        return -1;
    cs__sk__frame__pack (frame, buf);
    int rc = zmq_send (self->peer [to].dealer, buf, len, 0) < 0 ? -1 : 0;
    OPENSSL_cleanse (buf, len);
    free (buf);
    return rc;
}

void
party_reply (party_t *self, const void *id, size_t id_len, const char *first, ...)
{
    va_list args;
    va_start (args, first);
    zmq_send (self->control, id, id_len, ZMQ_SNDMORE);
    zmq_send (self->control, "", 0, ZMQ_SNDMORE);
    for (const char *s = first; s; ) {
        const char *next = va_arg (args, const char *);
        zmq_send (self->control, s, strlen (s), next ? ZMQ_SNDMORE : 0);
        s = next;
    }
    va_end (args);
}
