/* The two benchmark configurations (the textgen and music model sizes) and the FLOP counts
 * bench/README.md states. */
#include "bench_train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

const bt_config bt_configs[] = {
    {"textgen", 256, 128, 256, 3, 4, 32, 112, false},
    {"music", 390, 2048, 512, 6, 8, 2, 512, false},
    {"tiny", 37, 24, 32, 2, 2, 3, 8, true},
    /* as long (T * C) as a big configuration, so that the tool's test sees music's rounds */
    {"tiny-long", 37, 1024, 272, 1, 2, 1, 8, true},
};
const int bt_n_configs = (int)(sizeof bt_configs / sizeof bt_configs[0]);

const bt_config *bt_config_find(const char *name) {
    for (int i = 0; i < bt_n_configs; i++)
        if (strcmp(bt_configs[i].name, name) == 0) return &bt_configs[i];
    return NULL;
}

/* Per token and layer the matrix products hold 12 C^2 weights (qkv 3C^2, proj C^2, MLP 8C^2) and
 * the tied head V C; a training step spends 2 FLOPs per weight forward and 4 backward. Causal
 * attention forms QK^T and PV over the T/2 keys a query sees on average: 2 x 2 x (T/2) x C
 * forward per layer, three times that with the backward. Biases, LayerNorm, GELU, softmax and
 * the optimizer are left out (under 1% here). */
double bt_train_flops_per_token(const bt_config *c) {
    const double V = (double)c->V, T = (double)c->T, C = (double)c->C, L = (double)c->L;
    return 6.0 * (12.0 * L * C * C + V * C) + 6.0 * L * T * C;
}

/* Positions run: the prompt, then each generated token but the last; position p attends over
 * p + 1 cached keys; the head is needed once per generated token. */
double bt_gen_flops(const bt_config *c, int64_t prompt, int64_t n_new) {
    const double V = (double)c->V, C = (double)c->C, L = (double)c->L;
    double total = 2.0 * V * C * (double)n_new;
    for (int64_t p = 0; p < prompt + n_new - 1; p++)
        total += 2.0 * 12.0 * L * C * C + 4.0 * L * (double)(p + 1) * C;
    return total;
}

int64_t bt_gen_tokens(const bt_config *c, int64_t want) {
    const int64_t room = c->T - BT_PROMPT_LEN, n = want > 0 ? want : c->gen;
    return room < n ? room : n;
}

double bt_rss_mb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return NAN;
    char line[256];
    double kb = NAN;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kb = strtod(line + 6, NULL);
            break;
        }
    fclose(f);
    return kb / 1024.0;
}

double bt_peak_rss_mb(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return NAN;
    return (double)ru.ru_maxrss / 1024.0; /* Linux: KiB */
}
