/* textgen train: a GPT on a text corpus, with the shared training loop (examples/common). */
#include "cli.h"
#include "commands.h"
#include "progress.h"
#include "trainer.h"

#include "minigrad/checkpoint.h"
#include "minigrad/config.h"
#include "minigrad/params.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PROG "textgen train"

typedef struct {
    const char *data, *tokenizer, *out, *log, *pos, *pos_opts, *prompt;
    int64_t steps, batch, block, n_embd, n_layer, n_head, warmup, eval_every, eval_windows, ckpt_every;
    int64_t seed, threads, sample_tokens, stop_after;
    float lr, lr_min, weight_decay, clip, dropout, temperature;
    bool resume, force;
} train_opts;

/* Options that the checkpoint remembers, so `--resume` needs nothing but --out. Stored under
 * "textgen.<name>"; the model sizes come from the model config keys. */
#define SAVED_INTS(X) X(steps) X(batch) X(warmup) X(eval_every) X(eval_windows) X(ckpt_every) X(seed)
#define SAVED_FLOATS(X) X(lr) X(lr_min) X(weight_decay) X(clip)

static int make_opts(train_opts *o, ex_opt *t) {
    int n = 0;
#define OPT(name, type, field, help) t[n++] = (ex_opt){name, type, &o->field, help}
    OPT("data", EX_STR, data, "text file to learn (more files may follow the options; default: the King James "
                              "Bible from bible-kjv)");
    OPT("tokenizer", EX_STR, tokenizer, "char (one id per Unicode character of the text) or byte (256 ids)");
    OPT("out", EX_STR, out, "directory for model.safetensors, its .state file, log.jsonl and loss.png");
    OPT("resume", EX_FLAG, resume, "continue the run saved in --out (same data and settings unless given)");
    OPT("force", EX_FLAG, force, "start a new run even if --out already holds one (it is replaced)");
    OPT("steps", EX_INT, steps, "optimizer steps of the whole run");
    OPT("batch", EX_INT, batch, "windows per step");
    OPT("block-size", EX_INT, block, "context length in tokens");
    OPT("n-embd", EX_INT, n_embd, "model width");
    OPT("n-layer", EX_INT, n_layer, "decoder blocks");
    OPT("n-head", EX_INT, n_head, "attention heads (must divide --n-embd)");
    OPT("pos", EX_STR, pos, "positional scheme: learned, sinusoidal, learned+sinusoidal, rope, none, or a plugin's "
                            "name such as alibi");
    OPT("pos-opts", EX_STR, pos_opts, "extra keys for the positional layer, k=v,k=v");
    OPT("dropout", EX_FLOAT, dropout, "dropout probability");
    OPT("lr", EX_FLOAT, lr, "peak learning rate (AdamW)");
    OPT("lr-min", EX_FLOAT, lr_min, "final learning rate of the cosine schedule");
    OPT("warmup", EX_INT, warmup, "linear warmup steps");
    OPT("weight-decay", EX_FLOAT, weight_decay, "AdamW weight decay");
    OPT("clip", EX_FLOAT, clip, "gradient-norm clipping (0: none)");
    OPT("eval-every", EX_INT, eval_every, "validation loss every N steps (and at the end)");
    OPT("eval-windows", EX_INT, eval_windows, "fixed validation windows the loss is averaged over");
    OPT("ckpt-every", EX_INT, ckpt_every, "checkpoint every N steps (and at the end)");
    OPT("stop-after", EX_INT, stop_after, "stop after N steps of this invocation, saving a checkpoint "
                                          "(0: run to --steps); continue with --resume");
    OPT("seed", EX_INT, seed, "seed of the initial weights, the batches and dropout");
    OPT("threads", EX_INT, threads, "threads (0: all cores)");
    OPT("log", EX_STR, log, "JSON-lines log, one object per step (default OUT/log.jsonl)");
    OPT("sample-tokens", EX_INT, sample_tokens, "characters of the sample printed at the end (0: none)");
    OPT("temperature", EX_FLOAT, temperature, "temperature of that sample");
    OPT("prompt", EX_STR, prompt, "prompt of that sample (default: a newline)");
#undef OPT
    return n;
}

static const char *const USAGE = "[--data FILE] [options] [FILE...]\n\n"
                                 "Trains a character-level GPT. Without --data it learns the King James Bible "
                                 "(Debian package bible-kjv).\nThe defaults finish in about 5 minutes on 2 cores.";

static train_opts defaults(void) {
    return (train_opts){.tokenizer = "char", .out = TEXTGEN_DEFAULT_OUT, .pos = "learned",
                        .steps = 1400, .batch = 32, .block = 128, .n_embd = 256, .n_layer = 3, .n_head = 4,
                        .warmup = 50, .eval_every = 100, .eval_windows = 64, .ckpt_every = 250, .seed = 1,
                        .sample_tokens = 400, .lr = 2e-3f, .lr_min = 1e-4f, .weight_decay = 0.1f, .clip = 1.0f,
                        .temperature = 0.8f};
}

/* ---- what the trainer calls ---- */

typedef struct {
    mg_text_data data;
    mg_text_vocab vocab;
    mg_text_windows val;
    mg_text_eval eval;
    mg_rng rng;
    int64_t B, T;
    mg_status eval_status;
    int32_t *prompt; /* of the sample at the end */
    int64_t n_prompt;
} job;

static void next_batch(void *user, int32_t *ids, int32_t *targets) {
    job *j = user;
    mg_text_batch(&j->data, j->B, j->T, &j->rng, ids, targets);
}

static float validate(void *user, mg_gpt *g) {
    job *j = user;
    mg_text_loss sum = {0};
    if (j->val.count == 0) return NAN;
    mg_status st = mg_text_eval_windows(&j->eval, g, &j->vocab, mg_text_val(&j->data), &j->val, 0, &sum);
    if (st != MG_OK) {
        if (j->eval_status == MG_OK) mg_log(MG_LOG_WARN, PROG ": validation failed: %s", mg_last_error());
        j->eval_status = st;
        return NAN;
    }
    return (float)(sum.nats / (double)sum.tokens);
}

/* ---- option checks ---- */

static bool check_opts(const train_opts *o) {
    struct {
        const char *name;
        int64_t v, min;
    } ints[] = {{"steps", o->steps, 1},           {"batch", o->batch, 1},           {"block-size", o->block, 1},
                {"n-embd", o->n_embd, 1},         {"n-layer", o->n_layer, 0},       {"n-head", o->n_head, 1},
                {"warmup", o->warmup, 0},         {"eval-every", o->eval_every, 0}, {"eval-windows", o->eval_windows, 0},
                {"ckpt-every", o->ckpt_every, 0}, {"threads", o->threads, 0},       {"sample-tokens", o->sample_tokens, 0},
                {"stop-after", o->stop_after, 0}, {"seed", o->seed, 0}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].v < ints[i].min) {
            fprintf(stderr, PROG ": --%s must be at least %lld, got %lld\n", ints[i].name, (long long)ints[i].min,
                    (long long)ints[i].v);
            return false;
        }
    if (o->batch * o->block > (int64_t)1 << 28) {
        fprintf(stderr, PROG ": --batch %lld x --block-size %lld is too large\n", (long long)o->batch, (long long)o->block);
        return false;
    }
    struct {
        const char *name;
        float v, min, max;
    } fl[] = {{"lr", o->lr, 0, 10},     {"lr-min", o->lr_min, 0, 10},      {"weight-decay", o->weight_decay, 0, 10},
              {"clip", o->clip, 0, 1e9f}, {"dropout", o->dropout, 0, 0.99f}, {"temperature", o->temperature, 0, 100}};
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++)
        if (!(fl[i].v >= fl[i].min && fl[i].v <= fl[i].max)) {
            fprintf(stderr, PROG ": --%s must lie in [%g, %g], got %g\n", fl[i].name, (double)fl[i].min,
                    (double)fl[i].max, (double)fl[i].v);
            return false;
        }
    if (!(o->lr > 0)) {
        fprintf(stderr, PROG ": --lr must be positive\n");
        return false;
    }
    return true;
}

/* The model config from the options, checked by the library (its messages name the key). */
static mg_status model_config(const train_opts *o, int64_t vocab, mg_gpt_config *cfg) {
    *cfg = mg_gpt_config_default();
    mg_config *kv = mg_config_new("textgen train options");
    if (!kv) return mg_set_error(MG_ERR_NOMEM, "out of memory");
    mg_config_setf(kv, "vocab_size", "%lld", (long long)vocab);
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
    mg_gpt_config c;
    if ((st = mg_gpt_config_from_file(*f, &c)) != MG_OK) return st;
    o->block = c.block_size, o->n_embd = c.n_embd, o->n_layer = c.n_layer, o->n_head = c.n_head;
    o->dropout = c.dropout;
    o->pos = mg_st_meta_get(*f, "pos");
    o->pos_opts = mg_st_meta_get(*f, "pos_opts") ? mg_st_meta_get(*f, "pos_opts") : "";
    const char *tok = mg_st_meta_get(*f, MG_TEXT_META_TOKENIZER);
    o->tokenizer = tok ? tok : "char";
    o->data = mg_st_meta_get(*f, TEXTGEN_META_DATA);
    char key[64];
#define GET_INT(name)                                                                                                  \
    snprintf(key, sizeof key, "textgen.%s", #name);                                                                    \
    if (st == MG_OK && mg_st_meta_get(*f, key)) st = mg_meta_get_i64(*f, key, &o->name);
#define GET_FLOAT(name)                                                                                                \
    snprintf(key, sizeof key, "textgen.%s", #name);                                                                    \
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

/* ---- the command ---- */

int textgen_cmd_train(int argc, char **argv) {
    train_opts o = defaults();
    ex_opt table[40];
    int n_opts = make_opts(&o, table);
    const char *files[64];
    int n_files = 0;
    ex_parse_result pr = ex_parse(PROG, USAGE, argc - 1, argv + 1, table, n_opts, files, 64, &n_files);
    if (pr != EX_PARSE_OK) return pr == EX_PARSE_HELP ? 0 : 2;

    char ckpt[4096], state[4200], logp[4096], plot[4096];
    snprintf(ckpt, sizeof ckpt, "%s/model.safetensors", o.out);
    ex_state_path(ckpt, state, sizeof state);
    snprintf(plot, sizeof plot, "%s/loss.png", o.out);

    int rc = 1;
    mg_st_file *saved = NULL;
    const char **saved_files = NULL;
    char *text = NULL;
    job j = {0};
    mg_gpt *g = NULL;
    if (o.resume) {
        if (!file_exists(ckpt)) {
            fprintf(stderr, PROG ": --resume: %s holds no checkpoint (%s is missing); start without --resume\n", o.out,
                    ckpt);
            return 1;
        }
        if (load_saved(ckpt, &o, &saved) != MG_OK) goto out;
        /* what is given on the command line wins over what the run saved */
        int n_given = n_files;
        if (ex_parse(PROG, USAGE, argc - 1, argv + 1, table, n_opts, files, 64, &n_files) != EX_PARSE_OK) {
            rc = 2;
            goto out;
        }
        if (n_given == 0 && o.data && o.data[0]) {
            int k = textgen_split_list(o.data, &saved_files);
            if (k < 0 || k > 64) {
                mg_set_error(MG_ERR_FORMAT, "%s: metadata '%s' lists %d files", ckpt, TEXTGEN_META_DATA, k);
                goto out;
            }
            for (int i = 0; i < k; i++) files[i] = saved_files[i];
            n_files = k;
            o.data = NULL;
        } else if (o.data && !o.data[0]) {
            o.data = NULL; /* the default corpus */
        }
    } else if (file_exists(ckpt) && !o.force) {
        fprintf(stderr, PROG ": %s already holds a run (%s): pass --resume to continue it, --force to start over "
                        "(replacing it), or another --out\n", o.out, ckpt);
        return 1;
    }
    if (!o.pos_opts) o.pos_opts = "";
    if (!o.prompt) o.prompt = "";
    if (!check_opts(&o)) {
        rc = 2;
        goto out;
    }
    if (o.data) {
        if (n_files == 64) {
            fprintf(stderr, PROG ": at most 64 text files\n");
            rc = 2;
            goto out;
        }
        memmove(files + 1, files, (size_t)n_files * sizeof *files);
        files[0] = o.data, n_files++;
    }
    mg_tokenizer_kind kind;
    if (mg_tokenizer_parse(o.tokenizer, &kind) != MG_OK) {
        fprintf(stderr, PROG ": --tokenizer: %s\n", mg_last_error());
        rc = 2;
        goto out;
    }
    if (o.log) snprintf(logp, sizeof logp, "%s", o.log);
    else snprintf(logp, sizeof logp, "%s/log.jsonl", o.out);
    mg_set_num_threads((int)o.threads);

    /* the text, its vocabulary (the saved one when resuming), the split */
    size_t len;
    char label[512];
    if (n_files == 0)
        printf("textgen: no --data given: learning the King James Bible (bible-kjv)\n"), fflush(stdout);
    if (textgen_read_corpus(files, n_files, &text, &len, label, sizeof label) != MG_OK) goto out;
    mg_status st = saved ? mg_text_vocab_from_meta(&j.vocab, mg_st_meta_get(saved, MG_TEXT_META_TOKENIZER),
                                                   mg_st_meta_get(saved, MG_TEXT_META_CHARS),
                                                   strtoll(mg_st_meta_get(saved, "vocab_size"), NULL, 10), ckpt)
                         : mg_text_vocab_build(&j.vocab, kind, text, len, label);
    if (st == MG_OK && j.vocab.kind != kind)
        st = mg_set_error(MG_ERR_INVALID, "%s: the run uses the %s tokenizer, not --tokenizer %s", ckpt,
                          mg_tokenizer_name(j.vocab.kind), mg_tokenizer_name(kind));
    if (st == MG_OK) st = mg_text_data_make(&j.data, &j.vocab, text, len, o.block, label);
    if (st != MG_OK) goto out;
    /* the prompt of the final sample is checked now rather than after the whole run */
    size_t np = 0, pl = strlen(o.prompt);
    int32_t *prompt = malloc((pl + 1) * sizeof *prompt);
    if (!prompt) goto out;
    if (pl == 0) np = 1, prompt[0] = mg_text_vocab_id(&j.vocab, '\n') >= 0 ? mg_text_vocab_id(&j.vocab, '\n') : 0;
    else if (mg_text_encode(&j.vocab, o.prompt, pl, prompt, &np, "--prompt") != MG_OK) {
        free(prompt);
        goto out;
    }
    j.prompt = prompt, j.n_prompt = (int64_t)np;
    free(text);
    text = NULL;
    if (mg_text_val_windows(&j.val, mg_text_val_len(&j.data), o.block, (size_t)o.eval_windows) != MG_OK ||
        mg_text_eval_init(&j.eval, o.batch, j.val.len > 0 ? j.val.len : 1) != MG_OK)
        goto out;
    j.B = o.batch, j.T = o.block;
    j.rng = mg_rng_make((uint64_t)o.seed * 0x9E3779B97F4A7C15ull + 0xDA7A);

    /* the model */
    mg_gpt_config cfg;
    if (model_config(&o, j.vocab.size, &cfg) != MG_OK) {
        fprintf(stderr, PROG ": %s\n", mg_last_error());
        rc = 2;
        goto out;
    }
    mg_rng init = mg_rng_make((uint64_t)o.seed);
    if (mg_gpt_new(&cfg, &init, &g) != MG_OK) goto out;
    if (mg_text_mkdirs(o.out) != MG_OK) goto out;

    /* what the checkpoint remembers */
    mg_st_meta meta[32];
    int nm = mg_text_vocab_meta(&j.vocab, meta);
    char datalist[8192] = "", ibuf[16][32], keys[16][40];
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
    int nk = 0;
#define PUT_INT(name)                                                                                                  \
    snprintf(keys[nk], sizeof keys[nk], "textgen.%s", #name);                                                          \
    snprintf(ibuf[nk], sizeof ibuf[nk], "%lld", (long long)o.name);                                                    \
    meta[nm++] = (mg_st_meta){keys[nk], ibuf[nk]}, nk++;
#define PUT_FLOAT(name)                                                                                                \
    snprintf(keys[nk], sizeof keys[nk], "textgen.%s", #name);                                                          \
    snprintf(ibuf[nk], sizeof ibuf[nk], "%.9g", (double)o.name);                                                       \
    meta[nm++] = (mg_st_meta){keys[nk], ibuf[nk]}, nk++;
    SAVED_INTS(PUT_INT)
    SAVED_FLOATS(PUT_FLOAT)
#undef PUT_INT
#undef PUT_FLOAT

    ex_task task = {.user = &j, .B = o.batch, .T = o.block, .next_batch = next_batch, .eval = validate,
                    .rngs = {&j.rng}, .rng_names = {"data"}, .n_rngs = 1, .meta = meta, .n_meta = nm};
    ex_train_cfg tc = ex_train_defaults();
    tc.steps = o.steps, tc.warmup = o.warmup, tc.lr = o.lr, tc.lr_min = o.lr_min, tc.weight_decay = o.weight_decay;
    tc.clip = o.clip, tc.eval_every = o.eval_every, tc.ckpt_every = o.ckpt_every, tc.seed = (uint64_t)o.seed;
    tc.ckpt = ckpt, tc.log_path = logp, tc.plot_path = plot, tc.resume = o.resume, tc.stop_after = o.stop_after;
    tc.prog = "textgen";
    char title[600];
    snprintf(title, sizeof title, "textgen: %s, %lld x %lld GPT, context %lld", label, (long long)cfg.n_layer,
             (long long)cfg.n_embd, (long long)cfg.block_size);
    tc.plot_title = title;

    char b1[32], b2[32], b3[32];
    int64_t n_params = mg_params_numel(mg_gpt_params(g));
    printf("textgen: %s: %zu %s, vocabulary %d (%s), %zu train / %zu validation tokens\n", label, j.data.n,
           kind == MG_TOKENIZER_BYTE ? "bytes" : "characters", (int)j.vocab.size, mg_tokenizer_name(j.vocab.kind),
           j.data.n_train, mg_text_val_len(&j.data));
    printf("textgen: GPT %lld layers x %lld wide, %lld heads, context %lld, pos %s: %.2fM parameters (%s)\n",
           (long long)cfg.n_layer, (long long)cfg.n_embd, (long long)cfg.n_head, (long long)cfg.block_size, cfg.pos,
           (double)n_params / 1e6, ex_fmt_bytes((double)n_params * 4, b1, sizeof b1));
    printf("textgen: %lld steps of %lld x %lld tokens, lr %g -> %g, %d thread%s; Ctrl-C saves and stops\n",
           (long long)o.steps, (long long)o.batch, (long long)o.block, (double)o.lr, (double)o.lr_min,
           mg_get_num_threads(), mg_get_num_threads() == 1 ? "" : "s");
    fflush(stdout);

    ex_train_result res;
    st = ex_train(g, &tc, &task, &res);
    if (st != MG_OK) goto out;
    if (res.interrupted) {
        rc = 130;
        goto out;
    }
    if (res.step < o.steps) { /* --stop-after */
        printf("textgen: continue with: textgen train --resume --out %s\n", o.out);
        rc = 0;
        goto out;
    }
    if (res.steps_run > 0 && res.seconds > 0) {
        /* over the whole run, validation and checkpoints included: what the wall clock says */
        double tps = (double)(res.steps_run * o.batch * o.block) / res.seconds;
        size_t slabs = (size_t)n_params * 4 * 4; /* weights, gradients, AdamW m and v */
        printf("\ntextgen: done: step %lld, train loss %.4f, validation loss %.4f (%.3f bits/token), %s\n",
               (long long)res.step, (double)res.loss, (double)res.val_loss, (double)res.val_loss / log(2.0),
               ex_fmt_duration(res.seconds, b1, sizeof b1));
        printf("textgen: speed %.0f tokens/s, %.1f ms/step (%lld steps in %.1fs; the last steps alone: %.0f tokens/s)\n",
               tps, 1000.0 * res.seconds / (double)res.steps_run, (long long)res.steps_run, res.seconds,
               res.tokens_per_s);
        printf("textgen: memory: peak RSS %s, activations %s, parameters + gradients + AdamW %s\n",
               ex_fmt_bytes((double)ex_peak_rss(), b1, sizeof b1),
               ex_fmt_bytes((double)res.peak_arena, b2, sizeof b2), ex_fmt_bytes((double)slabs, b3, sizeof b3));
    }
    if (o.sample_tokens > 0) {
        printf("\ntextgen: a sample (temperature %g):\n", (double)o.temperature);
        fwrite(o.prompt, 1, strlen(o.prompt), stdout);
        mg_rng srng = mg_rng_make((uint64_t)o.seed + 1);
        mg_gen_opts go = {.max_new_tokens = o.sample_tokens, .temperature = o.temperature,
                          .on_token = textgen_print_token, .user = &j.vocab};
        if (mg_gpt_generate(g, j.prompt, j.n_prompt, &go, &srng, NULL, NULL) != MG_OK) goto out;
        printf("\n");
    }
    printf("\ntextgen: checkpoint %s (training state beside it)\n", ckpt);
    printf("textgen: loss curve %s, log %s\n", plot, logp);
    printf("textgen: more text: textgen sample --ckpt %s --prompt 'TEXT' --tokens 500\n", ckpt);
    rc = 0;
out:
    if (rc == 1) ex_fail(PROG);
    mg_gpt_free(g);
    mg_text_eval_free(&j.eval);
    mg_text_windows_free(&j.val);
    mg_text_data_free(&j.data);
    mg_text_vocab_free(&j.vocab);
    free(text);
    free(j.prompt);
    free(saved_files);
    mg_st_close(saved);
    return rc;
}
