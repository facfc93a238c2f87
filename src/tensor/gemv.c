/* gemv.c — picks the gemv kernel of a weight type for the SIMD level in use (see gemv.h). */
#include "tensor/gemv.h"

#include "tensor/gemv_impl.h"
#include "tensor/simd.h"
#include "tensor/types.h"

bd_gemv_fn bd_gemv_get(uint32_t type) {
#if BD_HAVE_X86
    if (bd_simd() == BD_SIMD_AVX512) return bd_gemv_avx512(type);
#endif
    (void)type;
    return NULL;
}
