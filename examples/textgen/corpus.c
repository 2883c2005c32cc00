/* Reading corpus files, and making the default corpus from Debian's bible-kjv. */
#include "textgen.h"
#include "cli.h"

#include "minigrad/checked.h"
#include "minigrad/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* "1024 MiB" or "1.5 KiB": the cap as it reads in messages. */
static const char *fmt_cap(size_t bytes, char *buf, size_t n) {
    if (bytes % ((size_t)1 << 20) == 0) snprintf(buf, n, "%zu MiB", bytes >> 20);
    else snprintf(buf, n, "%zu bytes", bytes);
    return buf;
}

/* Appends the whole file to *buf (grown as needed), refusing one of more than max bytes: a regular
 * file by its size before anything is read, anything else (a pipe, a device such as /dev/zero)
 * once that much has come. */
static mg_status read_one(const char *path, size_t max, char **buf, size_t *n, size_t *cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return mg_set_error(MG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    char cb[64];
    bool known = fstat(fileno(f), &sb) == 0, regular = known && S_ISREG(sb.st_mode);
    if (known && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return mg_set_error(MG_ERR_IO, "%s: is a directory, not a text file", path);
    }
    if (regular && (uint64_t)sb.st_size > (uint64_t)max) {
        fclose(f);
        return mg_set_error(MG_ERR_INVALID, "%s: %lld bytes, more than the %s a text file may have (--max-file-mib)",
                            path, (long long)sb.st_size, fmt_cap(max, cb, sizeof cb));
    }
    size_t start = *n;
    for (;;) {
        if (*cap - *n < 65536 + 2) {
            size_t nc, want = 0;
            /* room for what is already there, this file's size (or the next 64 KiB), and the 2 spare
             * bytes tg_read_files relies on; all bounded by the caps, but checked all the same */
            bool over = mg_ckd_add_size(&want, *n, regular && sb.st_size > 0 ? (size_t)sb.st_size : 0) ||
                        mg_ckd_add_size(&want, want, 65536 + 2);
            nc = *cap > SIZE_MAX / 2 ? SIZE_MAX : (*cap ? *cap * 2 : (size_t)1 << 20);
            if (nc < want) nc = want;
            char *nb = over ? NULL : realloc(*buf, nc);
            if (!nb) {
                fclose(f);
                return mg_set_error(MG_ERR_NOMEM, "%s: out of memory reading the file", path);
            }
            *buf = nb, *cap = nc;
        }
        size_t room = *cap - *n - 2, left = max - (*n - start) + 1; /* one byte past the cap tells */
        size_t got = fread(*buf + *n, 1, room < left ? room : left, f);
        *n += got;
        if (*n - start > max) {
            fclose(f);
            return mg_set_error(MG_ERR_INVALID, "%s: more than the %s a text file may have (--max-file-mib); "
                                "reading stopped there", path, fmt_cap(max, cb, sizeof cb));
        }
        if (got == 0) break;
    }
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (err) return mg_set_error(MG_ERR_IO, "%s: read error after %zu bytes: %s", path, *n - start, strerror(err));
    if (*n == start) return mg_set_error(MG_ERR_FORMAT, "%s: the file is empty: there is no text in it", path);
    return MG_OK;
}

mg_status tg_read_files_max(const char *const *paths, int n_paths, size_t max_file_bytes, char **out,
                            size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    if (n_paths < 1) return mg_set_error(MG_ERR_INVALID, "no text file given");
    if (max_file_bytes < 1) return mg_set_error(MG_ERR_INVALID, "a largest text file of 0 bytes");
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; i < n_paths; i++) {
        if (i > 0 && buf[n - 1] != '\n') buf[n++] = '\n'; /* read_one always leaves 2 bytes spare */
        mg_status st = read_one(paths[i], max_file_bytes, &buf, &n, &cap);
        if (st != MG_OK) {
            free(buf);
            return st;
        }
    }
    buf[n] = 0;
    *out = buf;
    *n_out = n;
    return MG_OK;
}

mg_status tg_read_files(const char *const *paths, int n_paths, char **out, size_t *n_out) {
    return tg_read_files_max(paths, n_paths, (size_t)TG_MAX_FILE_MIB << 20, out, n_out);
}

char *tg_kjv_path(char *buf, size_t n) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/') snprintf(buf, n, "%s/minigrad/kjv.txt", xdg);
    else if (home && *home) snprintf(buf, n, "%s/.cache/minigrad/kjv.txt", home);
    else snprintf(buf, n, "kjv.txt");
    return buf;
}

/* Looks for an executable `prog` on PATH. */
static bool on_path(const char *prog) {
    const char *path = getenv("PATH");
    if (!path) return false;
    char dir[4096];
    while (*path) {
        size_t len = strcspn(path, ":");
        snprintf(dir, sizeof dir, "%.*s/%s", (int)len, len ? path : ".", prog);
        if (access(dir, X_OK) == 0) return true;
        path += len + (path[len] == ':');
    }
    return false;
}

/* mkdir -p of the directory part of path. */
static mg_status make_parent_dirs(const char *path) {
    char d[4096];
    snprintf(d, sizeof d, "%s", path);
    char *slash = strrchr(d, '/');
    if (!slash || slash == d) return MG_OK;
    *slash = 0;
    return ex_mkdirs(d);
}

#define KJV_HINT "install it (sudo apt-get install bible-kjv) or pass --data FILE with any UTF-8 text"

mg_status tg_kjv_make(const char *path) {
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) return MG_OK;
    if (!on_path("bible"))
        return mg_set_error(MG_ERR_NOT_FOUND, "no --data given and the default corpus needs the King James Bible "
                            "from Debian's bible-kjv package, whose 'bible' program is not on PATH: " KJV_HINT);
    mg_status st = make_parent_dirs(path);
    if (st != MG_OK) return st;
    mg_outfile out;
    if ((st = mg_outfile_open(&out, path)) != MG_OK) return st;
    /* Every verse, one per line, each prefixed by its reference ("Ge1:1 In the beginning..."). */
    FILE *in = popen("bible -f Gen1:1-Rev22:21 </dev/null 2>/dev/null", "r");
    if (!in) {
        mg_outfile_discard(&out);
        return mg_set_error(MG_ERR_IO, "cannot run 'bible': %s", strerror(errno));
    }
    char *line = NULL;
    size_t cap = 0, total = 0, lines = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, in)) > 0) {
        const char *text = line, *sp = memchr(line, ' ', (size_t)len);
        if (sp) text = sp + 1; /* drop the reference */
        size_t m = (size_t)len - (size_t)(text - line);
        fwrite(text, 1, m, out.f); /* a failed write stays in the stream's state: the commit reports it */
        total += m, lines++;
    }
    free(line);
    int rc = pclose(in);
    if (rc != 0 || lines < 30000) {
        mg_outfile_discard(&out);
        return mg_set_error(MG_ERR_IO, "'bible -f Gen1:1-Rev22:21' failed (exit status %d, %zu verses read): "
                            "is bible-kjv installed completely? " KJV_HINT,
                            WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, lines);
    }
    if ((st = mg_outfile_commit(&out)) != MG_OK) return st;
    mg_log(MG_LOG_INFO, "made the default corpus %s (%zu verses, %zu bytes) from bible-kjv", path, lines, total);
    return MG_OK;
}

mg_status tg_read_corpus(const char *const *files, int n, int64_t max_file_mib, char **text, size_t *len,
                         char *label, size_t label_n) {
    char kjv[4096];
    const char *one[1];
    if (n == 0) {
        one[0] = tg_kjv_path(kjv, sizeof kjv);
        mg_status st = tg_kjv_make(kjv);
        if (st != MG_OK) return st;
        files = one, n = 1;
    }
    const char *base = strrchr(files[0], '/');
    if (n > 1)
        snprintf(label, label_n, "%s + %d more", base ? base + 1 : files[0], n - 1);
    else
        snprintf(label, label_n, "%s", base ? base + 1 : files[0]);
    return tg_read_files_max(files, n, (size_t)max_file_mib << 20, text, len);
}

int tg_train_inputs(const char *prog, const char *data, const char **files, int *n_files, const char *tokenizer,
                    tg_tokenizer_kind *kind) {
    if (data) {
        if (*n_files == 64) {
            fprintf(stderr, "%s: at most 64 text files\n", prog);
            return 2;
        }
        memmove(files + 1, files, (size_t)*n_files * sizeof *files);
        files[0] = data, (*n_files)++;
    }
    if (tg_tokenizer_parse(tokenizer, kind) != MG_OK) {
        fprintf(stderr, "%s: --tokenizer: %s\n", prog, mg_last_error());
        return 2;
    }
    return 0;
}

mg_status tg_read_train_text(const char *prog, const char *const *files, int n, int64_t max_file_mib, char **text,
                             size_t *len, char *label, size_t label_n) {
    if (n == 0) printf("%s: no --data given: learning the King James Bible (bible-kjv)\n", prog), fflush(stdout);
    return tg_read_corpus(files, n, max_file_mib, text, len, label, label_n);
}
