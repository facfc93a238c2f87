/* log.c — leveled logging to stderr (see log.h). */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Atomic unsigned long warn_count;

static int threshold(void) {
    static int level = -1;
    if (level < 0) {
        const char *e = getenv("BRAID_LOG");
        level = BD_LOG_WARN;
        if (e) {
            if (!strcmp(e, "error")) level = BD_LOG_ERROR;
            else if (!strcmp(e, "info")) level = BD_LOG_INFO;
            else if (!strcmp(e, "debug")) level = BD_LOG_DEBUG;
        }
    }
    return level;
}

void bd_log(int level, const char *fmt, ...) {
    static const char *const names[] = {"error", "warn", "info", "debug"};
    if (level <= BD_LOG_WARN) warn_count++;
    if (level > threshold()) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "braid %s: ", names[level < 0 ? 0 : level > 3 ? 3 : level]);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

unsigned long bd_log_warn_count(void) { return warn_count; }
