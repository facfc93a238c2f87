/* gemm_k.c — Q4_K, Q5_K, Q6_K (and Q2_K, Q3_K, IQ4_XS: the kx kinds below) weights against Q8_K activations
 * over many tokens, bit-identical per output to the vec_dot (see gemm_q.h for why and how it is used).
 *
 * The vec_dot's float structure (dot.h, ggml's x86 order), per super-block of 256:
 * - main chain, 8 lanes: lane l += (d_x * d_w) * float(S_l) as one FMA, S_l the exact integer
 *   sum over the 8 runs of 32 of scale(run or 16-group) * level * activation at positions 4l..4l+3 of the run
 *   (Q6_K: minus 32 * (sc[2l] * bsums[2l] + sc[2l+1] * bsums[2l+1]), its -32 offset);
 * - mins (Q4_K): 4 lanes, lane k += dmin * float(m[2k] * s[2k] + m[2k+1] * s[2k+1]) (s[j] the activation
 *   sum of run j, dmin = -(d_x * dmin_w)); (Q5_K): one float += dmin * float(sum of the 8 such products);
 * - result: hsum_float_8(main) + ((k0 + k2) + (k1 + k3)) for Q4_K, + the float for Q5_K.
 * The main chain runs in a register tile: one 512-bit vector holds a run of 32 of two tokens, so vpmaddubsw
 * (levels x activations, pairs) and vpdpwssd (x scale, into the pair's 2 x 8 lanes) give both tokens' S_l with
 * no lane shuffling; then one conversion, one multiply (the scale product) and one FMA per pair of outputs.
 * The mins chains (4 lanes per output) run in the same tile, two pairs of tokens (4 outputs) per vector.
 *
 * Layouts (built per call): packed activations, per group of 16 tokens: 8 pairs, each per super-block 640
 * bytes: 8 runs x [token 0's 32 | token 1's 32], the two d 8 times each, then for Q6_K the two tokens' bsums,
 * for Q4_K / Q5_K the sums of runs 2k and 2k+1 as int16 pairs (4 per token) and each -d 4 times.
 * Prepared weights (per thread, for a block of rows, on the stack), per row and super-block: the 256 levels by
 * run, the run scales (Q4_K/Q5_K: one int16 pair per run; Q6_K: 16 int16 per run), and the rest (see below). */
#include "tensor/gemm_q.h"

#include <string.h>

#include "tensor/dot_impl.h"
#include "tensor/gemm_impl.h"
#include "tensor/quant.h"
#include "tensor/types.h"

#if BD_HAVE_X86

enum {
    K_REC = BD_GEMMK_REC,
    K_REC_DS = BD_GEMMK_REC_DS,
    K_REC_BS = BD_GEMMK_REC_BS,
    K_PAIRS = BD_GEMMQ_GROUP / 2,
    K45_WREC = BD_GEMMK45_WREC,
    K6_WREC = BD_GEMMK6_WREC,
    K_PREP = BD_GEMMK_PREP,
    K_TOK_BYTES = 1024 * 1024, /* packed activations per token block */
    K_TR = BD_GEMMK_TR,       /* tile: weight rows */
    K_TP = 4,                 /* tile: pairs of tokens */
};

static size_t k_group_bytes(int64_t NB) { return (size_t)NB * K_PAIRS * K_REC; }

size_t bd_gemmk_pack_size(int64_t K, int64_t T) {
    const int64_t groups = (T + BD_GEMMQ_GROUP - 1) / BD_GEMMQ_GROUP;
    return (size_t)groups * k_group_bytes(K / BD_QK_K);
}

BD_TARGET_AVX2 void bd_gemmk6_pack(const uint8_t *xq, size_t xrow, int64_t K, int64_t T, int64_t g, void *packed) {
    const int64_t NB = K / BD_QK_K;
    uint8_t *out = (uint8_t *)packed + (size_t)g * k_group_bytes(NB);
    for (int lane = 0; lane < BD_GEMMQ_GROUP; lane++) {
        const int p = lane / 2, h = lane % 2;
        const int64_t t = g * BD_GEMMQ_GROUP + lane;
        const bd_block_q8_K *x = t < T ? (const bd_block_q8_K *)(xq + (size_t)t * xrow) : NULL;
        for (int64_t i = 0; i < NB; i++) {
            uint8_t *rec = out + ((size_t)p * (size_t)NB + (size_t)i) * K_REC;
            if (!x) {
                for (int s = 0; s < 8; s++) memset(rec + 64 * s + 32 * h, 0, 32);
                memset(rec + K_REC_DS + 32 * h, 0, 32);
                memset(rec + K_REC_BS + 32 * h, 0, 32);
                continue;
            }
            for (int s = 0; s < 8; s++) memcpy(rec + 64 * s + 32 * h, x[i].qs + 32 * s, 32);
            _mm256_storeu_ps((float *)(rec + K_REC_DS) + 8 * h, _mm256_set1_ps(x[i].d));
            /* both forms: the bsums for Q6_K, the run sums for Q4_K / Q5_K (the kernels read one of them) */
            memcpy(rec + K_REC_BS + 32 * h, x[i].bsums, 32);
        }
    }
}

/* Q4_K / Q5_K form of the pair's last 64 bytes, built from the bsums in place: [t0: 4 int32 | t1: 4 int32]
 * holding the int16 pairs (s[2k], s[2k+1]), s[j] = the sum of run j, then [-d0 x 4 | -d1 x 4]. */
static void k_pack_runsums(uint8_t *rec) {
    int16_t bs[2][16];
    float d[2];
    memcpy(bs, rec + K_REC_BS, 64);
    memcpy(&d[0], rec + K_REC_DS, 4);
    memcpy(&d[1], rec + K_REC_DS + 32, 4);
    for (int h = 0; h < 2; h++) {
        for (int k = 0; k < 4; k++) {
            const int16_t s0 = (int16_t)(bs[h][4 * k] + bs[h][4 * k + 1]);
            const int16_t s1 = (int16_t)(bs[h][4 * k + 2] + bs[h][4 * k + 3]);
            const uint32_t pairv = (uint32_t)(uint16_t)s0 | (uint32_t)(uint16_t)s1 << 16;
            memcpy(rec + K_REC_BS + 16 * h + 4 * k, &pairv, 4);
        }
        const float nd = -d[h];
        for (int k = 0; k < 4; k++) memcpy(rec + K_REC_BS + 32 + 16 * h + 4 * k, &nd, 4);
    }
}

BD_TARGET_AVX2 void bd_gemmk45_pack(const uint8_t *xq, size_t xrow, int64_t K, int64_t T, int64_t g, void *packed) {
    bd_gemmk6_pack(xq, xrow, K, T, g, packed);
    const int64_t NB = K / BD_QK_K;
    uint8_t *out = (uint8_t *)packed + (size_t)g * k_group_bytes(NB);
    for (int64_t r = 0; r < K_PAIRS * NB; r++) k_pack_runsums(out + (size_t)r * K_REC);
}

/* ---- Q2_K, Q3_K, IQ4_XS (the kx kinds) ----
 * Their vec_dots (dot_avx2_mix.c, ggml's order) have Q6_K's lane structure: per super-block, lane l = the sum
 * over the 8 runs of 32 of scale(run, 16-group) * level * activation at positions 4l..4l+3, one fused
 * multiply-add of y.d * d into an 8-lane chain. Q2_K first fuses its mins into the same chain:
 * lane k += -(y.d * dmin) * float(m[2k] * bs[2k] + m[2k+1] * bs[2k+1]). Levels: Q2_K 0..3, Q3_K 0..7 with the
 * -4 offset taken per pair of products as its vec_dot does (q * y - 4 * y in int16), IQ4_XS the signed table
 * values (|q| times y with q's sign: the pair sums stay below int16's limit). They read gemm_k's packed
 * activations (the Q6_K form: raw runs, the d, the bsums) and K6_WREC-byte records: levels by run @0, the run
 * scales as 16 int16 per run @256 (element e of the run: scale of group 2s + e / 8), Q2_K's 16 mins as int16
 * @512, d @544, Q2_K's dmin @548. */
BD_TARGET_AVX2 static void kx_prep_block(uint32_t wtype, const uint8_t *row, int64_t i, uint8_t *o) {
    int16_t sc[8][16];
    float d, dmin = 0;
    if (wtype == BD_TYPE_IQ4_XS) {
        const bd_block_iq4_xs *x = (const bd_block_iq4_xs *)row + i;
        for (int s = 0; s < 8; s++) {
            for (int l = 0; l < 16; l++) {
                o[32 * s + l] = (uint8_t)bd_kvalues_iq4nl[x->qs[16 * s + l] & 0xF];
                o[32 * s + 16 + l] = (uint8_t)bd_kvalues_iq4nl[x->qs[16 * s + l] >> 4];
            }
            for (int e = 0; e < 16; e++) sc[s][e] = (int16_t)bd_iq4_xs_scale(x, s);
        }
        d = bd_fp16_to_fp32(x->d);
    } else if (wtype == BD_TYPE_Q3_K) {
        const bd_block_q3_K *x = (const bd_block_q3_K *)row + i;
        for (int s = 0; s < 8; s++) {
            const int c = s / 4, j = s % 4;
            for (int l = 0; l < 32; l++)
                o[32 * s + l] = (uint8_t)(((x->qs[32 * c + l] >> (2 * j)) & 3) | (((x->hmask[l] >> s) & 1) << 2));
            for (int e = 0; e < 16; e++) sc[s][e] = (int16_t)bd_q3_K_scale(x->scales, 2 * s + e / 8);
        }
        d = bd_fp16_to_fp32(x->d);
    } else {
        const bd_block_q2_K *x = (const bd_block_q2_K *)row + i;
        for (int s = 0; s < 8; s++) {
            const int c = s / 4, j = s % 4;
            for (int l = 0; l < 32; l++) o[32 * s + l] = (uint8_t)((x->qs[32 * c + l] >> (2 * j)) & 3);
            for (int e = 0; e < 16; e++) sc[s][e] = (int16_t)(x->scales[2 * s + e / 8] & 0xF);
        }
        int16_t m[16];
        for (int e = 0; e < 16; e++) m[e] = (int16_t)(x->scales[e] >> 4);
        memcpy(o + 512, m, 32);
        d = bd_fp16_to_fp32(x->d);
        dmin = bd_fp16_to_fp32(x->dmin);
    }
    memcpy(o + 256, sc, sizeof sc);
    memcpy(o + 544, &d, 4);
    memcpy(o + 548, &dmin, 4);
}

/* Rows [0, nr) of W (type wtype) into wp, nr * NB records of wrec bytes. */
BD_TARGET_AVX2 static void k_prep(uint32_t wtype, const uint8_t *W, size_t wrow, int64_t NB, int64_t nr, uint8_t *wp,
                                size_t wrec) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    for (int64_t r = 0; r < nr; r++) {
        for (int64_t i = 0; i < NB; i++) {
            uint8_t *o = wp + ((size_t)r * (size_t)NB + (size_t)i) * wrec;
            if (wtype == BD_TYPE_Q2_K || wtype == BD_TYPE_Q3_K || wtype == BD_TYPE_IQ4_XS) {
                kx_prep_block(wtype, W + (size_t)r * wrow, i, o);
            } else if (wtype == BD_TYPE_Q6_K) {
                const bd_block_q6_K *x = (const bd_block_q6_K *)(W + (size_t)r * wrow) + i;
                for (int hh = 0; hh < 2; hh++) {
                    const __m256i l0 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * hh));
                    const __m256i l1 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * hh + 32));
                    const __m256i qh = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * hh));
                    for (int rr = 0; rr < 4; rr++) {
                        const __m256i l = rr & 1 ? l1 : l0;
                        const __m256i lo = rr < 2 ? _mm256_and_si256(l, low4)
                                                  : _mm256_and_si256(_mm256_srli_epi16(l, 4), low4);
                        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * rr), three);
                        _mm256_storeu_si256((__m256i *)(o + 32 * (4 * hh + rr)),
                                            _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)));
                    }
                }
                for (int s = 0; s < 8; s++) {
                    int16_t v[16];
                    for (int e = 0; e < 16; e++) v[e] = x->scales[2 * s + e / 8];
                    memcpy(o + 256 + 32 * s, v, 32);
                }
                int16_t m32[16];
                for (int e = 0; e < 16; e++) m32[e] = (int16_t)(-32 * x->scales[e]);
                memcpy(o + 512, m32, 32);
                const float d = bd_fp16_to_fp32(x->d);
                memcpy(o + 544, &d, 4);
            } else {
                const int q5 = wtype == BD_TYPE_Q5_K;
                const uint8_t *xb = W + (size_t)r * wrow + (size_t)i * (q5 ? sizeof(bd_block_q5_K) : sizeof(bd_block_q4_K));
                const uint8_t *qs = xb + 4 + BD_K_SCALE_SIZE + (q5 ? BD_QK_K / 8 : 0);
                const __m256i qh = q5 ? _mm256_loadu_si256((const __m256i *)(xb + 4 + BD_K_SCALE_SIZE))
                                      : _mm256_setzero_si256();
                for (int c = 0; c < 4; c++) {
                    const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
                    __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
                    if (q5) {
                        lo = _mm256_or_si256(lo, _mm256_slli_epi16(
                                                     _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4));
                        hi = _mm256_or_si256(hi, _mm256_slli_epi16(
                                                     _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4));
                    }
                    _mm256_storeu_si256((__m256i *)(o + 64 * c), lo);
                    _mm256_storeu_si256((__m256i *)(o + 64 * c + 32), hi);
                }
                uint64_t sc, m;
                bd_unpack_scales_k4(xb + 4, &sc, &m);
                for (int s = 0; s < 8; s++) {
                    const uint32_t v = (uint32_t)((sc >> (8 * s)) & 0xFF);
                    const uint32_t pairv = v | v << 16;
                    memcpy(o + 256 + 4 * s, &pairv, 4);
                }
                for (int k = 0; k < 4; k++) {
                    const uint32_t pairv =
                        (uint32_t)((m >> (16 * k)) & 0xFF) | (uint32_t)((m >> (16 * k + 8)) & 0xFF) << 16;
                    memcpy(o + 288 + 4 * k, &pairv, 4);
                }
                uint16_t dd[2];
                memcpy(dd, xb, 4);
                const float d = bd_fp16_to_fp32(dd[0]), dmin = bd_fp16_to_fp32(dd[1]);
                memcpy(o + 304, &d, 4);
                memcpy(o + 308, &dmin, 4);
            }
        }
    }
}

/* R prepared rows (first record at wp, row stride wps bytes, record stride wrec) x P pairs of tokens (first
 * record at ap, pair stride aps bytes; the first token is t0) -> y[t*ldy + row], tokens >= T not stored.
 * kind: 4, 5 or 6 for Q4_K, Q5_K, Q6_K. */
GEMMQ_INLINE void k_tile(const uint8_t *wp, size_t wps, size_t wrec, int64_t NB, const uint8_t *ap, size_t aps,
                         float *y, int64_t ldy, int64_t t0, int64_t T, const int kind, const int R, const int P) {
    const int q6 = kind == 6, PD = (P + 1) / 2;
    __m512 acc[K_TR][K_TP], macc[K_TR][K_TP / 2];
    for (int r = 0; r < R; r++) {
        for (int p = 0; p < P; p++) acc[r][p] = _mm512_setzero_ps();
        for (int dd = 0; dd < PD; dd++) macc[r][dd] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < NB; i++) {
        const uint8_t *arec = ap + (size_t)i * K_REC, *wrec_i = wp + (size_t)i * wrec;
        __m512i is[K_TR][K_TP];
        if (q6) {
            for (int p = 0; p < P; p++) {
                const __m512i bs = _mm512_loadu_si512(arec + (size_t)p * aps + K_REC_BS);
                for (int r = 0; r < R; r++)
                    is[r][p] = _mm512_madd_epi16(
                        bs, _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(wrec_i + r * wps + 512))));
            }
        } else {
            for (int r = 0; r < R; r++)
                for (int p = 0; p < P; p++) is[r][p] = _mm512_setzero_si512();
            /* mins: pairs 2dd and 2dd+1 together, 4 lanes per output */
            for (int dd = 0; dd < PD; dd++) {
                const uint8_t *r0 = arec + (size_t)(2 * dd) * aps + K_REC_BS, *r1 = r0 + aps;
                const int two = 2 * dd + 1 < P;
                const __m512i qv = _mm512_inserti64x4(
                    _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)r0)),
                    two ? _mm256_loadu_si256((const __m256i *)r1) : _mm256_setzero_si256(), 1);
                const __m512 nd = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps((const float *)(r0 + 32))),
                                                     two ? _mm256_loadu_ps((const float *)(r1 + 32)) : _mm256_setzero_ps(), 1);
                for (int r = 0; r < R; r++) {
                    const uint8_t *w = wrec_i + r * wps;
                    float dmin;
                    memcpy(&dmin, w + 308, 4);
                    __m512i ii = _mm512_madd_epi16(qv, _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(w + 288))));
                    if (kind == 5) { /* one integer per output: the sum of its 4 lanes, in all 4 */
                        ii = _mm512_add_epi32(ii, _mm512_shuffle_epi32(ii, (_MM_PERM_ENUM)0x4E));
                        ii = _mm512_add_epi32(ii, _mm512_shuffle_epi32(ii, (_MM_PERM_ENUM)0xB1));
                    }
                    macc[r][dd] = _mm512_fmadd_ps(_mm512_mul_ps(nd, _mm512_set1_ps(dmin)), _mm512_cvtepi32_ps(ii), macc[r][dd]);
                }
            }
        }
#pragma GCC unroll 8
        for (int s = 0; s < 8; s++) {
            __m512i lv[K_TR], sc[K_TR];
            for (int r = 0; r < R; r++) {
                const uint8_t *w = wrec_i + r * wps;
                lv[r] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w + 32 * s)));
                if (q6) {
                    sc[r] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w + 256 + 32 * s)));
                } else {
                    int32_t v;
                    memcpy(&v, w + 256 + 4 * s, 4);
                    sc[r] = _mm512_set1_epi32(v);
                }
            }
            for (int p = 0; p < P; p++) {
                const __m512i a = _mm512_loadu_si512(arec + (size_t)p * aps + 64 * s);
                for (int r = 0; r < R; r++)
                    is[r][p] = _mm512_dpwssd_epi32(is[r][p], _mm512_maddubs_epi16(lv[r], a), sc[r]);
            }
        }
        for (int p = 0; p < P; p++) {
            const __m512 ds = _mm512_loadu_ps(arec + (size_t)p * aps + K_REC_DS);
            for (int r = 0; r < R; r++) {
                float d;
                memcpy(&d, wrec_i + r * wps + (q6 ? 544 : 304), 4);
                acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(ds, _mm512_set1_ps(d)), _mm512_cvtepi32_ps(is[r][p]), acc[r][p]);
            }
        }
    }
    __m512 v[16];
    float sums[32], mins[K_TR][K_TP / 2][16];
    int n = 0;
    for (int r = 0; r < R; r++)
        for (int p = 0; p < P; p++) v[n++] = acc[r][p];
    gemmq_hsum_tile(v, n, sums);
    if (!q6)
        for (int r = 0; r < R; r++)
            for (int dd = 0; dd < PD; dd++) {
                __m512 m = macc[r][dd];
                if (kind == 4) { /* lane 4g of output g: (k0 + k2) + (k1 + k3) */
                    m = _mm512_add_ps(m, _mm512_shuffle_ps(m, m, 0x4E));
                    m = _mm512_add_ps(m, _mm512_shuffle_ps(m, m, 0xB1));
                }
                _mm512_storeu_ps(mins[r][dd], m);
            }
    n = 0;
    for (int r = 0; r < R; r++)
        for (int p = 0; p < P; p++, n++)
            for (int h = 0; h < 2; h++) {
                const int64_t t = t0 + 2 * p + h;
                if (t < T) y[t * ldy + r] = q6 ? sums[2 * n + h] : sums[2 * n + h] + mins[r][p / 2][4 * (2 * (p % 2) + h)];
            }
}

/* kx_tile: k_tile for the kx kinds (2: Q2_K, 3: Q3_K, 7: IQ4_XS), same arguments. */
GEMMQ_INLINE void kx_tile(const uint8_t *wp, size_t wps, size_t wrec, int64_t NB, const uint8_t *ap, size_t aps,
                          float *y, int64_t ldy, int64_t t0, int64_t T, const int kind, const int R, const int P) {
    const __m512i four = _mm512_set1_epi8(4), zero = _mm512_setzero_si512();
    __m512 acc[K_TR][K_TP];
    for (int r = 0; r < R; r++)
        for (int p = 0; p < P; p++) acc[r][p] = _mm512_setzero_ps();
    for (int64_t i = 0; i < NB; i++) {
        const uint8_t *arec = ap + (size_t)i * K_REC, *wrec_i = wp + (size_t)i * wrec;
        if (kind == 2) { /* the mins, fused into the chain before the levels (vec_dot's order) */
            for (int p = 0; p < P; p++) {
                const __m512i bs = _mm512_loadu_si512(arec + (size_t)p * aps + K_REC_BS);
                const __m512 ds = _mm512_loadu_ps(arec + (size_t)p * aps + K_REC_DS);
                for (int r = 0; r < R; r++) {
                    const uint8_t *w = wrec_i + r * wps;
                    float dmin;
                    memcpy(&dmin, w + 548, 4);
                    const __m512i ml = _mm512_madd_epi16(bs, _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w + 512))));
                    /* fma with -(y.d * dmin) == fnmadd with y.d * dmin (exact negation) */
                    acc[r][p] = _mm512_fnmadd_ps(_mm512_mul_ps(ds, _mm512_set1_ps(dmin)), _mm512_cvtepi32_ps(ml), acc[r][p]);
                }
            }
        }
        __m512i is[K_TR][K_TP];
        for (int r = 0; r < R; r++)
            for (int p = 0; p < P; p++) is[r][p] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int s = 0; s < 8; s++) {
            __m512i lv[K_TR], sc[K_TR];
            __mmask64 neg[K_TR];
            for (int r = 0; r < R; r++) {
                const uint8_t *w = wrec_i + r * wps;
                lv[r] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w + 32 * s)));
                sc[r] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w + 256 + 32 * s)));
                if (kind == 7) neg[r] = _mm512_movepi8_mask(lv[r]), lv[r] = _mm512_abs_epi8(lv[r]);
            }
            for (int p = 0; p < P; p++) {
                const __m512i a = _mm512_loadu_si512(arec + (size_t)p * aps + 64 * s);
                const __m512i a4 = kind == 3 ? _mm512_maddubs_epi16(four, a) : zero;
                for (int r = 0; r < R; r++) {
                    __m512i m;
                    if (kind == 7) m = _mm512_maddubs_epi16(lv[r], _mm512_mask_sub_epi8(a, neg[r], zero, a));
                    else m = _mm512_maddubs_epi16(lv[r], a);
                    if (kind == 3) m = _mm512_sub_epi16(m, a4);
                    is[r][p] = _mm512_dpwssd_epi32(is[r][p], m, sc[r]);
                }
            }
        }
        for (int p = 0; p < P; p++) {
            const __m512 ds = _mm512_loadu_ps(arec + (size_t)p * aps + K_REC_DS);
            for (int r = 0; r < R; r++) {
                float d;
                memcpy(&d, wrec_i + r * wps + 544, 4);
                acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(ds, _mm512_set1_ps(d)), _mm512_cvtepi32_ps(is[r][p]), acc[r][p]);
            }
        }
    }
    __m512 v[16];
    float sums[32];
    int n = 0;
    for (int r = 0; r < R; r++)
        for (int p = 0; p < P; p++) v[n++] = acc[r][p];
    gemmq_hsum_tile(v, n, sums);
    gemmq_store_tile(sums, R, P, t0, T, y, ldy);
}

#define K_TILE(KIND, R, P)                                                                                      \
    GEMMQ_TARGET static void k##KIND##_tile_##R##_##P(const uint8_t *wp, size_t wps, size_t wrec, int64_t NB,      \
                                                      const uint8_t *ap, size_t aps, float *y, int64_t ldy,        \
                                                      int64_t t0, int64_t T) {                                     \
        k_tile(wp, wps, wrec, NB, ap, aps, y, ldy, t0, T, KIND, R, P);                                           \
    }
#define K_TILES(KIND)                                                                                            \
    K_TILE(KIND, 1, 1) K_TILE(KIND, 1, 2) K_TILE(KIND, 1, 3) K_TILE(KIND, 1, 4)                                  \
    K_TILE(KIND, 2, 1) K_TILE(KIND, 2, 2) K_TILE(KIND, 2, 3) K_TILE(KIND, 2, 4)                                  \
    K_TILE(KIND, 3, 1) K_TILE(KIND, 3, 2) K_TILE(KIND, 3, 3) K_TILE(KIND, 3, 4)                                  \
    K_TILE(KIND, 4, 1) K_TILE(KIND, 4, 2) K_TILE(KIND, 4, 3) K_TILE(KIND, 4, 4)                                  \
    static const bd_gemmk_tile_fn k##KIND##_tiles[K_TR][K_TP] = {                                                       \
        {k##KIND##_tile_1_1, k##KIND##_tile_1_2, k##KIND##_tile_1_3, k##KIND##_tile_1_4},                        \
        {k##KIND##_tile_2_1, k##KIND##_tile_2_2, k##KIND##_tile_2_3, k##KIND##_tile_2_4},                        \
        {k##KIND##_tile_3_1, k##KIND##_tile_3_2, k##KIND##_tile_3_3, k##KIND##_tile_3_4},                        \
        {k##KIND##_tile_4_1, k##KIND##_tile_4_2, k##KIND##_tile_4_3, k##KIND##_tile_4_4}};
K_TILES(4)
K_TILES(5)
K_TILES(6)
#undef K_TILE
#define K_TILE(KIND, R, P)                                                                                      \
    GEMMQ_TARGET static void k##KIND##_tile_##R##_##P(const uint8_t *wp, size_t wps, size_t wrec, int64_t NB,      \
                                                      const uint8_t *ap, size_t aps, float *y, int64_t ldy,        \
                                                      int64_t t0, int64_t T) {                                     \
        kx_tile(wp, wps, wrec, NB, ap, aps, y, ldy, t0, T, KIND, R, P);                                          \
    }
K_TILES(2)
K_TILES(3)
K_TILES(7)

static size_t k_wrec(uint32_t wtype) { return wtype == BD_TYPE_Q4_K || wtype == BD_TYPE_Q5_K ? K45_WREC : K6_WREC; }

/* The row loop shared with the AVX2 kernels (gemm_impl.h). */
void bd_gemmk_rows_with(const bd_gemmk_tile_fn *tiles, int tp, uint32_t wtype, const uint8_t *W, size_t wrow,
                        int64_t K, const void *packed, int64_t T, int64_t r0, int64_t r1, float *y, int64_t ldy) {
    const int64_t NB = K / BD_QK_K, ngroups = (T + BD_GEMMQ_GROUP - 1) / BD_GEMMQ_GROUP;
    const size_t wrec = k_wrec(wtype), wps = (size_t)NB * wrec, aps = (size_t)NB * K_REC, gbytes = k_group_bytes(NB);
    int64_t rb = (K_PREP / (int64_t)wps) & ~(int64_t)3;
    if (rb > 64) rb = 64;
    int64_t tb = K_TOK_BYTES / (int64_t)gbytes; /* groups per token block */
    if (tb < 1) tb = 1;
    _Alignas(64) uint8_t wp[K_PREP];
    for (int64_t g0 = 0; g0 < ngroups; g0 += tb) {
        const int64_t g1 = g0 + tb < ngroups ? g0 + tb : ngroups;
        for (int64_t rs = r0; rs < r1; rs += rb) {
            const int64_t nr = r1 - rs < rb ? r1 - rs : rb;
            k_prep(wtype, W + (size_t)rs * wrow, wrow, NB, nr, wp, wrec);
            const int64_t next = r1 - (rs + nr) < rb ? r1 - (rs + nr) : rb;
            for (int64_t g = g0; g < g1; g++) {
                gemmq_prefetch_part(W + (size_t)(rs + nr) * wrow, (size_t)next * wrow, g - g0, g1 - g0);
                const int64_t npairs = (T - g * BD_GEMMQ_GROUP + 1) / 2 < K_PAIRS ? (T - g * BD_GEMMQ_GROUP + 1) / 2
                                                                                  : K_PAIRS;
                for (int64_t p = 0; p < npairs; p += tp) {
                    const int np = (int)(npairs - p < tp ? npairs - p : tp);
                    const uint8_t *ap = (const uint8_t *)packed + (size_t)g * gbytes + (size_t)p * aps;
                    for (int64_t r = 0; r < nr; r += K_TR) {
                        const int R = (int)(nr - r < K_TR ? nr - r : K_TR);
                        tiles[(R - 1) * tp + np - 1](wp + (size_t)r * wps, wps, wrec, NB, ap, aps, y + rs + r, ldy,
                                                     g * BD_GEMMQ_GROUP + 2 * p, T);
                    }
                }
            }
        }
    }
}

static void k_rows(uint32_t wtype, const uint8_t *W, size_t wrow, int64_t K, const void *packed, int64_t T,
                   int64_t r0, int64_t r1, float *y, int64_t ldy) {
    const bd_gemmk_tile_fn(*tiles)[K_TP] = wtype == BD_TYPE_Q6_K     ? k6_tiles
                                           : wtype == BD_TYPE_Q5_K   ? k5_tiles
                                           : wtype == BD_TYPE_Q2_K   ? k2_tiles
                                           : wtype == BD_TYPE_Q3_K   ? k3_tiles
                                           : wtype == BD_TYPE_IQ4_XS ? k7_tiles
                                                                     : k4_tiles;
    bd_gemmk_rows_with(&tiles[0][0], K_TP, wtype, W, wrow, K, packed, T, r0, r1, y, ldy);
}

/* Q8_K activations, the same bytes as the reference quantizer (bd_quantize_row_q8_K_ref in quant_k.c, which
 * dot.h uses) on every input, NaN and infinities included, 16 lanes at a time: the scale from the first element
 * of largest magnitude (NaNs never win), levels rounded by the same 1.5 * 2^23 addition and bit extraction, the
 * cap at 127, the int8 truncation, then the sums of 16. */
GEMMQ_TARGET static void k_quantize_q8_K(const float *x, void *dst, int64_t k) {
    bd_block_q8_K *y = dst;
    const __m512 magic = _mm512_set1_ps(12582912.f);
    const __m512i mant = _mm512_set1_epi32(0x007fffff), half = _mm512_set1_epi32(0x00400000);
    const __m512i cap = _mm512_set1_epi32(127);
    for (int64_t i = 0; i < k / BD_QK_K; i++, x += BD_QK_K) {
        __m512 am = _mm512_setzero_ps();
        for (int j = 0; j < BD_QK_K; j += 16) am = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + j)), am);
        const float amax = _mm512_reduce_max_ps(am);
        if (!(amax > 0)) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float max = 0;
        for (int j = 0; j < BD_QK_K; j += 16) {
            const __mmask16 eq = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + j)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (eq) {
                max = x[j + __builtin_ctz(eq)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m512 is = _mm512_set1_ps(iscale);
        for (int j = 0; j < BD_QK_K; j += 64) {
            __m128i part[4];
            for (int g = 0; g < 4; g++) {
                /* explicit rounding: the product and the sum must stay two roundings (no contraction to an FMA) */
                const __m512 v = _mm512_add_round_ps(
                    _mm512_mul_round_ps(is, _mm512_loadu_ps(x + j + 16 * g), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                    magic, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                const __m512i q =
                    _mm512_min_epi32(_mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(v), mant), half), cap);
                part[g] = _mm512_cvtepi32_epi8(q); /* truncating, as the (int8_t) cast */
            }
            /* (inserted with constant lane numbers: clang wants an immediate even where the loop is not unrolled) */
            __m512i q8 = _mm512_inserti32x4(_mm512_castsi128_si512(part[0]), part[1], 1);
            q8 = _mm512_inserti32x4(q8, part[2], 2);
            q8 = _mm512_inserti32x4(q8, part[3], 3);
            _mm512_storeu_si512(y[i].qs + j, q8);
            /* sums of 16: offset to unsigned, byte sums of 8 per 64-bit lane, pairs added, offset removed */
            const __m512i sad = _mm512_sad_epu8(_mm512_xor_si512(q8, _mm512_set1_epi8((char)0x80)), _mm512_setzero_si512());
            int64_t s8[8];
            _mm512_storeu_si512(s8, sad);
            for (int g = 0; g < 4; g++) y[i].bsums[j / 16 + g] = (int16_t)(s8[2 * g] + s8[2 * g + 1] - 16 * 128);
        }
        y[i].d = 1 / iscale;
    }
}

static const bd_gemmq_ops k45_ops = {bd_gemmk_pack_size, bd_gemmk45_pack, k_rows, BD_GEMMK45_MAX_K, k_quantize_q8_K};
static const bd_gemmq_ops k6_ops = {bd_gemmk_pack_size, bd_gemmk6_pack, k_rows, BD_GEMMK6_MAX_K, k_quantize_q8_K};

void bd_gemm_k_fill_avx512(bd_dot_traits t[BD_TYPE_COUNT]) {
    t[BD_TYPE_Q4_K].gemm = &k45_ops;
    t[BD_TYPE_Q5_K].gemm = &k45_ops;
    t[BD_TYPE_Q6_K].gemm = &k6_ops;
    t[BD_TYPE_Q2_K].gemm = &k6_ops; /* the same packing and records size (kx_prep_block) */
    t[BD_TYPE_Q3_K].gemm = &k6_ops;
    t[BD_TYPE_IQ4_XS].gemm = &k6_ops;
}

#else

void bd_gemm_k_fill_avx512(bd_dot_traits t[BD_TYPE_COUNT]) { (void)t; }

#endif
