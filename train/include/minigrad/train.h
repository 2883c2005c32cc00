/* minigrad/train.h: a training loop for any model (library libminigrad-train).
 *
 * A model describes itself with callbacks (mg_train_model): its parameter store, how to build the
 * scalar loss of the next batch, and optionally a validation loss, metadata for its checkpoint and
 * its own save/load. mg_train_run then runs the loop every model needs:
 *
 *   for each step s = 1 .. cfg.steps (continuing after the saved step when resuming):
 *     reset the step context; model.next_batch; loss = model.loss(user, ctx, dropout)
 *     zero the gradients, backward, clip the global gradient norm to cfg.clip
 *     stop if the loss or the gradient norm is not finite (divergence, below)
 *     AdamW step at mg_lr_schedule(s - 1, cfg.warmup, cfg.steps, cfg.lr, cfg.lr_min):
 *       linear warmup, then cosine decay to lr_min
 *     stop if a weight is now not finite or beyond cfg.max_weight; then model.on_step
 *     every cfg.eval_every steps and at the last one: model.eval, the validation loss
 *     the progress line, one JSON line in cfg.log_path
 *     every cfg.ckpt_every steps, at the last one, after cfg.stop_after steps and on Ctrl-C or SIGTERM:
 *       a checkpoint
 *   at the end: the PNG loss curve (cfg.plot_path), training and validation loss against step.
 *
 * Files. With cfg.ckpt = "run/model.safetensors":
 *   run/model.safetensors        the weights: model.save, else mg_checkpoint_save (every
 *                                parameter under its name), with model.meta plus "train.step"
 *   run/model.state.safetensors  the training state (mg_train_state_path): the AdamW moments and
 *                                step, each generator of model.rngs as "rng.NAME", the trainer's
 *                                dropout stream as "rng.dropout", and the loss history
 *                                ("history.loss", "history.val") so a resumed run's curve and log
 *                                cover the whole run, and "weights.checksum", the checksum of the
 *                                weights file it belongs with
 * Every file minigrad writes records a checksum of its content (minigrad/safetensors.h).
 *
 * Checkpoints are committed as a pair. Both files are first written in full (fsync'ed) as
 * "run/model.safetensors.pending" and "run/model.state.safetensors.pending"; renaming the weights
 * over run/model.safetensors commits the checkpoint; the state's rename follows (the directory is
 * fsync'ed after each rename). A kill, a power cut or a full disk at any point leaves either the
 * previous pair, or the new weights with their pending state, which the next resume renames into
 * place because it names exactly those weights. At the start of every run with cfg.ckpt set,
 * pending files that were never committed and the temporary files "<file>.tmp.<pid>" of killed
 * processes are removed. A failed save returns the error (the previous pair stays whole).
 *
 * Resuming (cfg.resume): both files must be there. The weights are loaded with model.load (else
 * mg_checkpoint_load: every parameter, with its exact shape, and nothing else; the checksum and
 * finite values checked), then the state. A pair whose steps ("train.step" and the state's "step")
 * or checksums ("weights.checksum") disagree is refused with MG_ERR_FORMAT, the message naming
 * both files and which is older. The run continues from the saved step to cfg.steps, which counts
 * the whole run. Given the same
 * configuration, a run that stops (cfg.stop_after, Ctrl-C, SIGTERM) and resumes ends bit for bit where an
 * uninterrupted one does, provided every random draw of the callbacks comes from a generator in
 * model.rngs or from the dropout stream handed to model.loss, and next_batch depends on nothing
 * else that changes between processes. Changing lr, steps or warmup on resume changes the
 * schedule of the steps still to run. A checkpoint already at cfg.steps leaves nothing to do:
 * mg_train_run returns MG_OK with res.steps_run 0.
 *
 * Signals (cfg.catch_sigint, on by default; despite its name it covers SIGTERM too, which `kill`,
 * `timeout` and job schedulers send): the first Ctrl-C (SIGINT) or SIGTERM lets the current step
 * finish, saves a checkpoint (when cfg.ckpt is set) and returns MG_OK with res.interrupted and
 * res.stop_signal; a second signal of either kind ends the process as usual. The previous SIGINT
 * and SIGTERM handlers are restored on return. The flag is process-wide: run one mg_train_run
 * with catch_sigint at a time.
 *
 * Divergence: the run stops, and the step at fault is not saved, when
 *   - the loss or the gradient norm of step s is NaN or infinite (before its optimizer step);
 *   - the optimizer step of step s leaves a weight NaN, infinite or larger in magnitude than
 *     cfg.max_weight (the weights exploded);
 *   - the validation loss after step s is infinite, or NaN after an earlier one was finite.
 * The last checkpoint written (the last good one, of a step before s) stays as it was.
 * mg_train_run returns MG_ERR_NONFINITE with res.diverged (res.step is the last step before s),
 * and mg_last_error names what happened, step s, and the step of the checkpoint kept.
 *
 * Testing aid: MINIGRAD_TRAIN_CRASH=POINT[:N] in the environment kills the process with SIGKILL
 * during the N-th checkpoint (default 1) of a call: POINT "weights" after the pending weights are
 * written, "state" after the pending state is written, "commit" after the weights are renamed into
 * place and before the state is.
 *
 * Files that cannot be written: a log line that does not go through (a full disk) stops the run
 * with MG_ERR_IO naming the log file; the checkpoints written before it stay. A loss curve that
 * cannot be written makes the run's status MG_ERR_IO, naming the PNG (the checkpoints are saved).
 *
 * Errors: a bad configuration or model description returns MG_ERR_INVALID before anything is
 * touched, naming the field ("train: cfg.lr must be positive and finite, got -1"). A failure raised
 * on the step context (a shape error in model.loss) stops the run with MG_ERR_INVALID naming the
 * step; the context's handler is the trainer's, so it does not abort the process.
 *
 * Ownership: everything passed in is borrowed for the call; nothing outlives mg_train_run.
 *
 * Data parallel (a build with MPI, -Dmpi; the program started by mpirun/mpiexec -np N): the N
 * processes (ranks) train one model together, with no change to the program. MPI is started by
 * the first mg_train_run (and finished at exit); a program started without mpirun is one rank.
 * Every rank builds the same global batch (next_batch, so the data generators stay the same on
 * every rank); rank r computes model.loss_rows on its rows, [r B / N, (r + 1) B / N) of the B =
 * model.batch_rows rows, and backward. The gradients are summed over the ranks in a fixed order
 * (rank 0 + rank 1 + ... for every element, whatever the MPI library), then every rank clips and
 * takes the same AdamW step: one step per global batch, as a single process with the same batch
 * takes, to float32 rounding, and a run with N ranks repeats bit for bit. Dropout: with N > 1 each
 * rank draws from its own stream, seeded each step from the trainer's dropout stream and the rank.
 * A model without loss_rows is trained whole on every rank (the same result, no speed-up).
 * With cfg.zero1 each rank keeps AdamW's moments of its part of the parameters only, updates
 * that part and the parts are gathered (the same weights bit for bit as without it); rank 0 holds
 * the whole moments only while it writes a checkpoint, every rank while it resumes.
 * MINIGRAD_TRAIN_ZERO1=1 in the environment turns it on for a program that does not set it.
 * The gradients go in buckets as backward finishes them (the last layers' first), on a thread of
 * their own with blocking collectives, so the exchange hides behind the rest of backward
 * (MINIGRAD_TRAIN_OVERLAP=0 in the environment sends them after backward instead, for comparison;
 * the sums are the same bit for bit).
 * Rank 0 alone prints the progress line, writes the log (with "ranks", "comm_s", the seconds the
 * step waited on communication, and "comm_busy_s", the seconds its gradients were under way), the
 * loss curve and the checkpoints: one pair for the job, the
 * same files as a single process writes, so a single process or another number of ranks resumes
 * it (every rank reads it: the path must be on a file system every rank sees). Ranks other than 0
 * print nothing on stdout (the library sets their stdout to /dev/null when it is loaded;
 * MINIGRAD_MPI_STDOUT=all keeps it). A failure on one rank (its batch, its loss, out of memory)
 * stops every rank at that step: each returns an error whose message names the failing rank and
 * its cause ("rank 1 of 2 failed, so every rank stopped: ..."); a rank that dies (killed, a crash)
 * or fails before mg_train_run ends the job through mpirun, which names the rank and the signal or
 * exit status. The last committed checkpoint stays whole in every case. A build without MPI
 * started by mpirun as several processes refuses to train. Testing aid: MINIGRAD_TRAIN_KILL=R:S
 * kills rank R (SIGKILL) at the start of step S.
 *
 * A model that is not a GPT, in outline (README.md has it whole; the library's test suite compiles
 * and runs that copy): a 2-layer MLP with fresh points every step and a validation set.
 *
 *   static mg_status mlp_batch(void *user) {
 *       mlp *m = user;
 *       points(&m->data, m->x, m->y);
 *       return MG_OK;
 *   }
 *   static mg_tensor *mlp_loss(void *user, mg_ctx *ctx, mg_rng *dropout) {
 *       mlp *m = user;
 *       return mlp_forward(m, ctx, m->x, m->y);
 *   }
 *   static mg_status mlp_eval(void *user, float *val_loss) {
 *       mlp *m = user;
 *       mg_ctx_reset(m->vctx);
 *       *val_loss = mlp_forward(m, m->vctx, m->vx, m->vy)->data[0];
 *       return MG_OK;
 *   }
 *   ...
 *       mg_train_model model = {.params = m.P, .user = &m, .next_batch = mlp_batch, .loss = mlp_loss,
 *                               .eval = mlp_eval, .rngs = {&m.data}, .rng_names = {"data"}, .n_rngs = 1};
 *       mg_train_cfg cfg = mg_train_defaults();
 *       cfg.steps = 300, cfg.warmup = 20, cfg.lr = 3e-2f, cfg.lr_min = 3e-3f, cfg.eval_every = 50;
 *       cfg.ckpt = "mlp.safetensors";
 *       mg_train_result res;
 *       mg_status st = mg_train_run(&model, &cfg, &res);
 */
#ifndef MINIGRAD_TRAIN_H
#define MINIGRAD_TRAIN_H

#include "minigrad/export.h"

#include "minigrad/base.h"
#include "minigrad/params.h"
#include "minigrad/rng.h"
#include "minigrad/safetensors.h"
#include "minigrad/tensor.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Generators a model may list for exact resume (the trainer's dropout stream comes on top). */
#define MG_TRAIN_MAX_RNGS 8

/* What the trainer needs to know of a model. Only params and loss (or loss_rows) are required. */
typedef struct mg_train_model {
    mg_params *params; /* what AdamW updates and the checkpoints hold (allocated) */
    void *user;        /* handed to every callback */
    /* Gets the next training batch ready; called once per step, before loss. Anything but MG_OK
     * stops the run with that status and message. */
    mg_status (*next_batch)(void *user);
    /* The scalar training loss of the current batch, built on ctx (reset before each call, so
     * what is made on it lives for this step only). dropout: the trainer's stream for dropout
     * masks and any other training noise, saved with the state. NULL, or a failure raised on ctx,
     * fails the step. */
    mg_tensor *(*loss)(void *user, mg_ctx *ctx, mg_rng *dropout);
    /* Sets *val_loss to the validation loss, or NAN when there is none (not recorded then).
     * Called every cfg.eval_every steps and after the last; it brings its own context. Anything
     * but MG_OK stops the run with that status and message, saving nothing more. */
    mg_status (*eval)(void *user, float *val_loss);
    /* Called after each optimizer step (step counts from 1), before that step's validation. */
    void (*on_step)(void *user, int64_t step, float loss);
    /* Writes the weights to path, atomically, with the given metadata (model.meta plus the
     * trainer's "train.step"). Default: mg_checkpoint_save(path, params, false, meta, n_meta). */
    mg_status (*save)(void *user, const char *path, const mg_st_meta *meta, int n_meta);
    /* Reads the weights of path into params. Default: mg_checkpoint_load(path, params, NULL). */
    mg_status (*load)(void *user, const char *path);
    const mg_st_meta *meta; /* extra metadata for the weights file (e.g. a tokenizer) */
    int n_meta;
    /* The model's and the data's own generators, saved as "rng.NAME" and restored on resume.
     * Names are unique, not "dropout", and at most 32 characters. */
    mg_rng *rngs[MG_TRAIN_MAX_RNGS];
    const char *rng_names[MG_TRAIN_MAX_RNGS];
    int n_rngs;
    /* Tokens (or samples) per step for the speed in the progress line and the log; 0: the speed
     * is given in steps per second. */
    int64_t tokens_per_step;
    /* Data parallelism (see "Data parallel" below). batch_rows: the rows (samples) of every
     * global batch. loss_rows: the share of rows [row0, row0 + nrows) of the current batch in its
     * loss, built on ctx: the shares of the parts of any split of the batch add up to what loss
     * would return for the whole of it (for a mean over the batch: the part's mean times its share
     * of the batch). With both set the trainer splits every batch over the ranks; a single process
     * calls loss (or loss_rows(0, batch_rows) when loss is NULL). */
    int64_t batch_rows;
    mg_tensor *(*loss_rows)(void *user, mg_ctx *ctx, mg_rng *dropout, int64_t row0, int64_t nrows);
    /* What tokens_per_step counts, for the progress line ("<unit>/s") and the log
     * ("<unit>_per_s"); NULL: tokens. */
    const char *speed_unit;
} mg_train_model;

typedef struct mg_train_cfg {
    int64_t steps;      /* optimizer steps of the whole run (>= 1); a resumed run continues to it */
    int64_t warmup;     /* linear warmup steps (>= 0) */
    float lr, lr_min;   /* peak (> 0) and final (>= 0) learning rate */
    float weight_decay; /* decoupled AdamW decay (>= 0), skipped for MG_NO_DECAY parameters */
    float beta1, beta2, eps; /* AdamW moments: betas in [0, 1), eps > 0 */
    float clip;         /* global gradient-norm clip (0: none, the norm is still watched) */
    int64_t eval_every; /* model.eval every N steps (0: only after the last) */
    int64_t ckpt_every; /* a checkpoint every N steps (0: only at the end) */
    int64_t stop_after; /* stop after this many steps of this call, saving a checkpoint that a
                           resume continues (0: run to steps); for training in pieces */
    uint64_t seed;      /* of the dropout stream (the model seeds its own generators) */
    const char *ckpt;   /* weights path; NULL: no checkpoints, so no resume and no stop_after */
    bool resume;        /* continue from ckpt and its state file */
    const char *log_path;    /* JSON lines, one per step (NULL: none); appended to on resume */
    const char *plot_path;   /* PNG loss curve written at the end (NULL: none) */
    const char *plot_title;  /* its title (NULL: prog) */
    const char *plot_ylabel; /* its value axis (NULL: "loss") */
    const char *prog;        /* name in messages and on the progress line */
    bool quiet;              /* nothing on stdout: no progress line, no notes (the log is kept) */
    bool catch_sigint;       /* Ctrl-C or SIGTERM saves and stops (see Signals above) */
    float max_weight;        /* a weight beyond this in magnitude after an update is divergence
                                (0: no bound; non-finite weights always are) */
    bool zero1;              /* data parallel: shard AdamW's moments over the ranks (ZeRO stage 1;
                                see "Data parallel"); ignored by a single process */
    mg_precision precision;  /* of the training steps' products (mg_ctx_set_precision); fp32 default */
} mg_train_cfg;

/* steps 1000, warmup 100, lr 1e-3 -> 1e-4, weight decay 0.1, betas (0.9, 0.95), eps 1e-8,
 * clip 1, eval and checkpoint every 250 steps, seed 1, prog "train", catch_sigint on, max_weight
 * 1e6; no files. */
MG_API mg_train_cfg mg_train_defaults(void);

typedef struct mg_train_result {
    int64_t step;         /* steps done in total */
    int64_t steps_run;    /* steps done by this call (the others were done before a resume) */
    float loss, val_loss; /* last training loss, last validation loss (NAN if none) */
    bool interrupted;     /* Ctrl-C or SIGTERM stopped the run (after saving, when cfg.ckpt is set) */
    bool stopped;         /* cfg.stop_after stopped the run before cfg.steps, after saving */
    bool diverged;        /* divergence stopped it (see Divergence); the step at fault not saved */
    int stop_signal;      /* with interrupted: SIGINT or SIGTERM (a program exits 128 + it); else 0.
                             It sits in what was padding: the struct kept its size and layout */
    double seconds;       /* wall time of the call */
    double tokens_per_s;  /* recent speed (0 when model.tokens_per_step is 0) */
    double steps_per_s;
    size_t peak_arena;    /* bytes of step activations at the peak */
    int ranks;            /* processes that trained together (1 without MPI) */
    double comm_s;        /* seconds per step this rank waited on communication (mean over the call) */
    double comm_busy_s;   /* seconds per step its communication thread spent sending gradients, mostly
                             hidden behind backward */
} mg_train_result;

/* Runs (or resumes) training. MG_OK when the run reached cfg.steps or was stopped on purpose
 * (stop_after, Ctrl-C, SIGTERM) after saving; otherwise an error status with mg_last_error, divergence
 * included. res is filled either way. */
MG_API mg_status mg_train_run(const mg_train_model *model, const mg_train_cfg *cfg, mg_train_result *res);

/* This process's rank and the number of ranks training together (0 and 1 without MPI, or when
 * the program was not started by mpirun/mpiexec). Starts MPI in a launched process. */
MG_API int mg_train_rank(void);
MG_API int mg_train_ranks(void);

/* The state file beside weights path ckpt: "dir/name.safetensors" -> "dir/name.state.safetensors",
 * anything else gets ".state.safetensors" appended. MG_ERR_INVALID if it does not fit in n. */
MG_API mg_status mg_train_state_path(const char *ckpt, char *buf, size_t n);

/* The PNG loss curve of a JSON-lines log written by mg_train_run (title may be NULL). A log that
 * cannot be opened is MG_ERR_IO; one without a single training step (a "step" of 1..2^31 and a
 * "loss" on one line) is MG_ERR_FORMAT naming the log and its first unusable line. */
MG_API mg_status mg_train_plot_log(const char *log_path, const char *png_path, const char *title);

/* ---- the progress reporter, on its own for loops of your own ----
 *
 * On a terminal, a live line: progress bar, step/total, loss, last validation loss, speed, elapsed
 * time and ETA. Otherwise about 50 plain lines over the run plus one at each validation. The JSON
 * log has one object per step: step, loss, lr, tokens_per_s (steps_per_s when per_step is set),
 * grad_norm, elapsed_s, and val_loss on the steps where it was measured. MINIGRAD_NO_TTY in the
 * environment forces plain lines. */
typedef struct mg_train_progress {
    const char *prog;
    bool tty, quiet, per_step; /* quiet: nothing on stdout; per_step: the speed counts steps */
    FILE *log;
    int64_t total, first_step;
    double t0, last_print; /* t0: mg_time() at open */
    double last_val;
    int64_t plain_every;
    bool line_open;
    char *log_name; /* the log's path, for messages (owned; freed by close) */
    int log_err;    /* errno of the log's first failed write, 0 while every line went through */
    int ranks;      /* > 1: each log line also has "ranks", "comm_s" and "comm_busy_s" (set after opening) */
    double comm_s;  /* the seconds the step waited on communication, for the next line */
    double comm_busy_s; /* the seconds the gradients were under way (behind backward, mostly) */
    /* What the speed counts when not per_step (set after opening): the line shows "<unit>/s" and
     * the log names it "<unit>_per_s". NULL: tokens ("tok/s", "tokens_per_s"). */
    const char *speed_unit;
} mg_train_progress;

/* A duration as the progress line shows it: "1h02m", "3m12s", "45s" (negative or non-finite: "0s").
 * Returns buf. */
MG_API char *mg_train_fmt_duration(double seconds, char *buf, size_t n);

/* log_path may be NULL; append keeps what the earlier part of a resumed run wrote. Set quiet or
 * per_step after opening. */
MG_API mg_status mg_train_progress_open(mg_train_progress *p, const char *prog, int64_t total_steps,
                                        int64_t first_step, const char *log_path, bool append);
/* step: the step just finished, counting from 1. speed: tokens (or steps) per second.
 * grad_norm, val_loss: NAN when not measured (val_loss is then left out of the log line).
 * Each log line is written at once, unbuffered: MG_ERR_IO naming the log file and the reason when
 * it could not be written (a full disk), and the part of the line that got in is cut off again, so
 * the log holds whole lines only; from then on every call returns that error and writes no more
 * lines, so the log never has a hole. */
MG_API mg_status mg_train_progress_step(mg_train_progress *p, int64_t step, float loss, float lr, double speed,
                                        float grad_norm, float val_loss);
/* Prints a message on its own line without garbling the live line. */
MG_API void mg_train_progress_note(mg_train_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Ends the live line and closes the log: MG_ERR_IO naming the log file when a line was lost, or
 * closing it failed. */
MG_API mg_status mg_train_progress_close(mg_train_progress *p);

#ifdef __cplusplus
}
#endif
#endif
