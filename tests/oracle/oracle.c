/* oracle.c — runs llama.cpp's prebuilt library on a GGUF, driven by a line-based script on stdin, so that
 * braid's conformance tests (tests/conformance/oracle_client.h) can compare their numbers with llama.cpp's
 * without linking llama.cpp into the same process.
 *
 * usage: oracle -m FILE [--ctx N] [--batch N] [--ubatch N] [--threads N] [--seq-max N] [--kv f32|f16]
 *               [--fa on|off|auto] [--kv-unified 0|1] [--default-bufts] [--verbose]
 *        oracle quantize IN OUT FTYPE   (llama_model_quantize with its default parameters, no importance
 *                                        matrix: FTYPE is a llama_ftype number, e.g. 15 for Q4_K_M; exit 0 on
 *                                        success, 1 with llama.cpp's reason on stderr otherwise)
 * Defaults are the strict reference set-up of design.md §7: F32 K/V cache, flash attention off, no extra
 * (AMX / repacked) weight buffers, a unified KV cache. --default-bufts, --kv f16 and --fa auto give what a
 * user of llama.cpp gets. --threads defaults to 1: ggml's workers spin while they wait, and on a loaded
 * 2-core machine two of them made a 0.1 s run take 3-4 s (measured); benchmarks pass their own count.
 *
 * Protocol. One command per line on stdin; every command gets exactly one reply line on stdout, which starts
 * with "ok" (maybe followed by values) or "err <reason>" (the command failed inside llama.cpp; the driver
 * goes on). Replies that carry logits are followed by raw little-endian float32 bytes. A malformed command,
 * a model that does not load or a read error ends the driver with a message on stderr and exit code 1 (2 for
 * bad command-line arguments), so a mistake in a test is never mistaken for a result.
 *
 *   info                          ok n_vocab V n_embd E n_layer L n_pos P n_seq_max S cpu VARIANT (the ggml CPU
 *                                 build loaded: ggml_variant.h's choice, BRAID_GGML_CPU forces one)
 *   tokenize ADD PARSE HEX        ok N t0 t1 ...   (HEX: the UTF-8 text as hex digits, "-" for empty)
 *   detokenize SPECIAL N t0 ...   ok HEX           (rendered with llama_token_to_piece, concatenated)
 *   decode N                      then N lines "token pos seq[,seq...] out"; pos is one integer (for an
 *                                 M-RoPE model llama.cpp gives a text token (pos, pos, pos, 0)).
 *                                 reply: ok R V, then R*V floats: the logits of the rows with out=1, in
 *                                 batch order
 *   decode_embd N                 then N lines "seq[,seq...] out p0 [p1 p2 p3]" (one position, or n_pos of
 *                                 them; one is broadcast like a text token's), then N*n_embd raw float32
 *                                 embedding rows. reply as decode
 *   greedy N SEQ [POS]            append N tokens to SEQ, each the argmax (lowest id on ties) of the latest
 *                                 logits of SEQ, at POS, POS+1, ... (default: pos_max(SEQ)+1).
 *                                 reply: ok t0 ... t(N-1), then N*V floats: the logits each token was chosen
 *                                 from
 *   seq_rm S P0 P1                ok 1|0 (llama_memory_seq_rm's result)
 *   seq_cp S D P0 P1 / seq_keep S / seq_add S P0 P1 DELTA / seq_div S P0 P1 K / clear    ok
 *   pos_range S                   ok pos_min pos_max
 *   state_seq_save S FILE         ok BYTES            (llama_state_seq_get_data, written to FILE)
 *   state_seq_load S FILE         ok BYTES            (llama_state_seq_set_data; 0 = llama.cpp refused it)
 *   state_save FILE / state_load FILE                 the same for the whole context
 *   dump DIR                      ok; from now on every F32 node llama.cpp computes is written to
 *                                 DIR/NNNNN.f32 (raw floats, ggml's logical order: ne0 fastest) and listed in
 *                                 DIR/index.txt as "NNNNN NAME ne0 ne1 ne2 ne3" (NAME as llama.cpp's graph names
 *                                 it, e.g. attn_norm-3; NNNNN counts nodes in compute order). "dump -" stops.
 *                                 For finding the first op where braid and llama.cpp part (a debugging aid).
 *   hidden R                      (--mtp) ok E, then E floats: the hidden state llama.cpp hands an MTP head
 *                                 (h_nextn: after the output norm) of row R of the main context's last decode
 *   mtp_decode N                  (--mtp) then N lines "token pos out" (sequence 0 of the MTP context), then
 *                                 N*E raw float32 h rows (row i: the hidden state paired with token i); reply:
 *                                 ok R V E, then R*V floats (logits of the rows with out=1) and R*E floats
 *                                 (the MTP context's own h_nextn of those rows, what a chained step gets)
 *   mtp_seq_rm P0                 (--mtp) ok 1|0: drops the MTP context's rows at positions >= P0
 *   quit                          ok, then exit 0 (end of input does the same)
 *
 * The latest logits row of each sequence (from decode, decode_embd or greedy) is kept for greedy. Memory
 * commands do not clear it: a test that truncates decodes again before asking for a continuation.
 *
 * --mtp loads the model's MTP (nextn) block (llama_model_params.load_mtp) and opens a second context of type
 * LLAMA_CONTEXT_TYPE_MTP beside the main one, as llama.cpp's draft-mtp speculative driver does (common/
 * speculative.cpp): the main context hands out every row's h_nextn, and an MTP batch carries a token and an
 * h row per row. The two calls that do this are declared only in llama.cpp's C++ header llama-ext.h, so
 * their mangled names (exported by the prebuilt libllama) are bound below. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "../../testkit/ggml_variant.h"
#include "llama.h"

#define MAX_ARGS 16

/* llama-ext.h (C++ linkage in the prebuilt library): llama_set_embeddings_nextn(ctx, value, masked) and
 * llama_get_embeddings_nextn_ith(ctx, i). Weak: the same driver is also linked against braid's own
 * libllama-braid (oracle_braid), which has neither; --mtp then says so. */
void oracle_set_embeddings_nextn(struct llama_context *ctx, bool value, bool masked)
    __asm__("_Z26llama_set_embeddings_nextnP13llama_contextbb") __attribute__((weak));
float *oracle_get_embeddings_nextn_ith(struct llama_context *ctx, int32_t i)
    __asm__("_Z30llama_get_embeddings_nextn_ithP13llama_contexti") __attribute__((weak));

static long line_no;
static int verbose;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "oracle: ");
    if (line_no > 0) fprintf(stderr, "command line %ld: ", line_no);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die("out of memory (%zu bytes)", n);
    return p;
}

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) die("out of memory (%zu x %zu bytes)", n, size);
    return p;
}

/* llama.cpp's log: errors and warnings go to stderr (they explain an "err" reply); the rest only with
 * --verbose. */
static void log_cb(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    static enum ggml_log_level last = GGML_LOG_LEVEL_INFO;
    if (level != GGML_LOG_LEVEL_CONT) last = level;
    if (verbose || last >= GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

/* ---- parsing helpers: every malformed field ends the driver ---------------------------------------- */

static long long parse_int(const char *s, const char *what) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) die("bad %s '%s' (want an integer)", what, s);
    return v;
}

static int32_t parse_i32(const char *s, const char *what) {
    long long v = parse_int(s, what);
    if (v < INT32_MIN || v > INT32_MAX) die("%s %s out of range", what, s);
    return (int32_t)v;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes HEX ("-" = empty) into a new NUL-terminated buffer (the caller frees it); *len gets the byte count. */
static char *parse_hex(const char *hex, size_t *len) {
    if (!strcmp(hex, "-")) hex = "";
    size_t n = strlen(hex);
    if (n % 2) die("hex text has an odd number of digits");
    char *out = xmalloc(n / 2 + 1);
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) die("bad hex digit at %zu", 2 * i);
        out[i] = (char)(hi * 16 + lo);
    }
    out[n / 2] = 0;
    *len = n / 2;
    return out;
}

/* Splits line in place on blanks; returns the count (at most max). */
static int split(char *line, char **argv, int max) {
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
        if (n == max) die("too many fields");
        argv[n++] = t;
    }
    return n;
}

static char *read_line(char **buf, size_t *cap) {
    ssize_t n = getline(buf, cap, stdin);
    if (n < 0) return NULL;
    line_no++;
    return *buf;
}

static void want_args(int argc, int lo, int hi, const char *usage) {
    if (argc < lo || argc > hi) die("usage: %s", usage);
}

/* ---- the driver state ------------------------------------------------------------------------------ */

typedef struct {
    struct llama_model *model;
    struct llama_context *ctx;
    struct llama_context *mtp; /* --mtp: the MTP context, else NULL */
    const struct llama_vocab *vocab;
    llama_memory_t mem;
    int32_t n_vocab, n_embd, n_pos, n_seq_max, n_batch;
    float *last;     /* [n_seq_max][n_vocab] latest logits row of each sequence */
    uint8_t *has_last; /* [n_seq_max] */
    const char *cpu;   /* the ggml CPU variant loaded ("zen4", "haswell", ...) */
} oracle;

/* ---- tensor dumps (the dump command) ---------------------------------------------------------------- */

static char dump_dir[1024]; /* "" = off */
static long dump_count;

/* The scheduler's per-node callback: asked first whether we want a node (then it computes up to it), then
 * called with the result. Only F32 nodes are written; views and permutes are walked through their strides. */
static bool dump_cb(struct ggml_tensor *t, bool ask, void *user) {
    (void)user;
    if (!dump_dir[0]) return false;
    if (ask) return t->type == GGML_TYPE_F32;
    char path[1200];
    snprintf(path, sizeof path, "%s/%05ld.f32", dump_dir, dump_count);
    FILE *f = fopen(path, "wb");
    if (!f) die("dump: cannot write %s", path);
    const char *base = t->data;
    if (!base) die("dump: %s has no host data", t->name);
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    const float v = *(const float *)(base + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] +
                                                     i3 * t->nb[3]);
                    if (fwrite(&v, sizeof v, 1, f) != 1) die("dump: write to %s failed", path);
                }
    fclose(f);
    snprintf(path, sizeof path, "%s/index.txt", dump_dir);
    f = fopen(path, "a");
    if (!f) die("dump: cannot write %s", path);
    fprintf(f, "%05ld %s %lld %lld %lld %lld\n", dump_count, t->name, (long long)t->ne[0], (long long)t->ne[1],
            (long long)t->ne[2], (long long)t->ne[3]);
    fclose(f);
    dump_count++;
    return true;
}

static void check_seq(const oracle *o, int32_t s) {
    if (s < 0 || s >= o->n_seq_max) die("sequence %d out of range [0, %d)", s, o->n_seq_max);
}

/* Parses "0" or "0,2,3" into seqs (capacity n_seq_max); returns the count. */
static int parse_seqs(const oracle *o, char *s, llama_seq_id *seqs) {
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == o->n_seq_max) die("too many sequence ids in '%s'", s);
        seqs[n] = parse_i32(t, "sequence id");
        check_seq(o, seqs[n]);
        n++;
    }
    if (n == 0) die("empty sequence id list");
    return n;
}

/* A llama_batch over arrays the driver owns (llama_batch_init sizes pos for one component only, but an
 * embedding batch for M-RoPE needs n_pos components per row, component-major). */
typedef struct {
    struct llama_batch b;
    llama_seq_id *seq_store; /* [n][n_seq_max] */
} batch_buf;

static void batch_alloc(const oracle *o, batch_buf *bb, int32_t n, int embd) {
    memset(bb, 0, sizeof *bb);
    bb->b.n_tokens = n;
    if (embd) bb->b.embd = xcalloc((size_t)n * (size_t)o->n_embd, sizeof(float));
    else bb->b.token = xcalloc((size_t)n, sizeof(llama_token));
    bb->b.pos = xcalloc((size_t)n * (size_t)(embd ? o->n_pos : 1), sizeof(llama_pos));
    bb->b.n_seq_id = xcalloc((size_t)n, sizeof(int32_t));
    bb->b.seq_id = xcalloc((size_t)n + 1, sizeof(llama_seq_id *));
    bb->seq_store = xcalloc((size_t)n * (size_t)o->n_seq_max, sizeof(llama_seq_id));
    for (int32_t i = 0; i < n; i++) bb->b.seq_id[i] = bb->seq_store + (size_t)i * (size_t)o->n_seq_max;
    bb->b.logits = xcalloc((size_t)n, sizeof(int8_t));
}

static void batch_free(batch_buf *bb) {
    free(bb->b.token);
    free(bb->b.embd);
    free(bb->b.pos);
    free(bb->b.n_seq_id);
    free(bb->b.seq_id);
    free(bb->seq_store);
    free(bb->b.logits);
}

static void write_floats(const float *p, size_t n) {
    if (n && fwrite(p, sizeof(float), n, stdout) != n) die("write to stdout failed");
}

/* Decodes a filled batch; replies "ok R V" + the logits rows, and keeps the latest row of each sequence. */
static void run_decode(oracle *o, batch_buf *bb) {
    int32_t rc = llama_decode(o->ctx, bb->b);
    if (rc != 0) {
        printf("err llama_decode returned %d\n", rc);
        return;
    }
    int32_t rows = 0;
    for (int32_t i = 0; i < bb->b.n_tokens; i++) rows += bb->b.logits[i] != 0;
    printf("ok %d %d\n", rows, o->n_vocab);
    for (int32_t i = 0; i < bb->b.n_tokens; i++) {
        if (!bb->b.logits[i]) continue;
        const float *row = llama_get_logits_ith(o->ctx, i);
        if (!row) die("llama_get_logits_ith(%d) returned NULL", i);
        write_floats(row, (size_t)o->n_vocab);
        for (int32_t k = 0; k < bb->b.n_seq_id[i]; k++) {
            llama_seq_id s = bb->b.seq_id[i][k];
            memcpy(o->last + (size_t)s * (size_t)o->n_vocab, row, (size_t)o->n_vocab * sizeof(float));
            o->has_last[s] = 1;
        }
    }
}

static void cmd_decode(oracle *o, int32_t n, char **line, size_t *cap) {
    if (n <= 0 || n > o->n_batch) die("decode: %d tokens (want 1..%d, the --batch size)", n, o->n_batch);
    batch_buf bb;
    batch_alloc(o, &bb, n, 0);
    for (int32_t i = 0; i < n; i++) {
        if (!read_line(line, cap)) die("decode: input ended after %d of %d token lines", i, n);
        char *f[MAX_ARGS];
        int nf = split(*line, f, MAX_ARGS);
        if (nf != 4) die("decode: want 'token pos seq out', got %d fields", nf);
        bb.b.token[i] = parse_i32(f[0], "token");
        if (bb.b.token[i] < 0 || bb.b.token[i] >= o->n_vocab) die("token %d out of range", bb.b.token[i]);
        bb.b.pos[i] = parse_i32(f[1], "position");
        bb.b.n_seq_id[i] = parse_seqs(o, f[2], bb.b.seq_id[i]);
        bb.b.logits[i] = (int8_t)(parse_i32(f[3], "out flag") != 0);
    }
    run_decode(o, &bb);
    batch_free(&bb);
}

static void cmd_decode_embd(oracle *o, int32_t n, char **line, size_t *cap) {
    if (n <= 0 || n > o->n_batch) die("decode_embd: %d rows (want 1..%d, the --batch size)", n, o->n_batch);
    batch_buf bb;
    batch_alloc(o, &bb, n, 1);
    for (int32_t i = 0; i < n; i++) {
        if (!read_line(line, cap)) die("decode_embd: input ended after %d of %d row lines", i, n);
        char *f[MAX_ARGS];
        int nf = split(*line, f, MAX_ARGS);
        if (nf != 3 && nf != 2 + o->n_pos)
            die("decode_embd: want 'seq out p0 [.. p%d]', got %d fields", o->n_pos - 1, nf);
        bb.b.n_seq_id[i] = parse_seqs(o, f[0], bb.b.seq_id[i]);
        bb.b.logits[i] = (int8_t)(parse_i32(f[1], "out flag") != 0);
        for (int32_t j = 0; j < o->n_pos; j++) {
            llama_pos p;
            if (nf == 3) p = (j < 3 || o->n_pos == 1) ? parse_i32(f[2], "position") : 0; /* like a text token */
            else p = parse_i32(f[2 + j], "position");
            bb.b.pos[(size_t)j * (size_t)n + (size_t)i] = p; /* component-major, as llama-batch.cpp reads it */
        }
    }
    size_t nf = (size_t)n * (size_t)o->n_embd;
    if (fread(bb.b.embd, sizeof(float), nf, stdin) != nf) die("decode_embd: short read of %zu floats", nf);
    run_decode(o, &bb);
    batch_free(&bb);
}

/* hidden R: row R's h_nextn from the main context's last decode. */
static void cmd_hidden(oracle *o, int argc, char **argv) {
    want_args(argc, 2, 2, "hidden R");
    if (!o->mtp) die("hidden: the driver was started without --mtp");
    const float *h = oracle_get_embeddings_nextn_ith(o->ctx, parse_i32(argv[1], "row"));
    if (!h) {
        printf("err no h_nextn for row %s\n", argv[1]);
        return;
    }
    printf("ok %d\n", o->n_embd);
    write_floats(h, (size_t)o->n_embd);
}

/* mtp_decode N: token + h rows through the MTP context (sequence 0). */
static void cmd_mtp_decode(oracle *o, int32_t n, char **line, size_t *cap) {
    if (!o->mtp) die("mtp_decode: the driver was started without --mtp");
    if (n <= 0 || n > o->n_batch) die("mtp_decode: %d rows (want 1..%d, the --batch size)", n, o->n_batch);
    batch_buf bb;
    batch_alloc(o, &bb, n, 1);
    bb.b.token = xcalloc((size_t)n, sizeof(llama_token)); /* both: the head reads a token and an h row */
    for (int32_t i = 0; i < n; i++) {
        if (!read_line(line, cap)) die("mtp_decode: input ended after %d of %d row lines", i, n);
        char *f[MAX_ARGS];
        int nf = split(*line, f, MAX_ARGS);
        if (nf != 3) die("mtp_decode: want 'token pos out', got %d fields", nf);
        bb.b.token[i] = parse_i32(f[0], "token");
        if (bb.b.token[i] < 0 || bb.b.token[i] >= o->n_vocab) die("token %d out of range", bb.b.token[i]);
        bb.b.pos[i] = parse_i32(f[1], "position"); /* a token batch: one component, broadcast by llama.cpp */
        bb.b.n_seq_id[i] = 1;
        bb.b.seq_id[i][0] = 0;
        bb.b.logits[i] = (int8_t)(parse_i32(f[2], "out flag") != 0);
    }
    size_t nf = (size_t)n * (size_t)o->n_embd;
    if (fread(bb.b.embd, sizeof(float), nf, stdin) != nf) die("mtp_decode: short read of %zu floats", nf);
    int32_t rc = llama_decode(o->mtp, bb.b);
    if (rc != 0) {
        printf("err llama_decode (MTP context) returned %d\n", rc);
        batch_free(&bb);
        return;
    }
    int32_t rows = 0;
    for (int32_t i = 0; i < n; i++) rows += bb.b.logits[i] != 0;
    printf("ok %d %d %d\n", rows, o->n_vocab, o->n_embd);
    for (int32_t i = 0; i < n; i++) {
        if (!bb.b.logits[i]) continue;
        const float *row = llama_get_logits_ith(o->mtp, i);
        if (!row) die("llama_get_logits_ith(%d) on the MTP context returned NULL", i);
        write_floats(row, (size_t)o->n_vocab);
    }
    for (int32_t i = 0; i < n; i++) {
        if (!bb.b.logits[i]) continue;
        const float *h = oracle_get_embeddings_nextn_ith(o->mtp, i);
        if (!h) die("no h_nextn for MTP row %d", i);
        write_floats(h, (size_t)o->n_embd);
    }
    batch_free(&bb);
}

static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static void cmd_greedy(oracle *o, int argc, char **argv) {
    want_args(argc, 3, 4, "greedy N SEQ [POS]");
    int32_t n = parse_i32(argv[1], "count"), s = parse_i32(argv[2], "sequence");
    check_seq(o, s);
    if (n <= 0) die("greedy: count %d", n);
    if (!o->has_last[s]) die("greedy: sequence %d has no logits yet (decode its prompt first)", s);
    llama_pos pos = argc == 4 ? parse_i32(argv[3], "position") : llama_memory_seq_pos_max(o->mem, s) + 1;
    llama_token *toks = xmalloc((size_t)n * sizeof *toks);
    float *rows = xmalloc((size_t)n * (size_t)o->n_vocab * sizeof(float));
    float *last = o->last + (size_t)s * (size_t)o->n_vocab;
    batch_buf bb;
    batch_alloc(o, &bb, 1, 0);
    for (int32_t i = 0; i < n; i++) {
        memcpy(rows + (size_t)i * (size_t)o->n_vocab, last, (size_t)o->n_vocab * sizeof(float));
        toks[i] = argmax(last, o->n_vocab);
        bb.b.token[0] = toks[i];
        bb.b.pos[0] = pos + i;
        bb.b.n_seq_id[0] = 1;
        bb.b.seq_id[0][0] = s;
        bb.b.logits[0] = 1;
        int32_t rc = llama_decode(o->ctx, bb.b);
        if (rc != 0) {
            printf("err llama_decode returned %d at greedy step %d\n", rc, i);
            goto out;
        }
        const float *row = llama_get_logits_ith(o->ctx, 0);
        if (!row) die("llama_get_logits_ith(0) returned NULL");
        memcpy(last, row, (size_t)o->n_vocab * sizeof(float));
    }
    printf("ok");
    for (int32_t i = 0; i < n; i++) printf(" %d", toks[i]);
    printf("\n");
    write_floats(rows, (size_t)n * (size_t)o->n_vocab);
out:
    batch_free(&bb);
    free(toks);
    free(rows);
}

static void cmd_tokenize(oracle *o, int argc, char **argv) {
    want_args(argc, 4, 4, "tokenize ADD_SPECIAL PARSE_SPECIAL HEX");
    int add = parse_i32(argv[1], "add_special") != 0, parse = parse_i32(argv[2], "parse_special") != 0;
    size_t len;
    char *text = parse_hex(argv[3], &len);
    if (len > INT32_MAX / 2) die("tokenize: text too long");
    int32_t cap = (int32_t)len + 8;
    llama_token *toks = xmalloc((size_t)cap * sizeof *toks);
    int32_t n = llama_tokenize(o->vocab, text, (int32_t)len, toks, cap, add, parse);
    if (n < 0 && n != INT32_MIN) { /* more tokens than bytes: possible with added specials; ask again */
        cap = -n;
        free(toks);
        toks = xmalloc((size_t)cap * sizeof *toks);
        n = llama_tokenize(o->vocab, text, (int32_t)len, toks, cap, add, parse);
    }
    if (n < 0) {
        printf("err llama_tokenize returned %d\n", n);
    } else {
        printf("ok %d", n);
        for (int32_t i = 0; i < n; i++) printf(" %d", toks[i]);
        printf("\n");
    }
    free(toks);
    free(text);
}

static void cmd_detokenize(oracle *o, int argc, char **argv) {
    if (argc < 3) die("usage: detokenize SPECIAL N t0 ...");
    int special = parse_i32(argv[1], "special") != 0;
    int32_t n = parse_i32(argv[2], "count");
    if (n < 0 || n != argc - 3) die("detokenize: count %d but %d tokens", n, argc - 3);
    printf("ok ");
    for (int32_t i = 0; i < n; i++) {
        llama_token t = parse_i32(argv[3 + i], "token");
        if (t < 0 || t >= o->n_vocab) die("token %d out of range", t);
        char buf[256];
        int32_t m = llama_token_to_piece(o->vocab, t, buf, sizeof buf, 0, special);
        if (m < 0) die("detokenize: piece of token %d is longer than %zu bytes", t, sizeof buf);
        for (int32_t k = 0; k < m; k++) printf("%02x", (unsigned char)buf[k]);
    }
    if (n == 0) printf("-");
    printf("\n");
}

static int write_file(const char *path, const uint8_t *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *data = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        if (size >= 0 && fseek(f, 0, SEEK_SET) == 0) {
            data = xmalloc((size_t)size);
            if (fread(data, 1, (size_t)size, f) != (size_t)size) {
                free(data);
                data = NULL;
            }
            *n = (size_t)size;
        }
    }
    fclose(f);
    return data;
}

static void cmd_state(oracle *o, int argc, char **argv, int seq, int save) {
    want_args(argc, seq ? 3 : 2, seq ? 3 : 2,
              seq ? "state_seq_save|state_seq_load S FILE" : "state_save|state_load FILE");
    int32_t s = -1;
    if (seq) {
        s = parse_i32(argv[1], "sequence");
        check_seq(o, s);
    }
    const char *path = argv[seq ? 2 : 1];
    if (save) {
        size_t cap = seq ? llama_state_seq_get_size(o->ctx, s) : llama_state_get_size(o->ctx);
        uint8_t *buf = xmalloc(cap);
        size_t n = seq ? llama_state_seq_get_data(o->ctx, buf, cap, s) : llama_state_get_data(o->ctx, buf, cap);
        if (n == 0) printf("err state get_data returned 0\n");
        else if (!write_file(path, buf, n)) printf("err cannot write %s: %s\n", path, strerror(errno));
        else printf("ok %zu\n", n);
        free(buf);
    } else {
        size_t n = 0;
        uint8_t *buf = read_file(path, &n);
        if (!buf) {
            printf("err cannot read %s: %s\n", path, strerror(errno));
            return;
        }
        size_t used = seq ? llama_state_seq_set_data(o->ctx, buf, n, s) : llama_state_set_data(o->ctx, buf, n);
        printf("ok %zu\n", used);
        free(buf);
    }
}

/* Runs one command line; returns 0 on quit. */
static int run_command(oracle *o, char **line, size_t *cap) {
    char *argv[MAX_ARGS * 4];
    /* detokenize may carry many ids: split with a larger bound by counting fields first */
    size_t fields = 1;
    for (const char *c = *line; *c; c++) fields += *c == ' ' || *c == '\t';
    char **av = argv;
    if (fields > MAX_ARGS * 4) av = xmalloc(fields * sizeof *av);
    int argc = split(*line, av, fields > MAX_ARGS * 4 ? (int)fields : MAX_ARGS * 4);
    int go_on = 1;
    if (argc == 0) die("empty command");
    const char *c = av[0];
    if (!strcmp(c, "info")) {
        printf("ok n_vocab %d n_embd %d n_layer %d n_pos %d n_seq_max %d cpu %s\n", o->n_vocab, o->n_embd,
               llama_model_n_layer(o->model), o->n_pos, o->n_seq_max, o->cpu);
    } else if (!strcmp(c, "dump")) {
        want_args(argc, 2, 2, "dump DIR|-");
        if (strlen(av[1]) >= sizeof dump_dir) die("dump: directory name too long");
        snprintf(dump_dir, sizeof dump_dir, "%s", strcmp(av[1], "-") ? av[1] : "");
        dump_count = 0;
        printf("ok\n");
    } else if (!strcmp(c, "tokenize")) {
        cmd_tokenize(o, argc, av);
    } else if (!strcmp(c, "detokenize")) {
        cmd_detokenize(o, argc, av);
    } else if (!strcmp(c, "decode") || !strcmp(c, "decode_embd")) {
        want_args(argc, 2, 2, "decode|decode_embd N");
        int32_t n = parse_i32(av[1], "count");
        int embd = !strcmp(c, "decode_embd");
        if (av != argv) free(av);
        av = NULL;
        if (embd) cmd_decode_embd(o, n, line, cap);
        else cmd_decode(o, n, line, cap);
    } else if (!strcmp(c, "greedy")) {
        cmd_greedy(o, argc, av);
    } else if (!strcmp(c, "hidden")) {
        cmd_hidden(o, argc, av);
    } else if (!strcmp(c, "mtp_decode")) {
        want_args(argc, 2, 2, "mtp_decode N");
        int32_t n = parse_i32(av[1], "count");
        if (av != argv) free(av);
        av = NULL;
        cmd_mtp_decode(o, n, line, cap);
    } else if (!strcmp(c, "mtp_seq_rm")) {
        want_args(argc, 2, 2, "mtp_seq_rm P0");
        if (!o->mtp) die("mtp_seq_rm: the driver was started without --mtp");
        bool ok = llama_memory_seq_rm(llama_get_memory(o->mtp), 0, parse_i32(av[1], "p0"), -1);
        printf("ok %d\n", ok ? 1 : 0);
    } else if (!strcmp(c, "seq_rm")) {
        want_args(argc, 4, 4, "seq_rm S P0 P1");
        bool ok =
            llama_memory_seq_rm(o->mem, parse_i32(av[1], "sequence"), parse_i32(av[2], "p0"), parse_i32(av[3], "p1"));
        printf("ok %d\n", ok ? 1 : 0);
    } else if (!strcmp(c, "seq_cp")) {
        want_args(argc, 5, 5, "seq_cp S D P0 P1");
        int32_t s = parse_i32(av[1], "sequence"), d = parse_i32(av[2], "sequence");
        check_seq(o, s);
        check_seq(o, d);
        llama_memory_seq_cp(o->mem, s, d, parse_i32(av[3], "p0"), parse_i32(av[4], "p1"));
        if (o->has_last[s]) { /* the copy continues from the source's latest logits */
            memcpy(o->last + (size_t)d * (size_t)o->n_vocab, o->last + (size_t)s * (size_t)o->n_vocab,
                   (size_t)o->n_vocab * sizeof(float));
            o->has_last[d] = 1;
        }
        printf("ok\n");
    } else if (!strcmp(c, "seq_keep")) {
        want_args(argc, 2, 2, "seq_keep S");
        int32_t s = parse_i32(av[1], "sequence");
        check_seq(o, s);
        llama_memory_seq_keep(o->mem, s);
        printf("ok\n");
    } else if (!strcmp(c, "seq_add")) {
        want_args(argc, 5, 5, "seq_add S P0 P1 DELTA");
        llama_memory_seq_add(o->mem, parse_i32(av[1], "sequence"), parse_i32(av[2], "p0"), parse_i32(av[3], "p1"),
                             parse_i32(av[4], "delta"));
        printf("ok\n");
    } else if (!strcmp(c, "seq_div")) {
        want_args(argc, 5, 5, "seq_div S P0 P1 K");
        int32_t k = parse_i32(av[4], "divisor");
        if (k <= 1) die("seq_div: divisor %d (llama.cpp wants > 1)", k);
        llama_memory_seq_div(o->mem, parse_i32(av[1], "sequence"), parse_i32(av[2], "p0"), parse_i32(av[3], "p1"), k);
        printf("ok\n");
    } else if (!strcmp(c, "pos_range")) {
        want_args(argc, 2, 2, "pos_range S");
        int32_t s = parse_i32(av[1], "sequence");
        check_seq(o, s);
        printf("ok %d %d\n", llama_memory_seq_pos_min(o->mem, s), llama_memory_seq_pos_max(o->mem, s));
    } else if (!strcmp(c, "clear")) {
        want_args(argc, 1, 1, "clear");
        llama_memory_clear(o->mem, true);
        memset(o->has_last, 0, (size_t)o->n_seq_max);
        printf("ok\n");
    } else if (!strcmp(c, "state_seq_save") || !strcmp(c, "state_seq_load")) {
        cmd_state(o, argc, av, 1, !strcmp(c, "state_seq_save"));
    } else if (!strcmp(c, "state_save") || !strcmp(c, "state_load")) {
        cmd_state(o, argc, av, 0, !strcmp(c, "state_save"));
    } else if (!strcmp(c, "quit")) {
        printf("ok\n");
        go_on = 0;
    } else {
        die("unknown command '%s'", c);
    }
    if (av && av != argv) free(av);
    if (fflush(stdout) != 0) die("write to stdout failed");
    return go_on;
}

static void usage(void) {
    fprintf(stderr, "usage: oracle -m FILE [--ctx N] [--batch N] [--ubatch N] [--threads N] [--seq-max N]\n"
                    "              [--kv f32|f16] [--fa on|off|auto] [--kv-unified 0|1] [--default-bufts] [--mtp] [--verbose]\n"
                    "       oracle quantize IN OUT FTYPE\n"
                    "commands on stdin: see the top of tests/oracle/oracle.c\n");
    exit(2);
}

/* llama.cpp's quantizer on a file, as llama-quantize runs it (2 threads; the ggml CPU backend is not needed). */
static int quantize_main(int argc, char **argv) {
    if (argc != 5) usage();
    llama_log_set(log_cb, NULL);
    llama_backend_init();
    struct llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.ftype = (enum llama_ftype)parse_i32(argv[4], "ftype");
    qp.nthread = 2;
    const uint32_t rc = llama_model_quantize(argv[2], argv[3], &qp);
    llama_backend_free();
    if (rc != 0) {
        fprintf(stderr, "oracle: llama_model_quantize(%s, %s, ftype %s) failed (%u)\n", argv[2], argv[3], argv[4], rc);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "quantize")) return quantize_main(argc, argv);
    const char *path = NULL;
    int32_t n_ctx = 4096, n_batch = 0, n_ubatch = 512, n_threads = 1, n_seq_max = 4, unified = 1, default_bufts = 0;
    int mtp = 0;
    enum ggml_type kv = GGML_TYPE_F32;
    enum llama_flash_attn_type fa = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--default-bufts")) { default_bufts = 1; continue; }
        if (!strcmp(a, "--verbose")) { verbose = 1; continue; }
        if (!strcmp(a, "--mtp")) { mtp = 1; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) usage();
        if (!v) { fprintf(stderr, "oracle: %s needs a value\n", a); usage(); }
        i++;
        if (!strcmp(a, "-m")) path = v;
        else if (!strcmp(a, "--ctx")) n_ctx = parse_i32(v, "--ctx");
        else if (!strcmp(a, "--batch")) n_batch = parse_i32(v, "--batch");
        else if (!strcmp(a, "--ubatch")) n_ubatch = parse_i32(v, "--ubatch");
        else if (!strcmp(a, "--threads")) n_threads = parse_i32(v, "--threads");
        else if (!strcmp(a, "--seq-max")) n_seq_max = parse_i32(v, "--seq-max");
        else if (!strcmp(a, "--kv-unified")) unified = parse_i32(v, "--kv-unified") != 0;
        else if (!strcmp(a, "--kv")) {
            if (!strcmp(v, "f32")) kv = GGML_TYPE_F32;
            else if (!strcmp(v, "f16")) kv = GGML_TYPE_F16;
            else { fprintf(stderr, "oracle: --kv %s (want f32 or f16)\n", v); usage(); }
        } else if (!strcmp(a, "--fa")) {
            if (!strcmp(v, "on")) fa = LLAMA_FLASH_ATTN_TYPE_ENABLED;
            else if (!strcmp(v, "off")) fa = LLAMA_FLASH_ATTN_TYPE_DISABLED;
            else if (!strcmp(v, "auto")) fa = LLAMA_FLASH_ATTN_TYPE_AUTO;
            else { fprintf(stderr, "oracle: --fa %s (want on, off or auto)\n", v); usage(); }
        } else { fprintf(stderr, "oracle: unknown option %s\n", a); usage(); }
    }
    if (!path) usage();
    if (n_ctx <= 0 || n_ubatch <= 0 || n_threads <= 0 || n_seq_max <= 0 || n_batch < 0) {
        fprintf(stderr, "oracle: sizes must be positive\n");
        usage();
    }
    if (n_batch == 0) n_batch = n_ctx;

    /* The CPU backend is a plug-in found next to libggml; the directory is the one we were linked against. One
     * variant of it is loaded: the one ggml_backend_load_best would pick, or BRAID_GGML_CPU's (ggml_variant.h),
     * the same choice the tests make in their own process. */
    const char *libdir = getenv("BRAID_ORACLE_LIB_DIR");
    if (!libdir || !*libdir) libdir = ORACLE_LIB_DIR;
    llama_log_set(log_cb, NULL);
    char cpu_path[4096], cpu_name[128], why[512];
    if (ggml_variant_pick(libdir, cpu_path, sizeof cpu_path, cpu_name, sizeof cpu_name, why, sizeof why) !=
        GGML_VARIANT_OK)
        die("%s", why);
    if (!ggml_backend_load(cpu_path)) die("ggml could not load %s", cpu_path);
    if (verbose) fprintf(stderr, "oracle: ggml CPU backend %s (%s)\n", cpu_name, cpu_path);
    llama_backend_init();

    struct llama_model_params mp = llama_model_default_params();
    mp.use_extra_bufts = default_bufts != 0;
    mp.load_mtp = mtp != 0;
    oracle o = {0};
    o.model = llama_model_load_from_file(path, mp);
    if (!o.model) die("llama.cpp could not load %s (its log above says why)", path);

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)n_batch;
    cp.n_ubatch = (uint32_t)(n_ubatch < n_batch ? n_ubatch : n_batch);
    cp.n_seq_max = (uint32_t)n_seq_max;
    cp.n_threads = cp.n_threads_batch = n_threads;
    cp.type_k = cp.type_v = kv;
    cp.flash_attn_type = fa;
    cp.kv_unified = unified != 0;
    cp.no_perf = true;
    cp.cb_eval = dump_cb; /* writes nothing until a dump command names a directory */
    cp.cb_eval_user_data = NULL;
    o.ctx = llama_init_from_model(o.model, cp);
    if (!o.ctx) die("llama.cpp could not create a context for %s", path);
    if (mtp) {
        if (!oracle_set_embeddings_nextn || !oracle_get_embeddings_nextn_ith)
            die("--mtp: this llama library has no llama_set_embeddings_nextn / llama_get_embeddings_nextn_ith");
        struct llama_context_params mcp = cp;
        mcp.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
        mcp.n_seq_max = 1;
        o.mtp = llama_init_from_model(o.model, mcp);
        if (!o.mtp) die("llama.cpp could not create an MTP context for %s (no nextn block?)", path);
        oracle_set_embeddings_nextn(o.ctx, true, false); /* every row's h, as draft-mtp sets it */
        oracle_set_embeddings_nextn(o.mtp, true, true);
    }

    o.vocab = llama_model_get_vocab(o.model);
    o.mem = llama_get_memory(o.ctx);
    o.n_vocab = llama_vocab_n_tokens(o.vocab);
    o.n_embd = llama_model_n_embd_inp(o.model);
    enum llama_rope_type rt = llama_model_rope_type(o.model);
    o.n_pos = (rt == LLAMA_ROPE_TYPE_MROPE || rt == LLAMA_ROPE_TYPE_IMROPE || rt == LLAMA_ROPE_TYPE_VISION) ? 4 : 1;
    o.n_seq_max = n_seq_max;
    o.cpu = cpu_name;
    o.n_batch = (int32_t)llama_n_batch(o.ctx);
    o.last = xcalloc((size_t)n_seq_max * (size_t)o.n_vocab, sizeof(float));
    o.has_last = xcalloc((size_t)n_seq_max, 1);

    char *line = NULL;
    size_t cap = 0;
    while (read_line(&line, &cap))
        if (!run_command(&o, &line, &cap)) break;
    free(line);
    free(o.last);
    free(o.has_last);
    if (o.mtp) llama_free(o.mtp);
    llama_free(o.ctx);
    llama_model_free(o.model);
    llama_backend_free();
    return 0;
}
