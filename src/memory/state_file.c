/* state_file.c — memory states to and from files (the format itself is state_io.c).
 *
 * Saving never exposes a half-written file under the caller's name: the state is written to a temporary file in
 * the same directory (so the final rename stays on one file system and is atomic), flushed to the disk, and
 * only then renamed over `path`. A prompt cache or session file that existed before a failed save is therefore
 * still the last good one, which is what a user who saves periodically relies on.
 *
 * Loading maps the file read-only instead of reading it into a buffer: the loader parses and verifies the
 * bytes in place before it changes anything, so the copy bought nothing but doubled peak memory. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/file.h"
#include "base/status.h"
#include "memory/memory.h"

static braid_status file_write(void *user, const void *data, size_t n) {
    if (fwrite(data, 1, n, (FILE *)user) != n) return bd_error(BRAID_E_IO, "state: write failed: %s", strerror(errno));
    return BRAID_OK;
}

/* Creates the temporary "<path>.tmp.<pid>.<n>" exclusively, with the mode a plain creation would give (0666
 * less the umask, applied by open itself) or, when it replaces a file, that file's mode: a saved state should
 * not change who may read it. (Not mkstemp: its 0600 would have to be widened by reading the umask, which can
 * only be done by setting it, a race with other threads creating files.) *tmp is bd_malloc'd; NULL on failure. */
static int open_temp(const char *path, char **tmp) {
    static _Atomic unsigned serial;
    size_t cap = strlen(path) + 48;
    if (!(*tmp = bd_malloc(cap))) {
        errno = ENOMEM;
        return -1;
    }
    struct stat old;
    const int replace = stat(path, &old) == 0;
    for (int tries = 0; tries < 100; tries++) {
        snprintf(*tmp, cap, "%s.tmp.%ld.%u", path, (long)getpid(), serial++);
        int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            if (replace) (void)fchmod(fd, old.st_mode & 07777);
            return fd;
        }
        if (errno != EEXIST) break;
    }
    int e = errno;
    bd_free(*tmp);
    *tmp = NULL;
    errno = e;
    return -1;
}

braid_status mem_state_save_file(const mem *m, int32_t s, uint64_t fingerprint, const char *desc, const char *path) {
    if (!path || !*path) return bd_error(BRAID_E_INVALID, "state: empty file name");
    char *tmp = NULL;
    int fd = open_temp(path, &tmp);
    if (fd < 0) {
        if (errno == ENOMEM) return bd_error(BRAID_E_NOMEM, "state: out of memory");
        return bd_error(BRAID_E_IO, "state: cannot create a file beside %s: %s", path, strerror(errno));
    }
    braid_status st = BRAID_OK;
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        st = bd_error(BRAID_E_IO, "state: cannot open %s: %s", tmp, strerror(errno));
        close(fd);
    } else {
        mem_writer w = {file_write, f};
        st = mem_state_save(m, s, fingerprint, desc, &w);
        /* Flush and sync before the rename: otherwise a crash soon after could leave the new name pointing at
         * a file whose blocks never reached the disk. */
        if (st == BRAID_OK && (fflush(f) != 0 || fsync(fileno(f)) != 0))
            st = bd_error(BRAID_E_IO, "state: writing %s failed: %s", path, strerror(errno));
        if (fclose(f) != 0 && st == BRAID_OK) st = bd_error(BRAID_E_IO, "state: writing %s failed: %s", path, strerror(errno));
    }
    if (st == BRAID_OK && rename(tmp, path) != 0)
        st = bd_error(BRAID_E_IO, "state: cannot replace %s: %s", path, strerror(errno));
    if (st != BRAID_OK) unlink(tmp);
    bd_free(tmp);
    return st;
}

braid_status mem_state_load_file(mem *m, int32_t s, uint64_t fingerprint, const char *path) {
    if (!path || !*path) return bd_error(BRAID_E_INVALID, "state: empty file name");
    int fd;
    uint64_t fsize;
    BD_TRY(bd_open_regular(path, "state", &fd, &fsize)); /* a FIFO must not block the caller */
    braid_status st = BRAID_OK;
    if (fsize == 0) {
        /* mmap refuses an empty range; the loader's own message for a short header is the useful one. */
        st = mem_state_load(m, s, fingerprint, "", 0);
    } else if (fsize > SIZE_MAX) {
        st = bd_error(BRAID_E_FORMAT, "state: %s is too large for this address space", path);
    } else {
        size_t n = (size_t)fsize;
        void *map = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            st = bd_error(BRAID_E_IO, "state: cannot map %s: %s", path, strerror(errno));
        } else {
            /* Read once front to back: the verification pass streams the whole file anyway. */
            (void)madvise(map, n, MADV_SEQUENTIAL);
            st = mem_state_load(m, s, fingerprint, map, n);
            munmap(map, n);
        }
    }
    close(fd);
    return st;
}
