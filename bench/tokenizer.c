/* tokenizer.c (bench_tokenizer) — tokens per second of braid's tokenizer and llama.cpp's on the same large
 * text and vocabulary, and the ratio braid / llama.cpp (> 1: braid is faster).
 *
 * The text (~10 MB by default) is every .inp test case of the oracle's vocabularies, then generated prose,
 * code, numbers, CJK, emoji and whitespace runs, deterministic. Two cases per vocabulary: the whole text in
 * one call, and the same text in 4 KiB calls (a chat-sized request). add_special = parse_special = 0, as
 * llama.cpp's tokenizer test. The ids of both are compared (a difference is reported, it would void the
 * figures). Times are thread CPU time (other processes share the machine), best of 2 rounds.
 * Usage: bench_tokenizer [MB] [vocab-name ...]   (default: 10 qwen35 llama-bpe llama-spm gpt-2) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/strbuf.h"
#include "tokenizer/vocab.h"

#if __has_include(<llama.h>)
#define BRAID_BENCH_ORACLE 1
#include <ggml-backend.h>
#include <llama.h>
#endif

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rs = 0x1234567;
static uint32_t rn(uint32_t n) {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (uint32_t)(rs % n);
}


static const char *const prose[] = {
    "The quick brown fox jumps over the lazy dog. ", "It's a truth universally acknowledged, isn't it? ",
    "In 1969, 600 million people watched the landing; ", "they'd said we'll see. ", "Naïve café owners in Zürich ",
    "said: \"Don't panic!\" ", "Hello, world!\n", "\n\n", "Résumé — 3.14159 — e=2.71828\n",
    "Le système d'exploitation est prêt. ", "Das Straßenverkehrsamt öffnet um 8:30 Uhr. ",
    "Быстрая коричневая лиса прыгает через ленивую собаку. ", "敏捷的棕色狐狸跳过了懒狗。", "日本語のテキストも少し。",
    "한국어 문장도 있습니다. ", "नमस्ते दुनिया। ", "مرحبا بالعالم. ", "🦙 llamas 🐪 and 👩‍👩‍👧 families 🇺🇸. ",
};
static const char *const code[] = {
    "int main(int argc, char **argv) {\n", "    for (size_t i = 0; i < n; i++) {\n", "        sum += a[i] * b[i];\n",
    "    }\n", "    return 0;\n}\n", "def tokenize(text: str) -> list[int]:\n", "    return [ord(c) for c in text]\n",
    "\tif (x != NULL && y >= 0x7F) { z = -1; }\n", "        \n", "#include <stdio.h>\n", "const x = (a, b) => a ?? b;\n",
};

static void make_text(bd_strbuf *b, const char *models, size_t target) {
    static const char *const names[] = {"qwen35", "llama-bpe", "llama-spm", "gpt-2", "deepseek-llm", "falcon", "mpt",
                                        "starcoder", "command-r", "phi-3", "gemma-4"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf.inp", models, names[k]);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        char buf[65536];
        size_t r;
        while ((r = fread(buf, 1, sizeof buf, f)) > 0) bd_strbuf_put(b, buf, r);
        fclose(f);
    }
    while (b->n < target) {
        switch (rn(10)) {
        case 0: case 1: case 2: case 3: case 4: bd_strbuf_puts(b, prose[rn(sizeof prose / sizeof prose[0])]); break;
        case 5: case 6: bd_strbuf_puts(b, code[rn(sizeof code / sizeof code[0])]); break;
        case 7: {
            char num[32];
            snprintf(num, sizeof num, "%u ", rn(1000000000));
            bd_strbuf_puts(b, num);
        } break;
        case 8: {
            int n = 1 + (int)rn(40);
            for (int i = 0; i < n; i++) bd_strbuf_puts(b, rn(3) ? " " : "\t");
        } break;
        default: bd_strbuf_puts(b, prose[rn(3)]); break;
        }
    }
}

typedef struct result {
    double sec;
    size_t n_tok;
} result;

static result run_braid(const tok_vocab *v, const bd_strbuf *t, size_t chunk, int32_t *ids, size_t cap) {
    double best = 1e30;
    size_t total = 0;
    for (int round = 0; round < 2; round++) {
        double t0 = now();
        total = 0;
        for (size_t a = 0; a < t->n; a += chunk) {
            size_t len = t->n - a < chunk ? t->n - a : chunk, n = 0;
            if (tok_tokenize(v, t->p + a, len, 0, 0, ids + total, cap - total, &n) != BRAID_OK) {
                fprintf(stderr, "braid tokenize failed\n");
                exit(1);
            }
            total += n;
        }
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    return (result){best, total};
}

#ifdef BRAID_BENCH_ORACLE
static result run_llama(const struct llama_vocab *lv, const bd_strbuf *t, size_t chunk, int32_t *ids, size_t cap) {
    double best = 1e30;
    size_t total = 0;
    for (int round = 0; round < 2; round++) {
        double t0 = now();
        total = 0;
        for (size_t a = 0; a < t->n; a += chunk) {
            size_t len = t->n - a < chunk ? t->n - a : chunk;
            int32_t n = llama_tokenize(lv, t->p + a, (int32_t)len, ids + total, (int32_t)(cap - total), false, false);
            if (n < 0) {
                fprintf(stderr, "llama_tokenize failed\n");
                exit(1);
            }
            total += (size_t)n;
        }
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    return (result){best, total};
}
static void quiet(enum ggml_log_level l, const char *s, void *u) {
    (void)l;
    (void)s;
    (void)u;
}
#endif

int main(int argc, char **argv) {
    double mb = argc > 1 ? atof(argv[1]) : 10.0;
    const char *def[] = {"qwen35", "llama-bpe", "llama-spm", "gpt-2"};
    const char **vocabs = argc > 2 ? (const char **)argv + 2 : def;
    int n_vocabs = argc > 2 ? argc - 2 : 4;
    const char *root = getenv("BRAID_ORACLE_DIR");
    char deflt[512], models[1024];
    snprintf(deflt, sizeof deflt, "%s/.cache/braid/oracle/3.22.1", getenv("HOME") ? getenv("HOME") : "/root");
    if (!root) root = deflt;
    snprintf(models, sizeof models, "%s/src/models", root);
    bd_strbuf text = {0};
    make_text(&text, models, (size_t)(mb * 1e6));
    if (bd_strbuf_status(&text) != BRAID_OK) {
        fprintf(stderr, "bench_tokenizer: %s\n", braid_last_error());
        return 1;
    }
    printf("text: %.1f MB\n", text.n / 1e6);
#ifdef BRAID_BENCH_ORACLE
    char libdir[1100];
    snprintf(libdir, sizeof libdir, "%s/lib", root);
    llama_log_set(quiet, NULL);
    ggml_backend_load_all_from_path(libdir);
    llama_backend_init();
#endif
    size_t cap = text.n + 1024;
    int32_t *a = malloc(cap * sizeof *a), *b = malloc(cap * sizeof *b);
    printf("%-14s %-8s %10s %12s %12s %8s\n", "vocab", "calls", "tokens", "braid tok/s", "llama tok/s", "ratio");
    for (int i = 0; i < n_vocabs; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", models, vocabs[i]);
        tok_vocab *v = NULL;
        if (tok_vocab_load_file(path, &v) != BRAID_OK) {
            fprintf(stderr, "%s: %s\n", path, braid_last_error());
            continue;
        }
#ifdef BRAID_BENCH_ORACLE
        struct llama_model_params mp = llama_model_default_params();
        mp.vocab_only = true;
        struct llama_model *lm = llama_model_load_from_file(path, mp);
        const struct llama_vocab *lv = lm ? llama_model_get_vocab(lm) : NULL;
#endif
        const size_t chunks[2] = {text.n, 4096};
        for (int c = 0; c < 2; c++) {
            result rb = run_braid(v, &text, chunks[c], a, cap);
            double bt = rb.n_tok / rb.sec;
#ifdef BRAID_BENCH_ORACLE
            if (lv) {
                result rl = run_llama(lv, &text, chunks[c], b, cap);
                double lt = rl.n_tok / rl.sec;
                int same = rb.n_tok == rl.n_tok && !memcmp(a, b, rb.n_tok * sizeof *a);
                printf("%-14s %-8s %10zu %12.0f %12.0f %7.2fx%s\n", vocabs[i], c ? "4 KiB" : "one", rb.n_tok, bt, lt,
                       bt / lt, same ? "" : "  (ids differ!)");
                continue;
            }
#endif
            printf("%-14s %-8s %10zu %12.0f %12s %8s\n", vocabs[i], c ? "4 KiB" : "one", rb.n_tok, bt, "-", "-");
        }
#ifdef BRAID_BENCH_ORACLE
        if (lm) llama_model_free(lm);
#endif
        tok_vocab_free(v);
    }
    free(a);
    free(b);
    bd_strbuf_free(&text);
    return 0;
}
