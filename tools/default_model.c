/* default_model.c — finds the built-in default model (see default_model.h). The files are trained once by
 * train/train.py and committed (models/, a few MB of Q8_0), so a fresh checkout runs real text with no download
 * and no generation step. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "default_model.h"

#ifndef BRAID_BUILTIN_MODELS_DIR
#define BRAID_BUILTIN_MODELS_DIR ""
#endif

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

/* Tries dir/name; 1 if it exists (path left in buf). */
static int try_dir(char *buf, size_t cap, const char *dir, const char *name) {
    if (!dir || !*dir) return 0;
    int n = snprintf(buf, cap, "%s/%s", dir, name);
    return n > 0 && (size_t)n < cap && is_file(buf);
}

static int find_model(char *buf, size_t cap, const char *name) {
    const char *env = getenv("BRAID_MODELS_DIR");
    if (env && *env) {
        /* an explicit directory is the only place looked at: a test or a user pointing elsewhere must not
         * silently get the tree's file */
        if (try_dir(buf, cap, env, name)) return 1;
        fprintf(stderr, "braid: the default model %s is not in $BRAID_MODELS_DIR (%s); give a model with -m\n",
                name, env);
        return 0;
    }
    if (try_dir(buf, cap, BRAID_BUILTIN_MODELS_DIR, name)) return 1;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            char dir[PATH_MAX + 32];
            snprintf(dir, sizeof dir, "%s/../models", exe);
            if (try_dir(buf, cap, dir, name)) return 1;
            snprintf(dir, sizeof dir, "%s/../share/braid/models", exe);
            if (try_dir(buf, cap, dir, name)) return 1;
        }
    }
    fprintf(stderr,
            "braid: the default model %s was not found (looked in %s and beside the executable); give a "
            "model with -m or set BRAID_MODELS_DIR\n",
            name, *BRAID_BUILTIN_MODELS_DIR ? BRAID_BUILTIN_MODELS_DIR : "(no source tree)");
    return 0;
}

int tool_default_model_path(char *buf, size_t cap) { return find_model(buf, cap, BRAID_DEFAULT_MODEL_FILE); }

int tool_default_draft_path(char *buf, size_t cap) { return find_model(buf, cap, BRAID_DEFAULT_DRAFT_FILE); }
