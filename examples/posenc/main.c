/* posenc: every task x positional scheme x seed of docs/posenc-benchmark.md (the spec), trained
 * and evaluated as it says, then tables, CSV and plots (posenc.h). This file is the command line
 * and the scheduling: runs are independent, so several run at once, each in its own worker process
 * with its own kernel threads. A run's numbers depend only on (task, scheme, seed, steps), never on
 * which worker ran it or how many threads it had.
 *
 * Workers are forked before the parent runs any kernel, so no OpenMP state crosses a fork. Each
 * worker takes run numbers from one shared pipe (4-byte writes and reads are atomic) and answers on
 * its own pipe: "started", progress every few steps, then the whole result.
 *
 * A first SIGINT (Ctrl-C) or SIGTERM stops the comparison after the runs under way: no new run
 * starts, each worker finishes its run (a run takes seconds; half a run has no result to report)
 * and the report is written for the runs that finished. The parent passes the stop on to the
 * workers as SIGUSR1, since a `kill` reaches only the parent. A second signal ends every process at
 * once. results.csv, length.csv and curves.csv are rewritten after every finished run, so even
 * then they hold what finished. */
#include "cli.h"
#include "gpt_opts.h" /* ex_precision_from, ex_precision_banner */
#include "output.h"
#include "posenc.h"
#include "progress.h"

#include "minigrad/plugin.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum { MAX_RUNS = 4096, MAX_SEEDS = 64 };

static const char *prog = "posenc";

/* ---- options ---- */

typedef struct {
    const char *tasks, *schemes, *seeds, *lengths, *out, *plugin_path, *precision;
    int64_t steps, batch, eval_every, threads, jobs, eval_n;
    bool list;
} options;

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
    fprintf(stderr, "%s: ", prog);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    return 2;
}

/* Comma-separated non-negative integers in [lo, hi] into v (at most max). "" gives none. */
static bool parse_ints(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *v, int max,
                       int *n) {
    *n = 0;
    for (const char *p = s; *p;) {
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (end == p || errno || x < lo || x > hi || (*end && *end != ',') || *n == max) {
            fprintf(stderr,
                    "%s: --%s '%s': expected a comma-separated list of at most %d integers in "
                    "%lld..%lld\n",
                    prog, opt, s, max, (long long)lo, (long long)hi);
            return false;
        }
        for (int k = 0; k < *n; k++)
            if (v[k] == x) {
                fprintf(stderr, "%s: --%s '%s': %lld is listed twice\n", prog, opt, s, x);
                return false;
            }
        v[(*n)++] = x;
        p = *end ? end + 1 : end;
        if (*end && !*p) { /* trailing comma */
            fprintf(stderr, "%s: --%s '%s': empty entry\n", prog, opt, s);
            return false;
        }
    }
    return true;
}

static bool parse_tasks(const char *s, posenc_task *t, int *n) {
    *n = 0;
    char buf[256];
    if (strlen(s) >= sizeof buf) return usage_error("--tasks '%s' is too long", s), false;
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        posenc_task id;
        if (posenc_task_from_name(w, &id) != MG_OK) {
            fprintf(stderr, "%s: --tasks: %s\n", prog, mg_last_error());
            return false;
        }
        for (int k = 0; k < *n; k++)
            if (t[k] == id) return usage_error("--tasks: '%s' is listed twice", w), false;
        t[(*n)++] = id;
    }
    if (*n == 0)
        return usage_error("--tasks '%s': no task (valid: rev, sort, lmax, perm)", s), false;
    return true;
}

/* ---- stopping on a signal ---- */

static volatile sig_atomic_t stop_signal; /* the first SIGINT or SIGTERM (SIGUSR1 in a worker), 0: none */

static void on_stop_signal(int sig) {
    if (!stop_signal) stop_signal = sig; /* the first one decides the message and the exit status */
    /* a second Ctrl-C or SIGTERM takes the default action: the program ends at once */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
}

static const char *signal_name(int sig) {
    return sig == SIGTERM ? "SIGTERM" : "SIGINT";
}

/* ---- progress ---- */

typedef struct {
    mg_train_progress p;
    int64_t done_steps; /* of finished runs */
    int64_t *live;      /* steps done by the run each worker is on */
    int n_live;
    int runs_done, n_runs, n_failed;
    float last_loss;
    int batch;
    /* the finished runs, in the order they finished, and the report they make so far */
    posenc_result *ok;
    posenc_report *rep;
    const char *out;
    bool csv_failed; /* rewriting the CSVs failed once (said so; not again) */
    bool stop_said;  /* the stop was announced */
} tracker;

/* Says once that a signal came and what happens now. */
static void tracker_stop_note(tracker *t, int under_way) {
    if (!stop_signal || t->stop_said) return;
    t->stop_said = true;
    char then[96] = "writing the report of the finished ones";
    if (under_way > 0)
        snprintf(then, sizeof then, "finishing the %d run%s under way, then the report of the finished ones",
                 under_way, under_way == 1 ? "" : "s");
    mg_train_progress_note(&t->p, "%s: interrupted (%s): no new run starts; %s (%s stops at once)", prog,
                           signal_name(stop_signal), then,
                           stop_signal == SIGINT ? "Ctrl-C again" : "a second SIGTERM");
}

static void tracker_show(tracker *t) {
    int64_t steps = t->done_steps;
    for (int i = 0; i < t->n_live; i++) steps += t->live[i];
    double el = mg_time() - t->p.t0;
    double tps = el > 0 ? (double)steps * t->batch * POSENC_L / el : 0.0;
    mg_train_progress_step(&t->p, steps, t->last_loss, POSENC_LR, tps, NAN, NAN);
}

static void tracker_finish(tracker *t, const posenc_result *r) {
    t->done_steps += r->cfg.steps;
    t->runs_done++;
    if (r->status != MG_OK) {
        t->n_failed++;
    } else {
        t->ok[t->rep->n_runs++] = *r;
        if (posenc_write_csvs(t->out, t->rep) != MG_OK && !t->csv_failed) {
            t->csv_failed = true;
            mg_train_progress_note(&t->p, "%s: %s (tried again at the end)", prog, mg_last_error());
        }
    }
    const char *task = posenc_task_name(r->cfg.task), *sc = posenc_scheme_label(r->cfg.scheme);
    if (r->status != MG_OK)
        mg_train_progress_note(&t->p, "[%d/%d] %s/%s seed %u FAILED: %s", t->runs_done, t->n_runs, task,
                         sc, r->cfg.seed, r->error);
    else
        mg_train_progress_note(&t->p,
                         "[%d/%d] %-4s %-12s seed %u: val acc %5.1f %%, seq exact %5.1f %%, val "
                         "loss %.4f  (%.1f s)",
                         t->runs_done, t->n_runs, task, sc, r->cfg.seed, 100 * r->val.acc,
                         100 * r->val.seq, r->val.loss, r->seconds);
}

typedef struct {
    tracker *t;
    int slot;
} inproc;

static void inproc_step(void *user, int steps_done, float loss) {
    inproc *u = user;
    u->t->live[u->slot] = steps_done;
    u->t->last_loss = loss;
    tracker_stop_note(u->t, 1);
    tracker_show(u->t);
}

/* ---- workers ---- */

enum { MSG_START = 1, MSG_STEP = 2, MSG_RESULT = 3 };

typedef struct {
    int32_t type, run, step;
    float loss;
} msg;

static bool write_full(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k, n -= (size_t)k;
    }
    return true;
}

/* Bytes read (< n only at end of file or on an error). */
static size_t read_full(int fd, void *buf, size_t n) {
    char *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, p + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    return got;
}

typedef struct {
    int fd, run;
} worker_io;

static void worker_step(void *user, int steps_done, float loss) {
    worker_io *w = user;
    msg m = {MSG_STEP, w->run, steps_done, loss};
    if (!write_full(w->fd, &m, sizeof m)) _exit(3); /* the parent is gone */
}

static void worker_main(int task_fd, int out_fd, const posenc_run_cfg *cfgs, posenc_result *res) {
    posenc_cache cache;
    posenc_cache_init(&cache);
    int32_t run;
    while (!stop_signal && read_full(task_fd, &run, sizeof run) == sizeof run) {
        if (stop_signal) break; /* the stop came while the read waited: no new run */
        worker_io w = {out_fd, run};
        msg m = {MSG_START, run, 0, 0.0f};
        if (!write_full(out_fd, &m, sizeof m)) break;
        posenc_run(&cfgs[run], &cache, worker_step, &w, res);
        m.type = MSG_RESULT;
        if (!write_full(out_fd, &m, sizeof m) || !write_full(out_fd, res, sizeof *res)) break;
    }
    posenc_cache_free(&cache);
}

typedef struct {
    pid_t pid;
    int fd;
    int run; /* the run it is on, -1 when idle */
} worker;

static void fail_run(posenc_result *r, const posenc_run_cfg *cfg, const char *why) {
    memset(r, 0, sizeof *r);
    r->cfg = *cfg;
    r->status = MG_ERR_INVALID;
    snprintf(r->error, sizeof r->error, "%s", why);
}

/* Runs everything in `jobs` worker processes. Every run ends with a result (a failed one when its
 * worker died). */
static mg_status run_parallel(const posenc_run_cfg *cfgs, int n, int jobs, tracker *t,
                              posenc_result *res) {
    int tp[2];
    if (pipe(tp) != 0) return mg_set_error(MG_ERR_IO, "pipe: %s", strerror(errno));
    for (int32_t i = 0; i < n; i++)
        if (!write_full(tp[1], &i, sizeof i))
            return mg_set_error(MG_ERR_IO, "pipe: %s", strerror(errno));
    close(tp[1]); /* workers see the end of the queue once it is empty */
    worker *w = calloc((size_t)jobs, sizeof *w);
    posenc_result *scratch = malloc(sizeof *scratch);
    if (!w || !scratch) return mg_set_error(MG_ERR_NOMEM, "out of memory");
    fflush(stdout);
    fflush(stderr);
    int started = 0;
    for (int k = 0; k < jobs; k++) {
        int rp[2];
        if (pipe(rp) != 0) break;
        pid_t pid = fork();
        if (pid == 0) {
            close(rp[0]);
            for (int j = 0; j < started; j++) close(w[j].fd);
            signal(SIGPIPE, SIG_DFL);
            worker_main(tp[0], rp[1], cfgs, scratch);
            _exit(0);
        }
        close(rp[1]);
        if (pid < 0) {
            close(rp[0]);
            break;
        }
        w[started++] = (worker){pid, rp[0], -1};
    }
    signal(SIGUSR1, SIG_DFL); /* the workers' stop; in the parent a SIGUSR1 from outside ends it as before */
    close(tp[0]);
    free(scratch);
    if (started == 0) {
        free(w);
        return mg_set_error(MG_ERR_IO, "cannot start worker processes: %s", strerror(errno));
    }
    t->n_live = started;
    struct pollfd *pf = calloc((size_t)started, sizeof *pf);
    int open_fds = started;
    bool passed_on = false;
    while (open_fds > 0 && pf) {
        if (stop_signal && !passed_on) {
            passed_on = true;
            int under_way = 0;
            for (int k = 0; k < started; k++)
                if (w[k].fd >= 0) {
                    kill(w[k].pid, SIGUSR1);
                    under_way += w[k].run >= 0;
                }
            tracker_stop_note(t, under_way);
        }
        for (int k = 0; k < started; k++) pf[k] = (struct pollfd){w[k].fd, POLLIN, 0};
        if (poll(pf, (nfds_t)started, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int k = 0; k < started; k++) {
            if (w[k].fd < 0 || !(pf[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            msg m;
            bool ok = read_full(w[k].fd, &m, sizeof m) == sizeof m && m.run >= 0 && m.run < n;
            if (ok && m.type == MSG_START) {
                w[k].run = m.run;
                t->live[k] = 0;
            } else if (ok && m.type == MSG_STEP) {
                t->live[k] = m.step;
                t->last_loss = m.loss;
                tracker_show(t);
            } else if (ok && m.type == MSG_RESULT &&
                       read_full(w[k].fd, &res[m.run], sizeof res[m.run]) == sizeof res[m.run]) {
                t->live[k] = 0;
                w[k].run = -1;
                tracker_finish(t, &res[m.run]);
                tracker_show(t);
            } else { /* end of file: the worker is done, or died */
                int status = 0;
                close(w[k].fd);
                w[k].fd = -1;
                open_fds--;
                waitpid(w[k].pid, &status, 0);
                if (w[k].run >= 0) {
                    char why[128];
                    if (WIFSIGNALED(status))
                        snprintf(why, sizeof why, "its worker process died of signal %d (%s)",
                                 WTERMSIG(status), strsignal(WTERMSIG(status)));
                    else
                        snprintf(why, sizeof why, "its worker process stopped (exit status %d)",
                                 WEXITSTATUS(status));
                    fail_run(&res[w[k].run], &cfgs[w[k].run], why);
                    t->live[k] = 0;
                    tracker_finish(t, &res[w[k].run]);
                    w[k].run = -1;
                }
            }
        }
    }
    free(pf);
    free(w);
    return MG_OK;
}

/* ---- main ---- */

static void print_catalog(const posenc_catalog *c) {
    printf("positional schemes (spec name, registry name, origin):\n");
    for (int i = 0; i < c->n; i++)
        printf("  %-12s %-20s %s\n", c->s[i].label, c->s[i].name, c->s[i].origin);
    printf("plugin directories searched: %s\n", c->dirs[0] ? c->dirs : "(none)");
    if (c->skipped[0]) printf("shared objects there that did not load:\n%s", c->skipped);
    if (c->shadowed[0])
        printf("shadowed by a file of the same name found earlier (not loaded):\n%s", c->shadowed);
}

/* The folders of --plugin-path exist: the loader skips a missing one quietly (as it must for
 * MINIGRAD_PLUGIN_PATH), but one named on the command line is a mistake to report, not a folder
 * that happens to hold no plugins. For one entry: whether it is a folder, else says why not as
 * "posenc: ..." (posenc_each_dir stops at the first). */
static bool plugin_dir_exists(const char *dir, void *user) {
    (void)user;
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        if (errno == ENOENT)
            fprintf(stderr, "%s: --plugin-path: directory %s does not exist\n", prog, dir);
        else
            fprintf(stderr, "%s: --plugin-path: %s: %s\n", prog, dir, strerror(errno));
        return false;
    }
    if (!S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "%s: --plugin-path: %s is not a directory\n", prog, dir);
        return false;
    }
    return true;
}

int main(int argc, char **argv) {
    ex_stdout_begin();
    options o = {.tasks = "rev,sort,lmax,perm",
                 .schemes = "all",
                 .seeds = "0,1,2",
                 .lengths = "48,64",
                 .out = "posenc-results",
                 .plugin_path = NULL,
                 .steps = POSENC_STEPS,
                 .batch = POSENC_BATCH,
                 .eval_every = POSENC_EVAL_EVERY,
                 .threads = 0,
                 .jobs = 0,
                 .eval_n = 0,
                 .list = false};
    const ex_opt opts[] = {
        EX_STR_OPT("tasks", &o.tasks, "comma-separated tasks: rev, sort, lmax, perm"),
        EX_STR_OPT("schemes", &o.schemes,
                   "comma-separated positional schemes (none, sin, learned, learned_sin, rope, alibi, t5_bias, "
                   "registry spellings such "
                   "as sinusoidal, or a plugin's), or all: every scheme registered or found as a plugin"),
        EX_STR_OPT("seeds", &o.seeds, "comma-separated training seeds (model init and minibatch stream)"),
        EX_INT_OPT("steps", &o.steps, 1, 1000000, "Adam steps of 32 sequences per run"),
        EX_INT_OPT("batch", &o.batch, 1, 4096, "sequences per step"),
        EX_INT_OPT("eval-every", &o.eval_every, 1, 1000000, "validation every N steps (the learning curve; also at the log-spaced steps 1, 2, 3, 4, 6, 8, 11, ... below N)"),
        EX_STR_OPT("lengths", &o.lengths, "longer lengths to evaluate trained models at (\"\" for none)"),
        EX_INT_OPT("threads", &o.threads, 0, EX_MAX_THREADS, "threads in all (0: every core)"),
        EX_INT_OPT("jobs", &o.jobs, 0, EX_MAX_THREADS,
                   "runs at the same time, each with threads/jobs threads (0: as many as threads)"),
        EX_STR_OPT("out", &o.out, "directory for results.csv, results.md and the PNGs"),
        EX_STR_OPT("plugin-path", &o.plugin_path,
                   "':'-separated plugin directories searched instead of the installed (or build tree's) "
                   "one and this program's (MINIGRAD_PLUGIN_PATH is searched first either way)"),
        EX_INT_OPT("eval-n", &o.eval_n, 0, POSENC_N_TRAIN,
                   "evaluate on the first N sequences of each set only (0: all, as the spec says)"),
        EX_STR_OPT("precision", &o.precision, "fp32 (default) or bf16: the products in bfloat16 (docs/bf16.md)"),
        EX_FLAG_OPT("list-schemes", &o.list, "list the positional schemes found and where they come from, then exit"),
    };
    ex_parse_result pr = ex_parse(prog, "[options]", argc - 1, argv + 1, opts,
                                  (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL);
    if (pr != EX_PARSE_OK) return pr == EX_PARSE_HELP ? 0 : 2;
    mg_precision precision;
    if (!ex_precision_from(prog, o.precision, &precision)) return 2;
    if (o.plugin_path && !posenc_each_dir(o.plugin_path, plugin_dir_exists, NULL)) return 2;

    posenc_catalog catalog, *cat = &catalog;
    if (posenc_catalog_discover(cat, o.plugin_path) != MG_OK) {
        ex_fail(prog);
        return 1;
    }
    if (o.list) {
        print_catalog(cat);
        return ex_exit_status(prog, 0);
    }

    /* what to run */
    posenc_task tasks[POSENC_N_TASKS];
    int n_tasks, n_seeds, n_lengths, scheme_idx[POSENC_MAX_SCHEMES], n_schemes;
    int64_t seeds[MAX_SEEDS], lengths[POSENC_MAX_LENGTHS];
    if (!parse_tasks(o.tasks, tasks, &n_tasks)) return 2;
    if (!parse_ints("seeds", o.seeds, 0, UINT32_MAX, seeds, MAX_SEEDS, &n_seeds)) return 2;
    if (n_seeds == 0) return usage_error("--seeds '%s': no seed", o.seeds);
    if (!parse_ints("lengths", o.lengths, 1, POSENC_MAX_EVAL_LEN, lengths, POSENC_MAX_LENGTHS,
                    &n_lengths))
        return 2;
    /* each numeric option is within its range (ex_parse): what is left is how they combine */
    if (o.steps / o.eval_every + 2 + posenc_curve_early_count((int)o.eval_every) > POSENC_MAX_CURVE)
        return usage_error("--eval-every is too small for --steps: at most %d curve points", POSENC_MAX_CURVE);
    char notes[2048];
    if (posenc_catalog_select(cat, o.schemes, scheme_idx, POSENC_MAX_SCHEMES, &n_schemes, notes,
                              sizeof notes) != MG_OK) {
        ex_fail(prog);
        return 2;
    }
    if (notes[0]) fprintf(stderr, "%s", notes);
    int n_runs = n_tasks * n_schemes * n_seeds;
    if (n_runs > MAX_RUNS) return usage_error("too many runs (at most %d)", MAX_RUNS);
    if (ex_mkdirs(o.out) != MG_OK) {
        ex_fail(prog);
        return 1;
    }

    int n_failed = 0;
    posenc_run_cfg *cfgs = calloc((size_t)n_runs, sizeof *cfgs);
    posenc_result *res = calloc((size_t)n_runs, sizeof *res);
    posenc_result *ok = calloc((size_t)n_runs, sizeof *ok); /* the finished runs, packed */
    posenc_scheme *schemes = calloc((size_t)n_schemes, sizeof *schemes);
    int64_t *live = calloc(EX_MAX_THREADS, sizeof *live); /* one per job at most */
    int stopped_by = 0;
    mg_status st = cfgs && res && ok && schemes && live
                       ? MG_OK
                       : mg_set_error(MG_ERR_NOMEM, "out of memory");
    if (st != MG_OK) goto done;
    int threads = o.threads > 0 ? (int)o.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    int jobs = o.jobs > 0 ? (int)o.jobs : threads;
    if (jobs > n_runs) jobs = n_runs;
    int per_run = threads / jobs > 0 ? threads / jobs : 1;
    int r = 0;
    for (int s = 0; s < n_schemes; s++) schemes[s] = cat->s[scheme_idx[s]];
    for (int t = 0; t < n_tasks; t++)
        for (int s = 0; s < n_schemes; s++)
            for (int k = 0; k < n_seeds; k++) {
                posenc_run_cfg *c = &cfgs[r++];
                *c = posenc_run_defaults();
                c->task = tasks[t];
                snprintf(c->scheme, sizeof c->scheme, "%s", schemes[s].name);
                c->seed = (uint32_t)seeds[k];
                c->steps = (int)o.steps, c->batch = (int)o.batch, c->eval_every = (int)o.eval_every,
                c->eval_n = (int)o.eval_n;
                c->n_lengths = n_lengths;
                for (int i = 0; i < n_lengths; i++) c->lengths[i] = (int)lengths[i];
                c->threads = per_run;
                c->precision = precision;
            }
    printf("%s: %d task%s x %d scheme%s x %d seed%s = %d runs of %lld steps of %lld, %d at a time "
           "with %d thread%s each%s -> %s/\n",
           prog, n_tasks, n_tasks == 1 ? "" : "s", n_schemes, n_schemes == 1 ? "" : "s", n_seeds,
           n_seeds == 1 ? "" : "s", n_runs, (long long)o.steps, (long long)o.batch, jobs, per_run,
           per_run == 1 ? "" : "s", ex_precision_banner(prog, precision == MG_PRECISION_BF16), o.out);
    fflush(stdout);

    char command[4096] = "posenc";
    for (int i = 1; i < argc; i++)
        snprintf(command + strlen(command), sizeof command - strlen(command), " %s", argv[i]);
    posenc_report rep = {.runs = ok,
                         .n_runs = 0,
                         .tasks = tasks,
                         .n_tasks = n_tasks,
                         .schemes = schemes,
                         .n_schemes = n_schemes,
                         .command = command,
                         .jobs = jobs,
                         .threads_per_run = per_run};
    tracker t = {.live = live,
                 .n_runs = n_runs,
                 .n_live = 1,
                 .last_loss = NAN,
                 .batch = (int)o.batch,
                 .ok = ok,
                 .rep = &rep,
                 .out = o.out};
    /* workers inherit these; SIGUSR1 is how the parent stops them (the parent gives it back to its
     * default once they are started). A signal the program was started with ignored (a job started
     * in the background by a shell without job control ignores SIGINT) stays ignored. */
    if (jobs > 1) signal(SIGUSR1, on_stop_signal);
    if (signal(SIGINT, on_stop_signal) == SIG_IGN) signal(SIGINT, SIG_IGN);
    if (signal(SIGTERM, on_stop_signal) == SIG_IGN) signal(SIGTERM, SIG_IGN);
    mg_train_progress_open(&t.p, prog, (int64_t)n_runs * o.steps, 0, NULL, false);
    double t0 = mg_time();
    if (jobs == 1) {
        posenc_cache cache;
        posenc_cache_init(&cache);
        inproc u = {&t, 0};
        for (int i = 0; i < n_runs && !stop_signal; i++) {
            posenc_run(&cfgs[i], &cache, inproc_step, &u, &res[i]);
            live[0] = 0;
            tracker_finish(&t, &res[i]);
            tracker_stop_note(&t, 0);
        }
        posenc_cache_free(&cache);
    } else {
        st = run_parallel(cfgs, n_runs, jobs, &t, res);
    }
    mg_train_progress_close(&t.p);
    stopped_by = stop_signal;
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    double total = mg_time() - t0;
    if (st != MG_OK) goto done;
    n_failed = t.n_failed;

    /* report the runs that finished */
    rep.total_seconds = total;
    if (rep.n_runs > 0) {
        posenc_print_tables(stdout, &rep, false);
        st = posenc_write_report(o.out, &rep);
        if (st != MG_OK)
            mg_wrap_error(st, "writing the report");
        else
            printf("\nwrote %s/results.md, results.csv, length.csv, curves.csv and the PNGs (%.1f s "
                   "in all%s)\n",
                   o.out, total, stopped_by ? "; the finished runs only" : "");
    }
    if (n_failed)
        fprintf(stderr, "%s: %d of %d runs failed (see above); the report holds the others\n", prog,
                n_failed, n_runs);
    if (stopped_by) {
        fflush(stdout);
        char done_list[2048] = "";
        size_t len = 0;
        for (int i = 0; i < n_runs && len < sizeof done_list; i++) /* in the order of the tables */
            if (res[i].status == MG_OK && res[i].cfg.steps > 0)
                len += (size_t)snprintf(done_list + len, sizeof done_list - len, "%s%s/%s seed %u",
                                        len ? ", " : "", posenc_task_name(res[i].cfg.task),
                                        posenc_scheme_label(res[i].cfg.scheme), res[i].cfg.seed);
        if (len >= sizeof done_list) snprintf(done_list + sizeof done_list - 5, 5, " ...");
        if (rep.n_runs == 0)
            fprintf(stderr, "%s: interrupted (%s) before any run finished: nothing written to %s/\n",
                    prog, signal_name(stopped_by), o.out);
        else
            fprintf(stderr,
                    "%s: interrupted (%s): %d of %d runs finished (%s); their results are in %s/%s; "
                    "the other %d did not run\n",
                    prog, signal_name(stopped_by), rep.n_runs, n_runs, done_list, o.out,
                    st == MG_OK ? "" : " (CSV files only: the report failed, below)",
                    n_runs - t.runs_done);
    }
done:
    if (st != MG_OK) ex_fail(prog);
    free(cfgs);
    free(res);
    free(ok);
    free(schemes);
    free(live);
    if (stopped_by && st == MG_OK) return ex_exit_status(prog, 128 + stopped_by);
    return ex_exit_status(prog, st != MG_OK || n_failed ? 1 : 0);
}
