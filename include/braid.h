/* braid.h — the one public header of braid, an inference runtime for hybrid (attention + recurrent) language
 * models on the CPU. Everything a program needs is declared here, with the prefix braid_. See
 * ../shared/docs/design.md for the contract behind these calls (the memory, its invariants, the state format).
 *
 * Conventions:
 * - Every fallible call returns a braid_status; BRAID_OK is 0. On failure braid_last_error() gives a human
 *   reason (thread-local, valid until the next braid call on that thread) and nothing was changed.
 * - Sequences are addressed by index (0, 1, 2, ... = order of input), never by position. Positions only feed
 *   RoPE; an input carries n_pos_per_token position components (1, or 4 for M-RoPE: t, y, x, e).
 * - Whoever allocates frees: objects made by braid_*_new / _load are released by the matching _free; buffers
 *   that braid allocates for the caller are released with braid_free().
 */
#ifndef BRAID_H
#define BRAID_H

#include <stddef.h>
#include <stdint.h>

/* Everything declared here is the library's interface: visible from libbraid.so although braid is compiled with
 * hidden visibility (which keeps every internal symbol out of the shared library and of programs). */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(default)
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define BRAID_NODISCARD __attribute__((warn_unused_result))
#else
#define BRAID_NODISCARD
#endif

/* ---- status ------------------------------------------------------------------------------------------------ */

typedef enum braid_status {
    BRAID_OK = 0,
    BRAID_E_INVALID,     /* a bad argument (NULL where a value is needed, bad parameter values) */
    BRAID_E_RANGE,       /* an id, index or range out of bounds */
    BRAID_E_NOMEM,       /* an allocation failed */
    BRAID_E_IO,          /* a read, write or open failed */
    BRAID_E_FORMAT,      /* malformed input data (GGUF, state blob, JSON) */
    BRAID_E_MISMATCH,    /* well-formed data that belongs to another model or configuration */
    BRAID_E_UNSUPPORTED, /* valid but not implemented (an architecture, a tensor type) */
    BRAID_E_FULL,        /* memory capacity (kv cells, checkpoint budget) exhausted; nothing was changed */
    BRAID_E_CANCELLED,   /* stopped by the caller's abort callback; nothing was changed */
    BRAID_STATUS_COUNT
} braid_status;

/* "BRAID_OK", "BRAID_E_RANGE", ...; never NULL. */
const char *braid_status_name(braid_status s);
/* The reason for this thread's last failure ("" if none). */
const char *braid_last_error(void);
/* Releases a buffer that braid allocated for the caller (state blobs, detokenized text). NULL is allowed. */
void braid_free(void *p);

/* ---- basic types ------------------------------------------------------------------------------------------- */

typedef int32_t braid_token;
typedef int32_t braid_pos;
typedef int32_t braid_seq_id;

typedef struct braid_model braid_model;
typedef struct braid_context braid_context;

/* Storage types of tensors and of the attention memory (values equal GGUF's ggml_type ids). */
typedef enum braid_type {
    BRAID_TYPE_F32 = 0,
    BRAID_TYPE_F16 = 1,
    BRAID_TYPE_Q4_0 = 2,
    BRAID_TYPE_Q4_1 = 3,
    BRAID_TYPE_Q5_0 = 6,
    BRAID_TYPE_Q5_1 = 7,
    BRAID_TYPE_Q8_0 = 8,
    BRAID_TYPE_Q2_K = 10,
    BRAID_TYPE_Q3_K = 11,
    BRAID_TYPE_Q4_K = 12,
    BRAID_TYPE_Q5_K = 13,
    BRAID_TYPE_Q6_K = 14,
    BRAID_TYPE_IQ4_NL = 20,
    BRAID_TYPE_IQ4_XS = 23,
    BRAID_TYPE_BF16 = 30,
    BRAID_TYPE_MXFP4 = 39,
} braid_type;

/* ---- model ------------------------------------------------------------------------------------------------- */

typedef struct braid_model_params {
    int use_mmap;   /* 1 (default): map the file; 0: read it into memory */
    int vocab_only; /* 1: load the tokenizer only (no tensors needed) */
    int prefault;   /* with use_mmap, 1 (default): read the weights the model computes with (not the blocks it
                     * skips, e.g. MTP layers) into memory at load, unless they exceed the memory available;
                     * 0: leave them to be read as the first tokens touch them */
} braid_model_params;

/* use_mmap 1, vocab_only 0, prefault 1. */
braid_model_params braid_model_default_params(void);
/* Loads a GGUF file. On success *out owns the model; release with braid_model_free. */
BRAID_NODISCARD braid_status braid_model_load(const char *path, const braid_model_params *params,
                                              braid_model **out);
/* Releases a model (NULL allowed); every context made from it must be freed first. */
void braid_model_free(braid_model *model);

const char *braid_model_arch(const braid_model *model); /* "qwen35", "mamba2", ... */
/* Tokens in the vocabulary: the number of logits per row. */
int32_t braid_model_n_vocab(const braid_model *model);
/* Width of the hidden state (an embedding input row has this many floats). */
int32_t braid_model_n_embd(const braid_model *model);
/* Layers of the model (attention, recurrent or both). */
int32_t braid_model_n_layer(const braid_model *model);
int32_t braid_model_n_pos_per_token(const braid_model *model); /* 1, or 4 for M-RoPE models */
/* 1 if some layer attends (the context then holds n_ctx attention cells). */
int braid_model_has_attention(const braid_model *model);
/* 1 if some layer keeps a recurrent state (GDN, Mamba2, short conv). */
int braid_model_has_recurrent(const braid_model *model);

/* The GGUF's metadata: n_meta keys in file order. braid_model_meta_key gives key i (pointer into the model,
 * valid while it lives). braid_model_meta_str writes a value as text into buf (cap bytes, NUL-terminated,
 * truncated to fit) and the full length into *n_out: strings as they are, numbers in decimal, booleans as
 * true/false, arrays as "[N elements of TYPE]". BRAID_E_RANGE when i or key is not there. */
int32_t braid_model_n_meta(const braid_model *model);
/* Key i of the metadata, 0 <= i < braid_model_n_meta. */
BRAID_NODISCARD braid_status braid_model_meta_key(const braid_model *model, int32_t i, const char **key);
/* Value of key as text (see above); *n_out gets its full length. */
BRAID_NODISCARD braid_status braid_model_meta_str(const braid_model *model, const char *key, char *buf, size_t cap,
                                                  size_t *n_out);
/* Parameter count: elements of every tensor in the file. */
uint64_t braid_model_n_params(const braid_model *model);
/* Bytes of tensor data in the file. */
uint64_t braid_model_size(const braid_model *model);

/* Writes in_path quantized with one of llama.cpp's presets ("Q4_K_M", "Q8_0", "IQ4_XS", "MXFP4_MOE", "F16", ...;
 * those that need an importance matrix are refused) to out_path, the same bytes llama-quantize writes. Input
 * tensors to convert must be F32, F16 or BF16. On failure out_path is removed. */
BRAID_NODISCARD braid_status braid_model_quantize(const char *in_path, const char *out_path, const char *preset);

/* ---- context ----------------------------------------------------------------------------------------------- */

/* Bounds of the context parameters; braid_context_new refuses a value outside them with BRAID_E_INVALID
 * naming the parameter and its bound. */
#define BRAID_MAX_CTX (1u << 26)                   /* n_ctx */
#define BRAID_MAX_SEQ 256u                         /* n_seq_max */
#define BRAID_MAX_BATCH 65536u                     /* n_batch */
#define BRAID_MAX_THREADS 256u                     /* n_threads */
#define BRAID_MAX_CHECKPOINT_INTERVAL (1u << 30)   /* checkpoint_interval */
#define BRAID_MAX_ROLLBACK 1024u                   /* n_rollback */

typedef struct braid_context_params {
    uint32_t n_ctx;                   /* attention cells shared by all sequences, 1 .. BRAID_MAX_CTX (default
                                       * 4096; not used by a model without attention layers) */
    uint32_t n_seq_max;               /* sequences 0 .. n_seq_max-1, n_seq_max in 1 .. BRAID_MAX_SEQ (default 1) */
    uint32_t n_batch;                 /* largest ubatch computed at once, 1 .. BRAID_MAX_BATCH (default 512) */
    uint32_t n_threads;               /* compute threads, 0 .. BRAID_MAX_THREADS (default 0: online cores) */
    uint32_t checkpoint_interval;     /* recurrent checkpoint every this many prefilled inputs, from 0
                                       * (off) to BRAID_MAX_CHECKPOINT_INTERVAL (default 256) */
    uint64_t checkpoint_budget_bytes; /* bytes for checkpoints of all sequences, any value: blocks are allocated
                                       * only as checkpoints are taken (default 256 MiB) */
    uint32_t n_rollback;              /* per-input states kept for the last decode of a sequence, from 0
                                       * to BRAID_MAX_ROLLBACK (default 8) */
    braid_type kv_type;               /* BRAID_TYPE_F16 (default) or BRAID_TYPE_F32 (else BRAID_E_UNSUPPORTED) */
    /* Asked between the layers of a decode (NULL: never). Returning nonzero stops it: braid_decode returns
     * BRAID_E_CANCELLED and nothing changed (memory, sequences, the previous decode's logits). Truncate and
     * copy replays are not cancellable. */
    int (*abort_callback)(void *user);
    void *abort_user;
} braid_context_params;

/* The defaults named in braid_context_params. */
braid_context_params braid_context_default_params(void);
/* A context over model (which must outlive it); *out owned by the caller (braid_context_free). */
BRAID_NODISCARD braid_status braid_context_new(const braid_model *model, const braid_context_params *params,
                                               braid_context **out);
/* Releases a context (NULL allowed); the model stays. */
void braid_context_free(braid_context *ctx);

/* ---- decoding ---------------------------------------------------------------------------------------------- */

typedef struct braid_batch {
    int32_t n_tokens;
    const braid_token *token;  /* n_tokens ids, or NULL when embd is given */
    const float *embd;         /* n_tokens x n_embd rows, or NULL when token is given */
    const braid_pos *pos;      /* token-major, n_pos_per_token each; NULL = each sequence's next positions */
    const braid_seq_id *seq;   /* n_tokens sequence ids; NULL = all sequence 0 */
    const uint8_t *logits;     /* n_tokens flags; NULL = the last input of each sequence */
} braid_batch;

/* Appends the batch's inputs to their sequences (each sequence's inputs in batch order). Capacity for the
 * whole batch is reserved first: BRAID_E_FULL with nothing changed if it does not fit. If the forward pass
 * produces NaN logits (a broken model), BRAID_E_FORMAT ("decode produced NaN logits at row r"): the memory is
 * unchanged, but no logits of an earlier decode are available any more. */
BRAID_NODISCARD braid_status braid_decode(braid_context *ctx, const braid_batch *batch);
/* n_vocab logits of batch row i of the last decode, or NULL if row i did not ask for logits. */
const float *braid_logits(const braid_context *ctx, int32_t i);

/* ---- sequences (by index; whole or nothing) ---------------------------------------------------------------- */

/* Inputs in sequence s (-1 for an id outside 0 .. n_seq_max-1). */
int32_t braid_seq_len(const braid_context *ctx, braid_seq_id s);
/* The temporal position the next text input of s gets (after an image: t0 + max(nx, ny)). */
braid_pos braid_seq_next_pos(const braid_context *ctx, braid_seq_id s);
/* Input i of s (0 <= i < braid_seq_len): its token id (-1 for an embedding input) into *token and its
 * n_pos_per_token positions into pos (either pointer may be NULL). BRAID_E_RANGE for a bad s or i. */
BRAID_NODISCARD braid_status braid_seq_input(const braid_context *ctx, braid_seq_id s, int32_t i, braid_token *token,
                                             braid_pos *pos);
/* Keep the first n inputs. Always possible: rollback buffer, else checkpoint + replay, else replay from 0. */
BRAID_NODISCARD braid_status braid_seq_truncate(braid_context *ctx, braid_seq_id s, int32_t n);
/* Drop inputs [i0, i1), i1 < len (context shift). The recurrent state keeps summarizing the dropped inputs. */
BRAID_NODISCARD braid_status braid_seq_remove(braid_context *ctx, braid_seq_id s, int32_t i0, int32_t i1);
/* Add d to (or divide by k) the temporal position of inputs [i0, i1); K rows are re-rotated lazily. */
BRAID_NODISCARD braid_status braid_seq_shift_pos(braid_context *ctx, braid_seq_id s, int32_t i0, int32_t i1,
                                                 braid_pos d);
/* Divide the temporal positions of inputs [i0, i1) by k (Self-Extend's grouping). */
BRAID_NODISCARD braid_status braid_seq_div_pos(braid_context *ctx, braid_seq_id s, int32_t i0, int32_t i1,
                                               int32_t k);
/* dst becomes the first n inputs of src (attention cells shared, recurrent state at n). */
BRAID_NODISCARD braid_status braid_seq_copy(braid_context *ctx, braid_seq_id src, braid_seq_id dst, int32_t n);
/* Empty s; s = -1 empties every sequence. Never fails on a valid id. */
void braid_seq_clear(braid_context *ctx, braid_seq_id s);
/* Snapshot s's recurrent state now (BRAID_E_FULL if the budget cannot hold it after eviction). */
BRAID_NODISCARD braid_status braid_seq_checkpoint(braid_context *ctx, braid_seq_id s);

/* M-RoPE positions of an nx x ny image grid starting at temporal position t0, row-major, written to out
 * (nx*ny*4 values: t, y, x, e per input). Returns the next text position, t0 + max(nx, ny), or -1 (nothing
 * written) if nx or ny < 1, out is NULL, or a position would leave 0 .. 2^29. */
braid_pos braid_image_positions(const braid_model *model, braid_pos t0, int32_t nx, int32_t ny, braid_pos *out);

/* ---- images and the vision encoder (src/vision/) --------------------------------------------------------- */

/* A decoded picture: RGB, 8 bits a channel, rows top to bottom. */
typedef struct braid_image braid_image;

#define BRAID_IMAGE_MAX_BYTES (64u << 20) /* encoded bytes braid_image_decode / _load_file accept */
#define BRAID_IMAGE_MAX_SIDE 16384u       /* pixels a side */
#define BRAID_IMAGE_MAX_PIXELS (1u << 25) /* pixels in all (96 MiB of RGB) */

/* Decodes PNG, JPEG or WebP (found from the content). Alpha is dropped, greyscale and palettes become RGB.
 * Refused with the reason: no data (BRAID_E_FORMAT), more than the limits above (BRAID_E_RANGE, checked from
 * the header before the pixels are allocated), an unknown format or a truncated / damaged file
 * (BRAID_E_FORMAT), CMYK JPEG, animated WebP, GIF, BMP (BRAID_E_UNSUPPORTED). On success *out owns the image;
 * release with braid_image_free. */
BRAID_NODISCARD braid_status braid_image_decode(const void *data, size_t size, braid_image **out);
/* braid_image_decode of a file's bytes (at most BRAID_IMAGE_MAX_BYTES); a failure names the file. */
BRAID_NODISCARD braid_status braid_image_load_file(const char *path, braid_image **out);
/* An image from w*h*3 bytes of RGB (copied). */
BRAID_NODISCARD braid_status braid_image_from_rgb(int32_t w, int32_t h, const uint8_t *rgb, braid_image **out);
/* Releases an image. NULL is allowed. */
void braid_image_free(braid_image *img);
/* Width in pixels (0 for NULL). */
int32_t braid_image_width(const braid_image *img);
/* Height in pixels (0 for NULL). */
int32_t braid_image_height(const braid_image *img);
const uint8_t *braid_image_rgb(const braid_image *img); /* w*h*3 bytes */
uint64_t braid_image_hash(const braid_image *img);      /* of the size and the pixels (cache key) */

/* A vision projector ("mmproj" GGUF, general.architecture clip): a ViT and a merger that turn an image into
 * rows of the text model's input width. Supported: clip.projector_type qwen3vl_merger (Qwen3-VL, Qwen3.5),
 * F32 / F16 / BF16 weights, with or without deepstack layers. Immutable once loaded; one encode at a time. */
typedef struct braid_mmproj braid_mmproj;

typedef struct braid_mmproj_params {
    int32_t image_min_tokens; /* rows per image at least / at most (0: the projector's defaults, 8 and 4096 */
    int32_t image_max_tokens; /* for qwen3vl_merger, as llama.cpp) */
    uint32_t n_threads;       /* threads of the encoder, 0 .. BRAID_MAX_THREADS (0: online cores) */
    uint64_t cache_bytes;     /* rows of recently encoded images kept by content (braid_image_hash), so a
                               * chat that shows the conversation's images again each turn encodes each once;
                               * least recently used dropped first (default 256 MiB; 0: the default; 1: off) */
} braid_mmproj_params;

/* All fields 0: the projector's token limits, online cores, the default cache. */
braid_mmproj_params braid_mmproj_default_params(void);
/* Loads a projector GGUF (params NULL: the defaults). Everything is checked at load (keys, tensor shapes and
 * types); a file of another projector type or a text model gives the reason. On success *out owns it. */
BRAID_NODISCARD braid_status braid_mmproj_load(const char *path, const braid_mmproj_params *params,
                                               braid_mmproj **out);
/* Releases a projector, its threads and its cache. NULL is allowed. */
void braid_mmproj_free(braid_mmproj *mm);
/* Floats per output row: the text model's n_embd, times 1 + the deepstack layers if any. */
int32_t braid_mmproj_n_embd(const braid_mmproj *mm);
/* BRAID_OK if the rows can feed model (width = its n_embd, M-RoPE positions); else BRAID_E_MISMATCH with the
 * reason (e.g. a deepstack projector for a text model that does not use deepstack, as Qwen3.5). */
BRAID_NODISCARD braid_status braid_mmproj_check_model(const braid_mmproj *mm, const braid_model *model);
/* The grid the image is encoded to: nx x ny rows (after the resize to the encoder's multiples). */
BRAID_NODISCARD braid_status braid_mmproj_image_grid(const braid_mmproj *mm, const braid_image *img, int32_t *nx,
                                                     int32_t *ny);
/* Encodes img: *rows gets nx*ny rows of braid_mmproj_n_embd floats, row-major over the grid (release with
 * braid_free). An image whose size and pixels equal a cached one's gets a copy of its rows (the same bits). */
BRAID_NODISCARD braid_status braid_mmproj_encode(braid_mmproj *mm, const braid_image *img, float **rows,
                                                 int32_t *nx, int32_t *ny);
/* How many braid_mmproj_encode calls were served from the cache, and how many encoded. */
void braid_mmproj_cache_stats(const braid_mmproj *mm, uint64_t *hits, uint64_t *misses);

/* ---- state (design.md §5: versioned, checksummed; load validates everything before changing anything) ---- */

/* Sequence s (inputs, attention cells, recurrent state, checkpoints, rollback buffer) as one blob; *data
 * allocated, release with braid_free. */
BRAID_NODISCARD braid_status braid_state_seq_save(braid_context *ctx, braid_seq_id s, void **data, size_t *size);
/* Replaces sequence s with a blob from braid_state_seq_save (of a model with the same fingerprint). */
BRAID_NODISCARD braid_status braid_state_seq_load(braid_context *ctx, braid_seq_id s, const void *data,
                                                  size_t size);
/* braid_state_seq_save into a file, written whole (a temporary file renamed into place). */
BRAID_NODISCARD braid_status braid_state_seq_save_file(braid_context *ctx, braid_seq_id s, const char *path);
/* braid_state_seq_load from a file. */
BRAID_NODISCARD braid_status braid_state_seq_load_file(braid_context *ctx, braid_seq_id s, const char *path);
/* Every sequence of the context as one blob (*data allocated; release with braid_free). */
BRAID_NODISCARD braid_status braid_state_save(braid_context *ctx, void **data, size_t *size);
/* Replaces every sequence with a blob from braid_state_save. */
BRAID_NODISCARD braid_status braid_state_load(braid_context *ctx, const void *data, size_t size);
/* braid_state_save into a file, written whole. */
BRAID_NODISCARD braid_status braid_state_save_file(braid_context *ctx, const char *path);
/* braid_state_load from a file. */
BRAID_NODISCARD braid_status braid_state_load_file(braid_context *ctx, const char *path);

/* ---- prompt cache (a library capability: the server and braid chat use it) --------------------------------
 *
 * A cache of prompts (and replies) already computed, shared by every sequence of one context: a radix tree
 * over token ids finds the longest cached prefix of a new prompt, and the cached attention cells are shared by
 * reference, so N conversations that start with one system prompt hold its cells once. Recurrent layers
 * cannot be cut at any token, so the cache keeps checkpoints (recurrent state copies): at the end of every
 * stored prompt and reply, at the message boundaries the caller marks, at branch points (where a prompt
 * leaves a cached one) and every checkpoint_interval tokens of prefill; a reuse replays at most the tokens
 * since the nearest one. An identical prompt replays nothing: the last token's logits are kept.
 * One byte budget covers the cached cells (each counted once, however many entries share it), checkpoints
 * and kept logits; the least recently used entries are evicted to stay within it.
 *
 * Entries live in sequences of the context set aside for the cache (params.first_seq .. + n_seq - 1): the
 * caller creates the context with that many more sequences and uses the others. Their cells and checkpoints
 * come from the context's n_ctx and checkpoint_budget_bytes, so give the context room for both (the cache
 * evicts entries when a prompt needs cells, braid_prompt_cache_make_room). One thread drives it, with the
 * context. */
typedef struct braid_prompt_cache braid_prompt_cache;

typedef struct braid_prompt_cache_params {
    uint64_t budget_bytes; /* cells + checkpoints + logits held by the cache (default 256 MiB) */
    braid_seq_id first_seq; /* the cache's sequences: first_seq .. first_seq + n_seq - 1 (default: none) */
    int32_t n_seq;          /* the most entries at once, 1 .. BRAID_MAX_SEQ */
} braid_prompt_cache_params;

/* How a prompt was served (braid_prompt_cache_prepare). */
typedef struct braid_cache_reuse {
    int32_t cached_tokens;   /* prompt tokens the sequence holds now (the prefix kept) */
    int32_t replayed_tokens; /* of those, recomputed from a checkpoint to reach it (so cached_tokens -
                              * replayed_tokens were not computed at all) */
    int32_t from_entry;      /* 1: copied from a cache entry; 0: the sequence's own content (or nothing) */
    int logits_ready;        /* the whole prompt was cached with its last-token logits: no decode needed,
                              * read them with braid_prompt_cache_logits */
} braid_cache_reuse;

typedef struct braid_prompt_cache_stats {
    uint64_t lookups;          /* prepare calls */
    uint64_t hits;             /* of those, with cached_tokens > 0 */
    uint64_t prompt_tokens;    /* tokens of all prepared prompts */
    uint64_t cached_tokens;    /* of those, kept from the cache or the sequence (replayed ones included) */
    uint64_t replayed_tokens;  /* recomputed from checkpoints */
    uint64_t stores, evictions;
    uint64_t bytes;            /* held now: cells (each once) + checkpoints + logits */
    uint64_t cell_bytes, checkpoint_bytes, logits_bytes;
    int32_t entries, checkpoints, cells;
} braid_prompt_cache_stats;

/* Tokens per block of the cached-prefix hashes (braid_cache_block_hash). */
#define BRAID_CACHE_BLOCK 64
/* Block hashes of cached prefixes, a stable scheme for routers (GET /cache): a prefix is cut into blocks of
 * BRAID_CACHE_BLOCK tokens; h(0) = 0 and h(k+1) = XXH3-64 with seed 0 of the 8 bytes of h(k) (little-endian)
 * followed by the block's token ids (4 bytes each, little-endian). Only whole blocks get a hash: this is
 * h(k+1) from prev = h(k) and the block's n (= BRAID_CACHE_BLOCK) tokens. */
uint64_t braid_cache_block_hash(uint64_t prev, const braid_token *tokens, int32_t n);

/* Defaults: a 256 MiB budget and no sequences (set first_seq and n_seq). */
braid_prompt_cache_params braid_prompt_cache_default_params(void);
/* A cache over ctx (not owned; must outlive the cache). Clears the cache's sequences. */
BRAID_NODISCARD braid_status braid_prompt_cache_new(braid_context *ctx, const braid_prompt_cache_params *params,
                                                    braid_prompt_cache **out);
void braid_prompt_cache_free(braid_prompt_cache *pc); /* clears the cache's sequences */
/* Makes seq (not one of the cache's) hold the longest prefix of tokens[0 .. n) it can get cheapest: its own
 * content (truncated) or a cache entry's (cells shared, state from a checkpoint, replaying what lies between).
 * The rest, tokens[cached_tokens .. n), is the caller's to decode; at least the last token unless logits_ready.
 * A prompt that leaves the source before its end gets a checkpoint at the branch point. Evicts entries when
 * the new tokens need cells. On failure seq may have been truncated (never to wrong content). */
BRAID_NODISCARD braid_status braid_prompt_cache_prepare(braid_prompt_cache *pc, braid_seq_id seq,
                                                        const braid_token *tokens, int32_t n,
                                                        braid_cache_reuse *out);
/* Length of the longest prefix of tokens[0 .. n) that a cache entry holds (0: none); nothing changes. */
int32_t braid_prompt_cache_lookup(const braid_prompt_cache *pc, const braid_token *tokens, int32_t n);
/* The kept logits (n_vocab floats) when the last prepare said logits_ready; valid until the next call on pc. */
const float *braid_prompt_cache_logits(const braid_prompt_cache *pc);
/* Stores what seq holds now (the token inputs before its first embedding input) as an entry: a checkpoint at
 * its end, its cells shared, its checkpoints copied; logits (n_vocab floats of its last input, or NULL) kept
 * for an identical prompt. Entries that are prefixes of it are merged into it. Then evicts the least recently
 * used entries until the budget holds (possibly this one: BRAID_OK, nothing cached). */
BRAID_NODISCARD braid_status braid_prompt_cache_store(braid_prompt_cache *pc, braid_seq_id seq, const float *logits);
/* Evicts least recently used entries until the context has n_cells free cells or the cache is empty. */
void braid_prompt_cache_make_room(braid_prompt_cache *pc, uint32_t n_cells);
/* Drops every entry (their cells and checkpoints go back to the context). */
void braid_prompt_cache_clear(braid_prompt_cache *pc);
/* The counters, and what the cache holds now. */
void braid_prompt_cache_get_stats(const braid_prompt_cache *pc, braid_prompt_cache_stats *out);
/* The distinct block hashes of every cached prefix (see BRAID_CACHE_BLOCK), allocated (*hashes, release with
 * braid_free; NULL when *n == 0). */
BRAID_NODISCARD braid_status braid_prompt_cache_block_hashes(const braid_prompt_cache *pc, uint64_t **hashes,
                                                             size_t *n);
/* Checkpoints at the given indices of s when a later decode of s reaches them (message boundaries of a
 * prompt: idx[i] is the index of a message's first token), replacing s's earlier marks; n = 0 drops them. */
BRAID_NODISCARD braid_status braid_seq_checkpoint_at(braid_context *ctx, braid_seq_id s, const int32_t *idx,
                                                     int32_t n);

/* ---- tokenizer --------------------------------------------------------------------------------------------- */

/* Tokenizes len bytes of text into out (capacity cap); *n_out gets the count. If cap is too small,
 * BRAID_E_RANGE is returned and *n_out holds the count needed. */
BRAID_NODISCARD braid_status braid_tokenize(const braid_model *model, const char *text, size_t len,
                                            int add_special, int parse_special, braid_token *out, size_t cap,
                                            size_t *n_out);
/* The bytes of one token (special tokens rendered only if special != 0). Writes at most cap bytes to buf;
 * *n_out gets the full length. */
BRAID_NODISCARD braid_status braid_token_to_piece(const braid_model *model, braid_token t, int special, char *buf,
                                                  size_t cap, size_t *n_out);
/* Text of n tokens; *text is allocated (NUL-terminated, release with braid_free), *len its length. */
BRAID_NODISCARD braid_status braid_detokenize(const braid_model *model, const braid_token *tokens, size_t n,
                                              int special, char **text, size_t *len);
braid_token braid_token_bos(const braid_model *model); /* -1 when the vocabulary has none */
/* End of sequence; -1 when the vocabulary has none. */
braid_token braid_token_eos(const braid_model *model);
/* End of turn; -1 when the vocabulary has none. */
braid_token braid_token_eot(const braid_model *model);
int braid_token_is_eog(const braid_model *model, braid_token t); /* end of generation (eos, eot, ...) */

/* ---- chat templates ---------------------------------------------------------------------------------------- */

/* A chat template (Jinja) is rendered exactly as Python Jinja2 renders it with Hugging Face's settings
 * (transformers' apply_chat_template: sandboxed, trim_blocks, lstrip_blocks, tojson without ASCII escaping,
 * raise_exception, strftime_now, the {% generation %} tag). The template sees: messages, tools (none unless
 * given), documents (none), add_generation_prompt, bos_token, eos_token and the extra variables of
 * kwargs_json, and nothing else: no date, no enable_thinking unless the caller passes them. */
typedef struct braid_chat_params {
    const char *tools_json;    /* a JSON array of tool definitions, or NULL */
    int add_generation_prompt; /* default 1 */
    const char *bos_token;     /* NULL: the model's (braid_chat_template_apply) or "" */
    const char *eos_token;     /* NULL: the model's or "" */
    const char *kwargs_json;   /* a JSON object of extra template variables, or NULL */
    int64_t now;               /* the time strftime_now formats (seconds since the epoch); 0 = now */
    size_t max_output;         /* bytes; 0 = default (16 MiB) */
} braid_chat_params;

/* No tools, add_generation_prompt 1, the model's bos/eos texts, no kwargs, now = the current time. */
braid_chat_params braid_chat_default_params(void);
/* Renders template text tmpl (tmpl_len bytes) for messages_json (a JSON array of message objects).
 * *out is allocated (NUL-terminated, release with braid_free), *out_len its length. A template Jinja2 would
 * refuse, or that raises for this conversation (raise_exception, an undefined value used, ...), gives
 * BRAID_E_FORMAT / BRAID_E_INVALID / BRAID_E_UNSUPPORTED with the reason and "template:LINE:COL". */
BRAID_NODISCARD braid_status braid_chat_template_render(const char *tmpl, size_t tmpl_len, const char *messages_json,
                                                        const braid_chat_params *params, char **out,
                                                        size_t *out_len);
/* The model's chat template: tokenizer.chat_template, or tokenizer.chat_template.NAME when name is not NULL.
 * *tmpl points into the model (valid while it lives; not NUL-terminated). BRAID_E_RANGE if there is none. */
BRAID_NODISCARD braid_status braid_model_chat_template(const braid_model *model, const char *name,
                                                       const char **tmpl, size_t *len);
/* braid_chat_template_render with the model's template (name as above) and, where params leave them NULL,
 * the model's bos/eos token texts. */
BRAID_NODISCARD braid_status braid_chat_template_apply(const braid_model *model, const char *name,
                                                       const char *messages_json, const braid_chat_params *params,
                                                       char **out, size_t *out_len);

/* ---- sampling ---------------------------------------------------------------------------------------------- */

typedef struct braid_sampler braid_sampler;

typedef struct braid_sampler_params {
    float temperature;    /* <= 0: greedy */
    int32_t top_k;        /* <= 0: off */
    float top_p;          /* >= 1: off */
    float min_p;          /* <= 0: off */
    float repeat_penalty; /* 1: off */
    float frequency_penalty;
    float presence_penalty;
    int32_t penalty_last_n; /* how many recent tokens the penalties look at */
    uint64_t seed;
} braid_sampler_params;

/* Temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, penalties off (repeat 1, last 64), seed 0x5eed
 * (llama.cpp's common defaults). */
braid_sampler_params braid_sampler_default_params(void);
/* A sampler with these parameters; *out owned by the caller (braid_sampler_free). */
BRAID_NODISCARD braid_status braid_sampler_new(const braid_sampler_params *params, braid_sampler **out);
/* Releases a sampler (NULL allowed). */
void braid_sampler_free(braid_sampler *s);
/* Picks a token from n_vocab logits. */
BRAID_NODISCARD braid_status braid_sampler_sample(braid_sampler *s, const float *logits, int32_t n_vocab,
                                                  braid_token *out);
/* Tells the sampler a token was emitted (feeds the repetition penalties). */
void braid_sampler_accept(braid_sampler *s, braid_token t);

/* ---- constrained decoding (JSON) -------------------------------------------------------------------------- */

/* A compiled JSON constraint: "any JSON object" or a JSON Schema. Immutable once built; one constraint can
 * serve any number of matchers and generators at once (threads included). */
typedef struct braid_json_constraint braid_json_constraint;
/* Compiles a constraint. schema NULL: any JSON object (OpenAI's response_format json_object); else len bytes
 * of a JSON Schema (response_format json_schema). The subset: type (one or a list), properties, required,
 * additionalProperties (false / true / a schema), items, prefixItems, minItems, maxItems, enum, const, anyOf,
 * oneOf (as anyOf), nullable, $ref to #/$defs/... or #/definitions/..., minLength, maxLength, and the
 * annotations (title, description, default, examples, ...). Properties are produced in the order listed,
 * required ones always, optional ones when the model chooses; additional properties only when
 * additionalProperties says true or gives a schema. Any other keyword (pattern, format, minimum, allOf, ...)
 * gives BRAID_E_UNSUPPORTED with a message naming it (a constraint never ignores part of a schema); bad JSON
 * gives BRAID_E_FORMAT, an impossible schema BRAID_E_INVALID. *out owned by the caller. */
BRAID_NODISCARD braid_status braid_json_constraint_new(const char *schema, size_t len, braid_json_constraint **out);
/* Releases a constraint (NULL allowed); no matcher or generator may still use it. */
void braid_json_constraint_free(braid_json_constraint *c);

/* The state of one document being written under a constraint (bytes so far). Whitespace between tokens of
 * the document is one space, or a newline and at most 20 spaces or tabs (as llama.cpp's JSON grammar), numbers have at most 16 integer and 16 fraction digits, and
 * nesting is at most 31 values deep, so a model cannot loop without end inside the document. */
typedef struct braid_json_matcher braid_json_matcher;
/* A matcher at the start of a document; the constraint must outlive it. */
BRAID_NODISCARD braid_status braid_json_matcher_new(const braid_json_constraint *c, braid_json_matcher **out);
/* Releases a matcher (NULL allowed). */
void braid_json_matcher_free(braid_json_matcher *m);
/* Back to the start of a document. */
void braid_json_matcher_reset(braid_json_matcher *m);
/* Appends len bytes: BRAID_OK if the document so far is still the beginning of one the constraint accepts,
 * else BRAID_E_INVALID and the matcher is unchanged. */
BRAID_NODISCARD braid_status braid_json_matcher_feed(braid_json_matcher *m, const char *bytes, size_t len);
/* 1 if the bytes so far are a complete document the constraint accepts (it could end here). */
int braid_json_matcher_complete(const braid_json_matcher *m);
/* 1 if the document is complete and nothing but whitespace could follow (generation can stop). */
int braid_json_matcher_done(const braid_json_matcher *m);
/* 1 if token t of the model's vocabulary may come next: its piece bytes keep the document valid (a token may
 * end inside a UTF-8 character); an end-of-generation token only when the document is complete; a token with
 * no bytes never. */
int braid_json_matcher_allows(braid_json_matcher *m, const braid_model *model, braid_token t);
/* braid_json_matcher_allows for every token: allowed[0..n_vocab) gets 1 or 0. */
BRAID_NODISCARD braid_status braid_json_matcher_mask(braid_json_matcher *m, const braid_model *model, uint8_t *allowed);
/* Samples from n_vocab logits as braid_sampler_sample would if every token the matcher refuses had logit
 * -inf (the mask comes before top-k, top-p and min-p, as llama.cpp's grammar sampler does). Usually checks
 * only the best few tokens. Does not feed the token (braid_json_matcher_accept does). BRAID_E_INVALID if no
 * token of the vocabulary can continue the document. */
BRAID_NODISCARD braid_status braid_json_matcher_sample(braid_json_matcher *m, braid_sampler *s,
                                                       const braid_model *model, const float *logits,
                                                       braid_token *out);
/* Feeds token t's piece bytes (an end-of-generation token: only checks the document is complete). */
BRAID_NODISCARD braid_status braid_json_matcher_accept(braid_json_matcher *m, const braid_model *model, braid_token t);

/* ---- generation (one loop for run, chat, the server and speculative decoding) ----------------------------- */

typedef struct braid_gen braid_gen;

/* Called once per emitted token with the text it releases: whole UTF-8 characters only, never text that
 * might still become a stop string (held back until it cannot), so len may be 0. At the end it is called
 * once more with token -1 and whatever is left. Return nonzero to stop (stop reason "cancelled"). */
typedef int (*braid_piece_fn)(void *user, braid_token token, const char *text, size_t len);
/* Polled between decodes (prompt chunks and generation steps); nonzero stops with BRAID_E_CANCELLED from the
 * prompt, or stop reason "cancelled" from generation. What was decoded before stays. */
typedef int (*braid_abort_fn)(void *user);
/* Called after each prompt chunk: done of total prompt tokens are in the sequence. */
typedef void (*braid_progress_fn)(void *user, int32_t done, int32_t total);

typedef struct braid_gen_params {
    braid_seq_id seq;             /* the sequence generated into (default 0) */
    int32_t n_predict;            /* most tokens per braid_gen_run (< 0: no limit but the context) */
    braid_sampler_params sampler; /* temperature <= 0: greedy */
    const char *const *stop;      /* n_stop stop strings: generation ends before the first one found */
    int32_t n_stop;
    int ctx_shift;                /* 1: when the context is full keep the first n_keep inputs, drop half of
                                   * the rest, shift the positions after them, continue */
    int32_t n_keep;
    int32_t self_extend_n;        /* > 1: Self-Extend (grouped positions) with group size n ... */
    int32_t self_extend_w;        /* ... and window w (a multiple of n) */
    braid_context *draft;         /* speculative: a draft model's context (same vocabulary), or NULL */
    int32_t draft_n;              /* tokens drafted per step (draft or lookup) */
    int32_t lookup_n;             /* > 0: prompt-lookup drafting from n-grams of this length (no draft model) */
    braid_piece_fn on_piece;
    void *piece_user;
    braid_abort_fn abort_cb;
    void *abort_user;
    braid_progress_fn on_progress;
    void *progress_user;
    /* A prompt cache over the same context (not owned), or NULL. With it a prompt is served through
     * braid_prompt_cache_prepare (the longest prefix held by this sequence or any cache entry; an identical
     * prompt decodes nothing, its logits were kept) and stored in the cache when it is decoded, and so is
     * the reply when the run ends. */
    braid_prompt_cache *cache;
    /* Nonzero: speculative drafting with the model's own MTP (multi-token prediction, NextN) head, draft_n
     * tokens per step, each the head's pick given the previous one (qwen35 / qwen35moe / qwen3next files with
     * nextn_predict_layers 1; braid_gen_new gives BRAID_E_UNSUPPORTED with the reason for any other file).
     * Exclusive with draft and lookup_n; verified like them (greedy: the tokens of plain greedy decoding). */
    int32_t mtp;
    /* Constrained decoding (not owned; must outlive the generator), or NULL. Each run (braid_gen_run, or
     * braid_gen_begin and its steps) writes one document the constraint accepts: every token is sampled under
     * it (braid_json_matcher_sample) and the run ends (stop reason "eog") as soon as the document is complete
     * and only whitespace could follow, or on an end-of-generation token, which is allowed only then. Not
     * with drafting (BRAID_E_UNSUPPORTED). */
    const braid_json_constraint *json;
} braid_gen_params;

/* What the last braid_gen_prompt and braid_gen_run did. */
typedef struct braid_gen_stats {
    int32_t prompt_tokens;   /* tokens of the last prompt */
    int32_t reused_tokens;   /* of those, already in the sequence (longest common prefix) */
    int32_t decoded_tokens;  /* prompt tokens computed: the new ones plus any replay to reach the prefix */
    int32_t replayed_tokens; /* of decoded_tokens, the replay (checkpoint + replay to the common prefix) */
    double prompt_ms;
    int32_t n_generated;     /* tokens emitted by the last braid_gen_run */
    int32_t n_decodes;       /* target decodes during generation */
    double ttft_ms;          /* from braid_gen_prompt's start to the first emitted token */
    double gen_ms;
    int32_t context_shifts;
    int32_t drafted, accepted;   /* speculative: tokens proposed and accepted */
    int32_t spec_replayed;       /* target tokens replayed to drop rejected drafts (0: all by rollback) */
    int32_t draft_replayed;      /* the draft model's own replays (catching up after rejections) */
    const char *stop;            /* "eog", "length", "context", "stop", "cancelled", or "" before a run */
} braid_gen_stats;

/* Sequence 0, no token limit, braid_sampler_default_params, no stop strings, no context shift, no drafting
 * (draft_n 8 once a draft, lookup or mtp is set), no callbacks. */
braid_gen_params braid_gen_default_params(void);
/* A generator over ctx's sequence p->seq (and p->draft's sequence p->seq). Neither context is owned. */
BRAID_NODISCARD braid_status braid_gen_new(braid_context *ctx, const braid_gen_params *params, braid_gen **out);
/* Releases a generator (NULL allowed); the contexts stay. */
void braid_gen_free(braid_gen *g);
/* Makes the sequence hold exactly tokens[0..n): the longest common prefix with what it holds is kept (through
 * truncation: rollback buffer, else checkpoint + replay, never from zero while a checkpoint is nearer), the rest
 * is decoded in n_batch chunks, and a checkpoint is taken at the end. Leaves the logits of the last token for
 * braid_gen_run. */
BRAID_NODISCARD braid_status braid_gen_prompt(braid_gen *g, const braid_token *tokens, int32_t n);
/* One piece of a multimodal prompt: text tokens (tokens, n_tokens), or an image span (embd: nx*ny rows of
 * the model's n_embd floats, row-major over the grid, e.g. from braid_mmproj_encode) placed at M-RoPE grid
 * positions (braid_image_positions at the sequence's next position). */
typedef struct braid_prompt_part {
    const braid_token *tokens;
    int32_t n_tokens;
    const float *embd;
    int32_t nx, ny;
} braid_prompt_part;

/* braid_gen_prompt for a prompt of text and images: the sequence ends up holding exactly the parts' inputs.
 * The longest common prefix with what the sequence holds is kept (an image matches when its rows are equal;
 * a prefix never ends inside an image), the rest is decoded in n_batch chunks, and a checkpoint is taken
 * before and after every image span and at the end, so a later truncation never replays an image. */
BRAID_NODISCARD braid_status braid_gen_prompt_parts(braid_gen *g, const braid_prompt_part *parts, int32_t n_parts);
/* Samples and decodes until end of generation, n_predict tokens, a stop string, the context (without shift)
 * or a cancel; the sequence then holds prompt + the emitted tokens except the last (not yet decoded), and a
 * checkpoint is taken. */
BRAID_NODISCARD braid_status braid_gen_run(braid_gen *g);
/* Tokens emitted by the last run (valid until the next call on g) and their text (stop string excluded). */
const braid_token *braid_gen_tokens(const braid_gen *g, int32_t *n);
/* The text of the last run's tokens; *len its length. */
const char *braid_gen_text(const braid_gen *g, size_t *len);
/* What the last prompt and run (or begin and steps) did; valid until the next call on g. */
const braid_gen_stats *braid_gen_get_stats(const braid_gen *g);
/* Inside on_piece: the n_vocab logits the token was drawn from (for log-probabilities); NULL elsewhere, and
 * for a speculative token whose row is gone. */
const float *braid_gen_logits(const braid_gen *g);

/* Continuous batching: generators over distinct sequences of one context advance together, one braid_decode
 * per step, each on its own rows (a generator's tokens and logits do not depend on what shares its steps).
 * braid_gen_begin is braid_gen_prompt without the decoding: it keeps the longest common prefix (truncating),
 * checks the room and queues the rest of the prompt. Each braid_gen_step then lets every generating one sample
 * and emit a token (as braid_gen_run does; its stop reasons), and decodes those tokens and chunks of the
 * queued prompts in one batch of at most n_batch rows (sampled tokens first, then the prompts in list order).
 * A generator whose reply ends takes its checkpoint; the stats fill in as it goes. If the decode fails the
 * step returns its status and the generators with rows in it stop with stop reason "error" (no sequence
 * changed); a generator that fails before the decode (sampling, drafting) stops with "error" alone and the
 * step returns that status after decoding the others' rows.
 * Speculative generators (draft, lookup_n or mtp) work too: one decodes its token and its drafts as rows of the
 * step's batch, verifies its own rows after the decode and drops its rejected drafts through the rollback
 * buffer, so its tokens and logits are braid_gen_run's; a draft model drafts in the draft context's sequence
 * of the generator's id (each generator its own). The drafts are capped by the rows and cells the step has
 * left. MTP drafting (mtp) works the same way: the head keeps the trunk's hidden states of the generator's rows
 * of each step. Not for context shift or Self-Extend (BRAID_E_UNSUPPORTED). */
BRAID_NODISCARD braid_status braid_gen_begin(braid_gen *g, const braid_token *tokens, int32_t n);
/* braid_gen_begin for a prompt of text and images (braid_gen_prompt_parts' parts, which must stay valid until
 * the prompt is in): keeps the longest common prefix with the sequence (image rows compared by value, never
 * cut inside an image) and queues the rest for braid_gen_prefill. An image span is embedding rows at M-RoPE
 * grid positions, which cannot share a step's token batch, so this prompt is decoded by its own calls, one
 * n_batch piece each, between the steps of the other generators. A prompt with an image needs a generator
 * without a prompt cache (its radix tree keys token ids): BRAID_E_UNSUPPORTED otherwise. All-text parts are
 * braid_gen_begin's. */
BRAID_NODISCARD braid_status braid_gen_begin_parts(braid_gen *g, const braid_prompt_part *parts, int32_t n_parts);
/* Decodes the next piece of g's prompt begun by braid_gen_begin_parts (a checkpoint before and after each
 * image, as braid_gen_prompt_parts). *done (may be NULL) becomes 1 once the prompt is in: the logits of its
 * last input are kept and g generates in the next braid_gen_step (which gives no rows to g until then). A
 * cancel (abort callback) or a failed decode ends g (stop reason "cancelled" / "error"; the failure is
 * returned); a generator not prefilling is left alone (BRAID_OK, *done 1). */
BRAID_NODISCARD braid_status braid_gen_prefill(braid_gen *g, int *done);
/* Copies the logits g samples its next token from into g, so that a decode outside braid_gen_step before g's
 * next step (another generator's braid_gen_prefill) does not replace them. Nothing to do (BRAID_OK) when g is
 * not generating or already holds them. */
BRAID_NODISCARD braid_status braid_gen_keep_logits(braid_gen *g);
/* One step of gens[0..n) (begun generators over distinct sequences of one context; see braid_gen_begin). */
BRAID_NODISCARD braid_status braid_gen_step(braid_gen *const *gens, int32_t n);
/* 1 from braid_gen_begin (or braid_gen_begin_parts) until the generator's reply ends. */
int braid_gen_active(const braid_gen *g);

#ifdef __cplusplus
}
#endif

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif

#endif /* BRAID_H */
