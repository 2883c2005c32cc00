/* Internal to libminigrad-train: the loss curve, the trainer's one use of the plotting library. */
#ifndef MG_TRAIN_CURVE_H
#define MG_TRAIN_CURVE_H

#include "minigrad/base.h"

/* A PNG of the training loss (loss[i] at step i + 1; NaN leaves a gap) and, when nv > 0, the
 * validation loss (val[i] at step val_step[i]). ylabel NULL: "loss". */
mg_status train_plot_curve(const char *path, const char *title, const char *ylabel, const float *loss, int64_t n,
                           const int64_t *val_step, const float *val, int64_t nv);

#endif
