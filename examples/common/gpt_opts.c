/* The options, checks, remembered settings and run files the GPT example programs share. */
#include "gpt_opts.h"

#include "minigrad/checked.h"
#include "minigrad/checkpoint.h"
#include "minigrad/config.h"
#include "minigrad/kernels.h"

#include <assert.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define ROW_I(name, field, min, max, help) t[n++] = (ex_opt)EX_INT_OPT(name, &o->field, min, max, help)
#define ROW_F(name, field, lo, hi, help) t[n++] = (ex_opt)EX_FLOAT_OPT(name, &o->field, lo, hi, help)
#define ROW_S(name, field, help) t[n++] = (ex_opt)EX_STR_OPT(name, &o->field, help)
#define ROW_B(name, field, help) t[n++] = (ex_opt)EX_FLAG_OPT(name, &o->field, help)

int ex_train_rows_model(ex_train_opts *o, const ex_train_help *h, ex_opt *t) {
    int n = 0;
    ROW_S("out", out, h->out);
    ROW_B("resume", resume, "continue the run saved in --out (same data and settings unless given)");
    ROW_B("force", force, "start a new run even if --out already holds one (it is replaced)");
    ROW_I("steps", steps, 1, EX_MAX_STEPS, "optimizer steps of the whole run");
    ROW_I("batch", batch, 1, EX_MAX_BATCH, "windows per step");
    ROW_I("block-size", block, h->min_block > 0 ? h->min_block : 1, EX_MAX_BLOCK, h->block);
    ROW_I("n-embd", n_embd, 1, 65536, "model width");
    ROW_I("n-layer", n_layer, 0, 1024, "decoder blocks");
    ROW_I("n-head", n_head, 1, 65536, "attention heads (must divide --n-embd)");
    ROW_S("pos", pos, h->pos);
    ROW_S("pos-opts", pos_opts, "extra keys for the positional layer, k=v,k=v");
    ROW_F("dropout", dropout, 0, 0.99, "dropout probability");
    ROW_F("lr", lr, 0, 10, "peak learning rate (AdamW; above 0)");
    ROW_F("lr-min", lr_min, 0, 10, "final learning rate of the cosine schedule");
    ROW_I("warmup", warmup, 0, EX_MAX_STEPS, "linear warmup steps");
    ROW_F("weight-decay", weight_decay, 0, 10, "AdamW weight decay");
    ROW_F("clip", clip, 0, 1e9, "gradient-norm clipping (0: none)");
    return n;
}

int ex_train_rows_run(ex_train_opts *o, const ex_train_help *h, ex_opt *t) {
    int n = 0;
    ROW_I("eval-every", eval_every, 0, EX_MAX_STEPS, "validation loss every N steps (and at the end)");
    ROW_I("eval-windows", eval_windows, 0, 1 << 20, h->eval_windows);
    ROW_I("ckpt-every", ckpt_every, 0, EX_MAX_STEPS, "checkpoint every N steps (and at the end)");
    ROW_I("stop-after", stop_after, 0, EX_MAX_STEPS,
          "stop after N steps of this invocation, saving a checkpoint (0: run to --steps); continue "
          "with --resume");
    ROW_I("seed", seed, 0, INT64_MAX, h->seed);
    ROW_I("threads", threads, 0, EX_MAX_THREADS, "threads (0: all cores)");
    ROW_S("log", log, "JSON-lines log, one object per step (default OUT/log.jsonl)");
    ROW_I("sample-tokens", sample_tokens, 0, EX_MAX_GEN_TOKENS, h->sample_tokens);
    ROW_F("temperature", temperature, 0, 100, "temperature of that sample");
    ROW_S("precision", precision,
          "fp32 (default) or bf16: mixed precision, bf16 products with float32 weights, gradients "
          "and optimizer state");
    return n;
}

bool ex_train_check(const char *prog, const ex_train_opts *o, const ex_opt *table, int n_opts, const char *where,
                    int64_t max_batch_tokens) {
    if (!ex_check_ranges(prog, table, n_opts, where)) return false;
    if (!(o->lr > 0)) {
        fprintf(stderr, "%s: --lr must be positive\n", prog);
        return false;
    }
    mg_precision p;
    if (!ex_precision_from(prog, o->precision, &p)) return false;
    int64_t tokens;
    if (mg_ckd_mul_i64(&tokens, o->batch, o->block) || tokens > max_batch_tokens) {
        fprintf(stderr, "%s: --batch %lld x --block-size %lld is too large (at most %lld tokens a step)\n", prog,
                (long long)o->batch, (long long)o->block, (long long)max_batch_tokens);
        return false;
    }
    return true;
}

bool ex_precision_is_bf16(const char *name) {
    mg_precision p;
    return name && mg_precision_parse(name, &p) && p == MG_PRECISION_BF16;
}

const char *ex_precision_banner(const char *prog, bool bf16) {
    if (!bf16) return "";
    static bool warned;
    switch (mg_bf16_path_active()) {
    case MG_BF16_AMX:
        return ", bf16 mixed precision on AMX tiles";
    case MG_BF16_AVX512:
        return ", bf16 mixed precision on AVX512-BF16";
    case MG_BF16_EMULATED:
        break;
    }
    if (!warned) {
        /* asked for in the environment: said so, without detecting (which would try the other units) */
        const char *env = getenv("MINIGRAD_BF16_PATH");
        const char *why = env && !strcmp(env, "emulated") ? "MINIGRAD_BF16_PATH=emulated asks for it"
                          : mg_bf16_path_detected() == MG_BF16_EMULATED
                              ? "this CPU has no bf16 unit (AVX512-BF16 or AMX) this build can use"
                              : "the CPU's bf16 unit was switched off";
        fprintf(stderr, "%s: the bf16 products run in a software emulation, slower than --precision fp32: %s\n",
                prog, why);
    }
    warned = true;
    return ", bf16 mixed precision (emulated)";
}

bool ex_precision_from(const char *prog, const char *name, mg_precision *p) {
    *p = MG_PRECISION_FP32;
    if (!name || mg_precision_parse(name, p)) return true;
    fprintf(stderr, "%s: --precision '%s': expected fp32 or bf16\n", prog, name);
    return false;
}

mg_status ex_train_model_config(const ex_train_opts *o, int64_t vocab, mg_gpt_config *cfg) {
    *cfg = mg_gpt_config_default();
    /* the library would name its keys (n_embd, n_head); the user gave options */
    if (o->n_head > 0 && o->n_embd % o->n_head)
        return mg_set_error(MG_ERR_INVALID, "--n-embd %lld is not a multiple of --n-head %lld",
                            (long long)o->n_embd, (long long)o->n_head);
    mg_config *kv = mg_config_new("model options");
    if (!kv) return mg_set_error(MG_ERR_NOMEM, "out of memory");
    mg_config_setf(kv, "vocab_size", "%lld", (long long)vocab);
    mg_config_setf(kv, "block_size", "%lld", (long long)o->block);
    mg_config_setf(kv, "n_embd", "%lld", (long long)o->n_embd);
    mg_config_setf(kv, "n_layer", "%lld", (long long)o->n_layer);
    mg_config_setf(kv, "n_head", "%lld", (long long)o->n_head);
    mg_config_setf(kv, "dropout", "%.9g", (double)o->dropout);
    mg_config_set(kv, "pos", o->pos);
    mg_status st = o->pos_opts && o->pos_opts[0] ? mg_config_set(kv, "pos_opts", o->pos_opts) : MG_OK;
    if (st == MG_OK) st = mg_gpt_config_from(kv, cfg);
    mg_config_free(kv);
    return st;
}

/* ---- resuming ---- */

static bool file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

int ex_check_out_dir(const char *prog, const char *out, const char *ckpt, bool resume, bool force) {
    if (resume && !file_exists(ckpt)) {
        fprintf(stderr,
                "%s: --resume: %s holds no checkpoint (%s is missing); start without --resume\n",
                prog, out, ckpt);
        return 1;
    }
    if (!resume && file_exists(ckpt) && !force) {
        fprintf(stderr,
                "%s: %s already holds a run (%s): pass --resume to continue it, --force to start "
                "over (replacing it), or another --out\n",
                prog, out, ckpt);
        return 1;
    }
    return 0;
}

int ex_train_check_out(const char *prog, const ex_train_opts *o, const char *ckpt) {
    return ex_check_out_dir(prog, o->out, ckpt, o->resume, o->force);
}

mg_status ex_train_opts_from_ckpt(mg_st_file *f, ex_train_opts *o) {
    mg_gpt_config c;
    mg_status st = mg_gpt_config_from_file(f, &c);
    if (st != MG_OK) return st;
    o->block = c.block_size, o->n_embd = c.n_embd, o->n_layer = c.n_layer, o->n_head = c.n_head;
    o->dropout = c.dropout;
    o->pos = mg_st_meta_get(f, "pos");
    o->pos_opts = mg_st_meta_get(f, "pos_opts") ? mg_st_meta_get(f, "pos_opts") : "";
    return MG_OK;
}

/* The shared settings a checkpoint remembers, in the order they are written: these integers, the
 * program's extra integers, these floats, its extra floats. */
static const struct {
    const char *name;
    size_t off;
    bool is_int;
} shared[] = {{"steps", offsetof(ex_train_opts, steps), true},
              {"batch", offsetof(ex_train_opts, batch), true},
              {"warmup", offsetof(ex_train_opts, warmup), true},
              {"eval_every", offsetof(ex_train_opts, eval_every), true},
              {"eval_windows", offsetof(ex_train_opts, eval_windows), true},
              {"ckpt_every", offsetof(ex_train_opts, ckpt_every), true},
              {"seed", offsetof(ex_train_opts, seed), true},
              {"lr", offsetof(ex_train_opts, lr), false},
              {"lr_min", offsetof(ex_train_opts, lr_min), false},
              {"weight_decay", offsetof(ex_train_opts, weight_decay), false},
              {"clip", offsetof(ex_train_opts, clip), false}};
enum { N_SHARED = sizeof shared / sizeof shared[0] };

/* Lists every remembered setting, in order, as pointers into o and the extras. */
static int all_settings(ex_train_opts *o, const ex_setting *extra, int n_extra, ex_setting *all) {
    assert(N_SHARED + n_extra + 1 <= EX_MAX_SETTINGS); /* + 1: the precision, by name */
    int n = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < N_SHARED; i++)
            if (shared[i].is_int == (pass == 0)) {
                void *p = (char *)o + shared[i].off;
                all[n++] = shared[i].is_int ? (ex_setting){shared[i].name, p, NULL}
                                            : (ex_setting){shared[i].name, NULL, p};
            }
        for (int i = 0; i < n_extra; i++)
            if ((extra[i].i != NULL) == (pass == 0)) all[n++] = extra[i];
    }
    return n;
}

int ex_settings_to_meta(ex_settings_meta *s, const char *prefix, const ex_train_opts *o,
                        const ex_setting *extra, int n_extra, mg_st_meta *meta) {
    ex_train_opts copy = *o; /* all_settings hands out writable pointers; these are only read */
    ex_setting all[EX_MAX_SETTINGS];
    int n = all_settings(&copy, extra, n_extra, all);
    for (int i = 0; i < n; i++) {
        snprintf(s->key[i], sizeof s->key[i], "%s.%s", prefix, all[i].name);
        if (all[i].i)
            snprintf(s->val[i], sizeof s->val[i], "%lld", (long long)*all[i].i);
        else
            snprintf(s->val[i], sizeof s->val[i], "%.9g", (double)*all[i].f);
        meta[i] = (mg_st_meta){s->key[i], s->val[i]};
    }
    /* and the precision, by name (a resumed run keeps training as it started) */
    mg_precision p = MG_PRECISION_FP32;
    if (o->precision) mg_precision_parse(o->precision, &p); /* checked by ex_train_check */
    snprintf(s->key[n], sizeof s->key[n], "%s.precision", prefix);
    snprintf(s->val[n], sizeof s->val[n], "%s", mg_precision_name(p));
    meta[n] = (mg_st_meta){s->key[n], s->val[n]};
    return n + 1;
}

mg_status ex_settings_from_ckpt(mg_st_file *f, const char *prefix, ex_train_opts *o,
                                const ex_setting *extra, int n_extra) {
    ex_setting all[EX_MAX_SETTINGS];
    int n = all_settings(o, extra, n_extra, all);
    mg_status st = MG_OK;
    char key[64];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s.%s", prefix, all[i].name);
        const char *v = mg_st_meta_get(f, key);
        if (!v) continue;
        if (!all[i].i)
            *all[i].f = strtof(v, NULL);
        else if (st == MG_OK)
            st = mg_meta_get_i64(f, key, all[i].i);
    }
    snprintf(key, sizeof key, "%s.precision", prefix);
    const char *v = mg_st_meta_get(f, key); /* absent in runs saved before it was remembered: fp32 */
    mg_precision p;
    if (v && st == MG_OK && !mg_precision_parse(v, &p))
        st = mg_set_error(MG_ERR_FORMAT, "metadata '%s' is '%s': expected fp32 or bf16", key, v);
    if (v && st == MG_OK) o->precision = mg_precision_name(p);
    return st;
}

/* ---- the run ---- */

void ex_run_files_make(ex_run_files *f, const ex_train_opts *o) {
    snprintf(f->ckpt, sizeof f->ckpt, "%s/model.safetensors", o->out);
    snprintf(f->plot, sizeof f->plot, "%s/loss.png", o->out);
    if (o->log)
        snprintf(f->log, sizeof f->log, "%s", o->log);
    else
        snprintf(f->log, sizeof f->log, "%s/log.jsonl", o->out);
}

mg_train_cfg ex_train_cfg_from(const ex_train_opts *o, const ex_run_files *f, const char *prog) {
    mg_train_cfg tc = mg_train_defaults();
    tc.steps = o->steps, tc.warmup = o->warmup, tc.lr = o->lr, tc.lr_min = o->lr_min;
    tc.weight_decay = o->weight_decay, tc.clip = o->clip, tc.eval_every = o->eval_every;
    tc.ckpt_every = o->ckpt_every, tc.seed = (uint64_t)o->seed, tc.ckpt = f->ckpt,
    tc.log_path = f->log;
    tc.plot_path = f->plot, tc.plot_ylabel = "loss (nats/token)", tc.resume = o->resume;
    tc.stop_after = o->stop_after, tc.prog = prog;
    mg_precision p = MG_PRECISION_FP32;
    if (o->precision) mg_precision_parse(o->precision, &p); /* checked by ex_train_check */
    tc.precision = p;
    return tc;
}

int ex_interrupted_status(const mg_train_result *res) {
    return 128 + (res->stop_signal > 0 ? res->stop_signal : SIGINT);
}

int ex_train_stopped(const char *prog, const ex_train_opts *o, const mg_train_result *res) {
    if (!res->interrupted && !res->stopped) return -1;
    char cmd[1024], out[1024];
    /* the program as it was started (build/examples/textgen/textgen, say), not only its name */
    printf("%s: continue with: %s train --resume --out %s\n", prog, ex_shell_word(ex_invoked_as(prog), cmd, sizeof cmd),
           ex_shell_word(o->out, out, sizeof out));
    return res->interrupted ? ex_interrupted_status(res) : 0;
}

void ex_train_print_files(const char *prog, const ex_run_files *f) {
    printf("\n%s: checkpoint %s (training state beside it)\n", prog, f->ckpt);
    printf("%s: loss curve %s, log %s\n", prog, f->plot, f->log);
}

/* ---- sampling ---- */

int ex_sample_rows(ex_sample_opts *o, ex_opt *t) {
    int n = 0;
    ROW_F("temperature", temperature, 0, 100, "sharpness: below 1 more conservative, 0 always the most likely");
    ROW_I("top-k", top_k, 0, INT32_MAX, "sample among the K most likely tokens only (0: all)");
    ROW_F("top-p", top_p, 0, 1, "sample among the most likely tokens whose probability reaches P (1: all)");
    return n;
}

int64_t ex_sample_seed(int64_t seed) {
    return seed >= 0 ? seed : (int64_t)(((uint64_t)time(NULL) * 2654435761u) & 0x7FFFFFFF);
}
