/* Progress of a long run: the library's reporter (minigrad/train.h: a live line on a terminal,
 * plain lines otherwise, and the JSON-lines log) under the examples' names, and the formatting
 * the programs' summaries share. */
#ifndef EX_PROGRESS_H
#define EX_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "minigrad/base.h"
#include "minigrad/train.h"

typedef mg_train_progress ex_progress;
#define ex_progress_open mg_train_progress_open
#define ex_progress_step mg_train_progress_step
#define ex_progress_note mg_train_progress_note
#define ex_progress_close mg_train_progress_close

/* "1h02m", "3m12s", "45s" */
char *ex_fmt_duration(double seconds, char *buf, size_t n);

/* "512.0 KiB", "12.3 MiB", "1.50 GiB" */
char *ex_fmt_bytes(double bytes, char *buf, size_t n);

/* Peak resident memory of the process so far, in bytes (0 when unknown). */
size_t ex_peak_rss(void);

#endif
