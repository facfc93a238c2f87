/* generate.h — the inside of braid_gen (braid.h's generation loop), shared by generate.c (prompt, sampling,
 * stop strings, streaming, context shift, verification) and speculative.c (drafting). */
#ifndef BRAID_ENGINE_GENERATE_H
#define BRAID_ENGINE_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "braid.h"
#include "engine/mtp.h"

struct braid_gen {
    braid_context *ctx;
    braid_gen_params p;
    char **stop; /* [p.n_stop] copies of the stop strings */
    size_t max_stop;
    braid_sampler *smp;  /* the target's sampler */
    braid_sampler *dsmp; /* the draft model's or MTP head's sampler (its own distribution q) */
    bd_mtp *mtp;         /* p.mtp: the MTP head's rows (mtp.h) */
    int32_t n_vocab;
    /* Mirrors of the tokens each sequence holds (rebuilt from the memory by braid_gen_prompt), so that the
     * longest common prefix, lookup drafting and the draft's catch-up need no walk through the memory. */
    braid_token *tok;
    int32_t n_tok, cap_tok;
    braid_token *dtok;
    int32_t n_dtok, cap_dtok;
    int32_t logit_row; /* row of ctx's last decode that holds the next token's logits; -1: none */
    /* the last run's output */
    braid_token *out;
    int32_t n_out, cap_out;
    char *text; /* [n_text] emitted and held-back text */
    size_t n_text, cap_text, n_released;
    braid_gen_stats st;
    double t_prompt0; /* when the last braid_gen_prompt started (ms) */
    int emitted_any;
    int32_t ga_i; /* Self-Extend: start of the next group window (positions) */
    /* speculative scratch */
    braid_token *draft;  /* [draft_n] */
    float *q;            /* [draft_n][n_vocab] the draft's distribution for each drafted token (sampled mode) */
    float *pt;           /* [n_vocab] the target's distribution */
    uint8_t *flags;      /* [n_rows_max] logits flags */
    braid_seq_id *seqv;  /* [n_rows_max] all p.seq */
    int32_t n_rows_max;  /* max(both n_batch, draft_n + 1) */
    /* continuous batching (gen_batch.c): where the generator is between braid_gen_begin and its stop */
    int phase;              /* BD_GEN_IDLE, _PROMPT (chunks left to decode), _GEN (sampling), _DONE */
    braid_token *ptok;      /* [n_ptok] the begun prompt (what is left of it starts at i_ptok) */
    int32_t n_ptok, i_ptok, cap_ptok, lcp_ptok;
    double t_gen0;          /* when generation started (ms) */
    const float *cur_logits; /* inside on_piece: the logits the token was drawn from; else NULL */
    /* prompt cache (p.cache): an identical prompt's kept logits stand for the last decode's row */
    float *kept;            /* [n_vocab] */
    int use_kept;           /* 1: the next token's logits are kept[], not a row of the last decode */
    /* speculative generators in braid_gen_step: the token verification already drew (a rejected draft's
     * replacement or the row after the last accepted one), emitted at the next step as braid_gen_run does */
    int have_next;
    braid_token next;
    int defer_trunc;        /* 1: verification records its truncation in trunc_to (-1: none) instead */
    int32_t trunc_to;
    /* a prompt with images decoded in pieces (generate_parts.c): the parts (the caller's, until the prompt is
     * in), their length in inputs, the next input to decode, the kept prefix, and the grid positions of the
     * image being decoded */
    const braid_prompt_part *pp;
    int32_t n_pp, pp_n, pp_i, pp_lcp;
    braid_pos *pp_pos; /* [cap_pp_pos][4] */
    int32_t cap_pp_pos;
    braid_json_matcher *jm; /* p.json: the document of the current run so far; else NULL */
};

enum { BD_GEN_IDLE = 0, BD_GEN_PROMPT, BD_GEN_GEN, BD_GEN_DONE, BD_GEN_PARTS /* braid_gen_prefill's */ };

double bd_gen_now_ms(void);
/* Appends tokens to a mirror, growing it. */
BRAID_NODISCARD braid_status bd_gen_mirror_push(braid_token **v, int32_t *n, int32_t *cap, const braid_token *t,
                                                int32_t k);
/* Decodes toks[0..n) (n <= n_rows_max) into sequence p.seq of context c (the target's or the draft's), with
 * logits on every row if all, else on the last. */
BRAID_NODISCARD braid_status bd_gen_decode(braid_gen *g, braid_context *c, const braid_token *toks, int32_t n,
                                           int all);
/* Makes the draft context's sequence hold the target's tokens plus `next` (longest common prefix kept) and
 * proposes up to max tokens after it: by the draft model, or by n-gram lookup in the target's history. Writes
 * them to g->draft (and, when sampling, the draft's distributions to g->q); *n_draft gets the count. */
/* The steps braid_gen_prompt / braid_gen_run are made of, shared with gen_batch.c. */
BRAID_NODISCARD braid_status bd_gen_mirror_refresh(braid_context *c, braid_seq_id s, braid_token **v, int32_t *n,
                                                   int32_t *cap);
/* Cells a decode can still take (every sequence shares them), or INT32_MAX without attention layers. */
int32_t bd_gen_room(const braid_gen *g);
/* Validates a prompt, resets the prompt stats, keeps the longest common prefix (truncating the sequence to
 * *lcp), feeds the penalties and checks the room. *use / *n_use get the prompt to decode (*trimmed, to free,
 * when context shift shortened it). */
BRAID_NODISCARD braid_status bd_gen_prompt_prepare(braid_gen *g, const braid_token *tokens, int32_t n,
                                                   const braid_token **use, int32_t *n_use, braid_token **trimmed,
                                                   int32_t *lcp);
/* The logits the next token is sampled from: the kept ones (prompt cache) or the last decode's row; NULL if
 * there are none. */
const float *bd_gen_next_logits(const braid_gen *g);
/* With a prompt cache: stores what the sequence holds now (logits: of its last input, or NULL). A failure
 * only costs reuse later, so it is reported (log) and not returned. */
void bd_gen_cache_store(braid_gen *g, const float *logits);
/* Samples the next token from logits lg: under the JSON constraint when there is one. */
BRAID_NODISCARD braid_status bd_gen_sample(braid_gen *g, const float *lg, braid_token *out);
/* 1 if the run's JSON document is complete and nothing but whitespace could follow: the run ends ("eog"). */
int bd_gen_json_done(const braid_gen *g);
/* Emits token t (output, text, stop strings, the callback); *stop gets "stop" or "cancelled" when it ends. */
BRAID_NODISCARD braid_status bd_gen_emit(braid_gen *g, braid_token t, const char **stop);
/* Hands the text [released, upto) to the callback; nonzero: the callback asked to stop. */
int bd_gen_release(braid_gen *g, braid_token t, size_t upto);
/* Speculative verification of a decoded [next, draft[0..k)] run of rows row0 .. row0 + k of ctx's last
 * decode (next is input base of the sequence): walks the rows as plain decoding would have, emitting every
 * accepted draft; drops the rejected tail through the rollback buffer. *next_out gets the next token to emit
 * (already sampled) when the walk ended on a rejection or the row after the last draft; *have_next says
 * whether there is one (no: a stop was reached, *stop says which). */
BRAID_NODISCARD braid_status bd_gen_verify(braid_gen *g, int32_t base, int32_t row0, int32_t k,
                                           braid_token *next_out, int *have_next, const char **stop);
/* Prompts with images (generate_parts.c). Validates parts: *total inputs, *has_image. */
BRAID_NODISCARD braid_status bd_parts_check(const braid_gen *g, const braid_prompt_part *parts, int32_t n_parts,
                                            int64_t *total, int *has_image);
/* The text parts' tokens in one buffer (*out, bd_free). */
BRAID_NODISCARD braid_status bd_parts_flatten(const braid_prompt_part *parts, int32_t n_parts, braid_token **out,
                                              int32_t *n);
/* Starts decoding a checked prompt of n inputs with images: resets the prompt stats, keeps the longest common
 * prefix (never inside an image; truncating), rebuilds the mirror, feeds the penalties; g->pp_i = the prefix. */
BRAID_NODISCARD braid_status bd_parts_start(braid_gen *g, const braid_prompt_part *parts, int32_t n_parts, int32_t n);
/* Decodes the next piece from g->pp_i: up to n_batch tokens of a text part or rows of an image (checkpoints
 * before and after each image, and after the last input); logit_row is the last input's row once it is in. */
BRAID_NODISCARD braid_status bd_parts_next(braid_gen *g);
BRAID_NODISCARD braid_status bd_spec_draft(braid_gen *g, braid_token next, int32_t max, int32_t *n_draft);

#endif
