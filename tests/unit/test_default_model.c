/* test_default_model.c — the built-in default model (models/kjv-qwen35-q8_0.gguf, trained by train/train.py)
 * writes words: `braid run -p PROMPT -n 40 --temp 0` with no -m, for a fixed set of prompts, and at least 90%
 * of the generated words (runs of letters, compared lowercased) must be in the training corpus's own word
 * list (models/words.txt, written by the training script); so that a loop on one word cannot pass, the
 * prompts together generate at least 100 words and each continuation of 10 words or more has 3 distinct
 * ones. Also: the default lookup finds the committed
 * file (no $BRAID_MODELS_DIR), and the draft model loads with the same vocabulary. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "braid.h"
#include "test.h"

static const char *const PROMPTS[] = {"And God said", "In the beginning", "The LORD is my shepherd",
                                      "And it came to pass", "Blessed are the", "Hello"};

static char *words_buf;
static char **words;
static size_t n_words;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int known(const char *w) { return bsearch(&w, words, n_words, sizeof *words, cmp_str) != NULL; }

int main(void) {
    const char *src = test_env("BRAID_SOURCE_DIR", ".");
    const char *build = test_env("BRAID_BUILD_DIR", "build");
    char path[4096], cmd[8192];

    snprintf(path, sizeof path, "%s/models/words.txt", src);
    size_t len;
    words_buf = test_read_file(path, &len);
    CHECK(words_buf != NULL, "read %s", path);
    if (!words_buf) TEST_MAIN_END();
    for (size_t i = 0; i < len; i++) n_words += words_buf[i] == '\n';
    words = malloc((n_words + 1) * sizeof *words);
    size_t k = 0;
    for (char *p = words_buf, *nl; k < n_words && (nl = strchr(p, '\n')); p = nl + 1) {
        *nl = 0;
        words[k++] = p;
    }
    n_words = k;
    qsort(words, n_words, sizeof *words, cmp_str);
    CHECK(n_words > 5000, "the word list has %zu words", n_words);

    size_t total = 0, hits = 0, all_distinct = 0;
    for (size_t p = 0; p < sizeof PROMPTS / sizeof *PROMPTS; p++) {
        int st = -1;
        snprintf(cmd, sizeof cmd, "env -u BRAID_MODELS_DIR '%s/braid' run -p '%s' -n 40 --temp 0 -t 1 2>/dev/null",
                 build, PROMPTS[p]);
        char *out = test_run_cmd(cmd, &st);
        CHECK(st == 0 && out, "'%s': braid run without -m exits with 0 (%d)", PROMPTS[p], st);
        if (!out) continue;
        size_t t0 = total, h0 = hits, n_distinct = 0;
        char w[128], seen[64][128];
        for (char *c = out; *c;) {
            if (!isalpha((unsigned char)*c)) {
                c++;
                continue;
            }
            size_t n = 0;
            while (isalpha((unsigned char)*c)) {
                if (n + 1 < sizeof w) w[n++] = (char)tolower((unsigned char)*c);
                c++;
            }
            w[n] = 0;
            total++;
            hits += known(w);
            int dup = 0;
            for (size_t j = 0; j < n_distinct; j++) dup |= !strcmp(seen[j], w);
            if (!dup && n_distinct < 64) memcpy(seen[n_distinct++], w, n + 1);
        }
        printf("%-24s -> %zu/%zu known: %s\n", PROMPTS[p], hits - h0, total - t0, out);
        /* a model stuck on one word would pass the word-list check; even a repetitive text has some variety
         * (a prompt may also be answered with a short line and the end of the text) */
        CHECK(total - t0 < 10 || n_distinct >= 3, "'%s' generates varied words (%zu distinct)", PROMPTS[p],
              n_distinct);
        all_distinct += n_distinct;
        free(out);
    }
    CHECK(total >= 100 && all_distinct >= 20, "the prompts generate %zu words, %zu distinct per prompt in all", total,
          all_distinct);
    CHECK(total > 0 && hits * 10 >= total * 9, "%zu of %zu generated words are in the corpus word list", hits, total);

    /* the draft: same vocabulary, about a tenth of the parameters' bytes */
    braid_model *m = NULL, *d = NULL;
    braid_model_params mp = braid_model_default_params();
    snprintf(path, sizeof path, "%s/models/kjv-qwen35-q8_0.gguf", src);
    CHECK_STATUS(braid_model_load(path, &mp, &m), BRAID_OK);
    snprintf(path, sizeof path, "%s/models/kjv-qwen35-draft-q8_0.gguf", src);
    CHECK_STATUS(braid_model_load(path, &mp, &d), BRAID_OK);
    if (m && d) {
        CHECK(braid_model_n_vocab(m) == braid_model_n_vocab(d), "same vocabulary size");
        braid_token a[64], b[64];
        size_t na = 0, nb = 0;
        const char *text = "And God said, Let there be light: and there was light.";
        CHECK_STATUS(braid_tokenize(m, text, strlen(text), 0, 0, a, 64, &na), BRAID_OK);
        CHECK_STATUS(braid_tokenize(d, text, strlen(text), 0, 0, b, 64, &nb), BRAID_OK);
        CHECK(na == nb && !memcmp(a, b, na * sizeof *a), "the draft tokenizes the same");
        CHECK(na < 20, "the trained vocabulary keeps common words whole (%zu tokens)", na);
    }
    braid_model_free(m);
    braid_model_free(d);
    free(words);
    free(words_buf);
    TEST_MAIN_END();
}
