/* tokenize.c — text -> ids and ids -> text for a tok_vocab, as llama.cpp's llama_tokenize / llama_detokenize.
 *
 * Tokenizing first cuts special tokens out of the text (llama.cpp's tokenizer_st_partition): special tokens
 * are taken longest first; each one is matched left to right in what is still plain text, and the text is
 * split around each match (with the token's lstrip/rstrip whitespace removed). Here that is done without
 * llama.cpp's fragment list: a "consumed" byte map marks matched tokens and stripped whitespace, and a match
 * of length L is accepted when neither its first nor its last byte is consumed (every consumed run is at
 * least as long as any later, shorter-or-equal token, so it cannot hide inside the match). The plain text
 * between matches is then tokenized by BPE or SPM. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "tokenizer/vocab_internal.h"

typedef struct match {
    size_t pos, len;   /* the special token's bytes */
    size_t lo, hi;     /* consumed range including stripped whitespace */
    int32_t id;
} match;

static int is_space(uint8_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static int cmp_match(const void *a, const void *b) {
    const match *x = a, *y = b;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Finds the special tokens in text; *out (allocated, release with bd_free) gets them sorted by position. */
static braid_status partition(const tok_vocab *v, const uint8_t *text, size_t len, int parse_special, match **out,
                              size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    if (!v->n_special || !len) return BRAID_OK;
    /* Prefilter: a token can only occur if each pair of adjacent bytes in it occurs in the text. One pass
     * over the text sets a 64 Kibit pair map; most special tokens are then skipped without a search. */
    uint8_t present[256] = {0};
    uint64_t *pairs = bd_calloc(65536 / 64, sizeof *pairs);
    if (!pairs) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory");
    present[text[0]] = 1;
    for (size_t i = 1; i < len; i++) {
        unsigned k = (unsigned)text[i - 1] << 8 | text[i];
        pairs[k >> 6] |= 1ull << (k & 63);
        present[text[i]] = 1;
    }
    uint8_t *consumed = NULL;
    match *m = NULL;
    size_t n = 0, cap = 0;
    braid_status st = BRAID_OK;
    for (size_t k = 0; k < v->n_special && st == BRAID_OK; k++) {
        int32_t id = v->special[k];
        uint32_t attr = v->attr[id];
        if (!parse_special && (attr & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN))) continue;
        size_t tl;
        const uint8_t *t = (const uint8_t *)tok_str(&v->strs, id, &tl);
        if (tl == 0 || tl > len || !present[t[0]]) continue;
        int possible = 1;
        for (size_t i = 1; i < tl && possible; i++) {
            unsigned pk = (unsigned)t[i - 1] << 8 | t[i];
            possible = (pairs[pk >> 6] >> (pk & 63)) & 1;
        }
        if (!possible) continue;
        size_t from = 0;
        while (from + tl <= len) {
            const uint8_t *hit = memmem(text + from, len - from, t, tl);
            if (!hit) break;
            size_t p = (size_t)(hit - text);
            if (consumed && (consumed[p] || consumed[p + tl - 1])) {
                from = p + 1;
                continue;
            }
            if (!consumed) {
                consumed = bd_calloc(len, 1);
                if (!consumed) {
                    st = bd_error(BRAID_E_NOMEM, "tokenizer: out of memory (%zu bytes of text)", len);
                    break;
                }
            }
            size_t lo = p, hi = p + tl;
            if (attr & TOK_ATTR_LSTRIP)
                while (lo > 0 && !consumed[lo - 1] && is_space(text[lo - 1])) lo--;
            if (attr & TOK_ATTR_RSTRIP)
                while (hi < len && !consumed[hi] && is_space(text[hi])) hi++;
            memset(consumed + lo, 1, hi - lo);
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                match *nm = bd_realloc(m, cap * sizeof *nm);
                if (!nm) {
                    st = bd_error(BRAID_E_NOMEM, "tokenizer: out of memory");
                    break;
                }
                m = nm;
            }
            m[n++] = (match){p, tl, lo, hi, id};
            from = hi;
        }
    }
    bd_free(consumed);
    bd_free(pairs);
    if (st != BRAID_OK) {
        bd_free(m);
        return st;
    }
    if (n > 1) qsort(m, n, sizeof *m, cmp_match);
    *out = m;
    *n_out = n;
    return BRAID_OK;
}

braid_status tok_tokenize(const tok_vocab *v, const char *text_, size_t len, int add_special, int parse_special,
                          int32_t *buf, size_t cap, size_t *n_out) {
    if (!v || (!text_ && len) || !n_out || (!buf && cap)) return bd_error(BRAID_E_INVALID, "tok_tokenize: NULL argument");
    *n_out = 0;
    if (v->type == TOK_TYPE_NONE) return bd_error(BRAID_E_UNSUPPORTED, "tokenizer: this model has no vocabulary text");
    const uint8_t *text = (const uint8_t *)text_;
    tok_out out = {buf, cap, 0};
    match *m;
    size_t n_m;
    BD_TRY(partition(v, text, len, parse_special, &m, &n_m));
    braid_status st = BRAID_OK;
    tok_bpe_session *bs = NULL;
    if (v->type == TOK_TYPE_BPE) st = tok_bpe_session_new(v, len, &bs);
    if (st == BRAID_OK && add_special && (v->add_bos || v->type == TOK_TYPE_WPM)) {
        if (v->bos < 0) st = bd_error(BRAID_E_FORMAT, "tokenizer: the vocabulary asks for BOS but has none");
        else tok_out_push(&out, v->bos);
    }
    int prev_special = 1; /* SPM: a fragment at the start or after a special token gets a space prefix */
    size_t at = 0;
    for (size_t k = 0; k <= n_m && st == BRAID_OK; k++) {
        size_t end = k < n_m ? m[k].lo : len;
        if (end > at) {
            if (v->type == TOK_TYPE_SPM)
                st = tok_spm_fragment(v, text + at, end - at, v->add_space_prefix && prev_special, &out);
            else if (v->type == TOK_TYPE_WPM)
                st = tok_wpm_fragment(v, text + at, end - at, &out);
            else
                st = tok_bpe_fragment(bs, text + at, end - at, &out);
            prev_special = 0;
        }
        if (k < n_m) {
            tok_out_push(&out, m[k].id);
            prev_special = 1;
            at = m[k].hi;
        }
    }
    if (st == BRAID_OK && add_special && v->type == TOK_TYPE_WPM) { /* BERT: [CLS] ... [SEP] */
        if (v->sep < 0) st = bd_error(BRAID_E_FORMAT, "tokenizer: the vocabulary has no separator token");
        else tok_out_push(&out, v->sep);
    } else if (st == BRAID_OK && add_special && v->add_eos) {
        if (v->eos < 0) st = bd_error(BRAID_E_FORMAT, "tokenizer: the vocabulary asks for EOS but has none");
        else tok_out_push(&out, v->eos);
    }
    tok_bpe_session_free(bs);
    bd_free(m);
    if (st != BRAID_OK) return st;
    *n_out = out.n;
    if (out.n > cap) return bd_error(BRAID_E_RANGE, "tokenizer: %zu tokens do not fit in %zu", out.n, cap);
    return BRAID_OK;
}

/* ---- ids -> text -------------------------------------------------------------------------------------- */

braid_status tok_token_piece(const tok_vocab *v, int32_t id, int special, const char **piece, size_t *len) {
    *piece = "";
    *len = 0;
    if (v->type == TOK_TYPE_NONE) return BRAID_OK;
    if (id < 0 || id >= v->n_tokens) return bd_error(BRAID_E_RANGE, "tokenizer: token %d out of range", id);
    if (!special && (v->attr[id] & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL))) return BRAID_OK;
    *piece = v->piece_arena + v->piece_off[id];
    *len = (size_t)(v->piece_off[id + 1] - v->piece_off[id]);
    return BRAID_OK;
}

/* llama.cpp's clean-up of tokenization spaces: " ?" " !" " ." " ," lose the space, a lone "'" between spaces
 * loses both, " 's" " 'm" " 're" " 've" lose the space. Done in place; returns the new length. */
static size_t clean_spaces(char *t, size_t n) {
    size_t total = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
        t[total++] = x;
    }
    n = total;
    total = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = t[i];
        if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
            total--;
            t[++i] = '\0';
        }
        t[total++] = x;
    }
    n = total;
    total = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            char x1 = t[i + 1];
            if (x1 == 's' || x1 == 'm') total--;
            else if (i + 2 < n && ((x1 == 'r' && t[i + 2] == 'e') || (x1 == 'v' && t[i + 2] == 'e'))) total--;
        }
        t[total++] = x;
    }
    return total;
}

braid_status tok_detokenize(const tok_vocab *v, const int32_t *ids, size_t n, int special, char **text, size_t *len) {
    if (!v || (!ids && n) || !text || !len) return bd_error(BRAID_E_INVALID, "tok_detokenize: NULL argument");
    *text = NULL;
    *len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p;
        size_t pl;
        BD_TRY(tok_token_piece(v, ids[i], special, &p, &pl));
        total += pl;
    }
    char *out = bd_malloc(total + 1);
    if (!out) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory (%zu bytes)", total);
    size_t o = 0;
    int remove_space = v->add_space_prefix;
    for (size_t i = 0; i < n; i++) {
        const char *p;
        size_t pl;
        if (tok_token_piece(v, ids[i], special, &p, &pl) != BRAID_OK) pl = 0; /* checked above */
        if (remove_space && pl && p[0] == ' ') {
            p++;
            pl--;
        }
        remove_space = 0;
        memcpy(out + o, p, pl);
        o += pl;
    }
    if (v->clean_spaces) o = clean_spaces(out, o);
    out[o] = 0;
    *text = out;
    *len = o;
    return BRAID_OK;
}
