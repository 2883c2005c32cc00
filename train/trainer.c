/* The training loop (minigrad/train.h). */
#include "minigrad/train.h"

#include "curve.h"
#include "dp.h"
#include "minigrad/checkpoint.h"
#include "minigrad/op.h" /* mg_ctx_ok */
#include "minigrad/optim.h"
#include "minigrad/rowops.h" /* mg_adamw_update, for ZeRO-1 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STEP_KEY "train.step" /* in the weights file: the step they were saved at */
#define WEIGHTS_SUM_KEY "weights.checksum" /* in the state file: the checksum of its weights file */
#define PENDING_SUFFIX ".pending"          /* a file written in full, not yet committed */
#define MAX_RNG_NAME 32

mg_train_cfg mg_train_defaults(void) {
    return (mg_train_cfg){.steps = 1000, .warmup = 100, .lr = 1e-3f, .lr_min = 1e-4f, .weight_decay = 0.1f,
                          .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .clip = 1.0f, .eval_every = 250,
                          .ckpt_every = 250, .seed = 1, .prog = "train", .catch_sigint = true,
                          .max_weight = 1e6f};
}

mg_status mg_train_state_path(const char *ckpt, char *buf, size_t n) {
    size_t len = strlen(ckpt), sl = strlen(".safetensors");
    int k;
    if (len > sl && strcmp(ckpt + len - sl, ".safetensors") == 0)
        k = snprintf(buf, n, "%.*s.state.safetensors", (int)(len - sl), ckpt);
    else
        k = snprintf(buf, n, "%s.state.safetensors", ckpt);
    if (k < 0 || (size_t)k >= n)
        return mg_set_error(MG_ERR_INVALID, "%s: the path of its training state is longer than %zu bytes", ckpt,
                            n ? n - 1 : 0);
    return MG_OK;
}

/* ---- Ctrl-C or SIGTERM: the first one asks the loop to save and stop; a second one (of either)
 * ends the process ---- */
static volatile sig_atomic_t interrupted; /* the signal's number, 0 while none came */
/* What the handler writes at once, so that the key press is seen to be taken while the step in
 * flight finishes (seconds on a large model); made before the handler is installed (write(2) is
 * all a handler may call). Empty: nothing (a quiet run, or a rank other than the lead). */
static char stop_ack[192];
static size_t stop_ack_len;
static void on_stop_signal(int sig) {
    interrupted = sig;
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (stop_ack_len) {
        const int saved = errno; /* the interrupted code may be about to read it */
        ssize_t w = write(STDERR_FILENO, stop_ack, stop_ack_len);
        (void)w; /* nothing to do about a terminal that cannot be written to */
        errno = saved;
    }
}

static const char *stop_signal_name(int sig) {
    return sig == SIGTERM ? "SIGTERM" : "Ctrl-C";
}

/* ---- the loss history (kept in the state file so a resumed run's curve is the whole run) ---- */
typedef struct {
    float *loss; /* loss[s] = training loss of step s+1 */
    int64_t n, cap;
    int64_t *val_step;
    float *val;
    int64_t nv, capv;
    bool nomem;
} history;

static void hist_push(history *h, float loss) {
    if (h->n == h->cap) {
        int64_t cap = h->cap ? 2 * h->cap : 1024;
        float *l = realloc(h->loss, (size_t)cap * sizeof *l);
        if (!l) {
            h->nomem = true;
            return;
        }
        h->loss = l, h->cap = cap;
    }
    h->loss[h->n++] = loss;
}

static void hist_push_val(history *h, int64_t step, float v) {
    if (h->nv == h->capv) {
        int64_t cap = h->capv ? 2 * h->capv : 64;
        int64_t *s = realloc(h->val_step, (size_t)cap * sizeof *s);
        if (s) h->val_step = s;
        float *v2 = s ? realloc(h->val, (size_t)cap * sizeof *v2) : NULL;
        if (!v2) {
            h->nomem = true;
            return;
        }
        h->val = v2, h->capv = cap;
    }
    h->val_step[h->nv] = step;
    h->val[h->nv++] = v;
}

/* Encodes the history as metadata text: "l1,l2,..." and "step:v,step:v,...". NULL: no memory. */
static char *hist_text(const history *h, bool val) {
    int64_t n = val ? h->nv : h->n;
    size_t cap = (size_t)n * 40 + 16, off = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    s[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        if (val)
            off += (size_t)snprintf(s + off, cap - off, "%s%lld:%.9g", i ? "," : "", (long long)h->val_step[i],
                                    (double)h->val[i]);
        else
            off += (size_t)snprintf(s + off, cap - off, "%s%.9g", i ? "," : "", (double)h->loss[i]);
    }
    return s;
}

static void hist_parse(history *h, const char *loss, const char *val) {
    for (const char *p = loss; p && *p;) {
        char *end;
        float v = strtof(p, &end);
        if (end == p) break;
        hist_push(h, v);
        p = *end == ',' ? end + 1 : end;
    }
    for (const char *p = val; p && *p;) {
        char *end;
        long long s = strtoll(p, &end, 10);
        if (*end != ':') break;
        float v = strtof(end + 1, &end);
        hist_push_val(h, s, v);
        p = *end == ',' ? end + 1 : end;
    }
}

static void hist_free(history *h) {
    free(h->loss);
    free(h->val_step);
    free(h->val);
}

/* ---- checks of what the caller hands in ---- */

static mg_status check_args(const mg_train_model *m, const mg_train_cfg *c, const char *prog) {
    if (!m || !c) return mg_set_error(MG_ERR_INVALID, "%s: mg_train_run needs a model and a configuration", prog);
    if (!m->params || !mg_params_allocated(m->params))
        return mg_set_error(MG_ERR_INVALID, "%s: model.params must be an allocated parameter store", prog);
    if (!m->loss && !m->loss_rows)
        return mg_set_error(MG_ERR_INVALID, "%s: model.loss is required (or model.loss_rows)", prog);
    if (m->batch_rows < 0 || (m->loss_rows && m->batch_rows < 1))
        return mg_set_error(MG_ERR_INVALID, "%s: model.batch_rows must be at least 1 with model.loss_rows, got %lld",
                            prog, (long long)m->batch_rows);
    if (m->n_meta < 0 || (m->n_meta > 0 && !m->meta))
        return mg_set_error(MG_ERR_INVALID, "%s: model.n_meta is %d but model.meta holds no entries", prog, m->n_meta);
    for (int i = 0; i < m->n_meta; i++) {
        if (!m->meta[i].key || !m->meta[i].value)
            return mg_set_error(MG_ERR_INVALID, "%s: model.meta[%d] lacks its key or value", prog, i);
        if (strcmp(m->meta[i].key, STEP_KEY) == 0 || strcmp(m->meta[i].key, MG_ST_CHECKSUM_KEY) == 0)
            return mg_set_error(MG_ERR_INVALID, "%s: model.meta[%d]: the key '%s' is the %s own", prog, i,
                                m->meta[i].key, strcmp(m->meta[i].key, STEP_KEY) == 0 ? "trainer's" : "writer's");
    }
    if (m->n_rngs < 0 || m->n_rngs > MG_TRAIN_MAX_RNGS)
        return mg_set_error(MG_ERR_INVALID, "%s: model.n_rngs must lie in [0, %d], got %d", prog, MG_TRAIN_MAX_RNGS,
                            m->n_rngs);
    for (int i = 0; i < m->n_rngs; i++) {
        const char *name = m->rng_names[i];
        if (!m->rngs[i]) return mg_set_error(MG_ERR_INVALID, "%s: model.rngs[%d] is NULL", prog, i);
        if (!name || !name[0] || strlen(name) > MAX_RNG_NAME)
            return mg_set_error(MG_ERR_INVALID, "%s: model.rng_names[%d] must be a name of 1 to %d characters", prog,
                                i, MAX_RNG_NAME);
        if (strcmp(name, "dropout") == 0)
            return mg_set_error(MG_ERR_INVALID, "%s: model.rng_names[%d]: 'dropout' is the trainer's own stream",
                                prog, i);
        for (int k = 0; k < i; k++)
            if (strcmp(m->rng_names[k], name) == 0)
                return mg_set_error(MG_ERR_INVALID, "%s: model.rng_names[%d] and [%d] are both '%s'", prog, k, i, name);
    }
    if (m->tokens_per_step < 0)
        return mg_set_error(MG_ERR_INVALID, "%s: model.tokens_per_step must be at least 0, got %lld", prog,
                            (long long)m->tokens_per_step);
    struct {
        const char *name;
        int64_t v, min;
    } ints[] = {{"steps", c->steps, 1},
                {"warmup", c->warmup, 0},
                {"eval_every", c->eval_every, 0},
                {"ckpt_every", c->ckpt_every, 0},
                {"stop_after", c->stop_after, 0}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].v < ints[i].min)
            return mg_set_error(MG_ERR_INVALID, "%s: cfg.%s must be at least %lld, got %lld", prog, ints[i].name,
                                (long long)ints[i].min, (long long)ints[i].v);
    if (!(c->lr > 0) || !isfinite(c->lr))
        return mg_set_error(MG_ERR_INVALID, "%s: cfg.lr must be positive and finite, got %g", prog, (double)c->lr);
    struct {
        const char *name;
        float v, min, max;
        bool max_open;
    } fl[] = {{"lr_min", c->lr_min, 0, INFINITY, true},        {"weight_decay", c->weight_decay, 0, INFINITY, true},
              {"beta1", c->beta1, 0, 1, true},                 {"beta2", c->beta2, 0, 1, true},
              {"clip", c->clip, 0, INFINITY, true},            {"max_weight", c->max_weight, 0, INFINITY, true}};
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++)
        if (!(fl[i].v >= fl[i].min && fl[i].v < fl[i].max))
            return mg_set_error(MG_ERR_INVALID, "%s: cfg.%s must lie in [%g, %g), got %g", prog, fl[i].name,
                                (double)fl[i].min, (double)fl[i].max, (double)fl[i].v);
    if (!(c->eps > 0) || !isfinite(c->eps))
        return mg_set_error(MG_ERR_INVALID, "%s: cfg.eps must be positive and finite, got %g", prog, (double)c->eps);
    if (c->ckpt && !c->ckpt[0]) return mg_set_error(MG_ERR_INVALID, "%s: cfg.ckpt is an empty path", prog);
    if (!c->ckpt && c->resume)
        return mg_set_error(MG_ERR_INVALID, "%s: cfg.resume needs cfg.ckpt, the checkpoint to continue", prog);
    if (!c->ckpt && c->stop_after > 0)
        return mg_set_error(MG_ERR_INVALID, "%s: cfg.stop_after needs cfg.ckpt, where the stopped run is saved", prog);
    if (c->precision != MG_PRECISION_FP32 && c->precision != MG_PRECISION_BF16)
        return mg_set_error(MG_ERR_INVALID, "%s: cfg.precision is %d: expected MG_PRECISION_FP32 or MG_PRECISION_BF16",
                            prog, (int)c->precision);
    return MG_OK;
}

/* ---- saving and restoring ---- */

/* The files of a checkpoint: the weights, the training state, and where each is written before
 * the pair is committed (see "Checkpoints" in train.h). */
typedef struct {
    char ckpt[4096], state[4096], ckpt_next[4096 + 16], state_next[4096 + 16];
} ckpt_files;

static mg_status files_make(const char *ckpt, ckpt_files *f) {
    mg_status st = mg_train_state_path(ckpt, f->state, sizeof f->state);
    if (st != MG_OK) return st;
    if (strlen(ckpt) >= sizeof f->ckpt)
        return mg_set_error(MG_ERR_INVALID, "%s: the checkpoint path is longer than %zu bytes", ckpt,
                            sizeof f->ckpt - 1);
    snprintf(f->ckpt, sizeof f->ckpt, "%s", ckpt);
    snprintf(f->ckpt_next, sizeof f->ckpt_next, "%s" PENDING_SUFFIX, f->ckpt);
    snprintf(f->state_next, sizeof f->state_next, "%s" PENDING_SUFFIX, f->state);
    /* both are renamed into place: a device, FIFO or folder there would be replaced */
    const char *final[2] = {f->ckpt, f->state};
    for (int i = 0; i < 2; i++) {
        struct stat sb;
        if (stat(final[i], &sb) == 0 && !S_ISREG(sb.st_mode))
            return mg_set_error(MG_ERR_IO, "%s: not a regular file: checkpoints are written beside their path and "
                                "renamed into place, which would replace it", final[i]);
    }
    return MG_OK;
}

static bool file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* The directory of path, fsync'ed so that a rename in it is on disk before the next one. */
static void sync_dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* Testing aid: MINIGRAD_TRAIN_CRASH=POINT[:N] kills the process (SIGKILL) at POINT of the N-th
 * checkpoint (default 1) this call writes, as a power cut or a kill -9 would. */
static void crash_point(const char *point, int64_t nth) {
    const char *v = getenv("MINIGRAD_TRAIN_CRASH");
    size_t len = strlen(point);
    if (!v || strncmp(v, point, len) != 0 || (v[len] && v[len] != ':')) return;
    if ((v[len] ? strtoll(v + len + 1, NULL, 10) : 1) == nth) raise(SIGKILL);
}

/* What ties a training state to its weights: the weights file's checksum, as recorded in it, or
 * computed when a custom model.save wrote none. */
static mg_status weights_sum(const char *path, char *out, size_t n) {
    mg_st_file *f;
    mg_status st = mg_safetensors_open(path, &f);
    if (st != MG_OK) return st;
    const char *v = mg_st_meta_get(f, MG_ST_CHECKSUM_KEY);
    uint32_t crc;
    if (v)
        snprintf(out, n, "%s", v);
    else if ((st = mg_st_checksum(f, &crc)) == MG_OK)
        snprintf(out, n, "crc32:%08x", (unsigned)crc);
    mg_st_close(f);
    return st;
}

/* Removes what killed runs left: the writer's "<path>.tmp.<pid>" of a process that no longer
 * exists (or of this one, which has no save under way when this runs). */
static void remove_stale_temps(const char *path) {
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    char dir[4096], prefix[4200], victim[8400];
    snprintf(dir, sizeof dir, "%.*s", slash ? (slash == path ? 1 : (int)(slash - path)) : 1, slash ? path : ".");
    snprintf(prefix, sizeof prefix, "%s.tmp.", base);
    size_t lp = strlen(prefix);
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        const char *pid_text = e->d_name + lp;
        if (strncmp(e->d_name, prefix, lp) != 0 || !*pid_text || strspn(pid_text, "0123456789") != strlen(pid_text))
            continue;
        long long pid = strtoll(pid_text, NULL, 10);
        bool gone = pid == (long long)getpid() || pid <= 0 || pid > INT32_MAX ||
                    (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
        if (!gone) continue;
        snprintf(victim, sizeof victim, "%s/%s", dir, e->d_name);
        if (unlink(victim) == 0) mg_log(MG_LOG_INFO, "removed %s, left by a run that was killed while saving", victim);
    }
    closedir(d);
}

/* Puts the files in order before a run: temporary files of killed runs go; a pending weights file
 * was never committed and goes; a pending training state is renamed into place when the committed
 * weights are the ones it names (the save was cut short between the two renames), and goes
 * otherwise. Only a resumed run completes a save; a fresh one starts over. */
static mg_status recover(const ckpt_files *f, bool resume, const char *prog) {
    const char *all[4] = {f->ckpt, f->state, f->ckpt_next, f->state_next};
    for (int i = 0; i < 4; i++) remove_stale_temps(all[i]);
    if (file_exists(f->ckpt_next) && unlink(f->ckpt_next) != 0)
        return mg_set_error(MG_ERR_IO, "%s: cannot remove the uncommitted %s: %s", prog, f->ckpt_next,
                            strerror(errno));
    if (!file_exists(f->state_next)) return MG_OK;
    bool complete = false;
    char have[64], step_text[32] = "?";
    if (resume && file_exists(f->ckpt) && weights_sum(f->ckpt, have, sizeof have) == MG_OK) {
        mg_st_file *sf;
        if (mg_safetensors_open(f->state_next, &sf) == MG_OK) {
            const char *want = mg_st_meta_get(sf, WEIGHTS_SUM_KEY), *step = mg_st_meta_get(sf, "step");
            complete = want && strcmp(want, have) == 0;
            if (step) snprintf(step_text, sizeof step_text, "%.20s", step);
            mg_st_close(sf);
        }
    }
    mg_clear_error();
    if (complete) {
        if (rename(f->state_next, f->state) != 0)
            return mg_set_error(MG_ERR_IO, "%s: cannot rename %s to %s: %s", prog, f->state_next, f->state,
                                strerror(errno));
        sync_dir_of(f->state);
        mg_log(MG_LOG_INFO, "%s: completed the checkpoint of step %s that was cut short: %s is now in place", prog,
               step_text, f->state);
        return MG_OK;
    }
    if (unlink(f->state_next) != 0)
        return mg_set_error(MG_ERR_IO, "%s: cannot remove the uncommitted %s: %s", prog, f->state_next,
                            strerror(errno));
    return MG_OK;
}

static mg_status save_weights(const mg_train_model *m, const char *path, int64_t step) {
    mg_st_meta *meta = malloc((size_t)(m->n_meta + 1) * sizeof *meta);
    if (!meta) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory saving", path);
    for (int i = 0; i < m->n_meta; i++) meta[i] = m->meta[i];
    char num[24];
    meta[m->n_meta] = (mg_st_meta){STEP_KEY, mg_meta_fmt_i64(num, step)};
    mg_status s = m->save ? m->save(m->user, path, meta, m->n_meta + 1)
                          : mg_checkpoint_save(path, m->params, false, meta, m->n_meta + 1);
    free(meta);
    return s;
}

static const char *rng_name(const mg_train_model *m, int i) {
    return i < m->n_rngs ? m->rng_names[i] : "dropout";
}

/* One checkpoint, committed as a pair: both files are written in full beside their final names
 * first; renaming the weights into place commits; the state follows. A kill or a failure at any
 * point leaves either the previous pair or the new weights with a pending state that names them
 * (completed by the next resume). nth counts this call's checkpoints (for crash_point). */
static mg_status save_all(const mg_train_model *m, const mg_optim *opt, const ckpt_files *f, const mg_rng *dropout,
                          const history *h, int64_t nth) {
    int64_t step = mg_optim_steps(opt);
    if (h->nomem) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory keeping the loss history", f->state);
    unlink(f->ckpt_next);
    unlink(f->state_next);
    char sum[64];
    mg_status s = save_weights(m, f->ckpt_next, step);
    if (s == MG_OK) {
        crash_point("weights", nth);
        s = weights_sum(f->ckpt_next, sum, sizeof sum);
    }
    char num[MG_TRAIN_MAX_RNGS + 1][24], key[MG_TRAIN_MAX_RNGS + 1][MAX_RNG_NAME + 8];
    mg_st_meta meta[MG_TRAIN_MAX_RNGS + 4];
    int n = 0;
    for (int i = 0; i <= m->n_rngs; i++) {
        const mg_rng *r = i < m->n_rngs ? m->rngs[i] : dropout;
        snprintf(key[i], sizeof key[i], "rng.%s", rng_name(m, i));
        meta[n++] = (mg_st_meta){key[i], mg_meta_fmt_u64(num[i], r->s)};
    }
    char *hl = s == MG_OK ? hist_text(h, false) : NULL, *hv = s == MG_OK ? hist_text(h, true) : NULL;
    if (s == MG_OK && (!hl || !hv)) s = mg_set_error(MG_ERR_NOMEM, "%s: out of memory saving the loss history", f->state);
    if (s == MG_OK) {
        meta[n++] = (mg_st_meta){"history.loss", hl};
        meta[n++] = (mg_st_meta){"history.val", hv};
        meta[n++] = (mg_st_meta){WEIGHTS_SUM_KEY, sum};
        s = mg_train_state_save(f->state_next, opt, m->params, meta, n);
    }
    free(hl);
    free(hv);
    if (s == MG_OK) {
        crash_point("state", nth);
        if (rename(f->ckpt_next, f->ckpt) != 0)
            s = mg_set_error(MG_ERR_IO, "%s: renaming %s over it failed: %s", f->ckpt, f->ckpt_next, strerror(errno));
    }
    if (s != MG_OK) {
        unlink(f->ckpt_next);
        unlink(f->state_next);
        return mg_wrap_error(s, "the checkpoint of step %lld was not saved (the previous one is intact)",
                             (long long)step);
    }
    sync_dir_of(f->ckpt);
    crash_point("commit", nth);
    if (rename(f->state_next, f->state) != 0)
        return mg_set_error(MG_ERR_IO,
                            "%s: the weights of step %lld are saved, but renaming their training state %s over "
                            "%s failed: %s (a resume completes it)",
                            f->ckpt, (long long)step, f->state_next, f->state, strerror(errno));
    sync_dir_of(f->state);
    return MG_OK;
}

static mg_status restore_all(const mg_train_model *m, mg_optim *opt, const ckpt_files *fs, mg_rng *dropout,
                             history *h) {
    const char *ckpt = fs->ckpt, *state = fs->state;
    mg_status s = m->load ? m->load(m->user, ckpt) : mg_checkpoint_load(ckpt, m->params, NULL);
    if (s != MG_OK) return mg_wrap_error(s, "cannot resume");
    int64_t saved_step = -1;
    mg_st_file *f = NULL;
    char have[64];
    if ((s = weights_sum(ckpt, have, sizeof have)) != MG_OK) return s;
    if ((s = mg_safetensors_open(ckpt, &f)) != MG_OK) return s;
    if (mg_st_meta_get(f, STEP_KEY)) s = mg_meta_get_i64(f, STEP_KEY, &saved_step);
    mg_st_close(f);
    f = NULL;
    if (s != MG_OK) return s;
    if ((s = mg_train_state_load(state, opt, m->params, &f)) != MG_OK)
        return mg_wrap_error(s, "cannot resume (the training state is saved beside the weights)");
    mg_rng restored[MG_TRAIN_MAX_RNGS + 1];
    for (int i = 0; i <= m->n_rngs && s == MG_OK; i++) {
        char key[MAX_RNG_NAME + 8];
        snprintf(key, sizeof key, "rng.%s", rng_name(m, i));
        s = mg_meta_get_u64(f, key, &restored[i].s);
    }
    char want[64] = "";
    const char *w = mg_st_meta_get(f, WEIGHTS_SUM_KEY);
    if (w) snprintf(want, sizeof want, "%s", w);
    if (s == MG_OK) hist_parse(h, mg_st_meta_get(f, "history.loss"), mg_st_meta_get(f, "history.val"));
    mg_st_close(f);
    if (s != MG_OK) return s;
    int64_t step = mg_optim_steps(opt);
    if (h->nomem) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory reading the loss history", state);
    if (saved_step >= 0 && saved_step != step)
        return mg_set_error(MG_ERR_FORMAT,
                            "%s: cannot resume: the weights are of step %lld but the training state %s is of step "
                            "%lld: the %s is older (the two files come from different saves)",
                            ckpt, (long long)saved_step, state, (long long)step,
                            saved_step < step ? "weights file" : "training state");
    if (want[0] && strcmp(want, have) != 0)
        return mg_set_error(MG_ERR_FORMAT,
                            "%s: cannot resume: the training state %s belongs to other weights (it names %s, this "
                            "file has %s): the two files come from different runs or saves of step %lld",
                            ckpt, state, want, have, (long long)step);
    if (h->n != step)
        return mg_set_error(MG_ERR_FORMAT, "%s: the loss history has %lld entries but the optimizer is at step %lld",
                            state, (long long)h->n, (long long)step);
    /* every generator is set only once all of them were read */
    for (int i = 0; i <= m->n_rngs; i++) *(i < m->n_rngs ? m->rngs[i] : dropout) = restored[i];
    return MG_OK;
}

/* ---- divergence ---- */

/* False when a weight is not finite or, with bound > 0, larger than bound in magnitude; *name and
 * *value tell the first such. Runs after every step: the whole slab is scanned in parallel (the
 * gaps between parameters are zero, so they pass), and only a failed scan looks for the name.
 * Buffers (running statistics, counts) are held to finiteness only: the bound is about weights. */
static bool weights_ok(const mg_params *P, float bound, const char **name, float *value) {
    const float *w = mg_params_data(P);
    const int64_t n = mg_params_slab_size(P);
    const float lim = bound > 0 && bound < FLT_MAX ? bound : FLT_MAX; /* inf is never ok */
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (n > 65536)
    for (int64_t i = 0; i < n; i++) bad |= !(fabsf(w[i]) <= lim); /* NaN and inf fail too */
    if (!bad) return true;
    for (int i = 0; i < mg_params_len(P); i++) {
        const mg_tensor *t = mg_params_at(P, i);
        const float *x = t->data;
        for (int64_t k = 0; k < t->numel; k++)
            if (!isfinite(x[k]) || (bound > 0 && fabsf(x[k]) > bound && !(t->flags & MG_BUFFER))) {
                *name = t->name, *value = x[k];
                return false;
            }
    }
    return true;
}

/* The divergence error: what happened, that `step` is not saved, and the checkpoint kept. */
static mg_status diverged(const mg_train_cfg *cfg, const char *prog, const char *what, int64_t step,
                          int64_t last_good) {
    char where[4200];
    if (!cfg->ckpt)
        snprintf(where, sizeof where, "no checkpoints are kept (cfg.ckpt is NULL)");
    else if (last_good >= 0)
        snprintf(where, sizeof where, "the last good checkpoint (step %lld) is kept at %s", (long long)last_good,
                 cfg->ckpt);
    else
        snprintf(where, sizeof where, "no checkpoint was written in this run");
    return mg_set_error(MG_ERR_NONFINITE,
                        "%s: %s; stopped without saving step %lld: %s. "
                        "Try a lower learning rate or a stronger gradient clip.",
                        prog, what, (long long)step, where);
}

/* The context reports to the trainer rather than aborting; mg_ctx_ok tells after each step. */
static void keep_ctx_error(mg_ctx *ctx, const char *msg, void *user) {
    (void)ctx, (void)msg, (void)user;
}

/* ---- the loop ---- */

/* ---- data parallelism (see "Data parallel" in train.h; the transport is dp.h's) ---- */

int mg_train_rank(void) {
    int r, n;
    return dp_init(&r, &n) == MG_OK ? r : 0;
}

int mg_train_ranks(void) {
    int r, n;
    return dp_init(&r, &n) == MG_OK ? n : 1;
}

#define DP_BUCKET ((int64_t)1 << 18) /* floats per bucket of the gradient exchange (1 MiB) */

/* A part of the slab this rank updates under ZeRO-1: slab [lo, hi) of one parameter, whose
 * moments are at [st, st + hi - lo) of the rank's own arrays. */
typedef struct {
    int64_t lo, hi, st;
    bool decay;
} zseg;

typedef struct {
    int rank, nranks;
    bool split;      /* each rank computes loss_rows on its rows (else the whole batch, replicated) */
    int64_t row0, nrows;
    dp_layout L;
    bool zero1;
    float *m, *v;    /* ZeRO-1: the moments of this rank's slices, in bucket order */
    zseg *seg;
    int nseg;
    int64_t owned, t;
    mg_adamw_cfg acfg;
    double *part, *parts; /* ZeRO-1: squared-gradient sums per chunk, this rank's and everyone's */
    int64_t nchunk;
} dp_run;

static void dp_run_free(dp_run *d) {
    mg_aligned_free(d->m);
    mg_aligned_free(d->v);
    free(d->seg);
    free(d->part);
    free(d->parts);
}

/* ZeRO-1: this rank's slices cut at parameter boundaries, and its moments. */
static mg_status zero1_setup(dp_run *d, const mg_params *P, const mg_train_cfg *cfg) {
    const dp_layout *L = &d->L;
    int np = mg_params_len(P), cap = 0;
    int64_t st = 0, lo, hi;
    for (int b = 0; b < L->nbuckets; b++) {
        dp_slice(L, b, d->rank, &lo, &hi);
        for (int k = 0; k < np && lo < hi; k++) {
            const mg_tensor *t = mg_params_at(P, k);
            int64_t off = mg_params_offset(P, k), a = off > lo ? off : lo;
            int64_t z = off + t->numel < hi ? off + t->numel : hi;
            if (a >= z || !mg_param_trainable(t)) continue; /* frozen parameters and buffers: no update */
            if (d->nseg == cap) {
                cap = cap ? 2 * cap : 64;
                zseg *s = realloc(d->seg, (size_t)cap * sizeof *s);
                if (!s) return mg_set_error(MG_ERR_NOMEM, "train: out of memory");
                d->seg = s;
            }
            d->seg[d->nseg++] = (zseg){a, z, st + (a - lo), !(t->flags & MG_NO_DECAY)};
        }
        st += hi - lo;
    }
    d->owned = st;
    size_t bytes = (size_t)(st > 0 ? st : 16) * sizeof(float);
    d->nchunk = (L->n + DP_ALIGN - 1) / DP_ALIGN;
    d->m = mg_aligned_alloc(bytes);
    d->v = mg_aligned_alloc(bytes);
    d->part = malloc((size_t)(d->nchunk + 1) * sizeof *d->part);
    d->parts = malloc((size_t)(d->nchunk + 1) * (size_t)d->nranks * sizeof *d->parts);
    if (!d->m || !d->v || !d->part || !d->parts)
        return mg_set_error(MG_ERR_NOMEM, "train: out of memory for AdamW's moments of this rank's part");
    memset(d->m, 0, bytes);
    memset(d->v, 0, bytes);
    d->acfg = (mg_adamw_cfg){cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay};
    return MG_OK;
}

/* Copies between a full slab (an optimizer's moment) and this rank's slices of it. */
static void zero1_copy(const dp_run *d, float *full, float *mine, bool to_mine) {
    int64_t st = 0, lo, hi;
    for (int b = 0; b < d->L.nbuckets; b++) {
        dp_slice(&d->L, b, d->rank, &lo, &hi);
        if (to_mine)
            memcpy(mine + st, full + lo, (size_t)(hi - lo) * sizeof *mine);
        else
            memcpy(full + lo, mine + st, (size_t)(hi - lo) * sizeof *mine);
        st += hi - lo;
    }
}

/* ZeRO-1: the global gradient norm from this rank's summed slices, then the clip, as
 * mg_clip_grad_norm computes them: squares summed in double per chunk of DP_ALIGN floats (each
 * chunk lies in one rank's slice), the chunks added in slab order. */
static float zero1_clip(dp_run *d, mg_params *P, float max_norm) {
    const float *g = mg_params_grad(P);
    int64_t n = d->L.n, lo, hi;
    memset(d->part, 0, (size_t)d->nchunk * sizeof *d->part);
    for (int b = 0; b < d->L.nbuckets; b++) {
        dp_slice(&d->L, b, d->rank, &lo, &hi);
#pragma omp parallel for schedule(static)
        for (int64_t c = lo / DP_ALIGN; c < (hi + DP_ALIGN - 1) / DP_ALIGN; c++) {
            double s = 0.0;
            int64_t i1 = (c + 1) * DP_ALIGN < n ? (c + 1) * DP_ALIGN : n;
            for (int64_t i = c * DP_ALIGN; i < i1; i++) s += (double)g[i] * g[i];
            d->part[c] = s;
        }
    }
    dp_allgather_f64(d->part, d->parts, (int)d->nchunk);
    double total = 0.0;
    for (int64_t c = 0; c < d->nchunk; c++) {
        int64_t a = c * DP_ALIGN, owner = 0;
        for (int r = 0; r < d->nranks; r++) {
            dp_slice(&d->L, (int)(a / d->L.bucket), r, &lo, &hi);
            if (a >= lo && a < hi) owner = r;
        }
        total += d->parts[owner * d->nchunk + c];
    }
    double norm = sqrt(total);
    if (max_norm > 0.0f && isfinite(norm) && norm > max_norm) {
        float s = (float)(max_norm / norm), *gw = mg_params_grad(P);
        for (int i = 0; i < d->nseg; i++)
            for (int64_t k = d->seg[i].lo; k < d->seg[i].hi; k++) gw[k] *= s;
    }
    return (float)norm;
}

/* ZeRO-1: AdamW on this rank's part (mg_optim_step's arithmetic, element for element), then every
 * rank's part to every rank. */
static mg_status zero1_step(dp_run *d, mg_params *P, float lr) {
    d->t++;
    float bc1 = 1.0f - powf(d->acfg.beta1, (float)d->t), bc2 = 1.0f - powf(d->acfg.beta2, (float)d->t);
    float *w = mg_params_data(P), *g = mg_params_grad(P);
    for (int i = 0; i < d->nseg; i++) {
        const zseg *s = &d->seg[i];
        const mg_adamw_hyper h = {lr, d->acfg.beta1, d->acfg.beta2, d->acfg.eps,
                                  s->decay ? d->acfg.weight_decay : 0.0f, bc1, bc2};
        mg_adamw_update(s->hi - s->lo, w + s->lo, g + s->lo, d->m + s->st, d->v + s->st, &h);
    }
    return dp_allgather(&d->L, w);
}

/* ZeRO-1: a whole optimizer for saving (on root; NULL elsewhere): every rank's moments gathered. */
static mg_status zero1_gather_opt(const dp_run *d, mg_params *P, mg_optim **out) {
    mg_optim *o = NULL;
    mg_status st = MG_OK;
    int64_t fail = 0;
    if (d->rank == 0 && !(o = mg_adamw_new(P, d->acfg))) fail = 1;
    dp_max_i64(&fail, 1);
    if (fail) {
        mg_optim_free(o);
        return d->rank == 0 ? MG_ERR_NOMEM : mg_set_error(MG_ERR_NOMEM, "rank 0 is out of memory for saving");
    }
    for (int slot = 0; slot < 2 && st == MG_OK; slot++) {
        float *full = o ? mg_optim_state(o, slot) : NULL;
        st = dp_gather(&d->L, slot ? d->v : d->m, full, 0);
    }
    if (o) mg_optim_set_steps(o, d->t);
    *out = o;
    return st;
}

/* After a failure on some rank: the lowest failing rank's message to every rank. code: the
 * agreed code (nranks - the failing rank). Returns the status to end with. */
static mg_status dp_fail(const dp_run *d, int64_t code, mg_status mine, const char *prog, int64_t step) {
    int who = d->nranks - (int)code;
    char msg[DP_MSG];
    snprintf(msg, sizeof msg, "%s", who == d->rank ? mg_last_error() : "");
    dp_bcast(msg, sizeof msg, who);
    if (who == d->rank)
        return mg_set_error(mine != MG_OK ? mine : MG_ERR_INVALID, "rank %d of %d: %s", d->rank, d->nranks, msg);
    (void)prog, (void)step; /* msg names them */
    return mg_set_error(MG_ERR_INVALID, "rank %d of %d failed, so every rank stopped: %s", who, d->nranks, msg);
}

/* Every rank's status after a part of the step: MG_OK when all went through, else every rank
 * returns the failure of the lowest failing one. *flag (may be NULL) becomes the OR of every
 * rank's. */
static mg_status dp_agree(const dp_run *d, mg_status mine, bool *flag, const char *prog, int64_t step) {
    if (d->nranks == 1) return mine;
    int64_t x[2] = {mine != MG_OK ? d->nranks - d->rank : 0, flag && *flag};
    dp_max_i64(x, 2);
    if (flag) *flag = x[1] != 0;
    return x[0] ? dp_fail(d, x[0], mine, prog, step) : MG_OK;
}

/* ---- overlap: gradients sent bucket by bucket while backward runs ----
 * A communication thread takes the buckets in a fixed order, the last of the slab first (the
 * last layers' gradients are finished first), each as soon as backward has passed the last node
 * that reads one of its parameters (mg_ctx_set_backward_hook); it calls blocking collectives
 * (Open MPI does not progress non-blocking ones in the background). Every rank sends the same
 * buckets in the same order, so the reduction is the same as without overlap, bit for bit. */
typedef struct {
    const dp_layout *L;
    float *grad;
    const float *slab;
    int np;
    int64_t *off, *len; /* the parameters by slab offset */
    int *uses;          /* nodes of the tape still to pass that read the parameter */
    int *pending;       /* per bucket: its parameters with uses left */
    bool *ready;
    const mg_node *loss_node;
    bool started, zero1;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool have_thread, active, quit;
    int next; /* the bucket the thread sends next (counting down), -1: all sent */
    mg_status st;
} overlap;

static void *ov_thread(void *arg) {
    overlap *o = arg;
    pthread_mutex_lock(&o->mu);
    for (;;) {
        while (!o->quit && !(o->active && o->next >= 0 && o->ready[o->next])) pthread_cond_wait(&o->cv, &o->mu);
        if (o->quit) break;
        int b = o->next;
        pthread_mutex_unlock(&o->mu);
        mg_status st = dp_bucket(o->L, b, o->grad, o->zero1);
        pthread_mutex_lock(&o->mu);
        if (st != MG_OK && o->st == MG_OK) o->st = st;
        if (--o->next < 0) {
            o->active = false;
            pthread_cond_broadcast(&o->cv);
        }
    }
    pthread_mutex_unlock(&o->mu);
    return NULL;
}

/* The parameter whose slab data t is (a leaf), or -1. */
static int ov_param(const overlap *o, const mg_tensor *t) {
    if (!t || t->node || !t->data || (const float *)t->data < o->slab) return -1;
    int64_t at = (const float *)t->data - o->slab;
    int lo = 0, hi = o->np - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (at < o->off[mid]) hi = mid - 1;
        else if (at >= o->off[mid] + (o->len[mid] > 0 ? o->len[mid] : 1)) lo = mid + 1;
        else return mid;
    }
    return -1;
}

static void ov_mark(overlap *o, int b) {
    pthread_mutex_lock(&o->mu);
    o->ready[b] = true;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

static void ov_hook(mg_ctx *ctx, const mg_node *n, void *user) {
    (void)ctx;
    overlap *o = user;
    if (!o->started && n != o->loss_node) return; /* nodes recorded after the loss */
    o->started = true;
    for (int i = 0; i < n->n_in; i++) {
        int k = ov_param(o, n->in[i]);
        if (k < 0 || o->uses[k] <= 0 || --o->uses[k] > 0) continue;
        int b0 = (int)(o->off[k] / o->L->bucket), b1 = (int)((o->off[k] + (o->len[k] ? o->len[k] - 1 : 0)) / o->L->bucket);
        for (int b = b0; b <= b1 && b < o->L->nbuckets; b++)
            if (--o->pending[b] == 0) ov_mark(o, b);
    }
}

static int cmp_i64_pair(const void *a, const void *b) {
    const int64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static mg_status ov_setup(overlap *o, const dp_layout *L, mg_params *P, bool zero1) {
    memset(o, 0, sizeof *o);
    o->L = L, o->grad = mg_params_grad(P), o->slab = mg_params_data(P), o->np = mg_params_len(P), o->zero1 = zero1;
    int np = o->np > 0 ? o->np : 1, nb = L->nbuckets > 0 ? L->nbuckets : 1;
    int64_t *pairs = malloc((size_t)np * 2 * sizeof *pairs);
    o->off = malloc((size_t)np * sizeof *o->off);
    o->len = malloc((size_t)np * sizeof *o->len);
    o->uses = malloc((size_t)np * sizeof *o->uses);
    o->pending = malloc((size_t)nb * sizeof *o->pending);
    o->ready = malloc((size_t)nb * sizeof *o->ready);
    if (!pairs || !o->off || !o->len || !o->uses || !o->pending || !o->ready) {
        free(pairs);
        return mg_set_error(MG_ERR_NOMEM, "train: out of memory");
    }
    for (int k = 0; k < o->np; k++)
        pairs[2 * k] = mg_params_offset(P, k), pairs[2 * k + 1] = mg_params_at(P, k)->numel;
    qsort(pairs, (size_t)o->np, 2 * sizeof *pairs, cmp_i64_pair);
    for (int k = 0; k < o->np; k++) o->off[k] = pairs[2 * k], o->len[k] = pairs[2 * k + 1];
    free(pairs);
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    o->next = -1;
    if (pthread_create(&o->th, NULL, ov_thread, o) != 0)
        return mg_set_error(MG_ERR_NOMEM, "train: cannot start the communication thread");
    o->have_thread = true;
    return MG_OK;
}

/* Before backward (the gradients zeroed): what the tape from loss reads. loss NULL: this rank has
 * nothing to add (its step failed): every bucket goes as it is. */
static void ov_begin(overlap *o, mg_ctx *ctx, const mg_tensor *loss) {
    for (int k = 0; k < o->np; k++) o->uses[k] = 0;
    o->loss_node = loss ? loss->node : NULL;
    o->started = false;
    for (const mg_node *n = o->loss_node; n; n = n->prev)
        for (int i = 0; i < n->n_in; i++) {
            int k = ov_param(o, n->in[i]);
            if (k >= 0) o->uses[k]++;
        }
    for (int b = 0; b < o->L->nbuckets; b++) o->pending[b] = 0;
    for (int k = 0; k < o->np; k++)
        if (o->uses[k] > 0) {
            int b0 = (int)(o->off[k] / o->L->bucket), b1 = (int)((o->off[k] + (o->len[k] ? o->len[k] - 1 : 0)) / o->L->bucket);
            for (int b = b0; b <= b1 && b < o->L->nbuckets; b++) o->pending[b]++;
        }
    pthread_mutex_lock(&o->mu);
    for (int b = 0; b < o->L->nbuckets; b++) o->ready[b] = o->pending[b] == 0;
    o->st = MG_OK;
    o->next = o->L->nbuckets - 1;
    o->active = o->next >= 0;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    mg_ctx_set_backward_hook(ctx, loss ? ov_hook : NULL, o);
}

/* After backward: every bucket is final; waits until all are sent. *waited: the seconds that took. */
static mg_status ov_end(overlap *o, mg_ctx *ctx, double *waited) {
    mg_ctx_set_backward_hook(ctx, NULL, NULL);
    double t = mg_time();
    pthread_mutex_lock(&o->mu);
    for (int b = 0; b < o->L->nbuckets; b++) o->ready[b] = true;
    pthread_cond_broadcast(&o->cv);
    while (o->active) pthread_cond_wait(&o->cv, &o->mu);
    mg_status st = o->st;
    pthread_mutex_unlock(&o->mu);
    *waited = mg_time() - t;
    return st;
}

static void ov_free(overlap *o) {
    if (o->have_thread) {
        pthread_mutex_lock(&o->mu);
        o->quit = true;
        pthread_cond_broadcast(&o->cv);
        pthread_mutex_unlock(&o->mu);
        pthread_join(o->th, NULL);
        pthread_mutex_destroy(&o->mu);
        pthread_cond_destroy(&o->cv);
    }
    free(o->off);
    free(o->len);
    free(o->uses);
    free(o->pending);
    free(o->ready);
}

/* Testing aid: MINIGRAD_TRAIN_KILL=R:S kills rank R (SIGKILL) at the start of step S. */
static void kill_point(int rank, int64_t step) {
    const char *v = getenv("MINIGRAD_TRAIN_KILL");
    char *end;
    if (!v) return;
    long r = strtol(v, &end, 10);
    if (*end == ':' && r == rank && strtoll(end + 1, NULL, 10) == step) raise(SIGKILL);
}

mg_status mg_train_run(const mg_train_model *m, const mg_train_cfg *cfg, mg_train_result *res) {
    const char *prog = cfg && cfg->prog ? cfg->prog : "train";
    if (!res) return mg_set_error(MG_ERR_INVALID, "%s: mg_train_run needs a result to fill", prog);
    memset(res, 0, sizeof *res);
    res->loss = NAN;
    res->val_loss = NAN;
    res->ranks = 1;
    mg_status st = check_args(m, cfg, prog);
    if (st != MG_OK) return st;
    dp_run dp = {0};
    if ((st = dp_init(&dp.rank, &dp.nranks)) != MG_OK) return st;
    res->ranks = dp.nranks;
    bool multi = dp.nranks > 1, lead = dp.rank == 0;
    dp.split = multi && m->loss_rows && m->batch_rows > 0;
    if (dp.split && m->batch_rows < dp.nranks)
        return mg_set_error(MG_ERR_INVALID, "%s: a batch of %lld rows cannot be split over %d ranks (one row each at "
                            "least): use a larger batch or fewer ranks", prog, (long long)m->batch_rows, dp.nranks);
    if (dp.split) {
        dp.row0 = m->batch_rows * dp.rank / dp.nranks;
        dp.nrows = m->batch_rows * (dp.rank + 1) / dp.nranks - dp.row0;
    }
    dp.L = dp_layout_make(mg_params_slab_size(m->params), dp.nranks, DP_BUCKET);
    const char *z = getenv("MINIGRAD_TRAIN_ZERO1");
    dp.zero1 = multi && (cfg->zero1 || (z && strcmp(z, "1") == 0));
    overlap ov;
    memset(&ov, 0, sizeof ov);
    const char *ov_env = getenv("MINIGRAD_TRAIN_OVERLAP"); /* 0: the buckets go after backward */
    bool use_ov = dp.split && dp_threads_ok() && !(ov_env && strcmp(ov_env, "0") == 0);
    if (use_ov && (st = ov_setup(&ov, &dp.L, m->params, dp.zero1)) != MG_OK) {
        ov_free(&ov);
        return st;
    }
    if (multi && !dp.split && lead)
        mg_log(MG_LOG_WARN, "%s: the model has no loss_rows: each of the %d ranks trains on the whole batch (no "
               "speed-up)", prog, dp.nranks);
    ckpt_files *files = NULL; /* only with a checkpoint path (resume needs one: check_args) */
    if (cfg->ckpt) {
        if (!(files = malloc(sizeof *files))) st = mg_set_error(MG_ERR_NOMEM, "%s: out of memory", prog);
        if (st == MG_OK) st = files_make(cfg->ckpt, files);
        /* rank 0 puts the files in order; the others read them once it has */
        if (st == MG_OK && lead) st = recover(files, cfg->resume, prog);
        if ((st = dp_agree(&dp, st, NULL, prog, 0)) != MG_OK) {
            free(files);
            ov_free(&ov);
            return st;
        }
    }

    mg_params *P = m->params;
    int64_t n_all = mg_params_numel(P), n_trainable = mg_params_trainable_numel(P);
    if (n_trainable != n_all)
        mg_log(MG_LOG_INFO, "%s: %lld of %lld parameters trainable (%lld frozen or in buffers)", prog,
               (long long)n_trainable, (long long)n_all, (long long)(n_all - n_trainable));
    mg_optim *opt = NULL;
    mg_ctx *ctx = mg_ctx_new(0);
    if (ctx) mg_ctx_set_precision(ctx, cfg->precision);
    history h = {0};
    mg_rng dropout = mg_rng_make(cfg->seed ^ 0xD50F0D50F0ULL);
    mg_train_progress prog_line = {0};
    int64_t step = 0;
    double comm_total = 0;
    if (dp.zero1) {
        st = zero1_setup(&dp, P, cfg);
        /* the whole moments only while resuming */
        if (st == MG_OK && cfg->resume) {
            if (!(opt = mg_adamw_new(P, dp.acfg))) st = MG_ERR_NOMEM;
            if (st == MG_OK && (st = restore_all(m, opt, files, &dropout, &h)) == MG_OK) {
                zero1_copy(&dp, mg_optim_state(opt, 0), dp.m, true);
                zero1_copy(&dp, mg_optim_state(opt, 1), dp.v, true);
                dp.t = mg_optim_steps(opt);
            }
            mg_optim_free(opt);
            opt = NULL;
        }
        if (!ctx && st == MG_OK) st = mg_set_error(MG_ERR_NOMEM, "%s: out of memory setting up training", prog);
    } else {
        opt = mg_adamw_new(P, (mg_adamw_cfg){cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay});
        if (!opt || !ctx) st = mg_set_error(MG_ERR_NOMEM, "%s: out of memory setting up training", prog);
        if (st == MG_OK && cfg->resume) st = restore_all(m, opt, files, &dropout, &h);
    }
    if ((st = dp_agree(&dp, st, NULL, prog, 0)) != MG_OK) goto done;
    mg_ctx_set_error_handler(ctx, keep_ctx_error, NULL);
    step = dp.zero1 ? dp.t : mg_optim_steps(opt);
    res->step = step;
    if (step >= cfg->steps) {
        if (lead)
            mg_log(MG_LOG_INFO, "%s: the checkpoint is already at step %lld of %lld: nothing to do", prog,
                   (long long)step, (long long)cfg->steps);
        goto done;
    }
    /* rank 0 alone writes the log and prints */
    st = mg_train_progress_open(&prog_line, prog, cfg->steps, step, lead ? cfg->log_path : NULL, cfg->resume);
    if ((st = dp_agree(&dp, st, NULL, prog, step)) != MG_OK) goto done;
    prog_line.quiet = cfg->quiet || !lead;
    prog_line.per_step = m->tokens_per_step == 0;
    prog_line.speed_unit = m->speed_unit;
    prog_line.ranks = dp.nranks;
    if (cfg->resume)
        mg_train_progress_note(&prog_line, "%s: resumed at step %lld from %s", prog, (long long)step, cfg->ckpt);
    if (multi)
        mg_train_progress_note(&prog_line, "%s: data parallel over %d ranks (%s)%s%s", prog, dp.nranks, dp_library(),
                               dp.split ? "" : ", each on the whole batch",
                               dp.zero1 ? ", AdamW's moments sharded (ZeRO-1)" : "");

    interrupted = 0;
    if (!prog_line.quiet) {
        int k = snprintf(stop_ack, sizeof stop_ack, "\n%s: stopping after this step%s (a second signal ends it at once)\n",
                         prog, cfg->ckpt ? ", then saving" : "");
        stop_ack_len = k > 0 && (size_t)k < sizeof stop_ack ? (size_t)k : 0;
    } else {
        stop_ack_len = 0;
    }
    /* a signal the process was started with ignored (a background job of a shell without job
     * control ignores SIGINT) stays ignored */
    void (*old_int)(int) = cfg->catch_sigint ? signal(SIGINT, on_stop_signal) : SIG_DFL;
    void (*old_term)(int) = cfg->catch_sigint ? signal(SIGTERM, on_stop_signal) : SIG_DFL;
    if (old_int == SIG_IGN) signal(SIGINT, SIG_IGN);
    if (old_term == SIG_IGN) signal(SIGTERM, SIG_IGN);
    double per_step = m->tokens_per_step > 0 ? (double)m->tokens_per_step : 1.0;
    double t_start = mg_time(), ema_dt = 0;
    int64_t last_good = cfg->resume ? step : -1, first = step, n_saves = 0;
    bool had_val = false; /* a finite validation loss was seen: a NaN one later means divergence */
    for (int64_t i = 0; i < h.nv; i++) had_val |= isfinite(h.val[i]) != 0;
    dp_take_wait(NULL);
    double comm_busy_total = 0;
    while (step < cfg->steps) {
        bool begun = false; /* the gradient buckets of this step are under way */
        double waited = 0;
        double t0 = mg_time();
        mg_ctx_reset(ctx);
        if (multi) kill_point(dp.rank, step + 1);
        /* this rank's part of the step: its failure is every rank's (dp_agree) */
        if (m->next_batch && (st = m->next_batch(m->user)) != MG_OK)
            mg_wrap_error(st, "%s: step %lld: the next batch", prog, (long long)step + 1);
        mg_tensor *loss = NULL;
        if (st == MG_OK) {
            mg_rng rank_dropout = mg_rng_make(0), *drop = &dropout;
            if (dp.split) {
                /* each rank its own stream; the trainer's advances the same on every rank */
                rank_dropout = mg_rng_make(mg_rng_next(&dropout) ^ (0x9E3779B97F4A7C15ull * (uint64_t)(dp.rank + 1)));
                drop = &rank_dropout;
                loss = m->loss_rows(m->user, ctx, drop, dp.row0, dp.nrows);
            } else {
                loss = m->loss ? m->loss(m->user, ctx, drop) : m->loss_rows(m->user, ctx, drop, 0, m->batch_rows);
            }
            if (mg_ctx_ok(ctx) && !loss)
                st = mg_set_error(MG_ERR_INVALID, "%s: step %lld: model.loss returned no tensor", prog,
                                  (long long)step + 1);
            else if (mg_ctx_ok(ctx) && (loss->dtype != MG_F32 || loss->numel != 1))
                st = mg_set_error(MG_ERR_INVALID, "%s: step %lld: model.loss must return one float, got %lld values",
                                  prog, (long long)step + 1, (long long)loss->numel);
            if (st == MG_OK && mg_ctx_ok(ctx)) {
                mg_params_zero_grad(P);
                if (use_ov) ov_begin(&ov, ctx, loss), begun = true;
                mg_backward(ctx, loss);
            }
            if (st == MG_OK && !mg_ctx_ok(ctx))
                st = mg_set_error(MG_ERR_INVALID, "%s: step %lld: %s", prog, (long long)step + 1, mg_ctx_error(ctx));
        }
        float lv = st == MG_OK ? loss->data[0] : 0.0f;
        if (use_ov) { /* the buckets backward did not send: all of them when this rank's step failed */
            if (!begun) mg_params_zero_grad(P), ov_begin(&ov, ctx, NULL);
            if (ov_end(&ov, ctx, &waited) != MG_OK) dp_abort(mg_last_error());
        }
        if (multi) {
            /* every rank's status and loss share, then the gradients (already sent with overlap),
             * summed in rank order */
            double mine[2] = {st != MG_OK ? (double)(dp.nranks - dp.rank) : 0.0, (double)lv}, all[2 * 1024];
            double *every = dp.nranks <= 1024 ? all : malloc((size_t)dp.nranks * 2 * sizeof *every);
            if (!every) dp_abort("train: out of memory exchanging the step's status");
            dp_allgather_f64(mine, every, 2);
            int64_t code = 0;
            for (int r = 0; r < dp.nranks; r++) code = every[2 * r] > (double)code ? (int64_t)every[2 * r] : code;
            if (dp.split) {
                float sum = (float)every[1];
                for (int r = 1; r < dp.nranks; r++) sum += (float)every[2 * r + 1];
                lv = sum;
            }
            if (every != all) free(every);
            if (code) {
                st = dp_fail(&dp, code, st, prog, step + 1);
                break;
            }
            if (dp.split && !use_ov) st = dp.zero1 ? dp_reduce_scatter(&dp.L, mg_params_grad(P)) : dp_sum(&dp.L, mg_params_grad(P));
            if (st != MG_OK) dp_abort(mg_last_error());
        } else if (st != MG_OK) {
            break;
        }
        float norm = dp.zero1 && dp.split ? zero1_clip(&dp, P, cfg->clip) : mg_clip_grad_norm(P, cfg->clip);
        if (!isfinite(lv) || !isfinite(norm)) {
            res->diverged = true;
            char what[200];
            snprintf(what, sizeof what, "the %s became %g at step %lld", isfinite(lv) ? "gradient norm" : "loss",
                     (double)(isfinite(lv) ? norm : lv), (long long)step + 1);
            st = diverged(cfg, prog, what, step + 1, last_good);
            break;
        }
        float lr = mg_lr_schedule(step, cfg->warmup, cfg->steps, cfg->lr, cfg->lr_min);
        if (dp.zero1)
            zero1_step(&dp, P, lr); /* (replicated, every rank has the whole gradient and updates its part) */
        else
            mg_optim_step(opt, lr);
        const char *bad_name;
        float bad_value;
        if (!weights_ok(P, cfg->max_weight, &bad_name, &bad_value)) {
            res->diverged = true;
            char what[400], bound[64] = "";
            if (isfinite(bad_value)) snprintf(bound, sizeof bound, ", beyond the bound %g (cfg.max_weight)", (double)cfg->max_weight);
            snprintf(what, sizeof what, "the update of step %lld made the weights %s (%.200s holds %g%s)",
                     (long long)step + 1, isfinite(bad_value) ? "explode" : "non-finite", bad_name, (double)bad_value,
                     bound);
            st = diverged(cfg, prog, what, step + 1, last_good);
            break;
        }
        step++;
        hist_push(&h, lv);
        res->loss = lv;
        double dt = mg_time() - t0;
        ema_dt = ema_dt == 0 ? dt : 0.9 * ema_dt + 0.1 * dt;
        if (m->on_step) m->on_step(m->user, step, lv);
        float val = NAN;
        bool last = step == cfg->steps;
        if (m->eval && ((cfg->eval_every > 0 && step % cfg->eval_every == 0) || last)) {
            /* every rank validates (the same weights, the same result): the model's generators stay alike */
            if ((st = m->eval(m->user, &val)) != MG_OK) {
                mg_wrap_error(st, "%s: step %lld: validation", prog, (long long)step);
                if (!multi) break;
            } else if (isinf(val) || (isnan(val) && had_val)) {
                res->diverged = true;
                char what[200];
                snprintf(what, sizeof what, "the validation loss became %g after the update of step %lld", (double)val,
                         (long long)step);
                st = diverged(cfg, prog, what, step, last_good);
                if (!multi) break;
            } else if (!isnan(val)) {
                hist_push_val(&h, step, val), res->val_loss = val, had_val = true;
            }
        }
        double comm = 0, busy = dp_take_wait(&comm);
        comm += waited; /* what this step waited: its own collectives and the buckets still under way */
        comm_total += comm, comm_busy_total += busy;
        prog_line.comm_s = comm, prog_line.comm_busy_s = busy;
        if (st == MG_OK && (st = mg_train_progress_step(&prog_line, step, lv, lr, ema_dt > 0 ? per_step / ema_dt : 0,
                                                        norm, val)) != MG_OK)
            mg_wrap_error(st, "%s: step %lld", prog, (long long)step);
        bool stop_now = interrupted != 0;
        if (multi) {
            bool div = res->diverged;
            if ((st = dp_agree(&dp, st, &stop_now, prog, step)) != MG_OK) {
                res->diverged = div;
                break;
            }
        }
        if (st != MG_OK) break;
        bool pause = cfg->stop_after > 0 && step - first >= cfg->stop_after;
        bool save = last || stop_now || pause || (cfg->ckpt_every > 0 && step % cfg->ckpt_every == 0);
        if (save && cfg->ckpt) {
            mg_optim *whole = opt;
            if (dp.zero1) st = zero1_gather_opt(&dp, P, &whole);
            ++n_saves;
            if (st == MG_OK && lead) st = save_all(m, whole, files, &dropout, &h, n_saves);
            if (dp.zero1) mg_optim_free(whole);
            if ((st = dp_agree(&dp, st, NULL, prog, step)) != MG_OK) break;
            last_good = step;
        }
        if (stop_now) {
            res->interrupted = true;
            /* a rank that stops because another one was signalled reports SIGINT */
            res->stop_signal = interrupted ? (int)interrupted : SIGINT;
            const char *by = stop_signal_name(res->stop_signal);
            if (cfg->ckpt)
                mg_train_progress_note(&prog_line,
                                       "%s: interrupted (%s): saved step %lld to %s (a resume continues from there)",
                                       prog, by, (long long)step, cfg->ckpt);
            else
                mg_train_progress_note(&prog_line, "%s: interrupted (%s) at step %lld (no checkpoint path: nothing saved)",
                                       prog, by, (long long)step);
            break;
        }
        if (pause && !last) {
            res->stopped = true;
            mg_train_progress_note(&prog_line,
                                   "%s: stopped after %lld steps as asked: saved step %lld to %s (a resume continues from there)",
                                   prog, (long long)cfg->stop_after, (long long)step, cfg->ckpt);
            break;
        }
    }
    if (cfg->catch_sigint) {
        signal(SIGINT, old_int);
        signal(SIGTERM, old_term);
    }
    /* the run's own error, if any, is what the caller hears of; the log's and the plot's come second */
    char first_error[1024] = "";
    if (st != MG_OK) snprintf(first_error, sizeof first_error, "%s", mg_last_error());
    mg_status cs = mg_train_progress_close(&prog_line);
    if (st == MG_OK) st = cs;
    res->step = step;
    res->steps_run = step - first;
    res->seconds = mg_time() - t_start;
    res->steps_per_s = ema_dt > 0 ? 1.0 / ema_dt : 0;
    res->tokens_per_s = m->tokens_per_step > 0 ? (double)m->tokens_per_step * res->steps_per_s : 0;
    res->peak_arena = mg_ctx_peak_bytes(ctx);
    res->comm_s = res->steps_run > 0 ? comm_total / (double)res->steps_run : 0;
    res->comm_busy_s = res->steps_run > 0 ? comm_busy_total / (double)res->steps_run : 0;
    if (cfg->plot_path && h.n > 0 && lead) {
        mg_status ps = h.nomem ? mg_set_error(MG_ERR_NOMEM, "out of memory keeping the loss history")
                               : train_plot_curve(cfg->plot_path, cfg->plot_title ? cfg->plot_title : prog,
                                                  cfg->plot_ylabel, h.loss, h.n, h.val_step, h.val, h.nv);
        if (ps != MG_OK && st == MG_OK)
            st = mg_wrap_error(ps, "%s: loss plot not written", prog);
        else if (ps != MG_OK)
            mg_log(MG_LOG_WARN, "%s: loss plot not written: %s", prog, mg_last_error());
    }
    if (first_error[0]) mg_set_error(st, "%s", first_error);
done:
    free(files);
    hist_free(&h);
    mg_ctx_free(ctx);
    mg_optim_free(opt);
    dp_run_free(&dp);
    ov_free(&ov);
    return st;
}

mg_status mg_train_plot_log(const char *log_path, const char *png_path, const char *title) {
    FILE *f = fopen(log_path, "r");
    if (!f) return mg_set_error(MG_ERR_IO, "%s: cannot open the log", log_path);
    history h = {0};
    char line[1024], skipped[64] = "";
    long long n_lines = 0, first_skipped = 0;
    while (fgets(line, sizeof line, f)) {
        n_lines++;
        const char *s = strstr(line, "\"step\":"), *l = strstr(line, "\"loss\":"), *v = strstr(line, "\"val_loss\":");
        long long step = s && l ? strtoll(s + 7, NULL, 10) : 0;
        if (step < 1 || step > ((int64_t)1 << 31)) {
            if (!first_skipped) { /* kept for the message if no line is a step */
                first_skipped = n_lines;
                size_t k = strcspn(line, "\r\n");
                snprintf(skipped, sizeof skipped, "%.*s%s", (int)(k < 40 ? k : 40), line, k > 40 ? "..." : "");
            }
            continue;
        }
        if (step <= h.n) { /* a step logged again (a resume from an earlier checkpoint): the later one */
            h.loss[step - 1] = strtof(l + 7, NULL);
        } else {
            while (h.n < step - 1 && !h.nomem) hist_push(&h, NAN); /* a gap: keep x = step */
            hist_push(&h, strtof(l + 7, NULL));
        }
        if (v) hist_push_val(&h, step, strtof(v + 11, NULL));
    }
    fclose(f);
    mg_status st;
    if (h.nomem)
        st = mg_set_error(MG_ERR_NOMEM, "%s: out of memory reading the log", log_path);
    else if (h.n == 0 && n_lines == 0)
        st = mg_set_error(MG_ERR_FORMAT, "%s: the log is empty: no training steps to plot", log_path);
    else if (h.n == 0)
        st = mg_set_error(MG_ERR_FORMAT,
                          "%s: no training steps to plot: none of its %lld lines has a \"step\" of 1..2147483648 "
                          "and a \"loss\" (line %lld: '%s')",
                          log_path, n_lines, first_skipped, skipped);
    else
        st = train_plot_curve(png_path, title, NULL, h.loss, h.n, h.val_step, h.val, h.nv);
    hist_free(&h);
    return st;
}
