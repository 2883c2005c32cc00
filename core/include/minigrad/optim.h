/* minigrad/optim.h: optimizers over an mg_params store, gradient clipping, the LR schedule.
 *
 * An optimizer keeps its state (moments) in slabs parallel to the parameter slab, so saving and
 * restoring it is one buffer each. Ownership: the optimizer owns its state; it borrows the store,
 * which must outlive it.
 */
#ifndef MINIGRAD_OPTIM_H
#define MINIGRAD_OPTIM_H

#include "minigrad/export.h"

#include "minigrad/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mg_optim mg_optim;

typedef struct mg_adamw_cfg {
    float beta1, beta2, eps;
    float weight_decay; /* decoupled: p -= lr * wd * p, skipped for MG_NO_DECAY parameters */
} mg_adamw_cfg;

/* beta1 0.9, beta2 0.999, eps 1e-8, weight_decay 0.01 (PyTorch's AdamW defaults). */
MG_API mg_adamw_cfg mg_adamw_defaults(void);

/* AdamW with bias-corrected moments:
 *   m = b1 m + (1-b1) g,  v = b2 v + (1-b2) g^2,  mhat = m / (1-b1^t),  vhat = v / (1-b2^t)
 *   p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p)
 * With weight_decay 0 this is Adam. Returns NULL (mg_last_error) if the store is NULL or not
 * allocated, or a setting is out of range: beta1 and beta2 must lie in [0, 1), weight_decay in
 * [0, inf) and eps must be positive and finite (the ranges mg_train_run checks in its cfg). */
MG_API mg_optim *mg_adamw_new(mg_params *p, mg_adamw_cfg cfg);

/* SGD with momentum (PyTorch semantics): buf = mu buf + g (+ wd p);  p -= lr buf. Returns NULL
 * (mg_last_error) like mg_adamw_new, also if momentum or weight_decay is outside [0, inf). */
MG_API mg_optim *mg_sgd_new(mg_params *p, float momentum, float weight_decay);

MG_API void mg_optim_free(mg_optim *o);

/* One update with learning rate lr, from the gradients in the store. Parameters that are not
 * trainable (frozen, buffers: params.h) are skipped: not updated, not decayed, and given no state.
 * lr must be finite and at least 0: any other value (NaN, inf, negative) updates nothing, leaves the
 * step count as it was and sets mg_last_error. The function returns nothing, so a caller whose lr
 * may be bad checks it first, or clears the error (mg_clear_error) and looks at mg_last_error. */
MG_API void mg_optim_step(mg_optim *o, float lr);

/* The number of steps taken, which drives AdamW's bias correction; set it when restoring state.
 * A negative count is refused: the count stays as it was and mg_last_error says why. */
MG_API int64_t mg_optim_steps(const mg_optim *o);
MG_API void mg_optim_set_steps(mg_optim *o, int64_t steps);

/* State slabs for checkpoints: slot 0 = first moment (or momentum), slot 1 = second moment
 * (NULL for SGD). Each holds mg_params_slab_size floats, parallel to the parameter slab. The
 * regions of parameters that are not trainable are never written, read or even zeroed (so a large
 * frozen part of a model costs address space but no memory: untouched pages are not backed); a
 * parameter that becomes trainable later gets its region zeroed at its first step, unless it was
 * trained before (then its state is kept). */
MG_API float *mg_optim_state(const mg_optim *o, int slot);
/* The state of parameter i (index in the store) in `slot`: its region of that slab, zeroed first if
 * the optimizer has not used it yet. NULL for a bad slot or index. */
MG_API float *mg_optim_state_of(mg_optim *o, int slot, int i);
MG_API int mg_optim_state_slots(const mg_optim *o);
MG_API const char *mg_optim_name(const mg_optim *o);

/* Global L2 norm of all gradients (frozen parameters and buffers have none: their gradients
 * stay zero, so they add nothing and are not scaled) (accumulated in double, fixed order). If max_norm > 0 and the
 * norm exceeds it, every gradient is scaled by max_norm / norm. Returns the norm before clipping
 * (NaN or inf if some gradient is not finite: gradients are then left as they are; a finite norm
 * beyond float range is returned as inf but still clips). */
MG_API float mg_clip_grad_norm(mg_params *p, float max_norm);

/* Linear warmup over `warmup` steps, then cosine decay from lr_max to lr_min at step `total`;
 * lr_min after that. step counts from 0; step s < warmup gets lr_max * (s+1) / warmup, so the
 * first update already moves (a zero learning rate would waste a step) and the last warmup step
 * trains at lr_max. */
MG_API float mg_lr_schedule(int64_t step, int64_t warmup, int64_t total, float lr_max, float lr_min);

#ifdef __cplusplus
}
#endif
#endif
