/* cmd_gguf.c — `braid gguf FILE`: validates a GGUF file and prints what it holds (version, alignment,
 * metadata with long arrays abbreviated, tensors with type, shape, offset and size, and totals).
 * Exit 0 if the file is valid, 1 with the reader's message if not, 2 on a usage error. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "gguf/gguf.h"
#include "tensor/dot.h"
#include "gguf/utf8.h"

#define MAX_ARRAY_SHOWN 8     /* elements printed before "... (N elements)" */
#define MAX_STRING_SHOWN 120  /* bytes of a string printed before it is cut */

/* Prints a string quoted, escaping quotes, backslashes, control bytes and bytes that are not UTF-8. */
static void print_str(FILE *o, const gguf_str *s) {
    const uint8_t *p = (const uint8_t *)s->ptr;
    size_t n = (size_t)s->len, shown = n > MAX_STRING_SHOWN ? MAX_STRING_SHOWN : n;
    fputc('"', o);
    for (size_t i = 0; i < shown;) {
        uint8_t c = p[i];
        if (c == '"' || c == '\\') {
            fprintf(o, "\\%c", c);
        } else if (c == '\n') {
            fputs("\\n", o);
        } else if (c == '\t') {
            fputs("\\t", o);
        } else if (c == '\r') {
            fputs("\\r", o);
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(o, "\\x%02x", c);
        } else if (c >= 0x80) {
            size_t l = gguf_utf8_seq(p + i, n - i);
            if (l == 0) {
                fprintf(o, "\\x%02x", c);
            } else {
                fwrite(p + i, 1, l, o);
                i += l;
                continue;
            }
        } else {
            fputc(c, o);
        }
        i++;
    }
    fputc('"', o);
    if (shown < n) fprintf(o, "... (%zu bytes)", n);
}

static void print_value(FILE *o, const gguf_value *v);

static void print_element(FILE *o, gguf_vtype t, const uint8_t *p) {
    switch (t) {
    case GGUF_TYPE_UINT8: fprintf(o, "%u", p[0]); break;
    case GGUF_TYPE_INT8: fprintf(o, "%d", (int8_t)p[0]); break;
    case GGUF_TYPE_BOOL: fputs(p[0] ? "true" : "false", o); break;
    case GGUF_TYPE_UINT16: { uint16_t x; memcpy(&x, p, 2); fprintf(o, "%u", x); } break;
    case GGUF_TYPE_INT16: { int16_t x; memcpy(&x, p, 2); fprintf(o, "%d", x); } break;
    case GGUF_TYPE_UINT32: { uint32_t x; memcpy(&x, p, 4); fprintf(o, "%" PRIu32, x); } break;
    case GGUF_TYPE_INT32: { int32_t x; memcpy(&x, p, 4); fprintf(o, "%" PRId32, x); } break;
    case GGUF_TYPE_UINT64: { uint64_t x; memcpy(&x, p, 8); fprintf(o, "%" PRIu64, x); } break;
    case GGUF_TYPE_INT64: { int64_t x; memcpy(&x, p, 8); fprintf(o, "%" PRId64, x); } break;
    case GGUF_TYPE_FLOAT32: { float x; memcpy(&x, p, 4); fprintf(o, "%.9g", x); } break;
    case GGUF_TYPE_FLOAT64: { double x; memcpy(&x, p, 8); fprintf(o, "%.17g", x); } break;
    default: fputs("?", o); break;
    }
}

static void print_value(FILE *o, const gguf_value *v) {
    switch (v->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        fprintf(o, "%" PRIu64, v->u64);
        break;
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        fprintf(o, "%" PRId64, v->i64);
        break;
    case GGUF_TYPE_FLOAT32: fprintf(o, "%.9g", v->f64); break;
    case GGUF_TYPE_FLOAT64: fprintf(o, "%.17g", v->f64); break;
    case GGUF_TYPE_BOOL: fputs(v->b ? "true" : "false", o); break;
    case GGUF_TYPE_STRING: print_str(o, &v->str); break;
    case GGUF_TYPE_ARRAY: {
        uint64_t n = v->arr.n, shown = n > MAX_ARRAY_SHOWN ? MAX_ARRAY_SHOWN : n;
        size_t es = gguf_vtype_size(v->arr.type);
        fputc('[', o);
        for (uint64_t i = 0; i < shown; i++) {
            if (i) fputs(", ", o);
            if (es) print_element(o, v->arr.type, (const uint8_t *)v->arr.data + i * es);
            else print_value(o, &v->arr.items[i]);
        }
        if (shown < n) fprintf(o, ", ... (%" PRIu64 " elements)", n);
        fputc(']', o);
    } break;
    default: fputs("?", o); break;
    }
}

/* "array of string", "array of array of u32", ... for the type column. */
static void print_type(FILE *o, const gguf_value *v) {
    fputs(gguf_vtype_name(v->type), o);
    while (v && v->type == GGUF_TYPE_ARRAY) {
        fprintf(o, "[%s]", gguf_vtype_name(v->arr.type));
        v = v->arr.type == GGUF_TYPE_ARRAY && v->arr.n ? &v->arr.items[0] : NULL;
    }
}

static int cmd_gguf(int argc, char **argv) {
    if (argc != 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        FILE *o = argc == 2 ? stdout : stderr;
        fprintf(o, "usage: braid gguf FILE\n\nValidates a GGUF file (v2/v3) and prints its version, alignment, "
                   "metadata, tensors (offsets are\nfile offsets) and totals.\nExit status: 0 valid, 1 invalid or unreadable, 2 usage.\n");
        return argc == 2 ? 0 : 2;
    }
    gguf_file *f;
    braid_status s = gguf_open(argv[1], &f);
    if (s != BRAID_OK) {
        fprintf(stderr, "braid gguf: %s: %s\n", argv[1], braid_last_error());
        return 1;
    }
    FILE *o = stdout;
    fprintf(o, "file: %s\nversion: %" PRIu32 "\nalignment: %zu\ndata offset: %zu\n", argv[1], gguf_version(f),
            gguf_alignment(f), gguf_data_offset(f));
    size_t n_kv = gguf_n_kv(f), n_t = gguf_n_tensors(f);
    fprintf(o, "\nmetadata: %zu keys\n", n_kv);
    for (size_t i = 0; i < n_kv; i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        fprintf(o, "  %s: ", kv->key);
        print_type(o, &kv->value);
        fputs(" = ", o);
        print_value(o, &kv->value);
        fputc('\n', o);
    }
    fprintf(o, "\ntensors: %zu\n", n_t);
    uint64_t params = 0, bytes = 0;
    for (size_t i = 0; i < n_t; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        char shape[128];
        int k = snprintf(shape, sizeof shape, "[");
        int64_t nel = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            k += snprintf(shape + k, sizeof shape - (size_t)k, "%s%" PRId64, d ? ", " : "", t->ne[d]);
            nel *= t->ne[d];
        }
        snprintf(shape + k, sizeof shape - (size_t)k, "]");
        fprintf(o, "  %-40s %-8s %-28s offset %-12zu %zu bytes\n", t->name, gguf_type_name(t->type), shape,
                gguf_data_offset(f) + (size_t)t->offset, t->nbytes);
        params += (uint64_t)nel;
        bytes += t->nbytes;
    }
    fprintf(o, "\ntotals: %zu tensors, %" PRIu64 " parameters, %" PRIu64 " bytes of tensor data, file size %zu\n",
            n_t, params, bytes, gguf_file_size(f));
    /* The quantization mix, and which tensors braid cannot compute with (any type it has no kernels for). */
    enum { MAX_ID = 64 };
    size_t count[MAX_ID] = {0}, tbytes[MAX_ID] = {0}, n_missing = 0;
    for (size_t i = 0; i < n_t; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (t->type < MAX_ID) count[t->type]++, tbytes[t->type] += t->nbytes;
        n_missing += !bd_type_supported(t->type);
    }
    fprintf(o, "\ntype mix:\n");
    for (uint32_t ty = 0; ty < MAX_ID; ty++)
        if (count[ty])
            fprintf(o, "  %-8s %6zu tensors %14zu bytes (%5.1f%%)%s\n", gguf_type_name(ty), count[ty], tbytes[ty],
                    bytes ? 100.0 * (double)tbytes[ty] / (double)bytes : 0.0,
                    bd_type_supported(ty) ? "" : "  (braid has no kernels for this type)");
    if (n_missing) {
        fprintf(o, "\nbraid cannot run this file: %zu tensors of unsupported types:\n", n_missing);
        for (size_t i = 0; i < n_t; i++) {
            const gguf_tensor *t = gguf_tensor_at(f, i);
            if (!bd_type_supported(t->type)) fprintf(o, "  %-40s %s\n", t->name, gguf_type_name(t->type));
        }
    } else {
        fprintf(o, "braid supports every tensor type of this file\n");
    }
    gguf_close(f);
    return 0;
}

BRAID_COMMAND(gguf, cmd_gguf, "validate a GGUF file and print its metadata and tensors")
