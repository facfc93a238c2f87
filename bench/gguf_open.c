/* gguf_open.c — how long gguf_open (map + validate everything) takes on a 0.5B-class model file, beside
 * llama.cpp's gguf_init_from_file (metadata only, no_alloc) on the same file.
 *
 *   bench_gguf_open [FILE] [-n RUNS] [--keep]
 *
 * Without FILE it writes a synthetic Qwen2.5-0.5B-shaped file (/tmp/braid_bench_gguf_open.gguf, ~1 GB: F16
 * weights, 24 layers, n_embd 896, n_ff 4864, and the real 151936-token vocabulary and merges copied from
 * llama.cpp's ggml-vocab-qwen2.gguf), times it, and deletes it (unless --keep). Times are with the file in the page cache
 * (the open only reads the metadata; tensor bytes are mapped, not touched). */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/status.h"
#include "gguf/gguf.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static braid_status fill_pattern(void *user, const char *name, void *buf, size_t nbytes) {
    (void)user;
    (void)name;
    memset(buf, 0x11, nbytes); /* F16 0x1111: a small positive number */
    return BRAID_OK;
}

static braid_status add(gguf_writer *w, const char *name, int64_t ne0, int64_t ne1, uint32_t type) {
    const int64_t ne[2] = {ne0, ne1};
    return gguf_writer_add_tensor(w, name, type, ne1 > 1 ? 2 : 1, ne, NULL);
}

/* A Qwen2.5-0.5B-shaped file at path. */
static braid_status write_synthetic(const char *path, const char *vocab_path) {
    gguf_file *vocab;
    BD_TRY(gguf_open(vocab_path, &vocab));
    gguf_writer *w;
    braid_status s = gguf_writer_new(3, &w);
    if (s != BRAID_OK) {
        gguf_close(vocab);
        return s;
    }
    const int64_t n_embd = 896, n_ff = 4864, n_layer = 24, n_vocab = 151936, n_kv_dim = 128;
    for (size_t i = 0; i < gguf_n_kv(vocab) && s == BRAID_OK; i++)
        s = gguf_writer_set_value(w, gguf_kv_at(vocab, i)->key, &gguf_kv_at(vocab, i)->value);
    if (s == BRAID_OK) s = gguf_writer_set_u32(w, "qwen2.block_count", (uint32_t)n_layer);
    if (s == BRAID_OK) s = gguf_writer_set_u32(w, "qwen2.embedding_length", (uint32_t)n_embd);
    if (s == BRAID_OK) s = gguf_writer_set_u32(w, "qwen2.feed_forward_length", (uint32_t)n_ff);
    if (s == BRAID_OK) s = add(w, "token_embd.weight", n_embd, n_vocab, BRAID_TYPE_F16);
    if (s == BRAID_OK) s = add(w, "output_norm.weight", n_embd, 1, BRAID_TYPE_F32);
    char name[64];
    for (int64_t l = 0; l < n_layer && s == BRAID_OK; l++) {
        struct {
            const char *n;
            int64_t ne0, ne1;
            uint32_t type;
        } t[] = {
            {"attn_norm.weight", n_embd, 1, BRAID_TYPE_F32},  {"attn_q.weight", n_embd, n_embd, BRAID_TYPE_F16},
            {"attn_q.bias", n_embd, 1, BRAID_TYPE_F32},       {"attn_k.weight", n_embd, n_kv_dim, BRAID_TYPE_F16},
            {"attn_k.bias", n_kv_dim, 1, BRAID_TYPE_F32},     {"attn_v.weight", n_embd, n_kv_dim, BRAID_TYPE_F16},
            {"attn_v.bias", n_kv_dim, 1, BRAID_TYPE_F32},     {"attn_output.weight", n_embd, n_embd, BRAID_TYPE_F16},
            {"ffn_norm.weight", n_embd, 1, BRAID_TYPE_F32},   {"ffn_gate.weight", n_embd, n_ff, BRAID_TYPE_F16},
            {"ffn_up.weight", n_embd, n_ff, BRAID_TYPE_F16},  {"ffn_down.weight", n_ff, n_embd, BRAID_TYPE_F16},
        };
        for (size_t k = 0; k < sizeof t / sizeof *t && s == BRAID_OK; k++) {
            snprintf(name, sizeof name, "blk.%lld.%s", (long long)l, t[k].n);
            s = add(w, name, t[k].ne0, t[k].ne1, t[k].type);
        }
    }
    if (s == BRAID_OK) s = gguf_writer_write(w, path, fill_pattern, NULL);
    gguf_writer_free(w);
    gguf_close(vocab);
    return s;
}

/* llama.cpp's reader through dlsym (its gguf.h cannot be included beside braid's). */
struct ll_params {
    bool no_alloc;
    void **ctx;
};

int main(int argc, char **argv) {
    const char *path = NULL;
    int runs = 20, keep = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--keep")) keep = 1;
        else path = argv[i];
    }
    if (runs < 1) runs = 1;
    const char *oracle = getenv("BRAID_ORACLE_DIR");
    char oracle_buf[512];
    if (!oracle) {
        snprintf(oracle_buf, sizeof oracle_buf, "%s/.cache/braid/oracle/3.22.1", getenv("HOME") ? getenv("HOME") : "");
        oracle = oracle_buf;
    }
    int made = 0;
    char tmp[] = "/tmp/braid_bench_gguf_open.gguf";
    if (!path) {
        char vocab[700];
        snprintf(vocab, sizeof vocab, "%s/src/models/ggml-vocab-qwen2.gguf", oracle);
        double t0 = now_ms();
        if (write_synthetic(tmp, vocab) != BRAID_OK) {
            fprintf(stderr, "bench_gguf_open: cannot write %s: %s\n", tmp, braid_last_error());
            return 1;
        }
        printf("wrote %s in %.0f ms\n", tmp, now_ms() - t0);
        path = tmp;
        made = 1;
    }
    double *ms = malloc(sizeof(double) * (size_t)runs);
    gguf_file *f = NULL;
    for (int r = 0; r < runs; r++) {
        double t0 = now_ms();
        if (gguf_open(path, &f) != BRAID_OK) {
            fprintf(stderr, "bench_gguf_open: %s\n", braid_last_error());
            return 1;
        }
        ms[r] = now_ms() - t0;
        if (r + 1 < runs) gguf_close(f);
    }
    printf("file: %s, %zu bytes, %zu keys, %zu tensors, metadata %zu bytes\n", path, gguf_file_size(f),
           gguf_n_kv(f), gguf_n_tensors(f), gguf_data_offset(f));
    gguf_close(f);
    qsort(ms, (size_t)runs, sizeof *ms, cmp_double);
    double braid_med = ms[runs / 2];
    printf("braid gguf_open (map + validate): min %.2f ms, median %.2f ms over %d runs\n", ms[0], braid_med, runs);

    char lib_path[700];
    snprintf(lib_path, sizeof lib_path, "%s/lib/libggml-base.so", oracle);
    void *lib = dlopen(lib_path, RTLD_NOW);
    if (lib) {
        void *(*init)(const char *, struct ll_params) = (void *(*)(const char *, struct ll_params))dlsym(lib, "gguf_init_from_file");
        void (*fr)(void *) = (void (*)(void *))dlsym(lib, "gguf_free");
        if (init && fr) {
            for (int r = 0; r < runs; r++) {
                double t0 = now_ms();
                void *c = init(path, (struct ll_params){true, NULL});
                ms[r] = now_ms() - t0;
                if (!c) {
                    fprintf(stderr, "llama.cpp cannot open %s\n", path);
                    break;
                }
                fr(c);
            }
            qsort(ms, (size_t)runs, sizeof *ms, cmp_double);
            printf("llama.cpp gguf_init_from_file (no_alloc): min %.2f ms, median %.2f ms; braid/llama.cpp %.2f\n",
                   ms[0], ms[runs / 2], braid_med / ms[runs / 2]);
        }
        dlclose(lib);
    }
    free(ms);
    if (made && !keep) unlink(tmp);
    return 0;
}
