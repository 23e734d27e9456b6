/*  server.c — start and stop a whole broker in one process.  */
#include "board.h"
#include "frontend.h"
#include "server.h"
#include "worker.h"

struct _server_t {
    const broker_config_t *config;
    board_t **boards;
    size_t n_boards;
    zactor_t *auth;
    zactor_t *frontend;
    frontend_args_t args;
    char backend [64];
    char *endpoint;
    worker_t **workers;
    size_t n_workers;
};

/*  Opens every configured board.  */
static int
s_boards_open (server_t *self)
{
    const broker_config_t *config = self->config;
    const char *dir = board_driver_dir (config);
    self->boards = calloc (config->n_boards, sizeof (board_t *));
    if (!self->boards)
        return -1;
    for (size_t i = 0; i < config->n_boards; i++) {
        self->boards [i] = board_new (&config->boards [i], dir, config->dir);
        if (!self->boards [i])
            return -1;
        self->n_boards++;
    }
    return 0;
}

/*  Starts zauth with the CURVE allow-list of the clients directory.  */
static int
s_auth_start (server_t *self, bool verbose)
{
    if (!self->config->curve)
        return 0;
    self->auth = zactor_new (zauth, NULL);
    if (!self->auth)
        return -1;
    (void) verbose;     /* zauth is always verbose: it is the log of refused keys */
    zstr_send (self->auth, "VERBOSE");
    zsock_wait (self->auth);
    zstr_sendx (self->auth, "CURVE", self->config->clients_dir, NULL);
    zsock_wait (self->auth);
    return 0;
}

static int
s_frontend_start (server_t *self)
{
    snprintf (self->backend, sizeof self->backend, "inproc://cs-backend-%p", (void *) self);
    self->args = (frontend_args_t) { self->config, self->boards, self->n_boards, self->backend };
    self->frontend = zactor_new (frontend_actor, &self->args);
    char *endpoint = self->frontend ? zstr_recv (self->frontend) : NULL;
    if (endpoint && *endpoint) {
        self->endpoint = endpoint;
        return 0;
    }
    zstr_free (&endpoint);
    return -1;
}

/*  Starts board->threads workers per board, ids in board order (the same
 *  order the frontend registers them with the scheduler).  */
static int
s_workers_start (server_t *self)
{
    size_t total = 0;
    for (size_t b = 0; b < self->n_boards; b++)
        total += (size_t) self->boards [b]->threads;
    self->workers = calloc (total, sizeof (worker_t *));
    if (!self->workers)
        return -1;
    for (size_t b = 0; b < self->n_boards; b++)
        for (int t = 0; t < self->boards [b]->threads; t++) {
            worker_t *worker = worker_new (self->boards [b], self->n_workers, self->backend);
            if (!worker)
                return -1;
            self->workers [self->n_workers++] = worker;
        }
    return 0;
}

server_t *
server_new (const broker_config_t *config, bool verbose)
{
    server_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->config = config;
    frontend_verbose = verbose;
    if (s_boards_open (self) || s_auth_start (self, verbose) || s_frontend_start (self)
    ||  s_workers_start (self))
        server_destroy (&self);
    else
        zsys_info ("listening on %s", self->endpoint);
    return self;
}

const char *
server_endpoint (server_t *self)
{
    return self->endpoint;
}

zactor_t *
server_frontend (server_t *self)
{
    return self->frontend;
}

int
server_drain (server_t *self, int timeout_ms)
{
    zpoller_t *poller = zpoller_new (self->frontend, NULL);
    int64_t end = zclock_mono () + timeout_ms;
    int rc = -1;
    zpoller_set_nonstop (poller, true);
    zstr_send (self->frontend, "DRAIN");
    while (rc && zclock_mono () < end) {
        if (!zpoller_wait (poller, (int) (end - zclock_mono ())))
            continue;
        char *reply = zstr_recv (self->frontend);
        if (reply && streq (reply, "DRAINED"))
            rc = 0;
        zstr_free (&reply);
    }
    zpoller_destroy (&poller);
    return rc;
}

void
server_destroy (server_t **self_p)
{
    server_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    for (size_t i = 0; i < self->n_workers; i++)
        worker_destroy (&self->workers [i]);
    zactor_destroy (&self->frontend);
    zactor_destroy (&self->auth);
    for (size_t i = 0; i < self->n_boards; i++)
        board_destroy (&self->boards [i]);
    free (self->workers);
    free (self->boards);
    zstr_free (&self->endpoint);
    free (self);
    *self_p = NULL;
}
