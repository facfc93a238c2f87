/* memory.c — benchmark of the memory at realistic sizes (default: 32k cells, 8 sequences, a Qwen3.5-9B-like
 * layout of 8 attention layers with F16 K/V rows of 1024 and 24 recurrent layers of about 50 MiB of state per
 * sequence). It prints the cost of the memory's own work, with a forward pass that only copies state and
 * writes K/V bytes (so the figures are the memory's, not a model's):
 *   metadata bytes per cell; reserve + commit time of a decode batch; truncate via the rollback buffer;
 *   checkpoint creation and restore (MB/s); sequence state save and load (MB/s, load verifies checksums).
 * Usage: bench_memory [--small]   (--small: 1/8 of the sizes, for a quick look). Timings are never asserted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "memory/memory.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t block_bytes;

/* Stand-in forward pass: K/V rows get bytes, the state goes from rs_src to rs_dst and to the snapshots. */
static void fake_forward(mem *m, const mem_ubatch *ub, uint32_t n_attn) {
    for (int32_t r = 0; r < ub->n_rows; r++) {
        if (ub->kv_write[r] < 0) continue;
        for (uint32_t l = 0; l < n_attn; l++) {
            memset((uint8_t *)mem_kv_k(m, l) + (size_t)ub->kv_write[r] * mem_kv_k_row_bytes(m, l), r & 0x3f, mem_kv_k_row_bytes(m, l));
            memset((uint8_t *)mem_kv_v(m, l) + (size_t)ub->kv_write[r] * mem_kv_v_row_bytes(m, l), r & 0x3f, mem_kv_v_row_bytes(m, l));
        }
    }
    for (int32_t k = 0; k < ub->n_runs; k++) {
        const mem_run *ru = &ub->runs[k];
        if (ru->rs_dst && ru->rs_dst != ru->rs_src) memcpy(ru->rs_dst, ru->rs_src, block_bytes);
        if (ru->rs_dst) ru->rs_dst[ru->idx0 % 1024] += 1.0f;
        for (int32_t j = 0; j < ru->n_rows; j++)
            if (ub->rs_snap[ru->row0 + j]) memcpy(ub->rs_snap[ru->row0 + j], ru->rs_dst, block_bytes);
    }
}

/* Decodes n tokens into s in batches of nb; returns seconds spent in the memory (begin + commit). */
static double decode(mem *m, int32_t s, int32_t n, int32_t nb, uint32_t n_attn) {
    braid_token *tok = malloc(sizeof *tok * (size_t)nb);
    braid_seq_id *sid = malloc(sizeof *sid * (size_t)nb);
    double t_mem = 0;
    for (int32_t done = 0; done < n;) {
        int32_t k = n - done < nb ? n - done : nb;
        for (int32_t i = 0; i < k; i++) tok[i] = (done + i) % 1000, sid[i] = s;
        braid_batch b = {.n_tokens = k, .token = tok, .seq = sid};
        mem_batch *mb;
        double t0 = now();
        if (mem_batch_begin(m, &b, nb, &mb) != BRAID_OK) {
            fprintf(stderr, "begin: %s\n", braid_last_error());
            exit(1);
        }
        t_mem += now() - t0;
        for (int32_t u = 0; u < mem_batch_n_ubatch(mb); u++) {
            mem_ubatch ub;
            if (mem_batch_ubatch(m, mb, u, &ub) != BRAID_OK) exit(1);
            fake_forward(m, &ub, n_attn);
        }
        t0 = now();
        mem_batch_commit(m, mb);
        t_mem += now() - t0;
        done += k;
    }
    free(tok);
    free(sid);
    return t_mem;
}

typedef struct counter {
    size_t n;
} counter;
static braid_status count_write(void *user, const void *data, size_t n) {
    (void)data;
    ((counter *)user)->n += n;
    return BRAID_OK;
}

int main(int argc, char **argv) {
    int small = argc > 1 && !strcmp(argv[1], "--small");
    uint32_t div = small ? 8 : 1;
    enum { N_ATTN = 8, N_RS = 24 };
    uint32_t nk[N_ATTN], nv[N_ATTN];
    uint64_t nconv[N_RS], nssm[N_RS];
    for (int l = 0; l < N_ATTN; l++) nk[l] = nv[l] = 1024;                      /* 4 kv heads x 256 */
    for (int l = 0; l < N_RS; l++) nconv[l] = 3 * 8192 / div, nssm[l] = 32 * 128 * 128 / div; /* GDN, 32 v-heads */
    mem_params p = {.n_seq_max = 8, .n_pos_per_token = 4, .n_embd = 4096, .n_ctx = 32768 / div, .kv_type = BRAID_TYPE_F16,
                    .n_attn_layers = N_ATTN, .n_embd_k = nk, .n_embd_v = nv, .n_rs_layers = N_RS, .n_conv = nconv,
                    .n_ssm = nssm, .checkpoint_interval = 256, .n_rollback = 4, .n_ubatch = 512};
    uint64_t bf = 0;
    for (int l = 0; l < N_RS; l++) bf += nconv[l] + nssm[l];
    block_bytes = bf * sizeof(float);
    p.checkpoint_budget_bytes = 8 * block_bytes;
    mem *m;
    double t0 = now();
    if (mem_new(&p, &m) != BRAID_OK) {
        fprintf(stderr, "mem_new: %s\n", braid_last_error());
        return 1;
    }
    double t_new = now() - t0;
    double mib = 1024.0 * 1024.0;
    size_t kv_row = 0;
    for (int l = 0; l < N_ATTN; l++) kv_row += mem_kv_k_row_bytes(m, l) + mem_kv_v_row_bytes(m, l);
    /* metadata per cell: pos + pos_rot (2 x 4 x 4), order 8, seq bitset 8, n_ref 4, free stack 4, one list slot per
     * sequence (4 x n_seq); per input of a sequence's history: token 4, positions 16, embedding-row index 4 */
    size_t meta = 2 * 4 * sizeof(braid_pos) + 8 + 8 + 4 + 4 + 4 * p.n_seq_max;
    printf("memory: %u cells, %u sequences, %d attention layers (K/V %zu bytes per cell), %d recurrent layers "
           "(%.1f MiB state per sequence)\n", p.n_ctx, p.n_seq_max, N_ATTN, kv_row, N_RS, block_bytes / mib);
    printf("  metadata per cell            %zu bytes (+ %zu per history input) = %.2f%% of the cell's K/V rows\n",
           meta, (size_t)24, 100.0 * (double)meta / (double)kv_row);
    printf("  mem_new                      %.1f ms\n", t_new * 1e3);

    /* Fill every sequence (prefill in batches of 512). */
    int32_t per_seq = (int32_t)(p.n_ctx / p.n_seq_max) - 64;
    double t_fill = 0;
    t0 = now();
    for (int32_t s = 0; s < (int32_t)p.n_seq_max; s++) t_fill += decode(m, s, per_seq, 512, N_ATTN);
    double t_all = now() - t0;
    int32_t n_batches = (int32_t)p.n_seq_max * ((per_seq + 511) / 512);
    printf("  prefill %d x %d inputs        memory %.3f ms per 512-row batch (reserve + commit; %.1f%% of the run "
           "with a memcpy forward)\n", p.n_seq_max, per_seq, t_fill * 1e3 / n_batches, 100 * t_fill / t_all);
    printf("  checkpoints held             %.0f MiB (budget %.0f MiB)\n", mem_rs_checkpoint_bytes(m) / mib,
           p.checkpoint_budget_bytes / mib);

    /* Decode of one token (steady state). */
    int reps = 20;
    double t_tok = 0;
    for (int i = 0; i < reps; i++) t_tok += decode(m, 0, 1, 512, N_ATTN);
    printf("  decode 1 token               memory %.1f us (reserve + commit)\n", t_tok * 1e6 / reps);

    /* Truncate through the rollback buffer: decode 4 drafts, keep 2. */
    double t_rb = 0;
    for (int i = 0; i < reps; i++) {
        decode(m, 0, 4, 512, N_ATTN);
        mem_batch *rb;
        int32_t len = mem_seq_len(m, 0);
        t0 = now();
        if (mem_seq_truncate(m, 0, len - 2, &rb) != BRAID_OK || rb) return 1;
        t_rb += now() - t0;
    }
    printf("  truncate via rollback        %.1f us (no copy: block swap)\n", t_rb * 1e6 / reps);

    /* Checkpoint creation (with eviction once the budget is full). */
    double t_ck = 0;
    for (int i = 0; i < reps; i++) {
        decode(m, 1, 1, 512, N_ATTN);
        t0 = now();
        if (mem_seq_checkpoint(m, 1) != BRAID_OK) return 1;
        t_ck += now() - t0;
    }
    printf("  checkpoint creation          %.2f ms = %.0f MB/s\n", t_ck * 1e3 / reps, reps * block_bytes / t_ck / 1e6);

    /* Checkpoint restore: truncate exactly onto a checkpoint (copy of the block). */
    double t_cr = 0;
    int n_cr = 0;
    for (int i = 0; i < reps; i++) {
        decode(m, 2, 1, 512, N_ATTN);
        if (mem_seq_checkpoint(m, 2) != BRAID_OK) return 1;
        int32_t at = mem_seq_len(m, 2);
        decode(m, 2, 3, 512, N_ATTN);
        decode(m, 2, 1, 512, N_ATTN); /* the rollback buffer no longer covers `at` */
        mem_batch *rb;
        t0 = now();
        if (mem_seq_truncate(m, 2, at, &rb) != BRAID_OK) return 1;
        double dt = now() - t0;
        if (rb) {
            mem_batch_abort(m, rb);
            continue;
        }
        t_cr += dt;
        n_cr++;
    }
    if (n_cr)
        printf("  checkpoint restore           %.2f ms = %.0f MB/s (%d restores)\n", t_cr * 1e3 / n_cr,
               n_cr * block_bytes / t_cr / 1e6, n_cr);

    /* Sequence state save and load. */
    counter c = {0};
    mem_writer w = {count_write, &c};
    t0 = now();
    if (mem_state_save(m, 3, 1, "bench", &w) != BRAID_OK) return 1;
    double t_sw = now() - t0;
    void *blob;
    size_t n;
    t0 = now();
    if (mem_state_save_alloc(m, 3, 1, "bench", &blob, &n) != BRAID_OK) return 1;
    double t_sa = now() - t0;
    mem_seq_clear(m, 7);
    t0 = now();
    braid_status st = mem_state_load(m, 7, 1, blob, n);
    double t_ld = now() - t0;
    if (st != BRAID_OK) {
        fprintf(stderr, "load: %s\n", braid_last_error());
        return 1;
    }
    printf("  sequence state (%d inputs)  %.1f MiB\n", mem_seq_len(m, 3), n / mib);
    printf("  state save (stream)          %.1f ms = %.0f MB/s\n", t_sw * 1e3, c.n / t_sw / 1e6);
    printf("  state save (buffer)          %.1f ms = %.0f MB/s (sizing pass + write)\n", t_sa * 1e3, n / t_sa / 1e6);
    printf("  state load (verify + apply)  %.1f ms = %.0f MB/s\n", t_ld * 1e3, n / t_ld / 1e6);
    bd_free(blob);
    mem_free(m);
    return 0;
}
