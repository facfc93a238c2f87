/* threadpool.h — a persistent pool of threads that runs one task on all of them at once (fork-join).
 *
 * Kernels run per op during decode, where an op may take only a few microseconds, so a dispatch must cost
 * far less than that: the workers are created once, spin briefly on a generation counter after each job and
 * only then sleep on a futex; a dispatch allocates nothing. The caller is thread 0 and works too, so a pool
 * of n threads has n-1 workers.
 *
 * Determinism: a task receives (ith, nth) and must split its work by those numbers only (bd_split gives the
 * usual contiguous split). Nothing depends on timing, so results are the same on every run; a kernel that
 * computes each output element the same way whatever the split gives identical bits for any thread count.
 *
 * One thread drives a pool at a time (the context's thread); tasks must not dispatch on the same pool. */
#ifndef BRAID_BASE_THREADPOOL_H
#define BRAID_BASE_THREADPOOL_H

#include <stdint.h>

#include "base/status.h"

typedef struct bd_threadpool bd_threadpool;

/* Runs on every thread of the pool during bd_threadpool_run: ith in [0, nth), nth = pool size. */
typedef void (*bd_task_fn)(void *arg, int ith, int nth);

/* Creates a pool of n_threads threads including the caller (n_threads >= 1; 1 means no worker threads).
 * On success *out owns the threads; release with bd_threadpool_free. */
braid_status bd_threadpool_new(int n_threads, bd_threadpool **out);
/* Stops and joins the workers and frees the pool. NULL is allowed. */
void bd_threadpool_free(bd_threadpool *tp);
/* Number of threads including the caller (1 for a NULL pool). */
int bd_threadpool_size(const bd_threadpool *tp);

/* Runs fn(arg, ith, nth) on every thread (the caller is ith 0) and returns when all have returned.
 * A NULL pool runs fn(arg, 0, 1) on the caller. */
void bd_threadpool_run(bd_threadpool *tp, bd_task_fn fn, void *arg);

/* Inside a task: waits until every thread of the pool has reached this barrier (all nth threads must call it
 * the same number of times). Memory written before the barrier is visible to every thread after it. A NULL
 * pool returns at once. */
void bd_threadpool_barrier(bd_threadpool *tp);

/* The contiguous share [*begin, *end) of n items for thread ith of nth; shares differ by at most one item. */
static inline void bd_split(int64_t n, int ith, int nth, int64_t *begin, int64_t *end) {
    *begin = n * ith / nth;
    *end = n * (ith + 1) / nth;
}

/* Like bd_split but every share except the last is a multiple of `align` items (for kernels that work on
 * blocks of rows). */
static inline void bd_split_aligned(int64_t n, int64_t align, int ith, int nth, int64_t *begin, int64_t *end) {
    int64_t blocks = (n + align - 1) / align;
    int64_t b0 = blocks * ith / nth, b1 = blocks * (ith + 1) / nth;
    *begin = b0 * align < n ? b0 * align : n;
    *end = b1 * align < n ? b1 * align : n;
}

#endif
