/* Formatting for the programs' summaries. */
#include "progress.h"

#include <math.h>
#include <stdlib.h>
#include <sys/resource.h>


char *ex_fmt_bytes(double b, char *buf, size_t n) {
    if (b >= 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024)
        snprintf(buf, n, "%.1f MiB", b / (1024.0 * 1024));
    else
        snprintf(buf, n, "%.1f KiB", b / 1024.0);
    return buf;
}

size_t ex_peak_rss(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024; /* KiB on Linux */
}

/* ---- the progress of an evaluation ---- */
void ex_eval_progress_open(ex_eval_progress *p, const char *prog, int64_t total) {
    mg_train_progress_open(&p->p, prog, total, 0, NULL, false);
    p->total = total;
    p->next_plain = total / 10 > 0 ? total / 10 : 1;
}

void ex_eval_progress_update(ex_eval_progress *p, int64_t done, double loss, int64_t tokens) {
    double elapsed = mg_time() - p->p.t0;
    if (p->p.tty) {
        mg_train_progress_step(&p->p, done, (float)loss, 0.0f, elapsed > 0 ? (double)tokens / elapsed : 0.0, NAN,
                               NAN);
        return;
    }
    if (done < p->next_plain || done >= p->total) return; /* the result line follows the last */
    while (p->next_plain <= done) p->next_plain += p->total / 10 > 0 ? p->total / 10 : 1;
    char e1[32], e2[32];
    double eta = elapsed / (double)done * (double)(p->total - done);
    printf("%s: %lld/%lld windows (%.0f%%), loss so far %.4f, %s elapsed, ETA %s\n", p->p.prog, (long long)done,
           (long long)p->total, 100.0 * (double)done / (double)p->total, loss,
           mg_train_fmt_duration(elapsed, e1, sizeof e1), mg_train_fmt_duration(eta, e2, sizeof e2));
    fflush(stdout);
}

void ex_eval_progress_close(ex_eval_progress *p) {
    mg_train_progress_close(&p->p);
}
