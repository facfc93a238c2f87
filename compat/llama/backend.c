/* backend.c — the process-wide calls of llama.h and the few ggml calls that programs written against it make
 * at start: backend init, logging, timing, capability queries, and ggml's backend loading (braid has one CPU
 * backend built in, so loading is a no-op that reports success). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-backend.h"
#include "shim.h"

static ggml_log_callback log_fn;
static void *log_user;

int64_t shim_time_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void shim_log(enum ggml_log_level level, const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (log_fn) log_fn(level, buf, log_user);
    else if (level >= GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_NONE) fputs(buf, stderr);
}

void shim_log_braid(const char *what, braid_status st) {
    shim_log(GGML_LOG_LEVEL_ERROR, "%s: %s (%s)\n", what, braid_last_error(), braid_status_name(st));
}

void llama_log_set(ggml_log_callback log_callback, void *user_data) {
    log_fn = log_callback;
    log_user = user_data;
}

void llama_log_get(ggml_log_callback *log_callback, void **user_data) {
    if (log_callback) *log_callback = log_fn;
    if (user_data) *user_data = log_user;
}

void llama_backend_init(void) {}
void llama_backend_free(void) {}
void llama_numa_init(enum ggml_numa_strategy numa) { (void)numa; }
int64_t llama_time_us(void) { return shim_time_us(); }
size_t llama_max_devices(void) { return 1; }
bool llama_supports_mmap(void) { return true; }
bool llama_supports_mlock(void) { return false; }
bool llama_supports_gpu_offload(void) { return false; }
bool llama_supports_rpc(void) { return false; }
const char *llama_print_system_info(void) { return "braid (llama.h compatibility layer): CPU"; }

/* ggml: timing and backend loading. A non-NULL registry handle means "loaded"; programs only test it. */
static struct ggml_backend_reg *builtin_reg(void) {
    static char token;
    return (struct ggml_backend_reg *)(void *)&token;
}

void ggml_time_init(void) {}
int64_t ggml_time_ms(void) { return shim_time_us() / 1000; }
int64_t ggml_time_us(void) { return shim_time_us(); }
void ggml_log_set(ggml_log_callback log_callback, void *user_data) { llama_log_set(log_callback, user_data); }
void ggml_log_get(ggml_log_callback *log_callback, void **user_data) { llama_log_get(log_callback, user_data); }
ggml_backend_reg_t ggml_backend_load(const char *path) {
    (void)path;
    return builtin_reg();
}
void ggml_backend_load_all(void) {}
void ggml_backend_load_all_from_path(const char *dir_path) { (void)dir_path; }

/* GGML_ASSERT in a program's own code lands here: the program asserted something about itself, so it ends the
 * program as ggml does (braid never calls it; bad input to braid is an error return, not an abort). */
void ggml_abort(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}
