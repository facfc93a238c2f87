/* test_recurrent.c — causal conv1d with state, the Gated DeltaNet recurrence and the Mamba2 scan, against
 * double-precision references written from architectures.md (§1.7, §2.1, §3.3), at every SIMD level.
 *
 * Beyond accuracy, the recurrent kernels must be exact about state: running T tokens at once, or in pieces, or
 * one by one must give identical bits (each token's arithmetic is the same), every snapshot must equal the
 * state after its token, and 1 and N threads must agree bit for bit.
 *
 * Tolerances (u = FLT_EPSILON):
 * - conv: a float sum of L products, a bias add, then silu: (L + 2)·u·Σ|w·x| + 8u·|ref| + 1e-30.
 * - GDN and the scan are recurrences: each token adds a rounding error of at most ~2S·u (resp. 2N·u) times the
 *   size of the state (dot products of length S), and the update does not amplify older errors (the decay is
 *   <= 1 and, with |k| = 1 and β in (0, 1), the delta-rule step is a contraction). So after t tokens the error
 *   is below (t + 1)·4S·u·(1 + max|state|), the bound used, per token, for outputs and state. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/threadpool.h"
#include "tensor/dot.h"
#include "tensor/ops.h"
#include "tensor/simd.h"
#include "test.h"

#define U ((double)FLT_EPSILON)

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

static float *randv(int64_t n, float scale) {
    float *p = bd_mallocn((size_t)n, sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = frand() * scale;
    return p;
}

/* ---- conv ---- */
static void test_conv(bd_threadpool *tp, int lv) {
    const int Ls[] = {1, 3, 4};
    const int64_t Cs[] = {5, 40, 1000};
    for (int li = 0; li < 3; li++)
        for (int ci = 0; ci < 3; ci++)
            for (int variant = 0; variant < 2; variant++) { /* 0: bias + silu (GDN/Mamba2); 1: plain (LFM2) */
                const int L = Ls[li];
                const int64_t C = Cs[ci], T = 9, ldx = C + 7, ldy = C + 3;
                const int silu = variant == 0;
                float *x = randv(T * ldx, 2), *w = randv(C * L, 1), *b = variant == 0 ? randv(C, 1) : NULL;
                float *st0 = randv(C * (L > 1 ? L - 1 : 1), 2);
                float *st = bd_mallocn((size_t)(C * L), 4), *y = bd_calloc((size_t)(T * ldy), 4);
                memcpy(st, st0, (size_t)(C * (L - 1)) * 4);
                /* snapshots after tokens 0, 2, 4, ... (checked against the one-by-one run below) */
                float *snapbuf = bd_calloc((size_t)(T * C * L), 4), *snap[9];
                for (int t = 0; t < T; t++) snap[t] = t % 2 ? NULL : snapbuf + (size_t)t * C * L;
                bd_conv1d_causal(NULL, y, ldy, x, ldx, st, w, b, C, L, T, silu, snap);
                double worst = 0;
                int state_ok = 1;
                for (int64_t c = 0; c < C; c++) {
                    for (int64_t t = 0; t < T; t++) {
                        double s = 0, a = 0;
                        for (int m = 0; m < L; m++) {
                            int64_t src = t - (L - 1) + m; /* index into [state..., x...] */
                            double in = src < 0 ? st0[c * (L - 1) + (L - 1 + src)] : x[src * ldx + c];
                            s += w[c * L + m] * in;
                            a += fabs(w[c * L + m] * in);
                        }
                        if (b) {
                            s += b[c];
                            a += fabs(b[c]);
                        }
                        double ref = silu ? s / (1 + exp(-s)) : s;
                        double tol = (L + 2) * U * a + 8 * U * fabs(ref) + 1e-30;
                        worst = fmax(worst, fabs(y[t * ldy + c] - ref) / tol);
                    }
                    for (int m = 0; m < L - 1; m++) {
                        int64_t src = T - (L - 1) + m;
                        float want = src < 0 ? st0[c * (L - 1) + (L - 1 + src)] : x[src * ldx + c];
                        state_ok &= st[c * (L - 1) + m] == want;
                    }
                }
                CHECK(worst <= 1, "conv level %d L=%d C=%lld v%d: %.3g of tolerance", lv, L, (long long)C, variant,
                      worst);
                CHECK(state_ok, "conv level %d L=%d C=%lld: state = last L-1 inputs", lv, L, (long long)C);
                /* token by token (state carried) and threaded: identical bits */
                float *y2 = bd_calloc((size_t)(T * ldy), 4);
                memcpy(st, st0, (size_t)(C * (L - 1)) * 4);
                int snap_ok = 1;
                for (int64_t t = 0; t < T; t++) {
                    bd_conv1d_causal(tp, y2 + t * ldy, ldy, x + t * ldx, ldx, st, w, b, C, L, 1, silu, NULL);
                    if (snap[t]) snap_ok &= !memcmp(snap[t], st, (size_t)(C * (L - 1)) * 4);
                }
                CHECK(!memcmp(y, y2, (size_t)(T * ldy) * 4), "conv level %d L=%d C=%lld: one by one = batch", lv, L,
                      (long long)C);
                CHECK(snap_ok, "conv level %d L=%d C=%lld: snapshots = state after their token", lv, L, (long long)C);
                bd_free(snapbuf);
                bd_free(x);
                bd_free(w);
                bd_free(b);
                bd_free(st0);
                bd_free(st);
                bd_free(y);
                bd_free(y2);
            }
    /* big enough to be split across threads */
    const int64_t C = 4096, T = 8;
    float *x = randv(C * T, 1), *w = randv(C * 4, 1), *s1 = randv(C * 3, 1), *sn = bd_mallocn((size_t)C * 3, 4);
    float *y1 = bd_mallocn((size_t)(C * T), 4), *yn = bd_mallocn((size_t)(C * T), 4);
    memcpy(sn, s1, (size_t)C * 3 * 4);
    bd_conv1d_causal(NULL, y1, C, x, C, s1, w, NULL, C, 4, T, 1, NULL);
    bd_conv1d_causal(tp, yn, C, x, C, sn, w, NULL, C, 4, T, 1, NULL);
    CHECK(!memcmp(y1, yn, (size_t)(C * T) * 4) && !memcmp(s1, sn, (size_t)C * 3 * 4), "conv: 1 vs N threads");
    /* a decode step (T = 1, C not a multiple of 16) reading its state from elsewhere: same outputs and new state
     * as in place, the old state untouched */
    {
        const int64_t Cd = 6152;
        float *s0 = randv(Cd * 3, 1), *sa = bd_mallocn((size_t)Cd * 3, 4), *sb = bd_mallocn((size_t)Cd * 3, 4);
        float *ya = bd_mallocn((size_t)Cd, 4), *yb = bd_mallocn((size_t)Cd, 4), *xd = randv(Cd, 1), *wd = randv(Cd * 4, 1);
        memcpy(sa, s0, (size_t)Cd * 3 * 4);
        float *keep = bd_mallocn((size_t)Cd * 3, 4);
        memcpy(keep, s0, (size_t)Cd * 3 * 4);
        bd_conv1d_causal(NULL, ya, Cd, xd, Cd, sa, wd, NULL, Cd, 4, 1, 1, NULL);
        bd_conv1d_causal_from(tp, yb, Cd, xd, Cd, s0, sb, wd, NULL, Cd, 4, 1, 1, NULL);
        CHECK(!memcmp(ya, yb, (size_t)Cd * 4) && !memcmp(sa, sb, (size_t)Cd * 3 * 4) &&
                  !memcmp(s0, keep, (size_t)Cd * 3 * 4),
              "conv_from: same as in place, input state untouched");
        bd_free(s0), bd_free(sa), bd_free(sb), bd_free(ya), bd_free(yb), bd_free(xd), bd_free(wd), bd_free(keep);
    }
    bd_free(x);
    bd_free(w);
    bd_free(s1);
    bd_free(sn);
    bd_free(y1);
    bd_free(yn);
}

/* ---- GDN ---- */
static void l2n(float *x, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)x[i] * x[i];
    for (int i = 0; i < n; i++) x[i] = (float)(x[i] / sqrt(s + 1e-6));
}

static void test_gdn(bd_threadpool *tp, int lv) {
    /* H_k, H_v, S, T: S = 64 and 128 take the register-resident path, whose token blocks are 32 long */
    const int shapes[][4] = {{1, 1, 16, 12}, {2, 4, 32, 12}, {2, 6, 24, 12}, {1, 2, 7, 12}, {1, 3, 128, 12},
                             {2, 4, 64, 40}, {1, 2, 128, 33}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int H_k = shapes[si][0], H_v = shapes[si][1], S = shapes[si][2];
        const int64_t T = shapes[si][3], ldq = H_k * S + 5, ldv = H_v * S + 3, ldo = H_v * S + 1;
        float *q = randv(T * ldq, 1), *k = randv(T * ldq, 1), *v = randv(T * ldv, 1);
        float *g = bd_mallocn((size_t)(T * H_v), 4), *beta = bd_mallocn((size_t)(T * H_v), 4);
        for (int64_t t = 0; t < T; t++)
            for (int h = 0; h < H_k; h++) {
                l2n(q + t * ldq + h * S, S);
                l2n(k + t * ldq + h * S, S);
            }
        for (int64_t i = 0; i < T * H_v; i++) {
            g[i] = -0.5f * (frand() + 1.0f); /* log decay in (-1, 0] */
            beta[i] = 0.5f * (frand() + 1.0f);
        }
        const size_t ss = (size_t)H_v * S * S;
        float *st0 = randv((int64_t)ss, 0.5f), *st = bd_mallocn(ss, 4), *o = bd_calloc((size_t)(T * ldo), 4);
        float *snapbuf = bd_mallocn(ss * (size_t)T, 4);
        float *snap[64];
        for (int t = 0; t < T; t++) snap[t] = t % 3 == 1 ? NULL : snapbuf + ss * (size_t)t;
        memcpy(st, st0, ss * 4);
        bd_gdn(NULL, T, H_k, H_v, S, q, ldq, k, ldq, v, ldv, g, beta, st, o, ldo, snap);

        /* reference: M[h][i][j] in double, literally §1.7 step 7 */
        double *M = bd_mallocn(ss, sizeof(double)), *r = bd_mallocn((size_t)S, 8), *d = bd_mallocn((size_t)S, 8);
        for (int h = 0; h < H_v; h++)
            for (int i = 0; i < S; i++)
                for (int j = 0; j < S; j++) M[(size_t)h * S * S + (size_t)i * S + j] = st0[(size_t)h * S * S + (size_t)j * S + i];
        double worst_o = 0, worst_s = 0;
        int snaps_ok = 1;
        for (int64_t t = 0; t < T; t++) {
            double mx = 0;
            for (size_t i = 0; i < ss; i++) mx = fmax(mx, fabs(M[i]));
            for (int h = 0; h < H_v; h++) {
                const int kh = h % H_k;
                const float *kk = k + t * ldq + kh * S, *qq = q + t * ldq + kh * S, *vv = v + t * ldv + h * S;
                double *Mh = M + (size_t)h * S * S, e = exp((double)g[t * H_v + h]);
                for (int i = 0; i < S * S; i++) Mh[i] *= e;
                for (int j = 0; j < S; j++) {
                    r[j] = 0;
                    for (int i = 0; i < S; i++) r[j] += Mh[i * S + j] * kk[i];
                    d[j] = (vv[j] - r[j]) * beta[t * H_v + h];
                }
                for (int i = 0; i < S; i++)
                    for (int j = 0; j < S; j++) Mh[i * S + j] += kk[i] * d[j];
                for (int j = 0; j < S; j++) {
                    double oj = 0;
                    for (int i = 0; i < S; i++) oj += Mh[i * S + j] * qq[i];
                    oj /= sqrt((double)S);
                    double tol = (double)(t + 1) * 4 * S * U * (1 + mx);
                    worst_o = fmax(worst_o, fabs(o[t * ldo + h * S + j] - oj) / tol);
                }
            }
            if (snap[t]) {
                /* the snapshot after token t must equal a fresh run of tokens 0..t */
                float *chk = bd_mallocn(ss, 4), *oc = bd_mallocn((size_t)(T * ldo), 4);
                memcpy(chk, st0, ss * 4);
                bd_gdn(NULL, t + 1, H_k, H_v, S, q, ldq, k, ldq, v, ldv, g, beta, chk, oc, ldo, NULL);
                snaps_ok &= !memcmp(chk, snap[t], ss * 4);
                bd_free(chk);
                bd_free(oc);
            }
        }
        double mx = 0;
        for (size_t i = 0; i < ss; i++) mx = fmax(mx, fabs(M[i]));
        for (int h = 0; h < H_v; h++)
            for (int i = 0; i < S; i++)
                for (int j = 0; j < S; j++) {
                    double ref = M[(size_t)h * S * S + (size_t)i * S + j];
                    double got = st[(size_t)h * S * S + (size_t)j * S + i]; /* stored transposed */
                    worst_s = fmax(worst_s, fabs(got - ref) / ((double)T * 4 * S * U * (1 + mx)));
                }
        /* exactly the definition in float, ggml's order: per token and state row, decay, r = the level's F32
         * vec_dot of the row and k, the fused update, the vec_dot with q (every level's kernel claims these bits) */
        {
            const bd_vec_dot_fn dot = bd_dot_traits_get(BRAID_TYPE_F32)->vec_dot;
            float *Mf = bd_mallocn(ss, 4), *of = bd_calloc((size_t)(T * ldo), 4);
            memcpy(Mf, st0, ss * 4);
            const float scale = 1.0f / sqrtf((float)S);
            for (int64_t t = 0; t < T; t++)
                for (int h = 0; h < H_v; h++) {
                    const int kh = h % H_k;
                    const float *kk = k + t * ldq + kh * S, *qq = q + t * ldq + kh * S, *vv = v + t * ldv + h * S;
                    const float eg = expf(g[t * H_v + h]), bt = beta[t * H_v + h];
                    for (int j = 0; j < S; j++) {
                        float *row = Mf + (size_t)h * S * S + (size_t)j * S, rr, sq;
                        for (int i = 0; i < S; i++) row[i] *= eg;
                        dot(S, &rr, row, kk);
                        const float dj = (vv[j] - rr) * bt;
                        for (int i = 0; i < S; i++) row[i] = fmaf(kk[i], dj, row[i]);
                        dot(S, &sq, row, qq);
                        of[t * ldo + h * S + j] = sq * scale;
                    }
                }
            CHECK(!memcmp(Mf, st, ss * 4) && !memcmp(of, o, (size_t)(T * ldo) * 4),
                  "gdn level %d H_k=%d H_v=%d S=%d: the float definition's bits", lv, H_k, H_v, S);
            bd_free(Mf);
            bd_free(of);
        }
        CHECK(worst_o <= 1, "gdn level %d H_k=%d H_v=%d S=%d: output %.3g of tolerance", lv, H_k, H_v, S, worst_o);
        CHECK(worst_s <= 1, "gdn level %d H_k=%d H_v=%d S=%d: state %.3g of tolerance", lv, H_k, H_v, S, worst_s);
        CHECK(snaps_ok, "gdn level %d S=%d: snapshots equal the state after their token", lv, S);

        /* in pieces (5 + 1 + the rest), threaded: identical bits */
        float *st2 = bd_mallocn(ss, 4), *o2 = bd_calloc((size_t)(T * ldo), 4);
        memcpy(st2, st0, ss * 4);
        const int64_t cuts[] = {0, 5, 6, T};
        for (int c = 0; c < 3; c++) {
            int64_t a = cuts[c], n = cuts[c + 1] - a;
            bd_gdn(tp, n, H_k, H_v, S, q + a * ldq, ldq, k + a * ldq, ldq, v + a * ldv, ldv, g + a * H_v,
                   beta + a * H_v, st2, o2 + a * ldo, ldo, NULL);
        }
        CHECK(!memcmp(st, st2, ss * 4) && !memcmp(o, o2, (size_t)(T * ldo) * 4),
              "gdn level %d S=%d: pieces on N threads = one run on 1 thread", lv, S);
        /* from a separate committed state (bd_gdn_from): same bits, the input left untouched */
        float *in = bd_mallocn(ss, 4), *st3 = bd_mallocn(ss, 4), *o3 = bd_calloc((size_t)(T * ldo), 4);
        memcpy(in, st0, ss * 4);
        bd_gdn_from(tp, T, H_k, H_v, S, q, ldq, k, ldq, v, ldv, g, beta, in, st3, o3, ldo, NULL);
        CHECK(!memcmp(st, st3, ss * 4) && !memcmp(o, o3, (size_t)(T * ldo) * 4) && !memcmp(in, st0, ss * 4),
              "gdn level %d S=%d: from a separate state = in place, input kept", lv, S);
        bd_free(in);
        bd_free(st3);
        bd_free(o3);
        bd_free(q);
        bd_free(k);
        bd_free(v);
        bd_free(g);
        bd_free(beta);
        bd_free(st0);
        bd_free(st);
        bd_free(o);
        bd_free(snapbuf);
        bd_free(M);
        bd_free(r);
        bd_free(d);
        bd_free(st2);
        bd_free(o2);
    }
}

/* ---- Mamba2 scan ---- */
static void test_scan(bd_threadpool *tp, int lv) {
    const int shapes[][4] = {{4, 8, 16, 1}, {6, 4, 7, 2}, {8, 16, 128, 2}, {2, 3, 8, 2}}; /* H, P, N, G */
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int H = shapes[si][0], P = shapes[si][1], N = shapes[si][2], G = shapes[si][3];
        const int64_t T = 10, ldx = H * P + 2, lddt = H + 1, ldb = G * N + 3, ldy = H * P + 4;
        float *x = randv(T * ldx, 1), *dt = randv(T * lddt, 3), *dtb = randv(H, 1), *A = randv(H, 1);
        float *B = randv(T * ldb, 1), *C = randv(T * ldb, 1), *D = randv(H, 1);
        for (int h = 0; h < H; h++) A[h] = -fabsf(A[h]) - 0.1f;
        dt[0] = 25.0f; /* softplus's linear branch */
        const size_t ss = (size_t)H * P * N;
        float *st0 = randv((int64_t)ss, 1), *st = bd_mallocn(ss, 4), *y = bd_calloc((size_t)(T * ldy), 4);
        memcpy(st, st0, ss * 4);
        const int useD = si % 2 == 0;
        bd_ssm_scan(NULL, T, H, P, N, G, x, ldx, dt, lddt, dtb, A, B, ldb, C, ldb, useD ? D : NULL, st, y, ldy, NULL);
        double *s = bd_mallocn(ss, 8);
        for (size_t i = 0; i < ss; i++) s[i] = st0[i];
        double worst_y = 0, worst_s = 0;
        for (int64_t t = 0; t < T; t++) {
            double mx = 0;
            for (size_t i = 0; i < ss; i++) mx = fmax(mx, fabs(s[i]));
            for (int h = 0; h < H; h++) {
                const int g = h / (H / G);
                double dd = (double)dt[t * lddt + h] + dtb[h];
                double delta = dd > 20 ? dd : log1p(exp(dd));
                double dA = exp(delta * A[h]);
                for (int p = 0; p < P; p++) {
                    double xv = x[t * ldx + h * P + p], acc = 0;
                    for (int n = 0; n < N; n++) {
                        double *sv = &s[((size_t)h * P + p) * N + n];
                        *sv = *sv * dA + B[t * ldb + g * N + n] * xv * delta;
                        acc += *sv * C[t * ldb + g * N + n];
                    }
                    if (useD) acc += D[h] * xv;
                    /* Δ and dA pass through expf / logf: a few ulp more, relative to the state's size */
                    double tol = (double)(t + 1) * 4 * (N + 8) * U * (1 + mx) * (1 + fabs(xv) * delta);
                    worst_y = fmax(worst_y, fabs(y[t * ldy + h * P + p] - acc) / tol);
                }
            }
        }
        double mx = 0;
        for (size_t i = 0; i < ss; i++) mx = fmax(mx, fabs(s[i]));
        for (size_t i = 0; i < ss; i++) worst_s = fmax(worst_s, fabs(st[i] - s[i]) / ((double)T * 4 * (N + 8) * U * (1 + mx) * 8));
        CHECK(worst_y <= 1, "scan level %d H=%d P=%d N=%d G=%d: output %.3g of tolerance", lv, H, P, N, G, worst_y);
        CHECK(worst_s <= 1, "scan level %d H=%d P=%d N=%d G=%d: state %.3g of tolerance", lv, H, P, N, G, worst_s);

        /* token by token with snapshots, threaded: identical bits */
        float *st2 = bd_mallocn(ss, 4), *y2 = bd_calloc((size_t)(T * ldy), 4), *sn = bd_mallocn(ss, 4);
        memcpy(st2, st0, ss * 4);
        int snap_ok = 1;
        for (int64_t t = 0; t < T; t++) {
            float *snap[1] = {sn};
            bd_ssm_scan(tp, 1, H, P, N, G, x + t * ldx, ldx, dt + t * lddt, lddt, dtb, A, B + t * ldb, ldb,
                        C + t * ldb, ldb, useD ? D : NULL, st2, y2 + t * ldy, ldy, snap);
            snap_ok &= !memcmp(sn, st2, ss * 4);
        }
        /* The NEON levels follow ggml's arm64 builds, whose compiler vectorized the scalar tail of a row (N % 16
         * >= 8) with the products rounded, for the first token of a call only (ssm_scan.c): one by one, every
         * token is a first one, so y differs there by rounding (the state never). */
        const int first_tail = (lv == BD_SIMD_NEON || lv == BD_SIMD_NEON_DOT) && BD_HAVE_NEON && N % 16 >= 8;
        double dy = 0;
        for (int64_t i = 0; i < T * ldy; i++) dy = fmax(dy, fabs((double)y[i] - y2[i]));
        CHECK(!memcmp(st, st2, ss * 4) && (first_tail ? dy < 1e-5 : !memcmp(y, y2, (size_t)(T * ldy) * 4)),
              "scan level %d H=%d N=%d: one by one on N threads = batch on 1 (y %.3g)", lv, H, N, dy);
        CHECK(snap_ok, "scan: snapshot equals state");
        bd_free(x);
        bd_free(dt);
        bd_free(dtb);
        bd_free(A);
        bd_free(B);
        bd_free(C);
        bd_free(D);
        bd_free(st0);
        bd_free(st);
        bd_free(y);
        bd_free(s);
        bd_free(st2);
        bd_free(y2);
        bd_free(sn);
    }
}

int main(void) {
    bd_threadpool *tp = NULL;
    CHECK_STATUS(bd_threadpool_new(3, &tp), BRAID_OK);
    int top = bd_simd_override(BD_SIMD_AVX512);
    for (int lv = 0; lv <= top; lv++) {
        bd_simd_override(lv);
        test_conv(tp, lv);
        test_gdn(tp, lv);
        test_scan(tp, lv);
    }
    bd_threadpool_free(tp);
    TEST_MAIN_END();
}
