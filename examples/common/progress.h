/* Progress of a long run: a live line on a terminal (step/total, loss, val loss, tokens/s, ETA),
 * plain lines when the output is not a terminal, and JSON lines (--log FILE) that plots and
 * scripts read: one object per step with step, loss, lr, tokens_per_s, elapsed_s, grad_norm and
 * val_loss on the steps where it is measured. */
#ifndef EX_PROGRESS_H
#define EX_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "minigrad/base.h"

typedef struct ex_progress {
    const char *prog;
    bool tty;
    FILE *log;
    int64_t total, first_step;
    double t0, last_print;
    double last_val;
    int64_t plain_every;
    bool line_open;
} ex_progress;

/* log_path may be NULL. append: keep what a resumed run's earlier part wrote. */
mg_status ex_progress_open(ex_progress *p, const char *prog, int64_t total_steps, int64_t first_step,
                           const char *log_path, bool append);
/* step counts from 1 here (the step just finished). val_loss: NAN when not measured this step. */
void ex_progress_step(ex_progress *p, int64_t step, float loss, float lr, double tokens_per_s,
                      float grad_norm, float val_loss);
/* Prints a message without garbling the live line. */
void ex_progress_note(ex_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ex_progress_close(ex_progress *p);

/* "1h02m", "3m12s", "45s" */
char *ex_fmt_duration(double seconds, char *buf, size_t n);

/* "512.0 KiB", "12.3 MiB", "1.50 GiB" */
char *ex_fmt_bytes(double bytes, char *buf, size_t n);

/* Peak resident memory of the process so far, in bytes (0 when unknown). */
size_t ex_peak_rss(void);

#endif
