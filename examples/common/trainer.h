/* The training loop the text and music generators share: AdamW with warmup + cosine, gradient
 * clipping, periodic validation, atomic checkpoints every N steps and at the end, exact resume,
 * Ctrl-C saving a checkpoint before it stops, a non-finite loss stopping with the last good
 * checkpoint kept, a live progress line, JSON-lines logs and a PNG loss curve.
 *
 * Files: the weights go to cfg->ckpt (a safetensors file any GPT-2 tool reads); the training
 * state (AdamW moments, step, RNG states, loss history) to ex_state_path(cfg->ckpt), beside it.
 * Resuming needs both. Ownership: nothing here outlives ex_train; the task is borrowed.
 */
#ifndef EX_TRAINER_H
#define EX_TRAINER_H

#include "minigrad/gpt.h"

#define EX_MAX_RNGS 4

typedef struct ex_train_cfg {
    int64_t steps;        /* total optimizer steps of the whole run (resumed runs continue to it) */
    int64_t warmup;       /* linear warmup steps */
    float lr, lr_min;     /* peak and final learning rate */
    float weight_decay, beta1, beta2;
    float clip;           /* global grad-norm clip (0: none) */
    int64_t eval_every;   /* validation every N steps (0: only at the end) */
    int64_t ckpt_every;   /* checkpoint every N steps (0: only at the end) */
    uint64_t seed;        /* dropout stream (the task seeds its own data stream) */
    const char *ckpt;     /* weights path (required) */
    const char *log_path; /* JSON lines (NULL: none) */
    const char *plot_path;/* PNG loss curve at the end (NULL: none) */
    const char *plot_title; /* its title (NULL: prog) */
    bool resume;          /* continue from ckpt + its state file */
    int64_t stop_after;   /* stop after this many steps of this invocation, saving a checkpoint that
                             --resume continues (0: run to `steps`); for training in pieces */
    const char *prog;     /* name in messages */
} ex_train_cfg;

/* Defaults: lr 1e-3 -> 1e-4, warmup 100, wd 0.1, betas (0.9, 0.95), clip 1, eval/ckpt every 250. */
ex_train_cfg ex_train_defaults(void);

typedef struct ex_task {
    void *user;
    int64_t B, T; /* batch shape */
    /* Fills ids and targets (B*T each, row-major (B,T)) for the next step; targets may hold -1
     * (ignored). Draws only from the task's own generators (listed below, so they are saved). */
    void (*next_batch)(void *user, int32_t *ids, int32_t *targets);
    /* Mean validation loss (NAN if there is no validation data). Runs without gradients. */
    float (*eval)(void *user, mg_gpt *g);
    mg_rng *rngs[EX_MAX_RNGS];
    const char *rng_names[EX_MAX_RNGS];
    int n_rngs;
    const mg_st_meta *meta; /* extra metadata for the weights file (e.g. a tokenizer) */
    int n_meta;
} ex_task;

typedef struct ex_train_result {
    int64_t step;          /* steps done in total */
    int64_t steps_run;     /* steps done by this call (the rest were done before a resume) */
    float loss, val_loss;  /* last training loss, last validation loss (NAN if none) */
    bool interrupted;      /* Ctrl-C: a checkpoint was saved */
    bool diverged;         /* non-finite loss: stopped, last good checkpoint kept */
    double seconds, tokens_per_s;
    size_t peak_arena;     /* bytes of activation memory at the peak */
} ex_train_result;

/* Runs (or resumes) training. Returns MG_OK when the run finished or was interrupted and saved;
 * an error status (message in mg_last_error) otherwise, including divergence. */
mg_status ex_train(mg_gpt *g, const ex_train_cfg *cfg, ex_task *task, ex_train_result *res);

/* "<dir>/name.safetensors" -> "<dir>/name.state.safetensors" (else appends ".state.safetensors"). */
void ex_state_path(const char *ckpt, char *buf, size_t n);

/* Writes the PNG loss curve from a JSON-lines log written by ex_train. */
mg_status ex_plot_log(const char *log_path, const char *png_path, const char *title);

#endif
