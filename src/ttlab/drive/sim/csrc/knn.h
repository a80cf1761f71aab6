/* The k nearest so far, kept sorted by squared distance (insertion): shared by observe.c and contact.c. */
#ifndef TTLAB_KNN_H
#define TTLAB_KNN_H

#include <stdint.h>

/* Offer candidate j at squared distance d2 to the sorted lists best_d / best_j holding m of at most k
   entries; returns the new count. A candidate no nearer than the k-th is dropped; ties keep the earlier one. */
static inline int64_t knn_offer(float d2, int64_t j, float* best_d, int64_t* best_j, int64_t m, int64_t k) {
    if (m == k && d2 >= best_d[m - 1]) return m;
    int64_t p = m < k ? m++ : k - 1;
    while (p > 0 && best_d[p - 1] > d2) {
        best_d[p] = best_d[p - 1];
        best_j[p] = best_j[p - 1];
        p--;
    }
    best_d[p] = d2;
    best_j[p] = j;
    return m;
}

#endif
