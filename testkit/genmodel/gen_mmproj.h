/* gen_mmproj.h — random-weight vision projector GGUFs (`braid gen-model --arch qwen3vl-mmproj`): the
 * qwen3vl_merger mmproj of Qwen3-VL / Qwen3.5 (docs reference/vision.md §1.2-1.3), with the keys and tensor
 * names llama.cpp's converter writes, so that llama.cpp's libmtmd loads the file as it would a real one. */
#ifndef BRAID_TESTKIT_GEN_MMPROJ_H
#define BRAID_TESTKIT_GEN_MMPROJ_H

#include <stdint.h>

#include "braid.h"

#define GEN_MMPROJ_MAX_LAYERS 256

typedef struct gen_mmproj_params {
    int64_t n_embd;   /* E, the ViT width (default 64) */
    int64_t n_head;   /* heads; E / n_head must be a multiple of 4 (default 4) */
    int64_t n_ff;     /* ViT MLP width (default 128) */
    int64_t n_layer;  /* ViT blocks (default 2) */
    int64_t pos_side; /* side S of the learned position grid (default 16; Qwen: 48) */
    int64_t n_text;   /* the text model's n_embd: the row width (default 256) */
    int32_t deepstack[GEN_MMPROJ_MAX_LAYERS]; /* ViT layers with a deepstack merger ... */
    int n_deepstack;                          /* ... and how many (default none) */
    uint32_t type;    /* matrices: BRAID_TYPE_F16 (default) or BRAID_TYPE_F32; norms, biases, positions F32 */
    uint64_t seed;    /* default 1 */
    float std;        /* scale of the matrices (default 0.05; the patch kernel and qkv have their own) */
    float eps;        /* LayerNorm epsilon (default 1e-6) */
} gen_mmproj_params;

void gen_mmproj_default(gen_mmproj_params *p);
/* Writes the projector to path; *n_params (optional) gets the element count. */
BRAID_NODISCARD braid_status gen_mmproj_write(const gen_mmproj_params *p, const char *path, uint64_t *n_params);

#endif
