/* handlers.c — what each endpoint does (routes in srv_handle at the end). A completion request is parsed and
 * validated (request.c), its prompt rendered with the GGUF's chat template (braid's template engine) and
 * tokenized, checked against the slot's context, queued (429 when the queue is full) and then either waited
 * for (one JSON answer) or streamed as server-sent events ending in "data: [DONE]". A client that leaves
 * cancels its job: the stream notices at its next write or poll, a waiting handler within 50 ms. A chat
 * request with images (--mmproj) has them decoded and encoded here, on its HTTP thread, before it is queued:
 * its prompt becomes text and image parts (build_image_prompt). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"
#include "response.h"
#include "tool_calls.h"

/* ChatML, for a model whose GGUF carries no chat template. */
static const char chatml[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' "
    "+ '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

static int model_ok(const srv *s, const char *name) {
    if (!name || !strcmp(name, s->cfg.model_id)) return 1;
    for (int i = 0; i < s->cfg.n_alias; i++)
        if (!strcmp(name, s->cfg.aliases[i])) return 1;
    return 0;
}

/* The prompt text of a chat request; NULL with *err set (malloc'd message) on failure. */
static char *render_chat(srv *s, const char *messages_json, const char *tools_json, size_t *len, char **err) {
    braid_chat_params cp = braid_chat_default_params();
    cp.tools_json = tools_json;
    cp.add_generation_prompt = 1;
    char *out = NULL;
    braid_status st = braid_chat_template_apply(s->model, NULL, messages_json, &cp, &out, len);
    if (st == BRAID_E_RANGE) st = braid_chat_template_render(chatml, sizeof chatml - 1, messages_json, &cp, &out, len);
    if (st != BRAID_OK) {
        char buf[600];
        snprintf(buf, sizeof buf, "the chat template failed: %s", braid_last_error());
        *err = strdup(buf);
        return NULL;
    }
    return out;
}

/* Tokens of text (malloc'd); NULL on failure. */
static braid_token *tokenize(srv *s, const char *text, size_t len, int add_special, int parse_special, int32_t *n) {
    size_t cap = len + 16, got = 0;
    braid_token *t = malloc(cap * sizeof *t);
    if (!t) return NULL;
    braid_status st = braid_tokenize(s->model, text, len, add_special, parse_special, t, cap, &got);
    if (st == BRAID_E_RANGE && got > cap) {
        braid_token *nt = realloc(t, got * sizeof *t);
        if (!nt) {
            free(t);
            return NULL;
        }
        t = nt;
        cap = got;
        st = braid_tokenize(s->model, text, len, add_special, parse_special, t, cap, &got);
    }
    if (st != BRAID_OK || got > INT32_MAX) {
        free(t);
        return NULL;
    }
    *n = (int32_t)got;
    return t;
}

/* The text that surrounds an image for the qwen3vl_merger projector: Qwen3-VL / Qwen3.5 chat templates write
 * <|vision_start|><|image_pad|><|vision_end|> for an image part, mtmd (and `braid run`) puts the rows where
 * the pad is. Each wrapper is tokenized on its own, as tools/image_prompt.c does, so no merge crosses it. */
static const char img_begin[] = "<|vision_start|>", img_end[] = "<|vision_end|>";

/* A prompt with images, built from the rendered text (one SRV_IMAGE_MARKER per image): the tokens (image rows
 * as srv_image_token), the parts (pointing into *toks and rows[]) and the encoded rows. Decoding and encoding
 * run here, on the request's HTTP thread, so the scheduler only decodes the rows. 0: *status and err say why
 * (400 for anything about the images themselves). */
typedef struct img_build {
    braid_token *toks;
    int32_t n;
    braid_prompt_part parts[2 * SRV_MAX_IMAGES + 1];
    int32_t n_parts;
    float *rows[SRV_MAX_IMAGES];
    double encode_ms;
} img_build;

static void img_build_free(img_build *b) {
    free(b->toks);
    for (int i = 0; i < SRV_MAX_IMAGES; i++) braid_free(b->rows[i]);
    memset(b, 0, sizeof *b);
}

static int push_text(srv *s, img_build *b, int32_t *cap, const char *text, size_t len) {
    if (!len) return 1;
    int32_t k = 0;
    braid_token *t = tokenize(s, text, len, 0, 1, &k);
    if (!t) return 0;
    if (b->n + k > *cap) {
        int32_t nc = (b->n + k) * 2;
        braid_token *nt = realloc(b->toks, (size_t)nc * sizeof *nt);
        if (!nt) return free(t), 0;
        b->toks = nt, *cap = nc;
    }
    memcpy(b->toks + b->n, t, (size_t)k * sizeof *t);
    b->n += k;
    free(t);
    return 1;
}

static int build_image_prompt(srv *s, const srv_request *req, const char *text, size_t len, img_build *b, int *status,
                              char *err, size_t err_len) {
    memset(b, 0, sizeof *b);
    *status = 400;
    const char *piece[SRV_MAX_IMAGES + 1];
    size_t piece_len[SRV_MAX_IMAGES + 1];
    const size_t ml = sizeof SRV_IMAGE_MARKER - 1;
    int n_markers = 0;
    const char *p = text, *end = text + len;
    for (const char *q = p; q + ml <= end;) {
        if (memcmp(q, SRV_IMAGE_MARKER, ml)) {
            q++;
            continue;
        }
        if (n_markers == req->n_images) break;
        piece[n_markers] = p;
        piece_len[n_markers++] = (size_t)(q - p);
        p = q = q + ml;
    }
    piece[n_markers] = p;
    piece_len[n_markers] = (size_t)(end - p);
    if (n_markers != req->n_images || memmem(p, piece_len[n_markers], SRV_IMAGE_MARKER, ml)) {
        snprintf(err, err_len, "the rendered prompt places %d images for %d image parts (the text may not contain "
                 "'%s' itself)", n_markers, req->n_images, SRV_IMAGE_MARKER);
        return 0;
    }
    int32_t cap = 0;
    for (int k = 0; k <= req->n_images; k++) {
        int32_t start = b->n;
        if ((k && !push_text(s, b, &cap, img_end, sizeof img_end - 1)) || !push_text(s, b, &cap, piece[k], piece_len[k]) ||
            (k < req->n_images && !push_text(s, b, &cap, img_begin, sizeof img_begin - 1))) {
            *status = 500;
            snprintf(err, err_len, "tokenizing the prompt failed");
            return 0;
        }
        if (b->n > start) b->parts[b->n_parts++] = (braid_prompt_part){.n_tokens = b->n - start, .tokens = NULL};
        if (k == req->n_images) break;
        braid_image *im = NULL;
        braid_status st = braid_image_decode(req->images[k].data, req->images[k].size, &im);
        int32_t nx = 0, ny = 0;
        if (st == BRAID_OK) {
            double t0 = srv_now_ms();
            pthread_mutex_lock(&s->mm_mu);
            st = braid_mmproj_encode(s->cfg.mmproj, im, &b->rows[k], &nx, &ny);
            pthread_mutex_unlock(&s->mm_mu);
            b->encode_ms += srv_now_ms() - t0;
        }
        uint64_t h = im ? braid_image_hash(im) : 0;
        braid_image_free(im);
        if (st != BRAID_OK) {
            if (st == BRAID_E_NOMEM) *status = 500;
            snprintf(err, err_len, "image %d: %s: %s", k, braid_status_name(st), braid_last_error());
            return 0;
        }
        int32_t rows = nx * ny;
        if (b->n + rows > cap) {
            int32_t nc = (b->n + rows) * 2;
            braid_token *nt = realloc(b->toks, (size_t)nc * sizeof *nt);
            if (!nt) {
                *status = 500;
                snprintf(err, err_len, "out of memory");
                return 0;
            }
            b->toks = nt, cap = nc;
        }
        for (int32_t r = 0; r < rows; r++) b->toks[b->n + r] = srv_image_token(h, r);
        b->n += rows;
        b->parts[b->n_parts++] = (braid_prompt_part){.embd = b->rows[k], .nx = nx, .ny = ny};
    }
    /* the text parts point into toks, now that it has stopped moving */
    for (int32_t i = 0, o = 0; i < b->n_parts; i++) {
        braid_prompt_part *q = &b->parts[i];
        if (q->embd) {
            o += q->nx * q->ny;
        } else {
            q->tokens = b->toks + o;
            o += q->n_tokens;
        }
    }
    return 1;
}

static int all_done(const srv_task *t) {
    for (int i = 0; i < t->n_jobs; i++)
        if (!t->jobs[i].done) return 0;
    return 1;
}

static void wait_a_little(srv *s) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 50 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&s->cv_out, &s->mu, &ts);
}

/* ---- streaming ------------------------------------------------------------------------------------------------ */

typedef struct stream {
    srv_task *t;
    int fd;
    char *buf;
    size_t n, cap, off;
    int hold;               /* tools: the text is held to the end, where tool calls are parsed out of it */
    int ended;              /* [DONE] (or an error event) is in buf */
    int *role_sent, *final_sent;
    size_t *text_sent, *lp_sent;
} stream;

static void emit(stream *st, json_t *j) {
    char *txt = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!txt) return;
    size_t l = strlen(txt), need = st->n + l + 8;
    if (need > st->cap) {
        size_t nc = st->cap ? st->cap : 4096;
        while (nc < need) nc *= 2;
        char *nb = realloc(st->buf, nc);
        if (!nb) {
            free(txt);
            return;
        }
        st->buf = nb;
        st->cap = nc;
    }
    memcpy(st->buf + st->n, "data: ", 6);
    memcpy(st->buf + st->n + 6, txt, l);
    memcpy(st->buf + st->n + 6 + l, "\n\n", 2);
    st->n += l + 8;
    free(txt);
}

static void emit_raw(stream *st, const char *s) {
    size_t l = strlen(s);
    if (st->n + l > st->cap) {
        size_t nc = st->cap ? st->cap : 4096;
        while (nc < st->n + l) nc *= 2;
        char *nb = realloc(st->buf, nc);
        if (!nb) return;
        st->buf = nb;
        st->cap = nc;
    }
    memcpy(st->buf + st->n, s, l);
    st->n += l;
}

/* New events of the task into st->buf (under srv.mu). */
static void build_events(stream *st) {
    srv_task *t = st->t;
    const int chat = t->req.kind == SRV_REQ_CHAT;
    int finals = 0;
    for (int i = 0; i < t->n_jobs; i++) {
        srv_job *j = &t->jobs[i];
        if (st->final_sent[i]) {
            finals++;
            continue;
        }
        if (chat && !st->role_sent[i]) {
            json_t *empty = json_string("");
            emit(st, srv_chunk(t, i, "assistant", empty, NULL, NULL, NULL));
            json_decref(empty);
            st->role_sent[i] = 1;
        }
        size_t nlp = j->logprobs ? json_array_size(j->logprobs) : 0;
        if (!st->hold && (j->n_text > st->text_sent[i] || nlp > st->lp_sent[i])) {
            json_t *lp = NULL;
            if (nlp > st->lp_sent[i]) {
                lp = json_array();
                for (size_t k = st->lp_sent[i]; k < nlp; k++) json_array_append(lp, json_array_get(j->logprobs, k));
            }
            /* only whole characters are released by braid_gen, so a cut here never splits one */
            json_t *c = srv_json_text(j->text + st->text_sent[i], j->n_text - st->text_sent[i]);
            emit(st, srv_chunk(t, i, NULL, c, NULL, NULL, lp));
            json_decref(c);
            json_decref(lp);
            st->text_sent[i] = j->n_text;
            st->lp_sent[i] = nlp;
        }
        if (!j->done) continue;
        if (!strcmp(j->stop, "error")) {
            char *e = srv_error_json(500, "server_error", NULL, NULL, "generation failed: %s", j->err);
            if (e) {
                emit_raw(st, "data: ");
                emit_raw(st, e);
                emit_raw(st, "\n\n");
                free(e);
            }
            st->ended = 1;
            return;
        }
        const char *finish = srv_finish_reason(j->stop);
        if (st->hold) {
            size_t pre = 0;
            json_t *calls = srv_tool_calls_parse(j->text, j->n_text, t->id, i, &pre);
            json_t *lp = NULL;
            if (nlp) {
                lp = json_array();
                for (size_t k = 0; k < nlp; k++) json_array_append(lp, json_array_get(j->logprobs, k));
            }
            json_t *c = srv_json_text(j->text, calls ? pre : j->n_text);
            if (calls || j->n_text) emit(st, srv_chunk(t, i, NULL, c, calls, NULL, lp));
            json_decref(c);
            json_decref(lp);
            if (calls) finish = "tool_calls";
            json_decref(calls);
        }
        json_t *fin = srv_chunk(t, i, NULL, NULL, NULL, finish, NULL);
        if (i == 0) json_object_set_new(fin, "timings", srv_timings(t));
        emit(st, fin);
        st->final_sent[i] = 1;
        finals++;
    }
    if (finals == t->n_jobs) {
        if (t->req.include_usage) {
            json_t *u = srv_chunk(t, -1, NULL, NULL, NULL, NULL, NULL);
            json_object_set_new(u, "usage", srv_usage(t));
            emit(st, u);
        }
        emit_raw(st, "data: [DONE]\n\n");
        st->ended = 1;
    }
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
    (void)pos;
    stream *st = cls;
    srv *s = st->t->s;
    for (;;) {
        if (st->off < st->n) {
            size_t k = st->n - st->off < max ? st->n - st->off : max;
            memcpy(out, st->buf + st->off, k);
            st->off += k;
            return (ssize_t)k;
        }
        if (st->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        st->n = st->off = 0;
        pthread_mutex_lock(&s->mu);
        build_events(st);
        if (st->n == 0 && !st->ended) wait_a_little(s);
        pthread_mutex_unlock(&s->mu);
        if (st->n == 0 && !st->ended && srv_client_gone(st->fd)) {
            atomic_store(&st->t->cancelled, 1);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

static void stream_done(void *cls) {
    stream *st = cls;
    srv *s = st->t->s;
    pthread_mutex_lock(&s->mu);
    if (!all_done(st->t)) atomic_store(&st->t->cancelled, 1); /* the client left early */
    srv_task_release_locked(st->t);
    pthread_mutex_unlock(&s->mu);
    free(st->role_sent);
    free(st->final_sent);
    free(st->text_sent);
    free(st->lp_sent);
    free(st->buf);
    free(st);
}

/* ---- completions ---------------------------------------------------------------------------------------------- */

static enum MHD_Result completion(srv_conn *cn, srv_req_kind kind) {
    srv *s = cn->s;
    srv_request req;
    srv_req_error e;
    if (!srv_request_parse(cn->body ? cn->body : "", cn->n_body, kind, &req, &e))
        return srv_reply_error(cn, e.status, NULL, e.param, NULL, "%s", e.message);
    if (!model_ok(s, req.model)) {
        enum MHD_Result r = srv_reply_error(cn, 404, "invalid_request_error", "model", "model_not_found",
                                            "The model '%s' does not exist (this server has '%s')", req.model,
                                            s->cfg.model_id);
        srv_request_free(&req);
        return r;
    }
    if (req.n > s->cfg.parallel) {
        srv_request_free(&req);
        return srv_reply_error(cn, 400, NULL, "n", NULL, "'n' is larger than the server's %d slots", s->cfg.parallel);
    }
    if (req.spec_mode == SRV_SPEC_MTP && !s->cfg.mtp_ok) {
        srv_request_free(&req);
        return srv_reply_error(cn, 400, NULL, "speculative.mode", NULL,
                               "'speculative.mode' \"mtp\" needs a model with an MTP (nextn) head; this one has none");
    }
    if (req.spec_mode == SRV_SPEC_DRAFT && !s->cfg.draft_ctx) {
        srv_request_free(&req);
        return srv_reply_error(cn, 400, NULL, "speculative.mode", NULL,
                               "'speculative.mode' \"draft\" needs a server started with --draft-model");
    }
    if (req.spec_n > s->cfg.draft_n_max) {
        int32_t v = req.spec_n;
        srv_request_free(&req);
        return srv_reply_error(cn, 400, NULL, "speculative.n", NULL,
                               "'speculative.n' is %d; this server verifies at most %d drafts per step (--draft-n)",
                               v, s->cfg.draft_n_max);
    }
    /* response_format: compiled before anything is queued, so a schema the constraint cannot honour (an
     * unsupported keyword, a bad $ref) is a 400 that names the problem, never a reply that ignores it */
    braid_json_constraint *json = NULL;
    if (req.format != SRV_FORMAT_TEXT) {
        const char *sch = req.format == SRV_FORMAT_JSON_SCHEMA ? req.schema_json : NULL;
        braid_status js = braid_json_constraint_new(sch, sch ? strlen(sch) : 0, &json);
        if (js != BRAID_OK) {
            srv_request_free(&req);
            return srv_reply_error(cn, js == BRAID_E_NOMEM ? 500 : 400, NULL, "response_format", NULL, "%s",
                                   braid_last_error());
        }
    }
    if (req.n_images && !s->cfg.mmproj) {
        srv_request_free(&req);
        braid_json_constraint_free(json);
        return srv_reply_error(cn, 400, NULL, "messages", NULL,
                               "this server has no vision projector: images need `braid serve --mmproj FILE`");
    }
    braid_token *toks = NULL;
    int32_t n = 0;
    img_build ib;
    memset(&ib, 0, sizeof ib);
    if (kind == SRV_REQ_CHAT) {
        char *err = NULL;
        size_t len = 0;
        char *text = render_chat(s, req.messages_json, req.tool_choice != SRV_TOOLS_NONE ? req.tools_json : NULL,
                                 &len, &err);
        if (!text) {
            enum MHD_Result r = srv_reply_error(cn, 400, NULL, "messages", NULL, "%s", err ? err : "out of memory");
            free(err);
            srv_request_free(&req);
            braid_json_constraint_free(json);
            return r;
        }
        if (req.n_images) {
            int status = 400;
            char why[400];
            int ok = build_image_prompt(s, &req, text, len, &ib, &status, why, sizeof why);
            braid_free(text);
            if (!ok) {
                img_build_free(&ib);
                srv_request_free(&req);
                braid_json_constraint_free(json);
                return srv_reply_error(cn, status, NULL, "messages", NULL, "%s", why);
            }
            if (s->cfg.verbose)
                fprintf(stderr, "braid serve: %d images encoded in %.1f ms\n", req.n_images, ib.encode_ms);
            toks = ib.toks, n = ib.n;
            ib.toks = NULL;
        } else {
            toks = tokenize(s, text, len, 0, 1, &n);
            braid_free(text);
        }
    } else if (req.prompt) {
        toks = tokenize(s, req.prompt, strlen(req.prompt), 1, 1, &n);
    } else {
        toks = req.prompt_tokens;
        n = req.n_prompt_tokens;
        req.prompt_tokens = NULL;
        for (int32_t i = 0; i < n; i++)
            if (toks[i] >= s->n_vocab) {
                free(toks);
                srv_request_free(&req);
                braid_json_constraint_free(json);
                return srv_reply_error(cn, 400, NULL, "prompt", NULL, "prompt[%d] = %d is not a token id (vocabulary %d)",
                                       i, toks[i], s->n_vocab);
            }
    }
    if (!toks || n == 0) {
        free(toks);
        img_build_free(&ib);
        srv_request_free(&req);
        braid_json_constraint_free(json);
        return srv_reply_error(cn, 400, NULL, "prompt", NULL, "the prompt has no tokens");
    }
    if (n >= s->cfg.ctx_per_slot) {
        free(toks);
        img_build_free(&ib);
        srv_request_free(&req);
        braid_json_constraint_free(json);
        char *j = srv_error_json(400, "exceed_context_size_error", "messages", "context_length_exceeded",
                                 "the request has %d prompt tokens, the context holds %d (and one more for the reply)",
                                 n, s->cfg.ctx_per_slot);
        json_t *root = j ? json_loads(j, 0, NULL) : NULL;
        free(j);
        json_t *err = json_object_get(root, "error");
        json_object_set_new(err, "n_prompt_tokens", json_integer(n));
        json_object_set_new(err, "n_ctx", json_integer(s->cfg.ctx_per_slot));
        return srv_reply_json(cn, 400, root);
    }
    int32_t room = s->cfg.ctx_per_slot - n;
    int32_t n_predict = req.max_tokens >= 0 && req.max_tokens < room ? req.max_tokens : room;
    const int stream_it = req.stream;
    srv_task *t = srv_task_new(s, &req, toks, n, n_predict);
    if (t && ib.n_parts) {
        t->parts = malloc((size_t)ib.n_parts * sizeof *t->parts);
        if (t->parts) {
            memcpy(t->parts, ib.parts, (size_t)ib.n_parts * sizeof *t->parts);
            t->n_parts = ib.n_parts;
            memcpy(t->rows, ib.rows, sizeof t->rows);
            memset(ib.rows, 0, sizeof ib.rows);
        }
    }
    if (!t || (ib.n_parts && !t->n_parts)) {
        img_build_free(&ib);
        if (t) {
            pthread_mutex_lock(&s->mu);
            srv_task_release_locked(t);
            pthread_mutex_unlock(&s->mu);
        } else {
            free(toks);
            srv_request_free(&req);
        }
        braid_json_constraint_free(json);
        return srv_reply_error(cn, 500, NULL, NULL, NULL, "out of memory");
    }
    t->json = json;
    if (!srv_submit(s, t)) {
        pthread_mutex_lock(&s->mu);
        int stopping = s->stopping;
        srv_task_release_locked(t);
        pthread_mutex_unlock(&s->mu);
        if (stopping) return srv_reply_error(cn, 503, NULL, NULL, NULL, "the server is shutting down");
        return srv_reply_error(cn, 429, NULL, NULL, "queue_full", "the request queue is full (%d waiting); retry later",
                               s->cfg.queue_max);
    }
    if (stream_it) {
        stream *st = calloc(1, sizeof *st);
        if (st) {
            st->t = t;
            st->fd = cn->fd;
            st->hold = t->req.kind == SRV_REQ_CHAT && t->req.tools_json && t->req.tool_choice != SRV_TOOLS_NONE;
            st->role_sent = calloc((size_t)t->n_jobs, sizeof(int));
            st->final_sent = calloc((size_t)t->n_jobs, sizeof(int));
            st->text_sent = calloc((size_t)t->n_jobs, sizeof(size_t));
            st->lp_sent = calloc((size_t)t->n_jobs, sizeof(size_t));
        }
        if (!st || !st->role_sent || !st->final_sent || !st->text_sent || !st->lp_sent) {
            if (st) free(st->role_sent), free(st->final_sent), free(st->text_sent), free(st->lp_sent), free(st);
            pthread_mutex_lock(&s->mu);
            atomic_store(&t->cancelled, 1);
            srv_task_release_locked(t);
            pthread_mutex_unlock(&s->mu);
            return srv_reply_error(cn, 500, NULL, NULL, NULL, "out of memory");
        }
        return srv_reply_stream(cn, stream_read, st, stream_done);
    }
    pthread_mutex_lock(&s->mu);
    while (!all_done(t)) {
        wait_a_little(s);
        if (!all_done(t) && srv_client_gone(cn->fd)) {
            atomic_store(&t->cancelled, 1);
            srv_task_release_locked(t);
            pthread_mutex_unlock(&s->mu);
            return MHD_NO; /* nobody to answer: close the connection */
        }
    }
    int status = 200;
    char err[300] = "";
    for (int i = 0; i < t->n_jobs; i++) {
        if (!strcmp(t->jobs[i].stop, "error")) status = 500, snprintf(err, sizeof err, "%s", t->jobs[i].err);
        else if (!strcmp(t->jobs[i].stop, "cancelled") && status == 200) status = 503;
    }
    json_t *body = status == 200 ? srv_response_full(t) : NULL;
    srv_task_release_locked(t);
    pthread_mutex_unlock(&s->mu);
    if (status == 500) return srv_reply_error(cn, 500, NULL, NULL, NULL, "generation failed: %s", err);
    if (status == 503) return srv_reply_error(cn, 503, NULL, NULL, NULL, "the request was cancelled (server stopping)");
    return srv_reply_json(cn, 200, body);
}

/* ---- the small endpoints -------------------------------------------------------------------------------------- */

static enum MHD_Result models(srv_conn *cn) {
    srv *s = cn->s;
    json_t *data = json_array();
    for (int i = -1; i < s->cfg.n_alias; i++) {
        json_t *m = json_object();
        json_object_set_new(m, "id", json_string(i < 0 ? s->cfg.model_id : s->cfg.aliases[i]));
        json_object_set_new(m, "object", json_string("model"));
        json_object_set_new(m, "created", json_integer((json_int_t)time(NULL)));
        json_object_set_new(m, "owned_by", json_string("braid"));
        json_t *meta = json_object();
        json_object_set_new(meta, "arch", json_string(braid_model_arch(s->model)));
        json_object_set_new(meta, "n_vocab", json_integer(s->n_vocab));
        json_object_set_new(meta, "n_ctx_slot", json_integer(s->cfg.ctx_per_slot));
        json_object_set_new(meta, "n_slots", json_integer(s->cfg.parallel));
        /* the chat page offers to attach images only when this is true (--mmproj) */
        json_object_set_new(meta, "vision", json_boolean(s->cfg.mmproj != NULL));
        json_object_set_new(m, "meta", meta);
        json_array_append_new(data, m);
    }
    json_t *r = json_object();
    json_object_set_new(r, "object", json_string("list"));
    json_object_set_new(r, "data", data);
    return srv_reply_json(cn, 200, r);
}

static enum MHD_Result metrics(srv_conn *cn) {
    srv *s = cn->s;
    size_t len = 0;
    pthread_mutex_lock(&s->mu);
    char *txt = srv_metrics_render(&s->m, &len);
    pthread_mutex_unlock(&s->mu);
    if (!txt) return srv_reply_error(cn, 500, NULL, NULL, NULL, "out of memory");
    return srv_reply(cn, 200, "text/plain; version=0.0.4", txt, len);
}

static enum MHD_Result slots(srv_conn *cn) {
    srv *s = cn->s;
    json_t *arr = json_array();
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->cfg.parallel; i++) {
        const srv_slot *sl = &s->slots[i];
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer(i));
        json_object_set_new(o, "n_ctx", json_integer(s->cfg.ctx_per_slot));
        json_object_set_new(o, "is_processing", json_boolean(sl->job != NULL));
        json_object_set_new(o, "n_requests", json_integer(sl->n_requests));
        json_object_set_new(o, "n_tokens_held", json_integer(sl->job ? -1 : sl->n_toks));
        if (sl->job) {
            json_object_set_new(o, "task", json_string(sl->job->task->id));
            json_object_set_new(o, "n_prompt_tokens", json_integer(sl->job->task->n_toks));
            json_object_set_new(o, "n_prompt_tokens_cache", json_integer(sl->job->cached_tokens));
            json_object_set_new(o, "n_decoded", json_integer(sl->job->n_tokens));
        }
        json_array_append_new(arr, o);
    }
    pthread_mutex_unlock(&s->mu);
    return srv_reply_json(cn, 200, arr);
}

static enum MHD_Result tokenize_ep(srv_conn *cn) {
    srv *s = cn->s;
    srv_tokenize_req r;
    srv_req_error e;
    if (!srv_tokenize_parse(cn->body ? cn->body : "", cn->n_body, &r, &e))
        return srv_reply_error(cn, e.status, NULL, e.param, NULL, "%s", e.message);
    int32_t n = 0;
    braid_token *t = tokenize(s, r.content, r.len, r.add_special, r.parse_special, &n);
    if (!t && r.len) {
        srv_tokenize_free(&r);
        return srv_reply_error(cn, 500, NULL, NULL, NULL, "tokenization failed: %s", braid_last_error());
    }
    json_t *arr = json_array();
    for (int32_t i = 0; i < n; i++) {
        if (!r.with_pieces) {
            json_array_append_new(arr, json_integer(t[i]));
            continue;
        }
        char piece[256];
        size_t len = 0;
        if (braid_token_to_piece(s->model, t[i], 1, piece, sizeof piece, &len) != BRAID_OK) len = 0;
        if (len > sizeof piece) len = sizeof piece;
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer(t[i]));
        json_object_set_new(o, "piece", srv_json_text(piece, len));
        json_array_append_new(arr, o);
    }
    free(t);
    srv_tokenize_free(&r);
    json_t *root = json_object();
    json_object_set_new(root, "tokens", arr);
    return srv_reply_json(cn, 200, root);
}

static enum MHD_Result detokenize_ep(srv_conn *cn) {
    srv *s = cn->s;
    braid_token *t = NULL;
    int32_t n = 0;
    srv_req_error e;
    if (!srv_detokenize_parse(cn->body ? cn->body : "", cn->n_body, &t, &n, &e))
        return srv_reply_error(cn, e.status, NULL, e.param, NULL, "%s", e.message);
    for (int32_t i = 0; i < n; i++)
        if (t[i] >= s->n_vocab) {
            free(t);
            return srv_reply_error(cn, 400, NULL, "tokens", NULL, "tokens[%d] = %d is not a token id (vocabulary %d)", i,
                                   t[i], s->n_vocab);
        }
    char *text = NULL;
    size_t len = 0;
    braid_status st = braid_detokenize(s->model, t, (size_t)n, 0, &text, &len);
    free(t);
    if (st != BRAID_OK) return srv_reply_error(cn, 500, NULL, NULL, NULL, "detokenize failed: %s", braid_last_error());
    json_t *root = json_object();
    json_object_set_new(root, "content", srv_json_text(text, len));
    braid_free(text);
    return srv_reply_json(cn, 200, root);
}

static enum MHD_Result apply_template(srv_conn *cn) {
    srv *s = cn->s;
    srv_request req;
    srv_req_error e;
    if (!srv_request_parse(cn->body ? cn->body : "", cn->n_body, SRV_REQ_CHAT, &req, &e))
        return srv_reply_error(cn, e.status, NULL, e.param, NULL, "%s", e.message);
    char *err = NULL;
    size_t len = 0;
    char *text = render_chat(s, req.messages_json, req.tool_choice != SRV_TOOLS_NONE ? req.tools_json : NULL, &len, &err);
    srv_request_free(&req);
    if (!text) {
        enum MHD_Result r = srv_reply_error(cn, 400, NULL, "messages", NULL, "%s", err ? err : "out of memory");
        free(err);
        return r;
    }
    json_t *root = json_object();
    json_object_set_new(root, "prompt", srv_json_text(text, len));
    braid_free(text);
    return srv_reply_json(cn, 200, root);
}

static enum MHD_Result health(srv_conn *cn) {
    json_t *r = json_object();
    json_object_set_new(r, "status", json_string("ok"));
    return srv_reply_json(cn, 200, r);
}

typedef struct {
    const char *method, *path;
    enum MHD_Result (*fn)(srv_conn *);
} route;

static enum MHD_Result chat_ep(srv_conn *cn) { return completion(cn, SRV_REQ_CHAT); }
static enum MHD_Result completion_ep(srv_conn *cn) { return completion(cn, SRV_REQ_COMPLETION); }

static const route routes[] = {
    {"GET", "/health", health},
    {"GET", "/v1/health", health},
    {"GET", "/v1/models", models},
    {"GET", "/models", models},
    {"GET", "/metrics", metrics},
    {"GET", "/slots", slots},
    {"GET", "/cache", srv_cache_info},
    {"POST", "/v1/chat/completions", chat_ep},
    {"POST", "/chat/completions", chat_ep},
    {"POST", "/v1/completions", completion_ep},
    {"POST", "/completions", completion_ep},
    {"POST", "/tokenize", tokenize_ep},
    {"POST", "/detokenize", detokenize_ep},
    {"POST", "/apply-template", apply_template},
};

enum MHD_Result srv_handle(srv_conn *cn, const char *method, const char *url) {
    if (!strncmp(url, "/slots/", 7)) return srv_slot_action(cn, method, url + 7);
    int path_known = 0;
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        if (strcmp(url, routes[i].path)) continue;
        path_known = 1;
        if (!strcmp(method, routes[i].method)) return routes[i].fn(cn);
    }
    if (path_known) return srv_reply_error(cn, 405, NULL, NULL, NULL, "%s is not allowed on %s", method, url);
    return srv_reply_error(cn, 404, NULL, NULL, NULL, "no route %s %s", method, url);
}
