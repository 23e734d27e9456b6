/*  cs_admin_status.c — `cryptoserver-admin status`: each running broker's
 *  boards (health, jobs, mean latency), its queue depth and its clients'
 *  jobs in flight, read from the broker's metrics endpoint (broker/metrics;
 *  cryptoserver-broker(8), METRICS) with the scraper the bench uses
 *  (cs_metrics_scrape.h).  Issue #11.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "cs_admin.h"
#include "cs_metrics_scrape.h"
#include "cs_util.h"

#define S_BROKERS_MAX 64            /* --metrics URLs */
#define S_BOARDS_MAX 64             /* the scheduler's board indexes */
#define S_NAME_MAX 128

typedef struct {
    char name [S_NAME_MAX];
    double ok, error, expired;      /* cryptoserver_jobs_total by result */
    double seconds, count;          /* cryptoserver_job_seconds, stage total */
} s_board_t;

static int
s_status_usage (FILE *out, int status)
{
    fprintf (out,
        "usage: cryptoserver-admin status [--metrics URL]... [--dir DIR] [--token-file FILE]\n"
        "\n"
        "Shows each running broker's boards (health, jobs, mean latency), its queue\n"
        "depth and its clients' jobs in flight, read from its metrics endpoint.\n"
        "  --metrics URL   a broker's metrics endpoint, http://HOST[:PORT][/PATH]\n"
        "                  (port 9464, path /metrics by default); repeat it for\n"
        "                  several brokers\n"
        "  --dir DIR       without --metrics: the broker of the deployment in DIR\n"
        "                  (the URL in its broker/metrics-file, else broker/metrics;\n"
        "                  the token of its broker/metrics-token-file)\n"
        "  --token-file FILE  the bearer token (a chmod 600 file) that shows client\n"
        "                  and tenant names; without it the clients are one sum\n"
        "Health of a board: idle (no job yet), ok (every job answered CKR_OK),\n"
        "errors (some jobs failed on the board), expired (some jobs waited past\n"
        "their deadline in the queue); counted since the broker started.\n"
        "Exit status: 0 every broker answered, 1 one did not (or no URL).\n");
    return status;
}

/*  The metrics URL of the deployment in dir (malloc'd; caller frees): the
 *  URL the broker wrote to broker/metrics-file, else broker/metrics unless
 *  its port is picked at start; NULL after printing why.  */
static char *
s_deployment_url (const char *dir)
{
    zconfig_t *config = cs_admin_conf_load (dir);
    if (!config)
        return NULL;
    char *url = NULL;
    const char *file = zconfig_get (config, "broker/metrics-file", NULL);
    const char *configured = zconfig_get (config, "broker/metrics", NULL);
    if (file && *file) {
        char *path = cs_path_resolve (dir, file);
        FILE *in = path ? fopen (path, "re") : NULL;
        char line [1100];
        if (in && fgets (line, sizeof line, in)) {
            line [strcspn (line, "\r\n")] = 0;
            url = *line ? strdup (line) : NULL;
        }
        if (in)
            fclose (in);
        if (!url)
            cs_admin_error ("%s (broker/metrics-file of %s/broker.conf) holds no URL: is the broker "
                            "running?", path ? path : file, dir);
        free (path);
    }
    else
    if (!configured || !*configured)
        cs_admin_error ("%s/broker.conf has no broker/metrics: the broker serves no metrics "
                        "(set it, or give --metrics URL)", dir);
    else
    if (strstr (configured, ":0/") || strstr (configured, ":*/") || strstr (configured, ":!/"))
        cs_admin_error ("%s/broker.conf: broker/metrics %s has its port picked at start and no "
                        "broker/metrics-file says which: give --metrics URL", dir, configured);
    else
        url = strdup (configured);
    zconfig_destroy (&config);
    return url;
}

/*  The bearer token of the deployment in dir (broker/metrics-token-file),
 *  or of `file` when given: malloc'd (caller wipes and frees), or NULL when
 *  there is none; *failed set after printing why a named file could not be
 *  read (not private, absent).  */
static char *
s_token (const char *dir, const char *file, bool *failed)
{
    char *path = file ? strdup (file) : NULL;
    if (!file) {
        zconfig_t *config = cs_admin_conf_load (dir);
        const char *named = config ? zconfig_get (config, "broker/metrics-token-file", NULL) : NULL;
        path = named && *named ? cs_path_resolve (dir, named) : NULL;
        zconfig_destroy (&config);
    }
    if (!path)
        return NULL;
    char *token = cs_file_read_secret (path, 512);
    if (!token) {
        char why [600] = "";
        if (cs_file_check_private (path, why, sizeof why) == 0)
            snprintf (why, sizeof why, "cannot read %s", path);
        cs_admin_error ("bearer token: %s", why);
        *failed = true;
    }
    free (path);
    return token;
}

/*  The board named `name` in boards[0..*n) (added when new and there is
 *  room), or NULL.  */
static s_board_t *
s_board (s_board_t *boards, size_t *n, const char *name)
{
    for (size_t i = 0; i < *n; i++)
        if (streq (boards [i].name, name))
            return &boards [i];
    if (*n == S_BOARDS_MAX)
        return NULL;
    s_board_t *board = &boards [(*n)++];
    memset (board, 0, sizeof *board);
    snprintf (board->name, sizeof board->name, "%s", name);
    return board;
}

static const char *
s_health (const s_board_t *board)
{
    if (board->error > 0)
        return "errors";
    if (board->expired > 0)
        return "expired";
    return board->ok > 0 ? "ok" : "idle";
}

/*  Prints the boards of one scrape: listed by the job_seconds histogram
 *  (every board has one from the start), in the broker's order.  */
static void
s_print_boards (const char *text)
{
    s_board_t boards [S_BOARDS_MAX];
    size_t n = 0;
    cs_metrics_sample_t sample;
    char name [S_NAME_MAX], value [32];
    for (const char *cursor = text; cs_metrics_next (&cursor, &sample); ) {
        bool total = cs_metrics_label (sample.labels, "stage", value, sizeof value) && streq (value, "total");
        if (!cs_metrics_label (sample.labels, "board", name, sizeof name))
            continue;
        s_board_t *board = NULL;
        if (streq (sample.name, "cryptoserver_job_seconds_count") && total) {
            if ((board = s_board (boards, &n, name)))
                board->count = sample.value;
        }
        else
        if (streq (sample.name, "cryptoserver_job_seconds_sum") && total) {
            if ((board = s_board (boards, &n, name)))
                board->seconds = sample.value;
        }
        else
        if (streq (sample.name, "cryptoserver_jobs_total")
        &&  cs_metrics_label (sample.labels, "result", value, sizeof value)
        &&  (board = s_board (boards, &n, name))) {
            if (streq (value, "ok"))
                board->ok += sample.value;
            else
            if (streq (value, "error"))
                board->error += sample.value;
            else
            if (streq (value, "expired"))
                board->expired += sample.value;
        }
    }
    printf ("  %-20s %-8s %10s %8s %8s %9s\n", "BOARD", "HEALTH", "JOBS-OK", "ERRORS", "EXPIRED", "MEAN-MS");
    for (size_t i = 0; i < n; i++) {
        const s_board_t *board = &boards [i];
        if (board->count > 0)
            printf ("  %-20s %-8s %10.0f %8.0f %8.0f %9.3f\n", board->name, s_health (board), board->ok,
                    board->error, board->expired, board->seconds / board->count * 1000);
        else
            printf ("  %-20s %-8s %10.0f %8.0f %8.0f %9s\n", board->name, s_health (board), board->ok,
                    board->error, board->expired, "-");
    }
    if (n == 0)
        printf ("  (no boards listed)\n");
}

/*  Prints the clients of one scrape (cryptoserver_inflight_jobs).  */
static void
s_print_clients (const char *text)
{
    cs_metrics_sample_t sample;
    char client [S_NAME_MAX], tenant [S_NAME_MAX];
    size_t n = 0;
    for (const char *cursor = text; cs_metrics_next (&cursor, &sample); ) {
        if (!streq (sample.name, "cryptoserver_inflight_jobs")
        ||  !cs_metrics_label (sample.labels, "client", client, sizeof client)
        ||  !cs_metrics_label (sample.labels, "tenant", tenant, sizeof tenant))
            continue;
        if (streq (client, "(all)")) {
            printf ("  all clients: %.0f jobs in flight (names need the bearer token: --token-file)\n",
                    sample.value);
            n++;
            continue;
        }
        if (n++ == 0)
            printf ("  %-20s %-20s %10s\n", "CLIENT", "TENANT", "IN-FLIGHT");
        printf ("  %-20s %-20s %10.0f\n", client, tenant, sample.value);
    }
    if (n == 0)
        printf ("  (no client has sent a job yet)\n");
}

/*  Shows the broker at url; returns 0, or -1 after printing why it could
 *  not be read.  */
static int
s_show (const char *url, const char *token)
{
    char err [512] = "";
    char *text = cs_metrics_fetch (url, token, err, sizeof err);
    if (!text) {
        printf ("broker %s: unreachable\n", url);
        cs_admin_error ("broker %s: %s", url, err);
        return -1;
    }
    double client = 0, background = 0, cpu = 0;
    bool known = cs_metrics_value (text, "cryptoserver_queue_depth{queue=\"client\"}", &client)
              && cs_metrics_value (text, "cryptoserver_queue_depth{queue=\"background\"}", &background);
    if (!known) {
        printf ("broker %s: not a cryptoserver broker's metrics\n", url);
        cs_admin_error ("broker %s: no cryptoserver_queue_depth in its answer", url);
        free (text);
        return -1;
    }
    cs_metrics_value (text, "process_cpu_seconds_total", &cpu);
    printf ("broker %s: up, queue depth client %.0f, background %.0f; cpu %.2f s\n",
            url, client, background, cpu);
    s_print_boards (text);
    s_print_clients (text);
    free (text);
    return 0;
}

int
cs_admin_status (int argc, char **argv)
{
    static struct option options [] = {
        { "metrics", required_argument, NULL, 'm' }, { "dir", required_argument, NULL, 'd' },
        { "token-file", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 }
    };
    const char *urls [S_BROKERS_MAX], *dir = ".", *token_file = NULL;
    size_t n = 0;
    int opt;
    optind = 1;
    while ((opt = getopt_long (argc, argv, "m:d:t:h", options, NULL)) != -1)
        switch (opt) {
            case 'm':
                if (n == S_BROKERS_MAX) {
                    cs_admin_error ("at most %d --metrics URLs", S_BROKERS_MAX);
                    return CS_ADMIN_USAGE;
                }
                urls [n++] = optarg;
                break;
            case 'd': dir = optarg; break;
            case 't': token_file = optarg; break;
            case 'h': return s_status_usage (stdout, CS_ADMIN_OK);
            default: return s_status_usage (stderr, CS_ADMIN_USAGE);
        }
    if (optind < argc)
        return s_status_usage (stderr, CS_ADMIN_USAGE);
    char *own = n == 0 ? s_deployment_url (dir) : NULL;
    if (n == 0 && !own)
        return CS_ADMIN_FAIL;
    if (own)
        urls [n++] = own;
    bool failed = false;
    char *token = token_file || own ? s_token (dir, token_file, &failed) : NULL;
    int status = failed ? CS_ADMIN_FAIL : CS_ADMIN_OK;
    for (size_t i = 0; !failed && i < n; i++) {
        if (i > 0)
            printf ("\n");
        if (s_show (urls [i], token))
            status = CS_ADMIN_FAIL;
    }
    if (token) {
        OPENSSL_cleanse (token, strlen (token));
        free (token);
    }
    free (own);
    return status;
}
