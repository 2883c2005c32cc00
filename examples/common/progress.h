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

#endif
