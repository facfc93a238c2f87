/* test_vision.c — images against llama.cpp's libmtmd (tests/oracle_vision, built by scripts/build-mtmd-oracle.sh):
 * the projectors `braid gen-model --arch qwen3vl-mmproj` writes (F32 and F16, with and without deepstack) load
 * in mtmd and encode images to the grid reference/vision.md §1.4 gives. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "braid.h"
#include "test.h"
#include "vision/image_write.h"

static char dir[] = "/tmp/braid_vision_XXXXXX";
static char build_dir[2048];

static char *run(const char *cmd, int *status) {
    char *out = test_run_cmd(cmd, status);
    if (*status != 0) fprintf(stderr, "command failed (%d): %s\n%s\n", *status, cmd, out ? out : "");
    return out;
}

static int gen(const char *args, const char *out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s/braid gen-model %s -o %s/%s >/dev/null", build_dir, args, dir, out);
    int st;
    free(run(cmd, &st));
    return st == 0;
}

/* Runs the vision oracle; returns its stdout. */
static char *oracle_vision(const char *args, int *status) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "cd %s && %s/tests/oracle_vision --ctx 2048 %s 2>oracle.err", dir, build_dir, args);
    return run(cmd, status);
}

static float *read_f32(const char *name, size_t *n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t bytes = 0;
    float *f = (float *)test_read_file(path, &bytes);
    *n = bytes / sizeof(float);
    return f;
}

int main(void) {
    snprintf(build_dir, sizeof build_dir, "%s", test_env("BRAID_BUILD_DIR", "build"));
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/tests/oracle_vision", build_dir);
    CHECK(access(probe, X_OK) == 0, "%s is missing: run scripts/build-mtmd-oracle.sh (setup.sh does) and rebuild",
          probe);
    if (access(probe, X_OK) != 0) TEST_MAIN_END();
    if (!mkdtemp(dir)) TEST_SKIP("no temporary directory");

    /* models: a qwen35 text model of width 256 and projectors of that row width */
    CHECK(gen("--arch qwen35 --embd 256", "text.gguf"), "text model");
    CHECK(gen("--arch qwen3vl-mmproj --type f32", "mm-f32.gguf"), "f32 projector");
    CHECK(gen("--arch qwen3vl-mmproj --type f16 --seed 2", "mm-f16.gguf"), "f16 projector");
    CHECK(gen("--arch qwen3vl-mmproj --type f32 --layers 3 --deepstack 0,2", "mm-ds.gguf"), "deepstack projector");
    char path[4096];
    snprintf(path, sizeof path, "%s/img64x48.png", dir);
    CHECK(tk_png_write_pattern(path, 64, 48, TK_GRADIENT, 0), "image");

    const struct {
        const char *mm;
        int width;
    } cases[] = {{"mm-f32.gguf", 256}, {"mm-f16.gguf", 256}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[4096];
        snprintf(args, sizeof args, "-m text.gguf --mmproj %s --image img64x48.png --no-eval --dump-embd e.f32",
                 cases[i].mm);
        int st;
        char *out = oracle_vision(args, &st);
        unsigned rows = 0, npos = 0, nx = 0, ny = 0;
        const char *img = out ? strstr(out, "image ") : NULL;
        CHECK(st == 0 && img && sscanf(img, "image %u %u %u %u", &rows, &npos, &nx, &ny) == 4, "%s: oracle output '%s'",
              cases[i].mm, out ? out : "");
        /* 64x48 -> 128x96 (upscaled to the 8-token minimum... 12 rows), vision.md §1.4 */
        CHECK(rows == 12 && nx == 4 && ny == 3 && npos == 4, "%s: %u rows %ux%u npos %u", cases[i].mm, rows, nx, ny,
              npos);
        size_t n = 0;
        float *e = read_f32("e.f32", &n);
        CHECK(e && n == (size_t)rows * (size_t)cases[i].width, "%s: %zu floats", cases[i].mm, n);
        int finite = e != NULL, varied = 0;
        for (size_t k = 0; e && k < n; k++) {
            if (!isfinite(e[k])) finite = 0;
            if (k && fabsf(e[k] - e[0]) > 1e-3f) varied = 1;
        }
        CHECK(finite && varied, "%s: rows not finite or constant", cases[i].mm);
        free(e);
        free(out);
    }

    /* a deepstack projector's rows are 3 x 256 wide: mtmd refuses it for a qwen35 text model of width 256 */
    {
        int st;
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "cd %s && %s/tests/oracle_vision -m text.gguf --mmproj mm-ds.gguf --image img64x48.png "
                 "--no-eval 2>&1", dir, build_dir);
        char *out = test_run_cmd(cmd, &st);
        CHECK(st != 0 && out && strstr(out, "mismatch"), "deepstack projector with qwen35: status %d, '%s'", st,
              out ? out : "");
        free(out);
    }

    char cmd[8192];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    int st;
    free(test_run_cmd(cmd, &st));
    TEST_MAIN_END();
}
