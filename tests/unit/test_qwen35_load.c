/* test_qwen35_load.c — loading qwen35 GGUFs: a valid gen-model file loads with the right dimensions, and each
 * way a file can be wrong (a key of the wrong type, a bad shape, a missing or extra tensor, a broken
 * constraint, an unsupported architecture) is refused with BRAID_E_FORMAT or BRAID_E_UNSUPPORTED and a reason.
 * Also the decode API's argument checks (nothing changes on a refused batch) and the fingerprint check of
 * state loading. */
#include <stdio.h>
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
} mutation;

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
        else st = gguf_writer_set_value(w, k, &kv->value);
    }
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
    if (st == BRAID_OK) st = gguf_writer_write(w, out, NULL, NULL);
    gguf_writer_free(w);
    gguf_close(f);
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
