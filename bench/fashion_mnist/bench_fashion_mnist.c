/* bench_fashion_mnist: training speed of the fashion_mnist example's CNN, minigrad against PyTorch
 * (examples/fashion_mnist/fashion_mnist_pytorch.py --steps), in one run.
 *
 *   bench_fashion_mnist [--steps N] [--rounds R] [--threads T] [--batch B] [--python PATH] [--bf16]
 *
 * Each round times N training steps (forward, loss, backward, Adam) of minigrad in this process,
 * with --bf16 then N of minigrad in bf16 mixed precision (a context in MG_PRECISION_BF16, the same
 * model), then N of PyTorch in a child process (with --bf16 then N more under bf16 autocast), so
 * that load from the rest of the machine falls on all alike; two untimed steps come first in each.
 * It prints each round's median step time, the median over the rounds, images/s = batch / median,
 * and the ratios of those medians (minigrad / PyTorch; with --bf16 minigrad bf16 / minigrad fp32
 * and minigrad bf16 / PyTorch bf16). The data
 * are the first 4,096 training images when the Debian package dataset-fashion-mnist is installed,
 * else random images (the speed does not depend on the values). The CPU is named from lscpu.
 * PyTorch gets its fastest settings: glibc keeping freed memory (PYTORCH_MALLOC below: otherwise
 * it faults its per-step temporaries back in every step, 74 against 31 ms a step on the 2-core
 * development VM, 2 threads) and, on an Intel CPU, OPENBLAS_CORETYPE=SKYLAKEX. */
#include "bench_util.h"
#include "fm.h"
#include "minigrad/minigrad.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef BENCH_FM_PYTORCH_SCRIPT
#define BENCH_FM_PYTORCH_SCRIPT "examples/fashion_mnist/fashion_mnist_pytorch.py"
#endif

enum { MAX_ROUNDS = 64, MAX_STEPS = 100000 };

/* glibc: no mmap for large blocks, never trim, grow the heap 1 GiB at a time */
#define PYTORCH_MALLOC "MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=1125899906842624 MALLOC_TOP_PAD_=1073741824"


/* The CPU (bench_cpu) and whether it is Intel's (whose OpenBLAS kernels need naming). */
static void cpu_name(char *buf, size_t n, bool *intel) {
    bench_cpu(buf, n);
    *intel = false;
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "vendor_id", 9)) {
            *intel = strstr(line, "GenuineIntel") != NULL;
            break;
        }
    if (f) fclose(f);
}

static double parse_arg(const char *flag, const char *v, double lo, double hi) {
    char *end;
    double d = v ? strtod(v, &end) : NAN;
    if (!v || *end || !(d >= lo && d <= hi) || d != floor(d)) {
        fprintf(stderr, "bench_fashion_mnist: %s: '%s' is not a whole number in %.0f..%.0f\n", flag, v ? v : "", lo, hi);
        exit(2);
    }
    return d;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench_fashion_mnist [--steps N] [--rounds R] [--threads T] [--batch B] [--python PATH] [--bf16]\n"
            "Measures training steps (forward, cross-entropy, backward, Adam) of the fashion_mnist example's CNN:\n"
            "minigrad in this process against PyTorch (examples/fashion_mnist/fashion_mnist_pytorch.py) in a child\n"
            "process, in alternating rounds, each side after 2 untimed steps. Prints each round's median ms/step,\n"
            "the median over the rounds, images/s and the ratio minigrad / PyTorch (bench/README.md). Data: the\n"
            "first 4,096 Fashion-MNIST training images when dataset-fashion-mnist is installed, else random.\n"
            "  --steps N      timed steps per side and round (default 20; 1..%d)\n"
            "  --rounds R     rounds (default 3; 1..%d)\n"
            "  --threads T    threads for both sides (default 2, not the number of cores; 1..1024)\n"
            "  --batch B      images per step (default 128; 1..4096)\n"
            "  --python PATH  the Python that runs the PyTorch side (default /usr/bin/python3); without torch\n"
            "                 minigrad is measured alone\n"
            "  --bf16         also minigrad in bf16 mixed precision and PyTorch under bf16 autocast, with the\n"
            "                 ratios bf16 / minigrad fp32 and bf16 / PyTorch bf16\n"
            "  --help         this text\n"
            "A default run times 3 x 22 steps a side, about 30 ms a step on 2 threads of the 2-core VM in\n"
            "examples/fashion_mnist/README.md, plus starting Python and torch every round: well under a minute;\n"
            "--bf16 about doubles it.\n",
            MAX_STEPS, MAX_ROUNDS);
}

/* Median ms/step of N minigrad steps (after two untimed ones). */
static double minigrad_round(fm_model *m, mg_optim *opt, mg_ctx *ctx, const fm_set *data, int64_t batch, int steps,
                             double *times) {
    int64_t *idx = malloc((size_t)batch * sizeof *idx);
    if (!idx) return NAN;
    for (int s = -2; s < steps; s++) {
        int64_t i0 = ((int64_t)(s + 2) * batch) % (data->n - batch + 1);
        for (int64_t b = 0; b < batch; b++) idx[b] = i0 + b;
        double t0 = mg_time();
        mg_ctx_reset(ctx);
        mg_tensor *x, *y;
        fm_batch(ctx, data, idx, batch, &x, &y);
        mg_params_zero_grad(m->params);
        mg_backward(ctx, mg_cross_entropy(ctx, fm_forward(m, ctx, x), y, -1));
        mg_optim_step(opt, 1e-3f);
        if (s >= 0) times[s] = mg_time() - t0;
        if (!mg_ctx_ok(ctx)) {
            fprintf(stderr, "bench_fashion_mnist: %s\n", mg_ctx_error(ctx));
            exit(1);
        }
    }
    free(idx);
    return 1000.0 * bench_median(times, steps);
}

/* Median ms/step PyTorch reports (bf16: under bf16 autocast), or NAN when it could not run. */
static double pytorch_round(const char *python, const char *env, int threads, int64_t batch, int steps, bool bf16) {
    char cmd[4096], line[512];
    snprintf(cmd, sizeof cmd, "%s '%s' '%s' --steps %d --threads %d --batch %lld%s 2>&1", env, python,
             BENCH_FM_PYTORCH_SCRIPT, steps, threads, (long long)batch, bf16 ? " --bf16" : "");
    FILE *p = popen(cmd, "r");
    if (!p) return NAN;
    double ms = NAN;
    while (fgets(line, sizeof line, p)) {
        const char *m = strstr(line, "median ");
        if (m) ms = atof(m + 7);
        else fputs(line, stderr); /* an error from the script */
    }
    int st = pclose(p);
    return st == 0 ? ms : NAN;
}

int main(int argc, char **argv) {
    int steps = 20, rounds = 3, threads = 2;
    int64_t batch = 128;
    bool bf16 = false;
    const char *python = "/usr/bin/python3";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--steps")) steps = (int)parse_arg(a, v, 1, MAX_STEPS), i++;
        else if (!strcmp(a, "--rounds")) rounds = (int)parse_arg(a, v, 1, MAX_ROUNDS), i++;
        else if (!strcmp(a, "--threads")) threads = (int)parse_arg(a, v, 1, 1024), i++;
        else if (!strcmp(a, "--batch")) batch = (int64_t)parse_arg(a, v, 1, 4096), i++;
        else if (!strcmp(a, "--python") && v) python = v, i++;
        else if (!strcmp(a, "--bf16")) bf16 = true;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "bench_fashion_mnist: unknown or incomplete argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    char cpu[256];
    bool intel;
    cpu_name(cpu, sizeof cpu, &intel);
    const char *env = intel ? PYTORCH_MALLOC " OPENBLAS_CORETYPE=SKYLAKEX" : PYTORCH_MALLOC;
    mg_set_num_threads(threads);
    fm_set data = {0};
    bool real = fm_present(FM_DEFAULT_DIR) && fm_load(FM_DEFAULT_DIR, "train", 4096, &data) == MG_OK;
    if (!real) {
        data.n = 4096;
        data.images = malloc((size_t)data.n * FM_PIXELS);
        data.labels = malloc((size_t)data.n);
        if (!data.images || !data.labels) return 1;
        mg_rng r = mg_rng_make(3);
        for (int64_t i = 0; i < data.n * FM_PIXELS; i++) data.images[i] = (uint8_t)mg_rng_below(&r, 256);
        for (int64_t i = 0; i < data.n; i++) data.labels[i] = (uint8_t)mg_rng_below(&r, FM_CLASSES);
    }
    if (batch > data.n) batch = data.n;
    fm_model m;
    mg_rng rng = mg_rng_make(1);
    mg_adamw_cfg ac = mg_adamw_defaults();
    ac.weight_decay = 0.0f;
    mg_optim *opt = NULL;
    mg_ctx *ctx = mg_ctx_new(0), *bctx = bf16 ? mg_ctx_new(0) : NULL;
    if (fm_model_make(&m) != MG_OK || mg_params_alloc(m.params, &rng) != MG_OK || !(opt = mg_adamw_new(m.params, ac)) ||
        !ctx || (bf16 && !bctx)) {
        fprintf(stderr, "bench_fashion_mnist: %s\n", mg_last_error());
        return 1;
    }
    if (bctx) mg_ctx_set_precision(bctx, MG_PRECISION_BF16);
    printf("fashion_mnist CNN training, batch %lld, %d threads, %d rounds of %d steps; %s data%s\n", (long long)batch,
           threads, rounds, steps, real ? "Fashion-MNIST" : "random",
           bf16 ? "; minigrad in fp32 and bf16" : "");
    printf("CPU: %s%s\n", cpu, intel ? " (PyTorch with OPENBLAS_CORETYPE=SKYLAKEX)" : "");
    printf("bf16 path: %s\n", mg_bf16_path_name(mg_bf16_path_active()));
    double *times = malloc(sizeof(double) * (size_t)steps), mg_ms[MAX_ROUNDS], bf_ms[MAX_ROUNDS], pt_ms[MAX_ROUNDS],
           ptb_ms[MAX_ROUNDS];
    int n_pt = 0, n_ptb = 0;
    for (int r = 0; r < rounds; r++) {
        mg_ms[r] = minigrad_round(&m, opt, ctx, &data, batch, steps, times);
        if (bctx) bf_ms[r] = minigrad_round(&m, opt, bctx, &data, batch, steps, times);
        double p = pytorch_round(python, env, threads, batch, steps, false);
        double pb = bctx && !isnan(p) ? pytorch_round(python, env, threads, batch, steps, true) : NAN;
        if (!isnan(p)) pt_ms[n_pt++] = p;
        if (!isnan(pb)) ptb_ms[n_ptb++] = pb;
        printf("round %d: minigrad %.2f ms/step (%.0f images/s), ", r + 1, mg_ms[r], (double)batch * 1000.0 / mg_ms[r]);
        if (bctx) printf("minigrad bf16 %.2f ms/step (%.0f images/s), ", bf_ms[r], (double)batch * 1000.0 / bf_ms[r]);
        printf("PyTorch %s", isnan(p) ? "did not run\n" : "");
        if (!isnan(p)) printf("%.2f ms/step (%.0f images/s)", p, (double)batch * 1000.0 / p);
        if (!isnan(pb)) printf(", PyTorch bf16 %.2f ms/step (%.0f images/s)", pb, (double)batch * 1000.0 / pb);
        if (!isnan(p)) printf("\n");
        fflush(stdout);
    }
    double mg_med = bench_median(mg_ms, rounds), bf_med = bctx ? bench_median(bf_ms, rounds) : NAN;
    printf("minigrad: median %.2f ms/step, %.0f images/s\n", mg_med, (double)batch * 1000.0 / mg_med);
    if (bctx) {
        printf("minigrad bf16: median %.2f ms/step, %.0f images/s\n", bf_med, (double)batch * 1000.0 / bf_med);
        printf("ratio minigrad bf16 / minigrad fp32 images/s: %.2f\n", mg_med / bf_med);
    }
    if (n_pt) {
        double pt_med = bench_median(pt_ms, n_pt);
        printf("PyTorch:  median %.2f ms/step, %.0f images/s\n", pt_med, (double)batch * 1000.0 / pt_med);
        printf("ratio minigrad / PyTorch images/s: %.2f\n", pt_med / mg_med);
        if (n_ptb) {
            double ptb_med = bench_median(ptb_ms, n_ptb);
            printf("PyTorch bf16 autocast: median %.2f ms/step, %.0f images/s\n", ptb_med, (double)batch * 1000.0 / ptb_med);
            printf("ratio minigrad bf16 / PyTorch bf16 images/s: %.2f\n", ptb_med / bf_med);
        }
    } else {
        printf("PyTorch: not measured (%s with torch is needed)\n", python);
    }
    free(times);
    mg_ctx_free(ctx);
    mg_ctx_free(bctx);
    mg_optim_free(opt);
    fm_model_free(&m);
    fm_set_free(&data);
    return 0;
}
