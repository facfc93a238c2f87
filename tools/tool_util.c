/* tool_util.c — see tool_util.h. */
#include "tool_util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf/utf8.h"

int tool_parse_i32(const char *cmd, const char *opt, const char *s, int32_t lo, int32_t hi, int32_t *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "braid %s: %s wants an integer in [%ld, %ld], got '%s'\n", cmd, opt, (long)lo, (long)hi, s);
        return 0;
    }
    *out = (int32_t)v;
    return 1;
}

int tool_parse_f32(const char *cmd, const char *opt, const char *s, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !isfinite(v)) {
        fprintf(stderr, "braid %s: %s wants a number, got '%s'\n", cmd, opt, s);
        return 0;
    }
    *out = v;
    return 1;
}

int tool_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end || s[0] == '-') {
        fprintf(stderr, "braid %s: %s wants a non-negative integer, got '%s'\n", cmd, opt, s);
        return 0;
    }
    *out = (uint64_t)v;
    return 1;
}

int tool_read_file(const char *cmd, const char *path, char **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "braid %s: cannot open %s: %s\n", cmd, path, strerror(errno));
        return 0;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        fprintf(stderr, "braid %s: cannot read %s\n", cmd, path);
        free(buf);
        return 0;
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 1;
}

char *tool_utf8_sanitize(const char *s, size_t n) {
    char *out = malloc(n * 3 + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t l = gguf_utf8_seq((const uint8_t *)s + i, n - i);
        if (l) {
            memcpy(out + o, s + i, l);
            o += l;
            i += l;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    out[o] = 0;
    return out;
}

double tool_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
