/* test_quant_mix.c — braid quantize's preset rules (models/quant_mix.h) on a small hand-made file: which tensors
 * are quantized, the role and layer rules of Q4_K_M / Q3_K_M / Q2_K / MXFP4_MOE, the fallback for rows that are
 * not a multiple of 256, refused and unknown presets, and that the written file carries the planned types and
 * bytes that dequantize close to the input. (Byte-identity with llama.cpp's own quantizer is checked in
 * tests/conformance/test_quant_mix.c.) */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "braid.h"
#include "gguf/gguf.h"
#include "models/quant_mix.h"
#include "tensor/types.h"
#include "test.h"

enum { NT = 7 };
static const char *const names[NT] = {"token_embd.weight",   "output.weight",          "blk.0.attn_norm.weight",
                                      "blk.0.attn_qkv.weight", "blk.0.ffn_down.weight", "blk.1.ffn_down.weight",
                                      "blk.1.ffn_up_exps.weight"};
static const int64_t shapes[NT][3] = {{256, 64, 1}, {256, 64, 1}, {256, 1, 1}, {256, 128, 1},
                                      {704, 256, 1}, {512, 256, 1}, {256, 64, 4}};

static void write_input(const char *path) {
    gguf_writer *w = NULL;
    CHECK_STATUS(gguf_writer_new(3, &w), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_str(w, "general.architecture", "qwen35"), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_u32(w, "general.file_type", 1), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_u32(w, "qwen35.block_count", 8), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_u32(w, "qwen35.attention.head_count", 4), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_u32(w, "qwen35.attention.head_count_kv", 2), BRAID_OK);
    static uint16_t data[NT][256 * 256 * 4];
    uint64_t x = 12345;
    for (int t = 0; t < NT; t++) {
        const int64_t n = shapes[t][0] * shapes[t][1] * shapes[t][2];
        for (int64_t i = 0; i < n; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            data[t][i] = bd_fp32_to_fp16((float)((double)(x >> 11) / 9007199254740992.0 - 0.5));
        }
        const uint32_t nd = shapes[t][2] > 1 ? 3 : shapes[t][1] > 1 ? 2 : 1;
        CHECK_STATUS(gguf_writer_add_tensor(w, names[t], BD_TYPE_F16, nd, shapes[t], data[t]), BRAID_OK);
    }
    CHECK_STATUS(gguf_writer_write(w, path, NULL, NULL), BRAID_OK);
    gguf_writer_free(w);
}

/* The planned type of each tensor, by name order of names[]. */
static void plan(const gguf_file *f, const char *preset, uint32_t out[NT]) {
    uint32_t types[NT];
    CHECK_STATUS(bd_quant_plan(f, preset, types), BRAID_OK);
    for (int t = 0; t < NT; t++)
        for (size_t i = 0; i < gguf_n_tensors(f); i++)
            if (!strcmp(gguf_tensor_at(f, i)->name, names[t])) out[t] = types[i];
}

int main(void) {
    char dir[] = "/tmp/braid_quantmix_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char in[600], out[600];
    snprintf(in, sizeof in, "%s/in.gguf", dir);
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    write_input(in);
    gguf_file *f = NULL;
    CHECK_STATUS(gguf_open(in, &f), BRAID_OK);
    if (!f) TEST_MAIN_END();

    uint32_t t[NT];
    plan(f, "q4_k_m", t);
    /* output: Q6_K; the embeddings (untied) the main type; the norm stays; attention V-like (the GDN qkv) and FFN
     * down of layer 0 (the first eighth of 8) get Q6_K, which for rows of 704 falls back to Q8_0; layer 1's FFN
     * down keeps the main type */
    CHECK(t[0] == BD_TYPE_Q4_K && t[1] == BD_TYPE_Q6_K && t[2] == BD_TYPE_F16, "q4_k_m: embd %u output %u norm %u", t[0],
          t[1], t[2]);
    CHECK(t[3] == BD_TYPE_Q6_K && t[4] == BD_TYPE_Q8_0 && t[5] == BD_TYPE_Q4_K, "q4_k_m: qkv %u down0 %u down1 %u", t[3],
          t[4], t[5]);
    CHECK(t[6] == BD_TYPE_Q4_K, "q4_k_m: experts %u", t[6]);
    plan(f, "Q2_K", t);
    CHECK(t[3] == BD_TYPE_Q3_K && t[4] == BD_TYPE_Q4_0 && t[5] == BD_TYPE_Q3_K && t[6] == BD_TYPE_Q2_K,
          "q2_k: qkv %u down0 %u down1 %u up %u", t[3], t[4], t[5], t[6]);
    plan(f, "Q3_K_M", t);
    CHECK(t[3] == BD_TYPE_Q5_K && t[4] == BD_TYPE_Q5_0 && t[5] == BD_TYPE_Q4_K, "q3_k_m: qkv %u down0 %u down1 %u",
          t[3], t[4], t[5]);
    plan(f, "MXFP4_MOE", t);
    CHECK(t[6] == BD_TYPE_MXFP4 && t[3] == BD_TYPE_Q8_0 && t[1] == BD_TYPE_Q8_0, "mxfp4_moe: experts %u qkv %u out %u",
          t[6], t[3], t[1]);

    uint32_t ft, mt;
    CHECK_STATUS(bd_quant_preset("IQ2_XXS", &ft, &mt), BRAID_E_UNSUPPORTED);
    CHECK(strstr(braid_last_error(), "importance matrix") != NULL, "refusal says why: %s", braid_last_error());
    CHECK_STATUS(bd_quant_preset("Q4_K_X", &ft, &mt), BRAID_E_INVALID);
    CHECK_STATUS(bd_quant_preset(NULL, &ft, &mt), BRAID_E_INVALID);
    CHECK_STATUS(bd_quant_preset("q8_0", &ft, &mt), BRAID_OK);
    CHECK(ft == 7 && mt == BD_TYPE_Q8_0, "q8_0: ftype %u type %u", ft, mt);

    /* the file: planned types, file_type last, values close to the input */
    CHECK_STATUS(bd_quant_write(f, "Q4_K_M", out), BRAID_OK);
    gguf_file *g = NULL;
    CHECK_STATUS(gguf_open(out, &g), BRAID_OK);
    if (g) {
        uint32_t want[NT];
        plan(f, "Q4_K_M", want);
        int ok = gguf_n_tensors(g) == NT;
        double worst = 0;
        float *a = bd_mallocn(256 * 256 * 4, sizeof(float)), *b = bd_mallocn(256 * 256 * 4, sizeof(float));
        for (int k = 0; k < NT && ok && a && b; k++) {
            const gguf_tensor *src = gguf_find_tensor(f, names[k]), *dst = gguf_find_tensor(g, names[k]);
            ok = dst && dst->type == want[k];
            if (!ok) break;
            const int64_t n = shapes[k][0] * shapes[k][1] * shapes[k][2];
            bd_type_traits_get(src->type)->to_float(src->data, a, n);
            bd_type_traits_get(dst->type)->to_float(dst->data, b, n);
            for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
        }
        CHECK(ok, "written tensor types follow the plan");
        CHECK(worst < 0.1, "dequantized output within %.3g of the input (values in [-0.5, 0.5])", worst);
        const gguf_kv *last = gguf_kv_at(g, gguf_n_kv(g) - 1);
        CHECK(!strcmp(last->key, "general.file_type") && last->value.u64 == 15, "general.file_type last, 15");
        bd_free(a);
        bd_free(b);
        gguf_close(g);
    }
    /* requantizing is refused */
    gguf_file *q = NULL;
    CHECK_STATUS(gguf_open(out, &q), BRAID_OK);
    if (q) {
        char re[600];
        snprintf(re, sizeof re, "%s/re.gguf", dir);
        CHECK_STATUS(bd_quant_write(q, "Q8_0", re), BRAID_E_UNSUPPORTED);
        CHECK(strstr(braid_last_error(), "requantizing") != NULL, "requantize refusal: %s", braid_last_error());
        unlink(re);
        gguf_close(q);
    }
    gguf_close(f);
    unlink(in);
    unlink(out);
    rmdir(dir);
    TEST_MAIN_END();
}
