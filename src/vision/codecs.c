/* codecs.c — PNG, JPEG and WebP to RGB8 with Debian's libpng, libjpeg-turbo and libwebp.
 *
 * Every decoder reads the header first and checks the size (bd_image_check_size) before it allocates the
 * pixels, so a 60000 x 60000 header costs nothing. The conversions follow what llama.cpp's loader (stb_image
 * with 3 channels) does, so that the same PNG gives the same pixels: alpha is dropped (not composited),
 * 16-bit samples keep their high byte, grey is replicated, palettes and low bit depths are expanded, gamma
 * chunks are ignored. A damaged file is an error, never a half-grey picture: libjpeg's "premature end" and
 * corrupt-data warnings fail the decode, as do libpng's errors (CRC included). */
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>
#include <webp/decode.h>

#include "base/alloc.h"
#include "base/status.h"
#include "vision/image.h"

/* ---- PNG ----------------------------------------------------------------------------------------------- */

typedef struct png_src {
    const uint8_t *data;
    size_t size, off;
    char msg[200];
} png_src;

static void png_read_mem(png_structp png, png_bytep out, size_t n) {
    png_src *s = png_get_io_ptr(png);
    if (n > s->size - s->off) {
        snprintf(s->msg, sizeof s->msg, "truncated PNG (data ends at byte %zu)", s->size);
        png_longjmp(png, 1);
    }
    memcpy(out, s->data + s->off, n);
    s->off += n;
}

static void png_on_error(png_structp png, png_const_charp msg) {
    png_src *s = png_get_error_ptr(png);
    if (!s->msg[0]) snprintf(s->msg, sizeof s->msg, "bad PNG: %s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg; /* benign (unknown chunks, iCCP profiles): stb ignores them too */
}

braid_status bd_image_decode_png(const uint8_t *data, size_t size, braid_image **out) {
    png_src src = {data, size, 0, {0}};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
    if (!png) return bd_error(BRAID_E_NOMEM, "image: out of memory for the PNG decoder");
    png_infop info = png_create_info_struct(png);
    /* volatile: assigned between setjmp and a longjmp back to it */
    braid_image *volatile im = NULL;
    png_bytep *volatile rows = NULL;
    braid_status s = BRAID_OK;
    if (!info) {
        s = bd_error(BRAID_E_NOMEM, "image: out of memory for the PNG decoder");
        goto done;
    }
    if (setjmp(png_jmpbuf(png))) {
        s = bd_error(BRAID_E_FORMAT, "image: %s", src.msg[0] ? src.msg : "bad PNG");
        goto done;
    }
    png_set_read_fn(png, &src, png_read_mem);
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff); /* bd_image_check_size says no, with the reason */
    png_set_chunk_malloc_max(png, 16u << 20); /* text / ICC chunks */
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int ct = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    s = bd_image_check_size(w, h);
    if (s != BRAID_OK) goto done;
    if (depth == 16) png_set_strip_16(png);
    if (ct == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (ct == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (ct == PNG_COLOR_TYPE_GRAY || ct == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    if (ct & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
    (void)png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != (size_t)w * 3) {
        snprintf(src.msg, sizeof src.msg, "PNG layout not reducible to RGB8 (%zu bytes a row)",
                 (size_t)png_get_rowbytes(png, info));
        png_longjmp(png, 1);
    }
    braid_image *img = NULL;
    s = bd_image_alloc((int32_t)w, (int32_t)h, &img);
    if (s != BRAID_OK) goto done;
    im = img;
    rows = bd_mallocn(h, sizeof *rows);
    if (!rows) {
        s = bd_error(BRAID_E_NOMEM, "image: out of memory for %u PNG rows", (unsigned)h);
        goto done;
    }
    for (png_uint_32 y = 0; y < h; y++) rows[y] = im->rgb + (size_t)y * w * 3;
    png_read_image(png, rows);
    png_read_end(png, NULL);
done:
    png_destroy_read_struct(&png, info ? &info : NULL, NULL);
    bd_free(rows);
    if (s == BRAID_OK) *out = im;
    else braid_image_free(im);
    return s;
}

/* ---- JPEG ---------------------------------------------------------------------------------------------- */

typedef struct jpeg_err {
    struct jpeg_error_mgr mgr;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX + 64];
} jpeg_err;

static void jpeg_on_error(j_common_ptr c) {
    jpeg_err *e = (jpeg_err *)c->err;
    char m[JMSG_LENGTH_MAX];
    e->mgr.format_message(c, m);
    snprintf(e->msg, sizeof e->msg, "bad JPEG: %s", m);
    longjmp(e->jb, 1);
}

/* libjpeg goes on after a damaged stream with a warning (level -1) and grey pixels; braid refuses it. */
static void jpeg_on_message(j_common_ptr c, int level) {
    jpeg_err *e = (jpeg_err *)c->err;
    if (level >= 0) return; /* trace messages */
    char m[JMSG_LENGTH_MAX];
    e->mgr.format_message(c, m);
    snprintf(e->msg, sizeof e->msg, "%s: %s", e->mgr.msg_code == JWRN_JPEG_EOF ? "truncated JPEG" : "bad JPEG", m);
    longjmp(e->jb, 1);
}

braid_status bd_image_decode_jpeg(const uint8_t *data, size_t size, braid_image **out) {
    struct jpeg_decompress_struct cinfo;
    jpeg_err err;
    memset(&err, 0, sizeof err);
    cinfo.err = jpeg_std_error(&err.mgr);
    err.mgr.error_exit = jpeg_on_error;
    err.mgr.emit_message = jpeg_on_message;
    braid_image *volatile im = NULL;
    braid_status s = BRAID_OK;
    if (setjmp(err.jb)) {
        jpeg_destroy_decompress(&cinfo);
        braid_image_free(im);
        return bd_error(BRAID_E_FORMAT, "image: %s", err.msg);
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long)size);
    jpeg_read_header(&cinfo, TRUE);
    if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
        jpeg_destroy_decompress(&cinfo);
        return bd_error(BRAID_E_UNSUPPORTED, "image: CMYK JPEG is not supported (RGB or greyscale only)");
    }
    s = bd_image_check_size(cinfo.image_width, cinfo.image_height);
    if (s != BRAID_OK) {
        jpeg_destroy_decompress(&cinfo);
        return s;
    }
    cinfo.out_color_space = JCS_RGB;
    jpeg_start_decompress(&cinfo);
    if (cinfo.output_components != 3 || cinfo.output_width != cinfo.image_width ||
        cinfo.output_height != cinfo.image_height) {
        jpeg_destroy_decompress(&cinfo);
        return bd_error(BRAID_E_FORMAT, "image: JPEG decodes to %d components, not RGB", cinfo.output_components);
    }
    braid_image *img = NULL;
    s = bd_image_alloc((int32_t)cinfo.output_width, (int32_t)cinfo.output_height, &img);
    if (s != BRAID_OK) {
        jpeg_destroy_decompress(&cinfo);
        return s;
    }
    im = img;
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = im->rgb + (size_t)cinfo.output_scanline * cinfo.output_width * 3;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    *out = im;
    return BRAID_OK;
}

/* ---- WebP ---------------------------------------------------------------------------------------------- */

braid_status bd_image_decode_webp(const uint8_t *data, size_t size, braid_image **out) {
    WebPBitstreamFeatures f;
    VP8StatusCode st = WebPGetFeatures(data, size, &f);
    if (st == VP8_STATUS_NOT_ENOUGH_DATA) return bd_error(BRAID_E_FORMAT, "image: truncated WebP header");
    if (st != VP8_STATUS_OK) return bd_error(BRAID_E_FORMAT, "image: bad WebP header (libwebp status %d)", (int)st);
    if (f.has_animation) return bd_error(BRAID_E_UNSUPPORTED, "image: animated WebP is not supported");
    BD_TRY(bd_image_check_size(f.width, f.height));
    braid_image *im = NULL;
    BD_TRY(bd_image_alloc(f.width, f.height, &im));
    size_t n = (size_t)im->w * (size_t)im->h * 3;
    if (!WebPDecodeRGBInto(data, size, im->rgb, n, im->w * 3)) {
        braid_image_free(im);
        /* the header was fine, so the image data is short or damaged */
        return bd_error(BRAID_E_FORMAT, "image: truncated or damaged WebP data (%d x %d)", f.width, f.height);
    }
    *out = im;
    return BRAID_OK;
}
