/* utf8.c — strict UTF-8 validation (RFC 3629 table of well-formed byte sequences). */
#include "gguf/utf8.h"

size_t gguf_utf8_seq(const uint8_t *s, size_t n) {
    if (n == 0) return 0;
    uint8_t c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;      /* overlong */
        else if (c == 0xED) hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;      /* overlong */
        else if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else {
        return 0;
    }
    if (n < len) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return len;
}

int gguf_utf8_valid_nonul(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] == 0) return 0;
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t l = gguf_utf8_seq(s + i, n - i);
        if (!l) return 0;
        i += l;
    }
    return 1;
}
