/* music train: a GPT on performance tokens, with the shared training loop (examples/common). */
#include "cli.h"
#include "cmd_model.h"
#include "progress.h"
#include "trainer.h"

#include "minigrad/checkpoint.h"
#include "minigrad/config.h"
#include "minigrad/params.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PROG "music train"

typedef struct {
    const char *data, *out, *log, *pos, *pos_opts;
    int64_t steps, batch, block, n_embd, n_layer, n_head, warmup, eval_every, eval_windows;
    int64_t ckpt_every, seed, threads, sample_tokens, stop_after, pieces, transpose;
    float lr, lr_min, weight_decay, clip, dropout, stretch, temperature;
    bool resume, force, no_augment;
} train_opts;

/* Options that the checkpoint remembers, so `--resume` needs nothing but --out. Stored under
 * "music.<name>"; the model sizes come from the model config keys. */
#define SAVED_INTS(X)                                                                              \
    X(steps)                                                                                       \
    X(batch) X(warmup) X(eval_every) X(eval_windows) X(ckpt_every) X(seed) X(pieces) X(transpose)
#define SAVED_FLOATS(X) X(lr) X(lr_min) X(weight_decay) X(clip) X(stretch)

static int make_opts(train_opts *o, ex_opt *t) {
    int n = 0;
#define OPT(name, type, field, help) t[n++] = (ex_opt){name, type, &o->field, help}
    OPT("data", EX_STR, data,
        "directory of MIDI files (.mid/.midi, searched recursively; default: generated piano "
        "pieces)");
    OPT("pieces", EX_INT, pieces, "pieces of the generated corpus when no --data is given");
    OPT("out", EX_STR, out,
        "directory for model.safetensors, its .state file, log.jsonl, loss.png "
        "and the final sample");
    OPT("resume", EX_FLAG, resume,
        "continue the run saved in --out (same data and settings unless given)");
    OPT("force", EX_FLAG, force,
        "start a new run even if --out already holds one (it is replaced)");
    OPT("steps", EX_INT, steps, "optimizer steps of the whole run");
    OPT("batch", EX_INT, batch, "windows per step");
    OPT("block-size", EX_INT, block, "context length in tokens (the window length)");
    OPT("n-embd", EX_INT, n_embd, "model width");
    OPT("n-layer", EX_INT, n_layer, "decoder blocks");
    OPT("n-head", EX_INT, n_head, "attention heads (must divide --n-embd)");
    OPT("pos", EX_STR, pos,
        "positional scheme: rope, alibi (plugin), learned, sinusoidal, learned+sinusoidal, none");
    OPT("pos-opts", EX_STR, pos_opts, "extra keys for the positional layer, k=v,k=v");
    OPT("dropout", EX_FLOAT, dropout, "dropout probability");
    OPT("lr", EX_FLOAT, lr, "peak learning rate (AdamW)");
    OPT("lr-min", EX_FLOAT, lr_min, "final learning rate of the cosine schedule");
    OPT("warmup", EX_INT, warmup, "linear warmup steps");
    OPT("weight-decay", EX_FLOAT, weight_decay, "AdamW weight decay");
    OPT("clip", EX_FLOAT, clip, "gradient-norm clipping (0: none)");
    OPT("transpose", EX_INT, transpose, "augmentation: transpose each window by up to N semitones");
    OPT("stretch", EX_FLOAT, stretch,
        "augmentation: stretch each window's time by a factor in [1-S, 1+S] (5 steps)");
    OPT("no-augment", EX_FLAG, no_augment, "train on the windows as they are");
    OPT("eval-every", EX_INT, eval_every, "validation loss every N steps (and at the end)");
    OPT("eval-windows", EX_INT, eval_windows,
        "fixed validation windows the loss is averaged over (0: every window of the split)");
    OPT("ckpt-every", EX_INT, ckpt_every, "checkpoint every N steps (and at the end)");
    OPT("stop-after", EX_INT, stop_after,
        "stop after N steps of this invocation, saving a checkpoint (0: run to --steps); continue "
        "with --resume");
    OPT("seed", EX_INT, seed, "seed of the initial weights, the windows, augmentation and dropout");
    OPT("threads", EX_INT, threads, "threads (0: all cores)");
    OPT("log", EX_STR, log, "JSON-lines log, one object per step (default OUT/log.jsonl)");
    OPT("sample-tokens", EX_INT, sample_tokens,
        "tokens of the sample written to OUT/sample.mid and OUT/sample.png at the end (0: none)");
    OPT("temperature", EX_FLOAT, temperature, "temperature of that sample");
#undef OPT
    return n;
}

static const char *const USAGE =
    "[--data DIR] [options]\n\n"
    "Trains a GPT on MIDI performances (the 390-token encoding of music.h). Without --data it "
    "learns generated piano pieces.\nThe defaults (the full 2048 x 512 model, 200 steps) take "
    "about 640 CPU seconds: 6 to 15 minutes on 2 cores; README.md gives a small model that learns "
    "in a few minutes.";

static train_opts defaults(void) {
    return (train_opts){.out = MUSIC_DEFAULT_OUT,
                        .pos = "rope",
                        .steps = 200,
                        .batch = 1,
                        .block = 2048,
                        .n_embd = 512,
                        .n_layer = 6,
                        .n_head = 8,
                        .warmup = 40,
                        .eval_every = 50,
                        .eval_windows = 8,
                        .ckpt_every = 50,
                        .seed = 1,
                        .pieces = 128,
                        .transpose = 3,
                        .sample_tokens = 512,
                        .lr = 6e-4f,
                        .lr_min = 1e-4f,
                        .weight_decay = 0.1f,
                        .clip = 1.0f,
                        .stretch = 0.05f,
                        .temperature = 1.0f};
}

/* ---- what the trainer calls ---- */

typedef struct {
    mg_music_data data;
    mg_music_windows val;
    mg_music_eval eval;
    mg_music_scratch scratch;
    mg_augment_opts aug;
    bool augment;
    mg_rng rng;
    int64_t B, T;
    mg_status batch_status, eval_status;
} job;

static void next_batch(void *user, int32_t *ids, int32_t *targets) {
    job *j = user;
    mg_status st = mg_music_batch(&j->data, j->B, j->T, j->augment ? &j->aug : NULL, &j->rng,
                                  &j->scratch, ids, targets);
    if (st != MG_OK && j->batch_status == MG_OK) {
        /* only memory can fail here: say so once, and train on what the buffers hold */
        mg_log(MG_LOG_WARN, PROG ": a batch could not be made: %s", mg_last_error());
        j->batch_status = st;
    }
}

static float validate(void *user, mg_gpt *g) {
    job *j = user;
    if (j->val.count == 0) return NAN;
    double nats;
    int64_t tokens;
    mg_status st = mg_music_eval_windows(&j->eval, g, &j->data, &j->val, &nats, &tokens);
    if (st != MG_OK) {
        if (j->eval_status == MG_OK)
            mg_log(MG_LOG_WARN, PROG ": validation failed: %s", mg_last_error());
        j->eval_status = st;
        return NAN;
    }
    return tokens > 0 ? (float)(nats / (double)tokens) : NAN;
}

/* ---- option checks ---- */

static bool check_opts(const train_opts *o) {
    struct {
        const char *name;
        int64_t v, min, max;
    } ints[] = {{"steps", o->steps, 1, INT64_MAX},
                {"batch", o->batch, 1, 1 << 20},
                {"block-size", o->block, 2, 1 << 20},
                {"n-embd", o->n_embd, 1, 1 << 16},
                {"n-layer", o->n_layer, 0, 1024},
                {"n-head", o->n_head, 1, 1 << 16},
                {"warmup", o->warmup, 0, INT64_MAX},
                {"eval-every", o->eval_every, 0, INT64_MAX},
                {"eval-windows", o->eval_windows, 0, 1 << 20},
                {"ckpt-every", o->ckpt_every, 0, INT64_MAX},
                {"threads", o->threads, 0, 4096},
                {"sample-tokens", o->sample_tokens, 0, 1 << 24},
                {"stop-after", o->stop_after, 0, INT64_MAX},
                {"seed", o->seed, 0, INT64_MAX},
                {"pieces", o->pieces, 1, 100000},
                {"transpose", o->transpose, 0, 24}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].v < ints[i].min || ints[i].v > ints[i].max) {
            fprintf(stderr, PROG ": --%s must lie in [%lld, %lld], got %lld\n", ints[i].name,
                    (long long)ints[i].min, (long long)ints[i].max, (long long)ints[i].v);
            return false;
        }
    if (o->batch * o->block > (int64_t)1 << 24) {
        fprintf(stderr, PROG ": --batch %lld x --block-size %lld is too large\n",
                (long long)o->batch, (long long)o->block);
        return false;
    }
    struct {
        const char *name;
        float v, min, max;
    } fl[] = {{"lr", o->lr, 0, 10},
              {"lr-min", o->lr_min, 0, 10},
              {"weight-decay", o->weight_decay, 0, 10},
              {"clip", o->clip, 0, 1e9f},
              {"dropout", o->dropout, 0, 0.99f},
              {"temperature", o->temperature, 0, 100},
              {"stretch", o->stretch, 0, 0.5f}};
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++)
        if (!(fl[i].v >= fl[i].min && fl[i].v <= fl[i].max)) {
            fprintf(stderr, PROG ": --%s must lie in [%g, %g], got %g\n", fl[i].name,
                    (double)fl[i].min, (double)fl[i].max, (double)fl[i].v);
            return false;
        }
    if (!(o->lr > 0)) {
        fprintf(stderr, PROG ": --lr must be positive\n");
        return false;
    }
    return true;
}

/* The model config from the options, checked by the library (its messages name the key). */
static mg_status model_config(const train_opts *o, mg_gpt_config *cfg) {
    *cfg = mg_gpt_config_default();
    mg_config *kv = mg_config_new("music train options");
    if (!kv) return mg_set_error(MG_ERR_NOMEM, "out of memory");
    mg_config_setf(kv, "vocab_size", "%d", MG_PERF_VOCAB);
    mg_config_setf(kv, "block_size", "%lld", (long long)o->block);
    mg_config_setf(kv, "n_embd", "%lld", (long long)o->n_embd);
    mg_config_setf(kv, "n_layer", "%lld", (long long)o->n_layer);
    mg_config_setf(kv, "n_head", "%lld", (long long)o->n_head);
    mg_config_setf(kv, "dropout", "%.9g", (double)o->dropout);
    mg_config_set(kv, "pos", o->pos);
    mg_status st = o->pos_opts[0] ? mg_config_set(kv, "pos_opts", o->pos_opts) : MG_OK;
    if (st == MG_OK) st = mg_gpt_config_from(kv, cfg);
    mg_config_free(kv);
    return st;
}

/* ---- resuming: the saved run's settings become the defaults ---- */

static mg_status load_saved(const char *ckpt, train_opts *o, mg_st_file **f) {
    mg_status st = mg_safetensors_open(ckpt, f);
    if (st != MG_OK) return mg_wrap_error(st, "cannot resume (start without --resume)");
    const char *tok = mg_st_meta_get(*f, MG_MUSIC_META_TOKENIZER);
    if (!tok || strcmp(tok, MG_MUSIC_TOKENIZER) != 0)
        return mg_set_error(MG_ERR_FORMAT, "%s: not a music model: metadata '%s' is '%s', not '%s'",
                            ckpt, MG_MUSIC_META_TOKENIZER, tok ? tok : "(missing)",
                            MG_MUSIC_TOKENIZER);
    mg_gpt_config c;
    if ((st = mg_gpt_config_from_file(*f, &c)) != MG_OK) return st;
    o->block = c.block_size, o->n_embd = c.n_embd, o->n_layer = c.n_layer, o->n_head = c.n_head;
    o->dropout = c.dropout;
    o->pos = mg_st_meta_get(*f, "pos");
    o->pos_opts = mg_st_meta_get(*f, "pos_opts") ? mg_st_meta_get(*f, "pos_opts") : "";
    o->data = mg_st_meta_get(*f, MUSIC_META_DATA);
    const char *na = mg_st_meta_get(*f, "music.no_augment");
    o->no_augment = na && strcmp(na, "1") == 0;
    char key[64];
#define GET_INT(name)                                                                              \
    snprintf(key, sizeof key, "music.%s", #name);                                                  \
    if (st == MG_OK && mg_st_meta_get(*f, key)) st = mg_meta_get_i64(*f, key, &o->name);
#define GET_FLOAT(name)                                                                            \
    snprintf(key, sizeof key, "music.%s", #name);                                                  \
    if (mg_st_meta_get(*f, key)) o->name = strtof(mg_st_meta_get(*f, key), NULL);
    SAVED_INTS(GET_INT)
    SAVED_FLOATS(GET_FLOAT)
#undef GET_INT
#undef GET_FLOAT
    return st;
}

static bool file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* mkdir -p */
static mg_status make_dirs(const char *dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1;; s++) {
        bool end = *s == 0;
        if (*s == '/' || end) {
            *s = 0;
            struct stat sb;
            if (p[0] && stat(p, &sb) != 0 && mkdir(p, 0777) != 0 && !file_exists(p))
                return mg_set_error(MG_ERR_IO, "%s: cannot create the directory", p);
            if (p[0] && stat(p, &sb) == 0 && !S_ISDIR(sb.st_mode))
                return mg_set_error(MG_ERR_IO, "%s: exists and is not a directory", p);
            if (end) break;
            *s = '/';
        }
    }
    return MG_OK;
}

/* ---- the command ---- */

int music_cmd_train(int argc, char **argv) {
    ex_add_plugin_dirs();
    train_opts o = defaults();
    ex_opt table[40];
    int n_opts = make_opts(&o, table);
    ex_parse_result pr = ex_parse(PROG, USAGE, argc - 1, argv + 1, table, n_opts, NULL, 0, NULL);
    if (pr != EX_PARSE_OK) return pr == EX_PARSE_HELP ? 0 : 2;

    char ckpt[4096], logp[4096], plot[4096], smid[4096], spng[4096];
    snprintf(ckpt, sizeof ckpt, "%s/model.safetensors", o.out);
    snprintf(plot, sizeof plot, "%s/loss.png", o.out);
    snprintf(smid, sizeof smid, "%s/sample.mid", o.out);
    snprintf(spng, sizeof spng, "%s/sample.png", o.out);

    int rc = 1;
    mg_st_file *saved = NULL;
    mg_music_corpus corpus = {0};
    job j = {0};
    mg_gpt *g = NULL;
    if (o.resume) {
        if (!file_exists(ckpt)) {
            fprintf(stderr,
                    PROG ": --resume: %s holds no checkpoint (%s is missing); start without "
                         "--resume\n",
                    o.out, ckpt);
            return 1;
        }
        if (load_saved(ckpt, &o, &saved) != MG_OK) goto out;
        /* what is given on the command line wins over what the run saved */
        if (ex_parse(PROG, USAGE, argc - 1, argv + 1, table, n_opts, NULL, 0, NULL) !=
            EX_PARSE_OK) {
            rc = 2;
            goto out;
        }
    } else if (file_exists(ckpt) && !o.force) {
        fprintf(stderr,
                PROG ": %s already holds a run (%s): pass --resume to continue it, --force to "
                     "start over (replacing it), or another --out\n",
                o.out, ckpt);
        return 1;
    }
    if (!o.pos_opts) o.pos_opts = "";
    if (!check_opts(&o)) {
        rc = 2;
        goto out;
    }
    if (o.log)
        snprintf(logp, sizeof logp, "%s", o.log);
    else
        snprintf(logp, sizeof logp, "%s/log.jsonl", o.out);
    mg_set_num_threads((int)o.threads);

    /* the model config first: a bad size is a usage error, found before any loading */
    mg_gpt_config cfg;
    if (model_config(&o, &cfg) != MG_OK) {
        fprintf(stderr, PROG ": %s\n", mg_last_error());
        rc = 2;
        goto out;
    }

    /* the corpus, its split, the validation windows */
    char label[4200];
    if (!o.data || !o.data[0]) {
        printf("music: no --data given: learning %lld generated piano pieces (music gen --seed "
               "%d)\n",
               (long long)o.pieces, MUSIC_GEN_SEED);
        fflush(stdout);
    }
    if (music_load_corpus("music", o.data, o.pieces, stdout, &corpus, label, sizeof label) != MG_OK)
        goto out;
    if (mg_music_data_make(&j.data, &corpus, label) != MG_OK) goto out;
    mg_music_corpus_free(&corpus);
    if (mg_music_val_windows(&j.data, o.block, (size_t)o.eval_windows, &j.val) != MG_OK ||
        mg_music_eval_init(&j.eval, o.batch, o.block) != MG_OK)
        goto out;
    j.B = o.batch, j.T = o.block;
    j.rng = mg_rng_make((uint64_t)o.seed * 0x9E3779B97F4A7C15ull + 0x3D1C);
    j.augment = !o.no_augment;
    j.aug = mg_augment_defaults();
    j.aug.max_transpose = (int)o.transpose;
    j.aug.max_stretch = o.stretch;

    /* the model */
    mg_rng init = mg_rng_make((uint64_t)o.seed);
    if (mg_gpt_new(&cfg, &init, &g) != MG_OK) goto out;
    if (make_dirs(o.out) != MG_OK) goto out;

    /* what the checkpoint remembers */
    mg_st_meta meta[32];
    int nm = 0;
    meta[nm++] = (mg_st_meta){MG_MUSIC_META_TOKENIZER, MG_MUSIC_TOKENIZER};
    char datadir[4096] = "", ibuf[16][32], keys[16][40];
    if (o.data && o.data[0] && !realpath(o.data, datadir))
        snprintf(datadir, sizeof datadir, "%s", o.data);
    meta[nm++] = (mg_st_meta){MUSIC_META_DATA, datadir};
    meta[nm++] = (mg_st_meta){"music.no_augment", o.no_augment ? "1" : "0"};
    int nk = 0;
#define PUT_INT(name)                                                                              \
    snprintf(keys[nk], sizeof keys[nk], "music.%s", #name);                                        \
    snprintf(ibuf[nk], sizeof ibuf[nk], "%lld", (long long)o.name);                                \
    meta[nm++] = (mg_st_meta){keys[nk], ibuf[nk]}, nk++;
#define PUT_FLOAT(name)                                                                            \
    snprintf(keys[nk], sizeof keys[nk], "music.%s", #name);                                        \
    snprintf(ibuf[nk], sizeof ibuf[nk], "%.9g", (double)o.name);                                   \
    meta[nm++] = (mg_st_meta){keys[nk], ibuf[nk]}, nk++;
    SAVED_INTS(PUT_INT)
    SAVED_FLOATS(PUT_FLOAT)
#undef PUT_INT
#undef PUT_FLOAT

    ex_task task = {.user = &j,
                    .B = o.batch,
                    .T = o.block,
                    .next_batch = next_batch,
                    .eval = validate,
                    .rngs = {&j.rng},
                    .rng_names = {"data"},
                    .n_rngs = 1,
                    .meta = meta,
                    .n_meta = nm};
    ex_train_cfg tc = ex_train_defaults();
    tc.steps = o.steps, tc.warmup = o.warmup, tc.lr = o.lr, tc.lr_min = o.lr_min;
    tc.weight_decay = o.weight_decay, tc.clip = o.clip, tc.eval_every = o.eval_every;
    tc.ckpt_every = o.ckpt_every, tc.seed = (uint64_t)o.seed, tc.ckpt = ckpt, tc.log_path = logp;
    tc.plot_path = plot, tc.resume = o.resume, tc.stop_after = o.stop_after, tc.prog = "music";

    char b1[32], b2[32], b3[32];
    int64_t n_params = mg_params_numel(mg_gpt_params(g));
    printf("music: %zu train pieces (%zu tokens), %zu validation pieces (%zu tokens, %zu windows "
           "of %lld)\n",
           j.data.n_train, j.data.train_tokens, j.data.n_val, j.data.val_tokens, j.val.count,
           (long long)o.block);
    if (j.data.n_val == 0)
        printf("music: a single piece leaves nothing for validation: no validation loss\n");
    if (j.augment)
        printf("music: augmentation per window: transpose up to +-%lld semitones, stretch time by "
               "%g..%g\n",
               (long long)o.transpose, 1.0 - (double)o.stretch, 1.0 + (double)o.stretch);
    printf("music: GPT %lld layers x %lld wide, %lld heads, context %lld, pos %s, vocabulary %d: "
           "%.2fM parameters (%s)\n",
           (long long)cfg.n_layer, (long long)cfg.n_embd, (long long)cfg.n_head,
           (long long)cfg.block_size, cfg.pos, MG_PERF_VOCAB, (double)n_params / 1e6,
           ex_fmt_bytes((double)n_params * 4, b1, sizeof b1));
    printf("music: %lld steps of %lld x %lld tokens, lr %g -> %g, %d threads; Ctrl-C saves and "
           "stops\n",
           (long long)o.steps, (long long)o.batch, (long long)o.block, (double)o.lr,
           (double)o.lr_min, mg_get_num_threads());
    fflush(stdout);

    ex_train_result res;
    mg_status st = ex_train(g, &tc, &task, &res);
    if (st != MG_OK) goto out;
    if (j.batch_status != MG_OK) {
        mg_set_error(j.batch_status, "making batches failed (see the warning above)");
        goto out;
    }
    if (res.interrupted) {
        rc = 130;
        goto out;
    }
    if (res.step < o.steps) { /* --stop-after */
        printf("music: continue with: music train --resume --out %s\n", o.out);
        rc = 0;
        goto out;
    }
    if (res.step > 0 && res.tokens_per_s > 0) {
        size_t slabs = (size_t)n_params * 4 * 4; /* weights, gradients, AdamW m and v */
        printf(
            "\nmusic: done: step %lld, train loss %.4f, validation loss %.4f nats/token, %.1fs\n",
            (long long)res.step, (double)res.loss, (double)res.val_loss, res.seconds);
        printf("music: speed %.0f tokens/s, %.1f ms/step; memory at %lld x %lld tokens: peak RSS "
               "%s, activations (arena peak) %s, parameters + gradients + AdamW %s\n",
               res.tokens_per_s, 1000.0 * (double)(o.batch * o.block) / res.tokens_per_s,
               (long long)o.batch, (long long)o.block,
               ex_fmt_bytes((double)ex_peak_rss(), b1, sizeof b1),
               ex_fmt_bytes((double)res.peak_arena, b2, sizeof b2),
               ex_fmt_bytes((double)slabs, b3, sizeof b3));
    }
    if (o.sample_tokens > 0) {
        printf("\nmusic: a sample of %lld tokens (temperature %g):\n", (long long)o.sample_tokens,
               (double)o.temperature);
        fflush(stdout);
        int32_t start = MG_PERF_START;
        mg_rng srng = mg_rng_make((uint64_t)o.seed + 1);
        music_gen_req req = {.prog = "music",
                             .tokens = o.sample_tokens,
                             .temperature = o.temperature,
                             .mid = smid,
                             .png = spng,
                             .title = "music train: a sample at the end of training"};
        music_gen_result gr;
        if (music_generate(g, &start, 1, &req, &srng, &gr) != MG_OK) goto out;
        printf("music: %zu notes, %.1f s of music%s: %s, %s\n", gr.notes, gr.seconds,
               gr.ended ? " (the model ended the piece)" : "", smid, spng);
    }
    printf("\nmusic: checkpoint %s (training state beside it)\n", ckpt);
    printf("music: loss curve %s, log %s\n", plot, logp);
    printf("music: more music: music sample --ckpt %s --out piece.mid --png piece.png\n", ckpt);
    rc = 0;
out:
    if (rc == 1) ex_fail(PROG);
    mg_gpt_free(g);
    mg_music_eval_free(&j.eval);
    mg_music_windows_free(&j.val);
    mg_music_scratch_free(&j.scratch);
    mg_music_data_free(&j.data);
    mg_music_corpus_free(&corpus);
    mg_st_close(saved);
    return rc;
}
