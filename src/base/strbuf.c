/* strbuf.c — see strbuf.h. */
#include "base/strbuf.h"

#include <stdint.h>

#include "base/alloc.h"
#include "base/status.h"

void bd_strbuf_put(bd_strbuf *b, const void *s, size_t n) {
    if (b->err != BRAID_OK) return;
    if (n > SIZE_MAX / 2 - b->n - 1) {
        b->err = bd_error(BRAID_E_NOMEM, "string of %zu + %zu bytes", b->n, n);
        return;
    }
    if (b->n + n + 1 > b->cap) {
        /* Doubling keeps appends amortized O(1) for byte-at-a-time builders. */
        size_t cap = (b->n + n + 1) * 2;
        char *p = bd_realloc(b->p, cap);
        if (!p) {
            b->err = bd_error(BRAID_E_NOMEM, "out of memory for a string of %zu bytes", cap);
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void bd_strbuf_put_cp(bd_strbuf *b, uint32_t c) {
    char u[4];
    size_t n;
    if (c < 0x80) {
        u[0] = (char)c, n = 1;
    } else if (c < 0x800) {
        u[0] = (char)(0xC0 | c >> 6), u[1] = (char)(0x80 | (c & 63)), n = 2;
    } else if (c < 0x10000) {
        u[0] = (char)(0xE0 | c >> 12), u[1] = (char)(0x80 | (c >> 6 & 63)), u[2] = (char)(0x80 | (c & 63)), n = 3;
    } else if (c <= 0x10FFFF) {
        u[0] = (char)(0xF0 | c >> 18), u[1] = (char)(0x80 | (c >> 12 & 63)), u[2] = (char)(0x80 | (c >> 6 & 63));
        u[3] = (char)(0x80 | (c & 63)), n = 4;
    } else {
        if (b->err == BRAID_OK) b->err = bd_error(BRAID_E_RANGE, "code point U+%X is beyond U+10FFFF", c);
        return;
    }
    bd_strbuf_put(b, u, n);
}

void bd_strbuf_free(bd_strbuf *b) {
    bd_free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
    b->err = BRAID_OK;
}
