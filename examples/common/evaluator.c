/* The reusable no-gradient evaluator of evaluator.h. */
#include "evaluator.h"

#include "minigrad/checked.h"
#include "minigrad/op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void on_error(mg_ctx *ctx, const char *msg, void *user) {
    (void)ctx;
    ex_evaluator *e = user;
    if (!e->err[0]) snprintf(e->err, sizeof e->err, "%s", msg);
}

mg_status ex_evaluator_init(ex_evaluator *e, int64_t B, int64_t T) {
    memset(e, 0, sizeof *e);
    int64_t bt;
    size_t bytes;
    if (B < 1 || T < 1 || mg_ckd_mul_i64(&bt, B, T) || mg_ckd_bytes(&bytes, bt, sizeof *e->x))
        return mg_set_error(MG_ERR_INVALID, "evaluation batches of %lld windows x %lld tokens: too large (or empty)",
                            (long long)B, (long long)T);
    e->B = B, e->T = T;
    e->ctx = mg_ctx_new(0);
    e->x = malloc(bytes);
    e->y = malloc(bytes);
    if (!e->ctx || !e->x || !e->y) {
        ex_evaluator_free(e);
        return mg_set_error(MG_ERR_NOMEM, "out of memory for evaluation batches of %lld x %lld",
                            (long long)B, (long long)T);
    }
    mg_ctx_set_error_handler(e->ctx, on_error, e);
    mg_ctx_set_grad_enabled(e->ctx, false);
    return MG_OK;
}

void ex_evaluator_free(ex_evaluator *e) {
    mg_ctx_free(e->ctx);
    free(e->x);
    free(e->y);
    memset(e, 0, sizeof *e);
}

mg_status ex_evaluator_loss(ex_evaluator *e, mg_gpt *g, int64_t nb, int64_t len, float *loss) {
    mg_ctx_reset(e->ctx);
    mg_tensor *x = mg_tensor_wrap(e->ctx, MG_I32, 2, (int64_t[]){nb, len}, e->x);
    mg_tensor *y = mg_tensor_wrap(e->ctx, MG_I32, 2, (int64_t[]){nb, len}, e->y);
    mg_tensor *l = mg_gpt_loss(g, e->ctx, x, y, NULL);
    if (!mg_ctx_ok(e->ctx)) {
        mg_status st = mg_set_error(MG_ERR_INVALID, "evaluation: %s",
                                    e->err[0] ? e->err : mg_ctx_error(e->ctx));
        mg_ctx_clear_error(e->ctx);
        e->err[0] = 0;
        return st;
    }
    *loss = l->data[0];
    return MG_OK;
}
