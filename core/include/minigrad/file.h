/* minigrad/file.h: checked file output.
 *
 * stdio reports a failed write late: fprintf into a buffer succeeds, and a full disk shows only
 * when the buffer is flushed, often in fclose. These helpers turn the stream's state into an
 * mg_status, MG_ERR_IO with mg_last_error() naming the file and the reason ("run/log.jsonl: write
 * failed: No space left on device"), so that nothing written is lost without an error.
 *
 * Files written whole (a report, a MIDI file, a PNG) use mg_outfile: the bytes go to a temporary
 * file beside the target, which is flushed, synced and renamed over the target only when all of
 * it was written. A failed write leaves the old file as it was and no partial new one. A target
 * that exists and is not a regular file (a device such as /dev/null or /dev/stdout, a FIFO) is
 * written in place instead, never replaced; a directory is refused. A link to a regular file is
 * replaced by the new file, as rename does.
 *
 * Ownership: the helpers borrow path; an mg_outfile owns its stream and names until
 * mg_outfile_commit or mg_outfile_discard, which always release them.
 */
#ifndef MINIGRAD_FILE_H
#define MINIGRAD_FILE_H

#include "minigrad/export.h"

#include "minigrad/base.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Flushes f and checks its error indicator; f stays open. MG_ERR_IO naming path when a write
 * into f failed, now or before (the indicator is sticky). The reason is exact for what was still
 * in stdio's buffer; a large write that went past the buffer and failed is reported without one. */
MG_API mg_status mg_file_check(FILE *f, const char *path);

/* Flushes, checks and closes f (always closed, even on an error). MG_ERR_IO naming path when any
 * write into f failed or fclose did. f NULL: MG_OK. */
MG_API mg_status mg_file_close_checked(FILE *f, const char *path);

/* Standard output, checked like a file. stdio forgets why a write failed once the buffer is gone,
 * so a program calls mg_stdout_track_errors first thing in main: stdout becomes a stream over the
 * same descriptor, buffered the same way, that keeps the reason of its first failed write (glibc
 * lets a program set stdout). mg_stdout_check then flushes and reports any write to stdout that
 * failed: MG_ERR_IO, "standard output: write failed: No space left on device". Without tracking,
 * the check still finds the failure, perhaps without its reason. */
MG_API mg_status mg_stdout_track_errors(void);
MG_API mg_status mg_stdout_check(void);

/* A file written whole, then put in place (see above). Write into f with stdio; the first failed
 * write's reason is kept, even for a write too large for stdio's buffer. */
typedef struct mg_outfile {
    FILE *f;
    char *path; /* the target (a copy) */
    char *tmp;  /* the temporary beside it; NULL when the target is written in place */
    struct mg_outfile_sink *sink; /* where f writes (internal) */
} mg_outfile;

/* Opens path for writing (binary). MG_ERR_IO naming path when neither the temporary nor the
 * target in place can be created; *o is then empty and needs no discard. */
MG_API mg_status mg_outfile_open(mg_outfile *o, const char *path);

/* Checks every write, flushes, syncs and closes the temporary, then renames it over the target.
 * On any failure the temporary is removed and the target left as it was: MG_ERR_IO naming the
 * target and the reason. Releases o either way. */
MG_API mg_status mg_outfile_commit(mg_outfile *o);

/* Gives up: closes and removes the temporary (a target written in place keeps what it got).
 * An empty or released o is fine. */
MG_API void mg_outfile_discard(mg_outfile *o);

#ifdef __cplusplus
}
#endif
#endif
