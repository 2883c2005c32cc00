/* A custom op, written outside the minigrad tree, checked with the installed gradient checker
 * (minigrad/gradcheck.h, core library): built by tests/install/test_install.sh with nothing but
 * `pkg-config --cflags --libs minigrad-core`. The right backward must pass and a wrong one (off
 * by a factor of 2) must be caught, naming the element.
 *
 *   gradcheck_op   (exit status 0 when both hold)
 */
#include "minigrad/core.h"
#include "minigrad/gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* softsign(x) = x / (1 + |x|), d/dx = 1 / (1 + |x|)^2; `wrong` doubles the gradient */
static void softsign_backward_with(mg_ctx *ctx, mg_node *n, float factor) {
    mg_tensor *x = n->in[0];
    float *dx = mg_grad(ctx, x);
    if (!dx) return;
    for (int64_t i = 0; i < x->numel; i++) {
        float d = 1.0f + fabsf(x->data[i]);
        dx[i] += factor * n->out->grad[i] / (d * d);
    }
}
static void softsign_backward(mg_ctx *ctx, mg_node *n) { softsign_backward_with(ctx, n, 1.0f); }
static void wrong_backward(mg_ctx *ctx, mg_node *n) { softsign_backward_with(ctx, n, 2.0f); }

static const mg_op_def right_def = {.name = "softsign", .backward = softsign_backward};
static const mg_op_def wrong_def = {.name = "softsign_wrong", .backward = wrong_backward};

static mg_tensor *softsign(mg_ctx *ctx, mg_tensor *const *inputs, void *user) {
    const mg_op_def *def = user;
    mg_tensor *x = inputs[0];
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    mg_tensor *y = mg_op_output(ctx, def->name, x->ndim, x->shape);
    if (!mg_ctx_ok(ctx)) return y;
    for (int64_t i = 0; i < x->numel; i++) y->data[i] = x->data[i] / (1.0f + fabsf(x->data[i]));
    mg_op_record(ctx, def, y, 1, (mg_tensor *[]){x});
    return y;
}

int main(void) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *x = mg_tensor_new(ctx, MG_F32, 2, (int64_t[]){3, 5});
    mg_rng rng = mg_rng_make(3);
    /* away from 0, where the second derivative jumps and a finite difference is rough */
    for (int64_t i = 0; i < x->numel; i++)
        x->data[i] = (i % 2 ? -1.0f : 1.0f) * mg_rng_range(&rng, 0.3f, 2.0f);

    mg_gradcheck_report r;
    mg_status st = mg_gradcheck(softsign, (void *)&right_def, &x, 1, NULL, NULL, &r);
    printf("right backward: status %d, %lld checked, %lld failed\n", (int)st, (long long)r.checked,
           (long long)r.failed);
    if (st != MG_OK || r.checked != x->numel || r.failed != 0) {
        fprintf(stderr, "gradcheck_op: the right backward did not pass: %s\n", r.message);
        return 1;
    }
    st = mg_gradcheck(softsign, (void *)&wrong_def, &x, 1, NULL, NULL, &r);
    printf("wrong backward: status %d, %lld failed: %s\n", (int)st, (long long)r.failed, r.message);
    if (st != MG_ERR_INVALID || r.failed == 0 || strcmp(r.worst_tensor, "input 0") != 0) {
        fprintf(stderr, "gradcheck_op: the wrong backward was not caught\n");
        return 1;
    }
    mg_ctx_free(ctx);
    printf("gradcheck_op: all good\n");
    return 0;
}
