/* `charlstm`: a character-level LSTM language model on any text: train, sample, eval. The same
 * corpus, tokenizers and commands as textgen, with an LSTM in place of the GPT (charlstm.h). */
#include "charlstm.h"
#include "cli.h"
#include "output.h"
#include "progress.h"

#include "minigrad/checkpoint.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- train ---- */

#define TRAIN "charlstm train"

typedef struct {
    ex_train_opts c; /* out, steps, batch, block, n_embd (embd), n_layer (layers), lr, ... */
    int64_t hidden, max_file_mib;
    const char *tokenizer, *prompt;
} train_opts;

static const ex_train_help HELP = {.out = "directory for model.safetensors, its .state file, log.jsonl and loss.png",
                                   .eval_windows = "fixed validation windows the loss is averaged over",
                                   .seed = "seed of the initial weights, the batches and the sample",
                                   .sample_tokens = "characters of the sample printed at the end (0: none)"};

static int train_rows(train_opts *o, ex_opt *t) {
    int n = 0;
    t[n++] = (ex_opt)EX_STR_OPT("data", &o->c.data, "text file to learn (more files may follow the options; default: "
                                                   "the King James Bible from bible-kjv, as textgen)");
    t[n++] = (ex_opt)EX_STR_OPT("tokenizer", &o->tokenizer, "char (one id per Unicode character) or byte (256 ids)");
    t[n++] = (ex_opt)EX_STR_OPT("out", &o->c.out, HELP.out);
    t[n++] = (ex_opt)EX_FLAG_OPT("resume", &o->c.resume, "continue the run saved in --out");
    t[n++] = (ex_opt)EX_FLAG_OPT("force", &o->c.force, "start a new run even if --out already holds one");
    t[n++] = (ex_opt)EX_INT_OPT("steps", &o->c.steps, 1, EX_MAX_STEPS, "optimizer steps of the whole run");
    t[n++] = (ex_opt)EX_INT_OPT("batch", &o->c.batch, 1, EX_MAX_BATCH, "windows per step");
    t[n++] = (ex_opt)EX_INT_OPT("block-size", &o->c.block, 1, EX_MAX_BLOCK,
                                "characters per window: the steps backpropagated through, from a zero state");
    t[n++] = (ex_opt)EX_INT_OPT("embd", &o->c.n_embd, 1, 65536, "character embedding width");
    t[n++] = (ex_opt)EX_INT_OPT("hidden", &o->hidden, 1, 65536, "LSTM hidden size");
    t[n++] = (ex_opt)EX_INT_OPT("layers", &o->c.n_layer, 1, MG_RNN_MAX_LAYERS, "stacked LSTM layers");
    t[n++] = (ex_opt)EX_FLOAT_OPT("lr", &o->c.lr, 0, 10, "peak learning rate (AdamW; above 0)");
    t[n++] = (ex_opt)EX_FLOAT_OPT("lr-min", &o->c.lr_min, 0, 10, "final learning rate of the cosine schedule");
    t[n++] = (ex_opt)EX_INT_OPT("warmup", &o->c.warmup, 0, EX_MAX_STEPS, "linear warmup steps");
    t[n++] = (ex_opt)EX_FLOAT_OPT("weight-decay", &o->c.weight_decay, 0, 10, "AdamW weight decay");
    t[n++] = (ex_opt)EX_FLOAT_OPT("clip", &o->c.clip, 0, 1e9, "gradient-norm clipping (0: none)");
    n += ex_train_rows_run(&o->c, &HELP, t + n);
    t[n++] = (ex_opt)EX_STR_OPT("prompt", &o->prompt, "prompt of that sample (default: a newline)");
    t[n++] = (ex_opt)EX_INT_OPT("max-file-mib", &o->max_file_mib, 1, TG_MAX_FILE_MIB_LIMIT,
                                "largest text file read, in MiB (a bigger one is an error)");
    return n;
}

static const char *const TRAIN_USAGE = "[--data FILE] [options] [FILE...]\n\n"
                                       "Trains a character-level LSTM. Without --data it learns the King James Bible "
                                       "(Debian package bible-kjv).\nThe defaults finish in about 5 minutes on 2 cores.";

static train_opts train_defaults(void) {
    return (train_opts){.c = {.out = CL_DEFAULT_OUT, .steps = 1100, .batch = 32, .block = 96, .n_embd = 64,
                              .n_layer = 1, .warmup = 30, .eval_every = 100, .eval_windows = 64, .ckpt_every = 250,
                              .seed = 1, .sample_tokens = 400, .lr = 5e-3f, .lr_min = 2e-4f, .weight_decay = 0.01f,
                              .clip = 1.0f, .temperature = 0.8f},
                        .hidden = 384, .max_file_mib = TG_MAX_FILE_MIB, .tokenizer = "char"};
}

typedef struct {
    cl_model m;
    tg_data data;
    tg_vocab vocab;
    tg_windows val;
    mg_ctx *vctx;
    mg_rng rng;
    int64_t B, T;
    int32_t *ids, *targets;
} job;

static mg_status next_batch(void *user) {
    job *j = user;
    tg_batch(&j->data, j->B, j->T, &j->rng, j->ids, j->targets);
    return MG_OK;
}

static mg_tensor *train_loss(void *user, mg_ctx *ctx, mg_rng *dropout) {
    (void)dropout;
    job *j = user;
    mg_tensor *x = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){j->B, j->T}, j->ids);
    mg_tensor *y = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){j->B, j->T}, j->targets);
    return cl_loss(&j->m, ctx, x, y);
}

/* Rows [row0, row0 + nrows) of the batch: their mean loss times their share of the batch (every
 * target of a window counts), so the ranks' shares add up to the mean over the whole batch. */
static mg_tensor *train_loss_rows(void *user, mg_ctx *ctx, mg_rng *dropout, int64_t row0, int64_t nrows) {
    (void)dropout;
    job *j = user;
    int64_t shape[2] = {nrows, j->T};
    mg_tensor *x = mg_tensor_wrap(ctx, MG_I32, 2, shape, j->ids + row0 * j->T);
    mg_tensor *y = mg_tensor_wrap(ctx, MG_I32, 2, shape, j->targets + row0 * j->T);
    mg_tensor *loss = cl_loss(&j->m, ctx, x, y);
    if (!loss || nrows == j->B) return loss;
    return mg_scale(ctx, loss, (float)((double)nrows / (double)j->B));
}

static mg_status validate(void *user, float *val_loss) {
    job *j = user;
    *val_loss = NAN;
    if (j->val.count == 0) return MG_OK;
    tg_loss sum = {0};
    mg_status st = cl_eval_windows(&j->m, j->vctx, &j->vocab, tg_val(&j->data), &j->val, 0, j->B, &sum);
    if (st == MG_OK) *val_loss = (float)(sum.nats / (double)sum.tokens);
    return st;
}

/* Streams n characters after the prompt ids, carrying the LSTM state from one character to the next
 * (each step runs one character, not the whole context again). */
static mg_status generate(cl_model *m, const tg_vocab *v, const int32_t *prompt, int64_t np, int64_t n, float temp,
                          int64_t top_k, float top_p, mg_rng *rng, int64_t *made) {
    const int64_t L = m->cfg.layers, H = m->cfg.hidden, V = m->cfg.vocab;
    float *state = malloc((size_t)(2 * L * H) * sizeof(float));
    int32_t *ids = malloc((size_t)(np > 0 ? np : 1) * sizeof(int32_t));
    mg_ctx *ctx = mg_ctx_new(0);
    void *scratch = malloc(MG_SAMPLE_SCRATCH(V));
    mg_status st = MG_OK;
    if (!state || !ids || !ctx || !scratch) {
        st = mg_set_error(MG_ERR_NOMEM, "charlstm: out of memory for sampling");
        goto out;
    }
    mg_ctx_set_grad_enabled(ctx, false);
    memcpy(ids, prompt, (size_t)np * sizeof(int32_t));
    int64_t len = np;
    bool have_state = false;
    *made = 0;
    for (int64_t k = 0; k < n; k++) {
        mg_ctx_reset(ctx);
        mg_tensor *x = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, len}, ids);
        mg_tensor *h0 = NULL, *c0 = NULL;
        if (have_state) {
            h0 = mg_tensor_wrap(ctx, MG_F32, 3, (int64_t[]){L, 1, H}, state);
            c0 = mg_tensor_wrap(ctx, MG_F32, 3, (int64_t[]){L, 1, H}, state + L * H);
        }
        mg_tensor *logits = cl_logits(m, ctx, x, h0, c0);
        mg_tensor *cn = NULL, *hn = mg_rnn_final_state(m->lstm, &cn);
        if (!mg_ctx_ok(ctx) || !hn || !cn) {
            st = mg_set_error(MG_ERR_INVALID, "charlstm: sampling failed: %s", mg_ctx_error(ctx));
            goto out;
        }
        memcpy(state, hn->data, (size_t)(L * H) * sizeof(float));
        memcpy(state + L * H, cn->data, (size_t)(L * H) * sizeof(float));
        have_state = true;
        int32_t id = mg_sample_logits(logits->data + (len - 1) * V, V, temp, top_k, top_p, rng, scratch);
        if (id < 0) {
            st = mg_wrap_error(MG_ERR_INVALID, "charlstm: sampling failed");
            goto out;
        }
        char s[4];
        int nb = tg_decode_one(v, id, s);
        if (fwrite(s, 1, (size_t)nb, stdout) != (size_t)nb || fflush(stdout) != 0) break; /* main reports it */
        ids[0] = id, len = 1;
        (*made)++;
    }
out:
    mg_ctx_free(ctx);
    free(scratch);
    free(ids);
    free(state);
    return st;
}

/* The prompt as ids; "" becomes one newline (or id 0 when the text has none). */
static mg_status encode_prompt(const tg_vocab *v, const char *prompt, int32_t **ids, int64_t *n) {
    size_t pl = strlen(prompt), np = 0;
    *ids = malloc((pl + 1) * sizeof **ids);
    if (!*ids) return mg_set_error(MG_ERR_NOMEM, "out of memory");
    if (pl == 0) {
        int32_t nl = tg_vocab_id(v, '\n');
        (*ids)[0] = nl >= 0 ? nl : 0, np = 1;
    } else if (tg_encode(v, prompt, pl, *ids, &np, "the prompt") != MG_OK) {
        free(*ids);
        *ids = NULL;
        return MG_ERR_INVALID;
    }
    *n = (int64_t)np;
    return MG_OK;
}

static int cl_split_list(const char *list, const char **files, int max) {
    int k = 0;
    static char buf[8192];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *p = buf; p && *p && k < max;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        if (*p) files[k++] = p;
        p = nl ? nl + 1 : NULL;
    }
    return k;
}

static int cmd_train(int argc, char **argv) {
    train_opts o = train_defaults();
    ex_opt table[48];
    int n_opts = train_rows(&o, table);
    const char *files[64];
    int n_files = 0;
    ex_parse_result pr = ex_parse(TRAIN, TRAIN_USAGE, argc - 1, argv + 1, table, n_opts, files, 64, &n_files);
    if (pr != EX_PARSE_OK) return pr == EX_PARSE_HELP ? 0 : 2;
    ex_run_files rf;
    ex_run_files_make(&rf, &o.c);
    int rc = ex_train_check_out(TRAIN, &o.c, rf.ckpt);
    if (rc != 0) return rc;

    rc = 1;
    mg_st_file *saved = NULL;
    char *text = NULL;
    int32_t *prompt = NULL;
    job j = {0};
    ex_setting extra[4];
    int n_extra = cl_settings(&o.c.block, &o.c.n_embd, &o.hidden, &o.c.n_layer, extra);
    if (o.c.resume) {
        /* the saved run's settings become the defaults; what the command line gives wins */
        if (mg_safetensors_open(rf.ckpt, &saved) != MG_OK) {
            mg_wrap_error(MG_ERR_IO, "cannot resume (start without --resume)");
            goto out;
        }
        if (ex_settings_from_ckpt(saved, CL_META_PREFIX, &o.c, extra, n_extra) != MG_OK) goto out;
        const char *tok = mg_st_meta_get(saved, TG_META_TOKENIZER);
        o.tokenizer = tok ? tok : "char";
        const char *data = mg_st_meta_get(saved, CL_META_DATA);
        int n_given = n_files;
        /* the sizes of the saved weights: a command line that changes one could not load them */
        const struct {
            const char *opt, *key;
            int64_t *now, saved;
        } sizes[] = {{"embd", CL_META_PREFIX ".embd", &o.c.n_embd, o.c.n_embd},
                     {"hidden", CL_META_PREFIX ".hidden", &o.hidden, o.hidden},
                     {"layers", CL_META_PREFIX ".layers", &o.c.n_layer, o.c.n_layer}};
        if (ex_parse(TRAIN, TRAIN_USAGE, argc - 1, argv + 1, table, n_opts, files, 64, &n_files) != EX_PARSE_OK) {
            rc = 2;
            goto out;
        }
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            if (mg_st_meta_get(saved, sizes[i].key) && *sizes[i].now != sizes[i].saved) {
                fprintf(stderr,
                        TRAIN ": cannot resume: --%s %lld but the checkpoint %s was trained with --%s %lld "
                        "(leave --%s out to keep it)\n",
                        sizes[i].opt, (long long)*sizes[i].now, rf.ckpt, sizes[i].opt, (long long)sizes[i].saved,
                        sizes[i].opt);
                rc = 2;
                goto out;
            }
        if (n_given == 0 && !o.c.data && data && data[0]) n_files = cl_split_list(data, files, 64);
    }
    if (!o.prompt) o.prompt = "";
    if (!ex_train_check(TRAIN, &o.c, table, n_opts, o.c.resume ? "the value saved in the checkpoint" : NULL,
                        (int64_t)1 << 28)) {
        rc = 2;
        goto out;
    }
    tg_tokenizer_kind kind;
    if (tg_train_inputs(TRAIN, o.c.data, files, &n_files, o.tokenizer, &kind) != 0) {
        rc = 2;
        goto out;
    }
    mg_set_num_threads((int)o.c.threads);

    size_t len;
    char label[512];
    if (tg_read_train_text("charlstm", files, n_files, o.max_file_mib, &text, &len, label, sizeof label) != MG_OK)
        goto out;
    mg_status st = tg_vocab_for_run(&j.vocab, saved, rf.ckpt, kind, text, len, label);
    if (st == MG_OK) st = tg_data_make(&j.data, &j.vocab, text, len, o.c.block, label);
    int64_t n_prompt = 0;
    if (st == MG_OK) st = encode_prompt(&j.vocab, o.prompt, &prompt, &n_prompt);
    if (st != MG_OK) goto out;
    free(text);
    text = NULL;
    if (tg_val_windows(&j.val, tg_val_len(&j.data), o.c.block, (size_t)o.c.eval_windows) != MG_OK) goto out;
    j.B = o.c.batch, j.T = o.c.block;
    j.rng = mg_rng_make((uint64_t)o.c.seed * 0x9E3779B97F4A7C15ull + 0xDA7A);
    j.ids = malloc((size_t)(j.B * j.T) * sizeof(int32_t));
    j.targets = malloc((size_t)(j.B * j.T) * sizeof(int32_t));
    j.vctx = mg_ctx_new(0);
    if (!j.ids || !j.targets || !j.vctx) goto out;

    mg_rng init = mg_rng_make((uint64_t)o.c.seed);
    cl_config cfg = {j.vocab.size, o.c.n_embd, o.hidden, o.c.n_layer};
    if (cl_model_new(&j.m, &cfg, &init) != MG_OK) goto out;
    if (ex_mkdirs(o.c.out) != MG_OK) goto out;

    /* what the checkpoint remembers */
    mg_st_meta meta[48];
    int nm = tg_vocab_meta(&j.vocab, meta);
    char vs[32], datalist[8192] = "";
    snprintf(vs, sizeof vs, "%d", (int)j.vocab.size);
    meta[nm++] = (mg_st_meta){"vocab_size", vs};
    for (int i = 0, off = 0; i < n_files; i++) {
        char abs[4096];
        const char *p = realpath(files[i], abs) ? abs : files[i];
        off += snprintf(datalist + off, sizeof datalist - (size_t)off, "%s%s", i ? "\n" : "", p);
        if (off >= (int)sizeof datalist) {
            datalist[0] = 0; /* too long to remember: a resume must name the files again */
            break;
        }
    }
    meta[nm++] = (mg_st_meta){CL_META_DATA, datalist};
    ex_settings_meta settings;
    nm += ex_settings_to_meta(&settings, CL_META_PREFIX, &o.c, extra, n_extra, meta + nm);

    mg_train_model model = {.params = j.m.P, .user = &j, .next_batch = next_batch, .loss = train_loss,
                            .loss_rows = train_loss_rows, .batch_rows = j.B,
                            .eval = validate, .meta = meta, .n_meta = nm, .rngs = {&j.rng}, .rng_names = {"data"},
                            .n_rngs = 1, .tokens_per_step = j.B * j.T};
    mg_train_cfg tc = ex_train_cfg_from(&o.c, &rf, "charlstm");
    mg_ctx_set_precision(j.vctx, tc.precision); /* validation follows --precision */
    char title[600];
    snprintf(title, sizeof title, "charlstm: %s, LSTM %lld x %lld, embedding %lld, %lld-char windows", label,
             (long long)cfg.layers, (long long)cfg.hidden, (long long)cfg.embd, (long long)o.c.block);
    tc.plot_title = title;

    char b1[32], b2[32];
    int64_t n_params = mg_params_numel(j.m.P);
    printf("charlstm: %s: %zu %s, vocabulary %d (%s), %zu train / %zu validation tokens\n", label, j.data.n,
           kind == TG_TOKENIZER_BYTE ? "bytes" : "characters", (int)j.vocab.size, tg_tokenizer_name(j.vocab.kind),
           j.data.n_train, tg_val_len(&j.data));
    printf("charlstm: LSTM %lld layer%s x %lld hidden, embedding %lld: %.2fM parameters (%s)\n", (long long)cfg.layers,
           cfg.layers == 1 ? "" : "s", (long long)cfg.hidden, (long long)cfg.embd, (double)n_params / 1e6,
           ex_fmt_bytes((double)n_params * 4, b1, sizeof b1));
    printf("charlstm: %lld steps of %lld x %lld characters, lr %g -> %g, %d thread%s%s; Ctrl-C saves and stops\n",
           (long long)o.c.steps, (long long)o.c.batch, (long long)o.c.block, (double)o.c.lr, (double)o.c.lr_min,
           mg_get_num_threads(), mg_get_num_threads() == 1 ? "" : "s",
           ex_precision_banner("charlstm", ex_precision_is_bf16(o.c.precision)));
    fflush(stdout);

    mg_train_result res;
    if (mg_train_run(&model, &tc, &res) != MG_OK) goto out;
    int stopped = ex_train_stopped("charlstm", &o.c, &res);
    if (stopped >= 0) {
        rc = stopped;
        goto out;
    }
    if (res.steps_run > 0 && res.seconds > 0) {
        double tps = (double)(res.steps_run * o.c.batch * o.c.block) / res.seconds;
        printf("\ncharlstm: done: step %lld, train loss %.4f, validation loss %.4f (%.3f bits/char), %s\n",
               (long long)res.step, (double)res.loss, (double)res.val_loss, (double)res.val_loss / log(2.0),
               mg_train_fmt_duration(res.seconds, b1, sizeof b1));
        printf("charlstm: speed %.0f characters/s, %.1f ms/step; memory: peak RSS %s, activations %s\n", tps,
               1000.0 * res.seconds / (double)res.steps_run, ex_fmt_bytes((double)ex_peak_rss(), b1, sizeof b1),
               ex_fmt_bytes((double)res.peak_arena, b2, sizeof b2));
    }
    if (o.c.sample_tokens > 0) {
        printf("\ncharlstm: a sample (temperature %g):\n", (double)o.c.temperature);
        fwrite(o.prompt, 1, strlen(o.prompt), stdout);
        mg_rng srng = mg_rng_make((uint64_t)o.c.seed + 1);
        int64_t made;
        if (generate(&j.m, &j.vocab, prompt, n_prompt, o.c.sample_tokens, o.c.temperature, 0, 1.0f, &srng, &made) !=
            MG_OK)
            goto out;
        printf("\n");
    }
    ex_train_print_files("charlstm", &rf);
    char prog_w[1024], ckpt_w[1024]; /* the program as it was started, and the path, as shell words */
    printf("charlstm: more text: %s sample --ckpt %s --prompt 'TEXT' --tokens 500\n",
           ex_shell_word(ex_invoked_as("charlstm"), prog_w, sizeof prog_w), ex_shell_word(rf.ckpt, ckpt_w, sizeof ckpt_w));
    rc = 0;
out:
    if (rc == 1) ex_fail(TRAIN);
    cl_model_free(&j.m);
    mg_ctx_free(j.vctx);
    free(j.ids);
    free(j.targets);
    tg_windows_free(&j.val);
    tg_data_free(&j.data);
    tg_vocab_free(&j.vocab);
    free(text);
    free(prompt);
    mg_st_close(saved);
    return rc;
}

/* ---- sample ---- */

#define SAMPLE "charlstm sample"

static int cmd_sample(int argc, char **argv) {
    const char *ckpt = CL_DEFAULT_CKPT, *prompt = "";
    int64_t tokens = 500;
    ex_sample_opts so = {.temperature = 0.8f, .top_p = 1.0f, .seed = -1};
    ex_opt table[8] = {
        EX_STR_OPT("ckpt", &ckpt, "checkpoint written by charlstm train"),
        EX_STR_OPT("prompt", &prompt, "text to continue (default: a newline)"),
        EX_INT_OPT("tokens", &tokens, 0, EX_MAX_GEN_TOKENS, "characters to generate"),
    };
    int n = 3;
    n += ex_sample_rows(&so, table + n);
    table[n++] = (ex_opt)EX_INT_OPT("seed", &so.seed, -1, INT64_MAX,
                                    "random seed (-1: from the clock; the seed used is printed at the end)");
    table[n++] = (ex_opt)EX_INT_OPT("threads", &so.threads, 0, EX_MAX_THREADS, "threads (0: all cores)");
    ex_parse_result pr =
        ex_parse(SAMPLE, "[--ckpt FILE] [--prompt TEXT] [options]", argc - 1, argv + 1, table, n, NULL, 0, NULL);
    if (pr != EX_PARSE_OK) return pr == EX_PARSE_HELP ? 0 : 2;
    mg_set_num_threads((int)so.threads);
    int64_t seed = ex_sample_seed(so.seed);
    cl_model m;
    tg_vocab v;
    if (cl_load(ckpt, &m, &v, NULL) != MG_OK) return ex_fail_load(SAMPLE, "charlstm train", ckpt);
    int rc = 1;
    int32_t *ids = NULL;
    int64_t np = 0, made = 0;
    if (encode_prompt(&v, prompt, &ids, &np) != MG_OK) goto out;
    if (prompt[0]) fwrite(prompt, 1, strlen(prompt), stdout);
    else printf("\n");
    mg_rng rng = mg_rng_make((uint64_t)seed);
    double t0 = mg_time();
    if (generate(&m, &v, ids, np, tokens, so.temperature, so.top_k, so.top_p, &rng, &made) != MG_OK) goto out;
    double dt = mg_time() - t0;
    printf("\n");
    fflush(stdout);
    fprintf(stderr, "charlstm: %lld characters in %.2fs: %.1f characters/s (seed %lld, temperature %g)\n",
            (long long)made, dt, dt > 0 ? (double)made / dt : 0.0, (long long)seed, (double)so.temperature);
    rc = 0;
out:
    if (rc) ex_fail(SAMPLE);
    free(ids);
    tg_vocab_free(&v);
    cl_model_free(&m);
    return rc;
}

/* ---- eval ---- */

#define EVAL "charlstm eval"

static int cmd_eval(int argc, char **argv) {
    const char *ckpt = CL_DEFAULT_CKPT, *data = NULL, *split = "val";
    int64_t batch = 32, threads = 0, max_file_mib = TG_MAX_FILE_MIB;
    ex_opt table[] = {
        EX_STR_OPT("ckpt", &ckpt, "checkpoint written by charlstm train"),
        EX_STR_OPT("data", &data, "text to score (default: the run's own corpus, or the King James Bible)"),
        EX_STR_OPT("split", &split, "val (the last 10%), train (the first 90%) or all"),
        EX_INT_OPT("batch", &batch, 1, EX_MAX_BATCH, "windows per forward pass"),
        EX_INT_OPT("threads", &threads, 0, EX_MAX_THREADS, "threads (0: all cores)"),
        EX_INT_OPT("max-file-mib", &max_file_mib, 1, TG_MAX_FILE_MIB_LIMIT, "largest text file read, in MiB"),
    };
    const char *files[64];
    int n_files = 0;
    ex_parse_result pr = ex_parse(EVAL, "[--ckpt FILE] [--data FILE] [--split val|train|all] [FILE...]", argc - 1,
                                  argv + 1, table, (int)(sizeof table / sizeof table[0]), files, 63, &n_files);
    if (pr != EX_PARSE_OK) return pr == EX_PARSE_HELP ? 0 : 2;
    if (strcmp(split, "val") && strcmp(split, "train") && strcmp(split, "all")) {
        fprintf(stderr, EVAL ": --split: '%s' is not val, train or all\n", split);
        return 2;
    }
    mg_set_num_threads((int)threads);
    cl_model m;
    tg_vocab v;
    int64_t block;
    if (cl_load(ckpt, &m, &v, &block) != MG_OK) return ex_fail_load(EVAL, "charlstm train", ckpt);
    int rc = 1;
    char *text = NULL, label[512];
    size_t len;
    tg_data d = {0};
    tg_windows w = {0};
    mg_ctx *ctx = mg_ctx_new(0);
    if (data) {
        memmove(files + 1, files, (size_t)n_files * sizeof *files);
        files[0] = data, n_files++;
    } else if (n_files == 0) {
        mg_st_file *f = NULL;
        if (mg_safetensors_open(ckpt, &f) == MG_OK) {
            const char *list = mg_st_meta_get(f, CL_META_DATA);
            if (list && list[0]) n_files = cl_split_list(list, files, 64);
            mg_st_close(f);
        }
    }
    if (!ctx || tg_read_corpus(files, n_files, max_file_mib, &text, &len, label, sizeof label) != MG_OK) goto out;
    if (tg_data_make(&d, &v, text, len, 1, label) != MG_OK) goto out;
    const int32_t *ids = !strcmp(split, "val") ? tg_val(&d) : d.ids;
    size_t n = !strcmp(split, "val") ? tg_val_len(&d) : !strcmp(split, "train") ? d.n_train : d.n;
    int64_t last = 0;
    if (tg_cover_windows(&w, n, block, &last) != MG_OK) goto out;
    tg_loss sum = {0};
    if (w.count == 0) {
        mg_set_error(MG_ERR_INVALID, "%s: the %s split has fewer than 2 tokens", label, split);
        goto out;
    }
    printf("charlstm eval: %s, %s split: %zu windows of %lld (each from a zero state)\n", label, split, w.count,
           (long long)block);
    fflush(stdout);
    double t0 = mg_time();
    /* batch by batch, so that the progress line moves */
    ex_eval_progress pg;
    ex_eval_progress_open(&pg, EVAL, (int64_t)w.count);
    mg_status st = MG_OK;
    for (size_t i = 0; i < w.count && st == MG_OK; i += (size_t)batch) {
        size_t k = w.count - i < (size_t)batch ? w.count - i : (size_t)batch;
        tg_windows part = {w.start + i, k, w.len};
        st = cl_eval_windows(&m, ctx, &v, ids, &part, i + k == w.count ? last : 0, batch, &sum);
        ex_eval_progress_update(&pg, (int64_t)(i + k), sum.nats / (double)(sum.tokens ? sum.tokens : 1), sum.tokens);
    }
    ex_eval_progress_close(&pg);
    if (st != MG_OK) goto out;
    if (sum.tokens == 0) {
        mg_set_error(MG_ERR_INVALID, "%s: the %s split has fewer than 2 tokens", label, split);
        goto out;
    }
    double nats = sum.nats / (double)sum.tokens;
    printf("charlstm eval: %lld characters: loss %.4f nats/char, %.4f bits/char, perplexity %.3f (%.1fs)\n",
           (long long)sum.tokens, nats,
           sum.nats / (double)sum.chars / log(2.0), exp(nats), mg_time() - t0);
    rc = 0;
out:
    if (rc) ex_fail(EVAL);
    mg_ctx_free(ctx);
    tg_windows_free(&w);
    tg_data_free(&d);
    free(text);
    tg_vocab_free(&v);
    cl_model_free(&m);
    return rc;
}

/* ---- main ---- */

static const ex_command commands[] = {
    {"train", "[--data FILE] [options] [FILE...]",
     "train an LSTM on text (default: the King James Bible), with a live progress line, checkpoints, a loss plot "
     "and a sample at the end; --resume continues a run",
     cmd_train},
    {"sample", "[--ckpt FILE] [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]",
     "stream text from a trained checkpoint, carrying the LSTM state from character to character", cmd_sample},
    {"eval", "[--ckpt FILE] [--data FILE] [--split val|train|all]",
     "loss of a checkpoint on a split, in nats and bits per character", cmd_eval},
    {"compare", "[--out PNG] [--x time|step] LOG=LABEL...",
     "the loss curves of training logs (charlstm's, textgen's) on one chart, against wall time or steps",
     cl_cmd_compare},
};

int main(int argc, char **argv) {
    return ex_command_main("charlstm", commands, (int)(sizeof commands / sizeof commands[0]), argc, argv);
}
