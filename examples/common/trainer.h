/* GPT language models on the library trainer (minigrad/train.h), for the text and music
 * generators: batches of B x T token ids with their next-token targets, mg_gpt_loss with dropout
 * from the trainer's stream, the weights written by mg_gpt_save (GPT-2 names, the model config in
 * the metadata) and checked by mg_gpt_load when resuming. A program describes its data, its
 * validation and what its checkpoint remembers (ex_lm_task); the loop, its files, resume,
 * Ctrl-C and divergence are the library's (train.h says how they behave).
 *
 * Ownership: nothing here outlives ex_lm_train; the model and the task are borrowed.
 */
#ifndef EX_TRAINER_H
#define EX_TRAINER_H

#include "minigrad/gpt.h"
#include "minigrad/train.h"

typedef struct ex_lm_task {
    void *user;
    int64_t B, T; /* batch shape */
    /* Fills ids and targets (B*T each, row-major (B,T)) for the next step; targets may hold -1
     * (ignored). Draws only from the task's own generators (listed below, so they are saved). */
    void (*next_batch)(void *user, int32_t *ids, int32_t *targets);
    /* Mean validation loss (NAN if there is no validation data). Runs without gradients. */
    float (*eval)(void *user, mg_gpt *g);
    mg_rng *rngs[MG_TRAIN_MAX_RNGS];
    const char *rng_names[MG_TRAIN_MAX_RNGS];
    int n_rngs;
    const mg_st_meta *meta; /* extra metadata for the weights file (e.g. a tokenizer) */
    int n_meta;
} ex_lm_task;

/* Runs (or resumes) training of g with mg_train_run. A divergence message also names the options
 * that help (--lr, --clip). */
mg_status ex_lm_train(mg_gpt *g, const mg_train_cfg *cfg, const ex_lm_task *task, mg_train_result *res);

#endif
