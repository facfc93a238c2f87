/* test_server_load.c — `braid serve` under load and faults on loopback, for a bounded time: 64 client
 * threads for 3 seconds, each looping over a random mix of good requests (plain and streamed, and with
 * unknown fields, which are ignored) and bad ones (malformed JSON, wrong types, a body over --max-body,
 * invalid UTF-8, a bad API key) and clients that leave (mid-stream, or right after sending). Every answer
 * must carry the right status (good: 200, or 429 with Retry-After when the queue is full; bad: its 4xx),
 * every good answer the same text an idle server gave for that prompt (greedy), the server must keep
 * serving, answer the same afterwards, and exit 0 on SIGTERM (under ASan/LSan: no leak, no error). */
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "braid.h"
#include "genmodel/genmodel.h"
#include "server_harness.h"
#include "test.h"

enum { NCLIENT = 64, NPROMPT = 4, SECONDS = 3 };
static hs_server srv;
static const char *KEY = "Authorization: Bearer k\r\n";
static char *ref[NPROMPT];
static atomic_int n_ok, n_bad, n_429, n_left, n_wrong;
static double t_end;
static pthread_mutex_t report_mu = PTHREAD_MUTEX_INITIALIZER;
static char first_wrong[512];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void body_for(int k, int stream, int extra, char *out, size_t cap) {
    static const char *const p[NPROMPT] = {"Hello", "What is a hybrid model", "One two three", "Tell me more"};
    snprintf(out, cap,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],\"max_tokens\":6,\"temperature\":0%s%s}", p[k],
             stream ? ",\"stream\":true" : "", extra ? ",\"frobnicate\":[1,{\"x\":null}],\"user\":\"u\"" : "");
}

static char *content_of(const hc_resp *r, int stream) {
    if (!stream) {
        json_t *j = json_loads(r->body ? r->body : "", 0, NULL);
        json_t *c = json_object_get(json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message"), "content");
        char *s = json_is_string(c) ? strdup(json_string_value(c)) : NULL;
        json_decref(j);
        return s;
    }
    size_t o = 0;
    char *out = calloc(r->n + 1, 1);
    int done = 0;
    for (const char *p = r->body; p && (p = strstr(p, "data: "));) {
        p += 6;
        const char *e = strstr(p, "\n\n");
        if (!e) break;
        if (!strncmp(p, "[DONE]", 6)) done = 1;
        json_t *j = json_loadb(p, (size_t)(e - p), 0, NULL);
        json_t *c = json_object_get(json_object_get(json_array_get(json_object_get(j, "choices"), 0), "delta"), "content");
        if (json_is_string(c)) {
            memcpy(out + o, json_string_value(c), json_string_length(c));
            o += json_string_length(c);
        }
        json_decref(j);
        p = e;
    }
    if (!done) {
        free(out);
        return NULL;
    }
    return out;
}

static void wrong(const char *what, const hc_resp *r) {
    atomic_fetch_add(&n_wrong, 1);
    pthread_mutex_lock(&report_mu);
    if (!first_wrong[0])
        snprintf(first_wrong, sizeof first_wrong, "%s: status %d body %.300s", what, r ? r->status : -1,
                 r && r->body ? r->body : "");
    pthread_mutex_unlock(&report_mu);
}

static void *client(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 17u;
    char body[2048];
    char *huge = malloc(100001);
    memset(huge, 'a', 100000);
    huge[0] = '{';
    huge[100000] = 0;
    while (now_s() < t_end) {
        int kind = (int)(rand_r(&seed) % 10), k = (int)(rand_r(&seed) % NPROMPT);
        hc_resp r;
        memset(&r, 0, sizeof r);
        const char *C = "/v1/chat/completions";
        if (kind <= 2 || kind == 7) { /* good: plain, streamed, unknown fields */
            int stream = kind == 1;
            body_for(k, stream, kind == 7, body, sizeof body);
            if (!hc_request(srv.port, "POST", C, KEY, body, &r)) {
                wrong("good request: no answer", NULL);
                continue;
            }
            char ra[32];
            if (r.status == 429 && atoi(hc_header(&r, "Retry-After", ra, sizeof ra)) >= 1) {
                atomic_fetch_add(&n_429, 1);
            } else if (r.status == 200) {
                char *c = content_of(&r, stream);
                if (c && !strcmp(c, ref[k])) atomic_fetch_add(&n_ok, 1);
                else wrong("good request: a different answer", &r);
                free(c);
            } else {
                wrong("good request: status", &r);
            }
        } else if (kind == 3 || kind == 8) { /* leave: mid-stream, or right after sending */
            body_for(k, kind == 3, 0, body, sizeof body);
            int fd = hc_send(srv.port, "POST", C, KEY, body, strlen(body));
            if (fd >= 0 && kind == 3) {
                char b[256];
                (void)recv(fd, b, sizeof b, 0);
            }
            if (fd >= 0) close(fd);
            atomic_fetch_add(&n_left, 1);
            continue;
        } else {
            static const char *const bad_bodies[] = {
                "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}", /* malformed */
                "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":{}}", /* wrong type */
                "{\"messages\":[{\"role\":\"user\",\"content\":\"\xc0\xaf\"}]}", /* invalid UTF-8 */
            };
            /* 4: malformed / wrong type / invalid UTF-8, 5: too big, 6: bad key, 9: wrong type in tools */
            body_for(k, 0, 0, body, sizeof body);
            const char *b = kind == 4   ? bad_bodies[rand_r(&seed) % 3]
                            : kind == 5 ? huge
                            : kind == 6 ? body
                                        : "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":\"all\"}";
            int want = kind == 5 ? 413 : kind == 6 ? 401 : 400;
            if (!hc_request(srv.port, "POST", C, kind == 6 ? "Authorization: Bearer nope\r\n" : KEY, b, &r)) {
                wrong("bad request: no answer", NULL);
                continue;
            }
            if (r.status == want) atomic_fetch_add(&n_bad, 1);
            else wrong("bad request: status", &r);
        }
        hc_free(&r);
    }
    free(huge);
    return NULL;
}

int main(void) {
    const char *build = test_env("BRAID_BUILD_DIR", ".");
    char model[1100], exe[1100], logp[1100], args[4000], body[2048];
    snprintf(model, sizeof model, "%s/test_server_load.gguf", build);
    snprintf(exe, sizeof exe, "%s/braid", build);
    snprintf(logp, sizeof logp, "%s/test_server_load.log", build);
    gen_params gp;
    gen_params_default(&gp);
    gp.type = BRAID_TYPE_Q8_0;
    gen_summary sum;
    if (gen_model_write(&gp, model, &sum) != BRAID_OK) TEST_SKIP("no vocabulary to build the model from");
    snprintf(args, sizeof args, "-m '%s' -c 128 -t 1 --parallel 4 --queue 64 --api-key k --max-body 65536", model);
    CHECK(hs_start(&srv, exe, args, logp), "the server starts");
    if (!srv.port) TEST_MAIN_END();
    /* what the idle server answers */
    for (int k = 0; k < NPROMPT; k++) {
        hc_resp r;
        body_for(k, 0, 0, body, sizeof body);
        CHECK(hc_request(srv.port, "POST", "/v1/chat/completions", KEY, body, &r) && r.status == 200, "idle %d", k);
        ref[k] = content_of(&r, 0);
        CHECK(ref[k] != NULL, "idle answer %d", k);
        hc_free(&r);
        if (!ref[k]) ref[k] = strdup("");
    }
    t_end = now_s() + SECONDS;
    pthread_t th[NCLIENT];
    for (int i = 0; i < NCLIENT; i++) pthread_create(&th[i], NULL, client, (void *)(uintptr_t)i);
    for (int i = 0; i < NCLIENT; i++) pthread_join(th[i], NULL);
    printf("load: %d good answers, %d right refusals, %d 429, %d clients left, %d wrong\n", atomic_load(&n_ok),
           atomic_load(&n_bad), atomic_load(&n_429), atomic_load(&n_left), atomic_load(&n_wrong));
    CHECK(atomic_load(&n_wrong) == 0, "every answer right (%d wrong; first: %s)", atomic_load(&n_wrong), first_wrong);
    CHECK(atomic_load(&n_ok) > 0 && atomic_load(&n_bad) > 0 && atomic_load(&n_left) > 0, "every kind happened");
    /* afterwards: serving, idle again, the same answers */
    hc_resp r;
    int idle = 0;
    for (int i = 0; i < 500 && !idle; i++) {
        hc_request(srv.port, "GET", "/slots", KEY, NULL, &r);
        idle = r.status == 200 && !strstr(r.body, "\"is_processing\":true");
        hc_free(&r);
        if (!idle) usleep(10000);
    }
    CHECK(idle, "every slot is free once the clients are gone");
    for (int k = 0; k < NPROMPT; k++) {
        body_for(k, 0, 0, body, sizeof body);
        int ok = hc_request(srv.port, "POST", "/v1/chat/completions", KEY, body, &r) && r.status == 200;
        char *c = ok ? content_of(&r, 0) : NULL;
        CHECK(c && !strcmp(c, ref[k]), "after the load, prompt %d gets the idle answer", k);
        free(c);
        hc_free(&r);
    }
    CHECK(hc_request(srv.port, "GET", "/health", NULL, NULL, &r) && r.status == 200, "healthy");
    hc_free(&r);
    CHECK(hs_stop(&srv) == 0, "the server exits 0 on SIGTERM");
    for (int k = 0; k < NPROMPT; k++) free(ref[k]);
    unlink(model);
    TEST_MAIN_END();
}
