/* tokenizer_api.c — the public tokenizer calls of braid.h on a braid_model (thin wrappers over the model's
 * tok_vocab, src/tokenizer/vocab.h). */
#include <string.h>

#include "base/status.h"
#include "engine/model.h"
#include "tokenizer/vocab.h"

static braid_status no_vocab(const char *fn) {
    return bd_error(BRAID_E_UNSUPPORTED, "%s: the model has no supported tokenizer", fn);
}

braid_status braid_tokenize(const braid_model *model, const char *text, size_t len, int add_special,
                            int parse_special, braid_token *out, size_t cap, size_t *n_out) {
    if (!model || !n_out) return bd_error(BRAID_E_INVALID, "braid_tokenize: NULL argument");
    if (!model->vocab) return no_vocab("braid_tokenize");
    return tok_tokenize(model->vocab, text, len, add_special, parse_special, out, cap, n_out);
}

braid_status braid_token_to_piece(const braid_model *model, braid_token t, int special, char *buf, size_t cap,
                                  size_t *n_out) {
    if (!model || !n_out || (!buf && cap)) return bd_error(BRAID_E_INVALID, "braid_token_to_piece: NULL argument");
    if (!model->vocab) return no_vocab("braid_token_to_piece");
    const char *p;
    size_t n;
    BD_TRY(tok_token_piece(model->vocab, t, special, &p, &n));
    *n_out = n;
    if (cap) memcpy(buf, p, n < cap ? n : cap);
    return BRAID_OK;
}

braid_status braid_detokenize(const braid_model *model, const braid_token *tokens, size_t n, int special, char **text,
                              size_t *len) {
    if (!model) return bd_error(BRAID_E_INVALID, "braid_detokenize: NULL argument");
    if (!model->vocab) return no_vocab("braid_detokenize");
    return tok_detokenize(model->vocab, tokens, n, special, text, len);
}

braid_token braid_token_bos(const braid_model *m) { return m && m->vocab ? tok_bos(m->vocab) : -1; }
braid_token braid_token_eos(const braid_model *m) { return m && m->vocab ? tok_eos(m->vocab) : -1; }
braid_token braid_token_eot(const braid_model *m) { return m && m->vocab ? tok_eot(m->vocab) : -1; }
int braid_token_is_eog(const braid_model *m, braid_token t) { return m && m->vocab && tok_is_eog(m->vocab, t); }
