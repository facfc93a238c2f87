/* speculative.c — drafting for braid_gen's speculative decoding (the verification is in generate.c).
 *
 * Three drafters propose up to draft_n tokens after the token just sampled:
 * - a draft model (another context over a model with the same vocabulary): its sequence is brought to the
 *   target's history plus that token (longest common prefix kept, the rest decoded in one batch), then it
 *   decodes its own proposals one at a time. A checkpoint at the synced point bounds what dropping rejected
 *   proposals later replays in the draft to the proposals themselves;
 * - prompt lookup: the most recent earlier occurrence of the history's last n tokens (n = lookup_n, then
 *   shorter) and the tokens that followed it, which pays off on repetitive text (code, quotes, lists);
 * - the model's own MTP head (mtp.h): its rows are brought up to the target's history, then it proposes one
 *   token per step from that token's embedding and the previous step's hidden state (llama.cpp's draft-mtp:
 *   the first step pairs the sampled token with the trunk's last hidden state).
 * When the target samples (temperature > 0), each proposal comes with the distribution q it was drawn from
 * (the draft model's, or a point mass for lookup), which the rejection sampling in generate.c needs. */
#include <string.h>

#include "base/status.h"
#include "engine/context.h"
#include "engine/generate.h"
#include "engine/mtp.h"
#include "engine/sampling.h"

/* A point mass on d for lookup proposals. */
static void point_mass(float *q, int32_t n_vocab, braid_token d) {
    memset(q, 0, (size_t)n_vocab * sizeof *q);
    q[d] = 1.0f;
}

static int32_t lookup(braid_gen *g, braid_token next, int32_t max) {
    const braid_token *h = g->tok;
    const int32_t L = g->n_tok + 1; /* history plus next, read through at() */
#define AT(i) ((i) < g->n_tok ? h[(i)] : next)
    for (int32_t n = g->p.lookup_n < L - 1 ? g->p.lookup_n : L - 1; n >= 1; n--) {
        for (int32_t j = L - n - 1; j >= 0; j--) {
            int32_t e = 0;
            while (e < n && AT(j + e) == AT(L - n + e)) e++;
            if (e < n) continue;
            int32_t k = 0;
            for (int32_t i = j + n; i < L && k < max; i++) g->draft[k++] = AT(i);
            if (k > 0) return k;
        }
    }
#undef AT
    return 0;
}

/* The k-th draft token from a drafter's logits: greedy, or drawn from the drafter's distribution, which is kept
 * in g->q for the rejection sampling that verifies it. */
static braid_status draft_pick(braid_gen *g, int greedy, const float *lg, int32_t k, braid_token *d) {
    if (greedy) return braid_sampler_sample(g->dsmp, lg, g->n_vocab, d);
    float *q = g->q + (size_t)k * g->n_vocab;
    BD_TRY(bd_sampler_probs(g->dsmp, lg, g->n_vocab, q));
    *d = bd_pick_weighted(q, g->n_vocab, bd_sampler_uniform(g->dsmp));
    return BRAID_OK;
}

static braid_status draft_model(braid_gen *g, braid_token next, int32_t max, int32_t *n_draft) {
    braid_context *dc = g->p.draft;
    const braid_seq_id s = g->p.seq;
    /* Bring the draft to the target's history + next. */
    const int32_t L = g->n_tok + 1;
    int32_t lcp = 0;
    while (lcp < L && lcp < g->n_dtok && g->dtok[lcp] == (lcp < g->n_tok ? g->tok[lcp] : next)) lcp++;
    if (lcp == L) lcp = L - 1; /* its logits are needed: decode the last one again */
    if (lcp < mem_seq_len(dc->mem, s)) {
        int32_t r = 0;
        BD_TRY(bd_seq_truncate_counted(dc, s, lcp, &r));
        g->st.draft_replayed += r;
    }
    g->n_dtok = lcp;
    /* Room in the draft's context for the catch-up and the proposals; without it, no draft this step. */
    int32_t need = L - lcp + max;
    if (mem_kv_n_cells(dc->mem) && (int64_t)mem_kv_n_free(dc->mem) < need) {
        *n_draft = 0;
        return BRAID_OK;
    }
    for (int32_t i = lcp; i < L; i += g->n_rows_max) {
        int32_t k = L - i < g->n_rows_max ? L - i : g->n_rows_max;
        const braid_token *src = g->tok + i;
        braid_token one = next;
        if (i + k > g->n_tok) { /* the chunk ends with next, which is not in g->tok */
            if (k > 1) {
                BD_TRY(bd_gen_decode(g, dc, src, k - 1, 0));
                BD_TRY(bd_gen_mirror_push(&g->dtok, &g->n_dtok, &g->cap_dtok, src, k - 1));
            }
            BD_TRY(bd_gen_decode(g, dc, &one, 1, 0));
            BD_TRY(bd_gen_mirror_push(&g->dtok, &g->n_dtok, &g->cap_dtok, &one, 1));
        } else {
            BD_TRY(bd_gen_decode(g, dc, src, k, 0));
            BD_TRY(bd_gen_mirror_push(&g->dtok, &g->n_dtok, &g->cap_dtok, src, k));
        }
    }
    braid_status cs = braid_seq_checkpoint(dc, s);
    if (cs != BRAID_OK && cs != BRAID_E_FULL) return cs;
    /* Propose. The row with the logits is the last of the last decode. */
    const int greedy = bd_sampler_is_greedy(g->smp);
    const braid_model *m = dc->model;
    int32_t k = 0;
    for (;;) {
        const float *lg = braid_logits(dc, dc->n_rows - 1);
        if (!lg) return bd_error(BRAID_E_INVALID, "speculative: internal: no draft logits");
        braid_token d;
        BD_TRY(draft_pick(g, greedy, lg, k, &d));
        g->draft[k++] = d;
        if (k == max || braid_token_is_eog((braid_model *)m, d)) break;
        BD_TRY(bd_gen_decode(g, dc, &d, 1, 0));
        BD_TRY(bd_gen_mirror_push(&g->dtok, &g->n_dtok, &g->cap_dtok, &d, 1));
    }
    *n_draft = k;
    return BRAID_OK;
}

static braid_status draft_mtp(braid_gen *g, braid_token next, int32_t max, int32_t *n_draft) {
    const braid_pos p0 = mem_seq_next_pos(g->ctx->mem, g->p.seq);
    const float *lg, *h_out;
    int ready;
    /* the head's catch-up over what the target accepted, and next paired with the trunk's last h, in one pass */
    BD_TRY(bd_mtp_first(g->mtp, g->n_tok, next, p0, &ready, &lg, &h_out));
    if (!ready) return BRAID_OK; /* the trunk's last hidden state is unknown (nothing decoded yet): no draft */
    const int greedy = bd_sampler_is_greedy(g->smp);
    int32_t k = 0;
    for (;;) {
        braid_token d;
        BD_TRY(draft_pick(g, greedy, lg, k, &d));
        g->draft[k++] = d;
        if (k == max || braid_token_is_eog((braid_model *)g->ctx->model, d)) break;
        /* the next step: d with the head's own hidden state */
        braid_status s = bd_mtp_step(g->mtp, d, g->n_tok + k, p0 + k, h_out, &lg, &h_out);
        if (s == BRAID_E_FULL) break; /* no room for another row: propose what there is */
        BD_TRY(s);
    }
    *n_draft = k;
    return BRAID_OK;
}

braid_status bd_spec_draft(braid_gen *g, braid_token next, int32_t max, int32_t *n_draft) {
    *n_draft = 0;
    if (max > g->p.draft_n) max = g->p.draft_n;
    if (max <= 0) return BRAID_OK;
    if (g->p.draft) return draft_model(g, next, max, n_draft);
    if (g->mtp) return draft_mtp(g, next, max, n_draft);
    int32_t k = lookup(g, next, max);
    if (!bd_sampler_is_greedy(g->smp))
        for (int32_t i = 0; i < k; i++) point_mass(g->q + (size_t)i * g->n_vocab, g->n_vocab, g->draft[i]);
    *n_draft = k;
    return BRAID_OK;
}
