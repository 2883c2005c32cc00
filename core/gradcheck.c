/* The gradient checker: mg_backward against central finite differences in float64. */
#include "minigrad/gradcheck.h"

#include "minigrad/op.h"
#include "minigrad/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mg_gradcheck_opts mg_gradcheck_defaults(void) {
    return (mg_gradcheck_opts){.eps = 1e-2, .atol = 1e-3, .rtol = 1e-2, .max_per_tensor = 0, .seed = 0x9e3779b9u};
}

/* ---- the scalar L = sum_i y_i R_i as an op of its own ----
 * Its backward seeds y's gradient with exactly dL * R, whatever the other ops do; its forward value
 * is only for show (the numeric passes accumulate L in float64 themselves). */
static void wsum_backward(mg_ctx *ctx, mg_node *n) {
    mg_tensor *y = n->in[0];
    const float *R = n->saved[0];
    float *gy = mg_grad(ctx, y);
    if (!gy) return;
    const float g = n->out->grad[0];
    for (int64_t i = 0; i < y->numel; i++) gy[i] += g * R[i];
}

static const mg_op_def wsum_def = {"mg_gradcheck (weighted sum of the output)", wsum_backward};

static mg_tensor *weighted_sum(mg_ctx *ctx, mg_tensor *y, const float *R) {
    mg_tensor *L = mg_op_output(ctx, wsum_def.name, 0, NULL);
    if (!mg_ctx_ok(ctx)) return NULL;
    double acc = 0.0;
    for (int64_t i = 0; i < y->numel; i++) acc += (double)y->data[i] * R[i];
    L->data[0] = (float)acc;
    mg_node *n = mg_op_record(ctx, &wsum_def, L, 1, (mg_tensor *[]){y});
    if (n) n->saved[0] = (void *)R;
    return L;
}

/* ---- one checked tensor: an input or a trainable parameter ---- */
typedef struct {
    float *data; /* the caller's values, perturbed in place one element at a time */
    int64_t numel;
    int ndim;
    int64_t shape[MG_MAX_DIMS];
    char name[64];
    float *grad; /* the analytic gradient (a copy; zeros when none reached the tensor) */
} checked;

typedef struct {
    mg_gradcheck_fn fn;
    void *user;
    mg_tensor *const *inputs;
    int n_inputs;
    mg_ctx *ctx;
    float *R;
    float *y_up; /* the output with the element moved up, kept while it is moved down */
    int64_t n_out;
    int64_t out_shape[MG_MAX_DIMS];
    int out_ndim;
    mg_tensor **views; /* the last evaluation's input views (in its arena) */
} runner;

static void quiet_handler(mg_ctx *ctx, const char *msg, void *user) {
    (void)ctx, (void)msg, (void)user; /* the context keeps the message; the check reports it */
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t off = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < ndim && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, i ? ",%lld" : "%lld", (long long)shape[i]);
    if (off < n) snprintf(buf + off, n - off, ")");
}

/* "[3,1]" for those coordinates ("" for a scalar). */
static void coord_str(char *buf, size_t n, int ndim, const int64_t *coord) {
    buf[0] = 0;
    if (ndim == 0) return;
    size_t off = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, i ? ",%lld" : "%lld", (long long)coord[i]);
    if (off < n) snprintf(buf + off, n - off, "]");
}

/* The coordinates of flat index j in a row-major tensor of that shape. */
static void unravel(int64_t j, int ndim, const int64_t *shape, int64_t *coord) {
    for (int d = ndim - 1; d >= 0; d--) {
        int64_t s = shape[d] > 0 ? shape[d] : 1;
        coord[d] = j % s;
        j /= s;
    }
}

/* Runs fn once on fresh views of the inputs. On success *out is its float32 output. `when` says
 * which evaluation this is, for the message. */
static mg_status evaluate(runner *r, const char *when, mg_tensor **out) {
    mg_ctx *ctx = r->ctx;
    mg_ctx_reset(ctx);
    mg_ctx_set_grad_enabled(ctx, true);
    mg_tensor **views = mg_ctx_alloc(ctx, (size_t)(r->n_inputs + 1) * sizeof *views, "mg_gradcheck input views");
    r->views = views;
    for (int k = 0; views && k < r->n_inputs; k++) {
        const mg_tensor *in = r->inputs[k];
        views[k] = mg_tensor_wrap(ctx, MG_F32, in->ndim, in->shape, in->data);
        mg_tensor_set_requires_grad(views[k], true);
    }
    if (!mg_ctx_ok(ctx))
        return mg_set_error(MG_ERR_NOMEM, "mg_gradcheck: cannot make the input views: %s", mg_ctx_error(ctx));
    mg_tensor *y = r->fn(ctx, views, r->user);
    if (!mg_ctx_ok(ctx))
        return mg_set_error(MG_ERR_INVALID, "mg_gradcheck: the forward failed%s: %s", when, mg_ctx_error(ctx));
    if (!y) return mg_set_error(MG_ERR_INVALID, "mg_gradcheck: the forward returned NULL%s", when);
    if (y->dtype != MG_F32)
        return mg_set_error(MG_ERR_INVALID, "mg_gradcheck: the forward returned an int32 tensor%s: only a float32 "
                                              "output can be differentiated", when);
    *out = y;
    return MG_OK;
}

/* The output at the current values of inputs and parameters, checked to have the shape of the
 * analytic pass's. */
static mg_status evaluate_same(runner *r, const char *when, mg_tensor **out) {
    mg_tensor *y;
    mg_status st = evaluate(r, when, &y);
    if (st != MG_OK) return st;
    bool same = y->numel == r->n_out && y->ndim == r->out_ndim;
    for (int d = 0; same && d < y->ndim; d++) same = y->shape[d] == r->out_shape[d];
    if (!same) {
        char a[64], b[64];
        shape_str(a, sizeof a, r->out_ndim, r->out_shape);
        shape_str(b, sizeof b, y->ndim, y->shape);
        return mg_set_error(MG_ERR_INVALID, "mg_gradcheck: the output changed shape from %s to %s%s: the forward "
                                              "must compute the same thing every time", a, b, when);
    }
    *out = y;
    return MG_OK;
}

static mg_status check_args(mg_gradcheck_fn fn, mg_tensor *const *inputs, int n_inputs, mg_params *params,
                            const mg_gradcheck_opts *o) {
    if (!fn) return mg_set_error(MG_ERR_INVALID, "mg_gradcheck: no forward function (fn is NULL)");
    if (n_inputs < 0) return mg_set_error(MG_ERR_INVALID, "mg_gradcheck: n_inputs is %d (must be >= 0)", n_inputs);
    if (n_inputs > 0 && !inputs)
        return mg_set_error(MG_ERR_INVALID, "mg_gradcheck: n_inputs is %d but inputs is NULL", n_inputs);
    for (int k = 0; k < n_inputs; k++) {
        const mg_tensor *t = inputs[k];
        if (!t) return mg_set_error(MG_ERR_INVALID, "mg_gradcheck: input %d is NULL", k);
        char s[64];
        shape_str(s, sizeof s, t->ndim >= 0 && t->ndim <= MG_MAX_DIMS ? t->ndim : 0, t->shape);
        if (t->dtype != MG_F32)
            return mg_set_error(MG_ERR_INVALID, "mg_gradcheck: input %d%s is int32, not float32: only float inputs "
                                                "are differentiated; pass ids and targets to fn through `user`", k, s);
        if (t->ndim < 0 || t->ndim > MG_MAX_DIMS)
            return mg_set_error(MG_ERR_INVALID, "mg_gradcheck: input %d has %d dims (0..%d allowed)", k, t->ndim,
                                MG_MAX_DIMS);
        if (t->numel > 0 && !t->data) return mg_set_error(MG_ERR_INVALID, "mg_gradcheck: input %d%s has no data", k, s);
    }
    if (params && !mg_params_allocated(params))
        return mg_set_error(MG_ERR_INVALID, "mg_gradcheck: the parameter store is not allocated (call mg_params_alloc "
                                            "first)");
    if (!(o->eps > 0.0) || !isfinite(o->eps))
        return mg_set_error(MG_ERR_INVALID, "mg_gradcheck: eps %g must be finite and > 0", o->eps);
    if (!(o->atol >= 0.0) || !(o->rtol >= 0.0) || !isfinite(o->atol) || !isfinite(o->rtol))
        return mg_set_error(MG_ERR_INVALID, "mg_gradcheck: atol %g and rtol %g must be finite and >= 0", o->atol,
                            o->rtol);
    if (o->max_per_tensor < 0)
        return mg_set_error(MG_ERR_INVALID, "mg_gradcheck: max_per_tensor %lld must be >= 0 (0 checks every element)",
                            (long long)o->max_per_tensor);
    return MG_OK;
}

/* Copies the message into the report and sets it as the thread's last error. */
static mg_status finish(mg_status st, mg_gradcheck_report *rep) {
    snprintf(rep->message, sizeof rep->message, "%.255s", mg_last_error());
    return st;
}

/* The analytic pass: fn at the unperturbed point, L's backward, each checked tensor's gradient
 * copied out (inputs first, then parameters, as in T). */
static mg_status analytic(runner *r, checked *T, const mg_gradcheck_opts *o, mg_params *params) {
    mg_tensor *y;
    mg_status st = evaluate(r, "", &y);
    if (st != MG_OK) return st;
    char ys[64];
    shape_str(ys, sizeof ys, y->ndim, y->shape);
    if (y->numel == 0) return mg_set_error(MG_ERR_INVALID, "mg_gradcheck: the output%s has no elements", ys);
    if (!mg_requires_grad(y))
        return mg_set_error(MG_ERR_INVALID, "mg_gradcheck: the output%s has no gradient path: it depends on no "
                                              "input view and no parameter that requires a gradient (build it from "
                                              "the views fn is given, with gradients enabled)", ys);
    for (int64_t i = 0; i < y->numel; i++)
        if (!isfinite(y->data[i])) {
            int64_t c[MG_MAX_DIMS];
            char cs[96];
            unravel(i, y->ndim, y->shape, c);
            coord_str(cs, sizeof cs, y->ndim, c);
            return mg_set_error(MG_ERR_NONFINITE, "mg_gradcheck: the output%s is not finite at the unperturbed point: "
                                                  "element %s is %g", ys, cs, (double)y->data[i]);
        }
    r->n_out = y->numel;
    r->out_ndim = y->ndim;
    memcpy(r->out_shape, y->shape, sizeof r->out_shape);
    r->R = malloc((size_t)r->n_out * sizeof(float));
    r->y_up = malloc((size_t)r->n_out * sizeof(float));
    if (!r->R || !r->y_up) return mg_set_error(MG_ERR_NOMEM, "mg_gradcheck: out of memory for the output's weights");
    mg_rng rng = mg_rng_make(o->seed);
    for (int64_t i = 0; i < r->n_out; i++) r->R[i] = mg_rng_range(&rng, -1.0f, 1.0f);

    if (params) mg_params_zero_grad(params);
    mg_tensor *L = weighted_sum(r->ctx, y, r->R);
    if (L) mg_backward(r->ctx, L);
    if (!mg_ctx_ok(r->ctx))
        return mg_set_error(MG_ERR_INVALID, "mg_gradcheck: the backward failed: %s", mg_ctx_error(r->ctx));
    int t = 0;
    for (int k = 0; k < r->n_inputs; k++, t++)
        if (r->views[k]->grad) memcpy(T[t].grad, r->views[k]->grad, (size_t)T[t].numel * sizeof(float));
    for (int i = 0; params && i < mg_params_len(params); i++) {
        mg_tensor *p = mg_params_at(params, i);
        if (!mg_requires_grad(p)) continue;
        memcpy(T[t++].grad, p->grad, (size_t)p->numel * sizeof(float));
    }
    return MG_OK;
}

/* The step actually taken in float32: x +- eps rounded, at least one ulp away from x. */
static float step_up(float x, double eps) {
    float v = (float)((double)x + eps);
    return v > x ? v : nextafterf(x, INFINITY);
}
static float step_down(float x, double eps) {
    float v = (float)((double)x - eps);
    return v < x ? v : nextafterf(x, -INFINITY);
}

/* Compares one element and keeps the worst. */
static void compare(mg_gradcheck_report *rep, const checked *c, int64_t j, double a, double num,
                    const mg_gradcheck_opts *o) {
    const double diff = fabs(a - num), tol = o->atol + o->rtol * fabs(num);
    const bool pass = diff <= tol; /* false for NaN */
    double ratio;
    if (!isfinite(a) || !isfinite(num) || isnan(diff))
        ratio = INFINITY;
    else
        ratio = tol > 0.0 ? diff / tol : (diff > 0.0 ? INFINITY : 0.0);
    rep->checked++;
    rep->failed += !pass;
    if (isfinite(diff) && diff > rep->max_abs_error) rep->max_abs_error = diff;
    if (rep->worst_index < 0 || ratio > rep->worst_ratio) {
        snprintf(rep->worst_tensor, sizeof rep->worst_tensor, "%s", c->name);
        rep->worst_index = j;
        rep->worst_ndim = c->ndim;
        memset(rep->worst_coord, 0, sizeof rep->worst_coord);
        unravel(j, c->ndim, c->shape, rep->worst_coord);
        rep->worst_analytic = a;
        rep->worst_numeric = num;
        rep->worst_ratio = ratio;
        rep->worst_tolerance = tol;
    }
}

/* The numeric pass: two evaluations per checked element, the caller's value restored bit for bit
 * after each pair whatever happens. */
static mg_status numeric(runner *r, const checked *T, int n_t, const mg_gradcheck_opts *o, mg_gradcheck_report *rep) {
    mg_rng pick = mg_rng_make(o->seed ^ 0x5deece66dull);
    for (int t = 0; t < n_t; t++) {
        const checked *c = &T[t];
        const int64_t n = c->numel;
        const int64_t m = o->max_per_tensor > 0 && o->max_per_tensor < n ? o->max_per_tensor : n;
        const double phase = m < n ? mg_rng_double(&pick) : 0.0;
        for (int64_t k = 0; k < m; k++) {
            /* m elements evenly spread, at a phase fixed by the seed */
            int64_t j = m < n ? (int64_t)(((double)k + phase) * (double)n / (double)m) : k;
            if (j >= n) j = n - 1;
            const float keep = c->data[j];
            const float up = step_up(keep, o->eps), down = step_down(keep, o->eps);
            char when[160], cs[96];
            int64_t coord[MG_MAX_DIMS] = {0};
            unravel(j, c->ndim, c->shape, coord);
            coord_str(cs, sizeof cs, c->ndim, coord);
            snprintf(when, sizeof when, " with %s%s moved by %+g", c->name, cs, o->eps);
            mg_tensor *y;
            double dL = 0.0;
            c->data[j] = up;
            mg_status st = evaluate_same(r, when, &y);
            if (st == MG_OK) {
                memcpy(r->y_up, y->data, (size_t)r->n_out * sizeof(float));
                snprintf(when, sizeof when, " with %s%s moved by %+g", c->name, cs, -o->eps);
                c->data[j] = down;
                st = evaluate_same(r, when, &y);
            }
            /* L(up) - L(down) term by term: each difference of two floats is exact in float64, and
             * the parts of L the element does not move cancel exactly instead of rounding. Summed
             * before the element is put back: an output may share the input's memory (a reshape). */
            if (st == MG_OK)
                for (int64_t i = 0; i < r->n_out; i++) dL += ((double)r->y_up[i] - (double)y->data[i]) * r->R[i];
            c->data[j] = keep;
            if (st != MG_OK) return st;
            compare(rep, c, j, (double)c->grad[j], dL / ((double)up - (double)down), o);
        }
    }
    return MG_OK;
}

static void describe(mg_gradcheck_report *rep, const mg_gradcheck_opts *o) {
    char cs[96], msg[512];
    coord_str(cs, sizeof cs, rep->worst_ndim, rep->worst_coord);
    if (rep->failed > 0)
        snprintf(msg, sizeof msg,
                 "%s%s: analytic %.6g vs numeric %.6g: |difference| %.3g over the tolerance %.3g (atol %g + rtol %g "
                 "* |numeric|, eps %g); %lld of %lld elements fail",
                 rep->worst_tensor, cs, rep->worst_analytic, rep->worst_numeric,
                 fabs(rep->worst_analytic - rep->worst_numeric), rep->worst_tolerance, o->atol, o->rtol, o->eps,
                 (long long)rep->failed, (long long)rep->checked);
    else
        snprintf(msg, sizeof msg,
                 "all %lld elements pass (eps %g, atol %g, rtol %g); the closest is %s%s: analytic %.6g vs numeric "
                 "%.6g, %.0f%% of its tolerance",
                 (long long)rep->checked, o->eps, o->atol, o->rtol, rep->worst_tensor, cs, rep->worst_analytic,
                 rep->worst_numeric, 100.0 * rep->worst_ratio);
    snprintf(rep->message, sizeof rep->message, "%.255s", msg);
}

mg_status mg_gradcheck(mg_gradcheck_fn fn, void *user, mg_tensor *const *inputs, int n_inputs, mg_params *params,
                       const mg_gradcheck_opts *opts, mg_gradcheck_report *report) {
    mg_gradcheck_report local;
    mg_gradcheck_report *rep = report ? report : &local;
    memset(rep, 0, sizeof *rep);
    rep->worst_index = -1;
    const mg_gradcheck_opts o = opts ? *opts : mg_gradcheck_defaults();
    mg_status st = check_args(fn, inputs, n_inputs, params, &o);
    if (st != MG_OK) return finish(st, rep);

    /* The tensors to check: inputs, then trainable parameters. */
    const int n_params = params ? mg_params_len(params) : 0;
    int n_t = 0;
    checked *T = calloc((size_t)(n_inputs + n_params) + 1, sizeof *T);
    if (!T) return finish(mg_set_error(MG_ERR_NOMEM, "mg_gradcheck: out of memory"), rep);
    for (int k = 0; k < n_inputs; k++) {
        const mg_tensor *t = inputs[k];
        checked *c = &T[n_t++];
        c->data = t->data, c->numel = t->numel, c->ndim = t->ndim;
        memcpy(c->shape, t->shape, sizeof c->shape);
        snprintf(c->name, sizeof c->name, "input %d", k);
    }
    for (int i = 0; i < n_params; i++) {
        mg_tensor *p = mg_params_at(params, i);
        if (!mg_requires_grad(p)) continue;
        checked *c = &T[n_t++];
        c->data = p->data, c->numel = p->numel, c->ndim = p->ndim;
        memcpy(c->shape, p->shape, sizeof c->shape);
        snprintf(c->name, sizeof c->name, "%s", p->name ? p->name : "(unnamed parameter)");
    }
    rep->tensors = n_t;
    if (n_t == 0) {
        free(T);
        return finish(mg_set_error(MG_ERR_INVALID, "mg_gradcheck: nothing to check: no inputs and %s",
                                   params ? "no trainable parameter in the store" : "no parameter store"),
                      rep);
    }

    runner r = {.fn = fn, .user = user, .inputs = inputs, .n_inputs = n_inputs};
    float *saved_grad = NULL;
    const int64_t slab = params ? mg_params_slab_size(params) : 0;
    for (int t = 0; t < n_t; t++) {
        T[t].grad = calloc((size_t)T[t].numel + 1, sizeof(float));
        if (!T[t].grad) {
            st = mg_set_error(MG_ERR_NOMEM, "mg_gradcheck: out of memory for the gradient of %s", T[t].name);
            goto done;
        }
    }
    r.ctx = mg_ctx_new(0);
    if (!r.ctx) {
        st = mg_wrap_error(MG_ERR_NOMEM, "mg_gradcheck");
        goto done;
    }
    mg_ctx_set_error_handler(r.ctx, quiet_handler, NULL);
    if (params) { /* the store's gradients are set aside and put back at the end */
        saved_grad = malloc((size_t)slab * sizeof(float) + 1);
        if (!saved_grad) {
            st = mg_set_error(MG_ERR_NOMEM, "mg_gradcheck: out of memory saving the parameters' gradients");
            goto done;
        }
        memcpy(saved_grad, mg_params_grad(params), (size_t)slab * sizeof(float));
    }
    st = analytic(&r, T, &o, params);
    if (st == MG_OK) st = numeric(&r, T, n_t, &o, rep);
    if (st == MG_OK) {
        describe(rep, &o);
        if (rep->failed > 0) st = mg_set_error(MG_ERR_INVALID, "%s", rep->message);
    }

done:
    if (saved_grad) memcpy(mg_params_grad(params), saved_grad, (size_t)slab * sizeof(float));
    free(saved_grad);
    free(r.R);
    free(r.y_up);
    for (int t = 0; t < n_t; t++) free(T[t].grad);
    free(T);
    mg_ctx_free(r.ctx);
    if (st == MG_OK) return MG_OK; /* rep->message already says how close it came */
    return rep->failed > 0 ? st : finish(st, rep);
}
