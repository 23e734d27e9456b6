/*  fuzz_replay.c — runs a libFuzzer target's LLVMFuzzerTestOneInput over
 *  every file of the corpus directories (or files) named on the command
 *  line, without libFuzzer: `make check` builds each target with this
 *  main, with the build's compiler, and replays its corpus and its
 *  regression inputs (docs/FUZZING.md).  With no argument it replays
 *  CS_FUZZ_CORPUS, a colon-separated list set at build time.  A broken
 *  invariant aborts (the target's fz_fail); exit 0 when every input ran,
 *  2 when an input cannot be read.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/*  Runs the input in file path.  Returns 0, or -1 when it cannot be read.  */
static int
s_run_file (const char *path)
{
    FILE *file = fopen (path, "rb");
    if (!file) {
        perror (path);
        return -1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *data = malloc (cap);
    size_t got;
    while (data && (got = fread (data + len, 1, cap - len, file)) > 0)
        if ((len += got) == cap) {
            uint8_t *bigger = realloc (data, cap *= 2);
            if (!bigger)
                free (data);
            data = bigger;
        }
    fclose (file);
    if (!data)
        return -1;
    LLVMFuzzerTestOneInput (data, len);
    free (data);
    return 0;
}

static int
s_compare (const void *a, const void *b)
{
    return strcmp (*(char * const *) a, *(char * const *) b);
}

/*  Runs every regular file of dir (in name order), or dir itself when it
 *  is a file; *count_p counts them.  Returns 0 or -1.  */
static int
s_run (const char *dir, size_t *count_p)
{
    struct stat st;
    if (stat (dir, &st) != 0) {
        perror (dir);
        return -1;
    }
    if (!S_ISDIR (st.st_mode)) {
        (*count_p)++;
        return s_run_file (dir);
    }
    DIR *handle = opendir (dir);
    if (!handle)
        return -1;
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *entry; (entry = readdir (handle)); ) {
        if (entry->d_name [0] == '.')
            continue;
        char **more = realloc (names, (n + 1) * sizeof *names);
        if (!more)
            break;
        names = more;
        if (asprintf (&names [n], "%s/%s", dir, entry->d_name) < 0)
            break;
        n++;
    }
    closedir (handle);
    qsort (names, n, sizeof *names, s_compare);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (rc == 0 && stat (names [i], &st) == 0 && S_ISREG (st.st_mode)) {
            rc = s_run_file (names [i]);
            (*count_p)++;
        }
        free (names [i]);
    }
    free (names);
    return rc;
}

int
main (int argc, char **argv)
{
    LLVMFuzzerInitialize (&argc, &argv);
    size_t count = 0;
    int rc = 0;
    if (argc > 1)
        for (int i = 1; rc == 0 && i < argc; i++)
            rc = s_run (argv [i], &count);
    else {
        char *list = strdup (CS_FUZZ_CORPUS), *save = NULL;
        for (char *dir = strtok_r (list, ":", &save); rc == 0 && dir; dir = strtok_r (NULL, ":", &save))
            rc = s_run (dir, &count);
        free (list);
    }
    printf ("%s: %zu inputs replayed%s\n", argv [0], count, rc ? ", then an input could not be read" : "");
    return rc ? 2 : 0;
}
