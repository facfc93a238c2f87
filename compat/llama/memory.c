/* memory.c — llama.h's llama_memory_* calls over braid's sequences. llama.h addresses a sequence by position
 * ranges; braid by input index (design.md §3), with positions non-decreasing along a sequence, so a range
 * [p0, p1) is the index range from the first input at or after p0 to the first at or after p1 (binary
 * search; for M-RoPE the temporal component). What braid does differently is logged: a middle range removed
 * from a model with recurrent layers leaves the recurrent state summarizing it (llama.cpp refuses that
 * removal on such models), and a copy is always of a prefix. */
#include <limits.h>

#include "shim.h"

llama_memory_t llama_get_memory(const struct llama_context *c) {
    return c ? (llama_memory_t)&((struct llama_context *)c)->mem : NULL;
}

static braid_pos pos_at(braid_context *bc, braid_seq_id s, int32_t i) {
    braid_pos p[4] = {0};
    braid_token t;
    return braid_seq_input(bc, s, i, &t, p) == BRAID_OK ? p[0] : INT_MAX;
}

/* First index of s whose position is >= p (the length if none). */
static int32_t index_of(braid_context *bc, braid_seq_id s, braid_pos p) {
    int32_t lo = 0, hi = braid_seq_len(bc, s);
    if (hi < 0) return 0;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (pos_at(bc, s, mid) < p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static int valid_seq(const struct llama_context *c, llama_seq_id s) {
    return s >= 0 && (uint32_t)s < c->params.n_seq_max;
}

/* The input index range [*i0, *i1) of positions [p0, p1) of s (negative p0 / p1: from the start / to the end). */
static void index_range(braid_context *bc, braid_seq_id s, llama_pos p0, llama_pos p1, int32_t *i0, int32_t *i1) {
    *i0 = p0 < 0 ? 0 : index_of(bc, s, p0);
    *i1 = p1 < 0 ? braid_seq_len(bc, s) : index_of(bc, s, p1);
}

void llama_memory_clear(llama_memory_t mem, bool data) {
    (void)data;
    braid_seq_clear(mem->ctx->bc, -1);
}

static bool seq_rm_one(struct llama_context *c, llama_seq_id s, llama_pos p0, llama_pos p1) {
    braid_context *bc = c->bc;
    int32_t len = braid_seq_len(bc, s), i0, i1;
    index_range(bc, s, p0, p1, &i0, &i1);
    if (i0 >= i1) return true;
    braid_status st;
    if (i1 >= len) {
        st = braid_seq_truncate(bc, s, i0);
    } else {
        st = braid_seq_remove(bc, s, i0, i1);
        if (st == BRAID_OK && braid_model_has_recurrent(c->model->bm))
            shim_log(GGML_LOG_LEVEL_WARN, "llama_memory_seq_rm: removed positions [%d, %d) of sequence %d from the "
                                          "attention memory; its recurrent state still summarizes them (braid "
                                          "keeps it; llama.cpp would refuse)\n", p0, p1, s);
    }
    if (st != BRAID_OK) {
        shim_log_braid("llama_memory_seq_rm", st);
        return false;
    }
    return true;
}

bool llama_memory_seq_rm(llama_memory_t mem, llama_seq_id seq_id, llama_pos p0, llama_pos p1) {
    struct llama_context *c = mem->ctx;
    if (seq_id >= 0) {
        if (!valid_seq(c, seq_id)) {
            shim_log(GGML_LOG_LEVEL_ERROR, "llama_memory_seq_rm: sequence %d not in 0..%u\n", seq_id,
                     c->params.n_seq_max - 1);
            return false;
        }
        return seq_rm_one(c, seq_id, p0, p1);
    }
    if (p0 <= 0 && p1 < 0) {
        braid_seq_clear(c->bc, -1);
        return true;
    }
    bool ok = true;
    for (uint32_t s = 0; s < c->params.n_seq_max; s++) ok = seq_rm_one(c, (llama_seq_id)s, p0, p1) && ok;
    return ok;
}

void llama_memory_seq_cp(llama_memory_t mem, llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1) {
    struct llama_context *c = mem->ctx;
    if (src == dst) return;
    if (!valid_seq(c, src) || !valid_seq(c, dst)) {
        shim_log(GGML_LOG_LEVEL_ERROR, "llama_memory_seq_cp: sequence %d or %d not in 0..%u\n", src, dst,
                 c->params.n_seq_max - 1);
        return;
    }
    if (p0 > 0 && index_of(c->bc, src, p0) > 0) {
        shim_log(GGML_LOG_LEVEL_ERROR, "llama_memory_seq_cp: braid copies a prefix of a sequence (p0 from the "
                                       "start), not positions from %d on\n", p0);
        return;
    }
    int32_t n = p1 < 0 ? braid_seq_len(c->bc, src) : index_of(c->bc, src, p1);
    if (braid_seq_len(c->bc, dst) > 0)
        shim_log(GGML_LOG_LEVEL_INFO, "llama_memory_seq_cp: sequence %d is replaced by the copy\n", dst);
    braid_status st = braid_seq_copy(c->bc, src, dst, n);
    if (st != BRAID_OK) shim_log_braid("llama_memory_seq_cp", st);
}

void llama_memory_seq_keep(llama_memory_t mem, llama_seq_id seq_id) {
    struct llama_context *c = mem->ctx;
    for (uint32_t s = 0; s < c->params.n_seq_max; s++)
        if ((llama_seq_id)s != seq_id) braid_seq_clear(c->bc, (braid_seq_id)s);
}

void llama_memory_seq_add(llama_memory_t mem, llama_seq_id seq_id, llama_pos p0, llama_pos p1, llama_pos delta) {
    struct llama_context *c = mem->ctx;
    if (!valid_seq(c, seq_id) || delta == 0) return;
    int32_t i0, i1;
    index_range(c->bc, seq_id, p0, p1, &i0, &i1);
    if (i0 >= i1) return;
    braid_status st = braid_seq_shift_pos(c->bc, seq_id, i0, i1, delta);
    if (st != BRAID_OK) shim_log_braid("llama_memory_seq_add", st);
}

void llama_memory_seq_div(llama_memory_t mem, llama_seq_id seq_id, llama_pos p0, llama_pos p1, int d) {
    struct llama_context *c = mem->ctx;
    if (!valid_seq(c, seq_id) || d == 1) return;
    int32_t i0, i1;
    index_range(c->bc, seq_id, p0, p1, &i0, &i1);
    if (i0 >= i1) return;
    braid_status st = braid_seq_div_pos(c->bc, seq_id, i0, i1, d);
    if (st != BRAID_OK) shim_log_braid("llama_memory_seq_div", st);
}

llama_pos llama_memory_seq_pos_min(llama_memory_t mem, llama_seq_id seq_id) {
    struct llama_context *c = mem->ctx;
    if (!valid_seq(c, seq_id) || braid_seq_len(c->bc, seq_id) <= 0) return -1;
    return pos_at(c->bc, seq_id, 0);
}

llama_pos llama_memory_seq_pos_max(llama_memory_t mem, llama_seq_id seq_id) {
    struct llama_context *c = mem->ctx;
    int32_t len = valid_seq(c, seq_id) ? braid_seq_len(c->bc, seq_id) : -1;
    if (len <= 0) return -1;
    return pos_at(c->bc, seq_id, len - 1);
}

bool llama_memory_can_shift(llama_memory_t mem) {
    (void)mem;
    return true;
}
