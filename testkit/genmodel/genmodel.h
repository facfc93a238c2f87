/* genmodel.h — random-weight GGUF models of the architectures braid runs (`braid gen-model`), so tests,
 * benchmarks and the conformance suite need no downloads.
 *
 * A model is a shape (a preset, then explicit overrides), a weight type for its matrices, a seed and a real
 * vocabulary copied from a vocab GGUF. Each architecture is one row of a table (gen_arch.h): its presets and
 * a function that lists its metadata keys and tensors; everything else (drawing weights, quantizing,
 * streaming the file) is shared here. Weights are drawn per tensor from a generator seeded by (seed, tensor
 * name), one row at a time, straight into the writer's buffer: the same seed gives the same file, every
 * --type is a quantization of the same float weights, and a multi-GB model never sits in memory whole.
 *
 * Weights are drawn so that llama.cpp runs them with finite activations and greedy continuations that move
 * (design.md §7): matrices ~ N(0, std) with an untied output matrix, norm weights around 1, SSM decay
 * parameters A < 0, conv kernels ~ N(0, 1/sqrt(kernel)). */
#ifndef BRAID_TESTKIT_GENMODEL_H
#define BRAID_TESTKIT_GENMODEL_H

#include <stddef.h>
#include <stdint.h>

#include "braid.h"

#define GEN_UNSET (-1) /* an integer field of gen_shape that keeps the preset's value */

/* Every dimension any supported architecture needs; an architecture reads the ones it has. */
typedef struct gen_shape {
    int64_t n_ctx;      /* context_length (training context) */
    int64_t n_layer;    /* block_count */
    int64_t n_embd;     /* embedding_length */
    int64_t n_ff;       /* feed_forward_length */
    int64_t n_head;     /* attention heads */
    int64_t n_head_kv;  /* attention KV heads */
    int64_t head_dim;   /* key_length = value_length */
    int64_t n_rot;      /* rope.dimension_count */
    int64_t ssm_conv;   /* conv kernel (ssm.conv_kernel, shortconv.l_cache) */
    int64_t ssm_state;  /* ssm.state_size (GDN head dim S; Mamba2 d_state N) */
    int64_t ssm_groups; /* ssm.group_count (GDN key heads H_k; Mamba2 groups G) */
    int64_t ssm_heads;  /* ssm.time_step_rank (GDN value heads H_v; Mamba2 heads H) */
    int64_t ssm_inner;  /* ssm.inner_size (GDN d_inner = S*H_v; Mamba2 d_inner) */
    int64_t interval;   /* qwen35: every interval-th layer is full attention */
    float rope_base;    /* rope.freq_base (0 = keep) */
    float eps;          /* RMSNorm epsilon (0 = keep) */
    char pattern[256];  /* per-layer kinds for pattern archs (nemotron_h "M*-", lfm2 "CA"); "" = keep */
    /* MoE archs (qwen35moe, qwen3next); as overrides these keep the preset unless positive */
    int64_t n_expert;      /* expert_count */
    int64_t n_expert_used; /* expert_used_count */
    int64_t n_ff_exp;      /* expert_feed_forward_length */
    int64_t n_ff_shexp;    /* expert_shared_feed_forward_length */
    int64_t gate_up;       /* 1: one merged ffn_gate_up_exps tensor, 2: ffn_gate_exps + ffn_up_exps */
    int64_t qkvz;          /* qwen3next GDN input projection: 1 attn_qkv + attn_gate, 2 legacy grouped ssm_in */
    int64_t nextn;         /* qwen35 family: MTP (nextn) blocks after the trunk, 0 or 1 (llama.cpp runs one) */
} gen_shape;

typedef struct gen_params {
    const char *arch;   /* "qwen35" (default), see gen_arch_names() */
    const char *preset; /* "tiny" (default), "small", "medium", "0.5b" */
    gen_shape over;     /* set fields replace the preset's (GEN_UNSET / 0 / "" keep it) */
    uint32_t type;      /* ggml type of the 2-D matrices (default F32); 1-D tensors and conv kernels stay F32 */
    uint64_t seed;      /* default 1 */
    float std;          /* std of the matrices (default 0.1) */
    const char *vocab;  /* vocab GGUF to copy tokenizer.* from; NULL = gen_default_vocab(); "none" = a dummy
                           vocabulary of n_vocab tokens (tokenizer.ggml.model "none"), for token-id-only tests */
    int64_t n_vocab;    /* vocab "none" only (default 1024) */
} gen_params;

/* What was written. */
typedef struct gen_summary {
    gen_shape shape;    /* the final shape */
    int64_t n_vocab;
    uint64_t n_params;  /* elements of all tensors */
    uint64_t n_bytes;   /* bytes of tensor data */
    size_t n_tensors;
    size_t n_fallback;  /* matrices stored in another type because their rows do not fit its blocks */
} gen_summary;

void gen_params_default(gen_params *p);

/* Writes the model to path (replacing it). On failure the file may be partial. */
BRAID_NODISCARD braid_status gen_model_write(const gen_params *p, const char *path, gen_summary *out);

/* The final shape for p (preset + overrides) without writing anything; BRAID_E_INVALID for an unknown arch
 * or preset, or a shape the architecture cannot have (message says which constraint). */
BRAID_NODISCARD braid_status gen_model_shape(const gen_params *p, gen_shape *out);

/* The qwen35 vocab test file in the oracle cache ($BRAID_ORACLE_DIR, else $BRAID_CACHE or ~/.cache/braid
 * + /oracle/3.22.1): static storage. */
const char *gen_default_vocab(void);

/* Names of the supported architectures and presets (NULL-terminated, static). */
const char *const *gen_arch_names(void);
const char *const *gen_preset_names(void);

#endif
