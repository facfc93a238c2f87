/* arena.h — carving one preallocated buffer into aligned pieces, and measuring how big it must be.
 *
 * A forward pass never allocates: its scratch is one buffer sized at context creation. The same carve code
 * runs twice: with base NULL it only adds up the sizes (every take returns NULL), with the real buffer it
 * hands out the pieces, so the size and the layout cannot disagree. */
#ifndef BRAID_BASE_ARENA_H
#define BRAID_BASE_ARENA_H

#include <stddef.h>
#include <stdint.h>

#define BD_ARENA_ALIGN 64 /* a cache line: no two pieces share one, and every piece suits aligned SIMD loads */

typedef struct bd_arena {
    char *base; /* NULL: measuring only */
    size_t off; /* bytes taken so far */
} bd_arena;

/* An arena over buf (NULL to measure); buf is aligned up to BD_ARENA_ALIGN, so give it that much slack. */
static inline bd_arena bd_arena_at(void *buf) {
    bd_arena a = {NULL, 0};
    if (buf) a.base = (char *)(((uintptr_t)buf + BD_ARENA_ALIGN - 1) & ~(uintptr_t)(BD_ARENA_ALIGN - 1));
    return a;
}

/* The next `bytes` bytes (NULL while measuring). */
static inline void *bd_arena_take(bd_arena *a, size_t bytes) {
    void *p = a->base ? a->base + a->off : NULL;
    a->off += (bytes + BD_ARENA_ALIGN - 1) & ~(size_t)(BD_ARENA_ALIGN - 1);
    return p;
}

static inline float *bd_arena_floats(bd_arena *a, size_t n) { return (float *)bd_arena_take(a, n * sizeof(float)); }

/* Bytes a buffer needs for what was taken, slack for the alignment included. */
static inline size_t bd_arena_size(const bd_arena *a) { return a->off + BD_ARENA_ALIGN; }

#endif
