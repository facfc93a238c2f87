/* quant_mix.h — llama.cpp's quantization presets (Q4_K_M, Q8_0, ...) as per-tensor type choices, and the
 * file braid writes from them (`braid quantize`).
 *
 * A preset names a main type; llama.cpp's quantizer then picks each tensor's type from its role (output,
 * embeddings, attention V, FFN down, ...), its layer and the model's shape, and falls back to a 32-element
 * type where a row is not a multiple of 256. bd_quant_plan reproduces those choices (llama.cpp 3.22.1's
 * llama-quant.cpp, for the presets that need no importance matrix), and bd_quant_write writes the file as
 * llama.cpp lays it out (metadata copied in order with general.quantization_version and general.file_type
 * last, tensors ordered by layer then name, each padded to 32 bytes), so that for the presets whose quantizers
 * are deterministic the output is byte-identical to llama-quantize's (tests/conformance/test_quant_mix.c). */
#ifndef BRAID_MODELS_QUANT_MIX_H
#define BRAID_MODELS_QUANT_MIX_H

#include <stddef.h>
#include <stdint.h>

#include "braid.h"
#include "gguf/gguf.h"

/* The preset's llama_ftype number (what general.file_type stores) and main type, by name ("Q4_K_M",
 * case-insensitive). BRAID_E_UNSUPPORTED with a message for a preset braid cannot write (the ones that need an
 * importance matrix, or types braid has no quantizer for), BRAID_E_INVALID for an unknown name. */
BRAID_NODISCARD braid_status bd_quant_preset(const char *name, uint32_t *ftype, uint32_t *main_type);

/* For each tensor of f (in file order) the type the preset gives it (types: gguf_n_tensors(f) entries; a
 * tensor that stays as it is gets its own type). */
BRAID_NODISCARD braid_status bd_quant_plan(const gguf_file *f, const char *preset, uint32_t *types);

/* Writes f quantized with the preset to path (replacing it). Input tensors to be converted must be F32, F16 or
 * BF16 (requantizing is refused). On failure the file may be partial. */
BRAID_NODISCARD braid_status bd_quant_write(const gguf_file *f, const char *preset, const char *path);

#endif
