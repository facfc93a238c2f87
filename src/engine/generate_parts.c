/* generate_parts.c — braid_gen_prompt_parts: braid_gen_prompt for prompts that hold images (braid.h).
 *
 * The inputs are the parts flattened: text tokens and image rows. The kept prefix is the longest one equal to
 * what the sequence already holds (tokens by id, image rows by their floats, which the memory's input history
 * keeps), moved back to the start of an image it would cut: an image is one unit, decoded whole at grid
 * positions computed from where it starts. Each image span is bracketed by checkpoints, so truncating to any
 * text after it restores from a checkpoint instead of replaying the rows.
 *
 * The decoding is in pieces (bd_parts_start, then bd_parts_next until every input is in), so that the
 * server's scheduler can decode an image prompt one n_batch chunk per round between its other slots' steps
 * (braid_gen_begin_parts / braid_gen_prefill in gen_batch.c); braid_gen_prompt_parts runs them in a loop. */
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "engine/context.h"
#include "engine/generate.h"

/* The part and offset inside it of flattened input i. */
static void locate(const braid_prompt_part *parts, int32_t n_parts, int32_t i, int32_t *part, int32_t *off) {
    for (int32_t p = 0; p < n_parts; p++) {
        int32_t n = parts[p].embd ? parts[p].nx * parts[p].ny : parts[p].n_tokens;
        if (i < n) {
            *part = p;
            *off = i;
            return;
        }
        i -= n;
    }
    *part = n_parts;
    *off = 0;
}

braid_status bd_parts_check(const braid_gen *g, const braid_prompt_part *parts, int32_t n_parts, int64_t *total,
                            int *has_image) {
    if (!g || (!parts && n_parts)) return bd_error(BRAID_E_INVALID, "braid_gen_prompt_parts: NULL argument");
    const braid_model *model = g->ctx->model;
    *total = 0;
    *has_image = 0;
    for (int32_t p = 0; p < n_parts; p++) {
        const braid_prompt_part *q = &parts[p];
        if (q->embd) {
            if (q->nx < 1 || q->ny < 1 || (int64_t)q->nx * q->ny > BRAID_MAX_BATCH * 64)
                return bd_error(BRAID_E_INVALID, "braid_gen_prompt_parts: part %d: an image of %d x %d rows", p, q->nx,
                                q->ny);
            if (braid_model_n_pos_per_token(model) != 4)
                return bd_error(BRAID_E_MISMATCH, "braid_gen_prompt_parts: %s has no M-RoPE positions for images",
                                braid_model_arch(model));
            *total += (int64_t)q->nx * q->ny;
            *has_image = 1;
        } else {
            if (q->n_tokens < 0 || (q->n_tokens && !q->tokens))
                return bd_error(BRAID_E_INVALID, "braid_gen_prompt_parts: part %d: bad tokens", p);
            for (int32_t i = 0; i < q->n_tokens; i++)
                if (q->tokens[i] < 0 || q->tokens[i] >= g->n_vocab)
                    return bd_error(BRAID_E_RANGE, "braid_gen_prompt_parts: part %d token %d is %d, out of range", p, i,
                                    q->tokens[i]);
            *total += q->n_tokens;
        }
    }
    if (*total <= 0) return bd_error(BRAID_E_INVALID, "braid_gen_prompt_parts: the prompt is empty");
    if (*has_image && *total > (int64_t)g->ctx->p.n_ctx)
        return bd_error(BRAID_E_FULL, "braid_gen_prompt_parts: the prompt has %lld inputs, the context holds %u",
                        (long long)*total, g->ctx->p.n_ctx);
    return BRAID_OK;
}

braid_status bd_parts_flatten(const braid_prompt_part *parts, int32_t n_parts, braid_token **out, int32_t *n) {
    *n = 0;
    for (int32_t p = 0; p < n_parts; p++) *n += parts[p].n_tokens;
    *out = bd_mallocn((size_t)(*n > 0 ? *n : 1), sizeof **out);
    if (!*out) return bd_error(BRAID_E_NOMEM, "braid_gen_prompt_parts: out of memory");
    for (int32_t p = 0, k = 0; p < n_parts; k += parts[p].n_tokens, p++)
        if (parts[p].n_tokens) memcpy(*out + k, parts[p].tokens, (size_t)parts[p].n_tokens * sizeof **out);
    return BRAID_OK;
}

braid_status bd_parts_start(braid_gen *g, const braid_prompt_part *parts, int32_t n_parts, int32_t n) {
    braid_context *c = g->ctx;
    const int32_t n_embd = braid_model_n_embd(c->model);
    g->use_kept = 0; /* the prompt cache's kept logits are for token prompts; these come from the decodes below */
    g->t_prompt0 = bd_gen_now_ms();
    g->emitted_any = 0;
    braid_gen_stats *st = &g->st;
    st->prompt_tokens = n;
    st->reused_tokens = st->decoded_tokens = st->replayed_tokens = 0;
    st->context_shifts = 0;
    st->prompt_ms = 0;
    g->pp = parts;
    g->n_pp = n_parts;
    g->pp_n = n;
    g->pp_i = g->pp_lcp = 0;

    /* the longest common prefix with the sequence, never inside an image */
    const int32_t len = braid_seq_len(c, g->p.seq);
    int32_t lcp = 0;
    for (; lcp < n && lcp < len; lcp++) {
        int32_t p, off;
        locate(parts, n_parts, lcp, &p, &off);
        braid_token t;
        const braid_pos *pos;
        const float *e;
        BD_TRY(mem_seq_input(c->mem, g->p.seq, lcp, &t, &pos, &e));
        if (parts[p].embd) {
            if (t >= 0 || !e || memcmp(e, parts[p].embd + (size_t)off * n_embd, (size_t)n_embd * sizeof(float))) break;
        } else if (t != parts[p].tokens[off]) {
            break;
        }
    }
    if (lcp == n) lcp = n - 1; /* the last input is decoded again: its logits start the reply */
    {
        int32_t p, off;
        locate(parts, n_parts, lcp, &p, &off);
        if (p < n_parts && parts[p].embd) lcp -= off; /* back to the image's first row */
    }
    braid_status s = BRAID_OK;
    if (lcp < len) {
        int32_t r = 0;
        s = bd_seq_truncate_counted(c, g->p.seq, lcp, &r);
        st->replayed_tokens += r;
        g->logit_row = -1;
    }
    /* the token mirror: what the sequence holds now (-1 for image rows, which never equal a token) */
    if (s == BRAID_OK) {
        g->n_tok = 0;
        for (int32_t i = 0; s == BRAID_OK && i < lcp; i++) {
            int32_t p, off;
            locate(parts, n_parts, i, &p, &off);
            braid_token t = parts[p].embd ? -1 : parts[p].tokens[off];
            s = bd_gen_mirror_push(&g->tok, &g->n_tok, &g->cap_tok, &t, 1);
        }
    }
    /* the penalties see the end of the prompt's text, as braid_gen_prompt does */
    int32_t last_n = g->p.sampler.penalty_last_n;
    for (int32_t i = n - last_n > 0 ? n - last_n : 0; s == BRAID_OK && i < n; i++) {
        int32_t p, off;
        locate(parts, n_parts, i, &p, &off);
        if (!parts[p].embd) braid_sampler_accept(g->smp, parts[p].tokens[off]);
    }
    g->pp_i = g->pp_lcp = lcp;
    st->reused_tokens = lcp;
    st->decoded_tokens = st->replayed_tokens;
    return s;
}

braid_status bd_parts_next(braid_gen *g) {
    braid_context *c = g->ctx;
    const braid_model *model = c->model;
    const int32_t n_embd = braid_model_n_embd(model), nb = (int32_t)c->p.n_batch, i = g->pp_i, n = g->pp_n;
    int32_t p, off;
    locate(g->pp, g->n_pp, i, &p, &off);
    if (p >= g->n_pp) return BRAID_OK;
    const braid_prompt_part *q = &g->pp[p];
    braid_status s = BRAID_OK;
    int32_t k;
    if (!q->embd) {
        k = q->n_tokens - off < nb ? q->n_tokens - off : nb;
        s = bd_gen_decode(g, c, q->tokens + off, k, 0);
        if (s == BRAID_OK) s = bd_gen_mirror_push(&g->tok, &g->n_tok, &g->cap_tok, q->tokens + off, k);
        g->logit_row = s == BRAID_OK ? k - 1 : -1;
    } else {
        /* an image: at its first row a checkpoint and its grid positions (kept until its last row), then rows
         * in n_batch chunks, then a checkpoint */
        const int32_t rows = q->nx * q->ny;
        if (off == 0) {
            if (rows > g->cap_pp_pos) {
                braid_pos *np = bd_realloc(g->pp_pos, (size_t)rows * 4 * sizeof *np);
                if (!np) return bd_error(BRAID_E_NOMEM, "braid_gen_prompt_parts: out of memory for %d positions", rows);
                g->pp_pos = np, g->cap_pp_pos = rows;
            }
            braid_pos t0 = braid_seq_next_pos(c, g->p.seq);
            if (braid_image_positions(model, t0, q->nx, q->ny, g->pp_pos) < 0)
                return bd_error(BRAID_E_RANGE, "braid_gen_prompt_parts: no positions for a %d x %d image at %d", q->nx,
                                q->ny, t0);
            if (i > 0) {
                braid_status cs = braid_seq_checkpoint(c, g->p.seq);
                if (cs != BRAID_OK && cs != BRAID_E_FULL) return cs;
            }
        }
        k = rows - off < nb ? rows - off : nb;
        memset(g->flags, 0, (size_t)k);
        const int last = i + k == n;
        g->flags[k - 1] = (uint8_t)last;
        braid_batch b = {.n_tokens = k, .embd = q->embd + (size_t)off * n_embd, .pos = g->pp_pos + (size_t)off * 4,
                         .seq = g->p.seq ? g->seqv : NULL, .logits = g->flags};
        s = braid_decode(c, &b);
        g->logit_row = s == BRAID_OK && last ? k - 1 : -1;
        braid_token none = -1;
        for (int32_t j = 0; s == BRAID_OK && j < k; j++) s = bd_gen_mirror_push(&g->tok, &g->n_tok, &g->cap_tok, &none, 1);
        if (s == BRAID_OK && off + k == rows) {
            braid_status cs = braid_seq_checkpoint(c, g->p.seq);
            if (cs != BRAID_OK && cs != BRAID_E_FULL) s = cs;
        }
    }
    if (s != BRAID_OK) return s;
    g->pp_i = i + k;
    g->st.decoded_tokens = (g->pp_i - g->pp_lcp) + g->st.replayed_tokens;
    if (g->p.on_progress) g->p.on_progress(g->p.progress_user, g->pp_i, n);
    if (g->pp_i == n) {
        braid_status cs = braid_seq_checkpoint(c, g->p.seq);
        if (cs != BRAID_OK && cs != BRAID_E_FULL) s = cs;
        g->st.prompt_ms = bd_gen_now_ms() - g->t_prompt0;
    }
    return s;
}

braid_status braid_gen_prompt_parts(braid_gen *g, const braid_prompt_part *parts, int32_t n_parts) {
    int64_t total = 0;
    int has_image = 0;
    BD_TRY(bd_parts_check(g, parts, n_parts, &total, &has_image));
    if (!has_image) { /* all text: the plain path (context shift for long prompts included) */
        braid_token *t = NULL;
        int32_t n = 0;
        BD_TRY(bd_parts_flatten(parts, n_parts, &t, &n));
        braid_status s = braid_gen_prompt(g, t, n);
        bd_free(t);
        return s;
    }
    const int32_t n = (int32_t)total;
    braid_status s = bd_parts_start(g, parts, n_parts, n);
    while (s == BRAID_OK && g->pp_i < n) {
        if (g->p.abort_cb && g->pp_i > g->pp_lcp && g->p.abort_cb(g->p.abort_user)) {
            s = bd_error(BRAID_E_CANCELLED, "braid_gen_prompt_parts: cancelled after %d of %d inputs", g->pp_i, n);
            break;
        }
        s = bd_parts_next(g);
    }
    g->st.prompt_ms = bd_gen_now_ms() - g->t_prompt0;
    g->pp = NULL; /* the caller's parts are not kept past the call */
    return s;
}
