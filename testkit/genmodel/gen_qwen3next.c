/* gen_qwen3next.c — the qwen35moe and qwen3next rows of the model generator: the qwen35 family's trunk
 * (gen_qwen35.c) with a MoE FFN in every layer (architectures.md §1.12) and, for qwen3next, plain NEOX RoPE,
 * ssm_ba and optionally the legacy grouped ssm_in projection (§1.13). Keys and tensors as llama.cpp loads them. */
#include "genmodel/gen_arch.h"

#define MOE_PRESET(ctx, layers, embd, ff, heads, kv, hd, rot, state, groups, vheads, iv, ne, used, ffe, ffs, gu, \
                   qkvz_)                                                                                         \
    {.n_ctx = ctx, .n_layer = layers, .n_embd = embd, .n_ff = ff, .n_head = heads, .n_head_kv = kv,               \
     .head_dim = hd, .n_rot = rot, .ssm_conv = 4, .ssm_state = state, .ssm_groups = groups,                        \
     .ssm_heads = vheads, .ssm_inner = GEN_UNSET, .interval = iv, .rope_base = 1e7f, .eps = 1e-6f,                \
     .n_expert = ne, .n_expert_used = used, .n_ff_exp = ffe, .n_ff_shexp = ffs, .gate_up = gu, .qkvz = qkvz_}

static braid_status moe_check(gen_shape *s) {
    BD_TRY(gen_qwen35_check(s));
    static const char *arch = "moe";
    BD_TRY(gen_check_positive(arch, "experts", s->n_expert));
    BD_TRY(gen_check_positive(arch, "experts-used", s->n_expert_used));
    BD_TRY(gen_check_positive(arch, "ff-exp", s->n_ff_exp));
    BD_TRY(gen_check_positive(arch, "ff-shexp", s->n_ff_shexp));
    if (s->n_expert_used > s->n_expert)
        return bd_error(BRAID_E_INVALID, "moe: experts-used (%lld) must be <= experts (%lld)",
                        (long long)s->n_expert_used, (long long)s->n_expert);
    if (s->gate_up != 1 && s->gate_up != 2)
        return bd_error(BRAID_E_INVALID, "moe: gate-up must be 1 (merged) or 2 (separate), got %lld",
                        (long long)s->gate_up);
    if (s->qkvz != 1 && s->qkvz != 2)
        return bd_error(BRAID_E_INVALID, "qwen3next: qkvz must be 1 (attn_qkv + attn_gate) or 2 (ssm_in), got %lld",
                        (long long)s->qkvz);
    return BRAID_OK;
}

static braid_status q35moe_describe(const gen_shape *s, int64_t n_vocab, gen_plan *p) {
    return gen_qwen35_family_describe(s, n_vocab, p, 1);
}

static braid_status q3next_describe(const gen_shape *s, int64_t n_vocab, gen_plan *p) {
    return gen_qwen35_family_describe(s, n_vocab, p, 2);
}

/* The qwen35 presets' trunks with few, narrow experts (tiny: 8 experts choose 2; small 16 choose 4, merged
 * gate_up; medium rows multiples of 256 for K-quants; 0.5b: the qwen35 0.5b trunk with 32 experts of 256). */
#define MOE_PRESETS(gu_small, qkvz_small)                                                                          \
    {                                                                                                              \
        [GEN_PRESET_TINY] = MOE_PRESET(256, 4, 64, 128, 4, 2, 32, 16, 16, 2, 4, 2, 8, 2, 32, 64, 2, 1),           \
        [GEN_PRESET_SMALL] = MOE_PRESET(1024, 4, 128, 384, 4, 2, 32, GEN_UNSET, 32, 2, 4, 2, 16, 4, 64, 128,      \
                                        gu_small, qkvz_small),                                                     \
        [GEN_PRESET_MEDIUM] = MOE_PRESET(4096, 8, 256, 768, 4, 2, 64, GEN_UNSET, 64, 2, 4, 4, 16, 4, 256, 256, 2, \
                                         1),                                                                       \
        [GEN_PRESET_05B] = MOE_PRESET(32768, 24, 1024, 3584, 8, 2, 256, GEN_UNSET, 128, 16, 16, 4, 32, 4, 256,    \
                                      512, 1, 1),                                                                  \
    }

const gen_arch gen_arch_qwen35moe = {
    .name = "qwen35moe",
    .presets = MOE_PRESETS(1, 1),
    .check = moe_check,
    .describe = q35moe_describe,
};

/* qwen3next's small preset uses the legacy ssm_in projection, so both layouts have a preset. */
const gen_arch gen_arch_qwen3next = {
    .name = "qwen3next",
    .presets = MOE_PRESETS(1, 2),
    .check = moe_check,
    .describe = q3next_describe,
};
