/* Checked file output: stdio's late write errors as an mg_status naming the file. */
#include "minigrad/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The errno of a failed write into f; -1 when a write failed but its reason is gone; 0 when every
 * write went through. fflush writes what is still buffered; glibc keeps the bytes of a failed
 * write there, so the retry gives the reason afresh. A large write that bypassed the buffer
 * leaves only the stream's error indicator. */
static int stream_error(FILE *f) {
    errno = 0;
    if (fflush(f) != 0) return errno ? errno : -1;
    return ferror(f) ? -1 : 0;
}

static mg_status write_failed(const char *path, int e) {
    if (e < 0) return mg_set_error(MG_ERR_IO, "%s: write failed: an earlier write into it did not go through", path);
    return mg_set_error(MG_ERR_IO, "%s: write failed: %s", path, strerror(e));
}

mg_status mg_file_check(FILE *f, const char *path) {
    if (!f) return mg_set_error(MG_ERR_INVALID, "%s: no open file to check", path ? path : "(no name)");
    int e = stream_error(f);
    return e ? write_failed(path, e) : MG_OK;
}

mg_status mg_file_close_checked(FILE *f, const char *path) {
    if (!f) return MG_OK;
    int e = stream_error(f);
    errno = 0;
    if (fclose(f) != 0 && !e) e = errno ? errno : -1;
    return e ? write_failed(path, e) : MG_OK;
}

/* ---- standard output ---- */

static int stdout_err; /* errno of the first write to fd 1 that failed, 0 if none */
static bool stdout_tracked;

static ssize_t stdout_write(void *cookie, const char *buf, size_t n) {
    (void)cookie;
    size_t done = 0;
    while (done < n) {
        ssize_t k = write(STDOUT_FILENO, buf + done, n - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            if (!stdout_err) stdout_err = k < 0 ? errno : EIO;
            /* short, even 0, is an error to stdio; a negative count makes glibc's fwrite read past
             * the caller's data */
            return (ssize_t)done;
        }
        done += (size_t)k;
    }
    return (ssize_t)done;
}

mg_status mg_stdout_track_errors(void) {
    if (stdout_tracked) return MG_OK;
    /* glibc's stdout is an ordinary variable a program may set (the GNU C Library manual says so) */
    FILE *f = fopencookie(NULL, "w", (cookie_io_functions_t){.write = stdout_write});
    if (!f) return mg_set_error(MG_ERR_IO, "standard output: cannot open a stream over it: %s", strerror(errno));
    setvbuf(f, NULL, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, BUFSIZ);
    fflush(stdout);
    stdout = f;
    stdout_tracked = true;
    return MG_OK;
}

mg_status mg_stdout_check(void) {
    if (!stdout_tracked) return mg_file_check(stdout, "standard output");
    int e = stream_error(stdout);
    if (e && stdout_err) e = stdout_err;
    return e ? write_failed("standard output", e) : MG_OK;
}

/* ---- files written whole ---- */

/* The stream of an mg_outfile writes through this sink, which keeps the errno of the first
 * failed write: the reason survives even for a write too large for stdio's buffer. */
struct mg_outfile_sink {
    int fd;
    int err; /* first errno of a write or of close, 0 if none */
};

static ssize_t sink_write(void *cookie, const char *buf, size_t n) {
    struct mg_outfile_sink *s = cookie;
    size_t done = 0;
    while (done < n) {
        ssize_t k = write(s->fd, buf + done, n - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            if (!s->err) s->err = k < 0 ? errno : EIO;
            /* short, even 0, is an error to stdio; a negative count makes glibc's fwrite read past
             * the caller's data */
            return (ssize_t)done;
        }
        done += (size_t)k;
    }
    return (ssize_t)done;
}

static int sink_close(void *cookie) {
    struct mg_outfile_sink *s = cookie;
    int rc = close(s->fd);
    if (rc != 0 && !s->err) s->err = errno;
    s->fd = -1;
    return rc;
}

static mg_status out_fail(mg_outfile *o, int e, const char *what) {
    mg_status st = mg_set_error(MG_ERR_IO, "%s: %s: %s", o->path, what, strerror(e));
    mg_outfile_discard(o);
    return st;
}

/* The stream over fd (the sink takes it over, closed with the stream). */
static mg_status open_stream(mg_outfile *o, int fd) {
    o->sink = malloc(sizeof *o->sink);
    if (!o->sink) {
        close(fd);
        return out_fail(o, ENOMEM, "cannot open");
    }
    o->sink->fd = fd;
    o->sink->err = 0;
    o->f = fopencookie(o->sink, "w", (cookie_io_functions_t){.write = sink_write, .close = sink_close});
    if (!o->f) {
        int e = errno;
        close(fd);
        return out_fail(o, e, "cannot open");
    }
    return MG_OK;
}

mg_status mg_outfile_open(mg_outfile *o, const char *path) {
    memset(o, 0, sizeof *o);
    if (!path || !*path) return mg_set_error(MG_ERR_INVALID, "no output file name given");
    size_t n = strlen(path);
    o->path = malloc(n + 1);
    if (!o->path) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
    memcpy(o->path, path, n + 1);
    struct stat sb;
    bool exists = stat(path, &sb) == 0;
    if (exists && S_ISDIR(sb.st_mode)) return out_fail(o, EISDIR, "cannot write");
    if (exists && !S_ISREG(sb.st_mode)) {
        /* a device or a FIFO: written in place, since renaming over it would replace it */
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0) return out_fail(o, errno, "cannot open for writing");
        return open_stream(o, fd);
    }
    /* The temporary's name is unique per process and attempt; O_EXCL makes a clash a retry, never a
     * shared file. */
    const size_t tlen = n + 64;
    o->tmp = malloc(tlen);
    if (!o->tmp) return out_fail(o, ENOMEM, "no memory for the temporary name");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(o->tmp, tlen, "%s.tmp.%ld.%ld%d", path, (long)getpid(), (long)ts.tv_nsec, attempt);
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        int e = errno;
        mg_status st = e == ENOENT /* the folder is missing: say so, not the temporary's name */
                           ? mg_set_error(MG_ERR_IO, "%s: cannot write: its folder does not exist", path)
                           : mg_set_error(MG_ERR_IO, "%s: cannot create the temporary file %s: %s", path, o->tmp,
                                          strerror(e));
        free(o->tmp), o->tmp = NULL; /* nothing was created: nothing to remove */
        mg_outfile_discard(o);
        return st;
    }
    return open_stream(o, fd);
}

mg_status mg_outfile_commit(mg_outfile *o) {
    if (!o->f) {
        mg_outfile_discard(o);
        return mg_set_error(MG_ERR_INVALID, "mg_outfile_commit: the file is not open");
    }
    bool bad = fflush(o->f) != 0 || ferror(o->f);
    int e = o->sink->err;
    if (!bad && o->tmp && fsync(o->sink->fd) != 0) e = errno;
    bad = fclose(o->f) != 0 || bad; /* closes the descriptor: the sink notes a failure */
    o->f = NULL;
    if (!e) e = o->sink->err;
    if (bad && !e) e = EIO;
    if (e) return out_fail(o, e, "write failed");
    if (o->tmp && rename(o->tmp, o->path) != 0) return out_fail(o, errno, "cannot rename the temporary file over it");
    free(o->tmp), o->tmp = NULL; /* renamed: nothing left to remove */
    mg_outfile_discard(o);
    return MG_OK;
}

void mg_outfile_discard(mg_outfile *o) {
    if (!o) return;
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    free(o->sink);
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof *o);
}
