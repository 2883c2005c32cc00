/* Evaluation without gradients for the GPT example programs: (B, T) token buffers and a context
 * made once and reused across batches, whose model errors (a token id out of range, a window
 * longer than the model's context) are caught and returned as a status instead of aborting.
 *
 * Ownership: ex_evaluator_init allocates the buffers and the context, ex_evaluator_free releases
 * them (a zeroed evaluator may be freed). */
#ifndef EX_EVALUATOR_H
#define EX_EVALUATOR_H

#include "minigrad/gpt.h"

typedef struct ex_evaluator {
    mg_ctx *ctx;
    int32_t *x, *y; /* (B,T) inputs and targets; the caller fills them */
    int64_t B, T;
    char err[512]; /* the first model error raised on ctx since the last batch */
} ex_evaluator;

/* B, T at least 1; MG_ERR_INVALID when B x T tokens overflow the address space. */
mg_status ex_evaluator_init(ex_evaluator *e, int64_t B, int64_t T);
void ex_evaluator_free(ex_evaluator *e);

/* The mean loss over the targets of x and y read as (nb, len), nb <= B and len <= T (targets < 0
 * are ignored). A model error gives MG_ERR_INVALID with "evaluation: <the error>". */
mg_status ex_evaluator_loss(ex_evaluator *e, mg_gpt *g, int64_t nb, int64_t len, float *loss);

#endif
