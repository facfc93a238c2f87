/* test_image.c — braid_image_decode: PNG (RGB, grey, RGBA), lossless WebP and JPEG decode to the pixels that were
 * encoded (JPEG within its loss), and every kind of bad input is refused with its reason: no data, unknown format,
 * truncated files of each format, a header claiming a huge size, a damaged PNG chunk, a missing file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "braid.h"
#include "test.h"
#include "vision/image_write.h"

/* CRC-32 of PNG chunks (ISO 3309), to forge a valid header with other dimensions. */
static uint32_t crc32_png(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return c ^ 0xffffffffu;
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static int has(const char *reason, const char *word) { return strstr(reason, word) != NULL; }

static void check_refused(const uint8_t *data, size_t n, braid_status want, const char *word, const char *what) {
    braid_image *im = (braid_image *)(uintptr_t)1;
    braid_status s = braid_image_decode(data, n, &im);
    CHECK(s == want, "%s: got %s (%s), want %s", what, braid_status_name(s), braid_last_error(), braid_status_name(want));
    CHECK(has(braid_last_error(), word), "%s: reason '%s' lacks '%s'", what, braid_last_error(), word);
    CHECK(im == NULL, "%s: output not cleared", what);
}

/* The fuzz seeds (fuzz/corpus/image): one small file of each format and layout. */
static int write_corpus(const char *dir) {
    uint8_t *rgb = tk_image_pattern(19, 11, TK_GRADIENT, 0);
    if (!rgb) return 1;
    struct { const char *name; int kind, ch; } seeds[] = {{"rgb.png", 0, 3}, {"grey.png", 0, 1}, {"rgba.png", 0, 4},
                                                          {"q90.jpg", 1, 90}, {"lossless.webp", 2, 0}};
    int bad = 0;
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        uint8_t *b = NULL;
        size_t n = 0;
        int ok = seeds[i].kind == 0   ? tk_png_encode(rgb, 19, 11, seeds[i].ch, &b, &n)
                 : seeds[i].kind == 1 ? tk_jpeg_encode(rgb, 19, 11, seeds[i].ch, &b, &n)
                                      : tk_webp_encode_lossless(rgb, 19, 11, &b, &n);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, seeds[i].name);
        if (!ok || !tk_write_file(path, b, n)) bad = 1;
        free(b);
    }
    free(rgb);
    return bad;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--corpus")) return write_corpus(argv[2]);
    const int w = 37, h = 23;
    uint8_t *rgb = tk_image_pattern(w, h, TK_NOISE, 3);
    CHECK(rgb != NULL, "pattern");
    if (!rgb) TEST_MAIN_END();

    /* PNG, RGB: exact */
    uint8_t *png = NULL;
    size_t png_n = 0;
    CHECK(tk_png_encode(rgb, w, h, 3, &png, &png_n), "png encode");
    braid_image *im = NULL;
    CHECK_STATUS(braid_image_decode(png, png_n, &im), BRAID_OK);
    if (im) {
        CHECK(braid_image_width(im) == w && braid_image_height(im) == h, "png size %dx%d", braid_image_width(im),
              braid_image_height(im));
        CHECK(!memcmp(braid_image_rgb(im), rgb, (size_t)w * h * 3), "png pixels differ");
        braid_image *again = NULL;
        CHECK_STATUS(braid_image_from_rgb(w, h, rgb, &again), BRAID_OK);
        CHECK(again && braid_image_hash(again) == braid_image_hash(im), "hash of equal pixels differs");
        braid_image_free(again);
    }
    braid_image_free(im);

    /* PNG, grey and RGBA: grey replicated, alpha dropped (not composited) */
    for (int ch = 1; ch <= 4; ch += 3) {
        uint8_t *p = NULL;
        size_t n = 0;
        CHECK(tk_png_encode(rgb, w, h, ch, &p, &n), "png %d channels", ch);
        im = NULL;
        CHECK_STATUS(braid_image_decode(p, n, &im), BRAID_OK);
        int ok = im != NULL;
        for (int i = 0; ok && i < w * h; i++)
            for (int c = 0; c < 3; c++) {
                const uint8_t *src = rgb + 3 * i;
                int want = ch == 1 ? (src[0] + src[1] + src[2]) / 3 : src[c];
                if (braid_image_rgb(im)[3 * i + c] != want) ok = 0;
            }
        CHECK(ok, "png with %d channels: pixels differ", ch);
        braid_image_free(im);
        free(p);
    }

    /* WebP lossless: exact */
    uint8_t *webp = NULL;
    size_t webp_n = 0;
    CHECK(tk_webp_encode_lossless(rgb, w, h, &webp, &webp_n), "webp encode");
    im = NULL;
    CHECK_STATUS(braid_image_decode(webp, webp_n, &im), BRAID_OK);
    CHECK(im && braid_image_width(im) == w && !memcmp(braid_image_rgb(im), rgb, (size_t)w * h * 3), "webp pixels");
    braid_image_free(im);

    /* JPEG (quality 100 of a smooth gradient): close to the source */
    uint8_t *grad = tk_image_pattern(64, 48, TK_GRADIENT, 0);
    uint8_t *jpg = NULL;
    size_t jpg_n = 0;
    CHECK(grad && tk_jpeg_encode(grad, 64, 48, 100, &jpg, &jpg_n), "jpeg encode");
    im = NULL;
    CHECK_STATUS(braid_image_decode(jpg, jpg_n, &im), BRAID_OK);
    if (im && grad) {
        int maxd = 0;
        for (int i = 0; i < 64 * 48 * 3; i++) {
            int d = abs((int)braid_image_rgb(im)[i] - grad[i]);
            if (d > maxd) maxd = d;
        }
        CHECK(braid_image_width(im) == 64 && braid_image_height(im) == 48 && maxd <= 24, "jpeg max diff %d", maxd);
    }
    braid_image_free(im);

    /* bad inputs */
    check_refused(png, 0, BRAID_E_FORMAT, "no data", "zero bytes");
    check_refused((const uint8_t *)"hello, this is text", 19, BRAID_E_FORMAT, "unknown format", "text");
    check_refused((const uint8_t *)"GIF89a\1\0\1\0", 10, BRAID_E_UNSUPPORTED, "GIF", "gif");
    check_refused(png, png_n / 2, BRAID_E_FORMAT, "truncated", "truncated png");
    check_refused(png, 20, BRAID_E_FORMAT, "PNG", "png cut in the header");
    check_refused(jpg, jpg_n / 2, BRAID_E_FORMAT, "truncated", "truncated jpeg");
    check_refused(jpg, 4, BRAID_E_FORMAT, "JPEG", "jpeg cut in the header");
    check_refused(webp, webp_n / 2, BRAID_E_FORMAT, "WebP", "truncated webp");
    check_refused(webp, 14, BRAID_E_FORMAT, "WebP", "webp cut in the header");
    /* a PNG whose (valid, CRC-correct) header says 60000 x 60000: refused before any pixel is allocated */
    uint8_t *huge = malloc(png_n);
    if (huge) {
        memcpy(huge, png, png_n);
        put_be32(huge + 16, 60000);
        put_be32(huge + 20, 60000);
        put_be32(huge + 29, crc32_png(huge + 12, 17));
        check_refused(huge, png_n, BRAID_E_RANGE, "too large", "huge png");
        put_be32(huge + 16, 0); /* zero width */
        put_be32(huge + 29, crc32_png(huge + 12, 17));
        check_refused(huge, png_n, BRAID_E_FORMAT, "PNG", "zero-width png");
        /* a damaged byte in the image data: the chunk CRC catches it */
        memcpy(huge, png, png_n);
        huge[png_n - 20] ^= 0x5a;
        check_refused(huge, png_n, BRAID_E_FORMAT, "PNG", "damaged png");
        free(huge);
    }
    check_refused(png, (size_t)BRAID_IMAGE_MAX_BYTES + 1, BRAID_E_RANGE, "limit", "too many bytes");
    im = NULL;
    CHECK_STATUS(braid_image_load_file("/nonexistent/x.png", &im), BRAID_E_IO);
    CHECK_STATUS(braid_image_from_rgb(0, 5, rgb, &im), BRAID_E_FORMAT);
    CHECK_STATUS(braid_image_from_rgb(20000, 5, rgb, &im), BRAID_E_RANGE);

    /* a file round trip, with the file named in the reason of a failure */
    char path[] = "/tmp/braid_test_image_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) {
        close(fd);
        CHECK(tk_write_file(path, png, png_n / 3), "write");
        CHECK_STATUS(braid_image_load_file(path, &im), BRAID_E_FORMAT);
        CHECK(has(braid_last_error(), path), "reason '%s' lacks the path", braid_last_error());
        CHECK(tk_write_file(path, png, png_n), "write");
        CHECK_STATUS(braid_image_load_file(path, &im), BRAID_OK);
        CHECK(im && !memcmp(braid_image_rgb(im), rgb, (size_t)w * h * 3), "file pixels");
        braid_image_free(im);
        unlink(path);
    }
    free(png);
    free(webp);
    free(jpg);
    free(grad);
    free(rgb);
    TEST_MAIN_END();
}
