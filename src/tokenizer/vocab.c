/* vocab.c — loading a tok_vocab from a GGUF file's tokenizer.* keys, with llama.cpp's defaults and fix-ups
 * (special ids per tokenizer type, add_bos/add_eos, control tokens recognised by their text, end-of-generation
 * set, per-model strip flags), and the small accessors. Tokenizing is in tokenize.c, the BPE and SPM cores in
 * bpe.c and spm.c. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/status.h"
#include "gguf/gguf.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab_internal.h"

int32_t tok_text_to_token(const tok_vocab *v, const char *s, size_t n) {
    int32_t id = tok_strtab_find(&v->strs, s, n);
    return id < v->n_tokens ? id : -1;
}

static int32_t find_cstr(const tok_vocab *v, const char *s) { return tok_text_to_token(v, s, strlen(s)); }

static int text_is(const tok_vocab *v, int32_t id, const char *s) {
    size_t len;
    const char *t = tok_str(&v->strs, id, &len);
    return len == strlen(s) && !memcmp(t, s, len);
}

void tok_vocab_free(tok_vocab *v) {
    if (!v) return;
    tok_strtab_free(&v->strs);
    bd_free(v->score);
    bd_free(v->attr);
    bd_free(v->eog);
    bd_free(v->special);
    bd_free(v->merges);
    tok_pretok_free(v->pretok);
    bd_free(v->spm_pairs);
    bd_free(v->piece_arena);
    bd_free(v->piece_off);
    bd_free(v);
}

/* ---- reading keys ------------------------------------------------------------------------------------ */

static void str_copy(char *dst, size_t cap, gguf_str s) {
    size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
    memcpy(dst, s.ptr, n);
    dst[n] = 0;
}

static int str_eq(gguf_str s, const char *c) { return s.len == strlen(c) && !memcmp(s.ptr, c, s.len); }

/* An optional numeric array of at least n elements of type INT32 or FLOAT32. */
static braid_status numeric_array(const gguf_file *f, const char *key, uint64_t n, int allow_f32,
                                  const gguf_value **out) {
    *out = NULL;
    const gguf_value *val = gguf_find(f, key);
    if (!val) return BRAID_OK;
    if (val->type != GGUF_TYPE_ARRAY ||
        !(val->arr.type == GGUF_TYPE_INT32 || (allow_f32 && val->arr.type == GGUF_TYPE_FLOAT32)))
        return bd_error(BRAID_E_FORMAT, "tokenizer: %s has the wrong type", key);
    if (val->arr.n < n)
        return bd_error(BRAID_E_FORMAT, "tokenizer: %s has %llu entries for %llu tokens", key,
                        (unsigned long long)val->arr.n, (unsigned long long)n);
    *out = val;
    return BRAID_OK;
}

static int32_t arr_i32(const gguf_value *a, uint64_t i) {
    int32_t x;
    memcpy(&x, (const char *)a->arr.data + i * 4, 4);
    return x;
}
static float arr_f32(const gguf_value *a, uint64_t i) {
    float x;
    memcpy(&x, (const char *)a->arr.data + i * 4, 4);
    return x;
}

/* A special-token id key: used only if it is inside the vocabulary (as llama.cpp: a bad id keeps the default). */
static braid_status special_key(const gguf_file *f, const tok_vocab *v, const char *key, int32_t *id) {
    if (*id >= 0 && *id >= v->n_tokens) *id = -1;
    uint32_t x = UINT32_MAX;
    BD_TRY(gguf_get_u32(f, key, 0, &x));
    if (x == UINT32_MAX) return BRAID_OK;
    if (x >= (uint32_t)v->n_tokens) {
        bd_log(BD_LOG_WARN, "tokenizer: bad special token %s = %u, keeping %d", key, x, *id);
        return BRAID_OK;
    }
    *id = (int32_t)x;
    return BRAID_OK;
}

/* ---- BPE merges ---------------------------------------------------------------------------------------- */

static braid_status load_merges(tok_vocab *v, const gguf_file *f) {
    const gguf_value *items;
    uint64_t n;
    BD_TRY(gguf_get_str_array(f, "tokenizer.ggml.merges", 1, &items, &n));
    uint64_t slots = 1024;
    while (slots < n * 2) slots <<= 1;
    v->merges = bd_mallocn(slots, sizeof *v->merges);
    if (!v->merges) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory for %llu merges", (unsigned long long)n);
    memset(v->merges, 0xFF, slots * sizeof *v->merges);
    v->merge_mask = slots - 1;
    char *buf = NULL;
    size_t buf_cap = 0;
    braid_status st = BRAID_OK;
    for (uint64_t r = 0; r < n && st == BRAID_OK; r++) {
        const char *s = items[r].str.ptr;
        size_t len = (size_t)items[r].str.len;
        /* "left right", split at the first space after the first byte. */
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp) continue;
        size_t ll = (size_t)(sp - s), rl = len - ll - 1;
        int32_t a, b, res;
        if ((st = tok_strtab_intern(&v->strs, s, ll, &a)) != BRAID_OK) break;
        if ((st = tok_strtab_intern(&v->strs, sp + 1, rl, &b)) != BRAID_OK) break;
        if (ll + rl > buf_cap) {
            buf_cap = (ll + rl) * 2 + 16;
            char *nb = bd_realloc(buf, buf_cap);
            if (!nb) {
                st = bd_error(BRAID_E_NOMEM, "tokenizer: out of memory");
                break;
            }
            buf = nb;
        }
        memcpy(buf, s, ll);
        memcpy(buf + ll, sp + 1, rl);
        if ((st = tok_strtab_intern(&v->strs, buf, ll + rl, &res)) != BRAID_OK) break;
        uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
        uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> 17;
        for (uint64_t i = h & v->merge_mask;; i = (i + 1) & v->merge_mask) {
            tok_merge_slot *m = &v->merges[i];
            if (m->key == key) break; /* the first rank of a repeated pair is kept */
            if (m->key == UINT64_MAX) {
                m->key = key;
                m->rank = (int32_t)r;
                m->result = res;
                v->n_merges++;
                break;
            }
        }
    }
    bd_free(buf);
    return st;
}

/* ---- pieces ------------------------------------------------------------------------------------------- */

/* The piece of token id with special = 1, appended to (*arena, *len). */
static braid_status piece_of(const tok_vocab *v, int32_t id, char **arena, size_t *len, size_t *cap) {
    size_t tl;
    const char *t = tok_str(&v->strs, id, &tl);
    uint32_t a = v->attr[id];
    /* worst case: "[UNK_BYTE_0x" + 8 hex + text + "]" per codepoint */
    size_t need = *len + tl * (tl + 24) + 16;
    if (need > *cap) {
        size_t c = *cap * 2;
        while (c < need) c *= 2;
        char *n = bd_realloc(*arena, c);
        if (!n) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory");
        *arena = n;
        *cap = c;
    }
    char *o = *arena + *len;
    size_t k = 0;
    if (a & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED)) {
        memcpy(o, t, tl);
        k = tl;
    } else if (a & TOK_ATTR_NORMAL) {
        if (v->type == TOK_TYPE_SPM || v->type == TOK_TYPE_WPM || v->escape_whitespaces) {
            for (size_t i = 0; i < tl;) {
                if (i + 3 <= tl && !memcmp(t + i, "\xE2\x96\x81", 3)) {
                    o[k++] = ' ';
                    i += 3;
                } else {
                    o[k++] = t[i++];
                }
            }
        } else {
            /* GPT-2 byte-level text back to bytes; codepoints outside the map are written as llama.cpp does. */
            for (size_t i = 0; i < tl;) {
                size_t i0 = i;
                uint32_t cp = tok_utf8_decode((const uint8_t *)t, tl, &i);
                int b = tok_cp_to_byte(cp);
                if (b >= 0) {
                    o[k++] = (char)b;
                } else {
                    uint8_t u[4];
                    size_t nu = tok_utf8_encode(cp, u);
                    (void)i0;
                    k += (size_t)sprintf(o + k, "[UNK_BYTE_0x");
                    for (size_t q = 0; q < nu; q++) k += (size_t)sprintf(o + k, "%02x", u[q]);
                    memcpy(o + k, t, tl);
                    k += tl;
                    o[k++] = ']';
                }
            }
        }
    } else if (a & TOK_ATTR_BYTE) {
        char hex[3] = {tl > 3 ? t[3] : '0', tl > 4 ? t[4] : '0', 0};
        o[k++] = (char)strtol(hex, NULL, 16);
    }
    *len += k;
    return BRAID_OK;
}

static braid_status build_pieces(tok_vocab *v) {
    size_t cap = (size_t)v->strs.off[v->n_tokens] + 64, len = 0;
    v->piece_arena = bd_malloc(cap);
    v->piece_off = bd_mallocn((size_t)v->n_tokens + 1, sizeof *v->piece_off);
    if (!v->piece_arena || !v->piece_off) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory");
    for (int32_t id = 0; id < v->n_tokens; id++) {
        v->piece_off[id] = len;
        BD_TRY(piece_of(v, id, &v->piece_arena, &len, &cap));
    }
    v->piece_off[v->n_tokens] = len;
    return BRAID_OK;
}

/* ---- special tokens --------------------------------------------------------------------------------- */

static int cmp_special(const void *a, const void *b, void *ctx) {
    const tok_vocab *v = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint64_t lx = v->strs.off[x + 1] - v->strs.off[x], ly = v->strs.off[y + 1] - v->strs.off[y];
    if (lx != ly) return lx > ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static braid_status eog_add(tok_vocab *v, int32_t id) {
    if (id < 0) return BRAID_OK;
    for (size_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) return BRAID_OK;
    int32_t *n = bd_realloc(v->eog, (v->n_eog + 1) * sizeof *n);
    if (!n) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory");
    v->eog = n;
    v->eog[v->n_eog++] = id;
    return BRAID_OK;
}

static void eog_remove(tok_vocab *v, int32_t id) {
    for (size_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) {
            v->eog[i] = v->eog[--v->n_eog];
            return;
        }
}

/* The token of the first of names the vocabulary has (names are in priority order: "<|eot_id|>" before
 * "<|endoftext|>"). llama.cpp takes the first match in its hash map's iteration order, which is unspecified;
 * the name order agrees with what it picks on the test vocabularies (llama-3, phi-3, qwen2). Only the
 * eot/eom/fim ids depend on this, never tokenization. */
static void detect(tok_vocab *v, int32_t *id, const char *const *names) {
    if (*id >= 0) return;
    for (const char *const *nm = names; *nm; nm++) {
        int32_t t = find_cstr(v, *nm);
        if (t >= 0) {
            *id = t;
            v->attr[t] |= TOK_ATTR_CONTROL;
            return;
        }
    }
}

static braid_status finish_specials(tok_vocab *v, const gguf_file *f) {
    static const char *const eot_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                            "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                                            "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                            "<end_of_utterance>", NULL};
    static const char *const eom_names[] = {"<|eom_id|>", NULL};
    static const char *const pre_names[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                                            "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
                                            "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
    static const char *const suf_names[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                                            "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>", "<SUF>",
                                            "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
    static const char *const mid_names[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                                            "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
                                            "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
    static const char *const pad_names[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
    static const char *const rep_names[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>",
                                            NULL};
    static const char *const sep_names[] = {"<|file_sep|>", NULL};
    static const char *const eog_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
                                            "<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>",
                                            "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
                                            "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
                                            "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                            "[e~[", NULL};
    detect(v, &v->eot, eot_names);
    detect(v, &v->eom, eom_names);
    detect(v, &v->fim_pre, pre_names);
    detect(v, &v->fim_suf, suf_names);
    detect(v, &v->fim_mid, mid_names);
    detect(v, &v->fim_pad, pad_names);
    detect(v, &v->fim_rep, rep_names);
    detect(v, &v->fim_sep, sep_names);

    /* Control tokens named "unused..." are unused. */
    for (int32_t t = 0; t < v->n_tokens; t++) {
        if (!(v->attr[t] & TOK_ATTR_CONTROL) || (v->attr[t] & TOK_ATTR_UNUSED)) continue;
        size_t len;
        const char *s = tok_str(&v->strs, t, &len);
        for (size_t i = 0; i + 6 <= len; i++)
            if (!memcmp(s + i, "unused", 6)) {
                v->attr[t] |= TOK_ATTR_UNUSED;
                break;
            }
    }

    BD_TRY(eog_add(v, v->fim_pad));
    BD_TRY(eog_add(v, v->fim_rep));
    BD_TRY(eog_add(v, v->fim_sep));
    for (int32_t t = 0; t < v->n_tokens; t++) {
        for (const char *const *nm = eog_names; *nm; nm++) {
            if (text_is(v, t, *nm)) {
                BD_TRY(eog_add(v, t));
                v->attr[t] |= TOK_ATTR_CONTROL;
                break;
            }
        }
    }
    /* gpt-oss: these are always rendered */
    for (int32_t t = 0; t < v->n_tokens; t++)
        if (text_is(v, t, "<|channel|>") || text_is(v, t, "<|message|>") || text_is(v, t, "<|start|>") ||
            text_is(v, t, "<|constrain|>"))
            v->attr[t] = TOK_ATTR_USER_DEFINED;
    BD_TRY(eog_add(v, v->eos));
    BD_TRY(eog_add(v, v->eot));
    BD_TRY(eog_add(v, v->eom));
    /* o200k_harmony / solar-open: <|end|> is not an end of generation when <|return|>+<|call|> or
     * <|calls|>+<|flush|> exist. */
    {
        int has_return = 0, has_call = 0, has_flush = 0;
        int32_t end_id = -1;
        for (size_t i = 0; i < v->n_eog; i++) {
            int32_t t = v->eog[i];
            if (t < 0 || t >= v->n_tokens) continue;
            if (text_is(v, t, "<|return|>")) has_return = 1;
            else if (text_is(v, t, "<|call|>") || text_is(v, t, "<|calls|>")) has_call = 1;
            else if (text_is(v, t, "<|flush|>")) has_flush = 1;
            else if (text_is(v, t, "<|end|>")) end_id = t;
        }
        if (end_id >= 0 && ((has_return && has_call) || (has_call && has_flush))) {
            eog_remove(v, end_id);
            v->attr[end_id] = TOK_ATTR_USER_DEFINED;
        }
    }
    /* gemma4 / paddleocr: </s> is not an end of generation when <|tool_response> is one. */
    {
        int has_tr = 0;
        int32_t s_id = -1;
        for (size_t i = 0; i < v->n_eog; i++) {
            int32_t t = v->eog[i];
            if (t < 0 || t >= v->n_tokens) continue;
            if (text_is(v, t, "<|tool_response>")) has_tr = 1;
            else if (text_is(v, t, "</s>")) s_id = t;
        }
        if (has_tr && s_id >= 0) {
            eog_remove(v, s_id);
            v->attr[s_id] = TOK_ATTR_NORMAL;
        }
    }
    if (v->n_eog) qsort(v->eog, v->n_eog, sizeof *v->eog, cmp_i32);

    /* Special tokens matched in text: control, user-defined and unknown ones, longest first. */
    size_t n = 0;
    for (int32_t t = 0; t < v->n_tokens; t++)
        if (v->attr[t] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) n++;
    v->special = bd_mallocn(n ? n : 1, sizeof *v->special);
    if (!v->special) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory");
    n = 0;
    for (int32_t t = 0; t < v->n_tokens; t++)
        if (v->attr[t] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) v->special[n++] = t;
    v->n_special = n;
    qsort_r(v->special, n, sizeof *v->special, cmp_special, v);

    BD_TRY(build_pieces(v));

    /* Per-model strip flags (llama.cpp sets them by model name / architecture). */
    gguf_str name = {"", 0}, arch = {"", 0};
    BD_TRY(gguf_get_str(f, "general.name", 0, &name));
    BD_TRY(gguf_get_str(f, "general.architecture", 0, &arch));
    char lname[256];
    str_copy(lname, sizeof lname, name);
    for (char *c = lname; *c; c++) *c = (char)tolower((unsigned char)*c);
    char larch[128];
    str_copy(larch, sizeof larch, arch);
    if (strstr(v->pre_name, "jina-v2-de") || strstr(v->pre_name, "jina-v2-es") || strstr(v->pre_name, "jina-v2-code") ||
        strstr(larch, "nomic-bert-moe") || strstr(larch, "jina-bert-v3")) {
        int32_t m = find_cstr(v, "<mask>");
        if (m >= 0) v->attr[m] |= TOK_ATTR_LSTRIP;
    } else if (strstr(lname, "phi-3") || strstr(lname, "phi3")) {
        for (size_t i = 0; i < v->n_special; i++) v->attr[v->special[i]] |= TOK_ATTR_RSTRIP;
        int32_t t = find_cstr(v, "</s>");
        if (t >= 0) v->attr[t] |= TOK_ATTR_RSTRIP;
        static const char *const off[] = {"<unk>", "<s>", "<|endoftext|>"};
        for (size_t i = 0; i < 3; i++) {
            t = find_cstr(v, off[i]);
            if (t >= 0) v->attr[t] &= ~(uint32_t)TOK_ATTR_RSTRIP;
        }
    } else if (strstr(lname, "modern-bert")) {
        int32_t m = find_cstr(v, "[MASK]");
        if (m >= 0) v->attr[m] |= TOK_ATTR_LSTRIP;
    }
    return BRAID_OK;
}

/* ---- load ------------------------------------------------------------------------------------------------ */

static braid_status load(tok_vocab *v, const gguf_file *f) {
    gguf_str model, pre = {"", 0};
    BD_TRY(gguf_get_str(f, "tokenizer.ggml.model", 1, &model));
    BD_TRY(gguf_get_str(f, "tokenizer.ggml.pre", 0, &pre));
    str_copy(v->model_name, sizeof v->model_name, model);
    str_copy(v->pre_name, sizeof v->pre_name, pre);
    v->bos = v->eos = v->eot = v->eom = v->unk = v->sep = v->pad = v->mask = v->nl = -1;
    v->fim_pre = v->fim_suf = v->fim_mid = v->fim_pad = v->fim_rep = v->fim_sep = -1;

    if (str_eq(model, "none") || str_eq(model, "no_vocab")) {
        v->type = TOK_TYPE_NONE;
        gguf_str arch = {"", 0};
        BD_TRY(gguf_get_str(f, "general.architecture", 0, &arch));
        char key[160];
        char a[96];
        str_copy(a, sizeof a, arch);
        snprintf(key, sizeof key, "%s.vocab_size", a);
        uint32_t n = 0;
        BD_TRY(gguf_get_u32(f, key, 0, &n));
        if (n > INT32_MAX) return bd_error(BRAID_E_FORMAT, "tokenizer: %s = %u is too large", key, n);
        v->n_tokens = (int32_t)n;
        return BRAID_OK;
    }
    const char *const *regex = NULL;
    unsigned pre_flags = 0;
    if (str_eq(model, "llama")) {
        v->type = TOK_TYPE_SPM;
        v->bos = 1;
        v->eos = 2;
        v->unk = 0;
        v->add_space_prefix = 1;
        v->add_bos = 1;
        v->escape_whitespaces = 1;
    } else if (str_eq(model, "gpt2") || str_eq(model, "gemma4")) {
        v->type = TOK_TYPE_BPE;
        if (str_eq(model, "gemma4")) {
            snprintf(v->pre_name, sizeof v->pre_name, "gemma4");
        } else {
            v->bos = 11;
            v->eos = 11;
        }
        if (!v->pre_name[0])
            bd_log(BD_LOG_WARN, "tokenizer: no tokenizer.ggml.pre, using the default pre-tokenizer (as llama.cpp)");
        BD_TRY(tok_pre_lookup(v->pre_name, &pre_flags, &regex));
        v->clean_spaces = !(pre_flags & TOK_PRE_NO_CLEAN_SPACES);
        v->ignore_merges = !!(pre_flags & TOK_PRE_IGNORE_MERGES);
        v->add_bos = !!(pre_flags & TOK_PRE_ADD_BOS);
        v->add_sep = !!(pre_flags & TOK_PRE_ADD_SEP);
        v->escape_whitespaces = !!(pre_flags & TOK_PRE_ESCAPE_WS);
        v->byte_encode = !(pre_flags & TOK_PRE_RAW_UTF8);
        v->gemma4_nl = regex && regex[0] && !strcmp(regex[0], "[^\\n]+|[\\n]+") && !regex[1] &&
                       (!strcmp(v->pre_name, "gemma4") || !strcmp(v->pre_name, "granite-embed-multi-311m"));
        if (pre_flags & TOK_PRE_NO_BOS) v->bos = -1;
    } else if (str_eq(model, "bert")) {
        v->type = TOK_TYPE_WPM;
        v->bos = 101;
        v->unk = 100;
        v->sep = 102;
        v->pad = 0;
        v->mask = 103;
        v->add_sep = 1;
        v->add_bos = 1;
        v->clean_spaces = 1;
        v->wpm_lowercase = 1;
        BD_TRY(gguf_get_bool(f, "tokenizer.ggml.normalizer.lowercase", 0, &v->wpm_lowercase));
        v->wpm_strip_accents = v->wpm_lowercase;
        BD_TRY(gguf_get_bool(f, "tokenizer.ggml.normalizer.strip_accents", 0, &v->wpm_strip_accents));
    } else {
        char m[64];
        str_copy(m, sizeof m, model);
        return bd_error(BRAID_E_UNSUPPORTED, "tokenizer: tokenizer.ggml.model '%s' is not supported", m);
    }
    BD_TRY(gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", 0, &v->add_space_prefix));

    const gguf_value *tokens;
    uint64_t n;
    BD_TRY(gguf_get_str_array(f, "tokenizer.ggml.tokens", 1, &tokens, &n));
    if (n == 0 || n > INT32_MAX) return bd_error(BRAID_E_FORMAT, "tokenizer: %llu tokens", (unsigned long long)n);
    const gguf_value *scores, *types;
    BD_TRY(numeric_array(f, "tokenizer.ggml.scores", n, 1, &scores));
    BD_TRY(numeric_array(f, "tokenizer.ggml.token_type", n, 0, &types));
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) total += tokens[i].str.len ? tokens[i].str.len : 24;
    BD_TRY(tok_strtab_init(&v->strs, (uint32_t)(n * 2 + 16), total * 2 + 64));
    v->score = bd_calloc(n, sizeof *v->score);
    v->attr = bd_calloc(n, sizeof *v->attr);
    if (!v->score || !v->attr) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory for %llu tokens",
                                               (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        int32_t id;
        if (tokens[i].str.len == 0) { /* llama.cpp renames empty tokens */
            char e[40];
            int k = snprintf(e, sizeof e, "[EMPTY_%llu]", (unsigned long long)i);
            BD_TRY(tok_strtab_append(&v->strs, e, (size_t)k, &id));
        } else {
            BD_TRY(tok_strtab_append(&v->strs, tokens[i].str.ptr, (size_t)tokens[i].str.len, &id));
        }
        size_t tlen = (size_t)(v->strs.off[id + 1] - v->strs.off[id]);
        if (tlen > v->max_token_len) v->max_token_len = tlen;
        if (scores) v->score[i] = scores->arr.type == GGUF_TYPE_FLOAT32 ? arr_f32(scores, i) : (float)arr_i32(scores, i);
        uint32_t a = TOK_ATTR_NORMAL;
        if (types) {
            switch (arr_i32(types, i)) {
            case 1: a = TOK_ATTR_NORMAL; break;
            case 2: a = TOK_ATTR_UNKNOWN; break;
            case 3: a = TOK_ATTR_CONTROL; break;
            case 4: a = TOK_ATTR_USER_DEFINED; break;
            case 5: a = TOK_ATTR_UNUSED; break;
            case 6: a = TOK_ATTR_BYTE; break;
            default: a = TOK_ATTR_UNDEFINED; break;
            }
        }
        v->attr[i] = a;
    }
    v->n_tokens = (int32_t)n;

    /* Byte tables. */
    for (int b = 0; b < 256; b++) {
        char c = (char)b, hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        v->single_byte_tok[b] = tok_text_to_token(v, &c, 1);
        v->byte_tok[b] = find_cstr(v, hex);
        if (v->type == TOK_TYPE_SPM && v->byte_tok[b] < 0) v->byte_tok[b] = v->single_byte_tok[b];
    }
    if (v->type == TOK_TYPE_BPE) {
        BD_TRY(load_merges(v, f));
        for (int b = 0; b < 256; b++) {
            uint8_t enc[4];
            size_t ne = tok_utf8_encode(tok_byte_to_cp((uint8_t)b), enc);
            v->byte_sid[b] = tok_strtab_find(&v->strs, (const char *)enc, ne);
        }
        BD_TRY(tok_pretok_new(regex, &v->pretok));
    } else if (v->type == TOK_TYPE_SPM) {
        BD_TRY(tok_spm_prepare(v));
    }

    /* Special ids from the file (llama.cpp's order: the deprecated fim keys come last and win). */
    static const struct {
        const char *key;
        size_t off;
    } keys[] = {
        {"tokenizer.ggml.bos_token_id", offsetof(tok_vocab, bos)},
        {"tokenizer.ggml.eos_token_id", offsetof(tok_vocab, eos)},
        {"tokenizer.ggml.eot_token_id", offsetof(tok_vocab, eot)},
        {"tokenizer.ggml.eom_token_id", offsetof(tok_vocab, eom)},
        {"tokenizer.ggml.unknown_token_id", offsetof(tok_vocab, unk)},
        {"tokenizer.ggml.seperator_token_id", offsetof(tok_vocab, sep)},
        {"tokenizer.ggml.padding_token_id", offsetof(tok_vocab, pad)},
        {"tokenizer.ggml.mask_token_id", offsetof(tok_vocab, mask)},
        {"tokenizer.ggml.fim_pre_token_id", offsetof(tok_vocab, fim_pre)},
        {"tokenizer.ggml.fim_suf_token_id", offsetof(tok_vocab, fim_suf)},
        {"tokenizer.ggml.fim_mid_token_id", offsetof(tok_vocab, fim_mid)},
        {"tokenizer.ggml.fim_pad_token_id", offsetof(tok_vocab, fim_pad)},
        {"tokenizer.ggml.fim_rep_token_id", offsetof(tok_vocab, fim_rep)},
        {"tokenizer.ggml.fim_sep_token_id", offsetof(tok_vocab, fim_sep)},
        {"tokenizer.ggml.prefix_token_id", offsetof(tok_vocab, fim_pre)},
        {"tokenizer.ggml.suffix_token_id", offsetof(tok_vocab, fim_suf)},
        {"tokenizer.ggml.middle_token_id", offsetof(tok_vocab, fim_mid)},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        BD_TRY(special_key(f, v, keys[i].key, (int32_t *)((char *)v + keys[i].off)));
    BD_TRY(gguf_get_bool(f, "tokenizer.ggml.add_bos_token", 0, &v->add_bos));
    BD_TRY(gguf_get_bool(f, "tokenizer.ggml.add_eos_token", 0, &v->add_eos));
    BD_TRY(gguf_get_bool(f, "tokenizer.ggml.add_sep_token", 0, &v->add_sep));
    if (v->gemma4_nl && !v->add_bos) v->add_bos = 1; /* llama.cpp forces BOS for gemma4 */

    BD_TRY(finish_specials(v, f));

    /* The newline token: SPM's byte token for '\n', else the first id of "\n". */
    if (v->type == TOK_TYPE_SPM) {
        v->nl = v->byte_tok['\n'] >= 0 ? v->byte_tok['\n'] : v->pad;
    } else if (v->type == TOK_TYPE_WPM) {
        v->nl = v->pad;
    } else {
        int32_t ids[8];
        size_t k = 0;
        braid_status st = tok_tokenize(v, "\n", 1, 0, 0, ids, 8, &k);
        if (st != BRAID_OK && st != BRAID_E_RANGE) return st;
        v->nl = k ? ids[0] : v->pad;
    }
    return BRAID_OK;
}

braid_status tok_vocab_load(const gguf_file *f, tok_vocab **out) {
    if (!f || !out) return bd_error(BRAID_E_INVALID, "tok_vocab_load: NULL argument");
    tok_unicode_init();
    tok_vocab *v = bd_calloc(1, sizeof *v);
    if (!v) return bd_error(BRAID_E_NOMEM, "tokenizer: out of memory");
    braid_status st = load(v, f);
    if (st != BRAID_OK) {
        tok_vocab_free(v);
        return st;
    }
    *out = v;
    return BRAID_OK;
}

braid_status tok_vocab_load_file(const char *path, tok_vocab **out) {
    gguf_file *f = NULL;
    BD_TRY(gguf_open(path, &f));
    braid_status st = tok_vocab_load(f, out);
    gguf_close(f);
    return st;
}

/* ---- accessors ----------------------------------------------------------------------------------------- */

int32_t tok_n_tokens(const tok_vocab *v) { return v->n_tokens; }
const char *tok_model_name(const tok_vocab *v) { return v->model_name; }
const char *tok_pre_name(const tok_vocab *v) { return v->pre_name; }
int32_t tok_bos(const tok_vocab *v) { return v->bos; }
int32_t tok_eos(const tok_vocab *v) { return v->eos; }
int32_t tok_eot(const tok_vocab *v) { return v->eot; }
int32_t tok_eom(const tok_vocab *v) { return v->eom; }
int32_t tok_unk(const tok_vocab *v) { return v->unk; }
int32_t tok_pad(const tok_vocab *v) { return v->pad; }
int32_t tok_nl(const tok_vocab *v) { return v->nl; }
int tok_add_bos(const tok_vocab *v) { return v->add_bos; }
int tok_add_eos(const tok_vocab *v) { return v->add_eos; }

int tok_is_eog(const tok_vocab *v, int32_t id) {
    if (id < 0) return 0;
    for (size_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) return 1;
    return 0;
}

const char *tok_token_text(const tok_vocab *v, int32_t id, size_t *len) {
    if (id < 0 || id >= v->n_tokens || v->type == TOK_TYPE_NONE) {
        *len = 0;
        return "";
    }
    return tok_str(&v->strs, id, len);
}

uint32_t tok_token_attr(const tok_vocab *v, int32_t id) {
    if (id < 0 || id >= v->n_tokens || !v->attr) return 0;
    return v->attr[id];
}
