/* state.c — saving and loading sequence and context state (design.md §5).
 *
 * Format (little-endian, fixed width):
 *   header   u32 magic "BRST", u32 version, u32 kind (1 sequence, 2 context), u32 n_sections,
 *            u64 model fingerprint, u32 kv_type, u32 n_embd, u64 state_floats (recurrent floats per sequence)
 *   sections u32 type, u32 reserved (0), u64 length, u64 xxh3 checksum of the payload, payload
 *     SEQ  (1): i32 sequence id (context files; a sequence file's id is not used on load)
 *     HIST (2): i32 len, i32 next_pos, i32 n_embd_rows, tokens [len] i32, positions [len][4] i32,
 *               embedding rows [n_embd_rows][n_embd] f32
 *     KV   (3): per attention layer: K rows [len][n_embd_k], then V rows [len][n_embd_v], in kv_type
 *     RS   (4): live recurrent state [state_floats] f32
 *     CKPT (5): i32 count, i32 last_ck, then count x (i32 index, state [state_floats] f32)
 *     RB   (6): i32 base, i32 n, state at base, then n states (the valid rollback buffer)
 *   A sequence is SEQ HIST KV RS CKPT RB; a context file repeats that for every non-empty sequence.
 *
 * Load parses and verifies everything (magic, version, fingerprint, sizes, checksums, capacity) into a plan
 * before it touches the context; allocations happen before the first change, so a failure leaves the context
 * exactly as it was. Cells shared between sequences are saved once per sequence and loaded unshared. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "base/status.h"
#include "engine/context.h"

#define ST_MAGIC 0x54535242u /* "BRST" */
#define ST_VERSION 1u
enum { SEC_SEQ = 1, SEC_HIST, SEC_KV, SEC_RS, SEC_CKPT, SEC_RB };


/* ---- writing ------------------------------------------------------------------------------------------- */

typedef struct wbuf {
    unsigned char *p;
    size_t len, cap;
    size_t sec;  /* offset of the open section's header */
    uint32_t n_sections;
    int failed;
} wbuf;

static void put(wbuf *w, const void *data, size_t n) {
    if (w->failed || n == 0) return;
    if (w->len + n > w->cap) {
        size_t nc = w->cap ? w->cap : 4096;
        while (nc < w->len + n) nc *= 2;
        unsigned char *np = bd_realloc(w->p, nc);
        if (!np) {
            w->failed = 1;
            return;
        }
        w->p = np;
        w->cap = nc;
    }
    memcpy(w->p + w->len, data, n);
    w->len += n;
}
static void put_u32(wbuf *w, uint32_t v) { put(w, &v, 4); }
static void put_i32(wbuf *w, int32_t v) { put(w, &v, 4); }
static void put_u64(wbuf *w, uint64_t v) { put(w, &v, 8); }

static void sec_begin(wbuf *w, uint32_t type) {
    w->sec = w->len;
    put_u32(w, type);
    put_u32(w, 0);
    put_u64(w, 0);
    put_u64(w, 0);
}
static void sec_end(wbuf *w) {
    if (w->failed) return;
    const size_t start = w->sec + 24;
    const uint64_t len = w->len - start, sum = bd_hash64(w->p + start, len, 0);
    memcpy(w->p + w->sec + 8, &len, 8);
    memcpy(w->p + w->sec + 16, &sum, 8);
    w->n_sections++;
}

static size_t kv_es(const braid_context *ctx) { return ctx->p.kv_type == BRAID_TYPE_F32 ? 4 : 2; }

static void write_seq(braid_context *ctx, wbuf *w, braid_seq_id s) {
    const bd_seq *q = &ctx->seqs[s];
    const bd_mem_layout *ly = &ctx->model->layout;
    const size_t sf = (size_t)ctx->state_floats * sizeof(float), es = kv_es(ctx);
    sec_begin(w, SEC_SEQ);
    put_i32(w, s);
    sec_end(w);
    sec_begin(w, SEC_HIST);
    put_i32(w, q->len);
    put_i32(w, q->next_pos);
    put_i32(w, q->n_embd_rows);
    put(w, q->token, (size_t)q->len * 4);
    put(w, q->pos, (size_t)q->len * 16);
    put(w, q->embd, (size_t)q->n_embd_rows * ctx->model->n_embd * sizeof(float));
    sec_end(w);
    sec_begin(w, SEC_KV);
    for (int32_t a = 0; a < ly->n_attn; a++) {
        for (int32_t i = 0; i < q->len; i++)
            put(w, (char *)ctx->k[a] + (size_t)q->cell[i] * ly->n_embd_k * es, (size_t)ly->n_embd_k * es);
        for (int32_t i = 0; i < q->len; i++)
            put(w, (char *)ctx->v[a] + (size_t)q->cell[i] * ly->n_embd_v * es, (size_t)ly->n_embd_v * es);
    }
    sec_end(w);
    sec_begin(w, SEC_RS);
    if (sf) put(w, q->live, sf);
    sec_end(w);
    sec_begin(w, SEC_CKPT);
    put_i32(w, sf ? q->n_ck : 0);
    put_i32(w, q->last_ck);
    for (int32_t c = 0; sf && c < q->n_ck; c++) {
        put_i32(w, q->ck[c].index);
        put(w, q->ck[c].state, sf);
    }
    sec_end(w);
    sec_begin(w, SEC_RB);
    const int valid = sf && q->rb_base >= 0;
    put_i32(w, valid ? q->rb_base : -1);
    put_i32(w, valid ? q->rb_n : 0);
    if (valid) {
        put(w, q->prev, sf);
        put(w, q->rb, sf * (size_t)q->rb_n);
    }
    sec_end(w);
}

static braid_status save(braid_context *ctx, braid_seq_id only, void **data, size_t *size) {
    if (!data || !size) return bd_error(BRAID_E_INVALID, "state save: NULL argument");
    wbuf w = {0};
    put_u32(&w, ST_MAGIC);
    put_u32(&w, ST_VERSION);
    put_u32(&w, only >= 0 ? 1 : 2);
    put_u32(&w, 0); /* n_sections, patched */
    put_u64(&w, ctx->model->fingerprint);
    put_u32(&w, (uint32_t)ctx->p.kv_type);
    put_u32(&w, (uint32_t)ctx->model->n_embd);
    put_u64(&w, (uint64_t)ctx->state_floats);
    for (uint32_t s = 0; s < ctx->p.n_seq_max; s++) {
        if (only >= 0 && (braid_seq_id)s != only) continue;
        if (only < 0 && ctx->seqs[s].len == 0 && ctx->seqs[s].n_ck == 0) continue;
        write_seq(ctx, &w, (braid_seq_id)s);
    }
    if (w.failed) {
        bd_free(w.p);
        return bd_error(BRAID_E_NOMEM, "state save: out of memory");
    }
    memcpy(w.p + 12, &w.n_sections, 4);
    *data = w.p;
    *size = w.len;
    return BRAID_OK;
}

/* ---- reading ------------------------------------------------------------------------------------------- */

typedef struct rd {
    const unsigned char *p;
    size_t len, off;
} rd;

static int take(rd *r, void *out, size_t n) {
    if (r->len - r->off < n) return 0;
    if (out) memcpy(out, r->p + r->off, n);
    r->off += n;
    return 1;
}

/* One sequence of a blob, verified, as pointers into it. */
typedef struct seq_plan {
    int32_t id, len, next_pos, n_embd_rows;
    const unsigned char *tokens, *pos, *embd, *kv, *live;
    int32_t n_ck, last_ck;
    const unsigned char *ck; /* n_ck x (i32 index, state) */
    int32_t rb_base, rb_n;
    const unsigned char *rb; /* state at base, then rb_n states */
} seq_plan;

/* Reads the payload of the next section, which must be of `type`, and checks its checksum. */
static braid_status next_section(rd *r, uint32_t type, rd *payload) {
    uint32_t t, z;
    uint64_t len, sum;
    const size_t at = r->off;
    if (!take(r, &t, 4) || !take(r, &z, 4) || !take(r, &len, 8) || !take(r, &sum, 8))
        return bd_error(BRAID_E_FORMAT, "state: truncated section header at offset %zu", at);
    if (t != type) return bd_error(BRAID_E_FORMAT, "state: section type %u at offset %zu, expected %u", t, at, type);
    if (len > r->len - r->off)
        return bd_error(BRAID_E_FORMAT, "state: section at offset %zu has length %llu past the end", at,
                        (unsigned long long)len);
    payload->p = r->p + r->off;
    payload->len = (size_t)len;
    payload->off = 0;
    if (bd_hash64(payload->p, payload->len, 0) != sum)
        return bd_error(BRAID_E_FORMAT, "state: checksum mismatch in section %u at offset %zu", t, at);
    r->off += (size_t)len;
    return BRAID_OK;
}

static braid_status parse_seq(const braid_context *ctx, rd *r, seq_plan *sp) {
    const bd_mem_layout *ly = &ctx->model->layout;
    const size_t sf = (size_t)ctx->state_floats * sizeof(float), es = kv_es(ctx);
    const size_t E = (size_t)ctx->model->n_embd;
    rd x;
    memset(sp, 0, sizeof *sp);
    BD_TRY(next_section(r, SEC_SEQ, &x));
    if (!take(&x, &sp->id, 4) || x.off != x.len) return bd_error(BRAID_E_FORMAT, "state: bad SEQ section");
    BD_TRY(next_section(r, SEC_HIST, &x));
    if (!take(&x, &sp->len, 4) || !take(&x, &sp->next_pos, 4) || !take(&x, &sp->n_embd_rows, 4))
        return bd_error(BRAID_E_FORMAT, "state: bad HIST section");
    if (sp->len < 0 || sp->n_embd_rows < 0 || sp->n_embd_rows > sp->len || sp->next_pos < 0)
        return bd_error(BRAID_E_FORMAT, "state: bad history sizes (len %d, rows %d)", sp->len, sp->n_embd_rows);
    if ((uint64_t)x.len != 12 + (uint64_t)sp->len * 20 + (uint64_t)sp->n_embd_rows * E * 4)
        return bd_error(BRAID_E_FORMAT, "state: HIST section length %zu does not match %d inputs", x.len, sp->len);
    sp->tokens = x.p + 12;
    sp->pos = sp->tokens + (size_t)sp->len * 4;
    sp->embd = sp->pos + (size_t)sp->len * 16;
    for (int32_t i = 0; i < sp->len; i++) {
        int32_t t;
        memcpy(&t, sp->tokens + 4 * (size_t)i, 4);
        if (t >= ctx->model->n_vocab || (t < 0 && -t > sp->n_embd_rows))
            return bd_error(BRAID_E_FORMAT, "state: input %d has bad token %d", i, t);
        for (int c = 0; c < 4; c++) {
            int32_t p;
            memcpy(&p, sp->pos + 16 * (size_t)i + 4 * c, 4);
            if (p < 0) return bd_error(BRAID_E_FORMAT, "state: input %d has a negative position", i);
        }
    }
    BD_TRY(next_section(r, SEC_KV, &x));
    if ((uint64_t)x.len != (uint64_t)ly->n_attn * sp->len * (uint64_t)(ly->n_embd_k + ly->n_embd_v) * es)
        return bd_error(BRAID_E_FORMAT, "state: KV section length %zu does not match", x.len);
    sp->kv = x.p;
    BD_TRY(next_section(r, SEC_RS, &x));
    if (x.len != sf) return bd_error(BRAID_E_FORMAT, "state: RS section length %zu, expected %zu", x.len, sf);
    sp->live = x.p;
    BD_TRY(next_section(r, SEC_CKPT, &x));
    if (!take(&x, &sp->n_ck, 4) || !take(&x, &sp->last_ck, 4) || sp->n_ck < 0 ||
        (uint64_t)x.len != 8 + (uint64_t)sp->n_ck * (4 + sf))
        return bd_error(BRAID_E_FORMAT, "state: bad CKPT section");
    sp->ck = x.p + 8;
    int32_t prev_idx = 0;
    for (int32_t c = 0; c < sp->n_ck; c++) {
        int32_t idx;
        memcpy(&idx, sp->ck + (size_t)c * (4 + sf), 4);
        if (idx <= prev_idx || idx > sp->len) return bd_error(BRAID_E_FORMAT, "state: bad checkpoint index %d", idx);
        prev_idx = idx;
    }
    if (sp->last_ck < 0 || sp->last_ck > sp->len) sp->last_ck = prev_idx;
    BD_TRY(next_section(r, SEC_RB, &x));
    if (!take(&x, &sp->rb_base, 4) || !take(&x, &sp->rb_n, 4))
        return bd_error(BRAID_E_FORMAT, "state: bad RB section");
    if (sp->rb_base >= 0) {
        if (sp->rb_n < 1 || (uint32_t)sp->rb_n > ctx->p.n_rollback || sp->rb_base + sp->rb_n != sp->len ||
            (uint64_t)x.len != 8 + (uint64_t)(sp->rb_n + 1) * sf)
            return bd_error(BRAID_E_FORMAT, "state: bad rollback buffer (base %d, n %d)", sp->rb_base, sp->rb_n);
        sp->rb = x.p + 8;
    } else if (x.len != 8) {
        return bd_error(BRAID_E_FORMAT, "state: bad RB section length");
    }
    return BRAID_OK;
}

/* Cells that loading `len` inputs into s can use: free ones plus the ones only s holds now. */
static int32_t cells_available(const braid_context *ctx, braid_seq_id s) {
    int32_t n = ctx->n_free;
    const bd_seq *q = &ctx->seqs[s];
    if (!ctx->model->layout.n_attn) return INT32_MAX;
    for (int32_t i = 0; i < q->len; i++)
        if (ctx->cell_seqs[q->cell[i]] == (1ull << s)) n++;
    return n;
}

/* Applies a verified plan to sequence s (cleared first). Capacity and history arrays were reserved. */
static void apply_seq(braid_context *ctx, braid_seq_id s, const seq_plan *sp, float **ck_bufs) {
    bd_seq *q = &ctx->seqs[s];
    const bd_mem_layout *ly = &ctx->model->layout;
    const size_t sf = (size_t)ctx->state_floats * sizeof(float), es = kv_es(ctx);
    braid_seq_clear(ctx, s);
    q->len = sp->len;
    q->next_pos = sp->next_pos;
    q->n_embd_rows = sp->n_embd_rows;
    memcpy(q->token, sp->tokens, (size_t)sp->len * 4);
    memcpy(q->pos, sp->pos, (size_t)sp->len * 16);
    memcpy(q->embd, sp->embd, (size_t)sp->n_embd_rows * ctx->model->n_embd * sizeof(float));
    if (ly->n_attn) {
        for (int32_t i = 0; i < sp->len; i++) {
            const int32_t c = ctx->free_cells[--ctx->n_free];
            q->cell[i] = c;
            ctx->cell_seqs[c] = 1ull << s;
            memcpy(ctx->cell_pos + 4 * (size_t)c, q->pos + 4 * (size_t)i, 16);
        }
        const unsigned char *p = sp->kv;
        for (int32_t a = 0; a < ly->n_attn; a++) {
            for (int32_t i = 0; i < sp->len; i++, p += (size_t)ly->n_embd_k * es)
                memcpy((char *)ctx->k[a] + (size_t)q->cell[i] * ly->n_embd_k * es, p, (size_t)ly->n_embd_k * es);
            for (int32_t i = 0; i < sp->len; i++, p += (size_t)ly->n_embd_v * es)
                memcpy((char *)ctx->v[a] + (size_t)q->cell[i] * ly->n_embd_v * es, p, (size_t)ly->n_embd_v * es);
        }
    }
    if (!sf) return;
    memcpy(q->live, sp->live, sf);
    for (int32_t c = 0; c < sp->n_ck; c++) {
        if (ctx->ck_bytes + sf > ctx->p.checkpoint_budget_bytes) { /* over budget: dropped (they only save replay) */
            bd_free(ck_bufs[c]);
            continue;
        }
        const unsigned char *e = sp->ck + (size_t)c * (4 + sf);
        memcpy(&q->ck[q->n_ck].index, e, 4);
        memcpy(ck_bufs[c], e + 4, sf);
        q->ck[q->n_ck++].state = ck_bufs[c];
        ctx->ck_bytes += sf;
    }
    q->last_ck = sp->last_ck;
    q->rb_base = sp->rb_base;
    q->rb_n = sp->rb_base >= 0 ? sp->rb_n : 0;
    if (sp->rb_base >= 0) {
        memcpy(q->prev, sp->rb, sf);
        memcpy(q->rb, sp->rb + sf, sf * (size_t)sp->rb_n);
    }
}

static braid_status load(braid_context *ctx, braid_seq_id only, const void *data, size_t size) {
    if (!data) return bd_error(BRAID_E_INVALID, "state load: NULL data");
    rd r = {data, size, 0};
    uint32_t magic, version, kind, n_sections, kv_type, n_embd;
    uint64_t fp, state_floats;
    if (!take(&r, &magic, 4) || !take(&r, &version, 4) || !take(&r, &kind, 4) || !take(&r, &n_sections, 4) ||
        !take(&r, &fp, 8) || !take(&r, &kv_type, 4) || !take(&r, &n_embd, 4) || !take(&r, &state_floats, 8))
        return bd_error(BRAID_E_FORMAT, "state: truncated header (%zu bytes)", size);
    if (magic != ST_MAGIC) return bd_error(BRAID_E_FORMAT, "state: bad magic");
    if (version != ST_VERSION) return bd_error(BRAID_E_FORMAT, "state: unsupported version %u", version);
    if (kind != (only >= 0 ? 1u : 2u))
        return bd_error(BRAID_E_FORMAT, "state: a %s file given to a %s load", kind == 1 ? "sequence" : "context",
                        only >= 0 ? "sequence" : "context");
    if (fp != ctx->model->fingerprint) return bd_error(BRAID_E_MISMATCH, "state: saved from another model");
    if (kv_type != (uint32_t)ctx->p.kv_type || n_embd != (uint32_t)ctx->model->n_embd ||
        state_floats != (uint64_t)ctx->state_floats)
        return bd_error(BRAID_E_MISMATCH, "state: saved with another K/V type or memory layout");
    if (n_sections % 6 || (only >= 0 && n_sections != 6) || n_sections / 6 > ctx->p.n_seq_max)
        return bd_error(BRAID_E_FORMAT, "state: %u sections", n_sections);
    const int32_t n_seq = (int32_t)(n_sections / 6);
    seq_plan plans[BD_MAX_SEQ];
    uint64_t seen = 0;
    int32_t total = 0;
    for (int32_t i = 0; i < n_seq; i++) {
        BD_TRY(parse_seq(ctx, &r, &plans[i]));
        if (only >= 0) plans[i].id = only;
        if (plans[i].id < 0 || (uint32_t)plans[i].id >= ctx->p.n_seq_max || (seen >> plans[i].id & 1))
            return bd_error(BRAID_E_FORMAT, "state: bad or repeated sequence id %d", plans[i].id);
        seen |= 1ull << plans[i].id;
        total += plans[i].len;
    }
    if (r.off != r.len) return bd_error(BRAID_E_FORMAT, "state: %zu trailing bytes", r.len - r.off);
    /* capacity */
    if (ctx->model->layout.n_attn) {
        const int32_t avail = only >= 0 ? cells_available(ctx, only) : (int32_t)ctx->p.n_ctx;
        if (total > avail) return bd_error(BRAID_E_FULL, "state: needs %d cells, %d available", total, avail);
    }
    /* allocations, before any change */
    const size_t sf = (size_t)ctx->state_floats * sizeof(float);
    float *bufs[BD_MAX_SEQ][64];
    int32_t nb[BD_MAX_SEQ] = {0};
    braid_status st = BRAID_OK;
    for (int32_t i = 0; i < n_seq && st == BRAID_OK; i++) {
        bd_seq *q = &ctx->seqs[plans[i].id];
        st = bd_seq_reserve(ctx, q, plans[i].len, plans[i].n_embd_rows);
        if (st != BRAID_OK || !sf) continue;
        if (plans[i].n_ck > 64) plans[i].n_ck = 64; /* at most 64 checkpoints per sequence are restored */
        if (q->cap_ck < plans[i].n_ck) {
            bd_ckpt *a = bd_realloc(q->ck, (size_t)plans[i].n_ck * sizeof *a);
            if (!a) {
                st = bd_error(BRAID_E_NOMEM, "state load: out of memory");
                continue;
            }
            q->ck = a;
            q->cap_ck = plans[i].n_ck;
        }
        for (int32_t c = 0; c < plans[i].n_ck && st == BRAID_OK; c++) {
            bufs[i][c] = bd_mallocn(1, sf);
            if (!bufs[i][c]) st = bd_error(BRAID_E_NOMEM, "state load: out of memory");
            else nb[i]++;
        }
    }
    if (st != BRAID_OK) {
        for (int32_t i = 0; i < n_seq; i++)
            for (int32_t c = 0; c < nb[i]; c++) bd_free(bufs[i][c]);
        return st;
    }
    /* apply */
    if (only < 0) braid_seq_clear(ctx, -1);
    for (int32_t i = 0; i < n_seq; i++) {
        apply_seq(ctx, plans[i].id, &plans[i], bufs[i]);
    }
    return BRAID_OK;
}

braid_status braid_state_seq_save(braid_context *ctx, braid_seq_id s, void **data, size_t *size) {
    BD_TRY(bd_ctx_check_seq(ctx, s));
    return save(ctx, s, data, size);
}

braid_status braid_state_seq_load(braid_context *ctx, braid_seq_id s, const void *data, size_t size) {
    BD_TRY(bd_ctx_check_seq(ctx, s));
    return load(ctx, s, data, size);
}

braid_status braid_state_save(braid_context *ctx, void **data, size_t *size) {
    if (!ctx) return bd_error(BRAID_E_INVALID, "NULL context");
    return save(ctx, -1, data, size);
}

braid_status braid_state_load(braid_context *ctx, const void *data, size_t size) {
    if (!ctx) return bd_error(BRAID_E_INVALID, "NULL context");
    return load(ctx, -1, data, size);
}

/* ---- files ----------------------------------------------------------------------------------------------- */

static braid_status write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return bd_error(BRAID_E_IO, "cannot open %s for writing", path);
    const size_t n = fwrite(data, 1, size, f);
    const int rc = fclose(f);
    if (n != size || rc != 0) return bd_error(BRAID_E_IO, "write to %s failed", path);
    return BRAID_OK;
}

static braid_status read_file(const char *path, void **data, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return bd_error(BRAID_E_IO, "cannot open %s", path);
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return bd_error(BRAID_E_IO, "cannot seek %s", path);
    }
    const long len = ftell(f);
    if (len < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return bd_error(BRAID_E_IO, "cannot size %s", path);
    }
    void *buf = bd_malloc(len ? (size_t)len : 1);
    if (!buf) {
        fclose(f);
        return bd_error(BRAID_E_NOMEM, "out of memory reading %s", path);
    }
    const size_t n = fread(buf, 1, (size_t)len, f);
    fclose(f);
    if (n != (size_t)len) {
        bd_free(buf);
        return bd_error(BRAID_E_IO, "short read from %s", path);
    }
    *data = buf;
    *size = (size_t)len;
    return BRAID_OK;
}

braid_status braid_state_seq_save_file(braid_context *ctx, braid_seq_id s, const char *path) {
    void *d;
    size_t n;
    BD_TRY(braid_state_seq_save(ctx, s, &d, &n));
    braid_status st = write_file(path, d, n);
    bd_free(d);
    return st;
}

braid_status braid_state_seq_load_file(braid_context *ctx, braid_seq_id s, const char *path) {
    void *d;
    size_t n;
    BD_TRY(read_file(path, &d, &n));
    braid_status st = braid_state_seq_load(ctx, s, d, n);
    bd_free(d);
    return st;
}

braid_status braid_state_save_file(braid_context *ctx, const char *path) {
    void *d;
    size_t n;
    BD_TRY(braid_state_save(ctx, &d, &n));
    braid_status st = write_file(path, d, n);
    bd_free(d);
    return st;
}

braid_status braid_state_load_file(braid_context *ctx, const char *path) {
    void *d;
    size_t n;
    BD_TRY(read_file(path, &d, &n));
    braid_status st = braid_state_load(ctx, d, n);
    bd_free(d);
    return st;
}
