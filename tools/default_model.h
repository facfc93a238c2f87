/* default_model.h — the built-in model the braid command uses when no -m is given. */
#ifndef BRAID_TOOLS_DEFAULT_MODEL_H
#define BRAID_TOOLS_DEFAULT_MODEL_H

#include <stddef.h>

/* Writes the path of the default model into buf (cap bytes), generating the file first if it is not in the
 * cache yet. Returns 1 on success, 0 after reporting a failure on stderr. */
int tool_default_model_path(char *buf, size_t cap);

#endif
