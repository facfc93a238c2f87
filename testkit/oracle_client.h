/* oracle_client.h — runs llama.cpp (the oracle driver, tests/oracle/oracle.c) as a subprocess for the
 * conformance tests, and speaks its line protocol (described at the top of oracle.c).
 *
 *     oracle *o;
 *     CHECK_STATUS(oracle_start(path, "--ctx 512 --seq-max 2", &o), BRAID_OK);
 *     float *logits; int32_t rows;
 *     CHECK_STATUS(oracle_decode(o, n, tokens, NULL, NULL, NULL, &logits, &rows), BRAID_OK);  // rows x n_vocab
 *     ...  bd_free(logits);
 *     CHECK_STATUS(oracle_cmd(o, &reply, "seq_rm %d %d %d", 0, 4, -1), BRAID_OK);          // reply "1" / "0"
 *     CHECK_STATUS(oracle_stop(o), BRAID_OK);
 *
 * Every function returns a braid_status; an "err" reply or a driver that died becomes a failure whose
 * braid_last_error() names the command and llama.cpp's reason (its log goes to the test's stderr). Buffers
 * handed out are allocated with bd_malloc and released by the caller with bd_free. The driver binary is
 * $BRAID_ORACLE_BIN, else $BRAID_BUILD_DIR/tests/oracle (CTest sets BRAID_BUILD_DIR). */
#ifndef BRAID_TESTS_ORACLE_CLIENT_H
#define BRAID_TESTS_ORACLE_CLIENT_H

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/status.h"
#include "braid.h"

extern char **environ;

typedef struct oracle {
    pid_t pid;
    FILE *in;    /* commands to the driver */
    FILE *out;   /* replies from the driver */
    char *reply; /* the latest reply line, without "ok" and the newline */
    size_t reply_cap;
    int32_t n_vocab, n_embd, n_layer, n_pos, n_seq_max;
    char cpu[64]; /* the ggml CPU variant the driver loaded (ggml_variant.h) */
} oracle;

/* Path of the driver binary (static storage). */
static inline const char *oracle_binary(void) {
    static char path[4096];
    const char *bin = getenv("BRAID_ORACLE_BIN");
    if (bin && *bin) return bin;
    const char *build = getenv("BRAID_BUILD_DIR");
    snprintf(path, sizeof path, "%s/tests/oracle", build && *build ? build : "build");
    return path;
}

/* Reads one reply line; "ok[ values]" -> BRAID_OK with o->reply = the values; "err reason" -> failure. */
static inline braid_status oracle_read_reply(oracle *o, const char *what) {
    ssize_t n = getline(&o->reply, &o->reply_cap, o->out);
    if (n < 0) return bd_error(BRAID_E_IO, "oracle: no reply to '%s' (the driver died; its stderr says why)", what);
    while (n > 0 && (o->reply[n - 1] == '\n' || o->reply[n - 1] == '\r')) o->reply[--n] = 0;
    if (!strncmp(o->reply, "ok", 2) && (o->reply[2] == 0 || o->reply[2] == ' ')) {
        memmove(o->reply, o->reply + (o->reply[2] ? 3 : 2), strlen(o->reply + (o->reply[2] ? 3 : 2)) + 1);
        return BRAID_OK;
    }
    return bd_error(BRAID_E_INVALID, "oracle: '%s' failed: %s", what, o->reply);
}

static inline braid_status oracle_vsend(oracle *o, const char *fmt, va_list ap) {
    if (vfprintf(o->in, fmt, ap) < 0 || fputc('\n', o->in) == EOF)
        return bd_error(BRAID_E_IO, "oracle: cannot write to the driver: %s", strerror(errno));
    return BRAID_OK;
}

/* Sends one command line (printf-style, no newline) and reads its reply; *reply (may be NULL) points at the
 * values after "ok", valid until the next command. For commands that do not carry binary data. */
static inline braid_status oracle_cmd(oracle *o, const char **reply, const char *fmt, ...) BD_PRINTF(3, 4);
static inline braid_status oracle_cmd(oracle *o, const char **reply, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    braid_status s = oracle_vsend(o, fmt, ap);
    va_end(ap);
    if (s == BRAID_OK && fflush(o->in) != 0) s = bd_error(BRAID_E_IO, "oracle: cannot write to the driver");
    if (s == BRAID_OK) s = oracle_read_reply(o, fmt);
    if (s == BRAID_OK && reply) *reply = o->reply;
    return s;
}

/* Waits for the driver to end; BRAID_OK only if it exited with status 0. */
static inline braid_status oracle_wait(oracle *o) {
    int st = 0;
    if (o->in) fclose(o->in);
    if (o->out) fclose(o->out);
    o->in = o->out = NULL;
    pid_t r;
    do r = waitpid(o->pid, &st, 0);
    while (r < 0 && errno == EINTR);
    bd_free(o->reply);
    pid_t pid = o->pid;
    bd_free(o);
    if (r < 0) return bd_error(BRAID_E_IO, "oracle: waitpid(%d): %s", (int)pid, strerror(errno));
    if (WIFSIGNALED(st)) return bd_error(BRAID_E_IO, "oracle: driver killed by signal %d", WTERMSIG(st));
    if (WEXITSTATUS(st) != 0) return bd_error(BRAID_E_IO, "oracle: driver exited with status %d", WEXITSTATUS(st));
    return BRAID_OK;
}

/* Ends the driver ("quit") and reaps it; o is freed in every case. */
static inline braid_status oracle_stop(oracle *o) {
    if (!o) return BRAID_OK;
    braid_status s = oracle_cmd(o, NULL, "quit");
    braid_status w = oracle_wait(o);
    return s != BRAID_OK ? s : w;
}

/* Starts the driver on a GGUF. opts: extra options separated by spaces (e.g. "--ctx 512 --kv f16"), or NULL.
 * On success *out is running and has read "info". */
static inline braid_status oracle_start(const char *model, const char *opts, oracle **out) {
    *out = NULL;
    signal(SIGPIPE, SIG_IGN); /* a dead driver must be a failed write, not a dead test */
    char *opt_copy = bd_strdup(opts ? opts : "");
    const char *argv[64];
    int argc = 0;
    argv[argc++] = oracle_binary();
    argv[argc++] = "-m";
    argv[argc++] = model;
    char *save = NULL;
    for (char *t = strtok_r(opt_copy, " ", &save); t && argc < 62; t = strtok_r(NULL, " ", &save)) argv[argc++] = t;
    argv[argc] = NULL;

    int to_child[2], from_child[2];
    if (pipe(to_child) != 0) {
        bd_free(opt_copy);
        return bd_error(BRAID_E_IO, "oracle: pipe: %s", strerror(errno));
    }
    if (pipe(from_child) != 0) {
        close(to_child[0]);
        close(to_child[1]);
        bd_free(opt_copy);
        return bd_error(BRAID_E_IO, "oracle: pipe: %s", strerror(errno));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&fa, from_child[1], 1);
    posix_spawn_file_actions_addclose(&fa, to_child[1]);
    posix_spawn_file_actions_addclose(&fa, from_child[0]);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    bd_free(opt_copy);
    close(to_child[0]);
    close(from_child[1]);
    if (rc != 0) {
        close(to_child[1]);
        close(from_child[0]);
        return bd_error(BRAID_E_IO, "oracle: cannot run %s: %s", oracle_binary(), strerror(rc));
    }
    oracle *o = bd_calloc(1, sizeof *o);
    if (!o) {
        close(to_child[1]);
        close(from_child[0]);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return bd_error(BRAID_E_NOMEM, "oracle: out of memory");
    }
    o->pid = pid;
    o->in = fdopen(to_child[1], "w");
    o->out = fdopen(from_child[0], "r");
    if (!o->in || !o->out) {
        if (!o->in) close(to_child[1]);
        if (!o->out) close(from_child[0]);
        oracle_wait(o);
        return bd_error(BRAID_E_IO, "oracle: fdopen failed");
    }
    const char *r;
    braid_status s = oracle_cmd(o, &r, "info");
    if (s == BRAID_OK && sscanf(r, "n_vocab %d n_embd %d n_layer %d n_pos %d n_seq_max %d cpu %63s", &o->n_vocab,
                                &o->n_embd, &o->n_layer, &o->n_pos, &o->n_seq_max, o->cpu) != 6)
        s = bd_error(BRAID_E_FORMAT, "oracle: bad info reply '%s'", r);
    if (s != BRAID_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", braid_last_error());
        oracle_wait(o);
        return bd_error(s, "oracle: starting on %s: %s", model, msg);
    }
    *out = o;
    return BRAID_OK;
}

/* Reads the reply of a decode-like command: "ok R V" then R*V floats into a new buffer (*logits, bd_free). */
static inline braid_status oracle_read_rows(oracle *o, const char *what, float **logits, int32_t *rows) {
    *logits = NULL;
    *rows = 0;
    BD_TRY(oracle_read_reply(o, what));
    int32_t r, v;
    if (sscanf(o->reply, "%d %d", &r, &v) != 2 || r < 0 || v != o->n_vocab)
        return bd_error(BRAID_E_FORMAT, "oracle: bad reply to %s: '%s'", what, o->reply);
    float *buf = bd_mallocn((size_t)r * (size_t)v + 1, sizeof(float));
    if (!buf) return bd_error(BRAID_E_NOMEM, "oracle: out of memory for %d logits rows", r);
    if (fread(buf, sizeof(float), (size_t)r * (size_t)v, o->out) != (size_t)r * (size_t)v) {
        bd_free(buf);
        return bd_error(BRAID_E_IO, "oracle: short logits data after %s", what);
    }
    *logits = buf;
    *rows = r;
    return BRAID_OK;
}

/* The position after the last one of seq in the driver's memory (0 for an empty sequence). */
static inline braid_status oracle_next_pos(oracle *o, int32_t seq, int32_t *pos) {
    const char *r;
    BD_TRY(oracle_cmd(o, &r, "pos_range %d", seq));
    int32_t lo, hi;
    if (sscanf(r, "%d %d", &lo, &hi) != 2) return bd_error(BRAID_E_FORMAT, "oracle: bad pos_range reply '%s'", r);
    *pos = hi + 1;
    return BRAID_OK;
}

/* Fills pos_out[n] with the next positions of each row's sequence when pos is NULL (pos_max + 1, counting
 * the rows of the batch in order), else copies pos. */
static inline braid_status oracle_batch_positions(oracle *o, int32_t n, const int32_t *pos, const int32_t *seq,
                                                  int32_t *pos_out) {
    if (pos) {
        memcpy(pos_out, pos, (size_t)n * sizeof *pos);
        return BRAID_OK;
    }
    for (int32_t i = 0; i < n; i++) {
        int32_t s = seq ? seq[i] : 0, j;
        for (j = i - 1; j >= 0 && (seq ? seq[j] : 0) != s; j--) {
        }
        if (j >= 0) pos_out[i] = pos_out[j] + 1;
        else BD_TRY(oracle_next_pos(o, s, &pos_out[i]));
    }
    return BRAID_OK;
}

/* Decodes n tokens. pos: one per token or NULL (each sequence continues after its last position);
 * seq: NULL = all in sequence 0; out: a flag per token, or NULL = the last token of each sequence.
 * *logits gets rows x n_vocab floats (the flagged tokens in batch order); bd_free it. */
static inline braid_status oracle_decode(oracle *o, int32_t n, const int32_t *tokens, const int32_t *pos,
                                         const int32_t *seq, const uint8_t *out, float **logits, int32_t *rows) {
    *logits = NULL;
    *rows = 0;
    int32_t *p = bd_mallocn((size_t)n + 1, sizeof *p);
    if (!p) return bd_error(BRAID_E_NOMEM, "oracle: out of memory");
    braid_status s = oracle_batch_positions(o, n, pos, seq, p);
    if (s == BRAID_OK && fprintf(o->in, "decode %d\n", n) < 0) s = bd_error(BRAID_E_IO, "oracle: write failed");
    for (int32_t i = 0; s == BRAID_OK && i < n; i++) {
        int32_t si = seq ? seq[i] : 0;
        int last = 1;
        for (int32_t j = i + 1; j < n; j++) last &= (seq ? seq[j] : 0) != si;
        int flag = out ? out[i] != 0 : last;
        if (fprintf(o->in, "%d %d %d %d\n", tokens[i], p[i], si, flag) < 0)
            s = bd_error(BRAID_E_IO, "oracle: write failed");
    }
    bd_free(p);
    if (s == BRAID_OK && fflush(o->in) != 0) s = bd_error(BRAID_E_IO, "oracle: write failed");
    if (s == BRAID_OK) s = oracle_read_rows(o, "decode", logits, rows);
    return s;
}

/* Decodes n embedding rows (embd: [n][n_embd]). pos: [n][n_pos_given] token-major (n_pos_given 1 or the
 * model's n_pos; 1 gives each row the text-token position (p, p, p, 0)); seq/out as for oracle_decode. */
static inline braid_status oracle_decode_embd(oracle *o, int32_t n, const float *embd, const int32_t *pos,
                                              int32_t n_pos_given, const int32_t *seq, const uint8_t *out,
                                              float **logits, int32_t *rows) {
    *logits = NULL;
    *rows = 0;
    if (n_pos_given != 1 && n_pos_given != o->n_pos)
        return bd_error(BRAID_E_INVALID, "oracle: %d position components (model has %d)", n_pos_given, o->n_pos);
    braid_status s = BRAID_OK;
    if (fprintf(o->in, "decode_embd %d\n", n) < 0) s = bd_error(BRAID_E_IO, "oracle: write failed");
    for (int32_t i = 0; s == BRAID_OK && i < n; i++) {
        int32_t si = seq ? seq[i] : 0;
        int last = 1;
        for (int32_t j = i + 1; j < n; j++) last &= (seq ? seq[j] : 0) != si;
        int flag = out ? out[i] != 0 : last;
        fprintf(o->in, "%d %d", si, flag);
        for (int32_t k = 0; k < n_pos_given; k++)
            fprintf(o->in, " %d", pos[(size_t)i * (size_t)n_pos_given + (size_t)k]);
        if (fputc('\n', o->in) == EOF) s = bd_error(BRAID_E_IO, "oracle: write failed");
    }
    size_t nf = (size_t)n * (size_t)o->n_embd;
    if (s == BRAID_OK && fwrite(embd, sizeof(float), nf, o->in) != nf) s = bd_error(BRAID_E_IO, "oracle: write failed");
    if (s == BRAID_OK && fflush(o->in) != 0) s = bd_error(BRAID_E_IO, "oracle: write failed");
    if (s == BRAID_OK) s = oracle_read_rows(o, "decode_embd", logits, rows);
    return s;
}

/* (driver started with --mtp) Row `row` of the main context's last decode: its hidden state after the output
 * norm (h_nextn), n_embd floats into h. */
static inline braid_status oracle_hidden(oracle *o, int32_t row, float *h) {
    const char *r;
    BD_TRY(oracle_cmd(o, &r, "hidden %d", row));
    if (atoi(r) != o->n_embd) return bd_error(BRAID_E_FORMAT, "oracle: bad hidden reply '%s'", r);
    if (fread(h, sizeof(float), (size_t)o->n_embd, o->out) != (size_t)o->n_embd)
        return bd_error(BRAID_E_IO, "oracle: short hidden data");
    return BRAID_OK;
}

/* (driver started with --mtp) n rows through llama.cpp's MTP context: token[i] at text position pos[i] with
 * hidden state h[i] ([n][n_embd]); out: a flag per row. *logits ([rows][n_vocab]) and *h_out ([rows][n_embd],
 * the head's own h_nextn) are new buffers (bd_free). */
static inline braid_status oracle_mtp_decode(oracle *o, int32_t n, const int32_t *token, const int32_t *pos,
                                             const float *h, const uint8_t *out, float **logits, float **h_out,
                                             int32_t *rows) {
    *logits = *h_out = NULL;
    *rows = 0;
    braid_status s = BRAID_OK;
    if (fprintf(o->in, "mtp_decode %d\n", n) < 0) s = bd_error(BRAID_E_IO, "oracle: write failed");
    for (int32_t i = 0; s == BRAID_OK && i < n; i++)
        if (fprintf(o->in, "%d %d %d\n", token[i], pos[i], out[i] != 0) < 0)
            s = bd_error(BRAID_E_IO, "oracle: write failed");
    size_t nf = (size_t)n * (size_t)o->n_embd;
    if (s == BRAID_OK && fwrite(h, sizeof(float), nf, o->in) != nf) s = bd_error(BRAID_E_IO, "oracle: write failed");
    if (s == BRAID_OK && fflush(o->in) != 0) s = bd_error(BRAID_E_IO, "oracle: write failed");
    BD_TRY(s);
    BD_TRY(oracle_read_reply(o, "mtp_decode"));
    int32_t r, v, e;
    if (sscanf(o->reply, "%d %d %d", &r, &v, &e) != 3 || r < 0 || v != o->n_vocab || e != o->n_embd)
        return bd_error(BRAID_E_FORMAT, "oracle: bad reply to mtp_decode: '%s'", o->reply);
    float *lg = bd_mallocn((size_t)r * (size_t)v + 1, sizeof(float));
    float *ho = bd_mallocn((size_t)r * (size_t)e + 1, sizeof(float));
    if (!lg || !ho) s = bd_error(BRAID_E_NOMEM, "oracle: out of memory for %d MTP rows", r);
    if (s == BRAID_OK && fread(lg, sizeof(float), (size_t)r * (size_t)v, o->out) != (size_t)r * (size_t)v)
        s = bd_error(BRAID_E_IO, "oracle: short MTP logits data");
    if (s == BRAID_OK && fread(ho, sizeof(float), (size_t)r * (size_t)e, o->out) != (size_t)r * (size_t)e)
        s = bd_error(BRAID_E_IO, "oracle: short MTP hidden data");
    if (s != BRAID_OK) {
        bd_free(lg);
        bd_free(ho);
        return s;
    }
    *logits = lg;
    *h_out = ho;
    *rows = r;
    return BRAID_OK;
}

/* Appends n greedy tokens to seq (which must have logits from an earlier decode) at positions pos, pos+1, ...
 * (pos < 0: after the sequence's last position; give it explicitly after an M-RoPE image, where text resumes
 * at t0 + max(nx, ny)). tokens gets n ids; logits (may be NULL) gets a new n x n_vocab buffer: the rows each
 * token was chosen from. */
static inline braid_status oracle_greedy_at(oracle *o, int32_t n, int32_t seq, int32_t pos, int32_t *tokens,
                                            float **logits) {
    if (logits) *logits = NULL;
    int w = pos < 0 ? fprintf(o->in, "greedy %d %d\n", n, seq) : fprintf(o->in, "greedy %d %d %d\n", n, seq, pos);
    if (w < 0 || fflush(o->in) != 0) return bd_error(BRAID_E_IO, "oracle: write failed");
    BD_TRY(oracle_read_reply(o, "greedy"));
    const char *p = o->reply;
    for (int32_t i = 0; i < n; i++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) return bd_error(BRAID_E_FORMAT, "oracle: greedy reply has %d of %d tokens", i, n);
        tokens[i] = (int32_t)v;
        p = end;
    }
    size_t nf = (size_t)n * (size_t)o->n_vocab;
    float *buf = bd_mallocn(nf + 1, sizeof(float));
    if (!buf) return bd_error(BRAID_E_NOMEM, "oracle: out of memory");
    if (fread(buf, sizeof(float), nf, o->out) != nf) {
        bd_free(buf);
        return bd_error(BRAID_E_IO, "oracle: short logits data after greedy");
    }
    if (logits) *logits = buf;
    else bd_free(buf);
    return BRAID_OK;
}

/* oracle_greedy_at after the sequence's last position. */
static inline braid_status oracle_greedy(oracle *o, int32_t n, int32_t seq, int32_t *tokens, float **logits) {
    return oracle_greedy_at(o, n, seq, -1, tokens, logits);
}

/* Tokenizes len bytes of text; *tokens (bd_free) gets *n ids. */
static inline braid_status oracle_tokenize(oracle *o, const char *text, size_t len, int add_special,
                                           int parse_special, int32_t **tokens, int32_t *n) {
    *tokens = NULL;
    *n = 0;
    if (fprintf(o->in, "tokenize %d %d ", add_special != 0, parse_special != 0) < 0)
        return bd_error(BRAID_E_IO, "oracle: write failed");
    if (len == 0) fputc('-', o->in);
    for (size_t i = 0; i < len; i++) fprintf(o->in, "%02x", (unsigned char)text[i]);
    if (fputc('\n', o->in) == EOF || fflush(o->in) != 0) return bd_error(BRAID_E_IO, "oracle: write failed");
    BD_TRY(oracle_read_reply(o, "tokenize"));
    char *p = o->reply, *end;
    long count = strtol(p, &end, 10);
    if (end == p || count < 0) return bd_error(BRAID_E_FORMAT, "oracle: bad tokenize reply '%s'", o->reply);
    int32_t *t = bd_mallocn((size_t)count + 1, sizeof *t);
    if (!t) return bd_error(BRAID_E_NOMEM, "oracle: out of memory");
    p = end;
    for (long i = 0; i < count; i++) {
        long v = strtol(p, &end, 10);
        if (end == p) {
            bd_free(t);
            return bd_error(BRAID_E_FORMAT, "oracle: tokenize reply has %ld of %ld tokens", i, count);
        }
        t[i] = (int32_t)v;
        p = end;
    }
    *tokens = t;
    *n = (int32_t)count;
    return BRAID_OK;
}

#endif
