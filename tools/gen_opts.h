/* gen_opts.h — the options `braid run` and `braid chat` share (model, sampling, length, context, context
 * shift, Self-Extend, speculative decoding, sessions), and opening the models and contexts they ask for. */
#ifndef BRAID_TOOLS_GEN_OPTS_H
#define BRAID_TOOLS_GEN_OPTS_H

#include <stdio.h>

#include "braid.h"

#define GEN_OPTS_MAX_STOP 16

typedef struct gen_opts {
    const char *model;
    int32_t n_predict;
    int32_t n_threads; /* 0: braid's default */
    int32_t n_ctx;     /* 0: the command's default */
    int32_t n_batch;
    braid_sampler_params sp;
    int ctx_shift;
    int32_t n_keep;
    int32_t se_n, se_w; /* Self-Extend */
    const char *draft_model;
    int32_t draft_n;
    int32_t lookup_n;
    int mtp;           /* --mtp: draft with the model's own MTP head */
    int draft_n_set;   /* --draft-n was given (--mtp drafts fewer by default) */
    const char *session;
    const char *stop[GEN_OPTS_MAX_STOP];
    int32_t n_stop;
    int json;
    const char *json_schema; /* --json-schema FILE: constrained decoding to that JSON Schema */
    int json_object;         /* --json-object: constrained decoding to any JSON object */
} gen_opts;

void gen_opts_init(gen_opts *o);
/* Consumes the option at argv[*i] (and its values, advancing *i) if it is one of these: 1; not one: 0; a bad
 * or missing value (reported on stderr): -1. */
int gen_opts_parse(const char *cmd, int argc, char **argv, int *i, gen_opts *o);
void gen_opts_usage(FILE *f);

typedef struct gen_setup {
    braid_model *model, *draft_model;
    braid_context *ctx, *draft_ctx;
    braid_json_constraint *json; /* --json-schema / --json-object, or NULL */
    char default_path[4096];
} gen_setup;

/* Tokens drafted per step: --draft-n, or the default of the drafting chosen. */
int32_t gen_opts_draft_n(const gen_opts *o);
/* Loads the model (the built-in default without -m) and the draft model, and compiles the JSON constraint.
 * 0 on failure (reported). */
int gen_setup_models(const char *cmd, gen_opts *o, gen_setup *su);
/* Creates the contexts with n_ctx cells (n_rollback covering the speculative batches). 0 on failure. */
int gen_setup_contexts(const char *cmd, const gen_opts *o, uint32_t n_ctx, gen_setup *su);
void gen_setup_free(gen_setup *su);
/* The generator parameters for these options and contexts. */
braid_gen_params gen_opts_params(const gen_opts *o, const gen_setup *su);

/* A braid_piece_fn that writes the text to stdout as it comes. */
int gen_put_piece(void *user, braid_token t, const char *text, size_t len);

/* Sessions: loads path into sequence 0 if it exists. 1: loaded; 0: no file; -1: refused (the reason is on
 * stderr; the context and the file are unchanged, and the caller must not save over the file). */
int gen_session_load(const char *cmd, braid_context *ctx, const char *path);
/* Saves sequence 0 to path; a failure is reported and returns 0 (the previous file stays). */
int gen_session_save(const char *cmd, braid_context *ctx, const char *path);

#endif
