/* oracle_vision.c — runs llama.cpp's libmtmd (built by scripts/build-mtmd-oracle.sh against the prebuilt
 * libllama) on a text model, a vision projector and images, through mtmd's public C API, so that braid's
 * vision conformance test (tests/conformance/test_vision.c) can compare image rows and logits with it.
 *
 * usage: oracle_vision -m TEXT.gguf --mmproj MMPROJ.gguf [--image FILE]... [-p PROMPT] [--fa on|off|auto]
 *                      [--min-tokens N] [--max-tokens N] [--threads N] [--ctx N] [--batch N]
 *                      [--dump-embd FILE] [--dump-logits FILE] [--no-eval] [--repeat N]
 * The prompt holds one <__media__> marker per --image (mtmd's rule). Output lines on stdout:
 *   text N t0 t1 ...                     a text chunk's token ids
 *   image ROWS NPOS NX NY MS             an image chunk: rows, positions it advances, the grid (from the last
 *                                        row's decoder position) and the best encode time of --repeat runs
 *   logits V ARGMAX NPAST                after evaluating every chunk (mtmd_helper_eval_chunks), unless --no-eval
 * --dump-embd writes every image's rows (float32, in prompt order); --dump-logits the last logits. Strict
 * reference set-up as tests/oracle/oracle.c: F32 K/V cache, no extra weight buffers, flash attention off for
 * the text model; --fa sets the vision encoder's (mtmd's own default is auto, which is on for the CPU).
 * Failure: a message on stderr and exit code 1 (2 for bad arguments). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-backend.h"
#include "../../testkit/ggml_variant.h"
#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"

#define MAX_IMAGES 64

static void die(const char *msg, const char *arg) {
    fprintf(stderr, "oracle_vision: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
    exit(1);
}

static void log_quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level >= GGML_LOG_LEVEL_WARN || getenv("ORACLE_VERBOSE")) fputs(text, stderr);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *mmproj = NULL, *prompt = "<__media__>", *dump_embd = NULL, *dump_logits = NULL;
    const char *images[MAX_IMAGES];
    int n_images = 0, n_threads = 1, n_ctx = 4096, n_batch = 2048, min_tok = -1, max_tok = -1, eval = 1, repeat = 1;
    enum llama_flash_attn_type fa = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--no-eval")) {
            eval = 0;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "oracle_vision: %s needs a value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "-m")) model_path = v;
        else if (!strcmp(a, "--mmproj")) mmproj = v;
        else if (!strcmp(a, "--image")) {
            if (n_images == MAX_IMAGES) die("too many images", NULL);
            images[n_images++] = v;
        } else if (!strcmp(a, "-p")) prompt = v;
        else if (!strcmp(a, "--dump-embd")) dump_embd = v;
        else if (!strcmp(a, "--dump-logits")) dump_logits = v;
        else if (!strcmp(a, "--threads")) n_threads = atoi(v);
        else if (!strcmp(a, "--ctx")) n_ctx = atoi(v);
        else if (!strcmp(a, "--batch")) n_batch = atoi(v);
        else if (!strcmp(a, "--min-tokens")) min_tok = atoi(v);
        else if (!strcmp(a, "--max-tokens")) max_tok = atoi(v);
        else if (!strcmp(a, "--repeat")) repeat = atoi(v);
        else if (!strcmp(a, "--fa")) {
            if (!strcmp(v, "on")) fa = LLAMA_FLASH_ATTN_TYPE_ENABLED;
            else if (!strcmp(v, "off")) fa = LLAMA_FLASH_ATTN_TYPE_DISABLED;
            else if (!strcmp(v, "auto")) fa = LLAMA_FLASH_ATTN_TYPE_AUTO;
            else {
                fprintf(stderr, "oracle_vision: --fa %s\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "oracle_vision: unknown option %s\n", a);
            return 2;
        }
    }
    if (!model_path || !mmproj || n_threads < 1 || repeat < 1) {
        fprintf(stderr, "usage: oracle_vision -m TEXT --mmproj MMPROJ [--image F]... [-p PROMPT] (see the source)\n");
        return 2;
    }

    /* the CPU backend variant the other oracle and the tests pick (ggml_variant.h) */
    const char *libdir = getenv("BRAID_ORACLE_LIB_DIR");
    if (!libdir || !*libdir) libdir = ORACLE_LIB_DIR;
    llama_log_set(log_quiet, NULL);
    mtmd_helper_log_set(log_quiet, NULL);
    char cpu_path[4096], cpu_name[128], why[512];
    if (ggml_variant_pick(libdir, cpu_path, sizeof cpu_path, cpu_name, sizeof cpu_name, why, sizeof why) !=
        GGML_VARIANT_OK)
        die(why, NULL);
    if (!ggml_backend_load(cpu_path)) die("ggml could not load", cpu_path);
    llama_backend_init();

    struct llama_model_params mp = llama_model_default_params();
    mp.use_extra_bufts = false;
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) die("llama.cpp could not load", model_path);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = cp.n_ubatch = (uint32_t)n_batch;
    cp.n_threads = cp.n_threads_batch = n_threads;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.no_perf = true;
    struct llama_context *lctx = llama_init_from_model(model, cp);
    if (!lctx) die("llama.cpp could not create a context", NULL);

    struct mtmd_context_params mparams = mtmd_context_params_default();
    mparams.use_gpu = false;
    mparams.print_timings = false;
    mparams.n_threads = n_threads;
    mparams.flash_attn_type = fa;
    mparams.warmup = false;
    if (min_tok > 0) mparams.image_min_tokens = min_tok;
    if (max_tok > 0) mparams.image_max_tokens = max_tok;
    mtmd_context *mctx = mtmd_init_from_file(mmproj, model, mparams);
    if (!mctx) die("mtmd could not load", mmproj);

    mtmd_bitmap *bitmaps[MAX_IMAGES];
    for (int i = 0; i < n_images; i++) {
        struct mtmd_helper_bitmap_wrapper bw =
            mtmd_helper_bitmap_init_from_file(mctx, images[i], false, mtmd_helper_init_opt_default());
        if (!bw.bitmap) die("mtmd could not read", images[i]);
        bitmaps[i] = bw.bitmap;
    }
    mtmd_input_chunks *chunks = mtmd_input_chunks_init();
    mtmd_input_text text = {prompt, strlen(prompt), true, true};
    if (mtmd_tokenize(mctx, chunks, &text, (const mtmd_bitmap *const *)bitmaps, (size_t)n_images) != 0)
        die("mtmd_tokenize failed (markers vs images, or preprocessing)", NULL);

    FILE *fe = dump_embd ? fopen(dump_embd, "wb") : NULL;
    if (dump_embd && !fe) die("cannot write", dump_embd);
    const int n_embd = llama_model_n_embd_inp(model);
    for (size_t c = 0; c < mtmd_input_chunks_size(chunks); c++) {
        const mtmd_input_chunk *ch = mtmd_input_chunks_get(chunks, c);
        if (mtmd_input_chunk_get_type(ch) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
            size_t n = 0;
            const llama_token *t = mtmd_input_chunk_get_tokens_text(ch, &n);
            printf("text %zu", n);
            for (size_t i = 0; i < n; i++) printf(" %d", t[i]);
            printf("\n");
            continue;
        }
        const mtmd_image_tokens *it = mtmd_input_chunk_get_tokens_image(ch);
        size_t rows = mtmd_input_chunk_get_n_tokens(ch);
        struct mtmd_decoder_pos last = mtmd_image_tokens_get_decoder_pos(it, 0, rows - 1);
        double best = 1e30;
        for (int r = 0; r < repeat; r++) {
            double t0 = now_ms();
            if (mtmd_encode_chunk(mctx, ch) != 0) die("mtmd_encode_chunk failed", NULL);
            double dt = now_ms() - t0;
            if (dt < best) best = dt;
        }
        printf("image %zu %d %u %u %.3f\n", rows, (int)mtmd_input_chunk_get_n_pos(ch), last.x + 1, last.y + 1, best);
        if (fe && fwrite(mtmd_get_output_embd(mctx), sizeof(float) * (size_t)n_embd, rows, fe) != rows)
            die("short write to", dump_embd);
    }
    if (fe && fclose(fe) != 0) die("cannot write", dump_embd);

    if (eval) {
        llama_pos n_past = 0;
        if (mtmd_helper_eval_chunks(mctx, lctx, chunks, 0, 0, n_batch, true, &n_past) != 0)
            die("mtmd_helper_eval_chunks failed", NULL);
        const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
        const float *lg = llama_get_logits_ith(lctx, -1);
        if (!lg) die("no logits", NULL);
        int am = 0;
        for (int i = 1; i < n_vocab; i++)
            if (lg[i] > lg[am]) am = i;
        printf("logits %d %d %d\n", n_vocab, am, (int)n_past);
        if (dump_logits) {
            FILE *fl = fopen(dump_logits, "wb");
            if (!fl || fwrite(lg, sizeof(float), (size_t)n_vocab, fl) != (size_t)n_vocab || fclose(fl) != 0)
                die("cannot write", dump_logits);
        }
    }
    mtmd_input_chunks_free(chunks);
    for (int i = 0; i < n_images; i++) mtmd_bitmap_free(bitmaps[i]);
    mtmd_free(mctx);
    llama_free(lctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
