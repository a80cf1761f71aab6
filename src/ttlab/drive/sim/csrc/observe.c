/* Partner and road observation features of every agent slot, the CPU hot path of DriveEnv.
 *
 * The same math as ttlab/drive/sim/observe.py (partner_features, road_features, grid lookup), which
 * stays the reference and the CUDA path; tests/drive/test_sim_native.py holds the two together.
 * One pass per agent writes its 63 x 7 partner and 200 x 7 road features straight into the flat
 * observation row: no (E, A, slots) temporaries. Parallel over agents with OpenMP.
 *
 * Shapes: x .. width, visible (E*A); scene (E); seg_table (rows, 8); cell_cand (P, G, Kc) int16 or
 * int32; origin (P, 2); gx, gy (P); out (E*A, obs_dim) float32, written in
 * [partner_offset, partner_offset + partner_slots*pdim) and [road_offset, road_offset + road_slots*7).
 * pdim is 7 + n_extra: extra (n_extra, E*A) holds per-agent columns copied into each partner row after its
 * 7 base features (partner controls, priority; NULL when n_extra is 0).
 */
#include <math.h>
#include <stdint.h>

#include "knn.h"
#include <string.h>

#define ROAD_DIM 7
#define SEG_DIM 8
#define MAX_NEAREST 1024

static const float POS_INV = 1.0f / 50.0f;   /* observe.POS_SCALE */
static const float SPEED_INV = 1.0f / 20.0f; /* observe.SPEED_SCALE */
static const float SIZE_INV = 1.0f / 5.0f;   /* observe.SIZE_SCALE */

/* One partner j's features in ego i's frame (cos c, sin s of the ego's heading) into o[0 .. pdim). */
static inline void partner_feat(int64_t i, int64_t j, const float* x, const float* y, const float* h,
                                const float* v, const float* len, const float* wid, const float* extra,
                                int64_t n_extra, int64_t stride, float c, float s, float* o) {
    float dx = x[j] - x[i], dy = y[j] - y[i];
    float dh = h[j] - h[i];
    o[0] = (dx * c + dy * s) * POS_INV;
    o[1] = (-dx * s + dy * c) * POS_INV;
    o[2] = cosf(dh);
    o[3] = sinf(dh);
    o[4] = v[j] * SPEED_INV;
    o[5] = len[j] * SIZE_INV;
    o[6] = wid[j] * SIZE_INV;
    for (int64_t q = 0; q < n_extra; q++) o[7 + q] = extra[q * stride + j];
}

static void partner_row(int64_t A, int64_t i, const float* x, const float* y, const float* h, const float* v,
                        const float* len, const float* wid, const float* extra, int64_t n_extra,
                        int64_t stride, const uint8_t* vis, float c, float s, int64_t slots, int64_t pdim, float r2, float* out) {
    memset(out, 0, sizeof(float) * slots * pdim);
    int64_t k = A - 1 < slots ? A - 1 : slots;
    if (k <= 0) return;
    if (A - 1 <= slots) {
        /* every other agent fits: slot order (other j goes to slot j, or j - 1 past the ego) */
        for (int64_t j = 0; j < A; j++) {
            if (j == i || !vis[j]) continue;
            float dx = x[j] - x[i], dy = y[j] - y[i];
            if (dx * dx + dy * dy > r2) continue;
            partner_feat(i, j, x, y, h, v, len, wid, extra, n_extra, stride, c, s, out + (j < i ? j : j - 1) * pdim);
        }
        return;
    }
    /* more others than slots: the k nearest visible within the radius, nearest first (insertion) */
    float best_d[MAX_NEAREST];
    int64_t best_j[MAX_NEAREST];
    int64_t n = 0;
    if (k > MAX_NEAREST) k = MAX_NEAREST;
    for (int64_t j = 0; j < A; j++) {
        if (j == i || !vis[j]) continue;
        float dx = x[j] - x[i], dy = y[j] - y[i];
        float d2 = dx * dx + dy * dy;
        if (d2 > r2) continue;
        n = knn_offer(d2, j, best_d, best_j, n, k);
    }
    for (int64_t q = 0; q < n; q++)
        partner_feat(i, best_j[q], x, y, h, v, len, wid, extra, n_extra, stride, c, s, out + q * pdim);
}

static void road_row(const float* seg_table, const int64_t* rows, int64_t kc, float xs, float ys, float c,
                     float s, int64_t slots, float radius, float* out) {
    int64_t k = kc < slots ? kc : slots;
    for (int64_t q = 0; q < k; q++) {
        const float* g = seg_table + rows[q] * SEG_DIM;
        float* o = out + q * ROAD_DIM;
        float dx = g[0] - xs, dy = g[1] - ys;
        float ux = g[2], uy = g[3], ln = g[4];
        float t = -(dx * ux + dy * uy);
        t = t < 0.0f ? 0.0f : t;
        t = t < ln ? t : ln;
        float qx = dx + t * ux, qy = dy + t * uy;
        float dist = sqrtf(qx * qx + qy * qy);
        if (!(dist <= radius)) {
            memset(o, 0, sizeof(float) * ROAD_DIM);
            continue;
        }
        float mx = g[5] - xs, my = g[6] - ys;
        o[0] = mx * c + my * s;
        o[1] = my * c - mx * s;
        o[2] = ln;
        o[3] = ux * c + uy * s;
        o[4] = -ux * s + uy * c;
        o[5] = dist;
        o[6] = g[7];
    }
    if (k < slots) memset(out + k * ROAD_DIM, 0, sizeof(float) * (slots - k) * ROAD_DIM);
}

void ttlab_observe_partner_road(
    int64_t E, int64_t A, const float* x, const float* y, const float* heading, const float* speed,
    const float* length, const float* width, const float* extra, int64_t n_extra,
    const uint8_t* visible, const int64_t* scene,
    const float* seg_table, const void* cell_cand, int32_t cand_int32, int64_t G, int64_t Kc,
    const float* origin, const int64_t* gx, const int64_t* gy, float cell, int64_t seg_rows_per_scene,
    float inv_scale, int64_t partner_slots, float partner_radius, int64_t road_slots, float road_radius_scaled,
    float* out, int64_t obs_dim, int64_t partner_offset, int64_t road_offset, int32_t nthreads) {
    float r2 = partner_radius * partner_radius;
    int64_t n = E * A, pdim = 7 + n_extra;
#pragma omp parallel for num_threads(nthreads) schedule(static)
    for (int64_t ia = 0; ia < n; ia++) {
        int64_t e = ia / A, i = ia % A, base = e * A;
        float c = cosf(heading[ia]), s = sinf(heading[ia]);
        float* row = out + ia * obs_dim;
        partner_row(A, i, x + base, y + base, heading + base, speed + base, length + base, width + base,
                    extra ? extra + base : NULL, n_extra, n, visible + base, c, s,
                    partner_slots, pdim, r2, row + partner_offset);
        /* grid cell of the agent (as RoadGrid.lookup) */
        int64_t p = scene[e];
        float fx = floorf((x[ia] - origin[2 * p]) / cell), fy = floorf((y[ia] - origin[2 * p + 1]) / cell);
        int64_t cx = fx > 0.0f ? (int64_t)fx : 0, cy = fy > 0.0f ? (int64_t)fy : 0;
        if (cx > gx[p] - 1) cx = gx[p] - 1;
        if (cy > gy[p] - 1) cy = gy[p] - 1;
        int64_t cell_off = (p * G + cy * gx[p] + cx) * Kc;
        int64_t rows[1024];
        int64_t kc = Kc < 1024 ? Kc : 1024;
        int64_t off = p * seg_rows_per_scene;
        if (cand_int32) {
            const int32_t* cc = (const int32_t*)cell_cand + cell_off;
            for (int64_t q = 0; q < kc; q++) rows[q] = off + cc[q];
        } else {
            const int16_t* cc = (const int16_t*)cell_cand + cell_off;
            for (int64_t q = 0; q < kc; q++) rows[q] = off + cc[q];
        }
        road_row(seg_table, rows, kc, x[ia] * inv_scale, y[ia] * inv_scale, c, s, road_slots, road_radius_scaled,
                 row + road_offset);
    }
}
