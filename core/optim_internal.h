/* optim_internal.h: what the library's own files (checkpoints) need of an optimizer beyond the
 * public API. Not installed, not exported. */
#ifndef MINIGRAD_OPTIM_INTERNAL_H
#define MINIGRAD_OPTIM_INTERNAL_H

#include "minigrad/optim.h"

/* The store the optimizer was made for: its state slabs are laid out for that store only. */
const mg_params *mg_optim_params(const mg_optim *o);

#endif
