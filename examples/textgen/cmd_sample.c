/* textgen sample: streams text from a checkpoint, one token at a time through the KV cache. */
#include "cli.h"
#include "commands.h"
#include "gpt_opts.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "textgen sample"

int textgen_cmd_sample(int argc, char **argv) {
    const char *ckpt = TEXTGEN_DEFAULT_CKPT, *prompt = "";
    int64_t tokens = 500;
    ex_sample_opts so = {.temperature = 0.8f, .top_p = 1.0f, .seed = -1};
    const char *precision = NULL;
    ex_opt table[9] = {
        EX_STR_OPT("ckpt", &ckpt, "checkpoint written by textgen train"),
        EX_STR_OPT("prompt", &prompt, "text to continue (default: a newline)"),
        EX_INT_OPT("tokens", &tokens, 0, EX_MAX_GEN_TOKENS, "tokens (characters) to generate"),
    };
    int n = 3;
    n += ex_sample_rows(&so, table + n);
    table[n++] = (ex_opt)EX_INT_OPT("seed", &so.seed, -1, INT64_MAX,
                                    "random seed (-1: from the clock; the seed used is printed at the end)");
    table[n++] = (ex_opt)EX_INT_OPT("threads", &so.threads, 0, EX_MAX_THREADS, "threads (0: all cores)");
    table[n++] = (ex_opt)EX_STR_OPT("precision", &precision,
                                    "fp32 (default) or bf16: the products in bfloat16, the weights rounded once");
    ex_parse_result pr = ex_parse(PROG, "[--ckpt FILE] [--prompt TEXT] [options]", argc - 1, argv + 1, table, n, NULL,
                                  0, NULL);
    if (pr != EX_PARSE_OK) return pr == EX_PARSE_HELP ? 0 : 2;
    mg_precision prec;
    if (!ex_precision_from(PROG, precision, &prec)) return 2;
    mg_set_num_threads((int)so.threads);
    int64_t seed = ex_sample_seed(so.seed);

    mg_gpt *g;
    tg_vocab v;
    if (tg_load(ckpt, &g, &v, NULL) != MG_OK) {
        return ex_fail_load(PROG, "textgen train", ckpt);
    }
    int rc = 1;
    size_t pl = strlen(prompt), np = 0;
    int32_t *ids = malloc((pl + 1) * sizeof *ids);
    if (!ids) goto out;
    if (pl == 0) {
        int32_t nl = tg_vocab_id(&v, '\n');
        ids[0] = nl >= 0 ? nl : 0, np = 1;
    } else if (tg_encode(&v, prompt, pl, ids, &np, "the prompt") != MG_OK) {
        goto out;
    }
    mg_rng rng = mg_rng_make((uint64_t)seed);
    mg_gen_opts go = {.max_new_tokens = tokens, .temperature = so.temperature, .top_k = so.top_k, .top_p = so.top_p,
                      .on_token = textgen_print_token, .user = &v, .precision = prec};
    if (pl == 0) textgen_print_token(&v, 0, ids[0], NULL, 0);
    else fwrite(prompt, 1, pl, stdout);
    double t0 = mg_time();
    int64_t made = 0;
    if (mg_gpt_generate(g, ids, (int64_t)np, &go, &rng, NULL, &made) != MG_OK) goto out;
    double dt = mg_time() - t0;
    printf("\n");
    fflush(stdout);
    fprintf(stderr, "textgen: %lld tokens in %.2fs: %.1f tokens/s (seed %lld, temperature %g)\n", (long long)made, dt,
            dt > 0 ? (double)made / dt : 0.0, (long long)seed, (double)so.temperature);
    rc = 0;
out:
    if (rc) ex_fail(PROG);
    free(ids);
    tg_vocab_free(&v);
    mg_gpt_free(g);
    return rc;
}
