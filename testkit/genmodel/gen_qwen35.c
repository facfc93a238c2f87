/* gen_qwen35.c — the qwen35 row of the model generator: Qwen3.5 dense hybrids (Gated DeltaNet layers with
 * a full gated-attention layer every `interval` layers). Keys and tensors as llama.cpp loads them
 * (architectures.md §1.1-1.4, §1.11). */
#include "genmodel/gen_arch.h"

#define Q35_PRESET(ctx, layers, embd, ff, heads, kv, hd, rot, state, groups, vheads, iv)                      \
    {.n_ctx = ctx, .n_layer = layers, .n_embd = embd, .n_ff = ff, .n_head = heads, .n_head_kv = kv,           \
     .head_dim = hd, .n_rot = rot, .ssm_conv = 4, .ssm_state = state, .ssm_groups = groups,                    \
     .ssm_heads = vheads, .ssm_inner = GEN_UNSET, .interval = iv, .rope_base = 1e7f, .eps = 1e-6f}

braid_status gen_qwen35_check(gen_shape *s) {
    static const char *arch = "qwen35";
    BD_TRY(gen_check_positive(arch, "context length", s->n_ctx));
    BD_TRY(gen_check_positive(arch, "layers", s->n_layer));
    BD_TRY(gen_check_positive(arch, "embd", s->n_embd));
    BD_TRY(gen_check_positive(arch, "ff", s->n_ff));
    BD_TRY(gen_check_positive(arch, "heads", s->n_head));
    BD_TRY(gen_check_positive(arch, "heads-kv", s->n_head_kv));
    BD_TRY(gen_check_positive(arch, "head-dim", s->head_dim));
    BD_TRY(gen_check_positive(arch, "state", s->ssm_state));
    BD_TRY(gen_check_positive(arch, "k-heads", s->ssm_groups));
    BD_TRY(gen_check_positive(arch, "v-heads", s->ssm_heads));
    BD_TRY(gen_check_positive(arch, "interval", s->interval));
    if (s->n_head % s->n_head_kv)
        return bd_error(BRAID_E_INVALID, "qwen35: heads (%lld) must be a multiple of heads-kv (%lld)",
                        (long long)s->n_head, (long long)s->n_head_kv);
    if (s->ssm_heads % s->ssm_groups)
        return bd_error(BRAID_E_INVALID, "qwen35: v-heads (%lld) must be a multiple of k-heads (%lld)",
                        (long long)s->ssm_heads, (long long)s->ssm_groups);
    if (s->ssm_conv < 2)
        return bd_error(BRAID_E_INVALID, "qwen35: conv kernel must be >= 2 (got %lld)", (long long)s->ssm_conv);
    /* llama.cpp's graph takes head_v_dim = d_inner / H_v, its loader S: they must agree */
    if (s->ssm_inner == GEN_UNSET) s->ssm_inner = s->ssm_state * s->ssm_heads;
    if (s->ssm_inner != s->ssm_state * s->ssm_heads)
        return bd_error(BRAID_E_INVALID, "qwen35: inner size (%lld) must be state x v-heads (%lld)",
                        (long long)s->ssm_inner, (long long)(s->ssm_state * s->ssm_heads));
    if (s->n_rot == GEN_UNSET) { /* Qwen3.5's partial_rotary_factor 0.25 */
        s->n_rot = s->head_dim / 4;
        s->n_rot -= s->n_rot % 2;
        if (s->n_rot < 2) s->n_rot = 2;
    }
    if (s->n_rot <= 0 || s->n_rot % 2 || s->n_rot > s->head_dim)
        return bd_error(BRAID_E_INVALID, "qwen35: rope dims (%lld) must be even and in [2, head-dim %lld]",
                        (long long)s->n_rot, (long long)s->head_dim);
    return BRAID_OK;
}

static int is_recurrent(const gen_shape *s, int64_t il) { return (il + 1) % s->interval != 0; }

/* Layer l's FFN: routed experts with the gated shared expert (variant != 0), else the dense SwiGLU. */
static braid_status gen_ffn(const gen_shape *s, gen_plan *p, int variant, int l) {
    const int64_t E = s->n_embd;
    if (variant != 0) {
        const int64_t ne = s->n_expert, ff = s->n_ff_exp, fs = s->n_ff_shexp;
        BD_TRY(gen_tensor(p, GEN_F32MAT, E, ne, "blk.%d.ffn_gate_inp.weight", l));
        if (s->gate_up == 1) {
            BD_TRY(gen_tensor3(p, GEN_MATRIX, E, 2 * ff, ne, "blk.%d.ffn_gate_up_exps.weight", l));
        } else {
            BD_TRY(gen_tensor3(p, GEN_MATRIX, E, ff, ne, "blk.%d.ffn_gate_exps.weight", l));
            BD_TRY(gen_tensor3(p, GEN_MATRIX, E, ff, ne, "blk.%d.ffn_up_exps.weight", l));
        }
        BD_TRY(gen_tensor3(p, GEN_MATRIX, ff, E, ne, "blk.%d.ffn_down_exps.weight", l));
        BD_TRY(gen_tensor(p, GEN_F32MAT, E, 0, "blk.%d.ffn_gate_inp_shexp.weight", l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, E, fs, "blk.%d.ffn_gate_shexp.weight", l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, E, fs, "blk.%d.ffn_up_shexp.weight", l));
        BD_TRY(gen_tensor(p, GEN_MATRIX, fs, E, "blk.%d.ffn_down_shexp.weight", l));
        return BRAID_OK;
    }
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, s->n_ff, "blk.%d.ffn_gate.weight", l));
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, s->n_ff, "blk.%d.ffn_up.weight", l));
    BD_TRY(gen_tensor(p, GEN_MATRIX, s->n_ff, E, "blk.%d.ffn_down.weight", l));
    return BRAID_OK;
}

/* Layer l's gated full attention: Q and its gate interleaved per head, per-head Q/K norms. */
static braid_status gen_attn(const gen_shape *s, gen_plan *p, int l) {
    const int64_t E = s->n_embd, hd = s->head_dim, nh = s->n_head, nkv = s->n_head_kv;
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, 2 * hd * nh, "blk.%d.attn_q.weight", l));
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, hd * nkv, "blk.%d.attn_k.weight", l));
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, hd * nkv, "blk.%d.attn_v.weight", l));
    BD_TRY(gen_tensor(p, GEN_MATRIX, hd * nh, E, "blk.%d.attn_output.weight", l));
    BD_TRY(gen_tensor(p, GEN_NORM, hd, 0, "blk.%d.attn_q_norm.weight", l));
    BD_TRY(gen_tensor(p, GEN_NORM, hd, 0, "blk.%d.attn_k_norm.weight", l));
    return BRAID_OK;
}

/* The MTP (nextn) block at layer l = the trunk's length, as llama.cpp's qwen35 loaders read it: a full-attention
 * decoder block (its attention and FFN as the trunk's) plus enorm and hnorm over the token embedding and the
 * trunk's hidden state, eh_proj over their concatenation [2E -> E] and the head's own norm. The optional
 * nextn.embed_tokens and nextn.shared_head_head are left out: llama.cpp then uses token_embd and output. */
static braid_status gen_nextn(const gen_shape *s, gen_plan *p, int variant, int l) {
    const int64_t E = s->n_embd;
    BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "blk.%d.attn_norm.weight", l));
    BD_TRY(gen_attn(s, p, l));
    BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "blk.%d.post_attention_norm.weight", l));
    BD_TRY(gen_ffn(s, p, variant, l));
    BD_TRY(gen_tensor(p, GEN_MATRIX, 2 * E, E, "blk.%d.nextn.eh_proj.weight", l));
    BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "blk.%d.nextn.enorm.weight", l));
    BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "blk.%d.nextn.hnorm.weight", l));
    BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "blk.%d.nextn.shared_head_norm.weight", l));
    return BRAID_OK;
}

braid_status gen_qwen35_family_describe(const gen_shape *s, int64_t n_vocab, gen_plan *p, int variant) {
    const int64_t E = s->n_embd, hd = s->head_dim, nh = s->n_head, nkv = s->n_head_kv;
    const int64_t S = s->ssm_state, Hk = s->ssm_groups, Hv = s->ssm_heads;
    const int64_t key_dim = S * Hk, value_dim = S * Hv, conv_dim = 2 * key_dim + value_dim;

    /* M-RoPE sections [t, h, w, e] over the n_rot/2 rotated pairs, in Qwen3.5's proportions 11:11:10:0 */
    int64_t pairs = s->n_rot / 2, s0 = (pairs * 11 + 31) / 32, s1 = s0 < pairs - s0 ? s0 : pairs - s0;
    int32_t sections[4] = {(int32_t)s0, (int32_t)s1, (int32_t)(pairs - s0 - s1), 0};

    BD_TRY(gen_key_u32(p, "context_length", (uint32_t)s->n_ctx));
    BD_TRY(gen_key_u32(p, "embedding_length", (uint32_t)E));
    BD_TRY(gen_key_u32(p, "block_count", (uint32_t)(s->n_layer + s->nextn)));
    if (s->nextn) BD_TRY(gen_key_u32(p, "nextn_predict_layers", (uint32_t)s->nextn));
    BD_TRY(gen_key_u32(p, "feed_forward_length", (uint32_t)s->n_ff));
    BD_TRY(gen_key_u32(p, "attention.head_count", (uint32_t)nh));
    BD_TRY(gen_key_u32(p, "attention.head_count_kv", (uint32_t)nkv));
    BD_TRY(gen_key_u32(p, "attention.key_length", (uint32_t)hd));
    BD_TRY(gen_key_u32(p, "attention.value_length", (uint32_t)hd));
    BD_TRY(gen_key_u32(p, "rope.dimension_count", (uint32_t)s->n_rot));
    if (variant != 2) BD_TRY(gen_key_i32_array(p, "rope.dimension_sections", sections, 4)); /* qwen3next: NEOX */
    BD_TRY(gen_key_f32(p, "rope.freq_base", s->rope_base));
    BD_TRY(gen_key_f32(p, "attention.layer_norm_rms_epsilon", s->eps));
    BD_TRY(gen_key_u32(p, "ssm.conv_kernel", (uint32_t)s->ssm_conv));
    BD_TRY(gen_key_u32(p, "ssm.state_size", (uint32_t)S));
    BD_TRY(gen_key_u32(p, "ssm.group_count", (uint32_t)Hk));
    BD_TRY(gen_key_u32(p, "ssm.time_step_rank", (uint32_t)Hv));
    BD_TRY(gen_key_u32(p, "ssm.inner_size", (uint32_t)s->ssm_inner));
    BD_TRY(gen_key_u32(p, "full_attention_interval", (uint32_t)s->interval));
    if (variant != 0) {
        BD_TRY(gen_key_u32(p, "expert_count", (uint32_t)s->n_expert));
        BD_TRY(gen_key_u32(p, "expert_used_count", (uint32_t)s->n_expert_used));
        BD_TRY(gen_key_u32(p, "expert_feed_forward_length", (uint32_t)s->n_ff_exp));
        BD_TRY(gen_key_u32(p, "expert_shared_feed_forward_length", (uint32_t)s->n_ff_shexp));
    }

    BD_TRY(gen_tensor(p, GEN_MATRIX, E, n_vocab, "token_embd.weight"));
    for (int64_t il = 0; il < s->n_layer; il++) {
        int l = (int)il;
        BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "blk.%d.attn_norm.weight", l));
        if (is_recurrent(s, il)) { /* Gated DeltaNet */
            if (variant == 2 && s->qkvz == 2) { /* qwen3next's legacy grouped q ‖ k ‖ v ‖ z projection */
                BD_TRY(gen_tensor(p, GEN_MATRIX, E, conv_dim + value_dim, "blk.%d.ssm_in.weight", l));
            } else {
                BD_TRY(gen_tensor(p, GEN_MATRIX, E, conv_dim, "blk.%d.attn_qkv.weight", l));
                BD_TRY(gen_tensor(p, GEN_MATRIX, E, value_dim, "blk.%d.attn_gate.weight", l));
            }
            BD_TRY(gen_tensor(p, GEN_CONV, s->ssm_conv, conv_dim, "blk.%d.ssm_conv1d.weight", l));
            BD_TRY(gen_tensor(p, GEN_BIAS, Hv, 0, "blk.%d.ssm_dt.bias", l));
            BD_TRY(gen_tensor(p, GEN_NEG, Hv, 0, "blk.%d.ssm_a", l));
            if (variant == 2) { /* b and a grouped by key head in one matrix */
                BD_TRY(gen_tensor(p, GEN_MATRIX, E, 2 * Hv, "blk.%d.ssm_ba.weight", l));
            } else {
                BD_TRY(gen_tensor(p, GEN_MATRIX, E, Hv, "blk.%d.ssm_beta.weight", l));
                BD_TRY(gen_tensor(p, GEN_MATRIX, E, Hv, "blk.%d.ssm_alpha.weight", l));
            }
            BD_TRY(gen_tensor(p, GEN_NORM, S, 0, "blk.%d.ssm_norm.weight", l));
            BD_TRY(gen_tensor(p, GEN_MATRIX, value_dim, E, "blk.%d.ssm_out.weight", l));
        } else {
            BD_TRY(gen_attn(s, p, l));
        }
        BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "blk.%d.post_attention_norm.weight", l));
        BD_TRY(gen_ffn(s, p, variant, l));
    }
    for (int64_t j = 0; j < s->nextn; j++) BD_TRY(gen_nextn(s, p, variant, (int)(s->n_layer + j)));
    BD_TRY(gen_tensor(p, GEN_NORM, E, 0, "output_norm.weight"));
    BD_TRY(gen_tensor(p, GEN_MATRIX, E, n_vocab, "output.weight")); /* untied: see design.md §7 */
    return BRAID_OK;
}

static braid_status q35_describe(const gen_shape *s, int64_t n_vocab, gen_plan *p) {
    return gen_qwen35_family_describe(s, n_vocab, p, 0);
}

const gen_arch gen_arch_qwen35 = {
    .name = "qwen35",
    .presets =
        {
            /* tiny: architectures.md §1.11 (layers 0, 2 GDN; 1, 3 attention) */
            [GEN_PRESET_TINY] = Q35_PRESET(256, 4, 64, 128, 4, 2, 32, 16, 16, 2, 4, 2),
            [GEN_PRESET_SMALL] = Q35_PRESET(1024, 4, 128, 384, 4, 2, 32, GEN_UNSET, 32, 2, 4, 2),
            /* medium: every row a multiple of 256, so K-quants apply to every matrix */
            [GEN_PRESET_MEDIUM] = Q35_PRESET(4096, 8, 256, 768, 4, 2, 64, GEN_UNSET, 64, 2, 4, 4),
            /* 0.5b: Qwen3.5-0.8B's trunk (hidden 1024, 24 layers, 3 of 4 GDN, 8 q / 2 kv heads of 256,
             * 16 k / 16 v GDN heads of 128, ff 3584) with an untied output matrix: ~0.8B parameters */
            [GEN_PRESET_05B] = Q35_PRESET(32768, 24, 1024, 3584, 8, 2, 256, GEN_UNSET, 128, 16, 16, 4),
        },
    .check = gen_qwen35_check,
    .describe = q35_describe,
};
