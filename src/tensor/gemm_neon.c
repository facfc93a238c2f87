/* gemm_neon.c — the prompt GEMMs (gemm_neon.h) of the plain NEON level on aarch64, with ggml's armv8.0 lanes:
 * every output is the bits of this level's vec_dot (dot_neon.c). */
#include "tensor/dot_impl.h"
#include "tensor/neon_dot4.h"

#define NEON_DOT4 bd_neon_dot4_pairs
#include "tensor/gemm_neon.h"

void bd_gemm_fill_neon(bd_dot_traits t[BD_TYPE_COUNT]) { gemm_neon_fill(t); }
