/*  test_sim_card.c — the sim board's card model (shim-drivers/sim/sim_card.c)
 *  in virtual time, without sleeping: the parameters a config resolves to
 *  (presets, per-kind tables, cube scaling, overrides, refusals), the queue
 *  (N coprocessors, the interface's rated throughput, jitter), and the
 *  plateaus of the paper's Table 1 (Berson et al. §5.1) reproduced within 5%
 *  by closed-loop clients of the axl200 and nfast300 presets.
 */
#include <check.h>
#include <math.h>
#include "sim_card.h"
#include "test_run.h"

#define MS 1000000LL                    /* nanoseconds per millisecond */

/*  A board config node from "key = value" lines.  Caller destroys.  */
static zconfig_t *
s_config (const char *const *pairs)
{
    zconfig_t *config = zconfig_new ("board", NULL);
    for (size_t i = 0; pairs && pairs [i]; i += 2)
        zconfig_put (config, pairs [i], pairs [i + 1]);
    return config;
}

/*  Resolves pairs for an RSA key of `bits`; asserts success.  */
static sim_card_params_t
s_resolve (const char *const *pairs, CK_KEY_TYPE type, unsigned long bits)
{
    zconfig_t *config = s_config (pairs);
    sim_card_params_t params;
    char err [256] = "";
    ck_assert_msg (sim_card_params_resolve (config, type, bits, &params, err, sizeof err) == 0,
                   "%s", err);
    zconfig_destroy (&config);
    return params;
}

/*  True when pairs are refused, with a message that names `word`.  */
static bool
s_refused (const char *const *pairs, unsigned long bits, const char *word)
{
    zconfig_t *config = s_config (pairs);
    sim_card_params_t params;
    char err [256] = "";
    int rc = sim_card_params_resolve (config, CKK_RSA, bits, &params, err, sizeof err);
    zconfig_destroy (&config);
    return rc == -1 && strstr (err, word) != NULL;
}

/*  A card of n coprocessors, latency ms, rated throughput rate (0 = none).  */
static sim_card_t *
s_card (long n, double ms, double rate, double jitter)
{
    sim_card_params_t params = { .coprocessors = n, .latency_ms = ms, .max_rate = rate,
                                 .jitter_pct = jitter };
    sim_card_t *card = sim_card_new (&params);
    ck_assert_ptr_nonnull (card);
    return card;
}

static int
s_cmp (const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
    return (x > y) - (x < y);
}

START_TEST (test_coprocessors_bound_concurrency)
{
    //  8 operations of 50 ms arrive together at a card of 2 coprocessors:
    //  they complete two by two, the last after 4 x 50 ms.
    sim_card_t *card = s_card (2, 50, 0, 0);
    int64_t done [8];
    for (int i = 0; i < 8; i++)
        done [i] = sim_card_reserve (card, 1000 * MS, 0);
    qsort (done, 8, sizeof done [0], s_cmp);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq (done [i], 1000 * MS + (i / 2 + 1) * 50 * MS);
    //  Idle again: one operation alone takes exactly its latency.
    ck_assert_int_eq (sim_card_reserve (card, 5000 * MS, 0), 5050 * MS);
    sim_card_destroy (&card);
    ck_assert_ptr_null (card);
    sim_card_destroy (&card);
}
END_TEST

START_TEST (test_interface_rate)
{
    //  100 ops/s through the interface (10 ms each, inside the 50 ms latency),
    //  coprocessors to spare: 10 simultaneous operations leave 10 ms apart.
    sim_card_t *card = s_card (100, 50, 100, 0);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq (sim_card_reserve (card, 0, 0), (10 * (i + 1) + 40) * MS);
    //  A lone operation later still takes exactly its latency.
    ck_assert_int_eq (sim_card_reserve (card, 1000 * MS, 0), 1050 * MS);
    sim_card_destroy (&card);
    //  An interface slower than the latency: the operation takes the
    //  interface time only (the coprocessor part is never negative).
    card = s_card (1, 5, 10, 0);
    ck_assert_int_eq (sim_card_reserve (card, 0, 0), 5 * MS);
    ck_assert_int_eq (sim_card_reserve (card, 0, 0), 10 * MS);
    sim_card_destroy (&card);
}
END_TEST

START_TEST (test_jitter)
{
    sim_card_t *card = s_card (1, 100, 0, 20);
    ck_assert_int_eq (sim_card_reserve (card, 0, -1), 80 * MS);
    ck_assert_int_eq (sim_card_reserve (card, 1000 * MS, 1), 1120 * MS);
    ck_assert_int_eq (sim_card_reserve (card, 2000 * MS, 0), 2100 * MS);
    ck_assert_int_eq (sim_card_reserve (card, 3000 * MS, 7), 3120 * MS);     //  clamped to 1
    sim_card_destroy (&card);
}
END_TEST

START_TEST (test_presets)
{
    const char *axl [] = { "preset", "axl200", NULL };
    sim_card_params_t p = s_resolve (axl, CKK_RSA, 1024);
    ck_assert_str_eq (p.preset, "axl200");
    ck_assert_int_eq (p.coprocessors, 26);
    ck_assert_str_eq (p.kind, "modexp");
    ck_assert_double_eq_tol (p.latency_ms, 92.19, 1e-9);
    ck_assert_double_eq_tol (p.max_rate, 265, 1e-9);
    //  The AXL200 has no CRT figures: CRT requests run the private exponent.
    const char *axl_crt [] = { "preset", "axl200", "crt", "true", NULL };
    p = s_resolve (axl_crt, CKK_RSA, 1024);
    ck_assert (p.crt);
    ck_assert_str_eq (p.kind, "modexp");
    ck_assert_double_eq_tol (p.latency_ms, 92.19, 1e-9);

    const char *nfast [] = { "preset", "nfast300", NULL };
    p = s_resolve (nfast, CKK_RSA, 1024);
    ck_assert_int_eq (p.coprocessors, 10);
    ck_assert_double_eq_tol (p.latency_ms, 85.68, 1e-9);
    ck_assert_double_eq_tol (p.max_rate, 93, 1e-9);
    const char *nfast_crt [] = { "preset", "nfast300", "crt", "yes", NULL };
    p = s_resolve (nfast_crt, CKK_RSA, 1024);
    ck_assert_str_eq (p.kind, "crt");
    ck_assert_double_eq_tol (p.latency_ms, 27.03, 1e-9);
    ck_assert_double_eq_tol (p.max_rate, 300, 1e-9);
    //  Other sizes scale by the cube of the size ratio.
    p = s_resolve (nfast_crt, CKK_RSA, 2048);
    ck_assert_double_eq_tol (p.latency_ms, 27.03 * 8, 1e-9);
    ck_assert_double_eq_tol (p.max_rate, 300.0 / 8, 1e-9);
    p = s_resolve (axl, CKK_RSA, 512);
    ck_assert_double_eq_tol (p.latency_ms, 92.19 / 8, 1e-9);
    ck_assert_double_eq_tol (p.max_rate, 265.0 * 8, 1e-9);
}
END_TEST

START_TEST (test_overrides_and_defaults)
{
    //  Explicit keys win over the preset's.
    const char *mine [] = { "preset", "axl200", "coprocessors", "4", "latency-modexp-1024-ms", "10",
                            "max-rate-modexp-1024", "1000", "jitter-pct", "5", NULL };
    sim_card_params_t p = s_resolve (mine, CKK_RSA, 1024);
    ck_assert_int_eq (p.coprocessors, 4);
    ck_assert_double_eq_tol (p.latency_ms, 10, 1e-9);
    ck_assert_double_eq_tol (p.max_rate, 1000, 1e-9);
    ck_assert_double_eq_tol (p.jitter_pct, 5, 1e-9);
    //  latency-ms replaces every latency table (the rate stays).
    const char *fixed [] = { "preset", "nfast300", "crt", "true", "latency-ms", "2.5", NULL };
    p = s_resolve (fixed, CKK_RSA, 4096);
    ck_assert_double_eq_tol (p.latency_ms, 2.5, 1e-9);
    ck_assert_double_eq_tol (p.max_rate, 300.0 / 64, 1e-9);
    //  Without preset or coprocessors: as parallel as the board's threads
    //  (the driver's behaviour before it had a card), else one.
    const char *threads [] = { "threads", "8", "latency-ms", "4", NULL };
    p = s_resolve (threads, CKK_RSA, 2048);
    ck_assert_int_eq (p.coprocessors, 8);
    ck_assert_double_eq_tol (p.latency_ms, 4, 1e-9);
    ck_assert_double_eq_tol (p.max_rate, 0, 1e-9);
    p = s_resolve (NULL, CKK_RSA, 2048);
    ck_assert_int_eq (p.coprocessors, 1);
    ck_assert_double_eq_tol (p.latency_ms, 0, 1e-9);
    ck_assert (!p.crt);
    //  A preset's coprocessors are not replaced by threads.
    const char *preset_threads [] = { "preset", "axl200", "threads", "30", NULL };
    ck_assert_int_eq (s_resolve (preset_threads, CKK_RSA, 1024).coprocessors, 26);
    //  EC keys: latency-ms only.
    const char *nfast [] = { "preset", "nfast300", NULL };
    p = s_resolve (nfast, CKK_EC, 256);
    ck_assert_str_eq (p.kind, "other");
    ck_assert_double_eq_tol (p.latency_ms, 0, 1e-9);
    ck_assert_double_eq_tol (p.max_rate, 0, 1e-9);
    const char *ec [] = { "preset", "nfast300", "latency-ms", "3", NULL };
    ck_assert_double_eq_tol (s_resolve (ec, CKK_EC, 256).latency_ms, 3, 1e-9);
}
END_TEST

START_TEST (test_nearest_size)
{
    //  The nearest size by ratio, scaled by the cube.
    const char *two [] = { "latency-modexp-1024-ms", "10", "latency-modexp-4096-ms", "500",
                           "latency-crt-2048-ms", "40", "crt", "false", NULL };
    ck_assert_double_eq_tol (s_resolve (two, CKK_RSA, 3072).latency_ms, 500 * pow (0.75, 3), 1e-9);
    ck_assert_double_eq_tol (s_resolve (two, CKK_RSA, 1536).latency_ms, 10 * pow (1.5, 3), 1e-9);
    ck_assert_double_eq_tol (s_resolve (two, CKK_RSA, 4096).latency_ms, 500, 1e-9);
    const char *crt [] = { "latency-modexp-1024-ms", "10", "latency-crt-2048-ms", "40",
                           "crt", "1", NULL };
    sim_card_params_t p = s_resolve (crt, CKK_RSA, 1024);
    ck_assert_str_eq (p.kind, "crt");
    ck_assert_double_eq_tol (p.latency_ms, 5, 1e-9);
}
END_TEST

START_TEST (test_refusals)
{
    const char *preset [] = { "preset", "axl300", NULL };
    ck_assert (s_refused (preset, 1024, "unknown preset"));
    const char *zero [] = { "coprocessors", "0", NULL };
    ck_assert (s_refused (zero, 1024, "coprocessors"));
    const char *many [] = { "coprocessors", "4097", NULL };
    ck_assert (s_refused (many, 1024, "coprocessors"));
    const char *half [] = { "coprocessors", "2.5", NULL };
    ck_assert (s_refused (half, 1024, "coprocessors"));
    const char *jitter [] = { "jitter-pct", "101", NULL };
    ck_assert (s_refused (jitter, 1024, "jitter-pct"));
    const char *crt [] = { "crt", "maybe", NULL };
    ck_assert (s_refused (crt, 1024, "crt"));
    const char *negative [] = { "latency-ms", "-1", NULL };
    ck_assert (s_refused (negative, 1024, "latency-ms"));
    const char *no_ms [] = { "latency-modexp-1024", "5", NULL };
    ck_assert (s_refused (no_ms, 1024, "latency-modexp-1024"));
    const char *kind [] = { "latency-ecdsa-256-ms", "5", NULL };
    ck_assert (s_refused (kind, 1024, "latency-ecdsa-256-ms"));
    const char *rate_ms [] = { "max-rate-crt-1024-ms", "5", NULL };
    ck_assert (s_refused (rate_ms, 1024, "max-rate-crt-1024-ms"));
    const char *rate_zero [] = { "max-rate-crt-1024", "0", NULL };
    ck_assert (s_refused (rate_zero, 1024, "max-rate-crt-1024"));
    const char *text [] = { "latency-modexp-1024-ms", "fast", NULL };
    ck_assert (s_refused (text, 1024, "latency-modexp-1024-ms"));
    //  60 s at 1024 bits would be 480 s at 2048: over the limit.
    const char *slow [] = { "latency-modexp-1024-ms", "60000", NULL };
    ck_assert (s_refused (slow, 2048, "over"));
}
END_TEST

/*  Throughput (operations per second) of `threads` closed-loop clients, each
 *  sending its next operation when the previous one completes, on the card
 *  of config `pairs` with a 1024-bit RSA key, after `ops` operations (no host
 *  time: the card alone, as the paper's local microbenchmark).  */
static double
s_plateau (const char *const *pairs, int threads, int ops)
{
    sim_card_params_t params = s_resolve (pairs, CKK_RSA, 1024);
    sim_card_t *card = sim_card_new (&params);
    ck_assert_ptr_nonnull (card);
    int64_t next [64] = { 0 };
    ck_assert_int_le (threads, 64);
    int64_t last = 0;
    for (int op = 0; op < ops; op++) {
        int first = 0;                  //  the client that asks first
        for (int t = 1; t < threads; t++)
            if (next [t] < next [first])
                first = t;
        next [first] = sim_card_reserve (card, next [first], 0);
        last = next [first] > last ? next [first] : last;
    }
    sim_card_destroy (&card);
    return ops / ((double) last / 1e9);
}

/*  Table 1 of the paper: board, CRT, client threads, ops/s.  */
static const struct {
    const char *preset;
    bool crt;
    int threads;
    double paper;
} s_table1 [] = {
    { "axl200", false, 1, 10.85 },   { "axl200", false, 25, 265.98 },
    { "nfast300", false, 1, 11.67 }, { "nfast300", false, 10, 92.40 },
    { "nfast300", false, 30, 93.28 }, { "nfast300", false, 32, 93.30 },
    { "nfast300", true, 1, 37.00 },  { "nfast300", true, 10, 288.92 },
    { "nfast300", true, 30, 297.74 }, { "nfast300", true, 32, 299.97 },
};

START_TEST (test_table1_plateaus)
{
    const char *pairs [] = { "preset", s_table1 [_i].preset, "crt",
                             s_table1 [_i].crt ? "true" : "false", NULL };
    double rate = s_plateau (pairs, s_table1 [_i].threads, 3000);
    double paper = s_table1 [_i].paper;
    ck_assert_msg (fabs (rate - paper) <= 0.05 * paper, "%s%s, %d threads: %.2f ops/s, paper %.2f",
                   s_table1 [_i].preset, s_table1 [_i].crt ? " CRT" : "", s_table1 [_i].threads,
                   rate, paper);
}
END_TEST

START_TEST (test_plateau_is_n_over_latency)
{
    //  No rated throughput: the plateau is N / latency, reached at N clients.
    const char *pairs [] = { "coprocessors", "4", "latency-modexp-1024-ms", "20", NULL };
    ck_assert_double_eq_tol (s_plateau (pairs, 1, 400), 50, 1e-6);
    ck_assert_double_eq_tol (s_plateau (pairs, 4, 400), 200, 1e-6);
    ck_assert_double_eq_tol (s_plateau (pairs, 16, 400), 200, 1e-6);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("sim_card");
    TCase *tc = tcase_create ("card");
    tcase_add_test (tc, test_coprocessors_bound_concurrency);
    tcase_add_test (tc, test_interface_rate);
    tcase_add_test (tc, test_jitter);
    tcase_add_test (tc, test_presets);
    tcase_add_test (tc, test_overrides_and_defaults);
    tcase_add_test (tc, test_nearest_size);
    tcase_add_test (tc, test_refusals);
    tcase_add_loop_test (tc, test_table1_plateaus, 0, sizeof s_table1 / sizeof s_table1 [0]);
    tcase_add_test (tc, test_plateau_is_n_over_latency);
    suite_add_tcase (suite, tc);
    return tr_run (suite);
}
