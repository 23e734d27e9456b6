/*  cs-party-probe — plays party 3 of a shared-key deployment against party 1
 *  (tests/integration/shared-parties.sh; docs/SHARED-KEYS.md "Over the
 *  network"): with party 3's own key pair it binds party 3's endpoint and
 *  connects to party 1, then sends a frame that does not decode, a frame of
 *  another version, a SIGN of the key REF, the same SIGN again (a replay),
 *  and a ROUND of that closed session (out of order).  Party 1 must answer
 *  the first SIGN with a partial result of K bytes and the replay with a
 *  refusal.  Prints what it saw; exit 0 when both answers are as expected.
 *
 *  usage: cs-party-probe P1-ENDPOINT P1-PUBLIC-KEY P3-ENDPOINT P3-CERT-SECRET TENANT REF K
 *         cs-party-probe --stranger P1-ENDPOINT P1-PUBLIC-KEY
 *  The second form connects with a fresh key pair that no party pinned and
 *  sends a SIGN: exit 0 when the connection is refused (no answer can come
 *  back; party 1 logs the refused key).
 */
#include <czmq.h>
#include "sharedkeys/sharedkeys.pb-c.h"

static void
s_send (zsock_t *dealer, const Cs__Sk__Frame *frame)
{
    size_t len = cs__sk__frame__get_packed_size (frame);
    zframe_t *out = zframe_new (NULL, len);
    cs__sk__frame__pack (frame, zframe_data (out));
    zframe_send (&out, dealer, 0);
}

/*  The next frame party 1 sends to "party 3", or NULL after timeout_ms.  */
static Cs__Sk__Frame *
s_recv (zsock_t *router, int timeout_ms)
{
    zsock_set_rcvtimeo (router, timeout_ms);
    zmsg_t *msg = zmsg_recv (router);
    if (!msg)
        return NULL;
    zframe_t *id = zmsg_pop (msg), *body = zmsg_pop (msg);
    Cs__Sk__Frame *frame = body ? cs__sk__frame__unpack (NULL, zframe_size (body), zframe_data (body)) : NULL;
    zframe_destroy (&id);
    zframe_destroy (&body);
    zmsg_destroy (&msg);
    return frame;
}

/*  A connection with a key no party pinned: party 1's ZAP handler refuses
 *  the handshake, so nothing reaches it (it logs the key).  */
static int
s_stranger (const char *endpoint, const char *server_key)
{
    zcert_t *cert = zcert_new ();
    zsock_t *dealer = zsock_new (ZMQ_DEALER);
    zcert_apply (cert, dealer);
    zsock_set_curve_serverkey (dealer, server_key);
    zsock_set_sndtimeo (dealer, 3000);
    zsock_set_immediate (dealer, 1);
    zsock_connect (dealer, "%s", endpoint);
    int rc = zstr_send (dealer, "x");
    printf ("stranger: %s\n", rc ? "refused (never connected)" : "sent");
    printf ("stranger key: %s\n", zcert_public_txt (cert));
    zsock_destroy (&dealer);
    zcert_destroy (&cert);
    return rc ? 0 : 1;
}

int
main (int argc, char **argv)
{
    if (argc == 4 && streq (argv [1], "--stranger"))
        return s_stranger (argv [2], argv [3]);
    if (argc != 8) {
        fprintf (stderr, "usage: cs-party-probe P1-ENDPOINT P1-PUBLIC-KEY P3-ENDPOINT P3-CERT-SECRET TENANT REF K\n");
        return 2;
    }
    zcert_t *cert = zcert_load (argv [4]);
    size_t k = (size_t) atoi (argv [7]);
    if (!cert || k < 64 || k > 512)
        return 2;
    zsock_t *router = zsock_new (ZMQ_ROUTER), *dealer = zsock_new (ZMQ_DEALER);
    zsock_set_curve_server (router, 1);
    zcert_apply (cert, router);
    if (zsock_bind (router, "%s", argv [3]) < 0) {
        fprintf (stderr, "cannot bind %s\n", argv [3]);
        return 1;
    }
    zcert_apply (cert, dealer);
    zsock_set_curve_serverkey (dealer, argv [2]);
    zsock_connect (dealer, "%s", argv [1]);

    zframe_t *junk = zframe_new ("\x08\x01\x10\x07garbage", 11);
    zframe_send (&junk, dealer, 0);

    uint8_t session [16], *m = calloc (1, k);
    for (size_t i = 0; i < sizeof session; i++)
        session [i] = (uint8_t) (0xa0 + i);
    m [k - 1] = 2;
    Cs__Sk__Frame frame = CS__SK__FRAME__INIT;
    frame.version = 99;
    frame.kind = CS__SK__FRAME_KIND__SIGN;
    frame.session.data = session;
    frame.session.len = sizeof session;
    s_send (dealer, &frame);                /* another version */

    frame.version = 1;
    frame.tenant = argv [5];
    frame.ref = argv [6];
    frame.data.data = m;
    frame.data.len = k;
    frame.use = 1;                          /* a signature (cs_usage_use_t CS_USE_SIGN + 1) */
    frame.mechanism = 1;                    /* CKM_RSA_PKCS: the key's row must allow it */
    /*  Party 1 answers through its own connection to party 3's endpoint,
        which it makes again after the probe binds it: until then its answer
        is dropped (ZMQ_IMMEDIATE), so the first SIGN is retried with fresh
        sessions for up to 20 s.  */
    int status = 1;
    for (int attempt = 0; attempt < 100 && status; attempt++) {
        session [15] = (uint8_t) attempt;
        s_send (dealer, &frame);
        Cs__Sk__Frame *answer = s_recv (router, 200);
        if (answer && answer->kind == CS__SK__FRAME_KIND__PARTIAL && answer->data.len == k
        &&  memcmp (answer->session.data, session, 16) == 0)
            status = 0;
        if (answer)
            cs__sk__frame__free_unpacked (answer, NULL);
    }
    printf ("sign: %s\n", status ? "no partial result" : "partial result");
    s_send (dealer, &frame);                /* the same session again */
    Cs__Sk__Frame *answer = s_recv (router, 10000);
    bool refused = answer && answer->kind == CS__SK__FRAME_KIND__PARTIAL && answer->data.len == 0
                && answer->error && strstr (answer->error, "replayed");
    printf ("sign replayed: %s\n", !answer ? "no answer" : refused ? "refused (replay)" : "answered");
    if (!refused)
        status = 1;
    if (answer)
        cs__sk__frame__free_unpacked (answer, NULL);
    frame.kind = CS__SK__FRAME_KIND__ROUND;
    frame.data.len = 0;
    frame.round.data = (uint8_t *) "x";
    frame.round.len = 1;
    s_send (dealer, &frame);                /* a round of a closed session */
    zclock_sleep (300);                     /* let the frames leave before the sockets close */
    free (m);
    zsock_destroy (&dealer);
    zsock_destroy (&router);
    zcert_destroy (&cert);
    return status;
}
