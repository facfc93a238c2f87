/* ops.h — the compute kernels of a forward pass other than matmul: norms, activations, RoPE, attention over an
 * explicit list of visible cells (and a vision encoder's full attention), causal short convolution with state,
 * the Gated DeltaNet recurrence and the Mamba2 selective scan. The math of each is architectures.md §0.2,
 * §1.6-1.7, §2.1 and §3.3, computed in the order llama.cpp's CPU backend uses, so results agree with it to float
 * rounding.
 *
 * Conventions: row-major buffers with explicit leading dimensions (ld*, in floats) so that views (a head inside
 * a row, q interleaved with its gate) need no copies; an output may alias its input where it says so. Kernels
 * never allocate: scratch comes from the caller. Kernels whose cost matters take a thread pool (NULL = run on
 * the caller) and split work so that every output is computed the same way whatever the thread count: the
 * result is identical bit for bit for 1 and N threads. Parameters are validated by the model loader; here they
 * are asserted. Each kernel is implemented in the file named next to it. */
#ifndef BRAID_TENSOR_OPS_H
#define BRAID_TENSOR_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/threadpool.h"

/* ---- norms (norm.c) ----------------------------------------------------------------------------------------- */

/* y = x / sqrt(mean(x²) + eps) ⊙ w over n elements (w NULL: no weight). Σx² accumulated in double as ggml does.
 * y may equal x. */
void bd_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
/* The same on `rows` rows: row r of x at x + r*ldx, of y at y + r*ldy (e.g. per head: n = head_dim). */
void bd_rmsnorm_rows(bd_threadpool *tp, float *y, int64_t ldy, const float *x, int64_t ldx, const float *w,
                     int64_t n, int64_t rows, float eps);
/* GDN's L2 norm: y = x / sqrt(Σx² + eps), computed as llama.cpp does (rms_norm with eps/n, times 1/sqrt(n)). */
void bd_l2norm(float *y, const float *x, int64_t n, float eps);
void bd_l2norm_rows(bd_threadpool *tp, float *y, int64_t ldy, const float *x, int64_t ldx, int64_t n,
                    int64_t rows, float eps);

/* ---- elementwise (act.c); y may equal any input ------------------------------------------------------------ */

void bd_silu(float *y, const float *x, int64_t n);     /* x / (1 + e^-x) */
void bd_sigmoid(float *y, const float *x, int64_t n);  /* 1 / (1 + e^-x) */
void bd_softplus(float *y, const float *x, int64_t n); /* x > 20 ? x : log(1 + e^x) */
void bd_relu_sqr(float *y, const float *x, int64_t n); /* max(x, 0)² (nemotron_h's MLP: ggml relu then sqr) */
/* y = softmax(x) over n elements (max subtracted, Σ in double). */
void bd_softmax(float *y, const float *x, int64_t n);
/* y = silu(g) ⊙ u (SwiGLU; also the gated norm's o ⊙ silu(z) with g = z, u = o). */
void bd_swiglu(float *y, const float *g, const float *u, int64_t n);
/* y = a ⊙ sigmoid(g) (gated attention output). */
void bd_mul_sigmoid(float *y, const float *a, const float *g, int64_t n);
void bd_add(float *y, const float *a, const float *b, int64_t n); /* y = a + b (residuals) */
void bd_mul(float *y, const float *a, const float *b, int64_t n); /* y = a ⊙ b */
/* Row-wise SwiGLU over T rows, split across threads (the FFN of a prompt): y[t] = silu(g[t]) ⊙ u[t]. */
void bd_swiglu_rows(bd_threadpool *tp, float *y, int64_t ldy, const float *g, int64_t ldg, const float *u,
                    int64_t ldu, int64_t n, int64_t rows);

/* ---- RoPE (rope.c) ------------------------------------------------------------------------------------------ */

enum { BD_ROPE_NORM = 0, BD_ROPE_NEOX = 2, BD_ROPE_MROPE = 8, BD_ROPE_IMROPE = 40 }; /* ggml's mode numbers */

typedef struct bd_rope {
    int mode;          /* BD_ROPE_* */
    int n_rot;         /* rotated dims per head (even, <= head size); the rest pass through */
    float freq_base;   /* θ base (rope.freq_base) */
    float freq_scale;  /* 1 / linear scaling factor (1 = none) */
    float attn_factor; /* multiplies cos and sin (1 unless YaRN) */
    int sections[4];   /* MROPE / IMROPE: pairs per position component (t, h, w, e) */
} bd_rope;

/* The (cos, sin) of every rotated pair for one token: cache[2k] = cos θ_k, cache[2k+1] = sin θ_k, k < n_rot/2.
 * pos holds n_pos components (1, or 4 = t, h, w, e for M-RoPE; with 1 component an M-RoPE token is text:
 * (p, p, p, 0)). θ is built by repeated float multiplication as llama.cpp does. */
void bd_rope_cache(const bd_rope *r, const int32_t *pos, int n_pos, float *cache);
/* Rotates n_head heads of one token in place (head h at x + h*head_stride) with a cache from bd_rope_cache. */
void bd_rope_apply(const bd_rope *r, const float *cache, float *x, int64_t n_head, int64_t head_stride);
/* Both, for T tokens split across threads: token t at x + t*ldx, its positions at pos + t*n_pos.
 * n_rot <= BD_ROPE_MAX_ROT (the cache lives on each thread's stack). */
#define BD_ROPE_MAX_ROT 1024
void bd_rope_rows(bd_threadpool *tp, const bd_rope *r, float *x, int64_t T, int64_t ldx, int64_t n_head,
                  int64_t head_stride, const int32_t *pos, int n_pos);

/* ---- attention over explicit cells (attention.c) ------------------------------------------------------------ */

/* Where K and V live: the row of cell c for KV head j starts at (char *)k + c*k_cell_bytes + j*k_head_bytes
 * (likewise v). Elements are F32 or F16 (kv_type, ggml ids 0 / 1). */
typedef struct bd_attn {
    int n_head, n_head_kv; /* GQA: query head h uses KV head h / (n_head / n_head_kv) */
    int head_dim;          /* of q, k and v */
    float scale;           /* usually 1/sqrt(head_dim) */
    uint32_t kv_type;
    const void *k, *v;
    size_t k_cell_bytes, v_cell_bytes, k_head_bytes, v_head_bytes;
} bd_attn;

/* Scratch bytes bd_attention needs when no query sees more than max_visible cells, on n_threads threads. */
size_t bd_attention_scratch_size(const bd_attn *a, int64_t max_visible, int n_threads);
/* For each query token t < T and head h: o = softmax(scale · q·Kᵀ) · V over the cells vis[t][0 .. n_vis[t]),
 * in that order (the memory layer decides visibility; the kernel only follows the list). q head h at
 * q + t*ldq + h*q_head_stride; o head h at o + t*ldo + h*head_dim. A query with no visible cell gets zeros.
 * Errors: BRAID_E_INVALID for a bad type or a short scratch. */
braid_status bd_attention(bd_threadpool *tp, const bd_attn *a, int64_t T, const float *q, int64_t ldq,
                          int64_t q_head_stride, const int32_t *const *vis, const int32_t *n_vis, float *o,
                          int64_t ldo, void *scratch, size_t scratch_size);

/* ---- full attention of a set of tokens over all of them (attn_full.c) -------------------------------------- */

/* Scratch bytes bd_attention_full needs for T tokens of n_head heads of head_dim, on n_threads threads. */
size_t bd_attention_full_scratch_size(int64_t T, int n_head, int head_dim, int n_threads);
/* For every token t < T and head h: o = softmax(scale · q·Kᵀ) · V over all T tokens, with no mask (a vision
 * encoder's attention). Head h of token t: q + t*ldq + h*head_dim; k, v and o likewise (ldk, ldv, ldo >=
 * n_head*head_dim). Dense products per head and block of queries; o must not overlap q, k, v.
 * Errors: BRAID_E_INVALID for bad shapes or a short scratch. */
braid_status bd_attention_full(bd_threadpool *tp, int64_t T, int n_head, int head_dim, float scale, const float *q,
                               int64_t ldq, const float *k, int64_t ldk, const float *v, int64_t ldv, float *o,
                               int64_t ldo, void *scratch, size_t scratch_size);

/* ---- causal depthwise conv1d with state (conv.c) ------------------------------------------------------------ */

/* For T tokens of one sequence and C channels, kernel length L (w: rm[C][L], w[c][L-1] multiplies the current
 * token): y_t[c] = Σ_{m<L} w[c][m] · in_{t-(L-1)+m}[c] (+ bias[c]) (then silu if `silu`), where inputs before
 * the first token come from state (rm[C][L-1], oldest first). x: token t at x + t*ldx; y likewise (y must not
 * overlap x). On return the state holds the last L-1 inputs. Sums in float in kernel order (ggml_ssm_conv).
 * snap (optional, may be NULL): snap[t], when not NULL, receives the state after token t (rm[C][L-1]). */
void bd_conv1d_causal(bd_threadpool *tp, float *y, int64_t ldy, const float *x, int64_t ldx, float *state,
                      const float *w, const float *bias, int64_t C, int L, int64_t T, int silu, float *const *snap);
/* The same with the state read from state_in (rm[C][L-1]; may equal state) and written to state: a decode step
 * whose new state lives elsewhere than the old one needs no copy first. */
void bd_conv1d_causal_from(bd_threadpool *tp, float *y, int64_t ldy, const float *x, int64_t ldx,
                           const float *state_in, float *state, const float *w, const float *bias, int64_t C, int L,
                           int64_t T, int silu, float *const *snap);

/* ---- Gated DeltaNet recurrence (gdn.c) ---------------------------------------------------------------------- */

/* One run of T tokens of one sequence, architectures.md §1.7 step 7 in ggml's order. Per value head h (key head
 * kh = h mod H_k) and token t, with M_h the S×S state stored rm[H_v][S(j)][S(i)] (element M[i][j] at
 * state[h*S*S + j*S + i]):
 *   M ← exp(g[t][h])·M;  δ[j] = (v[j] − Σ_i M[i][j]·k[i])·β[t][h];  M[i][j] += k[i]·δ[j];
 *   o[j] = (1/sqrt(S))·Σ_i M[i][j]·q[i].
 * q, k: head kh of token t at q + t*ldq + kh*S (already L2-normed); v, o: head h at v + t*ldv + h*S;
 * g, beta: [T][H_v]. snap (optional, may be NULL): snap[t], when not NULL, receives a copy of the whole state
 * after token t (the rollback buffer). Heads are split across threads. */
void bd_gdn(bd_threadpool *tp, int64_t T, int H_k, int H_v, int S, const float *q, int64_t ldq, const float *k,
            int64_t ldk, const float *v, int64_t ldv, const float *g, const float *beta, float *state, float *o,
            int64_t ldo, float *const *snap);
/* bd_gdn starting from the state in state_in (equal to state, or not overlapping it) and leaving the result in
 * state, state_in untouched: a transactional step reads the committed state once instead of copying it first
 * (the copy alone would move as many bytes as the step). */
void bd_gdn_from(bd_threadpool *tp, int64_t T, int H_k, int H_v, int S, const float *q, int64_t ldq, const float *k,
                 int64_t ldk, const float *v, int64_t ldv, const float *g, const float *beta, const float *state_in,
                 float *state, float *o, int64_t ldo, float *const *snap);

/* ---- Mamba2 selective scan (ssm_scan.c) --------------------------------------------------------------------- */

/* One run of T tokens of one sequence, architectures.md §2.1 steps 4-5. H heads of P channels, G groups of
 * state size N (head h uses group h / (H/G)). state: rm[H][P][N]. Per token t, head h:
 *   Δ = softplus(dt[t][h] + dt_bias[h]); dA = exp(Δ·A[h]);
 *   s[h][p][n] = s[h][p][n]·dA + B_g[n]·(x_h[p]·Δ);  y_h[p] = Σ_n s[h][p][n]·C_g[n]  (+ D[h]·x_h[p] if D).
 * x, y: head h of token t at x + t*ldx + h*P (y likewise); dt: t*lddt + h; B, C: group g at B + t*ldb + g*N
 * (C likewise, ldc). dt_bias and D may be NULL. snap as in bd_gdn (copies of rm[H][P][N]). */
void bd_ssm_scan(bd_threadpool *tp, int64_t T, int H, int P, int N, int G, const float *x, int64_t ldx,
                 const float *dt, int64_t lddt, const float *dt_bias, const float *A, const float *B, int64_t ldb,
                 const float *C, int64_t ldc, const float *D, float *state, float *y, int64_t ldy,
                 float *const *snap);
/* The same with the run's starting state read from state_in (may equal state) and the result written to
 * state: no copy of the state before the run (the first token reads state_in, the rest state). */
void bd_ssm_scan_from(bd_threadpool *tp, int64_t T, int H, int P, int N, int G, const float *x, int64_t ldx,
                      const float *dt, int64_t lddt, const float *dt_bias, const float *A, const float *B, int64_t ldb,
                      const float *C, int64_t ldc, const float *D, const float *state_in, float *state, float *y,
                      int64_t ldy, float *const *snap);

#endif
