/* unicode.c — codepoint classes (two-level table built from the generated ranges), llama.cpp-compatible UTF-8
 * decoding, encoding and GPT-2's byte-level map. See unicode.h. */
#include "tokenizer/unicode.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define UC_BLOCKS (0x110000 / 256)

/* Built once and never freed: ~4352 block ids plus the distinct 256-codepoint blocks (a few hundred KB at
 * most). Static storage so that no allocation can fail here. */
static uint16_t stage1[UC_BLOCKS];
static uint8_t stage2[UC_BLOCKS * 256];
const uint16_t *tok_uc_stage1_ = stage1;
const uint8_t *tok_uc_stage2_ = stage2;
static pthread_once_t uc_once = PTHREAD_ONCE_INIT;

static void uc_build(void) {
    uint8_t block[256];
    unsigned n_unique = 0, r = 0;
    for (unsigned b = 0; b < UC_BLOCKS; b++) {
        for (unsigned k = 0; k < 256; k++) {
            uint32_t cp = b * 256 + k;
            while (r + 1 < tok_uc_n_ranges && tok_uc_ranges[r + 1].start <= cp) r++;
            block[k] = tok_uc_ranges[r].cls;
        }
        /* Most blocks repeat an earlier one (unassigned planes, CJK, private use): reuse it. Comparing with
         * the last few unique blocks is enough to find nearly all repeats cheaply. */
        unsigned found = UC_BLOCKS;
        for (unsigned u = n_unique; u-- > 0 && n_unique - u <= 8;)
            if (!memcmp(stage2 + (size_t)u * 256, block, 256)) { found = u; break; }
        if (found == UC_BLOCKS) {
            memcpy(stage2 + (size_t)n_unique * 256, block, 256);
            found = n_unique++;
        }
        stage1[b] = (uint16_t)found;
    }
}

void tok_unicode_init(void) { pthread_once(&uc_once, uc_build); }

uint32_t tok_utf8_decode(const uint8_t *s, size_t n, size_t *i) {
    size_t o = *i;
    uint8_t c = s[o];
    if (c < 0x80) {
        *i = o + 1;
        return c;
    }
    /* A continuation byte, or 0xF8..0xFF, cannot start a sequence. */
    if (!(c & 0x40) || (c & 0xF8) == 0xF8) goto bad;
    if (!(c & 0x20)) {
        if (o + 1 >= n || (s[o + 1] & 0xC0) != 0x80) goto bad;
        *i = o + 2;
        return ((uint32_t)(c & 0x1F) << 6) | (s[o + 1] & 0x3F);
    }
    if (!(c & 0x10)) {
        if (o + 2 >= n || (s[o + 1] & 0xC0) != 0x80 || (s[o + 2] & 0xC0) != 0x80) goto bad;
        *i = o + 3;
        return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[o + 1] & 0x3F) << 6) | (s[o + 2] & 0x3F);
    }
    if (o + 3 >= n || (s[o + 1] & 0xC0) != 0x80 || (s[o + 2] & 0xC0) != 0x80 || (s[o + 3] & 0xC0) != 0x80) goto bad;
    {
        uint32_t v = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[o + 1] & 0x3F) << 12) |
                     ((uint32_t)(s[o + 2] & 0x3F) << 6) | (s[o + 3] & 0x3F);
        /* llama.cpp decodes 0xF4 0x90.. and 0xF5..0xF7 leads to values past U+10FFFF and then throws from
         * its encoder (the process aborts); braid treats such a lead byte as invalid instead. */
        if (v > 0x10FFFF) goto bad;
        *i = o + 4;
        return v;
    }
bad:
    *i = o + 1;
    return 0xFFFD;
}

size_t tok_utf8_encode(uint32_t cp, uint8_t *out) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp < 0x110000) {
        out[0] = (uint8_t)(0xF0 | (cp >> 18));
        out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (uint8_t)(0x80 | (cp & 0x3F));
        return 4;
    }
    return 0;
}

/* GPT-2 byte map: the printable bytes ! .. ~, ¡ .. ¬ and ® .. ÿ stand for themselves; the other 68 bytes, in
 * increasing order, get U+0100, U+0101, ... */
static int byte_is_self(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

uint32_t tok_byte_to_cp(uint8_t b) {
    if (byte_is_self(b)) return b;
    unsigned n = 0;
    for (unsigned k = 0; k < b; k++) n += !byte_is_self(k);
    return 256 + n;
}

int tok_cp_to_byte(uint32_t cp) {
    if (cp < 256) return byte_is_self(cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1;
    unsigned n = 0;
    for (unsigned k = 0; k < 256; k++) {
        if (byte_is_self(k)) continue;
        if (n == cp - 256) return (int)k;
        n++;
    }
    return -1;
}

uint32_t tok_uc_map_get(const tok_uc_map *m, unsigned n, uint32_t cp) {
    unsigned lo = 0, hi = n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (m[mid].from < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && m[lo].from == cp ? m[lo].to : cp;
}
