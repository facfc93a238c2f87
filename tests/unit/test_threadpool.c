/* test_threadpool.c — the pool runs a task on every thread exactly once per dispatch, the barrier separates
 * phases, splits cover every item once, and a computation split by (ith, nth) gives the same bits for 1 and
 * N threads. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/threadpool.h"
#include "test.h"

typedef struct count_arg {
    _Atomic int calls;
    _Atomic int seen_mask;
    int nth_seen;
} count_arg;

static void count_task(void *p, int ith, int nth) {
    count_arg *a = p;
    atomic_fetch_add(&a->calls, 1);
    atomic_fetch_or(&a->seen_mask, 1 << ith);
    if (ith == 0) a->nth_seen = nth;
}

/* Phase 1 writes v[i] = i for the thread's share; after the barrier each thread reads the mirrored share,
 * written by another thread. Without the barrier the reads would see zeros. */
typedef struct phase_arg {
    bd_threadpool *tp;
    int64_t n;
    int *v;
    _Atomic int bad;
} phase_arg;

static void phase_task(void *p, int ith, int nth) {
    phase_arg *a = p;
    for (int round = 0; round < 3; round++) {
        int64_t b, e;
        bd_split(a->n, ith, nth, &b, &e);
        for (int64_t i = b; i < e; i++) a->v[i] = (int)i + round;
        bd_threadpool_barrier(a->tp);
        bd_split(a->n, nth - 1 - ith, nth, &b, &e);
        for (int64_t i = b; i < e; i++)
            if (a->v[i] != (int)i + round) atomic_fetch_add(&a->bad, 1);
        bd_threadpool_barrier(a->tp);
    }
}

/* A float computation whose per-item result does not depend on the split. */
typedef struct sum_arg {
    const float *x;
    float *y;
    int64_t rows, cols;
} sum_arg;

static void sum_task(void *p, int ith, int nth) {
    sum_arg *a = p;
    int64_t b, e;
    bd_split_aligned(a->rows, 4, ith, nth, &b, &e);
    for (int64_t r = b; r < e; r++) {
        float s = 0;
        for (int64_t c = 0; c < a->cols; c++) s += a->x[r * a->cols + c] * 1.0001f;
        a->y[r] = sinf(s);
    }
}

int main(void) {
    /* split: every item exactly once, shares differ by at most 1 (aligned: multiples of align). */
    for (int nth = 1; nth <= 7; nth++) {
        for (int64_t n = 0; n < 40; n++) {
            int64_t next = 0, next_a = 0;
            int ok = 1, ok_a = 1;
            for (int i = 0; i < nth; i++) {
                int64_t b, e;
                bd_split(n, i, nth, &b, &e);
                ok &= b == next && e >= b && (e - b) <= n / nth + 1;
                next = e;
                bd_split_aligned(n, 4, i, nth, &b, &e);
                ok_a &= b == next_a && e >= b && (b % 4 == 0) && (e == n || e % 4 == 0);
                next_a = e;
            }
            CHECK(ok && next == n, "split n=%lld nth=%d", (long long)n, nth);
            CHECK(ok_a && next_a == n, "aligned split n=%lld nth=%d", (long long)n, nth);
        }
    }

    /* Bad sizes are refused with a reason. */
    bd_threadpool *bad = NULL;
    CHECK_STATUS(bd_threadpool_new(0, &bad), BRAID_E_INVALID);
    CHECK(bad == NULL, "no pool on failure");
    /* An allocation failure is reported, not crashed on. */
    bd_alloc_fail_at(1, 0);
    CHECK_STATUS(bd_threadpool_new(3, &bad), BRAID_E_NOMEM);
    bd_alloc_fail_at(2, 0);
    CHECK_STATUS(bd_threadpool_new(3, &bad), BRAID_E_NOMEM);
    bd_alloc_fail_at(0, 0);

    const int64_t rows = 1001, cols = 97;
    float *x = bd_mallocn((size_t)(rows * cols), sizeof(float));
    float *y1 = bd_calloc((size_t)rows, sizeof(float)), *yn = bd_calloc((size_t)rows, sizeof(float));
    int *v = bd_calloc(4096, sizeof(int));
    for (int64_t i = 0; i < rows * cols; i++) x[i] = (float)((i * 2654435761u) % 1000) / 997.0f - 0.5f;
    sum_arg s1 = {x, y1, rows, cols};
    bd_threadpool_run(NULL, sum_task, &s1); /* NULL pool: caller only */

    for (int n = 1; n <= 4; n++) {
        bd_threadpool *tp = NULL;
        CHECK_STATUS(bd_threadpool_new(n, &tp), BRAID_OK);
        if (!tp) continue;
        CHECK(bd_threadpool_size(tp) == n, "size %d", n);
        /* Many back-to-back dispatches (the decode pattern), then one after the workers went to sleep. */
        int ok = 1;
        for (int rep = 0; rep < 2000; rep++) {
            count_arg c = {0};
            bd_threadpool_run(tp, count_task, &c);
            ok &= c.calls == n && c.seen_mask == (1 << n) - 1 && c.nth_seen == n;
        }
        CHECK(ok, "every thread runs each task once (n=%d)", n);
        struct timespec ts = {0, 30 * 1000 * 1000};
        nanosleep(&ts, NULL);
        count_arg c = {0};
        bd_threadpool_run(tp, count_task, &c);
        CHECK(c.calls == n, "dispatch after sleep (n=%d): %d calls", n, (int)c.calls);

        phase_arg ph = {tp, 4096, v, 0};
        for (int rep = 0; rep < 50; rep++) bd_threadpool_run(tp, phase_task, &ph);
        CHECK(ph.bad == 0, "barrier orders phases (n=%d): %d bad reads", n, (int)ph.bad);

        memset(yn, 0, (size_t)rows * sizeof(float));
        sum_arg sn = {x, yn, rows, cols};
        bd_threadpool_run(tp, sum_task, &sn);
        CHECK(!memcmp(y1, yn, (size_t)rows * sizeof(float)), "identical bits for 1 and %d threads", n);
        bd_threadpool_free(tp);
    }
    bd_threadpool_free(NULL);
    bd_free(x);
    bd_free(y1);
    bd_free(yn);
    bd_free(v);
    TEST_MAIN_END();
}
