/* bench_train: GPT training and generation speed of minigrad, side by side with PyTorch.
 *
 * For each configuration (textgen, music) and thread count (1 and all), it starts a minigrad
 * worker (this program with --worker) and, where /usr/bin/python3 can import torch, a PyTorch
 * worker (bench/pytorch_reference.py --worker), warms both up, then alternates them round by
 * round so that noise from the rest of the machine falls on both alike, and reports medians:
 * ms/step, tokens/s, model FLOPs utilisation against the FMA peak it measures itself, peak RSS;
 * then the same for greedy generation at batch 1 (minigrad with its KV cache against PyTorch
 * re-running the context, and the other two combinations for information). See bench/README.md.
 */
#include "bench_train.h"
#include "../common/bench_util.h"

#include "minigrad/base.h"
#include "minigrad/kernels.h"
#include "minigrad/tensor.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef BENCH_PYTORCH_SCRIPT
#define BENCH_PYTORCH_SCRIPT "bench/pytorch_reference.py"
#endif

typedef struct options {
    bool quick, pytorch, bf16, no_gen;
    const char *json, *png, *python, *script, *blas_core, *wait_policy, *malloc_mode, *report;
    bool configs[8];
    int threads[8], n_threads;
    int steps, warmup, gen_runs, gen_tokens; /* 0: per configuration defaults */
    uint64_t seed;
} options;

/* One implementation's worker and the samples it has given. */
typedef struct side {
    bt_proc p;
    bool up;
    double *s;
    int n, cap;
} side;

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench_train [--quick] [--configs textgen,music] [--threads 1,all] [--json FILE] [--png FILE]\n"
            "                   [--steps N] [--warmup N] [--gen-runs N] [--gen-tokens N] [--seed N]\n"
            "                   [--no-pytorch] [--python PATH] [--pytorch-script PATH] [--openblas-core NAME|auto]\n"
            "                   [--pytorch-wait-policy passive|active|env] [--pytorch-malloc retain|default]\n"
            "                   [--bf16] [--no-gen]\n"
            "       bench_train --report RUN.json [--json FILE] [--png FILE]\n"
            "       bench_train --data-parallel [CONFIG [RANKS [STEPS [ROUNDS]]]]   (textgen 2 12 3; needs mpirun)\n"
            "Measures minigrad's GPT training step and KV-cache generation against PyTorch (bench/README.md).\n"
            "  --quick         fewer steps and runs (a minute or two instead of about 15, 20 with --bf16)\n"
            "  --configs LIST  comma-separated configurations (default textgen,music: the example models' sizes).\n"
            "                  tiny and tiny-long are for quick checks of the tool itself (seconds; never run by\n"
            "                  default, no targets): tiny a 2-layer GPT of width 32 over 24 positions, tiny-long\n"
            "                  1 layer of width 272 over 1024 positions, large enough (T x C) to take music's\n"
            "                  schedule of rounds\n"
            "  --threads LIST  thread counts to measure, comma-separated; 'all' is every core (default 1,all)\n"
            "  --json FILE     write every measurement as a JSON line, with the CPU it ran on\n"
            "  --png FILE      draw the ratios as a bar chart\n"
            "  --seed N        the models' initialisation and data seed (default 1234)\n"
            "  --steps N       timed training steps per implementation (default 12 textgen; music 3\n"
            "                  PyTorch, 9 minigrad)\n"
            "  --warmup N      untimed steps first (default 2)\n"
            "  --gen-runs N    rounds of timed generation runs (default 9 textgen, 2 music; the cheap cached\n"
            "                  runs are timed 3 times a round for music)\n"
            "  --gen-tokens N  new tokens per generation run (default: fill textgen's context, 112; music 512)\n"
            "  --bf16          training also in bf16: minigrad --precision bf16 and PyTorch bf16 autocast,\n"
            "                  alternating with the float32 runs, with the speed ratios of one run; and\n"
            "                  minigrad's cached generation with bf16 weights (impl minigrad-bf16)\n"
            "  --no-gen        training only, no generation runs\n"
            "  --report FILE   measure nothing: print the table and targets of an earlier run's --json file\n"
            "                  (and redraw its --png)\n"
            "  --no-pytorch    minigrad only (PyTorch is used when `PYTHON -c 'import torch'` works)\n"            "  --python PATH   the Python that runs PyTorch (default /usr/bin/python3)\n"
            "  --pytorch-script PATH  PyTorch's side of the benchmark (default " BENCH_PYTORCH_SCRIPT ")\n"
            "  --openblas-core OPENBLAS_CORETYPE for PyTorch's BLAS (default: SkylakeX on AVX-512 CPUs)\n"
            "  --pytorch-wait-policy  OMP_WAIT_POLICY of PyTorch's workers above 1 thread (default passive)\n"
            "  --pytorch-malloc  retain (default): PyTorch's workers start with glibc keeping freed memory, so its\n"
            "                  large per-step temporaries are not faulted in again every step (its peak RSS then\n"
            "                  counts what it keeps); default: glibc's own settings\n");
}

static bool push(side *sd, double v) {
    if (sd->n == sd->cap) {
        const int cap = sd->cap ? 2 * sd->cap : 16;
        double *s = realloc(sd->s, (size_t)cap * sizeof *s);
        if (!s) return false;
        sd->s = s, sd->cap = cap;
    }
    sd->s[sd->n++] = v;
    return true;
}


/* Gives OpenMP and OpenBLAS threads of the worker that just ran time to stop spinning, so that
 * they do not steal cycles from the other one's first step. */
static void settle(void) { usleep(200 * 1000); }

/* One more short look at the FMA peak between rounds: on a shared machine a quiet moment may come
 * at any time, and the best of all looks is the machine's peak. */
static void sample_peak(bt_report *rep, int threads) {
    for (int t = 0; t < rep->n_threads; t++)
        if (rep->threads[t] == threads) {
            const double p = bt_measure_peak(threads, 1, 0.1);
            rep->peak[t] = p > rep->peak[t] ? p : rep->peak[t];
            rep->peak_samples++;
        }
}

static bool start_worker(side *sd, const options *o, int impl, const char *mode, const bt_config *c, int threads) {
    char name[64], thr[16], seed[32];
    snprintf(name, sizeof name, "%s %s %s %dt", bt_impl_name[impl], mode, c->name, threads);
    char *prec = impl >= BT_MINIGRAD_BF16 ? "bf16" : "fp32";
    snprintf(thr, sizeof thr, "%d", threads);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    memset(sd, 0, sizeof *sd);
    if (impl % 2 == BT_MINIGRAD) {
        char *argv[] = {"/proc/self/exe", "--worker", (char *)mode, "--config", (char *)c->name,
                        "--threads", thr, "--seed", seed, "--precision", prec, NULL};
        sd->up = bt_proc_start(&sd->p, name, argv);
    } else {
        char *argv[] = {(char *)o->python, (char *)o->script, "--worker", (char *)mode, "--config",
                        (char *)c->name, "--threads", thr, "--seed", seed, "--openblas-core",
                        (char *)(o->blas_core ? o->blas_core : "default"), "--omp-wait-policy",
                        (char *)(o->wait_policy ? o->wait_policy : "passive"), "--precision", prec,
                        "--malloc", (char *)(o->malloc_mode ? o->malloc_mode : "retain"), NULL};
        sd->up = bt_proc_start(&sd->p, name, argv);
    }
    return sd->up;
}

static void stop_worker(side *sd) {
    if (sd->up) bt_proc_close(&sd->p);
    sd->up = false;
    free(sd->s);
    sd->s = NULL;
    sd->n = sd->cap = 0;
}

/* "train k": appends each step's seconds. A failed worker is shut down (the other goes on). */
static void train_round(side *sd, int k, bool timed) {
    if (!sd->up) return;
    cJSON *r = bt_proc_ask(&sd->p, "train %d", k);
    const cJSON *t = r ? cJSON_GetObjectItemCaseSensitive(r, "times") : NULL;
    if (!cJSON_IsArray(t)) {
        if (r) fprintf(stderr, "bench_train: %s worker: no step times in its answer\n", sd->p.name);
        bt_proc_close(&sd->p);
        sd->up = false;
    } else if (timed) {
        const cJSON *x;
        cJSON_ArrayForEach(x, t) if (cJSON_IsNumber(x)) push(sd, x->valuedouble);
    }
    cJSON_Delete(r);
    settle();
}

/* "gen n cache|nocache", reps times back to back; their mean seconds (NAN if the worker failed). */
static double gen_run(side *sd, int64_t n, bool cache, int reps) {
    double sum = 0.0;
    for (int k = 0; k < reps && sd->up; k++) {
        cJSON *r = bt_proc_ask(&sd->p, "gen %lld %s", (long long)n, cache ? "cache" : "nocache");
        const double s = r ? bt_json_num(r, "seconds") : NAN;
        if (!r || !isfinite(s) || bt_json_num(r, "tokens") != (double)n) {
            if (r) fprintf(stderr, "bench_train: %s worker: generation gave no time or fewer tokens\n", sd->p.name);
            bt_proc_close(&sd->p);
            sd->up = false;
        }
        sum += s;
        cJSON_Delete(r);
    }
    settle();
    return sd->up ? sum / reps : NAN;
}

/* Peak RSS and the arena from "mem" into r; then the worker is shut down. */
static void finish(side *sd, bt_result *r) {
    r->n_params = (int64_t)bt_json_num(sd->p.hello, "n_params");
    r->base_rss_mb = bt_json_num(sd->p.hello, "base_rss_mb");
    if (r->impl % 2 == BT_MINIGRAD) snprintf(r->backend, sizeof r->backend, "%s", bt_json_str(sd->p.hello, "isa", ""));
    else
        snprintf(r->backend, sizeof r->backend, "%.12s%s%.8s%s%.7s", bt_json_str(sd->p.hello, "openblas_core", ""),
                 *bt_json_str(sd->p.hello, "omp_wait_policy", "") ? "/" : "", bt_json_str(sd->p.hello, "omp_wait_policy", ""),
                 *bt_json_str(sd->p.hello, "malloc", "") ? "/" : "", bt_json_str(sd->p.hello, "malloc", ""));
    static bool warned_blas;
    if (r->impl == BT_PYTORCH && !warned_blas && !strcmp(bt_json_str(sd->p.hello, "blas", ""), "reference")) {
        warned_blas = true;
        fprintf(stderr, "warning: PyTorch's float32 products run on the reference BLAS (Debian's libblas3, "
                        "about 10x slower than OpenBLAS here): its float32 figures are not a fair peer; "
                        "install libopenblas0\n");
    }
    cJSON *m = sd->up ? bt_proc_ask(&sd->p, "mem") : NULL;
    if (m) {
        r->peak_rss_mb = bt_json_num(m, "peak_rss_mb");
        if (r->impl % 2 == BT_MINIGRAD) r->arena_peak_mb = bt_json_num(m, "arena_peak_mb"), r->state_mb = bt_json_num(m, "state_mb");
    }
    cJSON_Delete(m);
}

static void measure_train(bt_report *rep, const options *o, const bt_config *c, int threads) {
    const bool big = c->T * c->C > 256 * 1024;
    /* Two untimed steps: minigrad's arena grows during the first and is re-made as one block at
     * the next reset, whose pages the second step touches first; PyTorch's AdamW makes its
     * moments in the first. From the third step on both are in their steady state. */
    const int warm = o->warmup > 0 ? o->warmup : 2;
    const int steps = o->steps > 0 ? o->steps : o->quick ? (big ? 1 : 4) : (big ? 3 : 12);
    /* Rounds of several steps: the first step after the other implementation's ran slower (music,
     * 2 threads: 1.64-1.68 s against 1.58-1.60 for the next ones), and the median of a round of
     * three is one of the steady ones. Textgen's twelve steps are four rounds of three,
     * alternating. Music's PyTorch steps cost 10-14 s: PyTorch runs one round of three, and
     * minigrad's float32 and bf16 (2-4 s a step) two more rounds between themselves, nine steps
     * each, so that a slowdown of the machine lasting one round moves their medians, and the ratio
     * of the two precisions, less. */
    const int per_round = big ? (steps < 3 ? steps : 3) : steps >= 12 ? 3 : 2;
    const int mg_steps = o->steps > 0 || o->quick || !big ? steps : 3 * steps;
    int impls[BT_N_IMPL], want[BT_N_IMPL], n_impl = 0;
    for (int q = 0; q < BT_N_IMPL; q++)
        if ((q % 2 == BT_MINIGRAD || rep->have_pytorch) && (q < BT_MINIGRAD_BF16 || o->bf16)) {
            want[n_impl] = q % 2 == BT_MINIGRAD ? mg_steps : steps;
            impls[n_impl++] = q;
        }
    side sd[BT_N_IMPL];
    memset(sd, 0, sizeof sd);
    for (int i = 0; i < n_impl; i++) start_worker(&sd[i], o, impls[i], "train", c, threads);
    for (int i = 0; i < n_impl; i++) train_round(&sd[i], warm, false);
    /* Each round, the implementations with steps left, in turn, which goes first rotating. */
    int done[BT_N_IMPL] = {0};
    for (int round = 0;; round++) {
        int act[BT_N_IMPL], n_act = 0;
        for (int i = 0; i < n_impl; i++)
            if (done[i] < want[i]) act[n_act++] = i;
        if (!n_act) break;
        sample_peak(rep, threads);
        for (int j = 0; j < n_act; j++) {
            const int i = act[(j + round) % n_act];
            const int k = want[i] - done[i] < per_round ? want[i] - done[i] : per_round;
            train_round(&sd[i], k, true);
            done[i] += k;
        }
    }
    for (int i = 0; i < n_impl; i++) {
        bt_result *r = bt_report_add(rep);
        if (!r) break;
        r->cfg = c, r->threads = threads, r->impl = impls[i];
        if (sd[i].p.hello) finish(&sd[i], r);
        r->n = sd[i].n;
        r->seconds = bench_median(sd[i].s, sd[i].n); /* sorts: s[0] is the fastest */
        r->best_seconds = sd[i].n > 0 ? sd[i].s[0] : NAN;
        r->tokens_per_s = (double)(c->B * c->T) / r->seconds;
        r->valid = sd[i].up && sd[i].n > 0;
        stop_worker(&sd[i]);
        if (r->valid)
            printf("  %-8s %-7s %dt train: %8.1f ms/step  %9.0f tokens/s  (%d steps)\n", bt_impl_name[impls[i]],
                   c->name, threads, 1e3 * r->seconds, r->tokens_per_s, r->n);
    }
    if (o->bf16) {
        double t[BT_N_IMPL];
        for (int q = 0; q < BT_N_IMPL; q++) {
            const bt_result *r = bt_report_find(rep, false, false, c->name, threads, q);
            t[q] = r && r->valid ? r->tokens_per_s : NAN;
        }
        /* a ratio only where both sides ran */
        static const char *const over[BT_N_IMPL] = {"minigrad fp32", "pytorch fp32", NULL, "pytorch bf16"};
        printf("  %-13s %-7s %dt bf16 tokens/s over:", bt_impl_name[BT_MINIGRAD_BF16], c->name, threads);
        const char *sep = " ";
        for (int q = 0; q < BT_N_IMPL; q++)
            if (over[q] && !isnan(t[q]) && !isnan(t[BT_MINIGRAD_BF16])) {
                printf("%s%s %.2fx", sep, over[q], t[BT_MINIGRAD_BF16] / t[q]);
                sep = ", ";
            }
        printf("%s\n", *sep == ' ' ? " (nothing to compare with)" : "");
    }
    fflush(stdout);
}

/* A generation sample should last at least this long. Each run starts from a machine left idle by
 * settle(), and on the development VM the first 5-15 ms after idling ran slower (a textgen run of
 * 112 tokens took 14.9 ms after a pause, 11.5 ms back to back, on 2 threads; 1 thread barely
 * moved): short runs are therefore repeated back to back and averaged. */
#define GEN_SAMPLE_SECONDS 0.25
#define GEN_MAX_REPS 64

static void measure_gen(bt_report *rep, const options *o, const bt_config *c, int threads) {
    const bool big = c->T * c->C > 256 * 1024;
    const int runs = o->gen_runs > 0 ? o->gen_runs : o->quick ? 1 : big ? 2 : 9;
    /* Without a cache a music run costs PyTorch half a minute; with one, about a second: those are
     * timed several times a round, which steadies their medians at little cost. */
    const int cached_reps = big && !o->quick ? 3 : 1;
    const int64_t n = bt_gen_tokens(c, o->gen_tokens);
    if (o->gen_tokens > n && threads == o->threads[0]) /* said once per configuration */
        printf("  %s: %lld new tokens per generation run, what fits the context after the %d-token prompt\n",
               c->name, (long long)n, BT_PROMPT_LEN);
    const int n_impl = rep->have_pytorch ? 2 : 1;
    side sd[2];
    memset(sd, 0, sizeof sd);
    double *s[2][2]; /* [impl][cache] */
    int ns[2][2] = {{0}}, reps[2][2];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) s[i][k] = calloc((size_t)(runs * (k ? cached_reps : 1)), sizeof(double));
    /* Warm-up: 4 tokens each way, twice; the second pair, scaled to n tokens, estimates a run. A
     * kind whose estimate is within a few samples' time gets one untimed full run more, whose own
     * time sets how many runs make a sample (the estimate counts the prompt against 4 tokens). */
    for (int i = 0; i < n_impl; i++) {
        start_worker(&sd[i], o, i, "gen", c, threads);
        gen_run(&sd[i], 4, true, 1);
        gen_run(&sd[i], 4, false, 1);
        for (int k = 1; k >= 0; k--) {
            double t = gen_run(&sd[i], 4, k == 1, 1) * (double)n / 4.0;
            if (!o->quick && t < 4.0 * GEN_SAMPLE_SECONDS) t = gen_run(&sd[i], n, k == 1, 1);
            const double want = t > 0.0 ? ceil(GEN_SAMPLE_SECONDS / t) : 1.0;
            reps[i][k] = o->quick || !(want > 1.0) ? 1 : want < GEN_MAX_REPS ? (int)want : GEN_MAX_REPS;
        }
    }
    /* With --bf16: minigrad's cached generation with bf16 weights (mg_gen_opts.precision), last in
     * each round, as many runs per sample as float32's cached runs. */
    side bs;
    memset(&bs, 0, sizeof bs);
    double *sb = o->bf16 ? calloc((size_t)(runs * cached_reps), sizeof(double)) : NULL;
    int nsb = 0;
    if (sb && start_worker(&bs, o, BT_MINIGRAD_BF16, "gen", c, threads)) {
        gen_run(&bs, 4, true, 1);
        gen_run(&bs, 4, true, 1);
    }
    /* The judged pair first in each round (minigrad cached, PyTorch uncached), the other two after
     * it, with the leading implementation alternating. */
    for (int r = 0; r < runs; r++) {
        sample_peak(rep, threads);
        for (int j = 0; j < 2 * n_impl; j++) {
            const int impl = n_impl == 1 ? 0 : (j + r) % 2;
            const bool cache = n_impl == 1 ? j == 0 : (j < 2) == (impl == BT_MINIGRAD);
            for (int k = 0; k < (cache ? cached_reps : 1); k++) {
                const double t = gen_run(&sd[impl], n, cache, reps[impl][cache]);
                if (isfinite(t) && s[impl][cache]) s[impl][cache][ns[impl][cache]++] = t;
            }
        }
        for (int k = 0; bs.up && k < cached_reps; k++) {
            const double t = gen_run(&bs, n, true, reps[BT_MINIGRAD][1]);
            if (isfinite(t)) sb[nsb++] = t;
        }
    }
    if (bs.up) {
        bt_result *r = bt_report_add(rep);
        if (r) {
            r->gen = true, r->cache = true, r->cfg = c, r->threads = threads, r->impl = BT_MINIGRAD_BF16;
            r->new_tokens = n;
            finish(&bs, r);
            r->arena_peak_mb = NAN;
            r->n = nsb, r->reps = reps[BT_MINIGRAD][1];
            r->seconds = bench_median(sb, nsb);
            r->best_seconds = nsb > 0 ? sb[0] : NAN;
            r->tokens_per_s = (double)n / r->seconds;
            r->valid = nsb > 0;
            if (r->valid)
                printf("  %-8s %-7s %dt gen %-8s %8.2f ms/token %9.1f tokens/s  (%d samples of %d x %lld tokens; "
                       "bf16 weights)\n",
                       "minigrad-bf16", c->name, threads, "cache", 1e3 * r->seconds / (double)n, r->tokens_per_s,
                       r->n, r->reps, (long long)n);
        }
        stop_worker(&bs);
    }
    free(sb);
    for (int i = 0; i < n_impl; i++) {
        for (int k = 1; k >= 0; k--) {
            bt_result *r = bt_report_add(rep);
            if (!r) break;
            r->gen = true, r->cache = k == 1, r->cfg = c, r->threads = threads, r->impl = i, r->new_tokens = n;
            if (sd[i].p.hello) finish(&sd[i], r);
            r->arena_peak_mb = NAN; /* mg_gpt_generate makes its own arena */
            r->n = ns[i][k];
            r->reps = reps[i][k];
            r->seconds = bench_median(s[i][k], ns[i][k]);
            r->best_seconds = ns[i][k] > 0 ? s[i][k][0] : NAN;
            r->tokens_per_s = (double)n / r->seconds;
            r->valid = ns[i][k] > 0;
            if (r->valid)
                printf("  %-8s %-7s %dt gen %-8s %8.2f ms/token %9.1f tokens/s  (%d samples of %d x %lld tokens)\n",
                       i ? "pytorch" : "minigrad", c->name, threads, k ? "cache" : "no cache",
                       1e3 * r->seconds / (double)n, r->tokens_per_s, r->n, r->reps, (long long)n);
        }
        stop_worker(&sd[i]);
    }
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) free(s[i][k]);
    fflush(stdout);
}

static bool parse_list(const char *arg, const char *what, int *out, int max, int *n, int all) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", arg);
    *n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end;
        const long v = strcmp(t, "all") == 0 ? all : strtol(t, &end, 10);
        if ((strcmp(t, "all") != 0 && (*end || end == t)) || v < 1 || v > 1024 || *n == max) {
            fprintf(stderr, "bench_train: %s: '%s' is not a thread count (1..1024 or 'all', at most %d)\n", what, t,
                    max);
            return false;
        }
        bool dup = false;
        for (int i = 0; i < *n; i++) dup |= out[i] == (int)v;
        if (!dup) out[(*n)++] = (int)v;
    }
    if (*n == 0) fprintf(stderr, "bench_train: %s: empty list\n", what);
    return *n > 0;
}

static bool parse_configs(const char *arg, bool *on) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", arg);
    bool any = false;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        const bt_config *c = bt_config_find(t);
        if (!c) {
            fprintf(stderr, "bench_train: --configs: unknown configuration '%s' (known:", t);
            for (int i = 0; i < bt_n_configs; i++) fprintf(stderr, " %s", bt_configs[i].name);
            fprintf(stderr, ")\n");
            return false;
        }
        on[c - bt_configs] = any = true;
    }
    if (!any) fprintf(stderr, "bench_train: --configs: empty list\n");
    return any;
}

static bool parse_int(const char *opt, const char *v, int lo, int *out) {
    return bench_int_flag("bench_train", opt, v, lo, 1000000, out);
}

static int worker_main(int argc, char **argv) {
    const char *mode = NULL, *config = NULL;
    int threads = 0;
    bool bf16 = false;
    unsigned long long seed = 1234;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--worker")) mode = argv[i + 1];
        else if (!strcmp(argv[i], "--config")) config = argv[i + 1];
        else if (!strcmp(argv[i], "--threads") && !bench_int_flag("bench_train worker", "--threads", argv[i + 1], 1, 1024, &threads))
            return 2;
        else if (!strcmp(argv[i], "--seed")) {
            int s;
            if (!bench_int_flag("bench_train worker", "--seed", argv[i + 1], 0, INT_MAX, &s)) return 2;
            seed = (unsigned long long)s;
        }
        else if (!strcmp(argv[i], "--precision")) {
            mg_precision p;
            if (!mg_precision_parse(argv[i + 1], &p)) { /* one JSON line, as the worker's other errors */
                char msg[256];
                snprintf(msg, sizeof msg, "worker: --precision '%s': expected fp32 or bf16", argv[i + 1]);
                cJSON *e = cJSON_CreateObject();
                char *line = e && cJSON_AddStringToObject(e, "error", msg) ? cJSON_PrintUnformatted(e) : NULL;
                printf("%s\n", line ? line : "{\"error\":\"worker: bad --precision\"}");
                cJSON_free(line);
                cJSON_Delete(e);
                return 2;
            }
            bf16 = p == MG_PRECISION_BF16;
        }
    }
    const bt_config *c = config ? bt_config_find(config) : NULL;
    if (!mode || !c || threads < 1) {
        printf("{\"error\":\"worker: need --worker train|gen --config NAME --threads N\"}\n");
        return 2;
    }
    return bt_worker_main(mode, c, threads, seed, bf16);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--worker")) return worker_main(argc, argv);
    if (argc == 5 && !strcmp(argv[1], "--dp-worker")) return bt_dp_worker(argv[2], atoi(argv[3]), atoi(argv[4]));
    if (argc > 1 && !strcmp(argv[1], "--data-parallel")) { /* [CONFIG [RANKS [STEPS [ROUNDS]]]] */
        char self[4096];
        ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
        if (k <= 0) return 1;
        self[k] = 0;
        return bt_dp_driver(self, argc > 2 ? argv[2] : "textgen", argc > 3 ? atoi(argv[3]) : 2,
                            argc > 4 ? atoi(argv[4]) : 12, argc > 5 ? atoi(argv[5]) : 3);
    }
    signal(SIGPIPE, SIG_IGN); /* a dead worker shows as a failed write, not as our death */
    bench_stdout_begin();

    const int all = mg_set_num_threads(0);
    options o = {.python = "/usr/bin/python3", .script = BENCH_PYTORCH_SCRIPT, .pytorch = true, .seed = 1234};
    o.threads[0] = 1, o.threads[1] = all, o.n_threads = all > 1 ? 2 : 1;
    for (int i = 0; i < bt_n_configs; i++) o.configs[i] = !bt_configs[i].test_only;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true, takes = true;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--quick")) o.quick = true, takes = false;
        else if (!strcmp(a, "--no-pytorch")) o.pytorch = false, takes = false;
        else if (!strcmp(a, "--bf16")) o.bf16 = true, takes = false;
        else if (!strcmp(a, "--no-gen")) o.no_gen = true, takes = false;
        else if (!v) ok = false;
        else if (!strcmp(a, "--json")) o.json = v;
        else if (!strcmp(a, "--png")) o.png = v;
        else if (!strcmp(a, "--report")) o.report = v;
        else if (!strcmp(a, "--python")) o.python = v;
        else if (!strcmp(a, "--pytorch-script")) o.script = v;
        else if (!strcmp(a, "--openblas-core")) o.blas_core = v;
        else if (!strcmp(a, "--pytorch-wait-policy")) {
            if (strcmp(v, "passive") && strcmp(v, "active") && strcmp(v, "env")) {
                fprintf(stderr, "bench_train: --pytorch-wait-policy '%s': expected passive, active or env\n", v);
                return 2;
            }
            o.wait_policy = v;
        }
        else if (!strcmp(a, "--pytorch-malloc")) {
            if (strcmp(v, "retain") && strcmp(v, "default")) {
                fprintf(stderr, "bench_train: --pytorch-malloc '%s': expected retain or default\n", v);
                return 2;
            }
            o.malloc_mode = v;
        }
        else if (!strcmp(a, "--seed")) {
            int seed;
            if (!bench_int_flag("bench_train", "--seed", v, 0, INT_MAX, &seed)) return 2;
            o.seed = (uint64_t)seed;
        }
        else if (!strcmp(a, "--configs")) {
            memset(o.configs, 0, sizeof o.configs);
            if (!parse_configs(v, o.configs)) return 2;
        } else if (!strcmp(a, "--threads")) {
            if (!parse_list(v, "--threads", o.threads, 8, &o.n_threads, all)) return 2;
        } else if (!strcmp(a, "--steps")) {
            if (!parse_int(a, v, 1, &o.steps)) return 2;
        } else if (!strcmp(a, "--warmup")) {
            if (!parse_int(a, v, 1, &o.warmup)) return 2;
        } else if (!strcmp(a, "--gen-runs")) {
            if (!parse_int(a, v, 1, &o.gen_runs)) return 2;
        } else if (!strcmp(a, "--gen-tokens")) {
            if (!parse_int(a, v, 1, &o.gen_tokens)) return 2;
        } else ok = false;
        if (!ok) {
            fprintf(stderr, "bench_train: unknown or incomplete argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
        i += takes;
    }

    if (o.report) { /* no measuring: the table, targets, JSON and PNG of an earlier run */
        bt_report rep = {0};
        bool ok = bt_report_load(&rep, o.report);
        if (ok) bt_print_table(&rep, stdout);
        if (ok && o.json) ok = bt_write_json(&rep, o.json);
        if (ok && o.png) ok = bt_write_png(&rep, o.png);
        free(rep.r);
        return bench_exit_status("bench_train", ok ? 0 : 1);
    }

    bt_report rep = {.n_threads = o.n_threads};
    memcpy(rep.threads, o.threads, sizeof o.threads);
    double load[3];
    rep.load_before = getloadavg(load, 1) == 1 ? load[0] : NAN;
    if (o.pytorch) {
        char *probe[] = {(char *)o.python, "-c", "import torch", NULL};
        if (access(o.script, R_OK) != 0)
            printf("pytorch: %s not readable: minigrad only (--pytorch-script PATH)\n", o.script);
        else if (bt_run_quiet(probe) != 0)
            printf("pytorch: `%s -c 'import torch'` failed: minigrad only (Debian: apt-get install "
                   "python3-torch)\n", o.python);
        else
            rep.have_pytorch = true;
    }
    bench_cpu(rep.cpu, sizeof rep.cpu);
    printf("cpu: %s\n", rep.cpu);
    printf("minigrad: %s kernels, %d threads available; pytorch: %s\n", mg_isa_name(mg_isa_active()), all,
           rep.have_pytorch ? o.script : "not used");
    for (int t = 0; t < o.n_threads; t++) rep.peak[t] = bt_measure_peak(o.threads[t], 5, 0.2);
    printf("FMA peak (%s register loop, best of 5):", bt_peak_kind());
    for (int t = 0; t < o.n_threads; t++) printf(" %.1f GFLOP/s on %d thread%s", rep.peak[t], o.threads[t],
                                                 o.threads[t] > 1 ? "s" : "");
    printf("\n");
    if (isfinite(rep.load_before) && rep.load_before > 0.5 * all)
        printf("warning: load average %.1f on %d cores: other processes share the machine, timings are noisy\n",
               rep.load_before, all);
    fflush(stdout);

    for (int ci = 0; ci < bt_n_configs; ci++) {
        if (!o.configs[ci]) continue;
        for (int t = 0; t < o.n_threads; t++) {
            measure_train(&rep, &o, &bt_configs[ci], o.threads[t]);
            if (!o.no_gen) measure_gen(&rep, &o, &bt_configs[ci], o.threads[t]);
        }
    }

    /* The peak once more now that the run is over. */
    for (int t = 0; t < o.n_threads; t++) {
        const double p = bt_measure_peak(o.threads[t], 3, 0.2);
        rep.peak[t] = p > rep.peak[t] ? p : rep.peak[t];
    }
    rep.load_after = getloadavg(load, 1) == 1 ? load[0] : NAN;
    for (int i = 0; i < rep.n; i++) {
        bt_result *r = &rep.r[i];
        for (int t = 0; t < o.n_threads; t++)
            if (o.threads[t] == r->threads) r->peak_gflops = rep.peak[t];
        const double flops = r->gen ? bt_gen_flops(r->cfg, BT_PROMPT_LEN, r->new_tokens)
                                    : bt_train_flops_per_token(r->cfg) * (double)(r->cfg->B * r->cfg->T);
        r->mfu = flops / r->seconds / (r->peak_gflops * 1e9);
    }
    printf("\nFMA peak used for MFU (best of %d looks, before, between rounds and after):",
           8 * o.n_threads + rep.peak_samples);
    for (int t = 0; t < o.n_threads; t++) printf(" %.1f GFLOP/s (%dt)", rep.peak[t], o.threads[t]);
    printf("; load average %.2f before, %.2f after\n", rep.load_before, rep.load_after);
    bt_print_table(&rep, stdout);

    int rc = 0;
    for (int i = 0; i < rep.n; i++)
        if (!rep.r[i].valid) rc = 1;
    if (rc) fprintf(stderr, "bench_train: some measurements failed (see the messages above)\n");
    if (o.json && !bt_write_json(&rep, o.json)) rc = 1;
    if (o.png && !bt_write_png(&rep, o.png)) rc = 1;
    if (o.json) printf("wrote %s\n", o.json);
    if (o.png && rc == 0) printf("wrote %s\n", o.png);
    free(rep.r);
    return bench_exit_status("bench_train", rc);
}
