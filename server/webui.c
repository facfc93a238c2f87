/* webui.c — the chat page at / : serves the files of server/webui/ that cmake/embed.cmake compiled in, with a
 * strict Content-Security-Policy (everything from this origin, no inline script or style, no frames, no
 * plug-ins), so model text the page shows can never run as code even if it slipped past the page's escaping.
 * The page needs no API key (it asks for one when the API answers 401); everything it fetches does. */
#include <string.h>

#include "http.h"

extern const unsigned char srv_asset_index_html[], srv_asset_app_js[], srv_asset_app_css[];
extern const size_t srv_asset_index_html_len, srv_asset_app_js_len, srv_asset_app_css_len;

static const char csp[] = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                          "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
                          "frame-ancestors 'none'";

typedef struct {
    const char *path, *type;
    const unsigned char *data;
    const size_t *len;
} asset;

static const asset assets[] = {
    {"/", "text/html; charset=utf-8", srv_asset_index_html, &srv_asset_index_html_len},
    {"/index.html", "text/html; charset=utf-8", srv_asset_index_html, &srv_asset_index_html_len},
    {"/app.js", "text/javascript; charset=utf-8", srv_asset_app_js, &srv_asset_app_js_len},
    {"/app.css", "text/css; charset=utf-8", srv_asset_app_css, &srv_asset_app_css_len},
};

static const asset *find(const char *url) {
    for (size_t i = 0; i < sizeof assets / sizeof *assets; i++)
        if (!strcmp(url, assets[i].path)) return &assets[i];
    return NULL;
}

int srv_webui_owns(const char *url) { return find(url) != NULL; }

enum MHD_Result srv_webui(srv_conn *cn, const char *method, const char *url) {
    const asset *a = find(url);
    int head = !strcmp(method, "HEAD");
    if (!a) return srv_reply_error(cn, 404, NULL, NULL, NULL, "no route %s %s", method, url);
    if (strcmp(method, "GET") && !head)
        return srv_reply_error(cn, 405, NULL, NULL, NULL, "%s is not allowed on %s", method, url);
    /* the arrays live as long as the program: MHD reads them in place */
    struct MHD_Response *r =
        MHD_create_response_from_buffer(*a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", a->type);
    MHD_add_response_header(r, "Content-Security-Policy", csp);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ok = MHD_queue_response(cn->c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}
