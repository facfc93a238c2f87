/* test_tokenizer_vocabs.c — every llama.cpp test vocabulary (models/ggml-vocab-*.gguf with .inp/.out cases in
 * the oracle's source tree) tokenizes every case to exactly the expected ids, with add_special = 0 and
 * parse_special = 0 as llama.cpp's tests/test-tokenizer-0.cpp does. Also: decoding the ids gives back the
 * input (where llama.cpp's decoder is lossless: no clean-up of spaces, valid UTF-8 input), the vocabularies
 * whose tokenizer type braid does not implement are refused with BRAID_E_UNSUPPORTED, and bad input
 * (invalid UTF-8, NUL bytes, a too small output buffer) gives a clear result.
 *
 * `unit_tokenizer_vocabs --long` (CTest unit_tokenizer_vocabs_long, label long) instead tokenizes 100 MB
 * inputs (text, one repeated letter, spaces, random bytes with NULs) with a BPE and an SPM vocabulary,
 * counting ids without storing them, and checks that each succeeds with the peak resident memory bounded. */
#include <sys/resource.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "gguf/gguf.h"
#include "test.h"
#include "vocab_files.h"
#include "tokenizer/vocab.h"
#include "tokenizer/vocab_internal.h"

/* Vocabularies whose tokenizer type braid does not implement (Unigram "t5"). */
static int expected_unsupported(const char *name) { return !strcmp(name, "ggml-vocab-nomic-bert-moe.gguf"); }

static int valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!l || i + l > n) return 0;
        for (size_t k = 1; k < l; k++)
            if (((unsigned char)s[i + k] & 0xC0) != 0x80) return 0;
        i += l;
    }
    return 1;
}

static void run_cases(const char *dir, const char *name, const tok_vocab *v, int *total_pass, int *total_cases) {
    char path[2600];
    size_t inp_len, out_len;
    snprintf(path, sizeof path, "%s/%s.inp", dir, name);
    char *inp = test_read_file(path, &inp_len);
    snprintf(path, sizeof path, "%s/%s.out", dir, name);
    char *out = test_read_file(path, &out_len);
    CHECK(inp && out, "%s: cannot read .inp/.out", name);
    if (!inp || !out) {
        free(inp);
        free(out);
        return;
    }
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof sep - 1;
    size_t pos = 0, opos = 0;
    int n_cases = 0, n_pass = 0, n_rt = 0, n_rt_pass = 0;
    int32_t *ids = malloc(1 << 20), *want = malloc(1 << 20);
    while (pos < inp_len) {
        char *next = memmem(inp + pos, inp_len - pos, sep, sep_len);
        size_t case_len = next ? (size_t)(next - (inp + pos)) : inp_len - pos;
        /* the matching .out line */
        char *eol = memchr(out + opos, '\n', out_len - opos);
        size_t line_len = eol ? (size_t)(eol - (out + opos)) : out_len - opos;
        size_t n_want = 0;
        char *line = strndup(out + opos, line_len);
        for (char *t = strtok(line, " "); t; t = strtok(NULL, " ")) want[n_want++] = atoi(t);
        free(line);
        opos += line_len + (eol ? 1 : 0);

        size_t n = 0;
        braid_status st = tok_tokenize(v, inp + pos, case_len, 0, 0, ids, (1 << 18), &n);
        int ok = st == BRAID_OK && n == n_want && !memcmp(ids, want, n * sizeof *ids);
        n_cases++;
        n_pass += ok;
        if (!ok) {
            fprintf(stderr, "%s case %d (%zu bytes) '%.*s': got", name, n_cases, case_len, (int)(case_len < 60 ? case_len : 60),
                    inp + pos);
            for (size_t k = 0; k < n && k < 40; k++) fprintf(stderr, " %d", ids[k]);
            fprintf(stderr, "\n   want");
            for (size_t k = 0; k < n_want && k < 40; k++) fprintf(stderr, " %d", want[k]);
            fprintf(stderr, "\n");
        }
        /* Round trip where the decoder is lossless. */
        if (ok && !v->clean_spaces && valid_utf8(inp + pos, case_len)) {
            char *text;
            size_t tl;
            n_rt++;
            if (tok_detokenize(v, ids, n, 0, &text, &tl) == BRAID_OK) {
                int same = tl == case_len && !memcmp(text, inp + pos, tl);
                /* SPM: a leading space of the input is eaten by the removal of the space prefix */
                if (!same && v->add_space_prefix && case_len && inp[pos] == ' ')
                    same = tl + 1 == case_len && !memcmp(text, inp + pos + 1, tl);
                n_rt_pass += same;
                if (!same) fprintf(stderr, "%s case %d: round trip gives '%.*s'\n", name, n_cases, (int)tl, text);
                bd_free(text);
            }
        }
        pos += case_len + (next ? sep_len : 0);
        if (!next) break;
    }
    printf("  %-36s %3d / %3d cases  (round trip %d / %d)\n", name, n_pass, n_cases, n_rt_pass, n_rt);
    CHECK(n_pass == n_cases, "%s: %d of %d cases differ", name, n_cases - n_pass, n_cases);
    CHECK(n_rt_pass == n_rt, "%s: %d round trips differ", name, n_rt - n_rt_pass);
    *total_pass += n_pass;
    *total_cases += n_cases;
    free(ids);
    free(want);
    free(inp);
    free(out);
}

/* Invalid UTF-8, NUL bytes and a short output buffer on one vocabulary. */
static void bad_input(const tok_vocab *v, const char *name) {
    static const char bad[] = "a\xff\xfe b\xc3 \xe2\x82 \xf0\x9f\x98 \x80\x80 \xf4\x90\x80\x80 \xed\xa0\x80";
    size_t n = 0;
    int32_t ids[256];
    CHECK_STATUS(tok_tokenize(v, bad, sizeof bad - 1, 1, 1, ids, 256, &n), BRAID_OK);
    CHECK(n > 0, "%s: invalid UTF-8 gives tokens", name);
    static const char nul[] = "a\0b\0\0c";
    CHECK_STATUS(tok_tokenize(v, nul, sizeof nul - 1, 0, 0, ids, 256, &n), BRAID_OK);
    CHECK(n > 0, "%s: NUL bytes give tokens", name);
    size_t need = 0;
    CHECK_STATUS(tok_tokenize(v, "hello world", 11, 0, 0, ids, 1, &need), BRAID_E_RANGE);
    size_t full = 0;
    CHECK_STATUS(tok_tokenize(v, "hello world", 11, 0, 0, ids, 256, &full), BRAID_OK);
    CHECK(need == full && full > 1, "%s: a short buffer reports the count needed (%zu vs %zu)", name, need, full);
    CHECK_STATUS(tok_tokenize(v, "", 0, 0, 0, NULL, 0, &n), BRAID_OK);
    CHECK(n == 0, "%s: empty text, no tokens", name);
}

static long peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
}

/* 100 MB inputs on one vocabulary: ids are counted (cap 0), not stored. */
static void long_inputs(const char *dir, const char *name) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tok_vocab *v = NULL;
    CHECK_STATUS(tok_vocab_load_file(path, &v), BRAID_OK);
    if (!v) return;
    const size_t n = 100u << 20;
    char *t = malloc(n);
    snprintf(path, sizeof path, "%s/%s.inp", dir, name);
    size_t il = 0;
    char *inp = test_read_file(path, &il);
    for (int kind = 0; kind < 4 && t; kind++) {
        static const char *const kinds[] = {"text", "one letter", "spaces", "random bytes"};
        uint64_t r = 42;
        for (size_t i = 0; i < n; i++) {
            switch (kind) {
            case 0: t[i] = inp && il ? inp[i % il] : "lorem ipsum "[i % 12]; break;
            case 1: t[i] = 'a'; break;
            case 2: t[i] = ' '; break;
            default: r ^= r << 13, r ^= r >> 7, r ^= r << 17; t[i] = (char)(r >> 24); break;
            }
        }
        size_t count = 0;
        clock_t c0 = clock();
        braid_status st = tok_tokenize(v, t, n, 1, 1, NULL, 0, &count);
        double sec = (double)(clock() - c0) / CLOCKS_PER_SEC;
        long rss = peak_rss_mb();
        printf("  %-28s 100 MB %-13s %s, %zu ids, %.1f s, peak RSS %ld MB\n", name, kinds[kind],
               braid_status_name(st), count, sec, rss);
        CHECK(st == BRAID_E_RANGE && count > 0, "%s: 100 MB of %s: %s (%s)", name, kinds[kind], braid_status_name(st),
              braid_last_error());
        /* input 100 MB + working memory: a few bytes per input byte at most */
        CHECK(rss < 1800, "%s: peak RSS %ld MB after 100 MB of %s", name, rss, kinds[kind]);
    }
    free(inp);
    free(t);
    tok_vocab_free(v);
}

int main(int argc, char **argv) {
    char fallback[512], dir[1024];
    snprintf(fallback, sizeof fallback, "%s/.cache/braid/oracle/3.22.1", test_env("HOME", "/root"));
    snprintf(dir, sizeof dir, "%s/src/models", test_env("BRAID_ORACLE_DIR", fallback));
    if (argc > 1 && !strcmp(argv[1], "--long")) {
        long_inputs(dir, "ggml-vocab-qwen35.gguf");
        long_inputs(dir, "ggml-vocab-llama-spm.gguf");
        TEST_MAIN_END();
    }
    char *names[64];
    int n_names = list_vocab_files(dir, names, 64);
    CHECK(n_names >= 0, "oracle vocabularies in %s (run scripts/fetch-oracle.sh)", dir);
    if (n_names < 0) TEST_MAIN_END();
    int total_pass = 0, total_cases = 0, n_vocabs = 0;
    for (int i = 0; i < n_names; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        gguf_file *f = NULL;
        CHECK_STATUS(gguf_open(path, &f), BRAID_OK);
        if (!f) continue;
        tok_vocab *v = NULL;
        braid_status st = tok_vocab_load(f, &v);
        if (expected_unsupported(names[i])) {
            CHECK(st == BRAID_E_UNSUPPORTED, "%s: want BRAID_E_UNSUPPORTED, got %s", names[i], braid_status_name(st));
            printf("  %-36s not supported (%s)\n", names[i], braid_last_error());
        } else {
            CHECK(st == BRAID_OK, "%s: load: %s", names[i], braid_last_error());
        }
        if (v) {
            char p2[1300];
            snprintf(p2, sizeof p2, "%s.inp", path);
            FILE *t = fopen(p2, "rb");
            if (t) {
                fclose(t);
                run_cases(dir, names[i], v, &total_pass, &total_cases);
                n_vocabs++;
            } else {
                printf("  %-36s loaded (no .inp/.out cases)\n", names[i]);
            }
            bad_input(v, names[i]);
            tok_vocab_free(v);
        }
        gguf_close(f);
        free(names[i]);
    }
    printf("%d vocabularies with cases: %d / %d cases pass\n", n_vocabs, total_pass, total_cases);
    CHECK(n_vocabs >= 15, "at least 15 vocabularies with cases were run (%d)", n_vocabs);
    TEST_MAIN_END();
}
