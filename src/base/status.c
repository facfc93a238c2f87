/* status.c — status names and the thread-local "last error" text behind braid_last_error(). */
#include "base/status.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[1024];

static const char *const status_names[BRAID_STATUS_COUNT] = {
    [BRAID_OK] = "BRAID_OK",
    [BRAID_E_INVALID] = "BRAID_E_INVALID",
    [BRAID_E_RANGE] = "BRAID_E_RANGE",
    [BRAID_E_NOMEM] = "BRAID_E_NOMEM",
    [BRAID_E_IO] = "BRAID_E_IO",
    [BRAID_E_FORMAT] = "BRAID_E_FORMAT",
    [BRAID_E_MISMATCH] = "BRAID_E_MISMATCH",
    [BRAID_E_UNSUPPORTED] = "BRAID_E_UNSUPPORTED",
    [BRAID_E_FULL] = "BRAID_E_FULL",
    [BRAID_E_CANCELLED] = "BRAID_E_CANCELLED",
};

const char *braid_status_name(braid_status s) {
    if ((unsigned)s >= BRAID_STATUS_COUNT) return "BRAID_E_UNKNOWN";
    return status_names[s];
}

const char *braid_last_error(void) { return last_error; }

braid_status bd_error(braid_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

void bd_error_clear(void) { last_error[0] = '\0'; }
