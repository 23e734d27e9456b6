/*  party_net.c — what generation (party_gen.c) and signing (party_sign.c)
 *  use of the service (party_int.h): sending a frame to a peer, answering
 *  the admin on the control socket, the sessions seen (replays), and the
 *  tenants that opted in (keys/shared).  Below party.c, which runs the
 *  loop that calls them.
 */
#include <stdarg.h>
#include <czmq.h>
#include <openssl/crypto.h>
#include "party_int.h"

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
