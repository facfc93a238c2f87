/* gen_arch.h — what an architecture row of the model generator provides (genmodel.h says what the generator
 * does). A row has the presets and two functions: `check` derives the dimensions a shape leaves implicit and
 * rejects shapes llama.cpp would not load; `describe` lists the metadata keys and the tensors, in file order,
 * through the gen_key_* / gen_tensor calls below. The shared code draws and writes the weights. */
#ifndef BRAID_TESTKIT_GEN_ARCH_H
#define BRAID_TESTKIT_GEN_ARCH_H

#include "base/status.h"
#include "genmodel/genmodel.h"

enum { GEN_PRESET_TINY, GEN_PRESET_SMALL, GEN_PRESET_MEDIUM, GEN_PRESET_05B, GEN_N_PRESETS };

/* How a tensor's values are drawn; also decides its storage type (only GEN_MATRIX takes --type). */
typedef enum gen_init {
    GEN_MATRIX, /* N(0, std): projections, embeddings, the output matrix */
    GEN_BIAS,   /* N(0, std), F32: biases (dt bias, conv bias) */
    GEN_NORM,   /* 1 + N(0, 0.1), F32: norm weights, Mamba2's D skip */
    GEN_NEG,    /* -(0.1 + |N(0, 1)|), F32: SSM decay A = -exp(A_log), which must be negative */
    GEN_CONV,   /* N(0, 1/sqrt(kernel)), F32: depthwise conv kernels {kernel, channels} */
    GEN_F32MAT, /* N(0, std), F32 whatever --type: MoE routers and shared-expert gates (llama.cpp's quantizer
                   leaves ffn_gate_inp* in F32) */
} gen_init;

typedef struct gen_plan gen_plan;

/* Metadata key "<arch>.<suffix>". */
BRAID_NODISCARD braid_status gen_key_u32(gen_plan *p, const char *suffix, uint32_t v);
BRAID_NODISCARD braid_status gen_key_f32(gen_plan *p, const char *suffix, float v);
BRAID_NODISCARD braid_status gen_key_bool(gen_plan *p, const char *suffix, int v);
BRAID_NODISCARD braid_status gen_key_i32_array(gen_plan *p, const char *suffix, const int32_t *v, uint64_t n);
/* A tensor {ne0} (ne1 == 0) or {ne0, ne1}, name from a printf format. */
BRAID_NODISCARD braid_status gen_tensor(gen_plan *p, gen_init init, int64_t ne0, int64_t ne1, const char *fmt, ...)
    BD_PRINTF(5, 6);

/* A stack of ne2 matrices {ne0, ne1} (MoE experts), each drawn like a GEN_MATRIX of the same rows. */
BRAID_NODISCARD braid_status gen_tensor3(gen_plan *p, gen_init init, int64_t ne0, int64_t ne1, int64_t ne2,
                                         const char *fmt, ...) BD_PRINTF(6, 7);

typedef struct gen_arch {
    const char *name; /* general.architecture */
    gen_shape presets[GEN_N_PRESETS];
    braid_status (*check)(gen_shape *s);
    braid_status (*describe)(const gen_shape *s, int64_t n_vocab, gen_plan *p);
} gen_arch;

extern const gen_arch gen_arch_qwen35, gen_arch_mamba2, gen_arch_nemotron_h, gen_arch_lfm2, gen_arch_llama,
    gen_arch_qwen3, gen_arch_qwen35moe, gen_arch_qwen3next, gen_arch_nemotron_h_moe, gen_arch_granitehybrid,
    gen_arch_lfm2moe, gen_arch_falcon_h1;

/* The qwen35 family (gen_qwen35.c), shared with gen_qwen3next.c: the shape checks of the dense trunk, and its
 * keys and tensors with the FFN and GDN parts the variant changes (0 qwen35, 1 qwen35moe, 2 qwen3next). */
BRAID_NODISCARD braid_status gen_qwen35_check(gen_shape *s);
BRAID_NODISCARD braid_status gen_qwen35_family_describe(const gen_shape *s, int64_t n_vocab, gen_plan *p,
                                                        int variant);

/* For `check`: BRAID_E_INVALID "ARCH: WHAT must be positive (got V)" unless v > 0. */
BRAID_NODISCARD braid_status gen_check_positive(const char *arch, const char *what, int64_t v);

#endif
