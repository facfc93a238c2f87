/* json_tokens.c — braid_json_matcher at the level of tokens: which tokens of a vocabulary may come next,
 * sampling under the constraint, and feeding a chosen token.
 *
 * A token is checked on its piece bytes (the bytes braid_token_to_piece gives, special tokens rendered as
 * nothing): the matcher works on bytes, so a token that ends in the middle of a UTF-8 character is allowed
 * when its bytes are a valid start of that character, and the next token must finish it. A token of end of
 * generation is allowed exactly when the document is complete; other tokens with no bytes (control tokens)
 * never are (they would let a model stall without writing anything).
 *
 * A full mask (every token at once) is needed only when the sampler's walk over the best tokens fails (see
 * bd_sampler_sample_allowed). It first learns which single bytes the state takes (256 trial feeds, cached per
 * state) and refuses every token whose first byte is not one of them without feeding it: in the states where
 * a full mask happens (after a value, where only , } ] or a quote fit) that refuses nearly every token with
 * one table lookup. */
#include <string.h>

#include "base/status.h"
#include "engine/json_constraint.h"
#include "engine/model.h"
#include "engine/sampling.h"
#include "tokenizer/vocab.h"

static void first_bytes(braid_json_matcher *m) {
    if (m->first_version == m->version) return;
    for (int b = 0; b < 256; b++) {
        uint8_t ch = (uint8_t)b;
        jlist *l;
        m->first_ok[b] = (uint8_t)bd_jm_try(m, &ch, 1, &l);
    }
    m->first_version = m->version;
}

/* 1 if token t may come next; use_first: consult the first-byte table (filled). */
static int allows(braid_json_matcher *m, const braid_model *model, braid_token t, int use_first) {
    if (t < 0 || t >= model->n_vocab) return 0;
    if (tok_is_eog(model->vocab, t)) return bd_jm_list_complete(m->c, &m->cur);
    const char *p;
    size_t n;
    if (tok_token_piece(model->vocab, t, 0, &p, &n) != BRAID_OK || n == 0) return 0;
    if (use_first && !m->first_ok[(uint8_t)p[0]]) return 0;
    jlist *l;
    return bd_jm_try(m, (const uint8_t *)p, n, &l);
}

int braid_json_matcher_allows(braid_json_matcher *m, const braid_model *model, braid_token t) {
    if (!m || !model || !model->vocab) return 0;
    return allows(m, model, t, 0);
}

braid_status braid_json_matcher_mask(braid_json_matcher *m, const braid_model *model, uint8_t *allowed) {
    if (!m || !model || !allowed) return bd_error(BRAID_E_INVALID, "braid_json_matcher_mask: NULL argument");
    if (!model->vocab) return bd_error(BRAID_E_INVALID, "braid_json_matcher_mask: the model has no vocabulary");
    first_bytes(m);
    for (int32_t t = 0; t < model->n_vocab; t++) allowed[t] = (uint8_t)allows(m, model, t, 1);
    return BRAID_OK;
}

typedef struct {
    braid_json_matcher *m;
    const braid_model *model;
    int32_t calls;
} tok_user;

static int allow_cb(void *user, braid_token t) {
    tok_user *u = user;
    /* The sampler's walk usually stops after a few checks; once it goes past 64 in one state, the state is a
     * narrow one (after a value, say) and the first-byte table (256 trial feeds) pays for itself. */
    if (++u->calls > 64) {
        first_bytes(u->m);
        return allows(u->m, u->model, t, 1);
    }
    return allows(u->m, u->model, t, 0);
}

static braid_status mask_cb(void *user, uint8_t *allowed, int32_t n_vocab) {
    tok_user *u = user;
    if (n_vocab != u->model->n_vocab) return bd_error(BRAID_E_MISMATCH, "json constraint: logits of another vocabulary");
    return braid_json_matcher_mask(u->m, u->model, allowed);
}

braid_status braid_json_matcher_sample(braid_json_matcher *m, braid_sampler *s, const braid_model *model,
                                       const float *logits, braid_token *out) {
    if (!m || !s || !model || !logits || !out) return bd_error(BRAID_E_INVALID, "braid_json_matcher_sample: NULL argument");
    if (!model->vocab) return bd_error(BRAID_E_INVALID, "braid_json_matcher_sample: the model has no vocabulary");
    tok_user u = {m, model, 0};
    braid_status st = bd_sampler_sample_allowed(s, logits, model->n_vocab, allow_cb, mask_cb, &u, out);
    if (st == BRAID_E_INVALID && !bd_jm_list_complete(m->c, &m->cur))
        return bd_error(BRAID_E_INVALID, "json constraint: no token of the vocabulary continues the document (%s)",
                        braid_last_error());
    return st;
}

braid_status braid_json_matcher_accept(braid_json_matcher *m, const braid_model *model, braid_token t) {
    if (!m || !model) return bd_error(BRAID_E_INVALID, "braid_json_matcher_accept: NULL argument");
    if (!model->vocab) return bd_error(BRAID_E_INVALID, "braid_json_matcher_accept: the model has no vocabulary");
    if (t < 0 || t >= model->n_vocab) return bd_error(BRAID_E_RANGE, "braid_json_matcher_accept: token %d out of range", t);
    if (tok_is_eog(model->vocab, t)) {
        if (!bd_jm_list_complete(m->c, &m->cur))
            return bd_error(BRAID_E_INVALID, "json constraint: end of generation before the document is complete");
        return BRAID_OK;
    }
    const char *p;
    size_t n;
    BD_TRY(tok_token_piece(model->vocab, t, 0, &p, &n));
    if (n == 0) return bd_error(BRAID_E_INVALID, "json constraint: token %d has no bytes", t);
    return braid_json_matcher_feed(m, p, n);
}

int braid_json_matcher_done(const braid_json_matcher *m) { return m && bd_jm_closed(m); }
