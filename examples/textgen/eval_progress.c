/* The progress of an evaluation (textgen.h: tg_eval_progress). */
#include "textgen.h"

#include <math.h>
#include <stdio.h>

void tg_eval_progress_open(tg_eval_progress *p, const char *prog, int64_t total) {
    mg_train_progress_open(&p->p, prog, total, 0, NULL, false);
    p->total = total;
    p->next_plain = total / 10 > 0 ? total / 10 : 1;
}

void tg_eval_progress_update(tg_eval_progress *p, int64_t done, double loss, int64_t tokens) {
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

void tg_eval_progress_close(tg_eval_progress *p) {
    mg_train_progress_close(&p->p);
}
