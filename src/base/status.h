/* status.h — internal side of braid_status: recording the human reason for a failure.
 *
 * Every fallible internal function returns a braid_status. The one that detects a failure calls bd_error(),
 * which formats the reason into a thread-local buffer (read by braid_last_error()) and returns the status, so
 * a failure is reported in one line: `return bd_error(BRAID_E_FORMAT, "gguf: bad magic at offset %zu", off);`.
 * Callers that pass a failure up return it unchanged, keeping the innermost reason. */
#ifndef BRAID_BASE_STATUS_H
#define BRAID_BASE_STATUS_H

#include "braid.h"

#if defined(__GNUC__) || defined(__clang__)
#define BD_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define BD_PRINTF(a, b)
#endif

/* Records the reason and returns s. */
braid_status bd_error(braid_status s, const char *fmt, ...) BD_PRINTF(2, 3);
/* Forgets the last reason (braid_last_error() returns ""). */
void bd_error_clear(void);

/* Propagate a failure: BD_TRY(f(x)); returns f's status from the enclosing function if it is not BRAID_OK. */
#define BD_TRY(expr)                                                                                            \
    do {                                                                                                        \
        braid_status bd_try_s_ = (expr);                                                                        \
        if (bd_try_s_ != BRAID_OK) return bd_try_s_;                                                            \
    } while (0)

#endif
