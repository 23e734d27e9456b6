/*  cs_bench_paper.c — `cryptoserver-bench paper`: the paper's Tables 1-4
 *  reproduced on 127.0.0.1 (Berson et al. §5).  The work is orchestration
 *  (demo deployments, brokers, nginx, gnuplot), so it lives in the script
 *  tools/bench-paper.sh of the source tree this program was built from; this
 *  subcommand runs it with the build tree's programs.  The script needs
 *  tools/demo-deploy.sh and the built broker, admin tool, module and
 *  drivers: it runs from a build tree, not from an installed system.
 */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cs_bench.h"

int
cs_bench_paper_main (int argc, char **argv)
{
    //  CRYPTOSERVER_BENCH_PAPER names another copy of the script (tests, a
    //  moved source tree).
    const char *script = getenv ("CRYPTOSERVER_BENCH_PAPER");
    char path [4096];
    if (!script || !*script) {
        snprintf (path, sizeof path, "%s/tools/bench-paper.sh", CS_TOP_SRCDIR);
        script = path;
    }
    if (access (script, R_OK) != 0) {
        fprintf (stderr, "cryptoserver-bench paper: %s not found: the paper benchmark runs from the "
                         "build tree of a source tree (set CRYPTOSERVER_BENCH_PAPER to the script)\n",
                 script);
        return 1;
    }
    //  The script's programs: this build tree, unless the caller chose one.
    setenv ("CS_BUILD_DIR", CS_TOP_BUILDDIR, 0);
    char **args = calloc ((size_t) argc + 2, sizeof *args);
    if (!args)
        return 1;
    args [0] = (char *) "bash";
    args [1] = (char *) script;
    for (int i = 1; i < argc; i++)
        args [i + 1] = argv [i];
    execv ("/bin/bash", args);
    perror ("cryptoserver-bench paper: /bin/bash");
    free (args);
    return 1;
}
