/* The loss curve: everything of the trainer that draws is here. */
#include "curve.h"

#include "minigrad/plot.h"

#include <limits.h>
#include <stdlib.h>

mg_status train_plot_curve(const char *path, const char *title, const char *ylabel, const float *loss, int64_t n,
                           const int64_t *val_step, const float *val, int64_t nv) {
    if (n <= 0) return mg_set_error(MG_ERR_INVALID, "%s: no training steps to plot", path);
    if (n > INT_MAX || nv > INT_MAX)
        return mg_set_error(MG_ERR_INVALID, "%s: %lld steps are too many to plot", path, (long long)n);
    double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    double *vx = malloc((size_t)(nv + 1) * sizeof *vx), *vy = malloc((size_t)(nv + 1) * sizeof *vy);
    mg_status st;
    if (!x || !y || !vx || !vy) {
        st = mg_set_error(MG_ERR_NOMEM, "%s: out of memory for the loss curve", path);
    } else {
        for (int64_t i = 0; i < n; i++) x[i] = (double)(i + 1), y[i] = loss[i];
        for (int64_t i = 0; i < nv; i++) vx[i] = (double)val_step[i], vy[i] = val[i];
        mg_plot_series s[2] = {{.label = "train", .x = x, .y = y, .n = (int)n},
                               {.label = "validation", .x = vx, .y = vy, .n = (int)nv}};
        mg_plot_opts o = {.title = title, .xlabel = "step", .ylabel = ylabel ? ylabel : "loss"};
        st = mg_plot_lines(path, &o, s, nv ? 2 : 1);
    }
    free(x), free(y), free(vx), free(vy);
    return st;
}
