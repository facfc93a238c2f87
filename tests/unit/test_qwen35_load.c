/* test_qwen35_load.c — loading qwen35 GGUFs: a valid gen-model file loads with the right dimensions, and each
 * way a file can be wrong (a key of the wrong type, a bad shape, a missing or extra tensor, a broken
 * constraint, an unsupported architecture) is refused with BRAID_E_FORMAT or BRAID_E_UNSUPPORTED and a reason.
 * Also the decode API's argument checks (nothing changes on a refused batch) and the fingerprint check of
 * state loading. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/status.h"
#include "braid.h"
#include "gguf/gguf.h"
#include "genmodel/genmodel.h"
#include "test.h"

static char dir[] = "/tmp/braid_q35load_XXXXXX";
static char base_path[600];

/* A mutation applied while copying the base file: key/tensor to change, drop or add. */
typedef struct mutation {
    const char *drop_key;       /* omit this key */
    const char *i32_key;        /* write this u32 key as INT32 instead */
    const char *u32_key;        /* set this key to u32_val */
    uint32_t u32_val;
    const char *arch;           /* replace general.architecture (and rename the arch keys) */
    const char *drop_tensor;    /* omit this tensor */
    const char *swap_tensor;    /* write this 2-D tensor with ne0/ne1 swapped */
    const char *f16_tensor;     /* write this F32 tensor as F16 (same element count) */
    const char *extra_tensor;   /* add a tensor of this name */
    int bad_layer_array;        /* write attention.recurrent_layers with a wrong length */
    const char *nan_tensor;     /* write this F32 tensor as all NaN */
    const char *f32_key;        /* set this float key to f32_val */
    float f32_val;
    uint64_t mtp_hole;          /* add an MTP block (nextn_predict_layers 1) whose one tensor, last in the file,
                                 * declares this many bytes of data, a sparse hole (0: none) */
} mutation;

#define MTP_TENSOR "blk.4.nextn.hole.weight"

/* Gives the last tensor MTP_TENSOR of the file at path ne0 = bytes / 4 (F32) and extends the file over it
 * without writing: the data is a hole that reads as zeros and takes no disk space. */
static braid_status make_hole(const char *path, uint64_t bytes) {
    size_t n = 0;
    char *d = test_read_file(path, &n);
    if (!d) return bd_error(BRAID_E_IO, "cannot read %s", path);
    const size_t nl = strlen(MTP_TENSOR);
    char *at = NULL;
    for (size_t i = 0; i + nl + 24 < n && !at; i++)
        if (!memcmp(d + i, MTP_TENSOR, nl)) at = d + i;
    braid_status st = BRAID_OK;
    uint64_t off = 0;
    int64_t ne0 = (int64_t)(bytes / 4);
    if (!at) st = bd_error(BRAID_E_FORMAT, "no %s in %s", MTP_TENSOR, path);
    else memcpy(at + nl + 4, &ne0, 8), memcpy(&off, at + nl + 4 + 8 + 4, 8); /* n_dims, ne0, type, offset */
    gguf_file *f = NULL;
    size_t data_off = 0;
    if (st == BRAID_OK && (st = gguf_open(path, &f)) == BRAID_OK) data_off = gguf_data_offset(f), gguf_close(f);
    FILE *o = st == BRAID_OK ? fopen(path, "r+b") : NULL;
    if (st == BRAID_OK && (!o || fwrite(d, 1, n, o) != n || fflush(o) || ftruncate(fileno(o), (off_t)(data_off + off + bytes))))
        st = bd_error(BRAID_E_IO, "cannot patch %s", path);
    if (o) fclose(o);
    free(d);
    return st;
}

static braid_status rewrite(const char *out, const mutation *mu) {
    gguf_file *f;
    BD_TRY(gguf_open(base_path, &f));
    gguf_writer *w;
    braid_status st = gguf_writer_new(3, &w);
    if (st != BRAID_OK) {
        gguf_close(f);
        return st;
    }
    char key[256];
    void *tmp[8] = {0};
    int n_tmp = 0;
    for (size_t i = 0; i < gguf_n_kv(f) && st == BRAID_OK; i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        const char *k = kv->key;
        if (mu->drop_key && !strcmp(k, mu->drop_key)) continue;
        if (mu->arch && !strncmp(k, "qwen35.", 7)) {
            snprintf(key, sizeof key, "%s.%s", mu->arch, k + 7);
            k = key;
        }
        if (mu->arch && !strcmp(k, "general.architecture")) st = gguf_writer_set_str(w, k, mu->arch);
        else if (mu->i32_key && !strcmp(k, mu->i32_key)) st = gguf_writer_set_i32(w, k, (int32_t)kv->value.u64);
        else if (mu->u32_key && !strcmp(k, mu->u32_key)) st = gguf_writer_set_u32(w, k, mu->u32_val);
        else if (mu->f32_key && !strcmp(k, mu->f32_key)) st = gguf_writer_set_f32(w, k, mu->f32_val);
        else if (mu->mtp_hole && !strcmp(k, "qwen35.block_count")) st = gguf_writer_set_u32(w, k, (uint32_t)kv->value.u64 + 1);
        else st = gguf_writer_set_value(w, k, &kv->value);
    }
    if (st == BRAID_OK && mu->f32_key && !gguf_find(f, mu->f32_key)) st = gguf_writer_set_f32(w, mu->f32_key, mu->f32_val);
    if (st == BRAID_OK && mu->mtp_hole) st = gguf_writer_set_u32(w, "qwen35.nextn_predict_layers", 1);
    if (st == BRAID_OK && mu->bad_layer_array) {
        const uint8_t flags[3] = {1, 0, 1};
        st = gguf_writer_set_array(w, "qwen35.attention.recurrent_layers", GGUF_TYPE_BOOL, flags, 3);
    }
    for (size_t i = 0; i < gguf_n_tensors(f) && st == BRAID_OK; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (mu->drop_tensor && !strcmp(t->name, mu->drop_tensor)) continue;
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        uint32_t type = t->type;
        const void *data = t->data;
        if (mu->swap_tensor && !strcmp(t->name, mu->swap_tensor)) ne[0] = t->ne[1], ne[1] = t->ne[0];
        if (mu->nan_tensor && !strcmp(t->name, mu->nan_tensor) && t->type == BRAID_TYPE_F32 && n_tmp < 8) {
            float *x = bd_mallocn(t->nbytes / 4, sizeof(float));
            for (size_t j = 0; x && j < t->nbytes / 4; j++) x[j] = NAN;
            tmp[n_tmp++] = x;
            data = x;
        }
        if (mu->f16_tensor && !strcmp(t->name, mu->f16_tensor) && n_tmp < 8) {
            uint16_t *h = bd_calloc((size_t)t->ne[0], 2); /* zeros: only the type matters here */
            tmp[n_tmp++] = h;
            type = BRAID_TYPE_F16;
            data = h;
        }
        st = gguf_writer_add_tensor(w, t->name, type, t->n_dims, ne, data);
    }
    if (st == BRAID_OK && mu->extra_tensor) {
        static const float z[64];
        const int64_t ne[1] = {64};
        st = gguf_writer_add_tensor(w, mu->extra_tensor, BRAID_TYPE_F32, 1, ne, z);
    }
    static const float zeros[64];
    if (st == BRAID_OK && mu->mtp_hole) st = gguf_writer_add_tensor(w, MTP_TENSOR, BRAID_TYPE_F32, 1, (const int64_t[]){64}, zeros);
    if (st == BRAID_OK) st = gguf_writer_write(w, out, NULL, NULL);
    gguf_writer_free(w);
    gguf_close(f);
    if (st == BRAID_OK && mu->mtp_hole) st = make_hole(out, mu->mtp_hole);
    for (int i = 0; i < n_tmp; i++) bd_free(tmp[i]);
    return st;
}

/* Loads a mutated copy and expects `want`; prints the reason. */
static void expect(const char *what, const mutation *mu, braid_status want) {
    char path[700];
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    braid_status st = rewrite(path, mu);
    CHECK(st == BRAID_OK, "%s: rewrite failed: %s", what, braid_last_error());
    braid_model *m = NULL;
    st = braid_model_load(path, NULL, &m);
    printf("  %-44s -> %s: %s\n", what, braid_status_name(st), braid_last_error());
    CHECK(st == want, "%s: got %s, want %s (%s)", what, braid_status_name(st), braid_status_name(want),
          braid_last_error());
    CHECK(strlen(braid_last_error()) > 0 || st == BRAID_OK, "%s: no reason given", what);
    braid_model_free(m);
    unlink(path);
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    snprintf(base_path, sizeof base_path, "%s/tiny.gguf", dir);
    gen_params gp;
    gen_params_default(&gp);
    gp.preset = "tiny";
    gp.vocab = "none";
    gp.n_vocab = 300;
    CHECK_STATUS(gen_model_write(&gp, base_path, NULL), BRAID_OK);

    /* the valid file */
    braid_model *m = NULL;
    CHECK_STATUS(braid_model_load(base_path, NULL, &m), BRAID_OK);
    if (m) {
        CHECK(!strcmp(braid_model_arch(m), "qwen35"), "arch %s", braid_model_arch(m));
        CHECK(braid_model_n_vocab(m) == 300, "n_vocab %d", braid_model_n_vocab(m));
        CHECK(braid_model_n_embd(m) == 64, "n_embd %d", braid_model_n_embd(m));
        CHECK(braid_model_n_layer(m) == 4, "n_layer %d", braid_model_n_layer(m));
        CHECK(braid_model_n_pos_per_token(m) == 4, "n_pos %d", braid_model_n_pos_per_token(m));
        CHECK(braid_model_has_attention(m) && braid_model_has_recurrent(m), "layer kinds");
    }

    printf("refused files:\n");
    expect("u32 key stored as int32", &(mutation){.i32_key = "qwen35.embedding_length"}, BRAID_E_FORMAT);
    expect("required key missing", &(mutation){.drop_key = "qwen35.ssm.state_size"}, BRAID_E_FORMAT);
    expect("inner_size != state_size * time_step_rank", &(mutation){.u32_key = "qwen35.ssm.inner_size", .u32_val = 60},
           BRAID_E_FORMAT);
    expect("time_step_rank not a multiple of group_count",
           &(mutation){.u32_key = "qwen35.ssm.group_count", .u32_val = 3}, BRAID_E_FORMAT);
    expect("rope.dimension_count odd", &(mutation){.u32_key = "qwen35.rope.dimension_count", .u32_val = 15},
           BRAID_E_FORMAT);
    expect("recurrent_layers of the wrong length", &(mutation){.bad_layer_array = 1}, BRAID_E_FORMAT);
    expect("tensor missing", &(mutation){.drop_tensor = "blk.1.attn_k_norm.weight"}, BRAID_E_FORMAT);
    expect("tensor with swapped dims", &(mutation){.swap_tensor = "blk.0.ffn_up.weight"}, BRAID_E_FORMAT);
    expect("norm weight not F32", &(mutation){.f16_tensor = "blk.2.attn_norm.weight"}, BRAID_E_FORMAT);
    expect("extra tensor", &(mutation){.extra_tensor = "blk.0.surprise.weight"}, BRAID_E_FORMAT);
    expect("unsupported architecture", &(mutation){.arch = "qwen99"}, BRAID_E_UNSUPPORTED);
    expect("unchanged copy loads", &(mutation){0}, BRAID_OK);

    /* issue 19: float hyperparameters are refused at load naming the key, not later as NaN logits */
    struct { const char *key; float v; } bad_f32[] = {
        {"qwen35.attention.layer_norm_rms_epsilon", NAN}, {"qwen35.attention.layer_norm_rms_epsilon", 0.0f},
        {"qwen35.attention.layer_norm_rms_epsilon", -1e-6f}, {"qwen35.attention.layer_norm_rms_epsilon", INFINITY},
        {"qwen35.rope.freq_base", 0.0f}, {"qwen35.rope.freq_base", -10000.0f}, {"qwen35.rope.freq_base", NAN},
        {"qwen35.rope.scaling.factor", NAN}, {"qwen35.rope.scaling.factor", -2.0f},
    };
    for (size_t i = 0; i < sizeof bad_f32 / sizeof bad_f32[0]; i++) {
        char what[96];
        snprintf(what, sizeof what, "%s = %g", bad_f32[i].key + 7, (double)bad_f32[i].v);
        expect(what, &(mutation){.f32_key = bad_f32[i].key, .f32_val = bad_f32[i].v}, BRAID_E_FORMAT);
        CHECK(strstr(braid_last_error(), bad_f32[i].key) != NULL, "%s: the reason names the key: %s", what,
              braid_last_error());
    }
    expect("rope.scaling.factor = 0 (no scaling)", &(mutation){.f32_key = "qwen35.rope.scaling.factor"}, BRAID_OK);
    /* issue 19: ssm.state_size out of range is reported as itself, not as a time_step_rank problem */
    const uint32_t bad_s[2] = {0, 1u << 31};
    for (int i = 0; i < 2; i++) {
        expect("ssm.state_size out of range", &(mutation){.u32_key = "qwen35.ssm.state_size", .u32_val = bad_s[i]},
               BRAID_E_FORMAT);
        CHECK(strstr(braid_last_error(), "state_size") && !strstr(braid_last_error(), "time_step_rank"),
              "state_size %u: the reason names the key: %s", bad_s[i], braid_last_error());
    }

    /* issue 19: model load prefaults only the tensors it binds; a skipped MTP block declaring 2 GiB (a sparse
     * hole) used to be read in full (RSS + 2 GiB, seconds) */
    {
        char hole[700];
        snprintf(hole, sizeof hole, "%s/mtp.gguf", dir);
        CHECK_STATUS(rewrite(hole, &(mutation){.mtp_hole = 2ull << 30}), BRAID_OK);
        const long page = sysconf(_SC_PAGESIZE);
        for (int pf = 1; pf >= 0; pf--) {
            braid_model_params mp = braid_model_default_params();
            CHECK(mp.prefault == 1, "prefault is on by default");
            mp.prefault = pf;
            long r0 = 0, r1 = 0, size;
            FILE *sm = fopen("/proc/self/statm", "r");
            if (sm && fscanf(sm, "%ld %ld", &size, &r0) != 2) r0 = 0;
            if (sm) fclose(sm);
            braid_model *mh = NULL;
            CHECK_STATUS(braid_model_load(hole, &mp, &mh), BRAID_OK);
            sm = fopen("/proc/self/statm", "r");
            if (sm && fscanf(sm, "%ld %ld", &size, &r1) != 2) r1 = 0;
            if (sm) fclose(sm);
            const double grew = (double)(r1 - r0) * (double)page / (1 << 20);
            printf("  MTP hole of 2 GiB, prefault %d: resident memory grew %.1f MiB\n", pf, grew);
            CHECK(r0 > 0 && r1 > 0 && grew < 256, "prefault %d: resident memory grew %.1f MiB", pf, grew);
            if (mh) CHECK(braid_model_n_layer(mh) == 4, "the MTP block is not a trunk layer");
            braid_model_free(mh);
        }
        unlink(hole);
    }

    /* issue 19: a model whose forward pass gives NaN (NaN weights) fails its decode naming the row */
    {
        char nanp[700];
        snprintf(nanp, sizeof nanp, "%s/nan.gguf", dir);
        CHECK_STATUS(rewrite(nanp, &(mutation){.nan_tensor = "output_norm.weight"}), BRAID_OK);
        braid_model *mn = NULL;
        CHECK_STATUS(braid_model_load(nanp, NULL, &mn), BRAID_OK);
        braid_context *cn = NULL;
        braid_context_params cp = braid_context_default_params();
        cp.n_ctx = 32;
        if (mn) CHECK_STATUS(braid_context_new(mn, &cp, &cn), BRAID_OK);
        if (cn) {
            braid_token t2[2] = {1, 2};
            braid_batch b = {.n_tokens = 2, .token = t2};
            CHECK_STATUS(braid_decode(cn, &b), BRAID_E_FORMAT);
            CHECK(strstr(braid_last_error(), "decode produced NaN logits at row 1"), "reason: %s", braid_last_error());
            CHECK(braid_seq_len(cn, 0) == 0 && braid_logits(cn, 1) == NULL, "a NaN decode was kept");
            braid_context_free(cn);
        }
        braid_model_free(mn);
        unlink(nanp);
    }
    char missing[700];
    snprintf(missing, sizeof missing, "%s/none.gguf", dir);
    braid_model *m2 = NULL;
    CHECK(braid_model_load(missing, NULL, &m2) != BRAID_OK && m2 == NULL, "a missing file loads");

    /* decode argument checks: refused batches change nothing */
    if (m) {
        braid_context_params cp = braid_context_default_params();
        cp.n_ctx = 64;
        cp.n_seq_max = 2;
        cp.kv_type = BRAID_TYPE_F32;
        braid_context *c = NULL;
        CHECK_STATUS(braid_context_new(m, &cp, &c), BRAID_OK);
        braid_token t[3] = {1, 2, 3};
        braid_batch b = {.n_tokens = 3, .token = t};
        CHECK_STATUS(braid_decode(c, &b), BRAID_OK);
        braid_token bad[2] = {4, 300};
        b = (braid_batch){.n_tokens = 2, .token = bad};
        CHECK_STATUS(braid_decode(c, &b), BRAID_E_RANGE);
        braid_seq_id sq[1] = {2};
        b = (braid_batch){.n_tokens = 1, .token = t, .seq = sq};
        CHECK_STATUS(braid_decode(c, &b), BRAID_E_RANGE);
        b = (braid_batch){.n_tokens = 0, .token = t};
        CHECK(braid_decode(c, &b) != BRAID_OK, "empty batch accepted");
        CHECK(braid_seq_len(c, 0) == 3 && braid_seq_len(c, 1) == 0, "refused batches changed lengths");
        braid_token many[70];
        for (int i = 0; i < 70; i++) many[i] = i;
        b = (braid_batch){.n_tokens = 70, .token = many};
        CHECK_STATUS(braid_decode(c, &b), BRAID_E_FULL);
        CHECK(braid_seq_len(c, 0) == 3, "a full batch changed the length");
        CHECK(braid_logits(c, 2) != NULL && braid_logits(c, 0) == NULL, "logits of the last good decode");

        /* The same file read into memory (use_mmap = 0) gives the same model: same fingerprint (a state
         * moves between the two) and bit-identical logits. */
        braid_model_params mp = braid_model_default_params();
        mp.use_mmap = 0;
        braid_model *mr = NULL;
        CHECK_STATUS(braid_model_load(base_path, &mp, &mr), BRAID_OK);
        braid_context *cr = NULL;
        if (mr) CHECK_STATUS(braid_context_new(mr, &cp, &cr), BRAID_OK);
        if (cr) {
            b = (braid_batch){.n_tokens = 3, .token = t};
            CHECK_STATUS(braid_decode(cr, &b), BRAID_OK);
            const float *la = braid_logits(c, 2), *lb = braid_logits(cr, 2);
            CHECK(la && lb && !memcmp(la, lb, 300 * sizeof(float)), "use_mmap 0 gives the same logits");
            braid_context_free(cr);
        }
        braid_model_free(mr);
        mp.use_mmap = 0;
        CHECK(braid_model_load(missing, &mp, &mr) == BRAID_E_IO, "a missing file without mmap");
        CHECK_STATUS(braid_seq_truncate(c, 0, 5), BRAID_E_RANGE);
        CHECK_STATUS(braid_seq_truncate(c, 7, 0), BRAID_E_RANGE);

        /* a state from another model is refused */
        void *blob = NULL;
        size_t size = 0;
        CHECK_STATUS(braid_state_seq_save(c, 0, &blob, &size), BRAID_OK);
        char other[700];
        snprintf(other, sizeof other, "%s/other.gguf", dir);
        gp.seed = 2;
        gp.over.n_ff = 192;
        CHECK_STATUS(gen_model_write(&gp, other, NULL), BRAID_OK);
        braid_model *mo = NULL;
        CHECK_STATUS(braid_model_load(other, NULL, &mo), BRAID_OK);
        if (mo) {
            braid_context *co = NULL;
            CHECK_STATUS(braid_context_new(mo, &cp, &co), BRAID_OK);
            CHECK_STATUS(braid_state_seq_load(co, 0, blob, size), BRAID_E_MISMATCH);
            CHECK(braid_seq_len(co, 0) == 0, "a refused state changed the sequence");
            braid_context_free(co);
            braid_model_free(mo);
        }
        unlink(other);
        braid_free(blob);
        braid_context_free(c);
    }
    braid_model_free(m);
    unlink(base_path);
    rmdir(dir);
    TEST_MAIN_END();
}
