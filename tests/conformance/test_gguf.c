/* test_gguf.c (conformance) — braid's GGUF reader and writer against llama.cpp's (libggml-base):
 * - every llama.cpp vocabulary file: both readers see the same version, alignment, data offset, keys, value
 *   types, array lengths and scalar values;
 * - a file written by braid (every scalar type, arrays, string arrays, tensors of several types) is read by
 *   llama.cpp with the same keys, values, tensor offsets and data offset;
 * - a file written by llama.cpp (gguf_write_to_file, with tensors) is read by braid the same way;
 * - braid's symbols do not interpose on llama.cpp's: gguf_find_tensor and gguf_type_name exist in both, so
 *   the dynamic linker must still give llama.cpp its own (see C_VISIBILITY_PRESET in CMakeLists.txt).
 *
 * llama.cpp's gguf.h cannot be included beside braid's (same enum names), so its functions are looked up
 * with dlsym under local names. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "test.h"

/* ---- llama.cpp's GGUF API, by hand ----------------------------------------------------------------------- */

struct ll_init_params {
    bool no_alloc;
    void **ctx;
};
struct ll_ggml_init_params {
    size_t mem_size;
    void *mem_buffer;
    bool no_alloc;
};

static struct {
    void *(*init_from_file)(const char *, struct ll_init_params);
    void (*free)(void *);
    uint32_t (*get_version)(const void *);
    size_t (*get_alignment)(const void *);
    size_t (*get_data_offset)(const void *);
    int64_t (*get_n_kv)(const void *);
    const char *(*get_key)(const void *, int64_t);
    int (*get_kv_type)(const void *, int64_t);
    int (*get_arr_type)(const void *, int64_t);
    size_t (*get_arr_n)(const void *, int64_t);
    const void *(*get_arr_data)(const void *, int64_t);
    const char *(*get_arr_str)(const void *, int64_t, size_t);
    const void *(*get_val_data)(const void *, int64_t);
    const char *(*get_val_str)(const void *, int64_t);
    int64_t (*get_n_tensors)(const void *);
    int64_t (*find_tensor)(const void *, const char *);
    size_t (*get_tensor_offset)(const void *, int64_t);
    const char *(*get_tensor_name)(const void *, int64_t);
    int (*get_tensor_type)(const void *, int64_t);
    size_t (*get_tensor_size)(const void *, int64_t);
    void *(*init_empty)(void);
    void (*set_val_u32)(void *, const char *, uint32_t);
    void (*set_val_i64)(void *, const char *, int64_t);
    void (*set_val_f32)(void *, const char *, float);
    void (*set_val_bool)(void *, const char *, bool);
    void (*set_val_str)(void *, const char *, const char *);
    void (*set_arr_data)(void *, const char *, int, const void *, size_t);
    void (*set_arr_str)(void *, const char *, const char **, size_t);
    void (*add_tensor)(void *, const void *);
    bool (*write_to_file)(const void *, const char *, bool);
    void *(*ggml_init)(struct ll_ggml_init_params);
    void (*ggml_free)(void *);
    void *(*ggml_new_tensor)(void *, int, int, const int64_t *);
    void *(*ggml_set_name)(void *, const char *);
    void *(*ggml_get_data)(const void *);
    int64_t (*ggml_blck_size)(int);
    size_t (*ggml_type_size)(int);
    const char *(*ggml_type_name)(int);
} ll;

static void *lib;

static int load_llama(void) {
    char path[600];
    char fallback[256];
    snprintf(fallback, sizeof fallback, "%s/.cache/braid/oracle/3.22.1", test_env("HOME", "/root"));
    snprintf(path, sizeof path, "%s/lib/libggml-base.so", test_env("BRAID_ORACLE_DIR", fallback));
    lib = dlopen(path, RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
        return 0;
    }
    int ok = 1;
#define SYM(field, name)                                                                                       \
    do {                                                                                                       \
        *(void **)&ll.field = dlsym(lib, name);                                                                \
        if (!ll.field) {                                                                                       \
            fprintf(stderr, "missing %s\n", name);                                                             \
            ok = 0;                                                                                            \
        }                                                                                                      \
    } while (0)
    SYM(init_from_file, "gguf_init_from_file");
    SYM(free, "gguf_free");
    SYM(get_version, "gguf_get_version");
    SYM(get_alignment, "gguf_get_alignment");
    SYM(get_data_offset, "gguf_get_data_offset");
    SYM(get_n_kv, "gguf_get_n_kv");
    SYM(get_key, "gguf_get_key");
    SYM(get_kv_type, "gguf_get_kv_type");
    SYM(get_arr_type, "gguf_get_arr_type");
    SYM(get_arr_n, "gguf_get_arr_n");
    SYM(get_arr_data, "gguf_get_arr_data");
    SYM(get_arr_str, "gguf_get_arr_str");
    SYM(get_val_data, "gguf_get_val_data");
    SYM(get_val_str, "gguf_get_val_str");
    SYM(get_n_tensors, "gguf_get_n_tensors");
    SYM(find_tensor, "gguf_find_tensor");
    SYM(get_tensor_offset, "gguf_get_tensor_offset");
    SYM(get_tensor_name, "gguf_get_tensor_name");
    SYM(get_tensor_type, "gguf_get_tensor_type");
    SYM(get_tensor_size, "gguf_get_tensor_size");
    SYM(init_empty, "gguf_init_empty");
    SYM(set_val_u32, "gguf_set_val_u32");
    SYM(set_val_i64, "gguf_set_val_i64");
    SYM(set_val_f32, "gguf_set_val_f32");
    SYM(set_val_bool, "gguf_set_val_bool");
    SYM(set_val_str, "gguf_set_val_str");
    SYM(set_arr_data, "gguf_set_arr_data");
    SYM(set_arr_str, "gguf_set_arr_str");
    SYM(add_tensor, "gguf_add_tensor");
    SYM(write_to_file, "gguf_write_to_file");
    SYM(ggml_init, "ggml_init");
    SYM(ggml_free, "ggml_free");
    SYM(ggml_new_tensor, "ggml_new_tensor");
    SYM(ggml_set_name, "ggml_set_name");
    SYM(ggml_get_data, "ggml_get_data");
    SYM(ggml_blck_size, "ggml_blck_size");
    SYM(ggml_type_size, "ggml_type_size");
    SYM(ggml_type_name, "ggml_type_name");
#undef SYM
    return ok;
}

/* ---- comparing what both readers see ---------------------------------------------------------------------- */

/* Compares braid's view f with llama.cpp's view c of the same file. */
static void compare(const char *what, const gguf_file *f, const void *c) {
    CHECK(gguf_version(f) == ll.get_version(c), "%s: version", what);
    CHECK(gguf_alignment(f) == ll.get_alignment(c), "%s: alignment", what);
    CHECK(gguf_data_offset(f) == ll.get_data_offset(c), "%s: data offset %zu vs %zu", what, gguf_data_offset(f),
          ll.get_data_offset(c));
    CHECK((int64_t)gguf_n_kv(f) == ll.get_n_kv(c), "%s: n_kv", what);
    int bad_kv = 0;
    for (int64_t i = 0; i < ll.get_n_kv(c) && i < (int64_t)gguf_n_kv(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, (size_t)i);
        const gguf_value *v = &kv->value;
        int ok = !strcmp(kv->key, ll.get_key(c, i)) && (int)v->type == ll.get_kv_type(c, i);
        if (ok && v->type == GGUF_TYPE_ARRAY) {
            ok = (int)v->arr.type == ll.get_arr_type(c, i) && v->arr.n == ll.get_arr_n(c, i);
            if (ok && v->arr.type == GGUF_TYPE_STRING) {
                for (uint64_t k = 0; ok && k < v->arr.n; k++) {
                    const char *s = ll.get_arr_str(c, i, (size_t)k);
                    /* llama.cpp's strings are std::string: compare the counted bytes. */
                    ok = strlen(s) <= v->arr.items[k].str.len && !memcmp(s, v->arr.items[k].str.ptr, strlen(s));
                    if (ok && strlen(s) < v->arr.items[k].str.len) ok = v->arr.items[k].str.ptr[strlen(s)] == '\0';
                }
            } else if (ok && v->arr.n) {
                ok = !memcmp(v->arr.data, ll.get_arr_data(c, i), (size_t)v->arr.n * gguf_vtype_size(v->arr.type));
            }
        } else if (ok && v->type == GGUF_TYPE_STRING) {
            const char *s = ll.get_val_str(c, i);
            ok = strlen(s) == v->str.len && !memcmp(s, v->str.ptr, (size_t)v->str.len);
        } else if (ok) {
            /* Scalars: llama.cpp stores the raw bytes; braid widens. Compare through the raw bytes. */
            const uint8_t *raw = ll.get_val_data(c, i);
            size_t n = gguf_vtype_size(v->type);
            uint8_t mine[8];
            if (v->type == GGUF_TYPE_FLOAT32) {
                float x = (float)v->f64;
                memcpy(mine, &x, 4);
            } else if (v->type == GGUF_TYPE_BOOL) {
                mine[0] = (uint8_t)v->b;
            } else {
                memcpy(mine, &v->u64, 8); /* little-endian: the low bytes are the value */
            }
            ok = !memcmp(mine, raw, n);
        }
        if (!ok && bad_kv++ < 5) CHECK(0, "%s: key %lld '%s' differs", what, (long long)i, kv->key);
    }
    CHECK((int64_t)gguf_n_tensors(f) == ll.get_n_tensors(c), "%s: n_tensors", what);
    for (int64_t i = 0; i < ll.get_n_tensors(c) && i < (int64_t)gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, (size_t)i);
        CHECK(!strcmp(t->name, ll.get_tensor_name(c, i)) && t->offset == ll.get_tensor_offset(c, i) &&
                  (int)t->type == ll.get_tensor_type(c, i) && t->nbytes == ll.get_tensor_size(c, i),
              "%s: tensor %lld '%s'", what, (long long)i, t->name);
        CHECK(ll.find_tensor(c, t->name) == i, "%s: llama finds '%s'", what, t->name);
    }
}

static void compare_file(const char *path) {
    gguf_file *f = NULL;
    CHECK_STATUS(gguf_open(path, &f), BRAID_OK);
    struct ll_init_params p = {true, NULL};
    void *c = ll.init_from_file(path, p);
    CHECK(c != NULL, "llama.cpp opens %s", path);
    if (f && c) compare(path, f, c);
    if (c) ll.free(c);
    gguf_close(f);
}

static void test_vocab_files(void) {
    char fallback[256], dir[512], path[700];
    snprintf(fallback, sizeof fallback, "%s/.cache/braid/oracle/3.22.1", test_env("HOME", "/root"));
    snprintf(dir, sizeof dir, "%s/src/models", test_env("BRAID_ORACLE_DIR", fallback));
    const char *names[] = {"aquila", "baichuan", "bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon",
                           "gemma-4", "gpt-2", "gpt-neox", "llama-bpe", "llama-spm", "mpt", "nomic-bert-moe",
                           "phi-3", "qwen2", "qwen35", "refact", "starcoder"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, names[i]);
        compare_file(path);
    }
}

/* braid writes, both read. */
static void test_braid_writes(const char *path) {
    gguf_writer *w;
    CHECK_STATUS(gguf_writer_new(3, &w), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_str(w, "general.architecture", "test"), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_u32(w, "a.u32", 123456789), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_i32(w, "a.i32", -5), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_u64(w, "a.u64", 1ull << 50), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_f32(w, "a.f32", 1e-6f), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_bool(w, "a.bool", 1), BRAID_OK);
    gguf_value v = {.type = GGUF_TYPE_FLOAT64, .f64 = -2.5};
    CHECK_STATUS(gguf_writer_set_value(w, "a.f64", &v), BRAID_OK);
    v = (gguf_value){.type = GGUF_TYPE_INT16, .i64 = -300};
    CHECK_STATUS(gguf_writer_set_value(w, "a.i16", &v), BRAID_OK);
    const int32_t sec[4] = {11, 11, 10, 0};
    CHECK_STATUS(gguf_writer_set_array(w, "a.sections", GGUF_TYPE_INT32, sec, 4), BRAID_OK);
    const char *toks[3] = {"<s>", "\xc4\xa0the", ""};
    CHECK_STATUS(gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", toks, 3), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_u32(w, "general.alignment", 64), BRAID_OK);
    static uint8_t data[4096];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 13);
    const int64_t ne_a[2] = {16, 3}, ne_b[1] = {256}, ne_c[2] = {64, 2}, ne_d[3] = {4, 2, 2};
    CHECK_STATUS(gguf_writer_add_tensor(w, "a", BRAID_TYPE_F32, 2, ne_a, data), BRAID_OK);
    CHECK_STATUS(gguf_writer_add_tensor(w, "b", BRAID_TYPE_Q6_K, 1, ne_b, data), BRAID_OK);
    CHECK_STATUS(gguf_writer_add_tensor(w, "c", BRAID_TYPE_Q4_0, 2, ne_c, data), BRAID_OK);
    CHECK_STATUS(gguf_writer_add_tensor(w, "d", BRAID_TYPE_BF16, 3, ne_d, data), BRAID_OK);
    CHECK_STATUS(gguf_writer_write(w, path, NULL, NULL), BRAID_OK);
    gguf_writer_free(w);
    compare_file(path);
    unlink(path);
}

/* llama.cpp writes, both read. */
static void test_llama_writes(const char *path) {
    void *c = ll.init_empty();
    ll.set_val_str(c, "general.architecture", "llama");
    ll.set_val_u32(c, "b.u32", 7);
    ll.set_val_i64(c, "b.i64", -1234567890123ll);
    ll.set_val_f32(c, "b.f32", 0.125f);
    ll.set_val_bool(c, "b.bool", false);
    const float arr[3] = {1, 2, 3};
    ll.set_arr_data(c, "b.arr", GGUF_TYPE_FLOAT32, arr, 3);
    const char *strs[2] = {"x", "yz"};
    ll.set_arr_str(c, "b.strs", strs, 2);
    struct ll_ggml_init_params gp = {1 << 20, NULL, false};
    void *g = ll.ggml_init(gp);
    const int64_t ne1[2] = {32, 3}, ne2[1] = {512};
    void *t1 = ll.ggml_new_tensor(g, BRAID_TYPE_F16, 2, ne1);
    ll.ggml_set_name(t1, "t.f16");
    memset(ll.ggml_get_data(t1), 0x3c, 32 * 3 * 2);
    void *t2 = ll.ggml_new_tensor(g, BRAID_TYPE_Q5_K, 1, ne2);
    ll.ggml_set_name(t2, "t.q5_K");
    memset(ll.ggml_get_data(t2), 0x5a, 2 * 176);
    ll.add_tensor(c, t1);
    ll.add_tensor(c, t2);
    CHECK(ll.write_to_file(c, path, false), "llama.cpp writes %s", path);
    ll.free(c);
    ll.ggml_free(g);
    compare_file(path);
    gguf_file *f = NULL;
    CHECK_STATUS(gguf_open(path, &f), BRAID_OK);
    if (f) {
        const gguf_tensor *t = gguf_find_tensor(f, "t.q5_K");
        CHECK(t && t->nbytes == 352 && ((const uint8_t *)t->data)[351] == 0x5a, "q5_K data");
        gguf_close(f);
    }
    unlink(path);
}

/* Linking against libllama (which calls gguf_find_tensor and gguf_type_name) is what makes the linker export
 * same-named symbols of the executable: this test calls into libllama so that it stays linked (--as-needed). */
extern void llama_backend_init(void);
extern void llama_backend_free(void);

/* RTLD_DEFAULT searches the executable first: if it exported braid's gguf_find_tensor, llama.cpp would call
 * braid's function (another signature) from inside its model loader. */
static void test_no_interposition(void) {
    const char *names[] = {"gguf_find_tensor", "gguf_type_name"};
    void *ours[] = {(void *)gguf_find_tensor, (void *)gguf_type_name};
    for (size_t i = 0; i < 2; i++) {
        void *global = dlsym(RTLD_DEFAULT, names[i]);
        CHECK(global != ours[i], "%s is exported by this program (braid's, %p): llama.cpp would call it",
              names[i], ours[i]);
    }
    /* And braid's own calls still reach braid's code (linked statically). */
    CHECK(!strcmp(gguf_type_name(BRAID_TYPE_Q4_K), "q4_K"), "braid's gguf_type_name");
}

/* The reader's block table (src/gguf/ggml_types.c) equals ggml's for every id; removed ids (block size 0 in
 * ggml) are unknown to braid. */
static void test_type_table(void) {
    const int ggml_type_count = 43; /* GGML_TYPE_COUNT of 3.22.1 */
    for (int t = 0; t < ggml_type_count + 3; t++) {
        int64_t blck = 0;
        size_t bytes = 0;
        int known = gguf_type_block((uint32_t)t, &blck, &bytes);
        if (t >= ggml_type_count || ll.ggml_blck_size(t) == 0) {
            CHECK(!known, "type %d is unknown to braid", t);
            continue;
        }
        CHECK(known && blck == ll.ggml_blck_size(t) && bytes == ll.ggml_type_size(t), "type %d: %lld/%zu vs %lld/%zu",
              t, (long long)blck, bytes, (long long)ll.ggml_blck_size(t), ll.ggml_type_size(t));
        CHECK(!strcmp(gguf_type_name((uint32_t)t), ll.ggml_type_name(t)), "type %d name %s vs %s", t,
              gguf_type_name((uint32_t)t), ll.ggml_type_name(t));
    }
}

int main(void) {
    if (!load_llama()) {
        CHECK(0, "llama.cpp's libggml-base could not be loaded");
        TEST_MAIN_END();
    }
    char path[300];
    snprintf(path, sizeof path, "%s/braid_conf_gguf_%d.gguf", test_env("TMPDIR", "/tmp"), (int)getpid());
    llama_backend_init();
    test_no_interposition();
    test_type_table();
    test_vocab_files();
    test_braid_writes(path);
    test_llama_writes(path);
    llama_backend_free();
    TEST_MAIN_END();
}
