/* What every fuzz target shares: a property check that stops the run at the first broken
 * property, so that libFuzzer (or the replay driver) reports the input as a crash. */
#ifndef MG_FUZZ_UTIL_H
#define MG_FUZZ_UTIL_H

#include "minigrad/base.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static inline void fz_expect(bool ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz: property broken: %s (last error: %s)\n", what, mg_last_error());
        abort();
    }
}

#endif
