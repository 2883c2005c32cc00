/* minigrad/core.h: the core library's umbrella header: tensors, the autodiff tape, ops and
 * custom ops, kernels, parameters, optimizers, the RNG, safetensors and checkpoints, the
 * overflow-checked size arithmetic (checked.h) and checked file output (file.h). Nothing here needs
 * the layers, plugins or plotting: a program that includes only this header links with
 * `pkg-config --libs minigrad-core` (meson: dependency('minigrad-core')). minigrad/minigrad.h
 * includes this and everything else.
 */
#ifndef MINIGRAD_CORE_H
#define MINIGRAD_CORE_H

#include "minigrad/base.h"
#include "minigrad/checked.h"
#include "minigrad/checkpoint.h"
#include "minigrad/file.h"
#include "minigrad/gradcheck.h"
#include "minigrad/kernels.h"
#include "minigrad/op.h"
#include "minigrad/ops.h"
#include "minigrad/optim.h"
#include "minigrad/params.h"
#include "minigrad/rng.h"
#include "minigrad/rowops.h"
#include "minigrad/safetensors.h"
#include "minigrad/tensor.h"

#endif
