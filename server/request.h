/* request.h — an HTTP request body (JSON) turned into a validated request, or a reason why not.
 *
 * Everything the handlers need is checked here, before anything is queued: types, ranges, the shape of
 * messages, tools, tool_choice, stop, response_format. A null value means "absent" (the server's default);
 * fields this server does not know are ignored (as llama-server and vLLM do); a field it knows but cannot
 * honour (echo, suffix, best_of > 1, remote image URLs) is refused. Images come as image_url parts with
 * base64 data: URLs; their bytes are decoded from base64 here, the pictures themselves by the handler. This is the parser's whole surface: the fuzz target
 * (fuzz/fuzz_server_request.c) feeds it arbitrary bytes. */
#ifndef BRAID_SERVER_REQUEST_H
#define BRAID_SERVER_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "braid.h"

#define SRV_MAX_STOP 8
#define SRV_MAX_TOP_LOGPROBS 20
#define SRV_MAX_IMAGES 16
/* What an image part becomes in a message's text: the handler splits the rendered prompt there (the same
 * marker as `braid run` and `braid chat`, tools/image_prompt.h). */
#define SRV_IMAGE_MARKER "<__image__>"

/* An image part's encoded bytes (PNG, JPEG, WebP: whatever the data: URL held), in message order. */
typedef struct srv_image_bytes {
    unsigned char *data;
    size_t size;
} srv_image_bytes;

typedef enum { SRV_REQ_CHAT, SRV_REQ_COMPLETION } srv_req_kind;
typedef enum { SRV_TOOLS_NONE, SRV_TOOLS_AUTO, SRV_TOOLS_REQUIRED, SRV_TOOLS_FUNCTION } srv_tool_choice;
typedef enum { SRV_FORMAT_TEXT, SRV_FORMAT_JSON_OBJECT, SRV_FORMAT_JSON_SCHEMA } srv_format;
/* Speculative decoding of one request: the server's default (--draft-model / --lookup), none, n-gram lookup
 * in the request's own text, or the server's draft model. */
typedef enum { SRV_SPEC_DEFAULT = 0, SRV_SPEC_OFF, SRV_SPEC_LOOKUP, SRV_SPEC_DRAFT, SRV_SPEC_MTP } srv_spec_mode;
#define SRV_MAX_DRAFT_N 64

typedef struct srv_request {
    srv_req_kind kind;
    char *model;            /* NULL: not given */
    /* chat: the messages normalized for the template (content parts joined into a string, an image part
     * as SRV_IMAGE_MARKER, tool-call arguments parsed into objects), as a JSON array */
    char *messages_json;
    srv_image_bytes images[SRV_MAX_IMAGES]; /* the image parts, in order */
    int n_images;
    /* completion: the prompt as text, or as token ids */
    char *prompt;
    braid_token *prompt_tokens;
    int32_t n_prompt_tokens;
    int stream, include_usage;
    int32_t max_tokens;     /* -1: not given */
    braid_sampler_params sampler;
    int has_seed;
    char *stop[SRV_MAX_STOP];
    int n_stop;
    int logprobs;           /* 1: report log-probabilities of the chosen tokens */
    int top_logprobs;       /* alternatives per token, 0 .. SRV_MAX_TOP_LOGPROBS */
    int n;                  /* choices, >= 1 */
    char *tools_json;       /* a JSON array of tool definitions, or NULL */
    srv_tool_choice tool_choice;
    char *tool_name;        /* SRV_TOOLS_FUNCTION: the function's name */
    srv_format format;
    char *schema_json;      /* SRV_FORMAT_JSON_SCHEMA: the schema */
    /* "speculative": {"mode": "default"|"off"|"lookup"|"draft", "n": 1..64, "ngram": 1..64} ("n_max" is
     * accepted for "n", as llama-server spells it); whether the server can honour it (a draft model loaded,
     * n within --draft-n's rollback room) is checked by the handler */
    srv_spec_mode spec_mode;
    int32_t spec_n;         /* drafted tokens per step; 0: the server's --draft-n */
    int32_t spec_ngram;     /* lookup: the longest n-gram matched; 0: the server's --lookup (else 3) */
} srv_request;

/* Why a body was refused: an HTTP status and the OpenAI error fields. */
typedef struct srv_req_error {
    int status;          /* 400 */
    char param[64];      /* the offending field ("" if none) */
    char message[256];
} srv_req_error;

/* Parses body[0..len) as a request of this kind. 1: *out is filled (release with srv_request_free); 0: *err
 * says why and *out holds nothing to release. */
int srv_request_parse(const char *body, size_t len, srv_req_kind kind, srv_request *out, srv_req_error *err);
void srv_request_free(srv_request *r);

/* The small bodies of /tokenize ({content, add_special, parse_special, with_pieces}), /detokenize ({tokens})
 * and /apply-template (a chat body: only messages, tools matter). */
typedef struct srv_tokenize_req {
    char *content;
    size_t len;
    int add_special, parse_special, with_pieces;
} srv_tokenize_req;
int srv_tokenize_parse(const char *body, size_t len, srv_tokenize_req *out, srv_req_error *err);
void srv_tokenize_free(srv_tokenize_req *r);
int srv_detokenize_parse(const char *body, size_t len, braid_token **tokens, int32_t *n, srv_req_error *err);

#endif
