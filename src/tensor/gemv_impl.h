/* gemv_impl.h — internal to the gemv kernels: how the per-ISA files plug into gemv.c. */
#ifndef BRAID_TENSOR_GEMV_IMPL_H
#define BRAID_TENSOR_GEMV_IMPL_H

#include "tensor/gemv.h"

/* The AVX-512 (F, BW, VL, VNNI: dot.h's avx512 level) kernel of a weight type, or NULL where there is none. */
bd_gemv_fn bd_gemv_avx512(uint32_t type);

#endif
