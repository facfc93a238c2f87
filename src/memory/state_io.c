/* state_io.c — the memory's state format (design.md §5), for one sequence or the whole memory.
 *
 * Layout (little-endian, fixed width):
 *   header   "BRAIDMEM", u32 version, u32 kind (1 whole memory, 2 one sequence), u64 model fingerprint,
 *            u32 desc_len, desc bytes, u64 xxh3 of everything before it
 *   sections {u32 type, u32 0, u64 length, payload, u64 xxh3(payload, seed = type)}, in this order:
 *     LAYOUT   n_pos, n_embd, kv type, attention K/V widths, recurrent conv/ssm sizes, sequences, cells saved
 *     CELLS    per saved cell (order of their stamps): positions, positions K is rotated for; then per attention
 *              layer the K rows, then the V rows of those cells
 *     per sequence: SEQ (id, length, counts), HIST (tokens, positions, embedding rows), KVLIST (indices into
 *              the saved cells, ascending: shared cells are saved once), RS (live state, checkpoints with their
 *              index, rollback states)
 *     END      number of sections before it
 * Cells are saved in stamp order and sequences by id, so equal memories give equal bytes whatever cell ids
 * they use. Load parses and checks every byte first (sizes, checksums, fingerprint, layout, ids, ranges, free
 * cells), allocates everything it needs, and only then replaces the content: any failure leaves the memory as
 * it was. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "base/status.h"
#include "memory/mem_impl.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "state_io.c writes host-order integers and floats; a big-endian host needs byte swapping here"
#endif

static const char MAGIC[8] = {'B', 'R', 'A', 'I', 'D', 'M', 'E', 'M'};
enum { KIND_WHOLE = 1, KIND_SEQ = 2 };
enum { SEC_LAYOUT = 1, SEC_CELLS, SEC_SEQ, SEC_HIST, SEC_KVLIST, SEC_RS, SEC_END };
#define DESC_MAX 4096u

/* ---- writing ------------------------------------------------------------------------------------------- */

typedef struct st_out {
    mem_writer *w;
    int counting;      /* only count bytes */
    uint64_t total;
    bd_hasher h;       /* current section's checksum */
    braid_status err;
} st_out;

static void out_raw(st_out *o, const void *p, size_t n) {
    if (o->err != BRAID_OK || n == 0) return;
    o->total += n;
    if (o->counting) return;
    o->err = o->w->write(o->w->user, p, n);
}
static void out_data(st_out *o, const void *p, size_t n) {
    if (n == 0) return;
    if (!o->counting && o->err == BRAID_OK) bd_hasher_update(&o->h, p, n);
    out_raw(o, p, n);
}
static void out_u32(st_out *o, uint32_t v) { out_data(o, &v, 4); }
static void out_i32(st_out *o, int32_t v) { out_data(o, &v, 4); }
static void out_u64(st_out *o, uint64_t v) { out_data(o, &v, 8); }

static void sec_begin(st_out *o, uint32_t type, uint64_t len) {
    uint32_t hdr[2] = {type, 0};
    out_raw(o, hdr, 8);
    out_raw(o, &len, 8);
    if (!o->counting && o->err == BRAID_OK && !bd_hasher_init(&o->h, type))
        o->err = bd_error(BRAID_E_NOMEM, "state: out of memory for a hasher");
}
static void sec_end(st_out *o) {
    uint64_t sum = 0;
    if (!o->counting && o->err == BRAID_OK) sum = bd_hasher_digest(&o->h);
    if (!o->counting) bd_hasher_free(&o->h);
    out_raw(o, &sum, 8);
}

/* What a save covers: the sequences and the cells (saved index per cell id). */
typedef struct save_plan {
    int32_t *seqs;    /* saved sequence ids */
    int32_t n_seqs;
    int32_t *cells;   /* [n_cells] cell ids in stamp order */
    int32_t n_cells;
    int32_t *index;   /* [kv n_cells] saved index of a cell, -1 if not saved */
} save_plan;

static void plan_free(save_plan *sp) {
    bd_free(sp->seqs);
    bd_free(sp->cells);
    bd_free(sp->index);
}

typedef struct cell_key {
    uint64_t order;
    int32_t cell;
} cell_key;
static int by_order(const void *a, const void *b) {
    uint64_t x = ((const cell_key *)a)->order, y = ((const cell_key *)b)->order;
    return x < y ? -1 : x > y;
}

static braid_status make_plan(const mem *m, int32_t s, save_plan *sp) {
    memset(sp, 0, sizeof *sp);
    uint32_t ns = m->p.n_seq_max;
    if (!(sp->seqs = bd_mallocn(ns, sizeof(int32_t)))) return bd_error(BRAID_E_NOMEM, "state: out of memory");
    if (s >= 0) {
        sp->seqs[sp->n_seqs++] = s;
    } else {
        for (uint32_t t = 0; t < ns; t++)
            if (m->hist[t].len > 0) sp->seqs[sp->n_seqs++] = (int32_t)t;
    }
    const kv_cache *kv = m->kv;
    if (!kv) return BRAID_OK;
    if (!(sp->cells = bd_mallocn(kv->n_cells, sizeof(int32_t))) || !(sp->index = bd_mallocn(kv->n_cells, sizeof(int32_t))))
        return bd_error(BRAID_E_NOMEM, "state: out of memory");
    for (uint32_t c = 0; c < kv->n_cells; c++) sp->index[c] = -1;
    for (int32_t i = 0; i < sp->n_seqs; i++) {
        const int32_t *list = kv_list(kv, sp->seqs[i]);
        for (uint32_t j = 0; j < kv->len[sp->seqs[i]]; j++)
            if (sp->index[list[j]] < 0) {
                sp->index[list[j]] = 0;
                sp->cells[sp->n_cells++] = list[j];
            }
    }
    /* Stamp order makes the bytes independent of which cell ids the memory happens to use. */
    cell_key *keys = bd_mallocn(sp->n_cells ? (size_t)sp->n_cells : 1, sizeof *keys);
    if (!keys) return bd_error(BRAID_E_NOMEM, "state: out of memory");
    for (int32_t i = 0; i < sp->n_cells; i++) keys[i] = (cell_key){kv->order[sp->cells[i]], sp->cells[i]};
    qsort(keys, (size_t)sp->n_cells, sizeof *keys, by_order);
    for (int32_t i = 0; i < sp->n_cells; i++) {
        sp->cells[i] = keys[i].cell;
        sp->index[keys[i].cell] = i;
    }
    bd_free(keys);
    return BRAID_OK;
}

static uint64_t layout_len(const mem *m) { return 4 * 7 + 8ull * m->p.n_attn_layers + 16ull * m->p.n_rs_layers; }

static void write_all(const mem *m, int32_t s, uint64_t fp, const char *desc, const save_plan *sp, st_out *o) {
    uint32_t np = m->p.n_pos_per_token, na = m->kv ? m->p.n_attn_layers : 0, nr = m->rs ? m->p.n_rs_layers : 0;
    size_t bb = m->rs ? m->rs->block_bytes : 0;
    uint32_t dl = (uint32_t)strlen(desc);
    /* header, hashed as one piece */
    uint8_t hdr[8 + 4 + 4 + 8 + 4];
    uint32_t ver = MEM_FORMAT_VERSION, kind = s < 0 ? KIND_WHOLE : KIND_SEQ;
    memcpy(hdr, MAGIC, 8);
    memcpy(hdr + 8, &ver, 4);
    memcpy(hdr + 12, &kind, 4);
    memcpy(hdr + 16, &fp, 8);
    memcpy(hdr + 24, &dl, 4);
    uint64_t hsum = 0;
    if (!o->counting) {
        bd_hasher h;
        if (!bd_hasher_init(&h, 0)) {
            o->err = bd_error(BRAID_E_NOMEM, "state: out of memory for a hasher");
            return;
        }
        bd_hasher_update(&h, hdr, sizeof hdr);
        bd_hasher_update(&h, desc, dl);
        hsum = bd_hasher_digest(&h);
        bd_hasher_free(&h);
    }
    out_raw(o, hdr, sizeof hdr);
    out_raw(o, desc, dl);
    out_raw(o, &hsum, 8);
    uint32_t n_sec = 0;

    sec_begin(o, SEC_LAYOUT, layout_len(m));
    out_u32(o, np);
    out_u32(o, m->p.n_embd);
    out_u32(o, m->kv ? (uint32_t)m->p.kv_type : UINT32_MAX);
    out_u32(o, na);
    for (uint32_t l = 0; l < na; l++) {
        out_u32(o, m->p.n_embd_k[l]);
        out_u32(o, m->p.n_embd_v[l]);
    }
    out_u32(o, nr);
    for (uint32_t l = 0; l < nr; l++) {
        out_u64(o, m->p.n_conv[l]);
        out_u64(o, m->p.n_ssm[l]);
    }
    out_u32(o, (uint32_t)sp->n_seqs);
    out_u32(o, (uint32_t)sp->n_cells);
    sec_end(o);
    n_sec++;

    const kv_cache *kv = m->kv;
    uint64_t cl = (uint64_t)sp->n_cells * np * 8;
    for (uint32_t l = 0; l < na; l++) cl += (uint64_t)sp->n_cells * (kv_k_row(kv, l) + kv_v_row(kv, l));
    sec_begin(o, SEC_CELLS, cl);
    for (int32_t i = 0; i < sp->n_cells; i++) {
        out_data(o, kv_pos(kv, sp->cells[i]), np * sizeof(braid_pos));
        out_data(o, kv_pos_rot(kv, sp->cells[i]), np * sizeof(braid_pos));
    }
    for (uint32_t l = 0; l < na; l++) {
        for (int32_t i = 0; i < sp->n_cells; i++) out_data(o, kv->k[l] + (size_t)sp->cells[i] * kv_k_row(kv, l), kv_k_row(kv, l));
        for (int32_t i = 0; i < sp->n_cells; i++) out_data(o, kv->v[l] + (size_t)sp->cells[i] * kv_v_row(kv, l), kv_v_row(kv, l));
    }
    sec_end(o);
    n_sec++;

    for (int32_t k = 0; k < sp->n_seqs && o->err == BRAID_OK; k++) {
        int32_t t = sp->seqs[k];
        const mem_hist *h = &m->hist[t];
        const rs_seq *q = m->rs ? &m->rs->seq[t] : NULL;
        int32_t has_live = q && h->len > 0;
        sec_begin(o, SEC_SEQ, 4 * 8);
        out_i32(o, s < 0 ? t : 0); /* a sequence state is loaded into any sequence: its id is not part of it */
        out_i32(o, h->len);
        out_i32(o, h->n_erow);
        out_i32(o, m->approx[t]);
        out_i32(o, q ? q->n_ck : 0);
        out_i32(o, q && q->rb_n ? q->rb_lo : 0);
        out_i32(o, q ? q->rb_n : 0);
        out_i32(o, has_live);
        sec_end(o);
        sec_begin(o, SEC_HIST, (uint64_t)h->len * (4 + 4ull * np) + (uint64_t)h->n_erow * m->p.n_embd * 4);
        out_data(o, h->tok, (size_t)h->len * 4);
        out_data(o, h->pos, (size_t)h->len * np * 4);
        out_data(o, h->embd, (size_t)h->n_erow * m->p.n_embd * 4);
        sec_end(o);
        n_sec += 2;
        if (kv) {
            sec_begin(o, SEC_KVLIST, (uint64_t)h->len * 4);
            const int32_t *list = kv_list(kv, t);
            for (int32_t i = 0; i < h->len; i++) out_i32(o, sp->index[list[i]]);
            sec_end(o);
            n_sec++;
        }
        if (q) {
            sec_begin(o, SEC_RS, (uint64_t)has_live * bb + (uint64_t)q->n_ck * (8 + bb) + (uint64_t)q->rb_n * bb);
            if (has_live) out_data(o, rs_or_zero(m->rs, q->live), bb);
            for (int32_t i = 0; i < q->n_ck; i++) {
                out_i32(o, q->ck[i].idx);
                out_i32(o, 0);
                out_data(o, q->ck[i].blk, bb);
            }
            for (int32_t i = 0; i < q->rb_n; i++) out_data(o, rs_or_zero(m->rs, q->rb[i]), bb);
            sec_end(o);
            n_sec++;
        }
    }
    sec_begin(o, SEC_END, 4);
    out_u32(o, n_sec);
    sec_end(o);
}

/* The argument checks both save entry points make; a NULL *desc becomes "". */
static braid_status check_save_args(const mem *m, int32_t s, const char **desc) {
    if (m->pending) return bd_error(BRAID_E_INVALID, "state: save while a batch is pending");
    if (s != -1 && !mem_seq_ok(m, s)) return bd_error(BRAID_E_RANGE, "state: sequence %d not in 0..%u", s, m->p.n_seq_max - 1);
    if (!*desc) *desc = "";
    if (strlen(*desc) > DESC_MAX) return bd_error(BRAID_E_INVALID, "state: description longer than %u bytes", DESC_MAX);
    return BRAID_OK;
}

braid_status mem_state_save(const mem *m, int32_t s, uint64_t fingerprint, const char *desc, mem_writer *w) {
    BD_TRY(check_save_args(m, s, &desc));
    save_plan sp;
    braid_status st = make_plan(m, s, &sp);
    if (st == BRAID_OK) {
        st_out o = {.w = w, .err = BRAID_OK};
        write_all(m, s, fingerprint, desc, &sp, &o);
        st = o.err;
    }
    plan_free(&sp);
    return st;
}

typedef struct buf_writer {
    uint8_t *p;
    size_t n, cap;
} buf_writer;

static braid_status buf_write(void *user, const void *data, size_t n) {
    buf_writer *b = user;
    if (n > b->cap - b->n) return bd_error(BRAID_E_IO, "state: buffer overflow (size changed while saving)");
    memcpy(b->p + b->n, data, n);
    b->n += n;
    return BRAID_OK;
}

braid_status mem_state_save_alloc(const mem *m, int32_t s, uint64_t fingerprint, const char *desc, void **data,
                                  size_t *size) {
    *data = NULL;
    *size = 0;
    BD_TRY(check_save_args(m, s, &desc));
    save_plan sp;
    braid_status st = make_plan(m, s, &sp);
    st_out o = {.counting = 1, .err = BRAID_OK};
    if (st == BRAID_OK) {
        write_all(m, s, fingerprint, desc, &sp, &o); /* sizing pass: no hashing, no output */
        st = o.err;
    }
    buf_writer bw = {0};
    if (st == BRAID_OK && !(bw.p = bd_malloc(o.total)))
        st = bd_error(BRAID_E_NOMEM, "state: out of memory for %llu bytes", (unsigned long long)o.total);
    if (st == BRAID_OK) {
        bw.cap = o.total;
        mem_writer w = {buf_write, &bw};
        st_out o2 = {.w = &w, .err = BRAID_OK};
        write_all(m, s, fingerprint, desc, &sp, &o2);
        st = o2.err;
    }
    plan_free(&sp);
    if (st != BRAID_OK) {
        bd_free(bw.p);
        return st;
    }
    *data = bw.p;
    *size = bw.n;
    return BRAID_OK;
}

/* ---- reading ------------------------------------------------------------------------------------------- */

typedef struct rd {
    const uint8_t *p;
    size_t n, off;
} rd;

static int rd_take(rd *r, size_t n, const uint8_t **out) {
    if (n > r->n - r->off) return 0;
    *out = r->p + r->off;
    r->off += n;
    return 1;
}
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static int32_t get_i32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Reads one section of the expected type: *pl / *len give its payload. */
static braid_status sec_read(rd *r, uint32_t type, const uint8_t **pl, uint64_t *len) {
    size_t at = r->off;
    const uint8_t *h;
    if (!rd_take(r, 16, &h)) return bd_error(BRAID_E_FORMAT, "state: truncated at byte %zu (section header)", at);
    if (get_u32(h) != type || get_u32(h + 4) != 0)
        return bd_error(BRAID_E_FORMAT, "state: section type %u at byte %zu, expected %u", get_u32(h), at, type);
    *len = get_u64(h + 8);
    if (*len > r->n - r->off || r->n - r->off - *len < 8)
        return bd_error(BRAID_E_FORMAT, "state: section %u at byte %zu: length %llu runs past the end", type, at,
                        (unsigned long long)*len);
    rd_take(r, (size_t)*len, pl);
    const uint8_t *sum = r->p + r->off;
    r->off += 8;
    if (bd_hash64(*pl, (size_t)*len, type) != get_u64(sum))
        return bd_error(BRAID_E_FORMAT, "state: section %u at byte %zu: checksum mismatch", type, at);
    return BRAID_OK;
}

/* One parsed sequence: pointers into the blob. */
typedef struct ld_seq {
    int32_t id, len, n_erow, approx, n_ck, rb_lo, rb_n, has_live;
    const uint8_t *tok, *pos, *embd, *list, *live, *ck, *rb;
} ld_seq;

typedef struct ld_new { /* what load allocates for one sequence, installed at apply */
    braid_token *tok;
    braid_pos *pos;
    int32_t *erow;
    float *embd;
    float *live;
    float **rb;       /* [n_rollback + 1], n_rb used: the last n_rb saved rollback states */
    int32_t n_rb;
    rs_ckpt *ck;      /* [n_ck kept] */
    int32_t n_ck, ck_cap;
} ld_new;

static braid_status parse(const mem *m, int32_t s, uint64_t fp, const void *data, size_t size, ld_seq **out_seqs,
                          int32_t *out_n, const uint8_t **cells, int32_t *n_cells) {
    rd r = {data, size, 0};
    const uint8_t *h;
    uint32_t np = m->p.n_pos_per_token, na = m->kv ? m->p.n_attn_layers : 0, nr = m->rs ? m->p.n_rs_layers : 0;
    if (!data || !rd_take(&r, 28, &h)) return bd_error(BRAID_E_FORMAT, "state: %zu bytes: too short for a header", size);
    if (memcmp(h, MAGIC, 8)) return bd_error(BRAID_E_FORMAT, "state: bad magic (not a braid memory state)");
    if (get_u32(h + 8) != MEM_FORMAT_VERSION)
        return bd_error(BRAID_E_FORMAT, "state: format version %u, this build reads %u", get_u32(h + 8), MEM_FORMAT_VERSION);
    uint32_t kind = get_u32(h + 12), dl = get_u32(h + 24);
    const uint8_t *desc, *hs;
    if (dl > DESC_MAX || !rd_take(&r, dl, &desc) || !rd_take(&r, 8, &hs))
        return bd_error(BRAID_E_FORMAT, "state: bad description length %u", dl);
    bd_hasher hh;
    if (!bd_hasher_init(&hh, 0)) return bd_error(BRAID_E_NOMEM, "state: out of memory for a hasher");
    bd_hasher_update(&hh, h, 28);
    bd_hasher_update(&hh, desc, dl);
    uint64_t hsum = bd_hasher_digest(&hh);
    bd_hasher_free(&hh);
    if (hsum != get_u64(hs)) return bd_error(BRAID_E_FORMAT, "state: header checksum mismatch");
    if (kind != KIND_WHOLE && kind != KIND_SEQ) return bd_error(BRAID_E_FORMAT, "state: unknown kind %u", kind);
    if ((kind == KIND_WHOLE) != (s < 0))
        return bd_error(BRAID_E_MISMATCH, "state: a %s state cannot be loaded as %s",
                        kind == KIND_WHOLE ? "whole-memory" : "sequence", s < 0 ? "the whole memory" : "a sequence");
    if (get_u64(h + 16) != fp)
        return bd_error(BRAID_E_MISMATCH, "state: saved for another model (\"%.*s\", fingerprint %016llx, expected %016llx)",
                        (int)(dl > 200 ? 200 : dl), (const char *)desc, (unsigned long long)get_u64(h + 16),
                        (unsigned long long)fp);

    const uint8_t *pl;
    uint64_t len;
    BD_TRY(sec_read(&r, SEC_LAYOUT, &pl, &len));
    if (len != layout_len(m)) return bd_error(BRAID_E_MISMATCH, "state: layout of another memory configuration");
    if (get_u32(pl) != np || get_u32(pl + 4) != m->p.n_embd || get_u32(pl + 8) != (m->kv ? (uint32_t)m->p.kv_type : UINT32_MAX) ||
        get_u32(pl + 12) != na)
        return bd_error(BRAID_E_MISMATCH, "state: positions / embedding width / kv type / attention layers differ");
    const uint8_t *q = pl + 16;
    for (uint32_t l = 0; l < na; l++, q += 8)
        if (get_u32(q) != m->p.n_embd_k[l] || get_u32(q + 4) != m->p.n_embd_v[l])
            return bd_error(BRAID_E_MISMATCH, "state: attention layer %u has other K/V widths", l);
    if (get_u32(q) != nr) return bd_error(BRAID_E_MISMATCH, "state: %u recurrent layers, expected %u", get_u32(q), nr);
    q += 4;
    for (uint32_t l = 0; l < nr; l++, q += 16)
        if (get_u64(q) != m->p.n_conv[l] || get_u64(q + 8) != m->p.n_ssm[l])
            return bd_error(BRAID_E_MISMATCH, "state: recurrent layer %u has other state sizes", l);
    uint32_t n_seqs = get_u32(q), nc = get_u32(q + 4);
    if (kind == KIND_SEQ ? n_seqs != 1 : n_seqs > m->p.n_seq_max)
        return bd_error(BRAID_E_MISMATCH, "state: %u sequences (this memory has %u)", n_seqs, m->p.n_seq_max);
    if (nc > (m->kv ? m->kv->n_cells : 0))
        return bd_error(BRAID_E_FULL, "state: %u cells, the memory has %u", nc, m->kv ? m->kv->n_cells : 0);

    BD_TRY(sec_read(&r, SEC_CELLS, &pl, &len));
    uint64_t cl = (uint64_t)nc * np * 8;
    for (uint32_t l = 0; l < na; l++) cl += (uint64_t)nc * (kv_k_row(m->kv, l) + kv_v_row(m->kv, l));
    if (len != cl) return bd_error(BRAID_E_FORMAT, "state: cells section of %llu bytes, expected %llu", (unsigned long long)len, (unsigned long long)cl);
    for (uint64_t i = 0; i < (uint64_t)nc * np * 2; i++) {
        int32_t v = get_i32(pl + 4 * i);
        if (v < 0 || v > MEM_POS_MAX) return bd_error(BRAID_E_FORMAT, "state: cell %llu: position %d", (unsigned long long)(i / (2 * np)), v);
    }
    *cells = pl;
    *n_cells = (int32_t)nc;

    ld_seq *sq = bd_calloc(n_seqs ? n_seqs : 1, sizeof *sq);
    uint8_t *seen = bd_calloc(nc ? nc : 1, 1);
    uint8_t *ids = bd_calloc(m->p.n_seq_max, 1);
    braid_status st = sq && seen && ids ? BRAID_OK : bd_error(BRAID_E_NOMEM, "state: out of memory");
    size_t bb = m->rs ? m->rs->block_bytes : 0;
    for (uint32_t k = 0; st == BRAID_OK && k < n_seqs; k++) {
        ld_seq *e = &sq[k];
        if ((st = sec_read(&r, SEC_SEQ, &pl, &len)) != BRAID_OK) break;
        if (len != 32) {
            st = bd_error(BRAID_E_FORMAT, "state: sequence header of %llu bytes", (unsigned long long)len);
            break;
        }
        e->id = get_i32(pl), e->len = get_i32(pl + 4), e->n_erow = get_i32(pl + 8), e->approx = get_i32(pl + 12);
        e->n_ck = get_i32(pl + 16), e->rb_lo = get_i32(pl + 20), e->rb_n = get_i32(pl + 24), e->has_live = get_i32(pl + 28);
        if (kind == KIND_WHOLE && (e->id < 0 || (uint32_t)e->id >= m->p.n_seq_max || ids[e->id]++)) {
            st = bd_error(BRAID_E_MISMATCH, "state: sequence id %d (repeated, or not in 0..%u)", e->id, m->p.n_seq_max - 1);
            break;
        }
        if (e->len < 0 || e->len > INT32_MAX / 2 || (m->kv && (uint32_t)e->len > nc) || e->n_erow < 0 || e->n_erow > e->len ||
            (e->n_erow && !m->p.n_embd) || e->approx < -1 || (e->approx >= e->len && e->len) || (!e->len && e->approx != -1)) {
            st = bd_error(BRAID_E_FORMAT, "state: sequence %d: bad length %d / embedding rows %d / approx %d", e->id,
                          e->len, e->n_erow, e->approx);
            break;
        }
        /* A rollback buffer ends at the live state; one longer than this memory keeps is cut at load. */
        if (m->rs ? (e->has_live != (e->len > 0) || e->n_ck < 0 || e->n_ck > e->len || e->rb_n < 0 || e->rb_n > e->len ||
                     e->rb_lo < 0 || (e->rb_n && e->rb_lo + e->rb_n != e->len) || (!e->rb_n && e->rb_lo))
                  : (e->has_live || e->n_ck || e->rb_n || e->rb_lo || e->approx != -1)) {
            st = bd_error(BRAID_E_FORMAT, "state: sequence %d: bad recurrent counts (checkpoints %d, rollback %d at %d)",
                          e->id, e->n_ck, e->rb_n, e->rb_lo);
            break;
        }
        if ((st = sec_read(&r, SEC_HIST, &pl, &len)) != BRAID_OK) break;
        if (len != (uint64_t)e->len * (4 + 4ull * np) + (uint64_t)e->n_erow * m->p.n_embd * 4) {
            st = bd_error(BRAID_E_FORMAT, "state: sequence %d: history of %llu bytes", e->id, (unsigned long long)len);
            break;
        }
        e->tok = pl;
        e->pos = pl + (size_t)e->len * 4;
        e->embd = e->pos + (size_t)e->len * np * 4;
        /* What a decode would have refused cannot be in a state either: a token id this model has no row for
         * (a later replay would read outside the embedding matrix), a position out of range, a temporal
         * position before the previous input's. */
        int32_t ne = 0;
        for (int32_t i = 0; i < e->len && st == BRAID_OK; i++) {
            int32_t t = get_i32(e->tok + 4 * (size_t)i);
            if (t < -1 || (m->p.n_vocab && t >= 0 && (uint32_t)t >= m->p.n_vocab))
                st = bd_error(BRAID_E_FORMAT, "state: sequence %d input %d: token %d (ids are 0..%u, -1 an embedding)",
                              e->id, i, t, m->p.n_vocab ? m->p.n_vocab - 1 : (uint32_t)INT32_MAX);
            ne += t == -1;
            for (uint32_t c = 0; c < np && st == BRAID_OK; c++) {
                int32_t v = get_i32(e->pos + 4 * ((size_t)i * np + c));
                if (v < 0 || v > MEM_POS_MAX)
                    st = bd_error(BRAID_E_FORMAT, "state: sequence %d input %d: position %d not in 0..%d", e->id, i, v,
                                  MEM_POS_MAX);
            }
            if (st == BRAID_OK && i > 0 && get_i32(e->pos + 4 * (size_t)i * np) < get_i32(e->pos + 4 * (size_t)(i - 1) * np))
                st = bd_error(BRAID_E_FORMAT, "state: sequence %d input %d: temporal position %d goes back from %d",
                              e->id, i, get_i32(e->pos + 4 * (size_t)i * np), get_i32(e->pos + 4 * (size_t)(i - 1) * np));
        }
        if (st == BRAID_OK && ne != e->n_erow)
            st = bd_error(BRAID_E_FORMAT, "state: sequence %d: %d embedding inputs, %d rows", e->id, ne, e->n_erow);
        if (st != BRAID_OK) break;
        if (m->kv) {
            if ((st = sec_read(&r, SEC_KVLIST, &pl, &len)) != BRAID_OK) break;
            if (len != (uint64_t)e->len * 4) {
                st = bd_error(BRAID_E_FORMAT, "state: sequence %d: cell list of %llu bytes", e->id, (unsigned long long)len);
                break;
            }
            e->list = pl;
            for (int32_t i = 0; i < e->len && st == BRAID_OK; i++) {
                int32_t c = get_i32(pl + 4 * (size_t)i);
                if (c < 0 || (uint32_t)c >= nc || (i && c <= get_i32(pl + 4 * (size_t)(i - 1))))
                    st = bd_error(BRAID_E_FORMAT, "state: sequence %d input %d: cell %d (must ascend, < %u)", e->id, i, c, nc);
                else if (memcmp(*cells + (size_t)c * np * 8, e->pos + (size_t)i * np * 4, np * 4))
                    st = bd_error(BRAID_E_FORMAT, "state: sequence %d input %d: cell positions differ from the history", e->id, i);
                else
                    seen[c] = 1;
            }
            if (st != BRAID_OK) break;
        }
        if (m->rs) {
            if ((st = sec_read(&r, SEC_RS, &pl, &len)) != BRAID_OK) break;
            if (len != (uint64_t)e->has_live * bb + (uint64_t)e->n_ck * (8 + bb) + (uint64_t)e->rb_n * bb) {
                st = bd_error(BRAID_E_FORMAT, "state: sequence %d: recurrent section of %llu bytes", e->id, (unsigned long long)len);
                break;
            }
            e->live = pl;
            e->ck = pl + (size_t)e->has_live * bb;
            e->rb = e->ck + (size_t)e->n_ck * (8 + bb);
            for (int32_t i = 0; i < e->n_ck && st == BRAID_OK; i++) {
                int32_t idx = get_i32(e->ck + (size_t)i * (8 + bb));
                if (idx <= 0 || idx > e->len || get_i32(e->ck + (size_t)i * (8 + bb) + 4) ||
                    (i && idx <= get_i32(e->ck + (size_t)(i - 1) * (8 + bb))))
                    st = bd_error(BRAID_E_FORMAT, "state: sequence %d: checkpoint %d at index %d", e->id, i, idx);
            }
            if (st != BRAID_OK) break;
        }
    }
    if (st == BRAID_OK) {
        const uint8_t *e;
        st = sec_read(&r, SEC_END, &e, &len);
        if (st == BRAID_OK && len != 4) st = bd_error(BRAID_E_FORMAT, "state: end section of %llu bytes", (unsigned long long)len);
        if (st == BRAID_OK && r.off != r.n) st = bd_error(BRAID_E_FORMAT, "state: %zu bytes after the end", r.n - r.off);
    }
    for (uint32_t c = 0; st == BRAID_OK && c < nc; c++)
        if (!seen[c]) st = bd_error(BRAID_E_FORMAT, "state: cell %u belongs to no sequence", c);
    bd_free(seen);
    bd_free(ids);
    if (st != BRAID_OK) {
        bd_free(sq);
        return st;
    }
    *out_seqs = sq;
    *out_n = (int32_t)n_seqs;
    return BRAID_OK;
}

static void ld_new_free(const mem *m, ld_new *a) {
    bd_free(a->tok);
    bd_free(a->pos);
    bd_free(a->erow);
    bd_free(a->embd);
    bd_free(a->live);
    for (int32_t i = 0; a->rb && i < a->n_rb; i++) bd_free(a->rb[i]);
    bd_free(a->rb);
    for (int32_t i = 0; a->ck && i < a->n_ck; i++) bd_free(a->ck[i].blk);
    bd_free(a->ck);
    (void)m;
}

static float *new_block(const mem *m, const uint8_t *src) {
    float *b = bd_aligned_alloc(64, m->rs->block_bytes);
    if (b) memcpy(b, src, m->rs->block_bytes);
    return b;
}

braid_status mem_state_load(mem *m, int32_t s, uint64_t fingerprint, const void *data, size_t size) {
    if (m->pending) return bd_error(BRAID_E_INVALID, "state: load while a batch is pending");
    if (s != -1 && !mem_seq_ok(m, s)) return bd_error(BRAID_E_RANGE, "state: sequence %d not in 0..%u", s, m->p.n_seq_max - 1);
    ld_seq *sq = NULL;
    int32_t n_sq = 0, nc = 0;
    const uint8_t *cells = NULL;
    BD_TRY(parse(m, s, fingerprint, data, size, &sq, &n_sq, &cells, &nc));
    if (s >= 0) sq[0].id = s;
    uint32_t np = m->p.n_pos_per_token;
    braid_status st = BRAID_OK;
    /* Free cells once the replaced content is gone. */
    if (m->kv) {
        uint32_t avail = s < 0 ? m->kv->n_cells : m->kv->n_free + kv_count_exclusive(m->kv, s);
        if ((uint32_t)nc > avail)
            st = bd_error(BRAID_E_FULL, "state: needs %d cells, %u would be free", nc, avail);
    }
    ld_new *nw = bd_calloc(n_sq ? (size_t)n_sq : 1, sizeof *nw);
    int32_t *lens = bd_mallocn(m->p.n_seq_max, sizeof(int32_t));
    int32_t n_cand = 0;
    for (int32_t k = 0; k < n_sq; k++) n_cand += sq[k].n_ck;
    rs_cand *cand = bd_mallocn((size_t)n_cand + 1, sizeof *cand);
    uint8_t *keep = bd_mallocn((size_t)n_cand + 1, 1);
    rs_cand *victims = bd_mallocn((m->rs ? m->rs->n_ck_total : 0) + 1, sizeof *victims);
    int32_t *cellmap = bd_mallocn((size_t)nc + 1, sizeof(int32_t));
    int32_t max_len = 0;
    for (int32_t k = 0; k < n_sq; k++) max_len = sq[k].len > max_len ? sq[k].len : max_len;
    int32_t *seqcells = bd_mallocn((size_t)max_len + 1, sizeof(int32_t));
    int32_t n_victims = 0;
    if (st == BRAID_OK && !(nw && lens && cand && keep && victims && cellmap && seqcells))
        st = bd_error(BRAID_E_NOMEM, "state: out of memory");
    if (st == BRAID_OK && m->rs) {
        for (uint32_t t = 0; t < m->p.n_seq_max; t++) lens[t] = s < 0 ? 0 : m->hist[t].len;
        int32_t j = 0;
        for (int32_t k = 0; k < n_sq; k++) {
            lens[sq[k].id] = sq[k].len;
            for (int32_t i = 0; i < sq[k].n_ck; i++)
                cand[j++] = (rs_cand){sq[k].id, get_i32(sq[k].ck + (size_t)i * (8 + m->rs->block_bytes))};
        }
        st = rs_ck_plan_ex(m->rs, lens, cand, n_cand, s < 0 ? -2 : s, victims, &n_victims, keep);
    }
    /* Allocate everything the new content needs. */
    size_t bb = m->rs ? m->rs->block_bytes : 0;
    for (int32_t k = 0, j = 0; st == BRAID_OK && k < n_sq; k++) {
        const ld_seq *e = &sq[k];
        ld_new *a = &nw[k];
        size_t n = e->len ? (size_t)e->len : 1;
        if (!(a->tok = bd_mallocn(n, sizeof *a->tok)) || !(a->pos = bd_mallocn(n * np, sizeof *a->pos)) ||
            !(a->erow = bd_mallocn(n, sizeof *a->erow)) ||
            !(a->embd = bd_mallocn(e->n_erow ? (size_t)e->n_erow * m->p.n_embd : 1, sizeof(float)))) {
            st = bd_error(BRAID_E_NOMEM, "state: out of memory for a history");
            break;
        }
        if (!m->rs) continue;
        if (e->has_live && !(a->live = new_block(m, e->live))) {
            st = bd_error(BRAID_E_NOMEM, "state: out of memory for a state block");
            break;
        }
        if (!(a->rb = bd_calloc(m->p.n_rollback + 1, sizeof(float *)))) {
            st = bd_error(BRAID_E_NOMEM, "state: out of memory");
            break;
        }
        int32_t skip = e->rb_n > (int32_t)m->p.n_rollback ? e->rb_n - (int32_t)m->p.n_rollback : 0;
        for (int32_t i = skip; i < e->rb_n && st == BRAID_OK; i++, a->n_rb++)
            if (!(a->rb[a->n_rb] = new_block(m, e->rb + (size_t)i * bb)))
                st = bd_error(BRAID_E_NOMEM, "state: out of memory for a state block");
        int32_t nk = 0;
        for (int32_t i = 0; i < e->n_ck; i++) nk += keep[j + i];
        a->ck_cap = nk ? nk : 1;
        if (st == BRAID_OK && !(a->ck = bd_mallocn((size_t)a->ck_cap, sizeof *a->ck))) st = bd_error(BRAID_E_NOMEM, "state: out of memory");
        for (int32_t i = 0; i < e->n_ck && st == BRAID_OK; i++, j++) {
            if (!keep[j]) continue;
            const uint8_t *c = e->ck + (size_t)i * (8 + bb);
            if (!(a->ck[a->n_ck].blk = new_block(m, c + 8))) {
                st = bd_error(BRAID_E_NOMEM, "state: out of memory for a checkpoint");
                break;
            }
            a->ck[a->n_ck++].idx = get_i32(c);
        }
    }
    if (st != BRAID_OK) {
        for (int32_t k = 0; nw && k < n_sq; k++) ld_new_free(m, &nw[k]);
        goto done;
    }

    /* Apply: nothing below can fail. Drop the replaced content first. */
    for (int32_t t = s < 0 ? 0 : s; t < (s < 0 ? (int32_t)m->p.n_seq_max : s + 1); t++) {
        if (m->kv) kv_truncate(m->kv, t, 0);
        if (m->rs) rs_clear(m->rs, t);
        hist_truncate(&m->hist[t], 0);
        m->approx[t] = -1;
    }
    for (int32_t v = 0; v < n_victims; v++) rs_ck_drop(m->rs, victims[v].seq, rs_ck_find(m->rs, victims[v].seq, victims[v].idx));
    if (m->kv) {
        kv_adopt_cells(m->kv, (uint32_t)nc, cells, cells + (size_t)nc * np * 8, cellmap);
        for (int32_t k = 0; k < n_sq; k++) {
            for (int32_t i = 0; i < sq[k].len; i++) seqcells[i] = cellmap[get_i32(sq[k].list + 4 * (size_t)i)];
            kv_adopt_seq(m->kv, sq[k].id, seqcells, (uint32_t)sq[k].len);
        }
    }
    for (int32_t k = 0; k < n_sq; k++) {
        const ld_seq *e = &sq[k];
        ld_new *a = &nw[k];
        memcpy(a->tok, e->tok, (size_t)e->len * 4);
        memcpy(a->pos, e->pos, (size_t)e->len * np * 4);
        memcpy(a->embd, e->embd, (size_t)e->n_erow * m->p.n_embd * 4);
        hist_adopt(&m->hist[e->id], a->tok, a->pos, a->erow, a->embd, e->len, e->n_erow);
        m->approx[e->id] = e->approx;
        if (m->rs) rs_adopt_seq(m->rs, e->id, a->live, a->rb, e->len - a->n_rb, a->n_rb, a->ck, a->n_ck, a->ck_cap);
    }
    MEM_ASSERT_OK(m);
done:
    bd_free(nw);
    bd_free(lens);
    bd_free(cand);
    bd_free(keep);
    bd_free(victims);
    bd_free(cellmap);
    bd_free(seqcells);
    bd_free(sq);
    return st;
}
