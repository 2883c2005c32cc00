/* examples/posenc/posenc.h: the comparison program of docs/posenc-benchmark.md ("the spec" below,
 * sections 4-5) on top of the data library (tasks.h): the scheme catalogue, the classifier, one
 * training run, and the reports (tables, CSV, PNG). main.c is only the command line and the
 * scheduling of runs.
 *
 * Schemes are whatever the layer registry knows: "none" (the model itself) plus every registered
 * positional scheme, after every plugin found in the plugin search path has been loaded. A scheme
 * dropped in as a plugin therefore joins the comparison without a change here. The spec's names
 * (sin, learned_sin) and the registry's (sinusoidal, learned+sinusoidal) are both accepted; tables
 * show the spec's.
 *
 * Initialisation (the spec fixes the distributions, not the stream): every weight except the
 * positional scheme's own parameters is drawn in parameter order from one generator seeded
 * POSENC_INIT_SEED + seed, so runs with the same seed start from the same shared weights whatever
 * the scheme; the positional layer initialises its own parameters (learned tables:
 * U(-0.1, 0.1), the spec's) from a generator seeded POSENC_POS_INIT_SEED + seed. Together with the
 * minibatch stream (tasks.h) a run's numbers depend only on (task, scheme, seed, steps): not on the
 * thread count (minigrad's kernels are bit-identical across thread counts) nor on which process ran
 * it.
 *
 * Ownership: posenc_model_new returns a model the caller frees with mg_gpt_free; a posenc_cache
 * owns the data sets it made (posenc_cache_free); results are plain data. Nothing keeps pointers to
 * the arguments. Errors return mg_status with mg_last_error naming the scheme, task, value or file.
 */
#ifndef POSENC_POSENC_H
#define POSENC_POSENC_H

#include "tasks.h"

#include "minigrad/gpt.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    POSENC_D = 64,     /* d_model */
    POSENC_HEADS = 4,  /* H; head dim 16 */
    POSENC_LAYERS = 2, /* n_layers; d_ff = 4 d = 256 */
    POSENC_BATCH = 32,
    POSENC_STEPS = 1500,
    POSENC_EVAL_EVERY = 250,
    POSENC_MAX_SCHEMES = 32,
    POSENC_MAX_CURVE = 256, /* evaluation points of one run (step 0, early ones, every eval_every, the end) */
    POSENC_MAX_LENGTHS = 4, /* length-generalisation lengths per run */
    POSENC_MAX_EVAL_LEN = 1024,
    POSENC_NAME_LEN = 32,
};

#define POSENC_LR 1e-3f
#define POSENC_INIT_SEED 0x1A170000ULL /* shared weights: + training seed */
#define POSENC_POS_INIT_SEED                                                                       \
    0x1A171000ULL /* the positional scheme's parameters: + training seed                           \
                   */

/* ---- schemes ---- */

typedef struct posenc_scheme {
    char name[POSENC_NAME_LEN]; /* the registry's spelling: mg_gpt_config.pos ("learned+sinusoidal")
                                 */
    char label[POSENC_NAME_LEN]; /* the spec's spelling for tables and files ("learned_sin") */
    char origin[256];            /* "built-in", the plugin's path, or "model" for none */
} posenc_scheme;

typedef struct posenc_catalog {
    posenc_scheme s[POSENC_MAX_SCHEMES];
    int n;
    char dirs[1024];     /* plugin directories searched, ':'-separated, in search order */
    char skipped[4096];  /* one line per shared object found there that did not load: "path: why" */
    char shadowed[2048]; /* one line per file not loaded because one of its name came first */
} posenc_catalog;

/* The spec's label of a registry name ("sinusoidal" -> "sin"); other names map to themselves. */
const char *posenc_scheme_label(const char *name);
/* The registry's name of either spelling ("sin" -> "sinusoidal"); others map to themselves. */
const char *posenc_scheme_name(const char *name_or_label);

/* Fills c from the loader's one search path (minigrad/plugin.h), every plugin of it loaded: "none"
 * and every registered positional scheme, the spec's six in its order, then the others by name,
 * each with its origin; the directories searched; the plugins that did not load (with the reason)
 * and the shadowed files. plugin_dirs (':'-separated), when not NULL, stands for the default
 * folders (installed or build tree, the program's): only MINIGRAD_PLUGIN_PATH and these are
 * searched. */
/* fn(entry, user) for each non-empty entry of a ':'-separated folder list, of any length, until fn
 * returns false; false then. */
bool posenc_each_dir(const char *list, bool (*fn)(const char *dir, void *user), void *user);

mg_status posenc_catalog_discover(posenc_catalog *c, const char *plugin_dirs);
/* The entry for a name in either spelling, or NULL. */
const posenc_scheme *posenc_catalog_find(const posenc_catalog *c, const char *name);
/* "none, sin, learned, ..." (labels) into buf. */
void posenc_catalog_names(const posenc_catalog *c, char *buf, size_t n);
/* Parses a comma-separated list ("all" = every entry that builds the classifier) into catalogue
 * indices. An unknown name is MG_ERR_NOT_FOUND, its message quoting the name and listing the
 * available schemes and the plugin directories searched; a scheme that cannot build the classifier
 * is MG_ERR_INVALID with the layer's reason. Repeats are refused. For "all", schemes that cannot
 * build it are left out and named in `notes` (may be NULL). */
mg_status posenc_catalog_select(const posenc_catalog *c, const char *list, int *idx, int max,
                                int *n, char *notes, size_t notes_n);

/* ---- the classifier ---- */

/* The spec's model (section 4) as an mg_gpt config: d 64, 4 heads, 2 layers, d_ff 256, block 32,
 * bidirectional, erf GELU, sqrt(d) embedding scale, untied head with bias, the given scheme
 * (either spelling; the config holds the registry's). */
mg_gpt_config posenc_model_config(const char *scheme);
/* Builds and initialises it (see the top of this file). */
mg_status posenc_model_new(const char *scheme, uint32_t seed, mg_gpt **out);
/* Re-draws every non-positional parameter: wte U(-0.1, 0.1); Linear weights and biases
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)); LayerNorm gain 1, bias 0. Parameters under "wpe." are left
 * alone. A parameter of another kind is MG_ERR_INVALID (the model changed under us). */
mg_status posenc_model_init(mg_gpt *g, uint32_t seed);
/* Whether the model's positional scheme accepts sequences of length L (a table covers only its
 * rows); when not, `why` gets "learned table has 32 rows"-style text. */
bool posenc_model_accepts(const mg_gpt *g, int L, char *why, size_t why_n);

typedef struct posenc_metrics {
    double acc;  /* token accuracy (argmax, first maximum on ties) */
    double seq;  /* sequence exact-match */
    double loss; /* mean cross-entropy per token */
    int n;       /* sequences evaluated */
} posenc_metrics;

/* Evaluates g on the first n sequences of d (n <= 0: all) without gradients, in fixed chunks, so
 * the numbers do not depend on the thread count. ctx is reset; a failure raised on it (e.g. a
 * scheme refusing the length) becomes MG_ERR_INVALID with its message. Install a non-aborting
 * handler on ctx (posenc_ctx_new does). */
mg_status posenc_evaluate(mg_gpt *g, mg_ctx *ctx, const posenc_data *d, int n, posenc_metrics *m);

/* An arena context whose programming errors are recorded, not fatal. NULL on out of memory. */
mg_ctx *posenc_ctx_new(void);

/* Attention probabilities of every layer and head for one sequence x (T tokens):
 * probs[((l * H + h) * T + i) * T + j] = attention of query i to key j. Computed from the trained
 * weights with the model's own layers up to the scores (embedding, positional layer, the blocks
 * before l, ln_1, c_attn), the scheme's rotate_qk, attn_bias and attn_bias_tensor hooks, then loops for
 * q.k / sqrt(hd) and the softmax: generic over schemes, no change to the attention layer. */
mg_status posenc_attention(mg_gpt *g, mg_ctx *ctx, const int32_t *x, int T, float *probs);

/* What a positional scheme does, drawn from the scheme itself on probe inputs (any scheme, built in
 * or a plugin, without knowing which): each part is present when the scheme acts there.
 *  - embed: what its forward adds to an all-zero (1, T, d) embedding (sin, learned, ...);
 *  - bias:  the attention-logit bias its hooks give for every head over a T x T grid of query and
 *           key positions (alibi's callback, t5_bias's tensor); NaN where a causal mask hides;
 *  - rot:   q_i . k_j after its rotate_qk on q = k = the same unit vector at every position, head 0
 *           (rope: a function of i - j only).
 * learned: the scheme has trainable parameters (so the drawing changes with training). */
typedef struct posenc_probe {
    bool learned, has_embed, has_bias, has_rot;
    int T, C, H;
    float embed[POSENC_L * POSENC_D];
    float bias[POSENC_HEADS * POSENC_L * POSENC_L];
    float rot[POSENC_L * POSENC_L];
} posenc_probe;

/* Fills p for the model's scheme at T = POSENC_L positions (none: every has_* false). ctx is reset;
 * gradients are off while it runs. */
mg_status posenc_scheme_probe(mg_gpt *g, mg_ctx *ctx, posenc_probe *p);

/* Whether step (0 < step < eval_every) is one of the early learning-curve points, log-spaced
 * (round(sqrt(2)^k): 1, 2, 3, 4, 6, 8, 11, 16, 23, 32, ...) so the first rise of a curve shows;
 * and how many there are below eval_every. */
bool posenc_curve_early(int step, int eval_every);
int posenc_curve_early_count(int eval_every);

/* The positional scheme's trained table, if it has one: its parameter under "wpe." with shape
 * (block, d), copied to out (room for rows * cols floats). *rows = 0 when there is none. */
void posenc_trained_table(const mg_gpt *g, float *out, int max, int *rows, int *cols);
/* What the positional layer adds to an all-zero embedding at positions 0..T-1 (T x d into out):
 * the fixed sinusoidal table for sin, zero for schemes acting inside attention. *nonzero tells. */
mg_status posenc_additive_table(mg_gpt *g, mg_ctx *ctx, int T, float *out, bool *nonzero);

/* ---- data for runs ---- */

typedef struct posenc_cache {
    posenc_data train[POSENC_N_TASKS], val[POSENC_N_TASKS];
    struct {
        posenc_task task;
        int L;
        posenc_data d;
    } len[POSENC_N_TASKS * POSENC_MAX_LENGTHS];
    int n_len;
} posenc_cache;

void posenc_cache_init(posenc_cache *c);
void posenc_cache_free(posenc_cache *c);

/* ---- one training run ---- */

typedef struct posenc_run_cfg {
    posenc_task task;
    char scheme[POSENC_NAME_LEN]; /* either spelling (main.c passes the registry's) */
    uint32_t seed;
    int steps, batch, eval_every;
    float lr;
    int n_lengths,
        lengths[POSENC_MAX_LENGTHS]; /* length-generalisation sets (posenc_data_make_length) */
    int eval_n; /* 0: the full sets (the spec); > 0: the first eval_n sequences of each (quick runs)
                 */
    int threads; /* kernel threads for this run (0: leave as is) */
    mg_precision precision; /* of the run's products (training and evaluation); fp32 default */
} posenc_run_cfg;

/* The spec's run: 1500 steps of 32, val every 250, lr 1e-3, lengths 48 and 64, full sets. */
posenc_run_cfg posenc_run_defaults(void);

typedef struct posenc_length_result {
    int L;
    bool done;    /* false: the scheme or the task has no answer at this length */
    char why[96]; /* when !done: "learned table has 32 rows", "perm is defined for 32 positions
                     only" */
    posenc_metrics m;
} posenc_length_result;

typedef struct posenc_result {
    posenc_run_cfg cfg;
    mg_status status; /* MG_OK, or the failure (error holds the message) */
    char error[512];
    posenc_metrics train, val;
    double best_val_acc; /* best of the evaluations at eval_every multiples and the end */
    double seconds;      /* wall time of the run: build, training and every evaluation */
    double cpu_seconds;  /* CPU time of the process over the same span (all its threads) */
    double train_seconds;
    int n_curve;
    int curve_step[POSENC_MAX_CURVE];
    double curve_val_acc[POSENC_MAX_CURVE], curve_val_loss[POSENC_MAX_CURVE];
    double curve_batch_loss[POSENC_MAX_CURVE]; /* mean minibatch loss since the previous point */
    int n_len;
    posenc_length_result len[POSENC_MAX_LENGTHS];
    /* the trained positional table (learned schemes), else table_rows = 0 */
    int table_rows, table_cols;
    float table[POSENC_L * POSENC_D];
    /* what the scheme does after training (posenc_scheme_probe) */
    posenc_probe probe;
    /* attention of every layer and head for the first val sequence */
    int32_t attn_x[POSENC_L];
    float attn[POSENC_LAYERS * POSENC_HEADS * POSENC_L * POSENC_L];
} posenc_result;

/* Called every few steps with the number of steps done and the last minibatch loss. */
typedef void (*posenc_step_fn)(void *user, int steps_done, float loss);

/* Runs one (task, scheme, seed): builds and initialises the model, trains with Adam on the
 * spec's minibatch stream, evaluates (curve, final train and val, longer lengths), records the
 * attention map and trained table. Data sets come from (and are added to) cache. A failure inside
 * the run (a scheme that cannot build, a non-finite loss) is returned and also kept in res. */
mg_status posenc_run(const posenc_run_cfg *cfg, posenc_cache *cache, posenc_step_fn fn, void *user,
                     posenc_result *res);

/* ---- reports ---- */

typedef struct posenc_report {
    const posenc_result *runs; /* successful runs, any order */
    int n_runs;
    const posenc_task *tasks; /* table order */
    int n_tasks;
    const posenc_scheme *schemes; /* table order */
    int n_schemes;
    const char *command; /* the command line that made it (shown in the Markdown) */
    double total_seconds;
    int jobs, threads_per_run;
} posenc_report;

/* The results CSV, one row per run:
 * task,scheme,seed,train_acc,val_acc,val_seq_exact,train_loss,val_loss,best_val_acc,seconds */
#define POSENC_CSV_HEADER                                                                          \
    "task,scheme,seed,train_acc,val_acc,val_seq_exact,train_loss,val_loss,best_val_acc,seconds"
/* One CSV row (no newline) for a run. */
void posenc_csv_row(const posenc_result *r, char *buf, size_t n);

/* The per-task tables as text (markdown false) or Markdown to f. */
void posenc_print_tables(FILE *f, const posenc_report *rep, bool markdown);

/* Writes into dir (which must exist): results.csv, length.csv, curves.csv, results.md,
 * curves_<task>.png, length_<task>.png (tasks that have longer sets), table_<scheme>.png (fixed
 * tables), table_<scheme>_<task>.png (trained tables, first seed), attention_<scheme>.png (first
 * task, first seed). Each file is written whole or not at all. */
mg_status posenc_write_report(const char *dir, const posenc_report *rep);
/* Writes only results.csv, length.csv and curves.csv into dir (the runs so far, while others are
 * still under way), each whole or not at all. */
mg_status posenc_write_csvs(const char *dir, const posenc_report *rep);

#ifdef __cplusplus
}
#endif
#endif
