/* tap.c — the process-wide tap callback (see tap.h). */
#include "tensor/tap.h"

#include <stddef.h>

bd_tap_fn bd_tap_cb = NULL;
void *bd_tap_user = NULL;

void bd_tap_set(bd_tap_fn fn, void *user) {
    bd_tap_cb = fn;
    bd_tap_user = user;
}
