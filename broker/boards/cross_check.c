/*  cross_check.c — run a fraction of the jobs on two boards and compare
 *  (cross_check.h).  */
#include <czmq.h>
#include <openssl/crypto.h>
#include "cross_check.h"

/*  One result kept by a pair.  */
typedef struct {
    bool set;
    CK_RV rv;
    unsigned char *out;             /* malloc'd, wiped when freed */
    size_t out_len;
    size_t board;
} s_result_t;

/*  A job run on two boards (and maybe a third).  */
typedef struct {
    work_item_t *primary;           /* the request's own item (a slot's) */
    work_item_t *twin;              /* ours, NULL once back */
    bool primary_waits;             /* the primary is back and parked */
    bool third;                     /* the primary is on its third board */
    s_result_t twin_result;
    s_result_t first;               /* the primary's first result (third run only) */
} s_pair_t;

struct _cross_check_t {
    int percent;
    board_t **boards;
    size_t n_boards;
    board_watch_t *watch;
    metrics_t *metrics;
    verify_t *verify;
    uint64_t seen;                  /* items considered: the sample */
};

cross_verdict_t
cross_check_verdict (bool randomised, bool equal, verify_outcome_t va, verify_outcome_t vb)
{
    if (!randomised && equal)
        return CROSS_MATCH;
    if (va == VERIFY_OK && vb == VERIFY_OK)
        return randomised ? CROSS_MATCH : CROSS_UNDECIDED;  /* deterministic: cannot both be right */
    if (va == VERIFY_OK && vb == VERIFY_WRONG)
        return CROSS_A;
    if (vb == VERIFY_OK && va == VERIFY_WRONG)
        return CROSS_B;
    if (randomised && va != VERIFY_WRONG && vb != VERIFY_WRONG)
        return CROSS_SKIP;          /* cannot be checked, nothing says they differ */
    if (!randomised && va == VERIFY_OK)
        return CROSS_A;             /* B could not be checked, A is right */
    if (!randomised && vb == VERIFY_OK)
        return CROSS_B;
    return CROSS_UNDECIDED;
}

bool
cross_check_randomised (CK_MECHANISM_TYPE mechanism)
{
    return mechanism == CKM_RSA_PKCS_PSS || mechanism == CKM_ECDSA;
}

cross_check_t *
cross_check_new (int percent, board_t **boards, size_t n_boards, board_watch_t *watch, metrics_t *metrics)
{
    cross_check_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    *self = (cross_check_t) { percent, boards, n_boards, watch, metrics, verify_new (), 0 };
    if (!self->verify)
        cross_check_destroy (&self);
    return self;
}

void
cross_check_destroy (cross_check_t **self_p)
{
    cross_check_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    verify_destroy (&self->verify);
    free (self);
    *self_p = NULL;
}

static void
s_result_clear (s_result_t *result)
{
    if (result->out) {
        OPENSSL_cleanse (result->out, result->out_len);
        free (result->out);
    }
    memset (result, 0, sizeof *result);
}

/*  Moves item's result into `result`.  */
static void
s_result_take (s_result_t *result, work_item_t *item)
{
    s_result_clear (result);
    *result = (s_result_t) { true, item->rv, item->out, item->out_len, item->board };
    item->out = NULL;
    item->out_len = 0;
}

/*  The item's mechanism as drivers see it (no OAEP label: not needed to
 *  verify), or false for other kinds.  */
static bool
s_mech (const work_item_t *item, cs_drv_mech_t *mech)
{
    memset (mech, 0, sizeof *mech);
    if (item->kind == WORK_DERIVE) {
        mech->type = CKM_ECDH1_DERIVE;
        return true;
    }
    if (item->kind != WORK_SIGN && item->kind != WORK_DECRYPT)
        return false;
    *mech = item->mech;
    mech->label = NULL;
    mech->label_len = 0;
    return true;
}

/*  True when item's mechanism is one the cross-check compares.  */
static bool
s_comparable (const work_item_t *item)
{
    cs_drv_mech_t mech;
    if (!s_mech (item, &mech))
        return false;
    if (item->kind != WORK_SIGN)
        return true;                /* decryptions and ECDH: deterministic */
    return mech.type == CKM_RSA_PKCS || mech.type == CKM_RSA_X_509 || mech.type == CKM_EDDSA
        || cross_check_randomised (mech.type);
}

work_item_t *
cross_check_twin (cross_check_t *self, work_item_t *item)
{
    if (!self || self->percent <= 0 || !item->request || item->cross || item->tried || !s_comparable (item))
        return NULL;
    if (self->percent < 100 && (self->seen++ % 100) >= (uint64_t) self->percent)
        return NULL;
    s_pair_t *pair = calloc (1, sizeof *pair);
    work_item_t *twin = malloc (sizeof *twin);
    if (!pair || !twin) {
        free (pair);
        free (twin);
        return NULL;
    }
    *twin = *item;
    if (item->key.id)
        twin->key.id = twin->id;
    if (item->key.ref)
        twin->key.ref = twin->ref;
    twin->material = NULL;          /* key.pkcs8 borrows the primary's: it waits for the twin */
    twin->material_len = 0;
    twin->cached = NULL;
    memset (&twin->generated, 0, sizeof twin->generated);
    twin->out = NULL;
    twin->out_len = 0;
    twin->rv = CKR_OK;
    twin->tried = UINT64_C (1) << item->board;
    twin->suspect = 0;
    twin->wrong = false;
    twin->service_ns = 0;
    twin->submitted_ns = metrics_now_ns ();
    pair->primary = item;
    pair->twin = twin;
    item->cross = pair;
    twin->cross = pair;
    return twin;
}

bool
cross_check_is_twin (const work_item_t *item)
{
    const s_pair_t *pair = item->cross;
    return pair && pair->twin == item;
}

/*  Ends a pair: the primary is answered as it is now.  */
static work_item_t *
s_pair_end (s_pair_t *pair)
{
    work_item_t *primary = pair->primary;
    primary->cross = NULL;
    s_result_clear (&pair->twin_result);
    s_result_clear (&pair->first);
    free (pair);
    return primary;
}

void
cross_check_unrun (cross_check_t *self, work_item_t *twin)
{
    s_pair_t *pair = twin->cross;
    metrics_cross_check (self->metrics, METRICS_CROSS_SKIPPED);
    pair->primary->cross = NULL;
    free (twin);
    free (pair);
}

/*  Verifies a result of the pair's job with the public key, policy or not.  */
static verify_outcome_t
s_verify (cross_check_t *self, const work_item_t *primary, const s_result_t *result)
{
    cs_drv_mech_t mech;
    if (!result->set || result->rv != CKR_OK || !s_mech (primary, &mech) || primary->kind == WORK_DERIVE
    ||  result->board >= self->n_boards)
        return VERIFY_SKIPPED;
    return verify_always (self->verify, self->boards [result->board], primary->kind == WORK_SIGN, &primary->key,
                          &mech, primary->in, primary->in_len, result->out, result->out_len);
}

static bool
s_equal (const s_result_t *a, const s_result_t *b)
{
    return a->out_len == b->out_len && CRYPTO_memcmp (a->out, b->out, a->out_len) == 0;
}

/*  Board `board` gave a wrong result of the pair's job: `how`.  */
static void
s_wrong (cross_check_t *self, const work_item_t *primary, size_t board, const char *how)
{
    char why [200];
    snprintf (why, sizeof why, "wrong result of job %zu (cross-check: %s)", primary->index, how);
    board_watch_wrong (self->watch, board, why);
}

/*  Releases `result` as the primary's answer.  */
static void
s_release (work_item_t *primary, s_result_t *result)
{
    primary->rv = result->rv;
    primary->out = result->out;
    primary->out_len = result->out_len;
    result->out = NULL;
    result->out_len = 0;
    result->set = false;
}

/*  Fails the primary: no result can be trusted.  */
static void
s_fail (work_item_t *primary, const char *why)
{
    zsys_warning ("job %zu: %s; failed with CKR_DEVICE_ERROR", primary->index, why);
    primary->rv = CKR_DEVICE_ERROR;
}

/*  The third board's result (in the primary) against the first two.  */
static work_item_t *
s_decide_third (cross_check_t *self, s_pair_t *pair)
{
    work_item_t *primary = pair->primary;
    s_result_t c = { false, 0, NULL, 0, 0 };
    s_result_take (&c, primary);
    c.set = true;
    if (c.rv != CKR_OK) {
        s_fail (primary, "cross-check: two boards disagreed and no third board ran it");
        s_result_clear (&c);
        return s_pair_end (pair);
    }
    verify_outcome_t vc = s_verify (self, primary, &c);
    bool randomised = primary->kind == WORK_SIGN && cross_check_randomised (primary->mech.type);
    bool with_a = !randomised && pair->first.set && pair->first.rv == CKR_OK && s_equal (&c, &pair->first);
    bool with_b = !randomised && pair->twin_result.set && pair->twin_result.rv == CKR_OK
               && s_equal (&c, &pair->twin_result);
    if (vc == VERIFY_WRONG || (vc != VERIFY_OK && !with_a && !with_b)) {
        if (vc == VERIFY_WRONG)
            s_wrong (self, primary, c.board, "failed verification on the third board");
        s_fail (primary, "cross-check: three boards disagreed");
        s_result_clear (&c);
        return s_pair_end (pair);
    }
    if (with_a && !with_b)
        s_wrong (self, primary, pair->twin_result.board, "a third board agreed with the other");
    if (with_b && !with_a)
        s_wrong (self, primary, pair->first.board, "a third board agreed with the other");
    s_release (primary, &c);
    return s_pair_end (pair);
}

/*  Both results are in: compare, blame, release or ask for a third run.  */
static work_item_t *
s_decide (cross_check_t *self, s_pair_t *pair, bool *rerun_p)
{
    work_item_t *primary = pair->primary;
    if (pair->third)
        return s_decide_third (self, pair);
    s_result_t *b = &pair->twin_result;
    if (primary->rv != CKR_OK || !b->set || b->rv != CKR_OK || b->board == primary->board) {
        metrics_cross_check (self->metrics, METRICS_CROSS_SKIPPED);
        return s_pair_end (pair);
    }
    s_result_t a = { true, CKR_OK, primary->out, primary->out_len, primary->board };
    bool randomised = primary->kind == WORK_SIGN && cross_check_randomised (primary->mech.type);
    bool equal = s_equal (&a, b);
    verify_outcome_t va = VERIFY_SKIPPED, vb = VERIFY_SKIPPED;
    if (randomised || !equal) {
        va = s_verify (self, primary, &a);
        vb = s_verify (self, primary, b);
    }
    cross_verdict_t verdict = cross_check_verdict (randomised, equal, va, vb);
    if (verdict == CROSS_SKIP || verdict == CROSS_MATCH) {
        metrics_cross_check (self->metrics, verdict == CROSS_MATCH ? METRICS_CROSS_MATCH : METRICS_CROSS_SKIPPED);
        return s_pair_end (pair);
    }
    metrics_cross_check (self->metrics, METRICS_CROSS_MISMATCH);
    if (verdict == CROSS_A) {
        s_wrong (self, primary, b->board, "differs from another board's, failed verification");
        return s_pair_end (pair);
    }
    if (verdict == CROSS_B) {
        s_wrong (self, primary, a.board, "differs from another board's, failed verification");
        s_result_clear (&a);        /* the primary's own out */
        primary->out = NULL;
        primary->out_len = 0;
        s_release (primary, b);
        return s_pair_end (pair);
    }
    /*  Undecided: a result that failed verification is its board's fault;
        a third board (neither of the two) decides.  */
    if (va == VERIFY_WRONG)
        s_wrong (self, primary, a.board, "failed verification");
    if (vb == VERIFY_WRONG)
        s_wrong (self, primary, b->board, "failed verification");
    s_result_take (&pair->first, primary);
    primary->tried |= UINT64_C (1) << b->board;
    pair->third = true;
    *rerun_p = true;
    zsys_info ("job %zu: cross-check: boards %s and %s disagree; running it on a third board", primary->index,
               self->boards [pair->first.board]->name, self->boards [b->board]->name);
    return primary;
}

work_item_t *
cross_check_back (cross_check_t *self, work_item_t *item, bool *rerun_p)
{
    s_pair_t *pair = item->cross;
    *rerun_p = false;
    if (!pair)
        return item;
    if (pair->twin == item) {
        if (item->rv != CKR_OK) {
            if (item->out) {
                OPENSSL_cleanse (item->out, item->out_len);
                free (item->out);
            }
            item->out = NULL;
            item->out_len = 0;
        }
        s_result_take (&pair->twin_result, item);
        pair->twin = NULL;
        free (item);
        if (!pair->primary_waits)
            return NULL;
        pair->primary_waits = false;
        return s_decide (self, pair, rerun_p);
    }
    if (pair->twin) {
        pair->primary_waits = true;     /* the twin is still out */
        return NULL;
    }
    return s_decide (self, pair, rerun_p);
}
