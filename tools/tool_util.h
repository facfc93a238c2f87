/* tool_util.h — small helpers the braid subcommands share: numbers from option values, whole files, UTF-8
 * made valid for JSON, a monotonic clock. Each reports its failure on stderr, prefixed with the command. */
#ifndef BRAID_TOOLS_TOOL_UTIL_H
#define BRAID_TOOLS_TOOL_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Parse an option value; 0 (after a message naming cmd and opt) if it is not one. */
int tool_parse_i32(const char *cmd, const char *opt, const char *s, int32_t lo, int32_t hi, int32_t *out);
int tool_parse_f32(const char *cmd, const char *opt, const char *s, float *out);
int tool_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t *out);
/* Reads a whole file; *out is malloc'd (caller frees) and NUL-terminated. 0 on failure (reported). */
int tool_read_file(const char *cmd, const char *path, char **out, size_t *len);
/* A valid UTF-8 copy of s[0..n) with each invalid byte replaced by U+FFFD (JSON strings must be valid UTF-8;
 * a random-weight model happily emits half characters). Caller frees; NULL on allocation failure. */
char *tool_utf8_sanitize(const char *s, size_t n);
double tool_now_seconds(void);

#endif
