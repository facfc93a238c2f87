/* http.h — what the endpoint handlers (handlers.c) get from the HTTP plumbing (http.c). */
#ifndef BRAID_SERVER_HTTP_H
#define BRAID_SERVER_HTTP_H

#include <microhttpd.h>
#include <stddef.h>

#include "srv_impl.h"

typedef struct srv_conn {
    srv *s;
    struct MHD_Connection *c;
    int fd;                 /* the client's socket (to notice a hang-up while waiting) */
    char *body;
    size_t n_body, cap_body;
    int too_big;
} srv_conn;

/* Queue a reply; each returns MHD's verdict. They count the reply in the metrics. */
enum MHD_Result srv_reply(srv_conn *cn, int status, const char *content_type, char *body, size_t len);
enum MHD_Result srv_reply_json(srv_conn *cn, int status, json_t *j); /* takes j */
enum MHD_Result srv_reply_error(srv_conn *cn, int status, const char *type, const char *param, const char *code,
                                const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* A streamed reply: read() is called for more bytes (as MHD's content reader), done() once when the
 * response goes away (completed or the client left). */
enum MHD_Result srv_reply_stream(srv_conn *cn, MHD_ContentReaderCallback read, void *user,
                                 MHD_ContentReaderFreeCallback done);
/* 1 if the client closed its end of the connection. */
int srv_client_gone(int fd);

/* slot_ops.c: POST /slots/{id}?action=... (id_text: what follows "/slots/") and GET /cache. */
enum MHD_Result srv_slot_action(srv_conn *cn, const char *method, const char *id_text);
enum MHD_Result srv_cache_info(srv_conn *cn);

/* handlers.c: one per route; body is the whole request body. */
enum MHD_Result srv_handle(srv_conn *cn, const char *method, const char *url);

/* webui.c: the chat page's files (/, /app.js, /app.css), answered without the API key. */
int srv_webui_owns(const char *url);
enum MHD_Result srv_webui(srv_conn *cn, const char *method, const char *url);

#endif
