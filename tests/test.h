/* test.h — the small assertion harness shared by braid's C tests.
 *
 * CHECK(cond, fmt, ...) counts a check and reports a failure with file:line and a message; the test goes on so
 * one run shows every failure. TEST_MAIN_END() prints "N passed, N failed" and returns the exit code
 * (non-zero if anything failed); TEST_SKIP(...) ends a test that cannot run here as skipped. Helpers find the source tree, build tree and oracle cache from the
 * environment CTest sets (BRAID_SOURCE_DIR, BRAID_BUILD_DIR, BRAID_ORACLE_DIR). */
#ifndef BRAID_TESTS_TEST_H
#define BRAID_TESTS_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

static int test_passed_, test_failed_;

#define CHECK(cond, ...)                                                                                       \
    do {                                                                                                       \
        if (cond) {                                                                                            \
            test_passed_++;                                                                                    \
        } else {                                                                                               \
            test_failed_++;                                                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                    \
            fprintf(stderr, __VA_ARGS__);                                                                      \
            fputc('\n', stderr);                                                                               \
        }                                                                                                      \
    } while (0)

/* A check on a braid_status, printing braid_last_error() when it is not the expected one. */
#define CHECK_STATUS(expr, expected)                                                                           \
    do {                                                                                                       \
        braid_status check_s_ = (expr);                                                                        \
        CHECK(check_s_ == (expected), "got %s, want %s (%s)", braid_status_name(check_s_),                     \
              braid_status_name(expected), braid_last_error());                                                \
    } while (0)

/* Exit code of a test that cannot run on this machine (CTest's SKIP_RETURN_CODE, tests/CMakeLists.txt):
 * reported as skipped, never as passed. TEST_SKIP(fmt, ...) says why and exits so from main. */
#define TEST_SKIP_CODE 77
#define TEST_SKIP(...)                                                                                         \
    do {                                                                                                       \
        printf("SKIPPED: ");                                                                                   \
        printf(__VA_ARGS__);                                                                                   \
        printf(" (%d checks passed before)\n", test_passed_);                                                   \
        return test_failed_ ? 1 : TEST_SKIP_CODE;                                                              \
    } while (0)

#define TEST_MAIN_END()                                                                                        \
    do {                                                                                                       \
        printf("%d passed, %d failed\n", test_passed_, test_failed_);                                          \
        return test_failed_ ? 1 : 0;                                                                           \
    } while (0)

/* A whole file in a malloc'd buffer with a NUL after the last byte (so text files work as strings); *n is
 * its size. NULL (and *n = 0) if it cannot be opened or read. The caller frees. */
static inline char *test_read_file(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    char *b = size >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)size + 1) : NULL;
    if (b && fread(b, 1, (size_t)size, f) != (size_t)size) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[size] = 0;
        *n = (size_t)size;
    }
    return b;
}

/* Runs a shell command; returns its stdout (malloc'd, NUL-terminated, caller frees; NULL if it could not be
 * started) and sets *status to its exit code (-1 if it did not exit normally). */
static inline char *test_run_cmd(const char *cmd, int *status) {
    *status = -1;
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n - 1, p);
        n += got;
        if (got == 0) break;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
    }
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (buf) buf[n] = 0;
    return buf;
}

static inline const char *test_env(const char *name, const char *fallback) {
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

#endif
