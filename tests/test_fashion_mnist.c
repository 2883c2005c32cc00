/* examples/fashion_mnist on synthetic data, so it always runs: tiny gzip-compressed IDX files
 * written here with zlib load back exactly; a missing, truncated, corrupt or malformed file is
 * refused with a message naming it (and, when missing, the Debian package to install); and the
 * program trains on them (2 epochs), writes its checkpoint and figures, and a run stopped mid-epoch
 * and resumed ends bit for bit where it did; --precision bf16 trains, on 1 and 2 threads to the same
 * weights bit for bit, other weights than fp32's, and a bad --precision is refused by name.
 * (The real dataset: tests/test_fashion_mnist_data.c.) */
#include "test_util.h"
#include "fm.h"

#include <zlib.h>

enum { N_IMG = 40 };

static void be32(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v; }

/* An IDX file: header for `ndim` dims then n payload bytes, gzip-compressed (raw when !gz). */
static void write_idx(const char *path, int ndim, const uint32_t *dims, const uint8_t *payload, size_t n, bool gz) {
    uint8_t hdr[16];
    be32(hdr, 0x800u | (uint32_t)ndim);
    for (int d = 0; d < ndim; d++) be32(hdr + 4 + 4 * d, dims[d]);
    if (!gz) {
        FILE *f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        fwrite(hdr, 1, (size_t)(4 + 4 * ndim), f);
        fwrite(payload, 1, n, f);
        ck_assert_int_eq(fclose(f), 0);
        return;
    }
    gzFile f = gzopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(gzwrite(f, hdr, (unsigned)(4 + 4 * ndim)), 4 + 4 * ndim);
    if (n) ck_assert_int_eq(gzwrite(f, payload, (unsigned)n), (int)n);
    ck_assert_int_eq(gzclose(f), Z_OK);
}

static uint8_t images[N_IMG * FM_PIXELS], labels[N_IMG];

/* A learnable toy: class c is a bright horizontal bar at rows 2c+4..2c+6, plus noise. */
static void make_split(const char *dir, const char *which, int n) {
    mg_rng r = mg_rng_make(7);
    for (int i = 0; i < n; i++) {
        labels[i] = (uint8_t)(i % FM_CLASSES);
        for (int p = 0; p < FM_PIXELS; p++) {
            int row = p / FM_SIDE;
            images[i * FM_PIXELS + p] = (uint8_t)((row >= 2 * labels[i] + 4 && row < 2 * labels[i] + 7 ? 200 : 0) +
                                                  mg_rng_below(&r, 50));
        }
    }
    char p[4096];
    snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte.gz", dir, which);
    write_idx(p, 3, (uint32_t[]){(uint32_t)n, FM_SIDE, FM_SIDE}, images, (size_t)n * FM_PIXELS, true);
    snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte.gz", dir, which);
    write_idx(p, 1, (uint32_t[]){(uint32_t)n}, labels, (size_t)n, true);
}

START_TEST(synthetic_files_load_exactly) {
    char dir[400];
    tu_make_tmpdir(dir, sizeof dir, "fm_load");
    make_split(dir, "train", N_IMG);
    make_split(dir, "t10k", N_IMG);
    ck_assert(fm_present(dir));
    fm_set s;
    ck_assert_msg(fm_load(dir, "train", 0, &s) == MG_OK, "%s", mg_last_error());
    ck_assert_int_eq(s.n, N_IMG);
    ck_assert_mem_eq(s.images, images, sizeof images);
    ck_assert_mem_eq(s.labels, labels, sizeof labels);
    fm_set_free(&s);
    ck_assert_msg(fm_load(dir, "t10k", 7, &s) == MG_OK, "%s", mg_last_error()); /* --limit */
    ck_assert_int_eq(s.n, 7);
    ck_assert_mem_eq(s.images, images, 7 * FM_PIXELS);
    fm_set_free(&s);
    /* a plain (uncompressed) IDX file reads the same */
    write_idx(tu_path_in(dir, "train-labels-idx1-ubyte.gz"), 1, (uint32_t[]){N_IMG}, labels, N_IMG, false);
    ck_assert_msg(fm_load(dir, "train", 0, &s) == MG_OK, "%s", mg_last_error());
    ck_assert_mem_eq(s.labels, labels, sizeof labels);
    fm_set_free(&s);
    ck_assert(tu_remove_tree(dir));
}
END_TEST

/* Each broken file and the start of the message it must give (after the path). */
START_TEST(bad_files_are_refused_by_name) {
    char dir[400];
    tu_make_tmpdir(dir, sizeof dir, "fm_bad");
    make_split(dir, "t10k", N_IMG);
    const char *img = tu_path_in(dir, "t10k-images-idx3-ubyte.gz");
    char imgp[600], labp[600], want[2048];
    snprintf(imgp, sizeof imgp, "%s", img);
    snprintf(labp, sizeof labp, "%s", tu_path_in(dir, "t10k-labels-idx1-ubyte.gz"));
    fm_set s;

    /* missing: names the package and the apt-get command */
    ck_assert(!fm_present(dir));
    ck_assert_int_eq(fm_load(dir, "train", 0, &s), MG_ERR_IO);
    snprintf(want, sizeof want,
             "%s/train-images-idx3-ubyte.gz not found: install the Debian package dataset-fashion-mnist (sudo apt-get "
             "install dataset-fashion-mnist) or pass --data DIR",
             dir);
    ck_assert_str_eq(mg_last_error(), want);
    ck_assert_ptr_null(s.images);

    /* truncated payload: the header promises 40 images, 30 are there */
    write_idx(imgp, 3, (uint32_t[]){N_IMG, FM_SIDE, FM_SIDE}, images, 30 * FM_PIXELS, true);
    ck_assert_int_eq(fm_load(dir, "t10k", 0, &s), MG_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: truncated: %d bytes of images expected, the file holds %d", imgp, N_IMG * FM_PIXELS,
             30 * FM_PIXELS);
    ck_assert_str_eq(mg_last_error(), want);

    /* a gzip stream cut short, and one with its compressed bytes damaged */
    write_idx(imgp, 3, (uint32_t[]){N_IMG, FM_SIDE, FM_SIDE}, images, sizeof images, true);
    size_t n;
    char *gz = tu_read_file(imgp, &n);
    tu_write_bytes(imgp, gz, n / 2);
    ck_assert_int_eq(fm_load(dir, "t10k", 0, &s), MG_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: truncated", imgp);
    ck_assert_msg(strncmp(mg_last_error(), want, strlen(want)) == 0, "%s", mg_last_error());
    for (size_t i = 20; i < n - 8; i += 7) gz[i] = (char)(gz[i] ^ 0x5a);
    tu_write_bytes(imgp, gz, n);
    ck_assert_int_eq(fm_load(dir, "t10k", 0, &s), MG_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: ", imgp);
    ck_assert_msg(strncmp(mg_last_error(), want, strlen(want)) == 0 && strstr(mg_last_error(), "zlib: "), "%s",
                  mg_last_error());
    free(gz);

    /* wrong magic (a labels file where images belong) */
    write_idx(imgp, 1, (uint32_t[]){N_IMG}, labels, N_IMG, true);
    ck_assert_int_eq(fm_load(dir, "t10k", 0, &s), MG_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: not an IDX file of unsigned bytes with 3 dims (magic 0x00000801, want 0x00000803)",
             imgp);
    ck_assert_str_eq(mg_last_error(), want);

    /* neither gzip nor IDX (a text file under the right name): the messages say it is not gzip */
    tu_write_bytes(imgp, "hello\n", 6);
    ck_assert_int_eq(fm_load(dir, "t10k", 0, &s), MG_ERR_FORMAT);
    snprintf(want, sizeof want,
             "%s: truncated: 16 bytes of header expected, the file holds 6 (the file is not gzip data: read as an "
             "uncompressed IDX file)",
             imgp);
    ck_assert_str_eq(mg_last_error(), want);
    tu_write_bytes(imgp, "hello, this is not an IDX file\n", 31);
    ck_assert_int_eq(fm_load(dir, "t10k", 0, &s), MG_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: not an IDX file of unsigned bytes with 3 dims (magic 0x68656c6c, want 0x00000803) "
             "(the file is not gzip data: read as an uncompressed IDX file)", imgp);
    ck_assert_str_eq(mg_last_error(), want);

    /* images of another size */
    write_idx(imgp, 3, (uint32_t[]){2, 32, 32}, images, 2 * 32 * 32, true);
    write_idx(labp, 1, (uint32_t[]){2}, labels, 2, true);
    ck_assert_int_eq(fm_load(dir, "t10k", 0, &s), MG_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: images are 32x32, the model needs 28x28", imgp);
    ck_assert_str_eq(mg_last_error(), want);

    /* counts that differ, a label that is no class, an absurd size */
    write_idx(imgp, 3, (uint32_t[]){3, FM_SIDE, FM_SIDE}, images, 3 * FM_PIXELS, true);
    ck_assert_int_eq(fm_load(dir, "t10k", 0, &s), MG_ERR_FORMAT);
    snprintf(want, sizeof want, "%s holds 3 images but %s holds 2 labels", imgp, labp);
    ck_assert_str_eq(mg_last_error(), want);
    write_idx(labp, 1, (uint32_t[]){3}, (const uint8_t[]){1, 10, 2}, 3, true);
    ck_assert_int_eq(fm_load(dir, "t10k", 0, &s), MG_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: label 10 at index 1 is not a class 0..9", labp);
    ck_assert_str_eq(mg_last_error(), want);
    write_idx(imgp, 3, (uint32_t[]){3, 100000, FM_SIDE}, images, 16, true);
    ck_assert_int_eq(fm_load(dir, "t10k", 0, &s), MG_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: dim 1 is 100000, too large for Fashion-MNIST", imgp);
    ck_assert_str_eq(mg_last_error(), want);
    ck_assert(tu_remove_tree(dir));
}
END_TEST

/* The program found, and a fresh folder dir holding both synthetic splits. */
static void program_and_data(tu_program *p, char *dir, size_t n, const char *prefix) {
    tu_find_program(p);
    tu_make_tmpdir(dir, n, prefix);
    make_split(dir, "train", N_IMG);
    make_split(dir, "t10k", N_IMG);
}

START_TEST(program_trains_on_synthetic_data) {
    tu_program p = {"fashion_mnist", "examples/fashion_mnist/fashion_mnist", 2, false, "", "", ""};
    char dir[400];
    program_and_data(&p, dir, sizeof dir, "fm_prog");
    char args[2048];
    snprintf(args, sizeof args, "--data '%s' --out '%s/out' --epochs 2 --batch 8 --limit 32 --threads 2 --eval-batch 7",
             dir, dir);
    int rc = tu_run_in(&p, dir, "env MINIGRAD_NO_TTY=1 OMP_WAIT_POLICY=passive", args);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, p.err);
    ck_assert_msg(strstr(p.out, "32 training and 32 test images"), "%s", p.out);
    ck_assert_msg(strstr(p.out, "epoch 2: test accuracy"), "%s", p.out);
    ck_assert_msg(strstr(p.out, "images/s"), "%s", p.out);
    ck_assert_msg(strstr(p.out, "confusion matrix (rows: true class, columns: predicted)"), "%s", p.out);
    static const char *const outs[] = {"out/model.safetensors", "out/curves.png", "out/misclassified.png",
                                       "out/confusion.png", "out/train.jsonl"};
    for (int i = 0; i < 5; i++) {
        struct stat st;
        ck_assert_msg(stat(tu_path_in(dir, outs[i]), &st) == 0 && st.st_size > 0, "%s not written", outs[i]);
    }
    /* the checkpoint holds PyTorch's names and shapes */
    mg_st_file *f = NULL;
    ck_assert_msg(mg_safetensors_open(tu_path_in(dir, "out/model.safetensors"), &f) == MG_OK, "%s", mg_last_error());
    int k = mg_st_find(f, "conv2.weight");
    ck_assert_int_ge(k, 0);
    const mg_st_tensor_info *ti = mg_st_info(f, k);
    ck_assert_int_eq(ti->ndim, 4);
    ck_assert_int_eq(ti->shape[0], 64);
    ck_assert_int_eq(ti->shape[1], 32);
    mg_st_close(f);
    /* on the library trainer: stopped mid-epoch (step 3 of 4) and resumed, `train` spelt out, it
     * ends bit for bit where the uninterrupted run did, test accuracies and all */
    snprintf(args, sizeof args,
             "train --data '%s' --out '%s/out3' --epochs 2 --batch 8 --limit 32 --threads 2 --eval-batch 7 "
             "--stop-after 3",
             dir, dir);
    rc = tu_run_in(&p, dir, "env MINIGRAD_NO_TTY=1 OMP_WAIT_POLICY=passive", args);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, p.err);
    ck_assert_msg(strstr(p.out, "stopped at step 3 of 8"), "%s", p.out);
    char hint[4096]; /* the command that continues the run: this one, with --resume for --stop-after */
    snprintf(hint, sizeof hint,
             "fashion_mnist: continue with: %s train --data %s --out %s/out3 --epochs 2 --batch 8 --limit 32 --threads 2 "
             "--eval-batch 7 --resume\n",
             p.bin, dir, dir);
    tu_assert_stdout_has(&p, hint);
    ck_assert_msg(!strstr(p.out, "epoch 1: test accuracy"), "%s", p.out);
    snprintf(args, sizeof args, "train --data '%s' --out '%s/out3' --epochs 2 --batch 8 --limit 32 --threads 2 "
             "--eval-batch 7 --resume", dir, dir);
    rc = tu_run_in(&p, dir, "env MINIGRAD_NO_TTY=1 OMP_WAIT_POLICY=passive", args);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, p.err);
    ck_assert_msg(strstr(p.out, "resumed at step 3") && strstr(p.out, "epoch 2: test accuracy"), "%s", p.out);
    size_t n1, n2;
    char *w1 = tu_read_file(tu_path_in(dir, "out/model.safetensors"), &n1);
    char *w2 = tu_read_file(tu_path_in(dir, "out3/model.safetensors"), &n2);
    ck_assert_msg(n1 == n2 && memcmp(w1, w2, n1) == 0, "the resumed run's checkpoint differs");
    free(w1), free(w2);
    /* missing data: exit 1 naming the package */
    snprintf(args, sizeof args, "--data '%s/nowhere' --out '%s/out2'", dir, dir);
    rc = tu_run_in(&p, dir, "", args);
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(p.err, "fashion_mnist: ") && strstr(p.err, "sudo apt-get install dataset-fashion-mnist"), "%s",
                  p.err);
    /* a bad flag */
    rc = tu_run_in(&p, dir, "", "--epochs 0");
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(p.err, "--epochs"), "%s", p.err);
    /* the usage line names the program once */
    rc = tu_run_in(&p, dir, "", "--help");
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strncmp(p.out, "usage: fashion_mnist [train] [options]\n", 39) == 0, "%s", p.out);
    ck_assert(tu_remove_tree(dir));
}
END_TEST

START_TEST(program_trains_in_bf16) {
    tu_program p = {"fashion_mnist", "examples/fashion_mnist/fashion_mnist", 2, false, "", "", ""};
    char dir[400];
    program_and_data(&p, dir, sizeof dir, "fm_bf16");
    char args[2048];
    static const char *const runs[][2] = {{"b1", "--threads 1 --precision bf16"},
                                          {"b2", "--threads 2 --precision bf16"},
                                          {"f2", "--threads 2 --precision fp32"}};
    for (int r = 0; r < 3; r++) {
        snprintf(args, sizeof args, "--data '%s' --out '%s/%s' --epochs 1 --batch 8 --limit 32 --eval-batch 7 %s", dir,
                 dir, runs[r][0], runs[r][1]);
        int rc = tu_run_in(&p, dir, "env MINIGRAD_NO_TTY=1 OMP_WAIT_POLICY=passive", args);
        ck_assert_msg(rc == 0, "%s: exit %d: %s", runs[r][1], rc, p.err);
        ck_assert_msg(strstr(p.out, "epoch 1: test accuracy"), "%s", p.out);
        ck_assert_msg(!strstr(p.out, "bf16 mixed precision") == (r == 2), "%s", p.out);
    }
    char a[512], b[512], f[512];
    snprintf(a, sizeof a, "%s/b1/model.safetensors", dir);
    snprintf(b, sizeof b, "%s/b2/model.safetensors", dir);
    snprintf(f, sizeof f, "%s/f2/model.safetensors", dir);
    tu_assert_same_safetensors(a, b, (const char *const[]){"fm.test_accuracy", NULL});
    /* bf16's weights are not fp32's */
    mg_st_file *fa, *ff;
    ck_assert(mg_safetensors_open(a, &fa) == MG_OK && mg_safetensors_open(f, &ff) == MG_OK);
    int ka = mg_st_find(fa, "conv2.weight"), kf = mg_st_find(ff, "conv2.weight");
    ck_assert(ka >= 0 && kf >= 0);
    const int64_t n = mg_st_info(fa, ka)->numel;
    float *wa = malloc((size_t)n * sizeof *wa), *wf = malloc((size_t)n * sizeof *wf);
    ck_assert(wa && wf && mg_st_read_f32(fa, ka, wa, n) == MG_OK && mg_st_read_f32(ff, kf, wf, n) == MG_OK);
    ck_assert_msg(memcmp(wa, wf, (size_t)n * sizeof *wa) != 0, "bf16 trained fp32's conv2.weight");
    free(wa), free(wf);
    mg_st_close(fa), mg_st_close(ff);
    /* stopped and resumed without naming the precision: it goes on in bf16, to b2's bits */
    for (int r = 0; r < 2; r++) {
        snprintf(args, sizeof args, "--data '%s' --out '%s/r2' --epochs 1 --batch 8 --limit 32 --eval-batch 7 "
                 "--threads 2 %s", dir, dir, r == 0 ? "--precision bf16 --stop-after 2" : "--resume");
        int rc = tu_run_in(&p, dir, "env MINIGRAD_NO_TTY=1 OMP_WAIT_POLICY=passive", args);
        ck_assert_msg(rc == 0, "exit %d: %s", rc, p.err);
        ck_assert_msg(strstr(p.out, "bf16 mixed precision"), "%s", p.out);
    }
    snprintf(f, sizeof f, "%s/r2/model.safetensors", dir);
    tu_assert_same_safetensors(b, f, (const char *const[]){"fm.test_accuracy", NULL});
    /* a precision it does not know, on the command line or in a checkpoint */
    tu_set_meta(f, "fm.precision", "fp8");
    snprintf(args, sizeof args, "--data '%s' --out '%s/r2' --epochs 2 --batch 8 --limit 32 --resume", dir, dir);
    ck_assert_int_eq(tu_run_in(&p, dir, "", args), 1);
    tu_assert_stderr_has(&p, "metadata 'fm.precision' is 'fp8': expected fp32 or bf16");
    int rc = tu_run_in(&p, dir, "", "--precision fp16");
    ck_assert_int_eq(rc, 2);
    tu_assert_stderr_has(&p, "fashion_mnist: --precision 'fp16': expected fp32 or bf16");
    ck_assert(tu_remove_tree(dir));
}
END_TEST

/* A run already in --out is not replaced without --force; --resume needs one, of this program; a
 * signal saves and exits 128 + its number. */
START_TEST(program_keeps_the_run_it_finds) {
    tu_program p = {"fashion_mnist", "examples/fashion_mnist/fashion_mnist", 2, false, "", "", ""};
    char dir[400];
    program_and_data(&p, dir, sizeof dir, "fm_keep");
    const char *env = "env MINIGRAD_NO_TTY=1 OMP_WAIT_POLICY=passive";
    char args[2048], ckpt[600];
    snprintf(ckpt, sizeof ckpt, "%s/out/model.safetensors", dir);
    snprintf(args, sizeof args, "--data '%s' --out '%s/out' --epochs 2 --batch 8 --limit 32 --threads 1 --stop-after 3",
             dir, dir);
    ck_assert_int_eq(tu_run_in(&p, dir, env, args), 0);
    size_t n0, n1;
    char *before = tu_read_file(ckpt, &n0);
    /* the same command again: refused, the checkpoint untouched */
    ck_assert_int_eq(tu_run_in(&p, dir, env, args), 1);
    tu_assert_stderr_has(&p, "fashion_mnist: ");
    tu_assert_stderr_has(&p, "/out already holds a run (");
    tu_assert_stderr_has(&p, "pass --resume to continue it, --force to start over");
    char *after = tu_read_file(ckpt, &n1);
    ck_assert_msg(n0 == n1 && memcmp(before, after, n0) == 0, "a refused run changed %s", ckpt);
    free(after);
    /* --resume where there is no run */
    snprintf(args, sizeof args, "--data '%s' --out '%s/none' --epochs 2 --batch 8 --limit 32 --resume", dir, dir);
    ck_assert_int_eq(tu_run_in(&p, dir, env, args), 1);
    tu_assert_stderr_has(&p, "/none holds no checkpoint (");
    tu_assert_stderr_has(&p, "start without --resume");
    /* --resume on another program's checkpoint: said so, not a list of missing tensors */
    char other[600];
    snprintf(other, sizeof other, "%s/other", dir);
    ck_assert_int_eq(mkdir(other, 0755), 0);
    const float w[2] = {1.0f, 2.0f};
    const mg_st_entry e = {"tok_emb.weight", 1, {2}, w};
    const mg_st_meta m = {"train.step", "5"};
    ck_assert(mg_safetensors_write(tu_path_in(other, "model.safetensors"), &e, 1, &m, 1) == MG_OK);
    snprintf(args, sizeof args, "--data '%s' --out '%s' --epochs 2 --batch 8 --limit 32 --resume", dir, other);
    ck_assert_int_eq(tu_run_in(&p, dir, env, args), 1);
    tu_assert_stderr_has(&p, "model.safetensors: not a checkpoint of fashion_mnist (no fm.* metadata");
    /* --force starts over */
    snprintf(args, sizeof args, "--data '%s' --out '%s/out' --epochs 1 --batch 8 --limit 32 --threads 1 --force", dir,
             dir);
    ck_assert_int_eq(tu_run_in(&p, dir, env, args), 0);
    tu_assert_stdout_has(&p, "epoch 1: test accuracy");
    after = tu_read_file(ckpt, &n1);
    ck_assert_msg(n0 != n1 || memcmp(before, after, n0) != 0, "--force left the old run in %s", ckpt);
    free(after), free(before);
    /* SIGTERM, as `kill` or a job scheduler sends it: saved, exit 143, and --resume goes on */
    char outdir[600];
    snprintf(outdir, sizeof outdir, "%s/sig", dir);
    char *const argv[] = {"fashion_mnist", "--data", dir, "--out", outdir, "--epochs", "1000", "--batch", "8",
                          "--limit", "32", "--threads", "1", NULL};
    int st = tu_run_signalled(&p, dir, argv, "sig/train.jsonl", 300, SIGTERM);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 143, "status %d; stdout %.1000s; stderr %.1000s", st, p.out,
                  p.err);
    tu_assert_stdout_has(&p, "interrupted (SIGTERM): saved step");
    snprintf(args, sizeof args, "--data '%s' --out '%s' --epochs 1000 --batch 8 --limit 32 --threads 1 --resume "
             "--stop-after 1", dir, outdir);
    ck_assert_int_eq(tu_run_in(&p, dir, env, args), 0);
    tu_assert_stdout_has(&p, "resumed at step");
    ck_assert(tu_remove_tree(dir));
}
END_TEST

/* On a terminal (a pseudo-terminal from script(1)) the accuracy line after an epoch starts a line
 * of its own: the live progress line is cleared first, not continued. */
START_TEST(epoch_line_clears_the_live_progress_line) {
    tu_program p = {"fashion_mnist", "examples/fashion_mnist/fashion_mnist", 2, false, "", "", ""};
    char dir[400];
    program_and_data(&p, dir, sizeof dir, "fm_tty");
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && env -u MINIGRAD_NO_TTY OMP_WAIT_POLICY=passive script -qec \"'%s' --data . --out out --epochs 2 "
             "--batch 8 --limit 32 --threads 1\" /dev/null >tty.out 2>&1",
             dir, p.bin);
    int st = system(cmd);
    char *out = tu_read_file(tu_path_in(dir, "tty.out"), NULL);
    ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %.3000s", st, out);
    const char *e = strstr(out, "epoch 1: test accuracy");
    ck_assert_msg(e, "no epoch line: %.3000s", out);
    ck_assert_msg(e - out >= 4 && memcmp(e - 4, "\r\033[K", 4) == 0, "the epoch line continues the progress line: %.3000s",
                  out);
    ck_assert_msg(strstr(out, "1 thread,") || strstr(out, "1 thread\r") || strstr(out, "1 thread\n"), "%.3000s", out);
    free(out);
    ck_assert(tu_remove_tree(dir));
}
END_TEST

static Suite *fm_suite(void) {
    Suite *s = suite_create("fashion_mnist");
    TCase *tc = tcase_create("synthetic");
    tcase_add_test(tc, synthetic_files_load_exactly);
    tcase_add_test(tc, bad_files_are_refused_by_name);
    tcase_add_test(tc, program_trains_on_synthetic_data);
    tcase_add_test(tc, program_trains_in_bf16);
    tcase_add_test(tc, program_keeps_the_run_it_finds);
    if (system("command -v script >/dev/null 2>&1") == 0)
        tcase_add_test(tc, epoch_line_clears_the_live_progress_line);
    else
        fprintf(stderr, "# script(1) not found: fashion_mnist's terminal case skipped (util-linux's script)\n");
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(fm_suite)
