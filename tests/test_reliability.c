/* Checkpoints under SIGKILL: a tiny `textgen train --ckpt-every 1` is killed at random points
 * (seeded: after a random number of logged steps, plus a random few milliseconds, so that kills
 * land before, inside and after the saves of the pair), then resumed until it finishes. Every
 * trial must end bit for bit where an uninterrupted run does (weights and training state), or be
 * refused with a clear message (only "holds no checkpoint", when the kill came before the first
 * checkpoint was committed; the run is then started afresh and must end exact too). Never
 * inexact, and no temporary or pending file may be left behind.
 *
 * MG_RELIABILITY_TRIALS and MG_RELIABILITY_SEED in the environment change the number of trials
 * (default 12) and the seed (default 2024). */
#include "test_util.h"

#include <fcntl.h>
#include <time.h>

static tu_program textgen = {.name = "textgen", .rel = "examples/textgen/textgen", .max_status = 2};
static char tmpdir[512];

#define STEPS 40
#define ARGS                                                                                       \
    "--data text.txt --steps 40 --batch 4 --block-size 16 --n-embd 16 --n-layer 1 --n-head 2 "     \
    "--warmup 4 --eval-every 10 --eval-windows 2 --ckpt-every 1 --sample-tokens 0 --threads 1 "    \
    "--seed 5"

static int env_int(const char *name, int def) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

/* Lines of a file (0 when it does not exist yet). */
static int count_lines(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int n = 0;
    for (int c; (c = fgetc(f)) != EOF;) n += c == '\n';
    fclose(f);
    return n;
}

/* Starts `textgen train ARGS --out out` in tmpdir (output into out.stdout / out.stderr). */
static pid_t start_train(const char *out) {
    char o[64], e[64];
    snprintf(o, sizeof o, "%s.stdout", out);
    snprintf(e, sizeof e, "%s.stderr", out);
    fflush(stdout);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (chdir(tmpdir) != 0 || !freopen(o, "w", stdout) || !freopen(e, "w", stderr)) _exit(99);
        char args[1024];
        snprintf(args, sizeof args, "train " ARGS " --out %s", out);
        char *argv[64];
        int argc = 0;
        argv[argc++] = "textgen";
        for (char *t = strtok(args, " "); t && argc < 63; t = strtok(NULL, " ")) argv[argc++] = t;
        argv[argc] = NULL;
        execv(textgen.bin, argv);
        _exit(98);
    }
    return pid;
}

static void assert_same(const char *a, const char *b, int trial) {
    size_t na, nb;
    char *x = tu_read_file(a, &na), *y = tu_read_file(b, &nb);
    ck_assert_msg(na == nb && memcmp(x, y, na) == 0, "trial %d: %s differs from %s: the resume was not exact", trial,
                  b, a);
    free(x);
    free(y);
}

/* No "*.tmp.*" or "*.pending" file is left in dir. */
static void assert_clean(const char *dir, int trial) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d));)
        ck_assert_msg(!strstr(e->d_name, ".tmp.") && !strstr(e->d_name, ".pending"), "trial %d: %s/%s was left behind",
                      trial, dir, e->d_name);
    closedir(d);
}

START_TEST(sigkill_at_random_points_resumes_exactly_or_is_refused) {
    tu_find_program(&textgen);
    tu_make_tmpdir(tmpdir, sizeof tmpdir, "mg_reliability");
    FILE *f = fopen(tu_path_in(tmpdir, "text.txt"), "w");
    ck_assert_ptr_nonnull(f);
    mg_rng words = mg_rng_make(11);
    static const char *const w[] = {"the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far\n"};
    for (int i = 0; i < 3000; i++) fprintf(f, "%s ", w[mg_rng_below(&words, 9)]);
    fclose(f);

    int rc = tu_run_in(&textgen, tmpdir, "", "train " ARGS " --out ref");
    ck_assert_msg(rc == 0, "the uninterrupted run failed: %s", textgen.err);
    char ref_w[1024], ref_s[1024];
    snprintf(ref_w, sizeof ref_w, "%s/ref/model.safetensors", tmpdir);
    snprintf(ref_s, sizeof ref_s, "%s/ref/model.state.safetensors", tmpdir);

    int trials = env_int("MG_RELIABILITY_TRIALS", 12), killed = 0, refused = 0, completed = 0;
    mg_rng r = mg_rng_make((uint64_t)env_int("MG_RELIABILITY_SEED", 2024));
    for (int t = 0; t < trials; t++) {
        char out[32], log[1024];
        snprintf(out, sizeof out, "t%d", t);
        snprintf(log, sizeof log, "%s/%s/log.jsonl", tmpdir, out);
        int after = 1 + (int)mg_rng_below(&r, STEPS - 1);
        useconds_t jitter = (useconds_t)mg_rng_below(&r, 4000);
        pid_t pid = start_train(out);
        int wst = 0;
        bool gone = false;
        for (int i = 0; i < 3000 && !gone && count_lines(log) < after; i++) {
            gone = waitpid(pid, &wst, WNOHANG) == pid;
            if (!gone) usleep(2000);
        }
        if (!gone) {
            usleep(jitter);
            kill(pid, SIGKILL);
            ck_assert_int_eq(waitpid(pid, &wst, 0), pid);
        }
        bool mid = WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL;
        ck_assert_msg(mid || (WIFEXITED(wst) && WEXITSTATUS(wst) == 0), "trial %d: textgen ended with status 0x%x",
                      t, (unsigned)wst);
        killed += mid;
        char args[256];
        snprintf(args, sizeof args, "train " ARGS " --out %s --resume", out);
        rc = tu_run_in(&textgen, tmpdir, "", args);
        if (rc != 0) {
            /* the only acceptable refusal: nothing was committed yet */
            ck_assert_msg(strstr(textgen.err, "holds no checkpoint"), "trial %d (killed after %d steps): the resume "
                          "failed without a clear reason: %s", t, after, textgen.err);
            refused++;
            snprintf(args, sizeof args, "train " ARGS " --out %s", out);
            rc = tu_run_in(&textgen, tmpdir, "", args);
            ck_assert_msg(rc == 0, "trial %d: a fresh start failed: %s", t, textgen.err);
        }
        completed++;
        char got[1024];
        snprintf(got, sizeof got, "%s/%s/model.safetensors", tmpdir, out);
        assert_same(ref_w, got, t);
        snprintf(got, sizeof got, "%s/%s/model.state.safetensors", tmpdir, out);
        assert_same(ref_s, got, t);
        snprintf(got, sizeof got, "%s/%s", tmpdir, out);
        assert_clean(got, t);
    }
    printf("# %d trials: %d killed during the run, %d refused before the first checkpoint, %d exact\n", trials,
           killed, refused, completed);
    /* the kills must have landed in the run, or the test shows nothing */
    ck_assert_int_ge(killed, trials / 2);
    tu_remove_tree(tmpdir);
}
END_TEST

static Suite *reliability_suite(void) {
    Suite *s = suite_create("reliability");
    TCase *tc = tcase_create("sigkill");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, sigkill_at_random_points_resumes_exactly_or_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(reliability_suite)
