/* test_vision.c — the vision encoder without the oracle: the grid every image size resizes to (the table of
 * reference/vision.md §1.4, measured with llama.cpp, including the token limits), rows that are finite, vary
 * and do not depend on the thread count, and refusals with the reason: a text model given as a projector, a
 * projector missing a tensor, bad limits, a deepstack projector for a text model without deepstack input. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "braid.h"
#include "genmodel/gen_mmproj.h"
#include "genmodel/genmodel.h"
#include "gguf/gguf.h"
#include "test.h"

static char dir[] = "/tmp/braid_unit_vision_XXXXXX";

static const char *in_dir(const char *name) {
    static char p[2][4096];
    static int k;
    k ^= 1;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static braid_image *solid(int w, int h, uint8_t v) {
    uint8_t *rgb = malloc((size_t)w * h * 3);
    for (size_t i = 0; rgb && i < (size_t)w * h * 3; i++) rgb[i] = (uint8_t)(v + i * 7);
    braid_image *im = NULL;
    if (rgb) CHECK_STATUS(braid_image_from_rgb(w, h, rgb, &im), BRAID_OK);
    free(rgb);
    return im;
}

int main(void) {
    if (!mkdtemp(dir)) TEST_SKIP("no temporary directory");
    gen_mmproj_params gp;
    gen_mmproj_default(&gp);
    gp.type = BRAID_TYPE_F32;
    CHECK_STATUS(gen_mmproj_write(&gp, in_dir("mm.gguf"), NULL), BRAID_OK);
    gp.n_layer = 3;
    gp.n_deepstack = 2;
    gp.deepstack[0] = 0;
    gp.deepstack[1] = 2;
    CHECK_STATUS(gen_mmproj_write(&gp, in_dir("ds.gguf"), NULL), BRAID_OK);

    braid_mmproj *mm = NULL;
    CHECK_STATUS(braid_mmproj_load(in_dir("mm.gguf"), NULL, &mm), BRAID_OK);
    if (!mm) TEST_MAIN_END();
    CHECK(braid_mmproj_n_embd(mm) == 256, "n_embd %d", braid_mmproj_n_embd(mm));

    /* grids: W x H -> nx x ny (reference/vision.md §1.4, measured with mtmd) */
    const struct {
        int w, h, nx, ny, max_tokens;
    } grid[] = {{64, 48, 4, 3, 0},   {16, 16, 3, 3, 0},   {100, 37, 5, 2, 0},     {33, 1000, 1, 31, 0},
                {200, 150, 6, 5, 0}, {256, 256, 8, 8, 0}, {1920, 1080, 60, 34, 0}, {200, 150, 4, 3, 16}};
    for (size_t i = 0; i < sizeof grid / sizeof grid[0]; i++) {
        braid_mmproj *m = mm;
        if (grid[i].max_tokens) {
            braid_mmproj_params p = braid_mmproj_default_params();
            p.image_max_tokens = grid[i].max_tokens;
            m = NULL;
            CHECK_STATUS(braid_mmproj_load(in_dir("mm.gguf"), &p, &m), BRAID_OK);
        }
        braid_image *im = solid(grid[i].w, grid[i].h, 3);
        int32_t nx = 0, ny = 0;
        if (m && im) CHECK_STATUS(braid_mmproj_image_grid(m, im, &nx, &ny), BRAID_OK);
        CHECK(nx == grid[i].nx && ny == grid[i].ny, "%dx%d (max %d): grid %dx%d, want %dx%d", grid[i].w, grid[i].h,
              grid[i].max_tokens, nx, ny, grid[i].nx, grid[i].ny);
        braid_image_free(im);
        if (m != mm) braid_mmproj_free(m);
    }

    /* rows: finite, not constant, the same bits on 1 and 3 threads */
    braid_image *im = solid(100, 37, 40);
    float *r1 = NULL, *r3 = NULL;
    int32_t nx = 0, ny = 0;
    braid_mmproj_params p1 = braid_mmproj_default_params(), p3 = p1;
    p1.n_threads = 1;
    p3.n_threads = 3;
    braid_mmproj *m1 = NULL, *m3 = NULL;
    CHECK_STATUS(braid_mmproj_load(in_dir("mm.gguf"), &p1, &m1), BRAID_OK);
    CHECK_STATUS(braid_mmproj_load(in_dir("mm.gguf"), &p3, &m3), BRAID_OK);
    if (m1 && m3 && im) {
        CHECK_STATUS(braid_mmproj_encode(m1, im, &r1, &nx, &ny), BRAID_OK);
        CHECK_STATUS(braid_mmproj_encode(m3, im, &r3, NULL, NULL), BRAID_OK);
        CHECK(nx == 5 && ny == 2, "grid %dx%d", nx, ny);
        int finite = r1 != NULL, varied = 0;
        for (int i = 0; r1 && i < nx * ny * 256; i++) {
            finite &= isfinite(r1[i]) != 0;
            varied |= fabsf(r1[i] - r1[0]) > 1e-3f;
        }
        CHECK(finite && varied, "rows finite %d varied %d", finite, varied);
        CHECK(r1 && r3 && !memcmp(r1, r3, (size_t)nx * ny * 256 * sizeof(float)), "1 vs 3 threads differ");
    }
    braid_free(r1);
    braid_free(r3);
    braid_mmproj_free(m1);
    braid_mmproj_free(m3);

    /* refusals */
    braid_mmproj *bad = (braid_mmproj *)(uintptr_t)1;
    gen_params tp;
    gen_params_default(&tp);
    tp.vocab = "none";
    tp.over.n_embd = 256;
    CHECK_STATUS(gen_model_write(&tp, in_dir("text.gguf"), NULL), BRAID_OK);
    CHECK_STATUS(braid_mmproj_load(in_dir("text.gguf"), NULL, &bad), BRAID_E_FORMAT);
    CHECK(bad == NULL && strstr(braid_last_error(), "clip"), "text model as projector: %s", braid_last_error());
    CHECK_STATUS(braid_mmproj_load(in_dir("missing.gguf"), NULL, &bad), BRAID_E_IO);
    braid_mmproj_params lim = braid_mmproj_default_params();
    lim.image_min_tokens = 100;
    lim.image_max_tokens = 10;
    CHECK_STATUS(braid_mmproj_load(in_dir("mm.gguf"), &lim, &bad), BRAID_E_INVALID);
    /* a projector without one of its tensors: a copy of every key and all tensors but mm.2.weight */
    {
        gguf_file *f = NULL;
        gguf_writer *w = NULL;
        CHECK_STATUS(gguf_open(in_dir("mm.gguf"), &f), BRAID_OK);
        CHECK_STATUS(gguf_writer_new(3, &w), BRAID_OK);
        for (size_t i = 0; f && w && i < gguf_n_kv(f); i++)
            CHECK_STATUS(gguf_writer_set_value(w, gguf_kv_at(f, i)->key, &gguf_kv_at(f, i)->value), BRAID_OK);
        for (size_t i = 0; f && w && i < gguf_n_tensors(f); i++) {
            const gguf_tensor *t = gguf_tensor_at(f, i);
            if (strcmp(t->name, "mm.2.weight"))
                CHECK_STATUS(gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data), BRAID_OK);
        }
        if (w) CHECK_STATUS(gguf_writer_write(w, in_dir("cut.gguf"), NULL, NULL), BRAID_OK);
        gguf_writer_free(w);
        gguf_close(f);
        CHECK_STATUS(braid_mmproj_load(in_dir("cut.gguf"), NULL, &bad), BRAID_E_FORMAT);
        CHECK(strstr(braid_last_error(), "mm.2.weight"), "reason: %s", braid_last_error());
    }
    braid_model *model = NULL;
    braid_model_params mp = braid_model_default_params();
    CHECK_STATUS(braid_model_load(in_dir("text.gguf"), &mp, &model), BRAID_OK);
    braid_mmproj *ds = NULL;
    CHECK_STATUS(braid_mmproj_load(in_dir("ds.gguf"), NULL, &ds), BRAID_OK);
    if (model && ds) {
        CHECK(braid_mmproj_n_embd(ds) == 768, "deepstack width %d", braid_mmproj_n_embd(ds));
        CHECK_STATUS(braid_mmproj_check_model(mm, model), BRAID_OK);
        CHECK_STATUS(braid_mmproj_check_model(ds, model), BRAID_E_MISMATCH);
        CHECK(strstr(braid_last_error(), "deepstack"), "reason: %s", braid_last_error());
        float *rows = NULL;
        braid_image *small = solid(64, 64, 9);
        CHECK_STATUS(braid_mmproj_encode(ds, small, &rows, &nx, &ny), BRAID_OK); /* encodable, just not for qwen35 */
        braid_free(rows);
        braid_image_free(small);
    }
    CHECK_STATUS(braid_mmproj_encode(mm, NULL, &r1, &nx, &ny), BRAID_E_INVALID);
    braid_mmproj_free(ds);
    braid_model_free(model);
    braid_image_free(im);
    braid_mmproj_free(mm);

    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    int st;
    free(test_run_cmd(cmd, &st));
    TEST_MAIN_END();
}
