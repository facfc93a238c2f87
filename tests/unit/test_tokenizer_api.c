/* test_tokenizer_api.c — the public tokenizer API on a braid_model loaded vocab-only (braid_tokenize with and
 * without add_special / parse_special, a too small buffer, braid_token_to_piece, braid_detokenize, the special
 * ids and end-of-generation test) and the `braid tokenize` command (--ids output, --no-special, --file, exit
 * codes), on llama.cpp's test vocabularies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "braid.h"
#include "test.h"

static char models[1024];

static braid_model *load(const char *name) {
    char path[1200];
    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", models, name);
    braid_model_params p = braid_model_default_params();
    p.vocab_only = 1;
    braid_model *m = NULL;
    CHECK_STATUS(braid_model_load(path, &p, &m), BRAID_OK);
    return m;
}

/* Runs a command, returns its exit code and (first line of) stdout in out. */
static int run(const char *cmd, char *out, size_t cap) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    char sink[4096]; /* drain the rest, so the command is not killed by SIGPIPE */
    while (fread(sink, 1, sizeof sink, p) > 0) {
    }
    char *nl = strchr(out, '\n');
    if (nl) *nl = 0;
    int rc = pclose(p);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

int main(void) {
    char fallback[512];
    snprintf(fallback, sizeof fallback, "%s/.cache/braid/oracle/3.22.1", test_env("HOME", "/root"));
    snprintf(models, sizeof models, "%s/src/models", test_env("BRAID_ORACLE_DIR", fallback));

    /* qwen35: byte-level BPE, no BOS added, <|im_start|> is a control token */
    braid_model *m = load("qwen35");
    if (m) {
        CHECK(!strcmp(braid_model_arch(m), "qwen2"), "arch %s", braid_model_arch(m));
        CHECK(braid_model_n_vocab(m) == 151936, "n_vocab %d", braid_model_n_vocab(m));
        const char *text = "<|im_start|>user\nHello world<|im_end|>";
        braid_token ids[64];
        size_t n = 0;
        CHECK_STATUS(braid_tokenize(m, text, strlen(text), 1, 1, ids, 64, &n), BRAID_OK);
        CHECK(n == 6 && ids[0] == 151644 && ids[n - 1] == 151645, "parsed special tokens (%zu ids, %d .. %d)", n,
              ids[0], n ? ids[n - 1] : -1);
        size_t n2 = 0;
        CHECK_STATUS(braid_tokenize(m, text, strlen(text), 1, 0, ids, 64, &n2), BRAID_OK);
        CHECK(n2 > n && ids[0] != 151644, "special text as plain text (%zu ids)", n2);
        size_t need = 0;
        CHECK_STATUS(braid_tokenize(m, text, strlen(text), 1, 1, ids, 2, &need), BRAID_E_RANGE);
        CHECK(need == n, "a short buffer reports the count needed (%zu)", need);
        CHECK_STATUS(braid_tokenize(m, text, strlen(text), 1, 1, ids, 64, &n), BRAID_OK);
        char *back = NULL;
        size_t bl = 0;
        CHECK_STATUS(braid_detokenize(m, ids, n, 1, &back, &bl), BRAID_OK);
        CHECK(back && bl == strlen(text) && !strcmp(back, text), "round trip with special tokens: %s", back);
        braid_free(back);
        CHECK_STATUS(braid_detokenize(m, ids, n, 0, &back, &bl), BRAID_OK);
        CHECK(back && !strcmp(back, "user\nHello world"), "special tokens hidden: %s", back);
        braid_free(back);
        char piece[32];
        size_t pl = 0;
        CHECK_STATUS(braid_token_to_piece(m, 151644, 1, piece, sizeof piece, &pl), BRAID_OK);
        CHECK(pl == 12 && !memcmp(piece, "<|im_start|>", 12), "piece of <|im_start|>");
        CHECK_STATUS(braid_token_to_piece(m, 151644, 0, piece, sizeof piece, &pl), BRAID_OK);
        CHECK(pl == 0, "control piece hidden without special");
        CHECK_STATUS(braid_token_to_piece(m, 1 << 30, 1, piece, sizeof piece, &pl), BRAID_E_RANGE);
        CHECK(braid_token_eos(m) == 151643 && braid_token_eot(m) == 151645, "eos %d eot %d", braid_token_eos(m),
              braid_token_eot(m));
        CHECK(braid_token_is_eog(m, 151645) && braid_token_is_eog(m, 151643) && !braid_token_is_eog(m, 9707),
              "end of generation set");
        braid_model_free(m);
    }

    /* llama-spm: BOS added, leading space */
    m = load("llama-spm");
    if (m) {
        braid_token ids[16];
        size_t n = 0;
        CHECK_STATUS(braid_tokenize(m, "Hello world", 11, 1, 0, ids, 16, &n), BRAID_OK);
        CHECK(n == 3 && ids[0] == 1 && ids[1] == 15043 && ids[2] == 3186, "SPM with BOS (%zu ids)", n);
        CHECK(braid_token_bos(m) == 1 && braid_token_eos(m) == 2, "bos/eos");
        braid_model_free(m);
    }

    /* the command */
    const char *build = test_env("BRAID_BUILD_DIR", ".");
    char cmd[4096], out[4096];
    snprintf(cmd, sizeof cmd, "%s/braid tokenize -m %s/ggml-vocab-llama-spm.gguf --ids 'Hello world'", build, models);
    CHECK(run(cmd, out, sizeof out) == 0 && !strcmp(out, "1 15043 3186"), "braid tokenize --ids: '%s'", out);
    snprintf(cmd, sizeof cmd, "%s/braid tokenize -m %s/ggml-vocab-qwen35.gguf --ids '<|im_end|>'", build, models);
    CHECK(run(cmd, out, sizeof out) == 0 && !strcmp(out, "151645"), "special parsed: '%s'", out);
    snprintf(cmd, sizeof cmd, "%s/braid tokenize -m %s/ggml-vocab-qwen35.gguf --ids --no-special '<|im_end|>'", build,
             models);
    CHECK(run(cmd, out, sizeof out) == 0 && strcmp(out, "151645") && strchr(out, ' '), "--no-special: '%s'", out);
    snprintf(cmd, sizeof cmd, "%s/braid tokenize -m %s/ggml-vocab-llama-spm.gguf 'Hello'", build, models);
    CHECK(run(cmd, out, sizeof out) == 0 && strstr(out, "1") && strstr(out, "<s>"), "pieces listed: '%s'", out);
    snprintf(cmd, sizeof cmd, "%s/braid tokenize -m %s/ggml-vocab-llama-spm.gguf --ids --file %s/ggml-vocab-llama-spm.gguf.inp",
             build, models, models);
    CHECK(run(cmd, out, sizeof out) == 0 && !strncmp(out, "1 ", 2), "--file: '%.40s'", out);
    snprintf(cmd, sizeof cmd, "%s/braid tokenize -m /nonexistent.gguf x 2>/dev/null", build);
    CHECK(run(cmd, out, sizeof out) == 1, "a missing file exits 1");
    snprintf(cmd, sizeof cmd, "%s/braid tokenize x 2>/dev/null", build);
    CHECK(run(cmd, out, sizeof out) == 2, "a usage error exits 2");
    TEST_MAIN_END();
}
