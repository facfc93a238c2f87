/* test_vision.c — images against llama.cpp's libmtmd (tests/oracle_vision, built by scripts/build-mtmd-oracle.sh)
 * on the same projector, images and text model:
 * - the projectors `braid gen-model --arch qwen3vl-mmproj` writes (F32, F16, deepstack) load in mtmd;
 * - braid's image rows equal mtmd's (flash attention off): F32 projector max abs <= 1e-3, F16 <= 2e-3 (mtmd
 *   rounds activations to fp16 there; braid does too, the rest is float order), on images that take every
 *   preprocessing branch: upscaled to the minimum token count, padded, an extreme aspect ratio, an exact
 *   position grid (no interpolation), downscaled to a maximum token count, a deepstack projector, and heads
 *   of 72 (Qwen's size, not a multiple of the vector widths);
 * - a prompt with two images: the logits after it equal llama.cpp's (max rel <= 1e-4) when braid decodes
 *   mtmd's own rows at braid's grid positions, and stay close (<= 1e-3, same argmax) with braid's rows;
 * - `braid run --mmproj --image` tokenizes the text around images as mtmd does (markers, and images first
 *   without markers), dumps the same rows (--dump-image-embd), and refuses bad images and a deepstack projector
 *   for qwen35 with the reason. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "braid.h"
#include "test.h"
#include "logits_cmp.h"
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

/* Runs the vision oracle in dir; returns its stdout (NULL with a failed check if it failed). */
static char *oracle_vision(const char *args) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "cd %s && %s/tests/oracle_vision --ctx 2048 --fa off %s 2>oracle.err", dir, build_dir, args);
    int st;
    char *out = run(cmd, &st);
    CHECK(st == 0 && out, "oracle_vision %s failed", args);
    if (st != 0) {
        free(out);
        return NULL;
    }
    return out;
}

static char *path_in(const char *name) {
    static char p[4][4096];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static float *read_f32(const char *name, size_t *n) {
    size_t bytes = 0;
    float *f = (float *)test_read_file(path_in(name), &bytes);
    *n = bytes / sizeof(float);
    return f;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (e > d || isnan(e)) d = isnan(e) ? INFINITY : e;
    }
    return d;
}

/* braid's rows of the images, in order, concatenated (*n floats); NULL with a failed check on error. */
static float *braid_rows(const char *mmproj, int max_tokens, const char *const *images, int n_images, size_t *n,
                         int32_t *grid) {
    braid_mmproj_params p = braid_mmproj_default_params();
    p.image_max_tokens = max_tokens;
    p.n_threads = 2;
    braid_mmproj *mm = NULL;
    CHECK_STATUS(braid_mmproj_load(path_in(mmproj), &p, &mm), BRAID_OK);
    if (!mm) return NULL;
    float *all = NULL;
    *n = 0;
    for (int i = 0; i < n_images; i++) {
        braid_image *im = NULL;
        CHECK_STATUS(braid_image_load_file(path_in(images[i]), &im), BRAID_OK);
        float *rows = NULL;
        int32_t nx = 0, ny = 0;
        if (im) CHECK_STATUS(braid_mmproj_encode(mm, im, &rows, &nx, &ny), BRAID_OK);
        braid_image_free(im);
        if (!rows) break;
        size_t k = (size_t)nx * ny * (size_t)braid_mmproj_n_embd(mm);
        float *grown = realloc(all, (*n + k) * sizeof(float));
        if (grown) {
            all = grown;
            memcpy(all + *n, rows, k * sizeof(float));
            *n += k;
        }
        if (grid) grid[2 * i] = nx, grid[2 * i + 1] = ny;
        braid_free(rows);
    }
    braid_mmproj_free(mm);
    return all;
}

/* The "image ROWS NPOS NX NY" lines of an oracle output: grid of image i into grid[2i], grid[2i+1]. */
static int oracle_grids(const char *out, int32_t *grid, int max) {
    int k = 0;
    for (const char *p = out; p && (p = strstr(p, "image ")) && k < max; p += 6) {
        unsigned rows, npos, nx, ny;
        if (sscanf(p, "image %u %u %u %u", &rows, &npos, &nx, &ny) == 4 && rows == nx * ny && npos == (nx > ny ? nx : ny)) {
            grid[2 * k] = (int32_t)nx;
            grid[2 * k + 1] = (int32_t)ny;
            k++;
        }
    }
    return k;
}

/* One rows comparison: oracle and braid on the same projector and images. */
static void check_rows(const char *what, const char *mmproj, int max_tokens, const char *const *images, int n_images,
                       double tol, const int32_t *want_grid) {
    char args[8192], prompt[1024] = "";
    int o = snprintf(args, sizeof args, "-m %s --mmproj %s --no-eval --dump-embd rows.f32",
                     !strcmp(mmproj, "mm-ds.gguf") ? "text768.gguf" : "text.gguf", mmproj);
    if (max_tokens) o += snprintf(args + o, sizeof args - (size_t)o, " --max-tokens %d", max_tokens);
    for (int i = 0; i < n_images; i++) {
        o += snprintf(args + o, sizeof args - (size_t)o, " --image %s", images[i]);
        strcat(prompt, "<__media__>");
    }
    snprintf(args + o, sizeof args - (size_t)o, " -p '%s'", prompt);
    char *out = oracle_vision(args);
    if (!out) return;
    int32_t og[32] = {0}, bg[32] = {0};
    int got = oracle_grids(out, og, 16);
    size_t n_ref = 0, n_got = 0;
    float *ref = read_f32("rows.f32", &n_ref);
    float *mine = braid_rows(mmproj, max_tokens, images, n_images, &n_got, bg);
    CHECK(got == n_images, "%s: oracle reported %d images", what, got);
    for (int i = 0; i < got; i++) {
        CHECK(og[2 * i] == bg[2 * i] && og[2 * i + 1] == bg[2 * i + 1], "%s: image %d grid %dx%d, mtmd %dx%d", what, i,
              bg[2 * i], bg[2 * i + 1], og[2 * i], og[2 * i + 1]);
        if (want_grid)
            CHECK(bg[2 * i] == want_grid[2 * i] && bg[2 * i + 1] == want_grid[2 * i + 1], "%s: image %d grid %dx%d", what,
                  i, bg[2 * i], bg[2 * i + 1]);
    }
    CHECK(ref && mine && n_ref == n_got && n_ref > 0, "%s: %zu floats from braid, %zu from mtmd", what, n_got, n_ref);
    if (ref && mine && n_ref == n_got) {
        double d = max_abs_diff(mine, ref, n_ref), mag = 0;
        for (size_t i = 0; i < n_ref; i++) mag = fabs(ref[i]) > mag ? fabs(ref[i]) : mag;
        printf("  %-34s %6zu floats  max|diff| %.3e  (max|row| %.2f)\n", what, n_ref, d, mag);
        CHECK(d <= tol, "%s: max abs diff %.3e > %.1e", what, d, tol);
        CHECK(mag > 0.1, "%s: rows of magnitude %.3f (degenerate)", what, mag);
    }
    free(ref);
    free(mine);
    free(out);
}

/* Token ids of the oracle's text chunks ("text N t0 ...") in order, concatenated; parts[] gets text and image
 * slots in prompt order (image slots with embd NULL), returns the number of parts. */
static int oracle_parts(const char *out, braid_token *toks, int cap, braid_prompt_part *parts, int max_parts) {
    int n = 0, np = 0;
    for (const char *p = out; *p && np < max_parts;) {
        if (!strncmp(p, "text ", 5)) {
            int k = atoi(p + 5);
            const char *q = strchr(p + 5, ' ');
            parts[np].tokens = toks + n;
            parts[np].n_tokens = 0;
            for (int i = 0; i < k && q && n < cap; i++) {
                toks[n++] = (braid_token)strtol(q + 1, (char **)&q, 10);
                parts[np].n_tokens++;
            }
            parts[np].embd = NULL;
            np++;
        } else if (!strncmp(p, "image ", 6)) {
            unsigned rows, npos, nx, ny;
            if (sscanf(p, "image %u %u %u %u", &rows, &npos, &nx, &ny) == 4) {
                memset(&parts[np], 0, sizeof parts[np]);
                parts[np].nx = (int32_t)nx;
                parts[np].ny = (int32_t)ny;
                np++;
            }
        }
        const char *nl = strchr(p, '\n');
        if (!nl) break;
        p = nl + 1;
    }
    return np;
}

/* Logits of braid after decoding the parts (image parts' rows from rows[], in order) on a fresh context. */
static float *braid_logits_after(braid_model *m, braid_prompt_part *parts, int np, const float *rows, int n_embd) {
    braid_context *c = cmp_ctx(m, 1024, 1, 512, 256, 8);
    if (!c) return NULL;
    const float *r = rows;
    for (int i = 0; i < np; i++)
        if (parts[i].nx) {
            parts[i].embd = r;
            r += (size_t)parts[i].nx * parts[i].ny * n_embd;
        }
    braid_gen_params gp = braid_gen_default_params();
    gp.n_predict = 0;
    braid_gen *g = NULL;
    float *out = NULL;
    CHECK_STATUS(braid_gen_new(c, &gp, &g), BRAID_OK);
    if (g) CHECK_STATUS(braid_gen_prompt_parts(g, parts, np), BRAID_OK);
    const int V = braid_model_n_vocab(m);
    /* the prompts here end with a short text part, decoded as one batch with logits on its last row */
    const float *lg = np > 0 && !parts[np - 1].nx ? braid_logits(c, parts[np - 1].n_tokens - 1) : NULL;
    if (lg && (out = malloc((size_t)V * sizeof(float)))) memcpy(out, lg, (size_t)V * sizeof(float));
    CHECK(out != NULL, "no logits after the prompt");
    braid_gen_free(g);
    braid_context_free(c);
    return out;
}

int main(void) {
    snprintf(build_dir, sizeof build_dir, "%s", test_env("BRAID_BUILD_DIR", "build"));
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/tests/oracle_vision", build_dir);
    CHECK(access(probe, X_OK) == 0, "%s is missing: run scripts/build-mtmd-oracle.sh (setup.sh does) and rebuild",
          probe);
    if (access(probe, X_OK) != 0) TEST_MAIN_END();
    if (!mkdtemp(dir)) TEST_SKIP("no temporary directory");

    /* a qwen35 text model of width 256, one of width 768 for the deepstack rows, projectors, images */
    CHECK(gen("--arch qwen35 --embd 256", "text.gguf"), "text model");
    CHECK(gen("--arch qwen35 --embd 768 --type q8_0", "text768.gguf"), "text model 768");
    CHECK(gen("--arch qwen3vl-mmproj --type f32", "mm-f32.gguf"), "f32 projector");
    CHECK(gen("--arch qwen3vl-mmproj --type f16 --seed 2", "mm-f16.gguf"), "f16 projector");
    CHECK(gen("--arch qwen3vl-mmproj --type f32 --pos-side 8 --seed 3", "mm-s8.gguf"), "projector with an 8x8 grid");
    CHECK(gen("--arch qwen3vl-mmproj --type f32 --layers 3 --deepstack 0,2 --seed 4", "mm-ds.gguf"), "deepstack");
    /* Qwen's head size, 72: not a multiple of the vector widths (the attention kernels' tails). A smaller weight
     * std keeps rows of the other projectors' magnitude (~1.5; at 0.05 they reach 4 and the fp16 GELU-table
     * flips alone pass 2e-3, before and after the dense attention) */
    CHECK(gen("--arch qwen3vl-mmproj --type f16 --embd 144 --heads 2 --std 0.03 --seed 5", "mm-d72.gguf"), "head 72");
    CHECK(gen("--arch qwen3vl-mmproj --type f32 --embd 144 --heads 2 --std 0.03 --seed 6", "mm-d72-f32.gguf"),
          "head size 72, f32");
    const struct {
        const char *name;
        int w, h;
        tk_pattern kind;
    } imgs[] = {{"a.png", 64, 48, TK_GRADIENT}, {"b.png", 100, 37, TK_NOISE},  {"c.png", 33, 1000, TK_NOISE},
                {"d.png", 128, 128, TK_CHECKER}, {"e.png", 200, 150, TK_NOISE}, {"f.png", 16, 16, TK_GRADIENT}};
    for (size_t i = 0; i < sizeof imgs / sizeof imgs[0]; i++)
        CHECK(tk_png_write_pattern(path_in(imgs[i].name), imgs[i].w, imgs[i].h, imgs[i].kind, i + 1), "image");

    /* rows; grids from reference/vision.md §1.4's table */
    const char *set[] = {"a.png", "b.png", "c.png", "f.png"};
    const int32_t set_grid[] = {4, 3, 5, 2, 1, 31, 3, 3};
    check_rows("f32: upscale, pad, 33x1000, 16x16", "mm-f32.gguf", 0, set, 4, 1e-3, set_grid);
    check_rows("f16: upscale, pad, 33x1000, 16x16", "mm-f16.gguf", 0, set, 4, 2e-3, set_grid);
    check_rows("f16: head size 72", "mm-d72.gguf", 0, set, 4, 2e-3, set_grid);
    check_rows("f32: head size 72", "mm-d72-f32.gguf", 0, set, 4, 1e-3, set_grid);
    const char *exact[] = {"d.png"};
    const int32_t exact_grid[] = {4, 4};
    check_rows("f32: exact 8x8 position grid", "mm-s8.gguf", 0, exact, 1, 1e-3, exact_grid);
    const char *down[] = {"e.png"};
    const int32_t down_grid[] = {4, 3};
    check_rows("f32: downscale to 16 tokens", "mm-f32.gguf", 16, down, 1, 1e-3, down_grid);
    check_rows("f32: deepstack 0,2 (rows 3 x 256)", "mm-ds.gguf", 0, exact, 1, 1e-3, NULL);

    /* two images in a prompt: the logits after it */
    {
        char *out = oracle_vision("-m text.gguf --mmproj mm-f32.gguf --image b.png --image a.png "
                                  "-p 'First <__media__> then <__media__> compare.' --dump-embd two.f32 "
                                  "--dump-logits two.logits");
        braid_model *m = NULL;
        braid_model_params mp = braid_model_default_params();
        CHECK_STATUS(braid_model_load(path_in("text.gguf"), &mp, &m), BRAID_OK);
        braid_token toks[256];
        braid_prompt_part parts[8];
        int np = out ? oracle_parts(out, toks, 256, parts, 8) : 0;
        CHECK(np == 5 && parts[1].nx == 5 && parts[3].nx == 4, "prompt parts: %d", np);
        size_t n_rows = 0, n_ref = 0, n_mine = 0;
        float *rows = read_f32("two.f32", &n_rows), *ref = read_f32("two.logits", &n_ref);
        const char *two[] = {"b.png", "a.png"};
        float *mine_rows = braid_rows("mm-f32.gguf", 0, two, 2, &n_mine, NULL);
        if (m && np == 5 && rows && ref && mine_rows && n_mine == n_rows) {
            const int V = braid_model_n_vocab(m);
            CHECK(n_ref == (size_t)V, "%zu logits", n_ref);
            float *with_theirs = braid_logits_after(m, parts, np, rows, 256);
            float *with_mine = braid_logits_after(m, parts, np, mine_rows, 256);
            if (with_theirs && with_mine && n_ref == (size_t)V) {
                cmp a = {0}, b = {0};
                cmp_row(&a, with_theirs, ref, V);
                cmp_row(&b, with_mine, ref, V);
                report("logits, mtmd's rows at braid's positions", &a);
                report("logits, braid's rows", &b);
                CHECK(a.max_rel <= 1e-4 && a.top1_equal == 1, "logits with mtmd's rows: rel %.3e", a.max_rel);
                CHECK(b.max_rel <= 1e-3 && b.top1_equal == 1, "logits with braid's rows: rel %.3e", b.max_rel);
            }
            free(with_theirs);
            free(with_mine);
        }
        /* braid run: the same prompt, the same text tokens, the same rows */
        char cmd[16384];
        snprintf(cmd, sizeof cmd,
                 "cd %s && %s/braid run -m text.gguf --mmproj mm-f32.gguf --image b.png --image a.png -t 2 -n 2 "
                 "--temp 0 -p 'First <__image__> then <__image__> compare.' --dump-image-embd run.f32 --json 2>/dev/null",
                 dir, build_dir);
        int st;
        char *js = run(cmd, &st);
        CHECK(st == 0 && js, "braid run with two images");
        char want[4096] = "\"prompt_tokens\":[";
        for (int i = 0; i < np; i++)
            for (int j = 0; j < parts[i].n_tokens; j++)
                snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d",
                         want[strlen(want) - 1] == '[' ? "" : ",", parts[i].tokens[j]);
        strcat(want, "]");
        CHECK(js && strstr(js, want), "braid run's prompt tokens: %s, want %s", js ? js : "", want);
        size_t n_run = 0;
        float *run_rows = read_f32("run.f32", &n_run);
        CHECK(run_rows && n_run == n_rows && max_abs_diff(run_rows, rows, n_rows) <= 1e-3, "--dump-image-embd: %zu floats",
              n_run);
        free(run_rows);
        free(js);
        /* no marker: the image goes before the text */
        free(out);
        out = oracle_vision("-m text.gguf --mmproj mm-f32.gguf --image a.png -p '<__media__>Describe it.' --no-eval");
        np = out ? oracle_parts(out, toks, 256, parts, 8) : 0;
        snprintf(cmd, sizeof cmd,
                 "cd %s && %s/braid run -m text.gguf --mmproj mm-f32.gguf --image a.png -t 2 -n 1 --temp 0 "
                 "-p 'Describe it.' --json 2>/dev/null",
                 dir, build_dir);
        js = run(cmd, &st);
        snprintf(want, sizeof want, "\"prompt_tokens\":[");
        for (int i = 0; i < np; i++)
            for (int j = 0; j < parts[i].n_tokens; j++)
                snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d",
                         want[strlen(want) - 1] == '[' ? "" : ",", parts[i].tokens[j]);
        strcat(want, "]");
        CHECK(st == 0 && js && np == 3 && strstr(js, want), "no marker: %s, want %s", js ? js : "", want);
        free(js);
        free(out);
        free(rows);
        free(ref);
        free(mine_rows);
        braid_model_free(m);
    }

    /* refusals: a deepstack projector for qwen35 (braid and mtmd both), a truncated image, a marker count */
    {
        braid_model *m = NULL;
        braid_model_params mp = braid_model_default_params();
        mp.vocab_only = 0;
        CHECK_STATUS(braid_model_load(path_in("text768.gguf"), &mp, &m), BRAID_OK);
        braid_mmproj *mm = NULL;
        CHECK_STATUS(braid_mmproj_load(path_in("mm-ds.gguf"), NULL, &mm), BRAID_OK);
        CHECK(mm && braid_mmproj_n_embd(mm) == 768, "deepstack rows %d wide", mm ? braid_mmproj_n_embd(mm) : 0);
        if (mm && m) {
            CHECK_STATUS(braid_mmproj_check_model(mm, m), BRAID_E_MISMATCH);
            CHECK(strstr(braid_last_error(), "deepstack"), "reason: %s", braid_last_error());
        }
        braid_mmproj_free(mm);
        braid_model_free(m);
        char cmd[8192];
        int st;
        snprintf(cmd, sizeof cmd, "cd %s && %s/tests/oracle_vision -m text.gguf --mmproj mm-ds.gguf --image a.png --no-eval 2>&1",
                 dir, build_dir);
        char *out = test_run_cmd(cmd, &st);
        CHECK(st != 0 && out && strstr(out, "mismatch"), "mtmd with a deepstack projector for qwen35: %d", st);
        free(out);
        size_t n = 0;
        char *png = test_read_file(path_in("b.png"), &n);
        CHECK(png && tk_write_file(path_in("cut.png"), (const uint8_t *)png, n / 2), "truncated copy");
        free(png);
        const struct {
            const char *args, *word;
        } bad[] = {{"--mmproj mm-f32.gguf --image cut.png -p x", "truncated"},
                   {"--mmproj mm-ds.gguf --image a.png -p x", "deepstack"},
                   {"--mmproj mm-f32.gguf --image a.png -p '<__image__> and <__image__>'", "markers"},
                   {"--mmproj text.gguf --image a.png -p x", "clip"}};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            snprintf(cmd, sizeof cmd, "cd %s && %s/braid run -m text.gguf -n 1 %s 2>&1", dir, build_dir, bad[i].args);
            out = test_run_cmd(cmd, &st);
            CHECK(st != 0 && out && strstr(out, bad[i].word), "braid run %s: status %d, '%s'", bad[i].args, st,
                  out ? out : "");
            free(out);
        }
    }

    char cmd[8192];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    int st;
    free(test_run_cmd(cmd, &st));
    TEST_MAIN_END();
}
