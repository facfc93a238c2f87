/* arch.c — the table of architectures braid can run, looked up by general.architecture. Adding an
 * architecture is adding its file and one line here. */
#include "models/arch.h"

#include <string.h>

static const bd_arch *const archs[] = {
    &bd_arch_qwen35,
    &bd_arch_qwen35moe,
    &bd_arch_qwen3next,
    &bd_arch_mamba2,
    &bd_arch_nemotron_h,
    &bd_arch_nemotron_h_moe,
    &bd_arch_lfm2,
    &bd_arch_lfm2moe,
    &bd_arch_granitehybrid,
    &bd_arch_falcon_h1,
};

const bd_arch *bd_arch_find(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strlen(archs[i]->name) == len && !memcmp(archs[i]->name, name, len)) return archs[i];
    return NULL;
}
