/* http.c — the HTTP plumbing on libmicrohttpd: one thread per connection (a handler may wait for its job),
 * bodies collected up to the limit (413 beyond it, from Content-Length before reading when it is given), the
 * API key (Authorization: Bearer or X-Api-Key; /health needs none), and replies: whole JSON, errors in
 * OpenAI's shape, and streams through a content reader. */
#include "http.h"

#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "response.h"

void srv_config_default(srv_config *c) {
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8080;
    c->timeout_s = 600;
    c->parallel = 4;
    c->ctx_per_slot = 4096;
    c->queue_max = 64;
    c->body_max = 8u << 20;
    c->model_id = "braid";
}

int srv_port(const srv *s) { return s ? s->port : 0; }

static void count(srv *s, int status) {
    pthread_mutex_lock(&s->mu);
    if (status < 400) s->m.requests_ok++;
    else if (status < 500) s->m.requests_4xx++;
    else s->m.requests_5xx++;
    if (status == 429) s->m.requests_429++;
    pthread_mutex_unlock(&s->mu);
}

enum MHD_Result srv_reply(srv_conn *cn, int status, const char *content_type, char *body, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body ? body : (char *)"",
                                                             body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", content_type);
    if (status == 429) MHD_add_response_header(r, "Retry-After", "1");
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result ok = MHD_queue_response(cn->c, (unsigned)status, r);
    MHD_destroy_response(r);
    count(cn->s, status);
    return ok;
}

enum MHD_Result srv_reply_json(srv_conn *cn, int status, json_t *j) {
    char *txt = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!txt) return srv_reply_error(cn, 500, "server_error", NULL, NULL, "out of memory");
    return srv_reply(cn, status, "application/json", txt, strlen(txt));
}

static const char *error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 405: return "invalid_request_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 501: return "not_supported_error";
    case 503: return "unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

enum MHD_Result srv_reply_error(srv_conn *cn, int status, const char *type, const char *param, const char *code,
                                const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char *j = srv_error_json(status, type ? type : error_type(status), param, code, "%s", msg);
    if (!j) return MHD_NO;
    return srv_reply(cn, status, "application/json", j, strlen(j));
}

enum MHD_Result srv_reply_stream(srv_conn *cn, MHD_ContentReaderCallback read, void *user,
                                 MHD_ContentReaderFreeCallback done) {
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, read, user, done);
    if (!r) {
        done(user);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ok = MHD_queue_response(cn->c, 200, r);
    MHD_destroy_response(r);
    count(cn->s, 200);
    return ok;
}

int srv_client_gone(int fd) {
    if (fd < 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return 1;
    if (p.revents & POLLIN) {
        char b;
        ssize_t k = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        return k == 0;
    }
    return 0;
}

/* ---- the API key ---------------------------------------------------------------------------------------------- */

static int key_ok(srv *s, struct MHD_Connection *c) {
    if (!s->cfg.n_keys) return 1;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *key = NULL;
    if (auth && !strncasecmp(auth, "Bearer ", 7)) key = auth + 7;
    if (!key) key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key");
    if (!key) return 0;
    int ok = 0;
    for (int i = 0; i < s->cfg.n_keys; i++) {
        /* constant time in the key's length: no early exit on the first differing byte */
        const char *k = s->cfg.api_keys[i];
        size_t lk = strlen(k), lg = strlen(key);
        unsigned d = lk != lg;
        for (size_t b = 0; b < lk; b++) d |= (unsigned char)k[b] ^ (unsigned char)(b < lg ? key[b] : 0);
        ok |= !d;
    }
    return ok;
}

/* ---- the access handler --------------------------------------------------------------------------------------- */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    srv *s = cls;
    srv_conn *cn = *con_cls;
    if (!cn) {
        cn = calloc(1, sizeof *cn);
        if (!cn) return MHD_NO;
        cn->s = s;
        cn->c = c;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        cn->fd = ci ? ci->connect_fd : -1;
        *con_cls = cn;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->cfg.body_max) cn->too_big = 1;
        if (cn->too_big)
            return srv_reply_error(cn, 413, NULL, NULL, NULL, "the body is larger than %zu bytes", s->cfg.body_max);
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cn->too_big && cn->n_body + *upload_size > s->cfg.body_max) {
            cn->too_big = 1;
            free(cn->body);
            cn->body = NULL;
            cn->n_body = cn->cap_body = 0;
        }
        if (!cn->too_big) {
            if (cn->n_body + *upload_size + 1 > cn->cap_body) {
                size_t nc = cn->cap_body ? cn->cap_body : 4096;
                while (nc < cn->n_body + *upload_size + 1) nc *= 2;
                char *nb = realloc(cn->body, nc);
                if (!nb) return MHD_NO;
                cn->body = nb;
                cn->cap_body = nc;
            }
            memcpy(cn->body + cn->n_body, upload, *upload_size);
            cn->n_body += *upload_size;
            cn->body[cn->n_body] = 0;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (cn->too_big)
        return srv_reply_error(cn, 413, NULL, NULL, NULL, "the body is larger than %zu bytes", s->cfg.body_max);
    if (srv_webui_owns(url)) return srv_webui(cn, method, url);
    if (strcmp(url, "/health") && strcmp(url, "/v1/health") && !key_ok(s, c))
        return srv_reply_error(cn, 401, NULL, NULL, "invalid_api_key", "Invalid API Key");
    return srv_handle(cn, method, url);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t) {
    (void)cls, (void)c, (void)t;
    srv_conn *cn = *con_cls;
    if (!cn) return;
    free(cn->body);
    free(cn);
    *con_cls = NULL;
}

int srv_start(const srv_config *cfg, braid_model *model, braid_context *ctx, srv **out) {
    *out = NULL;
    signal(SIGPIPE, SIG_IGN); /* a client that leaves mid-write must not end the process */
    srv *s = calloc(1, sizeof *s);
    if (!s) return 0;
    s->cfg = *cfg;
    s->model = model;
    s->ctx = ctx;
    s->n_vocab = braid_model_n_vocab(model);
    s->t_start = srv_now_ms();
    s->m.n_slots = cfg->parallel;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->mm_mu, NULL);
    pthread_cond_init(&s->cv_work, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv_out, &ca);
    pthread_condattr_destroy(&ca);
    s->slots = calloc((size_t)cfg->parallel, sizeof *s->slots);
    if (!s->slots) {
        srv_stop(s);
        return 0;
    }
    for (int i = 0; i < cfg->parallel; i++) s->slots[i].id = i;
    if (cfg->cache_ram > 0) {
        braid_prompt_cache_params pp = braid_prompt_cache_default_params();
        pp.budget_bytes = cfg->cache_ram;
        pp.first_seq = cfg->parallel;
        pp.n_seq = cfg->cache_entries;
        if (braid_prompt_cache_new(ctx, &pp, &s->cache) != BRAID_OK) {
            fprintf(stderr, "braid serve: the prompt cache: %s\n", braid_last_error());
            srv_stop(s);
            return 0;
        }
        srv_cache_publish(s);
    }
    if (!srv_sched_start(s)) {
        fprintf(stderr, "braid serve: cannot start the scheduler thread\n");
        srv_stop(s);
        return 0;
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)cfg->port);
    if (inet_pton(AF_INET, cfg->host, &sa.sin_addr) != 1) {
        fprintf(stderr, "braid serve: --host %s is not an IPv4 address\n", cfg->host);
        srv_stop(s);
        return 0;
    }
    s->daemon = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG,
                                 (uint16_t)cfg->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
                                 (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->timeout_s,
                                 MHD_OPTION_CONNECTION_LIMIT, 512u, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                 MHD_OPTION_END);
    if (!s->daemon) {
        fprintf(stderr, "braid serve: cannot listen on %s:%d\n", cfg->host, cfg->port);
        srv_stop(s);
        return 0;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : cfg->port;
    *out = s;
    return 1;
}

void srv_stop(srv *s) {
    if (!s) return;
    srv_sched_stop(s);
    if (s->daemon) MHD_stop_daemon(s->daemon);
    for (int i = 0; s->slots && i < s->cfg.parallel; i++) free(s->slots[i].toks);
    braid_prompt_cache_free(s->cache);
    braid_free(s->cache_hashes);
    free(s->slots);
    pthread_cond_destroy(&s->cv_work);
    pthread_cond_destroy(&s->cv_out);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->mm_mu);
    free(s);
}
