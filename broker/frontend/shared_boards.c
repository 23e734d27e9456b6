/*  shared_boards.c — the party's partial results on this broker's boards
 *  (issue #24, docs/SHARED-KEYS.md "Partial results on the boards"): the
 *  board lane is a DEALER to party/control that says BOARDS with this
 *  process's lane token; the party sends on it the raw modexp of each of
 *  its partial results m^(d_i) mod N (base, |d_i|, N), which runs as a
 *  work item on a board open to the tenant that runs modexp, and the result
 *  goes back to the party on the same lane.  The party's thread never
 *  waits for a board, and the reactor never computes a partial result.
 *
 *  Owns: the board lane; the party's modexp items (s_modexp_t, with the
 *  exponent share: wiped when back).
 *  May call: party.h (the endpoint, the lane token), inventory.c
 *  (fe_boards_that), dispatch.c (fe_submit), reply.c (fe_drained_check).  */
#include <openssl/crypto.h>
#include "party.h"
#include "frontend_int.h"

/*  A raw modexp of the party (one of its partial results) as a work item
 *  of this broker's boards; the item comes first, so its completion has
 *  the whole.  */
typedef struct {
    work_item_t item;
    char tag [24];                  /* the party's, sent back with the result */
    char tenant [256];              /* item.tenant points here */
    unsigned char *buf;             /* base, exponent (a share of d: a secret), modulus */
    size_t buf_len;
} s_modexp_t;

/*  Wipes and frees a party's modexp item.  */
static void
s_modexp_free (s_modexp_t *op)
{
    if (op->buf) {
        OPENSSL_cleanse (op->buf, op->buf_len);
        free (op->buf);
    }
    if (op->item.out) {
        OPENSSL_cleanse (op->item.out, op->item.out_len);
        free (op->item.out);
    }
    OPENSSL_cleanse (op, sizeof *op);
    free (op);
}

/*  Answers the party's MODEXP `tag` on the board lane: ["", "BOARD", tag,
 *  CKR name, hex of the result (len bytes) or ""].  */
static void
s_boards_answer (zsock_t *lane, const char *tag, CK_RV rv, const unsigned char *out, size_t len)
{
    char hex [2 * 2 * CS_WIRE_MAX_MODEXP_BYTES + 1] = "";
    if (rv == CKR_OK && len > 2 * CS_WIRE_MAX_MODEXP_BYTES)
        rv = CKR_DEVICE_ERROR;
    if (rv == CKR_OK)
        cs_hex_encode (out, len, hex);
    zmsg_t *msg = zmsg_new ();
    zmsg_addmem (msg, "", 0);
    zmsg_addstr (msg, "BOARD");
    zmsg_addstr (msg, tag);
    zmsg_addstr (msg, cs_rv_name (rv));
    zmsg_addstr (msg, hex);
    zmsg_send (&msg, lane);
}

/*  A party's modexp item is back for good (its completion, called by
 *  dispatch.c): the result goes to the party, the exponent is wiped.  */
static void
s_modexp_back (void *arg, work_item_t *item)
{
    frontend_t *self = arg;
    s_modexp_t *op = (s_modexp_t *) item;
    if (self->boards)
        s_boards_answer (self->boards, op->tag, item->rv, item->out, item->out_len);
    s_modexp_free (op);
    fe_drained_check (self);
}

/*  One request of the party on the board lane: ["", "MODEXP", tag,
 *  tenant, base, exponent, modulus, deadline-ms] (party_net.c
 *  party_board_send): a plain raw modexp work item on a board open to the
 *  tenant that runs modexp (fe_boards_that FE_CAN_MODEXP; the exponent is the party's
 *  share of d, so never a board of another tenant), answered by
 *  s_modexp_back; or at once CKR_MECHANISM_INVALID (no such board: the
 *  party computes it itself), CKR_DEVICE_ERROR (every one out of
 *  rotation), CKR_ARGUMENTS_BAD (malformed).  Every frame is wiped.  */
static int
s_on_boards (zloop_t *loop, zsock_t *reader, void *arg)
{
    (void) loop;
    frontend_t *self = arg;
    zmsg_t *msg = zmsg_recv (reader);
    zframe_t *part [8] = { NULL };
    size_t n = 0;
    for (zframe_t *f = msg ? zmsg_first (msg) : NULL; f && n < 8; f = zmsg_next (msg))
        part [n++] = f;
    s_modexp_t *op = NULL;
    CK_RV rv = CKR_ARGUMENTS_BAD;
    char tag [24] = "0";
    if (n == 8 && zframe_streq (part [1], "MODEXP") && zframe_size (part [2]) < sizeof tag
    &&  zframe_size (part [3]) < sizeof op->tenant && (op = calloc (1, sizeof *op))) {
        memcpy (tag, zframe_data (part [2]), zframe_size (part [2]));
        tag [zframe_size (part [2])] = 0;
        snprintf (op->tag, sizeof op->tag, "%s", tag);
        memcpy (op->tenant, zframe_data (part [3]), zframe_size (part [3]));
        char deadline [16] = "";
        memcpy (deadline, zframe_data (part [7]), zframe_size (part [7]) < 15 ? zframe_size (part [7]) : 15);
        size_t lens [3] = { zframe_size (part [4]), zframe_size (part [5]), zframe_size (part [6]) };
        op->buf_len = lens [0] + lens [1] + lens [2];
        work_item_t *item = &op->item;
        item->boards = fe_boards_that (self, FE_CAN_MODEXP, 0, 0, op->tenant);
        rv = !item->boards ? CKR_MECHANISM_INVALID
           : !lens [0] || !lens [2] || lens [2] > CS_WIRE_MAX_MODEXP_BYTES || lens [0] > lens [2] || lens [1] > lens [2]
           ? CKR_ARGUMENTS_BAD : (op->buf = malloc (op->buf_len)) ? CKR_OK : CKR_HOST_MEMORY;
        if (rv == CKR_OK) {
            unsigned char *at = op->buf;
            const unsigned char **to [3] = { &item->modexp.base, &item->modexp.exponent, &item->modexp.modulus };
            for (int i = 0; i < 3; at += lens [i], i++) {
                memcpy (at, zframe_data (part [4 + i]), lens [i]);
                *to [i] = at;
            }
            item->modexp.base_len = lens [0];
            item->modexp.exponent_len = lens [1];
            item->modexp.modulus_len = lens [2];
            item->kind = WORK_MODEXP;
            item->bits = (unsigned) lens [2] * 8;
            item->tenant = op->tenant;
            item->deadline = cs_clock_ms () + atoi (deadline);
            item->done = s_modexp_back;
            item->done_arg = self;
            int submitted = fe_submit (self, item);
            rv = submitted == 0 ? CKR_OK : submitted == -2 ? CKR_DEVICE_ERROR : CKR_MECHANISM_INVALID;
        }
    }
    for (size_t i = 0; i < n; i++)
        OPENSSL_cleanse (zframe_data (part [i]), zframe_size (part [i]));
    zmsg_destroy (&msg);
    if (rv != CKR_OK) {
        s_boards_answer (self->boards, tag, rv, NULL, 0);
        if (op)
            s_modexp_free (op);
    }
    return 0;
}

int
fe_shared_boards_start (frontend_t *self)
{
    if (!party_configured (self->config))
        return 0;
    char *endpoint = party_control_endpoint (self->config);
    if (!endpoint)
        return -1;                  /* party_control_endpoint said why */
    unsigned char token [PARTY_LANE_TOKEN_LEN];
    char hex [2 * PARTY_LANE_TOKEN_LEN + 1];
    int rc = party_lane_token (token) == 0 && (self->boards = zsock_new (ZMQ_DEALER))
          && zsock_connect (self->boards, "%s", endpoint) == 0
          && zloop_reader (self->loop, self->boards, s_on_boards, self) == 0 ? 0 : -1;
    if (rc == 0) {
        cs_hex_encode (token, sizeof token, hex);
        zmsg_t *msg = zmsg_new ();
        zmsg_addmem (msg, "", 0);
        zmsg_addstr (msg, "BOARDS");
        zmsg_addstr (msg, hex);
        rc = zmsg_send (&msg, self->boards);
        OPENSSL_cleanse (hex, sizeof hex);
    }
    OPENSSL_cleanse (token, sizeof token);
    if (rc)
        zsys_error ("cannot connect the board lane to the party service's control socket %s", endpoint);
    free (endpoint);
    return rc;
}

void
fe_shared_boards_stop (frontend_t *self)
{
    if (self->boards && self->loop)
        zloop_reader_end (self->loop, self->boards);
    zsock_destroy (&self->boards);
}
