/* image_write.h — test images for the vision tests, benchmarks and fuzz seeds: deterministic RGB patterns and
 * their PNG / JPEG / WebP encodings (through the same Debian libraries braid decodes with). */
#ifndef BRAID_TESTKIT_IMAGE_WRITE_H
#define BRAID_TESTKIT_IMAGE_WRITE_H

#include <stddef.h>
#include <stdint.h>

typedef enum tk_pattern { TK_GRADIENT, TK_NOISE, TK_CHECKER } tk_pattern;

/* w*h*3 bytes of a pattern (noise from seed); NULL on allocation failure. Free with free(). */
uint8_t *tk_image_pattern(int w, int h, tk_pattern kind, uint64_t seed);

/* Encodings into malloc'd buffers (*out, *size); 0 on failure. channels: 1 (grey), 3 (RGB) or 4 (RGBA: alpha is
 * a ramp) for PNG; the RGB input is reduced or extended to that. */
int tk_png_encode(const uint8_t *rgb, int w, int h, int channels, uint8_t **out, size_t *size);
int tk_jpeg_encode(const uint8_t *rgb, int w, int h, int quality, uint8_t **out, size_t *size);
int tk_webp_encode_lossless(const uint8_t *rgb, int w, int h, uint8_t **out, size_t *size);
/* Writes bytes to path; 0 on failure. */
int tk_write_file(const char *path, const uint8_t *data, size_t size);
/* A PNG of the pattern written to path (RGB); 0 on failure. */
int tk_png_write_pattern(const char *path, int w, int h, tk_pattern kind, uint64_t seed);

#endif
