/* radix.h — a radix tree (compressed trie) over token-id sequences, the index of the prompt cache: each key
 * (a cached prompt's tokens) is stored once under an id, keys sharing a prefix share the nodes of that prefix,
 * and a lookup gives the length of the longest prefix a query shares with any key and the ids of the keys
 * sharing it. The tree owns copies of the edge tokens; ids are the caller's (prompt_cache.c: entry numbers).
 * Insertion allocates everything it needs before it links anything, so a failure leaves the tree as it was. */
#ifndef BRAID_ENGINE_RADIX_H
#define BRAID_ENGINE_RADIX_H

#include <stdint.h>

#include "braid.h"

typedef struct bd_radix bd_radix;

braid_status bd_radix_new(bd_radix **out);
void bd_radix_free(bd_radix *t); /* NULL allowed */

/* Adds key tok[0 .. n) (n >= 1) under id >= 0. BRAID_E_INVALID if that exact key is already there (an id per
 * key), BRAID_E_NOMEM with the tree unchanged. */
braid_status bd_radix_insert(bd_radix *t, const braid_token *tok, int32_t n, int32_t id);
/* Removes key tok[0 .. n) if it is stored under id; returns 1 if it was, 0 otherwise. Never fails. */
int bd_radix_remove(bd_radix *t, const braid_token *tok, int32_t n, int32_t id);
/* The longest prefix tok[0 .. d) that some key shares (returned), and the ids of every key sharing it (at
 * most cap written to ids, *n_ids gets the total). d = 0: no key starts like tok, *n_ids = 0. */
int32_t bd_radix_match(const bd_radix *t, const braid_token *tok, int32_t n, int32_t *ids, int32_t cap,
                       int32_t *n_ids);
/* The id stored under exactly tok[0 .. n), or -1. */
int32_t bd_radix_find(const bd_radix *t, const braid_token *tok, int32_t n);
int32_t bd_radix_n_keys(const bd_radix *t);
int32_t bd_radix_n_nodes(const bd_radix *t); /* root excluded */

/* Verifies the invariants (key counts, no empty edge, children start with distinct tokens, no empty leaf);
 * BRAID_E_INVALID with the reason. For tests. */
braid_status bd_radix_check(const bd_radix *t);

#endif
