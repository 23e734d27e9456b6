/*  main.c — cryptoserver-broker: parse arguments, load the config, run a
 *  server (server.h) until SIGINT/SIGTERM, drain, exit.
 *
 *  Exit status: 0 after a clean stop, 1 when the broker cannot start, 2 for
 *  a bad command line or config.
 */
#include <getopt.h>
#include "config.h"
#include "broker_config.h"
#include "cs_secmem.h"
#include "host_limits.h"
#include "server.h"

#define S_DRAIN_SLACK_MS 2000       /* on top of max-deadline-ms */
#define S_TRIM_EVERY 10             /* waits of 500 ms between heap checks (host_limits_trim) */
#define S_TRIM_MIN_FREE (8u << 20)  /* bytes freed but kept before they go back */

static void
s_usage (FILE *out)
{
    fprintf (out,
             "usage: cryptoserver-broker -c FILE [-v] [-f]\n"
             "  -c, --config FILE   broker config (see cryptoserver-broker.conf(5))\n"
             "  -f, --foreground    stay in the foreground (the broker never daemonizes)\n"
             "  -v, --verbose       debug logs\n"
             "  -h, --help          this help\n"
             "  -V, --version       print the version\n");
}

/*  Parses argv; returns the config path, or NULL after printing (with
 *  *status_p set to the exit status).  */
static const char *
s_args (int argc, char **argv, bool *verbose_p, int *status_p)
{
    static const struct option options [] = {
        { "config", required_argument, NULL, 'c' }, { "foreground", no_argument, NULL, 'f' },
        { "verbose", no_argument, NULL, 'v' }, { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' }, { NULL, 0, NULL, 0 }
    };
    const char *file = NULL;
    int opt;
    *status_p = 2;
    while ((opt = getopt_long (argc, argv, "c:fvhV", options, NULL)) != -1)
        switch (opt) {
            case 'c': file = optarg; break;
            case 'f': break;
            case 'v': *verbose_p = true; break;
            case 'h': s_usage (stdout); *status_p = 0; return NULL;
            case 'V': printf ("cryptoserver-broker %s\n", PACKAGE_VERSION); *status_p = 0; return NULL;
            default: s_usage (stderr); return NULL;
        }
    if (!file || optind < argc) {
        s_usage (stderr);
        return NULL;
    }
    return file;
}

/*  Writes the bound endpoint to path atomically (temp file + rename).  */
static int
s_write_endpoint (const char *path, const char *endpoint)
{
    char tmp [4096];
    snprintf (tmp, sizeof tmp, "%s.tmp.%d", path, (int) getpid ());
    FILE *file = fopen (tmp, "we");
    if (!file)
        return -1;
    bool ok = fprintf (file, "%s\n", endpoint) > 0;
    ok = fclose (file) == 0 && ok;
    if (!ok || rename (tmp, path)) {
        unlink (tmp);
        return -1;
    }
    return 0;
}

/*  Waits for SIGINT/SIGTERM (zsys_interrupted) while the frontend lives;
 *  every 5 s gives back the heap that closed associations freed (this
 *  thread is otherwise idle: host_limits.h).  */
static void
s_wait (server_t *server)
{
    zpoller_t *poller = zpoller_new (server_frontend (server), NULL);
    for (unsigned tick = 1; !zsys_interrupted; tick++) {
        if (zpoller_wait (poller, 500)) {
            char *message = zstr_recv (server_frontend (server));
            zstr_free (&message);
        }
        size_t freed = tick % S_TRIM_EVERY ? 0 : host_limits_trim (S_TRIM_MIN_FREE);
        if (freed)
            zsys_debug ("heap: %zu MiB freed (closed associations): given back to the system", freed >> 20);
    }
    zpoller_destroy (&poller);
}

int
main (int argc, char **argv)
{
    bool verbose = false;
    int status = 2;
    char *error = NULL;
    const char *file = s_args (argc, argv, &verbose, &status);
    if (!file)
        return status;
    /*  Each client association is a descriptor: the soft limit up to the
        hard one before the ROUTER listens (man cryptoserver-broker(8)).  */
    size_t files = host_limits_raise_nofile ();
    zsys_init ();
    zsys_set_logident ("cryptoserver-broker");
    zsys_info ("file limit: %zu descriptors (about as many client associations)", files);
    /*  Before any secret is read (the config reads the ticket key): no core
        dump and no ptrace by the same user (man cryptoserver-broker(8)).
        server_new does it again and logs a refusal.  */
    (void) cs_secmem_protect_process ();
    broker_config_t *config = broker_config_load (file, &error);
    if (!config) {
        zsys_error ("%s", error);
        fprintf (stderr, "cryptoserver-broker: %s\n", error);
        free (error);
        return 2;
    }
    if (config->ticket_key_random)
        zsys_warning ("no broker/ticket-key: login tickets will not survive a restart");
    server_t *server = server_new (config, verbose);
    status = server ? 0 : 1;
    /*  The metrics URL before the endpoint: whoever waits for the endpoint
        file (demo-deploy.sh --wait) then finds both.  */
    if (server && server_metrics_url (server) && config->metrics_file
    &&  s_write_endpoint (config->metrics_file, server_metrics_url (server))) {
        zsys_error ("cannot write metrics-file %s", config->metrics_file);
        status = 1;
    }
    if (server && status == 0 && config->endpoint_file
    &&  s_write_endpoint (config->endpoint_file, server_endpoint (server))) {
        zsys_error ("cannot write endpoint-file %s", config->endpoint_file);
        status = 1;
    }
    if (server && status == 0) {
        s_wait (server);
        zsys_info ("signal received: finishing the jobs in flight");
        if (server_drain (server, config->max_deadline_ms + S_DRAIN_SLACK_MS))
            zsys_warning ("jobs still in flight after the drain timeout; stopping anyway");
    }
    server_destroy (&server);
    if (server_stuck_workers) {
        /*  A thread is stuck in a driver call with its sockets open: the
            exit handlers (zsys_shutdown) would wait for them.  */
        zsys_info ("stopped");
        fflush (stdout);
        fflush (stderr);
        _exit (status);
    }
    broker_config_destroy (&config);
    zsys_info ("stopped");
    return status;
}
