/* What the example programs write on standard output is checked like any file: a program whose
 * output was lost (a full disk, a redirection to /dev/full) says so, with the reason, and does not
 * exit 0. Files the programs write go through minigrad/file.h. */
#ifndef EX_OUTPUT_H
#define EX_OUTPUT_H

/* First thing in main: stdout keeps the reason of a failed write (mg_stdout_track_errors). */
void ex_stdout_begin(void);

/* The status for main to return: rc, or (when rc is 0) 1 after a message on stderr naming
 * standard output and the reason, if anything written to stdout could not be written. */
int ex_exit_status(const char *prog, int rc);

#endif
