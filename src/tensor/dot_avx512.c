/* dot_avx512.c — AVX-512 (F, BW, VL, VNNI, BF16) dot products (not written yet: lower levels are used). */
#include "tensor/dot_impl.h"
void bd_dot_fill_avx512(bd_dot_traits t[BD_TYPE_COUNT]) { (void)t; }
