/* vision.c — bench_vision: encode time of one image on a projector, braid against llama.cpp's libmtmd on the same
 * file, image and threads (tests/oracle_vision, --fa off and mtmd's default auto), best of R runs, and the ratio.
 * Without -m/--mmproj it writes the Qwen3.5 vision shape (E 1152, 27 blocks, 16 heads, F 4304, 48x48 grid,
 * rows of 1024, F16: ~850 MiB) and a q4_0 text model of width 1024 (mtmd needs one to load) into DIR first.
 *
 *   bench_vision [-t THREADS] [-r RUNS] [--size 448] [--dir DIR] [--mmproj F --text F]
 * Prints: braid ms, mtmd ms (fa off, fa auto), ratios mtmd/braid (> 1: braid is faster). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "braid.h"
#include "genmodel/gen_mmproj.h"
#include "genmodel/genmodel.h"
#include "vision/image_write.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* mtmd's best encode time from oracle_vision's "image ..." line (ms), or -1. */
static double mtmd_ms(const char *build, const char *text, const char *mmproj, const char *img, int threads, int runs,
                      const char *fa) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s/tests/oracle_vision -m %s --mmproj %s --image %s --threads %d --repeat %d --fa %s "
             "--no-eval 2>/dev/null", build, text, mmproj, img, threads, runs, fa);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[4096];
    double ms = -1;
    while (fgets(line, sizeof line, p)) {
        unsigned rows, npos, nx, ny;
        double t;
        if (sscanf(line, "image %u %u %u %u %lf", &rows, &npos, &nx, &ny, &t) == 5) ms = t;
    }
    return pclose(p) == 0 ? ms : -1;
}

int main(int argc, char **argv) {
    int threads = 2, runs = 3, size = 448;
    const char *dir = "/tmp/braid_bench_vision", *mmproj = NULL, *text = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) runs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--size")) size = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dir")) dir = argv[i + 1];
        else if (!strcmp(argv[i], "--mmproj")) mmproj = argv[i + 1];
        else if (!strcmp(argv[i], "--text")) text = argv[i + 1];
        else {
            fprintf(stderr, "bench_vision: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    const char *build = getenv("BRAID_BUILD_DIR") ? getenv("BRAID_BUILD_DIR") : "build";
    char mm_path[4096], text_path[4096], img_path[4096];
    mkdir(dir, 0755);
    if (!mmproj) {
        snprintf(mm_path, sizeof mm_path, "%s/mmproj-qwen35-shape-f16.gguf", dir);
        if (access(mm_path, R_OK) != 0) {
            gen_mmproj_params p;
            gen_mmproj_default(&p);
            p.n_embd = 1152, p.n_head = 16, p.n_ff = 4304, p.n_layer = 27, p.pos_side = 48, p.n_text = 1024;
            p.std = 0.02f;
            fprintf(stderr, "writing %s ...\n", mm_path);
            if (gen_mmproj_write(&p, mm_path, NULL) != BRAID_OK) {
                fprintf(stderr, "bench_vision: %s\n", braid_last_error());
                return 1;
            }
        }
        mmproj = mm_path;
    }
    if (!text) {
        snprintf(text_path, sizeof text_path, "%s/text-1024-q4_0.gguf", dir);
        if (access(text_path, R_OK) != 0) {
            gen_params p;
            gen_params_default(&p);
            p.over.n_embd = 1024;
            p.type = BRAID_TYPE_Q4_0;
            fprintf(stderr, "writing %s ...\n", text_path);
            if (gen_model_write(&p, text_path, NULL) != BRAID_OK) {
                fprintf(stderr, "bench_vision: %s\n", braid_last_error());
                return 1;
            }
        }
        text = text_path;
    }
    snprintf(img_path, sizeof img_path, "%s/noise%dx%d.png", dir, size, size);
    if (!tk_png_write_pattern(img_path, size, size, TK_NOISE, 1)) return 1;

    braid_mmproj_params mp = braid_mmproj_default_params();
    mp.n_threads = (uint32_t)threads;
    mp.cache_bytes = 1; /* off: every run encodes */
    braid_mmproj *mm = NULL;
    braid_image *im = NULL;
    if (braid_mmproj_load(mmproj, &mp, &mm) != BRAID_OK || braid_image_load_file(img_path, &im) != BRAID_OK) {
        fprintf(stderr, "bench_vision: %s\n", braid_last_error());
        return 1;
    }
    double best = 1e30;
    int32_t nx = 0, ny = 0;
    for (int r = 0; r < runs; r++) {
        float *rows = NULL;
        double t0 = now_ms();
        if (braid_mmproj_encode(mm, im, &rows, &nx, &ny) != BRAID_OK) {
            fprintf(stderr, "bench_vision: %s\n", braid_last_error());
            return 1;
        }
        double dt = now_ms() - t0;
        if (dt < best) best = dt;
        braid_free(rows);
    }
    braid_image_free(im);
    braid_mmproj_free(mm);
    double off = mtmd_ms(build, text, mmproj, img_path, threads, runs, "off");
    double aut = mtmd_ms(build, text, mmproj, img_path, threads, runs, "auto");
    printf("vision encode %dx%d -> %dx%d rows, %d threads, best of %d\n", size, size, nx, ny, threads, runs);
    printf("  braid            %10.1f ms\n", best);
    printf("  mtmd (fa off)    %10.1f ms   ratio mtmd/braid %.2f\n", off, off > 0 ? off / best : 0.0);
    printf("  mtmd (fa auto)   %10.1f ms   ratio mtmd/braid %.2f\n", aut, aut > 0 ? aut / best : 0.0);
    return 0;
}
