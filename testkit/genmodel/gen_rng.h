/* gen_rng.h — the generator's random numbers (shared by genmodel.c and gen_mmproj.c): splitmix64 draws and an
 * approximately normal value from each. A tensor's generator is seeded by (seed, tensor name). */
#ifndef BRAID_TESTKIT_GEN_RNG_H
#define BRAID_TESTKIT_GEN_RNG_H

#include <stdint.h>

/* splitmix64: one 64-bit draw per value; statistically fine for weights and fast enough for 1e9 values. */
static inline uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* An approximately standard normal value: the sum of four 16-bit uniforms (Irwin-Hall), centred and scaled
 * to unit variance. Bounded by ±3.46, which suits weights (no outliers) and costs one draw. */
static inline float rng_normal(uint64_t *s) {
    uint64_t r = rng_next(s);
    uint32_t sum = (uint32_t)(r & 0xffff) + (uint32_t)((r >> 16) & 0xffff) + (uint32_t)((r >> 32) & 0xffff) +
                   (uint32_t)(r >> 48);
    return ((float)sum * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
}

#endif
