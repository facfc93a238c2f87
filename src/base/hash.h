/* hash.h — the hashes braid uses: XXH3-64 (Debian's libxxhash) for state-section checksums, the model
 * fingerprint and prompt-prefix hashing. One place so that the choice is made once. */
#ifndef BRAID_BASE_HASH_H
#define BRAID_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t bd_hash64(const void *data, size_t len, uint64_t seed);

/* Streaming form, for hashing many pieces without concatenating them. */
typedef struct bd_hasher {
    void *state; /* XXH3_state_t, owned */
} bd_hasher;

int bd_hasher_init(bd_hasher *h, uint64_t seed); /* 0 on allocation failure */
void bd_hasher_update(bd_hasher *h, const void *data, size_t len);
uint64_t bd_hasher_digest(const bd_hasher *h);
void bd_hasher_free(bd_hasher *h);

#endif
