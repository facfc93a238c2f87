/* strbuf.h — a growable, always NUL-terminated byte string, for the places that assemble text piece by piece
 * (generated test and benchmark inputs, messages). Memory comes from bd_realloc. Appends do not return a
 * status each: a failed append marks the buffer and every later append is ignored, so a builder of many
 * pieces checks once, with bd_strbuf_status, when it is done. The caller owns the buffer: bd_strbuf_free. */
#ifndef BRAID_BASE_STRBUF_H
#define BRAID_BASE_STRBUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "braid.h"

typedef struct bd_strbuf {
    char *p;        /* p[n] == 0 once anything was added; NULL before */
    size_t n, cap;
    braid_status err; /* first failure (BRAID_OK while none) */
} bd_strbuf;

/* Appends n bytes (NULs allowed). */
void bd_strbuf_put(bd_strbuf *b, const void *s, size_t n);
static inline void bd_strbuf_puts(bd_strbuf *b, const char *s) { bd_strbuf_put(b, s, strlen(s)); }
/* Appends the UTF-8 encoding of code point c (surrogates are encoded as they come: test inputs use them on
 * purpose to make invalid UTF-8); c > 0x10FFFF is a failure (BRAID_E_RANGE). */
void bd_strbuf_put_cp(bd_strbuf *b, uint32_t c);
/* BRAID_OK, or the first failure since the buffer was empty (its message was recorded then). */
static inline BRAID_NODISCARD braid_status bd_strbuf_status(const bd_strbuf *b) { return b->err; }
void bd_strbuf_free(bd_strbuf *b); /* back to empty; the struct itself is the caller's */

#endif
