/* utf8.h — strict UTF-8 checking for GGUF keys and tensor names (and for escaping strings when printing). */
#ifndef BRAID_GGUF_UTF8_H
#define BRAID_GGUF_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length (1..4) of the well-formed UTF-8 sequence at s (n bytes available), or 0 if s does not start one:
 * overlong forms, surrogates and code points above U+10FFFF are not well-formed. */
size_t gguf_utf8_seq(const uint8_t *s, size_t n);
/* 1 if s[0..n) is well-formed UTF-8 without NUL bytes. */
int gguf_utf8_valid_nonul(const uint8_t *s, size_t n);

#endif
