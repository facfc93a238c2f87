/* qwen3next.h — what Qwen3-Next's Gated DeltaNet does differently from Qwen3.5's (architectures.md §1.13),
 * as plain array transforms that qwen35.c applies when it runs a qwen3next model. Everything else (attention,
 * conv, delta rule, gated norm, the MoE FFN of moe.h) is the qwen35 family's code in qwen35.c.
 *
 * Qwen3-Next groups its GDN heads by key head g (r = H_v / H_k value heads per group, value head h = g·r + m):
 * - the legacy projection ssm_in gives per group [q_g (S) ‖ k_g (S) ‖ v_g (r·S) ‖ z_g (r·S)];
 * - ssm_ba gives per group [b_g (r) ‖ a_g (r)];
 * - value head h reads key head h / r (repeat interleaved), where Qwen3.5 (whose converter reorders V heads)
 *   reads h mod H_k. */
#ifndef BRAID_MODELS_QWEN3NEXT_H
#define BRAID_MODELS_QWEN3NEXT_H

#include <stdint.h>

/* qkvz [T][H_k][2S + 2rS] -> mixed [T][q (H_k·S) ‖ k (H_k·S) ‖ v (H_v·S)] (ld ldm) and z [T][H_v·S] (ld ldz). */
void q3n_split_qkvz(const float *qkvz, int32_t T, int S, int H_k, int r, float *mixed, int64_t ldm, float *z,
                    int64_t ldz);
/* ba [T][H_k][2r] -> beta [T][H_v], alpha [T][H_v] (value head g·r + m). */
void q3n_split_ba(const float *ba, int32_t T, int H_k, int r, float *beta, float *alpha);
/* y [T][ldy]: q heads at y, k heads at y + H_k·S -> qk [T][q (H_v·S) ‖ k (H_v·S)], value head h taking key head
 * h / r, so that bd_gdn (which pairs value head h with key head h mod its H_k) runs with H_k = H_v. */
void q3n_repeat_qk(const float *y, int64_t ldy, int32_t T, int S, int H_k, int r, float *qk);

#endif
