/* test_state_file.c — saving and loading memory states through files (src/memory/state_file.c): a save that
 * fails part-way (the file-size limit cuts the write) or cannot start leaves the previous file byte for byte
 * and no temporary beside it; a new file gets 0666 less the umask, a successful save replaces the file atomically
 * and keeps its permissions; loads of things that are not state files fail cleanly and change nothing. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "memory_ref.h"
#include "test.h"

#define FP 0x5EEDu

static const toy_layout HYB = {.name = "hybrid", .n_seq = 2, .n_pos = 4, .n_embd = 2, .n_ctx = 64, .n_attn = 2,
                               .n_rs = 2, .interval = 4, .rollback = 4, .n_ubatch = 3, .kv_type = BRAID_TYPE_F16,
                               .nk = {4, 3}, .nv = {3, 2}, .nconv = {3, 2}, .nssm = {5, 4}, .budget_blocks = 5};

static mem *new_mem(int32_t n_tokens, int32_t tok0) {
    mem_params p = toy_params(&HYB);
    mem *m = NULL;
    if (mem_new(&p, &m) != BRAID_OK) return NULL;
    if (n_tokens > 0 && toy_decode(&HYB, m, 0, n_tokens, tok0) != BRAID_OK) {
        mem_free(m);
        return NULL;
    }
    return m;
}

/* Entries in dir other than . and .. */
static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

int main(void) {
    char dir[] = "/tmp/braid_state_file_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256], sub[256];
    snprintf(path, sizeof path, "%s/seq.state", dir);
    snprintf(sub, sizeof sub, "%s/subdir", dir);

    mem *a = new_mem(20, 100), *b = new_mem(30, 7);
    CHECK(a && b, "toy memories");
    if (!a || !b) TEST_MAIN_END();

    /* A first save, then the reference bytes the file must keep through failed saves. */
    CHECK_STATUS(mem_state_save_file(a, -1, FP, "first", path), BRAID_OK);
    size_t n0 = 0;
    void *first = test_read_file(path, &n0);
    CHECK(first && n0 > 64, "first state %zu bytes", n0);
    CHECK(count_entries(dir) == 1, "only the state file after a save");
    mode_t mask = umask(022); /* the test is single-threaded: reading the umask by setting it is safe here */
    umask(mask);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == (0666 & ~mask), "a new state file gets 0666 less the umask: %o",
          (unsigned)(sb.st_mode & 0777));
    CHECK(chmod(path, 0640) == 0, "chmod");

    /* Failure part-way: the file-size limit makes a write fail with EFBIG after a few hundred bytes. */
    struct rlimit old, lim;
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0, "getrlimit");
    signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 300;
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit");
    braid_status st = mem_state_save_file(b, -1, FP, "second", path);
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0, "restore rlimit");
    CHECK(st == BRAID_E_IO, "save cut by the size limit: %s (%s)", braid_status_name(st), braid_last_error());
    size_t n1 = 0;
    void *after = test_read_file(path, &n1);
    CHECK(after && n1 == n0 && !memcmp(after, first, n0), "the previous file is intact after a failed save");
    free(after);
    CHECK(count_entries(dir) == 1, "no temporary left after a failed save (%d entries)", count_entries(dir));

    /* A save that cannot start (no such directory) creates nothing. */
    char missing[300];
    snprintf(missing, sizeof missing, "%s/none/seq.state", dir);
    CHECK_STATUS(mem_state_save_file(b, -1, FP, "x", missing), BRAID_E_IO);
    CHECK_STATUS(mem_state_save_file(b, -1, FP, "x", ""), BRAID_E_INVALID);
    /* Saving onto a directory's name fails at the rename and leaves the directory and no temporary. */
    CHECK(mkdir(sub, 0755) == 0, "mkdir");
    CHECK_STATUS(mem_state_save_file(b, -1, FP, "x", sub), BRAID_E_IO);
    CHECK(stat(sub, &sb) == 0 && S_ISDIR(sb.st_mode), "directory still there");
    CHECK(count_entries(dir) == 2, "state file and directory only (%d entries)", count_entries(dir));

    /* Loading a directory or an empty file fails and leaves the memory as it was. */
    mem *c = new_mem(0, 0);
    CHECK(c != NULL, "empty toy memory");
    void *c0 = NULL, *c1 = NULL;
    size_t nc0 = 0, nc1 = 0;
    CHECK_STATUS(mem_state_save_alloc(c, -1, FP, "c", &c0, &nc0), BRAID_OK);
    CHECK_STATUS(mem_state_load_file(c, -1, FP, sub), BRAID_E_IO);
    char empty[300];
    snprintf(empty, sizeof empty, "%s/empty", dir);
    FILE *f = fopen(empty, "wb");
    CHECK(f != NULL, "create empty file");
    if (f) fclose(f);
    CHECK_STATUS(mem_state_load_file(c, -1, FP, empty), BRAID_E_FORMAT);
    CHECK_STATUS(mem_state_load_file(c, -1, FP + 1, path), BRAID_E_MISMATCH);
    CHECK_STATUS(mem_state_save_alloc(c, -1, FP, "c", &c1, &nc1), BRAID_OK);
    CHECK(nc0 == nc1 && c0 && c1 && !memcmp(c0, c1, nc0), "failed loads changed nothing");
    bd_free(c0);
    bd_free(c1);

    /* A successful replacing save: new bytes, the old file's permissions, and the loaded memory equals b. */
    CHECK_STATUS(mem_state_save_file(b, -1, FP, "second", path), BRAID_OK);
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0640, "mode kept: %o", (unsigned)(sb.st_mode & 0777));
    CHECK_STATUS(mem_state_load_file(c, -1, FP, path), BRAID_OK);
    void *bb = NULL, *cb = NULL;
    size_t nbb = 0, ncb = 0;
    CHECK_STATUS(mem_state_save_alloc(b, -1, FP, "same", &bb, &nbb), BRAID_OK);
    CHECK_STATUS(mem_state_save_alloc(c, -1, FP, "same", &cb, &ncb), BRAID_OK);
    CHECK(nbb == ncb && bb && cb && !memcmp(bb, cb, nbb), "loaded from the file equals the saved memory");
    bd_free(bb);
    bd_free(cb);

    free(first);
    mem_free(a);
    mem_free(b);
    mem_free(c);
    unlink(empty);
    unlink(path);
    rmdir(sub);
    rmdir(dir);
    TEST_MAIN_END();
}
