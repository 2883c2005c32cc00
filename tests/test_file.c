/* Checked file output (minigrad/file.h): a write that fails, now or buffered until the close, is
 * an MG_ERR_IO naming the file and the reason; a file written whole is either all there or not
 * replaced; a device target is written in place, never renamed over. The full disk is /dev/full
 * (ENOSPC) and a file size limit (EFBIG) for a regular file that fills up half-way. */
#include "test_util.h"
#include "minigrad/file.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];

static void setup(void) {
    tu_make_tmpdir(tmpdir, sizeof tmpdir, "mg_file");
}

static void teardown(void) {
    tu_remove_tree(tmpdir);
}

/* Entries of tmpdir whose name contains part. */
static int count_entries(const char *part) { return tu_count_entries(tmpdir, part); }

START_TEST(close_checked_reports_what_the_buffer_held) {
    /* a few bytes sit in the buffer: fprintf succeeds, the close is where the disk is full */
    FILE *f = fopen("/dev/full", "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_gt(fprintf(f, "{\"step\": 1}\n"), 0);
    TU_ASSERT_ERR(mg_file_close_checked(f, "/dev/full"), MG_ERR_IO, "/dev/full: write failed: ",
                  strerror(ENOSPC));
    tu_assert_dev_full_intact();
    ck_assert_int_eq(mg_file_close_checked(NULL, "none"), MG_OK);
}
END_TEST

START_TEST(check_reports_an_earlier_failure_and_keeps_the_file_open) {
    FILE *f = fopen("/dev/full", "w");
    ck_assert_ptr_nonnull(f);
    static char big[1 << 16];
    memset(big, 'x', sizeof big);
    ck_assert_uint_lt(fwrite(big, 1, sizeof big, f), sizeof big); /* fails at once, unbuffered */
    TU_ASSERT_ERR(mg_file_check(f, "log.jsonl"), MG_ERR_IO, "log.jsonl: write failed: ");
    /* sticky: a later check of the same stream still fails */
    ck_assert_int_eq(mg_file_check(f, "log.jsonl"), MG_ERR_IO);
    ck_assert_int_eq(mg_file_close_checked(f, "log.jsonl"), MG_ERR_IO);
}
END_TEST

START_TEST(good_writes_pass) {
    const char *p = tu_path_in(tmpdir, "good.txt");
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "line one\n");
    TU_OK(mg_file_check(f, p));
    fprintf(f, "line two\n");
    TU_OK(mg_file_close_checked(f, p));
    char *b = tu_read_file(p, NULL);
    ck_assert_str_eq(b, "line one\nline two\n");
    free(b);
}
END_TEST

START_TEST(outfile_replaces_the_target_whole) {
    const char *p = tu_path_in(tmpdir, "report.csv");
    tu_write_text(p, "old contents\n");
    mg_outfile o;
    TU_OK(mg_outfile_open(&o, p));
    ck_assert_ptr_nonnull(o.tmp);
    fprintf(o.f, "a,b\n1,2\n");
    /* nothing is in place before the commit */
    char *b = tu_read_file(p, NULL);
    ck_assert_str_eq(b, "old contents\n");
    free(b);
    TU_OK(mg_outfile_commit(&o));
    ck_assert_ptr_null(o.f);
    b = tu_read_file(p, NULL);
    ck_assert_str_eq(b, "a,b\n1,2\n");
    free(b);
    ck_assert_int_eq(count_entries(".tmp"), 0);

    /* a discarded one leaves nothing behind and the target as it was */
    TU_OK(mg_outfile_open(&o, p));
    fprintf(o.f, "never mind\n");
    mg_outfile_discard(&o);
    mg_outfile_discard(&o); /* twice is harmless */
    b = tu_read_file(p, NULL);
    ck_assert_str_eq(b, "a,b\n1,2\n");
    free(b);
    ck_assert_int_eq(count_entries(""), 1);
}
END_TEST

START_TEST(outfile_on_a_disk_that_fills_up_keeps_the_old_file) {
    const char *p = tu_path_in(tmpdir, "big.bin");
    tu_write_text(p, "old contents\n");
    struct rlimit old = tu_limit_file_size(4096);
    mg_outfile o;
    TU_OK(mg_outfile_open(&o, p));
    static char big[1 << 16];
    memset(big, 'x', sizeof big);
    fwrite(big, 1, sizeof big, o.f);
    TU_ASSERT_ERR(mg_outfile_commit(&o), MG_ERR_IO, p, "write failed", strerror(EFBIG));
    tu_restore_file_size(old);
    char *b = tu_read_file(p, NULL);
    ck_assert_str_eq(b, "old contents\n");
    free(b);
    ck_assert_int_eq(count_entries(".tmp"), 0);
}
END_TEST

START_TEST(outfile_writes_a_device_in_place) {
    /* /dev/null: written in place, not replaced */
    mg_outfile o;
    TU_OK(mg_outfile_open(&o, "/dev/null"));
    ck_assert_ptr_null(o.tmp);
    fprintf(o.f, "gone\n");
    TU_OK(mg_outfile_commit(&o));
    struct stat sb;
    ck_assert_int_eq(lstat("/dev/null", &sb), 0);
    ck_assert(S_ISCHR(sb.st_mode));
    /* /dev/full, and a link to it: the full disk is reported, the device and the link stay */
    TU_OK(mg_outfile_open(&o, "/dev/full"));
    fprintf(o.f, "lost\n");
    TU_ASSERT_ERR(mg_outfile_commit(&o), MG_ERR_IO, "/dev/full: write failed: ", strerror(ENOSPC));
    tu_assert_dev_full_intact();
    const char *link = tu_path_in(tmpdir, "out.mid");
    ck_assert_int_eq(symlink("/dev/full", link), 0);
    TU_OK(mg_outfile_open(&o, link));
    fprintf(o.f, "lost\n");
    TU_ASSERT_ERR(mg_outfile_commit(&o), MG_ERR_IO, link, strerror(ENOSPC));
    ck_assert_int_eq(lstat(link, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    tu_assert_dev_full_intact();
    ck_assert_int_eq(count_entries(""), 1);
}
END_TEST

START_TEST(outfile_refuses_what_it_cannot_create) {
    mg_outfile o;
    TU_ASSERT_ERR(mg_outfile_open(&o, tmpdir), MG_ERR_IO, tmpdir, strerror(EISDIR));
    ck_assert_ptr_null(o.f);
    ck_assert_ptr_null(o.path);
    char missing[512];
    snprintf(missing, sizeof missing, "%s/no/such/dir/x.csv", tmpdir);
    TU_ASSERT_ERR(mg_outfile_open(&o, missing), MG_ERR_IO, missing, ": cannot write: its folder does not exist");
    ck_assert_ptr_null(o.f);
    TU_ASSERT_ERR(mg_outfile_open(&o, ""), MG_ERR_INVALID, "no output file name");
    TU_ASSERT_ERR(mg_outfile_open(&o, NULL), MG_ERR_INVALID, "no output file name");
    ck_assert_int_eq(count_entries(""), 0);
}
END_TEST

/* In a child of its own (stdout is process-wide): stdout on /dev/full, a first write lost in a
 * flush along the way, more text after it; the check at the end still gives the reason. */
START_TEST(stdout_keeps_the_reason_of_its_first_failure) {
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(p[0]);
        int fd = open("/dev/full", O_WRONLY);
        if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) _exit(3);
        if (mg_stdout_track_errors() != MG_OK) _exit(4);
        printf("the first line\n");
        fflush(stdout); /* fails: stdio drops the buffer and would forget why */
        printf("more\n");
        mg_status st = mg_stdout_check();
        char msg[1100];
        int n = snprintf(msg, sizeof msg, "%d %s", (int)st, mg_last_error());
        if (write(p[1], msg, (size_t)n) != n) _exit(5);
        _exit(0);
    }
    close(p[1]);
    char msg[1100] = "";
    ssize_t n = read(p[0], msg, sizeof msg - 1);
    close(p[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    ck_assert_int_gt(n, 0);
    msg[n] = 0;
    char want[200];
    snprintf(want, sizeof want, "%d standard output: write failed: %s", (int)MG_ERR_IO, strerror(ENOSPC));
    ck_assert_str_eq(msg, want);
}
END_TEST

static Suite *file_suite(void) {
    Suite *s = suite_create("file");
    TCase *tc = tcase_create("file");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, good_writes_pass);
    tcase_add_test(tc, outfile_replaces_the_target_whole);
    tcase_add_test(tc, outfile_on_a_disk_that_fills_up_keeps_the_old_file);
    tcase_add_test(tc, outfile_refuses_what_it_cannot_create);
    if (tu_have_dev_full()) {
        tcase_add_test(tc, close_checked_reports_what_the_buffer_held);
        tcase_add_test(tc, check_reports_an_earlier_failure_and_keeps_the_file_open);
        tcase_add_test(tc, outfile_writes_a_device_in_place);
        tcase_add_test(tc, stdout_keeps_the_reason_of_its_first_failure);
    } else {
        fprintf(stderr, "# /dev/full not found: the full-disk cases of the file suite skipped\n");
    }
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(file_suite)
