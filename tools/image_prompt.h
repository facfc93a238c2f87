/* image_prompt.h — images in the prompts of `braid run` and `braid chat`: the --mmproj / --image options, and
 * turning prompt text with <__image__> markers plus images into braid_prompt_parts (text tokens and encoded
 * image spans, each wrapped in the projector's <|vision_start|> / <|vision_end|> text, as llama.cpp's mtmd
 * does). */
#ifndef BRAID_TOOLS_IMAGE_PROMPT_H
#define BRAID_TOOLS_IMAGE_PROMPT_H

#include <stdio.h>

#include "braid.h"

#define IMG_MARKER "<__image__>"
#define IMG_MAX 64

typedef struct img_opts {
    const char *mmproj;
    const char *images[IMG_MAX];
    int n_images;
    const char *dump; /* --dump-image-embd FILE */
    int32_t min_tokens, max_tokens;
} img_opts;

/* Consumes a vision option at argv[*i]: 1; not one: 0; a bad or missing value (reported): -1. */
int img_opts_parse(const char *cmd, int argc, char **argv, int *i, img_opts *o);
void img_opts_usage(FILE *f);
/* Loads the projector and checks it against model. 0 on failure (reported). */
int img_load_mmproj(const char *cmd, const img_opts *o, const braid_model *model, int32_t n_threads, braid_mmproj **out);

/* A prompt made of parts. Owns the token and row buffers. */
typedef struct img_prompt {
    braid_prompt_part parts[2 * IMG_MAX + 1];
    int32_t n_parts;
    int32_t n_inputs;      /* tokens + image rows */
    braid_token *tokens[IMG_MAX + 1];
    float *rows[IMG_MAX];
} img_prompt;

/* Splits text at IMG_MARKER (one marker per image; without markers the images come first, in order), tokenizes
 * the text pieces (add_special on the first), decodes and encodes the images. dump (may be NULL): every
 * image's rows are written to it (float32 little-endian, [rows][n_embd], prompt order). 0 on failure
 * (reported with the reason). */
int img_prompt_build(const char *cmd, const braid_model *model, braid_mmproj *mm, const char *text, size_t len,
                     const char *const *images, int n_images, int add_special, FILE *dump, img_prompt *out);
void img_prompt_free(img_prompt *p);

#endif
