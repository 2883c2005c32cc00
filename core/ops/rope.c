/* Rotary position embedding on interleaved pairs of the last dim D of x (B,H,T,D):
 *   angle = (pos0 + t) * base^(-2i/D),   (u0, u1) -> (u0 cos - u1 sin, u0 sin + u1 cos)
 * for the pair (2i, 2i+1). A rotation's transpose is its inverse, so backward rotates dy by -angle:
 *   du0 += dy0 cos + dy1 sin,  du1 += -dy0 sin + dy1 cos
 * Angles are computed in double, then rounded: positions up to tens of thousands stay exact. */
#include "internal.h"

static void rope_apply(const float *x, float *y, const float *cs, int64_t BH, int64_t T, int64_t D,
                       float sign, bool accumulate) {
    MG_PAR_FOR(BH * T * D > 16384, r, BH * T, { /* row r = bh * T + t */
        const float *xr = x + r * D, *c = cs + r % T * D;
        float *yr = y + r * D;
        for (int64_t i = 0; i < D; i += 2) {
            float co = c[i], si = sign * c[i + 1];
            float y0 = xr[i] * co - xr[i + 1] * si, y1 = xr[i] * si + xr[i + 1] * co;
            if (accumulate)
                yr[i] += y0, yr[i + 1] += y1;
            else
                yr[i] = y0, yr[i + 1] = y1;
        }
    });
}

static void rope_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *x = n->in[0];
    float *dx = mg_grad(ctx, x);
    if (!dx) return;
    rope_apply(n->out->grad, dx, n->saved[0], x->shape[0] * x->shape[1], x->shape[2], x->shape[3], -1.0f, true);
}

const mg_op_def mg_op_def_rope = {"mg_rope", rope_backward};

mg_tensor *mg_rope(mg_ctx *ctx, mg_tensor *x, int64_t pos0, float base) {
    MG_BAIL_IF_FAILED(ctx);
    if (!mg_expect_f32(ctx, "mg_rope", "x", x)) return mg_ctx_dummy(ctx);
    if (x->ndim != 4 || x->shape[3] % 2 != 0 || pos0 < 0 || !(base > 1.0f)) {
        mg_ctx_fail(ctx, "mg_rope: x%s, pos0 %lld, base %g: need x (B,H,T,D) with D even, pos0 >= 0, base > 1",
                    MG_SHAPE(x), (long long)pos0, (double)base);
        return mg_ctx_dummy(ctx);
    }
    int64_t T = x->shape[2], D = x->shape[3];
    mg_tensor *y = mg_op_output(ctx, "mg_rope", 4, x->shape);
    float *cs = mg_ctx_alloc(ctx, (size_t)(T * D) * 4, "mg_rope cos/sin table");
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < D; i += 2) {
            double ang = (double)(pos0 + t) * pow((double)base, -(double)i / (double)D);
            cs[t * D + i] = (float)cos(ang);
            cs[t * D + i + 1] = (float)sin(ang);
        }
    rope_apply(x->data, y->data, cs, x->shape[0] * x->shape[1], T, D, 1.0f, false);
    mg_node *n = mg_op_record(ctx, &mg_op_def_rope, y, 1, (mg_tensor *[]){x});
    if (n) n->saved[0] = cs;
    return y;
}
