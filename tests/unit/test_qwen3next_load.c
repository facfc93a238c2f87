/* test_qwen3next_load.c — loading qwen35moe and qwen3next GGUFs: valid gen-model files (both expert layouts,
 * both qwen3next GDN projection layouts) load with the right architecture and position components, and the
 * ways the MoE and qwen3next parts can be wrong (missing or inconsistent expert keys, expert stacks of the
 * wrong shape, missing shared expert or ssm_ba, half of a projection pair, leftover dense FFN tensors, grouped
 * routing) are refused with a reason. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/status.h"
#include "braid.h"
#include "gguf/gguf.h"
#include "genmodel/genmodel.h"
#include "test.h"

static char dir[] = "/tmp/braid_q3nload_XXXXXX";

typedef struct mutation {
    const char *drop_key;     /* omit this key */
    const char *u32_key;      /* set (or add) this u32 key */
    uint32_t u32_val;
    const char *drop_tensor;  /* omit this tensor */
    const char *extra_tensor; /* add a {64} F32 tensor of this name */
} mutation;

static braid_status rewrite(const char *in, const char *out, const mutation *mu) {
    gguf_file *f;
    BD_TRY(gguf_open(in, &f));
    gguf_writer *w;
    braid_status st = gguf_writer_new(3, &w);
    if (st != BRAID_OK) {
        gguf_close(f);
        return st;
    }
    int set = 0;
    for (size_t i = 0; i < gguf_n_kv(f) && st == BRAID_OK; i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        if (mu->drop_key && !strcmp(kv->key, mu->drop_key)) continue;
        if (mu->u32_key && !strcmp(kv->key, mu->u32_key)) st = gguf_writer_set_u32(w, kv->key, mu->u32_val), set = 1;
        else st = gguf_writer_set_value(w, kv->key, &kv->value);
    }
    if (st == BRAID_OK && mu->u32_key && !set) st = gguf_writer_set_u32(w, mu->u32_key, mu->u32_val);
    for (size_t i = 0; i < gguf_n_tensors(f) && st == BRAID_OK; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (mu->drop_tensor && !strcmp(t->name, mu->drop_tensor)) continue;
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        st = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, t->data);
    }
    if (st == BRAID_OK && mu->extra_tensor) {
        static const float z[64];
        const int64_t ne[1] = {64};
        st = gguf_writer_add_tensor(w, mu->extra_tensor, BRAID_TYPE_F32, 1, ne, z);
    }
    if (st == BRAID_OK) st = gguf_writer_write(w, out, NULL, NULL);
    gguf_writer_free(w);
    gguf_close(f);
    return st;
}

static void expect(const char *base, const char *what, const mutation *mu, braid_status want) {
    char path[700];
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    braid_status st = rewrite(base, path, mu);
    CHECK(st == BRAID_OK, "%s: rewrite failed: %s", what, braid_last_error());
    braid_model *m = NULL;
    st = braid_model_load(path, NULL, &m);
    printf("  %-48s -> %s: %s\n", what, braid_status_name(st), st == BRAID_OK ? "" : braid_last_error());
    CHECK(st == want, "%s: got %s, want %s (%s)", what, braid_status_name(st), braid_status_name(want),
          braid_last_error());
    braid_model_free(m);
    unlink(path);
}

/* Writes arch/preset (dummy vocabulary) to dir/name and checks that it loads as arch with n_pos components. */
static void valid(const char *arch, const char *preset, const char *name, int n_pos, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s", dir, name);
    gen_params gp;
    gen_params_default(&gp);
    gp.arch = arch;
    gp.preset = preset;
    gp.vocab = "none";
    gp.n_vocab = 300;
    CHECK_STATUS(gen_model_write(&gp, path, NULL), BRAID_OK);
    braid_model *m = NULL;
    CHECK_STATUS(braid_model_load(path, NULL, &m), BRAID_OK);
    if (!m) return;
    CHECK(!strcmp(braid_model_arch(m), arch), "arch %s, want %s", braid_model_arch(m), arch);
    CHECK(braid_model_n_pos_per_token(m) == n_pos, "%s: n_pos %d", name, braid_model_n_pos_per_token(m));
    CHECK(braid_model_n_vocab(m) == 300 && braid_model_has_attention(m) && braid_model_has_recurrent(m), "%s dims",
          name);
    braid_model_free(m);
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    char moe[600], moe_merged[600], next[600], next_legacy[600];
    valid("qwen35moe", "tiny", "moe.gguf", 4, moe, sizeof moe);               /* gate + up experts */
    valid("qwen35moe", "small", "moe_merged.gguf", 4, moe_merged, sizeof moe_merged); /* gate_up experts */
    valid("qwen3next", "tiny", "next.gguf", 1, next, sizeof next);            /* attn_qkv + attn_gate */
    valid("qwen3next", "small", "next_legacy.gguf", 1, next_legacy, sizeof next_legacy); /* ssm_in */

    printf("refused files:\n");
    expect(moe, "expert_count missing", &(mutation){.drop_key = "qwen35moe.expert_count"}, BRAID_E_FORMAT);
    expect(moe, "expert_used_count > expert_count",
           &(mutation){.u32_key = "qwen35moe.expert_used_count", .u32_val = 9}, BRAID_E_FORMAT);
    expect(moe, "expert stacks of another expert count",
           &(mutation){.u32_key = "qwen35moe.expert_count", .u32_val = 7}, BRAID_E_FORMAT);
    expect(moe, "expert FFN width differs from the tensors",
           &(mutation){.u32_key = "qwen35moe.expert_feed_forward_length", .u32_val = 48}, BRAID_E_FORMAT);
    expect(moe, "ffn_down_exps missing", &(mutation){.drop_tensor = "blk.1.ffn_down_exps.weight"}, BRAID_E_FORMAT);
    expect(moe, "ffn_up_exps missing (separate layout)", &(mutation){.drop_tensor = "blk.0.ffn_up_exps.weight"},
           BRAID_E_FORMAT);
    expect(moe_merged, "ffn_gate_up_exps missing", &(mutation){.drop_tensor = "blk.2.ffn_gate_up_exps.weight"},
           BRAID_E_FORMAT);
    expect(moe, "shared expert gate missing", &(mutation){.drop_tensor = "blk.3.ffn_gate_inp_shexp.weight"},
           BRAID_E_FORMAT);
    expect(moe, "a dense ffn_gate left over", &(mutation){.extra_tensor = "blk.0.ffn_gate.weight"}, BRAID_E_FORMAT);
    expect(moe, "grouped routing", &(mutation){.u32_key = "qwen35moe.expert_group_count", .u32_val = 2},
           BRAID_E_UNSUPPORTED);
    expect(moe, "rope.dimension_sections missing (M-RoPE)",
           &(mutation){.drop_key = "qwen35moe.rope.dimension_sections"}, BRAID_E_FORMAT);
    expect(next, "qwen3next: ssm_ba missing", &(mutation){.drop_tensor = "blk.0.ssm_ba.weight"}, BRAID_E_FORMAT);
    expect(next, "qwen3next: attn_gate without its attn_qkv", &(mutation){.drop_tensor = "blk.0.attn_qkv.weight"},
           BRAID_E_FORMAT);
    expect(next, "qwen3next: attn_qkv without its attn_gate", &(mutation){.drop_tensor = "blk.2.attn_gate.weight"},
           BRAID_E_FORMAT);
    expect(next_legacy, "qwen3next: ssm_in missing", &(mutation){.drop_tensor = "blk.0.ssm_in.weight"},
           BRAID_E_FORMAT);
    expect(next, "qwen3next: expert_count missing", &(mutation){.drop_key = "qwen3next.expert_count"},
           BRAID_E_FORMAT);
    expect(next, "unchanged copy loads", &(mutation){0}, BRAID_OK);
    unlink(moe);
    unlink(moe_merged);
    unlink(next);
    unlink(next_legacy);
    rmdir(dir);
    TEST_MAIN_END();
}
