/* textgen eval: the loss of a checkpoint over every character of a split, in nats and bits. */
#include "cli.h"
#include "commands.h"
#include "gpt_opts.h" /* ex_precision_from */
#include "progress.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "textgen eval"

int textgen_cmd_eval(int argc, char **argv) {
    const char *ckpt = TEXTGEN_DEFAULT_CKPT, *data = NULL, *split = "val";
    const char *precision = NULL;
    int64_t batch = 16, threads = 0, max_file_mib = TG_MAX_FILE_MIB;
    const ex_opt table[] = {
        EX_STR_OPT("ckpt", &ckpt, "checkpoint written by textgen train"),
        EX_STR_OPT("data", &data, "text to score (more files may follow; default: the run's own corpus)"),
        EX_STR_OPT("split", &split, "val (the last 10%), train (the first 90%) or all"),
        EX_INT_OPT("batch", &batch, 1, EX_MAX_BATCH, "windows per forward pass"),
        EX_INT_OPT("threads", &threads, 0, EX_MAX_THREADS, "threads (0: all cores)"),
        EX_STR_OPT("precision", &precision, "fp32 (default) or bf16: the products in bfloat16"),
        EX_INT_OPT("max-file-mib", &max_file_mib, 1, TG_MAX_FILE_MIB_LIMIT,
                   "largest text file read, in MiB (a bigger one is an error)"),
    };
    const char *files[64];
    int n_files = 0;
    ex_parse_result pr = ex_parse(PROG, "[--ckpt FILE] [--data FILE] [--split val|train|all] [FILE...]", argc - 1,
                                  argv + 1, table, (int)(sizeof table / sizeof table[0]), files, 63, &n_files);
    if (pr != EX_PARSE_OK) return pr == EX_PARSE_HELP ? 0 : 2;
    mg_precision prec;
    if (!ex_precision_from(PROG, precision, &prec)) return 2;
    if (strcmp(split, "val") && strcmp(split, "train") && strcmp(split, "all")) {
        fprintf(stderr, PROG ": --split must be val, train or all, got '%s'\n", split);
        return 2;
    }
    mg_set_num_threads((int)threads);
    if (data) {
        memmove(files + 1, files, (size_t)n_files * sizeof *files);
        files[0] = data, n_files++;
    }

    mg_gpt *g;
    tg_vocab v;
    mg_st_file *f;
    if (tg_load(ckpt, &g, &v, &f) != MG_OK) {
        return ex_fail_load(PROG, "textgen train", ckpt);
    }
    int rc = 1;
    const char **saved = NULL;
    char *text = NULL, label[512];
    size_t len;
    tg_data d = {0};
    tg_windows w = {0};
    ex_evaluator e = {0};
    if (n_files == 0) { /* the corpus the checkpoint was trained on */
        const char *list = mg_st_meta_get(f, TEXTGEN_META_DATA);
        int k = list ? textgen_split_list(list, &saved) : 0;
        for (int i = 0; i < k && i < 64; i++) files[i] = saved[i];
        n_files = k < 64 ? k : 64;
    }
    int64_t T = mg_gpt_cfg(g)->block_size;
    if (textgen_read_corpus(files, n_files, max_file_mib, &text, &len, label, sizeof label) != MG_OK) goto out;
    /* Block 1 accepts any text of two tokens or more: eval scores what there is. */
    if (tg_data_make(&d, &v, text, len, 1, label) != MG_OK) {
        if (strstr(mg_last_error(), "too short")) mg_set_error(MG_ERR_FORMAT, "%s: too short to evaluate", label);
        goto out;
    }
    const int32_t *ids = strcmp(split, "val") == 0 ? tg_val(&d) : d.ids;
    size_t n = strcmp(split, "val") == 0 ? tg_val_len(&d) : strcmp(split, "train") == 0 ? d.n_train : d.n;
    if (n < 2) {
        mg_set_error(MG_ERR_FORMAT, "%s: the %s split has %zu tokens: nothing to predict", label, split, n);
        goto out;
    }
    int64_t last;
    if (tg_cover_windows(&w, n, T, &last) != MG_OK || ex_evaluator_init(&e, batch, T) != MG_OK) goto out;
    mg_ctx_set_precision(e.ctx, prec);
    tg_loss sum = {0};
    printf("data %s\nsplit %s\n", label, split);
    fflush(stdout);
    double t0 = mg_time();
    /* batch by batch, so that the progress line moves */
    ex_eval_progress pg;
    ex_eval_progress_open(&pg, PROG, (int64_t)w.count);
    mg_status st = MG_OK;
    for (size_t i = 0; i < w.count && st == MG_OK; i += (size_t)batch) {
        size_t k = w.count - i < (size_t)batch ? w.count - i : (size_t)batch;
        tg_windows part = {w.start + i, k, w.len};
        st = tg_eval_windows(&e, g, &v, ids, &part, i + k == w.count ? last : 0, &sum);
        ex_eval_progress_update(&pg, (int64_t)(i + k), sum.nats / (double)(sum.chars ? sum.chars : 1),
                                sum.tokens);
    }
    ex_eval_progress_close(&pg);
    if (st != MG_OK) goto out;
    double dt = mg_time() - t0;
    printf("tokens %lld\ncharacters %lld\n", (long long)sum.tokens, (long long)sum.chars);
    if (v.kind == TG_TOKENIZER_BYTE) printf("nats_per_byte %.6f\n", sum.nats / (double)sum.tokens);
    /* The loss is named after the split it was measured on. Scripts read val_loss whatever the
     * split (it was the only name once), so it stays, after the right one. */
    double loss = sum.nats / (double)sum.chars;
    if (strcmp(split, "val") != 0) printf("%s_loss %.6f\n", split, loss);
    printf("val_loss %.6f\nbpc %.6f\nseconds %.2f\ntokens_per_s %.0f\n", loss, loss / log(2.0), dt,
           dt > 0 ? (double)sum.tokens / dt : 0.0);
    rc = 0;
out:
    if (rc) ex_fail(PROG);
    ex_evaluator_free(&e);
    tg_windows_free(&w);
    tg_data_free(&d);
    free(text);
    free(saved);
    mg_st_close(f);
    tg_vocab_free(&v);
    mg_gpt_free(g);
    return rc;
}
