/* image_prompt.c — see image_prompt.h. */
#include "image_prompt.h"

#include <stdlib.h>
#include <string.h>

#include "tool_util.h"

void img_opts_usage(FILE *f) {
    fprintf(f, "  --mmproj FILE         vision projector (mmproj GGUF) for --image\n"
               "  --image FILE          a PNG, JPEG or WebP image (repeatable); it goes where the prompt has\n"
               "                        " IMG_MARKER " (one per image), or before the text without markers\n"
               "  --image-min-tokens N, --image-max-tokens N   rows per image (default: the projector's, 8..4096)\n"
               "  --dump-image-embd FILE  write the image rows (float32 LE, [rows][n_embd]) to FILE\n");
}

int img_opts_parse(const char *cmd, int argc, char **argv, int *i, img_opts *o) {
    const char *a = argv[*i];
    if (strcmp(a, "--mmproj") && strcmp(a, "--image") && strcmp(a, "--dump-image-embd") &&
        strcmp(a, "--image-min-tokens") && strcmp(a, "--image-max-tokens"))
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "braid %s: %s needs a value\n", cmd, a);
        return -1;
    }
    const char *v = argv[++*i];
    if (!strcmp(a, "--mmproj")) o->mmproj = v;
    else if (!strcmp(a, "--dump-image-embd")) o->dump = v;
    else if (!strcmp(a, "--image-min-tokens")) return tool_parse_i32(cmd, a, v, 1, 65536, &o->min_tokens) ? 1 : -1;
    else if (!strcmp(a, "--image-max-tokens")) return tool_parse_i32(cmd, a, v, 1, 65536, &o->max_tokens) ? 1 : -1;
    else {
        if (o->n_images == IMG_MAX) {
            fprintf(stderr, "braid %s: at most %d images\n", cmd, IMG_MAX);
            return -1;
        }
        o->images[o->n_images++] = v;
    }
    return 1;
}

int img_load_mmproj(const char *cmd, const img_opts *o, const braid_model *model, int32_t n_threads, braid_mmproj **out) {
    braid_mmproj_params p = braid_mmproj_default_params();
    p.image_min_tokens = o->min_tokens;
    p.image_max_tokens = o->max_tokens;
    p.n_threads = n_threads > 0 ? (uint32_t)n_threads : 0;
    braid_status s = braid_mmproj_load(o->mmproj, &p, out);
    if (s == BRAID_OK) s = braid_mmproj_check_model(*out, model);
    if (s != BRAID_OK) {
        fprintf(stderr, "braid %s: projector %s: %s: %s\n", cmd, o->mmproj, braid_status_name(s), braid_last_error());
        braid_mmproj_free(*out);
        *out = NULL;
        return 0;
    }
    return 1;
}

static int tokenize(const char *cmd, const braid_model *model, const char *text, size_t len, int add_special,
                    braid_token **out, size_t *n) {
    braid_status s = braid_tokenize(model, text, len, add_special, 1, NULL, 0, n);
    if (s != BRAID_OK && s != BRAID_E_RANGE) goto fail;
    *out = malloc((*n ? *n : 1) * sizeof **out);
    if (!*out) {
        fprintf(stderr, "braid %s: out of memory\n", cmd);
        return 0;
    }
    s = braid_tokenize(model, text, len, add_special, 1, *out, *n, n);
    if (s == BRAID_OK) return 1;
fail:
    fprintf(stderr, "braid %s: tokenize: %s: %s\n", cmd, braid_status_name(s), braid_last_error());
    return 0;
}

/* The text that surrounds an image for the qwen3vl_merger projector (mtmd writes the same). */
static const char img_begin[] = "<|vision_start|>", img_end[] = "<|vision_end|>";

int img_prompt_build(const char *cmd, const braid_model *model, braid_mmproj *mm, const char *text, size_t len,
                     const char *const *images, int n_images, int add_special, FILE *dump, img_prompt *out) {
    memset(out, 0, sizeof *out);
    if (n_images > IMG_MAX) {
        fprintf(stderr, "braid %s: at most %d images\n", cmd, IMG_MAX);
        return 0;
    }
    /* the text pieces between markers */
    const char *piece[IMG_MAX + 1];
    size_t piece_len[IMG_MAX + 1];
    int n_markers = 0;
    const char *p = text, *end = text + len;
    const size_t ml = strlen(IMG_MARKER);
    for (;;) {
        const char *m = NULL;
        for (const char *q = p; q + ml <= end; q++)
            if (!memcmp(q, IMG_MARKER, ml)) {
                m = q;
                break;
            }
        if (!m) break;
        if (n_markers == IMG_MAX) {
            fprintf(stderr, "braid %s: more than %d %s markers\n", cmd, IMG_MAX, IMG_MARKER);
            return 0;
        }
        piece[n_markers] = p;
        piece_len[n_markers++] = (size_t)(m - p);
        p = m + ml;
    }
    piece[n_markers] = p;
    piece_len[n_markers] = (size_t)(end - p);
    if (n_markers == 0 && n_images > 0) { /* images first */
        for (int i = 0; i < n_images; i++) {
            piece[i] = text;
            piece_len[i] = 0;
        }
        piece[n_images] = text;
        piece_len[n_images] = len;
        n_markers = n_images;
    }
    if (n_markers != n_images) {
        fprintf(stderr, "braid %s: the prompt has %d %s markers for %d images\n", cmd, n_markers, IMG_MARKER, n_images);
        return 0;
    }
    if (n_images && !mm) {
        fprintf(stderr, "braid %s: images need a projector (--mmproj FILE)\n", cmd);
        return 0;
    }
    const int32_t n_embd = n_images ? braid_mmproj_n_embd(mm) : 0;
    for (int k = 0; k <= n_images; k++) {
        /* text k: the closing wrapper of image k-1, the piece, the opening wrapper of image k, each tokenized on
         * its own as mtmd does (its wrappers are separate text, so no BPE merge crosses them) */
        const char *seg[3] = {k ? img_end : NULL, piece[k], k < n_images ? img_begin : NULL};
        const size_t seg_len[3] = {k ? sizeof img_end - 1 : 0, piece_len[k], k < n_images ? sizeof img_begin - 1 : 0};
        size_t n = 0;
        for (int j = 0; j < 3; j++) {
            if (!seg_len[j]) continue;
            braid_token *t = NULL;
            size_t m = 0;
            if (!tokenize(cmd, model, seg[j], seg_len[j], add_special && k == 0 && n == 0, &t, &m)) goto fail;
            braid_token *grown = realloc(out->tokens[k], (n + m + 1) * sizeof *grown);
            if (!grown) {
                free(t);
                fprintf(stderr, "braid %s: out of memory\n", cmd);
                goto fail;
            }
            out->tokens[k] = grown;
            if (m) memcpy(grown + n, t, m * sizeof *t);
            n += m;
            free(t);
        }
        if (n) {
            braid_prompt_part *pp = &out->parts[out->n_parts++];
            pp->tokens = out->tokens[k];
            pp->n_tokens = (int32_t)n;
            out->n_inputs += (int32_t)n;
        }
        if (k == n_images) break;
        braid_image *im = NULL;
        braid_status s = braid_image_load_file(images[k], &im);
        int32_t nx = 0, ny = 0;
        if (s == BRAID_OK) s = braid_mmproj_encode(mm, im, &out->rows[k], &nx, &ny);
        braid_image_free(im);
        if (s != BRAID_OK) {
            fprintf(stderr, "braid %s: image %s: %s: %s\n", cmd, images[k], braid_status_name(s), braid_last_error());
            goto fail;
        }
        if (dump && fwrite(out->rows[k], sizeof(float) * (size_t)n_embd, (size_t)nx * ny, dump) != (size_t)nx * ny) {
            fprintf(stderr, "braid %s: cannot write the image rows\n", cmd);
            goto fail;
        }
        braid_prompt_part *pp = &out->parts[out->n_parts++];
        pp->embd = out->rows[k];
        pp->nx = nx;
        pp->ny = ny;
        out->n_inputs += nx * ny;
    }
    return 1;
fail:
    img_prompt_free(out);
    return 0;
}

void img_prompt_free(img_prompt *p) {
    for (int i = 0; i <= IMG_MAX; i++) free(p->tokens[i]);
    for (int i = 0; i < IMG_MAX; i++) braid_free(p->rows[i]);
    memset(p, 0, sizeof *p);
}
