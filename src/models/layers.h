/* layers.h — the pieces architectures assemble their forward pass from (architectures.md §0.2): the attention
 * block in its variants (plain or gated output, with or without RoPE and per-head Q/K norm, optional biases),
 * the dense FFNs (SwiGLU, ReLU²), storing K/V rows, adding a bias, and walking a ubatch's runs for the
 * recurrent layers. An architecture file keeps only its hyperparameters, its tensor names and its layer order.
 *
 * Every block works on T rows [T][width] in buffers the architecture carved from its arena (base/arena.h);
 * scratch structs say which. Results are the same for any thread count, as the kernels below them promise. */
#ifndef BRAID_MODELS_LAYERS_H
#define BRAID_MODELS_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/threadpool.h"
#include "braid.h"
#include "models/arch.h"
#include "models/blocks.h"
#include "models/loader.h"
#include "tensor/ops.h"

/* The base keys of every architecture (architectures.md §0.3): context_length, embedding_length and
 * block_count, required and range-checked (BRAID_E_FORMAT naming l's architecture). */
BRAID_NODISCARD braid_status layer_base_keys(const bd_loader *l, uint32_t *n_ctx_train, uint32_t *n_embd,
                                             uint32_t *n_layer);

/* ---- which memory each layer uses ------------------------------------------------------------------------ */

/* A layer keeps K/V rows in an attention slot, conv and SSM states in a recurrent slot, both (falcon-h1: attention
 * slot il and recurrent slot il), or nothing (an FFN-only layer of nemotron_h). */
enum { LAYER_MEM_NONE = 0, LAYER_MEM_ATTN = 1, LAYER_MEM_RECR = 2, LAYER_MEM_BOTH = 3 };

/* What every loader derives the same way from its layers' memory kinds: each layer's slot, the layer lists of
 * bd_mem_layout and the fingerprint bytes (hparams ‖ kinds ‖ extra: models whose state files are interchangeable
 * have equal bytes). Owned by the model. */
typedef struct layer_map {
    uint8_t *kind;  /* [n_layer] LAYER_MEM_*: the architecture sets them before layer_map_layout */
    int32_t *slot;  /* [n_layer] the layer's slot in its memory (LAYER_MEM_BOTH: the same index in both); -1: none */
    int32_t *attn_layer, *recr_layer; /* bd_mem_layout's lists */
    uint8_t *fp;    /* the fingerprint bytes */
    size_t fp_len;
} layer_map;

/* Allocates the arrays for n_layer layers, all LAYER_MEM_NONE (BRAID_E_NOMEM naming arch). */
BRAID_NODISCARD braid_status layer_map_init(layer_map *m, const char *arch, uint32_t n_layer);
/* Assigns the slots in layer order, sets layout's n_layer, n_pos_per_token (n_pos), n_attn, n_recr and layer
 * lists (the rest of *layout is zeroed for the caller to fill), and builds the fingerprint from hp and extra
 * (either may be NULL with length 0). */
BRAID_NODISCARD braid_status layer_map_layout(layer_map *m, const char *arch, uint32_t n_layer, int32_t n_pos,
                                              const void *hp, size_t hp_len, const void *extra, size_t extra_len,
                                              bd_mem_layout *layout);
/* hparams_bytes of a model whose fingerprint is m's. */
static inline void layer_map_fingerprint(const layer_map *m, const void **bytes, size_t *len) {
    *bytes = m->fp;
    *len = m->fp_len;
}
void layer_map_free(layer_map *m);

/* Binds token_embd ([n_vocab][n_embd]), the final norm (norm_name: output_norm.weight, or LFM2's
 * token_embd_norm.weight) and output.weight, which falls back to token_embd when absent (tied embeddings). */
BRAID_NODISCARD braid_status layer_bind_io(bd_loader *l, int64_t n_embd, int64_t n_vocab, const char *norm_name,
                                           bd_weight *tok_embd, bd_weight *norm, bd_weight *output);

/* y[t][i] += b[i] for T rows of b->n_in floats; nothing when the bias is absent (b->data NULL). */
void layer_add_bias(float *y, const bd_weight *b, int32_t T);
/* Writes one K or V row (n floats) into cell `cell` of a cache of type F32 or F16 (rounded as ggml does). */
void layer_kv_store(void *cache, braid_type type, int32_t cell, int32_t n, const float *src);

/* x [T][n_embd] = token_embd rows of the batch's tokens, or its embedding rows. */
void layer_embed(const bd_fwd_batch *b, const bd_weight *tok_embd, int32_t n_embd, float *x);
/* logits = W_out · RMSNorm(x; norm) for the rows that asked (b->out[t] >= 0, consecutive indices), written to
 * logits[out[t]] (n_vocab = W_out rows each); u: [T][n_embd] scratch. Returns the number of rows written. */
int32_t layer_logits(bd_threadpool *tp, const bd_fwd_batch *b, const bd_weight *norm, const bd_weight *w_out,
                     float eps, const float *x, int32_t n_embd, float *u, void *wbuf, float *logits);

/* ---- attention (§0.2; gated: §1.6) ---------------------------------------------------------------------- */

typedef struct layer_attn_shape {
    int32_t n_head, n_head_kv, head_dim;
    int gated;             /* W_q rows are [n_head][q head_dim ‖ gate head_dim]; o_h *= sigmoid(gate_h) */
    const bd_rope *rope;   /* NULL: no positional encoding (NoPE) */
    int32_t n_pos;         /* position components per row in bd_fwd_batch.pos */
    float eps;             /* of the per-head Q/K RMSNorm */
    float scale;           /* of q·k (0: 1/sqrt(head_dim)) */
} layer_attn_shape;

typedef struct layer_attn {
    bd_weight wq, wk, wv;     /* [q rows][n_embd], [hd*nkv][n_embd] x 2 */
    bd_weight bq, bk, bv;     /* optional biases */
    bd_weight wo, bo;         /* [n_embd][hd*nh]; bo optional */
    bd_weight q_norm, k_norm; /* optional [hd] per-head RMSNorm weights */
} layer_attn;

/* How layer_attn_bind treats the optional tensors. */
enum { LAYER_QK_NORM_NONE = 0, LAYER_QK_NORM_REQUIRED = 1 };
enum { LAYER_OUT_BIAS_NONE = 0, LAYER_OUT_BIAS_OPTIONAL = 1, LAYER_OUT_BIAS_IGNORED = 2 };

/* Binds layer il's attention tensors: attn_q/k/v (or one fused attn_qkv, Q‖K‖V rows, with an optional
 * attn_qkv.bias) with optional attn_{q,k,v}.bias, attn_output, attn_q_norm/attn_k_norm as qk_norm says, and
 * attn_output.bias as out_bias says (IGNORED: bound so the file is accepted, never added, as llama.cpp does
 * for falcon-h1). */
BRAID_NODISCARD braid_status layer_attn_bind(bd_loader *l, int il, int64_t n_embd, const layer_attn_shape *sh,
                                             int qk_norm, int out_bias, layer_attn *w);

typedef struct layer_attn_scratch {
    float *q;      /* [T][q rows] query (‖ gate per head) */
    float *k, *v;  /* [T][hd*nkv] */
    float *o;      /* [T][hd*nh] heads before W_o */
    float *rope;   /* [T][n_rot] cos, sin per pair */
    const int32_t **vis; /* [T] visible cells of each row */
    void *att;     /* bd_attention's scratch */
    size_t att_bytes;
} layer_attn_scratch;

/* Takes the scratch for ubatches of T rows seeing up to n_ctx cells on n_threads threads. */
void layer_attn_carve(bd_arena *a, const layer_attn_shape *sh, int32_t T, int32_t n_ctx, int32_t n_threads,
                      layer_attn_scratch *s);
/* Bytes of matmul work buffer the block's projections need for T rows. */
size_t layer_attn_wsize(const layer_attn *w, int32_t T);

/* u [T][n_embd] (normed input) -> out [T][n_embd] (may equal u: u is read by the first projections only); K/V rows of the batch go to attention
 * slot `slot` of the memory. il is the layer index for taps. */
void layer_attention(bd_threadpool *tp, const layer_attn *w, const layer_attn_shape *sh, layer_attn_scratch *s,
                     void *wbuf, const bd_fwd_batch *b, const bd_fwd_memory *mem, int slot, int il, const float *u,
                     float *out);

/* ---- dense FFNs ----------------------------------------------------------------------------------------- */

typedef struct layer_ffn {
    bd_weight gate, up, down;       /* gate absent for ReLU² */
    bd_weight b_gate, b_up, b_down; /* optional biases */
} layer_ffn;

/* Binds ffn_gate (if gated), ffn_up, ffn_down with n_ff hidden rows, and (biases != 0) their optional
 * biases; an architecture whose llama.cpp loader has no FFN biases passes 0, so a file with them is refused. */
BRAID_NODISCARD braid_status layer_ffn_bind(bd_loader *l, int il, int64_t n_embd, int64_t n_ff, int gated,
                                            int biases, layer_ffn *w);
size_t layer_ffn_wsize(const layer_ffn *w, int32_t T);
/* SwiGLU: out = W_down·(silu(W_gate·u + b) ⊙ (W_up·u + b)) + b. g, up: [T][n_ff] scratch. */
void layer_ffn_swiglu(bd_threadpool *tp, const layer_ffn *w, const float *u, int32_t T, float *out, float *g,
                      float *up, void *wbuf, int il);
/* ReLU²: out = W_down·(relu(W_up·u + b))² + b. h: [T][n_ff] scratch. */
void layer_ffn_relu2(bd_threadpool *tp, const layer_ffn *w, const float *u, int32_t T, float *out, float *h,
                     void *wbuf, int il);

/* ---- recurrent layers: one run at a time ---------------------------------------------------------------- */

/* Recurrent slot `slot`'s view of one run: where its states come from and go, and the per-row snapshot
 * pointers (NULL entries: no snapshot for that row; the arrays NULL: none in this ubatch). */
typedef struct layer_rs {
    const float *conv_in, *ssm_in;
    float *conv_out, *ssm_out;
    float *const *conv_snap, *const *ssm_snap;
} layer_rs;

/* Fills *v for run r and slot `slot`; snapbuf has room for 2 * r->n_rows pointers (from the arena). */
void layer_rs_view(const bd_fwd_memory *m, const bd_fwd_run *r, int slot, float **snapbuf, layer_rs *v);

/* ---- the Mamba2 mixer (§2.1; layer_mamba2.c) ------------------------------------------------------------ */

typedef struct layer_mamba2_shape {
    int32_t d_conv, d_inner, N, H, G; /* ssm.conv_kernel, inner_size, state_size, time_step_rank, group_count */
    float eps;                        /* of the grouped RMSNorm */
} layer_mamba2_shape;

typedef struct layer_mamba2 {
    bd_weight in;      /* [2*d_inner + 2*G*N + H][n_embd] -> z ‖ xBC ‖ dt */
    bd_weight conv;    /* [conv_dim][d_conv] F32 */
    bd_weight conv_b;  /* [conv_dim] */
    bd_weight dt_b;    /* [H] */
    bd_weight a;       /* [H] A = -exp(A_log) */
    bd_weight d;       /* [H] skip */
    bd_weight norm;    /* [G][d_inner/G] grouped RMSNorm weight; may be absent (falcon-h1) */
    bd_weight out;     /* [n_embd][d_inner] */
} layer_mamba2;

/* Reads the five ssm.* keys (all required) into *sh (eps is left to the caller). */
BRAID_NODISCARD braid_status layer_mamba2_keys(const bd_loader *l, layer_mamba2_shape *sh);
/* Checks the shape's constraints (BRAID_E_FORMAT naming the arch on a violation). */
BRAID_NODISCARD braid_status layer_mamba2_check(const char *arch, const layer_mamba2_shape *sh);
static inline int64_t layer_mamba2_conv_dim(const layer_mamba2_shape *sh) {
    return (int64_t)sh->d_inner + 2 * (int64_t)sh->G * sh->N;
}
/* Floats of one sequence's conv state (rm[conv_dim][d_conv-1]) and SSM state (rm[H][P][N]). */
static inline int64_t layer_mamba2_n_conv(const layer_mamba2_shape *sh) {
    return (int64_t)(sh->d_conv - 1) * layer_mamba2_conv_dim(sh);
}
static inline int64_t layer_mamba2_n_ssm(const layer_mamba2_shape *sh) { return (int64_t)sh->N * sh->d_inner; }
/* Binds layer il's ssm_* tensors; norm_required 0: ssm_norm.weight optional. */
BRAID_NODISCARD braid_status layer_mamba2_bind(bd_loader *l, int il, int64_t n_embd, const layer_mamba2_shape *sh,
                                               int norm_required, layer_mamba2 *w);

typedef struct layer_mamba2_scratch {
    float *zx;    /* [T][d_in_proj] z ‖ xBC ‖ dt */
    float *xbc;   /* [T][conv_dim] after conv, bias, silu */
    float *y;     /* [T][d_inner] */
    float **snap; /* [2*T] a run's snapshot pointers */
} layer_mamba2_scratch;

void layer_mamba2_carve(bd_arena *a, const layer_mamba2_shape *sh, int32_t T, layer_mamba2_scratch *s);
size_t layer_mamba2_wsize(const layer_mamba2 *w, int32_t T);
/* u [T][n_embd] -> out [T][n_embd] (may equal u); each run's conv and SSM states of recurrent slot `slot`
 * advance from the run's state_in block to its state_out block. */
void layer_mamba2_mix(bd_threadpool *tp, const layer_mamba2 *w, const layer_mamba2_shape *sh, layer_mamba2_scratch *s,
                  void *wbuf, const bd_fwd_batch *b, const bd_fwd_memory *mem, int slot, int il, const float *u,
                  float *out);

#endif
