/* The progress line and the JSON-lines log. */
#include "minigrad/train.h"

#include "minigrad/file.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Off a terminal a line is printed every 1/50 of the run, for the first step, and whenever this
 * many seconds have passed without one (a long run's 1/50 can be many minutes). */
#define PLAIN_MAX_QUIET_S 30.0

char *mg_train_fmt_duration(double s, char *buf, size_t n) {
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
    p->t0 = p->last_print = mg_time();
    p->last_val = NAN;
    int64_t left = total - first_step;
    p->plain_every = left > 50 ? left / 50 : 1;
    if (log_path) {
        p->log_name = strdup(log_path);
        if (!p->log_name) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", log_path);
        p->log = fopen(log_path, append ? "a" : "w");
        if (!p->log) {
            mg_status st = mg_set_error(MG_ERR_IO, "%s: cannot open the log file: %s", log_path, strerror(errno));
            free(p->log_name);
            p->log_name = NULL;
            return st;
        }
    }
    return MG_OK;
}

/* The log's first write error, again for every later call: a log with a hole is no log. */
static mg_status log_failed(const mg_train_progress *p) {
    return mg_set_error(MG_ERR_IO, "%s: cannot write the log file: %s", p->log_name, strerror(p->log_err));
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

mg_status mg_train_progress_step(mg_train_progress *p, int64_t step, float loss, float lr, double speed,
                                 float gnorm, float val) {
    double now = mg_time(), elapsed = now - p->t0;
    if (!isnan(val)) p->last_val = val;
    if (p->log && p->log_err) return log_failed(p);
    if (p->log) {
        /* One line, written at once with write(2) so that stdio keeps nothing back: on a full disk
         * the step that could not be logged is the step that fails, and what the write got in of
         * the line is cut off again, so the log holds whole lines only. */
        char line[2048];
        size_t n = 0;
        n += (size_t)snprintf(line + n, sizeof line - n, "{\"step\": %lld, \"loss\": %.6g, \"lr\": %.6g, \"%s%s\": %.*f",
                              (long long)step, (double)loss, (double)lr,
                              p->per_step ? "steps" : p->speed_unit ? p->speed_unit : "tokens", "_per_s",
                              p->per_step ? 4 : 1, speed);
        if (!isnan(gnorm) && n < sizeof line)
            n += (size_t)snprintf(line + n, sizeof line - n, ", \"grad_norm\": %.6g", (double)gnorm);
        if (n < sizeof line) n += (size_t)snprintf(line + n, sizeof line - n, ", \"elapsed_s\": %.3f", elapsed);
        if (!isnan(val) && n < sizeof line)
            n += (size_t)snprintf(line + n, sizeof line - n, ", \"val_loss\": %.6g", (double)val);
        if (p->ranks > 1 && n < sizeof line)
            n += (size_t)snprintf(line + n, sizeof line - n, ", \"ranks\": %d, \"comm_s\": %.6f, \"comm_busy_s\": %.6f",
                                  p->ranks, p->comm_s, p->comm_busy_s);
        if (n < sizeof line) n += (size_t)snprintf(line + n, sizeof line - n, "}\n");
        if (n >= sizeof line) { /* a line of 2 KiB holds any values: only a broken printf gets here */
            p->log_err = EOVERFLOW;
            return log_failed(p);
        }
        int fd = fileno(p->log);
        off_t before = lseek(fd, 0, SEEK_END);
        for (size_t done = 0; done < n;) {
            ssize_t k = write(fd, line + done, n - done);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) {
                p->log_err = k < 0 ? errno : EIO;
                if (before >= 0 && done > 0) {
                    int rc = ftruncate(fd, before);
                    (void)rc; /* should even that fail, the error below still says the log is cut */
                }
                return log_failed(p);
            }
            done += (size_t)k;
        }
    }
    if (p->quiet) return MG_OK;
    int64_t done = step - p->first_step;
    double eta = done > 0 ? elapsed / (double)done * (double)(p->total - step) : 0;
    char e1[32], e2[32], vbuf[32] = "", sbuf[40];
    if (!isnan(p->last_val)) snprintf(vbuf, sizeof vbuf, "  val %.4f", (double)p->last_val);
    if (p->per_step)
        snprintf(sbuf, sizeof sbuf, "%.2f steps/s", speed);
    else
        snprintf(sbuf, sizeof sbuf, "%.0f %s/s", speed, p->speed_unit ? p->speed_unit : "tok");
    if (p->tty) {
        if (now - p->last_print < 0.1 && step != p->total && isnan(val)) return MG_OK;
        p->last_print = now;
        int w = (int)(24.0 * (double)step / (double)(p->total ? p->total : 1));
        char bar[32];
        for (int i = 0; i < 24; i++) bar[i] = i < w ? '#' : '.';
        bar[24] = 0;
        printf("\r\033[K%s [%s] %lld/%lld  loss %.4f%s  %s  %s elapsed, ETA %s", p->prog, bar, (long long)step,
               (long long)p->total, (double)loss, vbuf, sbuf, mg_train_fmt_duration(elapsed, e1, sizeof e1),
               mg_train_fmt_duration(eta, e2, sizeof e2));
        p->line_open = true;
        fflush(stdout);
    } else if (!isnan(val) || (step - p->first_step) % p->plain_every == 0 || step == p->total ||
               step == p->first_step + 1 || now - p->last_print >= PLAIN_MAX_QUIET_S) {
        p->last_print = now;
        printf("%s step %lld/%lld  loss %.4f%s  lr %.2e  %s  elapsed %s  ETA %s\n", p->prog, (long long)step,
               (long long)p->total, (double)loss, vbuf, (double)lr, sbuf, mg_train_fmt_duration(elapsed, e1, sizeof e1),
               mg_train_fmt_duration(eta, e2, sizeof e2));
        fflush(stdout);
    }
    return MG_OK;
}

mg_status mg_train_progress_close(mg_train_progress *p) {
    if (p->tty && p->line_open && !p->quiet) printf("\n");
    p->line_open = false;
    mg_status st = MG_OK;
    if (p->log && p->log_err) {
        fclose(p->log);
        st = log_failed(p);
    } else if (p->log) {
        st = mg_file_close_checked(p->log, p->log_name);
    }
    p->log = NULL;
    free(p->log_name);
    p->log_name = NULL;
    return st;
}
