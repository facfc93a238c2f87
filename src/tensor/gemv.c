/* gemv.c — picks the gemv kernel of a weight type for the SIMD level in use (see gemv.h).
 *
 * No kernels are plugged in yet: the multi-row kernels follow ggml's float order of each type, and are enabled
 * type by type once dot.h's vec_dot follows that order too (their outputs must be vec_dot's bits). Until then
 * the decode path loops over vec_dot. */
#include "tensor/gemv.h"

bd_gemv_fn bd_gemv_get(uint32_t type) {
    (void)type;
    return NULL;
}
