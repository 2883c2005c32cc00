/* music train: a GPT on performance tokens, trained by the library trainer (minigrad/train.h)
 * through the GPT adapter of examples/common. */
#include "cli.h"
#include "cmd_model.h"
#include "commands.h"
#include "gpt_opts.h"
#include "progress.h"
#include "trainer.h"

#include "minigrad/checkpoint.h"
#include "minigrad/params.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PROG "music train"

/* The options every GPT program's train takes (gpt_opts.h), then music's own. */
typedef struct {
    ex_train_opts c;
    int64_t pieces, transpose;
    float stretch;
    bool no_augment;
} train_opts;

/* music's own options that the checkpoint remembers besides the shared ones (all stored under
 * "music.<name>"), so `--resume` needs nothing but --out. */
static int saved_extra(train_opts *o, ex_setting *s) {
    s[0] = (ex_setting){"pieces", &o->pieces, NULL};
    s[1] = (ex_setting){"transpose", &o->transpose, NULL};
    s[2] = (ex_setting){"stretch", NULL, &o->stretch};
    return 3;
}

static const ex_train_help HELP = {
    .out = "directory for model.safetensors, its .state file, log.jsonl, loss.png and the final "
           "sample",
    .block = "context length in tokens (the window length)",
    .pos = "positional scheme: rope, alibi (plugin), learned, sinusoidal, learned+sinusoidal, none",
    .eval_windows =
        "fixed validation windows the loss is averaged over (0: every window of the split)",
    .seed = "seed of the initial weights, the windows, augmentation and dropout",
    .sample_tokens =
        "tokens of the sample written to OUT/sample.mid and OUT/sample.png at the end (0: none)",
    .min_block = 2};

static int make_opts(train_opts *o, ex_opt *t) {
    int n = 0;
    t[n++] = (ex_opt)EX_STR_OPT("data", &o->c.data,
                                "directory of MIDI files (.mid/.midi, searched recursively; default: "
                                "generated piano pieces)");
    t[n++] = (ex_opt)EX_INT_OPT("pieces", &o->pieces, 1, MUSIC_MAX_PIECES,
                                "pieces of the generated corpus when no --data is given");
    n += ex_train_rows_model(&o->c, &HELP, t + n);
    t[n++] = (ex_opt)EX_INT_OPT("transpose", &o->transpose, 0, 24,
                                "augmentation: transpose each window by up to N semitones");
    t[n++] = (ex_opt)EX_FLOAT_OPT("stretch", &o->stretch, 0, 0.5,
                                  "augmentation: stretch each window's time by a factor in [1-S, 1+S] (5 "
                                  "steps)");
    t[n++] = (ex_opt)EX_FLAG_OPT("no-augment", &o->no_augment, "train on the windows as they are");
    n += ex_train_rows_run(&o->c, &HELP, t + n);
    return n;
}

static const char *const USAGE =
    "[--data DIR] [options]\n\n"
    "Trains a GPT on MIDI performances (the 390-token encoding of music.h). Without --data it "
    "learns generated piano pieces.\nThe defaults (the full 2048 x 512 model, 200 steps) take "
    "about 400 CPU seconds: 3.5 minutes on 2 idle cores; README.md gives a small model that learns "
    "in a few minutes.";

static train_opts defaults(void) {
    return (train_opts){.c = {.out = MUSIC_DEFAULT_OUT,
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
                              .sample_tokens = 512,
                              .lr = 6e-4f,
                              .lr_min = 1e-4f,
                              .weight_decay = 0.1f,
                              .clip = 1.0f,
                              .temperature = 1.0f},
                        .pieces = 128,
                        .transpose = 3,
                        .stretch = 0.05f};
}

/* ---- what the trainer calls ---- */

typedef struct {
    music_data data;
    music_windows val;
    ex_evaluator eval;
    music_scratch scratch;
    music_augment_opts aug;
    bool augment;
    mg_rng rng;
    int64_t B, T;
    mg_status batch_status, eval_status;
} job;

static void next_batch(void *user, int32_t *ids, int32_t *targets) {
    job *j = user;
    mg_status st = music_batch(&j->data, j->B, j->T, j->augment ? &j->aug : NULL, &j->rng,
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
    mg_status st = music_eval_windows(&j->eval, g, &j->data, &j->val, &nats, &tokens);
    if (st != MG_OK) {
        if (j->eval_status == MG_OK)
            mg_log(MG_LOG_WARN, PROG ": validation failed: %s", mg_last_error());
        j->eval_status = st;
        return NAN;
    }
    return tokens > 0 ? (float)(nats / (double)tokens) : NAN;
}

/* ---- resuming: the saved run's settings become the defaults ---- */

static mg_status load_saved(const char *ckpt, train_opts *o, mg_st_file **f) {
    mg_status st = mg_safetensors_open(ckpt, f);
    if (st != MG_OK) return mg_wrap_error(st, "cannot resume (start without --resume)");
    const char *tok = mg_st_meta_get(*f, MUSIC_META_TOKENIZER);
    if (!tok || strcmp(tok, MUSIC_TOKENIZER) != 0)
        return mg_set_error(MG_ERR_FORMAT, "%s: not a music model: metadata '%s' is '%s', not '%s'",
                            ckpt, MUSIC_META_TOKENIZER, tok ? tok : "(missing)",
                            MUSIC_TOKENIZER);
    if ((st = ex_train_opts_from_ckpt(*f, &o->c)) != MG_OK) return st;
    o->c.data = mg_st_meta_get(*f, MUSIC_META_DATA);
    const char *na = mg_st_meta_get(*f, "music.no_augment");
    o->no_augment = na && strcmp(na, "1") == 0;
    ex_setting extra[3];
    return ex_settings_from_ckpt(*f, "music", &o->c, extra, saved_extra(o, extra));
}

/* ---- the command ---- */

int music_cmd_train(int argc, char **argv) {
    train_opts o = defaults();
    ex_opt table[40];
    int n_opts = make_opts(&o, table);
    ex_parse_result pr = ex_parse(PROG, USAGE, argc - 1, argv + 1, table, n_opts, NULL, 0, NULL);
    if (pr != EX_PARSE_OK) return pr == EX_PARSE_HELP ? 0 : 2;

    ex_run_files files;
    ex_run_files_make(&files, &o.c);
    const char *ckpt = files.ckpt;
    char smid[4096], spng[4096];
    snprintf(smid, sizeof smid, "%s/sample.mid", o.c.out);
    snprintf(spng, sizeof spng, "%s/sample.png", o.c.out);

    int rc = ex_train_check_out(PROG, &o.c, ckpt);
    if (rc != 0) return rc;
    rc = 1;
    mg_st_file *saved = NULL;
    music_corpus corpus = {0};
    job j = {0};
    mg_gpt *g = NULL;
    if (o.c.resume) {
        if (load_saved(ckpt, &o, &saved) != MG_OK) goto out;
        /* what is given on the command line wins over what the run saved */
        if (ex_parse(PROG, USAGE, argc - 1, argv + 1, table, n_opts, NULL, 0, NULL) !=
            EX_PARSE_OK) {
            rc = 2;
            goto out;
        }
    }
    char where[4200];
    snprintf(where, sizeof where, "the value saved in %s", ckpt);
    if (!ex_train_check(PROG, &o.c, table, n_opts, o.c.resume ? where : NULL, (int64_t)1 << 24)) {
        rc = 2;
        goto out;
    }
    mg_set_num_threads((int)o.c.threads);

    /* the model config first: a bad size is a usage error, found before any loading */
    mg_gpt_config cfg;
    if (ex_train_model_config(&o.c, MUSIC_PERF_VOCAB, &cfg) != MG_OK) {
        fprintf(stderr, PROG ": %s\n", mg_last_error());
        rc = 2;
        goto out;
    }

    /* the corpus, its split, the validation windows */
    char label[4200];
    if (!o.c.data || !o.c.data[0]) {
        printf("music: no --data given: learning %lld generated piano pieces (music gen --seed "
               "%d)\n",
               (long long)o.pieces, MUSIC_GEN_SEED);
        fflush(stdout);
    }
    if (music_load_corpus("music", o.c.data, o.pieces, stdout, &corpus, label, sizeof label) !=
        MG_OK)
        goto out;
    if (music_data_make(&j.data, &corpus, label) != MG_OK) goto out;
    music_corpus_free(&corpus);
    if (music_val_windows(&j.data, o.c.block, (size_t)o.c.eval_windows, &j.val) != MG_OK ||
        ex_evaluator_init(&j.eval, o.c.batch, o.c.block) != MG_OK)
        goto out;
    j.B = o.c.batch, j.T = o.c.block;
    j.rng = mg_rng_make((uint64_t)o.c.seed * 0x9E3779B97F4A7C15ull + 0x3D1C);
    j.augment = !o.no_augment;
    j.aug = music_augment_defaults();
    j.aug.max_transpose = (int)o.transpose;
    j.aug.max_stretch = o.stretch;

    /* the model */
    mg_rng init = mg_rng_make((uint64_t)o.c.seed);
    if (mg_gpt_new(&cfg, &init, &g) != MG_OK) goto out;
    if (ex_mkdirs(o.c.out) != MG_OK) goto out;

    /* what the checkpoint remembers */
    mg_st_meta meta[32];
    int nm = 0;
    meta[nm++] = (mg_st_meta){MUSIC_META_TOKENIZER, MUSIC_TOKENIZER};
    char datadir[4096] = "";
    if (o.c.data && o.c.data[0] && !realpath(o.c.data, datadir))
        snprintf(datadir, sizeof datadir, "%s", o.c.data);
    meta[nm++] = (mg_st_meta){MUSIC_META_DATA, datadir};
    meta[nm++] = (mg_st_meta){"music.no_augment", o.no_augment ? "1" : "0"};
    ex_settings_meta settings;
    ex_setting extra[3];
    nm += ex_settings_to_meta(&settings, "music", &o.c, extra, saved_extra(&o, extra), meta + nm);

    ex_lm_task task = {.user = &j,
                    .B = o.c.batch,
                    .T = o.c.block,
                    .next_batch = next_batch,
                    .eval = validate,
                    .rngs = {&j.rng},
                    .rng_names = {"data"},
                    .n_rngs = 1,
                    .meta = meta,
                    .n_meta = nm};
    mg_train_cfg tc = ex_train_cfg_from(&o.c, &files, "music");
    mg_ctx_set_precision(j.eval.ctx, tc.precision);

    char b1[32], b2[32], b3[32];
    int64_t n_params = mg_params_numel(mg_gpt_params(g));
    printf("music: %zu train pieces (%zu tokens), %zu validation pieces (%zu tokens, %zu windows "
           "of %lld)\n",
           j.data.n_train, j.data.train_tokens, j.data.n_val, j.data.val_tokens, j.val.count,
           (long long)o.c.block);
    if (j.data.n_val == 0)
        printf("music: a single piece leaves nothing for validation: no validation loss\n");
    if (j.augment)
        printf("music: augmentation per window: transpose up to +-%lld semitones, stretch time by "
               "%g..%g\n",
               (long long)o.transpose, 1.0 - (double)o.stretch, 1.0 + (double)o.stretch);
    printf("music: GPT %lld layers x %lld wide, %lld heads, context %lld, pos %s, vocabulary %d: "
           "%.2fM parameters (%s)\n",
           (long long)cfg.n_layer, (long long)cfg.n_embd, (long long)cfg.n_head,
           (long long)cfg.block_size, cfg.pos, MUSIC_PERF_VOCAB, (double)n_params / 1e6,
           ex_fmt_bytes((double)n_params * 4, b1, sizeof b1));
    printf("music: %lld steps of %lld x %lld tokens, lr %g -> %g, %d thread%s%s; Ctrl-C saves and "
           "stops\n",
           (long long)o.c.steps, (long long)o.c.batch, (long long)o.c.block, (double)o.c.lr,
           (double)o.c.lr_min, mg_get_num_threads(), mg_get_num_threads() == 1 ? "" : "s",
           ex_precision_banner("music", ex_precision_is_bf16(o.c.precision)));
    fflush(stdout);

    mg_train_result res;
    mg_status st = ex_lm_train(g, &tc, &task, &res);
    if (st != MG_OK) goto out;
    if (j.batch_status != MG_OK) {
        mg_set_error(j.batch_status, "making batches failed (see the warning above)");
        goto out;
    }
    int stopped = ex_train_stopped("music", &o.c, &res); /* Ctrl-C or --stop-after */
    if (stopped >= 0) {
        rc = stopped;
        goto out;
    }
    if (res.step > 0 && res.tokens_per_s > 0) {
        size_t slabs = (size_t)n_params * 4 * 4; /* weights, gradients, AdamW m and v */
        printf(
            "\nmusic: done: step %lld, train loss %.4f, validation loss %.4f nats/token, %.1fs\n",
            (long long)res.step, (double)res.loss, (double)res.val_loss, res.seconds);
        printf("music: speed %.0f tokens/s, %.1f ms/step; memory at %lld x %lld tokens: peak RSS "
               "%s, activations (arena peak) %s, parameters + gradients + AdamW %s\n",
               res.tokens_per_s, 1000.0 * (double)(o.c.batch * o.c.block) / res.tokens_per_s,
               (long long)o.c.batch, (long long)o.c.block,
               ex_fmt_bytes((double)ex_peak_rss(), b1, sizeof b1),
               ex_fmt_bytes((double)res.peak_arena, b2, sizeof b2),
               ex_fmt_bytes((double)slabs, b3, sizeof b3));
    }
    if (o.c.sample_tokens > 0) {
        printf("\nmusic: a sample of %lld tokens (temperature %g):\n", (long long)o.c.sample_tokens,
               (double)o.c.temperature);
        fflush(stdout);
        int32_t start = MUSIC_PERF_START;
        mg_rng srng = mg_rng_make((uint64_t)o.c.seed + 1);
        music_gen_req req = {.prog = "music",
                             .tokens = o.c.sample_tokens,
                             .temperature = o.c.temperature,
                             .mid = smid,
                             .png = spng,
                             .title = "music train: a sample at the end of training"};
        music_gen_result gr;
        if (music_generate(g, &start, 1, &req, &srng, &gr) != MG_OK) goto out;
        printf("music: %zu notes, %.1f s of music%s: %s, %s\n", gr.notes, gr.seconds,
               gr.ended ? " (the model ended the piece)" : "", smid, spng);
    }
    ex_train_print_files("music", &files);
    char prog_w[1024], ckpt_w[1024]; /* the program as it was started, and the path, as shell words */
    printf("music: more music: %s sample --ckpt %s --out piece.mid --png piece.png\n",
           ex_shell_word(ex_invoked_as("music"), prog_w, sizeof prog_w), ex_shell_word(ckpt, ckpt_w, sizeof ckpt_w));
    rc = 0;
out:
    if (rc == 1) ex_fail(PROG);
    mg_gpt_free(g);
    ex_evaluator_free(&j.eval);
    music_windows_free(&j.val);
    music_scratch_free(&j.scratch);
    music_data_free(&j.data);
    music_corpus_free(&corpus);
    mg_st_close(saved);
    return rc;
}
