/* minigrad/params.h: the persistent parameter store.
 *
 * Parameters are declared first (name, shape, initialiser, flags), then mg_params_alloc lays them
 * out in one contiguous 64-byte-aligned slab for values and one for gradients, and runs the
 * initialisers in declaration order with the given generator (so a seed fixes every weight).
 * One slab each means a checkpoint, a zero_grad or a gradient all-reduce is one buffer.
 *
 * Trainable, frozen, buffers: a parameter is trainable (MG_REQUIRES_GRAD) unless it is frozen
 * (MG_FROZEN, at declaration or later with mg_params_set_trainable) or a buffer (MG_BUFFER: state a
 * layer keeps and updates itself, such as running statistics or a fixed table; never trainable).
 * Frozen parameters and buffers get no gradient (ops compute none for them: their slots in the
 * gradient slab stay zero), no optimizer update and no optimizer state, and are still saved and
 * loaded with the weights (mg_checkpoint_save / _load).
 *
 * Ownership: the store owns its tensors, their names and both slabs; mg_params_free releases all.
 * Tensor pointers returned by mg_params_add stay valid until then (data is NULL before alloc).
 */
#ifndef MINIGRAD_PARAMS_H
#define MINIGRAD_PARAMS_H

#include "minigrad/export.h"

#include "minigrad/rng.h"
#include "minigrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mg_init_kind {
    MG_INIT_ZEROS,
    MG_INIT_ONES,
    MG_INIT_CONST,   /* a */
    MG_INIT_UNIFORM, /* uniform in [a, b) */
    MG_INIT_NORMAL,  /* mean a, standard deviation b */
} mg_init_kind;

typedef struct mg_init {
    mg_init_kind kind;
    float a, b;
} mg_init;

static inline mg_init mg_init_zeros(void) { return (mg_init){MG_INIT_ZEROS, 0, 0}; }
static inline mg_init mg_init_ones(void) { return (mg_init){MG_INIT_ONES, 1, 0}; }
static inline mg_init mg_init_const(float v) { return (mg_init){MG_INIT_CONST, v, 0}; }
static inline mg_init mg_init_uniform(float lo, float hi) { return (mg_init){MG_INIT_UNIFORM, lo, hi}; }
static inline mg_init mg_init_normal(float mean, float std) { return (mg_init){MG_INIT_NORMAL, mean, std}; }

typedef struct mg_params mg_params;

MG_API mg_params *mg_params_new(void);
MG_API void mg_params_free(mg_params *p);

/* Declares a parameter (flags: MG_NO_DECAY, MG_FROZEN, MG_BUFFER; MG_PARAM is always set, and
 * MG_REQUIRES_GRAD unless MG_FROZEN or MG_BUFFER is given; a buffer is not also marked frozen).
 * Returns NULL with mg_last_error set on a duplicate or empty name, a bad shape, or after alloc,
 * and on an initialiser that is out of range: an unknown kind, a constant that is not finite, a
 * uniform range without finite lo <= hi, a normal without a finite mean and a finite std >= 0. */
MG_API mg_tensor *mg_params_add(mg_params *p, const char *name, int ndim, const int64_t *shape, mg_init init,
                         uint32_t flags);

/* Allocates the slabs and initialises every parameter. rng may be NULL if no initialiser is random. */
MG_API mg_status mg_params_alloc(mg_params *p, mg_rng *rng);
MG_API bool mg_params_allocated(const mg_params *p);

MG_API int mg_params_len(const mg_params *p);
MG_API mg_tensor *mg_params_at(const mg_params *p, int i);
MG_API mg_tensor *mg_params_find(const mg_params *p, const char *name);
MG_API int64_t mg_params_numel(const mg_params *p); /* sum of the parameters' elements, buffers included */

/* Whether a store's tensor is trained: neither frozen nor a buffer. */
static inline bool mg_param_trainable(const mg_tensor *t) { return (t->flags & MG_REQUIRES_GRAD) != 0; }
/* Elements of the trainable parameters only. */
MG_API int64_t mg_params_trainable_numel(const mg_params *p);

/* Freezes (trainable false) or unfreezes parameters, like PyTorch's requires_grad_: `name` is one
 * parameter's full name, or a dotted prefix that selects every parameter under it ("h.0" selects
 * "h.0.attn.c_attn.weight" but not "h.10.ln_1.weight"); NULL or "" selects all. Buffers under a
 * prefix are left alone; naming one buffer exactly to make it trainable is an error. Freezing after
 * mg_params_alloc clears the parameter's gradient. An optimizer made earlier skips frozen
 * parameters from its next step on; one unfrozen later starts from zero state, or, if it was
 * trained before it was frozen, continues from the state it had then (as PyTorch's optimizers do).
 * MG_ERR_NOT_FOUND (naming `name`) when nothing matches. */
MG_API mg_status mg_params_set_trainable(mg_params *p, const char *name, bool trainable);

/* The slabs: `size` floats each, parameters at 64-byte aligned offsets (gaps are zero). */
MG_API float *mg_params_data(const mg_params *p);
MG_API float *mg_params_grad(const mg_params *p);
MG_API int64_t mg_params_slab_size(const mg_params *p);
/* Offset of parameter i in the slabs (floats). */
MG_API int64_t mg_params_offset(const mg_params *p, int i);

MG_API void mg_params_zero_grad(mg_params *p);

#ifdef __cplusplus
}
#endif
#endif
