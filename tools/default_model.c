/* default_model.c — the built-in default model: a random-weight qwen35 GGUF ("small" preset, with the real
 * qwen35 vocabulary from the oracle cache) written once by the gen-model code into $BRAID_MODELS_DIR, else
 * $BRAID_CACHE/models/, else ~/.cache/braid/models/, and reused afterwards, so `braid run -p ...` works with
 * no download. It is written to a temporary name and renamed into place, so an interrupted generation
 * never leaves a truncated file where the next run would find it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "default_model.h"
#include "genmodel/genmodel.h"

#define DEFAULT_MODEL_NAME "default-qwen35.gguf"

/* mkdir -p for the directory part of path. */
static int make_dirs(char *path) {
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int bad = mkdir(path, 0755) != 0 && errno != EEXIST;
        *p = '/';
        if (bad) return 0;
    }
    return 1;
}

int tool_default_model_path(char *buf, size_t cap) {
    const char *dir = getenv("BRAID_MODELS_DIR");
    const char *cache = getenv("BRAID_CACHE");
    const char *home = getenv("HOME");
    int n;
    if (dir && *dir) n = snprintf(buf, cap, "%s/" DEFAULT_MODEL_NAME, dir);
    else if (cache && *cache) n = snprintf(buf, cap, "%s/models/" DEFAULT_MODEL_NAME, cache);
    else n = snprintf(buf, cap, "%s/.cache/braid/models/" DEFAULT_MODEL_NAME, home && *home ? home : ".");
    if (n < 0 || (size_t)n >= cap) {
        fprintf(stderr, "braid: the cache path is too long\n");
        return 0;
    }
    struct stat st;
    if (stat(buf, &st) == 0 && st.st_size > 0) return 1;

    if (!make_dirs(buf)) {
        fprintf(stderr, "braid: cannot create the directory of %s: %s\n", buf, strerror(errno));
        return 0;
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", buf, (long)getpid());
    gen_params gp;
    gen_params_default(&gp);
    gp.arch = "qwen35";
    gp.preset = "small";
    fprintf(stderr, "braid: generating the default model (qwen35, preset small) into %s ...\n", buf);
    gen_summary sum;
    braid_status s = gen_model_write(&gp, tmp, &sum);
    if (s != BRAID_OK) {
        fprintf(stderr, "braid: cannot generate the default model: %s: %s\n", braid_status_name(s),
                braid_last_error());
        unlink(tmp);
        return 0;
    }
    if (rename(tmp, buf) != 0) {
        fprintf(stderr, "braid: cannot move %s into place: %s\n", tmp, strerror(errno));
        unlink(tmp);
        return 0;
    }
    fprintf(stderr, "braid: default model ready (%llu parameters, %.1f MiB)\n", (unsigned long long)sum.n_params,
            (double)sum.n_bytes / 1048576.0);
    return 1;
}
