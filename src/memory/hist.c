/* hist.c — the input history of one sequence (hist.h): growth, truncation, removal, copies and the arrays a
 * state load installs. */
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "memory/hist.h"

void hist_init(mem_hist *h, uint32_t n_pos, uint32_t n_embd) {
    memset(h, 0, sizeof *h);
    h->n_pos = n_pos;
    h->n_embd = n_embd;
}

void hist_free(mem_hist *h) {
    bd_free(h->tok);
    bd_free(h->pos);
    bd_free(h->erow);
    bd_free(h->embd);
    hist_init(h, h->n_pos, h->n_embd);
}

int32_t hist_count_erows(const mem_hist *h, int32_t n) {
    int32_t ne = 0;
    for (int32_t i = 0; i < n; i++) ne += h->erow[i] >= 0;
    return ne;
}

braid_pos hist_next_pos(const mem_hist *h) {
    if (h->len == 0) return 0;
    const braid_pos *p = hist_pos(h, h->len - 1);
    braid_pos mx = p[0];
    if (h->n_pos == 4) {
        if (p[1] > mx) mx = p[1];
        if (p[2] > mx) mx = p[2];
    }
    return mx + 1;
}

braid_status hist_reserve(mem_hist *h, int32_t len, int32_t n_erow) {
    uint32_t np = h->n_pos;
    if (len > h->cap) {
        int32_t cap = h->cap ? h->cap : 16;
        while (cap < len) cap = cap > INT32_MAX / 2 ? len : cap * 2;
        braid_token *tok = bd_realloc(h->tok, (size_t)cap * sizeof *tok);
        if (!tok) return bd_error(BRAID_E_NOMEM, "memory: out of memory for the input history");
        h->tok = tok;
        braid_pos *pos = bd_realloc(h->pos, (size_t)cap * np * sizeof *pos);
        if (!pos) return bd_error(BRAID_E_NOMEM, "memory: out of memory for the input history");
        h->pos = pos;
        int32_t *erow = bd_realloc(h->erow, (size_t)cap * sizeof *erow);
        if (!erow) return bd_error(BRAID_E_NOMEM, "memory: out of memory for the input history");
        h->erow = erow;
        h->cap = cap;
    }
    if (n_erow > h->ecap) {
        int32_t cap = h->ecap ? h->ecap : 4;
        while (cap < n_erow) cap = cap > INT32_MAX / 2 ? n_erow : cap * 2;
        float *e = bd_realloc(h->embd, (size_t)cap * h->n_embd * sizeof *e);
        if (!e) return bd_error(BRAID_E_NOMEM, "memory: out of memory for embedding rows in the history");
        h->embd = e;
        h->ecap = cap;
    }
    return BRAID_OK;
}

void hist_truncate(mem_hist *h, int32_t n) {
    if (n >= h->len) return;
    int32_t ne = 0;
    for (int32_t i = n; i-- > 0;)
        if (h->erow[i] >= 0) {
            ne = h->erow[i] + 1;
            break;
        }
    h->len = n;
    h->n_erow = ne;
}

void hist_remove(mem_hist *h, int32_t i0, int32_t i1) {
    uint32_t np = h->n_pos;
    int32_t e0 = -1, ne = 0; /* first embedding row in the range and how many */
    for (int32_t i = i0; i < i1; i++)
        if (h->erow[i] >= 0) {
            if (e0 < 0) e0 = h->erow[i];
            ne++;
        }
    if (ne) {
        memmove(h->embd + (size_t)e0 * h->n_embd, h->embd + (size_t)(e0 + ne) * h->n_embd,
                (size_t)(h->n_erow - e0 - ne) * h->n_embd * sizeof(float));
        h->n_erow -= ne;
    }
    int32_t d = i1 - i0;
    memmove(h->tok + i0, h->tok + i1, (size_t)(h->len - i1) * sizeof *h->tok);
    memmove(h->pos + (size_t)i0 * np, h->pos + (size_t)i1 * np, (size_t)(h->len - i1) * np * sizeof *h->pos);
    memmove(h->erow + i0, h->erow + i1, (size_t)(h->len - i1) * sizeof *h->erow);
    h->len -= d;
    for (int32_t i = i0; i < h->len && ne; i++)
        if (h->erow[i] >= 0) h->erow[i] -= ne;
}

void hist_push(mem_hist *h, braid_token tok, const braid_pos *pos, const float *embd) {
    int32_t i = h->len++;
    h->tok[i] = embd ? -1 : tok;
    memcpy(hist_pos(h, i), pos, h->n_pos * sizeof *pos);
    if (embd) {
        memcpy(h->embd + (size_t)h->n_erow * h->n_embd, embd, h->n_embd * sizeof(float));
        h->erow[i] = h->n_erow++;
    } else {
        h->erow[i] = -1;
    }
}

void hist_copy(mem_hist *dst, const mem_hist *src, int32_t n) {
    uint32_t np = src->n_pos;
    int32_t ne = hist_count_erows(src, n);
    dst->len = n;
    dst->n_erow = ne;
    if (n == 0) return; /* the source may have no arrays yet */
    memcpy(dst->tok, src->tok, (size_t)n * sizeof *dst->tok);
    memcpy(dst->pos, src->pos, (size_t)n * np * sizeof *dst->pos);
    memcpy(dst->erow, src->erow, (size_t)n * sizeof *dst->erow);
    if (ne) memcpy(dst->embd, src->embd, (size_t)ne * src->n_embd * sizeof(float));
}

void hist_edit_pos(mem_hist *h, int32_t i0, int32_t i1, uint32_t nc, braid_pos d, int32_t k) {
    for (int32_t i = i0; i < i1; i++) {
        braid_pos *p = hist_pos(h, i);
        for (uint32_t c = 0; c < nc; c++) p[c] = k ? p[c] / k : p[c] + d;
    }
}

void hist_adopt(mem_hist *h, braid_token *tok, braid_pos *pos, int32_t *erow, float *embd, int32_t len,
                int32_t n_erow) {
    hist_free(h);
    h->tok = tok;
    h->pos = pos;
    h->erow = erow;
    h->embd = embd;
    h->cap = len ? len : 1;
    h->ecap = n_erow;
    h->len = len;
    h->n_erow = n_erow;
    for (int32_t i = 0, r = 0; i < len; i++) h->erow[i] = h->tok[i] < 0 ? r++ : -1;
}

braid_status hist_check(const mem_hist *h, uint32_t s) {
    if (h->len < 0 || h->len > h->cap || (h->len && !h->tok))
        return bd_error(BRAID_E_INVALID, "memory: seq %u: history length %d / capacity %d", s, h->len, h->cap);
    int32_t ne = 0;
    for (int32_t i = 0; i < h->len; i++) {
        if ((h->tok[i] < 0) != (h->erow[i] >= 0) || (h->erow[i] >= 0 && h->erow[i] != ne))
            return bd_error(BRAID_E_INVALID, "memory: seq %u input %d: token/embedding row mismatch", s, i);
        ne += h->erow[i] >= 0;
    }
    if (ne != h->n_erow) return bd_error(BRAID_E_INVALID, "memory: seq %u: %d embedding rows, %d counted", s, h->n_erow, ne);
    for (int32_t i = 1; i < h->len; i++)
        if (hist_pos(h, i)[0] < hist_pos(h, i - 1)[0])
            return bd_error(BRAID_E_INVALID, "memory: seq %u input %d: temporal position goes back", s, i);
    return BRAID_OK;
}
