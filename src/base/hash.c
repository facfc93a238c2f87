/* hash.c — thin wrapper over XXH3-64 from libxxhash (see hash.h). */
#include "base/hash.h"

#include <xxhash.h>

uint64_t bd_hash64(const void *data, size_t len, uint64_t seed) { return XXH3_64bits_withSeed(data, len, seed); }

int bd_hasher_init(bd_hasher *h, uint64_t seed) {
    XXH3_state_t *st = XXH3_createState();
    if (!st) return 0;
    XXH3_64bits_reset_withSeed(st, seed);
    h->state = st;
    return 1;
}

void bd_hasher_update(bd_hasher *h, const void *data, size_t len) { XXH3_64bits_update(h->state, data, len); }

uint64_t bd_hasher_digest(const bd_hasher *h) { return XXH3_64bits_digest(h->state); }

void bd_hasher_free(bd_hasher *h) {
    XXH3_freeState(h->state);
    h->state = NULL;
}
