/* preprocess.c — an image to the encoder's input, as llama.cpp's dyn_size preprocessor does it (reference/vision.md
 * §1.4): the "smart" target size (multiples of patch*merge, aspect kept, pixel count within the token limits,
 * all in float32 as there), a Pillow-compatible separable bicubic resize in 22-bit fixed point (a = -0.5, the
 * filter widened when shrinking), black padding centred with integer division, then /255 and (x-mean)/std in
 * float32. The pixels equal libmtmd's byte for byte, so any difference in the rows comes from the network. */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "vision/image.h"
#include "vision/vision.h"

void bd_vision_target_size(const braid_mmproj *mm, int32_t w, int32_t h, int32_t *tw, int32_t *th) {
    const int a = mm->patch * BD_VISION_MERGE;
    const float fa = (float)a;
    int wb = (int)roundf((float)w / fa) * a, hb = (int)roundf((float)h / fa) * a;
    if (wb < a) wb = a;
    if (hb < a) hb = a;
    if ((int64_t)wb * hb > mm->max_pixels) {
        const float beta = sqrtf((float)h * (float)w / (float)mm->max_pixels);
        hb = (int)floorf(((float)h / beta) / fa) * a;
        wb = (int)floorf(((float)w / beta) / fa) * a;
        if (hb < a) hb = a;
        if (wb < a) wb = a;
    } else if ((int64_t)wb * hb < mm->min_pixels) {
        const float beta = sqrtf((float)mm->min_pixels / ((float)h * (float)w));
        hb = (int)ceilf(((float)h * beta) / fa) * a;
        wb = (int)ceilf(((float)w * beta) / fa) * a;
    }
    *tw = wb;
    *th = hb;
}

/* ---- Pillow's bicubic resampling -------------------------------------------------------------------------- */

#define PREC_BITS 22 /* 32 - 8 (pixel) - 2 (headroom) */

static double bicubic(double x) {
    const double a = -0.5;
    if (x < 0) x = -x;
    if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
    return 0;
}

/* Fixed-point weights of every output pixel of one axis: bounds[2*o] = first input, bounds[2*o+1] = count,
 * weights[o*ksize + i]. Returns ksize, or 0 on allocation failure. */
static int resample_coeffs(int in, int out, int **bounds, int32_t **weights) {
    double scale = (double)in / out, fs = scale < 1 ? 1 : scale;
    double support = 2.0 * fs;
    int ksize = (int)ceil(support) * 2 + 1;
    double *pre = bd_mallocn((size_t)out * ksize, sizeof(double));
    *bounds = bd_mallocn((size_t)out * 2, sizeof(int));
    *weights = bd_mallocn((size_t)out * ksize, sizeof(int32_t));
    if (!pre || !*bounds || !*weights) {
        bd_free(pre);
        bd_free(*bounds);
        bd_free(*weights);
        *bounds = NULL;
        *weights = NULL;
        return 0;
    }
    for (int o = 0; o < out; o++) {
        double center = (o + 0.5) * scale, ww = 0, ss = 1.0 / fs;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in) xmax = in;
        xmax -= xmin;
        double *k = pre + (size_t)o * ksize;
        int x = 0;
        for (; x < xmax; x++) {
            k[x] = bicubic((x + xmin - center + 0.5) * ss);
            ww += k[x];
        }
        for (x = 0; x < xmax; x++)
            if (ww != 0.0) k[x] /= ww;
        for (; x < ksize; x++) k[x] = 0;
        (*bounds)[2 * o] = xmin;
        (*bounds)[2 * o + 1] = xmax;
    }
    const double one = ldexp(1.0, PREC_BITS);
    for (size_t i = 0; i < (size_t)out * ksize; i++) (*weights)[i] = (int32_t)(pre[i] * one + (pre[i] < 0 ? -0.5 : 0.5));
    bd_free(pre);
    return ksize;
}

static inline uint8_t clip8(int32_t v) { return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v; }

/* Resizes src (sw x sh RGB8) to dst (dw x dh): horizontal pass, then vertical, each skipped if its size is kept. */
static braid_status resize_bicubic(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh) {
    const uint8_t *cur = src;
    uint8_t *tmp = NULL;
    int *b = NULL;
    int32_t *wt = NULL;
    if (dw != sw) {
        int ks = resample_coeffs(sw, dw, &b, &wt);
        uint8_t *o = dh != sh ? (tmp = bd_mallocn((size_t)dw * sh, 3)) : dst;
        if (!ks || !o) goto nomem;
        for (int y = 0; y < sh; y++) {
            const uint8_t *row = cur + (size_t)y * sw * 3;
            uint8_t *orow = o + (size_t)y * dw * 3;
            for (int x = 0; x < dw; x++) {
                const int32_t *k = wt + (size_t)x * ks;
                const uint8_t *p = row + (size_t)b[2 * x] * 3;
                int32_t s0 = 1 << (PREC_BITS - 1), s1 = s0, s2 = s0;
                for (int i = 0; i < b[2 * x + 1]; i++, p += 3) {
                    s0 += p[0] * k[i];
                    s1 += p[1] * k[i];
                    s2 += p[2] * k[i];
                }
                orow[3 * x] = clip8(s0 >> PREC_BITS);
                orow[3 * x + 1] = clip8(s1 >> PREC_BITS);
                orow[3 * x + 2] = clip8(s2 >> PREC_BITS);
            }
        }
        cur = o;
        bd_free(b);
        bd_free(wt);
        b = NULL;
        wt = NULL;
    }
    if (dh != sh) {
        int ks = resample_coeffs(sh, dh, &b, &wt);
        const size_t n = (size_t)dw * 3;
        int32_t *acc = bd_mallocn(n, sizeof(int32_t));
        if (!ks || !acc) {
            bd_free(acc);
            goto nomem;
        }
        for (int y = 0; y < dh; y++) {
            const int32_t *k = wt + (size_t)y * ks;
            for (size_t i = 0; i < n; i++) acc[i] = 1 << (PREC_BITS - 1);
            for (int j = 0; j < b[2 * y + 1]; j++) {
                const uint8_t *row = cur + (size_t)(b[2 * y] + j) * n;
                for (size_t i = 0; i < n; i++) acc[i] += row[i] * k[j];
            }
            uint8_t *orow = dst + (size_t)y * n;
            for (size_t i = 0; i < n; i++) orow[i] = clip8(acc[i] >> PREC_BITS);
        }
        bd_free(acc);
    }
    bd_free(b);
    bd_free(wt);
    bd_free(tmp);
    return BRAID_OK;
nomem:
    bd_free(b);
    bd_free(wt);
    bd_free(tmp);
    return bd_error(BRAID_E_NOMEM, "vision: out of memory resizing %dx%d to %dx%d", sw, sh, dw, dh);
}

braid_status bd_vision_preprocess(const braid_mmproj *mm, const braid_image *img, float **out, int32_t *tw_out,
                                  int32_t *th_out) {
    int32_t tw, th;
    bd_vision_target_size(mm, img->w, img->h, &tw, &th);
    uint8_t *canvas = bd_calloc((size_t)tw * th, 3); /* black: the padding */
    float *pix = bd_mallocn((size_t)tw * th * 3, sizeof(float));
    braid_status s = BRAID_OK;
    if (!canvas || !pix) {
        s = bd_error(BRAID_E_NOMEM, "vision: out of memory for a %dx%d image", tw, th);
        goto done;
    }
    if (tw == img->w && th == img->h) {
        memcpy(canvas, img->rgb, (size_t)tw * th * 3);
    } else {
        /* PAD_CEIL: scale to fit, round the fitted size up, centre it */
        const float sw = (float)tw / (float)img->w, sh = (float)th / (float)img->h, sc = sw < sh ? sw : sh;
        int nw = (int)ceilf((float)img->w * sc), nh = (int)ceilf((float)img->h * sc);
        if (nw > tw) nw = tw;
        if (nh > th) nh = th;
        uint8_t *fit = bd_mallocn((size_t)nw * nh, 3);
        if (!fit) {
            s = bd_error(BRAID_E_NOMEM, "vision: out of memory for a %dx%d image", nw, nh);
            goto done;
        }
        s = resize_bicubic(img->rgb, img->w, img->h, fit, nw, nh);
        if (s == BRAID_OK) {
            const int ox = (tw - nw) / 2, oy = (th - nh) / 2;
            for (int y = 0; y < nh; y++)
                memcpy(canvas + ((size_t)(y + oy) * tw + ox) * 3, fit + (size_t)y * nw * 3, (size_t)nw * 3);
        }
        bd_free(fit);
        if (s != BRAID_OK) goto done;
    }
    /* planar [3][th][tw], normalized as clip_image_f32::normalize does */
    const size_t plane = (size_t)tw * th;
    for (size_t i = 0; i < plane; i++)
        for (int c = 0; c < 3; c++) pix[c * plane + i] = ((float)canvas[3 * i + c] / 255.0f - mm->mean[c]) / mm->std[c];
done:
    bd_free(canvas);
    if (s != BRAID_OK) {
        bd_free(pix);
        return s;
    }
    *out = pix;
    *tw_out = tw;
    *th_out = th;
    return BRAID_OK;
}
