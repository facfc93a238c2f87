/* log.h — diagnostics to stderr, filtered by level (BRAID_LOG=error|warn|info|debug; default warn).
 * Library code logs rarely: failures are reported through braid_status, not printed. */
#ifndef BRAID_BASE_LOG_H
#define BRAID_BASE_LOG_H

#include "base/status.h"

enum { BD_LOG_ERROR = 0, BD_LOG_WARN = 1, BD_LOG_INFO = 2, BD_LOG_DEBUG = 3 };

void bd_log(int level, const char *fmt, ...) BD_PRINTF(2, 3);
/* Number of warnings logged so far (tests assert that an operation produced none). */
unsigned long bd_log_warn_count(void);

#endif
