/* Per-step contact tests, the CPU hot path of DriveEnv: vehicle-vehicle collisions and offroad.
 *
 * The same math as ttlab/drive/sim/contact.py (which stays the reference and the CUDA path):
 * collisions test each visible agent's oriented box (SAT, 4 axes) against its `kc` nearest visible
 * others within `radius`; offroad tests the box (SAT, 3 axes) against the road-edge candidates of
 * its grid cell. Parallel over agents with OpenMP.
 *
 * Shapes: x .. width, visible, collided, offroad (E*A); scene (E); seg_table (rows, 8);
 * edge_cand (P, G, Ke) int16 or int32; origin (P, 2); gx, gy (P).
 */
#include <math.h>
#include <stdint.h>

#include "knn.h"

#define SEG_DIM 8
#define MAX_KC 64

static int boxes_overlap(float x1, float y1, float c1, float s1, float l1, float w1, float x2, float y2, float c2,
                         float s2, float l2, float w2) {
    float dx = x2 - x1, dy = y2 - y1;
    float cd = fabsf(c1 * c2 + s1 * s2), sd = fabsf(s2 * c1 - c2 * s1);
    float hl1 = 0.5f * l1, hw1 = 0.5f * w1, hl2 = 0.5f * l2, hw2 = 0.5f * w2;
    if (fabsf(dx * c1 + dy * s1) > hl1 + (hl2 * cd + hw2 * sd)) return 0;
    if (fabsf(-dx * s1 + dy * c1) > hw1 + (hl2 * sd + hw2 * cd)) return 0;
    if (fabsf(dx * c2 + dy * s2) > hl2 + (hl1 * cd + hw1 * sd)) return 0;
    if (fabsf(-dx * s2 + dy * c2) > hw2 + (hl1 * sd + hw1 * cd)) return 0;
    return 1;
}

static int box_segment_overlap(float cx, float cy, float c, float s, float hl, float hw, float x0, float y0, float x1,
                               float y1) {
    float ax = x0 - cx, ay = y0 - cy, bx = x1 - cx, by = y1 - cy;
    float pax = ax * c + ay * s, pay = -ax * s + ay * c;
    float pbx = bx * c + by * s, pby = -bx * s + by * c;
    if ((pax < pbx ? pax : pbx) > hl) return 0;
    if ((pax > pbx ? pax : pbx) < -hl) return 0;
    if ((pay < pby ? pay : pby) > hw) return 0;
    if ((pay > pby ? pay : pby) < -hw) return 0;
    float nx = -(pby - pay), ny = pbx - pax;
    float d = pax * nx + pay * ny;
    float r = hl * fabsf(nx) + hw * fabsf(ny);
    return !(fabsf(d) > r);
}

void ttlab_contacts(int64_t E, int64_t A, const float* x, const float* y, const float* heading, const float* length,
                    const float* width, const uint8_t* visible, const int64_t* scene, const float* seg_table,
                    const void* edge_cand, int32_t cand_int32, int64_t G, int64_t Ke, const float* origin,
                    const int64_t* gx, const int64_t* gy, float cell, int64_t seg_rows_per_scene, float pos_scale,
                    int64_t kc, float radius, uint8_t* collided, uint8_t* offroad, int32_t nthreads) {
    float r2 = radius * radius;
    int64_t n = E * A;
    if (kc > MAX_KC) kc = MAX_KC;
#pragma omp parallel for num_threads(nthreads) schedule(static)
    for (int64_t ia = 0; ia < n; ia++) {
        collided[ia] = 0;
        offroad[ia] = 0;
        if (!visible[ia]) continue;
        int64_t e = ia / A, i = ia % A, base = e * A;
        float xi = x[ia], yi = y[ia];
        float ci = cosf(heading[ia]), si = sinf(heading[ia]);
        /* the kc nearest visible others within the radius (insertion), then SAT against each */
        float best_d[MAX_KC];
        int64_t best_j[MAX_KC];
        int64_t m = 0;
        for (int64_t j = 0; j < A && kc > 0; j++) {
            if (j == i || !visible[base + j]) continue;
            float dx = x[base + j] - xi, dy = y[base + j] - yi;
            float d2 = dx * dx + dy * dy;
            if (d2 > r2) continue;
            m = knn_offer(d2, j, best_d, best_j, m, kc);
        }
        for (int64_t q = 0; q < m; q++) {
            int64_t j = base + best_j[q];
            if (boxes_overlap(xi, yi, ci, si, length[ia], width[ia], x[j], y[j], cosf(heading[j]), sinf(heading[j]),
                              length[j], width[j])) {
                collided[ia] = 1;
                break;
            }
        }
        /* offroad: the box against its cell's road-edge candidates */
        int64_t p = scene[e];
        float fx = floorf((xi - origin[2 * p]) / cell), fy = floorf((yi - origin[2 * p + 1]) / cell);
        int64_t cx = fx > 0.0f ? (int64_t)fx : 0, cy = fy > 0.0f ? (int64_t)fy : 0;
        if (cx > gx[p] - 1) cx = gx[p] - 1;
        if (cy > gy[p] - 1) cy = gy[p] - 1;
        int64_t cell_off = (p * G + cy * gx[p] + cx) * Ke;
        float hl = 0.5f * length[ia], hw = 0.5f * width[ia];
        for (int64_t q = 0; q < Ke; q++) {
            int64_t row = p * seg_rows_per_scene +
                          (cand_int32 ? ((const int32_t*)edge_cand)[cell_off + q] : ((const int16_t*)edge_cand)[cell_off + q]);
            const float* g = seg_table + row * SEG_DIM;
            float x0 = g[0] * pos_scale, y0 = g[1] * pos_scale;
            float x1 = (g[0] + g[2] * g[4]) * pos_scale, y1 = (g[1] + g[3] * g[4]) * pos_scale;
            if (box_segment_overlap(xi, yi, ci, si, hl, hw, x0, y0, x1, y1)) {
                offroad[ia] = 1;
                break;
            }
        }
    }
}
