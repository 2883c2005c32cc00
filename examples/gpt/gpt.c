/* gpt: a command-line tool over minigrad GPT checkpoints and token files, used to check minigrad
 * against other frameworks (check_against_pytorch.py does exactly that).
 *
 *   gpt init    --config model.cfg --out model.safetensors [--seed N]
 *   gpt eval    --ckpt model.safetensors --tokens batch.bin --batch B --seq T [--dump-grads grads.safetensors]
 *   gpt inspect model.safetensors
 *   gpt sample  --ckpt model.safetensors --prompt "1 2 3" [--n 50] [--temperature 1] [--top-k 0] [--top-p 1]
 *               [--seed 1] [--no-cache]
 *
 * batch.bin holds B rows of T+1 little-endian uint16 tokens: row b's inputs are its first T
 * tokens and its targets its last T. eval prints `loss <value>` (9 significant digits), the mean
 * cross-entropy, and --dump-grads writes d(loss)/d(parameter) for every parameter under the
 * parameter's own name. A positional scheme that comes from a plugin (pos=alibi) is loaded on
 * demand from the plugin on the loader's search path that provides it (minigrad/plugin.h);
 * `gpt plugins` lists every layer and scheme found there and where each comes from. */
#include "cli.h"
#include "gpt_opts.h" /* ex_precision_from */
#include "output.h"
#include "minigrad/checkpoint.h"
#include "minigrad/gpt.h"
#include "minigrad/minigrad.h"
#include "minigrad/plugin.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- init ---- */

static int cmd_init(int argc, char **argv) {
    const char *config = NULL, *out = NULL;
    int64_t seed = 1337;
    const ex_opt opts[] = {
        EX_STR_OPT("config", &config, "model config file with a [gpt] section"),
        EX_STR_OPT("out", &out, "checkpoint to write (safetensors)"),
        EX_INT_OPT("seed", &seed, 0, INT64_MAX, "initialisation seed"),
    };
    ex_parse_result r = ex_parse("gpt init", "--config FILE --out FILE [--seed N]", argc, argv, opts, 3, NULL, 0, NULL);
    if (r != EX_PARSE_OK) return r == EX_PARSE_HELP ? 0 : 2;
    if (!config || !out) {
        fprintf(stderr, "gpt init: --config and --out are required (see --help)\n");
        return 2;
    }
    mg_gpt_config c;
    if (mg_gpt_config_read(config, &c) != MG_OK) return ex_fail("gpt init");
    mg_rng rng = mg_rng_make((uint64_t)seed);
    mg_gpt *g;
    mg_status built = mg_gpt_new(&c, &rng, &g);
    if (built != MG_OK) { /* a value that parsed but names nothing buildable: say which file */
        mg_wrap_error(built, "%s", config);
        return ex_fail("gpt init");
    }
    mg_gpt_print(g, stdout);
    mg_status st = mg_gpt_save(g, out, NULL, 0);
    mg_gpt_free(g);
    if (st != MG_OK) return ex_fail("gpt init");
    printf("wrote %s\n", out);
    return 0;
}

/* ---- eval ---- */

static void on_ctx_error(mg_ctx *ctx, const char *msg, void *user) {
    (void)ctx, (void)user;
    fprintf(stderr, "gpt eval: %s\n", msg);
}

/* Reads B rows of T+1 little-endian uint16 into inputs and targets (int32, B*T each). */
static mg_status read_tokens(const char *path, int64_t B, int64_t T, int64_t vocab, int32_t *x, int32_t *y) {
    FILE *f = fopen(path, "rb");
    if (!f) return mg_set_error(MG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int64_t want = B * (T + 1) * 2;
    /* the size from fstat: a directory opens, and seeking to its end gives no size */
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        fclose(f);
        return mg_set_error(MG_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    if (!S_ISREG(sb.st_mode)) {
        fclose(f);
        return mg_set_error(MG_ERR_IO, "%s: not a regular file (--tokens needs a file of B rows of T+1 uint16)", path);
    }
    if ((int64_t)sb.st_size != want) {
        fclose(f);
        return mg_set_error(MG_ERR_FORMAT,
                            "%s: %lld bytes, but --batch %lld --seq %lld needs %lld (B rows of T+1 uint16)", path,
                            (long long)sb.st_size, (long long)B, (long long)T, (long long)want);
    }
    unsigned char *buf = malloc((size_t)want);
    if (!buf) {
        fclose(f);
        return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t got = fread(buf, 1, (size_t)want, f);
    fclose(f);
    mg_status st = MG_OK;
    if ((int64_t)got != want) st = mg_set_error(MG_ERR_IO, "%s: short read (%zu of %lld bytes)", path, got, (long long)want);
    for (int64_t b = 0; b < B && st == MG_OK; b++)
        for (int64_t t = 0; t <= T; t++) {
            int64_t off = (b * (T + 1) + t) * 2;
            int32_t tok = (int32_t)(buf[off] | (buf[off + 1] << 8));
            if (tok >= vocab) {
                st = mg_set_error(MG_ERR_INVALID, "%s: byte offset %lld (row %lld, position %lld): token %d >= vocab_size %lld",
                                  path, (long long)off, (long long)b, (long long)t, tok, (long long)vocab);
                break;
            }
            if (t < T) x[b * T + t] = tok;
            if (t > 0) y[b * T + t - 1] = tok;
        }
    free(buf);
    return st;
}

static int cmd_eval(int argc, char **argv) {
    const char *ckpt = NULL, *tokens = NULL, *dump = NULL, *precision = NULL;
    int64_t B = 0, T = 0, threads = 0;
    const ex_opt opts[] = {
        EX_STR_OPT("ckpt", &ckpt, "checkpoint (safetensors)"),
        EX_STR_OPT("tokens", &tokens, "B rows of T+1 little-endian uint16 tokens"),
        EX_INT_OPT("batch", &B, 1, 1 << 24, "rows B (required)"),
        EX_INT_OPT("seq", &T, 1, 1 << 24, "sequence length T (required)"),
        EX_STR_OPT("dump-grads", &dump, "write d(loss)/d(param) for every parameter to this safetensors file"),
        EX_INT_OPT("threads", &threads, 0, EX_MAX_THREADS, "threads (0: all)"),
        EX_STR_OPT("precision", &precision, "fp32 (default) or bf16: the products in bfloat16 (docs/bf16.md)"),
    };
    ex_parse_result r = ex_parse("gpt eval", "--ckpt FILE --tokens FILE --batch B --seq T [--dump-grads FILE]",
                                 argc, argv, opts, 7, NULL, 0, NULL);
    if (r != EX_PARSE_OK) return r == EX_PARSE_HELP ? 0 : 2;
    if (!ckpt || !tokens || B < 1 || T < 1) {
        fprintf(stderr, "gpt eval: --ckpt, --tokens, --batch >= 1 and --seq >= 1 are required (see --help)\n");
        return 2;
    }
    mg_precision prec;
    if (!ex_precision_from("gpt eval", precision, &prec)) return 2;
    /* B * (T + 1) tokens of 2 bytes, and B * T int32 twice: keep every product far from overflow
     * (each is at most 2^24 by its range, so B * (T + 1) cannot wrap) */
    if (B * (T + 1) > ((int64_t)1 << 28)) {
        fprintf(stderr, "gpt eval: --batch %lld --seq %lld: at most 2^24 each and 2^28 tokens in all\n",
                (long long)B, (long long)T);
        return 2;
    }
    mg_set_num_threads((int)threads);
    mg_gpt *g;
    if (mg_gpt_from_checkpoint(ckpt, &g, NULL) != MG_OK) return ex_fail("gpt eval");
    const mg_gpt_config *c = mg_gpt_cfg(g);
    int32_t *x = malloc((size_t)(B * T) * sizeof *x), *y = malloc((size_t)(B * T) * sizeof *y);
    if (!x || !y || read_tokens(tokens, B, T, c->vocab_size, x, y) != MG_OK) {
        if (!x || !y) mg_set_error(MG_ERR_NOMEM, "out of memory");
        free(x), free(y), mg_gpt_free(g);
        return ex_fail("gpt eval");
    }
    mg_ctx *ctx = mg_ctx_new(0);
    mg_ctx_set_error_handler(ctx, on_ctx_error, NULL);
    mg_ctx_set_grad_enabled(ctx, dump != NULL);
    mg_ctx_set_precision(ctx, prec);
    mg_tensor *loss = mg_gpt_loss(g, ctx, mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){B, T}, x),
                                  mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){B, T}, y), NULL);
    int rc = 0;
    if (!mg_ctx_ok(ctx)) {
        rc = 1;
    } else {
        printf("loss %#.9g\n", (double)loss->data[0]); /* '#': 9 digits even with trailing zeros */
        if (prec == MG_PRECISION_BF16)
            printf("precision bf16: products on %s, attention products in %s\n",
                   mg_bf16_path_name(mg_bf16_path_active()), mg_attn_bf16_fused() ? "bf16" : "float32");
        if (!isfinite(loss->data[0])) {
            fprintf(stderr, "gpt eval: %s: the loss is %g: these weights give no finite loss on %s (diverged?)\n",
                    ckpt, (double)loss->data[0], tokens);
            rc = 1;
        } else if (dump) {
            mg_params_zero_grad(mg_gpt_params(g));
            mg_backward(ctx, loss);
            mg_st_meta meta[MG_GPT_META_MAX + 2];
            char buf[MG_GPT_META_MAX][MG_GPT_META_LEN], lbuf[32];
            int n = mg_gpt_config_to_meta(c, meta, buf);
            snprintf(lbuf, sizeof lbuf, "%.9g", (double)loss->data[0]);
            meta[n++] = (mg_st_meta){"loss", lbuf};
            meta[n++] = (mg_st_meta){"contents", "gradients of the mean cross-entropy"};
            if (!mg_ctx_ok(ctx))
                rc = 1;
            else if (mg_checkpoint_save(dump, mg_gpt_params(g), true, meta, n) != MG_OK)
                rc = ex_fail("gpt eval");
        }
    }
    mg_ctx_free(ctx);
    free(x), free(y);
    mg_gpt_free(g);
    return rc;
}

/* ---- inspect ---- */

static int cmd_inspect(int argc, char **argv) {
    const char *pos[1];
    int n_pos = 0;
    ex_parse_result r = ex_parse("gpt inspect", "model.safetensors", argc, argv, NULL, 0, pos, 1, &n_pos);
    if (r != EX_PARSE_OK) return r == EX_PARSE_HELP ? 0 : 2;
    if (n_pos != 1) {
        fprintf(stderr, "gpt inspect: give one checkpoint file\n");
        return 2;
    }
    mg_st_file *f;
    if (mg_safetensors_open(pos[0], &f) != MG_OK) return ex_fail("gpt inspect");
    printf("%s\n\nmetadata:\n", pos[0]);
    for (int i = 0; i < mg_st_meta_count(f); i++) {
        const char *v = mg_st_meta_value(f, i);
        printf("  %-16s %s%.*s%s\n", mg_st_meta_key(f, i), strlen(v) > 60 ? "(" : "", 60, v,
               strlen(v) > 60 ? "...)" : "");
    }
    printf("\ntensors:\n");
    int64_t total = 0;
    for (int i = 0; i < mg_st_count(f); i++) {
        const mg_st_tensor_info *t = mg_st_info(f, i);
        char shape[96] = "(";
        for (int d = 0; d < t->ndim; d++) {
            size_t l = strlen(shape);
            snprintf(shape + l, sizeof shape - l, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        }
        strcat(shape, ")");
        printf("  %-32s %-6s %-16s %12lld\n", t->name, t->dtype, shape, (long long)t->numel);
        total += t->numel;
    }
    printf("  %d tensors, %lld parameters\n\n", mg_st_count(f), (long long)total);
    mg_gpt_config c;
    mg_status st = mg_gpt_config_from_file(f, &c);
    mg_st_close(f);
    if (st != MG_OK) return ex_fail("gpt inspect");
    printf("config: vocab_size %lld, block_size %lld, n_layer %lld, n_head %lld, n_embd %lld, pos %s%s%s,\n"
           "        %s, gelu %s, emb_scale %g, head %s%s, dropout %g\n\n",
           (long long)c.vocab_size, (long long)c.block_size, (long long)c.n_layer, (long long)c.n_head,
           (long long)c.n_embd, c.pos, c.pos_opts[0] ? " " : "", c.pos_opts, c.causal ? "causal" : "bidirectional",
           c.gelu == MG_GELU_ERF ? "erf" : "tanh", (double)c.emb_scale, c.tied_head ? "tied" : "linear",
           c.head_bias ? " with bias" : "", (double)c.dropout);
    mg_gpt *g;
    if (mg_gpt_from_checkpoint(pos[0], &g, NULL) != MG_OK) return ex_fail("gpt inspect");
    mg_gpt_print(g, stdout);
    printf("the model this config builds loads the file: OK\n");
    mg_gpt_free(g);
    return 0;
}

/* ---- sample ---- */

static int cmd_sample(int argc, char **argv) {
    const char *ckpt = NULL, *prompt = NULL;
    int64_t n = 50, top_k = 0, seed = 1;
    float temperature = 1.0f, top_p = 1.0f;
    bool no_cache = false;
    const ex_opt opts[] = {
        EX_STR_OPT("ckpt", &ckpt, "checkpoint (safetensors)"),
        EX_STR_OPT("prompt", &prompt, "prompt token ids, separated by spaces or commas"),
        EX_INT_OPT("n", &n, 0, EX_MAX_GEN_TOKENS, "tokens to generate"),
        EX_FLOAT_OPT("temperature", &temperature, 0, 100, "0: greedy"),
        EX_INT_OPT("top-k", &top_k, 0, INT32_MAX, "keep the k most likely tokens (0: all)"),
        EX_FLOAT_OPT("top-p", &top_p, 0, 1, "nucleus: keep the smallest set reaching this probability (1: all)"),
        EX_INT_OPT("seed", &seed, 0, INT64_MAX, "sampling seed"),
        EX_FLAG_OPT("no-cache", &no_cache, "recompute the context for every token (no KV cache)"),
    };
    ex_parse_result r = ex_parse("gpt sample", "--ckpt FILE --prompt \"IDS\" [options]", argc, argv, opts, 8,
                                 NULL, 0, NULL);
    if (r != EX_PARSE_OK) return r == EX_PARSE_HELP ? 0 : 2;
    if (!ckpt || !prompt) {
        fprintf(stderr, "gpt sample: --ckpt and --prompt are required (see --help)\n");
        return 2;
    }
    int32_t ids[4096];
    int64_t np = 0;
    for (const char *p = prompt; *p;) {
        if (*p == ',' || isspace((unsigned char)*p)) { /* separators (strtoll would skip white space) */
            p++;
            continue;
        }
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p) {
            fprintf(stderr, "gpt sample: --prompt: '%s' is not a list of token ids\n", p);
            return 2;
        }
        if (errno == ERANGE || v < 0 || v > INT32_MAX) { /* the id as typed: strtoll clamps it */
            fprintf(stderr, "gpt sample: --prompt: token id '%.*s' is out of range 0..%d\n", (int)(end - p), p,
                    INT32_MAX);
            return 2;
        }
        if (np == (int64_t)(sizeof ids / sizeof ids[0])) {
            fprintf(stderr, "gpt sample: --prompt: more than %d token ids\n", (int)(sizeof ids / sizeof ids[0]));
            return 2;
        }
        ids[np++] = (int32_t)v;
        p = end;
    }
    if (np == 0) { /* checked here, before the checkpoint is loaded, in the option's words */
        if (*prompt)
            fprintf(stderr, "gpt sample: --prompt '%s' holds no token id: give at least one\n", prompt);
        else
            fprintf(stderr, "gpt sample: --prompt is empty: give at least one token id\n");
        return 2;
    }
    mg_gpt *g;
    if (mg_gpt_from_checkpoint(ckpt, &g, NULL) != MG_OK) return ex_fail("gpt sample");
    int32_t *out = malloc((size_t)(n ? n : 1) * sizeof *out);
    int64_t made = 0;
    mg_rng rng = mg_rng_make((uint64_t)seed);
    mg_gen_opts o = {.max_new_tokens = n, .temperature = temperature, .top_k = top_k, .top_p = top_p,
                     .no_cache = no_cache};
    double t0 = mg_time();
    mg_status st = out ? mg_gpt_generate(g, ids, np, &o, &rng, out, &made) : mg_set_error(MG_ERR_NOMEM, "out of memory");
    double dt = mg_time() - t0;
    for (int64_t i = 0; i < made; i++) printf("%s%d", i ? " " : "", out[i]);
    printf("\n");
    if (st == MG_OK) fprintf(stderr, "%lld tokens in %.3f s (%s)\n", (long long)made, dt, no_cache ? "no cache" : "KV cache");
    free(out);
    mg_gpt_free(g);
    return st == MG_OK ? 0 : ex_fail("gpt sample");
}

/* ---- plugins ---- */

static int cmd_plugins(int argc, char **argv) { return ex_cmd_plugins("gpt", argc, argv); }

static void usage(FILE *f) {
    fprintf(f, "usage: gpt <command> [options]   (gpt <command> --help for its options)\n"
               "  init     write a randomly initialised checkpoint from a [gpt] config file\n"
               "  eval     loss of a token batch (and its gradients with --dump-grads)\n"
               "  inspect  config, tensors and parameter count of a checkpoint\n"
               "  sample   generate token ids from a prompt (KV cache, temperature, top-k, top-p)\n"
               "  plugins  every layer and positional scheme, where each comes from, and the plugin search path\n");
}

int main(int argc, char **argv) {
    ex_stdout_begin();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    mg_log_set(NULL, NULL);
    const char *cmd = argv[1];
    if (!strcmp(cmd, "init")) return ex_exit_status("gpt", cmd_init(argc - 2, argv + 2));
    if (!strcmp(cmd, "eval")) return ex_exit_status("gpt", cmd_eval(argc - 2, argv + 2));
    if (!strcmp(cmd, "inspect")) return ex_exit_status("gpt", cmd_inspect(argc - 2, argv + 2));
    if (!strcmp(cmd, "sample")) return ex_exit_status("gpt", cmd_sample(argc - 2, argv + 2));
    if (!strcmp(cmd, "plugins")) return ex_exit_status("gpt", cmd_plugins(argc - 2, argv + 2));
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
        usage(stdout);
        return ex_exit_status("gpt", 0);
    }
    fprintf(stderr, "gpt: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
