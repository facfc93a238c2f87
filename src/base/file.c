/* file.c — see file.h: opening files that loaders map or read, without blocking on a FIFO. */
#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/status.h"

braid_status bd_open_regular(const char *path, const char *what, int *fd, uint64_t *size) {
    *fd = -1;
    *size = 0;
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (f < 0) return bd_error(BRAID_E_IO, "%s: cannot open '%s': %s", what, path, strerror(errno));
    struct stat sb;
    if (fstat(f, &sb) != 0) {
        int e = errno;
        close(f);
        return bd_error(BRAID_E_IO, "%s: cannot stat '%s': %s", what, path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(f);
        const char *kind = S_ISFIFO(sb.st_mode) ? "a FIFO" : S_ISDIR(sb.st_mode) ? "a directory"
                           : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device" : S_ISSOCK(sb.st_mode) ? "a socket"
                                                                                                      : "not a file";
        return bd_error(BRAID_E_IO, "%s: '%s' is %s, not a regular file", what, path, kind);
    }
    int fl = fcntl(f, F_GETFL);
    if (fl >= 0) (void)fcntl(f, F_SETFL, fl & ~O_NONBLOCK); /* reads of a regular file then behave as usual */
    *fd = f;
    *size = (uint64_t)sb.st_size;
    return BRAID_OK;
}
