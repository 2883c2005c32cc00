/* The formatting the programs' summaries share (sizes, peak memory); durations and the progress
 * line are the library trainer's (minigrad/train.h: mg_train_fmt_duration, mg_train_progress_*). */
#ifndef EX_PROGRESS_H
#define EX_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "minigrad/base.h"
#include "minigrad/train.h"


/* "512.0 KiB", "12.3 MiB", "1.50 GiB" */
char *ex_fmt_bytes(double bytes, char *buf, size_t n);

/* Peak resident memory of the process so far, in bytes (0 when unknown). */
size_t ex_peak_rss(void);

/* What an evaluation command shows while it works through `total` windows: on a terminal (standard
 * output, MINIGRAD_NO_TTY unset) the trainer's live line (minigrad/train.h), replaced as it goes;
 * otherwise a plain line at each tenth of the work: windows done, the loss so far, the time taken
 * and the time left. Close ends the live line. */
typedef struct ex_eval_progress {
    mg_train_progress p;
    int64_t total, next_plain;
} ex_eval_progress;

void ex_eval_progress_open(ex_eval_progress *p, const char *prog, int64_t total);
/* done: windows scored so far; loss: their mean loss; tokens: targets scored (for the speed). */
void ex_eval_progress_update(ex_eval_progress *p, int64_t done, double loss, int64_t tokens);
void ex_eval_progress_close(ex_eval_progress *p);

#endif
