/* quantize.c — braid_model_quantize: a GGUF file rewritten with one of llama.cpp's presets (the plan and the
 * writer are models/quant_mix.c); the library call behind `braid quantize` and llama_model_quantize. */
#include <unistd.h>

#include "base/status.h"
#include "gguf/gguf.h"
#include "models/quant_mix.h"

braid_status braid_model_quantize(const char *in_path, const char *out_path, const char *preset) {
    if (!in_path || !out_path || !preset) return bd_error(BRAID_E_INVALID, "braid_model_quantize: NULL argument");
    uint32_t ftype, main_type;
    BD_TRY(bd_quant_preset(preset, &ftype, &main_type));
    gguf_file *f = NULL;
    BD_TRY(gguf_open(in_path, &f));
    braid_status st = bd_quant_write(f, preset, out_path);
    gguf_close(f);
    if (st != BRAID_OK) unlink(out_path);
    return st;
}
