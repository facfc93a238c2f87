/* moe.h — the mixture-of-experts FFN (llama.cpp's build_moe_ffn) in the variants braid's architectures use:
 * qwen35moe / qwen3next (architectures.md §1.12: softmax gating, renormalized weights, SwiGLU experts and a
 * sigmoid-gated SwiGLU shared expert) and nemotron_h_moe (archs-more.md §2.3: sigmoid gating with a selection
 * bias, optional renormalization and scale, ungated relu² experts and an ungated relu² shared expert):
 *
 *     p = softmax(W_router·x) | sigmoid(W_router·x)    over n_expert experts
 *     E = the n_expert_used largest p (+ selection bias); w_e = p_e [/ max(Σ_E p, 6.103515625e-5)] [· scale]
 *     FFN(x) = Σ_{e∈E, in descending order} w_e·Expert_e(x) + [sigmoid(w_sh·x)·] Shared(x)
 *
 * Each expert runs once per ubatch, as one matrix product over the rows routed to it (gathered), so a prompt
 * reads each expert's weights at most once and a decode step reads only the n_expert_used chosen ones. Products
 * that read the same rows share a dispatch (blk_matmul_multi: the router with the shared expert's gate, up and
 * scalar gate; in a decode step the gate/up of all chosen experts), with the bits of separate products. The
 * forward pass never allocates: its buffers come from a scratch block sized by moe_scratch_size at context
 * creation. */
#ifndef BRAID_MODELS_MOE_H
#define BRAID_MODELS_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "models/loader.h"

/* Plain fixed-width fields: they feed the model fingerprint. */
typedef struct moe_hparams {
    uint32_t n_expert;      /* expert_count */
    uint32_t n_expert_used; /* expert_used_count (k) */
    uint32_t n_ff_exp;      /* expert_feed_forward_length (default n_ff / k) */
    uint32_t n_ff_shexp;    /* expert_shared_feed_forward_length (default n_ff) */
    uint32_t sigmoid;       /* gating: 0 softmax, 1 sigmoid with a selection bias (exp_probs_b) */
    uint32_t norm_w;        /* renormalize the chosen weights (expert_weights_norm) */
    float w_scale;          /* multiply the weights (expert_weights_scale); 0 or 1: not */
    uint32_t relu2;         /* experts and shared expert ungated relu² (W_down·relu(W_up·x)²) instead of SwiGLU */
    uint32_t shexp;         /* shared expert: MOE_SHEXP_NONE, _GATED (times sigmoid(w_sh·x)) or _PLAIN (added) */
    uint32_t sel_bias;      /* a selection bias exp_probs_b.bias per layer (added to p for the choice only) */
} moe_hparams;

enum { MOE_SHEXP_NONE = 0, MOE_SHEXP_GATED = 1, MOE_SHEXP_PLAIN = 2 };

/* One layer's weights. Expert tensors are stacks bound by bd_bind_layer3: the bd_weight is expert 0 and expert
 * e is e * n_out rows further (moe_expert). */
typedef struct moe_weights {
    bd_weight router;       /* [n_expert][n_embd] ffn_gate_inp */
    bd_weight sel_bias;     /* [n_expert] exp_probs_b.bias (sigmoid gating): selection only */
    bd_weight gate_up;      /* [n_expert][2*n_ff_exp][n_embd] gate rows then up rows (ffn_gate_up_exps), or NULL */
    bd_weight gate, up;     /* [n_expert][n_ff_exp][n_embd] (ffn_gate_exps, ffn_up_exps) when not merged */
    bd_weight down;         /* [n_expert][n_embd][n_ff_exp] ffn_down_exps */
    bd_weight sh_gate_inp;  /* [1][n_embd] ffn_gate_inp_shexp: one scalar gate per token */
    bd_weight sh_gate, sh_up; /* [n_ff_shexp][n_embd] */
    bd_weight sh_down;      /* [n_embd][n_ff_shexp] */
} moe_weights;

/* Reads expert_count, expert_used_count, expert_feed_forward_length, expert_shared_feed_forward_length with
 * llama.cpp's types; n_ff is feed_forward_length (0 if absent). Per-layer keys must agree across the n_layer
 * trunk layers. Fails unless 0 < n_expert_used <= n_expert <= 1024 and the FFN widths are known. Sets the
 * qwen variant (softmax, renormalized, SwiGLU, gated shared expert); the caller changes it for others. */
BRAID_NODISCARD braid_status moe_load_hparams(const bd_loader *l, uint32_t n_layer_all, uint32_t n_layer,
                                              uint32_t n_ff, moe_hparams *hp);
/* Binds layer il's MoE tensors with their exact shapes (merged or separate gate/up). */
BRAID_NODISCARD braid_status moe_bind(bd_loader *l, int il, int64_t n_embd, const moe_hparams *hp, moe_weights *w);

/* Bytes of scratch for T rows (excluding the matmul work buffer). */
size_t moe_scratch_size(const moe_hparams *hp, int64_t n_embd, int32_t T);
/* The largest blk_matmul work buffer the layer's products need for T rows. */
size_t moe_wsize(const moe_weights *w, int32_t T);

/* out [T][n_embd] = FFN(u [T][n_embd]) as above. scratch: moe_scratch_size bytes, 64-byte aligned; wbuf:
 * moe_wsize bytes. out must not overlap u. il: the layer, for tensor/tap.h's intermediates. */
void moe_ffn(bd_threadpool *tp, const moe_hparams *hp, const moe_weights *w, const float *u, int64_t n_embd,
             int32_t T, float *out, void *scratch, void *wbuf, int il);

#endif
