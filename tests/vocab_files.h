/* vocab_files.h — lists llama.cpp's tokenizer test vocabularies (models/ggml-vocab-*.gguf in the oracle cache),
 * sorted by name, for the tests that walk all of them. */
#ifndef BRAID_TESTS_VOCAB_FILES_H
#define BRAID_TESTS_VOCAB_FILES_H

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

static int vocab_name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Fills names (strdup'd; the caller frees each) with up to cap file names from dir; returns how many, or -1 if
 * dir cannot be opened. */
static inline int list_vocab_files(const char *dir, char **names, int cap) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < cap) {
        size_t l = strlen(e->d_name);
        if (!strncmp(e->d_name, "ggml-vocab-", 11) && l > 5 && !strcmp(e->d_name + l - 5, ".gguf"))
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, vocab_name_cmp);
    return n;
}

#endif
