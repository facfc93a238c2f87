/* image.c — braid_image: decoding a picture from bytes or a file (the format is found from the content, never
 * the file name), the limits every decoder enforces before it allocates, and the accessors. The decoders
 * themselves are in codecs.c. */
#include "vision/image.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/file.h"
#include "base/hash.h"
#include "base/status.h"

braid_status bd_image_check_size(int64_t w, int64_t h) {
    if (w <= 0 || h <= 0) return bd_error(BRAID_E_FORMAT, "image: zero size (%lld x %lld)", (long long)w, (long long)h);
    if (w > BRAID_IMAGE_MAX_SIDE || h > BRAID_IMAGE_MAX_SIDE || w * h > (int64_t)BRAID_IMAGE_MAX_PIXELS)
        return bd_error(BRAID_E_RANGE, "image: %lld x %lld is too large (at most %u pixels a side, %u pixels)",
                        (long long)w, (long long)h, BRAID_IMAGE_MAX_SIDE, BRAID_IMAGE_MAX_PIXELS);
    return BRAID_OK;
}

braid_status bd_image_alloc(int32_t w, int32_t h, braid_image **out) {
    BD_TRY(bd_image_check_size(w, h));
    braid_image *im = bd_calloc(1, sizeof *im);
    uint8_t *rgb = bd_mallocn((size_t)w * (size_t)h, 3);
    if (!im || !rgb) {
        bd_free(im);
        bd_free(rgb);
        return bd_error(BRAID_E_NOMEM, "image: out of memory for %d x %d pixels", w, h);
    }
    im->w = w;
    im->h = h;
    im->rgb = rgb;
    *out = im;
    return BRAID_OK;
}

static void image_set_hash(braid_image *im) {
    uint64_t hdr[2] = {(uint64_t)im->w, (uint64_t)im->h};
    im->hash = bd_hash64(im->rgb, (size_t)im->w * (size_t)im->h * 3, bd_hash64(hdr, sizeof hdr, 0x696d616765ull));
}

braid_status braid_image_decode(const void *data, size_t size, braid_image **out) {
    if (!out) return bd_error(BRAID_E_INVALID, "image: no output pointer");
    *out = NULL;
    if (!data || size == 0) return bd_error(BRAID_E_FORMAT, "image: no data (0 bytes)");
    if (size > BRAID_IMAGE_MAX_BYTES)
        return bd_error(BRAID_E_RANGE, "image: %zu bytes of data, more than the limit of %u", size,
                        BRAID_IMAGE_MAX_BYTES);
    const uint8_t *p = data;
    braid_status s;
    if (size >= 8 && !memcmp(p, "\x89PNG\r\n\x1a\n", 8)) s = bd_image_decode_png(p, size, out);
    else if (size >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff) s = bd_image_decode_jpeg(p, size, out);
    else if (size >= 12 && !memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4)) s = bd_image_decode_webp(p, size, out);
    else if (size >= 4 && (!memcmp(p, "GIF8", 4) || !memcmp(p, "BM", 2)))
        return bd_error(BRAID_E_UNSUPPORTED, "image: %s is not supported (PNG, JPEG or WebP)",
                        p[0] == 'G' ? "GIF" : "BMP");
    else return bd_error(BRAID_E_FORMAT, "image: unknown format (not PNG, JPEG or WebP)");
    if (s == BRAID_OK) image_set_hash(*out);
    return s;
}

braid_status braid_image_load_file(const char *path, braid_image **out) {
    if (!path || !out) return bd_error(BRAID_E_INVALID, "image: no path or output pointer");
    *out = NULL;
    int fd;
    uint64_t size;
    BD_TRY(bd_open_regular(path, "image", &fd, &size));
    if (size > BRAID_IMAGE_MAX_BYTES) {
        close(fd);
        return bd_error(BRAID_E_RANGE, "image: %s has %llu bytes, more than the limit of %u", path,
                        (unsigned long long)size, BRAID_IMAGE_MAX_BYTES);
    }
    uint8_t *buf = bd_malloc(size ? (size_t)size : 1);
    if (!buf) {
        close(fd);
        return bd_error(BRAID_E_NOMEM, "image: out of memory for %s (%llu bytes)", path, (unsigned long long)size);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, buf + got, (size_t)size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int e = errno;
            close(fd);
            bd_free(buf);
            return bd_error(BRAID_E_IO, "image: cannot read %s: %s", path, n < 0 ? strerror(e) : "file shrank");
        }
        got += (size_t)n;
    }
    close(fd);
    braid_status s = braid_image_decode(buf, (size_t)size, out);
    bd_free(buf);
    if (s != BRAID_OK) {
        /* name the file in the reason: "image: x.png: truncated ..." */
        char reason[512];
        snprintf(reason, sizeof reason, "%s", braid_last_error());
        const char *r = !strncmp(reason, "image: ", 7) ? reason + 7 : reason;
        bd_error(s, "image: %s: %s", path, r);
    }
    return s;
}

braid_status braid_image_from_rgb(int32_t w, int32_t h, const uint8_t *rgb, braid_image **out) {
    if (!out || !rgb) return bd_error(BRAID_E_INVALID, "image: no pixels or output pointer");
    *out = NULL;
    braid_image *im = NULL;
    BD_TRY(bd_image_alloc(w, h, &im));
    memcpy(im->rgb, rgb, (size_t)w * (size_t)h * 3);
    image_set_hash(im);
    *out = im;
    return BRAID_OK;
}

void braid_image_free(braid_image *img) {
    if (!img) return;
    bd_free(img->rgb);
    bd_free(img);
}

int32_t braid_image_width(const braid_image *img) { return img ? img->w : 0; }
int32_t braid_image_height(const braid_image *img) { return img ? img->h : 0; }
const uint8_t *braid_image_rgb(const braid_image *img) { return img ? img->rgb : NULL; }
uint64_t braid_image_hash(const braid_image *img) { return img ? img->hash : 0; }
