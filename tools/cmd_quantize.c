/* cmd_quantize.c — `braid quantize IN.gguf OUT.gguf PRESET`: writes IN quantized with one of llama.cpp's
 * presets (Q4_K_M, Q5_K_M, Q8_0, Q4_0, Q3_K_M, Q2_K, IQ4_XS, ...; models/quant_mix.h), the same per-tensor
 * types and, where the quantizers are deterministic, the same bytes as llama-quantize without an importance
 * matrix. Presets that need an importance matrix are refused. Exit 0 on success, 1 with a message on failure
 * (the output is removed), 2 on a usage error. */
#include <stdio.h>
#include <string.h>

#include "braid.h"
#include "commands.h"
#include "models/quant_mix.h"

static int cmd_quantize(int argc, char **argv) {
    if (argc != 4 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(stderr, "usage: braid quantize IN.gguf OUT.gguf PRESET\n"
                        "  PRESET: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K\n"
                        "          IQ4_NL IQ4_XS MXFP4_MOE F16 BF16 (llama.cpp's presets, no importance matrix)\n");
        return 2;
    }
    uint32_t ftype, main_type;
    if (bd_quant_preset(argv[3], &ftype, &main_type) != BRAID_OK) {
        fprintf(stderr, "braid quantize: %s\n", braid_last_error());
        return 2;
    }
    if (braid_model_quantize(argv[1], argv[2], argv[3]) != BRAID_OK) {
        fprintf(stderr, "braid quantize: %s\n", braid_last_error());
        return 1;
    }
    return 0;
}

BRAID_COMMAND(quantize, cmd_quantize, "quantize a GGUF file with one of llama.cpp's presets (IN OUT Q4_K_M ...)")
