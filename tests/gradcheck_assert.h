/* The suites' gradient checks: mg_gradcheck (minigrad/gradcheck.h) wrapped to fail the current
 * Check test with the checker's report, which names the worst element (tensor, coordinates,
 * analytic vs numeric, tolerance). */
#ifndef MG_TEST_GRADCHECK_ASSERT_H
#define MG_TEST_GRADCHECK_ASSERT_H

#include "harness.h"
#include "minigrad/gradcheck.h"

static inline mg_gradcheck_opts gc_opts(double eps, double atol, double rtol, int64_t max_per_tensor, uint64_t seed) {
    mg_gradcheck_opts o = mg_gradcheck_defaults();
    o.eps = eps, o.atol = atol, o.rtol = rtol, o.max_per_tensor = max_per_tensor, o.seed = seed;
    return o;
}

/* Runs the check and fails the current test unless every element passes. Returns the number of
 * elements compared. */
static inline int64_t gc_assert_pass(const char *what, mg_gradcheck_fn fn, void *user, mg_tensor *const *inputs,
                                     int n_inputs, mg_params *params, const mg_gradcheck_opts *o) {
    mg_gradcheck_report rep;
    mg_status st = mg_gradcheck(fn, user, inputs, n_inputs, params, o, &rep);
    ck_assert_msg(st == MG_OK, "%s: %s (%s)", what, rep.message, mg_status_str(st));
    ck_assert_msg(rep.checked > 0, "%s: no element was checked", what);
    return rep.checked;
}

#endif
