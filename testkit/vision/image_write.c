/* image_write.c — see image_write.h. */
#include "vision/image_write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>
#include <webp/encode.h>

uint8_t *tk_image_pattern(int w, int h, tk_pattern kind, uint64_t seed) {
    uint8_t *p = malloc((size_t)w * (size_t)h * 3);
    if (!p) return NULL;
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *px = p + ((size_t)y * w + x) * 3;
            for (int c = 0; c < 3; c++) {
                int v;
                int gx = x * 255 / (w > 1 ? w - 1 : 1), gy = y * 255 / (h > 1 ? h - 1 : 1);
                if (kind == TK_GRADIENT) v = c == 0 ? gx : c == 1 ? gy : (gx + 255 - gy) / 2;
                else if (kind == TK_CHECKER) v = (((x / 8) + (y / 8)) & 1) ? 230 - 40 * c : 20 + 50 * c;
                else {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    v = (int)(s >> 56);
                }
                px[c] = (uint8_t)v;
            }
        }
    return p;
}

int tk_png_encode(const uint8_t *rgb, int w, int h, int channels, uint8_t **out, size_t *size) {
    uint8_t *px = malloc((size_t)w * (size_t)h * (size_t)channels);
    if (!px) return 0;
    for (size_t i = 0; i < (size_t)w * (size_t)h; i++) {
        const uint8_t *s = rgb + 3 * i;
        if (channels == 1) px[i] = (uint8_t)((s[0] + s[1] + s[2]) / 3);
        else {
            memcpy(px + i * (size_t)channels, s, 3);
            if (channels == 4) px[i * 4 + 3] = (uint8_t)(i * 7);
        }
    }
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)w;
    im.height = (png_uint_32)h;
    im.format = channels == 1 ? PNG_FORMAT_GRAY : channels == 4 ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
    png_alloc_size_t n = 0;
    int ok = png_image_write_get_memory_size(im, n, 0, px, 0, NULL);
    uint8_t *buf = ok ? malloc(n) : NULL;
    ok = buf && png_image_write_to_memory(&im, buf, &n, 0, px, 0, NULL);
    free(px);
    if (!ok) {
        free(buf);
        return 0;
    }
    *out = buf;
    *size = n;
    return 1;
}

int tk_jpeg_encode(const uint8_t *rgb, int w, int h, int quality, uint8_t **out, size_t *size) {
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err); /* exits on error: tests only, with valid inputs */
    jpeg_create_compress(&c);
    unsigned char *buf = NULL;
    unsigned long n = 0;
    jpeg_mem_dest(&c, &buf, &n);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * (size_t)w * 3);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    *out = buf;
    *size = n;
    return 1;
}

int tk_webp_encode_lossless(const uint8_t *rgb, int w, int h, uint8_t **out, size_t *size) {
    uint8_t *buf = NULL;
    size_t n = WebPEncodeLosslessRGB(rgb, w, h, w * 3, &buf);
    if (!n) return 0;
    uint8_t *copy = malloc(n);
    if (copy) memcpy(copy, buf, n);
    WebPFree(buf);
    if (!copy) return 0;
    *out = copy;
    *size = n;
    return 1;
}

int tk_write_file(const char *path, const uint8_t *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok;
}

int tk_png_write_pattern(const char *path, int w, int h, tk_pattern kind, uint64_t seed) {
    uint8_t *rgb = tk_image_pattern(w, h, kind, seed), *png = NULL;
    size_t n = 0;
    int ok = rgb && tk_png_encode(rgb, w, h, 3, &png, &n) && tk_write_file(path, png, n);
    free(rgb);
    free(png);
    return ok;
}
