/* layer_mamba2.c — the Mamba2 mixer of layers.h (architectures.md §2.1), shared by mamba2, nemotron_h,
 * granitehybrid and falcon-h1, in llama.cpp's op order (mamba-base.cpp): in-projection, causal conv over xBC
 * with bias then SiLU, the selective scan (softplus(dt + bias), dA = exp(Δ·A), D skip), y·silu(z), the
 * grouped RMSNorm, the out-projection. */
#include <string.h>

#include "models/layers.h"
#include "tensor/tap.h"

braid_status layer_mamba2_keys(const bd_loader *l, layer_mamba2_shape *sh) {
    uint32_t v[5];
    const char *keys[5] = {"ssm.conv_kernel", "ssm.inner_size", "ssm.state_size", "ssm.time_step_rank",
                           "ssm.group_count"};
    for (int i = 0; i < 5; i++) {
        BD_TRY(bd_key_u32(l, keys[i], 1, &v[i]));
        if (v[i] > (1u << 24)) return bd_error(BRAID_E_FORMAT, "%s%s = %u is out of range", l->arch, keys[i], v[i]);
    }
    sh->d_conv = (int32_t)v[0], sh->d_inner = (int32_t)v[1], sh->N = (int32_t)v[2], sh->H = (int32_t)v[3];
    sh->G = (int32_t)v[4];
    return BRAID_OK;
}

braid_status layer_mamba2_check(const char *arch, const layer_mamba2_shape *sh) {
    if (sh->d_inner <= 0 || sh->N <= 0 || sh->H <= 0 || sh->G <= 0 || sh->d_inner > (1 << 20) || sh->N > 4096 ||
        sh->d_inner % sh->H || sh->d_inner % sh->G || sh->H % sh->G)
        return bd_error(BRAID_E_FORMAT, "%s: ssm.inner_size %d must be a multiple of ssm.time_step_rank %d and "
                        "ssm.group_count %d, and the heads of the groups (state_size %d)", arch, sh->d_inner, sh->H,
                        sh->G, sh->N);
    if (sh->d_conv < 2 || sh->d_conv > 16) /* bd_conv1d_causal's limit; real models use 4 */
        return bd_error(BRAID_E_UNSUPPORTED, "%s: ssm.conv_kernel %d is not in 2..16", arch, sh->d_conv);
    return BRAID_OK;
}

braid_status layer_mamba2_bind(bd_loader *l, int il, int64_t E, const layer_mamba2_shape *sh, int norm_required,
                               layer_mamba2 *w) {
    const int64_t cd = layer_mamba2_conv_dim(sh), dproj = 2 * (int64_t)sh->d_inner + 2 * (int64_t)sh->G * sh->N + sh->H;
    memset(w, 0, sizeof *w);
    BD_TRY(bd_bind_layer(l, il, "ssm_in.weight", E, dproj, 0, 1, &w->in));
    BD_TRY(bd_bind_layer(l, il, "ssm_conv1d.weight", sh->d_conv, cd, 1, 1, &w->conv));
    /* flagged optional in llama.cpp's loader but added unconditionally by its graph: required */
    BD_TRY(bd_bind_layer(l, il, "ssm_conv1d.bias", cd, 1, 1, 1, &w->conv_b));
    BD_TRY(bd_bind_layer(l, il, "ssm_dt.bias", sh->H, 1, 1, 1, &w->dt_b));
    BD_TRY(bd_bind_layer(l, il, "ssm_a", 1, sh->H, 1, 1, &w->a));
    BD_TRY(bd_bind_layer(l, il, "ssm_d", 1, sh->H, 1, 1, &w->d));
    BD_TRY(bd_bind_layer(l, il, "ssm_norm.weight", sh->d_inner / sh->G, sh->G, 1, norm_required, &w->norm));
    BD_TRY(bd_bind_layer(l, il, "ssm_out.weight", sh->d_inner, E, 0, 1, &w->out));
    return BRAID_OK;
}

void layer_mamba2_carve(bd_arena *a, const layer_mamba2_shape *sh, int32_t T, layer_mamba2_scratch *s) {
    const size_t cd = (size_t)layer_mamba2_conv_dim(sh);
    s->zx = bd_arena_floats(a, (size_t)T * (cd + (size_t)sh->d_inner + (size_t)sh->H));
    s->xbc = bd_arena_floats(a, (size_t)T * cd);
    s->y = bd_arena_floats(a, (size_t)T * (size_t)sh->d_inner);
    s->snap = bd_arena_take(a, (size_t)2 * T * sizeof(float *));
}

size_t layer_mamba2_wsize(const layer_mamba2 *w, int32_t T) {
    const size_t a = blk_matmul_wsize(w->in.type, w->in.n_in, T), b = blk_matmul_wsize(w->out.type, w->out.n_in, T);
    return a > b ? a : b;
}

void layer_mamba2_mix(bd_threadpool *tp, const layer_mamba2 *w, const layer_mamba2_shape *sh, layer_mamba2_scratch *s,
                  void *wbuf, const bd_fwd_batch *b, const bd_fwd_memory *mem, int slot, int il, const float *u,
                  float *out) {
    const int32_t T = b->n, di = sh->d_inner, N = sh->N, H = sh->H, G = sh->G, P = di / H;
    const int64_t cd = layer_mamba2_conv_dim(sh), dproj = cd + di + H;

    /* z ‖ xBC ‖ dt = W_in·u */
    blk_matmul(tp, &w->in, u, T, s->zx, wbuf);
    for (int32_t k = 0; k < mem->n_runs; k++) {
        const bd_fwd_run *run = &mem->runs[k];
        const int32_t t0 = run->row0, n = run->n_rows;
        layer_rs rs;
        layer_rs_view(mem, run, slot, s->snap, &rs);
        float *xbc = s->xbc + (size_t)t0 * cd;
        const float *zx = s->zx + (size_t)t0 * dproj;
        /* causal depthwise conv over the window (state ‖ xBC), + bias, silu */
        bd_conv1d_causal_from(tp, xbc, cd, zx + di, dproj, rs.conv_in, rs.conv_out, w->conv.data, w->conv_b.data, cd,
                              sh->d_conv, n, 1, rs.conv_snap);
        /* the scan reads the run's in state and writes its out state (no copy first: at decode the state is
         * most of what a token moves besides the weights) */
        bd_ssm_scan_from(tp, n, H, P, N, G, xbc, cd, zx + di + cd, dproj, w->dt_b.data, w->a.data, xbc + di, cd,
                         xbc + di + (int64_t)G * N, cd, w->d.data, rs.ssm_in, rs.ssm_out, s->y + (size_t)t0 * di, di,
                         rs.ssm_snap);
    }
    bd_tap("mamba2_y_add_d", il, s->y, di, T, di);
    /* y = silu(z) ⊙ y, then the grouped RMSNorm */
    bd_swiglu_rows(tp, s->y, di, s->zx, dproj, s->y, di, di, T);
    if (w->norm.data) {
        const int32_t gs = di / G;
        const float *nw = w->norm.data;
        for (int32_t t = 0; t < T; t++)
            for (int32_t g = 0; g < G; g++) {
                float *yg = s->y + (size_t)t * di + (size_t)g * gs;
                bd_rmsnorm(yg, yg, nw + (size_t)g * gs, gs, sh->eps);
            }
    }
    blk_matmul(tp, &w->out, s->y, T, out, wbuf);
    bd_tap("mamba_out", il, out, w->out.n_out, T, w->out.n_out);
}
