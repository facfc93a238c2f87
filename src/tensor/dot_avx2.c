/* dot_avx2.c — AVX2 + FMA + F16C dot products (not written yet: the portable ones are used). */
#include "tensor/dot_impl.h"
void bd_dot_fill_avx2(bd_dot_traits t[BD_TYPE_COUNT]) { (void)t; }
