/* gen_mamba.c — the mamba2, nemotron_h and nemotron_h_moe rows of the model generator: pure Mamba2 models, and
 * Nemotron-H hybrids whose layers are Mamba2 mixers ('M'), attention without RoPE ('*'), relu² MLPs ('-') or
 * (nemotron_h_moe) sigmoid-routed relu² MoE layers with a shared expert ('E') as the layer pattern says. They
 * share the Mamba2 mixer's tensors (architectures.md §2, archs-more.md §2). */
#include <string.h>

#include "base/alloc.h"
#include "genmodel/gen_arch.h"

/* ---- the Mamba2 mixer, shared ---------------------------------------------------------------------- */

static braid_status mixer_check(const char *arch, gen_shape *s) {
    BD_TRY(gen_check_positive(arch, "context length", s->n_ctx));
    BD_TRY(gen_check_positive(arch, "layers", s->n_layer));
    BD_TRY(gen_check_positive(arch, "embd", s->n_embd));
    BD_TRY(gen_check_positive(arch, "state", s->ssm_state));
    BD_TRY(gen_check_positive(arch, "groups (k-heads)", s->ssm_groups));
    BD_TRY(gen_check_positive(arch, "heads (v-heads)", s->ssm_heads));
    BD_TRY(gen_check_positive(arch, "inner", s->ssm_inner));
    if (s->ssm_conv < 2)
        return bd_error(BRAID_E_INVALID, "%s: conv kernel must be >= 2 (got %lld)", arch, (long long)s->ssm_conv);
    if (s->ssm_inner % s->ssm_heads || s->ssm_inner % s->ssm_groups || s->ssm_heads % s->ssm_groups)
        return bd_error(BRAID_E_INVALID, "%s: inner (%lld) must be a multiple of heads (%lld) and groups (%lld), "
                        "and heads of groups", arch, (long long)s->ssm_inner, (long long)s->ssm_heads,
                        (long long)s->ssm_groups);
    return BRAID_OK;
}

static braid_status mixer_keys(const gen_shape *s, gen_plan *p) {
    BD_TRY(gen_key_u32(p, "ssm.conv_kernel", (uint32_t)s->ssm_conv));
    BD_TRY(gen_key_u32(p, "ssm.inner_size", (uint32_t)s->ssm_inner));
    BD_TRY(gen_key_u32(p, "ssm.state_size", (uint32_t)s->ssm_state));
    BD_TRY(gen_key_u32(p, "ssm.time_step_rank", (uint32_t)s->ssm_heads));
    BD_TRY(gen_key_u32(p, "ssm.group_count", (uint32_t)s->ssm_groups));
    return BRAID_OK;
}

static braid_status mixer_tensors(const gen_shape *s, gen_plan *p, int l) {
    const int64_t E = s->n_embd, di = s->ssm_inner, G = s->ssm_groups, N = s->ssm_state, H = s->ssm_heads;
    const int64_t conv_dim = di + 2 * G * N, d_in_proj = 2 * di + 2 * G * N + H;
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, d_in_proj, "blk.%d.ssm_in.weight", l));
    BD_TRY(gen_tensor(p, GEN_CONV, s->ssm_conv, conv_dim, "blk.%d.ssm_conv1d.weight", l));
    BD_TRY(gen_tensor(p, GEN_BIAS, conv_dim, 0, "blk.%d.ssm_conv1d.bias", l));
    BD_TRY(gen_tensor(p, GEN_BIAS, H, 0, "blk.%d.ssm_dt.bias", l));
    BD_TRY(gen_tensor(p, GEN_NEG, 1, H, "blk.%d.ssm_a", l));
    BD_TRY(gen_tensor(p, GEN_NORM, 1, H, "blk.%d.ssm_d", l));
    BD_TRY(gen_tensor(p, GEN_NORM, di / G, G, "blk.%d.ssm_norm.weight", l));
    BD_TRY(gen_tensor(p, GEN_MATRIX, di, E, "blk.%d.ssm_out.weight", l));
    return BRAID_OK;
}

/* ---- mamba2 ------------------------------------------------------------------------------------------ */

#define M2_PRESET(layers, embd, inner, state, heads, groups)                                                 \
    {.n_ctx = 4096, .n_layer = layers, .n_embd = embd, .n_ff = GEN_UNSET, .n_head = GEN_UNSET,                \
     .n_head_kv = GEN_UNSET, .head_dim = GEN_UNSET, .n_rot = GEN_UNSET, .ssm_conv = 4, .ssm_state = state,    \
     .ssm_groups = groups, .ssm_heads = heads, .ssm_inner = inner, .interval = GEN_UNSET, .eps = 1e-5f}

static braid_status m2_check(gen_shape *s) { return mixer_check("mamba2", s); }

static braid_status m2_describe(const gen_shape *s, int64_t n_vocab, gen_plan *p) {
    const int64_t E = s->n_embd;
    BD_TRY(gen_key_u32(p, "context_length", (uint32_t)s->n_ctx));
    BD_TRY(gen_key_u32(p, "embedding_length", (uint32_t)E));
    BD_TRY(gen_key_u32(p, "block_count", (uint32_t)s->n_layer));
    BD_TRY(mixer_keys(s, p));
    BD_TRY(gen_key_f32(p, "attention.layer_norm_rms_epsilon", s->eps));
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, n_vocab, "token_embd.weight"));
    for (int l = 0; l < (int)s->n_layer; l++) {
        BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "blk.%d.attn_norm.weight", l));
        BD_TRY(mixer_tensors(s, p, l));
    }
    BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "output_norm.weight"));
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, n_vocab, "output.weight"));
    return BRAID_OK;
}

const gen_arch gen_arch_mamba2 = {
    .name = "mamba2",
    .presets =
        {
            [GEN_PRESET_TINY] = M2_PRESET(2, 64, 128, 16, 4, 2), /* architectures.md §2.2 */
            [GEN_PRESET_SMALL] = M2_PRESET(4, 128, 256, 32, 8, 2),
            [GEN_PRESET_MEDIUM] = M2_PRESET(8, 256, 512, 64, 8, 2),
            /* ~0.6B with the untied output: hidden 1024, 48 layers, 32 heads of 64, d_state 128 */
            [GEN_PRESET_05B] = M2_PRESET(48, 1024, 2048, 128, 32, 1),
        },
    .check = m2_check,
    .describe = m2_describe,
};

/* ---- nemotron_h -------------------------------------------------------------------------------------- */

#define NH_PRESET(layers, embd, ff, heads, kv, hd, inner, state, sheads, groups, pat)                         \
    {.n_ctx = 4096, .n_layer = layers, .n_embd = embd, .n_ff = ff, .n_head = heads, .n_head_kv = kv,          \
     .head_dim = hd, .n_rot = GEN_UNSET, .ssm_conv = 4, .ssm_state = state, .ssm_groups = groups,              \
     .ssm_heads = sheads, .ssm_inner = inner, .interval = GEN_UNSET, .eps = 1e-5f, .pattern = pat}

/* Layer il's kind: the pattern repeated over the layers. */
static char nh_kind(const gen_shape *s, int64_t il) { return s->pattern[il % (int64_t)strlen(s->pattern)]; }

static braid_status nh_check_kinds(gen_shape *s, const char *arch, const char *kinds) {
    BD_TRY(mixer_check(arch, s));
    BD_TRY(gen_check_positive(arch, "ff", s->n_ff));
    BD_TRY(gen_check_positive(arch, "heads", s->n_head));
    BD_TRY(gen_check_positive(arch, "heads-kv", s->n_head_kv));
    BD_TRY(gen_check_positive(arch, "head-dim", s->head_dim));
    if (s->n_head % s->n_head_kv)
        return bd_error(BRAID_E_INVALID, "%s: heads (%lld) must be a multiple of heads-kv (%lld)", arch,
                        (long long)s->n_head, (long long)s->n_head_kv);
    if (!s->pattern[0]) return bd_error(BRAID_E_INVALID, "%s: empty layer pattern", arch);
    for (const char *c = s->pattern; *c; c++)
        if (!strchr(kinds, *c))
            return bd_error(BRAID_E_INVALID, "%s: pattern '%s' has '%c' (want M mamba2, * attention, %s)", arch,
                            s->pattern, *c, strchr(kinds, 'E') ? "E moe" : "- mlp");
    return BRAID_OK;
}

static braid_status nh_check(gen_shape *s) { return nh_check_kinds(s, "nemotron_h", "M*-"); }

static braid_status nhm_check(gen_shape *s) {
    BD_TRY(nh_check_kinds(s, "nemotron_h_moe", "M*E"));
    if (s->n_expert <= 0 || s->n_expert_used <= 0 || s->n_expert_used > s->n_expert || s->n_ff_exp <= 0 ||
        s->n_ff_shexp <= 0)
        return bd_error(BRAID_E_INVALID, "nemotron_h_moe: experts %lld choose %lld, ff-exp %lld, ff-shexp %lld",
                        (long long)s->n_expert, (long long)s->n_expert_used, (long long)s->n_ff_exp,
                        (long long)s->n_ff_shexp);
    return BRAID_OK;
}

static braid_status nh_describe_any(const gen_shape *s, int64_t n_vocab, gen_plan *p, int moe) {
    const int64_t E = s->n_embd, hd = s->head_dim, nh = s->n_head, nkv = s->n_head_kv, L = s->n_layer;
    int32_t *ff = bd_mallocn((size_t)L, sizeof *ff), *kv = bd_mallocn((size_t)L, sizeof *kv);
    braid_status st = BRAID_OK;
    if (!ff || !kv) st = bd_error(BRAID_E_NOMEM, "gen-model: out of memory");
    /* the layer kinds are encoded in the per-layer arrays: attention has KV heads, an MLP has an ff size,
     * a Mamba2 layer has neither */
    for (int64_t il = 0; st == BRAID_OK && il < L; il++) {
        ff[il] = nh_kind(s, il) == '-' ? (int32_t)s->n_ff : nh_kind(s, il) == 'E' ? (int32_t)s->n_ff_exp : 0;
        kv[il] = nh_kind(s, il) == '*' ? (int32_t)nkv : 0;
    }
    if (st == BRAID_OK) st = gen_key_u32(p, "context_length", (uint32_t)s->n_ctx);
    if (st == BRAID_OK) st = gen_key_u32(p, "embedding_length", (uint32_t)E);
    if (st == BRAID_OK) st = gen_key_u32(p, "block_count", (uint32_t)L);
    if (st == BRAID_OK) st = mixer_keys(s, p);
    if (st == BRAID_OK) st = gen_key_i32_array(p, "feed_forward_length", ff, (uint64_t)L);
    if (st == BRAID_OK) st = gen_key_u32(p, "attention.head_count", (uint32_t)nh);
    if (st == BRAID_OK) st = gen_key_i32_array(p, "attention.head_count_kv", kv, (uint64_t)L);
    if (st == BRAID_OK) st = gen_key_u32(p, "attention.key_length", (uint32_t)hd);
    if (st == BRAID_OK) st = gen_key_u32(p, "attention.value_length", (uint32_t)hd);
    if (st == BRAID_OK) st = gen_key_f32(p, "attention.layer_norm_epsilon", s->eps);
    if (st == BRAID_OK) st = gen_key_f32(p, "attention.layer_norm_rms_epsilon", s->eps);
    if (moe) { /* as the converter writes them for Nemotron-3 Nano: renormalized, scaled by 2.5, one group */
        if (st == BRAID_OK) st = gen_key_u32(p, "expert_count", (uint32_t)s->n_expert);
        if (st == BRAID_OK) st = gen_key_u32(p, "expert_used_count", (uint32_t)s->n_expert_used);
        if (st == BRAID_OK) st = gen_key_u32(p, "expert_feed_forward_length", (uint32_t)s->n_ff_exp);
        if (st == BRAID_OK) st = gen_key_u32(p, "expert_shared_feed_forward_length", (uint32_t)s->n_ff_shexp);
        if (st == BRAID_OK) st = gen_key_u32(p, "expert_shared_count", 1);
        if (st == BRAID_OK) st = gen_key_bool(p, "expert_weights_norm", 1);
        if (st == BRAID_OK) st = gen_key_f32(p, "expert_weights_scale", 2.5f);
        if (st == BRAID_OK) st = gen_key_u32(p, "expert_group_count", 1);
    }
    bd_free(ff);
    bd_free(kv);
    BD_TRY(st);
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, n_vocab, "token_embd.weight"));
    for (int l = 0; l < (int)L; l++) {
        BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "blk.%d.attn_norm.weight", l));
        switch (nh_kind(s, l)) {
        case 'M':
            BD_TRY(mixer_tensors(s, p, l));
            break;
        case '*': /* no RoPE, no q/k norms */
            BD_TRY(gen_tensor(p, GEN_MATRIX, E, hd * nh, "blk.%d.attn_q.weight", l));
            BD_TRY(gen_tensor(p, GEN_MATRIX, E, hd * nkv, "blk.%d.attn_k.weight", l));
            BD_TRY(gen_tensor(p, GEN_MATRIX, E, hd * nkv, "blk.%d.attn_v.weight", l));
            BD_TRY(gen_tensor(p, GEN_MATRIX, hd * nh, E, "blk.%d.attn_output.weight", l));
            break;
        case 'E': { /* sigmoid router with a selection bias, ungated relu² experts, relu² shared expert */
            const int64_t ne = s->n_expert, ff_e = s->n_ff_exp, fs = s->n_ff_shexp;
            BD_TRY(gen_tensor(p, GEN_F32MAT, E, ne, "blk.%d.ffn_gate_inp.weight", l));
            BD_TRY(gen_tensor(p, GEN_BIAS, ne, 0, "blk.%d.exp_probs_b.bias", l));
            BD_TRY(gen_tensor3(p, GEN_MATRIX, E, ff_e, ne, "blk.%d.ffn_up_exps.weight", l));
            BD_TRY(gen_tensor3(p, GEN_MATRIX, ff_e, E, ne, "blk.%d.ffn_down_exps.weight", l));
            BD_TRY(gen_tensor(p, GEN_MATRIX, E, fs, "blk.%d.ffn_up_shexp.weight", l));
            BD_TRY(gen_tensor(p, GEN_MATRIX, fs, E, "blk.%d.ffn_down_shexp.weight", l));
            break;
        }
        default: /* relu² MLP */
            BD_TRY(gen_tensor(p, GEN_MATRIX, E, s->n_ff, "blk.%d.ffn_up.weight", l));
            BD_TRY(gen_tensor(p, GEN_MATRIX, s->n_ff, E, "blk.%d.ffn_down.weight", l));
            break;
        }
    }
    BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "output_norm.weight"));
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, n_vocab, "output.weight"));
    return BRAID_OK;
}

static braid_status nh_describe(const gen_shape *s, int64_t n_vocab, gen_plan *p);

const gen_arch gen_arch_nemotron_h = {
    .name = "nemotron_h",
    .presets =
        {
            /* tiny: architectures.md §2.3 (layer 0 Mamba2, 1 attention, 2 MLP) */
            [GEN_PRESET_TINY] = NH_PRESET(3, 64, 128, 2, 2, 32, 128, 16, 4, 2, "M*-"),
            [GEN_PRESET_SMALL] = NH_PRESET(6, 128, 256, 4, 2, 32, 256, 32, 8, 2, "M-M*-M"),
            [GEN_PRESET_MEDIUM] = NH_PRESET(10, 256, 768, 4, 2, 64, 512, 64, 8, 2, "M-M*-"),
            /* ~0.55B with the untied output; Nemotron-H's M-M-M*- rhythm */
            [GEN_PRESET_05B] = NH_PRESET(32, 1024, 4096, 8, 2, 128, 2048, 128, 32, 8, "M-M-M*-"),
        },
    .check = nh_check,
    .describe = nh_describe,
};

/* ---- nemotron_h_moe ------------------------------------------------------------------------------------ */

static braid_status nh_describe(const gen_shape *s, int64_t n_vocab, gen_plan *p) {
    return nh_describe_any(s, n_vocab, p, 0);
}
static braid_status nhm_describe(const gen_shape *s, int64_t n_vocab, gen_plan *p) {
    return nh_describe_any(s, n_vocab, p, 1);
}

#define NHM_PRESET(layers, embd, heads, kv, hd, inner, state, sheads, groups, pat, ne, k, ffe, ffs)             \
    {.n_ctx = 4096, .n_layer = layers, .n_embd = embd, .n_ff = ffe, .n_head = heads, .n_head_kv = kv,           \
     .head_dim = hd, .n_rot = GEN_UNSET, .ssm_conv = 4, .ssm_state = state, .ssm_groups = groups,                \
     .ssm_heads = sheads, .ssm_inner = inner, .interval = GEN_UNSET, .eps = 1e-5f, .pattern = pat,               \
     .n_expert = ne, .n_expert_used = k, .n_ff_exp = ffe, .n_ff_shexp = ffs}

const gen_arch gen_arch_nemotron_h_moe = {
    .name = "nemotron_h_moe",
    .presets =
        {
            [GEN_PRESET_TINY] = NHM_PRESET(4, 64, 2, 2, 32, 128, 16, 4, 2, "ME*E", 8, 2, 32, 64),
            [GEN_PRESET_SMALL] = NHM_PRESET(6, 128, 4, 2, 32, 256, 32, 8, 2, "MEM*EM", 16, 4, 64, 128),
            [GEN_PRESET_MEDIUM] = NHM_PRESET(8, 256, 4, 2, 64, 512, 64, 8, 2, "MEM*", 32, 4, 256, 512),
            /* ~1B total, ~0.35B active with the untied output: Nemotron-3 Nano's M E M E M * E rhythm */
            [GEN_PRESET_05B] = NHM_PRESET(21, 1024, 8, 2, 128, 2048, 128, 32, 8, "MEMEM*E", 32, 4, 768, 1536),
        },
    .check = nhm_check,
    .describe = nhm_describe,
};

/* ---- granitehybrid ------------------------------------------------------------------------------------- */

/* Granite-4.0-H: 'M' Mamba2 / '*' NoPE attention layers, each with a SwiGLU FFN (dense, or with --experts a
 * softmax MoE plus an ungated shared expert of --ff-shexp), and the four µP scalars (archs-more.md §3). */
static braid_status gh_check(gen_shape *s) {
    BD_TRY(nh_check_kinds(s, "granitehybrid", "M*"));
    if (s->ssm_inner != 2 * s->n_embd)
        return bd_error(BRAID_E_INVALID, "granitehybrid: inner (%lld) must be 2 * embd (%lld)",
                        (long long)s->ssm_inner, (long long)s->n_embd);
    if (s->n_expert > 0 && (s->n_expert_used <= 0 || s->n_expert_used > s->n_expert))
        return bd_error(BRAID_E_INVALID, "granitehybrid: experts %lld choose %lld", (long long)s->n_expert,
                        (long long)s->n_expert_used);
    return BRAID_OK;
}

static braid_status gh_describe(const gen_shape *s, int64_t n_vocab, gen_plan *p) {
    const int64_t E = s->n_embd, hd = s->head_dim, nh = s->n_head, nkv = s->n_head_kv, L = s->n_layer;
    const int moe = s->n_expert > 0;
    int32_t *kv = bd_mallocn((size_t)L, sizeof *kv);
    if (!kv) return bd_error(BRAID_E_NOMEM, "gen-model: out of memory");
    for (int64_t il = 0; il < L; il++) kv[il] = nh_kind(s, il) == '*' ? (int32_t)nkv : 0;
    braid_status st = gen_key_u32(p, "context_length", (uint32_t)s->n_ctx);
    if (st == BRAID_OK) st = gen_key_u32(p, "embedding_length", (uint32_t)E);
    if (st == BRAID_OK) st = gen_key_u32(p, "block_count", (uint32_t)L);
    if (st == BRAID_OK) st = mixer_keys(s, p);
    if (st == BRAID_OK) st = gen_key_u32(p, "feed_forward_length", (uint32_t)s->n_ff);
    if (st == BRAID_OK) st = gen_key_u32(p, "attention.head_count", (uint32_t)nh);
    if (st == BRAID_OK) st = gen_key_i32_array(p, "attention.head_count_kv", kv, (uint64_t)L);
    if (st == BRAID_OK) st = gen_key_u32(p, "attention.key_length", (uint32_t)hd);
    if (st == BRAID_OK) st = gen_key_u32(p, "attention.value_length", (uint32_t)hd);
    if (st == BRAID_OK) st = gen_key_f32(p, "attention.layer_norm_rms_epsilon", s->eps);
    /* Granite-4.0-H-like multipliers */
    if (st == BRAID_OK) st = gen_key_f32(p, "embedding_scale", 12.0f);
    if (st == BRAID_OK) st = gen_key_f32(p, "residual_scale", 0.22f);
    if (st == BRAID_OK) st = gen_key_f32(p, "attention.scale", 0.0078125f);
    if (st == BRAID_OK) st = gen_key_f32(p, "logit_scale", 4.0f);
    if (st == BRAID_OK) st = gen_key_bool(p, "rope.scaling.finetuned", 0);
    if (moe) {
        if (st == BRAID_OK) st = gen_key_u32(p, "expert_count", (uint32_t)s->n_expert);
        if (st == BRAID_OK) st = gen_key_u32(p, "expert_used_count", (uint32_t)s->n_expert_used);
        if (st == BRAID_OK) st = gen_key_u32(p, "expert_shared_feed_forward_length", (uint32_t)(s->n_ff_shexp > 0 ? s->n_ff_shexp : 0));
    }
    bd_free(kv);
    BD_TRY(st);
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, n_vocab, "token_embd.weight"));
    for (int l = 0; l < (int)L; l++) {
        BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "blk.%d.attn_norm.weight", l));
        if (nh_kind(s, l) == 'M') {
            BD_TRY(mixer_tensors(s, p, l));
        } else {
            BD_TRY(gen_tensor(p, GEN_MATRIX, E, hd * nh, "blk.%d.attn_q.weight", l));
            BD_TRY(gen_tensor(p, GEN_MATRIX, E, hd * nkv, "blk.%d.attn_k.weight", l));
            BD_TRY(gen_tensor(p, GEN_MATRIX, E, hd * nkv, "blk.%d.attn_v.weight", l));
            BD_TRY(gen_tensor(p, GEN_MATRIX, hd * nh, E, "blk.%d.attn_output.weight", l));
        }
        BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "blk.%d.ffn_norm.weight", l));
        if (moe) {
            const int64_t ne = s->n_expert, ff = s->n_ff;
            BD_TRY(gen_tensor(p, GEN_F32MAT, E, ne, "blk.%d.ffn_gate_inp.weight", l));
            BD_TRY(gen_tensor3(p, GEN_MATRIX, E, ff, ne, "blk.%d.ffn_gate_exps.weight", l));
            BD_TRY(gen_tensor3(p, GEN_MATRIX, E, ff, ne, "blk.%d.ffn_up_exps.weight", l));
            BD_TRY(gen_tensor3(p, GEN_MATRIX, ff, E, ne, "blk.%d.ffn_down_exps.weight", l));
            if (s->n_ff_shexp > 0) {
                BD_TRY(gen_tensor(p, GEN_MATRIX, E, s->n_ff_shexp, "blk.%d.ffn_gate_shexp.weight", l));
                BD_TRY(gen_tensor(p, GEN_MATRIX, E, s->n_ff_shexp, "blk.%d.ffn_up_shexp.weight", l));
                BD_TRY(gen_tensor(p, GEN_MATRIX, s->n_ff_shexp, E, "blk.%d.ffn_down_shexp.weight", l));
            }
        } else {
            BD_TRY(gen_tensor(p, GEN_MATRIX, E, s->n_ff, "blk.%d.ffn_gate.weight", l));
            BD_TRY(gen_tensor(p, GEN_MATRIX, E, s->n_ff, "blk.%d.ffn_up.weight", l));
            BD_TRY(gen_tensor(p, GEN_MATRIX, s->n_ff, E, "blk.%d.ffn_down.weight", l));
        }
    }
    BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "output_norm.weight"));
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, n_vocab, "output.weight"));
    return BRAID_OK;
}

const gen_arch gen_arch_granitehybrid = {
    .name = "granitehybrid",
    .presets =
        {
            [GEN_PRESET_TINY] = NH_PRESET(4, 64, 128, 4, 2, 16, 128, 16, 4, 1, "MM*M"),
            [GEN_PRESET_SMALL] = NH_PRESET(6, 128, 256, 4, 2, 32, 256, 32, 8, 1, "MM*MM*"),
            [GEN_PRESET_MEDIUM] = NH_PRESET(8, 256, 768, 4, 2, 64, 512, 64, 8, 1, "MMM*"),
            /* ~0.55B with the untied output: Granite-4.0-H's one attention layer in ten, here one in eight */
            [GEN_PRESET_05B] = NH_PRESET(24, 1024, 2048, 16, 4, 64, 2048, 128, 32, 1, "MMMMMMM*"),
        },
    .check = gh_check,
    .describe = gh_describe,
};

/* ---- falcon-h1 ----------------------------------------------------------------------------------------- */

/* Falcon-H1: every layer attention (NEOX RoPE, head_dim free) and a Mamba2 mixer side by side (d_inner free,
 * grouped norm), then a SwiGLU FFN whose norm tensor has no .weight suffix (archs-more.md §4). */
static braid_status fh_check(gen_shape *s) {
    BD_TRY(mixer_check("falcon-h1", s));
    BD_TRY(gen_check_positive("falcon-h1", "ff", s->n_ff));
    BD_TRY(gen_check_positive("falcon-h1", "heads", s->n_head));
    BD_TRY(gen_check_positive("falcon-h1", "heads-kv", s->n_head_kv));
    BD_TRY(gen_check_positive("falcon-h1", "head-dim", s->head_dim));
    if (s->n_head % s->n_head_kv || s->head_dim % 2)
        return bd_error(BRAID_E_INVALID, "falcon-h1: heads %lld / kv %lld / head-dim %lld", (long long)s->n_head,
                        (long long)s->n_head_kv, (long long)s->head_dim);
    return BRAID_OK;
}

static braid_status fh_describe(const gen_shape *s, int64_t n_vocab, gen_plan *p) {
    const int64_t E = s->n_embd, hd = s->head_dim, nh = s->n_head, nkv = s->n_head_kv;
    BD_TRY(gen_key_u32(p, "context_length", (uint32_t)s->n_ctx));
    BD_TRY(gen_key_u32(p, "embedding_length", (uint32_t)E));
    BD_TRY(gen_key_u32(p, "block_count", (uint32_t)s->n_layer));
    BD_TRY(mixer_keys(s, p));
    BD_TRY(gen_key_u32(p, "feed_forward_length", (uint32_t)s->n_ff));
    BD_TRY(gen_key_u32(p, "attention.head_count", (uint32_t)nh));
    BD_TRY(gen_key_u32(p, "attention.head_count_kv", (uint32_t)nkv));
    BD_TRY(gen_key_u32(p, "attention.key_length", (uint32_t)hd));
    BD_TRY(gen_key_u32(p, "attention.value_length", (uint32_t)hd));
    BD_TRY(gen_key_f32(p, "attention.layer_norm_rms_epsilon", s->eps));
    BD_TRY(gen_key_f32(p, "rope.freq_base", s->rope_base));
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, n_vocab, "token_embd.weight"));
    for (int l = 0; l < (int)s->n_layer; l++) {
        BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "blk.%d.attn_norm.weight", l));
        BD_TRY(mixer_tensors(s, p, l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, E, hd * nh, "blk.%d.attn_q.weight", l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, E, hd * nkv, "blk.%d.attn_k.weight", l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, E, hd * nkv, "blk.%d.attn_v.weight", l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, hd * nh, E, "blk.%d.attn_output.weight", l));
        BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "blk.%d.ffn_norm", l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, E, s->n_ff, "blk.%d.ffn_gate.weight", l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, E, s->n_ff, "blk.%d.ffn_up.weight", l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, s->n_ff, E, "blk.%d.ffn_down.weight", l));
    }
    BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "output_norm.weight"));
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, n_vocab, "output.weight"));
    return BRAID_OK;
}

#define FH_PRESET(layers, embd, ff, heads, kv, hd, inner, state, sheads, groups)                                \
    {.n_ctx = 4096, .n_layer = layers, .n_embd = embd, .n_ff = ff, .n_head = heads, .n_head_kv = kv,            \
     .head_dim = hd, .n_rot = GEN_UNSET, .ssm_conv = 4, .ssm_state = state, .ssm_groups = groups,                \
     .ssm_heads = sheads, .ssm_inner = inner, .interval = GEN_UNSET, .rope_base = 1e11f, .eps = 1e-5f}

const gen_arch gen_arch_falcon_h1 = {
    .name = "falcon-h1",
    .presets =
        {
            [GEN_PRESET_TINY] = FH_PRESET(2, 64, 128, 4, 2, 16, 128, 16, 4, 1),
            /* head_dim * heads != n_embd and d_inner != 2 * n_embd, as the real models allow */
            [GEN_PRESET_SMALL] = FH_PRESET(4, 128, 256, 4, 2, 48, 192, 32, 8, 2),
            [GEN_PRESET_MEDIUM] = FH_PRESET(6, 256, 768, 8, 2, 32, 512, 64, 8, 2),
            /* Falcon-H1-0.5B's shape: 36 layers, hidden 1024, 8 heads of 64 (2 KV), d_ssm 1536, 24 SSM heads */
            [GEN_PRESET_05B] = FH_PRESET(36, 1024, 2048, 8, 2, 64, 1536, 128, 24, 1),
        },
    .check = fh_check,
    .describe = fh_describe,
};
