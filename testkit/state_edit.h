/* state_edit.h — editing saved memory states the way an attacker would (tests and fuzz targets): find a
 * section's payload, then re-seal the blob (recompute the header and section checksums) so that a load gets
 * past the checksums, which are xxh3 and authenticate nothing, to the checks behind them.
 *
 * The layout is state_io.c's: a header of 28 bytes, desc_len description bytes and an 8-byte checksum, then
 * sections {u32 type, u32 0, u64 length, payload, u64 checksum}. */
#ifndef BRAID_TESTS_STATE_EDIT_H
#define BRAID_TESTS_STATE_EDIT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/hash.h"

enum { STATE_SEC_LAYOUT = 1, STATE_SEC_CELLS, STATE_SEC_SEQ, STATE_SEC_HIST, STATE_SEC_KVLIST, STATE_SEC_RS,
       STATE_SEC_END };

static inline uint64_t state_rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Offset of the first section (after the header), or 0 if the header does not fit. */
static inline size_t state_first_section(const uint8_t *d, size_t n) {
    if (n < 28) return 0;
    uint32_t dl;
    memcpy(&dl, d + 24, 4);
    if (dl > n - 28 || n - 28 - dl < 8) return 0;
    return 28 + (size_t)dl + 8;
}

/* Offset of the payload of the k-th (0-based) section of this type, its length in *len; 0 if there is none. */
static inline size_t state_find_section(const uint8_t *d, size_t n, uint32_t type, int k, uint64_t *len) {
    size_t off = state_first_section(d, n);
    if (!off) return 0;
    while (n - off >= 16) {
        uint32_t t;
        memcpy(&t, d + off, 4);
        uint64_t l = state_rd64(d + off + 8);
        if (l > n - off - 16 || n - off - 16 - l < 8) return 0;
        if (t == type && k-- == 0) {
            *len = l;
            return off + 16;
        }
        off += 16 + (size_t)l + 8;
    }
    return 0;
}

/* Recomputes the header and section checksums in place (as far as the structure can be followed). */
static inline void state_reseal(uint8_t *d, size_t n) {
    size_t off = state_first_section(d, n);
    if (!off) return;
    bd_hasher h;
    if (!bd_hasher_init(&h, 0)) return;
    bd_hasher_update(&h, d, off - 8);
    uint64_t sum = bd_hasher_digest(&h);
    bd_hasher_free(&h);
    memcpy(d + off - 8, &sum, 8);
    while (n - off >= 16) {
        uint32_t type;
        memcpy(&type, d + off, 4);
        uint64_t len = state_rd64(d + off + 8);
        if (len > n - off - 16 || n - off - 16 - len < 8) return;
        sum = bd_hash64(d + off + 16, (size_t)len, type);
        memcpy(d + off + 16 + len, &sum, 8);
        off += 16 + (size_t)len + 8;
    }
}

#endif
