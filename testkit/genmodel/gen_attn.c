/* gen_attn.c — the llama and qwen3 rows of the model generator: the attention-only baselines (GQA attention
 * with RoPE over the whole head and a SwiGLU FFN; qwen3 adds per-head q/k norms), architectures.md §4. */
#include <string.h>

#include "genmodel/gen_arch.h"

#define ATTN_PRESET(layers, embd, ff, heads, kv, hd, base, e)                                                 \
    {.n_ctx = 4096, .n_layer = layers, .n_embd = embd, .n_ff = ff, .n_head = heads, .n_head_kv = kv,          \
     .head_dim = hd, .n_rot = GEN_UNSET, .ssm_conv = GEN_UNSET, .ssm_state = GEN_UNSET,                        \
     .ssm_groups = GEN_UNSET, .ssm_heads = GEN_UNSET, .ssm_inner = GEN_UNSET, .interval = GEN_UNSET,           \
     .rope_base = base, .eps = e}

static braid_status attn_check(const char *arch, gen_shape *s) {
    BD_TRY(gen_check_positive(arch, "context length", s->n_ctx));
    BD_TRY(gen_check_positive(arch, "layers", s->n_layer));
    BD_TRY(gen_check_positive(arch, "embd", s->n_embd));
    BD_TRY(gen_check_positive(arch, "ff", s->n_ff));
    BD_TRY(gen_check_positive(arch, "heads", s->n_head));
    BD_TRY(gen_check_positive(arch, "heads-kv", s->n_head_kv));
    BD_TRY(gen_check_positive(arch, "head-dim", s->head_dim));
    if (s->n_head % s->n_head_kv)
        return bd_error(BRAID_E_INVALID, "%s: heads (%lld) must be a multiple of heads-kv (%lld)", arch,
                        (long long)s->n_head, (long long)s->n_head_kv);
    /* both rotate the whole head (llama.cpp rejects anything else for these two) */
    if (s->n_rot == GEN_UNSET) s->n_rot = s->head_dim;
    if (s->n_rot != s->head_dim || s->head_dim % 2)
        return bd_error(BRAID_E_INVALID, "%s: rope dims (%lld) must equal head-dim (%lld), which must be even", arch,
                        (long long)s->n_rot, (long long)s->head_dim);
    return BRAID_OK;
}

static braid_status attn_describe(const gen_shape *s, int64_t n_vocab, gen_plan *p, int qk_norm) {
    const int64_t E = s->n_embd, hd = s->head_dim, nh = s->n_head, nkv = s->n_head_kv;
    BD_TRY(gen_key_u32(p, "context_length", (uint32_t)s->n_ctx));
    BD_TRY(gen_key_u32(p, "embedding_length", (uint32_t)E));
    BD_TRY(gen_key_u32(p, "block_count", (uint32_t)s->n_layer));
    BD_TRY(gen_key_u32(p, "feed_forward_length", (uint32_t)s->n_ff));
    BD_TRY(gen_key_u32(p, "attention.head_count", (uint32_t)nh));
    BD_TRY(gen_key_u32(p, "attention.head_count_kv", (uint32_t)nkv));
    BD_TRY(gen_key_u32(p, "attention.key_length", (uint32_t)hd));
    BD_TRY(gen_key_u32(p, "attention.value_length", (uint32_t)hd));
    BD_TRY(gen_key_u32(p, "rope.dimension_count", (uint32_t)s->n_rot));
    BD_TRY(gen_key_f32(p, "rope.freq_base", s->rope_base));
    BD_TRY(gen_key_f32(p, "attention.layer_norm_rms_epsilon", s->eps));
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, n_vocab, "token_embd.weight"));
    for (int l = 0; l < (int)s->n_layer; l++) {
        BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "blk.%d.attn_norm.weight", l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, E, hd * nh, "blk.%d.attn_q.weight", l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, E, hd * nkv, "blk.%d.attn_k.weight", l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, E, hd * nkv, "blk.%d.attn_v.weight", l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, hd * nh, E, "blk.%d.attn_output.weight", l));
        if (qk_norm) {
            BD_TRY(gen_tensor(p, GEN_NORM, hd, 0, "blk.%d.attn_q_norm.weight", l));
            BD_TRY(gen_tensor(p, GEN_NORM, hd, 0, "blk.%d.attn_k_norm.weight", l));
        }
        BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "blk.%d.ffn_norm.weight", l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, E, s->n_ff, "blk.%d.ffn_gate.weight", l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, E, s->n_ff, "blk.%d.ffn_up.weight", l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, s->n_ff, E, "blk.%d.ffn_down.weight", l));
    }
    BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "output_norm.weight"));
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, n_vocab, "output.weight"));
    return BRAID_OK;
}

static braid_status llama_check(gen_shape *s) { return attn_check("llama", s); }
static braid_status llama_describe(const gen_shape *s, int64_t n_vocab, gen_plan *p) {
    return attn_describe(s, n_vocab, p, 0);
}
static braid_status qwen3_check(gen_shape *s) { return attn_check("qwen3", s); }
static braid_status qwen3_describe(const gen_shape *s, int64_t n_vocab, gen_plan *p) {
    return attn_describe(s, n_vocab, p, 1);
}

const gen_arch gen_arch_llama = {
    .name = "llama",
    .presets =
        {
            [GEN_PRESET_TINY] = ATTN_PRESET(2, 64, 128, 4, 2, 16, 10000.0f, 1e-5f),
            [GEN_PRESET_SMALL] = ATTN_PRESET(4, 128, 384, 4, 2, 32, 10000.0f, 1e-5f),
            [GEN_PRESET_MEDIUM] = ATTN_PRESET(8, 256, 768, 4, 2, 64, 10000.0f, 1e-5f),
            /* ~0.6B with the untied output: hidden 1024, 24 layers, 16 heads of 64 (4 KV), ff 4096 */
            [GEN_PRESET_05B] = ATTN_PRESET(24, 1024, 4096, 16, 4, 64, 500000.0f, 1e-5f),
        },
    .check = llama_check,
    .describe = llama_describe,
};

const gen_arch gen_arch_qwen3 = {
    .name = "qwen3",
    .presets =
        {
            [GEN_PRESET_TINY] = ATTN_PRESET(2, 64, 128, 4, 2, 16, 1e6f, 1e-6f), /* architectures.md §4.1 */
            [GEN_PRESET_SMALL] = ATTN_PRESET(4, 128, 384, 4, 2, 32, 1e6f, 1e-6f),
            [GEN_PRESET_MEDIUM] = ATTN_PRESET(8, 256, 768, 4, 2, 64, 1e6f, 1e-6f),
            /* Qwen3-0.6B's trunk (hidden 1024, 28 layers, 16 q / 8 kv heads of 128, ff 3072), untied */
            [GEN_PRESET_05B] = ATTN_PRESET(28, 1024, 3072, 16, 8, 128, 1e6f, 1e-6f),
        },
    .check = qwen3_check,
    .describe = qwen3_describe,
};
