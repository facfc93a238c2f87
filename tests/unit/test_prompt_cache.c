/* test_prompt_cache.c — the prompt cache (braid_prompt_cache, engine/prompt_cache.c) and its radix tree:
 * - radix tree: random inserts / removals against a brute-force list of keys (longest shared prefix, the ids
 *   sharing it, exact find), invariants after every operation, every allocation failing once leaves the tree
 *   as it was;
 * - reuse is exact: on qwen35 (Gated DeltaNet + attention), mamba2 and lfm2 (short conv + attention), a prompt
 *   served from another conversation's cached prefix (cells shared, state from a checkpoint + replay) and then
 *   decoded gives logits bit-identical to a fresh context decoding the prompt the same way; an identical
 *   prompt replays nothing and hands back the kept logits, bit-identical too;
 * - sharing and the budget: N conversations with one system prompt hold its cells once (the cache's cell
 *   count is the union), and under a small budget many stores never leave the cache above it;
 * - slot save / restore: a sequence saved to a file with its checkpoints and loaded into a fresh context
 *   reuses its whole prefix at once (no replay) with the same logits; a corrupt or truncated file is refused
 *   and the sequence is left as it was;
 * - braid_gen with the cache (braid_gen_prompt / _run and braid_gen_begin / _step): an identical prompt on
 *   another sequence decodes nothing and gives the same greedy tokens;
 * - agent traffic (small): conversations whose every turn re-sends the whole history, some turns re-rendered
 *   (an earlier reply's reasoning dropped) or branched: tokens computed <= 1.1 x the new tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_traffic.h"
#include "base/alloc.h"
#include "braid.h"
#include "engine/context.h"
#include "engine/radix.h"
#include "genmodel/genmodel.h"
#include "test.h"

/* ---- radix tree ------------------------------------------------------------------------------------------- */

#define RK 40
typedef struct {
    braid_token tok[RK][24];
    int32_t len[RK];
    int used[RK];
} ref_keys;

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static int32_t lcp(const braid_token *a, int32_t na, const braid_token *b, int32_t nb) {
    int32_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

static void radix_check_query(const bd_radix *t, const ref_keys *r, const braid_token *q, int32_t n) {
    int32_t best = 0;
    for (int k = 0; k < RK; k++)
        if (r->used[k]) {
            int32_t l = lcp(q, n, r->tok[k], r->len[k]);
            if (l > best) best = l;
        }
    int32_t ids[RK], n_ids = 0;
    int32_t d = bd_radix_match(t, q, n, ids, RK, &n_ids);
    CHECK(d == best, "match length %d, brute force %d", d, best);
    int want = 0;
    for (int k = 0; best > 0 && k < RK; k++)
        if (r->used[k] && lcp(q, n, r->tok[k], r->len[k]) >= best) {
            want++;
            int found = 0;
            for (int32_t j = 0; j < n_ids && j < RK; j++) found |= ids[j] == k;
            CHECK(found, "key %d shares %d tokens but is not listed", k, best);
        }
    CHECK(n_ids == want, "%d ids listed, %d share the prefix", n_ids, want);
    int exact = -1;
    for (int k = 0; k < RK; k++)
        if (r->used[k] && r->len[k] == n && lcp(q, n, r->tok[k], r->len[k]) == n) exact = k;
    CHECK(bd_radix_find(t, q, n) == exact, "find gives %d, want %d", bd_radix_find(t, q, n), exact);
}

static void test_radix(void) {
    bd_radix *t = NULL;
    CHECK_STATUS(bd_radix_new(&t), BRAID_OK);
    ref_keys r;
    memset(&r, 0, sizeof r);
    for (int step = 0; step < 4000; step++) {
        int k = (int)(rnd() % RK);
        if (!r.used[k]) {
            /* Keys over a 3-token alphabet, often extending or branching off another key. */
            int32_t n = 1 + (int32_t)(rnd() % 23);
            int base = (int)(rnd() % RK);
            for (int32_t i = 0; i < n; i++)
                r.tok[k][i] = r.used[base] && i < r.len[base] && rnd() % 4 ? r.tok[base][i] : (braid_token)(rnd() % 3);
            r.len[k] = n;
            int dup = 0;
            for (int j = 0; j < RK; j++)
                dup |= r.used[j] && r.len[j] == n && !memcmp(r.tok[j], r.tok[k], (size_t)n * sizeof(braid_token));
            braid_status st = bd_radix_insert(t, r.tok[k], n, k);
            CHECK(st == (dup ? BRAID_E_INVALID : BRAID_OK), "insert gave %s (duplicate %d)", braid_status_name(st), dup);
            if (st == BRAID_OK) r.used[k] = 1;
        } else {
            CHECK(bd_radix_remove(t, r.tok[k], r.len[k], k + 1 == RK ? 0 : k + 1) == 0 || r.len[k] == 0,
                  "removal under the wrong id succeeded");
            CHECK(bd_radix_remove(t, r.tok[k], r.len[k], k) == 1, "removal of key %d failed", k);
            r.used[k] = 0;
        }
        CHECK_STATUS(bd_radix_check(t), BRAID_OK);
        braid_token q[24];
        int32_t n = 1 + (int32_t)(rnd() % 23);
        int base = (int)(rnd() % RK);
        for (int32_t i = 0; i < n; i++)
            q[i] = r.used[base] && i < r.len[base] && rnd() % 5 ? r.tok[base][i] : (braid_token)(rnd() % 3);
        radix_check_query(t, &r, q, n);
    }
    int keys = 0;
    for (int k = 0; k < RK; k++) keys += r.used[k];
    CHECK(bd_radix_n_keys(t) == keys, "%d keys, %d stored", bd_radix_n_keys(t), keys);

    /* Every allocation of an insert that splits an edge fails once: refused, tree unchanged. */
    braid_token a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 2, 3, 9, 9, 9};
    bd_radix *u = NULL;
    CHECK_STATUS(bd_radix_new(&u), BRAID_OK);
    CHECK_STATUS(bd_radix_insert(u, a, 6, 0), BRAID_OK);
    for (uint64_t f = 1; f < 10; f++) {
        bd_alloc_fail_at(f, 0);
        braid_status st = bd_radix_insert(u, b, 6, 1);
        bd_alloc_fail_at(0, 0);
        if (st == BRAID_OK) {
            CHECK(f > 1, "insert succeeded with its first allocation failing");
            CHECK(bd_radix_remove(u, b, 6, 1) == 1, "remove after insert");
            break;
        }
        CHECK_STATUS(st, BRAID_E_NOMEM);
        CHECK_STATUS(bd_radix_check(u), BRAID_OK);
        CHECK(bd_radix_n_keys(u) == 1 && bd_radix_find(u, a, 6) == 0 && bd_radix_find(u, b, 6) == -1,
              "tree changed by a failed insert");
    }
    CHECK(bd_radix_n_nodes(u) == 1, "a removal re-merges the split edge (%d nodes)", bd_radix_n_nodes(u));
    bd_radix_free(u);
    bd_radix_free(t);
}

/* ---- models ----------------------------------------------------------------------------------------------- */

static braid_model *make_model(const char *arch, const char *path) {
    gen_params gp;
    gen_params_default(&gp);
    gp.arch = arch;
    gp.seed = 7;
    gp.vocab = "none";
    gp.n_vocab = 512;
    gen_summary sum;
    if (gen_model_write(&gp, path, &sum) != BRAID_OK) return NULL;
    braid_model *m = NULL;
    braid_model_params mp = braid_model_default_params();
    if (braid_model_load(path, &mp, &m) != BRAID_OK) return NULL;
    return m;
}

#define N_USER 4
#define N_CACHE 8

static braid_context *make_ctx(braid_model *m, uint32_t n_seq) {
    braid_context_params cp = braid_context_default_params();
    cp.n_ctx = 4096;
    cp.n_seq_max = n_seq;
    cp.n_batch = 64;
    cp.n_threads = 1;
    cp.checkpoint_interval = 64;
    cp.checkpoint_budget_bytes = 1ull << 30;
    braid_context *c = NULL;
    return braid_context_new(m, &cp, &c) == BRAID_OK ? c : NULL;
}

/* Decodes tokens[from .. n) into seq s in chunks of 64 aligned to absolute multiples of 64 (the way a fresh
 * decode cuts them), logits of the last. */
static braid_status decode_rest(braid_context *c, braid_seq_id s, const braid_token *tok, int32_t from, int32_t n) {
    for (int32_t i = from; i < n;) {
        int32_t e = (i / 64 + 1) * 64;
        if (e > n) e = n;
        braid_seq_id *seq = malloc((size_t)(e - i) * sizeof *seq);
        for (int32_t k = 0; k < e - i; k++) seq[k] = s;
        braid_batch b = {.n_tokens = e - i, .token = tok + i, .seq = seq};
        braid_status st = braid_decode(c, &b);
        free(seq);
        if (st != BRAID_OK) return st;
        i = e;
    }
    return BRAID_OK;
}

static void fill(braid_token *t, int32_t n, uint32_t seed) {
    uint64_t x = seed * 2654435761u + 1;
    for (int32_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        t[i] = (braid_token)(x % 500);
    }
}

/* Fresh logits of tokens[0 .. n) in a new context. */
static float *fresh_logits(braid_model *m, const braid_token *tok, int32_t n) {
    braid_context *c = make_ctx(m, 1);
    float *out = NULL;
    if (c && decode_rest(c, 0, tok, 0, n) == BRAID_OK) {
        int32_t nv = braid_model_n_vocab(m);
        out = malloc((size_t)nv * sizeof *out);
        memcpy(out, braid_logits(c, (n - 1) % 64), (size_t)nv * sizeof *out);
    }
    braid_context_free(c);
    return out;
}

/* The last decode's logits row (the last row of the last chunk). */
static const float *last_row(braid_context *c, int32_t from, int32_t n) {
    int32_t start = n - 1 < from ? from : ((n - 1) / 64) * 64;
    if (start < from) start = from;
    return braid_logits(c, n - 1 - start);
}

static void test_arch(const char *arch) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/braid_test_pcache_%s_%d.gguf", arch, (int)getpid());
    braid_model *m = make_model(arch, path);
    CHECK(m != NULL, "%s: model: %s", arch, braid_last_error());
    if (!m) return;
    int32_t nv = braid_model_n_vocab(m);
    braid_context *c = make_ctx(m, N_USER + N_CACHE);
    braid_prompt_cache_params pp = braid_prompt_cache_default_params();
    pp.first_seq = N_USER;
    pp.n_seq = N_CACHE;
    pp.budget_bytes = 512ull << 20;
    braid_prompt_cache *pc = NULL;
    CHECK_STATUS(braid_prompt_cache_new(c, &pp, &pc), BRAID_OK);
    if (!c || !pc) goto out;

    /* Conversation A on seq 0: system prompt (300 tokens) + question A; stored at the prompt end. */
    enum { SYS = 300, QA = 70, QB = 90 };
    braid_token pa[SYS + QA], pb[SYS + QB];
    fill(pa, SYS, 1);
    memcpy(pb, pa, SYS * sizeof *pa);
    fill(pa + SYS, QA, 2);
    fill(pb + SYS, QB, 3);
    braid_cache_reuse ru;
    CHECK_STATUS(braid_prompt_cache_prepare(pc, 0, pa, SYS + QA, &ru), BRAID_OK);
    CHECK(ru.cached_tokens == 0 && ru.replayed_tokens == 0, "%s: empty cache reused %d", arch, ru.cached_tokens);
    CHECK_STATUS(decode_rest(c, 0, pa, 0, SYS + QA), BRAID_OK);
    CHECK_STATUS(braid_prompt_cache_store(pc, 0, last_row(c, 0, SYS + QA)), BRAID_OK);

    /* Conversation B on seq 1: same system prompt, other question. Served from A's entry: the prefix of 300
     * tokens (checkpoint at 256 + replay of 44 at most), then its own 90 tokens. */
    CHECK_STATUS(braid_prompt_cache_prepare(pc, 1, pb, SYS + QB, &ru), BRAID_OK);
    CHECK(ru.cached_tokens == SYS && ru.from_entry, "%s: B reused %d (from entry %d), want %d", arch,
          ru.cached_tokens, ru.from_entry, SYS);
    CHECK(ru.replayed_tokens <= 64, "%s: B replayed %d (> one checkpoint interval)", arch, ru.replayed_tokens);
    printf("%s: B from A's entry: cached %d, replayed %d\n", arch, ru.cached_tokens, ru.replayed_tokens);
    CHECK_STATUS(decode_rest(c, 1, pb, ru.cached_tokens, SYS + QB), BRAID_OK);
    float *fb = fresh_logits(m, pb, SYS + QB);
    const float *lb = last_row(c, ru.cached_tokens, SYS + QB);
    CHECK(fb && lb && !memcmp(fb, lb, (size_t)nv * sizeof(float)), "%s: B's logits after a cached reuse differ from a fresh decode", arch);
    CHECK_STATUS(braid_prompt_cache_store(pc, 1, lb), BRAID_OK);

    /* The system prompt's cells are held once: the cache holds the union of A's and B's cells. */
    braid_prompt_cache_stats st;
    braid_prompt_cache_get_stats(pc, &st);
    if (braid_model_has_attention(m))
        CHECK(st.cells == SYS + QA + QB, "%s: cache holds %d cells, want %d (system prompt once)", arch, st.cells,
              SYS + QA + QB);
    CHECK(st.entries == 2 && st.bytes <= pp.budget_bytes, "%s: %d entries, %llu bytes", arch, st.entries,
          (unsigned long long)st.bytes);

    CHECK(braid_prompt_cache_lookup(pc, pb, SYS + QB) == SYS + QB && braid_prompt_cache_lookup(pc, pa, 10) == 10,
          "%s: lookup", arch);
    /* B again, on seq 2 (a new slot): identical prompt, nothing replayed, logits kept and identical. */
    CHECK_STATUS(braid_prompt_cache_prepare(pc, 2, pb, SYS + QB, &ru), BRAID_OK);
    CHECK(ru.cached_tokens == SYS + QB && ru.replayed_tokens == 0 && ru.logits_ready, "%s: identical prompt: cached %d replayed %d ready %d",
          arch, ru.cached_tokens, ru.replayed_tokens, ru.logits_ready);
    const float *kl = braid_prompt_cache_logits(pc);
    CHECK(kl && fb && !memcmp(kl, fb, (size_t)nv * sizeof(float)), "%s: kept logits differ from a fresh decode", arch);
    CHECK(braid_seq_len(c, 2) == SYS + QB, "%s: seq 2 holds %d", arch, braid_seq_len(c, 2));

    /* A branch inside the cached question: diverges at 330 (in A's question, past its last checkpoint at
     * 320 = 5 * 64) — replay <= 64, a checkpoint is left at the branch point, and the logits are exact. */
    braid_token pc2[SYS + QA];
    memcpy(pc2, pa, sizeof pa);
    fill(pc2 + 330, SYS + QA - 330, 9);
    CHECK_STATUS(braid_prompt_cache_prepare(pc, 3, pc2, SYS + QA, &ru), BRAID_OK);
    CHECK(ru.cached_tokens == 330 && ru.replayed_tokens <= 64, "%s: branch: cached %d replayed %d", arch,
          ru.cached_tokens, ru.replayed_tokens);
    printf("%s: branch at 330: cached %d, replayed %d\n", arch, ru.cached_tokens, ru.replayed_tokens);
    CHECK_STATUS(decode_rest(c, 3, pc2, ru.cached_tokens, SYS + QA), BRAID_OK);
    float *fc = fresh_logits(m, pc2, SYS + QA);
    const float *lc = last_row(c, ru.cached_tokens, SYS + QA);
    CHECK(fc && lc && !memcmp(fc, lc, (size_t)nv * sizeof(float)), "%s: branch logits differ from a fresh decode", arch);
    free(fc);

    /* Slot save / restore: seq 1 (B) to a file, into a fresh context, then B's next turn: reused whole. */
    char spath[256];
    snprintf(spath, sizeof spath, "/tmp/braid_test_pcache_%s_%d.slot", arch, (int)getpid());
    CHECK_STATUS(braid_state_seq_save_file(c, 1, spath), BRAID_OK);
    braid_context *c2 = make_ctx(m, N_USER + N_CACHE);
    braid_prompt_cache *pc2c = NULL;
    CHECK_STATUS(braid_prompt_cache_new(c2, &pp, &pc2c), BRAID_OK);
    CHECK_STATUS(braid_state_seq_load_file(c2, 0, spath), BRAID_OK);
    braid_token turn2[SYS + QB + 40];
    memcpy(turn2, pb, sizeof pb);
    fill(turn2 + SYS + QB, 40, 11);
    CHECK_STATUS(braid_prompt_cache_prepare(pc2c, 0, turn2, SYS + QB + 40, &ru), BRAID_OK);
    CHECK(ru.cached_tokens == SYS + QB && ru.replayed_tokens == 0, "%s: restored slot: cached %d replayed %d", arch,
          ru.cached_tokens, ru.replayed_tokens);
    CHECK_STATUS(decode_rest(c2, 0, turn2, ru.cached_tokens, SYS + QB + 40), BRAID_OK);
    float *ft = fresh_logits(m, turn2, SYS + QB + 40);
    const float *lt = last_row(c2, ru.cached_tokens, SYS + QB + 40);
    CHECK(ft && lt && !memcmp(ft, lt, (size_t)nv * sizeof(float)), "%s: restored slot's logits differ", arch);
    free(ft);
    /* A corrupt file (one byte flipped in the middle) and a truncated one: refused, seq 0 unchanged. */
    size_t fn = 0;
    char *bytes = test_read_file(spath, &fn);
    CHECK(bytes && fn > 100, "%s: slot file", arch);
    if (bytes && fn > 100) {
        int32_t len0 = braid_seq_len(c2, 0);
        bytes[fn / 2] ^= 0x40;
        FILE *f = fopen(spath, "wb");
        fwrite(bytes, 1, fn, f);
        fclose(f);
        braid_status s1 = braid_state_seq_load_file(c2, 0, spath);
        CHECK(s1 == BRAID_E_FORMAT || s1 == BRAID_E_MISMATCH, "%s: corrupt slot file gave %s", arch, braid_status_name(s1));
        bytes[fn / 2] ^= 0x40;
        f = fopen(spath, "wb");
        fwrite(bytes, 1, fn - 7, f);
        fclose(f);
        s1 = braid_state_seq_load_file(c2, 0, spath);
        CHECK(s1 == BRAID_E_FORMAT, "%s: truncated slot file gave %s", arch, braid_status_name(s1));
        CHECK(braid_seq_len(c2, 0) == len0, "%s: a refused load changed the sequence", arch);
    }
    free(bytes);
    unlink(spath);
    braid_prompt_cache_free(pc2c);
    braid_context_free(c2);
    free(fb);

    /* The budget: many distinct prompts stored under a budget of a few entries; never above it. */
    {
        braid_prompt_cache_stats s0;
        braid_prompt_cache_get_stats(pc, &s0);
        braid_prompt_cache_free(pc);
        pc = NULL;
        braid_seq_clear(c, -1);
        braid_prompt_cache_params bp = pp;
        bp.budget_bytes = s0.bytes / 2 + 1; /* about two entries of ~200 tokens */
        CHECK_STATUS(braid_prompt_cache_new(c, &bp, &pc), BRAID_OK);
        uint64_t ev = 0;
        for (int r = 0; pc && r < 12; r++) {
            braid_token p[200];
            fill(p, 200, 100 + (uint32_t)r);
            if (r % 3) memcpy(p, pa, 120 * sizeof *p); /* two of three share a prefix */
            braid_seq_clear(c, 0);
            CHECK_STATUS(braid_prompt_cache_prepare(pc, 0, p, 200, &ru), BRAID_OK);
            CHECK_STATUS(decode_rest(c, 0, p, ru.cached_tokens, 200), BRAID_OK);
            CHECK_STATUS(braid_prompt_cache_store(pc, 0, last_row(c, ru.cached_tokens, 200)), BRAID_OK);
            braid_prompt_cache_get_stats(pc, &st);
            CHECK(st.bytes <= bp.budget_bytes, "%s: cache at %llu bytes over its budget %llu", arch,
                  (unsigned long long)st.bytes, (unsigned long long)bp.budget_bytes);
            ev = st.evictions;
        }
        CHECK(ev > 0, "%s: nothing was evicted under a small budget", arch);
    }
out:
    braid_prompt_cache_free(pc);
    braid_context_free(c);
    braid_model_free(m);
    unlink(path);
}

/* Checkpoint marks: a decode that reaches a marked index checkpoints there, also inside one batch of two
 * sequences; the marks go with the sequence's content. */
static void test_marks(void) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/braid_test_pcache_marks_%d.gguf", (int)getpid());
    braid_model *m = make_model("qwen35", path);
    CHECK(m != NULL, "marks: model: %s", braid_last_error());
    if (!m) return;
    braid_context *c = make_ctx(m, 2);
    braid_token t[100];
    fill(t, 100, 5);
    int32_t mk0[3] = {70, 13, 13}, mk1[1] = {99};
    CHECK_STATUS(braid_seq_checkpoint_at(c, 0, mk0, 3), BRAID_OK);
    CHECK_STATUS(braid_seq_checkpoint_at(c, 1, mk1, 1), BRAID_OK);
    CHECK_STATUS(braid_seq_checkpoint_at(c, 5, mk1, 1), BRAID_E_RANGE);
    CHECK_STATUS(braid_seq_checkpoint_at(c, 0, NULL, 2), BRAID_E_INVALID);
    braid_seq_id seq[100];
    for (int i = 0; i < 100; i++) seq[i] = i < 50 ? 0 : 1;
    braid_batch b = {.n_tokens = 100, .token = t, .seq = seq};
    CHECK_STATUS(braid_decode(c, &b), BRAID_OK); /* seq 0 gets 50 inputs, seq 1 50 */
    braid_batch b2 = {.n_tokens = 50, .token = t + 50, .seq = seq};
    CHECK_STATUS(braid_decode(c, &b2), BRAID_OK); /* seq 0 reaches 100 */
    const mem *mm = c->mem;
    int32_t ck[8];
    int32_t n0 = mem_seq_checkpoints(mm, 0, ck, 8);
    int has13 = 0, has70 = 0, has64 = 0;
    for (int32_t i = 0; i < n0 && i < 8; i++) has13 |= ck[i] == 13, has70 |= ck[i] == 70, has64 |= ck[i] == 64;
    CHECK(has13 && has70 && has64, "seq 0: checkpoints at the marks 13 and 70 and the interval 64 (%d of them)", n0);
    int32_t n1 = mem_seq_checkpoints(mm, 1, ck, 8);
    CHECK(n1 == 0, "seq 1 (50 inputs, marked at 99): %d checkpoints", n1);
    braid_seq_clear(c, 0);
    CHECK_STATUS(decode_rest(c, 0, t, 0, 100), BRAID_OK);
    n0 = mem_seq_checkpoints(mm, 0, ck, 8);
    CHECK(n0 == 1 && ck[0] == 64, "a cleared sequence keeps no marks (%d checkpoints)", n0);
    braid_context_free(c);
    braid_model_free(m);
    unlink(path);
}

/* braid_gen with a prompt cache: a second generator on another sequence given the same prompt decodes
 * nothing (kept logits) and emits the same greedy tokens; so does one driven by braid_gen_begin / step. */
static void test_gen_cache(void) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/braid_test_pcache_gen_%d.gguf", (int)getpid());
    braid_model *m = make_model("qwen35", path);
    CHECK(m != NULL, "gen: model: %s", braid_last_error());
    if (!m) return;
    braid_context *c = make_ctx(m, 3 + N_CACHE);
    braid_prompt_cache_params pp = braid_prompt_cache_default_params();
    pp.first_seq = 3;
    pp.n_seq = N_CACHE;
    braid_prompt_cache *pc = NULL;
    CHECK_STATUS(braid_prompt_cache_new(c, &pp, &pc), BRAID_OK);
    braid_token p[150];
    fill(p, 150, 21);
    braid_token out[3][6];
    int32_t n_out[3] = {0, 0, 0};
    for (int k = 0; pc && k < 3; k++) {
        braid_gen_params gp = braid_gen_default_params();
        gp.seq = k;
        gp.n_predict = 6;
        gp.cache = pc;
        braid_gen *g = NULL;
        CHECK_STATUS(braid_gen_new(c, &gp, &g), BRAID_OK);
        if (!g) break;
        if (k < 2) {
            CHECK_STATUS(braid_gen_prompt(g, p, 150), BRAID_OK);
            CHECK_STATUS(braid_gen_run(g), BRAID_OK);
        } else {
            CHECK_STATUS(braid_gen_begin(g, p, 150), BRAID_OK);
            for (int step = 0; step < 50 && braid_gen_active(g); step++) CHECK_STATUS(braid_gen_step(&g, 1), BRAID_OK);
        }
        const braid_gen_stats *st = braid_gen_get_stats(g);
        if (k == 0) CHECK(st->decoded_tokens == 150, "gen 0 decoded %d", st->decoded_tokens);
        else CHECK(st->decoded_tokens == 0 && st->reused_tokens == 150, "gen %d (identical prompt): decoded %d, reused %d", k, st->decoded_tokens, st->reused_tokens);
        const braid_token *t = braid_gen_tokens(g, &n_out[k]);
        memcpy(out[k], t, (size_t)(n_out[k] < 6 ? n_out[k] : 6) * sizeof *t);
        braid_gen_free(g);
    }
    CHECK(n_out[0] == 6 && n_out[1] == 6 && n_out[2] == 6 && !memcmp(out[0], out[1], sizeof out[0]) &&
              !memcmp(out[0], out[2], sizeof out[0]),
          "the same greedy tokens from the kept logits (%d %d %d)", n_out[0], n_out[1], n_out[2]);
    braid_prompt_cache_free(pc);
    braid_context_free(c);
    braid_model_free(m);
    unlink(path);
}

/* A small agent-traffic run: the cache computes at most 1.1x the new tokens (a count, not a time). */
static void test_agent(void) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/braid_test_pcache_agent_%d.gguf", (int)getpid());
    braid_model *m = make_model("qwen35", path);
    CHECK(m != NULL, "agent: model: %s", braid_last_error());
    if (!m) return;
    at_params p;
    at_params_default(&p);
    p.n_conv = 4;
    p.n_turns = 6;
    p.n_slots = 2;
    p.sys_len = 150;
    p.user_min = 10;
    p.user_max = 40;
    p.reason_len = 20;
    p.answer_len = 15;
    p.branch_every = 3;
    p.n_ctx = 16384;
    p.n_batch = 64;
    p.checkpoint_interval = 64;
    at_result r[3];
    memset(r, 0, sizeof r);
    for (int k = 0; k < 3; k++) CHECK_STATUS(at_run(m, &p, (at_policy)k, &r[k]), BRAID_OK);
    printf("agent traffic: sent %lld new %lld; computed: cache %lld (replayed %lld, hits %d of %d), off %lld, "
           "llama-server policy %lld\n",
           (long long)r[0].sent, (long long)r[0].new_tokens, (long long)r[0].computed, (long long)r[0].replayed,
           r[0].hits, r[0].requests, (long long)r[1].computed, (long long)r[2].computed);
    CHECK(r[0].computed * 10 <= r[0].new_tokens * 11, "cache computed %lld tokens for %lld new (> 1.1x)",
          (long long)r[0].computed, (long long)r[0].new_tokens);
    CHECK(r[1].computed == r[1].sent, "cache off computed %lld of %lld sent", (long long)r[1].computed,
          (long long)r[1].sent);
    CHECK(r[2].computed >= r[0].computed && r[2].computed <= r[2].sent, "llama-server policy computed %lld",
          (long long)r[2].computed);
    CHECK(r[0].new_tokens == r[1].new_tokens && r[0].sent == r[1].sent, "the policies saw different traffic");
    for (int k = 0; k < 3; k++) free(r[k].ttft_ms);
    braid_model_free(m);
    unlink(path);
}

int main(void) {
    test_gen_cache();
    test_marks();
    test_agent();
    test_radix();
    test_arch("qwen35");
    test_arch("mamba2");
    test_arch("lfm2");
    TEST_MAIN_END();
}
