/* test_server_vision.c — images in `braid serve --mmproj`, end to end on loopback, on a tiny generated qwen35
 * (the real qwen vocabulary and ChatML template, M-RoPE) and a random qwen3vl_merger projector:
 * - a chat request with an image_url part (a base64 PNG data: URL) answers what `braid run --mmproj --image
 *   --temp 0` answers on the same rendered prompt (same tokens, same text);
 * - the next turn, re-sending the image, reuses the conversation so far (cached_tokens > the image's rows);
 * - the same conversation with another image is not served from the first one's memory (cached_tokens stops
 *   before the image) and answers what `braid run` answers for that image;
 * - a remote URL, bad base64, text, a truncated PNG, a PNG claiming 60000 x 60000, an empty image, a non-data
 *   URL each get a 400 whose message says why, and the server keeps serving; /v1/models says vision: true;
 * - a server without --mmproj refuses an image with a 400 and says vision: false;
 * - an image prompt of several n_batch pieces (-b 32) decoded while another slot streams a long text reply:
 *   both answers equal `braid run`'s (the prefill's decodes do not disturb the generating slot's logits);
 * - the servers exit 0 on SIGTERM. */
#include <jansson.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "braid.h"
#include "genmodel/gen_mmproj.h"
#include "genmodel/genmodel.h"
#include "server_harness.h"
#include "test.h"
#include "vision/image_write.h"

static hs_server srv;
static char exe[1100], model[1100], mmproj[1100];

static json_t *req_json(const char *method, const char *path, const char *body, int *status) {
    hc_resp r;
    *status = 0;
    if (!hc_request(srv.port, method, path, "", body, &r)) return NULL;
    *status = r.status;
    json_t *j = json_loads(r.body, 0, NULL);
    hc_free(&r);
    return j;
}

static char *b64(const uint8_t *p, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc(n / 3 * 4 + 8), *q = o;
    if (!o) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *q++ = tab[v >> 18 & 63];
        *q++ = tab[v >> 12 & 63];
        *q++ = i + 1 < n ? tab[v >> 6 & 63] : '=';
        *q++ = i + 2 < n ? tab[v & 63] : '=';
    }
    *q = 0;
    return o;
}

static char *data_url(const uint8_t *p, size_t n) {
    char *b = b64(p, n);
    size_t len = (b ? strlen(b) : 0) + 32;
    char *u = malloc(len);
    if (u) snprintf(u, len, "data:image/png;base64,%s", b ? b : "");
    free(b);
    return u;
}

static const char *SYS = "You describe pictures in a few words.";

/* A conversation: user (text + image url), then optionally assistant + user. */
static char *chat_body(const char *url, const char *assistant, const char *user2) {
    json_t *msgs = json_array();
    json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "system", "content", SYS));
    json_t *parts = json_pack("[{s:s,s:s},{s:s,s:{s:s}}]", "type", "text", "text", "What is in this picture?", "type",
                              "image_url", "image_url", "url", url);
    json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", "user", "content", parts));
    if (assistant) {
        json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "assistant", "content", assistant));
        json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "user", "content", user2));
    }
    json_t *root = json_pack("{s:o,s:i,s:f}", "messages", msgs, "max_tokens", 8, "temperature", 0.0);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

typedef struct {
    int status;
    char *content;
    json_int_t prompt, cached, completion;
    char err[400];
} chat_out;

static void chat(const char *body, chat_out *o) {
    memset(o, 0, sizeof *o);
    json_t *j = req_json("POST", "/v1/chat/completions", body, &o->status);
    json_t *choice = json_array_get(json_object_get(j, "choices"), 0);
    const char *txt = json_string_value(json_object_get(json_object_get(choice, "message"), "content"));
    o->content = txt ? strdup(txt) : NULL;
    json_t *u = json_object_get(j, "usage");
    o->prompt = json_integer_value(json_object_get(u, "prompt_tokens"));
    o->completion = json_integer_value(json_object_get(u, "completion_tokens"));
    o->cached = json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
    const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    snprintf(o->err, sizeof o->err, "%s", m ? m : "");
    json_decref(j);
}

/* `braid run` on the prompt /apply-template renders for body, with image file img (NULL: none) and max n
 * tokens: its JSON (text, tokens). */
static json_t *run_cli_n(const char *body, const char *img, int n) {
    int st = 0;
    json_t *tpl = req_json("POST", "/apply-template", body, &st);
    const char *prompt = json_string_value(json_object_get(tpl, "prompt"));
    CHECK(st == 200 && prompt && (!img || strstr(prompt, "<__image__>")), "/apply-template renders the prompt (%d)", st);
    if (!prompt) return json_decref(tpl), NULL;
    char pf[1200];
    snprintf(pf, sizeof pf, "%s.prompt.txt", model);
    FILE *f = fopen(pf, "w");
    if (f) fputs(prompt, f), fclose(f);
    json_decref(tpl);
    char cmd[6000], imgs[3000] = "";
    if (img) snprintf(imgs, sizeof imgs, "--mmproj '%s' --image '%s'", mmproj, img);
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' %s -f '%s' -n %d -b 32 --temp 0 -t 1 --no-bos --json 2>/dev/null", exe,
             model, imgs, pf, n);
    char *out = test_run_cmd(cmd, &st);
    json_t *j = out && st == 0 ? json_loads(out, 0, NULL) : NULL;
    CHECK(j != NULL, "braid run answers (exit %d): %.200s", st, out ? out : "");
    free(out);
    unlink(pf);
    return j;
}

static json_t *run_cli(const char *body, const char *img) { return run_cli_n(body, img, 8); }

/* A request sent from another thread (the blocking client), for two requests at once. */
typedef struct {
    const char *body;
    chat_out out;
    double t_end;
} bg_req;
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
static void *bg_chat(void *arg) {
    bg_req *b = arg;
    chat(b->body, &b->out);
    b->t_end = now_s();
    return NULL;
}

/* CRC-32 of PNG chunks (ISO 3309), to forge a valid header with other dimensions (as test_image.c). */
static uint32_t crc32_png(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return c ^ 0xffffffffu;
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static void expect_400(const char *url, const char *word, const char *what) {
    char *body = chat_body(url, NULL, NULL);
    chat_out o;
    chat(body, &o);
    CHECK(o.status == 400 && strstr(o.err, word), "%s: %d '%s' (want 400 with '%s')", what, o.status, o.err, word);
    free(o.content);
    free(body);
}

static int vision_flag(void) {
    int st = 0;
    json_t *j = req_json("GET", "/v1/models", NULL, &st);
    json_t *v = json_object_get(json_object_get(json_array_get(json_object_get(j, "data"), 0), "meta"), "vision");
    int r = json_is_boolean(v) ? json_is_true(v) : -1;
    json_decref(j);
    return r;
}

int main(void) {
    const char *build = test_env("BRAID_BUILD_DIR", ".");
    char logp[1100], args[4000], pa[1100], pb[1100];
    snprintf(model, sizeof model, "%s/test_server_vision.gguf", build);
    snprintf(mmproj, sizeof mmproj, "%s/test_server_vision_mm.gguf", build);
    snprintf(exe, sizeof exe, "%s/braid", build);
    snprintf(logp, sizeof logp, "%s/test_server_vision.log", build);
    snprintf(pa, sizeof pa, "%s/test_server_vision_a.png", build);
    snprintf(pb, sizeof pb, "%s/test_server_vision_b.png", build);
    gen_params gp;
    gen_params_default(&gp);
    gp.type = BRAID_TYPE_Q8_0;
    gp.over.n_embd = 256; /* the projector's rows */
    gen_summary sum;
    if (gen_model_write(&gp, model, &sum) != BRAID_OK) TEST_SKIP("no vocabulary to build the model from (%s)", braid_last_error());
    gen_mmproj_params mp;
    gen_mmproj_default(&mp);
    CHECK_STATUS(gen_mmproj_write(&mp, mmproj, NULL), BRAID_OK);

    /* two images of the same size, different pixels; the grid (rows) from the projector itself */
    uint8_t *png[2] = {NULL, NULL};
    size_t png_n[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        uint8_t *rgb = tk_image_pattern(64, 48, i ? TK_CHECKER : TK_NOISE, 7);
        CHECK(rgb && tk_png_encode(rgb, 64, 48, 3, &png[i], &png_n[i]), "png %d", i);
        free(rgb);
        CHECK(png[i] && tk_write_file(i ? pb : pa, png[i], png_n[i]), "png file %d", i);
    }
    if (test_failed_) TEST_MAIN_END();
    int32_t rows = 0;
    {
        braid_mmproj *mm = NULL;
        braid_image *im = NULL;
        int32_t nx = 0, ny = 0;
        CHECK_STATUS(braid_mmproj_load(mmproj, NULL, &mm), BRAID_OK);
        CHECK_STATUS(braid_image_decode(png[0], png_n[0], &im), BRAID_OK);
        if (mm && im) CHECK_STATUS(braid_mmproj_image_grid(mm, im, &nx, &ny), BRAID_OK);
        rows = nx * ny;
        braid_image_free(im);
        braid_mmproj_free(mm);
    }
    CHECK(rows >= 8, "the image has %d rows", rows);

    snprintf(args, sizeof args,
             "-m '%s' --mmproj '%s' -c 1024 -b 32 -t 1 --parallel 2 --cache-ram 64 --checkpoint-interval 32", model,
             mmproj);
    CHECK(hs_start(&srv, exe, args, logp), "the server starts");
    if (!srv.port) TEST_MAIN_END();
    CHECK(vision_flag() == 1, "/v1/models says vision: true");

    char *ua = data_url(png[0], png_n[0]), *ub = data_url(png[1], png_n[1]);
    /* ---- the first turn equals braid run ---- */
    char *b1 = chat_body(ua, NULL, NULL);
    chat_out o1;
    chat(b1, &o1);
    CHECK(o1.status == 200 && o1.content && o1.prompt > rows, "image request: %d %s, %lld prompt tokens", o1.status,
          o1.err, (long long)o1.prompt);
    json_t *r1 = run_cli(b1, pa);
    const char *t1 = json_string_value(json_object_get(r1, "text"));
    CHECK(t1 && o1.content && !strcmp(t1, o1.content), "server '%s' = braid run '%s'", o1.content ? o1.content : "-",
          t1 ? t1 : "-");
    CHECK((json_int_t)json_array_size(json_object_get(r1, "tokens")) == o1.completion,
          "same token count: run %zu, server %lld", json_array_size(json_object_get(r1, "tokens")),
          (long long)o1.completion);
    /* braid run's prompt_tokens are the text tokens; the server counts image rows too */
    CHECK((json_int_t)json_array_size(json_object_get(r1, "prompt_tokens")) + rows == o1.prompt,
          "prompt: %zu text tokens + %d rows = %lld", json_array_size(json_object_get(r1, "prompt_tokens")), rows,
          (long long)o1.prompt);

    /* ---- the next turn re-sends the image: the conversation so far is reused ---- */
    char *b2 = chat_body(ua, o1.content ? o1.content : "", "And what colour is it?");
    chat_out o2;
    chat(b2, &o2);
    CHECK(o2.status == 200 && o2.content, "second turn: %d %s", o2.status, o2.err);
    CHECK(o2.cached > rows && o2.cached < o2.prompt, "second turn: %lld of %lld cached (image: %d rows)",
          (long long)o2.cached, (long long)o2.prompt, rows);
    /* and its answer is what a fresh run of the whole conversation gives */
    json_t *r2 = run_cli(b2, pa);
    const char *t2 = json_string_value(json_object_get(r2, "text"));
    CHECK(t2 && o2.content && !strcmp(t2, o2.content), "second turn: server '%s' = braid run '%s'",
          o2.content ? o2.content : "-", t2 ? t2 : "-");

    /* ---- another image in the same conversation: nothing past the text before it is reused ---- */
    char *b3 = chat_body(ub, o1.content ? o1.content : "", "And what colour is it?");
    chat_out o3;
    chat(b3, &o3);
    CHECK(o3.status == 200 && o3.content, "other image: %d %s", o3.status, o3.err);
    int st = 0;
    json_t *tpl = req_json("POST", "/apply-template", b3, &st);
    const char *prompt = json_string_value(json_object_get(tpl, "prompt"));
    const char *mark = prompt ? strstr(prompt, "<__image__>") : NULL;
    json_int_t before = -1;
    if (mark) {
        /* the tokens before the image: the text up to the marker, then <|vision_start|>, tokenized apart as
         * the server (and braid run) do: this vocabulary has no special token for it, so it is text */
        size_t k = (size_t)(mark - prompt);
        char *pre = strndup(prompt, k);
        const char *seg[2] = {pre, "<|vision_start|>"};
        before = 0;
        for (int i = 0; i < 2 && pre; i++) {
            json_t *tb = json_pack("{s:s}", "content", seg[i]);
            char *tbs = json_dumps(tb, JSON_COMPACT);
            json_t *tj = req_json("POST", "/tokenize", tbs, &st);
            before += (json_int_t)json_array_size(json_object_get(tj, "tokens"));
            json_decref(tj), json_decref(tb), free(tbs);
        }
        free(pre);
    }
    json_decref(tpl);
    CHECK(before > 0 && o3.cached <= before, "other image: %lld cached, the text before the image is %lld tokens",
          (long long)o3.cached, (long long)before);
    json_t *r3 = run_cli(b3, pb);
    const char *t3 = json_string_value(json_object_get(r3, "text"));
    CHECK(t3 && o3.content && !strcmp(t3, o3.content), "other image: server '%s' = braid run '%s'",
          o3.content ? o3.content : "-", t3 ? t3 : "-");
    /* and back to the first image: served, and its answer unchanged */
    chat_out o4;
    chat(b2, &o4);
    CHECK(o4.status == 200 && o4.content && o2.content && !strcmp(o4.content, o2.content),
          "first image again: '%s' = '%s'", o4.content ? o4.content : "-", o2.content ? o2.content : "-");

    /* ---- an image prompt prefilled in pieces while the other slot streams a long text reply, speculating ---- */
    {
        char pc[1100];
        snprintf(pc, sizeof pc, "%s/test_server_vision_c.png", build);
        uint8_t *rgb = tk_image_pattern(320, 288, TK_GRADIENT, 11), *pcb = NULL;
        size_t pcn = 0;
        CHECK(rgb && tk_png_encode(rgb, 320, 288, 3, &pcb, &pcn) && tk_write_file(pc, pcb, pcn), "png c");
        free(rgb);
        char *uc = pcb ? data_url(pcb, pcn) : NULL;
        char *bc = uc ? chat_body(uc, NULL, NULL) : NULL;
        /* the text reply speculates (lookup): its slot's next token is drawn ahead while the image prefills */
        json_t *tm = json_pack("{s:[{s:s,s:s}],s:i,s:f,s:{s:s,s:i}}", "messages", "role", "user", "content",
                               "Tell me a long story about a lighthouse keeper.", "max_tokens", 400, "temperature", 0.0,
                               "speculative", "mode", "lookup", "n", 4);
        char *bt = json_dumps(tm, JSON_COMPACT);
        json_decref(tm);
        bg_req bg = {.body = bt};
        pthread_t th;
        int started = bt && bc && pthread_create(&th, NULL, bg_chat, &bg) == 0;
        CHECK(started, "the text request starts");
        if (started) {
            usleep(150 * 1000); /* the text reply is streaming by now */
            chat_out oc;
            double t_img0 = now_s();
            chat(bc, &oc);
            double t_img1 = now_s();
            pthread_join(th, NULL);
            CHECK(bg.t_end > t_img1, "the text reply was still running when the image reply was done (%.2f s after)",
                  bg.t_end - t_img1);
            printf("image request beside a stream: %.1f ms\n", (t_img1 - t_img0) * 1e3);
            CHECK(oc.status == 200 && oc.content && oc.prompt > 64, "image during a text reply: %d %s, %lld prompt",
                  oc.status, oc.err, (long long)oc.prompt);
            CHECK(bg.out.status == 200 && bg.out.content && bg.out.completion == 400,
                  "the text reply beside it: %d, %lld tokens", bg.out.status, (long long)bg.out.completion);
            json_t *rc = run_cli(bc, pc), *rt = run_cli_n(bt, NULL, 400);
            const char *tc = json_string_value(json_object_get(rc, "text"));
            const char *tt = json_string_value(json_object_get(rt, "text"));
            CHECK(tc && oc.content && !strcmp(tc, oc.content), "image beside a stream: server '%s' = braid run '%s'",
                  oc.content ? oc.content : "-", tc ? tc : "-");
            CHECK(tt && bg.out.content && !strcmp(tt, bg.out.content),
                  "the stream beside the image prefill equals braid run (%zu / %zu bytes)",
                  bg.out.content ? strlen(bg.out.content) : 0, tt ? strlen(tt) : 0);
            json_decref(rc), json_decref(rt);
            free(oc.content), free(bg.out.content);
        }
        free(bt), free(bc), free(uc), free(pcb);
        unlink(pc);
    }

    /* ---- bad images: 400 with the reason, and the server goes on ---- */
    expect_400("https://example.com/cat.png", "remote", "remote URL");
    expect_400("file:///etc/passwd", "data: URL", "file URL");
    expect_400("data:image/png;base64,iVBO@@@@", "base64", "bad base64");
    expect_400("data:image/png;base64,iVBORw0KG", "truncated", "base64 cut mid-byte");
    expect_400("data:image/png;base64,", "empty", "zero bytes");
    expect_400("data:image/png;base64,aGVsbG8sIHRoaXMgaXMgdGV4dA==", "unknown format", "text as an image");
    char *half = data_url(png[0], png_n[0] / 2);
    expect_400(half, "truncated", "truncated PNG");
    free(half);
    uint8_t *huge = malloc(png_n[0]);
    if (huge) {
        memcpy(huge, png[0], png_n[0]);
        put_be32(huge + 16, 60000);
        put_be32(huge + 20, 60000);
        put_be32(huge + 29, crc32_png(huge + 12, 17));
        char *hu = data_url(huge, png_n[0]);
        expect_400(hu, "too large", "60000 x 60000 PNG");
        free(hu);
        free(huge);
    }
    chat_out o5;
    chat(b1, &o5);
    CHECK(o5.status == 200 && o5.content && o1.content && !strcmp(o5.content, o1.content),
          "after the bad images the first request still answers '%s' (%d)", o5.content ? o5.content : "-", o5.status);
    CHECK(hs_stop(&srv) == 0, "the server exits 0 on SIGTERM");

    /* ---- a server without a projector ---- */
    snprintf(args, sizeof args, "-m '%s' -c 512 -t 1 --parallel 1", model);
    snprintf(logp, sizeof logp, "%s/test_server_vision_text.log", build);
    CHECK(hs_start(&srv, exe, args, logp), "the text-only server starts");
    if (srv.port) {
        CHECK(vision_flag() == 0, "/v1/models says vision: false");
        expect_400(ua, "--mmproj", "no projector");
        CHECK(hs_stop(&srv) == 0, "the text-only server exits 0");
    }

    chat_out *outs[] = {&o1, &o2, &o3, &o4, &o5};
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) free(outs[i]->content);
    json_decref(r1), json_decref(r2), json_decref(r3);
    free(b1), free(b2), free(b3), free(ua), free(ub), free(png[0]), free(png[1]);
    unlink(model), unlink(mmproj), unlink(pa), unlink(pb);
    TEST_MAIN_END();
}
