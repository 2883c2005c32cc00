/* What the `train` and `sample` commands of the GPT example programs (textgen, music) share.
 * train, around the library trainer (minigrad/train.h, through trainer.h): the options both take (one struct, their --help
 * rows, the checks of the float ones, the model config they make), the settings a checkpoint
 * remembers so that --resume needs only --out, the run's files in --out, and how a run ends.
 * sample: the sampling options and their checks. Each program keeps its own defaults, its own
 * extra options and its own messages where they differ.
 *
 * Ownership: nothing here allocates; strings in ex_train_opts are borrowed (argv, the defaults, or
 * the metadata of the checkpoint file being resumed, which must stay open). */
#ifndef EX_GPT_OPTS_H
#define EX_GPT_OPTS_H

#include "cli.h"
#include "trainer.h"

#include "minigrad/safetensors.h"

typedef struct ex_train_opts {
    const char *data, *out, *log, *pos, *pos_opts;
    const char *precision; /* --precision fp32|bf16 (NULL: fp32) */
    int64_t steps, batch, block, n_embd, n_layer, n_head, warmup, eval_every, eval_windows,
        ckpt_every;
    int64_t seed, threads, sample_tokens, stop_after;
    float lr, lr_min, weight_decay, clip, dropout, temperature;
    bool resume, force;
} ex_train_opts;

/* The --help texts that say something program-specific, and the smallest --block-size (0: 1). */
typedef struct ex_train_help {
    const char *out, *block, *pos, *eval_windows, *seed, *sample_tokens;
    int64_t min_block;
} ex_train_help;

/* Appends the rows --out, --resume, --force, --steps, --batch, --block-size, --n-embd,
 * --n-layer, --n-head, --pos, --pos-opts, --dropout, --lr, --lr-min, --warmup, --weight-decay,
 * --clip to t (room for 17), each numeric one with its range; returns how many. */
int ex_train_rows_model(ex_train_opts *o, const ex_train_help *h, ex_opt *t);

/* Appends --eval-every, --eval-windows, --ckpt-every, --stop-after, --seed, --threads, --log,
 * --sample-tokens, --temperature, --precision (room for 10); returns how many. */
int ex_train_rows_run(ex_train_opts *o, const ex_train_help *h, ex_opt *t);

/* The checks of the options once they are all known (given, defaults, or remembered by the
 * checkpoint of a resumed run): every numeric option of the table within its range (where, when
 * not NULL, says where the values came from in the message, see ex_check_ranges), --lr above 0,
 * and --batch x --block-size at most max_batch_tokens (the product is checked, never wrapped).
 * Prints the first failure as "PROG: ..." and returns false. */
bool ex_train_check(const char *prog, const ex_train_opts *o, const ex_opt *table, int n_opts, const char *where,
                    int64_t max_batch_tokens);

/* --precision's value (NULL: fp32) into *p; false with "PROG: --precision ..." printed if unknown. */
bool ex_precision_from(const char *prog, const char *name, mg_precision *p);
/* Whether a checked --precision value (NULL: fp32) names bf16. */
bool ex_precision_is_bf16(const char *name);
/* The start line's words for the precision: "" for fp32, else ", bf16 mixed precision on " and the
 * CPU's bf16 unit in use (AMX tiles, AVX512-BF16, or a software emulation). On the emulation it also
 * prints to stderr, once per process, that the run is slower than in fp32 and why ("PROG: ..."). */
const char *ex_precision_banner(const char *prog, bool bf16);

/* The model config from the options (vocab_size, block_size, n_embd, n_layer, n_head, dropout,
 * pos, pos_opts). --n-embd not a multiple of --n-head is refused here, naming both options; the rest
 * is checked by the library, whose message names the key and starts with "model options". The
 * message is meant to follow "PROG: ". */
mg_status ex_train_model_config(const ex_train_opts *o, int64_t vocab, mg_gpt_config *cfg);

/* ---- resuming ---- */

/* --resume needs a checkpoint in --out, and a new run must not replace one without --force.
 * Returns 0 to go on; otherwise prints why and returns the exit status 1. */
int ex_train_check_out(const char *prog, const ex_train_opts *o, const char *ckpt);
/* The same for a program with options of its own: out is the folder, ckpt the checkpoint in it. */
int ex_check_out_dir(const char *prog, const char *out, const char *ckpt, bool resume, bool force);

/* The model options of a checkpoint being resumed (its model config, pos and pos_opts). */
mg_status ex_train_opts_from_ckpt(mg_st_file *f, ex_train_opts *o);

/* A program's own setting that the checkpoint remembers: exactly one of i, f is set. */
typedef struct ex_setting {
    const char *name;
    int64_t *i;
    float *f;
} ex_setting;

#define EX_MAX_SETTINGS 24

/* The remembered settings as checkpoint metadata "PREFIX.NAME": steps, batch, warmup, eval_every,
 * eval_windows, ckpt_every, seed, the extra integers, lr, lr_min, weight_decay, clip, the extra
 * floats, and "PREFIX.precision" (fp32 or bf16). The strings live here. */
typedef struct ex_settings_meta {
    char key[EX_MAX_SETTINGS][48], val[EX_MAX_SETTINGS][32];
} ex_settings_meta;

/* Fills s from the options and appends its entries to meta; returns how many were appended. */
int ex_settings_to_meta(ex_settings_meta *s, const char *prefix, const ex_train_opts *o,
                        const ex_setting *extra, int n_extra, mg_st_meta *meta);

/* Reads back what ex_settings_to_meta wrote (keys that are absent keep their value). */
mg_status ex_settings_from_ckpt(mg_st_file *f, const char *prefix, ex_train_opts *o,
                                const ex_setting *extra, int n_extra);

/* ---- the run ---- */

/* OUT/model.safetensors, OUT/loss.png, and the log (--log, else OUT/log.jsonl). */
typedef struct ex_run_files {
    char ckpt[4096], plot[4096], log[4096];
} ex_run_files;

void ex_run_files_make(ex_run_files *f, const ex_train_opts *o);

/* The library trainer's settings from the options and files; prog names the program in messages. */
mg_train_cfg ex_train_cfg_from(const ex_train_opts *o, const ex_run_files *f, const char *prog);

/* After ex_lm_train returned MG_OK: 130 when Ctrl-C stopped it (143 for SIGTERM), 0 when
 * --stop-after did (both after saying how to continue), -1 when the run is complete and the
 * program goes on to its summary. */
int ex_train_stopped(const char *prog, const ex_train_opts *o, const mg_train_result *res);

/* The exit status of a run a signal stopped: 128 + the signal, as a shell reports it. */
int ex_interrupted_status(const mg_train_result *res);

/* The closing lines naming the checkpoint, the loss curve and the log. */
void ex_train_print_files(const char *prog, const ex_run_files *f);

/* ---- sampling ---- */

typedef struct ex_sample_opts {
    float temperature, top_p;
    int64_t top_k, seed, threads;
} ex_sample_opts;

/* Appends the rows --temperature (0..100), --top-k (0..2^31-1), --top-p (0..1) (room for 3);
 * returns how many. */
int ex_sample_rows(ex_sample_opts *o, ex_opt *t);

/* seed, or one drawn from the clock when it is negative (-1: "from the clock"). */
int64_t ex_sample_seed(int64_t seed);

#endif
