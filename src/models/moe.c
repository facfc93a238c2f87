/* moe.c — the mixture-of-experts FFN of moe.h: routing, per-expert SwiGLU over the gathered rows routed to
 * it, the weighted sum in ggml's order (top-k slot order), and the sigmoid-gated shared expert. */
#include "models/moe.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "models/blocks.h"
#include "tensor/dot.h"
#include "tensor/ops.h"
#include "tensor/tap.h"

#define MOE_MAX_EXPERTS 1024 /* llama.cpp's LLAMA_MAX_EXPERTS */

/* A per-layer key that must be the same for every trunk layer (absent: *out unchanged). */
static braid_status uniform_key(const bd_loader *l, const char *key, uint32_t n_layer_all, uint32_t n_layer,
                                uint32_t *out) {
    uint32_t *tmp = bd_mallocn(n_layer_all, sizeof *tmp);
    if (!tmp) return bd_error(BRAID_E_NOMEM, "moe: out of memory");
    int found = 0;
    braid_status st = bd_key_u32_per_layer(l, key, n_layer_all, 0, tmp, &found);
    if (st == BRAID_OK && found) {
        *out = tmp[0];
        for (uint32_t i = 1; i < n_layer && st == BRAID_OK; i++)
            if (tmp[i] != tmp[0])
                st = bd_error(BRAID_E_UNSUPPORTED, "%s%s differs between layers (%u vs %u)", l->arch, key, tmp[0],
                              tmp[i]);
    }
    bd_free(tmp);
    return st;
}

braid_status moe_load_hparams(const bd_loader *l, uint32_t n_layer_all, uint32_t n_layer, uint32_t n_ff,
                              moe_hparams *hp) {
    memset(hp, 0, sizeof *hp);
    BD_TRY(bd_key_u32(l, "expert_count", 0, &hp->n_expert));
    BD_TRY(uniform_key(l, "expert_used_count", n_layer_all, n_layer, &hp->n_expert_used));
    BD_TRY(uniform_key(l, "expert_feed_forward_length", n_layer_all, n_layer, &hp->n_ff_exp));
    BD_TRY(bd_key_u32(l, "expert_shared_feed_forward_length", 0, &hp->n_ff_shexp));
    uint32_t groups = 0;
    BD_TRY(bd_key_u32(l, "expert_group_count", 0, &groups));
    if (hp->n_expert == 0 || hp->n_expert > MOE_MAX_EXPERTS)
        return bd_error(BRAID_E_FORMAT, "%sexpert_count %u must be in 1..%d", l->arch, hp->n_expert,
                        MOE_MAX_EXPERTS);
    if (hp->n_expert_used == 0 || hp->n_expert_used > hp->n_expert)
        return bd_error(BRAID_E_FORMAT, "%sexpert_used_count %u must be in 1..expert_count %u", l->arch,
                        hp->n_expert_used, hp->n_expert);
    if (groups > 1) return bd_error(BRAID_E_UNSUPPORTED, "%sexpert_group_count %u: grouped routing", l->arch, groups);
    /* llama.cpp's defaults: n_ff / k for the experts, n_ff for the shared expert */
    if (hp->n_ff_exp == 0) hp->n_ff_exp = n_ff / hp->n_expert_used;
    if (hp->n_ff_shexp == 0) hp->n_ff_shexp = n_ff;
    if (hp->n_ff_exp == 0 || hp->n_ff_shexp == 0 || hp->n_ff_exp > (1u << 20) || hp->n_ff_shexp > (1u << 20))
        return bd_error(BRAID_E_FORMAT, "%s: bad expert FFN widths (expert %u, shared %u)", l->arch, hp->n_ff_exp,
                        hp->n_ff_shexp);
    hp->norm_w = 1, hp->shexp = MOE_SHEXP_GATED;
    return BRAID_OK;
}

braid_status moe_bind(bd_loader *l, int il, int64_t E, const moe_hparams *hp, moe_weights *w) {
    const int64_t ne = hp->n_expert, ff = hp->n_ff_exp, fs = hp->n_ff_shexp;
    memset(w, 0, sizeof *w);
    BD_TRY(bd_bind_layer(l, il, "ffn_gate_inp.weight", E, ne, 0, 1, &w->router));
    if (hp->sel_bias) BD_TRY(bd_bind_layer(l, il, "exp_probs_b.bias", ne, 1, 1, 1, &w->sel_bias));
    if (hp->relu2) { /* ungated experts and shared expert */
        BD_TRY(bd_bind_layer3(l, il, "ffn_up_exps.weight", E, ff, ne, 0, 1, &w->up));
        BD_TRY(bd_bind_layer3(l, il, "ffn_down_exps.weight", ff, E, ne, 0, 1, &w->down));
        if (hp->shexp == MOE_SHEXP_NONE) return BRAID_OK;
        BD_TRY(bd_bind_layer(l, il, "ffn_up_shexp.weight", E, fs, 0, 1, &w->sh_up));
        BD_TRY(bd_bind_layer(l, il, "ffn_down_shexp.weight", fs, E, 0, 1, &w->sh_down));
        return BRAID_OK;
    }
    BD_TRY(bd_bind_layer3(l, il, "ffn_gate_up_exps.weight", E, 2 * ff, ne, 0, 0, &w->gate_up));
    if (!w->gate_up.data) {
        BD_TRY(bd_bind_layer3(l, il, "ffn_gate_exps.weight", E, ff, ne, 0, 1, &w->gate));
        BD_TRY(bd_bind_layer3(l, il, "ffn_up_exps.weight", E, ff, ne, 0, 1, &w->up));
    }
    BD_TRY(bd_bind_layer3(l, il, "ffn_down_exps.weight", ff, E, ne, 0, 1, &w->down));
    if (hp->shexp == MOE_SHEXP_NONE) return BRAID_OK;
    if (hp->shexp == MOE_SHEXP_GATED) BD_TRY(bd_bind_layer(l, il, "ffn_gate_inp_shexp.weight", E, 1, 0, 1, &w->sh_gate_inp));
    BD_TRY(bd_bind_layer(l, il, "ffn_gate_shexp.weight", E, fs, 0, 1, &w->sh_gate));
    BD_TRY(bd_bind_layer(l, il, "ffn_up_shexp.weight", E, fs, 0, 1, &w->sh_up));
    BD_TRY(bd_bind_layer(l, il, "ffn_down_shexp.weight", fs, E, 0, 1, &w->sh_down));
    return BRAID_OK;
}

/* Expert e of a stack bound by bd_bind_layer3. */
static bd_weight moe_expert(const bd_weight *w, int32_t e) {
    bd_weight x = *w;
    x.data = bd_weight_row(w, (int64_t)e * w->n_out);
    return x;
}

/* The buffers of one call, carved from the scratch block (base NULL: only measures). */
typedef struct moe_scratch {
    float *probs;    /* [T][n_expert] router softmax */
    int32_t *sel;    /* [T][k] chosen experts, descending probability */
    float *wt;       /* [T][k] their renormalized weights */
    int32_t *count;  /* [n_expert + 1] rows per expert, then prefix offsets */
    int32_t *rows;   /* [T*k] slot ids t*k + j grouped by expert, t ascending within an expert */
    float *xg;       /* [T][n_embd] the rows routed to one expert, gathered */
    float *gu;       /* [T][2*n_ff_exp] gate ‖ up outputs of one expert; decode: [k][2*n_ff_exp], one per slot */
    float *act;      /* [T][max(n_ff_exp, n_ff_shexp)] SwiGLU */
    float *dn;       /* [T][n_embd] down-projection of one expert */
    float *slot;     /* [T][k][n_embd] weighted output of each chosen expert, summed in slot order at the end */
    float *sh_gate;  /* [T] shared expert gate */
    float *sh_g, *sh_u; /* [T][n_ff_shexp] shared expert gate and up */
} moe_scratch;

static size_t moe_carve(const moe_hparams *hp, int64_t E, int32_t T, char *base, moe_scratch *s) {
    size_t off = 0;
    const size_t k = hp->n_expert_used, ffm = hp->n_ff_exp > hp->n_ff_shexp ? hp->n_ff_exp : hp->n_ff_shexp;
    const size_t ngu = (size_t)(T > (int32_t)k ? T : (int32_t)k) * 2 * hp->n_ff_exp;
#define MOE_TAKE(field, count, elt)                                                                               \
    do {                                                                                                          \
        s->field = base ? (void *)(base + off) : NULL;                                                            \
        off += (((size_t)(count) * (elt)) + 63) & ~(size_t)63;                                                    \
    } while (0)
    MOE_TAKE(probs, (size_t)T * hp->n_expert, sizeof(float));
    MOE_TAKE(sel, (size_t)T * k, sizeof(int32_t));
    MOE_TAKE(wt, (size_t)T * k, sizeof(float));
    MOE_TAKE(count, (size_t)hp->n_expert + 1, sizeof(int32_t));
    MOE_TAKE(rows, (size_t)T * k, sizeof(int32_t));
    MOE_TAKE(xg, (size_t)T * E, sizeof(float));
    MOE_TAKE(gu, ngu, sizeof(float));
    MOE_TAKE(act, (size_t)T * ffm, sizeof(float));
    MOE_TAKE(dn, (size_t)T * E, sizeof(float));
    MOE_TAKE(slot, (size_t)T * k * E, sizeof(float));
    MOE_TAKE(sh_gate, (size_t)T, sizeof(float));
    MOE_TAKE(sh_g, (size_t)T * hp->n_ff_shexp, sizeof(float));
    MOE_TAKE(sh_u, (size_t)T * hp->n_ff_shexp, sizeof(float));
#undef MOE_TAKE
    return off;
}

size_t moe_scratch_size(const moe_hparams *hp, int64_t n_embd, int32_t T) {
    moe_scratch s;
    return moe_carve(hp, n_embd, T, NULL, &s);
}

size_t moe_wsize(const moe_weights *w, int32_t T) {
    const bd_weight *ws[] = {&w->router, &w->gate_up, &w->gate, &w->up, &w->down,
                             &w->sh_gate_inp, &w->sh_gate, &w->sh_up, &w->sh_down};
    size_t m = 0;
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
        if (!ws[i]->data) continue;
        size_t b = blk_matmul_wsize(ws[i]->type, ws[i]->n_in, T);
        if (b > m) m = b;
    }
    return m;
}

/* p [n] -> the k largest of p + bias (bias NULL: of p) in descending order (ties: the lower index first), with
 * the unbiased p as weights, renormalized as llama.cpp does (the sum accumulated in double as ggml_sum_rows,
 * clamped below at the smallest normal F16) when hp says, then scaled when hp says. */
static void moe_route(const moe_hparams *hp, const float *p, const float *bias, int32_t n, int32_t k, int32_t *sel,
                      float *wt) {
    for (int32_t j = 0; j < k; j++) {
        int32_t best = -1;
        float bv = 0.0f;
        for (int32_t e = 0; e < n; e++) {
            int taken = 0;
            for (int32_t i = 0; i < j; i++) taken |= sel[i] == e;
            const float v = bias ? p[e] + bias[e] : p[e];
            if (!taken && (best < 0 || v > bv)) best = e, bv = v;
        }
        sel[j] = best;
        wt[j] = p[best];
    }
    if (hp->norm_w) {
        double sum = 0;
        for (int32_t j = 0; j < k; j++) sum += wt[j];
        float s = (float)sum;
        if (s < 6.103515625e-5f) s = 6.103515625e-5f;
        for (int32_t j = 0; j < k; j++) wt[j] /= s;
    }
    if (hp->w_scale != 0.0f && hp->w_scale != 1.0f)
        for (int32_t j = 0; j < k; j++) wt[j] *= hp->w_scale;
}

/* The router and the shared expert's scalar gate are F32 matrices in real files (llama.cpp's quantizer leaves
 * ffn_gate_inp* in F32), and F32 products are where bd_matmul's order may differ from ggml's: ggml's CPU backend
 * takes llamafile's tinyBLAS only for T >= 2 rows, N % 4 == 0 and K % 16 == 0, and otherwise one
 * ggml_vec_dot_f32 per output (a decode step; the one-row shared gate always). Those cases go through the F32
 * vec_dot of tensor/dot.h, which has ggml's order, so routing sees llama.cpp's bits; the rest is blk_matmul. */
typedef struct moe_gate_job {
    const bd_weight *w[2]; /* F32, [N][K] each */
    float *y[2];           /* [T][N] each */
    const float *x;        /* [T][K] */
    int32_t T;
} moe_gate_job;

static void moe_gate_task(void *arg, int ith, int nth) {
    const moe_gate_job *j = arg;
    const bd_vec_dot_fn dot = bd_dot_traits_get(BRAID_TYPE_F32)->vec_dot;
    const int64_t n0 = j->w[0]->n_out, K = j->w[0]->n_in;
    int64_t r0, r1;
    bd_split(n0 + j->w[1]->n_out, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int i = r >= n0;
        const int64_t n = r - (i ? n0 : 0), N = j->w[i]->n_out;
        const void *row = bd_weight_row(j->w[i], n);
        for (int32_t t = 0; t < j->T; t++) dot(K, j->y[i] + (size_t)t * N + n, row, j->x + (size_t)t * K);
    }
}

static int moe_ggml_vec_dot_order(const bd_weight *w, int32_t T) {
    return w->type == BRAID_TYPE_F32 && (T < 2 || w->n_out % 4 != 0 || w->n_in % 16 != 0);
}

/* router [T][n_expert] and scalar gate [T][1] of u, each in ggml's order (above); one dispatch when both take
 * the vec_dot. */
static void moe_gates(bd_threadpool *tp, const moe_weights *w, const float *u, int32_t T, float *router,
                      float *gate, void *wbuf) {
    const int vr = moe_ggml_vec_dot_order(&w->router, T), vg = moe_ggml_vec_dot_order(&w->sh_gate_inp, T);
    if (!w->sh_gate_inp.data) { /* no shared-expert gate: the router alone */
        if (vr) {
            static const bd_weight none = {.n_out = 0};
            moe_gate_job j = {{&w->router, &none}, {router, NULL}, u, T};
            bd_threadpool_run(tp, moe_gate_task, &j);
        } else {
            blk_matmul(tp, &w->router, u, T, router, wbuf);
        }
        return;
    }
    if (vr && vg) {
        moe_gate_job j = {{&w->router, &w->sh_gate_inp}, {router, gate}, u, T};
        bd_threadpool_run(tp, moe_gate_task, &j);
        return;
    }
    const bd_weight *ws[2] = {&w->router, &w->sh_gate_inp};
    float *ys[2] = {router, gate};
    for (int i = 0; i < 2; i++) {
        if (moe_ggml_vec_dot_order(ws[i], T)) {
            static const bd_weight none = {.n_out = 0};
            moe_gate_job j = {{ws[i], &none}, {ys[i], NULL}, u, T};
            bd_threadpool_run(tp, moe_gate_task, &j);
        } else {
            blk_matmul(tp, ws[i], u, T, ys[i], wbuf);
        }
    }
}

/* SwiGLU of n rows, on the pool only when there is enough of it to split (the bits do not depend on it). */
static void moe_act(bd_threadpool *tp, float *y, const float *g, const float *u, int64_t ld, int64_t ff, int32_t n) {
    bd_swiglu_rows((int64_t)n * ff >= 4096 ? tp : NULL, y, ff, g, ld, u, ld, ff, n);
}

/* relu² of n rows of ff (ld apart) into y [n][ff]. */
static void moe_relu2(float *y, const float *x, int64_t ld, int64_t ff, int32_t n) {
    for (int32_t i = 0; i < n; i++) bd_relu_sqr(y + (size_t)i * ff, x + (size_t)i * ld, ff);
}

void moe_ffn(bd_threadpool *tp, const moe_hparams *hp, const moe_weights *w, const float *u, int64_t E, int32_t T,
             float *out, void *scratch, void *wbuf, int il) {
    moe_scratch s;
    moe_carve(hp, E, T, scratch, &s);
    const int32_t ne = (int32_t)hp->n_expert, k = (int32_t)hp->n_expert_used;
    const int64_t ff = hp->n_ff_exp, fs = hp->n_ff_shexp;
    const int merged = w->gate_up.data != NULL;

    /* What reads u alone: the router and the shared expert's scalar gate, then its gate and up (one dispatch). */
    moe_gates(tp, w, u, T, s.probs, s.sh_gate, wbuf);
    if (hp->shexp != MOE_SHEXP_NONE) {
        if (hp->relu2) blk_matmul(tp, &w->sh_up, u, T, s.sh_u, wbuf);
        else blk_matmul_multi(tp, (const bd_weight *[]){&w->sh_gate, &w->sh_up}, (float *[]){s.sh_g, s.sh_u}, 2, u, T,
                              wbuf);
    }

    /* Routing: p = softmax or sigmoid of the router logits per row, top-k, the weights as hp says. */
    for (int32_t t = 0; t < T; t++) {
        float *p = s.probs + (size_t)t * ne;
        if (hp->sigmoid) bd_sigmoid(p, p, ne);
        else bd_softmax(p, p, ne);
        moe_route(hp, p, w->sel_bias.data, ne, k, s.sel + (size_t)t * k, s.wt + (size_t)t * k);
    }
    bd_tap("ffn_moe_probs", il, s.probs, ne, T, ne);
    bd_tap("ffn_moe_weights_norm", il, s.wt, k, T, k);

    if (T == 1) {
        /* Decode: every chosen expert reads the same row, so their gate/up products share dispatches (up to
         * 8 products each), one gate ‖ up block per slot. */
        const bd_weight *ws[8];
        float *ys[8];
        bd_weight views[8];
        int n = 0;
        for (int32_t j = 0; j < k; j++) {
            float *g = s.gu + (size_t)j * 2 * ff;
            if (hp->relu2) {
                views[n] = moe_expert(&w->up, s.sel[j]), ws[n] = &views[n], ys[n] = g, n++;
            } else if (merged) {
                views[n] = moe_expert(&w->gate_up, s.sel[j]), ws[n] = &views[n], ys[n] = g, n++;
            } else {
                views[n] = moe_expert(&w->gate, s.sel[j]), ws[n] = &views[n], ys[n] = g, n++;
                views[n] = moe_expert(&w->up, s.sel[j]), ws[n] = &views[n], ys[n] = g + ff, n++;
            }
            if (n + 2 > 8 || j == k - 1) {
                blk_matmul_multi(tp, ws, ys, n, u, 1, wbuf);
                n = 0;
            }
        }
        for (int32_t j = 0; j < k; j++) {
            const float *g = s.gu + (size_t)j * 2 * ff;
            if (hp->relu2) moe_relu2(s.act, g, ff, ff, 1);
            else moe_act(tp, s.act, g, g + ff, 2 * ff, ff, 1);
            bd_weight dn = moe_expert(&w->down, s.sel[j]);
            blk_matmul(tp, &dn, s.act, 1, s.dn, wbuf);
            float *o = s.slot + (size_t)j * E;
            for (int64_t c = 0; c < E; c++) o[c] = s.dn[c] * s.wt[j];
        }
    } else {
        /* Group the (row, slot) pairs by expert (counting sort, rows ascending within an expert). */
        memset(s.count, 0, ((size_t)ne + 1) * sizeof(int32_t));
        for (int32_t i = 0; i < T * k; i++) s.count[s.sel[i] + 1]++;
        for (int32_t e = 0; e < ne; e++) s.count[e + 1] += s.count[e]; /* count[e] = first index of expert e */
        for (int32_t i = 0; i < T * k; i++) s.rows[s.count[s.sel[i]]++] = i; /* count[e] -> end of expert e */

        /* Each chosen expert once, over its gathered rows; each output row weighted into its slot. */
        for (int32_t e = 0, begin = 0; e < ne; e++) {
            const int32_t end = s.count[e], n = end - begin;
            if (n > 0) {
                for (int32_t i = 0; i < n; i++)
                    memcpy(s.xg + (size_t)i * E, u + (size_t)(s.rows[begin + i] / k) * E, (size_t)E * sizeof(float));
                if (hp->relu2) { /* [n][ff] up only */
                    bd_weight up = moe_expert(&w->up, e);
                    blk_matmul(tp, &up, s.xg, n, s.gu, wbuf);
                    moe_relu2(s.act, s.gu, ff, ff, n);
                } else if (merged) { /* [n][gate ff ‖ up ff] */
                    bd_weight gu = moe_expert(&w->gate_up, e);
                    blk_matmul(tp, &gu, s.xg, n, s.gu, wbuf);
                    moe_act(tp, s.act, s.gu, s.gu + ff, 2 * ff, ff, n);
                } else { /* [n][ff] gate, then [n][ff] up */
                    bd_weight g = moe_expert(&w->gate, e), up = moe_expert(&w->up, e);
                    blk_matmul_multi(tp, (const bd_weight *[]){&g, &up}, (float *[]){s.gu, s.gu + (size_t)n * ff}, 2,
                                     s.xg, n, wbuf);
                    moe_act(tp, s.act, s.gu, s.gu + (size_t)n * ff, ff, ff, n);
                }
                bd_weight dn = moe_expert(&w->down, e);
                blk_matmul(tp, &dn, s.act, n, s.dn, wbuf);
                for (int32_t i = 0; i < n; i++) {
                    const int32_t slot = s.rows[begin + i];
                    const float wt = s.wt[slot];
                    const float *d = s.dn + (size_t)i * E;
                    float *o = s.slot + (size_t)slot * E;
                    for (int64_t c = 0; c < E; c++) o[c] = d[c] * wt;
                }
            }
            begin = end;
        }
    }

    bd_tap("ffn_moe_weighted", il, s.slot, k * E, T, k * E);

    if (hp->shexp != MOE_SHEXP_GATED) { /* out = ((slot 0 + slot 1) + ...) (+ the ungated shared expert) */
        const int sh = hp->shexp == MOE_SHEXP_PLAIN;
        if (sh) {
            if (hp->relu2) moe_relu2(s.act, s.sh_u, fs, fs, T);
            else moe_act(tp, s.act, s.sh_g, s.sh_u, fs, fs, T);
            blk_matmul(tp, &w->sh_down, s.act, T, out, wbuf);
            bd_tap("ffn_shexp", il, out, E, T, E);
        }
        for (int32_t t = 0; t < T; t++) {
            float *o = out + (size_t)t * E;
            const float *sl = s.slot + (size_t)t * k * E;
            for (int64_t c = 0; c < E; c++) {
                float acc = sl[c];
                for (int32_t j = 1; j < k; j++) acc += sl[(size_t)j * E + c];
                o[c] = sh ? acc + o[c] : acc;
            }
        }
        return;
    }

    /* The shared expert, gated by sigmoid(w_sh·u) (one scalar per row). */
    moe_act(tp, s.act, s.sh_g, s.sh_u, fs, fs, T);
    blk_matmul(tp, &w->sh_down, s.act, T, out, wbuf);
    bd_tap("shared_expert_gate", il, s.sh_gate, 1, T, 1);
    bd_sigmoid(s.sh_gate, s.sh_gate, T);
    bd_tap("ffn_shexp", il, out, E, T, E);
    bd_tap("shared_expert_gate_sigmoid", il, s.sh_gate, 1, T, 1);

    /* out = ((slot 0 + slot 1) + ...) + shared·gate, ggml's association. */
    for (int32_t t = 0; t < T; t++) {
        float *o = out + (size_t)t * E;
        const float *sl = s.slot + (size_t)t * k * E;
        const float g = s.sh_gate[t];
        for (int64_t c = 0; c < E; c++) {
            float acc = sl[c];
            for (int32_t j = 1; j < k; j++) acc += sl[(size_t)j * E + c];
            o[c] = acc + o[c] * g;
        }
    }
}
