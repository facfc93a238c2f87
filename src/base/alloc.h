/* alloc.h — the one allocation path of braid, with failure injection for tests.
 *
 * All library allocations go through bd_malloc / bd_calloc / bd_realloc / bd_free so that a test can make the
 * n-th allocation fail (bd_alloc_fail_at) and check that the operation reports BRAID_E_NOMEM and leaves every
 * structure unchanged (SQLite's way of trusting its error paths). Sizes are checked for overflow here, so
 * callers can pass a count and an element size. Memory from these functions is released with bd_free (or
 * braid_free for buffers handed to the caller). */
#ifndef BRAID_BASE_ALLOC_H
#define BRAID_BASE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *bd_malloc(size_t size);                  /* NULL on failure (or injected failure) */
void *bd_calloc(size_t count, size_t size);    /* zeroed; NULL on overflow of count*size */
void *bd_mallocn(size_t count, size_t size);   /* uninitialised; NULL on overflow of count*size */
void *bd_realloc(void *p, size_t size);        /* on failure p is untouched */
void *bd_aligned_alloc(size_t align, size_t size); /* align: a power of two >= sizeof(void*); free with bd_free */
void bd_free(void *p);
char *bd_strdup(const char *s);
char *bd_strndup(const char *s, size_t n);

/* Failure injection (tests only). bd_alloc_fail_at(n): the n-th allocation from now (1-based) and, if
 * `sticky`, every one after it fails; n = 0 turns injection off. bd_alloc_count() counts allocations made
 * since the last bd_alloc_fail_at / bd_alloc_reset_count, to find how many sites an operation has. */
void bd_alloc_fail_at(uint64_t n, int sticky);
uint64_t bd_alloc_count(void);
void bd_alloc_reset_count(void);

/* Overflow-checked arithmetic on sizes: return 0 on overflow, 1 otherwise. */
static inline int bd_mul_size(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline int bd_add_size(size_t a, size_t b, size_t *out) { return !__builtin_add_overflow(a, b, out); }

#endif
