/*  cs_bench.c — cryptoserver-bench: N threads, each with its own session,
 *  sign messages through any PKCS#11 module (or one board through its shim
 *  driver, --driver-board) and (optionally) every signature is verified with
 *  OpenSSL.  Prints throughput and latency percentiles.  The paper's method
 *  (Berson et al. §5.1): the threads start on a barrier, sign blocks of
 *  --count operations each, and a block's clock stops when its last thread
 *  finishes; the rate is all operations over the sum of the block times.
 *  This file: the options and main; the run itself is cs_bench_sign.c.
 *  Subcommands: `tls` (cs_bench_tls.c), `paper` (cs_bench_paper.c),
 *  `shared-keygen` (cs_bench_shared.c), `idle-associations`
 *  (cs_bench_idle.c), `find-objects` (cs_bench_find.c) and
 *  `transport-floor` (cs_bench_floor.c) and `pq` (cs_bench_pq.c); --async N,
 *  one thread with N signatures in flight, is cs_bench_async.c.
 *
 *  Exit status: 0 all signatures made (and verified); 1 a sign or verify
 *  failed, or the module/token/key could not be used; 2 usage.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cs_bench.h"
#include "cs_wire.h"

static int
s_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-bench --module SO --token LABEL --pin PIN --key LABEL\n"
        "                          [--mechanism M] [--threads N]\n"
        "                          [--count M [--blocks B] | --seconds S] [--verify] [--csv]\n"
        "                          [--metrics URL]\n"
        "       cryptoserver-bench --driver-board CONF:NAME (--key LABEL | --key-file PEM) ...\n"
        "       cryptoserver-bench tls --connect HOST:PORT ...    (cryptoserver-bench tls --help)\n"
        "       cryptoserver-bench paper [--quick] [--out DIR]   (cryptoserver-bench paper --help)\n"
        "       cryptoserver-bench shared-keygen [--bits N] [--runs N] [--ablation]\n"
        "       cryptoserver-bench idle-associations --count N --dir DIR   (... --help)\n"
        "       cryptoserver-bench find-objects --module SO --token LABEL --pin PIN   (... --help)\n"
        "       cryptoserver-bench transport-floor [--count N] [--bytes B] [--csv]\n"
        "       cryptoserver-bench pq [--op ml-dsa-65-sign|ml-kem-768-decapsulate] [--threads N] [--count N]\n"
        "\n"
        "  --module SO      any PKCS#11 library (cryptoserver-pkcs11.so, libsofthsm2.so)\n"
        "  --token LABEL    the token's label\n"
        "  --pin PIN        the user PIN\n"
        "  --key LABEL      the private key's CKA_LABEL\n"
        "  --mechanism M    sha256-rsa-pkcs (default), rsa-pkcs-pss-sha256, ecdsa-sha256,\n"
        "                   ecdsa (CKM_ECDSA over a SHA-256 digest made by the bench)\n"
        "  --threads N      threads, each with its own session (default 1, max %d)\n"
        "  --count M        signatures per thread (and block; default 100)\n"
        "  --blocks B       B timed blocks of --count signatures per thread, each started\n"
        "                   on a barrier and ended by its last thread; ops/s is all the\n"
        "                   signatures over the sum of the block times (default 1, max %d)\n"
        "  --share          the block's threads x count signatures come from one counter:\n"
        "                   every thread works until the block is done, so no thread idles\n"
        "                   while slower ones finish their own count\n"
        "  --driver-board CONF:NAME  no module: board NAME of broker config CONF through\n"
        "                   its shim driver (the board's local speed); each thread opens\n"
        "                   a driver session.  --key LABEL names a resident key of the\n"
        "                   board, --key-file PEM an RSA private key used as key material\n"
        "  --seconds S      run for S seconds instead of a count\n"
        "  --verify         verify every signature with OpenSSL and the token's public key\n"
        "  --verify-key PEM verify every signature with OpenSSL and this public key (PEM),\n"
        "                   made outside the module under test (implies --verify)\n"
        "  --csv            print the result as CSV (header and one row)\n"
        "  --progress       a progress line on stderr every second, even when it is\n"
        "                   not a terminal (on a terminal it is always shown)\n"
        "  --stop-on-error  stop every thread at the first failed signature\n"
        "  --metrics URL    read the broker's process_cpu_seconds_total at URL (http:// only,\n"
        "                   e.g. $CRYPTOSERVER_METRICS_URL) before and after the run and\n"
        "                   print the broker's CPU time per operation\n"
        "  --beside LABEL   then the same run again with the key LABEL, reported after the\n"
        "                   first (e.g. a shared key beside an ordinary keystore key)\n"
        "  --async N        then one thread keeps N signatures in flight through the\n"
        "                   module's PKCS#11 3.2 asynchronous sessions (as many in total,\n"
        "                   or as long), reported after the threads with the ratio\n"
        "\n"
        "\n"
        "       cryptoserver-bench --module SO --token LABEL --pin PIN\n"
        "                          --keygen TYPE [--count N] [--interval-ms MS]\n"
        "                          [--session-keys] [--metrics URL] [--csv]\n"
        "  --keygen TYPE    time C_GenerateKeyPair of TYPE = rsa:2048, ec:prime256v1 or\n"
        "                   ed25519 (token keys; each pair is destroyed after it is timed)\n"
        "                   and print p50/p90/p99/max latency.  --count N pairs (default 100)\n"
        "  --interval-ms MS pause between generations (lets a broker key pool refill)\n"
        "  --session-keys   generate session objects (per-request keys) instead\n"
        "  --metrics URL    also count the pairs the broker's pre-generated key pool\n"
        "                   served (cryptoserver_pool_keys_taken_total, _missed_total)\n"
        "\n"
        "Exit status: 0 all signed (and verified), 1 any failure, 2 usage.\n",
        CS_BENCH_MAX_THREADS, CS_BENCH_MAX_BLOCKS);
    return status;
}

//  Parses the command line.  Returns -1 on success, else the exit status.
static int
s_parse (int argc, char **argv, cs_bench_options_t *options)
{
    static const struct option longs [] = {
        { "module", required_argument, NULL, 'm' }, { "token", required_argument, NULL, 't' },
        { "pin", required_argument, NULL, 'p' },    { "key", required_argument, NULL, 'k' },
        { "mechanism", required_argument, NULL, 'M' }, { "threads", required_argument, NULL, 'n' },
        { "count", required_argument, NULL, 'c' },  { "seconds", required_argument, NULL, 's' },
        { "verify", no_argument, NULL, 'v' },       { "csv", no_argument, NULL, 'C' },
        { "progress", no_argument, NULL, 'P' },     { "stop-on-error", no_argument, NULL, 'S' },
        { "keygen", required_argument, NULL, 'g' }, { "interval-ms", required_argument, NULL, 'i' },
        { "session-keys", no_argument, NULL, 'T' }, { "verify-key", required_argument, NULL, 'K' },
        { "blocks", required_argument, NULL, 'B' }, { "driver-board", required_argument, NULL, 'D' },
        { "key-file", required_argument, NULL, 'F' }, { "share", no_argument, NULL, 'H' },
        { "metrics", required_argument, NULL, 'u' }, { "beside", required_argument, NULL, 'b' },
        { "async", required_argument, NULL, 'A' },
        { "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 }
    };
    int opt;
    char *end = NULL;
    while ((opt = getopt_long (argc, argv, "h", longs, NULL)) != -1) {
        switch (opt) {
            case 'm': options->module_path = optarg; break;
            case 't': options->token = optarg; break;
            case 'p': options->pin = optarg; break;
            case 'k': options->key = optarg; break;
            case 'M':
                if (!cs_bench_mech_parse (optarg, &options->mech)) {
                    fprintf (stderr, "cryptoserver-bench: unknown mechanism '%s'\n", optarg);
                    return 2;
                }
                break;
            case 'n': options->threads = (int) strtol (optarg, &end, 10); break;
            case 'c': options->count = strtol (optarg, &end, 10); break;
            case 'B': options->blocks = (int) strtol (optarg, &end, 10); break;
            case 'D': options->driver_board = optarg; break;
            case 'F': options->key_file = optarg; break;
            case 'H': options->share = true; break;
            case 's': options->seconds = strtod (optarg, &end); break;
            case 'v': options->verify = true; break;
            case 'K': options->verify = true; options->verify_key = optarg; break;
            case 'u': options->metrics = optarg; break;
            case 'b': options->beside = optarg; break;
            case 'A': options->async = (int) strtol (optarg, &end, 10); break;
            case 'C': options->csv = true; break;
            case 'P': options->progress = true; break;
            case 'S': options->stop_on_error = true; break;
            case 'g':
                options->keygen = true;
                if (!cs_bench_keygen_parse (optarg, &options->gen.keygen)) {
                    fprintf (stderr, "cryptoserver-bench: unknown key type '%s'\n", optarg);
                    return 2;
                }
                break;
            case 'i': options->gen.interval_ms = strtol (optarg, &end, 10); break;
            case 'T': options->gen.token = false; break;
            case 'h': return s_usage (stdout, 0);
            default:  return s_usage (stderr, 2);
        }
        if (end && *end) {
            fprintf (stderr, "cryptoserver-bench: '%s' is not a number\n", optarg);
            return 2;
        }
        end = NULL;
    }
    bool driver = options->driver_board != NULL;
    if (optind < argc || (driver ? options->module_path || options->keygen
                                   || !options->key == !options->key_file
                                 : !options->module_path || !options->token || !options->pin
                                   || (!options->key && !options->keygen) || options->key_file)
    ||  options->gen.interval_ms < 0)
        return s_usage (stderr, 2);
    if (options->blocks < 1 || options->blocks > CS_BENCH_MAX_BLOCKS
    ||  ((options->blocks > 1 || options->share) && options->seconds > 0)) {
        fprintf (stderr, "cryptoserver-bench: --blocks must be 1..%d; --blocks and --share need --count\n",
                 CS_BENCH_MAX_BLOCKS);
        return 2;
    }
    if (options->threads < 1 || options->threads > CS_BENCH_MAX_THREADS
    ||  options->count < 0 || options->seconds < 0 || (options->count > 0 && options->seconds > 0)) {
        fprintf (stderr, "cryptoserver-bench: need 1..%d threads and either --count M or --seconds S\n",
                 CS_BENCH_MAX_THREADS);
        return 2;
    }
    if (options->count == 0 && options->seconds == 0)
        options->count = 100;
    if (options->beside && (driver || options->keygen)) {
        fprintf (stderr, "cryptoserver-bench: --beside compares two keys of a module's token\n");
        return 2;
    }
    if (options->async && (driver || options->keygen || options->beside || options->blocks > 1
                           || options->share || options->async < 0)) {
        fprintf (stderr, "cryptoserver-bench: --async N runs beside the threads of a plain module run\n");
        return 2;
    }
    if (options->metrics && options->driver_board) {
        fprintf (stderr, "cryptoserver-bench: --metrics measures runs through a broker, "
                 "not --driver-board\n");
        return 2;
    }
    return -1;
}

//  --driver-board: one board through its shim driver, no broker.
static int
s_main_driver (const cs_bench_options_t *options)
{
    char err [256] = "";
    cs_bench_pubkey_t pubkey = { 0 };
    cs_bench_verifier_t *verifier = NULL;
    int status = 1;
    cs_bench_driver_t *driver = cs_bench_driver_open (options->driver_board, options->key,
                                                      options->key_file, err, sizeof err);
    if (!driver)
        goto out;
    CK_RV rv = cs_bench_driver_pubkey (driver, &pubkey);
    if (rv != CKR_OK) {
        snprintf (err, sizeof err, "cannot read the key's public half: %s", cs_rv_name (rv));
        goto out;
    }
    verifier = options->verify_key
             ? cs_bench_verifier_from_pem (options->verify_key, &pubkey, options->mech, err, sizeof err)
             : cs_bench_verifier_new (&pubkey, options->mech, err, sizeof err);
    if (!verifier)
        goto out;
    status = cs_bench_sign_run (options, NULL, driver, options->verify ? verifier : NULL,
                    cs_bench_verifier_bits (verifier));
out:
    if (*err)
        fprintf (stderr, "cryptoserver-bench: %s\n", err);
    cs_bench_verifier_destroy (&verifier);
    cs_bench_pubkey_clear (&pubkey);
    cs_bench_driver_close (&driver);
    return status;
}

/*  One signing run of options (its key `label`) through the module's token:
 *  reads the key's public half for the verifier, runs, reports.  Returns the
 *  exit status; why it could not run in err.  */
static int
s_key_run (const cs_bench_options_t *options, cs_bench_module_t *module, CK_SESSION_HANDLE session,
           const char *label, char *err, size_t err_len)
{
    cs_bench_pubkey_t pubkey = { 0 };
    cs_bench_verifier_t *verifier = NULL;
    int status = 1;
    CK_RV rv = cs_bench_pubkey_read (module, session, label, &pubkey);
    if (rv != CKR_OK)
        snprintf (err, err_len, "key '%s': cannot read its public key: %s", label, cs_rv_name (rv));
    else
        verifier = options->verify_key
                 ? cs_bench_verifier_from_pem (options->verify_key, &pubkey, options->mech, err, err_len)
                 : cs_bench_verifier_new (&pubkey, options->mech, err, err_len);
    if (verifier) {
        double threaded = 0;
        cs_bench_options_t run = *options;
        run.ops_per_s = &threaded;
        status = cs_bench_sign_run (&run, module, NULL, options->verify ? verifier : NULL,
                                    cs_bench_verifier_bits (verifier));
        if (options->async) {           /* then one thread with N in flight, in the same run */
            int async = cs_bench_async_run (options, module, options->verify ? verifier : NULL,
                                            cs_bench_verifier_bits (verifier), threaded);
            status = status ? status : async;
        }
    }
    cs_bench_verifier_destroy (&verifier);
    cs_bench_pubkey_clear (&pubkey);
    return status;
}

int
main (int argc, char **argv)
{
    if (argc > 1 && strcmp (argv [1], "tls") == 0)
        return cs_bench_tls_main (argc - 1, argv + 1);
    if (argc > 1 && strcmp (argv [1], "paper") == 0)
        return cs_bench_paper_main (argc - 1, argv + 1);
    if (argc > 1 && strcmp (argv [1], "shared-keygen") == 0)
        return cs_bench_shared_main (argc - 1, argv + 1);
    if (argc > 1 && strcmp (argv [1], "idle-associations") == 0)
        return cs_bench_idle_main (argc - 1, argv + 1);
    if (argc > 1 && strcmp (argv [1], "find-objects") == 0)
        return cs_bench_find_main (argc - 1, argv + 1);
    if (argc > 1 && strcmp (argv [1], "transport-floor") == 0)
        return cs_bench_floor_main (argc - 1, argv + 1);
    if (argc > 1 && strcmp (argv [1], "pq") == 0)
        return cs_bench_pq_main (argc - 1, argv + 1);
    cs_bench_options_t options = { .threads = 1, .blocks = 1, .mech = CS_BENCH_SHA256_RSA_PKCS,
                            .gen.token = true };
    int status = s_parse (argc, argv, &options);
    if (status >= 0)
        return status;
    if (options.driver_board)
        return s_main_driver (&options);
    char err [256] = "";
    cs_bench_module_t module;
    CK_SESSION_HANDLE session = CK_INVALID_HANDLE;
    status = 1;
    if (cs_bench_module_open (&module, options.module_path, options.token, err, sizeof err) != 0)
        goto out;
    //  This session stays open through the run, so the login lasts.
    CK_RV rv = cs_bench_session_open (&module, options.pin, &session);
    if (rv != CKR_OK) {
        snprintf (err, sizeof err, "C_OpenSession/C_Login: %s", cs_rv_name (rv));
        goto out;
    }
    if (options.keygen) {
        options.gen.count = options.count;
        options.gen.csv = options.csv;
        options.gen.metrics = options.metrics;
        status = cs_bench_keygen_run (&module, session, &options.gen);
        goto out;
    }
    status = s_key_run (&options, &module, session, options.key, err, sizeof err);
    if (options.beside && !*err) {
        cs_bench_options_t beside = options;
        beside.key = options.beside;
        beside.verify_key = NULL;           /* --verify-key is the first key's */
        beside.csv_no_header = true;
        int second = s_key_run (&beside, &module, session, options.beside, err, sizeof err);
        status = status ? status : second;
    }
out:
    if (*err)
        fprintf (stderr, "cryptoserver-bench: %s\n", err);
    if (session != CK_INVALID_HANDLE)
        module.p11->C_CloseSession (session);
    cs_bench_module_close (&module);
    return status;
}
