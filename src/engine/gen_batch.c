/* gen_batch.c — continuous batching: several braid_gen generators over one context advance together, one
 * braid_decode per step (braid_gen_begin / braid_gen_step in braid.h; the server's slots run on it).
 *
 * A step first lets every generating generator sample from the logits of its row of the previous step and
 * emit the token (the same sample -> end of generation? -> emit -> stop string? order as braid_gen_run), then
 * builds one batch: the sampled tokens first (one row each; a speculative generator adds the tokens it drafts
 * right after its own, as braid_gen_run's verify batch), then chunks of the prompts still being decoded,
 * sharing what is left of n_batch in the order the generators are given (the first keeps its whole chunk, so
 * a long prompt advances while the other streams keep one token per step). Each generator's logits are the
 * rows of that batch, so a generator's result does not depend on what shares the step as long as the kernels
 * compute each output row on its own (braid's do: design.md §5).
 *
 * After the decode, each speculative generator verifies its own rows (generate.c's walk: greedy match or
 * rejection sampling) and emits what it accepts; the token the walk ends on (a rejected draft's replacement,
 * or the row after the last accepted draft) is emitted at the next step without a new draw, as braid_gen_run
 * does. Rejected drafts are dropped only once every generator has read its rows: the rollback buffer drops
 * them without a decode, but a truncation that had to replay would overwrite the rows the others still read.
 * Drafting itself is per generator: lookup reads its own history; a draft model decodes in the draft context's
 * sequence of the same id (the server maps slot i to sequence i of both contexts).
 *
 * Whole or nothing: a decode that fails changes no sequence; the generators that had a row in it stop with
 * stop reason "error" (the step returns the status), the others are untouched. Context shift and Self-Extend
 * are braid_gen_run's; begin refuses them. An MTP generator keeps the trunk's hidden states of its rows of each
 * step's decode (rows with logits keep theirs) for its head, as braid_gen_run's decodes do.
 *
 * braid_gen_begin_parts starts a generator on a prompt with images; braid_gen_prefill decodes it one piece
 * (n_batch inputs) per call, outside the shared batch, and then it joins the steps generating. Since any
 * decode replaces the context's logits, the caller first lets the generating ones keep theirs
 * (braid_gen_keep_logits). A generator still prefilling is left alone by braid_gen_step (no rows). */
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "engine/context.h"
#include "engine/generate.h"
#include "engine/sampling.h"

/* The reply's output and stats start now, as braid_gen_run's do; nothing drawn ahead, one new document. */
static void reply_start(braid_gen *g) {
    g->have_next = 0;
    g->trunc_to = -1;
    braid_json_matcher_reset(g->jm);
    g->n_out = 0;
    g->n_text = g->n_released = 0;
    if (g->text) g->text[0] = 0;
    g->st.n_generated = g->st.n_decodes = 0;
    g->st.drafted = g->st.accepted = g->st.spec_replayed = g->st.draft_replayed = 0;
    g->st.gen_ms = g->st.ttft_ms = 0;
    g->st.stop = "";
}

braid_status braid_gen_begin(braid_gen *g, const braid_token *tokens, int32_t n) {
    if (!g) return bd_error(BRAID_E_INVALID, "braid_gen_begin: NULL generator");
    if (g->p.ctx_shift || g->p.self_extend_n > 1)
        return bd_error(BRAID_E_UNSUPPORTED, "braid_gen_begin: context shift and Self-Extend need braid_gen_run");
    g->phase = BD_GEN_IDLE;
    const braid_token *use = NULL;
    braid_token *trimmed = NULL;
    int32_t n_use = 0, lcp = 0;
    braid_status s = bd_gen_prompt_prepare(g, tokens, n, &use, &n_use, &trimmed, &lcp);
    if (s == BRAID_OK && n_use > g->cap_ptok) {
        braid_token *t = bd_realloc(g->ptok, (size_t)n_use * sizeof *t);
        if (!t) s = bd_error(BRAID_E_NOMEM, "braid_gen_begin: out of memory for %d tokens", n_use);
        else g->ptok = t, g->cap_ptok = n_use;
    }
    if (s == BRAID_OK) {
        memcpy(g->ptok, use, (size_t)n_use * sizeof *use);
        g->n_ptok = n_use;
        g->i_ptok = g->lcp_ptok = lcp;
        g->phase = BD_GEN_PROMPT;
        if (!g->use_kept) g->logit_row = -1;
        reply_start(g);
        if (lcp == n_use) {
            /* the prompt cache kept this very prompt's logits: nothing to decode */
            g->st.decoded_tokens = g->st.replayed_tokens;
            g->st.prompt_ms = bd_gen_now_ms() - g->t_prompt0;
            g->t_gen0 = bd_gen_now_ms();
            g->phase = BD_GEN_GEN;
        }
    }
    bd_free(trimmed);
    return s;
}

/* A prompt with images is decoded by braid_gen_prefill, one piece per call, outside the steps (image rows are
 * embeddings at grid positions, which a step's token batch cannot carry). */
braid_status braid_gen_begin_parts(braid_gen *g, const braid_prompt_part *parts, int32_t n_parts) {
    if (!g) return bd_error(BRAID_E_INVALID, "braid_gen_begin_parts: NULL generator");
    if (g->p.draft || g->p.lookup_n > 0 || g->p.mtp)
        return bd_error(BRAID_E_UNSUPPORTED, "braid_gen_begin_parts: speculative generators run with braid_gen_run");
    if (g->p.ctx_shift || g->p.self_extend_n > 1)
        return bd_error(BRAID_E_UNSUPPORTED, "braid_gen_begin_parts: context shift and Self-Extend need braid_gen_run");
    int64_t total = 0;
    int has_image = 0;
    BD_TRY(bd_parts_check(g, parts, n_parts, &total, &has_image));
    if (!has_image) {
        braid_token *t = NULL;
        int32_t n = 0;
        BD_TRY(bd_parts_flatten(parts, n_parts, &t, &n));
        braid_status s = braid_gen_begin(g, t, n);
        bd_free(t);
        return s;
    }
    if (g->p.cache)
        return bd_error(BRAID_E_UNSUPPORTED, "braid_gen_begin_parts: the prompt cache keys token ids, not images: a "
                                             "prompt with images needs a generator without a cache");
    g->phase = BD_GEN_IDLE;
    BD_TRY(bd_parts_start(g, parts, n_parts, (int32_t)total));
    reply_start(g);
    g->phase = BD_GEN_PARTS;
    return BRAID_OK;
}

braid_status braid_gen_keep_logits(braid_gen *g) {
    /* a speculative generator whose next token verification already drew reads no logits at its next step */
    if (!g || g->phase != BD_GEN_GEN || g->use_kept || g->have_next || g->logit_row < 0) return BRAID_OK;
    const float *lg = braid_logits(g->ctx, g->logit_row);
    if (!lg) return bd_error(BRAID_E_INVALID, "braid_gen_keep_logits: internal: no logits for row %d", g->logit_row);
    if (!g->kept && !(g->kept = bd_mallocn((size_t)g->n_vocab, sizeof(float))))
        return bd_error(BRAID_E_NOMEM, "braid_gen_keep_logits: out of memory");
    memcpy(g->kept, lg, (size_t)g->n_vocab * sizeof(float));
    g->use_kept = 1;
    return BRAID_OK;
}

static braid_status finish(braid_gen *g, const char *why);

braid_status braid_gen_prefill(braid_gen *g, int *done) {
    if (done) *done = 1;
    if (!g) return bd_error(BRAID_E_INVALID, "braid_gen_prefill: NULL generator");
    if (g->phase != BD_GEN_PARTS) return BRAID_OK;
    if (g->p.abort_cb && g->p.abort_cb(g->p.abort_user)) {
        g->pp = NULL;
        return finish(g, "cancelled");
    }
    braid_status s = bd_parts_next(g);
    if (s == BRAID_OK && g->pp_i == g->pp_n) {
        g->phase = BD_GEN_GEN;
        s = braid_gen_keep_logits(g);
    }
    if (s != BRAID_OK) {
        g->pp = NULL;
        g->logit_row = -1;
        g->use_kept = 0;
        (void)finish(g, "error");
        return s;
    }
    if (g->phase == BD_GEN_GEN) {
        /* the prompt is in: its last logits are kept (the next decode, of any sequence, replaces the rows) */
        g->pp = NULL;
        g->t_gen0 = bd_gen_now_ms();
        return BRAID_OK;
    }
    if (done) *done = 0;
    return BRAID_OK;
}

int braid_gen_active(const braid_gen *g) {
    return g && (g->phase == BD_GEN_PROMPT || g->phase == BD_GEN_GEN || g->phase == BD_GEN_PARTS);
}

/* Ends g's run with stop reason why: the held-back text goes out, a checkpoint closes the reply. */
static braid_status finish(braid_gen *g, const char *why) {
    g->phase = BD_GEN_DONE;
    g->st.stop = why;
    g->st.n_generated = g->n_out;
    if (g->t_gen0 > 0) g->st.gen_ms = bd_gen_now_ms() - g->t_gen0;
    if ((g->n_released < g->n_text || g->p.on_piece) && bd_gen_release(g, -1, g->n_text) && strcmp(why, "error"))
        g->st.stop = "cancelled";
    if (!strcmp(why, "error")) return BRAID_OK;
    if (g->p.cache) {
        bd_gen_cache_store(g, NULL); /* the reply, for the next turn of this conversation on any slot */
        return BRAID_OK;
    }
    braid_status cs = braid_seq_checkpoint(g->ctx, g->p.seq);
    return cs == BRAID_E_FULL ? BRAID_OK : cs; /* a full checkpoint budget only costs replay later */
}

/* The token generator g emits this step, or -1 when it stopped instead (finish called). A token the last
 * step's verification already drew goes first, with no new draw, as in braid_gen_run. */
static braid_status sample_step(braid_gen *g, braid_token *out) {
    braid_model *m = (braid_model *)g->ctx->model;
    *out = -1;
    braid_token t;
    const float *lg = NULL;
    if (g->have_next) {
        g->have_next = 0;
        t = g->next;
    } else {
        if (g->p.n_predict >= 0 && g->n_out >= g->p.n_predict) return finish(g, "length");
        if (g->p.abort_cb && g->p.abort_cb(g->p.abort_user)) return finish(g, "cancelled");
        lg = bd_gen_next_logits(g);
        if (!lg) return bd_error(BRAID_E_INVALID, "braid_gen_step: internal: no logits for row %d", g->logit_row);
        BD_TRY(bd_gen_sample(g, lg, &t));
    }
    if (braid_token_is_eog(m, t)) return finish(g, "eog");
    const char *stop = NULL;
    g->cur_logits = lg;
    braid_status s = bd_gen_emit(g, t, &stop);
    g->cur_logits = NULL;
    BD_TRY(s);
    if (stop) return finish(g, stop);
    if (bd_gen_json_done(g)) return finish(g, "eog"); /* the document is complete: no decode needed */
    if (g->p.n_predict >= 0 && g->n_out >= g->p.n_predict) return finish(g, "length"); /* needs no decode */
    *out = t;
    return BRAID_OK;
}

static int spec_on(const braid_gen *g) { return g->p.draft || g->p.lookup_n > 0 || g->p.mtp; }

braid_status braid_gen_step(braid_gen *const *gens, int32_t n) {
    if (n < 0 || (n > 0 && !gens)) return bd_error(BRAID_E_INVALID, "braid_gen_step: bad generator list");
    braid_context *c = NULL;
    for (int32_t i = 0; i < n; i++) {
        if (!gens[i]) return bd_error(BRAID_E_INVALID, "braid_gen_step: generator %d is NULL", i);
        if (!c) c = gens[i]->ctx;
        if (gens[i]->ctx != c) return bd_error(BRAID_E_INVALID, "braid_gen_step: generators of different contexts");
        for (int32_t j = 0; j < i; j++)
            if (gens[j]->p.seq == gens[i]->p.seq && braid_gen_active(gens[j]) && braid_gen_active(gens[i]))
                return bd_error(BRAID_E_INVALID, "braid_gen_step: generators %d and %d share sequence %d", j, i,
                                gens[i]->p.seq);
    }
    if (!c) return BRAID_OK;
    const int32_t nb = (int32_t)c->p.n_batch;
    braid_token *tok = bd_mallocn((size_t)nb, sizeof *tok);
    braid_seq_id *seq = bd_mallocn((size_t)nb, sizeof *seq);
    uint8_t *flag = bd_mallocn((size_t)nb, 1);
    int32_t *row0 = bd_mallocn((size_t)n, sizeof *row0), *nrow = bd_mallocn((size_t)n, sizeof *nrow);
    int32_t *ndraft = bd_mallocn((size_t)n, sizeof *ndraft);
    const char **vstop = bd_calloc((size_t)n, sizeof *vstop);
    braid_status s = BRAID_OK;
    if (!tok || !seq || !flag || !row0 || !nrow || !ndraft || !vstop)
        s = bd_error(BRAID_E_NOMEM, "braid_gen_step: out of memory");
    int32_t rows = 0;
    int32_t room = s == BRAID_OK ? bd_gen_room(gens[0]) : 0;
    for (int32_t i = 0; s == BRAID_OK && i < n; i++) nrow[i] = ndraft[i] = 0;
    /* A failure of one generator before the decode (sampling, drafting, its checkpoint) ends that one with
     * "error" and is returned, but the others' rows still go through: they have emitted their tokens. */
    braid_status err = BRAID_OK;
#define GEN_FAIL(g, st)                                                                                        \
    do {                                                                                                       \
        if (braid_gen_active(g)) (void)finish(g, "error");                                                     \
        if (err == BRAID_OK) err = (st);                                                                       \
    } while (0)
    /* 1. the generating ones sample and emit; a token whose decode has no room ends the reply ("context");
     * a speculative one adds its drafts after its token, as many as its settings, its n_predict and the
     * rows and cells left allow (as braid_gen_run caps them by the cells) */
    for (int32_t i = 0; s == BRAID_OK && i < n; i++) {
        braid_gen *g = gens[i];
        if (g->phase != BD_GEN_GEN) continue;
        braid_token t;
        braid_status gs = sample_step(g, &t);
        if (gs != BRAID_OK) GEN_FAIL(g, gs);
        if (gs != BRAID_OK || t < 0) continue;
        if (rows >= nb || rows >= room) {
            gs = finish(g, "context");
            if (gs != BRAID_OK) GEN_FAIL(g, gs);
            continue;
        }
        int32_t k = 0;
        if (spec_on(g)) {
            int32_t max = g->p.draft_n, left = (nb < room ? nb : room) - rows - 1;
            if (g->p.n_predict >= 0 && g->p.n_predict - g->n_out < max) max = g->p.n_predict - g->n_out;
            if (left < max) max = left;
            if (max > 0) gs = bd_spec_draft(g, t, max, &k);
            if (gs != BRAID_OK) {
                GEN_FAIL(g, gs);
                continue;
            }
        }
        row0[i] = rows;
        nrow[i] = 1 + k;
        ndraft[i] = k;
        tok[rows] = t, seq[rows] = g->p.seq, flag[rows] = 1;
        for (int32_t j = 0; j < k; j++) tok[rows + 1 + j] = g->draft[j], seq[rows + 1 + j] = g->p.seq, flag[rows + 1 + j] = 1;
        rows += 1 + k;
    }
    /* 2. prompt chunks in the order given, within what is left of n_batch and of the cells */
    for (int32_t i = 0; s == BRAID_OK && i < n; i++) {
        braid_gen *g = gens[i];
        if (g->phase != BD_GEN_PROMPT) continue;
        if (g->p.abort_cb && g->p.abort_cb(g->p.abort_user)) {
            braid_status gs = finish(g, "cancelled");
            if (gs != BRAID_OK) GEN_FAIL(g, gs);
            continue;
        }
        int32_t left = (nb < room ? nb : room) - rows;
        if (left <= 0) continue;
        int32_t k = g->n_ptok - g->i_ptok < left ? g->n_ptok - g->i_ptok : left;
        row0[i] = rows;
        nrow[i] = k;
        for (int32_t j = 0; j < k; j++)
            tok[rows + j] = g->ptok[g->i_ptok + j], seq[rows + j] = g->p.seq, flag[rows + j] = 0;
        if (g->i_ptok + k == g->n_ptok) flag[rows + k - 1] = 1;
        rows += k;
    }
    if (s == BRAID_OK && rows > 0) {
        braid_batch b = {.n_tokens = rows, .token = tok, .seq = seq, .logits = flag};
        const braid_status ds = braid_decode(c, &b);
        s = ds;
        /* 3a. the generating ones read their rows (verification) before anything else touches the memory:
         * finishing a prompt stores it in the prompt cache, and a truncation that replays decodes */
        for (int32_t i = 0; i < n; i++) {
            braid_gen *g = gens[i];
            if (!nrow[i] || !braid_gen_active(g) || (ds == BRAID_OK && g->phase != BD_GEN_GEN)) continue;
            if (ds != BRAID_OK) {
                g->logit_row = -1;
                g->use_kept = 0;
                (void)finish(g, "error");
                continue;
            }
            const int32_t base = g->n_tok;
            braid_status ms = bd_gen_mirror_push(&g->tok, &g->n_tok, &g->cap_tok, tok + row0[i], nrow[i]);
            /* MTP: the head keeps the trunk's hidden states of these rows (all have logits, so all have one) */
            if (ms == BRAID_OK && g->mtp) ms = bd_mtp_after_decode(g->mtp, base, nrow[i], row0[i]);
            g->st.n_decodes++;
            g->st.gen_ms = bd_gen_now_ms() - g->t_gen0;
            g->use_kept = 0;
            if (ms != BRAID_OK) {
                if (s == BRAID_OK) s = ms;
                g->logit_row = -1;
                (void)finish(g, "error");
                continue;
            }
            if (!ndraft[i]) {
                g->logit_row = row0[i];
                continue;
            }
            braid_token nx = -1;
            int have = 0;
            g->defer_trunc = 1;
            g->trunc_to = -1;
            braid_status vs = bd_gen_verify(g, base, row0[i], ndraft[i], &nx, &have, &vstop[i]);
            g->defer_trunc = 0;
            if (vs != BRAID_OK) {
                if (s == BRAID_OK) s = vs;
                vstop[i] = "error";
            } else if (have) {
                g->have_next = 1;
                g->next = nx;
            }
        }
        /* 3b. the prompts that advanced */
        for (int32_t i = 0; ds == BRAID_OK && i < n; i++) {
            braid_gen *g = gens[i];
            if (!nrow[i] || g->phase != BD_GEN_PROMPT) continue;
            braid_status ms = bd_gen_mirror_push(&g->tok, &g->n_tok, &g->cap_tok, tok + row0[i], nrow[i]);
            if (ms != BRAID_OK && s == BRAID_OK) s = ms;
            g->i_ptok += nrow[i];
            g->st.decoded_tokens = (g->i_ptok - g->lcp_ptok) + g->st.replayed_tokens;
            if (g->p.on_progress) g->p.on_progress(g->p.progress_user, g->i_ptok, g->n_ptok);
            if (g->i_ptok == g->n_ptok) {
                g->logit_row = row0[i] + nrow[i] - 1;
                g->use_kept = 0;
                if (g->p.cache) {
                    bd_gen_cache_store(g, braid_logits(c, g->logit_row)); /* and a checkpoint at the end */
                } else {
                    braid_status cs = braid_seq_checkpoint(c, g->p.seq);
                    if (cs != BRAID_OK && cs != BRAID_E_FULL && s == BRAID_OK) s = cs;
                }
                g->st.prompt_ms = bd_gen_now_ms() - g->t_prompt0;
                g->t_gen0 = bd_gen_now_ms();
                g->phase = BD_GEN_GEN;
            }
        }
        /* 3c. the rejected drafts go (through the rollback buffer), then the replies that verification
         * ended are finished on what their sequences now hold */
        for (int32_t i = 0; i < n; i++) {
            braid_gen *g = gens[i];
            if (!ndraft[i] || !braid_gen_active(g)) continue;
            if (g->trunc_to >= 0) {
                int32_t r = 0;
                braid_status ts = bd_seq_truncate_counted(c, g->p.seq, g->trunc_to, &r);
                g->st.spec_replayed += r;
                g->trunc_to = -1;
                if (ts != BRAID_OK) {
                    if (s == BRAID_OK) s = ts;
                    vstop[i] = "error";
                }
            }
            if (vstop[i] && !strcmp(vstop[i], "error")) {
                g->have_next = 0;
                (void)finish(g, "error");
            } else if (vstop[i]) {
                braid_status fs = finish(g, vstop[i]);
                if (fs != BRAID_OK && s == BRAID_OK) s = fs;
            }
        }
    }
#undef GEN_FAIL
    if (s == BRAID_OK) s = err;
    bd_free(tok);
    bd_free(seq);
    bd_free(flag);
    bd_free(row0);
    bd_free(nrow);
    bd_free(ndraft);
    bd_free((void *)vstop);
    return s;
}

const float *braid_gen_logits(const braid_gen *g) { return g ? g->cur_logits : NULL; }
