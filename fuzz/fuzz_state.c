/* fuzz_state.c — libFuzzer target for loading memory states (state_io.c). Every input is loaded as a whole
 * memory and as one sequence, both as given and re-signed (its header and section checksums recomputed, so the
 * fuzzer reaches the checks behind the checksums). A refused load must leave the memory byte for byte as it
 * was; an accepted one must pass mem_check and survive a save / load / save round trip unchanged. Seeds are in
 * fuzz/corpus/state (written by `unit_memory --corpus DIR`). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "memory_toy.h"
#include "state_edit.h"
#include "base/alloc.h"
#include "base/hash.h"

static mem *M;
static void *pristine;
static size_t n_pristine;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    mem_params p = toy_params(&toy_fuzz_layout);
    if (mem_new(&p, &M) != BRAID_OK || toy_fuzz_fill(M) != BRAID_OK ||
        mem_state_save_alloc(M, -1, TOY_FUZZ_FP, "fuzz", &pristine, &n_pristine) != BRAID_OK)
        abort();
    return 0;
}

static void check_unchanged(void) {
    void *now;
    size_t n;
    if (mem_state_save_alloc(M, -1, TOY_FUZZ_FP, "fuzz", &now, &n) != BRAID_OK) abort();
    if (n != n_pristine || memcmp(now, pristine, n)) abort(); /* a refused load changed the memory */
    bd_free(now);
}

static void after_success(int32_t s) {
    if (mem_check(M) != BRAID_OK) abort();
    void *a, *b;
    size_t na, nb;
    if (mem_state_save_alloc(M, s, TOY_FUZZ_FP, "fuzz", &a, &na) != BRAID_OK) abort();
    if (mem_state_load(M, s, TOY_FUZZ_FP, a, na) != BRAID_OK) abort();
    if (mem_state_save_alloc(M, s, TOY_FUZZ_FP, "fuzz", &b, &nb) != BRAID_OK) abort();
    if (na != nb || memcmp(a, b, na)) abort(); /* save / load / save must be stable */
    bd_free(a);
    bd_free(b);
    if (mem_state_load(M, -1, TOY_FUZZ_FP, pristine, n_pristine) != BRAID_OK) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    for (int pass = 0; pass < 2; pass++) {
        memcpy(buf, data, size);
        if (pass) state_reseal(buf, size);
        int32_t targets[2] = {-1, (int32_t)(size % toy_fuzz_layout.n_seq)};
        for (int k = 0; k < 2; k++) {
            if (mem_state_load(M, targets[k], TOY_FUZZ_FP, buf, size) == BRAID_OK)
                after_success(targets[k]);
            else
                check_unchanged();
        }
    }
    free(buf);
    return 0;
}
