/* dot_neon_dot.c — the dotprod level on aarch64 (ARMv8.2 SDOT with FP16 arithmetic: Cortex-A76, Neoverse N1,
 * Apple M1 and later), in the float orders of ggml's armv8.2_2 build, which llama.cpp loads on such CPUs.
 * CMake compiles this file alone with -march=armv8.2-a+dotprod+fp16; dot.c calls its fill only when HWCAP says
 * the CPU has both (cpu.c). conformance_dot checks it bit for bit against that build.
 *
 * The block dots come from dot_neon_q.h with SDOT's lane grouping (lane k = elements 4k..4k+3); F32 and the
 * Q8_0 converter are the plain NEON level's (the same code in ggml's non-SVE builds). */
#include <arm_neon.h>

#include "tensor/dot_impl.h"

#define NEON_DOT4 vdotq_s32
#define NEON_SUFFIX dot
#include "tensor/dot_neon_q.h"

void bd_dot_fill_neon_dot(bd_dot_traits t[BD_TYPE_COUNT]) {
    fill_q_dot(t);
}
