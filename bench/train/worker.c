/* The minigrad worker: one configuration at one thread count, driven over stdin / stdout by the
 * bench_train driver (protocol in bench_train.h).
 *
 * A training step is what examples/common/trainer.c runs: reset the arena, loss = GPT forward +
 * mean cross-entropy, zero the gradients, backward, clip the global norm to 1, AdamW step. The
 * batches are random tokens made once (data loading is not what is measured). */
#include "bench_train.h"

#include "minigrad/gpt.h"
#include "minigrad/kernels.h"
#include "minigrad/minigrad.h"
#include "minigrad/op.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct worker {
    const bt_config *c;
    mg_gpt *g;
    mg_optim *opt;
    mg_ctx *ctx;
    int32_t *ids, *tgt; /* N_BATCHES batches of (B, T) */
    int32_t prompt[BT_PROMPT_LEN];
    int64_t step;
    bool bf16; /* generation: mg_gen_opts.precision bf16 (bf16 weights, kept for the whole run) */
    char err[1024];
} worker;

enum { N_BATCHES = 4 };

static void on_ctx_error(mg_ctx *ctx, const char *msg, void *user) {
    (void)ctx;
    worker *w = user;
    if (!w->err[0]) snprintf(w->err, sizeof w->err, "%s", msg);
}

/* The message as a JSON string body: quotes, backslashes and control bytes escaped. */
__attribute__((format(printf, 1, 2))) static void reply_error(const char *fmt, ...) {
    char msg[1200], esc[2400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t j = 0;
    for (const char *s = msg; *s && j + 7 < sizeof esc; s++) {
        const unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') esc[j++] = '\\', esc[j++] = (char)ch;
        else if (ch < 0x20) j += (size_t)snprintf(esc + j, sizeof esc - j, "\\u%04x", ch);
        else esc[j++] = (char)ch;
    }
    esc[j] = 0;
    printf("{\"error\":\"%s\"}\n", esc);
    fflush(stdout);
}

static void train_steps(worker *w, long k) {
    mg_params *P = mg_gpt_params(w->g);
    const int64_t BT = w->c->B * w->c->T;
    double *times = malloc((size_t)(k > 0 ? k : 1) * sizeof *times);
    if (!times) {
        reply_error("out of memory");
        return;
    }
    float loss = NAN;
    for (long i = 0; i < k; i++) {
        const int64_t b = w->step % N_BATCHES;
        const double t0 = mg_time();
        mg_ctx_reset(w->ctx);
        mg_tensor *x = mg_tensor_wrap(w->ctx, MG_I32, 2, (int64_t[]){w->c->B, w->c->T}, w->ids + b * BT);
        mg_tensor *y = mg_tensor_wrap(w->ctx, MG_I32, 2, (int64_t[]){w->c->B, w->c->T}, w->tgt + b * BT);
        mg_tensor *l = mg_gpt_loss(w->g, w->ctx, x, y, NULL);
        if (mg_ctx_ok(w->ctx)) {
            mg_params_zero_grad(P);
            mg_backward(w->ctx, l);
        }
        if (!mg_ctx_ok(w->ctx)) {
            free(times);
            reply_error("minigrad training step failed: %s", w->err[0] ? w->err : mg_ctx_error(w->ctx));
            return;
        }
        mg_clip_grad_norm(P, 1.0f);
        mg_optim_step(w->opt, 3e-4f);
        loss = l->data[0];
        times[i] = mg_time() - t0;
        w->step++;
    }
    printf("{\"times\":[");
    for (long i = 0; i < k; i++) printf("%s%.9g", i ? "," : "", times[i]);
    printf("],\"loss\":%.9g}\n", isfinite(loss) ? (double)loss : -1.0);
    fflush(stdout);
    free(times);
}

static void generate(worker *w, long n, bool cache) {
    mg_gen_opts o = {.max_new_tokens = n, .temperature = 0.0f, .no_cache = !cache,
                     .precision = w->bf16 ? MG_PRECISION_BF16 : MG_PRECISION_FP32};
    int32_t *out = malloc((size_t)(n > 0 ? n : 1) * sizeof *out);
    int64_t made = 0;
    if (!out) {
        reply_error("out of memory");
        return;
    }
    const double t0 = mg_time();
    const mg_status st = mg_gpt_generate(w->g, w->prompt, BT_PROMPT_LEN, &o, NULL, out, &made);
    const double t = mg_time() - t0;
    if (st != MG_OK) reply_error("minigrad generation failed: %s", mg_last_error());
    else {
        printf("{\"seconds\":%.9g,\"tokens\":%lld,\"last\":[", t, (long long)made);
        for (int64_t i = made > 4 ? made - 4 : 0; i < made; i++)
            printf("%d%s", out[i], i + 1 < made ? "," : "");
        printf("]}\n");
        fflush(stdout);
    }
    free(out);
}

int bt_worker_main(const char *mode, const bt_config *c, int threads, uint64_t seed, bool bf16) {
    const bool train = strcmp(mode, "train") == 0;
    if (!train && strcmp(mode, "gen") != 0) {
        reply_error("unknown worker mode '%s' (train or gen)", mode);
        return 2;
    }
    const int used = mg_set_num_threads(threads);
    const double base_rss = bt_rss_mb();
    worker w = {.c = c, .bf16 = bf16};
    mg_gpt_config gc = mg_gpt_config_default();
    gc.vocab_size = c->V, gc.block_size = c->T, gc.n_layer = c->L, gc.n_head = c->H, gc.n_embd = c->C;
    snprintf(gc.pos, sizeof gc.pos, "learned");
    gc.pos_opts[0] = 0;
    gc.dropout = 0.0f, gc.causal = true, gc.gelu = MG_GELU_TANH, gc.emb_scale = 1.0f;
    gc.tied_head = true, gc.head_bias = false, gc.init_std = 0.02f;
    mg_rng rng = mg_rng_make(seed);
    if (mg_gpt_new(&gc, &rng, &w.g) != MG_OK) {
        reply_error("mg_gpt_new: %s", mg_last_error());
        return 1;
    }
    const int64_t BT = c->B * c->T;
    if (train) {
        w.opt = mg_adamw_new(mg_gpt_params(w.g), mg_adamw_defaults());
        w.ctx = mg_ctx_new(0);
        w.ids = malloc((size_t)(N_BATCHES * BT) * sizeof *w.ids);
        w.tgt = malloc((size_t)(N_BATCHES * BT) * sizeof *w.tgt);
        if (!w.opt || !w.ctx || !w.ids || !w.tgt) {
            reply_error("out of memory setting up training");
            return 1;
        }
        mg_ctx_set_error_handler(w.ctx, on_ctx_error, &w);
        if (bf16) mg_ctx_set_precision(w.ctx, MG_PRECISION_BF16);
        for (int64_t i = 0; i < N_BATCHES * BT; i++) {
            w.ids[i] = (int32_t)mg_rng_below(&rng, (uint32_t)c->V);
            w.tgt[i] = (int32_t)mg_rng_below(&rng, (uint32_t)c->V);
        }
    } else {
        for (int i = 0; i < BT_PROMPT_LEN; i++) w.prompt[i] = (int32_t)mg_rng_below(&rng, (uint32_t)c->V);
    }
    mg_params *P = mg_gpt_params(w.g);
    /* values, gradients and (training) the two AdamW moments: one slab each */
    const double state_mb = (double)mg_params_slab_size(P) * sizeof(float) * (train ? 4 : 1) / 1048576.0;
    char isa[48];
    snprintf(isa, sizeof isa, "%s%s%s", mg_isa_name(mg_isa_active()), bf16 ? " bf16 " : "",
             bf16 ? mg_bf16_path_name(mg_bf16_path_active()) : "");
    printf("{\"ready\":true,\"impl\":\"minigrad\",\"n_params\":%lld,\"base_rss_mb\":%.3f,\"threads\":%d,"
           "\"isa\":\"%s\",\"state_mb\":%.3f}\n",
           (long long)mg_params_numel(P), base_rss, used, isa, state_mb);
    fflush(stdout);

    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        char cmd[16] = "", arg[16] = "";
        long k = 0;
        const int got = sscanf(line, "%15s %ld %15s", cmd, &k, arg);
        if (got < 1) continue;
        if (!strcmp(cmd, "quit")) break;
        if (!strcmp(cmd, "mem")) {
            printf("{\"peak_rss_mb\":%.3f,\"rss_mb\":%.3f,\"arena_peak_mb\":%.3f,\"state_mb\":%.3f}\n",
                   bt_peak_rss_mb(), bt_rss_mb(),
                   w.ctx ? (double)(mg_ctx_peak_bytes(w.ctx) + mg_ctx_scratch_bytes(w.ctx)) / 1048576.0 : 0.0,
                   state_mb);
            fflush(stdout);
        } else if (!strcmp(cmd, "train") && train && got == 2 && k >= 0) {
            train_steps(&w, k);
        } else if (!strcmp(cmd, "gen") && !train && got == 3 && k >= 0 &&
                   (!strcmp(arg, "cache") || !strcmp(arg, "nocache"))) {
            generate(&w, k, !strcmp(arg, "cache"));
        } else {
            line[strcspn(line, "\n")] = 0;
            reply_error("unknown command '%s'", line);
        }
    }
    free(w.ids);
    free(w.tgt);
    mg_ctx_free(w.ctx);
    mg_optim_free(w.opt);
    mg_gpt_free(w.g);
    return 0;
}
