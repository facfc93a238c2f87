/* generate.c — braid_gen: the one generation loop (run, chat, the server and speculative decoding use it).
 *
 * A generator drives one sequence of a context. braid_gen_prompt makes the sequence hold a given token list
 * by keeping the longest common prefix with what it holds (truncation: rollback buffer, else the nearest
 * checkpoint + replay) and decoding the rest in n_batch chunks, so a chat turn computes only what is new; a
 * checkpoint closes every prompt and every reply. braid_gen_run then repeats: sample -> end of generation? ->
 * emit the piece -> stop string? -> make room (context shift) -> decode. With a draft (another model's
 * context, or n-gram lookup in the history) a step decodes the sampled token and the drafted ones in one
 * batch with logits on every row, keeps the longest verified prefix and drops the rest through the rollback
 * buffer (no replay: the context's n_rollback covers the batch). Greedy verification keeps a drafted token
 * iff it is what plain greedy would pick; with temperature > 0 it is standard speculative rejection sampling
 * (accept d with probability min(1, p(d)/q(d)), else draw from max(0, p - q)), whose output distribution is
 * plain sampling's.
 *
 * Streaming: a piece is released to the callback only as whole UTF-8 characters (byte-level BPE splits
 * characters across tokens) and only once it cannot be the beginning of a stop string. */
#include "engine/generate.h"

#include <limits.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/status.h"
#include "engine/context.h"
#include "engine/sampling.h"

double bd_gen_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

braid_status bd_gen_mirror_push(braid_token **v, int32_t *n, int32_t *cap, const braid_token *t, int32_t k) {
    if (*n + k > *cap) {
        int32_t nc = *cap ? *cap : 256;
        while (nc < *n + k) nc = nc > INT32_MAX / 2 ? INT32_MAX : nc * 2;
        braid_token *nv = bd_realloc(*v, (size_t)nc * sizeof *nv);
        if (!nv) return bd_error(BRAID_E_NOMEM, "generate: out of memory for %d tokens", nc);
        *v = nv;
        *cap = nc;
    }
    memcpy(*v + *n, t, (size_t)k * sizeof *t);
    *n += k;
    return BRAID_OK;
}

braid_gen_params braid_gen_default_params(void) {
    braid_gen_params p;
    memset(&p, 0, sizeof p);
    p.n_predict = -1;
    p.sampler = braid_sampler_default_params();
    p.draft_n = 8;
    return p;
}

void braid_gen_free(braid_gen *g) {
    if (!g) return;
    for (int32_t i = 0; g->stop && i < g->p.n_stop; i++) bd_free(g->stop[i]);
    bd_free(g->stop);
    braid_sampler_free(g->smp);
    braid_sampler_free(g->dsmp);
    bd_mtp_free(g->mtp);
    braid_json_matcher_free(g->jm);
    bd_free(g->tok);
    bd_free(g->dtok);
    bd_free(g->out);
    bd_free(g->text);
    bd_free(g->draft);
    bd_free(g->q);
    bd_free(g->pt);
    bd_free(g->flags);
    bd_free(g->seqv);
    bd_free(g->ptok);
    bd_free(g->kept);
    bd_free(g->pp_pos);
    bd_free(g);
}

static int spec_on(const braid_gen *g) { return g->p.draft || g->p.lookup_n > 0 || g->p.mtp; }

braid_status braid_gen_new(braid_context *ctx, const braid_gen_params *params, braid_gen **out) {
    if (!ctx || !out) return bd_error(BRAID_E_INVALID, "braid_gen_new: NULL argument");
    *out = NULL;
    braid_gen_params p = params ? *params : braid_gen_default_params();
    if (p.seq < 0 || (uint32_t)p.seq >= ctx->p.n_seq_max)
        return bd_error(BRAID_E_RANGE, "braid_gen_new: sequence %d out of range", p.seq);
    if (p.n_stop < 0 || (p.n_stop > 0 && !p.stop)) return bd_error(BRAID_E_INVALID, "braid_gen_new: bad stop list");
    for (int32_t i = 0; i < p.n_stop; i++)
        if (!p.stop[i] || !p.stop[i][0]) return bd_error(BRAID_E_INVALID, "braid_gen_new: stop string %d is empty", i);
    if (p.n_keep < 0) return bd_error(BRAID_E_INVALID, "braid_gen_new: n_keep %d < 0", p.n_keep);
    if (p.self_extend_n > 1 && (p.self_extend_w <= 0 || p.self_extend_w % p.self_extend_n))
        return bd_error(BRAID_E_INVALID, "braid_gen_new: Self-Extend window %d must be a positive multiple of %d",
                        p.self_extend_w, p.self_extend_n);
    if (p.lookup_n < 0) return bd_error(BRAID_E_INVALID, "braid_gen_new: lookup_n %d < 0", p.lookup_n);
    const int32_t V = ctx->model->n_vocab;
    if (p.draft) {
        if (p.draft == ctx) return bd_error(BRAID_E_INVALID, "braid_gen_new: the draft context is the target");
        if (p.draft->model->n_vocab != V)
            return bd_error(BRAID_E_MISMATCH, "braid_gen_new: the draft model has %d tokens, the target %d",
                            p.draft->model->n_vocab, V);
        if ((uint32_t)p.seq >= p.draft->p.n_seq_max)
            return bd_error(BRAID_E_RANGE, "braid_gen_new: sequence %d out of the draft context's range", p.seq);
    }
    if (p.json && (p.draft || p.lookup_n > 0 || p.mtp))
        return bd_error(BRAID_E_UNSUPPORTED, "braid_gen_new: constrained decoding does not run with drafting");
    if (p.draft && p.lookup_n > 0)
        return bd_error(BRAID_E_INVALID, "braid_gen_new: a draft model and lookup drafting are exclusive");
    if (p.mtp && p.self_extend_n > 1) /* the head's K rows would need the same position edits */
        return bd_error(BRAID_E_UNSUPPORTED, "braid_gen_new: MTP drafting with Self-Extend is not supported");
    if (p.mtp && (p.draft || p.lookup_n > 0))
        return bd_error(BRAID_E_INVALID, "braid_gen_new: MTP drafting excludes a draft model and lookup drafting");
    if ((p.draft || p.lookup_n > 0 || p.mtp)) {
        if (p.draft_n < 1) return bd_error(BRAID_E_INVALID, "braid_gen_new: draft_n %d < 1", p.draft_n);
        if ((int64_t)p.draft_n + 1 > (int64_t)ctx->p.n_rollback)
            return bd_error(BRAID_E_INVALID,
                            "braid_gen_new: drafting %d tokens verifies %d at once: the context's n_rollback (%u) "
                            "must cover them so that rejected drafts are dropped without replay",
                            p.draft_n, p.draft_n + 1, ctx->p.n_rollback);
    }
    braid_gen *g = bd_calloc(1, sizeof *g);
    if (!g) return bd_error(BRAID_E_NOMEM, "braid_gen_new: out of memory");
    g->ctx = ctx;
    g->p = p;
    g->p.n_stop = 0;
    g->n_vocab = V;
    g->logit_row = -1;
    g->st.stop = "";
    braid_status s = BRAID_OK;
    if (p.n_stop) {
        g->stop = bd_calloc((size_t)p.n_stop, sizeof *g->stop);
        if (!g->stop) s = bd_error(BRAID_E_NOMEM, "braid_gen_new: out of memory");
        for (int32_t i = 0; s == BRAID_OK && i < p.n_stop; i++) {
            g->stop[i] = bd_strdup(p.stop[i]);
            if (!g->stop[i]) s = bd_error(BRAID_E_NOMEM, "braid_gen_new: out of memory");
            else g->p.n_stop = i + 1;
            size_t l = strlen(p.stop[i]);
            if (l > g->max_stop) g->max_stop = l;
        }
        g->p.stop = (const char *const *)g->stop;
    }
    if (s == BRAID_OK) s = braid_sampler_new(&p.sampler, &g->smp);
    if (s == BRAID_OK && p.mtp) s = bd_mtp_new(ctx, p.seq, &g->mtp);
    if (s == BRAID_OK && p.json) s = braid_json_matcher_new(p.json, &g->jm);
    if (s == BRAID_OK && (p.draft || p.mtp)) {
        braid_sampler_params dp = p.sampler;
        dp.seed = p.sampler.seed ^ 0x9E3779B97F4A7C15ull; /* its own stream of draws */
        s = braid_sampler_new(&dp, &g->dsmp);
    }
    if (s == BRAID_OK) {
        size_t nf = ctx->p.n_batch > (uint32_t)p.draft_n + 1 ? ctx->p.n_batch : (size_t)p.draft_n + 1;
        if (p.draft && p.draft->p.n_batch > nf) nf = p.draft->p.n_batch;
        g->n_rows_max = (int32_t)nf;
        g->flags = bd_calloc(nf, 1);
        g->seqv = bd_mallocn(nf, sizeof *g->seqv);
        for (size_t i = 0; g->seqv && i < nf; i++) g->seqv[i] = p.seq;
        g->pt = bd_mallocn((size_t)V, sizeof(float));
        if (spec_on(g)) {
            g->draft = bd_mallocn((size_t)p.draft_n, sizeof(braid_token));
            g->q = bd_mallocn((size_t)p.draft_n * (size_t)V, sizeof(float));
        }
        if (!g->flags || !g->seqv || !g->pt || (spec_on(g) && (!g->draft || !g->q)))
            s = bd_error(BRAID_E_NOMEM, "braid_gen_new: out of memory");
    }
    if (s != BRAID_OK) {
        braid_gen_free(g);
        return s;
    }
    *out = g;
    return BRAID_OK;
}

const braid_token *braid_gen_tokens(const braid_gen *g, int32_t *n) {
    if (n) *n = g ? g->n_out : 0;
    return g ? g->out : NULL;
}

const char *braid_gen_text(const braid_gen *g, size_t *len) {
    if (len) *len = g ? g->n_text : 0;
    return g && g->text ? g->text : "";
}

const braid_gen_stats *braid_gen_get_stats(const braid_gen *g) { return g ? &g->st : NULL; }

/* ---- the sequence ----------------------------------------------------------------------------------------- */

/* Rebuilds a mirror from what the memory holds (the sequence may have been changed from outside: a state
 * load, a truncation). An embedding input ends the mirror there: no token list can share a prefix past it. */
braid_status bd_gen_mirror_refresh(braid_context *c, braid_seq_id s, braid_token **v, int32_t *n, int32_t *cap) {
    int32_t len = mem_seq_len(c->mem, s);
    *n = 0;
    for (int32_t i = 0; i < len; i++) {
        braid_token t;
        const braid_pos *pos;
        const float *embd;
        BD_TRY(mem_seq_input(c->mem, s, i, &t, &pos, &embd));
        if (t < 0) {
            /* mark the rest unusable: a token id never equals this */
            braid_token none = -1;
            for (; i < len; i++) BD_TRY(bd_gen_mirror_push(v, n, cap, &none, 1));
            break;
        }
        BD_TRY(bd_gen_mirror_push(v, n, cap, &t, 1));
    }
    return BRAID_OK;
}

int32_t bd_gen_room(const braid_gen *g) {
    if (!mem_kv_n_cells(g->ctx->mem)) return INT32_MAX;
    uint32_t f = mem_kv_n_free(g->ctx->mem);
    return f > INT32_MAX ? INT32_MAX : (int32_t)f;
}

static int32_t capacity(const braid_gen *g) {
    uint32_t c = mem_kv_n_cells(g->ctx->mem);
    return c == 0 || c > INT32_MAX ? INT32_MAX : (int32_t)c;
}

braid_status bd_gen_decode(braid_gen *g, braid_context *c, const braid_token *toks, int32_t n, int all) {
    memset(g->flags, all, (size_t)n);
    g->flags[n - 1] = 1;
    /* braid_batch's NULL seq means sequence 0; any other needs the id on every row */
    braid_batch b = {.n_tokens = n, .token = toks, .seq = g->p.seq ? g->seqv : NULL, .logits = g->flags};
    return braid_decode(c, &b);
}

/* Decodes toks[0..n) into the target's sequence; logits on every row if all, else on the last only. */
static braid_status decode_target(braid_gen *g, const braid_token *toks, int32_t n, int all) {
    braid_status s = bd_gen_decode(g, g->ctx, toks, n, all);
    if (s != BRAID_OK) {
        g->logit_row = -1;
        g->use_kept = 0;
        return s;
    }
    g->logit_row = n - 1;
    g->use_kept = 0;
    if (g->mtp) BD_TRY(bd_mtp_after_decode(g->mtp, g->n_tok, n, 0));
    return bd_gen_mirror_push(&g->tok, &g->n_tok, &g->cap_tok, toks, n);
}

/* Truncates the target's sequence to n inputs, counting replayed inputs into *replayed. */
static braid_status truncate_target(braid_gen *g, int32_t n, int32_t *replayed) {
    int32_t r = 0;
    if (g->defer_trunc) {
        /* braid_gen_step: other generators' rows of the same decode are still to be read, and a truncation
         * that has to replay would overwrite them; the step truncates once every row was read */
        g->trunc_to = n;
        if (g->n_tok > n) g->n_tok = n;
        if (g->mtp) bd_mtp_truncate(g->mtp, n); /* bookkeeping only: the head decodes nothing here */
        g->logit_row = -1;
        g->use_kept = 0;
        return BRAID_OK;
    }
    BD_TRY(bd_seq_truncate_counted(g->ctx, g->p.seq, n, &r));
    if (replayed) *replayed += r;
    if (g->n_tok > n) g->n_tok = n;
    if (g->mtp) bd_mtp_truncate(g->mtp, n);
    g->logit_row = -1;
    g->use_kept = 0;
    return BRAID_OK;
}

/* Context shift: keep the first n_keep inputs, drop half of the rest, move the positions after them back. */
static braid_status context_shift(braid_gen *g) {
    braid_context *c = g->ctx;
    const int32_t len = mem_seq_len(c->mem, g->p.seq);
    int32_t keep = g->p.n_keep < len ? g->p.n_keep : len;
    int32_t n_discard = (len - keep) / 2;
    if (n_discard < 1 || keep + n_discard >= len)
        return bd_error(BRAID_E_FULL, "context shift: nothing to drop (%d inputs, keep %d)", len, keep);
    braid_token t;
    const braid_pos *p0, *p1;
    const float *e;
    BD_TRY(mem_seq_input(c->mem, g->p.seq, keep, &t, &p0, &e));
    braid_pos from = p0[0];
    BD_TRY(mem_seq_input(c->mem, g->p.seq, keep + n_discard, &t, &p1, &e));
    braid_pos d = p1[0] - from;
    BD_TRY(braid_seq_remove(c, g->p.seq, keep, keep + n_discard));
    /* The remove succeeded; a failing shift would leave a gap in the positions, which attention tolerates
     * (RoPE is relative), so the generator goes on with what it has. */
    if (d > 0) BD_TRY(braid_seq_shift_pos(c, g->p.seq, keep, len - n_discard, -d));
    memmove(g->tok + keep, g->tok + keep + n_discard, (size_t)(g->n_tok - keep - n_discard) * sizeof *g->tok);
    g->n_tok -= n_discard;
    if (g->mtp) bd_mtp_reset(g->mtp); /* its rows are by index, which the shift moved */
    if (g->ga_i > 0) g->ga_i = g->ga_i > d ? g->ga_i - d : 0;
    g->st.context_shifts++;
    return BRAID_OK;
}

/* The first index of the sequence whose temporal position is >= p (len if none); positions never decrease. */
static int32_t index_at_pos(const braid_gen *g, braid_pos p) {
    int32_t lo = 0, hi = mem_seq_len(g->ctx->mem, g->p.seq);
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        braid_token t;
        const braid_pos *pos = NULL;
        const float *e;
        if (mem_seq_input(g->ctx->mem, g->p.seq, mid, &t, &pos, &e) != BRAID_OK || !pos) return hi;
        if (pos[0] < p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static braid_status pos_add(braid_gen *g, braid_pos p0, braid_pos p1, braid_pos d) {
    int32_t i0 = index_at_pos(g, p0), i1 = index_at_pos(g, p1);
    if (d == 0 || i0 >= i1) return BRAID_OK;
    return braid_seq_shift_pos(g->ctx, g->p.seq, i0, i1, d);
}

/* Self-Extend (Jin et al. 2024, "LLM Maybe LongLM"), as llama.cpp's examples apply it: whenever the next
 * position passes the current window, the positions of the window are divided by the group size and the ones
 * after it moved back, so positions grow n times slower than the text. */
static braid_status self_extend(braid_gen *g) {
    const int32_t n = g->p.self_extend_n, w = g->p.self_extend_w;
    if (n <= 1) return BRAID_OK;
    braid_pos n_past = mem_seq_next_pos(g->ctx->mem, g->p.seq);
    while (n_past >= g->ga_i + w) {
        const int32_t ib = (n * g->ga_i) / w, bd = (w / n) * (n - 1), dd = (w / n) - ib * bd - w;
        BD_TRY(pos_add(g, g->ga_i, n_past, ib * bd));
        int32_t i0 = index_at_pos(g, g->ga_i + ib * bd), i1 = index_at_pos(g, g->ga_i + ib * bd + w);
        if (i0 < i1) BD_TRY(braid_seq_div_pos(g->ctx, g->p.seq, i0, i1, n));
        BD_TRY(pos_add(g, g->ga_i + ib * bd + w, n_past + ib * bd, dd));
        n_past = mem_seq_next_pos(g->ctx->mem, g->p.seq);
        g->ga_i += w / n;
    }
    return BRAID_OK;
}

/* ---- the prompt --------------------------------------------------------------------------------------------- */

braid_status bd_gen_prompt_prepare(braid_gen *g, const braid_token *tokens, int32_t n, const braid_token **use,
                                   int32_t *n_use, braid_token **trimmed, int32_t *lcp_out) {
    *trimmed = NULL;
    if (!g || (!tokens && n)) return bd_error(BRAID_E_INVALID, "braid_gen_prompt: NULL argument");
    if (n <= 0) return bd_error(BRAID_E_INVALID, "braid_gen_prompt: the prompt is empty");
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= g->n_vocab)
            return bd_error(BRAID_E_RANGE, "braid_gen_prompt: token %d is %d, out of range", i, tokens[i]);
    braid_context *c = g->ctx;
    g->t_prompt0 = bd_gen_now_ms();
    g->emitted_any = 0;
    braid_gen_stats *st = &g->st;
    st->prompt_tokens = n;
    st->reused_tokens = st->decoded_tokens = st->replayed_tokens = 0;
    st->context_shifts = 0;
    st->prompt_ms = 0;
    BD_TRY(bd_gen_mirror_refresh(c, g->p.seq, &g->tok, &g->n_tok, &g->cap_tok));
    if (g->mtp) bd_mtp_reset(g->mtp); /* the sequence may have changed since the last run */
    if (g->p.draft) BD_TRY(bd_gen_mirror_refresh(g->p.draft, g->p.seq, &g->dtok, &g->n_dtok, &g->cap_dtok));

    /* A prompt longer than the context: with context shift on, its first n_keep tokens and its most recent
     * ones (half the context in all) are decoded; otherwise it is refused. */
    const int32_t cap = capacity(g);
    if (n > cap) {
        if (!g->p.ctx_shift)
            return bd_error(BRAID_E_FULL, "braid_gen_prompt: the prompt has %d tokens, the context holds %d", n, cap);
        int32_t half = cap / 2 > 1 ? cap / 2 : 1;
        int32_t keep = g->p.n_keep < half ? g->p.n_keep : half - 1;
        braid_token *t = bd_mallocn((size_t)half, sizeof *t);
        if (!t) return bd_error(BRAID_E_NOMEM, "braid_gen_prompt: out of memory");
        memcpy(t, tokens, (size_t)keep * sizeof *tokens);
        memcpy(t + keep, tokens + n - (half - keep), (size_t)(half - keep) * sizeof *tokens);
        *trimmed = t;
        tokens = t;
        n = half;
        st->context_shifts++;
    }

    int32_t lcp = 0;
    braid_status s = BRAID_OK;
    g->use_kept = 0;
    if (g->p.cache) {
        /* The cache finds the longest prefix held anywhere and puts it in the sequence. */
        braid_cache_reuse ru;
        s = braid_prompt_cache_prepare(g->p.cache, g->p.seq, tokens, n, &ru);
        if (s == BRAID_OK) s = bd_gen_mirror_refresh(c, g->p.seq, &g->tok, &g->n_tok, &g->cap_tok);
        if (s == BRAID_OK) {
            lcp = ru.cached_tokens;
            st->replayed_tokens = ru.replayed_tokens;
            g->logit_row = -1;
            if (ru.logits_ready && (g->kept || (g->kept = bd_mallocn((size_t)g->n_vocab, sizeof(float))))) {
                memcpy(g->kept, braid_prompt_cache_logits(g->p.cache), (size_t)g->n_vocab * sizeof(float));
                g->use_kept = 1;
            } else if (ru.logits_ready) {
                lcp = n - 1; /* no memory for the kept logits: decode the last token again */
                s = truncate_target(g, lcp, &st->replayed_tokens);
            }
        }
    } else {
        while (lcp < n && lcp < g->n_tok && g->tok[lcp] == tokens[lcp]) lcp++;
        if (lcp == n) lcp = n - 1; /* the last token is decoded again: its logits start the reply */
        if (lcp < mem_seq_len(c->mem, g->p.seq)) s = truncate_target(g, lcp, &st->replayed_tokens);
    }
    /* The penalties look at the end of the prompt, as if the sampler had seen all of it. */
    int32_t last_n = g->p.sampler.penalty_last_n;
    for (int32_t i = n - last_n > 0 ? n - last_n : 0; s == BRAID_OK && i < n; i++) braid_sampler_accept(g->smp, tokens[i]);
    if (s == BRAID_OK && bd_gen_room(g) < n - lcp) {
        s = bd_error(BRAID_E_FULL, "braid_gen_prompt: %d new tokens, room for %d in the context", n - lcp, bd_gen_room(g));
    }
    st->reused_tokens = lcp;
    *use = tokens;
    *n_use = n;
    *lcp_out = lcp;
    return s;
}

braid_status braid_gen_prompt(braid_gen *g, const braid_token *tokens, int32_t n) {
    braid_token *trimmed = NULL;
    int32_t lcp = 0;
    braid_status s = bd_gen_prompt_prepare(g, tokens, n, &tokens, &n, &trimmed, &lcp);
    if (!g) return s;
    braid_context *c = g->ctx;
    braid_gen_stats *st = &g->st;
    const int32_t nb = (int32_t)c->p.n_batch;
    for (int32_t i = lcp; s == BRAID_OK && i < n; i += nb) {
        if (g->p.abort_cb && i > lcp && g->p.abort_cb(g->p.abort_user)) {
            s = bd_error(BRAID_E_CANCELLED, "braid_gen_prompt: cancelled after %d of %d tokens", i, n);
            break;
        }
        int32_t k = n - i < nb ? n - i : nb;
        s = decode_target(g, tokens + i, k, 0);
        if (s == BRAID_OK && g->p.on_progress) g->p.on_progress(g->p.progress_user, i + k, n);
    }
    if (s == BRAID_OK && g->p.cache) {
        bd_gen_cache_store(g, bd_gen_next_logits(g)); /* checkpoints the prompt's end too */
    } else if (s == BRAID_OK) {
        braid_status cs = braid_seq_checkpoint(c, g->p.seq);
        if (cs != BRAID_OK && cs != BRAID_E_FULL) s = cs; /* a full checkpoint budget only costs replay later */
    }
    st->reused_tokens = lcp;
    st->decoded_tokens = (n - lcp) + st->replayed_tokens;
    st->prompt_ms = bd_gen_now_ms() - g->t_prompt0;
    bd_free(trimmed);
    return s;
}

/* ---- emitting text ------------------------------------------------------------------------------------------- */

/* Length of the longest prefix of s[0..n) that does not end inside a UTF-8 character still being completed
 * (a lead byte with fewer continuation bytes than it announces). Bytes that can never become valid pass. */
static size_t utf8_complete_prefix(const unsigned char *s, size_t n) {
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = s[n - back];
        if ((c & 0xC0) == 0x80) continue;
        size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return back < need ? n - back : n;
    }
    return n;
}

static braid_status text_append(braid_gen *g, const char *p, size_t n) {
    if (g->n_text + n + 1 > g->cap_text) {
        size_t nc = g->cap_text ? g->cap_text : 1024;
        while (nc < g->n_text + n + 1) nc *= 2;
        char *nt = bd_realloc(g->text, nc);
        if (!nt) return bd_error(BRAID_E_NOMEM, "generate: out of memory for %zu bytes of text", nc);
        g->text = nt;
        g->cap_text = nc;
    }
    memcpy(g->text + g->n_text, p, n);
    g->n_text += n;
    g->text[g->n_text] = 0;
    return BRAID_OK;
}

int bd_gen_release(braid_gen *g, braid_token t, size_t upto) {
    size_t from = g->n_released;
    g->n_released = upto;
    if (!g->p.on_piece) return 0;
    return g->p.on_piece(g->p.piece_user, t, g->text ? g->text + from : "", upto - from);
}

/* Emits token t: appends it to the output and its text to the stream. *stop gets "stop" when a stop string
 * completed (the text is cut before it), "cancelled" when the callback said so, else stays. */
braid_status bd_gen_sample(braid_gen *g, const float *lg, braid_token *out) {
    if (g->jm) return braid_json_matcher_sample(g->jm, g->smp, g->ctx->model, lg, out);
    return braid_sampler_sample(g->smp, lg, g->n_vocab, out);
}

int bd_gen_json_done(const braid_gen *g) { return g->jm && braid_json_matcher_done(g->jm); }

braid_status bd_gen_emit(braid_gen *g, braid_token t, const char **stop) {
    braid_model *m = (braid_model *)g->ctx->model;
    if (g->jm) BD_TRY(braid_json_matcher_accept(g->jm, m, t));
    BD_TRY(bd_gen_mirror_push(&g->out, &g->n_out, &g->cap_out, &t, 1));
    braid_sampler_accept(g->smp, t);
    if (!g->emitted_any) {
        g->emitted_any = 1;
        g->st.ttft_ms = bd_gen_now_ms() - g->t_prompt0;
    }
    char piece[128];
    size_t len = 0;
    BD_TRY(braid_token_to_piece(m, t, 0, piece, sizeof piece, &len));
    if (len > sizeof piece) {
        char *big = bd_malloc(len);
        if (!big) return bd_error(BRAID_E_NOMEM, "generate: out of memory");
        braid_status s = braid_token_to_piece(m, t, 0, big, len, &len);
        if (s == BRAID_OK) s = text_append(g, big, len);
        bd_free(big);
        BD_TRY(s);
    } else {
        BD_TRY(text_append(g, piece, len));
    }
    /* A stop string can only begin in the text not released yet (anything that could begin one is held). */
    size_t cut = SIZE_MAX;
    for (int32_t i = 0; i < g->p.n_stop; i++) {
        const char *f = memmem(g->text + g->n_released, g->n_text - g->n_released, g->stop[i], strlen(g->stop[i]));
        if (f && (size_t)(f - g->text) < cut) cut = (size_t)(f - g->text);
    }
    if (cut != SIZE_MAX) {
        g->n_text = cut;
        g->text[cut] = 0;
        if (bd_gen_release(g, t, cut)) *stop = "cancelled";
        else *stop = "stop";
        return BRAID_OK;
    }
    /* Hold back a tail that may still grow into a stop string, and an unfinished UTF-8 character. */
    size_t hold = 0, avail = g->n_text - g->n_released;
    for (int32_t i = 0; i < g->p.n_stop; i++) {
        size_t l = strlen(g->stop[i]);
        for (size_t k = l - 1 < avail ? l - 1 : avail; k > hold; k--)
            if (!memcmp(g->text + g->n_text - k, g->stop[i], k)) {
                hold = k;
                break;
            }
    }
    size_t upto = g->n_released + utf8_complete_prefix((const unsigned char *)g->text + g->n_released, avail);
    if (upto > g->n_text - hold) upto = g->n_text - hold;
    if (bd_gen_release(g, t, upto)) *stop = "cancelled";
    return BRAID_OK;
}

/* ---- generation ------------------------------------------------------------------------------------------------ */

/* Makes room for k more inputs: context shift when on, else *stop = "context". */
static braid_status make_room(braid_gen *g, int32_t k, const char **stop) {
    while (bd_gen_room(g) < k) {
        if (!g->p.ctx_shift) {
            *stop = "context";
            return BRAID_OK;
        }
        BD_TRY(context_shift(g));
    }
    return self_extend(g);
}

braid_status bd_gen_verify(braid_gen *g, int32_t base, int32_t row0, int32_t k, braid_token *next_out,
                           int *have_next, const char **stop) {
    *have_next = 0;
    const int greedy = bd_sampler_is_greedy(g->smp);
    braid_model *m = (braid_model *)g->ctx->model;
    g->st.drafted += k;
    for (int32_t i = 0; i <= k; i++) {
        const float *lg = braid_logits(g->ctx, row0 + i);
        if (!lg) return bd_error(BRAID_E_INVALID, "generate: internal: no logits for verify row %d", row0 + i);
        braid_token x;
        int accepted = 0;
        if (greedy || i == k) {
            BD_TRY(braid_sampler_sample(g->smp, lg, g->n_vocab, &x));
            accepted = i < k && x == g->draft[i];
        } else {
            /* Rejection sampling: accept d with probability min(1, p(d) / q(d)); on rejection draw from the
             * normalized max(0, p - q). */
            const float *q = g->q + (size_t)i * g->n_vocab;
            BD_TRY(bd_sampler_probs(g->smp, lg, g->n_vocab, g->pt));
            braid_token d = g->draft[i];
            double u = bd_sampler_uniform(g->smp);
            if (q[d] > 0 && u * q[d] < g->pt[d]) {
                x = d;
                accepted = 1;
            } else {
                int any = 0;
                for (int32_t v = 0; v < g->n_vocab; v++) {
                    float r = g->pt[v] - q[v];
                    g->pt[v] = r > 0 ? r : 0;
                    any |= r > 0;
                }
                if (!any) BD_TRY(bd_sampler_probs(g->smp, lg, g->n_vocab, g->pt)); /* p == q: p itself */
                x = bd_pick_weighted(g->pt, g->n_vocab, bd_sampler_uniform(g->smp));
            }
        }
        if (accepted) {
            if (braid_token_is_eog(m, x)) {
                *stop = "eog";
                return truncate_target(g, base + 1 + i, &g->st.spec_replayed);
            }
            g->st.accepted++;
            g->cur_logits = lg;
            braid_status es = bd_gen_emit(g, x, stop);
            g->cur_logits = NULL;
            BD_TRY(es);
            if (!*stop && g->p.n_predict >= 0 && g->n_out >= g->p.n_predict) *stop = "length";
            if (*stop) return truncate_target(g, base + 2 + i, &g->st.spec_replayed);
            continue;
        }
        if (i < k) BD_TRY(truncate_target(g, base + 1 + i, &g->st.spec_replayed));
        else g->logit_row = -1, g->use_kept = 0;
        *next_out = x;
        *have_next = 1;
        return BRAID_OK;
    }
    return BRAID_OK; /* not reached: row k always ends the walk */
}

braid_status braid_gen_run(braid_gen *g) {
    if (!g) return bd_error(BRAID_E_INVALID, "braid_gen_run: NULL generator");
    braid_model *m = (braid_model *)g->ctx->model;
    braid_gen_stats *st = &g->st;
    g->n_out = 0;
    g->n_text = g->n_released = 0;
    if (g->text) g->text[0] = 0;
    st->n_generated = st->n_decodes = 0;
    st->drafted = st->accepted = st->spec_replayed = st->draft_replayed = 0;
    st->gen_ms = 0;
    st->stop = "length";
    if (!bd_gen_next_logits(g)) return bd_error(BRAID_E_INVALID, "braid_gen_run: no logits (call braid_gen_prompt first)");
    braid_json_matcher_reset(g->jm); /* each run writes one document */
    const double t0 = bd_gen_now_ms();
    const char *stop = NULL;
    braid_status s = BRAID_OK;
    braid_token next = 0;
    int have_next = 0;
    while (s == BRAID_OK && !stop) {
        if (!have_next) {
            if (g->p.n_predict >= 0 && g->n_out >= g->p.n_predict) {
                stop = "length";
                break;
            }
            if (g->p.abort_cb && g->p.abort_cb(g->p.abort_user)) {
                stop = "cancelled";
                break;
            }
            const float *lg = bd_gen_next_logits(g);
            if (!lg) {
                s = bd_error(BRAID_E_INVALID, "braid_gen_run: no logits for row %d", g->logit_row);
                break;
            }
            s = bd_gen_sample(g, lg, &next);
            if (s != BRAID_OK) break;
            g->cur_logits = lg;
        }
        have_next = 0;
        if (braid_token_is_eog(m, next)) {
            stop = "eog";
            break;
        }
        s = bd_gen_emit(g, next, &stop);
        g->cur_logits = NULL;
        if (s != BRAID_OK || stop) break;
        if (bd_gen_json_done(g)) {
            stop = "eog"; /* the document is complete: the last token needs no decode */
            break;
        }
        if (g->p.n_predict >= 0 && g->n_out >= g->p.n_predict) {
            stop = "length"; /* the last token needs no decode */
            break;
        }
        /* Draft, then decode next with the drafts in one batch. */
        int32_t k = 0;
        if (spec_on(g)) {
            int32_t max = g->p.draft_n;
            if (g->p.n_predict >= 0 && g->p.n_predict - g->n_out < max) max = g->p.n_predict - g->n_out;
            int32_t r = bd_gen_room(g) - 1;
            if (r < max) max = r > 0 ? r : 0;
            if (max > 0) s = bd_spec_draft(g, next, max, &k);
            if (s != BRAID_OK) break;
        }
        s = make_room(g, 1 + k, &stop);
        if (s != BRAID_OK || stop) break;
        if (bd_gen_room(g) < 1 + k) k = bd_gen_room(g) - 1; /* a shift may leave less than the drafts asked */
        const int32_t base = g->n_tok;
        braid_token batch[1 + 64];
        braid_token *bt = batch;
        if (k > 64) {
            bt = bd_mallocn((size_t)k + 1, sizeof *bt);
            if (!bt) {
                s = bd_error(BRAID_E_NOMEM, "braid_gen_run: out of memory");
                break;
            }
        }
        bt[0] = next;
        if (k) memcpy(bt + 1, g->draft, (size_t)k * sizeof *bt);
        s = decode_target(g, bt, 1 + k, k > 0);
        if (bt != batch) bd_free(bt);
        if (s != BRAID_OK) break;
        st->n_decodes++;
        st->gen_ms = bd_gen_now_ms() - t0;
        if (k > 0) {
            s = bd_gen_verify(g, base, 0, k, &next, &have_next, &stop);
        } else {
            g->logit_row = 0;
            g->use_kept = 0;
        }
    }
    g->cur_logits = NULL;
    if (stop) st->stop = stop;
    /* The rest of the text (an unfinished character or a stop string's beginning that never completed). */
    if (g->n_released < g->n_text || g->p.on_piece) {
        if (bd_gen_release(g, -1, g->n_text) && s == BRAID_OK) st->stop = "cancelled";
    }
    st->n_generated = g->n_out;
    if (s == BRAID_OK && g->p.cache) {
        bd_gen_cache_store(g, NULL);
    } else if (s == BRAID_OK) {
        braid_status cs = braid_seq_checkpoint(g->ctx, g->p.seq);
        if (cs != BRAID_OK && cs != BRAID_E_FULL) s = cs;
    }
    return s;
}

const float *bd_gen_next_logits(const braid_gen *g) {
    if (g->use_kept) return g->kept;
    return g->logit_row >= 0 ? braid_logits(g->ctx, g->logit_row) : NULL;
}

void bd_gen_cache_store(braid_gen *g, const float *logits) {
    braid_status s = braid_prompt_cache_store(g->p.cache, g->p.seq, logits);
    if (s != BRAID_OK) bd_log(BD_LOG_WARN, "generate: the prompt cache did not store sequence %d: %s", g->p.seq, braid_last_error());
}
