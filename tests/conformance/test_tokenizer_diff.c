/* test_tokenizer_diff.c — braid's tokenizer against llama.cpp's (the prebuilt library) on every vocabulary in
 * the oracle's models/ directory: thousands of generated strings per vocabulary (random codepoints from every
 * plane, emoji with ZWJ / skin tones / flags, CJK, combining marks, code, long whitespace runs, digits,
 * contractions, invalid UTF-8, special-token text with whitespace around it), each tokenized with and without
 * parse_special (and with add_special on half of them): the ids must be identical. Also compared: vocabulary
 * size, BOS/EOS, the end-of-generation set, every token's piece (special on and off) and the detokenized text
 * of the generated ids. Counts are printed per vocabulary.
 *
 * Documented differences (not generated here; see the comments in src/tokenizer):
 * - the overlong form of a space (C0 A0) in vocabularies that write spaces as U+2581 (gemma4): llama.cpp's
 *   decoder turns it into a real space that its BPE asserts against (abort); braid tokenizes it.
 * - 4-byte sequences decoding past U+10FFFF (lead 0xF4 with 0x90.. or 0xF5..0xF7): llama.cpp throws from
 *   its UTF-8 encoder and the process aborts; braid reads the lead byte as invalid (U+FFFD).
 * - two special tokens of equal length that overlap in the text: llama.cpp's order between them is that of
 *   an unstable sort; braid takes the lower id first.
 * - an SPM run of more than 8 million characters with no possible merge boundary is cut to bound memory.
 * BRAID_TOK_DIFF_N sets the strings per vocabulary (default 1500). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ggml-backend.h>
#include <llama.h>

#include "base/alloc.h"
#include "base/strbuf.h"
#include "test.h"
#include "vocab_files.h"
#include "tokenizer/vocab.h"

/* ---- generator ------------------------------------------------------------------------------------------- */

static uint64_t rng_state;
static uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint32_t rn(uint32_t n) { return (uint32_t)(rnd() % n); }


static const char *const words[] = {"the", "The", "THE", "hello", "world", "Hello", "don't", "I'm", "we'll", "they've",
                                    "you're", "it's", "'s", "'T", "'LL", "'Re", "naïve", "café", "über", "Straße",
                                    "résumé", "Ελληνικά", "русский", "עברית", "العربية", "हिन्दी", "ไทย", "日本語",
                                    "中文字符", "한국어", "ｆｕｌｌｗｉｄｔｈ", "Ⅻ", "½", "²", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "ǅ", "ﬁ"};
static const char *const code[] = {"int main(void) {", "    return 0;", "}", "for (i = 0; i < n; i++)", "x += y * 2;",
                                   "def f(a, b=3):", "\treturn a**b", "if __name__ == '__main__':", "#include <stdio.h>",
                                   "printf(\"%d\\n\", x);", "a->b", "a != b && c >= d || !e", "// comment",
                                   "/* block */", "<div class=\"x\">", "</div>", "{{ var }}", "$x = @y;", "x=>x+1",
                                   "```python", "0x1F", "1e-5", "...", "--", "__init__", "::", ";;", "\\\\"};
static const char *const ws[] = {" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\t\t", "\xC2\xA0", "\xE3\x80\x80",
                                 "\xE2\x80\x83", "\x0B", "\x0C", "\xC2\x85", "\xE2\x80\xA8"};
static const uint32_t emoji[] = {0x1F600, 0x1F602, 0x1F923, 0x1F44D, 0x1F469, 0x1F468, 0x1F467, 0x1F466, 0x2764,
                                 0x1F525, 0x1F680, 0x1F999, 0x1F3F3, 0x26A1, 0x1F9D1, 0x1F4A9, 0x2705, 0x1F1FA, 0x1F1F8};

static void gen_random_cp(bd_strbuf *b) {
    int n = 1 + (int)rn(12);
    for (int i = 0; i < n; i++) {
        uint32_t plane = rn(17), c;
        if (rn(3) == 0) plane = 0;
        c = plane * 0x10000 + rn(0x10000);
        if (c >= 0xD800 && c <= 0xDFFF && rn(4)) c = 'a' + rn(26); /* keep a few surrogates */
        bd_strbuf_put_cp(b, c);
    }
}

static void gen_emoji(bd_strbuf *b) {
    int n = 1 + (int)rn(4);
    for (int i = 0; i < n; i++) {
        bd_strbuf_put_cp(b, emoji[rn(sizeof emoji / sizeof emoji[0])]);
        switch (rn(5)) {
        case 0: bd_strbuf_put_cp(b, 0x1F3FB + rn(5)); break;   /* skin tone */
        case 1: bd_strbuf_put_cp(b, 0x200D); bd_strbuf_put_cp(b, emoji[rn(sizeof emoji / sizeof emoji[0])]); break; /* ZWJ */
        case 2: bd_strbuf_put_cp(b, 0xFE0F); break;            /* VS16 */
        case 3: bd_strbuf_put_cp(b, 0x1F1E6 + rn(26)); bd_strbuf_put_cp(b, 0x1F1E6 + rn(26)); break; /* flag */
        default: break;
        }
        if (rn(3) == 0) bd_strbuf_puts(b, " ");
    }
}

static void gen_cjk(bd_strbuf *b) {
    static const uint32_t base[][2] = {{0x4E00, 0x5200}, {0x3040, 0x60}, {0x30A0, 0x60}, {0xAC00, 0x2BA4},
                                       {0x3400, 0x1000}, {0x20000, 0xA6E0}, {0x2EBF0, 0x26E}, {0xFF01, 0x5E}};
    int n = 1 + (int)rn(10);
    for (int i = 0; i < n; i++) {
        int k = (int)rn(8);
        bd_strbuf_put_cp(b, base[k][0] + rn(base[k][1]));
        if (rn(6) == 0) bd_strbuf_puts(b, rn(2) ? " " : "。");
    }
}

static void gen_marks(bd_strbuf *b) {
    int n = 1 + (int)rn(8);
    for (int i = 0; i < n; i++) {
        switch (rn(4)) {
        case 0: bd_strbuf_put_cp(b, 'a' + rn(26)); break;
        case 1: bd_strbuf_put_cp(b, 0x0915 + rn(0x20)); break; /* Devanagari */
        case 2: bd_strbuf_put_cp(b, 0x0E01 + rn(0x2E)); break; /* Thai */
        default: bd_strbuf_put_cp(b, 0x0628 + rn(0x10)); break; /* Arabic */
        }
        int m = (int)rn(3);
        for (int j = 0; j < m; j++) {
            static const uint32_t marks[][2] = {{0x0300, 0x70}, {0x093E, 0x10}, {0x0E31, 0x0A}, {0x064B, 0x08},
                                                {0x20D0, 0x20}, {0x1AB0, 0x0F}};
            int k = (int)rn(6);
            bd_strbuf_put_cp(b, marks[k][0] + rn(marks[k][1]));
        }
        if (rn(4) == 0) bd_strbuf_puts(b, " ");
    }
}

static void gen_ws_run(bd_strbuf *b) {
    int n = 1 + (int)rn(300);
    int k = (int)rn(sizeof ws / sizeof ws[0]);
    for (int i = 0; i < n; i++) bd_strbuf_puts(b, rn(8) ? ws[k] : ws[rn(sizeof ws / sizeof ws[0])]);
}

static void gen_digits(bd_strbuf *b) {
    int n = 1 + (int)rn(30);
    for (int i = 0; i < n; i++) {
        switch (rn(8)) {
        case 0: bd_strbuf_put_cp(b, 0x0660 + rn(10)); break; /* Arabic-Indic */
        case 1: bd_strbuf_put_cp(b, 0xFF10 + rn(10)); break; /* fullwidth */
        case 2: bd_strbuf_puts(b, rn(2) ? "." : ","); break;
        case 3: bd_strbuf_put_cp(b, 'a' + rn(26)); break;
        default: bd_strbuf_put_cp(b, '0' + rn(10)); break;
        }
    }
}

/* Invalid UTF-8 (never a 4-byte form past U+10FFFF: llama.cpp aborts on those, see the header). */
static void gen_invalid(bd_strbuf *b) {
    int n = 1 + (int)rn(12);
    for (int i = 0; i < n; i++) {
        uint8_t c[4];
        switch (rn(7)) {
        case 0: c[0] = (uint8_t)(0x80 + rn(0x40)); bd_strbuf_put(b, c, 1); break;           /* lone continuation */
        case 1: c[0] = (uint8_t)(0xC2 + rn(0x1E)); bd_strbuf_put(b, c, 1); break;           /* truncated 2-byte */
        case 2: c[0] = (uint8_t)(0xE0 + rn(0x10)); c[1] = (uint8_t)(0x80 + rn(0x40)); bd_strbuf_put(b, c, 2); break;
        case 3: /* overlong (not of a space, C0 A0: llama.cpp asserts on it in gemma4-style vocabularies) */
            c[0] = 0xC0;
            c[1] = (uint8_t)(0x80 + rn(0x40));
            if (c[1] == 0xA0) c[1] = 0x81;
            bd_strbuf_put(b, c, 2);
            break;
        case 4: c[0] = (uint8_t)(0xF8 + rn(8)); bd_strbuf_put(b, c, 1); break;              /* never valid */
        case 5: c[0] = 0xED; c[1] = (uint8_t)(0xA0 + rn(0x20)); c[2] = (uint8_t)(0x80 + rn(0x40)); bd_strbuf_put(b, c, 3); break;
        default: c[0] = 0xF0; c[1] = (uint8_t)(0x90 + rn(0x30)); bd_strbuf_put(b, c, 2); break; /* truncated 4-byte */
        }
        if (rn(3) == 0) bd_strbuf_put_cp(b, 'a' + rn(26));
        if (rn(5) == 0) bd_strbuf_put(b, "\0", 1);
    }
}

static void gen_special(bd_strbuf *b, const tok_vocab *v) {
    int32_t n = tok_n_tokens(v);
    /* pick a control / user-defined token (try a few times) */
    for (int t = 0; t < 64; t++) {
        int32_t id = (int32_t)rn((uint32_t)n);
        if (t > 40) id = rn(2) ? tok_eos(v) : tok_bos(v);
        if (id < 0) continue;
        uint32_t a = tok_token_attr(v, id);
        if (t <= 40 && !(a & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED))) continue;
        size_t len;
        const char *s = tok_token_text(v, id, &len);
        if (rn(2)) bd_strbuf_puts(b, ws[rn(6)]);
        bd_strbuf_put(b, s, len);
        if (rn(2)) bd_strbuf_puts(b, ws[rn(6)]);
        return;
    }
}

static void gen_piece(bd_strbuf *b, const tok_vocab *v, int kind) {
    switch (kind) {
    case 0: gen_random_cp(b); break;
    case 1: gen_emoji(b); break;
    case 2: gen_cjk(b); break;
    case 3: gen_marks(b); break;
    case 4: bd_strbuf_puts(b, code[rn(sizeof code / sizeof code[0])]); break;
    case 5: gen_ws_run(b); break;
    case 6: gen_digits(b); break;
    case 7: gen_invalid(b); break;
    case 8: gen_special(b, v); break;
    default: bd_strbuf_puts(b, words[rn(sizeof words / sizeof words[0])]); break;
    }
}

/* One test string: a main kind, mixed with others. */
static void gen(bd_strbuf *b, const tok_vocab *v, int main_kind) {
    b->n = 0;
    bd_strbuf_put(b, "", 0);
    int n = 1 + (int)rn(8);
    for (int i = 0; i < n; i++) {
        gen_piece(b, v, rn(3) ? main_kind : (int)rn(11));
        if (rn(3) == 0) bd_strbuf_puts(b, rn(4) ? " " : ws[rn(sizeof ws / sizeof ws[0])]);
    }
}

/* ---- comparison ------------------------------------------------------------------------------------------ */

static void silent_log(enum ggml_log_level level, const char *text, void *user) {
    (void)level;
    (void)text;
    (void)user;
}

static void dump(const char *what, const char *s, size_t n, const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    fprintf(stderr, "    %s text (%zu bytes):", what, n);
    for (size_t i = 0; i < n && i < 80; i++) fprintf(stderr, " %02x", (uint8_t)s[i]);
    fprintf(stderr, "\n    braid:");
    for (size_t i = 0; i < na && i < 30; i++) fprintf(stderr, " %d", a[i]);
    fprintf(stderr, "\n    llama:");
    for (size_t i = 0; i < nb && i < 30; i++) fprintf(stderr, " %d", b[i]);
    fprintf(stderr, "\n");
}

static void compare_vocab(const char *dir, const char *name, int n_strings) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tok_vocab *v = NULL;
    braid_status st = tok_vocab_load_file(path, &v);
    if (st == BRAID_E_UNSUPPORTED) {
        printf("  %-32s not supported by braid (%s)\n", name, braid_last_error());
        return;
    }
    CHECK(st == BRAID_OK, "%s: %s", name, braid_last_error());
    if (!v) return;
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *lm = llama_model_load_from_file(path, mp);
    CHECK(lm != NULL, "%s: llama.cpp cannot load it", name);
    if (!lm) {
        tok_vocab_free(v);
        return;
    }
    const struct llama_vocab *lv = llama_model_get_vocab(lm);
    int32_t nv = llama_vocab_n_tokens(lv);
    CHECK(nv == tok_n_tokens(v), "%s: n_vocab %d vs %d", name, tok_n_tokens(v), nv);
    CHECK(llama_vocab_bos(lv) == tok_bos(v), "%s: bos %d vs %d", name, tok_bos(v), llama_vocab_bos(lv));
    CHECK(llama_vocab_eos(lv) == tok_eos(v), "%s: eos %d vs %d", name, tok_eos(v), llama_vocab_eos(lv));
    CHECK(llama_vocab_get_add_bos(lv) == !!tok_add_bos(v), "%s: add_bos", name);
    CHECK(llama_vocab_get_add_eos(lv) == !!tok_add_eos(v), "%s: add_eos", name);
    CHECK(llama_vocab_eot(lv) == tok_eot(v), "%s: eot %d vs %d", name, tok_eot(v), llama_vocab_eot(lv));

    /* every token: end of generation, and its piece with special on and off */
    int piece_diff = 0, eog_diff = 0;
    char lb[1024];
    for (int32_t id = 0; id < nv && nv == tok_n_tokens(v); id++) {
        eog_diff += llama_vocab_is_eog(lv, id) != !!tok_is_eog(v, id);
        for (int sp = 0; sp < 2; sp++) {
            int32_t ln = llama_token_to_piece(lv, id, lb, sizeof lb, 0, sp);
            const char *p;
            size_t pl;
            if (tok_token_piece(v, id, sp, &p, &pl) != BRAID_OK || ln < 0 || (size_t)ln != pl || memcmp(p, lb, pl)) {
                if (piece_diff++ < 3) fprintf(stderr, "  %s: piece of %d (special %d) differs\n", name, id, sp);
            }
        }
    }
    CHECK(eog_diff == 0, "%s: %d tokens differ in is_eog", name, eog_diff);
    CHECK(piece_diff == 0, "%s: %d pieces differ", name, piece_diff);

    /* generated strings */
    rng_state = 0x5EED0000u + (uint64_t)strlen(name) * 7919u + (uint8_t)name[11];
    bd_strbuf b = {0};
    size_t cap = 1 << 16;
    int32_t *ia = malloc(cap * sizeof *ia), *ib = malloc(cap * sizeof *ib);
    char *dt = malloc(1 << 20);
    int mismatch[2] = {0, 0}, detok_diff = 0, runs = 0;
    for (int i = 0; i < n_strings; i++) {
        gen(&b, v, i % 11);
        if (bd_strbuf_status(&b) != BRAID_OK) {
            CHECK(0, "%s: building input %d: %s", name, i, braid_last_error());
            break;
        }
        for (int ps = 0; ps < 2; ps++) {
            int add = (i / 11) % 2;
            size_t na = 0;
            braid_status s1 = tok_tokenize(v, b.p, b.n, add, ps, ia, cap, &na);
            int32_t nb = llama_tokenize(lv, b.p, (int32_t)b.n, ib, (int32_t)cap, add, ps);
            runs++;
            int same = s1 == BRAID_OK && nb >= 0 && (size_t)nb == na && !memcmp(ia, ib, na * sizeof *ia);
            if (!same) {
                if (mismatch[ps]++ < 3) dump(ps ? "parse_special" : "plain", b.p, b.n, ia, na, ib, nb > 0 ? (size_t)nb : 0);
                continue;
            }
            /* detokenize the ids both ways */
            char *t = NULL;
            size_t tl = 0;
            int32_t ln = llama_detokenize(lv, ib, nb, dt, 1 << 20, false, ps);
            if (tok_detokenize(v, ia, na, ps, &t, &tl) != BRAID_OK || ln < 0 || (size_t)ln != tl || memcmp(t, dt, tl)) {
                if (detok_diff++ < 3) fprintf(stderr, "  %s: detokenized text differs (%zu vs %d bytes)\n", name, tl, ln);
            }
            bd_free(t);
        }
    }
    printf("  %-32s %5d runs: %d mismatches (plain %d, parse_special %d), detokenize %d, pieces %d\n", name, runs,
           mismatch[0] + mismatch[1], mismatch[0], mismatch[1], detok_diff, piece_diff);
    CHECK(mismatch[0] + mismatch[1] == 0, "%s: %d tokenizations differ", name, mismatch[0] + mismatch[1]);
    CHECK(detok_diff == 0, "%s: %d detokenizations differ", name, detok_diff);
    free(ia);
    free(ib);
    free(dt);
    bd_strbuf_free(&b);
    llama_model_free(lm);
    tok_vocab_free(v);
}

int main(void) {
    char fallback[512], libdir[1024], dir[1024];
    snprintf(fallback, sizeof fallback, "%s/.cache/braid/oracle/3.22.1", test_env("HOME", "/root"));
    const char *root = test_env("BRAID_ORACLE_DIR", fallback);
    snprintf(libdir, sizeof libdir, "%s/lib", root);
    snprintf(dir, sizeof dir, "%s/src/models", root);
    llama_log_set(silent_log, NULL);
    ggml_backend_load_all_from_path(libdir);
    llama_backend_init();
    int n_strings = atoi(test_env("BRAID_TOK_DIFF_N", "1500"));
    char *names[64];
    int n_names = list_vocab_files(dir, names, 64);
    CHECK(n_names >= 0, "oracle vocabularies in %s", dir);
    if (n_names < 0) TEST_MAIN_END();
    printf("%d strings per vocabulary, each with parse_special off and on\n", n_strings);
    for (int i = 0; i < n_names; i++) {
        compare_vocab(dir, names[i], n_strings);
        free(names[i]);
    }
    llama_backend_free();
    TEST_MAIN_END();
}
