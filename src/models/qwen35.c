/* qwen35.c — Qwen3.5 (dense hybrid): Gated DeltaNet layers braided with gated full attention (IMROPE).
 *
 * Facts: architectures.md §1 (keys, tensors, math) and §5 (numerics). Every 1 in `interval` layers is full
 * attention (or as `attention.recurrent_layers` says); the others are Gated DeltaNet layers with a short causal
 * conv and a delta-rule state per sequence. The forward pass reads top to bottom like §1.5:
 *
 *     x = token_embd[tokens]                                   (or embedding rows)
 *     for each layer: h = x + Mixer(RMSNorm(x)); x = h + SwiGLU(RMSNorm(h))
 *     logits = W_out · RMSNorm(x)                              (only for rows that asked)
 *
 * Memory is seen through bd_fwd_memory (arch.h): K/V rows in cells for attention layers, conv + delta states
 * for recurrent ones, stored in llama.cpp's layouts (conv rm[conv_dim][d_conv-1], time fastest; delta state
 * rm[H_v][S(j)][S(i)], i.e. each head's matrix transposed) so that the two are easy to compare.
 *
 * The same code runs the family's other members (variant below): qwen35moe (§1.12: the FFN is moe.h's MoE) and
 * qwen3next (§1.13: MoE FFN, plain NEOX RoPE on one position component, GDN projections grouped by key head
 * and q/k heads repeated interleaved, the array transforms of qwen3next.h).
 *
 * A file with nextn_predict_layers 1 and the block's tensors also carries an MTP head (llama.cpp's graph_mtp
 * of qwen35.cpp / qwen35moe.cpp / qwen3next.cpp): one more gated full-attention decoder block after the trunk
 * that predicts the token after next from the next token's embedding and the trunk's hidden state:
 *
 *     u = eh_proj · (RMSNorm(embd(token); enorm) ‖ RMSNorm(h; hnorm))        h = RMSNorm(x_trunk; output_norm)
 *     u = u + Attn(RMSNorm(u)); u = u + FFN(RMSNorm(u))                        (its own K/V rows)
 *     h' = RMSNorm(u; shared_head_norm or output_norm); logits = (shared_head_head or output) · h'
 *
 * qw_mtp_forward runs it; the engine keeps its K/V rows and chains h' into the next draft step. */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/arena.h"
#include "base/status.h"
#include "models/arch.h"
#include "models/blocks.h"
#include "models/layers.h"
#include "models/loader.h"
#include "models/moe.h"
#include "models/qwen3next.h"
#include "tensor/ops.h"
#include "tensor/tap.h"
#include "tensor/types.h"

#define QW_MAX_ROT_PAIRS (BD_ROPE_MAX_ROT / 2)

typedef enum qw_variant { QW_QWEN35, QW_QWEN35MOE, QW_QWEN3NEXT } qw_variant;
static const char *const qw_arch_name[] = {"qwen35", "qwen35moe", "qwen3next"};

/* Hyperparameters; plain fixed-width fields so that their bytes feed the model fingerprint. */
typedef struct qw_hparams {
    uint32_t n_ctx_train, n_embd, n_layer_all, n_layer, n_ff, n_vocab;
    uint32_t n_head, n_head_kv, head_dim, n_rot;
    float eps, freq_base, freq_scale, pad0;
    int32_t sections[4];
    uint32_t d_conv, d_inner, S, H_v, H_k;
    uint32_t key_dim, value_dim, conv_dim;
} qw_hparams;

typedef struct qw_layer {
    int recurrent;
    int slot; /* index among attention layers or among recurrent layers */
    bd_weight attn_norm;  /* [n_embd] */
    bd_weight post_norm;  /* [n_embd] (pre-FFN norm) */
    layer_attn attn;      /* gated attention: W_q rows per head are hd query rows then hd gate rows; q/k norms */
    /* Gated DeltaNet */
    bd_weight wqkv;       /* [conv_dim][n_embd] -> q ‖ k ‖ v (pre-conv) */
    bd_weight wgate;      /* [value_dim][n_embd] -> z */
    bd_weight conv1d;     /* [conv_dim][d_conv] F32 */
    bd_weight dt_bias;    /* [H_v] */
    bd_weight ssm_a;      /* [H_v] A = -exp(A_log) */
    bd_weight wbeta;      /* [H_v][n_embd] */
    bd_weight walpha;     /* [H_v][n_embd] */
    bd_weight ssm_norm;   /* [S] */
    bd_weight ssm_out;    /* [n_embd][value_dim] */
    /* qwen3next GDN: ssm_in (legacy, instead of wqkv + wgate) [H_k][q S ‖ k S ‖ v rS ‖ z rS][n_embd];
     * ssm_ba (instead of wbeta, walpha) [H_k][b r ‖ a r][n_embd] */
    bd_weight ssm_in, ssm_ba;
    layer_ffn ffn;              /* SwiGLU */
    moe_weights moe;            /* qwen35moe, qwen3next: instead of the dense FFN */
} qw_layer;

typedef struct qwen35 {
    qw_variant variant;
    qw_hparams hp;
    moe_hparams moe;     /* variants with a MoE FFN */
    int32_t n_pos;       /* position components per row in bd_fwd_batch.pos: 4 (M-RoPE) or 1 (qwen3next) */
    bd_rope rope;          /* IMROPE with the sections (qwen3next: NEOX) */
    layer_attn_shape ash;  /* the attention block's options */
    layer_map map;         /* Gated DeltaNet layers recurrent, the rest attention */
    bd_weight tok_embd;    /* [n_vocab][n_embd] */
    bd_weight output_norm; /* [n_embd] */
    bd_weight output;      /* [n_vocab][n_embd] (token_embd when tied) */
    qw_layer *layers;      /* [n_layer] */
    /* the MTP head (has_mtp): block at layer index n_layer, see the top comment */
    int has_mtp;
    qw_layer mtp;          /* attention (not recurrent) + FFN or MoE */
    bd_weight mtp_eh;      /* [n_embd][2 n_embd] eh_proj over enorm(embd) ‖ hnorm(h) */
    bd_weight mtp_enorm, mtp_hnorm; /* [n_embd] */
    bd_weight mtp_embd;    /* [n_vocab][n_embd] nextn.embed_tokens, else token_embd */
    bd_weight mtp_head_norm; /* [n_embd] nextn.shared_head_norm, else output_norm */
    bd_weight mtp_head;    /* [n_vocab][n_embd] nextn.shared_head_head, else output */
} qwen35;

/* ---- loading ------------------------------------------------------------------------------------------- */

static void qw_free(void *data) {
    qwen35 *m = data;
    if (!m) return;
    layer_map_free(&m->map);
    bd_free(m->layers);
    bd_free(m);
}

/* §0.3, §1.1, §1.2, §1.3: keys with llama.cpp's strict types, derived sizes, constraints, layer kinds. */
static braid_status qw_load_hparams(qwen35 *m, bd_loader *l) {
    qw_hparams *hp = &m->hp;
    BD_TRY(bd_key_u32(l, "context_length", 1, &hp->n_ctx_train));
    BD_TRY(bd_key_u32(l, "embedding_length", 1, &hp->n_embd));
    BD_TRY(bd_key_u32(l, "block_count", 1, &hp->n_layer_all));
    uint32_t nextn = 0;
    BD_TRY(bd_key_u32(l, "nextn_predict_layers", 0, &nextn));
    if (hp->n_layer_all == 0 || hp->n_layer_all > 4096 || nextn >= hp->n_layer_all)
        return bd_error(BRAID_E_FORMAT, "qwen35: bad block_count %u / nextn_predict_layers %u", hp->n_layer_all,
                        nextn);
    hp->n_layer = hp->n_layer_all - nextn;
    if (hp->n_embd == 0 || hp->n_embd > (1u << 20)) return bd_error(BRAID_E_FORMAT, "qwen35: bad embedding_length");

    /* Per-layer keys: braid computes uniform layers, so every trunk layer must agree. */
    uint32_t *tmp = bd_mallocn(hp->n_layer_all, sizeof *tmp);
    if (!tmp) return bd_error(BRAID_E_NOMEM, "qwen35: out of memory");
    braid_status st = BRAID_OK;
    struct { const char *key; uint32_t *dst; uint32_t dflt; } per_layer[] = {
        {"feed_forward_length", &hp->n_ff, 0},
        {"attention.head_count", &hp->n_head, 0},
        {"attention.head_count_kv", &hp->n_head_kv, 0},
    };
    for (size_t k = 0; k < sizeof per_layer / sizeof per_layer[0] && st == BRAID_OK; k++) {
        int found;
        *per_layer[k].dst = per_layer[k].dflt;
        st = bd_key_u32_per_layer(l, per_layer[k].key, hp->n_layer_all, 0, tmp, &found);
        if (st != BRAID_OK || !found) continue;
        *per_layer[k].dst = tmp[0];
        for (uint32_t i = 1; i < hp->n_layer; i++)
            if (tmp[i] != tmp[0])
                st = bd_error(BRAID_E_UNSUPPORTED, "qwen35: %s differs between layers (%u vs %u)", per_layer[k].key,
                              tmp[0], tmp[i]);
    }
    if (st == BRAID_OK && hp->n_head_kv == 0) hp->n_head_kv = hp->n_head;
    if (st == BRAID_OK && (hp->n_head == 0 || (hp->n_ff == 0 && m->variant == QW_QWEN35)))
        st = bd_error(BRAID_E_FORMAT, "qwen35: attention.head_count and feed_forward_length are required");

    /* Layer kinds (§1.3). */
    if (st == BRAID_OK) st = layer_map_init(&m->map, "qwen35", hp->n_layer);
    uint8_t *kind = m->map.kind;
    if (st == BRAID_OK) {
        int found;
        st = bd_key_u32_per_layer(l, "attention.recurrent_layers", hp->n_layer_all, 0, tmp, &found);
        if (st == BRAID_OK && found) {
            for (uint32_t i = 0; i < hp->n_layer; i++) kind[i] = tmp[i] != 0 ? LAYER_MEM_RECR : LAYER_MEM_ATTN;
        } else if (st == BRAID_OK) {
            uint32_t interval = 4;
            st = bd_key_u32(l, "full_attention_interval", 0, &interval);
            if (st == BRAID_OK && interval == 0)
                st = bd_error(BRAID_E_FORMAT, "qwen35: full_attention_interval is 0");
            for (uint32_t i = 0; st == BRAID_OK && i < hp->n_layer; i++)
                kind[i] = (i + 1) % interval != 0 ? LAYER_MEM_RECR : LAYER_MEM_ATTN;
        }
    }
    bd_free(tmp);
    BD_TRY(st);

    hp->head_dim = hp->n_embd / hp->n_head;
    BD_TRY(bd_key_u32(l, "attention.key_length", 0, &hp->head_dim));
    uint32_t vlen = hp->head_dim;
    BD_TRY(bd_key_u32(l, "attention.value_length", 0, &vlen));
    if (vlen != hp->head_dim)
        return bd_error(BRAID_E_UNSUPPORTED, "qwen35: key_length %u != value_length %u", hp->head_dim, vlen);
    hp->n_rot = hp->head_dim;
    BD_TRY(bd_key_u32(l, "rope.dimension_count", 0, &hp->n_rot));
    hp->freq_base = 10000.0f;
    BD_TRY(bd_key_f32(l, "rope.freq_base", 0, &hp->freq_base));
    gguf_str scaling = {"linear", 6};
    BD_TRY(bd_key_str(l, "rope.scaling.type", 0, &scaling));
    if (!((scaling.len == 6 && !memcmp(scaling.ptr, "linear", 6)) || (scaling.len == 4 && !memcmp(scaling.ptr, "none", 4))))
        return bd_error(BRAID_E_UNSUPPORTED, "qwen35: rope.scaling.type %.*s is not supported", (int)scaling.len,
                        scaling.ptr);
    float factor = 0.0f;
    BD_TRY(bd_key_f32(l, "rope.scaling.factor", 0, &factor));
    hp->freq_scale = factor > 0.0f ? 1.0f / factor : 1.0f;
    BD_TRY(bd_key_f32(l, "attention.layer_norm_rms_epsilon", 1, &hp->eps));
    int found;
    if (m->variant != QW_QWEN3NEXT) /* qwen3next: plain NEOX RoPE, sections not read */
        BD_TRY(bd_key_i32_array(l, "rope.dimension_sections", 4, 1, hp->sections, &found));
    BD_TRY(bd_key_u32(l, "ssm.conv_kernel", 1, &hp->d_conv));
    BD_TRY(bd_key_u32(l, "ssm.inner_size", 1, &hp->d_inner));
    BD_TRY(bd_key_u32(l, "ssm.state_size", 1, &hp->S));
    BD_TRY(bd_key_u32(l, "ssm.time_step_rank", 1, &hp->H_v));
    BD_TRY(bd_key_u32(l, "ssm.group_count", 1, &hp->H_k));

    /* §1.2 constraints. */
    const uint32_t hd = hp->head_dim;
    if (hd == 0 || hd > 4096 || hp->n_head > 4096 || hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv)
        return bd_error(BRAID_E_FORMAT, "qwen35: bad attention heads (head_dim %u, heads %u, kv heads %u)", hd,
                        hp->n_head, hp->n_head_kv);
    if (hp->n_rot == 0 || hp->n_rot % 2 || hp->n_rot > hd || hp->n_rot / 2 > QW_MAX_ROT_PAIRS)
        return bd_error(BRAID_E_FORMAT, "qwen35: rope.dimension_count %u must be even and <= head_dim %u", hp->n_rot,
                        hd);
    int64_t sect = 0;
    for (int i = 0; i < 4 && m->variant != QW_QWEN3NEXT; i++) {
        if (hp->sections[i] < 0) return bd_error(BRAID_E_FORMAT, "qwen35: negative rope section");
        sect += hp->sections[i];
    }
    if (m->variant != QW_QWEN3NEXT && (sect <= 0 || sect > hd || (hp->sections[0] | hp->sections[1] | hp->sections[2]) == 0))
        return bd_error(BRAID_E_FORMAT, "qwen35: rope.dimension_sections sum %lld must be in 1..head_dim %u",
                        (long long)sect, hd);
    if (hp->S == 0 || hp->S > 4096)
        return bd_error(BRAID_E_FORMAT, "qwen35: ssm.state_size %u not in 1..4096", hp->S);
    if (hp->H_k == 0 || hp->H_v == 0 || hp->H_v % hp->H_k)
        return bd_error(BRAID_E_FORMAT, "qwen35: ssm.time_step_rank %u must be a multiple of ssm.group_count %u",
                        hp->H_v, hp->H_k);
    if (hp->d_inner != hp->S * hp->H_v)
        return bd_error(BRAID_E_FORMAT, "qwen35: ssm.inner_size %u != ssm.state_size %u * ssm.time_step_rank %u",
                        hp->d_inner, hp->S, hp->H_v);
    if (hp->d_conv < 1 || hp->d_conv > 16) /* bd_conv1d_causal's limit; real models use 4 */
        return bd_error(BRAID_E_UNSUPPORTED, "qwen35: ssm.conv_kernel %u is not in 1..16", hp->d_conv);
    hp->key_dim = hp->S * hp->H_k;
    hp->value_dim = hp->S * hp->H_v;
    hp->conv_dim = 2 * hp->key_dim + hp->value_dim;
    if (m->variant != QW_QWEN35) BD_TRY(moe_load_hparams(l, hp->n_layer_all, hp->n_layer, hp->n_ff, &m->moe));

    /* IMROPE (§1.6) over the sections, or qwen3next's NEOX (tensor/rope.c) */
    m->rope = (bd_rope){.mode = m->variant == QW_QWEN3NEXT ? BD_ROPE_NEOX : BD_ROPE_IMROPE, .n_rot = (int)hp->n_rot,
                        .freq_base = hp->freq_base, .freq_scale = hp->freq_scale, .attn_factor = 1.0f,
                        .sections = {hp->sections[0], hp->sections[1], hp->sections[2], hp->sections[3]}};
    m->ash = (layer_attn_shape){.n_head = (int32_t)hp->n_head, .n_head_kv = (int32_t)hp->n_head_kv,
                                .head_dim = (int32_t)hp->head_dim, .gated = 1, .rope = &m->rope,
                                .n_pos = m->n_pos, .eps = hp->eps};
    return BRAID_OK;
}

/* The MTP block, when the file has one block (llama.cpp runs exactly one) with its eh_proj: bound and used.
 * Without eh_proj (or with more blocks) the nextn tensors stay skipped, as before, and has_mtp is 0. */
static braid_status qw_bind_mtp(qwen35 *m, bd_loader *l) {
    const qw_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, V = hp->n_vocab;
    const int il = (int)hp->n_layer;
    if (hp->n_layer_all - hp->n_layer != 1) return BRAID_OK;
    BD_TRY(bd_bind_layer(l, il, "nextn.eh_proj.weight", 2 * E, E, 0, 0, &m->mtp_eh));
    if (!m->mtp_eh.data) return BRAID_OK;
    qw_layer *L = &m->mtp;
    L->recurrent = 0;
    L->slot = 0; /* the head's own K/V rows, slot 0 of the memory mtp_forward is given */
    BD_TRY(bd_bind_layer(l, il, "nextn.enorm.weight", E, 1, 1, 1, &m->mtp_enorm));
    BD_TRY(bd_bind_layer(l, il, "nextn.hnorm.weight", E, 1, 1, 1, &m->mtp_hnorm));
    BD_TRY(bd_bind_layer(l, il, "nextn.embed_tokens.weight", E, V, 0, 0, &m->mtp_embd));
    BD_TRY(bd_bind_layer(l, il, "nextn.shared_head_norm.weight", E, 1, 1, 0, &m->mtp_head_norm));
    BD_TRY(bd_bind_layer(l, il, "nextn.shared_head_head.weight", E, V, 0, 0, &m->mtp_head));
    if (!m->mtp_embd.data) m->mtp_embd = m->tok_embd;
    if (!m->mtp_head_norm.data) m->mtp_head_norm = m->output_norm;
    if (!m->mtp_head.data) m->mtp_head = m->output;
    BD_TRY(bd_bind_layer(l, il, "attn_norm.weight", E, 1, 1, 1, &L->attn_norm));
    BD_TRY(bd_bind_layer(l, il, "post_attention_norm.weight", E, 1, 1, 1, &L->post_norm));
    BD_TRY(layer_attn_bind(l, il, E, &m->ash, LAYER_QK_NORM_REQUIRED, LAYER_OUT_BIAS_NONE, &L->attn));
    if (m->variant != QW_QWEN35) BD_TRY(moe_bind(l, il, E, &m->moe, &L->moe));
    else BD_TRY(layer_ffn_bind(l, il, E, hp->n_ff, 1, 0, &L->ffn));
    m->has_mtp = 1;
    return BRAID_OK;
}

/* §1.4: every tensor with its exact shape; the file must hold exactly these (plus skipped MTP blocks). */
static braid_status qw_bind(qwen35 *m, bd_loader *l) {
    const qw_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, V = hp->n_vocab;
    BD_TRY(layer_bind_io(l, E, V, "output_norm.weight", &m->tok_embd, &m->output_norm, &m->output));
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        qw_layer *L = &m->layers[il];
        L->recurrent = m->map.kind[il] == LAYER_MEM_RECR;
        BD_TRY(bd_bind_layer(l, il, "attn_norm.weight", E, 1, 1, 1, &L->attn_norm));
        BD_TRY(bd_bind_layer(l, il, "post_attention_norm.weight", E, 1, 1, 1, &L->post_norm));
        if (!L->recurrent) {
            BD_TRY(layer_attn_bind(l, (int)il, E, &m->ash, LAYER_QK_NORM_REQUIRED, LAYER_OUT_BIAS_NONE, &L->attn));
        } else if (m->variant == QW_QWEN3NEXT) {
            /* attn_qkv + attn_gate (current converter) or the legacy grouped ssm_in */
            BD_TRY(bd_bind_layer(l, il, "attn_qkv.weight", E, hp->conv_dim, 0, 0, &L->wqkv));
            BD_TRY(bd_bind_layer(l, il, "attn_gate.weight", E, hp->value_dim, 0, L->wqkv.data != NULL, &L->wgate));
            if (!L->wqkv.data)
                BD_TRY(bd_bind_layer(l, il, "ssm_in.weight", E, hp->conv_dim + hp->value_dim, 0, 1, &L->ssm_in));
            BD_TRY(bd_bind_layer(l, il, "ssm_conv1d.weight", hp->d_conv, hp->conv_dim, 1, 1, &L->conv1d));
            BD_TRY(bd_bind_layer(l, il, "ssm_dt.bias", hp->H_v, 1, 1, 1, &L->dt_bias));
            BD_TRY(bd_bind_layer(l, il, "ssm_a", hp->H_v, 1, 1, 1, &L->ssm_a));
            BD_TRY(bd_bind_layer(l, il, "ssm_ba.weight", E, 2 * hp->H_v, 0, 1, &L->ssm_ba));
            BD_TRY(bd_bind_layer(l, il, "ssm_norm.weight", hp->S, 1, 1, 1, &L->ssm_norm));
            BD_TRY(bd_bind_layer(l, il, "ssm_out.weight", hp->value_dim, E, 0, 1, &L->ssm_out));
        } else {
            BD_TRY(bd_bind_layer(l, il, "attn_qkv.weight", E, hp->conv_dim, 0, 1, &L->wqkv));
            BD_TRY(bd_bind_layer(l, il, "attn_gate.weight", E, hp->value_dim, 0, 1, &L->wgate));
            BD_TRY(bd_bind_layer(l, il, "ssm_conv1d.weight", hp->d_conv, hp->conv_dim, 1, 1, &L->conv1d));
            BD_TRY(bd_bind_layer(l, il, "ssm_dt.bias", hp->H_v, 1, 1, 1, &L->dt_bias));
            BD_TRY(bd_bind_layer(l, il, "ssm_a", hp->H_v, 1, 1, 1, &L->ssm_a));
            BD_TRY(bd_bind_layer(l, il, "ssm_beta.weight", E, hp->H_v, 0, 1, &L->wbeta));
            BD_TRY(bd_bind_layer(l, il, "ssm_alpha.weight", E, hp->H_v, 0, 1, &L->walpha));
            BD_TRY(bd_bind_layer(l, il, "ssm_norm.weight", hp->S, 1, 1, 1, &L->ssm_norm));
            BD_TRY(bd_bind_layer(l, il, "ssm_out.weight", hp->value_dim, E, 0, 1, &L->ssm_out));
        }
        if (m->variant != QW_QWEN35) {
            BD_TRY(moe_bind(l, (int)il, E, &m->moe, &L->moe));
            continue;
        }
        BD_TRY(layer_ffn_bind(l, (int)il, E, hp->n_ff, 1, 0, &L->ffn));
    }
    BD_TRY(qw_bind_mtp(m, l));
    return bd_loader_finish(l, (int)hp->n_layer);
}

static braid_status qw_load(const gguf_file *f, int32_t n_vocab, qw_variant variant, void **data,
                            bd_mem_layout *layout) {
    qwen35 *m = bd_calloc(1, sizeof *m);
    if (!m) return bd_error(BRAID_E_NOMEM, "qwen35: out of memory");
    m->variant = variant;
    m->n_pos = variant == QW_QWEN3NEXT ? 1 : 4;
    bd_loader l;
    braid_status st = bd_loader_init(&l, f, qw_arch_name[variant]);
    if (st == BRAID_OK) st = qw_load_hparams(m, &l);
    if (st == BRAID_OK && n_vocab <= 0) st = bd_error(BRAID_E_FORMAT, "qwen35: the vocabulary is empty");
    const qw_hparams *hp = &m->hp;
    if (st == BRAID_OK) {
        m->hp.n_vocab = (uint32_t)n_vocab;
        m->layers = bd_calloc(hp->n_layer, sizeof *m->layers);
        if (!m->layers) st = bd_error(BRAID_E_NOMEM, "qwen35: out of memory");
    }
    if (st == BRAID_OK) st = qw_bind(m, &l);
    bd_loader_free(&l);
    if (st == BRAID_OK)
        st = layer_map_layout(&m->map, qw_arch_name[variant], hp->n_layer, m->n_pos, &m->hp, sizeof m->hp, &m->moe,
                              variant != QW_QWEN35 ? sizeof m->moe : 0, layout);
    if (st != BRAID_OK) {
        qw_free(m);
        return st;
    }
    for (uint32_t il = 0; il < hp->n_layer; il++) m->layers[il].slot = m->map.slot[il];
    layout->n_embd_k = (int32_t)(hp->head_dim * hp->n_head_kv);
    layout->n_embd_v = layout->n_embd_k;
    layout->n_conv = (int64_t)(hp->d_conv - 1) * hp->conv_dim;
    layout->n_ssm = (int64_t)hp->S * hp->S * hp->H_v;
    *data = m;
    return BRAID_OK;
}

static int32_t qw_n_embd(const void *data) { return (int32_t)((const qwen35 *)data)->hp.n_embd; }

static void qw_hparams_bytes(const void *data, const void **bytes, size_t *len) {
    layer_map_fingerprint(&((const qwen35 *)data)->map, bytes, len);
}

/* ---- scratch --------------------------------------------------------------------------------------------- */

/* Every activation buffer of one ubatch of T rows, carved from one arena. */
typedef struct qw_scratch {
    float *x;      /* [T][n_embd] residual stream */
    float *u;      /* [T][n_embd] normed input of a block; the mixer's output overwrites it */
    layer_attn_scratch att; /* the attention block's buffers */
    float *mixed;  /* [T][conv_dim] GDN q ‖ k ‖ v before the conv */
    float *z;      /* [T][value_dim] */
    float *o;      /* [T][value_dim] GDN output before ssm_out */
    float *ba;     /* [T][2*H_v] beta ‖ alpha */
    float *ff_g;   /* [T][n_ff] */
    float *ff_u;   /* [T][n_ff] */
    float *f;      /* [T][n_embd] FFN output */
    float *delta;  /* [S] silu(z) of one head */
    float *y;      /* [T][conv_dim] conv output (GDN q ‖ k ‖ v) */
    float *cat;    /* MTP: [T][2*n_embd] enorm(embd) ‖ hnorm(h) */
    float *pre;    /* qwen3next: [T][max(2*H_v, conv_dim + value_dim if ssm_in)] grouped projections before split */
    float *qk;     /* qwen3next with H_v > H_k: [T][2][value_dim] q ‖ k heads repeated per value head */
    float **snap;  /* [2*T] a run's per-row snapshot pointers (layer_rs_view) */
    void *moe;     /* MoE FFN scratch (moe_scratch_size) */
    void *wbuf;    /* matmul activation conversion */
} qw_scratch;

static size_t maxz(size_t a, size_t b) { return a > b ? a : b; }

/* Lays the arena out (a->base NULL: only measures). */
static void qw_carve(const qwen35 *m, bd_arena *a, int32_t T, int32_t n_ctx, int32_t n_threads, qw_scratch *s) {
    const qw_hparams *hp = &m->hp;
    s->x = bd_arena_floats(a, (size_t)T * hp->n_embd);
    s->u = bd_arena_floats(a, (size_t)T * hp->n_embd);
    layer_attn_carve(a, &m->ash, T, n_ctx, n_threads, &s->att);
    s->mixed = bd_arena_floats(a, (size_t)T * hp->conv_dim);
    s->z = bd_arena_floats(a, (size_t)T * hp->value_dim);
    s->o = bd_arena_floats(a, (size_t)T * hp->value_dim);
    s->ba = bd_arena_floats(a, (size_t)T * 2 * hp->H_v);
    s->ff_g = bd_arena_floats(a, (size_t)T * hp->n_ff);
    s->ff_u = bd_arena_floats(a, (size_t)T * hp->n_ff);
    s->f = bd_arena_floats(a, (size_t)T * hp->n_embd);
    s->delta = bd_arena_floats(a, hp->S);
    s->y = bd_arena_floats(a, (size_t)T * hp->conv_dim);
    s->pre = s->qk = NULL;
    if (m->variant == QW_QWEN3NEXT) {
        int legacy = 0;
        for (uint32_t il = 0; il < hp->n_layer; il++) legacy |= m->layers[il].ssm_in.data != NULL;
        s->pre = bd_arena_floats(a, (size_t)T * maxz(2u * hp->H_v, legacy ? hp->conv_dim + hp->value_dim : 0));
        if (hp->H_v != hp->H_k) s->qk = bd_arena_floats(a, (size_t)T * 2 * hp->value_dim);
    }
    s->cat = m->has_mtp ? bd_arena_floats(a, (size_t)T * 2 * hp->n_embd) : NULL;
    s->snap = bd_arena_take(a, (size_t)2 * T * sizeof(float *));
    s->moe = m->variant != QW_QWEN35 ? bd_arena_take(a, moe_scratch_size(&m->moe, hp->n_embd, T)) : NULL;
    /* The largest activation conversion any matmul of this model needs. */
    size_t w = blk_matmul_wsize(m->output.type, m->output.n_in, T);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const qw_layer *L = &m->layers[il];
        const bd_weight *ws[] = {&L->wqkv, &L->wgate, &L->wbeta, &L->walpha, &L->ssm_out, &L->ssm_in, &L->ssm_ba};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            if (ws[i]->data) w = maxz(w, blk_matmul_wsize(ws[i]->type, ws[i]->n_in, T));
        w = maxz(w, layer_attn_wsize(&L->attn, T));
        w = maxz(w, layer_ffn_wsize(&L->ffn, T));
        if (m->variant != QW_QWEN35) w = maxz(w, moe_wsize(&L->moe, T));
    }
    if (m->has_mtp) {
        w = maxz(w, blk_matmul_wsize(m->mtp_eh.type, m->mtp_eh.n_in, T));
        w = maxz(w, blk_matmul_wsize(m->mtp_head.type, m->mtp_head.n_in, T));
        w = maxz(w, layer_attn_wsize(&m->mtp.attn, T));
        w = maxz(w, m->variant != QW_QWEN35 ? moe_wsize(&m->mtp.moe, T) : layer_ffn_wsize(&m->mtp.ffn, T));
    }
    s->wbuf = bd_arena_take(a, w);
}

static size_t qw_scratch_size(const void *data, int32_t n_batch, int32_t n_ctx, int32_t n_threads) {
    qw_scratch s;
    bd_arena a = bd_arena_at(NULL);
    qw_carve(data, &a, n_batch, n_ctx, n_threads, &s);
    return bd_arena_size(&a);
}

/* ---- the blocks of the forward pass ----------------------------------------------------------------------- */

/* §1.7 Gated DeltaNet. u [T][n_embd] normed input -> out [T][n_embd] (may equal u); each run's states advance
 * in row order from the run's state_in to its state_out. */
static void qw_gated_deltanet(const qwen35 *m, const qw_layer *L, qw_scratch *s, bd_threadpool *tp,
                              const bd_fwd_batch *b, const bd_fwd_memory *mem, float *out) {
    const qw_hparams *hp = &m->hp;
    const int il = (int)(L - m->layers);
    const int32_t T = b->n, S = (int32_t)hp->S, Hv = (int32_t)hp->H_v, Hk = (int32_t)hp->H_k;
    const int32_t C = (int32_t)hp->conv_dim, KD = (int32_t)hp->key_dim, W = (int32_t)hp->d_conv - 1;
    float *mixed = s->mixed, *z = s->z;
    float *beta = s->ba, *alpha = s->ba + (size_t)T * Hv; /* [T][H_v] each */

    const int grp = Hv / Hk; /* value heads per key head */
    if (!L->ssm_in.data && !L->ssm_ba.data) { /* qwen35: the four projections of u in one dispatch */
        blk_matmul_multi(tp, (const bd_weight *[]){&L->wqkv, &L->wgate, &L->wbeta, &L->walpha},
                         (float *[]){mixed, z, beta, alpha}, 4, s->u, T, s->wbuf);
    } else {
        if (L->ssm_in.data) { /* qwen3next legacy: one grouped projection, split into q ‖ k ‖ v and z */
            blk_matmul(tp, &L->ssm_in, s->u, T, s->pre, s->wbuf);
            q3n_split_qkvz(s->pre, T, S, Hk, grp, mixed, C, z, hp->value_dim);
        } else {
            blk_matmul(tp, &L->wqkv, s->u, T, mixed, s->wbuf);
            blk_matmul(tp, &L->wgate, s->u, T, z, s->wbuf);
        }
        if (L->ssm_ba.data) { /* qwen3next: b and a grouped by key head in one projection */
            blk_matmul(tp, &L->ssm_ba, s->u, T, s->pre, s->wbuf);
            q3n_split_ba(s->pre, T, Hk, grp, beta, alpha);
        } else {
            blk_matmul(tp, &L->wbeta, s->u, T, beta, s->wbuf);
            blk_matmul(tp, &L->walpha, s->u, T, alpha, s->wbuf);
        }
    }

    bd_tap("linear_attn_qkv_mixed", il, mixed, C, T, C);
    bd_tap("z", il, z, hp->value_dim, T, hp->value_dim);
    /* β = sigmoid(b); g = softplus(a + dt_bias) ⊙ A (A < 0, so g <= 0) */
    const float *A = L->ssm_a.data, *dt_bias = L->dt_bias.data;
    bd_sigmoid(beta, beta, (int64_t)T * Hv);
    for (int32_t t = 0; t < T; t++) {
        float *at = alpha + (size_t)t * Hv;
        bd_add(at, at, dt_bias, Hv);
        bd_softplus(at, at, Hv);
        bd_mul(at, at, A, Hv);
    }
    bd_tap("beta_sigmoid", il, beta, Hv, T, Hv);
    bd_tap("gate", il, alpha, Hv, T, Hv);

    /* One run at a time: the causal depthwise conv over the sequence's window (state ‖ inputs) then SiLU
     * (bd_conv1d_causal_from), q and k L2-normed per head, then the delta rule (bd_gdn_from). Both read the
     * run's state where the memory keeps it and leave the new one in the run's out block: no copy first. */
    const float *cw = L->conv1d.data;
    for (int32_t k = 0; k < mem->n_runs; k++) {
        const bd_fwd_run *run = &mem->runs[k];
        const int32_t t0 = run->row0, n = run->n_rows;
        layer_rs rs;
        layer_rs_view(mem, run, L->slot, s->snap, &rs);
        float *y0 = s->y + (size_t)t0 * C;
        bd_conv1d_causal_from(tp, y0, C, mixed + (size_t)t0 * C, C, rs.conv_in, rs.conv_out, cw, NULL, C, W + 1, n,
                              1, rs.conv_snap);
        bd_tap("conv_output_silu", il, y0, C, n, C);
        for (int32_t t = t0; t < t0 + n; t++)
            bd_l2norm_rows(NULL, s->y + (size_t)t * C, S, s->y + (size_t)t * C, S, S, 2 * Hk, hp->eps);
        bd_tap("q_conv_predelta", il, y0, KD, n, C);
        bd_tap("k_conv_predelta", il, y0 + KD, KD, n, C);
        const float *q = y0, *kk = y0 + KD;
        int64_t ldqk = C, hk = Hk;
        if (m->variant == QW_QWEN3NEXT && Hv != Hk) { /* value head h reads key head h / r: repeat, then 1:1 */
            q3n_repeat_qk(y0, C, n, S, Hk, grp, s->qk);
            q = s->qk, kk = s->qk + hp->value_dim, ldqk = 2 * (int64_t)hp->value_dim, hk = Hv;
        }
        bd_gdn_from(tp, n, (int)hk, Hv, S, q, ldqk, kk, ldqk, y0 + 2 * KD, C, alpha + (size_t)t0 * Hv,
                    beta + (size_t)t0 * Hv, rs.ssm_in, rs.ssm_out, s->o + (size_t)t0 * hp->value_dim, hp->value_dim,
                    rs.ssm_snap);
    }

    bd_tap("attn_output", il, s->o, hp->value_dim, T, hp->value_dim);
    /* Gated RMSNorm per head: normalize, weight, times silu(z). */
    for (int32_t t = 0; t < T; t++) {
        const float *zt = z + (size_t)t * hp->value_dim;
        float *o = s->o + (size_t)t * hp->value_dim;
        for (int32_t h = 0; h < Hv; h++) {
            float *oh = o + (size_t)h * S;
            bd_rmsnorm(oh, oh, L->ssm_norm.data, S, hp->eps);
            bd_silu(s->delta, zt + (size_t)h * S, S);
            bd_mul(oh, oh, s->delta, S);
        }
    }
    bd_tap("final_output", il, s->o, hp->value_dim, T, hp->value_dim);
    blk_matmul(tp, &L->ssm_out, s->o, T, out, s->wbuf);
    bd_tap("linear_attn_out", il, out, hp->n_embd, T, hp->n_embd);
}

/* ---- the forward pass (§1.5) ------------------------------------------------------------------------------ */

static braid_status qw_forward(const void *data, const bd_fwd_scratch *sc, bd_threadpool *tp, const bd_fwd_batch *b,
                               const bd_fwd_memory *mem, float *logits) {
    const qwen35 *m = data;
    const qw_hparams *hp = &m->hp;
    const int32_t T = b->n, E = (int32_t)hp->n_embd;
    qw_scratch s;
    bd_arena a = bd_arena_at(sc->base);
    qw_carve(m, &a, sc->n_batch, sc->n_ctx, sc->n_threads, &s);
    assert(T <= sc->n_batch && bd_threadpool_size(tp) <= sc->n_threads);

    layer_embed(b, &m->tok_embd, E, s.x); /* x = token_embd[tokens] or the given embedding rows */

    for (uint32_t il = 0; il < hp->n_layer; il++) {
        if (bd_fwd_cancelled(sc)) return bd_error(BRAID_E_CANCELLED, "decode cancelled by the abort callback");
        const qw_layer *L = &m->layers[il];
        /* h = x + Mixer(RMSNorm(x)) */
        for (int32_t t = 0; t < T; t++)
            bd_rmsnorm(s.u + (size_t)t * E, s.x + (size_t)t * E, L->attn_norm.data, E, hp->eps);
        bd_tap("attn_norm", (int)il, s.u, E, T, E);
        float *mix = s.u; /* mixer output overwrites u after the projections have consumed it */
        if (L->recurrent) qw_gated_deltanet(m, L, &s, tp, b, mem, mix);
        else layer_attention(tp, &L->attn, &m->ash, &s.att, s.wbuf, b, mem, L->slot, (int)il, s.u, mix);
        for (int64_t i = 0; i < (int64_t)T * E; i++) s.x[i] += mix[i];
        bd_tap("attn_residual", (int)il, s.x, E, T, E);
        /* x = h + FFN(RMSNorm(h)) */
        for (int32_t t = 0; t < T; t++)
            bd_rmsnorm(s.u + (size_t)t * E, s.x + (size_t)t * E, L->post_norm.data, E, hp->eps);
        bd_tap("attn_post_norm", (int)il, s.u, E, T, E);
        if (m->variant == QW_QWEN35) layer_ffn_swiglu(tp, &L->ffn, s.u, T, s.f, s.ff_g, s.ff_u, s.wbuf, (int)il);
        else moe_ffn(tp, &m->moe, &L->moe, s.u, E, T, s.f, s.moe, s.wbuf, (int)il);
        bd_tap("ffn_out", (int)il, s.f, E, T, E);
        for (int64_t i = 0; i < (int64_t)T * E; i++) s.x[i] += s.f[i];
        bd_tap("l_out", (int)il, s.x, E, T, E);
    }

    /* the MTP head's input: every row's hidden state after the output norm */
    if (b->hidden)
        for (int32_t t = 0; t < T; t++)
            bd_rmsnorm(b->hidden + (size_t)t * E, s.x + (size_t)t * E, m->output_norm.data, E, hp->eps);
    /* logits = W_out · RMSNorm(x) for the rows that asked */
    layer_logits(tp, b, &m->output_norm, &m->output, hp->eps, s.x, E, s.u, s.wbuf, logits);
    return BRAID_OK;
}

/* The MTP head (top comment): rows of b pair a token with the hidden state h of the input before it. */
static braid_status qw_mtp_forward(const void *data, const bd_fwd_scratch *sc, bd_threadpool *tp,
                                   const bd_fwd_batch *b, const float *h, const bd_fwd_memory *mem, float *logits,
                                   float *h_out) {
    const qwen35 *m = data;
    const qw_hparams *hp = &m->hp;
    const int32_t T = b->n, E = (int32_t)hp->n_embd;
    if (!m->has_mtp) return bd_error(BRAID_E_UNSUPPORTED, "qwen35: this file has no MTP block");
    qw_scratch s;
    bd_arena a = bd_arena_at(sc->base);
    qw_carve(m, &a, sc->n_batch, sc->n_ctx, sc->n_threads, &s);
    assert(T <= sc->n_batch && bd_threadpool_size(tp) <= sc->n_threads);
    if (bd_fwd_cancelled(sc)) return bd_error(BRAID_E_CANCELLED, "decode cancelled by the abort callback");
    const qw_layer *L = &m->mtp;
    const int il = (int)hp->n_layer;

    /* u = eh_proj · (enorm(embd) ‖ hnorm(h)) */
    layer_embed(b, &m->mtp_embd, E, s.u);
    for (int32_t t = 0; t < T; t++) {
        float *c = s.cat + (size_t)t * 2 * E;
        bd_rmsnorm(c, s.u + (size_t)t * E, m->mtp_enorm.data, E, hp->eps);
        bd_rmsnorm(c + E, h + (size_t)t * E, m->mtp_hnorm.data, E, hp->eps);
    }
    bd_tap("mtp_concat", il, s.cat, 2 * E, T, 2 * E);
    blk_matmul(tp, &m->mtp_eh, s.cat, T, s.x, s.wbuf);
    bd_tap("mtp_eh_proj", il, s.x, E, T, E);

    /* the decoder block, as a trunk attention layer (slot 0: the head's own K/V rows) */
    for (int32_t t = 0; t < T; t++)
        bd_rmsnorm(s.u + (size_t)t * E, s.x + (size_t)t * E, L->attn_norm.data, E, hp->eps);
    layer_attention(tp, &L->attn, &m->ash, &s.att, s.wbuf, b, mem, 0, il, s.u, s.u);
    for (int64_t i = 0; i < (int64_t)T * E; i++) s.x[i] += s.u[i];
    for (int32_t t = 0; t < T; t++)
        bd_rmsnorm(s.u + (size_t)t * E, s.x + (size_t)t * E, L->post_norm.data, E, hp->eps);
    if (m->variant == QW_QWEN35) layer_ffn_swiglu(tp, &L->ffn, s.u, T, s.f, s.ff_g, s.ff_u, s.wbuf, il);
    else moe_ffn(tp, &m->moe, &L->moe, s.u, E, T, s.f, s.moe, s.wbuf, il);
    for (int64_t i = 0; i < (int64_t)T * E; i++) s.x[i] += s.f[i];
    bd_tap("mtp_post_ffn", il, s.x, E, T, E);

    /* h' = RMSNorm(x; head norm); logits = head · h' */
    if (h_out)
        for (int32_t t = 0; t < T; t++)
            bd_rmsnorm(h_out + (size_t)t * E, s.x + (size_t)t * E, m->mtp_head_norm.data, E, hp->eps);
    layer_logits(tp, b, &m->mtp_head_norm, &m->mtp_head, hp->eps, s.x, E, s.u, s.wbuf, logits);
    return BRAID_OK;
}

static int qw_has_mtp(const void *data) { return ((const qwen35 *)data)->has_mtp; }

static void qw_rerotate_k(const void *data, float *k_row, const braid_pos *old_pos, const braid_pos *new_pos) {
    const qwen35 *m = data;
    /* Rotation composes: R(new) = R(new − old)·R(old), per component. */
    braid_pos d[4];
    for (int c = 0; c < 4; c++) d[c] = new_pos[c] - old_pos[c];
    float cs[BD_ROPE_MAX_ROT];
    bd_rope_cache(&m->rope, d, m->n_pos, cs);
    bd_rope_apply(&m->rope, cs, k_row, m->hp.n_head_kv, m->hp.head_dim);
}

static braid_status bd_arch_qwen35_load(const gguf_file *f, int32_t n_vocab, void **data, bd_mem_layout *layout) {
    return qw_load(f, n_vocab, QW_QWEN35, data, layout);
}
static braid_status bd_arch_qwen35moe_load(const gguf_file *f, int32_t n_vocab, void **data, bd_mem_layout *layout) {
    return qw_load(f, n_vocab, QW_QWEN35MOE, data, layout);
}
static braid_status bd_arch_qwen3next_load(const gguf_file *f, int32_t n_vocab, void **data, bd_mem_layout *layout) {
    return qw_load(f, n_vocab, QW_QWEN3NEXT, data, layout);
}

/* One family, three names: only the loader's variant differs. */
#define QW_ARCH(sym, arch_name)                                                                                   \
    const bd_arch sym = {.name = arch_name, .load = sym##_load, .free_data = qw_free, .n_embd = qw_n_embd,         \
                         .hparams_bytes = qw_hparams_bytes, .scratch_size = qw_scratch_size, .forward = qw_forward, \
                         .rerotate_k = qw_rerotate_k, .has_mtp = qw_has_mtp, .mtp_forward = qw_mtp_forward}
QW_ARCH(bd_arch_qwen35, "qwen35");
QW_ARCH(bd_arch_qwen35moe, "qwen35moe");
QW_ARCH(bd_arch_qwen3next, "qwen3next");
