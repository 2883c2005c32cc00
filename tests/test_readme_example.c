/* The README's C example, compiled and run, and compared line by line with the README so the two
 * cannot drift apart. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* readme-example:begin */
#include "minigrad/minigrad.h"

/* Learn XOR-like labels of 2-D points with a 2-layer MLP. */
static float train_xor(void) {
    enum { B = 64 };
    float xs[B * 2];
    int32_t labels[B];
    mg_rng rng = mg_rng_make(42); /* one explicit, seeded generator */
    for (int i = 0; i < B; i++) {
        xs[2 * i] = mg_rng_range(&rng, -1, 1), xs[2 * i + 1] = mg_rng_range(&rng, -1, 1);
        labels[i] = (xs[2 * i] > 0) != (xs[2 * i + 1] > 0);
    }
    /* Parameters: declared by name, then allocated as one slab and initialised from rng. */
    mg_params *P = mg_params_new();
    mg_tensor *W1 = mg_params_add(P, "fc1.weight", 2, (int64_t[]){2, 32}, mg_init_uniform(-0.7f, 0.7f), 0);
    mg_tensor *b1 = mg_params_add(P, "fc1.bias", 1, (int64_t[]){32}, mg_init_zeros(), MG_NO_DECAY);
    mg_tensor *W2 = mg_params_add(P, "fc2.weight", 2, (int64_t[]){32, 2}, mg_init_uniform(-0.2f, 0.2f), 0);
    mg_params_alloc(P, &rng);
    mg_optim *opt = mg_adamw_new(P, mg_adamw_defaults());
    mg_ctx *ctx = mg_ctx_new(0); /* the activation arena: grows on step 1, then stays put */
    float loss_value = 0;
    for (int step = 0; step < 300; step++) {
        mg_ctx_reset(ctx); /* drop the last step's activations and tape */
        mg_tensor *x = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){B, 2}, xs);
        mg_tensor *y = mg_tensor_wrap(ctx, MG_I32, 1, (int64_t[]){B}, labels);
        mg_tensor *h = mg_gelu(ctx, mg_add(ctx, mg_matmul(ctx, x, W1), b1), MG_GELU_TANH);
        mg_tensor *loss = mg_cross_entropy(ctx, mg_matmul(ctx, h, W2), y, -1);
        mg_params_zero_grad(P);
        mg_backward(ctx, loss); /* walks the tape in reverse */
        mg_optim_step(opt, 3e-2f);
        loss_value = loss->data[0];
    }
    mg_ctx_free(ctx);
    mg_optim_free(opt);
    mg_params_free(P);
    return loss_value;
}
/* readme-example:end */

START_TEST(example_trains) {
    float loss = train_xor();
    ck_assert_msg(loss < 0.1f, "final loss %g", loss);
}
END_TEST

START_TEST(readme_matches_this_file) {
    char p1[1024], p2[1024];
    ck_assert_msg(tu_source_path(p1, sizeof p1, "README.md"), "MINIGRAD_SOURCE_ROOT not set (run through meson test)");
    tu_source_path(p2, sizeof p2, "tests/test_readme_example.c");
    char *readme = tu_read_file(p1, NULL), *self = tu_read_file(p2, NULL); /* either missing fails the test */
    char *doc = tu_between(readme, "readme-example:begin", "readme-example:end");
    if (doc) { /* drop the markdown fence lines */
        char *w = doc;
        for (char *line = doc; *line;) {
            char *nl = strchr(line, '\n');
            size_t len = nl ? (size_t)(nl - line) + 1 : strlen(line);
            if (strncmp(line, "```", 3) != 0) memmove(w, line, len), w += len;
            line += len;
        }
        *w = 0;
    }
    char *code = tu_between(self, "readme-example:begin", "readme-example:end");
    ck_assert_msg(doc != NULL, "README.md has no readme-example block");
    ck_assert_ptr_nonnull(code);
    ck_assert_msg(strcmp(doc, code) == 0, "README example differs from tests/test_readme_example.c");
    free(doc);
    free(code);
    free(readme);
    free(self);
}
END_TEST

static Suite *readme_suite(void) {
    Suite *s = suite_create("readme_example");
    TCase *tc = tcase_create("readme");
    tcase_add_test(tc, example_trains);
    tcase_add_test(tc, readme_matches_this_file);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(readme_suite)
