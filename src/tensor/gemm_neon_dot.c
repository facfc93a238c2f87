/* gemm_neon_dot.c — the prompt GEMMs (gemm_neon.h) of the dotprod level on aarch64, with SDOT: every output is
 * the bits of this level's vec_dot (dot_neon_dot.c). Built with -march=armv8.2-a+dotprod+fp16, as
 * dot_neon_dot.c. */
#include <arm_neon.h>

#include "tensor/dot_impl.h"

#define NEON_DOT4 vdotq_s32
#include "tensor/gemm_neon.h"

void bd_gemm_fill_neon_dot(bd_dot_traits t[BD_TYPE_COUNT]) { gemm_neon_fill(t); }
