/* gemm_neon_rows.h — the row loop the aarch64 prompt GEMMs share (gemm_neon_q0.h, gemm_neon_k.h): token blocks
 * that stay in L2; for each, blocks of weight rows prepared on the stack (unpacked once, the work a vec_dot
 * repeats for every token) that every token tile of the block passes over; tiles of up to NG_TR rows x NG_TC
 * tokens, the kernels' register tile. */
#ifndef BRAID_TENSOR_GEMM_NEON_ROWS_H
#define BRAID_TENSOR_GEMM_NEON_ROWS_H

#include <stddef.h>
#include <stdint.h>

enum {
    NG_TR = 4,                 /* tile: weight rows */
    NG_TC = 2,                 /* tile: tokens */
    NG_PREP = 256 * 1024,      /* stack bytes of prepared rows per thread (as the x86 GEMMs) */
    NG_TOK_BYTES = 512 * 1024, /* packed activations per token block */
};

/* Rows [0, nr) of W (rows of wrow bytes, nb blocks each) prepared into wp. */
typedef void (*ng_prep_fn)(uint32_t wtype, const uint8_t *W, size_t wrow, int64_t nb, int64_t nr, void *wp);
/* R prepared rows at wp (stride wps) x C packed tokens at ap (stride aps; the first is t0) -> y (y[t * ldy +
 * row]), tokens >= T not stored; mode: the kernel's variant for the weight type. One function per R, C. */
typedef void (*ng_tile_fn)(const void *wp, size_t wps, int64_t nb, const uint8_t *ap, size_t aps, float *y,
                           int64_t ldy, int64_t t0, int64_t T, int mode);

/* Rows [r0, r1) x every token (wps / aps: bytes of one prepared row / packed token; wps <= NG_PREP / NG_TR). */
static void ng_rows(ng_prep_fn prep, const ng_tile_fn tiles[NG_TR][NG_TC], int mode, uint32_t wtype,
                    const uint8_t *W, size_t wrow, int64_t nb, size_t wps, size_t aps, const void *packed, int64_t T,
                    int64_t r0, int64_t r1, float *y, int64_t ldy) {
    int64_t rb = (int64_t)(NG_PREP / wps) & ~(int64_t)(NG_TR - 1);
    if (rb > 64) rb = 64;
    int64_t tb = (int64_t)(NG_TOK_BYTES / aps) / NG_TC * NG_TC;
    if (tb < NG_TC) tb = NG_TC;
    _Alignas(64) uint8_t wp[NG_PREP];
    for (int64_t t0 = 0; t0 < T; t0 += tb) {
        const int64_t t1 = t0 + tb < T ? t0 + tb : T;
        for (int64_t rs = r0; rs < r1; rs += rb) {
            const int64_t nr = r1 - rs < rb ? r1 - rs : rb;
            prep(wtype, W + (size_t)rs * wrow, wrow, nb, nr, wp);
            for (int64_t t = t0; t < t1; t += NG_TC) {
                const int C = (int)(t1 - t < NG_TC ? t1 - t : NG_TC);
                const uint8_t *ap = (const uint8_t *)packed + (size_t)t * aps;
                for (int64_t r = 0; r < nr; r += NG_TR) {
                    const int R = (int)(nr - r < NG_TR ? nr - r : NG_TR);
                    tiles[R - 1][C - 1](wp + (size_t)r * wps, wps, nb, ap, aps, y + rs + r, ldy, t, T, mode);
                }
            }
        }
    }
}

/* The eight tile functions of a kernel KERNEL(wp, wps, nb, ap, aps, y, ldy, t0, T, R, C, mode) with constant R
 * and C (the kernel dispatches mode to its constant variants), and their table NAME[NG_TR][NG_TC]. */
#define NG_TILE(KERNEL, R, C)                                                                                   \
    static void KERNEL##_##R##_##C(const void *wp, size_t wps, int64_t nb, const uint8_t *ap, size_t aps,       \
                                   float *y, int64_t ldy, int64_t t0, int64_t T, int mode) {                    \
        KERNEL(wp, wps, nb, ap, aps, y, ldy, t0, T, R, C, mode);                                                \
    }
#define NG_TILES(KERNEL, NAME)                                                                                  \
    NG_TILE(KERNEL, 1, 1) NG_TILE(KERNEL, 1, 2) NG_TILE(KERNEL, 2, 1) NG_TILE(KERNEL, 2, 2)                     \
    NG_TILE(KERNEL, 3, 1) NG_TILE(KERNEL, 3, 2) NG_TILE(KERNEL, 4, 1) NG_TILE(KERNEL, 4, 2)                     \
    static const ng_tile_fn NAME[NG_TR][NG_TC] = {{KERNEL##_1_1, KERNEL##_1_2}, {KERNEL##_2_1, KERNEL##_2_2},   \
                                                  {KERNEL##_3_1, KERNEL##_3_2}, {KERNEL##_4_1, KERNEL##_4_2}};

#endif
