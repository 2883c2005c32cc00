/* A directory of MIDI files: found recursively in a fixed order, each loaded into a per-file
 * result that says what it held or why it was skipped. */
#include "music_internal.h"

#include "minigrad/checked.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

typedef struct pathlist {
    char **v;
    size_t n, cap;
} pathlist;

static bool is_midi_name(const char *name) {
    size_t n = strlen(name);
    return (n > 4 && strcasecmp(name + n - 4, ".mid") == 0) ||
           (n > 5 && strcasecmp(name + n - 5, ".midi") == 0);
}

static char *join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    bool slash = a > 0 && dir[a - 1] == '/';
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    if (!slash) p[a++] = '/';
    memcpy(p + a, name, b + 1);
    return p;
}

static mg_status walk(const char *dir, pathlist *pl, bool top) {
    DIR *d = opendir(dir);
    if (!d) {
        if (top)
            return mg_set_error(MG_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
        mg_log(MG_LOG_WARN, "%s: cannot open directory: %s: skipped", dir, strerror(errno));
        return MG_OK;
    }
    mg_status s = MG_OK;
    struct dirent *e;
    while (!s && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char *p = join(dir, e->d_name);
        if (!p) {
            s = mg_set_error(MG_ERR_NOMEM, "%s: out of memory", dir);
            break;
        }
        struct stat st;
        bool keep = false;
        if (lstat(p, &st) == 0) {
            if (S_ISDIR(st.st_mode)) {
                s = walk(p, pl, false);
            } else if (is_midi_name(e->d_name)) {
                /* a link to a file is a file; a link to a directory is not followed */
                keep = S_ISREG(st.st_mode) ||
                       (S_ISLNK(st.st_mode) && stat(p, &st) == 0 && S_ISREG(st.st_mode));
            }
        }
        if (keep && !(s = music_grow((void **)&pl->v, &pl->cap, pl->n + 1, sizeof *pl->v))) {
            pl->v[pl->n++] = p;
            p = NULL;
        }
        free(p);
    }
    closedir(d);
    return s;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

mg_status music_find_files(const char *dir, char ***paths, size_t *n) {
    pathlist pl = {0};
    mg_status s = walk(dir, &pl, true);
    if (s) {
        music_paths_free(pl.v, pl.n);
        *paths = NULL;
        *n = 0;
        return s;
    }
    if (pl.n > 1) qsort(pl.v, pl.n, sizeof *pl.v, cmp_str);
    *paths = pl.v;
    *n = pl.n;
    return MG_OK;
}

void music_paths_free(char **paths, size_t n) {
    for (size_t i = 0; i < n; i++) free(paths[i]);
    free(paths);
}

/* ---- loading ---- */

static mg_status load_one(music_item *it, const uint8_t *bytes, size_t len,
                          const music_load_opts *o) {
    music_midi_file f;
    mg_status s;
    if (bytes)
        s = music_midi_parse(bytes, len, it->path, &f);
    else
        s = music_midi_read(it->path, &f);
    if (s) return s;
    s = music_midi_to_notes(&f, it->path, &o->notes, &it->notes, &it->info);
    music_midi_free(&f);
    if (s) return s;
    if (it->notes.n == 0) return mg_set_error(MG_ERR_FORMAT, "%s: no notes", it->path);
    s = music_perf_encode(it->notes.v, it->notes.n, &it->encoding);
    if (s) return mg_wrap_error(s, "%s", it->path);
    it->tokens = it->encoding.n;
    return MG_OK;
}

mg_status music_corpus_add(music_corpus *c, const char *path, const uint8_t *bytes,
                              size_t len, const music_load_opts *opts) {
    static const music_load_opts defaults = {0};
    if (!opts) opts = &defaults;
    /* one realloc per file: a corpus is hundreds or thousands of files, not millions */
    size_t items_bytes;
    music_item *items =
        mg_ckd_mul_size(&items_bytes, c->n + 1, sizeof *items) ? NULL : realloc(c->items, items_bytes);
    if (!items) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
    c->items = items;
    music_item *it = &items[c->n];
    memset(it, 0, sizeof *it);
    it->path = strdup(path);
    if (!it->path) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
    c->n++;
    it->status = load_one(it, bytes, len, opts);
    if (it->status == MG_ERR_NOMEM) return it->status;
    if (it->status) {
        it->error = strdup(mg_last_error());
        music_notes_free(&it->notes);
        music_tokens_free(&it->encoding);
        it->tokens = 0;
        c->n_skipped++;
        return MG_OK;
    }
    c->n_ok++;
    c->notes += it->info.notes;
    c->tokens += it->tokens;
    c->seconds += it->info.seconds;
    if (!opts->keep_notes) music_notes_free(&it->notes);
    if (!opts->keep_tokens) music_tokens_free(&it->encoding);
    return MG_OK;
}

mg_status music_load_dir(const char *dir, const music_load_opts *opts, music_corpus *out) {
    memset(out, 0, sizeof *out);
    char **paths;
    size_t n;
    mg_status s = music_find_files(dir, &paths, &n);
    if (s) return s;
    for (size_t i = 0; i < n && !s; i++) s = music_corpus_add(out, paths[i], NULL, 0, opts);
    music_paths_free(paths, n);
    if (s) music_corpus_free(out);
    return s;
}

void music_corpus_free(music_corpus *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->items[i].path);
        free(c->items[i].error);
        music_notes_free(&c->items[i].notes);
        music_tokens_free(&c->items[i].encoding);
    }
    free(c->items);
    memset(c, 0, sizeof *c);
}

void music_corpus_summary(const music_corpus *c, FILE *out) {
    fprintf(out, "%zu files: %zu used, %zu skipped; %zu notes, %.2f hours, %zu tokens\n", c->n,
            c->n_ok, c->n_skipped, c->notes, c->seconds / 3600.0, c->tokens);
    /* every error message already starts with the file's path */
    for (size_t i = 0; i < c->n; i++)
        if (c->items[i].status)
            fprintf(out, "skipped: %s\n",
                    c->items[i].error ? c->items[i].error : mg_status_str(c->items[i].status));
}
