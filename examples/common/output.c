/* Standard output, checked on the way out. */
#include "output.h"

#include "minigrad/file.h"

#include <stdio.h>

void ex_stdout_begin(void) {
    if (mg_stdout_track_errors() != MG_OK) mg_clear_error(); /* the plain stdout is still checked */
}

int ex_exit_status(const char *prog, int rc) {
    if (mg_stdout_check() == MG_OK) return rc;
    fprintf(stderr, "%s: %s\n", prog, mg_last_error());
    return rc ? rc : 1;
}
