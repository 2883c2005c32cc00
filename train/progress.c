/* The progress line and the JSON-lines log. */
#include "minigrad/train.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* "1h02m", "3m12s", "45s" */
static char *fmt_duration(double s, char *buf, size_t n) {
    if (!isfinite(s) || s < 0) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ldh%02ldm", t / 3600, (t / 60) % 60);
    else if (t >= 60)
        snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, n, "%lds", t);
    return buf;
}

mg_status mg_train_progress_open(mg_train_progress *p, const char *prog, int64_t total, int64_t first_step,
                                 const char *log_path, bool append) {
    memset(p, 0, sizeof *p);
    p->prog = prog ? prog : "train";
    p->tty = isatty(STDOUT_FILENO) && !getenv("MINIGRAD_NO_TTY");
    p->total = total;
    p->first_step = first_step;
    p->t0 = mg_time();
    p->last_val = NAN;
    int64_t left = total - first_step;
    p->plain_every = left > 50 ? left / 50 : 1;
    if (log_path) {
        p->log = fopen(log_path, append ? "a" : "w");
        if (!p->log) return mg_set_error(MG_ERR_IO, "%s: cannot open the log file: %s", log_path, strerror(errno));
    }
    return MG_OK;
}

static void clear_line(mg_train_progress *p) {
    if (p->tty && p->line_open) {
        printf("\r\033[K");
        p->line_open = false;
    }
}

void mg_train_progress_note(mg_train_progress *p, const char *fmt, ...) {
    if (p->quiet) return;
    clear_line(p);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

void mg_train_progress_step(mg_train_progress *p, int64_t step, float loss, float lr, double speed, float gnorm,
                            float val) {
    double now = mg_time(), elapsed = now - p->t0;
    if (!isnan(val)) p->last_val = val;
    if (p->log) {
        fprintf(p->log, "{\"step\": %lld, \"loss\": %.6g, \"lr\": %.6g, \"%s\": %.*f", (long long)step, (double)loss,
                (double)lr, p->per_step ? "steps_per_s" : "tokens_per_s", p->per_step ? 4 : 1, speed);
        if (!isnan(gnorm)) fprintf(p->log, ", \"grad_norm\": %.6g", (double)gnorm);
        fprintf(p->log, ", \"elapsed_s\": %.3f", elapsed);
        if (!isnan(val)) fprintf(p->log, ", \"val_loss\": %.6g", (double)val);
        fprintf(p->log, "}\n");
        fflush(p->log);
    }
    if (p->quiet) return;
    int64_t done = step - p->first_step;
    double eta = done > 0 ? elapsed / (double)done * (double)(p->total - step) : 0;
    char e1[32], e2[32], vbuf[32] = "", sbuf[40];
    if (!isnan(p->last_val)) snprintf(vbuf, sizeof vbuf, "  val %.4f", (double)p->last_val);
    if (p->per_step)
        snprintf(sbuf, sizeof sbuf, "%.2f steps/s", speed);
    else
        snprintf(sbuf, sizeof sbuf, "%.0f tok/s", speed);
    if (p->tty) {
        if (now - p->last_print < 0.1 && step != p->total && isnan(val)) return;
        p->last_print = now;
        int w = (int)(24.0 * (double)step / (double)(p->total ? p->total : 1));
        char bar[32];
        for (int i = 0; i < 24; i++) bar[i] = i < w ? '#' : '.';
        bar[24] = 0;
        printf("\r\033[K%s [%s] %lld/%lld  loss %.4f%s  %s  %s elapsed, ETA %s", p->prog, bar, (long long)step,
               (long long)p->total, (double)loss, vbuf, sbuf, fmt_duration(elapsed, e1, sizeof e1),
               fmt_duration(eta, e2, sizeof e2));
        p->line_open = true;
        fflush(stdout);
    } else if (!isnan(val) || (step - p->first_step) % p->plain_every == 0 || step == p->total) {
        printf("%s step %lld/%lld  loss %.4f%s  lr %.2e  %s  elapsed %s  ETA %s\n", p->prog, (long long)step,
               (long long)p->total, (double)loss, vbuf, (double)lr, sbuf, fmt_duration(elapsed, e1, sizeof e1),
               fmt_duration(eta, e2, sizeof e2));
        fflush(stdout);
    }
}

void mg_train_progress_close(mg_train_progress *p) {
    if (p->tty && p->line_open && !p->quiet) printf("\n");
    p->line_open = false;
    if (p->log) fclose(p->log);
    p->log = NULL;
}
