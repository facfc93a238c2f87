/* fuzz_server_request.c — libFuzzer target for the server's request parser (server/request.c) and its
 * tool-call parser (server/tool_calls.c): any bytes as a request body must come back as a validated request
 * or as a 400 with a message, never a crash, leak or sanitizer report. The first byte picks the endpoint
 * (chat, completion, tokenize, detokenize); the rest is the body, also fed to the tool-call parser as model
 * output. A request that parses is checked against what validation promises. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"
#include "tool_calls.h"

/* abort(), not assert(): the fuzz build defines NDEBUG */
#define FUZZ_CHECK(c)                                                                                          \
    do {                                                                                                       \
        if (!(c)) abort();                                                                                     \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *body = (const char *)data + 1;
    size_t n = size - 1;
    srv_req_error e;
    switch (data[0] % 4) {
    case 0:
    case 1: {
        srv_request r;
        if (srv_request_parse(body, n, data[0] % 4 == 0 ? SRV_REQ_CHAT : SRV_REQ_COMPLETION, &r, &e)) {
            FUZZ_CHECK(r.n >= 1 && r.n <= 16 && r.n_stop >= 0 && r.n_stop <= SRV_MAX_STOP);
            FUZZ_CHECK(r.top_logprobs >= 0 && r.top_logprobs <= SRV_MAX_TOP_LOGPROBS);
            if (r.kind == SRV_REQ_CHAT) {
                json_t *m = json_loads(r.messages_json, 0, NULL);
                FUZZ_CHECK(json_is_array(m) && json_array_size(m) > 0);
                json_decref(m);
                /* images: at most SRV_MAX_IMAGES, each with bytes (the parser refuses an empty one) */
                FUZZ_CHECK(r.n_images >= 0 && r.n_images <= SRV_MAX_IMAGES);
                for (int i = 0; i < r.n_images; i++) FUZZ_CHECK(r.images[i].data && r.images[i].size > 0);
            } else {
                FUZZ_CHECK(r.prompt || r.n_prompt_tokens > 0);
            }
            srv_request_free(&r);
        } else {
            FUZZ_CHECK(e.status == 400 && e.message[0]);
        }
        break;
    }
    case 2: {
        srv_tokenize_req t;
        if (srv_tokenize_parse(body, n, &t, &e)) srv_tokenize_free(&t);
        else FUZZ_CHECK(e.status == 400);
        break;
    }
    default: {
        braid_token *t = NULL;
        int32_t k = 0;
        if (srv_detokenize_parse(body, n, &t, &k, &e)) {
            for (int32_t i = 0; i < k; i++) FUZZ_CHECK(t[i] >= 0);
            free(t);
        }
        break;
    }
    }
    size_t pre = 0;
    json_t *calls = srv_tool_calls_parse(body, n, "fuzz", 0, &pre);
    if (calls) {
        FUZZ_CHECK(json_is_array(calls) && json_array_size(calls) > 0 && pre <= n);
        json_decref(calls);
    }
    return 0;
}
