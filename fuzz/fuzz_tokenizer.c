/* fuzz_tokenizer.c — libFuzzer target for the tokenizer: any bytes (invalid UTF-8, NULs, special-token text)
 * must tokenize without a crash or sanitizer report, give the same count with and without an output buffer,
 * and detokenize. The first input byte picks the vocabulary (byte-level BPE qwen35, SPM llama, UTF-8 BPE
 * gemma-4, regex pre-tokenizer deepseek-llm, from the oracle's models/ directory) and add/parse_special. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "tokenizer/vocab.h"

static tok_vocab *vocabs[4];
static int n_vocabs;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    static const char *const names[] = {"qwen35", "llama-spm", "gemma-4", "deepseek-llm"};
    const char *root = getenv("BRAID_ORACLE_DIR");
    char def[512], path[1024];
    snprintf(def, sizeof def, "%s/.cache/braid/oracle/3.22.1", getenv("HOME") ? getenv("HOME") : "/root");
    if (!root) root = def;
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/src/models/ggml-vocab-%s.gguf", root, names[i]);
        if (tok_vocab_load_file(path, &vocabs[n_vocabs]) == BRAID_OK) n_vocabs++;
    }
    if (!n_vocabs) {
        fprintf(stderr, "fuzz_tokenizer: no vocabulary found under %s (run scripts/fetch-oracle.sh)\n", root);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const tok_vocab *v = vocabs[data[0] % n_vocabs];
    int add = (data[0] >> 4) & 1, parse = (data[0] >> 5) & 1;
    const char *text = (const char *)data + 1;
    size_t len = size - 1, need = 0;
    braid_status st = tok_tokenize(v, text, len, add, parse, NULL, 0, &need);
    if (st != BRAID_OK && st != BRAID_E_RANGE) abort();
    int32_t *ids = malloc((need ? need : 1) * sizeof *ids);
    size_t n = 0;
    if (tok_tokenize(v, text, len, add, parse, ids, need, &n) != BRAID_OK || n != need) abort();
    char *out = NULL;
    size_t ol = 0;
    if (tok_detokenize(v, ids, n, parse, &out, &ol) != BRAID_OK) abort();
    bd_free(out);
    free(ids);
    return 0;
}
