/* slot_ops.c — POST /slots/{id}?action=save|restore|erase and GET /cache.
 *
 * Slot files: braid's state format (braid_state_seq_save_file: the sequence's inputs, attention cells,
 * recurrent state, checkpoints and rollback buffer, versioned and checksummed), so a restored slot reuses its
 * whole prefix at once: the next turn of that conversation decodes only its new tokens. Names are confined to
 * --slot-save-path: a plain file name of letters, digits, '.', '-' and '_' (no '/', no leading '.', at most
 * 200 bytes), so no path leaves the directory. The operation runs on the scheduler thread (the one that
 * drives the context) while the slot is idle; a busy slot answers 409.
 *
 * GET /cache publishes what the prompt cache holds for prefix-aware routers: counters, entries, bytes, and
 * the block hashes of cached prefixes in braid.h's stable scheme (BRAID_CACHE_BLOCK tokens a block, chained
 * XXH3-64), from the snapshot the scheduler refreshes after every admission and retirement. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

int srv_slot_name_ok(const char *name) {
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > 200 || name[0] == '.') return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!isalnum(c) && c != '.' && c != '-' && c != '_') return 0;
    }
    return 1;
}

/* Runs the pending slot operation (scheduler thread; the slot is idle, mu not held). */
static void run_op(srv *s, srv_slot_op *op) {
    braid_seq_id seq = (braid_seq_id)op->slot;
    srv_slot *sl = &s->slots[op->slot];
    double t0 = srv_now_ms();
    op->st = BRAID_OK;
    if (op->kind == SRV_OP_SAVE) {
        op->n_tokens = braid_seq_len(s->ctx, seq);
        op->st = braid_state_seq_save_file(s->ctx, seq, op->path);
    } else if (op->kind == SRV_OP_RESTORE) {
        op->st = braid_state_seq_load_file(s->ctx, seq, op->path);
        if (op->st == BRAID_OK) {
            /* what the slot holds now, for the next request's choice of slot (and into the cache) */
            int32_t len = braid_seq_len(s->ctx, seq), k = 0;
            braid_token *t = len > 0 ? realloc(sl->toks, (size_t)len * sizeof *t) : sl->toks;
            if (len > 0 && t) {
                sl->toks = t;
                sl->cap_toks = len;
                for (; k < len; k++)
                    if (braid_seq_input(s->ctx, seq, k, &t[k], NULL) != BRAID_OK || t[k] < 0) break;
            }
            sl->n_toks = k;
            op->n_tokens = len;
            /* into the cache too, so any slot can continue the conversation (a failure costs only reuse) */
            if (s->cache && braid_prompt_cache_store(s->cache, seq, NULL) != BRAID_OK && s->cfg.verbose)
                fprintf(stderr, "braid serve: slot %d restored but not cached: %s\n", op->slot, braid_last_error());
        }
    } else {
        op->n_tokens = braid_seq_len(s->ctx, seq);
        braid_seq_clear(s->ctx, seq);
        sl->n_toks = 0;
    }
    if (op->st != BRAID_OK) snprintf(op->err, sizeof op->err, "%s: %s", braid_status_name(op->st), braid_last_error());
    if (op->kind != SRV_OP_ERASE && op->st == BRAID_OK) {
        FILE *f = fopen(op->path, "rb");
        if (f && fseek(f, 0, SEEK_END) == 0) op->bytes = (size_t)ftell(f);
        if (f) fclose(f);
    }
    op->ms = srv_now_ms() - t0;
}

void srv_slot_op_poll(srv *s) {
    pthread_mutex_lock(&s->mu);
    srv_slot_op *op = &s->op;
    if (!op->pending || op->done) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    int busy = s->slots[op->slot].job != NULL;
    pthread_mutex_unlock(&s->mu);
    if (busy) {
        op->st = BRAID_E_INVALID;
        op->busy = 1;
        snprintf(op->err, sizeof op->err, "slot %d is processing a request", op->slot);
    } else {
        run_op(s, op);
    }
    srv_cache_publish(s);
    pthread_mutex_lock(&s->mu);
    op->done = 1;
    pthread_cond_broadcast(&s->cv_out);
    pthread_mutex_unlock(&s->mu);
}

void srv_cache_publish(srv *s) {
    if (!s->cache) return;
    braid_prompt_cache_stats st;
    braid_prompt_cache_get_stats(s->cache, &st);
    uint64_t *h = NULL;
    size_t n = 0;
    if (braid_prompt_cache_block_hashes(s->cache, &h, &n) != BRAID_OK) h = NULL, n = 0;
    pthread_mutex_lock(&s->mu);
    s->m.cache = st;
    s->m.cache_on = 1;
    braid_free(s->cache_hashes);
    s->cache_hashes = h;
    s->n_cache_hashes = n;
    pthread_mutex_unlock(&s->mu);
}

enum MHD_Result srv_slot_action(srv_conn *cn, const char *method, const char *id_text) {
    srv *s = cn->s;
    if (strcmp(method, "POST"))
        return srv_reply_error(cn, 405, NULL, NULL, NULL, "%s is not allowed on /slots/%s", method, id_text);
    char *end = NULL;
    long id = strtol(id_text, &end, 10);
    if (!*id_text || *end || !isdigit((unsigned char)id_text[0]))
        return srv_reply_error(cn, 400, NULL, "id_slot", NULL, "slot id \"%s\" is not a number", id_text);
    if (id < 0 || id >= s->cfg.parallel)
        return srv_reply_error(cn, 404, "not_found_error", "id_slot", NULL, "no slot %ld (the server has %d)", id,
                               s->cfg.parallel);
    const char *action = MHD_lookup_connection_value(cn->c, MHD_GET_ARGUMENT_KIND, "action");
    int kind = !action ? -1 : !strcmp(action, "save") ? SRV_OP_SAVE : !strcmp(action, "restore") ? SRV_OP_RESTORE
                                                                 : !strcmp(action, "erase")  ? SRV_OP_ERASE
                                                                                             : -1;
    if (kind < 0)
        return srv_reply_error(cn, 400, NULL, "action", NULL, "action must be save, restore or erase");
    char name[256] = "";
    if (kind != SRV_OP_ERASE) {
        if (!s->cfg.slot_save_path)
            return srv_reply_error(cn, 501, "not_supported_error", NULL, NULL,
                                   "slot save and restore need --slot-save-path");
        json_error_t je;
        json_t *root = json_loadb(cn->body ? cn->body : "", cn->n_body, 0, &je);
        json_t *fn = root ? json_object_get(root, "filename") : NULL;
        if (!root || !json_is_object(root) || !json_is_string(fn)) {
            json_decref(root);
            return srv_reply_error(cn, 400, NULL, "filename", NULL, "the body must be {\"filename\": \"NAME\"}");
        }
        int ok = srv_slot_name_ok(json_string_value(fn)) && strlen(json_string_value(fn)) < sizeof name;
        if (ok) snprintf(name, sizeof name, "%s", json_string_value(fn));
        json_decref(root);
        if (!ok)
            return srv_reply_error(cn, 400, NULL, "filename", NULL,
                                   "a slot file name is letters, digits, '.', '-' and '_', not starting with '.', "
                                   "at most 200 bytes (it stays inside --slot-save-path)");
    }
    pthread_mutex_lock(&s->mu);
    while (s->op.pending && !s->stopping) pthread_cond_wait(&s->cv_out, &s->mu);
    if (s->stopping) {
        pthread_mutex_unlock(&s->mu);
        return srv_reply_error(cn, 503, "unavailable_error", NULL, NULL, "the server is stopping");
    }
    srv_slot_op *op = &s->op;
    memset(op, 0, sizeof *op);
    op->pending = 1;
    op->slot = (int)id;
    op->kind = kind;
    if (kind != SRV_OP_ERASE) snprintf(op->path, sizeof op->path, "%s/%s", s->cfg.slot_save_path, name);
    pthread_cond_broadcast(&s->cv_work);
    while (!op->done && !s->stopping) pthread_cond_wait(&s->cv_out, &s->mu);
    srv_slot_op r = *op;
    memset(op, 0, sizeof *op);
    pthread_cond_broadcast(&s->cv_out);
    pthread_mutex_unlock(&s->mu);
    if (!r.done) return srv_reply_error(cn, 503, "unavailable_error", NULL, NULL, "the server is stopping");
    if (r.busy) return srv_reply_error(cn, 409, NULL, "id_slot", NULL, "%s", r.err);
    if (r.st != BRAID_OK) {
        int status = kind == SRV_OP_SAVE ? 500 : (r.st == BRAID_E_IO ? 404 : 400);
        return srv_reply_error(cn, status, status == 404 ? "not_found_error" : NULL, "filename", NULL, "%s %s: %s",
                               kind == SRV_OP_SAVE ? "saving to" : "restoring from", name, r.err);
    }
    json_t *o = json_object();
    json_object_set_new(o, "id_slot", json_integer(id));
    if (kind == SRV_OP_ERASE) {
        json_object_set_new(o, "n_erased", json_integer(r.n_tokens));
    } else {
        json_object_set_new(o, "filename", json_string(name));
        json_object_set_new(o, kind == SRV_OP_SAVE ? "n_saved" : "n_restored", json_integer(r.n_tokens));
        json_object_set_new(o, kind == SRV_OP_SAVE ? "n_written" : "n_read", json_integer((json_int_t)r.bytes));
        json_t *t = json_object();
        json_object_set_new(t, kind == SRV_OP_SAVE ? "save_ms" : "restore_ms", json_real(r.ms));
        json_object_set_new(o, "timings", t);
    }
    return srv_reply_json(cn, 200, o);
}

enum MHD_Result srv_cache_info(srv_conn *cn) {
    srv *s = cn->s;
    json_t *o = json_object();
    pthread_mutex_lock(&s->mu);
    const braid_prompt_cache_stats *st = &s->m.cache;
    json_object_set_new(o, "enabled", json_boolean(s->cache != NULL));
    json_object_set_new(o, "budget_bytes", json_integer((json_int_t)s->cfg.cache_ram));
    json_object_set_new(o, "bytes", json_integer((json_int_t)st->bytes));
    json_object_set_new(o, "entries", json_integer(st->entries));
    json_object_set_new(o, "cells", json_integer(st->cells));
    json_object_set_new(o, "checkpoints", json_integer(st->checkpoints));
    json_object_set_new(o, "hits", json_integer((json_int_t)st->hits));
    json_object_set_new(o, "lookups", json_integer((json_int_t)st->lookups));
    json_object_set_new(o, "evictions", json_integer((json_int_t)st->evictions));
    json_t *hs = json_object();
    json_object_set_new(hs, "scheme", json_string("xxh3-64-chained"));
    json_object_set_new(hs, "block_tokens", json_integer(BRAID_CACHE_BLOCK));
    json_object_set_new(hs, "definition",
                        json_string("h(0) = 0; h(k+1) = XXH3_64bits_withSeed(le64(h(k)) || le32(token) for each of "
                                    "the block's 64 token ids, seed 0); hashes are 16 lower-case hex digits"));
    json_t *arr = json_array();
    char buf[24];
    for (size_t i = 0; i < s->n_cache_hashes; i++) {
        snprintf(buf, sizeof buf, "%016llx", (unsigned long long)s->cache_hashes[i]);
        json_array_append_new(arr, json_string(buf));
    }
    json_object_set_new(hs, "hashes", arr);
    json_object_set_new(o, "block_hashes", hs);
    pthread_mutex_unlock(&s->mu);
    return srv_reply_json(cn, 200, o);
}
