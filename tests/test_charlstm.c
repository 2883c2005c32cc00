/* The charlstm example program: train, sample and eval on a tiny corpus for a few steps, an exact
 * resume, the comparison chart, and the errors of bad runs. */
#include "test_util.h"
#include "minigrad/minigrad.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char tmpdir[512];
static tu_program charlstm = {.name = "charlstm", .rel = "examples/charlstm/charlstm", .max_status = 2};

static const char *tmp_path(const char *name) { return tu_path_in(tmpdir, name); }
static int run(const char *args) { return tu_run_in(&charlstm, tmpdir, "MINIGRAD_NO_TTY=1", args); }

#define TINY_LINE "the quick brown fox jumps over the lazy d\xC3\xB6g \xE2\x80\x94 caf\xC3\xA9\n"
#define TINY_MODEL "--block-size 16 --embd 8 --hidden 24 --batch 8 --lr 1e-2 --warmup 3 --threads 1"

static void setup(void) {
    tu_find_program(&charlstm);
    tu_make_tmpdir(tmpdir, sizeof tmpdir, "mg_charlstm");
    FILE *f = fopen(tmp_path("tiny.txt"), "wb");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 60; i++) fputs(TINY_LINE, f);
    ck_assert_int_eq(fclose(f), 0);
}

static void teardown(void) { tu_remove_tree(tmpdir); }

static bool exists(const char *rel) {
    struct stat sb;
    return stat(tmp_path(rel), &sb) == 0 && sb.st_size > 0;
}

START_TEST(train_sample_eval) {
    setup();
    ck_assert_int_eq(run("train --data tiny.txt --out run " TINY_MODEL " --steps 40 --eval-every 10 "
                         "--sample-tokens 30 --prompt 'the '"),
                     0);
    tu_run_log lg;
    tu_read_log(tmp_path("run/log.jsonl"), &lg, "\"lr\": ");
    ck_assert_int_eq(lg.n, 40);
    ck_assert_int_eq(lg.nv, 4);
    /* 31 characters: an untrained model starts near ln 31 = 3.43 and learns the line quickly */
    ck_assert_double_gt(lg.loss[0], 3.0);
    ck_assert_double_lt(lg.loss[0], 3.9);
    ck_assert_double_lt(lg.val[3], lg.val[0] - 0.5);
    tu_assert_stdout_has(&charlstm, "vocabulary 31 (char)");
    tu_assert_stdout_has(&charlstm, "LSTM 1 layer x 24 hidden, embedding 8");
    tu_assert_stdout_has(&charlstm, "charlstm: done: step 40");
    tu_assert_stdout_has(&charlstm, "a sample (temperature 0.8):\nthe ");
    ck_assert(exists("run/model.safetensors") && exists("run/model.state.safetensors"));
    ck_assert(exists("run/loss.png") && exists("run/log.jsonl"));
    /* PyTorch's nn.LSTM names in the checkpoint */
    mg_st_file *f;
    ck_assert_msg(mg_safetensors_open(tmp_path("run/model.safetensors"), &f) == MG_OK, "%s", mg_last_error());
    ck_assert_int_ge(mg_st_find(f, "lstm.weight_ih_l0"), 0);
    ck_assert_int_ge(mg_st_find(f, "lstm.bias_hh_l0"), 0);
    ck_assert_str_eq(mg_st_meta_get(f, "charlstm.hidden"), "24");
    mg_st_close(f);

    ck_assert_int_eq(run("sample --ckpt run/model.safetensors --prompt 'the q' --tokens 25 --seed 4"), 0);
    ck_assert_msg(strncmp(charlstm.out, "the q", 5) == 0, "sample: %s", charlstm.out);
    ck_assert_int_ge((int)strlen(charlstm.out), 5 + 25);
    tu_assert_stderr_has(&charlstm, "25 characters in");
    char first[256];
    snprintf(first, sizeof first, "%s", charlstm.out);
    ck_assert_int_eq(run("sample --ckpt run/model.safetensors --prompt 'the q' --tokens 25 --seed 4"), 0);
    ck_assert_str_eq(charlstm.out, first); /* the seed fixes the sample */

    ck_assert_int_eq(run("eval --ckpt run/model.safetensors --data tiny.txt"), 0);
    const char *l = strstr(charlstm.out, " characters: loss ");
    ck_assert_msg(l, "eval: %s", charlstm.out);
    double nats = strtod(l + 18, NULL);
    ck_assert_msg(nats > 0 && nats < lg.val[0], "eval loss %g, first validation %g", nats, lg.val[0]);
    tu_assert_stdout_has(&charlstm, "bits/char");
    /* the run's corpus is remembered */
    ck_assert_int_eq(run("eval --ckpt run/model.safetensors --split all"), 0);
    tu_assert_stdout_has(&charlstm, "tiny.txt, all split");
    /* what it scores first, then progress while it works (plain lines at each tenth when not on a
     * terminal), then the loss */
    ck_assert_int_eq(run("eval --ckpt run/model.safetensors --split all --batch 1 --threads 1"), 0);
    const char *head = strstr(charlstm.out, "charlstm eval: tiny.txt, all split: "),
               *line = strstr(charlstm.out, " windows (10%), loss so far "),
               *res = strstr(charlstm.out, " characters: loss ");
    ck_assert_msg(head && line && res && head < line && line < res, "eval: %s", charlstm.out);

    ck_assert_int_eq(run("compare --out cmp.png --x step run/log.jsonl=lstm run/log.jsonl=again"), 0);
    ck_assert(exists("cmp.png"));
    teardown();
}
END_TEST

START_TEST(stopped_and_resumed_ends_exactly) {
    setup();
    ck_assert_int_eq(run("train --data tiny.txt --out a " TINY_MODEL " --steps 12 --eval-every 4 --sample-tokens 0"), 0);
    ck_assert_int_eq(run("train --data tiny.txt --out b " TINY_MODEL " --steps 12 --eval-every 4 --sample-tokens 0 "
                         "--stop-after 5"),
                     0);
    tu_assert_stdout_has(&charlstm, "charlstm train --resume --out b");
    /* only --out: the data, the model and the schedule come from the checkpoint */
    ck_assert_int_eq(run("train --resume --out b --sample-tokens 0 --threads 1"), 0);
    static const char *const wkeys[] = {"charlstm.hidden", "charlstm.block", "vocab_size", NULL};
    tu_assert_resumed_exactly(tmpdir, "a", "b", wkeys, 12, 5, "\"lr\": ");
    /* a model size other than the checkpoint's is named, not found as a tensor shape */
    ck_assert_int_eq(run("train --resume --out b --sample-tokens 0 --threads 1 --hidden 32"), 2);
    tu_assert_stderr_has(&charlstm, "charlstm train: cannot resume: --hidden 32 but the checkpoint "
                                    "b/model.safetensors was trained with --hidden 24 (leave --hidden out to keep it)\n");
    ck_assert_int_eq(run("train --resume --out b --sample-tokens 0 --threads 1 --embd 16"), 2);
    tu_assert_stderr_has(&charlstm, "--embd 16 but the checkpoint b/model.safetensors was trained with --embd 8");
    ck_assert_int_eq(run("train --resume --out b --sample-tokens 0 --threads 1 --layers 2"), 2);
    tu_assert_stderr_has(&charlstm, "--layers 2 but the checkpoint b/model.safetensors was trained with --layers 1");
    /* the same sizes given again are no change */
    ck_assert_int_eq(run("train --resume --out b --sample-tokens 0 --threads 1 --hidden 24 --embd 8"), 0);
    teardown();
}
END_TEST

START_TEST(bad_runs_say_why) {
    setup();
    static const tu_bad_run cases[] = {
        {"sample --ckpt none.safetensors", 1, "train a model first (charlstm train) or pass --ckpt FILE"},
        {"eval --ckpt none.safetensors", 1, "none.safetensors: cannot open"},
        {"eval --split test", 2, "--split: 'test' is not val, train or all"},
        {"train --data tiny.txt --out r --layers 17", 2, "--layers"},
        {"train --data tiny.txt --out r --hidden 0", 2, "--hidden"},
        {"train --out nowhere --resume", 1, "holds no checkpoint"},
        {"train --data missing.txt --out r", 1, "missing.txt"},
        {"compare --x wall run.jsonl", 2, "--x: 'wall' is not time or step"},
        {"compare missing.jsonl=x", 1, "missing.jsonl: cannot open"},
        {"frobnicate", 2, "unknown command 'frobnicate'"},
        {"train --data one.txt --out r", 1,
         "one.txt: the text is too short: 1 byte (1 token); training needs at least 3"},
    };
    tu_write_text(tmp_path("one.txt"), "a");
    tu_expect_bad_runs(&charlstm, tmpdir, cases, sizeof cases / sizeof cases[0]);
    /* --help states the prompt's default once (an empty default is not printed after it) */
    ck_assert_int_eq(run("sample --help"), 0);
    tu_assert_stdout_has(&charlstm, "text to continue (default: a newline)\n");
    teardown();
}
END_TEST

static Suite *charlstm_suite(void) {
    Suite *s = suite_create("charlstm");
    TCase *tc = tcase_create("charlstm");
    tcase_add_test(tc, train_sample_eval);
    tcase_add_test(tc, stopped_and_resumed_ends_exactly);
    tcase_add_test(tc, bad_runs_say_why);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(charlstm_suite)
