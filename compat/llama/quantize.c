/* quantize.c — llama_model_quantize over braid_model_quantize: llama_ftype numbers to llama.cpp's preset names,
 * the default parameters; any option braid's quantizer does not have (importance matrix, overrides, pure,
 * requantize, ...) is refused with a reason rather than ignored. */
#include <string.h>

#include "shim.h"

struct llama_model_quantize_params llama_model_quantize_default_params(void) {
    struct llama_model_quantize_params p;
    memset(&p, 0, sizeof p);
    p.ftype = LLAMA_FTYPE_MOSTLY_Q8_0;
    p.output_tensor_type = GGML_TYPE_COUNT;
    p.token_embedding_type = GGML_TYPE_COUNT;
    p.quantize_output_tensor = true;
    p.max_buf_size = 8ull << 30; /* llama.cpp's default: 8 GiB of rows in memory (braid streams anyway) */
    return p;
}

static const char *preset_name(enum llama_ftype t) {
    static const struct { enum llama_ftype ftype; const char *name; } rows[] = {
        {LLAMA_FTYPE_MOSTLY_F16, "F16"},       {LLAMA_FTYPE_MOSTLY_BF16, "BF16"},
        {LLAMA_FTYPE_MOSTLY_Q4_0, "Q4_0"},     {LLAMA_FTYPE_MOSTLY_Q4_1, "Q4_1"},
        {LLAMA_FTYPE_MOSTLY_Q5_0, "Q5_0"},     {LLAMA_FTYPE_MOSTLY_Q5_1, "Q5_1"},
        {LLAMA_FTYPE_MOSTLY_Q8_0, "Q8_0"},     {LLAMA_FTYPE_MOSTLY_Q2_K, "Q2_K"},
        {LLAMA_FTYPE_MOSTLY_Q3_K_S, "Q3_K_S"}, {LLAMA_FTYPE_MOSTLY_Q3_K_M, "Q3_K_M"},
        {LLAMA_FTYPE_MOSTLY_Q3_K_L, "Q3_K_L"}, {LLAMA_FTYPE_MOSTLY_Q4_K_S, "Q4_K_S"},
        {LLAMA_FTYPE_MOSTLY_Q4_K_M, "Q4_K_M"}, {LLAMA_FTYPE_MOSTLY_Q5_K_S, "Q5_K_S"},
        {LLAMA_FTYPE_MOSTLY_Q5_K_M, "Q5_K_M"}, {LLAMA_FTYPE_MOSTLY_Q6_K, "Q6_K"},
        {LLAMA_FTYPE_MOSTLY_IQ4_NL, "IQ4_NL"}, {LLAMA_FTYPE_MOSTLY_IQ4_XS, "IQ4_XS"},
        {LLAMA_FTYPE_MOSTLY_MXFP4_MOE, "MXFP4_MOE"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].ftype == t) return rows[i].name;
    return NULL;
}

uint32_t llama_model_quantize(const char *fname_inp, const char *fname_out, const llama_model_quantize_params *params) {
    struct llama_model_quantize_params d = llama_model_quantize_default_params();
    if (!params) params = &d;
    const char *why = NULL;
    if (params->imatrix) why = "an importance matrix";
    else if (params->kv_overrides || params->tt_overrides) why = "metadata or tensor type overrides";
    else if (params->allow_requantize) why = "requantizing";
    else if (params->only_copy || params->pure || params->keep_split || params->dry_run) why = "only_copy, pure, "
                                                                                               "keep_split or dry_run";
    else if (params->prune_layers) why = "pruning layers";
    else if (params->output_tensor_type != GGML_TYPE_COUNT || params->token_embedding_type != GGML_TYPE_COUNT ||
             !params->quantize_output_tensor)
        why = "output or embedding type choices";
    const char *preset = preset_name(params->ftype);
    if (!why && !preset) why = "this file type";
    if (why) {
        shim_log(GGML_LOG_LEVEL_ERROR, "llama_model_quantize: braid's quantizer does not support %s\n", why);
        return 1;
    }
    braid_status st = braid_model_quantize(fname_inp, fname_out, preset);
    if (st != BRAID_OK) {
        shim_log_braid("llama_model_quantize", st);
        return 1;
    }
    return 0;
}
