/* test_archs.c — the architecture conformance suite, driven by a table: each row is an architecture and a
 * gen-model shape, run through the same steps against llama.cpp (the oracle driver) and against braid's own
 * fresh decodes. A new architecture adds rows here, not a new test.
 *
 * Steps per row (flags say which apply):
 *   - F32 weights, llama.cpp's F32 K/V cache, flash attention off: logits of every position agree to ~1e-4
 *     relative for prefill, prefill in ubatches of 7, token by token, three interleaved sequences; greedy
 *     continuations identical; with RoPE and one position component llama.cpp shifts positions too (seq_add)
 *     and both continue alike; without RoPE a shift must not change a bit.
 *   - memory (ROW_MEMORY): truncate via the rollback buffer and via checkpoint + replay, copy then diverge,
 *     save -> load -> continue, remove + shift: each equals a fresh decode of the resulting inputs bit for bit
 *     where that is defined, and the thread count changes nothing.
 *   - quantized weights (quant rows): where braid claims both the CPU pair (oracle_cpu.h) and the row (exact),
 *     every row bit-identical to llama.cpp and every greedy continuation whole; otherwise within llama.cpp's
 *     agreement with itself (printed beside) plus logits_cmp.h's margin.
 * qwen35 keeps its own test (test_qwen35.c) for the M-RoPE image span and the tap diagnostics. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "braid.h"
#include "genmodel/genmodel.h"
#include "oracle_client.h"
#include "oracle_cpu.h"
#include "tensor/types.h"
#include "test.h"
#include "logits_cmp.h"

#define F32_TOL 1e-4

enum {
    ROW_MEMORY = 1,       /* run the memory scenarios on this row */
    ROW_SHIFT_ORACLE = 2, /* RoPE with one position component: compare a position shift with llama.cpp's */
    ROW_NOPE = 4,         /* no positional encoding: a position shift must leave every logit bit unchanged */
};

typedef struct model_case {
    const char *name, *arch, *preset;
    gen_shape over;
    int flags;
} model_case;

static gen_shape no_over(void) {
    gen_params p;
    gen_params_default(&p);
    return p.over;
}

static int write_model(const char *path, const model_case *mc, uint64_t seed) {
    gen_params p;
    gen_params_default(&p);
    p.arch = mc->arch;
    p.preset = mc->preset;
    p.over = mc->over;
    p.seed = seed;
    p.vocab = "none";
    p.n_vocab = 1024;
    gen_summary sum;
    if (gen_model_write(&p, path, &sum) != BRAID_OK) {
        fprintf(stderr, "gen-model %s: %s\n", mc->name, braid_last_error());
        return 0;
    }
    const gen_shape *g = &sum.shape;
    printf("model %s: %s %s, n_embd %lld, %lld layers (interval %lld, pattern '%s'), heads %lld/%lld x %lld, SSM "
           "groups/heads %lld/%lld, state %lld, inner %lld, conv %lld, experts %lld choose %lld (ff %lld, shared "
           "%lld, %s), %s\n",
           mc->name, mc->arch, mc->preset, (long long)g->n_embd, (long long)g->n_layer, (long long)g->interval,
           g->pattern, (long long)g->n_head, (long long)g->n_head_kv, (long long)g->head_dim,
           (long long)g->ssm_groups, (long long)g->ssm_heads, (long long)g->ssm_state, (long long)g->ssm_inner,
           (long long)g->ssm_conv, (long long)g->n_expert, (long long)g->n_expert_used, (long long)g->n_ff_exp,
           (long long)g->n_ff_shexp, g->gate_up == 1 ? "gate_up merged" : "gate, up",
           !strcmp(mc->arch, "qwen3next") ? (g->qkvz == 2 ? "ssm_in" : "attn_qkv + attn_gate") : "");
    return 1;
}

/* ---- comparisons ------------------------------------------------------------------------------------------ */

/* ---- F32 against llama.cpp -------------------------------------------------------------------------------- */

static void test_f32_vs_llama(const char *path, const model_case *mc) {
    const int shift = (mc->flags & ROW_SHIFT_ORACLE) != 0;
    printf("%s (F32 weights, llama.cpp K/V F32, FA off):\n", mc->name);
    braid_model *m = NULL;
    CHECK_STATUS(braid_model_load(path, NULL, &m), BRAID_OK);
    if (!m) return;
    const int V = braid_model_n_vocab(m);
    oracle *o = NULL;
    CHECK_STATUS(oracle_start(path, "--ctx 512 --seq-max 3 --kv f32 --fa off --threads 1", &o), BRAID_OK);
    if (!o) {
        braid_model_free(m);
        return;
    }
    enum { N = 40 };
    braid_token toks[N];
    rand_tokens(toks, N, V, 7);
    float *got = bd_mallocn((size_t)N * V, sizeof(float)), *ref = NULL;
    int32_t rows;
    uint8_t all[N];
    memset(all, 1, sizeof all);

    /* one reference prefill (every position) for: one batch, ubatches of 7, token by token */
    CHECK_STATUS(oracle_cmd(o, NULL, "clear"), BRAID_OK);
    CHECK_STATUS(oracle_decode(o, N, toks, NULL, NULL, all, &ref, &rows), BRAID_OK);
    if (ref && rows == N) {
        braid_context *c = cmp_ctx(m, 512, 1, 512, 256, 8), *c7 = cmp_ctx(m, 512, 1, 7, 256, 8), *c1 = cmp_ctx(m, 512, 1, 512, 256, 8);
        cmp cp = {0}, cu = {0}, cd = {0};
        CHECK_STATUS(dec(c, N, toks, 0, got, V), BRAID_OK);
        for (int i = 0; i < N; i++) cmp_row(&cp, got + (size_t)i * V, ref + (size_t)i * V, V);
        CHECK_STATUS(dec(c7, N, toks, 0, got, V), BRAID_OK);
        for (int i = 0; i < N; i++) cmp_row(&cu, got + (size_t)i * V, ref + (size_t)i * V, V);
        for (int i = 0; i < N; i++) CHECK_STATUS(dec(c1, 1, toks + i, 0, got + (size_t)i * V, V), BRAID_OK);
        for (int i = 0; i < N; i++) cmp_row(&cd, got + (size_t)i * V, ref + (size_t)i * V, V);
        report("prefill 40", &cp);
        report("prefill 40 in ubatches of 7", &cu);
        report("token-by-token decode 40", &cd);
        CHECK(cp.rows == N && cp.max_rel < F32_TOL, "%s prefill rel %.3e", mc->name, cp.max_rel);
        CHECK(cu.rows == N && cu.max_rel < F32_TOL, "%s ubatch rel %.3e", mc->name, cu.max_rel);
        CHECK(cd.rows == N && cd.max_rel < F32_TOL, "%s decode rel %.3e", mc->name, cd.max_rel);
        braid_context_free(c);
        braid_context_free(c7);
        braid_context_free(c1);
    } else {
        CHECK(0, "%s: llama.cpp prefill gave %d rows", mc->name, ref ? rows : -1);
    }
    bd_free(ref);

    /* three sequences interleaved in one batch (different lengths), then one more token each in one batch */
    {
        braid_context *c = cmp_ctx(m, 512, 3, 512, 256, 8);
        enum { NB = 30 };
        braid_token bt[NB];
        braid_seq_id bs[NB];
        uint8_t bl[NB];
        rand_tokens(bt, NB, V, 11);
        for (int i = 0; i < NB; i++) bs[i] = i < 6 ? i % 3 : (i % 5 == 0 ? 2 : i % 2), bl[i] = 1;
        braid_batch b = {.n_tokens = NB, .token = bt, .seq = bs, .logits = bl};
        CHECK_STATUS(braid_decode(c, &b), BRAID_OK);
        CHECK_STATUS(oracle_cmd(o, NULL, "clear"), BRAID_OK);
        CHECK_STATUS(oracle_decode(o, NB, bt, NULL, bs, bl, &ref, &rows), BRAID_OK);
        cmp cm = {0};
        for (int i = 0; i < NB && ref && rows == NB; i++) cmp_row(&cm, braid_logits(c, i), ref + (size_t)i * V, V);
        bd_free(ref);
        braid_token nt[3] = {5, 17, 99};
        braid_seq_id ns[3] = {2, 0, 1};
        b = (braid_batch){.n_tokens = 3, .token = nt, .seq = ns, .logits = bl};
        CHECK_STATUS(braid_decode(c, &b), BRAID_OK);
        CHECK_STATUS(oracle_decode(o, 3, nt, NULL, ns, bl, &ref, &rows), BRAID_OK);
        for (int i = 0; i < 3 && ref && rows == 3; i++) cmp_row(&cm, braid_logits(c, i), ref + (size_t)i * V, V);
        bd_free(ref);
        report("3 sequences interleaved, then 1 more each", &cm);
        CHECK(cm.rows == NB + 3 && cm.max_rel < F32_TOL, "%s multi-seq rel %.3e", mc->name, cm.max_rel);
        braid_context_free(c);
    }

    /* greedy continuation of 48 tokens after a 12-token prompt */
    {
        enum { G = 48 };
        braid_context *c = cmp_ctx(m, 512, 1, 512, 256, 8);
        braid_token gb[G], go[G];
        CHECK_STATUS(dec(c, 12, toks, 0, NULL, V), BRAID_OK);
        for (int i = 0; i < G; i++) {
            gb[i] = argmax(braid_logits(c, i ? 0 : 11), V);
            CHECK_STATUS(dec(c, 1, &gb[i], 0, NULL, V), BRAID_OK);
        }
        CHECK_STATUS(oracle_cmd(o, NULL, "clear"), BRAID_OK);
        CHECK_STATUS(oracle_decode(o, 12, toks, NULL, NULL, NULL, &ref, &rows), BRAID_OK);
        bd_free(ref);
        CHECK_STATUS(oracle_greedy(o, G, 0, go, NULL), BRAID_OK);
        int same = 0, distinct = 0;
        while (same < G && gb[same] == go[same]) same++;
        for (int i = 0; i < G; i++) {
            int seen = 0;
            for (int j = 0; j < i; j++) seen |= gb[j] == gb[i];
            distinct += !seen;
        }
        printf("  greedy %d: identical for %d tokens; %d distinct tokens in braid's continuation\n", G, same, distinct);
        CHECK(same == G, "%s greedy diverged at %d", mc->name, same);
        CHECK(distinct >= 8, "%s degenerate continuation (%d distinct)", mc->name, distinct);
        braid_context_free(c);
    }

    /* qwen3next (plain NEOX RoPE, one position component): llama.cpp can shift positions itself, so both engines
     * shift the same 20 tokens by +5 (K rows re-rotated) and continue */
    if (shift) {
        braid_context *c = cmp_ctx(m, 512, 1, 512, 256, 8);
        CHECK_STATUS(dec(c, 20, toks, 0, NULL, V), BRAID_OK);
        CHECK_STATUS(braid_seq_shift_pos(c, 0, 0, 20, 5), BRAID_OK);
        CHECK(braid_seq_next_pos(c, 0) == 25, "next pos after shift %d", braid_seq_next_pos(c, 0));
        CHECK_STATUS(oracle_cmd(o, NULL, "clear"), BRAID_OK);
        CHECK_STATUS(oracle_decode(o, 20, toks, NULL, NULL, NULL, &ref, &rows), BRAID_OK);
        bd_free(ref);
        CHECK_STATUS(oracle_cmd(o, NULL, "seq_add 0 0 20 5"), BRAID_OK);
        int32_t p[4] = {25, 26, 27, 28};
        cmp cs = {0};
        CHECK_STATUS(dec(c, 4, toks + 20, 0, got, V), BRAID_OK);
        CHECK_STATUS(oracle_decode(o, 4, toks + 20, p, NULL, all, &ref, &rows), BRAID_OK);
        for (int i = 0; i < 4 && ref && rows == 4; i++) cmp_row(&cs, got + (size_t)i * V, ref + (size_t)i * V, V);
        bd_free(ref);
        report("shift 20 by +5 in both engines, continue 4", &cs);
        CHECK(cs.rows == 4 && cs.max_rel < F32_TOL, "%s shift rel %.3e", mc->name, cs.max_rel);
        braid_context_free(c);
    }
    /* no RoPE: K rows do not depend on positions, so shifting every input must leave the continuation's logits
     * bit for bit those of an unshifted context */
    if (mc->flags & ROW_NOPE) {
        braid_context *c = cmp_ctx(m, 512, 1, 512, 256, 8), *u = cmp_ctx(m, 512, 1, 512, 256, 8);
        float *a = bd_mallocn(4 * (size_t)V, sizeof(float));
        CHECK_STATUS(dec(c, 20, toks, 0, NULL, V), BRAID_OK);
        CHECK_STATUS(dec(u, 20, toks, 0, NULL, V), BRAID_OK);
        CHECK_STATUS(braid_seq_shift_pos(c, 0, 0, 20, 7), BRAID_OK);
        CHECK(braid_seq_next_pos(c, 0) == 27, "next pos after shift %d", braid_seq_next_pos(c, 0));
        CHECK_STATUS(dec(c, 4, toks + 20, 0, got, V), BRAID_OK);
        CHECK_STATUS(dec(u, 4, toks + 20, 0, a, V), BRAID_OK);
        const int same = !memcmp(got, a, 4 * (size_t)V * sizeof(float));
        printf("  shift 20 by +7 (no RoPE), continue 4 vs unshifted: %s\n", same ? "bit-identical" : "DIFFERENT");
        CHECK(same, "%s: a position shift changed the logits of a model without RoPE", mc->name);
        bd_free(a);
        braid_context_free(c);
        braid_context_free(u);
    }
    CHECK_STATUS(oracle_stop(o), BRAID_OK);
    bd_free(got);
    braid_model_free(m);
}

/* ---- memory: truncate then continue equals a fresh decode ---------------------------------------------------- */

static void check_vs_fresh(const char *what, braid_model *m, braid_context *c, const braid_token *all_toks, int kept,
                           const braid_token *next, int n_next, int V) {
    float *a = bd_mallocn((size_t)n_next * V, sizeof(float)), *b = bd_mallocn((size_t)n_next * V, sizeof(float));
    CHECK_STATUS(dec(c, n_next, next, 0, a, V), BRAID_OK);
    braid_context *f = cmp_ctx(m, 512, 1, 512, 1 << 20, 8);
    if (kept) CHECK_STATUS(dec(f, kept, all_toks, 0, NULL, V), BRAID_OK);
    CHECK_STATUS(dec(f, n_next, next, 0, b, V), BRAID_OK);
    cmp c1 = {0};
    for (int i = 0; i < n_next; i++) cmp_row(&c1, a + (size_t)i * V, b + (size_t)i * V, V);
    report(what, &c1);
    CHECK(c1.max_rel < 1e-5, "%s: rel %.3e vs fresh", what, c1.max_rel);
    braid_context_free(f);
    bd_free(a);
    bd_free(b);
}

static void test_memory(const char *path, const model_case *mc) {
    printf("%s memory (braid vs a fresh braid decode of the kept inputs):\n", mc->name);
    braid_model *m = NULL;
    CHECK_STATUS(braid_model_load(path, NULL, &m), BRAID_OK);
    if (!m) return;
    const int V = braid_model_n_vocab(m);
    enum { N = 100 };
    braid_token toks[N], nxt[3] = {3, 1, 4};
    rand_tokens(toks, N, V, 23);
    char what[128];
    /* rollback buffer: a speculative batch of 6 after 40, keep 43 */
    {
        braid_context *c = cmp_ctx(m, 512, 1, 512, 16, 8);
        CHECK_STATUS(dec(c, 40, toks, 0, NULL, V), BRAID_OK);
        CHECK_STATUS(dec(c, 6, toks + 40, 0, NULL, V), BRAID_OK);
        CHECK_STATUS(braid_seq_truncate(c, 0, 43), BRAID_OK);
        check_vs_fresh("truncate 46 -> 43 (rollback buffer)", m, c, toks, 43, nxt, 3, V);
        braid_context_free(c);
    }
    /* checkpoint + replay: prefill 100 in batches of 10 (checkpoints every 16), keep 57 */
    {
        braid_context *c = cmp_ctx(m, 512, 1, 512, 16, 4);
        for (int i = 0; i < N; i += 10) CHECK_STATUS(dec(c, 10, toks + i, 0, NULL, V), BRAID_OK);
        CHECK_STATUS(braid_seq_truncate(c, 0, 57), BRAID_OK);
        snprintf(what, sizeof what, "truncate 100 -> %d (checkpoint + replay)", 57);
        check_vs_fresh(what, m, c, toks, 57, nxt, 3, V);
        braid_context_free(c);
    }
    /* the state of a sequence saved mid-stream and loaded into another context continues bit for bit */
    {
        braid_context *c = cmp_ctx(m, 512, 2, 512, 16, 8), *d = cmp_ctx(m, 512, 2, 512, 16, 8);
        CHECK_STATUS(dec(c, 37, toks, 0, NULL, V), BRAID_OK);
        void *blob = NULL;
        size_t size = 0;
        CHECK_STATUS(braid_state_seq_save(c, 0, &blob, &size), BRAID_OK);
        CHECK_STATUS(braid_state_seq_load(d, 1, blob, size), BRAID_OK);
        float *a = bd_mallocn(3 * (size_t)V, sizeof(float)), *b = bd_mallocn(3 * (size_t)V, sizeof(float));
        CHECK_STATUS(dec(c, 3, nxt, 0, a, V), BRAID_OK);
        CHECK_STATUS(dec(d, 3, nxt, 1, b, V), BRAID_OK);
        const int same = !memcmp(a, b, 3 * (size_t)V * sizeof(float));
        printf("  save seq after 37 -> load into another context -> continue 3: %s\n",
               same ? "bit-identical" : "DIFFERENT");
        CHECK(same, "%s: state save/load changed the continuation", mc->name);
        braid_free(blob);
        bd_free(a);
        bd_free(b);
        braid_context_free(c);
        braid_context_free(d);
    }
    /* copy then diverge: seq 1 = first 30 of seq 0 (50 long); both continue like fresh decodes */
    {
        braid_context *c = cmp_ctx(m, 512, 2, 512, 16, 8);
        CHECK_STATUS(dec(c, 50, toks, 0, NULL, V), BRAID_OK);
        CHECK_STATUS(braid_seq_copy(c, 0, 1, 30), BRAID_OK);
        CHECK(braid_seq_len(c, 1) == 30, "copy len %d", braid_seq_len(c, 1));
        float *a = bd_mallocn(3 * (size_t)V, sizeof(float)), *b = bd_mallocn(3 * (size_t)V, sizeof(float));
        braid_context *f = cmp_ctx(m, 512, 1, 512, 1 << 20, 8), *g = cmp_ctx(m, 512, 1, 512, 1 << 20, 8);
        CHECK_STATUS(dec(c, 3, nxt, 1, a, V), BRAID_OK);
        CHECK_STATUS(dec(f, 30, toks, 0, NULL, V), BRAID_OK);
        CHECK_STATUS(dec(f, 3, nxt, 0, b, V), BRAID_OK);
        cmp cd = {0}, cs = {0};
        for (int i = 0; i < 3; i++) cmp_row(&cd, a + (size_t)i * V, b + (size_t)i * V, V);
        const braid_token other[3] = {8, 9, 10};
        CHECK_STATUS(dec(c, 3, other, 0, a, V), BRAID_OK);
        CHECK_STATUS(dec(g, 50, toks, 0, NULL, V), BRAID_OK);
        CHECK_STATUS(dec(g, 3, other, 0, b, V), BRAID_OK);
        for (int i = 0; i < 3; i++) cmp_row(&cs, a + (size_t)i * V, b + (size_t)i * V, V);
        report("copy 0[0,30) -> 1, the copy diverges", &cd);
        report("copy: the source continues", &cs);
        CHECK(cd.rows == 3 && cd.max_rel < 1e-5 && cs.max_rel < 1e-5, "%s: copy then diverge rel %.3e / %.3e",
              mc->name, cd.max_rel, cs.max_rel);
        bd_free(a);
        bd_free(b);
        braid_context_free(f);
        braid_context_free(g);
        braid_context_free(c);
    }
    /* remove from the front + shift (context shift), then continue: the recurrent half keeps summarizing the
     * removed inputs (design.md §3), so what is defined is checked: lengths and positions follow, decoding
     * continues, and a range past the end is refused */
    {
        braid_context *c = cmp_ctx(m, 512, 1, 512, 16, 8);
        CHECK_STATUS(dec(c, 50, toks, 0, NULL, V), BRAID_OK);
        CHECK_STATUS(braid_seq_remove(c, 0, 0, 20), BRAID_OK);
        CHECK_STATUS(braid_seq_shift_pos(c, 0, 0, 30, -20), BRAID_OK);
        CHECK(braid_seq_len(c, 0) == 30 && braid_seq_next_pos(c, 0) == 30, "after remove+shift len %d next %d",
              braid_seq_len(c, 0), braid_seq_next_pos(c, 0));
        CHECK_STATUS(dec(c, 3, nxt, 0, NULL, V), BRAID_OK);
        CHECK(braid_seq_len(c, 0) == 33, "len %d", braid_seq_len(c, 0));
        CHECK_STATUS(braid_seq_remove(c, 0, 0, 40), BRAID_E_RANGE);
        braid_context_free(c);
    }
    /* the thread count does not change a bit (the MoE gathers rows per expert; products split by rows) */
    {
        braid_context_params p = braid_context_default_params();
        p.n_ctx = 512;
        p.kv_type = BRAID_TYPE_F32;
        float *r[2];
        for (int th = 1; th <= 2; th++) {
            p.n_threads = (uint32_t)th;
            braid_context *c = NULL;
            CHECK_STATUS(braid_context_new(m, &p, &c), BRAID_OK);
            r[th - 1] = bd_mallocn((size_t)30 * V, sizeof(float));
            if (c) CHECK_STATUS(dec(c, 30, toks, 0, r[th - 1], V), BRAID_OK);
            braid_context_free(c);
        }
        const int same = !memcmp(r[0], r[1], (size_t)30 * V * sizeof(float));
        printf("  prefill 30 on 1 and 2 threads: %s\n", same ? "bit-identical" : "DIFFERENT");
        CHECK(same, "%s: thread count changed the logits", mc->name);
        bd_free(r[0]);
        bd_free(r[1]);
    }
    braid_model_free(m);
}

/* ---- quantized weights --------------------------------------------------------------------------------------- */

/* Activations are quantized before each product (as ggml does), which is discontinuous: any float-order
 * difference upstream flips a rounding now and then, and MoE routing adds its own flips (a near tie picks
 * another expert). braid follows the float order of the ggml build llama.cpp runs (the F32 router and shared
 * gate take ggml's vec_dot where ggml does), so for a pair braid claims (oracle_cpu.h) on a row claimed exact
 * the logits must be llama.cpp's bits and the greedy continuations whole; otherwise as close as llama.cpp's
 * agreement with itself (one prefill vs token by token, printed beside) plus logits_cmp.h's margin. */
static oracle_pair pair;
static void test_quant(const char *path, const char *label, int row_exact) {
    braid_model *m = NULL;
    CHECK_STATUS(braid_model_load(path, NULL, &m), BRAID_OK);
    if (!m) return;
    const int V = braid_model_n_vocab(m);
    oracle *o = NULL;
    CHECK_STATUS(oracle_start(path, "--ctx 512 --seq-max 1 --kv f32 --fa off --threads 1", &o), BRAID_OK);
    if (!o) {
        braid_model_free(m);
        return;
    }
    enum { N = 40, P = 2, G = 40 };
    cmp ct = {0}, cself = {0};
    int total_same = 0, min_same = G, full = 0, exact = 0;
    for (int pr = 0; pr < P; pr++) {
        braid_token toks[N];
        rand_tokens(toks, N, V, 100 + pr);
        const int same = cmp_quant_prompt(m, o, 512, toks, N, G, &ct, &cself, &exact);
        total_same += same;
        full += same == G;
        if (same < min_same) min_same = same;
    }
    printf("  %-22s braid vs llama.cpp: top-1 %d/%d, max rel %.3e, bit-identical rows %d/%d | llama.cpp vs itself: "
           "top-1 %d/%d, max rel %.3e | greedy %d after %d prompts: identical for min %d, mean %.1f\n",
           label, ct.top1_equal, ct.rows, ct.max_rel, exact, ct.rows, cself.top1_equal, cself.rows, cself.max_rel, G,
           P, min_same, (double)total_same / P);
    CHECK(!strcmp(o->cpu, pair.variant), "the oracle runs ggml %s, this process %s", o->cpu, pair.variant);
    if (!(row_exact && pair.exact))
        printf("  (bit-identity not claimed for this row at this pair: the looser checks only)\n");
    cmp_quant_verdict(label, row_exact && pair.exact, &ct, &cself, N * P, exact, full, P);
    CHECK_STATUS(oracle_stop(o), BRAID_OK);
    braid_model_free(m);
}

/* The rows. Shapes beyond the presets are set in main. */
static model_case cases[] = {
    {"qwen35moe-tiny", "qwen35moe", "tiny", {0}, ROW_MEMORY},     /* separate gate/up experts, H_v = 2 H_k */
    {"qwen35moe-small", "qwen35moe", "small", {0}, 0},            /* merged gate_up experts */
    {"qwen3next-tiny", "qwen3next", "tiny", {0}, ROW_SHIFT_ORACLE}, /* attn_qkv + attn_gate, H_v = 2 H_k */
    {"qwen3next-small", "qwen3next", "small", {0}, ROW_SHIFT_ORACLE | ROW_MEMORY}, /* legacy ssm_in */
    {"qwen3next-odd", "qwen3next", "tiny", {0}, ROW_SHIFT_ORACLE}, /* H_v = 3 H_k, 6 of 12 experts, ssm_in */
    {"mamba2-tiny", "mamba2", "tiny", {0}, 0},                    /* 2 layers, 4 heads of 32, 2 groups, N 16 */
    {"mamba2-small", "mamba2", "small", {0}, ROW_MEMORY},
    {"mamba2-odd", "mamba2", "tiny", {0}, 0},                     /* conv 3, N 8 (scalar scan rows), 1 group */
    {"nemotron_h-tiny", "nemotron_h", "tiny", {0}, ROW_NOPE},     /* M * - */
    {"nemotron_h-small", "nemotron_h", "small", {0}, ROW_NOPE | ROW_MEMORY}, /* M-M*-M */
    {"nemotron_h_moe-tiny", "nemotron_h_moe", "tiny", {0}, ROW_NOPE}, /* M E * E, 8 experts choose 2 */
    {"nemotron_h_moe-small", "nemotron_h_moe", "small", {0}, ROW_NOPE | ROW_MEMORY}, /* 16 choose 4 */
    {"granitehybrid-tiny", "granitehybrid", "tiny", {0}, ROW_NOPE}, /* M M * M, dense SwiGLU, 4 scalars */
    {"granitehybrid-moe", "granitehybrid", "small", {0}, ROW_NOPE | ROW_MEMORY}, /* softmax MoE + shared */
    {"lfm2-tiny", "lfm2", "tiny", {0}, ROW_SHIFT_ORACLE},         /* C A C, L 3 */
    {"lfm2-small", "lfm2", "small", {0}, ROW_SHIFT_ORACLE | ROW_MEMORY}, /* C C A x 2 */
    {"lfm2moe-tiny", "lfm2moe", "tiny", {0}, ROW_SHIFT_ORACLE},   /* 1 dense + 3 MoE (8 choose 2), sigmoid */
    {"lfm2moe-small", "lfm2moe", "small", {0}, ROW_SHIFT_ORACLE | ROW_MEMORY}, /* 2 dense + 4 MoE (16 choose 4) */
    {"falcon-h1-tiny", "falcon-h1", "tiny", {0}, ROW_SHIFT_ORACLE}, /* attention + Mamba2 on every layer */
    {"falcon-h1-small", "falcon-h1", "small", {0}, ROW_SHIFT_ORACLE | ROW_MEMORY}, /* hd*heads != n_embd */
};

/* Quantized rows: exact = braid claims llama.cpp's bits for this row at a claimed pair (the same float order). */
static const struct {
    const char *arch, *preset;
    uint32_t type;
    int exact;
} quant_rows[] = {
    {"qwen35moe", "small", BRAID_TYPE_Q8_0, 1}, {"qwen3next", "small", BRAID_TYPE_Q8_0, 1},
    {"qwen35moe", "medium", BRAID_TYPE_Q4_K, 1}, {"qwen3next", "medium", BRAID_TYPE_Q4_K, 1},
    {"mamba2", "small", BRAID_TYPE_Q8_0, 1}, {"mamba2", "small", BRAID_TYPE_Q4_K, 1},
    {"mamba2", "small", BRAID_TYPE_Q6_K, 1}, {"nemotron_h", "small", BRAID_TYPE_Q8_0, 1},
    {"nemotron_h", "small", BRAID_TYPE_Q4_K, 1}, {"lfm2", "small", BRAID_TYPE_Q8_0, 1},
    {"lfm2", "medium", BRAID_TYPE_Q4_K, 1}, {"lfm2", "medium", BRAID_TYPE_Q6_K, 1},
    {"nemotron_h", "small", BRAID_TYPE_Q6_K, 1}, {"nemotron_h_moe", "small", BRAID_TYPE_Q8_0, 1},
    {"nemotron_h_moe", "medium", BRAID_TYPE_Q4_K, 1}, {"granitehybrid", "small", BRAID_TYPE_Q8_0, 1},
    {"granitehybrid", "medium", BRAID_TYPE_Q4_K, 1}, {"lfm2moe", "small", BRAID_TYPE_Q8_0, 1},
    {"lfm2moe", "medium", BRAID_TYPE_Q4_K, 1}, {"falcon-h1", "small", BRAID_TYPE_Q8_0, 1},
    {"falcon-h1", "medium", BRAID_TYPE_Q4_K, 1},
};

/* BRAID_ARCHS (comma-separated): run only the rows named there, by row name ("mamba2-tiny"), quantized row
 * label ("mamba2-small q4_K") or architecture ("mamba2"). For the emulated arm64 suite, which cannot afford
 * every row; the output says which rows ran. Unset: every row. */
static int row_selected(const char *name, const char *arch) {
    const char *want = getenv("BRAID_ARCHS");
    if (!want || !*want) return 1;
    for (const char *p = want; *p;) {
        const char *e = strchr(p, ',');
        const size_t n = e ? (size_t)(e - p) : strlen(p);
        if ((strlen(name) == n && !strncmp(p, name, n)) || (strlen(arch) == n && !strncmp(p, arch, n))) return 1;
        p += n + (e != NULL);
    }
    return 0;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (getenv("BRAID_ARCHS") && *getenv("BRAID_ARCHS"))
        printf("BRAID_ARCHS=%s: only these rows run (the others are not checked)\n", getenv("BRAID_ARCHS"));
    if (!oracle_pair_get(&pair)) TEST_SKIP("the requested pair cannot run on this CPU");
    const size_t n_cases = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n_cases; i++) cases[i].over = no_over();
    gen_shape *odd = &cases[4].over;
    odd->n_layer = 3, odd->interval = 3, odd->n_embd = 96, odd->n_head = 6;
    odd->n_head_kv = 2, odd->head_dim = 16, odd->n_rot = 8, odd->ssm_conv = 3;
    odd->ssm_state = 8, odd->ssm_groups = 2, odd->ssm_heads = 6, odd->ssm_inner = 48;
    odd->n_expert = 12, odd->n_expert_used = 6, odd->n_ff_exp = 24, odd->n_ff_shexp = 40;
    odd->qkvz = 2;
    gen_shape *ghm = &cases[13].over; /* 16 experts choose 4 of width 64, shared expert 128 */
    ghm->n_expert = 16, ghm->n_expert_used = 4, ghm->n_ff = 64, ghm->n_ff_shexp = 128;
    gen_shape *m2odd = &cases[7].over;
    m2odd->ssm_conv = 3, m2odd->ssm_state = 8, m2odd->ssm_groups = 1, m2odd->ssm_heads = 6, m2odd->ssm_inner = 96;
    m2odd->n_layer = 3;
    char dir[] = "/tmp/braid_archs_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char paths[sizeof cases / sizeof cases[0]][600];
    for (size_t i = 0; i < n_cases; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/%s.gguf", dir, cases[i].name);
        if (!row_selected(cases[i].name, cases[i].arch)) {
            paths[i][0] = 0;
            continue;
        }
        if (!write_model(paths[i], &cases[i], 10 + i)) {
            CHECK(0, "write %s", cases[i].name);
            paths[i][0] = 0;
            continue;
        }
        test_f32_vs_llama(paths[i], &cases[i]);
        if (cases[i].flags & ROW_MEMORY) test_memory(paths[i], &cases[i]);
    }

    printf("quantized weights vs llama.cpp (K/V F32, FA off):\n");
    for (size_t i = 0; i < sizeof quant_rows / sizeof quant_rows[0]; i++) {
        char path[600], label[64];
        snprintf(label, sizeof label, "%s-%s %s", quant_rows[i].arch, quant_rows[i].preset,
                 bd_type_traits_get(quant_rows[i].type)->name);
        if (!row_selected(label, quant_rows[i].arch)) continue;
        snprintf(path, sizeof path, "%s/quant.gguf", dir);
        gen_params p;
        gen_params_default(&p);
        p.arch = quant_rows[i].arch;
        p.preset = quant_rows[i].preset;
        p.type = quant_rows[i].type;
        p.seed = 30 + i;
        p.vocab = "none";
        p.n_vocab = 1024;
        CHECK_STATUS(gen_model_write(&p, path, NULL), BRAID_OK);
        test_quant(path, label, quant_rows[i].exact);
        unlink(path);
    }
    for (size_t i = 0; i < n_cases; i++)
        if (paths[i][0]) unlink(paths[i]);
    rmdir(dir);
    TEST_MAIN_END();
}
