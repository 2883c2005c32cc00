/* Shared scaffolding for the Check suites: TAP output for meson, skipping, numeric helpers.
 * Each test program is one suite: it defines `Suite *xxx_suite(void)` and ends with
 * MG_TEST_MAIN(xxx_suite). */
#ifndef MG_TEST_HARNESS_H
#define MG_TEST_HARNESS_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

/* Runs the suite with TAP on stdout (meson's `protocol: 'tap'` shows each test). */
#define MG_TEST_MAIN(suite_fn)                                                                     \
    int main(void) {                                                                               \
        SRunner *sr = srunner_create(suite_fn());                                                  \
        srunner_set_tap(sr, "-");                                                                  \
        srunner_run_all(sr, CK_SILENT);                                                            \
        int failed = srunner_ntests_failed(sr);                                                    \
        srunner_free(sr);                                                                          \
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;                                               \
    }

/* Skips the whole program (TAP plan with no tests), e.g. when optional data is absent. */
static inline void mg_test_skip_all(const char *reason) {
    printf("1..0 # SKIP %s\n", reason);
    fflush(stdout);
    exit(EXIT_SUCCESS);
}

#endif
