/* music eval: the mean loss of a checkpoint on the validation windows of a corpus. */
#include "cli.h"
#include "cmd_model.h"
#include "commands.h"
#include "gpt_opts.h" /* ex_precision_from */
#include "progress.h"

#include "minigrad/checkpoint.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PROG "music eval"

int music_cmd_eval(int argc, char **argv) {
    const char *ckpt = MUSIC_DEFAULT_CKPT, *data = NULL;
    const char *precision = NULL;
    int64_t windows = -1, batch = 1, threads = 0, pieces = -1;
    const ex_opt table[] = {
        EX_STR_OPT("ckpt", &ckpt, "checkpoint written by music train"),
        EX_STR_OPT("data", &data, "directory of MIDI files (default: the run's own corpus)"),
        EX_INT_OPT("pieces", &pieces, 1, MUSIC_MAX_PIECES, "pieces of the generated corpus (default: the run's)"),
        EX_INT_OPT("windows", &windows, 0, 1 << 20,
                   "validation windows to score (default: the run's --eval-windows; 0: all)"),
        EX_INT_OPT("batch", &batch, 1, EX_MAX_BATCH, "windows per forward pass"),
        EX_INT_OPT("threads", &threads, 0, EX_MAX_THREADS, "threads (0: all cores)"),
        EX_STR_OPT("precision", &precision, "fp32 (default) or bf16: the products in bfloat16"),
    };
    ex_parse_result pr = ex_parse(PROG, "[--ckpt FILE] [--data DIR] [options]", argc - 1, argv + 1,
                                  table, (int)(sizeof table / sizeof table[0]), NULL, 0, NULL);
    if (pr != EX_PARSE_OK) return pr == EX_PARSE_HELP ? 0 : 2;
    mg_precision prec;
    if (!ex_precision_from(PROG, precision, &prec)) return 2;
    mg_set_num_threads((int)threads);

    mg_gpt *g;
    mg_st_file *f;
    if (music_load(ckpt, &g, &f) != MG_OK) {
        return ex_fail_load(PROG, "music train", ckpt);
    }
    int rc = 1;
    music_corpus c = {0};
    music_data d = {0};
    music_windows w = {0};
    ex_evaluator e = {0};
    /* by default the corpus, its size and the window count the run was trained with */
    if (!data) data = mg_st_meta_get(f, MUSIC_META_DATA);
    if (pieces < 0 && (mg_st_meta_get(f, MUSIC_META_PIECES) == NULL ||
                       mg_meta_get_i64(f, MUSIC_META_PIECES, &pieces) != MG_OK))
        pieces = 128;
    if (windows < 0 && (mg_st_meta_get(f, "music.eval_windows") == NULL ||
                        mg_meta_get_i64(f, "music.eval_windows", &windows) != MG_OK))
        windows = 0;
    int64_t T = mg_gpt_cfg(g)->block_size;
    char label[4200];
    if (music_load_corpus("music", data, pieces, stderr, &c, label, sizeof label) != MG_OK ||
        music_data_make(&d, &c, label) != MG_OK)
        goto out;
    if (d.n_val == 0) {
        mg_set_error(MG_ERR_INVALID,
                     "%s: %zu piece%s: no validation split to evaluate (it takes 2 pieces or more)",
                     label, d.n, d.n == 1 ? "" : "s");
        goto out;
    }
    if (music_val_windows(&d, T, (size_t)windows, &w) != MG_OK ||
        ex_evaluator_init(&e, batch, T) != MG_OK)
        goto out;
    mg_ctx_set_precision(e.ctx, prec);
    printf("data %s\npieces %zu\nvalidation_pieces %zu\nwindows %zu\nwindow_length %lld\n", label, d.n, d.n_val,
           w.count, (long long)T);
    fflush(stdout);
    double nats = 0, t0 = mg_time();
    int64_t tokens = 0;
    /* batch by batch, so that the progress line moves */
    ex_eval_progress pg;
    ex_eval_progress_open(&pg, PROG, (int64_t)w.count);
    mg_status st = MG_OK;
    for (size_t i = 0; i < w.count && st == MG_OK; i += (size_t)batch) {
        size_t k = w.count - i < (size_t)batch ? w.count - i : (size_t)batch;
        music_windows part = {.piece = w.piece + i, .start = w.start + i, .count = k};
        double n1 = 0;
        int64_t t1 = 0;
        st = music_eval_windows(&e, g, &d, &part, &n1, &t1);
        nats += n1, tokens += t1;
        ex_eval_progress_update(&pg, (int64_t)(i + k), tokens ? nats / (double)tokens : 0.0, tokens);
    }
    ex_eval_progress_close(&pg);
    if (st != MG_OK) goto out;
    double dt = mg_time() - t0, loss = nats / (double)tokens;
    printf("tokens %lld\nval_loss %.6f\nbits_per_token %.6f\nseconds %.2f\ntokens_per_s %.0f\n", (long long)tokens,
           loss, loss / log(2.0), dt, dt > 0 ? (double)(w.count * (size_t)T) / dt : 0.0);
    rc = 0;
out:
    if (rc) ex_fail(PROG);
    ex_evaluator_free(&e);
    music_windows_free(&w);
    music_data_free(&d);
    music_corpus_free(&c);
    mg_st_close(f);
    mg_gpt_free(g);
    return rc;
}
