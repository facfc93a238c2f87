/* model.c — braid_model_load and the model accessors: open the GGUF, find the architecture, load the
 * tokenizer, bind the weights, compute the fingerprint that state files are checked against. */
#include "engine/model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/file.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/status.h"
#include "models/loader.h"
#include "tokenizer/vocab.h"

braid_model_params braid_model_default_params(void) {
    braid_model_params p = {.use_mmap = 1, .vocab_only = 0, .prefault = 1};
    return p;
}

braid_status bd_model_n_vocab_from_gguf(const gguf_file *f, const char *arch, int32_t *n_vocab) {
    const gguf_value *items;
    uint64_t n = 0;
    gguf_str model = {0};
    BD_TRY(gguf_get_str(f, "tokenizer.ggml.model", 0, &model));
    if (model.len == 4 && !memcmp(model.ptr, "none", 4)) {
        char key[64];
        snprintf(key, sizeof key, "%s.vocab_size", arch);
        uint32_t v = 0;
        BD_TRY(gguf_get_u32(f, key, 1, &v));
        n = v;
    } else {
        BD_TRY(gguf_get_str_array(f, "tokenizer.ggml.tokens", 1, &items, &n));
    }
    if (n == 0 || n > INT32_MAX) return bd_error(BRAID_E_FORMAT, "bad vocabulary size %llu", (unsigned long long)n);
    *n_vocab = (int32_t)n;
    return BRAID_OK;
}

/* Bytes of each tensor's data that the weights digest reads, at its start, middle and end. */
#define DIGEST_SAMPLE 4096u

/* The weights digest: a fine-tune, or the same architecture trained from another seed, has the same names,
 * shapes and types as the original, so a state saved with one would load into the other and silently give
 * wrong logits. Hashing all the weights would read the whole file at load; three pages of every tensor tell
 * two such models apart just as well (any training moves every weight) for a few KiB per tensor. */
static braid_status weights_digest(braid_model *m) {
    bd_hasher h;
    if (!bd_hasher_init(&h, 0x7765696768747321ull)) return bd_error(BRAID_E_NOMEM, "model: out of memory");
    for (size_t i = 0; i < gguf_n_tensors(m->gguf); i++) {
        const gguf_tensor *t = gguf_tensor_at(m->gguf, i);
        const uint8_t *d = t->data;
        const size_t n = t->nbytes, head = n < DIGEST_SAMPLE ? n : DIGEST_SAMPLE;
        bd_hasher_update(&h, d, head);
        if (n >= 3 * (size_t)DIGEST_SAMPLE) bd_hasher_update(&h, d + n / 2, DIGEST_SAMPLE);
        if (n > head) {
            const size_t tail = n - head < DIGEST_SAMPLE ? n - head : DIGEST_SAMPLE;
            bd_hasher_update(&h, d + n - tail, tail);
        }
    }
    m->weights_digest = bd_hasher_digest(&h);
    bd_hasher_free(&h);
    return BRAID_OK;
}

/* Fingerprint: arch name, the architecture's hparams bytes, every tensor's name, dims and type, and the
 * weights digest. */
static braid_status model_fingerprint(braid_model *m) {
    BD_TRY(weights_digest(m));
    bd_hasher h;
    if (!bd_hasher_init(&h, 0x62726169646d646cull)) return bd_error(BRAID_E_NOMEM, "model: out of memory");
    bd_hasher_update(&h, m->arch_name, strlen(m->arch_name));
    const void *hb;
    size_t hl;
    m->arch->hparams_bytes(m->arch_data, &hb, &hl);
    bd_hasher_update(&h, hb, hl);
    for (size_t i = 0; i < gguf_n_tensors(m->gguf); i++) {
        const gguf_tensor *t = gguf_tensor_at(m->gguf, i);
        bd_hasher_update(&h, t->name, strlen(t->name) + 1);
        bd_hasher_update(&h, t->ne, sizeof t->ne);
        bd_hasher_update(&h, &t->type, sizeof t->type);
    }
    bd_hasher_update(&h, &m->weights_digest, sizeof m->weights_digest);
    m->fingerprint = bd_hasher_digest(&h);
    bd_hasher_free(&h);
    return BRAID_OK;
}

braid_status bd_model_load_weights(braid_model *m) {
    m->arch = bd_arch_find(m->arch_name, strlen(m->arch_name));
    if (!m->arch) return bd_error(BRAID_E_UNSUPPORTED, "architecture '%s' is not supported", m->arch_name);
    BD_TRY(bd_model_n_vocab_from_gguf(m->gguf, m->arch_name, &m->n_vocab));
    BD_TRY(m->arch->load(m->gguf, m->n_vocab, &m->arch_data, &m->layout));
    m->n_embd = m->arch->n_embd(m->arch_data);
    return model_fingerprint(m);
}

/* use_mmap = 0: the file read into memory (64-byte aligned like a mapping's page-aligned base, so tensor
 * alignment within the file carries over), for file systems where a mapping is slow or unsafe. */
static braid_status open_copy(braid_model *m, const char *path) {
    int fd;
    uint64_t size;
    BD_TRY(bd_open_regular(path, "model", &fd, &size)); /* a FIFO must not block the caller */
    braid_status st = BRAID_OK;
    if (size > SIZE_MAX) st = bd_error(BRAID_E_IO, "model: '%s' is too large for this address space", path);
    const size_t n = (size_t)size;
    if (st == BRAID_OK && !(m->file_copy = bd_aligned_alloc(64, n > 0 ? n : 1)))
        st = bd_error(BRAID_E_NOMEM, "model: out of memory for the %zu bytes of '%s'", n, path);
    for (size_t got = 0; st == BRAID_OK && got < n;) {
        ssize_t r = read(fd, (char *)m->file_copy + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) st = bd_error(BRAID_E_IO, "model: short read of '%s' at byte %zu: %s", path, got,
                                  r < 0 ? strerror(errno) : "end of file");
        else got += (size_t)r;
    }
    close(fd);
    if (st == BRAID_OK) st = gguf_open_memory(m->file_copy, n, &m->gguf);
    return st;
}

/* Bytes of memory the kernel could give without swapping (MemAvailable), or 0 if unknown. */
static uint64_t mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    unsigned long long kb = 0;
    char line[128];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb) return (uint64_t)kb * 1024;
#ifdef _SC_AVPHYS_PAGES /* glibc and musl; macOS has neither it nor /proc: unknown there */
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
#else
    return 0;
#endif
}

typedef struct span {
    const char *p; /* into the file's mapping */
    size_t n;
} span;
static int by_addr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const span *)a)->p, y = (uintptr_t)((const span *)b)->p;
    return x < y ? -1 : x > y;
}

/* Prefaults the data of the tensors the model binds (every tensor except those of skipped layers, see
 * bd_loader_finish), merged into contiguous ranges; not at all when they exceed the memory available, where
 * populating would only push other pages (or the model's own first ones) out again. Best effort: a failure
 * here costs speed, not correctness. */
static void prefault_weights(const braid_model *m) {
    const size_t nt = gguf_n_tensors(m->gguf);
    span *s = bd_mallocn(nt ? nt : 1, sizeof *s);
    if (!s) return;
    size_t n = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < nt; i++) {
        const gguf_tensor *t = gguf_tensor_at(m->gguf, i);
        if (!t->nbytes || bd_tensor_skipped(t->name, m->layout.n_layer)) continue;
        s[n++] = (span){t->data, t->nbytes};
        total += t->nbytes;
    }
    const uint64_t avail = mem_available();
    if (n && avail && total > avail) {
        bd_log(BD_LOG_INFO, "model: %llu MiB of weights exceed the %llu MiB available: not prefaulted",
               (unsigned long long)(total >> 20), (unsigned long long)(avail >> 20));
        n = 0;
    }
    qsort(s, n, sizeof *s, by_addr);
    for (size_t i = 0; i < n;) {
        const char *lo = s[i].p;
        uintptr_t hi = (uintptr_t)s[i].p + s[i].n;
        for (i++; i < n && (uintptr_t)s[i].p <= hi + 65536; i++) /* small alignment gaps join a range */
            if ((uintptr_t)s[i].p + s[i].n > hi) hi = (uintptr_t)s[i].p + s[i].n;
        gguf_prefault(m->gguf, lo, (size_t)(hi - (uintptr_t)lo));
    }
    bd_free(s);
}

braid_status braid_model_load(const char *path, const braid_model_params *params, braid_model **out) {
    if (!path || !out) return bd_error(BRAID_E_INVALID, "braid_model_load: NULL argument");
    braid_model_params p = params ? *params : braid_model_default_params();
    *out = NULL;
    braid_model *m = bd_calloc(1, sizeof *m);
    if (!m) return bd_error(BRAID_E_NOMEM, "model: out of memory");
    braid_status st = p.use_mmap ? gguf_open(path, &m->gguf) : open_copy(m, path);
    gguf_str arch = {0};
    if (st == BRAID_OK) st = gguf_get_str(m->gguf, "general.architecture", 1, &arch);
    if (st == BRAID_OK && (arch.len == 0 || arch.len >= sizeof m->arch_name))
        st = bd_error(BRAID_E_FORMAT, "general.architecture has a bad length %llu", (unsigned long long)arch.len);
    if (st == BRAID_OK) memcpy(m->arch_name, arch.ptr, arch.len);
    if (st == BRAID_OK) {
        /* The tokenizer. A vocab-only load needs it; a full load of a model whose tokenizer type braid does
         * not support still runs on token ids (the tokenizer calls then report BRAID_E_UNSUPPORTED). */
        st = tok_vocab_load(m->gguf, &m->vocab);
        if (st == BRAID_E_UNSUPPORTED && !p.vocab_only) {
            bd_log(BD_LOG_WARN, "%s; the model is usable with token ids only", braid_last_error());
            st = BRAID_OK;
        }
        if (st == BRAID_OK && m->vocab) m->n_vocab = tok_n_tokens(m->vocab);
    }
    if (st == BRAID_OK && !p.vocab_only) st = bd_model_load_weights(m);
    if (st == BRAID_OK && !p.vocab_only && p.use_mmap && p.prefault) prefault_weights(m);
    if (st != BRAID_OK) {
        braid_model_free(m);
        return st;
    }
    *out = m;
    bd_error_clear();
    return BRAID_OK;
}

void braid_model_free(braid_model *m) {
    if (!m) return;
    if (m->arch && m->arch_data) m->arch->free_data(m->arch_data);
    tok_vocab_free(m->vocab);
    if (m->gguf) gguf_close(m->gguf);
    bd_free(m->file_copy);
    bd_free(m);
}

/* Accessors answer "" / 0 for a NULL model rather than fault. */
const char *braid_model_arch(const braid_model *m) { return m ? m->arch_name : ""; }
int32_t braid_model_n_vocab(const braid_model *m) { return m ? m->n_vocab : 0; }
int32_t braid_model_n_embd(const braid_model *m) { return m ? m->n_embd : 0; }
int32_t braid_model_n_layer(const braid_model *m) { return m ? m->layout.n_layer : 0; }
int32_t braid_model_n_pos_per_token(const braid_model *m) {
    return m && m->layout.n_pos_per_token ? m->layout.n_pos_per_token : 1;
}
int braid_model_has_attention(const braid_model *m) { return m && m->layout.n_attn > 0; }
int braid_model_has_recurrent(const braid_model *m) { return m && m->layout.n_recr > 0; }
