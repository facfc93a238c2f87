/* file.h — opening a file that a loader will map or read whole (a model, a state file).
 *
 * A path comes from a user or a client and may name anything: a FIFO without a writer makes a plain open()
 * block forever, a device or a directory is no file to parse. bd_open_regular opens with O_NONBLOCK (which
 * never blocks on a FIFO and means nothing for a regular file), then refuses anything but a regular file, so
 * no path can wedge the calling thread. */
#ifndef BRAID_BASE_FILE_H
#define BRAID_BASE_FILE_H

#include <stdint.h>

#include "braid.h"

/* Opens path read-only (close-on-exec, blocking mode restored) into *fd and its size into *size. Fails with
 * BRAID_E_IO naming `what` ("model", "state") and the path: cannot open or stat, or not a regular file. */
BRAID_NODISCARD braid_status bd_open_regular(const char *path, const char *what, int *fd, uint64_t *size);

#endif
