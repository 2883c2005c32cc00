/* Helpers the suites share: a scratch folder, whole files in and out, paths in the source and
 * build trees, a program of the build tree run as a subprocess with its output captured, the
 * recoverable error message, a context whose programming errors are trapped, float results within
 * the rounding bound of a matrix product, the checked teardown that puts the detected SIMD path
 * back, a full disk (/dev/full, a file size limit), and the JSON-lines log and safetensors files
 * the example programs write.
 *
 * Header-only (static inline, so a suite pays only for what it calls). Every helper fails the
 * current Check test with a message naming the file or program rather than returning an error.
 * Ownership: buffers returned by tu_read_file are malloc'ed and the caller frees them; paths from
 * tu_path_in live in a small ring of static buffers (the latest four stay valid). */
#ifndef MG_TEST_UTIL_H
#define MG_TEST_UTIL_H

#include "harness.h"
#include "minigrad/minigrad.h"
#include "minigrad/testing.h" /* reference twins and switches (source tree only) */

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the scratch folder ---- */

/* Makes a fresh folder $TMPDIR/<prefix>_XXXXXX (/tmp without TMPDIR) into dir. */
static inline void tu_make_tmpdir(char *dir, size_t cap, const char *prefix) {
    const char *base = getenv("TMPDIR");
    int n = snprintf(dir, cap, "%s/%s_XXXXXX", base && *base ? base : "/tmp", prefix);
    ck_assert_msg(n > 0 && (size_t)n < cap, "scratch folder name too long for %s", prefix);
    ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp %s: %s", dir, strerror(errno));
}

/* Removes dir and everything below it, without a shell (tests make only files, links and
 * folders). True when dir is gone. */
static inline bool tu_remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[4096];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                int n = snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
                if (n > 0 && (size_t)n < sizeof p && unlink(p) != 0) tu_remove_tree(p);
            }
        closedir(d);
    }
    return rmdir(dir) == 0 || errno == ENOENT;
}

/* dir/name, in a ring of four buffers so that a call can take several paths at once. */
static inline const char *tu_path_in(const char *dir, const char *name) {
    static char p[4][4096];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

/* ---- whole files ---- */

static inline void tu_write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "%s: cannot create: %s", path, strerror(errno));
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static inline void tu_write_text(const char *path, const char *text) {
    tu_write_bytes(path, text, strlen(text));
}

/* The whole file, malloc'ed with a NUL after its last byte (so text can be searched); *n (when
 * not NULL) gets its length. */
static inline void *tu_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: cannot open: %s", path, strerror(errno));
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    ck_assert_int_ge(len, 0);
    ck_assert_int_eq(fseek(f, 0, SEEK_SET), 0);
    char *b = malloc((size_t)len + 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    b[len] = 0;
    if (n) *n = (size_t)len;
    return b;
}

/* A safetensors file that minigrad wrote, made into one as older versions and other tools write
 * it: the "checksum" metadata entry (the writer puts it last) is blanked out of the header, whose
 * length stays the same (JSON allows the trailing spaces). */
static inline void tu_strip_checksum(const char *path) {
    size_t n;
    char *b = tu_read_file(path, &n);
    ck_assert_uint_ge(n, 8);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | (unsigned char)b[i];
    ck_assert_uint_le(8 + hl, n);
    char saved = b[8 + hl];
    b[8 + hl] = 0;
    char *at = strstr(b + 8, "\"checksum\":\"crc32:");
    ck_assert_msg(at != NULL, "%s: no checksum in the header", path);
    size_t len = strlen("\"checksum\":\"crc32:01234567\"");
    bool comma = at[-1] == ',';
    char *from = comma ? at - 1 : at, *to = at + len + (!comma && at[len] == ',');
    size_t cut = (size_t)(to - from);
    memmove(from, to, (size_t)(b + 8 + hl - to));
    memset(b + 8 + hl - cut, ' ', cut);
    b[8 + hl] = saved;
    tu_write_bytes(path, b, n);
    free(b);
}

/* Flips one bit of the byte at offset `at` (negative: from the end) of a file. */
static inline void tu_flip_bit(const char *path, long at, int bit) {
    size_t n;
    unsigned char *b = tu_read_file(path, &n);
    size_t i = at >= 0 ? (size_t)at : n - (size_t)(-at);
    ck_assert_uint_lt(i, n);
    b[i] ^= (unsigned char)(1u << bit);
    tu_write_bytes(path, b, n);
    free(b);
}

/* At most cap - 1 bytes of the file into buf, NUL-terminated; "" when it cannot be opened (a
 * program that failed early may not have written it). */
static inline void tu_read_into(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t k = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[k] = 0;
    if (f) fclose(f);
}

/* ---- the source and build trees (tests/meson.build sets both variables) ---- */

/* $var/rel into out; false (out "") when the variable is not set, e.g. outside `meson test`. */
static inline bool tu_root_path(char *out, size_t cap, const char *var, const char *rel) {
    const char *root = getenv(var);
    out[0] = 0;
    if (!root || !*root) return false;
    snprintf(out, cap, "%s/%s", root, rel);
    return true;
}

static inline bool tu_build_path(char *out, size_t cap, const char *rel) {
    return tu_root_path(out, cap, "MINIGRAD_BUILD_ROOT", rel);
}

static inline bool tu_source_path(char *out, size_t cap, const char *rel) {
    return tu_root_path(out, cap, "MINIGRAD_SOURCE_ROOT", rel);
}

/* ---- a program of the build tree, run as a subprocess ---- */

/* What a suite knows of one program; the runner fills bin, out and err. A normal exit is a status
 * of at most max_status other than 127 (the shell's "not found"), or 130 when interrupt_ok (the
 * program's own exit on SIGINT); anything else (a signal, a sanitizer's report, a crash) fails the
 * test whatever status the caller expects. */
typedef struct {
    const char *name; /* in messages: "music" */
    const char *rel;  /* below the build root: "examples/music/music" */
    int max_status;
    bool interrupt_ok;
    char bin[1024];
    char out[1 << 16], err[1 << 16]; /* the last run's stdout and stderr, truncated */
} tu_program;

/* Fills p->bin; false when the program is not built (or the build root is unknown). */
static inline bool tu_program_built(tu_program *p) {
    return tu_build_path(p->bin, sizeof p->bin, p->rel) && access(p->bin, X_OK) == 0;
}

/* As tu_program_built, failing the current test when the program is not there. */
static inline void tu_find_program(tu_program *p) {
    const char *root = getenv("MINIGRAD_BUILD_ROOT");
    ck_assert_msg(tu_program_built(p), "%s: %s not built (MINIGRAD_BUILD_ROOT=%s)", p->name, p->rel,
                  root ? root : "(unset)");
}

/* Runs `cd DIR && ENV 'BIN' ARGS` through the shell (ARGS is a shell word list, ENV e.g.
 * "env X=1" or "") with stdout and stderr captured into DIR/stdout and DIR/stderr and read back
 * into p->out and p->err. Returns the exit status. */
static inline int tu_run_in(tu_program *p, const char *dir, const char *env, const char *args) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cd '%s' && %s '%s' %s >'%s/stdout' 2>'%s/stderr'", dir, env, p->bin,
             args, dir, dir);
    int st = system(cmd);
    tu_read_into(tu_path_in(dir, "stdout"), p->out, sizeof p->out);
    tu_read_into(tu_path_in(dir, "stderr"), p->err, sizeof p->err);
    ck_assert_msg(st != -1 && WIFEXITED(st),
                  "%s %s: did not exit normally (status %d); stderr: %.1500s", p->name, args, st,
                  p->err);
    int rc = WEXITSTATUS(st);
    ck_assert_msg(
        rc != 127 && (rc <= p->max_status || (rc == 130 && p->interrupt_ok)),
        "%s %s: exit status %d (killed, a crash, a sanitizer's report or not found): %.3000s",
        p->name, args, rc, p->err);
    return rc;
}

/* Starts BIN with argv (argv[0] the program's name, NULL-terminated) in dir, waits (up to about
 * 30 s) until the file dir/watch holds more than min_bytes (the program is well under way), then
 * sends it signal sig (SIGINT as Ctrl-C would, SIGTERM as `kill` would). Its stdout and stderr,
 * kept in dir/int.out and dir/int.err, are read back into p->out and p->err. Returns the child's
 * wait status. */
static inline int tu_run_signalled(tu_program *p, const char *dir, char *const argv[], const char *watch,
                                   long min_bytes, int sig) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (chdir(dir) != 0) _exit(99);
        if (!freopen("int.out", "w", stdout) || !freopen("int.err", "w", stderr)) _exit(99);
        execv(p->bin, argv);
        _exit(98);
    }
    for (int i = 0; i < 3000; i++) {
        struct stat sb;
        if (stat(tu_path_in(dir, watch), &sb) == 0 && sb.st_size > min_bytes) break;
        usleep(10000);
    }
    ck_assert_int_eq(kill(pid, sig), 0);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    tu_read_into(tu_path_in(dir, "int.out"), p->out, sizeof p->out);
    tu_read_into(tu_path_in(dir, "int.err"), p->err, sizeof p->err);
    return st;
}

/* tu_run_signalled with SIGINT, as Ctrl-C. */
static inline int tu_run_interrupted(tu_program *p, const char *dir, char *const argv[],
                                     const char *watch, long min_bytes) {
    return tu_run_signalled(p, dir, argv, watch, min_bytes, SIGINT);
}

/* text (what, e.g. "stdout", names it) contains part. */
static inline void tu_assert_has(const char *what, const char *text, const char *part) {
    ck_assert_msg(strstr(text, part) != NULL, "%s '%.2000s' lacks '%s'", what, text, part);
}

static inline void tu_assert_stdout_has(const tu_program *p, const char *part) {
    tu_assert_has("stdout", p->out, part);
}

static inline void tu_assert_stderr_has(const tu_program *p, const char *part) {
    tu_assert_has("stderr", p->err, part);
}

/* One run expected to fail: its arguments, exit status and a part of what it says on stderr. */
typedef struct {
    const char *args;
    int rc;
    const char *msg;
} tu_bad_run;

/* Runs each case in dir and checks its status and message. */
static inline void tu_expect_bad_runs(tu_program *p, const char *dir, const tu_bad_run *cases,
                                      size_t n) {
    for (size_t i = 0; i < n; i++) {
        int rc = tu_run_in(p, dir, "", cases[i].args);
        ck_assert_msg(rc == cases[i].rc, "%s %s: exit %d, expected %d; stderr: %.1500s", p->name,
                      cases[i].args, rc, cases[i].rc, p->err);
        tu_assert_stderr_has(p, cases[i].msg);
    }
}

/* ---- recoverable errors (mg_last_error) ---- */

static inline void tu_assert_error_has(const char *part) {
    tu_assert_has("error message", mg_last_error(), part);
}

/* `expr` (a call returning mg_status) succeeds; otherwise the message names the call and the
 * error. */
#define TU_OK(expr)                                                                                \
    do {                                                                                           \
        mg_status st_ = (expr);                                                                    \
        ck_assert_msg(st_ == MG_OK, "%s -> %d: %s", #expr, st_, mg_last_error());                  \
    } while (0)

/* `expr` returns `code` and the thread's error message holds every string that follows. */
#define TU_ASSERT_ERR(expr, code, ...)                                                             \
    do {                                                                                           \
        ck_assert_int_eq((expr), (code));                                                          \
        const char *subs_[] = {__VA_ARGS__};                                                       \
        for (size_t k_ = 0; k_ < sizeof subs_ / sizeof subs_[0]; k_++)                             \
            tu_assert_error_has(subs_[k_]);                                                        \
    } while (0)

/* ---- programming errors on a context, trapped instead of aborting ---- */

typedef struct {
    int calls;      /* how many times the handler ran */
    char msg[1024]; /* the latest message */
} tu_trap;

static inline void tu_trap_handler(mg_ctx *ctx, const char *msg, void *user) {
    (void)ctx;
    tu_trap *t = user;
    t->calls++;
    snprintf(t->msg, sizeof t->msg, "%s", msg);
}

/* A new context (arena bytes as mg_ctx_new) whose errors land in *t (cleared here). */
static inline mg_ctx *tu_trapping_ctx(tu_trap *t, size_t arena) {
    memset(t, 0, sizeof *t);
    mg_ctx *ctx = mg_ctx_new(arena);
    ck_assert_ptr_nonnull(ctx);
    mg_ctx_set_error_handler(ctx, tu_trap_handler, t);
    return ctx;
}

/* ---- float results within a bound ---- */

/* The rounding bound of a float product computed in any order: out[i, j] =
 * (K + 4) FLT_EPSILON (sum_k |op(a)[i, k]| |op(b)[k, j]| + |c[j]|), op(a) M x K (a stored K x M
 * when ta), op(b) K x N (b stored N x K when tb), c (N) or NULL. malloc'ed; the caller frees. */
static inline float *tu_abs_product_bound(const float *a, const float *b, const float *c, int64_t M,
                                          int64_t K, int64_t N, bool ta, bool tb) {
    float *out = malloc((size_t)(M * N > 0 ? M * N : 1) * sizeof(float));
    ck_assert_ptr_nonnull(out);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = c ? fabs(c[j]) : 0.0;
            for (int64_t k = 0; k < K; k++)
                s +=
                    fabs(ta ? a[k * M + i] : a[i * K + k]) * fabs(tb ? b[j * K + k] : b[k * N + j]);
            out[i * N + j] = (float)((double)(K + 4) * FLT_EPSILON * s);
        }
    return out;
}

/* |got[i] - want[i]| <= tol[i] for all n elements (equal values always pass), NaN only where want
 * is NaN; otherwise fails with the first element that is not, under the name what. */
static inline void tu_expect_within(const char *what, const float *got, const float *want,
                                    const float *tol, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const bool ok = isnan(want[i]) ? isnan(got[i])
                                       : (got[i] == want[i] || fabsf(got[i] - want[i]) <= tol[i]);
        /* Check logs every passing assertion: only a failure may reach ck_assert here */
        if (!ok)
            ck_abort_msg("%s: element %lld of %lld: got %.9g, want %.9g (tolerance %.3g)", what,
                         (long long)i, (long long)n, got[i], want[i], tol[i]);
    }
}

/* ---- the SIMD path, put back after each test ---- */

/* A teardown for suites whose tests force SIMD paths in turn (mg_isa_force, process-wide): puts
 * the path this CPU detected back, and fails the test if it cannot. Register it as a checked
 * fixture, tcase_add_checked_fixture(tc, NULL, tu_restore_detected_isa): that runs after every
 * test in the test's own process. Under Check's default CK_FORK each test's process ends with it
 * anyway; under CK_FORK=no every test shares one process and the checked teardown runs even after
 * a failed assertion, so a test that fails on a forced path cannot leave it to the next. (An
 * unchecked fixture would run once per TCase, in the runner's process: too late, and under
 * CK_FORK in the wrong process.) */
static inline void tu_restore_detected_isa(void) {
    const mg_isa best = mg_isa_detected();
    ck_assert_msg(mg_isa_force(best), "cannot restore the detected SIMD path %s",
                  mg_isa_name(best));
}

/* Adds test to tc when this CPU and build run the float32 SIMD path isa; otherwise reports it
 * skipped by name. Leaves the detected path active. */
static inline void tu_add_isa_case(TCase *tc, mg_isa isa, const TTest *test, const char *name) {
    if (mg_isa_force(isa)) {
        tcase_add_test(tc, test);
        (void)mg_isa_force(mg_isa_detected()); /* outside a test: no ck_assert */
    } else {
        fprintf(stderr, "# %s skipped: this CPU or build lacks the %s path\n", name, mg_isa_name(isa));
    }
}

/* ---- a full disk ---- */

/* /dev/full is there: every write into it fails with ENOSPC ("No space left on device"), as on a
 * full disk. */
static inline bool tu_have_dev_full(void) {
    struct stat sb;
    return stat("/dev/full", &sb) == 0 && S_ISCHR(sb.st_mode);
}

/* Fails the test unless /dev/full is still the character device it was: a writer must write into
 * a device, never rename a file over it. */
static inline void tu_assert_dev_full_intact(void) {
    struct stat sb;
    ck_assert_msg(lstat("/dev/full", &sb) == 0 && S_ISCHR(sb.st_mode), "/dev/full is no longer a device");
}

/* From now on a file this process (or a child) writes cannot grow past `bytes`: a write beyond
 * fails with EFBIG ("File too large"), as when a disk fills up in the middle of a file. SIGXFSZ
 * is ignored so that the write returns the error. Returns the limit before, for
 * tu_restore_file_size (under Check's default CK_FORK the test's process ends with it anyway). */
static inline struct rlimit tu_limit_file_size(rlim_t bytes) {
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = bytes;
    signal(SIGXFSZ, SIG_IGN);
    ck_assert_msg(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit(RLIMIT_FSIZE): %s", strerror(errno));
    return old;
}

static inline void tu_restore_file_size(struct rlimit old) {
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, SIG_DFL);
}

/* As tu_run_in, with the program's standard output going to out_path (e.g. /dev/full) instead of
 * being captured: p->out is left empty. */
static inline int tu_run_stdout_to(tu_program *p, const char *dir, const char *args, const char *out_path) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s >'%s' 2>'%s/stderr'", dir, p->bin, args, out_path, dir);
    int st = system(cmd);
    p->out[0] = 0;
    tu_read_into(tu_path_in(dir, "stderr"), p->err, sizeof p->err);
    ck_assert_msg(st != -1 && WIFEXITED(st), "%s %s >%s: did not exit normally (status %d); stderr: %.1500s",
                  p->name, args, out_path, st, p->err);
    int rc = WEXITSTATUS(st);
    ck_assert_msg(rc != 127 && rc <= p->max_status,
                  "%s %s >%s: exit status %d (killed, a crash, a sanitizer's report or not found): %.3000s",
                  p->name, args, out_path, rc, p->err);
    return rc;
}

/* ---- what the example programs write ---- */

/* Steps and losses of a training run's JSON-lines log (--log / log.jsonl), up to 512 lines. */
typedef struct {
    int n, nv; /* lines; lines with a validation loss */
    long step[512], val_step[512];
    double loss[512], val[512];
} tu_run_log;

/* Reads the log; every line must hold "step", "loss", "tokens_per_s" and also_key (when not
 * NULL, e.g. "\"lr\": "). */
static inline void tu_read_log(const char *path, tu_run_log *lg, const char *also_key) {
    memset(lg, 0, sizeof *lg);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "no log at %s", path);
    char line[1024];
    while (fgets(line, sizeof line, f) && lg->n < 512) {
        const char *s = strstr(line, "\"step\": "), *l = strstr(line, "\"loss\": "),
                   *v = strstr(line, "\"val_loss\": ");
        ck_assert_msg(s && l && strstr(line, "\"tokens_per_s\": ") &&
                          (!also_key || strstr(line, also_key)),
                      "log line: %s", line);
        lg->step[lg->n] = strtol(s + 8, NULL, 10);
        lg->loss[lg->n++] = strtod(l + 8, NULL);
        if (v) lg->val_step[lg->nv] = lg->step[lg->n - 1], lg->val[lg->nv++] = strtod(v + 12, NULL);
    }
    fclose(f);
}

/* Every tensor of two safetensors files, bit for bit, and the metadata values named by keys
 * (NULL-terminated; keys itself may be NULL). */
static inline void tu_assert_same_safetensors(const char *a, const char *b,
                                              const char *const *keys) {
    mg_st_file *fa, *fb;
    ck_assert_msg(mg_safetensors_open(a, &fa) == MG_OK, "%s", mg_last_error());
    ck_assert_msg(mg_safetensors_open(b, &fb) == MG_OK, "%s", mg_last_error());
    ck_assert_int_eq(mg_st_count(fa), mg_st_count(fb));
    for (int i = 0; i < mg_st_count(fa); i++) {
        const mg_st_tensor_info *ia = mg_st_info(fa, i);
        int j = mg_st_find(fb, ia->name);
        ck_assert_msg(j >= 0, "%s lacks %s", b, ia->name);
        ck_assert_int_eq(mg_st_info(fb, j)->numel, ia->numel);
        float *x = malloc((size_t)ia->numel * 4), *y = malloc((size_t)ia->numel * 4);
        ck_assert_msg(mg_st_read_f32(fa, i, x, ia->numel) == MG_OK, "%s", mg_last_error());
        ck_assert_msg(mg_st_read_f32(fb, j, y, ia->numel) == MG_OK, "%s", mg_last_error());
        ck_assert_msg(memcmp(x, y, (size_t)ia->numel * 4) == 0, "%s differs between %s and %s",
                      ia->name, a, b);
        free(x);
        free(y);
    }
    for (int k = 0; keys && keys[k]; k++) {
        const char *va = mg_st_meta_get(fa, keys[k]), *vb = mg_st_meta_get(fb, keys[k]);
        ck_assert_msg(va && vb && strcmp(va, vb) == 0, "metadata %s: '%s' vs '%s'", keys[k],
                      va ? va : "(none)", vb ? vb : "(none)");
    }
    mg_st_close(fa);
    mg_st_close(fb);
}

/* A run trained straight to the end (dir/a) and the same run stopped after `stop` steps and resumed
 * (dir/b) agree exactly: the weights bit for bit with the metadata values wkeys, the training
 * state with its loss history and RNG states, and every line of both logs (steps lines each,
 * log_key as tu_read_log). */
static inline void tu_assert_resumed_exactly(const char *dir, const char *a, const char *b,
                                             const char *const *wkeys, int steps, int stop,
                                             const char *log_key) {
    static const char *const skeys[] = {"history.loss", "history.val", "rng.data", "rng.dropout",
                                        NULL};
    char pa[1024], pb[1024];
    snprintf(pa, sizeof pa, "%s/%s/model.safetensors", dir, a);
    snprintf(pb, sizeof pb, "%s/%s/model.safetensors", dir, b);
    tu_assert_same_safetensors(pa, pb, wkeys);
    snprintf(pa, sizeof pa, "%s/%s/model.state.safetensors", dir, a);
    snprintf(pb, sizeof pb, "%s/%s/model.state.safetensors", dir, b);
    tu_assert_same_safetensors(pa, pb, skeys);
    static tu_run_log la, lb; /* 16 KiB each: off the stack */
    snprintf(pa, sizeof pa, "%s/%s/log.jsonl", dir, a);
    snprintf(pb, sizeof pb, "%s/%s/log.jsonl", dir, b);
    tu_read_log(pa, &la, log_key);
    tu_read_log(pb, &lb, log_key);
    ck_assert_int_eq(la.n, steps);
    ck_assert_int_eq(lb.n, steps);
    ck_assert_mem_eq(la.loss, lb.loss, sizeof la.loss);
    ck_assert_mem_eq(la.val, lb.val, sizeof la.val);
    ck_assert_int_eq(lb.step[stop], stop + 1);
}

/* Rewrites the safetensors file at path with its metadata key set to value (added when absent),
 * every tensor and every other metadata entry as they were, and a checksum that matches: a
 * checkpoint whose metadata says what its writer never would, made as a hostile tool would. */
static inline void tu_set_meta(const char *path, const char *key, const char *value) {
    mg_st_file *f;
    ck_assert_msg(mg_safetensors_open(path, &f) == MG_OK, "%s", mg_last_error());
    int n = mg_st_count(f), nm = mg_st_meta_count(f), k = 0;
    mg_st_entry *e = calloc((size_t)n + 1, sizeof *e);
    mg_st_meta *m = calloc((size_t)nm + 1, sizeof *m);
    ck_assert(e && m);
    for (int i = 0; i < n; i++) {
        const mg_st_tensor_info *t = mg_st_info(f, i);
        float *d = malloc((size_t)(t->numel ? t->numel : 1) * 4);
        ck_assert_ptr_nonnull(d);
        ck_assert_msg(mg_st_read_f32(f, i, d, t->numel) == MG_OK, "%s", mg_last_error());
        e[i] = (mg_st_entry){t->name, t->ndim, {0}, d};
        memcpy(e[i].shape, t->shape, sizeof e[i].shape);
    }
    bool set = false;
    for (int i = 0; i < nm; i++) {
        if (strcmp(mg_st_meta_key(f, i), "checksum") == 0) continue; /* the writer makes a new, valid one */
        bool hit = strcmp(mg_st_meta_key(f, i), key) == 0;
        m[k++] = (mg_st_meta){mg_st_meta_key(f, i), hit ? value : mg_st_meta_value(f, i)};
        set |= hit;
    }
    if (!set) m[k++] = (mg_st_meta){key, value};
    ck_assert_msg(mg_safetensors_write(path, e, n, m, k) == MG_OK, "%s", mg_last_error());
    for (int i = 0; i < n; i++) free((void *)e[i].data);
    free(e);
    free(m);
    mg_st_close(f);
}

/* SANITIZED: 1 in an AddressSanitizer build, where suites shrink their largest cases. */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* The text between the lines holding begin and end (both lines excluded), malloc'd; NULL when a
 * marker is missing. */
static inline char *tu_between(const char *s, const char *begin, const char *end) {
    const char *a = strstr(s, begin), *b = a ? strstr(a, end) : NULL;
    if (!a || !b) return NULL;
    a = strchr(a, '\n');
    while (b > a && b[-1] != '\n') b--;
    if (!a || b <= a) return NULL;
    a++;
    char *out = malloc((size_t)(b - a) + 1);
    ck_assert_ptr_nonnull(out);
    memcpy(out, a, (size_t)(b - a));
    out[b - a] = 0;
    return out;
}

/* Entries of folder dir whose name contains part. */
static inline int tu_count_entries(const char *dir, const char *part) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strstr(e->d_name, part)) n++;
    closedir(d);
    return n;
}

/* n bf16 values of a model's scale (uniform in [-2, 2)) with a sprinkling of zeros, denormals (read
 * as zero by the bf16 products) and tiny normals whose products with the like underflow; malloc'ed. */
static inline mg_bf16 *tu_bf16_fill(size_t n, uint64_t seed) {
    mg_bf16 *p = malloc((n ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    mg_rng r = mg_rng_make(seed);
    for (size_t i = 0; i < n; i++) {
        const float u = mg_rng_range(&r, 0.0f, 1.0f);
        float v = mg_rng_range(&r, -2.0f, 2.0f);
        if (u < 0.02f)
            v = 0.0f;
        else if (u < 0.04f)
            v = v * 1e-39f; /* denormal */
        else if (u < 0.06f)
            v = v * 2e-20f; /* normal, but its products with the like are denormal */
        p[i] = mg_f32_to_bf16_1(v);
    }
    return p;
}

/* n bf16 values for the flushes of the bf16 products: mostly of magnitude 2^-71 to 2^-55, so that
 * products and sums fall below FLT_MIN (and are flushed) about as often as not, with signed zeros,
 * denormals, the smallest normals, +-1 and, rarer, huge values, infinities and NaN; malloc'ed. */
static inline mg_bf16 *tu_bf16_fill_tiny(size_t n, uint64_t seed) {
    static const mg_bf16 common[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x807f, 0x0080, 0x8080,
                                     0x3f80, 0xbf80};
    static const mg_bf16 rare[] = {0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0x7f81};
    mg_bf16 *p = malloc((n ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    mg_rng r = mg_rng_make(seed);
    for (size_t i = 0; i < n; i++) {
        const uint32_t u = (uint32_t)(mg_rng_next(&r) >> 32);
        const uint32_t pick = (u >> 8) % 1000;
        if (pick < 200)
            p[i] = common[(u >> 20) % (sizeof common / sizeof *common)];
        else if (pick < 205)
            p[i] = rare[(u >> 20) % (sizeof rare / sizeof *rare)];
        else /* sign, exponent field 56 to 72, any mantissa */
            p[i] = (mg_bf16)((u & 1u) << 15 | (56u + (u >> 1) % 17u) << 7 | ((u >> 24) & 0x7fu));
    }
    return p;
}

/* A palette-1 AMX tile configuration, as LDTILECFG takes it: tmm0 .. tiles-1 each of rows rows of
 * colsb bytes, the other tiles unused. The kernels' own is (8, 64, 16). */
static inline void tu_amx_tile_config(uint8_t cfg[64], int tiles, int colsb, int rows) {
    memset(cfg, 0, 64);
    cfg[0] = 1;
    for (int t = 0; t < tiles; t++) {
        cfg[16 + 2 * t] = (uint8_t)colsb;
        cfg[48 + t] = (uint8_t)rows;
    }
}

/* What other code on the calling thread may do to the tiles of the AMX model between two of our
 * products: release them (TILERELEASE), or load another library's configuration (tmm0 and tmm1 of
 * 8 rows x 32 bytes; a TILELOADD into tmm4 under it faults). Whether the model's STTILECFG then
 * reads back that state (64 zero bytes once released); no ck_assert, as it also runs on OpenMP's
 * threads. */
static inline bool tu_amx_disturb_tiles(bool released) {
    uint8_t want[64], got[64];
    if (released) memset(want, 0, sizeof want);
    else tu_amx_tile_config(want, 2, 32, 8);
    mg_bf16_amx_emulation_load_tiles(released ? NULL : want);
    memset(got, 0xa5, sizeof got);
    mg_bf16_amx_emulation_store_tiles(got);
    return memcmp(got, want, sizeof got) == 0;
}

/* A checked fixture's teardown: back to the bf16 path this CPU would use. */
static inline void tu_restore_bf16_path(void) {
    ck_assert(mg_bf16_path_force(mg_bf16_path_detected()));
}

/* Adds test to tc when the machine has the bf16 path; otherwise reports it skipped by name. AMX
 * counts as there when the CPU has it even if the start-up check turned the path off: its tests
 * then run, and fail. */
static inline void tu_add_bf16_path_case(TCase *tc, mg_bf16_path path, const TTest *test, const char *name,
                                         const char *why) {
    if (mg_bf16_path_available(path) || (path == MG_BF16_AMX && mg_bf16_amx_on_cpu()))
        tcase_add_test(tc, test);
    else
        fprintf(stderr, "# %s skipped: %s\n", name, why);
}

#endif
