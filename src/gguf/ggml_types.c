/* ggml_types.c — names and block geometry of every ggml tensor type id a GGUF file may carry.
 *
 * The reader must size and bounds-check every tensor, including types braid cannot compute with (a file may
 * hold them; `braid gguf` should still list it), so it needs the block size and bytes per block of all known
 * ids, not only the types braid computes with (tensor/dot.h's bd_type_supported). Figures are
 * ggml's (ggml_blck_size / ggml_type_size of libggml-base 3.22.1). Ids that ggml removed (4, 5, 31-33,
 * 36-38) are unknown here, so a file that uses them is rejected. */
#include "gguf/gguf.h"

typedef struct ggml_type_row {
    const char *name;
    int64_t blck; /* elements per block; 0 = unknown id */
    size_t bytes; /* bytes per block */
} ggml_type_row;

static const ggml_type_row rows[] = {
    [0] = {"f32", 1, 4},          [1] = {"f16", 1, 2},        [2] = {"q4_0", 32, 18},
    [3] = {"q4_1", 32, 20},       [6] = {"q5_0", 32, 22},     [7] = {"q5_1", 32, 24},
    [8] = {"q8_0", 32, 34},       [9] = {"q8_1", 32, 36},     [10] = {"q2_K", 256, 84},
    [11] = {"q3_K", 256, 110},    [12] = {"q4_K", 256, 144},  [13] = {"q5_K", 256, 176},
    [14] = {"q6_K", 256, 210},    [15] = {"q8_K", 256, 292},  [16] = {"iq2_xxs", 256, 66},
    [17] = {"iq2_xs", 256, 74},   [18] = {"iq3_xxs", 256, 98}, [19] = {"iq1_s", 256, 50},
    [20] = {"iq4_nl", 32, 18},    [21] = {"iq3_s", 256, 110}, [22] = {"iq2_s", 256, 82},
    [23] = {"iq4_xs", 256, 136},  [24] = {"i8", 1, 1},        [25] = {"i16", 1, 2},
    [26] = {"i32", 1, 4},         [27] = {"i64", 1, 8},       [28] = {"f64", 1, 8},
    [29] = {"iq1_m", 256, 56},    [30] = {"bf16", 1, 2},      [34] = {"tq1_0", 256, 54},
    [35] = {"tq2_0", 256, 66},    [39] = {"mxfp4", 32, 17},   [40] = {"nvfp4", 64, 36},
    [41] = {"q1_0", 128, 18},     [42] = {"q2_0", 64, 18},
};

#define N_ROWS (sizeof rows / sizeof rows[0])

int gguf_type_block(uint32_t type, int64_t *blck, size_t *bytes) {
    if (type >= N_ROWS || rows[type].blck == 0) return 0;
    if (blck) *blck = rows[type].blck;
    if (bytes) *bytes = rows[type].bytes;
    return 1;
}

const char *gguf_type_name(uint32_t type) {
    if (type >= N_ROWS || rows[type].blck == 0) return "unknown";
    return rows[type].name;
}
