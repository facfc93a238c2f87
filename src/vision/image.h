/* image.h — the internal side of braid_image: an RGB8 picture (rows top to bottom, 3 bytes per pixel, no
 * padding), whatever file it came from. image.c decodes PNG (libpng), JPEG (libjpeg-turbo) and WebP (libwebp)
 * into it; preprocess.c turns it into the encoder's input. */
#ifndef BRAID_VISION_IMAGE_H
#define BRAID_VISION_IMAGE_H

#include <stdint.h>

#include "braid.h"

struct braid_image {
    int32_t w, h;
    uint8_t *rgb; /* w*h*3 bytes */
    uint64_t hash; /* of w, h and the pixels: the key of the embedding cache */
};

/* The reason, for one decoder's failure, prefixed with "image: " (helpers of image.c and its format files). */
braid_status bd_image_check_size(int64_t w, int64_t h);
braid_status bd_image_alloc(int32_t w, int32_t h, braid_image **out);

braid_status bd_image_decode_png(const uint8_t *data, size_t size, braid_image **out);
braid_status bd_image_decode_jpeg(const uint8_t *data, size_t size, braid_image **out);
braid_status bd_image_decode_webp(const uint8_t *data, size_t size, braid_image **out);

#endif
