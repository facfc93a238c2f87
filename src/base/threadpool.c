/* threadpool.c — persistent fork-join pool (see threadpool.h).
 *
 * Synchronisation is three 32-bit atomic words, each usable as a Linux futex:
 *   gen      incremented by the caller to start a job; workers wait for it to change;
 *   pending  workers still running the current job; the caller waits for it to reach 0;
 *   bar_gen  incremented by the last thread to arrive at a barrier; the others wait for it to change.
 * A waiter spins for a while first (the next op usually follows within microseconds during decode) and then
 * sleeps in futex_wait. Wakers only make the futex_wake system call when someone announced that it sleeps, so
 * a busy decode loop makes no system calls at all. The "announce, then futex_wait(word, seen)" order cannot
 * lose a wake-up: futex_wait returns at once if the word already changed, and the sequentially consistent
 * increment of the sleeper count is ordered against the waker's read of it. */
#include "base/threadpool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/alloc.h"

/* Spin iterations before sleeping; with a pause of ~40-140 cycles this is a few hundred microseconds. */
#define TP_SPIN 4096

typedef struct tp_worker {
    bd_threadpool *tp;
    int ith;
} tp_worker;

struct bd_threadpool {
    int n; /* threads including the caller */
    pthread_t *threads; /* [n-1] */
    tp_worker *workers; /* [n-1] */

    bd_task_fn fn; /* the current job, published before gen is incremented */
    void *arg;
    int stop;

    _Atomic uint32_t gen;
    _Atomic uint32_t pending;
    _Atomic int gen_sleepers;     /* workers sleeping on gen */
    _Atomic int pending_sleeper;  /* 1 while the caller sleeps on pending */

    _Atomic uint32_t bar_count;
    _Atomic uint32_t bar_gen;
    _Atomic int bar_sleepers;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void futex_wait(_Atomic uint32_t *word, uint32_t seen) {
    /* Spurious and EINTR/EAGAIN returns are fine: every caller re-checks in a loop. */
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Waits until *word != seen: spin, then sleep announced through *sleepers. Returns the new value. */
static uint32_t wait_change(_Atomic uint32_t *word, uint32_t seen, _Atomic int *sleepers) {
    uint32_t v;
    for (int i = 0; i < TP_SPIN; i++) {
        v = atomic_load_explicit(word, memory_order_acquire);
        if (v != seen) return v;
        cpu_relax();
    }
    for (;;) {
        atomic_fetch_add(sleepers, 1);
        v = atomic_load(word);
        if (v == seen) futex_wait(word, seen);
        atomic_fetch_sub(sleepers, 1);
        v = atomic_load_explicit(word, memory_order_acquire);
        if (v != seen) return v;
    }
}

static void *tp_worker_main(void *p) {
    tp_worker *w = p;
    bd_threadpool *tp = w->tp;
    uint32_t seen = 0;
    for (;;) {
        seen = wait_change(&tp->gen, seen, &tp->gen_sleepers);
        if (tp->stop) break;
        tp->fn(tp->arg, w->ith, tp->n);
        if (atomic_fetch_sub(&tp->pending, 1) == 1 && atomic_load(&tp->pending_sleeper)) futex_wake_all(&tp->pending);
    }
    return NULL;
}

braid_status bd_threadpool_new(int n_threads, bd_threadpool **out) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024) return bd_error(BRAID_E_INVALID, "threadpool: %d threads", n_threads);
    bd_threadpool *tp = bd_calloc(1, sizeof *tp);
    if (!tp) return bd_error(BRAID_E_NOMEM, "threadpool: out of memory");
    tp->n = n_threads;
    if (n_threads > 1) {
        tp->threads = bd_calloc((size_t)n_threads - 1, sizeof *tp->threads);
        tp->workers = bd_calloc((size_t)n_threads - 1, sizeof *tp->workers);
        if (!tp->threads || !tp->workers) {
            bd_free(tp->threads);
            bd_free(tp->workers);
            bd_free(tp);
            return bd_error(BRAID_E_NOMEM, "threadpool: out of memory");
        }
    }
    for (int i = 0; i < n_threads - 1; i++) {
        tp->workers[i] = (tp_worker){tp, i + 1};
        int rc = pthread_create(&tp->threads[i], NULL, tp_worker_main, &tp->workers[i]);
        if (rc != 0) {
            tp->n = i + 1; /* join the ones that started */
            bd_threadpool_free(tp);
            return bd_error(BRAID_E_NOMEM, "threadpool: cannot create thread %d of %d (error %d)", i + 1, n_threads,
                            rc);
        }
    }
    *out = tp;
    return BRAID_OK;
}

void bd_threadpool_free(bd_threadpool *tp) {
    if (!tp) return;
    if (tp->n > 1) {
        tp->stop = 1;
        atomic_fetch_add(&tp->gen, 1);
        futex_wake_all(&tp->gen);
        for (int i = 0; i < tp->n - 1; i++) pthread_join(tp->threads[i], NULL);
    }
    bd_free(tp->threads);
    bd_free(tp->workers);
    bd_free(tp);
}

int bd_threadpool_size(const bd_threadpool *tp) { return tp ? tp->n : 1; }

void bd_threadpool_run(bd_threadpool *tp, bd_task_fn fn, void *arg) {
    if (!tp || tp->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    tp->fn = fn;
    tp->arg = arg;
    atomic_store(&tp->pending, (uint32_t)(tp->n - 1));
    atomic_fetch_add(&tp->gen, 1); /* seq_cst: publishes fn/arg and orders against the sleeper count read */
    if (atomic_load(&tp->gen_sleepers)) futex_wake_all(&tp->gen);

    fn(arg, 0, tp->n);

    uint32_t p;
    for (int i = 0; i < TP_SPIN; i++) {
        if (atomic_load_explicit(&tp->pending, memory_order_acquire) == 0) return;
        cpu_relax();
    }
    while ((p = atomic_load(&tp->pending)) != 0) {
        atomic_store(&tp->pending_sleeper, 1);
        p = atomic_load(&tp->pending);
        if (p != 0) futex_wait(&tp->pending, p);
        atomic_store(&tp->pending_sleeper, 0);
    }
    atomic_thread_fence(memory_order_acquire);
}

void bd_threadpool_barrier(bd_threadpool *tp) {
    if (!tp || tp->n == 1) return;
    uint32_t g = atomic_load(&tp->bar_gen);
    if (atomic_fetch_add(&tp->bar_count, 1) == (uint32_t)tp->n - 1) {
        atomic_store(&tp->bar_count, 0);
        atomic_fetch_add(&tp->bar_gen, 1);
        if (atomic_load(&tp->bar_sleepers)) futex_wake_all(&tp->bar_gen);
        return;
    }
    wait_change(&tp->bar_gen, g, &tp->bar_sleepers);
}
