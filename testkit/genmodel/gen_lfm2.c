/* gen_lfm2.c — the lfm2 row of the model generator: LFM2 hybrids of short-convolution layers ('C') and
 * attention layers ('A') as the layer pattern says, every layer with a SwiGLU FFN (architectures.md §3). */
#include <string.h>

#include "base/alloc.h"
#include "genmodel/gen_arch.h"

#define LFM2_PRESET(layers, embd, ff, heads, kv, pat)                                                        \
    {.n_ctx = 4096, .n_layer = layers, .n_embd = embd, .n_ff = ff, .n_head = heads, .n_head_kv = kv,          \
     .head_dim = GEN_UNSET, .n_rot = GEN_UNSET, .ssm_conv = 3, .ssm_state = GEN_UNSET,                         \
     .ssm_groups = GEN_UNSET, .ssm_heads = GEN_UNSET, .ssm_inner = GEN_UNSET, .interval = GEN_UNSET,           \
     .rope_base = 1e6f, .eps = 1e-5f, .pattern = pat}

static char lfm2_kind(const gen_shape *s, int64_t il) { return s->pattern[il % (int64_t)strlen(s->pattern)]; }

static braid_status lfm2_check(gen_shape *s) {
    static const char *arch = "lfm2";
    BD_TRY(gen_check_positive(arch, "context length", s->n_ctx));
    BD_TRY(gen_check_positive(arch, "layers", s->n_layer));
    BD_TRY(gen_check_positive(arch, "embd", s->n_embd));
    BD_TRY(gen_check_positive(arch, "ff", s->n_ff));
    BD_TRY(gen_check_positive(arch, "heads", s->n_head));
    BD_TRY(gen_check_positive(arch, "heads-kv", s->n_head_kv));
    if (s->ssm_conv < 2)
        return bd_error(BRAID_E_INVALID, "lfm2: conv kernel (l_cache) must be >= 2 (got %lld)", (long long)s->ssm_conv);
    /* the output projection is n_embd x n_embd, so the heads tile the embedding exactly */
    if (s->n_embd % s->n_head)
        return bd_error(BRAID_E_INVALID, "lfm2: embd (%lld) must be a multiple of heads (%lld)", (long long)s->n_embd,
                        (long long)s->n_head);
    if (s->head_dim == GEN_UNSET) s->head_dim = s->n_embd / s->n_head;
    if (s->head_dim * s->n_head != s->n_embd)
        return bd_error(BRAID_E_INVALID, "lfm2: head-dim x heads must equal embd (%lld x %lld != %lld)",
                        (long long)s->head_dim, (long long)s->n_head, (long long)s->n_embd);
    if (s->head_dim % 2)
        return bd_error(BRAID_E_INVALID, "lfm2: head-dim %lld must be even (RoPE)", (long long)s->head_dim);
    if (s->n_head % s->n_head_kv)
        return bd_error(BRAID_E_INVALID, "lfm2: heads (%lld) must be a multiple of heads-kv (%lld)",
                        (long long)s->n_head, (long long)s->n_head_kv);
    if (!s->pattern[0]) return bd_error(BRAID_E_INVALID, "lfm2: empty layer pattern");
    for (const char *c = s->pattern; *c; c++)
        if (*c != 'C' && *c != 'A')
            return bd_error(BRAID_E_INVALID, "lfm2: pattern '%s' has '%c' (want C short-conv, A attention)", s->pattern,
                            *c);
    return BRAID_OK;
}

static braid_status lfm2_describe_any(const gen_shape *s, int64_t n_vocab, gen_plan *p, int moe) {
    const int64_t E = s->n_embd, hd = s->head_dim, nkv = s->n_head_kv, L = s->n_layer;
    int32_t *kv = bd_mallocn((size_t)L, sizeof *kv);
    if (!kv) return bd_error(BRAID_E_NOMEM, "gen-model: out of memory");
    for (int64_t il = 0; il < L; il++) kv[il] = lfm2_kind(s, il) == 'A' ? (int32_t)nkv : 0; /* 0: short-conv */
    braid_status st = gen_key_u32(p, "context_length", (uint32_t)s->n_ctx);
    if (st == BRAID_OK) st = gen_key_u32(p, "embedding_length", (uint32_t)E);
    if (st == BRAID_OK) st = gen_key_u32(p, "block_count", (uint32_t)L);
    if (st == BRAID_OK) st = gen_key_u32(p, "feed_forward_length", (uint32_t)s->n_ff);
    if (st == BRAID_OK) st = gen_key_u32(p, "attention.head_count", (uint32_t)s->n_head);
    if (st == BRAID_OK) st = gen_key_i32_array(p, "attention.head_count_kv", kv, (uint64_t)L);
    if (st == BRAID_OK) st = gen_key_u32(p, "shortconv.l_cache", (uint32_t)s->ssm_conv);
    if (st == BRAID_OK) st = gen_key_f32(p, "rope.freq_base", s->rope_base);
    if (st == BRAID_OK) st = gen_key_f32(p, "attention.layer_norm_rms_epsilon", s->eps);
    if (moe) { /* lfm2moe: the first `interval` layers dense, the rest sigmoid-routed SwiGLU experts */
        if (st == BRAID_OK) st = gen_key_u32(p, "leading_dense_block_count", (uint32_t)s->interval);
        if (st == BRAID_OK) st = gen_key_u32(p, "expert_count", (uint32_t)s->n_expert);
        if (st == BRAID_OK) st = gen_key_u32(p, "expert_used_count", (uint32_t)s->n_expert_used);
        if (st == BRAID_OK) st = gen_key_u32(p, "expert_feed_forward_length", (uint32_t)s->n_ff_exp);
        if (st == BRAID_OK) st = gen_key_u32(p, "expert_gating_func", 2); /* sigmoid, as conversion/lfm2.py */
    }
    bd_free(kv);
    BD_TRY(st);
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, n_vocab, "token_embd.weight"));
    for (int l = 0; l < (int)L; l++) {
        BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "blk.%d.attn_norm.weight", l));
        if (lfm2_kind(s, l) == 'A') {
            BD_TRY(gen_tensor(p, GEN_MATRIX, E, E, "blk.%d.attn_q.weight", l));
            BD_TRY(gen_tensor(p, GEN_MATRIX, E, hd * nkv, "blk.%d.attn_k.weight", l));
            BD_TRY(gen_tensor(p, GEN_MATRIX, E, hd * nkv, "blk.%d.attn_v.weight", l));
            BD_TRY(gen_tensor(p, GEN_MATRIX, E, E, "blk.%d.attn_output.weight", l));
            BD_TRY(gen_tensor(p, GEN_NORM, hd, 0, "blk.%d.attn_q_norm.weight", l));
            BD_TRY(gen_tensor(p, GEN_NORM, hd, 0, "blk.%d.attn_k_norm.weight", l));
        } else {
            BD_TRY(gen_tensor(p, GEN_MATRIX, E, 3 * E, "blk.%d.shortconv.in_proj.weight", l));
            BD_TRY(gen_tensor(p, GEN_CONV, s->ssm_conv, E, "blk.%d.shortconv.conv.weight", l));
            BD_TRY(gen_tensor(p, GEN_MATRIX, E, E, "blk.%d.shortconv.out_proj.weight", l));
        }
        BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "blk.%d.ffn_norm.weight", l));
        if (moe && l >= s->interval) {
            const int64_t ne = s->n_expert, ff = s->n_ff_exp;
            BD_TRY(gen_tensor(p, GEN_F32MAT, E, ne, "blk.%d.ffn_gate_inp.weight", l));
            BD_TRY(gen_tensor(p, GEN_BIAS, ne, 0, "blk.%d.exp_probs_b.bias", l));
            BD_TRY(gen_tensor3(p, GEN_MATRIX, E, ff, ne, "blk.%d.ffn_gate_exps.weight", l));
            BD_TRY(gen_tensor3(p, GEN_MATRIX, E, ff, ne, "blk.%d.ffn_up_exps.weight", l));
            BD_TRY(gen_tensor3(p, GEN_MATRIX, ff, E, ne, "blk.%d.ffn_down_exps.weight", l));
            continue;
        }
        BD_TRY(gen_tensor(p, GEN_MATRIX, E, s->n_ff, "blk.%d.ffn_gate.weight", l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, E, s->n_ff, "blk.%d.ffn_up.weight", l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, s->n_ff, E, "blk.%d.ffn_down.weight", l));
    }
    BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "token_embd_norm.weight")); /* LFM2's final norm */
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, n_vocab, "output.weight"));
    return BRAID_OK;
}

static braid_status lfm2_describe(const gen_shape *s, int64_t n_vocab, gen_plan *p) {
    return lfm2_describe_any(s, n_vocab, p, 0);
}
static braid_status lfm2moe_describe(const gen_shape *s, int64_t n_vocab, gen_plan *p) {
    return lfm2_describe_any(s, n_vocab, p, 1);
}

static braid_status lfm2moe_check(gen_shape *s) {
    BD_TRY(lfm2_check(s));
    if (s->n_expert <= 0 || s->n_expert_used <= 0 || s->n_expert_used > s->n_expert || s->n_ff_exp <= 0 ||
        s->interval < 0 || s->interval > s->n_layer)
        return bd_error(BRAID_E_INVALID, "lfm2moe: experts %lld choose %lld, ff-exp %lld, dense lead %lld",
                        (long long)s->n_expert, (long long)s->n_expert_used, (long long)s->n_ff_exp,
                        (long long)s->interval);
    return BRAID_OK;
}

const gen_arch gen_arch_lfm2 = {
    .name = "lfm2",
    .presets =
        {
            [GEN_PRESET_TINY] = LFM2_PRESET(3, 64, 128, 4, 2, "CAC"), /* architectures.md §3.3 */
            [GEN_PRESET_SMALL] = LFM2_PRESET(6, 128, 384, 4, 2, "CCA"),
            [GEN_PRESET_MEDIUM] = LFM2_PRESET(9, 256, 768, 4, 2, "CCA"),
            /* LFM2-350M's trunk (attention at layers 2, 5, 8, 10, 12, 14), untied: ~0.6B with this vocab */
            [GEN_PRESET_05B] = LFM2_PRESET(16, 1024, 4608, 16, 8, "CCACCACCACACACAC"),
        },
    .check = lfm2_check,
    .describe = lfm2_describe,
};

/* lfm2moe (LFM2-8B-A1B's shape, shrunk): --interval leading dense layers, the rest MoE */
#define LFM2MOE_PRESET(layers, embd, ff, heads, kv, pat, lead, ne, k, ffe)                                      \
    {.n_ctx = 4096, .n_layer = layers, .n_embd = embd, .n_ff = ff, .n_head = heads, .n_head_kv = kv,            \
     .head_dim = GEN_UNSET, .n_rot = GEN_UNSET, .ssm_conv = 3, .ssm_state = GEN_UNSET, .ssm_groups = GEN_UNSET, \
     .ssm_heads = GEN_UNSET, .ssm_inner = GEN_UNSET, .interval = lead, .rope_base = 1e6f, .eps = 1e-5f,         \
     .pattern = pat, .n_expert = ne, .n_expert_used = k, .n_ff_exp = ffe}

const gen_arch gen_arch_lfm2moe = {
    .name = "lfm2moe",
    .presets =
        {
            [GEN_PRESET_TINY] = LFM2MOE_PRESET(4, 64, 128, 4, 2, "CACC", 1, 8, 2, 32),
            [GEN_PRESET_SMALL] = LFM2MOE_PRESET(6, 128, 384, 4, 2, "CCA", 2, 16, 4, 64),
            [GEN_PRESET_MEDIUM] = LFM2MOE_PRESET(8, 256, 768, 4, 2, "CCAC", 2, 32, 4, 256),
            /* ~1B total, ~0.35B active with this vocab and the untied output */
            [GEN_PRESET_05B] = LFM2MOE_PRESET(16, 1024, 4608, 16, 8, "CCACCACCACACACAC", 2, 32, 4, 768),
        },
    .check = lfm2moe_check,
    .describe = lfm2moe_describe,
};
