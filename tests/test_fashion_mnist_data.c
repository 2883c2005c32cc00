/* examples/fashion_mnist on the real Fashion-MNIST files (Debian's dataset-fashion-mnist), a tiny
 * subset: one epoch over the first 1,024 training images, tested on the first 1,024 test images.
 * Skipped, by name, when the package is not installed. */
#include "test_util.h"
#include "fm.h"

START_TEST(trains_on_a_subset_of_the_real_data) {
    tu_program p = {"fashion_mnist", "examples/fashion_mnist/fashion_mnist", 2, false, "", "", ""};
    tu_find_program(&p);
    char dir[512];
    tu_make_tmpdir(dir, sizeof dir, "fm_real");
    char args[1024];
    snprintf(args, sizeof args, "--limit 1024 --epochs 1 --threads 2 --out '%s/out'", dir);
    int rc = tu_run_in(&p, dir, "env MINIGRAD_NO_TTY=1 OMP_WAIT_POLICY=passive", args);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, p.err);
    const char *acc = strstr(p.out, "\ntest accuracy ");
    ck_assert_msg(acc, "%s", p.out);
    double a = atof(acc + strlen("\ntest accuracy "));
    ck_assert_msg(a > 40.0, "test accuracy %.2f%% after one epoch over 1,024 images (chance: 10%%)", a);
    ck_assert(tu_remove_tree(dir));
}
END_TEST

static Suite *fm_data_suite(void) {
    if (!fm_present(FM_DEFAULT_DIR))
        mg_test_skip_all("fashion_mnist_data: Fashion-MNIST not found in " FM_DEFAULT_DIR
                         " (Debian package dataset-fashion-mnist)");
    Suite *s = suite_create("fashion_mnist_data");
    TCase *tc = tcase_create("real");
    tcase_add_test(tc, trains_on_a_subset_of_the_real_data);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(fm_data_suite)
