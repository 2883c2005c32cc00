/* The training loop (minigrad/train.h). */
#include "minigrad/train.h"

#include "curve.h"
#include "minigrad/checkpoint.h"
#include "minigrad/op.h" /* mg_ctx_ok */
#include "minigrad/optim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
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

/* ---- Ctrl-C: the first one asks the loop to save and stop; a second one ends the process ---- */
static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
    signal(SIGINT, SIG_DFL);
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
    if (!m->loss) return mg_set_error(MG_ERR_INVALID, "%s: model.loss is required", prog);
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
 * gaps between parameters are zero, so they pass), and only a failed scan looks for the name. */
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
            if (!isfinite(x[k]) || (bound > 0 && fabsf(x[k]) > bound)) {
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

mg_status mg_train_run(const mg_train_model *m, const mg_train_cfg *cfg, mg_train_result *res) {
    const char *prog = cfg && cfg->prog ? cfg->prog : "train";
    if (!res) return mg_set_error(MG_ERR_INVALID, "%s: mg_train_run needs a result to fill", prog);
    memset(res, 0, sizeof *res);
    res->loss = NAN;
    res->val_loss = NAN;
    mg_status st = check_args(m, cfg, prog);
    if (st != MG_OK) return st;
    ckpt_files *files = NULL; /* only with a checkpoint path (resume needs one: check_args) */
    if (cfg->ckpt) {
        if (!(files = malloc(sizeof *files))) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", prog);
        if ((st = files_make(cfg->ckpt, files)) != MG_OK || (st = recover(files, cfg->resume, prog)) != MG_OK) {
            free(files);
            return st;
        }
    }

    mg_params *P = m->params;
    mg_optim *opt = mg_adamw_new(P, (mg_adamw_cfg){cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay});
    mg_ctx *ctx = mg_ctx_new(0);
    if (ctx) mg_ctx_set_precision(ctx, cfg->precision);
    history h = {0};
    mg_rng dropout = mg_rng_make(cfg->seed ^ 0xD50F0D50F0ULL);
    mg_train_progress prog_line = {0};
    if (!opt || !ctx) {
        st = mg_set_error(MG_ERR_NOMEM, "%s: out of memory setting up training", prog);
        goto done;
    }
    mg_ctx_set_error_handler(ctx, keep_ctx_error, NULL);
    if (cfg->resume && (st = restore_all(m, opt, files, &dropout, &h)) != MG_OK) goto done;
    int64_t step = mg_optim_steps(opt);
    res->step = step;
    if (step >= cfg->steps) {
        mg_log(MG_LOG_INFO, "%s: the checkpoint is already at step %lld of %lld: nothing to do", prog,
               (long long)step, (long long)cfg->steps);
        goto done;
    }
    if ((st = mg_train_progress_open(&prog_line, prog, cfg->steps, step, cfg->log_path, cfg->resume)) != MG_OK)
        goto done;
    prog_line.quiet = cfg->quiet;
    prog_line.per_step = m->tokens_per_step == 0;
    if (cfg->resume)
        mg_train_progress_note(&prog_line, "%s: resumed at step %lld from %s", prog, (long long)step, cfg->ckpt);

    interrupted = 0;
    void (*old_handler)(int) = cfg->catch_sigint ? signal(SIGINT, on_sigint) : SIG_DFL;
    double per_step = m->tokens_per_step > 0 ? (double)m->tokens_per_step : 1.0;
    double t_start = mg_time(), ema_dt = 0;
    int64_t last_good = cfg->resume ? step : -1, first = step, n_saves = 0;
    bool had_val = false; /* a finite validation loss was seen: a NaN one later means divergence */
    for (int64_t i = 0; i < h.nv; i++) had_val |= isfinite(h.val[i]) != 0;
    while (step < cfg->steps) {
        double t0 = mg_time();
        mg_ctx_reset(ctx);
        if (m->next_batch && (st = m->next_batch(m->user)) != MG_OK) {
            mg_wrap_error(st, "%s: step %lld: the next batch", prog, (long long)step + 1);
            break;
        }
        mg_tensor *loss = m->loss(m->user, ctx, &dropout);
        if (mg_ctx_ok(ctx) && !loss) {
            st = mg_set_error(MG_ERR_INVALID, "%s: step %lld: model.loss returned no tensor", prog, (long long)step + 1);
            break;
        }
        if (mg_ctx_ok(ctx) && (loss->dtype != MG_F32 || loss->numel != 1)) {
            st = mg_set_error(MG_ERR_INVALID, "%s: step %lld: model.loss must return one float, got %lld values",
                              prog, (long long)step + 1, (long long)loss->numel);
            break;
        }
        if (mg_ctx_ok(ctx)) {
            mg_params_zero_grad(P);
            mg_backward(ctx, loss);
        }
        if (!mg_ctx_ok(ctx)) {
            st = mg_set_error(MG_ERR_INVALID, "%s: step %lld: %s", prog, (long long)step + 1, mg_ctx_error(ctx));
            break;
        }
        float lv = loss->data[0];
        float norm = mg_clip_grad_norm(P, cfg->clip);
        if (!isfinite(lv) || !isfinite(norm)) {
            res->diverged = true;
            char what[200];
            snprintf(what, sizeof what, "the %s became %g at step %lld", isfinite(lv) ? "gradient norm" : "loss",
                     (double)(isfinite(lv) ? norm : lv), (long long)step + 1);
            st = diverged(cfg, prog, what, step + 1, last_good);
            break;
        }
        float lr = mg_lr_schedule(step, cfg->warmup, cfg->steps, cfg->lr, cfg->lr_min);
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
            if ((st = m->eval(m->user, &val)) != MG_OK) {
                mg_wrap_error(st, "%s: step %lld: validation", prog, (long long)step);
                break;
            }
            if (isinf(val) || (isnan(val) && had_val)) {
                res->diverged = true;
                char what[200];
                snprintf(what, sizeof what, "the validation loss became %g after the update of step %lld", (double)val,
                         (long long)step);
                st = diverged(cfg, prog, what, step, last_good);
                break;
            }
            if (!isnan(val)) hist_push_val(&h, step, val), res->val_loss = val, had_val = true;
        }
        if ((st = mg_train_progress_step(&prog_line, step, lv, lr, ema_dt > 0 ? per_step / ema_dt : 0, norm,
                                         val)) != MG_OK) {
            mg_wrap_error(st, "%s: step %lld", prog, (long long)step);
            break;
        }
        bool pause = cfg->stop_after > 0 && step - first >= cfg->stop_after;
        bool save = last || interrupted || pause || (cfg->ckpt_every > 0 && step % cfg->ckpt_every == 0);
        if (save && cfg->ckpt) {
            if ((st = save_all(m, opt, files, &dropout, &h, ++n_saves)) != MG_OK) break;
            last_good = step;
        }
        if (interrupted) {
            res->interrupted = true;
            if (cfg->ckpt)
                mg_train_progress_note(&prog_line, "%s: interrupted: saved step %lld to %s (a resume continues from there)",
                                       prog, (long long)step, cfg->ckpt);
            else
                mg_train_progress_note(&prog_line, "%s: interrupted at step %lld (no checkpoint path: nothing saved)",
                                       prog, (long long)step);
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
    if (cfg->catch_sigint) signal(SIGINT, old_handler);
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
    if (cfg->plot_path && h.n > 0) {
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
    return st;
}

mg_status mg_train_plot_log(const char *log_path, const char *png_path, const char *title) {
    FILE *f = fopen(log_path, "r");
    if (!f) return mg_set_error(MG_ERR_IO, "%s: cannot open the log", log_path);
    history h = {0};
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        const char *s = strstr(line, "\"step\":"), *l = strstr(line, "\"loss\":"), *v = strstr(line, "\"val_loss\":");
        if (!s || !l) continue;
        long long step = strtoll(s + 7, NULL, 10);
        if (step < 1 || step > ((int64_t)1 << 31)) continue;
        if (step <= h.n) { /* a step logged again (a resume from an earlier checkpoint): the later one */
            h.loss[step - 1] = strtof(l + 7, NULL);
        } else {
            while (h.n < step - 1 && !h.nomem) hist_push(&h, NAN); /* a gap: keep x = step */
            hist_push(&h, strtof(l + 7, NULL));
        }
        if (v) hist_push_val(&h, step, strtof(v + 11, NULL));
    }
    fclose(f);
    mg_status st = h.nomem ? mg_set_error(MG_ERR_NOMEM, "%s: out of memory reading the log", log_path)
                           : train_plot_curve(png_path, title, NULL, h.loss, h.n, h.val_step, h.val, h.nv);
    hist_free(&h);
    return st;
}
