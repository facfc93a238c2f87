/* test_gguf.c — the GGUF reader and writer: round trips of every value type (nested arrays, string arrays,
 * v2 and v3), typed getters, every byte-boundary truncation of a valid file, hand-made malformed files
 * (each must fail with BRAID_E_FORMAT and a message naming the problem), allocation-failure injection, and
 * the llama.cpp vocabulary files.
 *
 * `unit_gguf --corpus DIR` also writes the fuzz seed corpus (valid and broken files) into DIR; the seeds have
 * no .gguf suffix because .gitignore keeps *.gguf files (models) out of the repository. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/status.h"
#include "gguf/gguf.h"
#include "test.h"

/* ---- a byte builder for hand-made files -------------------------------------------------------------------- */

typedef struct buf {
    uint8_t p[8192];
    size_t n;
} buf;

static void b_bytes(buf *b, const void *p, size_t n) {
    if (b->n + n > sizeof b->p) {
        fprintf(stderr, "test buffer overflow\n");
        exit(2);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void b_u8(buf *b, uint8_t v) { b_bytes(b, &v, 1); }
static void b_u32(buf *b, uint32_t v) { b_bytes(b, &v, 4); }
static void b_u64(buf *b, uint64_t v) { b_bytes(b, &v, 8); }
static void b_strn(buf *b, const char *s, size_t n) {
    b_u64(b, n);
    b_bytes(b, s, n);
}
static void b_str(buf *b, const char *s) { b_strn(b, s, strlen(s)); }
static void b_pad(buf *b, size_t a) {
    while (b->n % a) b_u8(b, 0);
}
static void b_hdr(buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b->n = 0;
    b_u32(b, GGUF_MAGIC);
    b_u32(b, version);
    b_u64(b, n_tensors);
    b_u64(b, n_kv);
}
static void b_kv_u32(buf *b, const char *key, uint32_t v) {
    b_str(b, key);
    b_u32(b, GGUF_TYPE_UINT32);
    b_u32(b, v);
}
/* A v3 file of one key-value pair, written up to its value type: the caller appends the value. */
static void b_one_kv(buf *b, const char *key, uint32_t type) {
    b_hdr(b, 3, 0, 1);
    b_str(b, key);
    b_u32(b, type);
}
static void b_tinfo(buf *b, const char *name, uint32_t n_dims, const int64_t *ne, uint32_t type, uint64_t off) {
    b_str(b, name);
    b_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) b_u64(b, (uint64_t)ne[d]);
    b_u32(b, type);
    b_u64(b, off);
}
/* Appends zeroed data so that the data section holds n bytes. */
static void b_data(buf *b, size_t n) {
    b_pad(b, 32);
    for (size_t i = 0; i < n; i++) b_u8(b, (uint8_t)i);
}
/* A v3 file of one tensor info and a data section of n_data bytes. */
static void b_one_tensor(buf *b, const char *name, uint32_t n_dims, const int64_t *ne, uint32_t type, uint64_t off,
                         size_t n_data) {
    b_hdr(b, 3, 1, 0);
    b_tinfo(b, name, n_dims, ne, type, off);
    b_data(b, n_data);
}

/* Opening b must fail with BRAID_E_FORMAT and a message that contains want. */
static void expect_bad(const buf *b, const char *want, const char *what) {
    gguf_file *f = (gguf_file *)1;
    braid_status s = gguf_open_memory(b->p, b->n, &f);
    CHECK(s == BRAID_E_FORMAT, "%s: got %s (%s)", what, braid_status_name(s), braid_last_error());
    CHECK(f == NULL, "%s: out cleared on failure", what);
    CHECK(strstr(braid_last_error(), want) != NULL, "%s: message '%s' lacks '%s'", what, braid_last_error(), want);
    if (s == BRAID_OK) gguf_close(f);
}

static void expect_ok(const buf *b, const char *what) {
    gguf_file *f = NULL;
    braid_status s = gguf_open_memory(b->p, b->n, &f);
    CHECK(s == BRAID_OK, "%s: got %s (%s)", what, braid_status_name(s), braid_last_error());
    gguf_close(f);
}

static char tmp_dir[256];

/* A path in the test's temporary directory (a few rotating buffers, so two can be held at once). */
static const char *tmp_path(const char *name) {
    static char paths[4][512];
    static int next;
    char *path = paths[next++ % 4];
    snprintf(path, sizeof paths[0], "%s/%s", tmp_dir, name);
    return path;
}

/* ---- the sample file: every value type ------------------------------------------------------------------- */

static const float t_f32[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, -7.5f};
static uint8_t t_q8[2 * 34];

static braid_status fill_cb(void *user, const char *name, void *buf_, size_t nbytes) {
    int *calls = user;
    (*calls)++;
    if (!strcmp(name, "fail")) return bd_error(BRAID_E_IO, "fill refused");
    uint8_t *p = buf_;
    for (size_t i = 0; i < nbytes; i++) p[i] = (uint8_t)(i * 7 + strlen(name));
    return BRAID_OK;
}

/* Writes the sample file; with_tensors = 0 leaves the tensors out (a small file for truncation tests). */
static braid_status write_sample(const char *path, uint32_t version, int with_tensors, int *fill_calls) {
    gguf_writer *w;
    BD_TRY(gguf_writer_new(version, &w));
    braid_status s = BRAID_OK;
#define W(x)                                                                                                   \
    do {                                                                                                       \
        if (s == BRAID_OK) s = (x);                                                                            \
    } while (0)
    W(gguf_writer_set_str(w, "general.architecture", "test"));
    W(gguf_writer_set_u32(w, "t.u32", 4000000000u));
    W(gguf_writer_set_i32(w, "t.i32", -123456));
    W(gguf_writer_set_u64(w, "t.u64", 0xFEDCBA9876543210ull));
    W(gguf_writer_set_f32(w, "t.f32", 0.15625f));
    W(gguf_writer_set_bool(w, "t.bool", 1));
    W(gguf_writer_set_str(w, "t.str", "h\xc3\xa9llo \"q\"\n"));
    W(gguf_writer_set_str(w, "t.empty", ""));
    gguf_value v = {.type = GGUF_TYPE_UINT8, .u64 = 200};
    W(gguf_writer_set_value(w, "t.u8", &v));
    v = (gguf_value){.type = GGUF_TYPE_INT8, .i64 = -100};
    W(gguf_writer_set_value(w, "t.i8", &v));
    v = (gguf_value){.type = GGUF_TYPE_UINT16, .u64 = 65000};
    W(gguf_writer_set_value(w, "t.u16", &v));
    v = (gguf_value){.type = GGUF_TYPE_INT16, .i64 = -32000};
    W(gguf_writer_set_value(w, "t.i16", &v));
    v = (gguf_value){.type = GGUF_TYPE_INT64, .i64 = INT64_MIN + 5};
    W(gguf_writer_set_value(w, "t.i64", &v));
    v = (gguf_value){.type = GGUF_TYPE_FLOAT64, .f64 = 3.141592653589793};
    W(gguf_writer_set_value(w, "t.f64", &v));
    /* A string containing NUL: GGUF strings are counted, not terminated. */
    v = (gguf_value){.type = GGUF_TYPE_STRING, .str = {"a\0b", 3}};
    W(gguf_writer_set_value(w, "t.nul", &v));
    const int32_t ai[5] = {1, -2, 3, -4, 5};
    W(gguf_writer_set_array(w, "t.arr_i32", GGUF_TYPE_INT32, ai, 5));
    const uint8_t ab[3] = {1, 0, 1};
    W(gguf_writer_set_array(w, "t.arr_bool", GGUF_TYPE_BOOL, ab, 3));
    W(gguf_writer_set_array(w, "t.arr_f32", GGUF_TYPE_FLOAT32, t_f32, 6));
    const uint16_t au16[2] = {1, 65535};
    W(gguf_writer_set_array(w, "t.arr_u16", GGUF_TYPE_UINT16, au16, 2));
    const double af64[2] = {0.5, -1e300};
    W(gguf_writer_set_array(w, "t.arr_f64", GGUF_TYPE_FLOAT64, af64, 2));
    const uint64_t au64[2] = {0, UINT64_MAX};
    W(gguf_writer_set_array(w, "t.arr_u64", GGUF_TYPE_UINT64, au64, 2));
    W(gguf_writer_set_array(w, "t.arr_empty", GGUF_TYPE_UINT32, NULL, 0));
    const char *strs[4] = {"alpha", "", "\xe4\xb8\xad", "d e"};
    W(gguf_writer_set_str_array(w, "t.arr_str", strs, 4));
    W(gguf_writer_set_str_array(w, "t.arr_str_empty", NULL, 0));
    /* Array of arrays: [[1, 2], [], [3]] of u32, and [["x"], ["y", "z"]] of strings, and a 3-level one. */
    const uint32_t a12[2] = {1, 2}, a3[1] = {3};
    gguf_value inner[3] = {{.type = GGUF_TYPE_ARRAY}, {.type = GGUF_TYPE_ARRAY}, {.type = GGUF_TYPE_ARRAY}};
    inner[0].arr.type = GGUF_TYPE_UINT32, inner[0].arr.n = 2, inner[0].arr.data = a12;
    inner[1].arr.type = GGUF_TYPE_UINT32, inner[1].arr.n = 0;
    inner[2].arr.type = GGUF_TYPE_UINT32, inner[2].arr.n = 1, inner[2].arr.data = a3;
    gguf_value outer = {.type = GGUF_TYPE_ARRAY};
    outer.arr.type = GGUF_TYPE_ARRAY, outer.arr.n = 3, outer.arr.items = inner;
    W(gguf_writer_set_value(w, "t.nested", &outer));
    gguf_value sx[1] = {{.type = GGUF_TYPE_STRING, .str = {"x", 1}}};
    gguf_value syz[2] = {{.type = GGUF_TYPE_STRING, .str = {"y", 1}}, {.type = GGUF_TYPE_STRING, .str = {"z", 1}}};
    gguf_value sin_[2] = {{.type = GGUF_TYPE_ARRAY}, {.type = GGUF_TYPE_ARRAY}};
    sin_[0].arr.type = GGUF_TYPE_STRING, sin_[0].arr.n = 1, sin_[0].arr.items = sx;
    sin_[1].arr.type = GGUF_TYPE_STRING, sin_[1].arr.n = 2, sin_[1].arr.items = syz;
    gguf_value sout = {.type = GGUF_TYPE_ARRAY};
    sout.arr.type = GGUF_TYPE_ARRAY, sout.arr.n = 2, sout.arr.items = sin_;
    W(gguf_writer_set_value(w, "t.nested_str", &sout));
    gguf_value deep = {.type = GGUF_TYPE_ARRAY};
    deep.arr.type = GGUF_TYPE_ARRAY, deep.arr.n = 1, deep.arr.items = &outer;
    W(gguf_writer_set_value(w, "t.nested3", &deep));
    /* Replacing a key keeps one entry with the new value. */
    W(gguf_writer_set_u32(w, "t.replaced", 1));
    W(gguf_writer_set_u32(w, "t.replaced", 2));
    if (with_tensors) {
        W(gguf_writer_set_u32(w, "general.alignment", 64));
        const int64_t ne_a[2] = {3, 2}, ne_q[1] = {64}, ne_f[3] = {8, 3, 2}, ne_k[2] = {256, 2};
        W(gguf_writer_add_tensor(w, "a.f32", BRAID_TYPE_F32, 2, ne_a, t_f32));
        W(gguf_writer_add_tensor(w, "b.q8_0", BRAID_TYPE_Q8_0, 1, ne_q, t_q8));
        W(gguf_writer_add_tensor(w, "c.filled", BRAID_TYPE_F16, 3, ne_f, NULL));
        W(gguf_writer_add_tensor(w, "d.q4_K", BRAID_TYPE_Q4_K, 2, ne_k, NULL));
    }
    W(gguf_writer_write(w, path, fill_cb, fill_calls));
#undef W
    gguf_writer_free(w);
    return s;
}

/* The v3 sample with tensors, as bytes (malloc'd, the caller frees; NULL if it could not be read). */
static uint8_t *sample_bytes(size_t *n) {
    const char *path = tmp_path("sample_bytes.gguf");
    int calls = 0;
    CHECK_STATUS(write_sample(path, 3, 1, &calls), BRAID_OK);
    uint8_t *bytes = (uint8_t *)test_read_file(path, n);
    unlink(path);
    return bytes;
}

static void check_sample(const gguf_file *f, uint32_t version, int with_tensors) {
    CHECK(gguf_version(f) == version, "version %u", gguf_version(f));
    CHECK(gguf_n_kv(f) == (with_tensors ? 29u : 28u), "n_kv %zu", gguf_n_kv(f));
    CHECK(gguf_alignment(f) == (with_tensors ? 64u : 32u), "alignment %zu", gguf_alignment(f));
    const gguf_value *v;
    v = gguf_find(f, "t.u32");
    CHECK(v && v->type == GGUF_TYPE_UINT32 && v->u64 == 4000000000u, "u32");
    v = gguf_find(f, "t.i32");
    CHECK(v && v->type == GGUF_TYPE_INT32 && v->i64 == -123456, "i32");
    v = gguf_find(f, "t.u64");
    CHECK(v && v->type == GGUF_TYPE_UINT64 && v->u64 == 0xFEDCBA9876543210ull, "u64");
    v = gguf_find(f, "t.f32");
    CHECK(v && v->type == GGUF_TYPE_FLOAT32 && v->f64 == 0.15625, "f32");
    v = gguf_find(f, "t.bool");
    CHECK(v && v->type == GGUF_TYPE_BOOL && v->b == 1, "bool");
    v = gguf_find(f, "t.str");
    CHECK(v && v->type == GGUF_TYPE_STRING && v->str.len == 11 && !memcmp(v->str.ptr, "h\xc3\xa9llo \"q\"\n", 11),
          "str");
    v = gguf_find(f, "t.empty");
    CHECK(v && v->type == GGUF_TYPE_STRING && v->str.len == 0, "empty str");
    v = gguf_find(f, "t.u8");
    CHECK(v && v->type == GGUF_TYPE_UINT8 && v->u64 == 200, "u8");
    v = gguf_find(f, "t.i8");
    CHECK(v && v->type == GGUF_TYPE_INT8 && v->i64 == -100, "i8");
    v = gguf_find(f, "t.u16");
    CHECK(v && v->type == GGUF_TYPE_UINT16 && v->u64 == 65000, "u16");
    v = gguf_find(f, "t.i16");
    CHECK(v && v->type == GGUF_TYPE_INT16 && v->i64 == -32000, "i16");
    v = gguf_find(f, "t.i64");
    CHECK(v && v->type == GGUF_TYPE_INT64 && v->i64 == INT64_MIN + 5, "i64");
    v = gguf_find(f, "t.f64");
    CHECK(v && v->type == GGUF_TYPE_FLOAT64 && v->f64 == 3.141592653589793, "f64");
    v = gguf_find(f, "t.nul");
    CHECK(v && v->type == GGUF_TYPE_STRING && v->str.len == 3 && !memcmp(v->str.ptr, "a\0b", 3), "string with NUL");
    v = gguf_find(f, "t.arr_i32");
    CHECK(v && v->type == GGUF_TYPE_ARRAY && v->arr.type == GGUF_TYPE_INT32 && v->arr.n == 5 && !v->arr.items,
          "arr i32");
    if (v) {
        int32_t out[5];
        uint64_t n;
        CHECK_STATUS(gguf_array_to_i32(v, out, 5, &n), BRAID_OK);
        CHECK(n == 5 && out[0] == 1 && out[1] == -2 && out[4] == 5, "arr i32 values");
        CHECK_STATUS(gguf_array_to_i32(v, out, 4, &n), BRAID_E_RANGE);
        CHECK(n == 5, "needed count reported");
    }
    v = gguf_find(f, "t.arr_bool");
    CHECK(v && v->arr.type == GGUF_TYPE_BOOL && v->arr.n == 3 && !memcmp(v->arr.data, "\1\0\1", 3), "arr bool");
    v = gguf_find(f, "t.arr_f32");
    CHECK(v && v->arr.type == GGUF_TYPE_FLOAT32 && v->arr.n == 6 && !memcmp(v->arr.data, t_f32, sizeof t_f32),
          "arr f32");
    v = gguf_find(f, "t.arr_u16");
    CHECK(v && v->arr.type == GGUF_TYPE_UINT16 && v->arr.n == 2, "arr u16");
    v = gguf_find(f, "t.arr_f64");
    CHECK(v && v->arr.type == GGUF_TYPE_FLOAT64 && v->arr.n == 2, "arr f64");
    if (v) {
        double d[2];
        memcpy(d, v->arr.data, 16);
        CHECK(d[0] == 0.5 && d[1] == -1e300, "arr f64 values");
    }
    v = gguf_find(f, "t.arr_u64");
    CHECK(v && v->arr.type == GGUF_TYPE_UINT64 && v->arr.n == 2, "arr u64");
    v = gguf_find(f, "t.arr_empty");
    CHECK(v && v->arr.type == GGUF_TYPE_UINT32 && v->arr.n == 0, "empty arr");
    v = gguf_find(f, "t.arr_str");
    CHECK(v && v->arr.type == GGUF_TYPE_STRING && v->arr.n == 4 && v->arr.items, "arr str");
    if (v && v->arr.items) {
        CHECK(v->arr.items[0].str.len == 5 && !memcmp(v->arr.items[0].str.ptr, "alpha", 5), "str 0");
        CHECK(v->arr.items[1].str.len == 0, "str 1");
        CHECK(v->arr.items[2].str.len == 3 && !memcmp(v->arr.items[2].str.ptr, "\xe4\xb8\xad", 3), "str 2");
        CHECK(v->arr.items[3].type == GGUF_TYPE_STRING && v->arr.items[3].str.len == 3, "str 3");
    }
    v = gguf_find(f, "t.arr_str_empty");
    CHECK(v && v->arr.type == GGUF_TYPE_STRING && v->arr.n == 0, "empty str arr");
    v = gguf_find(f, "t.nested");
    CHECK(v && v->arr.type == GGUF_TYPE_ARRAY && v->arr.n == 3 && v->arr.items, "nested");
    if (v && v->arr.items) {
        const gguf_value *it = v->arr.items;
        CHECK(it[0].type == GGUF_TYPE_ARRAY && it[0].arr.type == GGUF_TYPE_UINT32 && it[0].arr.n == 2, "nested 0");
        CHECK(it[1].arr.n == 0 && it[2].arr.n == 1, "nested 1, 2");
        uint32_t x[2];
        memcpy(x, it[0].arr.data, 8);
        CHECK(x[0] == 1 && x[1] == 2, "nested values");
        memcpy(x, it[2].arr.data, 4);
        CHECK(x[0] == 3, "nested value 3");
    }
    v = gguf_find(f, "t.nested_str");
    CHECK(v && v->arr.n == 2 && v->arr.items && v->arr.items[1].arr.type == GGUF_TYPE_STRING &&
              v->arr.items[1].arr.n == 2 && v->arr.items[1].arr.items[1].str.len == 1 &&
              v->arr.items[1].arr.items[1].str.ptr[0] == 'z',
          "nested strings");
    v = gguf_find(f, "t.nested3");
    CHECK(v && v->arr.n == 1 && v->arr.items && v->arr.items[0].arr.n == 3 &&
              v->arr.items[0].arr.items[2].arr.n == 1,
          "3-level nesting");
    v = gguf_find(f, "t.replaced");
    CHECK(v && v->u64 == 2, "replaced key has the new value");
    CHECK(gguf_find(f, "t.missing") == NULL, "missing key");
    CHECK(gguf_find(f, "t.u3") == NULL && gguf_find(f, "t.u32x") == NULL, "prefix is not a match");
    CHECK(!strcmp(gguf_kv_at(f, 0)->key, "general.architecture"), "order kept");
    CHECK(gguf_kv_at(f, gguf_n_kv(f)) == NULL, "kv index out of range");

    if (!with_tensors) {
        CHECK(gguf_n_tensors(f) == 0, "no tensors");
        return;
    }
    CHECK(gguf_n_tensors(f) == 4, "n_tensors %zu", gguf_n_tensors(f));
    CHECK(gguf_data_offset(f) % 64 == 0, "data offset aligned");
    const gguf_tensor *t = gguf_find_tensor(f, "a.f32");
    CHECK(t && t->n_dims == 2 && t->ne[0] == 3 && t->ne[1] == 2 && t->ne[2] == 1 && t->ne[3] == 1 &&
              t->type == BRAID_TYPE_F32 && t->nbytes == 24 && t->offset == 0 && !memcmp(t->data, t_f32, 24),
          "a.f32");
    t = gguf_find_tensor(f, "b.q8_0");
    CHECK(t && t->type == BRAID_TYPE_Q8_0 && t->nbytes == 68 && t->offset == 64 && !memcmp(t->data, t_q8, 68),
          "b.q8_0");
    t = gguf_find_tensor(f, "c.filled");
    CHECK(t && t->n_dims == 3 && t->nbytes == 96 && t->offset == 192, "c.filled");
    if (t) {
        const uint8_t *p = t->data;
        int ok = 1;
        for (size_t i = 0; i < 96; i++) ok &= p[i] == (uint8_t)(i * 7 + 8);
        CHECK(ok, "fill callback bytes");
    }
    t = gguf_find_tensor(f, "d.q4_K");
    CHECK(t && t->nbytes == 288 && t->offset == 320, "d.q4_K");
    CHECK(gguf_find_tensor(f, "a.f3") == NULL && gguf_find_tensor(f, "nope") == NULL, "missing tensor");
    CHECK(gguf_tensor_at(f, 4) == NULL, "tensor index out of range");
    CHECK(gguf_file_size(f) == gguf_data_offset(f) + 320 + 320, "file ends after padded last tensor: %zu",
          gguf_file_size(f));
}

static void test_round_trip(void) {
    for (size_t i = 0; i < sizeof t_q8; i++) t_q8[i] = (uint8_t)(i * 3);
    for (uint32_t version = 2; version <= 3; version++) {
        for (int with_tensors = 0; with_tensors <= 1; with_tensors++) {
            const char *path = tmp_path("sample.gguf");
            int calls = 0;
            CHECK_STATUS(write_sample(path, version, with_tensors, &calls), BRAID_OK);
            CHECK(calls == (with_tensors ? 2 : 0), "fill called once per tensor without data: %d", calls);
            gguf_file *f = NULL;
            CHECK_STATUS(gguf_open(path, &f), BRAID_OK);
            if (f) {
                check_sample(f, version, with_tensors);
                gguf_close(f);
            }
            size_t n;
            uint8_t *bytes = (uint8_t *)test_read_file(path, &n);
            CHECK_STATUS(gguf_open_memory(bytes, n, &f), BRAID_OK);
            if (f) {
                check_sample(f, version, with_tensors);
                /* Copying every value into a second file gives the same metadata (set_value deep-copies). */
                gguf_writer *w;
                CHECK_STATUS(gguf_writer_new(version, &w), BRAID_OK);
                for (size_t i = 0; i < gguf_n_kv(f); i++)
                    CHECK_STATUS(gguf_writer_set_value(w, gguf_kv_at(f, i)->key, &gguf_kv_at(f, i)->value), BRAID_OK);
                for (size_t i = 0; i < gguf_n_tensors(f); i++) {
                    const gguf_tensor *t = gguf_tensor_at(f, i);
                    CHECK_STATUS(gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data), BRAID_OK);
                }
                const char *path2 = tmp_path("copy.gguf");
                CHECK_STATUS(gguf_writer_write(w, path2, NULL, NULL), BRAID_OK);
                gguf_writer_free(w);
                size_t n2;
                uint8_t *bytes2 = (uint8_t *)test_read_file(path2, &n2);
                CHECK(bytes2 && n2 == n && !memcmp(bytes, bytes2, n), "copy is byte-identical (v%u)", version);
                free(bytes2);
                unlink(path2);
                gguf_close(f);
            }
            free(bytes);
            unlink(path);
        }
    }
}

/* Every proper prefix of a valid file is rejected as malformed, never crashing (ASan checks reads). */
static void test_truncation(void) {
    size_t n;
    uint8_t *bytes = sample_bytes(&n);
    if (!bytes) return;
    gguf_file *f;
    int all_format = 1;
    size_t first_bad = 0;
    /* Data is only required up to the end of the last tensor (d.q4_K, 288 bytes padded to 320): the
     * trailing padding may be missing. */
    size_t need = n - (320 - 288);
    for (size_t len = 0; len < need; len++) {
        /* A private copy of exactly len bytes so that ASan catches any read past the prefix. */
        uint8_t *p = malloc(len ? len : 1);
        memcpy(p, bytes, len);
        braid_status s = gguf_open_memory(len ? p : NULL, len, &f);
        if (s != BRAID_E_FORMAT) {
            if (all_format) first_bad = len;
            all_format = 0;
            if (s == BRAID_OK) gguf_close(f);
        }
        free(p);
    }
    CHECK(all_format, "every truncation gives BRAID_E_FORMAT (first failure at %zu of %zu)", first_bad, n);
    for (size_t len = need; len <= n; len++) {
        CHECK_STATUS(gguf_open_memory(bytes, len, &f), BRAID_OK);
        if (f) gguf_close(f);
    }
    /* The message names the offset of the truncation. */
    CHECK_STATUS(gguf_open_memory(bytes, 30, &f), BRAID_E_FORMAT);
    CHECK(strstr(braid_last_error(), "29 key-value pairs (offset 16) but only 6 bytes remain") != NULL,
          "count message: %s", braid_last_error());
    CHECK_STATUS(gguf_open_memory(bytes, 600, &f), BRAID_E_FORMAT);
    CHECK(strstr(braid_last_error(), "at offset") != NULL && strstr(braid_last_error(), "600") != NULL,
          "truncation message: %s", braid_last_error());
    free(bytes);
}

/* Each allocation of an open can fail; the open reports BRAID_E_NOMEM and frees everything (ASan/LSan). */
static void test_alloc_failures(void) {
    size_t n;
    uint8_t *bytes = sample_bytes(&n);
    if (!bytes) return;
    const char *path = tmp_path("alloc.gguf");
    int calls = 0;
    gguf_file *f;
    bd_alloc_fail_at(0, 0);
    bd_alloc_reset_count();
    CHECK_STATUS(gguf_open_memory(bytes, n, &f), BRAID_OK);
    gguf_close(f);
    uint64_t sites = bd_alloc_count();
    CHECK(sites >= 3, "open allocates (%llu)", (unsigned long long)sites);
    for (uint64_t i = 1; i <= sites; i++) {
        bd_alloc_fail_at(i, 0);
        braid_status s = gguf_open_memory(bytes, n, &f);
        CHECK(s == BRAID_E_NOMEM, "allocation %llu failing gives NOMEM, got %s", (unsigned long long)i,
              braid_status_name(s));
        if (s == BRAID_OK) gguf_close(f);
    }
    /* And the writer: each failure gives NOMEM (or IO) and leaks nothing. */
    for (uint64_t i = 1; i < 200; i++) {
        bd_alloc_fail_at(i, 0);
        braid_status s = write_sample(path, 3, 1, &calls);
        bd_alloc_fail_at(0, 0);
        if (s == BRAID_OK) break;
        CHECK(s == BRAID_E_NOMEM, "writer allocation %llu failing gives NOMEM, got %s (%s)", (unsigned long long)i,
              braid_status_name(s), braid_last_error());
    }
    bd_alloc_fail_at(0, 0);
    unlink(path);
    free(bytes);
}

/* ---- malformed files -------------------------------------------------------------------------------------- */

static void test_bad_header(void) {
    buf b;
    b_hdr(&b, 3, 0, 0);
    expect_ok(&b, "empty v3 file");
    b.p[0] = 'G', b.p[1] = 'G', b.p[2] = 'M', b.p[3] = 'L';
    expect_bad(&b, "bad magic 'GGML'", "wrong magic");
    b_hdr(&b, 1, 0, 0);
    expect_bad(&b, "version 1", "v1");
    b_hdr(&b, 99, 0, 0);
    expect_bad(&b, "unsupported version 99", "v99");
    b_hdr(&b, 0, 0, 0);
    expect_bad(&b, "version", "v0");
    b_hdr(&b, 0x03000000, 0, 0);
    expect_bad(&b, "byte-swapped", "big-endian");
    b_hdr(&b, 3, 0, (uint64_t)1 << 62);
    expect_bad(&b, "4611686018427387904 key-value pairs", "n_kv 2^62");
    b_hdr(&b, 3, UINT64_MAX, 0);
    expect_bad(&b, "18446744073709551615 tensors", "n_tensors 2^64-1");
    b_hdr(&b, 3, 0, 1);
    b_kv_u32(&b, "a", 1);
    b.n -= 1;
    expect_bad(&b, "truncated value", "truncated u32");
    /* A header whose counts fit the file but whose entries are garbage: tables grow with parsed entries, so
     * the reader fails after a few small allocations instead of sizing tables from the claim. */
    size_t big = (size_t)1 << 20;
    uint8_t *p = calloc(1, big);
    uint32_t hdr[2] = {GGUF_MAGIC, 3};
    uint64_t counts[2] = {1000, (big - 24 - 1000 * 33) / 14};
    memcpy(p, hdr, 8);
    memcpy(p + 8, counts, 16);
    gguf_file *f;
    bd_alloc_reset_count();
    CHECK_STATUS(gguf_open_memory(p, big, &f), BRAID_E_FORMAT);
    CHECK(bd_alloc_count() <= 4, "%llu allocations for a header claiming %llu keys",
          (unsigned long long)bd_alloc_count(), (unsigned long long)counts[1]);
    free(p);
}

static void test_bad_kv(void) {
    buf b;
    /* String length 2^63 for a key. */
    b_hdr(&b, 3, 0, 1);
    b_u64(&b, (uint64_t)1 << 63);
    b_u32(&b, GGUF_TYPE_UINT32);
    b_u32(&b, 0);
    expect_bad(&b, "key at offset 24 has length 9223372036854775808", "key length 2^63");
    /* String value length 2^63. */
    b_one_kv(&b, "k", GGUF_TYPE_STRING);
    b_u64(&b, (uint64_t)1 << 63);
    b_u64(&b, 0);
    b_u64(&b, 0);
    expect_bad(&b, "string value at offset 37 has length 9223372036854775808", "value length 2^63");
    /* Array of 2^62 u32 / strings / arrays. */
    for (uint32_t et = 0; et < GGUF_TYPE_COUNT; et++) {
        b_one_kv(&b, "k", GGUF_TYPE_ARRAY);
        b_u32(&b, et);
        b_u64(&b, (uint64_t)1 << 62);
        for (int i = 0; i < 8; i++) b_u64(&b, 0);
        expect_bad(&b, "array of 4611686018427387904", "huge array");
    }
    b_one_kv(&b, "k", GGUF_TYPE_COUNT);
    b_u32(&b, 0);
    expect_bad(&b, "invalid value type 13", "value type 13");
    b_one_kv(&b, "k", GGUF_TYPE_ARRAY);
    b_u32(&b, 0xFFFFFFFFu);
    b_u64(&b, 0);
    expect_bad(&b, "invalid array element type", "array element type -1");
    /* Non-UTF-8, NUL, empty keys. */
    const char *bad_keys[] = {"\xff", "a\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "ab\xe4\xb8"};
    for (size_t i = 0; i < sizeof bad_keys / sizeof *bad_keys; i++) {
        b_hdr(&b, 3, 0, 1);
        b_kv_u32(&b, bad_keys[i], 1);
        expect_bad(&b, "key at offset 24", "non-UTF-8 key");
        CHECK(strstr(braid_last_error(), "UTF-8") != NULL, "key %zu: %s", i, braid_last_error());
    }
    b_hdr(&b, 3, 0, 1);
    b_strn(&b, "a\0b", 3);
    b_u32(&b, GGUF_TYPE_UINT8);
    b_u8(&b, 0);
    expect_bad(&b, "NUL-free", "key with NUL");
    b_hdr(&b, 3, 0, 1);
    b_strn(&b, "", 0);
    b_u32(&b, GGUF_TYPE_UINT8);
    b_u8(&b, 0);
    b_u8(&b, 0);
    expect_bad(&b, "empty key at offset 24", "empty key");
    b_hdr(&b, 3, 0, 1);
    b_kv_u32(&b, "\xe4\xb8\xad.ok", 1);
    expect_ok(&b, "UTF-8 key");
    /* Duplicate keys. */
    b_hdr(&b, 3, 0, 3);
    b_kv_u32(&b, "a", 1);
    b_kv_u32(&b, "b", 1);
    b_kv_u32(&b, "a", 2);
    expect_bad(&b, "duplicate key 'a'", "duplicate key");
    /* Bools other than 0/1. */
    b_one_kv(&b, "k", GGUF_TYPE_BOOL);
    b_u8(&b, 2);
    expect_bad(&b, "bool value 2", "bool 2");
    b_one_kv(&b, "k", GGUF_TYPE_ARRAY);
    b_u32(&b, GGUF_TYPE_BOOL);
    b_u64(&b, 3);
    b_u8(&b, 0), b_u8(&b, 1), b_u8(&b, 7);
    expect_bad(&b, "bool element 2 = 7", "bool array element 7");
    /* Nesting deeper than the limit. */
    b_one_kv(&b, "k", GGUF_TYPE_ARRAY);
    for (int d = 0; d < 20; d++) {
        b_u32(&b, GGUF_TYPE_ARRAY);
        b_u64(&b, 1);
    }
    b_u32(&b, GGUF_TYPE_UINT8);
    b_u64(&b, 0);
    expect_bad(&b, "nested deeper", "deep nesting");
    /* Alignment: 0, 3, 2^31+1 and of the wrong type; 1 and 2^20 are fine. */
    const uint32_t bad_align[] = {0, 3, 48, 0x80000001u};
    for (size_t i = 0; i < 4; i++) {
        b_hdr(&b, 3, 0, 1);
        b_kv_u32(&b, "general.alignment", bad_align[i]);
        expect_bad(&b, "at offset 53 is not a nonzero power of two", "bad alignment");
    }
    b_one_kv(&b, "general.alignment", GGUF_TYPE_UINT64);
    b_u64(&b, 32);
    expect_bad(&b, "general.alignment at offset 53 must be u32, not u64", "alignment type");
    b_hdr(&b, 3, 0, 1);
    b_kv_u32(&b, "general.alignment", 1);
    expect_ok(&b, "alignment 1");
}

static void test_bad_tensors(void) {
    buf b;
    const int64_t ne8[1] = {8}, ne_big[2] = {INT64_MAX / 2, 4}, ne_zero[2] = {8, 0}, ne_neg[1] = {-8};
    const int64_t ne33[1] = {33};
    /* A good baseline: two f32 tensors of 8 elements (32 bytes) at 0 and 32. */
    b_hdr(&b, 3, 2, 0);
    b_tinfo(&b, "x", 1, ne8, 0, 0);
    b_tinfo(&b, "y", 1, ne8, 0, 32);
    b_data(&b, 64);
    expect_ok(&b, "two tensors");
    /* Data missing: the example message of the task, with absolute offsets. */
    b_hdr(&b, 3, 2, 0);
    b_tinfo(&b, "x", 1, ne8, 0, 0);
    b_tinfo(&b, "blk.0.x", 1, ne8, 0, 32);
    b_data(&b, 40);
    expect_bad(&b, "tensor 'blk.0.x' data [offset 128, 32 bytes) extends past end of file (136 bytes)", "past end");
    b_one_tensor(&b, "x", 1, ne8, 0, UINT64_MAX - 31, 32);
    expect_bad(&b, "overflows", "offset overflow");
    b_one_tensor(&b, "x", 1, ne8, 0, 16, 64);
    expect_bad(&b, "offset 16 at offset 49 is not a multiple of the alignment 32", "misaligned");
    b_hdr(&b, 3, 2, 0);
    b_tinfo(&b, "x", 1, ne_big + 1, 0, 0); /* 4 floats: 16 bytes */
    b_tinfo(&b, "y", 1, ne8, 0, 0);
    b_data(&b, 64);
    expect_bad(&b, "overlap", "overlapping (same offset)");
    b_hdr(&b, 3, 3, 1);
    b_kv_u32(&b, "general.alignment", 8);
    b_tinfo(&b, "a", 1, ne8, 0, 64);
    b_tinfo(&b, "b", 1, ne8, 0, 0);
    b_tinfo(&b, "c", 1, ne8, 0, 24); /* [24, 56) overlaps b [0, 32) */
    b_data(&b, 128);
    expect_bad(&b, "tensors 'b'", "overlapping (unsorted)");
    b_one_tensor(&b, "x", 1, ne8, 4, 0, 64);
    expect_bad(&b, "unknown ggml type 4", "removed type 4");
    b_one_tensor(&b, "x", 1, ne8, 43, 0, 64);
    expect_bad(&b, "unknown ggml type 43", "type 43");
    b_one_tensor(&b, "x", 1, ne8, 0xFFFFFFFFu, 0, 64);
    expect_bad(&b, "unknown ggml type", "type -1");
    b_one_tensor(&b, "x", 1, ne33, BRAID_TYPE_Q8_0, 0, 64);
    expect_bad(&b, "not a multiple of the block size 32", "row not multiple of block");
    b_one_tensor(&b, "x", 0, ne8, 0, 0, 64);
    expect_bad(&b, "has 0 dimensions", "n_dims 0");
    b_hdr(&b, 3, 1, 0);
    b_str(&b, "x");
    b_u32(&b, 5);
    for (int i = 0; i < 5; i++) b_u64(&b, 1);
    b_u32(&b, 0);
    b_u64(&b, 0);
    b_data(&b, 64);
    expect_bad(&b, "has 5 dimensions", "n_dims 5");
    b_one_tensor(&b, "x", 2, ne_zero, 0, 0, 64);
    expect_bad(&b, "dimension 1 is 0", "dim 0");
    b_one_tensor(&b, "x", 1, ne_neg, 0, 0, 64);
    expect_bad(&b, "dimension 0 is -8", "negative dim");
    b_one_tensor(&b, "x", 2, ne_big, 0, 0, 64);
    expect_bad(&b, "element count overflows", "ne product overflow");
    const int64_t ne_bytes[2] = {INT64_MAX / 4, 3}; /* fits int64 elements, but 8 bytes each does not fit */
    b_one_tensor(&b, "x", 2, ne_bytes, 28, 0, 64);
    expect_bad(&b, "byte size overflows", "byte size overflow");
    b_hdr(&b, 3, 2, 0);
    b_tinfo(&b, "x", 1, ne8, 0, 0);
    b_tinfo(&b, "x", 1, ne8, 0, 32);
    b_data(&b, 64);
    expect_bad(&b, "duplicate tensor name 'x'", "duplicate tensor");
    b_one_tensor(&b, "bad\xff", 1, ne8, 0, 0, 64);
    expect_bad(&b, "tensor name at offset 24", "non-UTF-8 tensor name");
    /* The data section must be reachable: infos end, then padding that is not there. */
    b_hdr(&b, 3, 1, 0);
    b_tinfo(&b, "x", 1, ne8, 0, 0);
    expect_bad(&b, "before the data section", "no data section");
}

/* ---- typed getters ---------------------------------------------------------------------------------------- */

static void test_getters(void) {
    gguf_writer *w;
    CHECK_STATUS(gguf_writer_new(3, &w), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_u32(w, "u32", 7), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_i32(w, "i32", -7), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_i32(w, "i32pos", 9), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_u64(w, "u64big", (uint64_t)1 << 40), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_f32(w, "f32", 0.25f), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_bool(w, "bool", 1), BRAID_OK);
    CHECK_STATUS(gguf_writer_set_str(w, "str", "hi"), BRAID_OK);
    const char *toks[3] = {"a", "b", "c"};
    CHECK_STATUS(gguf_writer_set_str_array(w, "toks", toks, 3), BRAID_OK);
    const uint32_t big[2] = {1, 3000000000u};
    CHECK_STATUS(gguf_writer_set_array(w, "u32arr", GGUF_TYPE_UINT32, big, 2), BRAID_OK);
    const char *path = tmp_path("getters.gguf");
    CHECK_STATUS(gguf_writer_write(w, path, NULL, NULL), BRAID_OK);
    gguf_writer_free(w);
    gguf_file *f = NULL;
    CHECK_STATUS(gguf_open(path, &f), BRAID_OK);
    unlink(path);
    if (!f) return;
    uint32_t u = 0;
    int32_t i = 0;
    uint64_t u64 = 0;
    float x = 0;
    int bl = 0;
    gguf_str s = {0};
    CHECK_STATUS(gguf_get_u32(f, "u32", 1, &u), BRAID_OK);
    CHECK(u == 7, "u32");
    CHECK_STATUS(gguf_get_u32(f, "i32pos", 1, &u), BRAID_OK);
    CHECK(u == 9, "i32 into u32 when it fits");
    CHECK_STATUS(gguf_get_u32(f, "i32", 1, &u), BRAID_E_FORMAT);
    CHECK(strstr(braid_last_error(), "'i32'") != NULL, "message names the key: %s", braid_last_error());
    CHECK_STATUS(gguf_get_u32(f, "u64big", 1, &u), BRAID_E_FORMAT);
    CHECK_STATUS(gguf_get_u64(f, "u64big", 1, &u64), BRAID_OK);
    CHECK(u64 == (uint64_t)1 << 40, "u64");
    CHECK_STATUS(gguf_get_i32(f, "i32", 1, &i), BRAID_OK);
    CHECK(i == -7, "i32");
    CHECK_STATUS(gguf_get_i32(f, "u32", 1, &i), BRAID_OK);
    CHECK(i == 7, "u32 into i32");
    CHECK_STATUS(gguf_get_u64(f, "i32", 1, &u64), BRAID_E_FORMAT);
    CHECK_STATUS(gguf_get_f32(f, "f32", 1, &x), BRAID_OK);
    CHECK(x == 0.25f, "f32");
    CHECK_STATUS(gguf_get_f32(f, "u32", 1, &x), BRAID_E_FORMAT);
    CHECK(strstr(braid_last_error(), "has type u32, expected f32") != NULL, "types named: %s", braid_last_error());
    CHECK_STATUS(gguf_get_bool(f, "bool", 1, &bl), BRAID_OK);
    CHECK(bl == 1, "bool");
    CHECK_STATUS(gguf_get_bool(f, "u32", 1, &bl), BRAID_E_FORMAT);
    CHECK_STATUS(gguf_get_str(f, "str", 1, &s), BRAID_OK);
    CHECK(s.len == 2 && !memcmp(s.ptr, "hi", 2), "str");
    CHECK_STATUS(gguf_get_str(f, "u32", 1, &s), BRAID_E_FORMAT);
    const gguf_value *items = NULL;
    uint64_t n = 0;
    CHECK_STATUS(gguf_get_str_array(f, "toks", 1, &items, &n), BRAID_OK);
    CHECK(n == 3 && items && items[2].str.len == 1 && items[2].str.ptr[0] == 'c', "str array");
    CHECK_STATUS(gguf_get_str_array(f, "u32arr", 1, &items, &n), BRAID_E_FORMAT);
    CHECK(strstr(braid_last_error(), "array of u32") != NULL, "array type named: %s", braid_last_error());
    CHECK_STATUS(gguf_get_str_array(f, "str", 1, &items, &n), BRAID_E_FORMAT);
    /* Absent: optional leaves the default, required fails naming the key. */
    u = 42;
    CHECK_STATUS(gguf_get_u32(f, "absent", 0, &u), BRAID_OK);
    CHECK(u == 42, "default kept");
    CHECK_STATUS(gguf_get_u32(f, "absent", 1, &u), BRAID_E_FORMAT);
    CHECK(strstr(braid_last_error(), "'absent' is missing") != NULL, "missing named: %s", braid_last_error());
    x = 1.5f;
    CHECK_STATUS(gguf_get_f32(f, "absent", 0, &x), BRAID_OK);
    CHECK(x == 1.5f, "f32 default kept");
    CHECK_STATUS(gguf_get_str_array(f, "absent", 1, &items, &n), BRAID_E_FORMAT);
    int32_t out[2];
    CHECK_STATUS(gguf_array_to_i32(gguf_find(f, "u32arr"), out, 2, &n), BRAID_E_FORMAT);
    CHECK_STATUS(gguf_array_to_i32(gguf_find(f, "toks"), out, 2, &n), BRAID_E_FORMAT);
    CHECK_STATUS(gguf_array_to_i32(gguf_find(f, "u32"), out, 2, &n), BRAID_E_FORMAT);
    gguf_close(f);
}

/* ---- writer argument checks --------------------------------------------------------------------------------- */

static void test_writer_errors(void) {
    gguf_writer *w = NULL;
    CHECK_STATUS(gguf_writer_new(1, &w), BRAID_E_INVALID);
    CHECK_STATUS(gguf_writer_new(4, &w), BRAID_E_INVALID);
    CHECK_STATUS(gguf_writer_new(3, &w), BRAID_OK);
    if (!w) return;
    CHECK_STATUS(gguf_writer_set_u32(w, "", 1), BRAID_E_INVALID);
    CHECK_STATUS(gguf_writer_set_u32(w, "\xff", 1), BRAID_E_INVALID);
    CHECK_STATUS(gguf_writer_set_array(w, "k", GGUF_TYPE_STRING, NULL, 0), BRAID_E_INVALID);
    const uint8_t bad_bool[1] = {2};
    CHECK_STATUS(gguf_writer_set_array(w, "k", GGUF_TYPE_BOOL, bad_bool, 1), BRAID_E_INVALID);
    const int64_t ne[2] = {33, 1}, ne0[1] = {0}, ne8[1] = {8};
    float data[8] = {0};
    CHECK_STATUS(gguf_writer_add_tensor(w, "q", BRAID_TYPE_Q8_0, 1, ne, NULL), BRAID_E_INVALID);
    CHECK_STATUS(gguf_writer_add_tensor(w, "z", BRAID_TYPE_F32, 1, ne0, NULL), BRAID_E_INVALID);
    CHECK_STATUS(gguf_writer_add_tensor(w, "t", 4, 1, ne8, data), BRAID_E_INVALID);
    CHECK_STATUS(gguf_writer_add_tensor(w, "t", BRAID_TYPE_F32, 5, ne8, data), BRAID_E_INVALID);
    CHECK_STATUS(gguf_writer_add_tensor(w, "t", BRAID_TYPE_F32, 1, ne8, data), BRAID_OK);
    CHECK_STATUS(gguf_writer_add_tensor(w, "t", BRAID_TYPE_F32, 1, ne8, data), BRAID_E_INVALID);
    CHECK_STATUS(gguf_writer_add_tensor(w, "fail", BRAID_TYPE_F32, 1, ne8, NULL), BRAID_OK);
    const char *path = tmp_path("werr.gguf");
    CHECK_STATUS(gguf_writer_write(w, path, NULL, NULL), BRAID_E_INVALID); /* no fill for 'fail' */
    int calls = 0;
    CHECK_STATUS(gguf_writer_write(w, path, fill_cb, &calls), BRAID_E_IO);
    CHECK(!strcmp(braid_last_error(), "fill refused"), "callback's error kept: %s", braid_last_error());
    CHECK(access(path, F_OK) != 0, "a failed write leaves no file");
    CHECK_STATUS(gguf_writer_set_u32(w, "general.alignment", 24), BRAID_OK);
    CHECK_STATUS(gguf_writer_write(w, path, fill_cb, &calls), BRAID_E_INVALID);
    CHECK_STATUS(gguf_writer_write(w, "/nonexistent-dir/x.gguf", NULL, NULL), BRAID_E_INVALID);
    CHECK_STATUS(gguf_writer_set_u32(w, "general.alignment", 32), BRAID_OK);
    CHECK_STATUS(gguf_writer_write(w, "/nonexistent-dir/x.gguf", fill_cb, &calls), BRAID_E_IO);
    gguf_writer_free(w);
    gguf_file *f;
    CHECK_STATUS(gguf_open("/nonexistent-dir/x.gguf", &f), BRAID_E_IO);
    CHECK_STATUS(gguf_open("/", &f), BRAID_E_IO);
}

/* ---- braid gguf --------------------------------------------------------------------------------------------- */

/* Runs `braid gguf ARGS`, returns its exit status and the first cap-1 bytes of stdout+stderr in out. */
static int run_braid(const char *args, char *out, size_t cap) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/braid gguf %s 2>&1", test_env("BRAID_BUILD_DIR", ".."), args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = 0, k;
    char tmp[4096];
    while ((k = fread(tmp, 1, sizeof tmp, p)) > 0) {
        size_t take = n + k < cap - 1 ? k : cap - 1 - n;
        memcpy(out + n, tmp, take);
        n += take;
    }
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cmd(void) {
    static char out[1 << 16];
    const char *path = tmp_path("cmd.gguf");
    int calls = 0;
    CHECK_STATUS(write_sample(path, 3, 1, &calls), BRAID_OK);
    char args[600];
    snprintf(args, sizeof args, "'%s'", path);
    CHECK(run_braid(args, out, sizeof out) == 0, "braid gguf on a valid file exits 0: %s", out);
    CHECK(strstr(out, "version: 3\n") && strstr(out, "alignment: 64\n"), "header printed");
    CHECK(strstr(out, "t.str: string = \"h\xc3\xa9llo \\\"q\\\"\\n\"") != NULL, "string escaped: %s", out);
    CHECK(strstr(out, "t.nul: string = \"a\\x00b\"") != NULL, "NUL escaped");
    CHECK(strstr(out, "t.arr_i32: array[i32] = [1, -2, 3, -4, 5]") != NULL, "short array in full");
    CHECK(strstr(out, "t.nested: array[array][u32] = [[1, 2], [], [3]]") != NULL, "nested array");
    CHECK(strstr(out, "b.q8_0") && strstr(out, "q8_0") && strstr(out, "[64]"), "tensor line");
    CHECK(strstr(out, "totals: 4 tensors, 630 parameters, 476 bytes of tensor data") != NULL, "totals: %s",
          strstr(out, "totals") ? strstr(out, "totals") : out);
    CHECK(strstr(out, "type mix:") && strstr(out, "braid supports every tensor type of this file"), "mix: %s",
          strstr(out, "type mix") ? strstr(out, "type mix") : out);
    /* A type braid has no kernels for is named with the tensor that has it. */
    gguf_writer *w;
    CHECK_STATUS(gguf_writer_new(3, &w), BRAID_OK);
    static uint8_t iq2[66];
    const int64_t ne_iq2[1] = {256};
    CHECK_STATUS(gguf_writer_add_tensor(w, "blk.0.ffn_up.weight", 16 /* iq2_xxs */, 1, ne_iq2, iq2), BRAID_OK);
    CHECK_STATUS(gguf_writer_write(w, path, NULL, NULL), BRAID_OK);
    gguf_writer_free(w);
    CHECK(run_braid(args, out, sizeof out) == 0, "exit 0");
    CHECK(strstr(out, "braid cannot run this file: 1 tensors of unsupported types") &&
              strstr(out, "blk.0.ffn_up.weight") && strstr(out, "iq2_xxs"),
          "unsupported listed: %s", strstr(out, "type mix") ? strstr(out, "type mix") : out);
    /* A long array is abbreviated. */
    CHECK_STATUS(gguf_writer_new(3, &w), BRAID_OK);
    int32_t many[100];
    for (int i = 0; i < 100; i++) many[i] = i;
    CHECK_STATUS(gguf_writer_set_array(w, "many", GGUF_TYPE_INT32, many, 100), BRAID_OK);
    CHECK_STATUS(gguf_writer_write(w, path, NULL, NULL), BRAID_OK);
    gguf_writer_free(w);
    CHECK(run_braid(args, out, sizeof out) == 0, "exit 0");
    CHECK(strstr(out, "[0, 1, 2, 3, 4, 5, 6, 7, ... (100 elements)]") != NULL, "abbreviated: %s", out);
    /* A broken file: exit 1 with the reader's message. */
    FILE *fp = fopen(path, "r+b");
    if (fp) {
        fputs("GGML", fp);
        fclose(fp);
    }
    CHECK(run_braid(args, out, sizeof out) == 1, "bad file exits 1");
    CHECK(strstr(out, "bad magic 'GGML'") != NULL, "message printed: %s", out);
    CHECK(run_braid("", out, sizeof out) == 2, "no file: usage error");
    CHECK(run_braid("a b", out, sizeof out) == 2, "two files: usage error");
    CHECK(run_braid("/nonexistent.gguf", out, sizeof out) == 1, "missing file exits 1");
    unlink(path);
}

/* ---- the llama.cpp vocabulary files -------------------------------------------------------------------------- */

static void test_vocab_files(void) {
    char dir[512], path[640];
    char fallback[256];
    snprintf(fallback, sizeof fallback, "%s/.cache/braid/oracle/3.22.1", test_env("HOME", "/root"));
    snprintf(dir, sizeof dir, "%s/src/models", test_env("BRAID_ORACLE_DIR", fallback));
    const char *names[] = {"aquila", "baichuan", "bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon",
                           "gemma-4", "gpt-2", "gpt-neox", "llama-bpe", "llama-spm", "mpt", "nomic-bert-moe",
                           "phi-3", "qwen2", "qwen35", "refact", "starcoder"};
    int opened = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, names[i]);
        if (access(path, R_OK) != 0) continue;
        gguf_file *f = NULL;
        CHECK_STATUS(gguf_open(path, &f), BRAID_OK);
        if (!f) continue;
        opened++;
        const gguf_value *toks;
        uint64_t n = 0;
        CHECK_STATUS(gguf_get_str_array(f, "tokenizer.ggml.tokens", 1, &toks, &n), BRAID_OK);
        CHECK(n > 1000, "%s: %llu tokens", names[i], (unsigned long long)n);
        gguf_str arch = {0};
        CHECK_STATUS(gguf_get_str(f, "general.architecture", 1, &arch), BRAID_OK);
        if (!strcmp(names[i], "qwen2")) {
            CHECK(n == 151936, "qwen2 has 151936 tokens, got %llu", (unsigned long long)n);
            CHECK(arch.len == 5 && !memcmp(arch.ptr, "qwen2", 5), "qwen2 arch");
            uint32_t eos = 0;
            CHECK_STATUS(gguf_get_u32(f, "tokenizer.ggml.eos_token_id", 1, &eos), BRAID_OK);
            CHECK(eos == 151643, "qwen2 eos %u", eos);
            const gguf_value *tt = gguf_find(f, "tokenizer.ggml.token_type");
            CHECK(tt && tt->arr.type == GGUF_TYPE_INT32 && tt->arr.n == 151936, "token types");
            CHECK(toks[0].str.len == 1 && toks[0].str.ptr[0] == '!', "first token '!'");
        }
        gguf_close(f);
    }
    CHECK(opened == (int)(sizeof names / sizeof *names), "opened %d vocab files in %s", opened, dir);
}

/* ---- fuzz seed corpus --------------------------------------------------------------------------------------- */

static void write_buf(const char *dir, const char *name, const buf *b) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (fp) {
        fwrite(b->p, 1, b->n, fp);
        fclose(fp);
    }
}

static int write_corpus(const char *dir) {
    char path[512];
    int calls = 0;
    snprintf(path, sizeof path, "%s/sample_v3", dir);
    if (write_sample(path, 3, 1, &calls) != BRAID_OK) return 1;
    snprintf(path, sizeof path, "%s/sample_v2_meta", dir);
    if (write_sample(path, 2, 0, &calls) != BRAID_OK) return 1;
    buf b;
    const int64_t ne8[1] = {8}, ne_q[2] = {32, 2};
    b_hdr(&b, 3, 3, 1);
    b_kv_u32(&b, "general.alignment", 16);
    b_tinfo(&b, "x", 1, ne8, 0, 0);
    b_tinfo(&b, "q", 2, ne_q, BRAID_TYPE_Q8_0, 32);
    b_tinfo(&b, "h", 1, ne8, BRAID_TYPE_BF16, 112);
    b_data(&b, 128);
    write_buf(dir, "three_tensors", &b);
    b_hdr(&b, 3, 2, 0);
    b_tinfo(&b, "x", 1, ne8, 0, 0);
    b_tinfo(&b, "y", 1, ne8, 0, 0);
    b_data(&b, 64);
    write_buf(dir, "bad_overlap", &b);
    b_one_kv(&b, "k", GGUF_TYPE_ARRAY);
    b_u32(&b, GGUF_TYPE_ARRAY);
    b_u64(&b, 2);
    b_u32(&b, GGUF_TYPE_STRING);
    b_u64(&b, 1);
    b_str(&b, "s");
    b_u32(&b, GGUF_TYPE_INT32);
    b_u64(&b, 1);
    b_u32(&b, 5);
    write_buf(dir, "nested", &b);
    b_hdr(&b, 3, 0, 2);
    b_kv_u32(&b, "a", 1);
    b_kv_u32(&b, "a", 2);
    write_buf(dir, "bad_dup_key", &b);
    b_hdr(&b, 1, 0, 0);
    write_buf(dir, "bad_v1", &b);
    b_one_tensor(&b, "x", 1, ne8, 0, 32, 40);
    write_buf(dir, "bad_past_end", &b);
    printf("corpus written to %s\n", dir);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--corpus")) return write_corpus(argv[2]);
    snprintf(tmp_dir, sizeof tmp_dir, "%s/braid_test_gguf_XXXXXX", test_env("TMPDIR", "/tmp"));
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_truncation();
    test_alloc_failures();
    test_bad_header();
    test_bad_kv();
    test_bad_tensors();
    test_getters();
    test_writer_errors();
    test_cmd();
    test_vocab_files();
    CHECK(rmdir(tmp_dir) == 0, "every temporary file was removed from %s", tmp_dir);
    TEST_MAIN_END();
}
