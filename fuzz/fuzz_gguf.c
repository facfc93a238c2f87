/* fuzz_gguf.c — libFuzzer target for the GGUF reader: any input must either be rejected with a status or
 * give a file whose every accessor is safe to walk (ASan/UBSan check each byte touched). Seeds are in
 * fuzz/corpus/gguf (written by `unit_gguf --corpus DIR`). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

static volatile uint64_t sink;

/* Touches every byte a value exposes, and copies it into a writer (the deep-copy path). */
static void walk_value(const gguf_value *v) {
    switch (v->type) {
    case GGUF_TYPE_STRING:
        for (uint64_t i = 0; i < v->str.len; i++) sink += (uint8_t)v->str.ptr[i];
        break;
    case GGUF_TYPE_ARRAY:
        if (gguf_vtype_size(v->arr.type)) {
            const uint8_t *p = v->arr.data;
            uint64_t n = v->arr.n * gguf_vtype_size(v->arr.type);
            for (uint64_t i = 0; i < n; i++) sink += p[i];
            int32_t tmp[16];
            uint64_t got;
            (void)gguf_array_to_i32(v, tmp, 16, &got);
        } else {
            for (uint64_t i = 0; i < v->arr.n; i++) {
                if (v->arr.items[i].type != v->arr.type) abort();
                walk_value(&v->arr.items[i]);
            }
        }
        break;
    default: sink += v->u64; break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *f = NULL;
    if (gguf_open_memory(data, size, &f) != BRAID_OK) {
        if (f) abort(); /* out must stay NULL on failure */
        return 0;
    }
    sink += gguf_version(f) + gguf_alignment(f) + gguf_data_offset(f) + gguf_file_size(f);
    gguf_writer *w = NULL;
    if (gguf_writer_new(3, &w) != BRAID_OK) abort();
    for (size_t i = 0; i < gguf_n_kv(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        if (gguf_find(f, kv->key) != &kv->value) abort(); /* keys are unique and found */
        walk_value(&kv->value);
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        float f32;
        int b;
        gguf_str s;
        const gguf_value *items;
        uint64_t n;
        (void)gguf_get_u32(f, kv->key, 1, &u32);
        (void)gguf_get_i32(f, kv->key, 1, &i32);
        (void)gguf_get_u64(f, kv->key, 1, &u64);
        (void)gguf_get_f32(f, kv->key, 1, &f32);
        (void)gguf_get_bool(f, kv->key, 1, &b);
        (void)gguf_get_str(f, kv->key, 1, &s);
        (void)gguf_get_str_array(f, kv->key, 1, &items, &n);
        braid_status st = gguf_writer_set_value(w, kv->key, &kv->value);
        if (st != BRAID_OK && st != BRAID_E_NOMEM) abort(); /* a parsed value is always writable */
    }
    for (size_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (gguf_find_tensor(f, t->name) != t) abort();
        const uint8_t *p = t->data;
        const uint8_t *end = (const uint8_t *)data + size;
        if (t->nbytes == 0 || p < data || p + t->nbytes > end) abort();
        sink += p[0] + p[t->nbytes - 1] + (uint64_t)t->ne[0] + t->type;
        sink += (uintptr_t)gguf_type_name(t->type)[0];
        if (gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data) != BRAID_OK) abort();
    }
    gguf_writer_free(w);
    gguf_close(f);
    return 0;
}
