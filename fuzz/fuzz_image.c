/* fuzz_image.c — libFuzzer target for the image decoders (src/vision/codecs.c over libpng, libjpeg-turbo and
 * libwebp): any input is either refused with a status and a reason, or gives an image within the limits whose
 * every pixel can be read (ASan/UBSan check each byte). Seeds are in fuzz/corpus/image (written by
 * `unit_image --corpus DIR`). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "braid.h"

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    braid_image *im = NULL;
    braid_status s = braid_image_decode(data, size, &im);
    if (s != BRAID_OK) {
        if (im || !braid_last_error()[0]) abort(); /* a refusal leaves no image and says why */
        return 0;
    }
    int64_t w = braid_image_width(im), h = braid_image_height(im);
    if (w <= 0 || h <= 0 || w > BRAID_IMAGE_MAX_SIDE || h > BRAID_IMAGE_MAX_SIDE ||
        w * h > (int64_t)BRAID_IMAGE_MAX_PIXELS)
        abort();
    const uint8_t *p = braid_image_rgb(im);
    for (int64_t i = 0; i < w * h * 3; i += 61) sink += p[i];
    sink += p[w * h * 3 - 1];
    braid_image_free(im);
    return 0;
}
