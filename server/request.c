/* request.c — JSON bodies into validated requests (see request.h). jansson parses (it refuses invalid UTF-8
 * and NUL bytes in strings); every field is then read through a typed getter that reports the field's name,
 * so a client learns which parameter was wrong. */
#include "request.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(srv_req_error *e, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    e->status = 400;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return 0;
}

/* The object's field, or NULL when absent or null. */
static json_t *field(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return v && !json_is_null(v) ? v : NULL;
}

static json_t *load_object(const char *body, size_t len, srv_req_error *e) {
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        fail(e, NULL, "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        fail(e, NULL, "the body must be a JSON object");
        return NULL;
    }
    return root;
}

static int get_bool(json_t *o, const char *k, int *out, srv_req_error *e) {
    json_t *v = field(o, k);
    if (!v) return 1;
    if (!json_is_boolean(v)) return fail(e, k, "'%s' must be a boolean", k);
    *out = json_is_true(v);
    return 1;
}

static int get_int(json_t *o, const char *k, int64_t lo, int64_t hi, int64_t *out, srv_req_error *e) {
    json_t *v = field(o, k);
    if (!v) return 1;
    if (!json_is_integer(v)) return fail(e, k, "'%s' must be an integer", k);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) return fail(e, k, "'%s' is %lld, out of %lld .. %lld", k, (long long)x, (long long)lo, (long long)hi);
    *out = x;
    return 1;
}

static int get_num(json_t *o, const char *k, double lo, double hi, float *out, srv_req_error *e) {
    json_t *v = field(o, k);
    if (!v) return 1;
    if (!json_is_number(v)) return fail(e, k, "'%s' must be a number", k);
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi)) return fail(e, k, "'%s' is %g, out of %g .. %g", k, x, lo, hi);
    *out = (float)x;
    return 1;
}

static int get_str(json_t *o, const char *k, char **out, srv_req_error *e) {
    json_t *v = field(o, k);
    if (!v) return 1;
    if (!json_is_string(v)) return fail(e, k, "'%s' must be a string", k);
    *out = strndup(json_string_value(v), json_string_length(v));
    if (!*out) return fail(e, k, "out of memory");
    return 1;
}

void srv_request_free(srv_request *r) {
    if (!r) return;
    free(r->model);
    free(r->messages_json);
    free(r->prompt);
    free(r->prompt_tokens);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->tools_json);
    free(r->tool_name);
    free(r->schema_json);
    for (int i = 0; i < r->n_images; i++) free(r->images[i].data);
    memset(r, 0, sizeof *r);
}

/* Standard base64 (RFC 4648, '=' padding optional) into a malloc'd buffer; whitespace is skipped, as
 * browsers and `base64` wrap lines. 0 with why set on any other character or a dangling last character. */
static int base64_decode(const char *in, size_t n, unsigned char **out, size_t *size, char *why, size_t why_len) {
    unsigned char *buf = malloc(n / 4 * 3 + 3);
    if (!buf) return snprintf(why, why_len, "out of memory"), 0;
    uint32_t acc = 0;
    int bits = 0, pad = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];
        int v;
        if (c >= 'A' && c <= 'Z') v = c - 'A';
        else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
        else if (c >= '0' && c <= '9') v = c - '0' + 52;
        else if (c == '+') v = 62;
        else if (c == '/') v = 63;
        else if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        else if (c == '=') {
            pad++;
            continue;
        } else {
            free(buf);
            return snprintf(why, why_len, "the base64 data has a '%c' (byte %u) at offset %zu",
                            c >= 32 && c < 127 ? c : '?', c, i), 0;
        }
        if (pad) {
            free(buf);
            return snprintf(why, why_len, "the base64 data goes on after '=' padding (offset %zu)", i), 0;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf[o++] = (unsigned char)(acc >> bits);
        }
    }
    if (bits >= 6 || pad > 2) { /* one character of a group alone encodes no byte */
        free(buf);
        return snprintf(why, why_len, "the base64 data is truncated (its length is not a whole number of bytes)"), 0;
    }
    *out = buf;
    *size = o;
    return 1;
}

/* An image_url part: only base64 data: URLs; the bytes go to r->images. */
static int image_part(json_t *part, const char *p, srv_request *r, srv_req_error *e) {
    json_t *iu = json_object_get(part, "image_url");
    json_t *url = json_is_object(iu) ? json_object_get(iu, "url") : iu; /* some clients send the URL bare */
    if (!json_is_string(url)) return fail(e, p, "an image_url part of '%s' needs image_url.url (a string)", p);
    const char *u = json_string_value(url);
    size_t n = json_string_length(url);
    if (!strncmp(u, "http://", 7) || !strncmp(u, "https://", 8))
        return fail(e, p, "'%s' has a remote image URL: this server does not fetch remote images; send the image "
                          "inline as a data: URL (data:image/png;base64,...)", p);
    if (strncmp(u, "data:", 5)) return fail(e, p, "'%s': an image URL must be a data: URL (data:image/png;base64,...)", p);
    const char *comma = memchr(u, ',', n);
    if (!comma || comma - u < 12 || memcmp(comma - 7, ";base64", 7))
        return fail(e, p, "'%s': the data: URL must be base64 (data:<type>;base64,<data>)", p);
    if (r->n_images == SRV_MAX_IMAGES) return fail(e, p, "a request may hold at most %d images", SRV_MAX_IMAGES);
    char why[160];
    srv_image_bytes *im = &r->images[r->n_images];
    if (!base64_decode(comma + 1, n - (size_t)(comma + 1 - u), &im->data, &im->size, why, sizeof why))
        return fail(e, p, "'%s': %s", p, why);
    r->n_images++;
    if (!im->size) return fail(e, p, "'%s': the image is empty (0 bytes)", p);
    return 1;
}

/* A message's content as one string: a string, null (""), or an array of {"type": "text", "text": ...} and
 * {"type": "image_url", ...} parts joined, each image as SRV_IMAGE_MARKER (its bytes go to r->images). */
static json_t *content_text(json_t *c, int i, srv_request *r, srv_req_error *e) {
    char p[64];
    snprintf(p, sizeof p, "messages[%d].content", i);
    if (!c || json_is_null(c)) return json_string("");
    if (json_is_string(c)) return json_incref(c);
    if (!json_is_array(c)) {
        fail(e, p, "'%s' must be a string or an array of content parts", p);
        return NULL;
    }
    const size_t ml = sizeof SRV_IMAGE_MARKER - 1;
    size_t n = 0, idx;
    json_t *part;
    json_array_foreach(c, idx, part) {
        json_t *t = json_is_object(part) ? json_object_get(part, "type") : NULL;
        if (!t || !json_is_string(t)) {
            fail(e, p, "each part of '%s' must be an object with a string 'type'", p);
            return NULL;
        }
        if (!strcmp(json_string_value(t), "image_url")) {
            if (!image_part(part, p, r, e)) return NULL;
            n += ml;
            continue;
        }
        if (strcmp(json_string_value(t), "text")) {
            fail(e, p, "content parts of type '%s' are not supported (text and image_url only)", json_string_value(t));
            return NULL;
        }
        json_t *tx = json_object_get(part, "text");
        if (!json_is_string(tx)) {
            fail(e, p, "a text part of '%s' needs a string 'text'", p);
            return NULL;
        }
        n += json_string_length(tx);
    }
    char *buf = malloc(n + 1);
    if (!buf) {
        fail(e, p, "out of memory");
        return NULL;
    }
    size_t o = 0;
    json_array_foreach(c, idx, part) {
        json_t *tx = json_object_get(part, "text");
        if (!json_is_string(tx) || strcmp(json_string_value(json_object_get(part, "type")), "text")) {
            memcpy(buf + o, SRV_IMAGE_MARKER, ml);
            o += ml;
            continue;
        }
        memcpy(buf + o, json_string_value(tx), json_string_length(tx));
        o += json_string_length(tx);
    }
    json_t *s = json_stringn_nocheck(buf, o);
    free(buf);
    return s;
}

/* Assistant tool calls for the template: arguments (a JSON string in OpenAI's API) parsed into an object,
 * which is what chat templates iterate over. A string that is not a JSON object stays a string. */
static json_t *norm_tool_calls(json_t *tc, int i, srv_req_error *e) {
    char p[64];
    snprintf(p, sizeof p, "messages[%d].tool_calls", i);
    if (!json_is_array(tc)) {
        fail(e, p, "'%s' must be an array", p);
        return NULL;
    }
    json_t *out = json_array();
    size_t idx;
    json_t *c;
    json_array_foreach(tc, idx, c) {
        json_t *fn = json_is_object(c) ? json_object_get(c, "function") : NULL;
        json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
        if (!json_is_string(name)) {
            json_decref(out);
            fail(e, p, "each of '%s' needs function.name (a string)", p);
            return NULL;
        }
        json_t *args = json_object_get(fn, "arguments");
        json_t *a = NULL;
        if (json_is_string(args)) {
            a = json_loads(json_string_value(args), 0, NULL);
            if (a && !json_is_object(a)) json_decref(a), a = NULL;
            if (!a) a = json_incref(args);
        } else if (json_is_object(args)) {
            a = json_incref(args);
        } else {
            a = json_object();
        }
        json_t *nc = json_deep_copy(c);
        json_t *nfn = json_object_get(nc, "function");
        json_object_set_new(nfn, "arguments", a);
        if (!json_object_get(nc, "type")) json_object_set_new(nc, "type", json_string("function"));
        json_array_append_new(out, nc);
    }
    return out;
}

static int parse_messages(json_t *root, srv_request *r, srv_req_error *e) {
    json_t *msgs = field(root, "messages");
    if (!msgs) return fail(e, "messages", "'messages' is required");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return fail(e, "messages", "'messages' must be a non-empty array");
    json_t *out = json_array();
    size_t idx;
    json_t *m;
    json_array_foreach(msgs, idx, m) {
        int i = (int)idx;
        char p[64];
        snprintf(p, sizeof p, "messages[%d]", i);
        if (!json_is_object(m)) {
            json_decref(out);
            return fail(e, p, "'%s' must be an object", p);
        }
        json_t *role = json_object_get(m, "role");
        static const char *roles[] = {"system", "developer", "user", "assistant", "tool", "function"};
        int ok = 0;
        for (size_t k = 0; json_is_string(role) && k < sizeof roles / sizeof *roles; k++)
            ok |= !strcmp(json_string_value(role), roles[k]);
        if (!ok) {
            json_decref(out);
            snprintf(p, sizeof p, "messages[%d].role", i);
            return fail(e, p, "'%s' must be one of system, developer, user, assistant, tool", p);
        }
        json_t *text = content_text(json_object_get(m, "content"), i, r, e);
        if (!text) {
            json_decref(out);
            return 0;
        }
        json_t *nm = json_object();
        json_object_set(nm, "role", role);
        json_object_set_new(nm, "content", text);
        json_t *tc = field(m, "tool_calls");
        if (tc) {
            json_t *ntc = norm_tool_calls(tc, i, e);
            if (!ntc) {
                json_decref(nm);
                json_decref(out);
                return 0;
            }
            json_object_set_new(nm, "tool_calls", ntc);
        }
        static const char *pass[] = {"name", "tool_call_id", "reasoning_content"};
        for (size_t k = 0; k < sizeof pass / sizeof *pass; k++) {
            json_t *v = field(m, pass[k]);
            if (!v) continue;
            if (!json_is_string(v)) {
                json_decref(nm);
                json_decref(out);
                snprintf(p, sizeof p, "messages[%d].%s", i, pass[k]);
                return fail(e, p, "'%s' must be a string", p);
            }
            json_object_set(nm, pass[k], v);
        }
        json_array_append_new(out, nm);
    }
    r->messages_json = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    return r->messages_json ? 1 : fail(e, "messages", "out of memory");
}

static int parse_prompt(json_t *root, srv_request *r, srv_req_error *e) {
    json_t *p = field(root, "prompt");
    if (!p) return fail(e, "prompt", "'prompt' is required");
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0))) p = json_array_get(p, 0);
    if (json_is_string(p)) {
        r->prompt = strndup(json_string_value(p), json_string_length(p));
        if (!r->prompt) return fail(e, "prompt", "out of memory");
        if (!r->prompt[0]) return fail(e, "prompt", "'prompt' is empty");
        return 1;
    }
    if (!json_is_array(p) || json_array_size(p) == 0 || json_array_size(p) > (1u << 26))
        return fail(e, "prompt", "'prompt' must be a string, an array of one string, or a non-empty array of token ids");
    size_t n = json_array_size(p), idx;
    r->prompt_tokens = malloc(n * sizeof *r->prompt_tokens);
    if (!r->prompt_tokens) return fail(e, "prompt", "out of memory");
    json_t *t;
    json_array_foreach(p, idx, t) {
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX)
            return fail(e, "prompt", "prompt[%zu] must be a token id (a non-negative integer)", idx);
        r->prompt_tokens[idx] = (braid_token)json_integer_value(t);
    }
    r->n_prompt_tokens = (int32_t)n;
    return 1;
}

static int parse_stop(json_t *root, srv_request *r, srv_req_error *e) {
    json_t *s = field(root, "stop");
    if (!s) return 1;
    if (json_is_string(s)) {
        if (!json_string_length(s)) return 1; /* "" means none */
        r->stop[0] = strndup(json_string_value(s), json_string_length(s));
        r->n_stop = r->stop[0] ? 1 : 0;
        return r->stop[0] ? 1 : fail(e, "stop", "out of memory");
    }
    if (!json_is_array(s) || json_array_size(s) > SRV_MAX_STOP)
        return fail(e, "stop", "'stop' must be a string or an array of at most %d strings", SRV_MAX_STOP);
    size_t idx;
    json_t *v;
    json_array_foreach(s, idx, v) {
        if (!json_is_string(v)) return fail(e, "stop", "stop[%zu] must be a string", idx);
        if (!json_string_length(v)) continue;
        r->stop[r->n_stop] = strndup(json_string_value(v), json_string_length(v));
        if (!r->stop[r->n_stop]) return fail(e, "stop", "out of memory");
        r->n_stop++;
    }
    return 1;
}

static int parse_tools(json_t *root, srv_request *r, srv_req_error *e) {
    json_t *tools = field(root, "tools");
    if (tools) {
        if (!json_is_array(tools)) return fail(e, "tools", "'tools' must be an array");
        size_t idx;
        json_t *t;
        json_array_foreach(tools, idx, t) {
            json_t *type = json_is_object(t) ? json_object_get(t, "type") : NULL;
            json_t *fn = json_is_object(t) ? json_object_get(t, "function") : NULL;
            json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
            json_t *params = json_is_object(fn) ? field(fn, "parameters") : NULL;
            if (!json_is_string(type) || strcmp(json_string_value(type), "function") || !json_is_string(name) ||
                !json_string_length(name) || (params && !json_is_object(params)))
                return fail(e, "tools", "tools[%zu] must be {\"type\": \"function\", \"function\": {\"name\": "
                                        "string, \"parameters\": object}}", idx);
        }
        if (json_array_size(tools)) {
            r->tools_json = json_dumps(tools, JSON_COMPACT);
            if (!r->tools_json) return fail(e, "tools", "out of memory");
        }
    }
    r->tool_choice = r->tools_json ? SRV_TOOLS_AUTO : SRV_TOOLS_NONE;
    json_t *tc = field(root, "tool_choice");
    if (!tc) return 1;
    if (json_is_string(tc)) {
        const char *s = json_string_value(tc);
        if (!strcmp(s, "none")) r->tool_choice = SRV_TOOLS_NONE;
        else if (!strcmp(s, "auto")) r->tool_choice = r->tools_json ? SRV_TOOLS_AUTO : SRV_TOOLS_NONE;
        else if (!strcmp(s, "required")) r->tool_choice = SRV_TOOLS_REQUIRED;
        else return fail(e, "tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", ...}");
    } else if (json_is_object(tc)) {
        json_t *type = json_object_get(tc, "type"), *fn = json_object_get(tc, "function");
        json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
        if (!json_is_string(type) || strcmp(json_string_value(type), "function") || !json_is_string(name))
            return fail(e, "tool_choice", "an object 'tool_choice' must be {\"type\": \"function\", \"function\": "
                                          "{\"name\": string}}");
        r->tool_choice = SRV_TOOLS_FUNCTION;
        r->tool_name = strdup(json_string_value(name));
        if (!r->tool_name) return fail(e, "tool_choice", "out of memory");
    } else {
        return fail(e, "tool_choice", "'tool_choice' must be a string or an object");
    }
    if (r->tool_choice >= SRV_TOOLS_REQUIRED && !r->tools_json)
        return fail(e, "tool_choice", "'tool_choice' asks for a tool but 'tools' is empty");
    if (r->tool_choice == SRV_TOOLS_FUNCTION) {
        json_t *t;
        size_t idx;
        int found = 0;
        json_array_foreach(tools, idx, t) found |= !strcmp(
            json_string_value(json_object_get(json_object_get(t, "function"), "name")), r->tool_name);
        if (!found) return fail(e, "tool_choice", "'tool_choice' names '%s', which is not in 'tools'", r->tool_name);
    }
    return 1;
}

static int parse_format(json_t *root, srv_request *r, srv_req_error *e) {
    json_t *f = field(root, "response_format");
    if (!f) return 1;
    json_t *type = json_is_object(f) ? json_object_get(f, "type") : NULL;
    if (!json_is_string(type))
        return fail(e, "response_format", "'response_format' must be an object with a string 'type'");
    const char *t = json_string_value(type);
    if (!strcmp(t, "text")) return 1;
    if (!strcmp(t, "json_object")) {
        r->format = SRV_FORMAT_JSON_OBJECT;
        return 1;
    }
    if (strcmp(t, "json_schema"))
        return fail(e, "response_format", "'response_format.type' must be text, json_object or json_schema");
    json_t *js = json_object_get(f, "json_schema");
    json_t *schema = json_is_object(js) ? json_object_get(js, "schema") : NULL;
    if (schema && !json_is_object(schema) && !json_is_boolean(schema))
        return fail(e, "response_format", "'response_format.json_schema.schema' must be an object");
    r->format = SRV_FORMAT_JSON_SCHEMA;
    r->schema_json = schema ? json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("{}");
    return r->schema_json ? 1 : fail(e, "response_format", "out of memory");
}

static int parse_sampling(json_t *root, srv_request *r, srv_req_error *e) {
    braid_sampler_params *sp = &r->sampler;
    *sp = braid_sampler_default_params();
    sp->temperature = 1.0f; /* OpenAI's default */
    sp->top_p = 1.0f;
    sp->top_k = 0;
    sp->min_p = 0;
    sp->repeat_penalty = 1.0f;
    int64_t v = 0;
    if (!get_num(root, "temperature", 0, 2, &sp->temperature, e)) return 0;
    if (!get_num(root, "top_p", 0, 1, &sp->top_p, e)) return 0;
    if (!get_num(root, "min_p", 0, 1, &sp->min_p, e)) return 0;
    if (!get_num(root, "presence_penalty", -2, 2, &sp->presence_penalty, e)) return 0;
    if (!get_num(root, "frequency_penalty", -2, 2, &sp->frequency_penalty, e)) return 0;
    if (!get_num(root, "repeat_penalty", 0, 10, &sp->repeat_penalty, e)) return 0;
    v = sp->top_k;
    if (!get_int(root, "top_k", -1, 1 << 30, &v, e)) return 0;
    sp->top_k = (int32_t)v;
    v = sp->penalty_last_n;
    if (!get_int(root, "repeat_last_n", 0, 1 << 20, &v, e)) return 0;
    sp->penalty_last_n = (int32_t)v;
    json_t *seed = field(root, "seed");
    if (seed) {
        if (!json_is_integer(seed)) return fail(e, "seed", "'seed' must be an integer");
        sp->seed = (uint64_t)json_integer_value(seed);
        r->has_seed = 1;
    }
    return 1;
}

/* "speculative": an object (or null: the server's default). Unknown keys are ignored, as everywhere. */
static int parse_speculative(json_t *root, srv_request *r, srv_req_error *e) {
    json_t *o = field(root, "speculative");
    if (!o) return 1;
    if (!json_is_object(o)) return fail(e, "speculative", "'speculative' must be an object");
    json_t *mode = field(o, "mode");
    if (mode) {
        static const char *names[] = {"default", "off", "lookup", "draft", "mtp"};
        if (!json_is_string(mode)) return fail(e, "speculative.mode", "'speculative.mode' must be a string");
        int found = -1;
        for (int i = 0; i < 5; i++)
            if (!strcmp(json_string_value(mode), names[i])) found = i;
        if (found < 0)
            return fail(e, "speculative.mode", "'speculative.mode' must be \"default\", \"off\", \"lookup\", \"draft\" or \"mtp\"");
        r->spec_mode = (srv_spec_mode)found;
    }
    int64_t v = 0;
    if (field(o, "n") && field(o, "n_max")) return fail(e, "speculative.n", "give 'speculative.n' or 'n_max', not both");
    /* the getters name the key alone; the error names it inside "speculative" */
    if (!get_int(o, "n", 1, SRV_MAX_DRAFT_N, &v, e)) return snprintf(e->param, sizeof e->param, "speculative.n"), 0;
    if (!get_int(o, "n_max", 1, SRV_MAX_DRAFT_N, &v, e))
        return snprintf(e->param, sizeof e->param, "speculative.n_max"), 0;
    r->spec_n = (int32_t)v;
    v = 0;
    if (!get_int(o, "ngram", 1, SRV_MAX_DRAFT_N, &v, e))
        return snprintf(e->param, sizeof e->param, "speculative.ngram"), 0;
    r->spec_ngram = (int32_t)v;
    if (r->spec_mode == SRV_SPEC_OFF && (r->spec_n || r->spec_ngram))
        return fail(e, "speculative", "'speculative.mode' \"off\" takes no 'n' or 'ngram'");
    if (r->spec_ngram && r->spec_mode == SRV_SPEC_DRAFT)
        return fail(e, "speculative.ngram", "'speculative.ngram' is for \"lookup\"");
    return 1;
}

int srv_request_parse(const char *body, size_t len, srv_req_kind kind, srv_request *r, srv_req_error *e) {
    memset(r, 0, sizeof *r);
    memset(e, 0, sizeof *e);
    r->kind = kind;
    r->max_tokens = -1;
    r->n = 1;
    json_t *root = load_object(body, len, e);
    if (!root) return 0;
    int ok = get_str(root, "model", &r->model, e);
    ok = ok && (kind == SRV_REQ_CHAT ? parse_messages(root, r, e) : parse_prompt(root, r, e));
    ok = ok && get_bool(root, "stream", &r->stream, e);
    json_t *so = ok ? field(root, "stream_options") : NULL;
    if (ok && so && !json_is_object(so)) ok = fail(e, "stream_options", "'stream_options' must be an object");
    if (ok && so) ok = get_bool(so, "include_usage", &r->include_usage, e);
    int64_t v = -1;
    ok = ok && get_int(root, "max_tokens", 0, INT32_MAX, &v, e);
    ok = ok && get_int(root, "max_completion_tokens", 0, INT32_MAX, &v, e); /* the newer name wins */
    r->max_tokens = (int32_t)v;
    ok = ok && parse_sampling(root, r, e);
    ok = ok && parse_stop(root, r, e);
    ok = ok && parse_speculative(root, r, e);
    if (ok && kind == SRV_REQ_CHAT) {
        ok = get_bool(root, "logprobs", &r->logprobs, e);
        v = -1;
        ok = ok && get_int(root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &v, e);
        if (ok && v >= 0 && !r->logprobs) ok = fail(e, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
        if (ok && v > 0) r->top_logprobs = (int)v;
        ok = ok && parse_tools(root, r, e);
        ok = ok && parse_format(root, r, e);
    } else if (ok) {
        /* /v1/completions: logprobs is the number of alternatives (0 .. 5 in OpenAI's API; 20 here) */
        v = -1;
        ok = get_int(root, "logprobs", 0, SRV_MAX_TOP_LOGPROBS, &v, e);
        if (ok && v >= 0) r->logprobs = 1, r->top_logprobs = (int)v;
        json_t *echo = field(root, "echo");
        if (ok && echo && !json_is_boolean(echo)) ok = fail(e, "echo", "'echo' must be a boolean");
        if (ok && json_is_true(echo)) ok = fail(e, "echo", "'echo' is not supported");
        if (ok && field(root, "suffix")) ok = fail(e, "suffix", "'suffix' is not supported");
        v = 1;
        ok = ok && get_int(root, "best_of", 1, 1, &v, e);
    }
    v = 1;
    ok = ok && get_int(root, "n", 1, 16, &v, e);
    r->n = (int)v;
    if (ok) {
        json_t *pt = field(root, "parallel_tool_calls");
        if (pt && !json_is_boolean(pt)) ok = fail(e, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    }
    json_decref(root);
    if (!ok) srv_request_free(r);
    return ok;
}

void srv_tokenize_free(srv_tokenize_req *r) {
    if (r) free(r->content), r->content = NULL;
}

int srv_tokenize_parse(const char *body, size_t len, srv_tokenize_req *r, srv_req_error *e) {
    memset(r, 0, sizeof *r);
    memset(e, 0, sizeof *e);
    r->parse_special = 1;
    json_t *root = load_object(body, len, e);
    if (!root) return 0;
    json_t *c = field(root, "content");
    int ok = 1;
    if (!json_is_string(c)) ok = fail(e, "content", "'content' must be a string");
    ok = ok && get_bool(root, "add_special", &r->add_special, e);
    ok = ok && get_bool(root, "parse_special", &r->parse_special, e);
    ok = ok && get_bool(root, "with_pieces", &r->with_pieces, e);
    if (ok) {
        r->len = json_string_length(c);
        r->content = malloc(r->len + 1);
        if (!r->content) ok = fail(e, "content", "out of memory");
        else memcpy(r->content, json_string_value(c), r->len + 1);
    }
    json_decref(root);
    if (!ok) srv_tokenize_free(r);
    return ok;
}

int srv_detokenize_parse(const char *body, size_t len, braid_token **tokens, int32_t *n, srv_req_error *e) {
    memset(e, 0, sizeof *e);
    *tokens = NULL;
    *n = 0;
    json_t *root = load_object(body, len, e);
    if (!root) return 0;
    json_t *t = field(root, "tokens");
    int ok = 1;
    if (!json_is_array(t)) ok = fail(e, "tokens", "'tokens' must be an array of token ids");
    size_t cnt = ok ? json_array_size(t) : 0, idx;
    if (ok) *tokens = malloc((cnt ? cnt : 1) * sizeof **tokens);
    if (ok && !*tokens) ok = fail(e, "tokens", "out of memory");
    json_t *v;
    if (ok) json_array_foreach(t, idx, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            ok = fail(e, "tokens", "tokens[%zu] must be a token id", idx);
            break;
        }
        (*tokens)[idx] = (braid_token)json_integer_value(v);
    }
    json_decref(root);
    if (!ok) free(*tokens), *tokens = NULL;
    else *n = (int32_t)cnt;
    return ok;
}
