/* mem_impl.h — the inside of a mem (memory.h) shared by its files: memory.c (life cycle, queries, sequence
 * operations), batch.c (the batch object and the decode / replay transaction), ubatch.c (batch validation and
 * splitting) and state_io.c (the state format), over the leaves hist.c, kv.c and rs.c, which alone write their
 * own structures. Nothing outside src/memory includes it. */
#ifndef BRAID_MEMORY_MEM_IMPL_H
#define BRAID_MEMORY_MEM_IMPL_H

#include <assert.h>
#include <stdio.h>

#include "memory/hist.h"
#include "memory/kv.h"
#include "memory/memory.h"
#include "memory/rs.h"

struct mem {
    mem_params p;        /* arrays point to the copies below */
    uint32_t *n_embd_k;  /* [n_attn_layers] */
    uint32_t *n_embd_v;  /* [n_attn_layers] */
    uint64_t *n_conv;    /* [n_rs_layers] */
    uint64_t *n_ssm;     /* [n_rs_layers] */
    kv_cache *kv;        /* NULL without attention layers */
    rs_mem *rs;          /* NULL without recurrent layers */
    mem_hist *hist;      /* [n_seq_max] */
    int32_t *approx;     /* [n_seq_max] see mem_seq_approx_from (-1: exact) */
    mem_batch *pending;  /* the open transaction, or NULL */
};

enum { MB_DECODE = 0, MB_REPLAY_TRUNCATE, MB_REPLAY_COPY };

/* Where a checkpoint added by a decode takes its state from at commit. */
enum { CK_FROM_OLD_LIVE = 0, CK_FROM_WORK, CK_FROM_SNAP, CK_DIRECT };

typedef struct mem_bck {
    int32_t idx;
    float *blk;    /* the checkpoint's own block */
    int src;       /* CK_FROM_* */
    int32_t snap;  /* for CK_FROM_SNAP: which of the sequence's snapshot blocks */
} mem_bck;

/* What a batch does to one sequence. */
typedef struct mem_bseq {
    int32_t s;
    int32_t len0, n_new;  /* length before, inputs added */
    int linked;           /* a run of this sequence has been linked (link_runs) */
    float *work;          /* state block the batch writes (NULL without rs) */
    /* new rollback buffer: states at rb_lo .. len0 + n_new - 1 (rb_lo == -1: none); when rb_lo == len0 the
     * first one is the old live state, the others are the snapshot blocks */
    int32_t rb_lo;
    float **snap;         /* [n_snap] blocks for the states at indices snap_lo, snap_lo + 1, ... */
    int32_t n_snap, snap_lo;
    mem_bck *ck;          /* [n_ck] checkpoints to add */
    int32_t n_ck;
} mem_bseq;

struct mem_batch {
    int kind;
    int32_t n_rows, n_ub, n_runs;
    /* rows in ubatch order (ubatch u is rows [ub_row0[u], ub_row0[u+1])) */
    braid_token *token;   /* [n_rows] */
    const float **embd;   /* [n_rows] */
    braid_pos *pos;       /* [n_rows][n_pos] */
    int32_t *seq;         /* [n_rows] */
    int32_t *idx;         /* [n_rows] */
    int32_t *batch_row;   /* [n_rows] */
    uint8_t *logits;      /* [n_rows] */
    int32_t *kv_write;    /* [n_rows] */
    float **rs_snap;      /* [n_rows] */
    int32_t *ub_row0;     /* [n_ub + 1] */
    mem_run *runs;        /* [n_runs], row0 relative to its ubatch */
    int32_t *ub_run0;     /* [n_ub + 1] */
    mem_bseq *bs;         /* [n_bs] sequences touched */
    int32_t n_bs;
    int32_t *cells;       /* [n_cells] kv cells taken for this batch, in take order */
    int32_t n_cells;
    rs_cand *victims;     /* existing checkpoints evicted at commit */
    int32_t n_victims;
    /* replay: sequence `target` gets the state at `to`, computed from `from` on `source`'s inputs */
    int32_t source, target, from, to;
    rs_ck_copy ck_copy;   /* replay of a copy: source's checkpoints for target, applied at commit */
};

/* ---- helpers shared by the files ---- */
static inline int mem_seq_ok(const mem *m, int32_t s) { return s >= 0 && (uint32_t)s < m->p.n_seq_max; }
/* Validates and splits a batch into rows in ubatch order (ubatch.c). Fills b's row arrays, ub_row0, runs
 * (without the kv/rs pointers) and bs (s, len0, n_new). */
braid_status ub_split(const mem *m, const braid_batch *in, int32_t n_ubatch, mem_batch *b);
/* Allocates the row arrays of a batch of n rows in n_ub ubatches (runs: at most n); kv_write = -1. */
braid_status ub_alloc_rows(const mem *m, mem_batch *b, int32_t n, int32_t n_ub);
/* Frees a batch's arrays (not the resources it reserved). */
void mem_batch_free_arrays(mem_batch *b);
/* Builds a replay batch for inputs [from, to) of `source`, landing on `target` (batch.c). src_blk is the
 * state at `from` (NULL: zero). */
braid_status mem_replay_new(mem *m, int kind, int32_t source, int32_t target, int32_t from, int32_t to,
                            const float *src_blk, mem_batch **out);

/* The invariants, asserted after every change in debug builds (printing the broken one). */
#ifndef NDEBUG
#define MEM_ASSERT_OK(m) assert(mem_check(m) == BRAID_OK || (fprintf(stderr, "%s\n", braid_last_error()), 0))
#else
#define MEM_ASSERT_OK(m) ((void)0)
#endif

#endif
