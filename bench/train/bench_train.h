/* bench_train: shared pieces of the training / generation benchmark (bench/README.md).
 *
 * The program runs as a driver that starts one long-lived worker process per implementation
 * (minigrad: this same binary with --worker; PyTorch: bench/pytorch_reference.py --worker) for
 * each configuration and thread count, and alternates between them. Workers answer line
 * commands with one JSON object per line:
 *   train K              -> {"times":[s, ...], "loss":x}          K AdamW steps, each timed
 *   gen N cache|nocache  -> {"seconds":s, "tokens":N}             greedy generation at batch 1
 *   mem                  -> {"peak_rss_mb":x, "rss_mb":x, ...}    getrusage peak, arena peak
 *   quit
 * and greet with {"ready":true, "impl":..., "n_params":..., "base_rss_mb":...} once built.
 * A separate process per measurement keeps each peak RSS its own.
 */
#ifndef BENCH_TRAIN_H
#define BENCH_TRAIN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct bt_config {
    const char *name;
    int64_t V, T, C, L, H, B; /* vocab, block size, width, layers, heads, batch */
    int64_t gen;              /* new tokens per generation run (bench/README.md says why these) */
    bool test_only;           /* "tiny", "tiny-long": only for the tool's own test, never run by default */
} bt_config;

extern const bt_config bt_configs[];
extern const int bt_n_configs;
const bt_config *bt_config_find(const char *name);

#define BT_PROMPT_LEN 16

/* Model FLOPs of one training step per token: 6 (12 L C^2 + V C) + 6 L T C (see bench/README.md;
 * pytorch_reference.py uses the same formula). */
double bt_train_flops_per_token(const bt_config *c);
/* Forward FLOPs greedy generation with a KV cache needs for n_new tokens after a prompt. */
double bt_gen_flops(const bt_config *c, int64_t prompt, int64_t n_new);
/* New tokens per generation run: `want` (or the configuration's own count when want <= 0), at
 * most what fits the position table after the prompt. */
int64_t bt_gen_tokens(const bt_config *c, int64_t want);

/* Resident set size now (VmRSS) and the process's peak (getrusage ru_maxrss), MiB. */
double bt_rss_mb(void);
double bt_peak_rss_mb(void);

/* ---- peak.c: the machine's FMA peak, GFLOP/s of `threads` threads running a register-only
 * FMA loop at once for about `seconds` (best of `reps` runs: load from elsewhere only lowers it). */
double bt_measure_peak(int threads, int reps, double seconds);
const char *bt_peak_kind(void);

/* ---- worker.c: the minigrad worker (mode "train" or "gen"); returns the exit status. ---- */
int bt_worker_main(const char *mode, const bt_config *c, int threads, uint64_t seed, bool bf16);

/* ---- dataparallel.c: --data-parallel (the driver) and --dp-worker (one process or rank) ---- */
int bt_dp_worker(const char *config, int threads, int steps);
int bt_dp_driver(const char *self, const char *config, int ranks, int steps, int rounds);

/* ---- proc.c: a child process spoken to over its stdin / stdout ---- */
typedef struct cJSON cJSON;
typedef struct bt_proc {
    pid_t pid;
    FILE *to, *from; /* its stdin, its stdout */
    char name[64];   /* for messages: "minigrad textgen 2t" */
    cJSON *hello;    /* its greeting (owned) */
} bt_proc;

/* Starts argv[0] (a path) with pipes and waits for its greeting. false (message on stderr) when it
 * cannot start or does not greet. */
bool bt_proc_start(bt_proc *p, const char *name, char *const argv[]);
/* Sends one command and returns the parsed reply (caller frees with cJSON_Delete), or NULL with a
 * message on stderr when the worker died, answered garbage or reported {"error":...}. */
cJSON *bt_proc_ask(bt_proc *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sends quit, waits for the exit and frees. Safe on a process that never started. */
void bt_proc_close(bt_proc *p);
/* Exit status of running argv with stdin/stdout/stderr on /dev/null (-1: could not run). */
int bt_run_quiet(char *const argv[]);

/* ---- report.c: results, the terminal table, JSON lines, the PNG ---- */
/* bf16: minigrad with --precision bf16, PyTorch under torch.autocast("cpu", torch.bfloat16) */
enum { BT_MINIGRAD = 0, BT_PYTORCH = 1, BT_MINIGRAD_BF16 = 2, BT_PYTORCH_BF16 = 3, BT_N_IMPL = 4 };
extern const char *const bt_impl_name[BT_N_IMPL];

typedef struct bt_result {
    bool valid;
    bool gen;   /* false: a training measurement */
    bool cache; /* gen: with a KV cache */
    const bt_config *cfg;
    int threads, impl, n; /* n: steps or generation samples behind the median */
    int reps;             /* gen: back-to-back runs averaged into each sample */
    double seconds;       /* median seconds per step, or per generation run */
    double best_seconds;  /* the fastest of them (less sensitive to other load; JSON only) */
    double tokens_per_s, mfu, peak_gflops;
    double peak_rss_mb, base_rss_mb, arena_peak_mb, state_mb; /* NAN where not measured */
    double load;          /* 1-minute load average when the measurement ended */
    int64_t n_params, new_tokens;
    char backend[32]; /* minigrad's ISA path, PyTorch's OpenBLAS core */
} bt_result;

typedef struct bt_report {
    bt_result *r;
    int n, cap;
    int threads[8], n_threads; /* the thread counts measured */
    double peak[8];            /* FMA peak GFLOP/s at each of them: the best look */
    int peak_samples;          /* looks taken between rounds */
    bool have_pytorch;
    char torch_version[32];
    double load_before, load_after; /* 1-minute load average */
    char cpu[320];                  /* the CPU the figures came from (bench_cpu) */
} bt_report;

bt_result *bt_report_add(bt_report *rep);
const bt_result *bt_report_find(const bt_report *rep, bool gen, bool cache, const char *cfg,
                                int threads, int impl);
void bt_print_table(const bt_report *rep, FILE *f);
bool bt_write_json(const bt_report *rep, const char *path);
bool bt_write_png(const bt_report *rep, const char *path);
/* Reads the JSON lines of an earlier run (what bt_write_json wrote) into an empty report. false
 * (message on stderr naming the file and line) on a missing file or a foreign record. */
bool bt_report_load(bt_report *rep, const char *path);

/* A number (NAN when absent or not a number) and a string (`missing` when absent) of a JSON object. */
double bt_json_num(const cJSON *j, const char *key);
const char *bt_json_str(const cJSON *j, const char *key, const char *missing);

#endif
