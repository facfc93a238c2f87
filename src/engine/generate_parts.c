/* generate_parts.c — braid_gen_prompt_parts: braid_gen_prompt for prompts that hold images (braid.h).
 *
 * The inputs are the parts flattened: text tokens and image rows. The kept prefix is the longest one equal to
 * what the sequence already holds (tokens by id, image rows by their floats, which the memory's input history
 * keeps), moved back to the start of an image it would cut: an image is one unit, decoded whole at grid
 * positions computed from where it starts. Each image span is bracketed by checkpoints, so truncating to any
 * text after it restores from a checkpoint instead of replaying the rows. */
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

braid_status braid_gen_prompt_parts(braid_gen *g, const braid_prompt_part *parts, int32_t n_parts) {
    if (!g || (!parts && n_parts)) return bd_error(BRAID_E_INVALID, "braid_gen_prompt_parts: NULL argument");
    braid_context *c = g->ctx;
    const braid_model *model = c->model;
    const int32_t n_embd = braid_model_n_embd(model);
    int64_t total = 0;
    int has_image = 0;
    for (int32_t p = 0; p < n_parts; p++) {
        const braid_prompt_part *q = &parts[p];
        if (q->embd) {
            if (q->nx < 1 || q->ny < 1 || (int64_t)q->nx * q->ny > BRAID_MAX_BATCH * 64)
                return bd_error(BRAID_E_INVALID, "braid_gen_prompt_parts: part %d: an image of %d x %d rows", p, q->nx,
                                q->ny);
            if (braid_model_n_pos_per_token(model) != 4)
                return bd_error(BRAID_E_MISMATCH, "braid_gen_prompt_parts: %s has no M-RoPE positions for images",
                                braid_model_arch(model));
            total += (int64_t)q->nx * q->ny;
            has_image = 1;
        } else {
            if (q->n_tokens < 0 || (q->n_tokens && !q->tokens))
                return bd_error(BRAID_E_INVALID, "braid_gen_prompt_parts: part %d: bad tokens", p);
            for (int32_t i = 0; i < q->n_tokens; i++)
                if (q->tokens[i] < 0 || q->tokens[i] >= g->n_vocab)
                    return bd_error(BRAID_E_RANGE, "braid_gen_prompt_parts: part %d token %d is %d, out of range", p, i,
                                    q->tokens[i]);
            total += q->n_tokens;
        }
    }
    if (total <= 0) return bd_error(BRAID_E_INVALID, "braid_gen_prompt_parts: the prompt is empty");
    if (!has_image) { /* all text: the plain path (context shift for long prompts included) */
        int32_t n = 0;
        for (int32_t p = 0; p < n_parts; p++) n += parts[p].n_tokens;
        braid_token *t = bd_mallocn((size_t)n, sizeof *t);
        if (!t) return bd_error(BRAID_E_NOMEM, "braid_gen_prompt_parts: out of memory");
        for (int32_t p = 0, k = 0; p < n_parts; k += parts[p].n_tokens, p++)
            if (parts[p].n_tokens) memcpy(t + k, parts[p].tokens, (size_t)parts[p].n_tokens * sizeof *t);
        braid_status s = braid_gen_prompt(g, t, n);
        bd_free(t);
        return s;
    }
    const int32_t cap = (int32_t)c->p.n_ctx;
    if (total > cap)
        return bd_error(BRAID_E_FULL, "braid_gen_prompt_parts: the prompt has %lld inputs, the context holds %d",
                        (long long)total, cap);
    const int32_t n = (int32_t)total;
    g->use_kept = 0; /* the prompt cache's kept logits are for token prompts; these come from the decodes below */
    g->t_prompt0 = bd_gen_now_ms();
    g->emitted_any = 0;
    braid_gen_stats *st = &g->st;
    st->prompt_tokens = n;
    st->reused_tokens = st->decoded_tokens = st->replayed_tokens = 0;
    st->context_shifts = 0;
    st->prompt_ms = 0;

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
    const int32_t nb = (int32_t)c->p.n_batch;
    braid_pos *pos = NULL;
    int32_t done = lcp;
    for (int32_t i = lcp; s == BRAID_OK && i < n;) {
        if (g->p.abort_cb && i > lcp && g->p.abort_cb(g->p.abort_user)) {
            s = bd_error(BRAID_E_CANCELLED, "braid_gen_prompt_parts: cancelled after %d of %d inputs", i, n);
            break;
        }
        int32_t p, off;
        locate(parts, n_parts, i, &p, &off);
        const braid_prompt_part *q = &parts[p];
        if (!q->embd) {
            int32_t k = q->n_tokens - off < nb ? q->n_tokens - off : nb;
            s = bd_gen_decode(g, c, q->tokens + off, k, 0);
            if (s == BRAID_OK) s = bd_gen_mirror_push(&g->tok, &g->n_tok, &g->cap_tok, q->tokens + off, k);
            g->logit_row = s == BRAID_OK ? k - 1 : -1;
            i += k;
        } else {
            /* a whole image: checkpoint, rows in n_batch chunks at grid positions, checkpoint */
            const int32_t rows = q->nx * q->ny;
            bd_free(pos);
            pos = bd_mallocn((size_t)rows * 4, sizeof *pos);
            if (!pos) {
                s = bd_error(BRAID_E_NOMEM, "braid_gen_prompt_parts: out of memory for %d positions", rows);
                break;
            }
            braid_pos t0 = braid_seq_next_pos(c, g->p.seq);
            if (braid_image_positions(model, t0, q->nx, q->ny, pos) < 0) {
                s = bd_error(BRAID_E_RANGE, "braid_gen_prompt_parts: no positions for a %d x %d image at %d", q->nx,
                             q->ny, t0);
                break;
            }
            if (i > 0) {
                braid_status cs = braid_seq_checkpoint(c, g->p.seq);
                if (cs != BRAID_OK && cs != BRAID_E_FULL) s = cs;
            }
            for (int32_t r = 0; s == BRAID_OK && r < rows; r += nb) {
                int32_t k = rows - r < nb ? rows - r : nb;
                memset(g->flags, 0, (size_t)k);
                const int last = i + r + k == n;
                g->flags[k - 1] = (uint8_t)last;
                braid_batch b = {.n_tokens = k, .embd = q->embd + (size_t)r * n_embd, .pos = pos + (size_t)r * 4,
                                 .seq = g->p.seq ? g->seqv : NULL, .logits = g->flags};
                s = braid_decode(c, &b);
                g->logit_row = s == BRAID_OK && last ? k - 1 : -1;
                braid_token none = -1;
                for (int32_t j = 0; s == BRAID_OK && j < k; j++) s = bd_gen_mirror_push(&g->tok, &g->n_tok, &g->cap_tok, &none, 1);
            }
            if (s == BRAID_OK) {
                braid_status cs = braid_seq_checkpoint(c, g->p.seq);
                if (cs != BRAID_OK && cs != BRAID_E_FULL) s = cs;
            }
            i += rows;
        }
        if (s == BRAID_OK) done = i;
        if (s == BRAID_OK && g->p.on_progress) g->p.on_progress(g->p.progress_user, i, n);
    }
    bd_free(pos);
    if (s == BRAID_OK) {
        braid_status cs = braid_seq_checkpoint(c, g->p.seq);
        if (cs != BRAID_OK && cs != BRAID_E_FULL) s = cs;
    }
    st->reused_tokens = lcp;
    st->decoded_tokens = (done - lcp) + st->replayed_tokens;
    st->prompt_ms = bd_gen_now_ms() - g->t_prompt0;
    return s;
}
