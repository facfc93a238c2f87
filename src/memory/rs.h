/* rs.h — the recurrent memory: for each sequence the live state of every recurrent layer, the rollback buffer
 * of its last decode and its checkpoints, all as "state blocks".
 *
 * A state block holds every recurrent layer of one sequence at one index: layer l's conv window at off_conv[l]
 * (n_conv[l] floats), then its SSM / delta-rule state at off_ssm[l] (n_ssm[l] floats). Blocks are 64-byte
 * aligned and recycled through a small pool so a steady decode allocates nothing. A NULL block stands for the
 * zero state (index 0), which is always available.
 *
 * Per sequence (len = the sequence's length, kept by the memory, memory.c):
 *   live                state at index len (NULL: zero)
 *   rb[0 .. rb_n)       rollback buffer: states at indices rb_lo .. rb_lo + rb_n - 1 (< len), valid as long as the
 *                       inputs before them are unchanged (the memory drops what an operation invalidates)
 *   ck[0 .. n_ck)       checkpoints, ascending index, each a block of its own
 * Checkpoints of all sequences share one byte budget; rs_ck_plan decides which survive (eviction keeps recent
 * checkpoints dense and old ones sparse). */
#ifndef BRAID_MEMORY_RS_H
#define BRAID_MEMORY_RS_H

#include <stddef.h>
#include <stdint.h>

#include "braid.h"

typedef struct rs_ckpt {
    int32_t idx;
    float *blk; /* [block_floats] */
} rs_ckpt;

typedef struct rs_seq {
    float *live;   /* [block_floats] or NULL (zero state) */
    int32_t rb_lo; /* index of rb[0] */
    int32_t rb_n;  /* valid rollback states */
    float **rb;    /* [n_rollback + 1] blocks (an entry may be NULL: the zero state) */
    rs_ckpt *ck;   /* [ck_cap] ascending idx */
    int32_t n_ck, ck_cap;
    int32_t *mark; /* [n_mark] ascending indices where a decode passing them takes a checkpoint */
    int32_t n_mark;
} rs_seq;

typedef struct rs_mem {
    uint32_t n_layers, n_seq, n_rollback, ck_interval;
    uint64_t ck_budget;
    uint64_t ck_max;       /* checkpoint blocks the budget holds */
    uint64_t *n_conv;      /* [n_layers] floats */
    uint64_t *n_ssm;       /* [n_layers] floats */
    size_t *off_conv;      /* [n_layers] floats into a block */
    size_t *off_ssm;       /* [n_layers] */
    size_t block_floats, block_bytes;
    float *zero;           /* [block_floats] zeros, read-only */
    rs_seq *seq;           /* [n_seq] */
    float **pool;          /* [pool_cap] free blocks for reuse */
    uint32_t n_pool, pool_cap;
    uint64_t n_ck_total;   /* checkpoint blocks held by all sequences */
} rs_mem;

braid_status rs_new(uint32_t n_seq, uint32_t n_layers, const uint64_t *n_conv, const uint64_t *n_ssm,
                    uint32_t n_rollback, uint32_t ck_interval, uint64_t ck_budget, rs_mem **out);
void rs_free(rs_mem *rs);

/* A block from the pool or newly allocated (NULL: out of memory, reason recorded). Give it back with rs_put. */
float *rs_get(rs_mem *rs);
void rs_put(rs_mem *rs, float *blk); /* NULL allowed; to the pool, or freed when the pool is full */
static inline const float *rs_or_zero(const rs_mem *rs, const float *blk) { return blk ? blk : rs->zero; }

/* Grows s's checkpoint array to hold `extra` more entries (capacity only; no visible change). */
braid_status rs_ck_reserve(rs_mem *rs, int32_t s, int32_t extra);
/* Index of s's checkpoint at idx, or -1; and of the last checkpoint with index <= idx, or -1. */
int32_t rs_ck_find(const rs_mem *rs, int32_t s, int32_t idx);
int32_t rs_ck_floor(const rs_mem *rs, int32_t s, int32_t idx);
/* Inserts a checkpoint (capacity reserved, no checkpoint at idx yet). */
void rs_ck_insert(rs_mem *rs, int32_t s, int32_t idx, float *blk);
/* Drops checkpoint entry i of s (its block goes to the pool). */
void rs_ck_drop(rs_mem *rs, int32_t s, int32_t i);
/* Drops s's checkpoints with index > n. */
void rs_ck_drop_after(rs_mem *rs, int32_t s, int32_t n);

/* Drops s's rollback states with index > n (all of them if n < rb_lo). */
void rs_rb_drop_after(rs_mem *rs, int32_t s, int32_t n);
/* s's live state becomes blk (NULL: zero state); the old block goes to the pool. */
void rs_set_live(rs_mem *rs, int32_t s, float *blk);
/* Takes the rollback state at idx (rb_lo <= idx < rb_lo + rb_n) out of the buffer: the caller owns it, the
 * buffer keeps a NULL there (drop the entries after idx next). */
float *rs_rb_take(rs_mem *rs, int32_t s, int32_t idx);
/* A committed decode of s: work becomes the live state; the rollback buffer is replaced by the states at
 * rb_lo, rb_lo + 1, ...: the old live state first when keep_live, then the n_snap snapshot blocks (rb_lo == -1:
 * no buffer, the old live block goes to the pool). */
void rs_advance(rs_mem *rs, int32_t s, float *work, int32_t rb_lo, int keep_live, float *const *snap, int32_t n_snap);
/* Inputs [i0, i1) of s were removed: checkpoints in (i0, i1] go, later ones move down by i1 - i0 (they keep
 * their lineage, see mem_seq_approx_from). */
void rs_ck_remove_range(rs_mem *rs, int32_t s, int32_t i0, int32_t i1);
/* State load into an empty s (rs_clear first): s owns live, rb (n_rollback + 1 entries, rb_n valid from
 * rb_lo) and ck (n_ck valid of ck_cap, ascending idx) afterwards; the checkpoints count against the total. */
void rs_adopt_seq(rs_mem *rs, int32_t s, float *live, float **rb, int32_t rb_lo, int32_t rb_n, rs_ckpt *ck,
                  int32_t n_ck, int32_t ck_cap);
/* Marks: s's later decodes take a checkpoint at each of idx[0 .. n) they reach (message boundaries of a
 * prompt), replacing the earlier marks (n = 0: none). Copies idx (sorted, deduplicated); BRAID_E_NOMEM leaves
 * the old marks. rs_marked says whether idx is one of them. */
braid_status rs_mark_set(rs_mem *rs, int32_t s, const int32_t *idx, int32_t n);
int rs_marked(const rs_mem *rs, int32_t s, int32_t idx);
/* Drops everything of s: live, rollback, checkpoints. */
void rs_clear(rs_mem *rs, int32_t s);

/* Checkpoint planning. A candidate is a checkpoint an operation would add (seq, idx; no checkpoint exists
 * there yet). Given each sequence's length after the operation (lens[n_seq]), rs_ck_plan lists the existing
 * checkpoints to evict (victims, capacity n_ck_total; *n_victims) and marks the candidates that survive
 * (keep[n_cand]), so that the total fits the budget. Deterministic: applying the plan later gives exactly the
 * planned result. Allocates scratch (BRAID_E_NOMEM). */
typedef struct rs_cand {
    int32_t seq, idx;
} rs_cand;
braid_status rs_ck_plan(const rs_mem *rs, const int32_t *lens, const rs_cand *cand, int32_t n_cand,
                        rs_cand *victims, int32_t *n_victims, uint8_t *keep);
/* The same, as if the existing checkpoints of sequence `gone` (or of every sequence, gone == -2) were
 * already dropped (a state load replaces them). */
braid_status rs_ck_plan_ex(const rs_mem *rs, const int32_t *lens, const rs_cand *cand, int32_t n_cand, int32_t gone,
                           rs_cand *victims, int32_t *n_victims, uint8_t *keep);

/* Copies of sequence src's checkpoints at indices <= n for sequence dst (a sequence copy, so that truncating
 * the copy later restores from a checkpoint instead of replaying from 0). rs_ck_copy_plan plans them against
 * the budget with dst's current checkpoints counted as gone and lens[] the lengths after the copy, reserves
 * dst's capacity, and allocates and fills the kept copies' blocks: nothing visible changes, and on failure
 * nothing is held. rs_ck_copy_apply (after dst was cleared) evicts the planned victims and inserts the copies;
 * rs_ck_copy_release gives everything back unused. */
typedef struct rs_ck_copy {
    rs_ckpt *ck;        /* [n] the copies, ascending idx */
    int32_t n;
    rs_cand *victims;   /* [n_victims] existing checkpoints to evict */
    int32_t n_victims;
} rs_ck_copy;
braid_status rs_ck_copy_plan(rs_mem *rs, const int32_t *lens, int32_t src, int32_t dst, int32_t n, rs_ck_copy *out);
void rs_ck_copy_apply(rs_mem *rs, int32_t dst, rs_ck_copy *c);
void rs_ck_copy_release(rs_mem *rs, rs_ck_copy *c);

/* Invariants of s's states for a sequence of length len (no allocation); rs_check_total after all sequences. */
braid_status rs_check_seq(const rs_mem *rs, int32_t s, int32_t len);
braid_status rs_check_total(const rs_mem *rs);

#endif
