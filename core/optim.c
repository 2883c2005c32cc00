/* AdamW, SGD with momentum, clipping and the schedule. Updates are elementwise (the vector kernels
 * mg_adamw_update / mg_sgd_update in minigrad/rowops.h), so splitting them over threads cannot
 * change the result. */
#include "minigrad/optim.h"
#include "minigrad/rowops.h"
#include "optim_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum { OPT_ADAMW, OPT_SGD } opt_kind;

struct mg_optim {
    opt_kind kind;
    mg_params *p;
    mg_adamw_cfg cfg;
    float momentum, weight_decay; /* SGD */
    int64_t t;
    float *m, *v;
    bool *ready; /* per parameter: its state regions have been zeroed (trainable at some point) */
    int n_ready;
};

/* Zeroes parameter k's regions of the state slabs (with the padding after it) on first use. */
static void make_ready(mg_optim *o, int k) {
    if (k >= o->n_ready || o->ready[k]) return;
    int64_t off = mg_params_offset(o->p, k), len = (mg_params_at(o->p, k)->numel + 15) / 16 * 16;
    if (off + len > mg_params_slab_size(o->p)) len = mg_params_slab_size(o->p) - off;
    memset(o->m + off, 0, (size_t)len * sizeof(float));
    if (o->v) memset(o->v + off, 0, (size_t)len * sizeof(float));
    o->ready[k] = true;
}

mg_adamw_cfg mg_adamw_defaults(void) { return (mg_adamw_cfg){0.9f, 0.999f, 1e-8f, 0.01f}; }

/* The same ranges and wording as mg_train_run's check of its cfg: a value outside [lo, hi) (hi
 * infinite: any finite value from lo) is refused, NaN included. */
static bool in_range(const char *who, const char *name, float v, float lo, float hi) {
    if (v >= lo && v < hi) return true;
    mg_set_error(MG_ERR_INVALID, "%s: %s must lie in [%g, %g), got %g", who, name, (double)lo, (double)hi, (double)v);
    return false;
}

static mg_optim *optim_new(mg_params *p, opt_kind kind, int slots) {
    if (!p || !mg_params_allocated(p)) {
        mg_set_error(MG_ERR_INVALID, "optimizer: the parameter store is not allocated yet (call mg_params_alloc first)");
        return NULL;
    }
    mg_optim *o = calloc(1, sizeof *o);
    size_t bytes = (size_t)(mg_params_slab_size(p) ? mg_params_slab_size(p) : 16) * sizeof(float);
    int n = mg_params_len(p);
    if (o) o->m = mg_aligned_alloc(bytes);
    if (o && slots > 1) o->v = mg_aligned_alloc(bytes);
    if (o) o->ready = calloc((size_t)(n ? n : 1), sizeof *o->ready);
    if (!o || !o->m || (slots > 1 && !o->v) || !o->ready) {
        mg_optim_free(o);
        mg_set_error(MG_ERR_NOMEM, "optimizer: cannot allocate %d x %zu bytes of state", slots, bytes);
        return NULL;
    }
    o->kind = kind;
    o->p = p;
    o->n_ready = n;
    /* Only trainable parameters' regions are touched: a frozen one's pages are never faulted in. */
    for (int k = 0; k < n; k++)
        if (mg_param_trainable(mg_params_at(p, k))) make_ready(o, k);
    return o;
}

mg_optim *mg_adamw_new(mg_params *p, mg_adamw_cfg cfg) {
    const char *who = "mg_adamw_new";
    if (!in_range(who, "beta1", cfg.beta1, 0, 1) || !in_range(who, "beta2", cfg.beta2, 0, 1) ||
        !in_range(who, "weight_decay", cfg.weight_decay, 0, INFINITY))
        return NULL;
    if (!(cfg.eps > 0) || !isfinite(cfg.eps)) {
        mg_set_error(MG_ERR_INVALID, "%s: eps must be positive and finite, got %g", who, (double)cfg.eps);
        return NULL;
    }
    mg_optim *o = optim_new(p, OPT_ADAMW, 2);
    if (o) o->cfg = cfg;
    return o;
}

mg_optim *mg_sgd_new(mg_params *p, float momentum, float weight_decay) {
    if (!in_range("mg_sgd_new", "momentum", momentum, 0, INFINITY) ||
        !in_range("mg_sgd_new", "weight_decay", weight_decay, 0, INFINITY))
        return NULL;
    mg_optim *o = optim_new(p, OPT_SGD, 1);
    if (o) o->momentum = momentum, o->weight_decay = weight_decay;
    return o;
}

void mg_optim_free(mg_optim *o) {
    if (!o) return;
    mg_aligned_free(o->m);
    mg_aligned_free(o->v);
    free(o->ready);
    free(o);
}

void mg_optim_step(mg_optim *o, float lr) {
    if (!(lr >= 0) || !isfinite(lr)) {
        mg_set_error(MG_ERR_INVALID, "mg_optim_step: lr must be finite and at least 0, got %g (nothing was updated)",
                     (double)lr);
        return;
    }
    o->t++;
    int n = mg_params_len(o->p);
    float *data = mg_params_data(o->p), *grad = mg_params_grad(o->p);
    float bc1 = 1.0f - powf(o->cfg.beta1, (float)o->t), bc2 = 1.0f - powf(o->cfg.beta2, (float)o->t);
    for (int k = 0; k < n; k++) {
        mg_tensor *t = mg_params_at(o->p, k);
        if (!mg_param_trainable(t)) continue;
        make_ready(o, k);
        int64_t off = mg_params_offset(o->p, k), len = t->numel;
        float *w = data + off, *g = grad + off, *m = o->m + off;
        bool decay = !(t->flags & MG_NO_DECAY);
        if (o->kind == OPT_ADAMW) {
            const mg_adamw_hyper h = {lr, o->cfg.beta1, o->cfg.beta2, o->cfg.eps,
                                      decay ? o->cfg.weight_decay : 0.0f, bc1, bc2};
            mg_adamw_update(len, w, g, m, o->v + off, &h);
        } else {
            mg_sgd_update(len, w, g, m, lr, o->momentum, decay ? o->weight_decay : 0.0f, o->t == 1);
        }
    }
}

int64_t mg_optim_steps(const mg_optim *o) { return o->t; }
void mg_optim_set_steps(mg_optim *o, int64_t steps) {
    if (steps < 0) {
        mg_set_error(MG_ERR_INVALID, "mg_optim_set_steps: the step count must be at least 0, got %lld (kept at %lld)",
                     (long long)steps, (long long)o->t);
        return;
    }
    o->t = steps;
}
const mg_params *mg_optim_params(const mg_optim *o) { return o->p; }
float *mg_optim_state(const mg_optim *o, int slot) { return slot == 0 ? o->m : slot == 1 ? o->v : NULL; }

float *mg_optim_state_of(mg_optim *o, int slot, int i) {
    float *s = mg_optim_state(o, slot);
    if (!s || i < 0 || i >= o->n_ready) return NULL;
    make_ready(o, i);
    return s + mg_params_offset(o->p, i);
}
int mg_optim_state_slots(const mg_optim *o) { return o->kind == OPT_ADAMW ? 2 : 1; }
const char *mg_optim_name(const mg_optim *o) { return o->kind == OPT_ADAMW ? "adamw" : "sgd"; }

enum { NORM_CHUNK = 4096 };

float mg_clip_grad_norm(mg_params *p, float max_norm) {
    /* The gaps between parameters are zero, so the whole slab can be summed in fixed chunks. */
    const float *g = mg_params_grad(p);
    int64_t n = mg_params_slab_size(p), nchunk = (n + NORM_CHUNK - 1) / NORM_CHUNK;
    double total = 0.0;
    for (int64_t c0 = 0; c0 < nchunk; c0 += 256) {
        double part[256];
        int64_t c1 = c0 + 256 < nchunk ? c0 + 256 : nchunk;
#pragma omp parallel for schedule(static)
        for (int64_t c = c0; c < c1; c++) {
            double s = 0.0;
            int64_t i1 = (c + 1) * NORM_CHUNK < n ? (c + 1) * NORM_CHUNK : n;
            for (int64_t i = c * NORM_CHUNK; i < i1; i++) s += (double)g[i] * g[i];
            part[c - c0] = s;
        }
        for (int64_t c = c0; c < c1; c++) total += part[c - c0];
    }
    double norm = sqrt(total); /* kept in double: squares of huge finite gradients overflow float */
    if (max_norm > 0.0f && isfinite(norm) && norm > max_norm) {
        float s = (float)(max_norm / norm);
        float *gw = mg_params_grad(p);
#pragma omp parallel for schedule(static) if (n > 65536)
        for (int64_t i = 0; i < n; i++) gw[i] *= s;
    }
    return (float)norm;
}

float mg_lr_schedule(int64_t step, int64_t warmup, int64_t total, float lr_max, float lr_min) {
    if (warmup > 0 && step < warmup) return lr_max * (float)(step + 1) / (float)warmup;
    if (step >= total) return lr_min;
    double progress = (double)(step - warmup) / (double)(total - warmup > 0 ? total - warmup : 1);
    return lr_min + (lr_max - lr_min) * (float)(0.5 * (1.0 + cos(3.141592653589793 * progress)));
}
