/* alloc.c — allocation wrappers with overflow checks and test-time failure injection (see alloc.h). */
#include "base/alloc.h"

#include "braid.h" /* braid_free is public: its declaration gives it default visibility */

#include <stdlib.h>
#include <string.h>

/* Injection state is process-wide on purpose: a test drives one operation at a time. Atomics keep the
 * thread pool's allocations (if any) well-defined. */
static _Atomic uint64_t alloc_counter;
static _Atomic uint64_t fail_at;
static _Atomic int fail_sticky;

static int should_fail(void) {
    uint64_t n = ++alloc_counter;
    uint64_t f = fail_at;
    if (f == 0) return 0;
    return fail_sticky ? n >= f : n == f;
}

void bd_alloc_fail_at(uint64_t n, int sticky) {
    alloc_counter = 0;
    fail_sticky = sticky;
    fail_at = n;
}
uint64_t bd_alloc_count(void) { return alloc_counter; }
void bd_alloc_reset_count(void) { alloc_counter = 0; }

void *bd_malloc(size_t size) {
    if (should_fail()) return NULL;
    return malloc(size ? size : 1);
}

void *bd_mallocn(size_t count, size_t size) {
    size_t total;
    if (!bd_mul_size(count, size, &total)) return NULL;
    return bd_malloc(total);
}

void *bd_calloc(size_t count, size_t size) {
    size_t total;
    if (!bd_mul_size(count, size, &total)) return NULL;
    if (should_fail()) return NULL;
    return calloc(total ? total : 1, 1);
}

void *bd_realloc(void *p, size_t size) {
    if (should_fail()) return NULL;
    return realloc(p, size ? size : 1);
}

void *bd_aligned_alloc(size_t align, size_t size) {
    if (should_fail()) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, align, size ? size : align) != 0) return NULL;
    return p;
}

void bd_free(void *p) { free(p); }

char *bd_strndup(const char *s, size_t n) {
    char *d = bd_malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *bd_strdup(const char *s) { return bd_strndup(s, strlen(s)); }

void braid_free(void *p) { free(p); }
