/* Normal and categorical sampling on top of the SplitMix64 generator in rng.h. */
#include "minigrad/rng.h"

#include <math.h>

float mg_rng_normal(mg_rng *r) {
    /* Box-Muller with u1 in (0, 1] so log() never sees 0. Uses two draws, returns one value. */
    double u1 = 1.0 - mg_rng_double(r);
    double u2 = mg_rng_double(r);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

int mg_rng_categorical(mg_rng *r, const float *probs, int n) {
    double total = 0.0;
    int last = -1;
    for (int i = 0; i < n; i++)
        if (probs[i] > 0.0f) {
            total += probs[i];
            last = i;
        }
    if (last < 0) return 0;
    double u = mg_rng_double(r) * total, acc = 0.0;
    for (int i = 0; i < n; i++) {
        if (probs[i] <= 0.0f) continue;
        acc += probs[i];
        if (u < acc) return i;
    }
    return last;
}
