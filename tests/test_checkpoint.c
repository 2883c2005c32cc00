/* Parameter stores and training state through safetensors files: bit-exact round trips, exact
 * resumption of an optimizer, and every mismatch reported without touching the destination. */
#include "test_util.h"
#include "minigrad/checkpoint.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static void setup(void) { tu_make_tmpdir(dir, sizeof dir, "mg_ckpt"); }
static void teardown(void) { ck_assert(tu_remove_tree(dir)); }

static const char *path_in(const char *name) { return tu_path_in(dir, name); }

/* A small store: a matrix, a vector, a 3-D tensor, with random values. */
static mg_params *make_store(uint64_t seed, int64_t width) {
    mg_params *p = mg_params_new();
    mg_params_add(p, "wte.weight", 2, (int64_t[]){7, width}, mg_init_normal(0, 0.02f), MG_NO_DECAY);
    mg_params_add(p, "h.0.ln_1.bias", 1, (int64_t[]){width}, mg_init_uniform(-1, 1), MG_NO_DECAY);
    mg_params_add(p, "h.0.mlp.c_fc.weight", 3, (int64_t[]){2, 3, width}, mg_init_uniform(-1, 1), 0);
    mg_rng r = mg_rng_make(seed);
    ck_assert_int_eq(mg_params_alloc(p, &r), MG_OK);
    return p;
}

static void fill_grads(mg_params *p, uint64_t seed) {
    mg_rng r = mg_rng_make(seed);
    for (int i = 0; i < mg_params_len(p); i++) {
        mg_tensor *t = mg_params_at(p, i);
        for (int64_t j = 0; j < t->numel; j++) t->grad[j] = mg_rng_normal(&r);
    }
}

static bool same_values(const mg_params *a, const mg_params *b) {
    for (int i = 0; i < mg_params_len(a); i++) {
        mg_tensor *x = mg_params_at(a, i), *y = mg_params_at(b, i);
        if (memcmp(x->data, y->data, (size_t)x->numel * 4) != 0) return false;
    }
    return true;
}

START_TEST(weights_round_trip_bit_exact) {
    mg_params *a = make_store(1, 5), *b = make_store(2, 5);
    ck_assert(!same_values(a, b));
    mg_st_meta meta[] = {{"format", "minigrad-gpt"}, {"n_embd", "5"}};
    ck_assert_int_eq(mg_checkpoint_save(path_in("w.safetensors"), a, false, meta, 2), MG_OK);
    mg_st_file *f = NULL;
    ck_assert_int_eq(mg_checkpoint_load(path_in("w.safetensors"), b, &f), MG_OK);
    ck_assert(same_values(a, b));
    ck_assert_str_eq(mg_st_meta_get(f, "format"), "minigrad-gpt");
    int64_t v;
    ck_assert_int_eq(mg_meta_get_i64(f, "n_embd", &v), MG_OK);
    ck_assert_int_eq(v, 5);
    ck_assert_int_ne(mg_meta_get_i64(f, "absent", &v), MG_OK);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "'absent' is missing"));
    ck_assert_int_ne(mg_meta_get_u64(f, "format", (uint64_t *)&v), MG_OK);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "'format' = 'minigrad-gpt' is not"));
    mg_st_close(f);
    mg_params_free(a);
    mg_params_free(b);
}
END_TEST

START_TEST(gradient_dump_uses_parameter_names) {
    mg_params *a = make_store(1, 4);
    fill_grads(a, 9);
    ck_assert_int_eq(mg_checkpoint_save(path_in("g.safetensors"), a, true, NULL, 0), MG_OK);
    mg_st_file *f = NULL;
    ck_assert_int_eq(mg_safetensors_open(path_in("g.safetensors"), &f), MG_OK);
    ck_assert_int_eq(mg_st_count(f), 3);
    mg_tensor *t = mg_params_find(a, "h.0.mlp.c_fc.weight");
    int i = mg_st_find(f, "h.0.mlp.c_fc.weight");
    ck_assert_int_ge(i, 0);
    float buf[24];
    ck_assert_int_eq(mg_st_read_f32(f, i, buf, 24), MG_OK);
    ck_assert_mem_eq(buf, t->grad, sizeof buf);
    mg_st_close(f);
    mg_params_free(a);
}
END_TEST

START_TEST(mismatches_leave_the_store_untouched) {
    mg_params *a = make_store(1, 5);
    ck_assert_int_eq(mg_checkpoint_save(path_in("w.safetensors"), a, false, NULL, 0), MG_OK);
    /* shape mismatch */
    mg_params *wide = make_store(3, 6);
    mg_params *before = make_store(3, 6);
    ck_assert_int_ne(mg_checkpoint_load(path_in("w.safetensors"), wide, NULL), MG_OK);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "wte.weight"));
    ck_assert(same_values(wide, before));
    /* a parameter the file lacks */
    mg_params *more = mg_params_new();
    mg_params_add(more, "wte.weight", 2, (int64_t[]){7, 5}, mg_init_zeros(), 0);
    mg_params_add(more, "h.0.ln_1.bias", 1, (int64_t[]){5}, mg_init_zeros(), 0);
    mg_params_add(more, "h.0.mlp.c_fc.weight", 3, (int64_t[]){2, 3, 5}, mg_init_zeros(), 0);
    mg_params_add(more, "ln_f.weight", 1, (int64_t[]){5}, mg_init_const(3.0f), 0);
    ck_assert_int_eq(mg_params_alloc(more, NULL), MG_OK);
    ck_assert_int_ne(mg_checkpoint_load(path_in("w.safetensors"), more, NULL), MG_OK);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "missing tensor 'ln_f.weight'"));
    ck_assert_float_eq(mg_params_find(more, "wte.weight")->data[0], 0.0f);
    /* a tensor the store lacks */
    mg_params *less = mg_params_new();
    mg_params_add(less, "wte.weight", 2, (int64_t[]){7, 5}, mg_init_zeros(), 0);
    ck_assert_int_eq(mg_params_alloc(less, NULL), MG_OK);
    ck_assert_int_ne(mg_checkpoint_load(path_in("w.safetensors"), less, NULL), MG_OK);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "unexpected tensor"));
    ck_assert_float_eq(mg_params_find(less, "wte.weight")->data[0], 0.0f);
    /* a missing file names the path */
    ck_assert_int_ne(mg_checkpoint_load(path_in("nope.safetensors"), a, NULL), MG_OK);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "nope.safetensors"));
    mg_params_free(a);
    mg_params_free(wide);
    mg_params_free(before);
    mg_params_free(more);
    mg_params_free(less);
}
END_TEST

/* Three AdamW steps with fixed pseudo-gradients. */
static void run_steps(mg_optim *o, mg_params *p, int first, int n) {
    for (int s = first; s < first + n; s++) {
        fill_grads(p, 100 + (uint64_t)s);
        mg_optim_step(o, 1e-2f);
    }
}

START_TEST(train_state_resumes_exactly) {
    mg_params *a = make_store(1, 5);
    mg_optim *oa = mg_adamw_new(a, mg_adamw_defaults());
    run_steps(oa, a, 0, 6); /* straight: 6 steps */

    mg_params *b = make_store(1, 5);
    mg_optim *ob = mg_adamw_new(b, mg_adamw_defaults());
    run_steps(ob, b, 0, 3);
    char rng[24];
    mg_st_meta meta[] = {{"rng", mg_meta_fmt_u64(rng, 0xFFFFFFFFFFFFFFFFULL)}};
    ck_assert_int_eq(mg_checkpoint_save(path_in("w.safetensors"), b, false, NULL, 0), MG_OK);
    ck_assert_int_eq(mg_train_state_save(path_in("t.safetensors"), ob, b, meta, 1), MG_OK);

    mg_params *c = make_store(77, 5);
    mg_optim *oc = mg_adamw_new(c, mg_adamw_defaults());
    mg_st_file *f = NULL;
    ck_assert_int_eq(mg_checkpoint_load(path_in("w.safetensors"), c, NULL), MG_OK);
    ck_assert_int_eq(mg_train_state_load(path_in("t.safetensors"), oc, c, &f), MG_OK);
    uint64_t r = 0;
    ck_assert_int_eq(mg_meta_get_u64(f, "rng", &r), MG_OK);
    ck_assert(r == 0xFFFFFFFFFFFFFFFFULL);
    mg_st_close(f);
    ck_assert_int_eq(mg_optim_steps(oc), 3);
    run_steps(oc, c, 3, 3);
    ck_assert(same_values(a, c));

    /* an SGD optimizer refuses AdamW state, naming both */
    mg_optim *sgd = mg_sgd_new(c, 0.9f, 0.0f);
    ck_assert_int_eq(mg_train_state_load(path_in("t.safetensors"), sgd, c, NULL), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "'adamw'"));
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "'sgd'"));
    ck_assert_int_eq(mg_optim_steps(sgd), 0);
    /* a weights file is not a training-state file */
    ck_assert_int_eq(mg_train_state_load(path_in("w.safetensors"), oc, c, NULL), MG_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "not a minigrad training-state file"));
    mg_optim_free(sgd);
    mg_optim_free(oa);
    mg_optim_free(ob);
    mg_optim_free(oc);
    mg_params_free(a);
    mg_params_free(b);
    mg_params_free(c);
}
END_TEST

/* An optimizer's state slabs are laid out for its own store: saving or loading it through another
 * store (here a larger one, so its offsets run past the slabs) is refused before any file is
 * touched, and so is a metadata count that the list cannot back. */
START_TEST(train_state_needs_the_optimizers_store) {
    mg_params *a = make_store(1, 5), *big = make_store(2, 50);
    mg_optim *oa = mg_adamw_new(a, mg_adamw_defaults());
    run_steps(oa, a, 0, 1);
    const char *t = path_in("t.safetensors");
    TU_ASSERT_ERR(mg_train_state_save(t, oa, big, NULL, 0), MG_ERR_INVALID, "t.safetensors: the optimizer was made "
                  "for a different parameter store");
    ck_assert_int_ne(access(t, F_OK), 0);
    ck_assert_int_eq(mg_train_state_save(t, oa, a, NULL, 0), MG_OK);
    TU_ASSERT_ERR(mg_train_state_load(t, oa, big, NULL), MG_ERR_INVALID, "t.safetensors: the optimizer was made "
                  "for a different parameter store");
    ck_assert_int_eq(mg_optim_steps(oa), 1);
    mg_st_meta meta[] = {{"k", "v"}};
    TU_ASSERT_ERR(mg_train_state_save(t, oa, a, meta, -1), MG_ERR_INVALID, "n_meta is -1");
    TU_ASSERT_ERR(mg_train_state_save(t, oa, a, NULL, 2), MG_ERR_INVALID, "n_meta is 2 but meta holds no entries");
    mg_st_file *f = NULL;
    ck_assert_int_eq(mg_train_state_load(t, oa, a, &f), MG_OK);
    ck_assert_ptr_null(mg_st_meta_get(f, "k")); /* the file of the successful save is intact */
    mg_st_close(f);
    mg_optim_free(oa);
    mg_params_free(a);
    mg_params_free(big);
}
END_TEST

START_TEST(failed_save_keeps_old_checkpoint) {
    mg_params *a = make_store(1, 5), *b = make_store(2, 5);
    const char *p = path_in("w.safetensors");
    ck_assert_int_eq(mg_checkpoint_save(p, a, false, NULL, 0), MG_OK);
    /* a bad metadata set (duplicate key) fails before anything is written */
    mg_st_meta dup[] = {{"k", "1"}, {"k", "2"}};
    ck_assert_int_ne(mg_checkpoint_save(p, b, false, dup, 2), MG_OK);
    ck_assert_int_eq(mg_checkpoint_load(p, b, NULL), MG_OK);
    ck_assert(same_values(a, b));
    /* an unwritable directory */
    ck_assert_int_eq(mg_checkpoint_save("/nonexistent-dir/w.safetensors", a, false, NULL, 0), MG_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "/nonexistent-dir/w.safetensors"));
    mg_params_free(a);
    mg_params_free(b);
}
END_TEST

/* A damaged file (one flipped bit, weights or state) or NaN / infinite values are refused naming
 * the file (and the tensor), and neither the store nor the optimizer is touched. Gradient dumps,
 * which may hold anything, are written all the same. */
START_TEST(damaged_and_non_finite_files_are_refused) {
    mg_params *a = make_store(1, 5), *b = make_store(2, 5);
    mg_optim *oa = mg_adamw_new(a, mg_adamw_defaults()), *ob = mg_adamw_new(b, mg_adamw_defaults());
    run_steps(oa, a, 0, 2);
    const char *w = path_in("w.safetensors"), *t = path_in("t.safetensors");
    ck_assert_int_eq(mg_checkpoint_save(w, a, false, NULL, 0), MG_OK);
    ck_assert_int_eq(mg_train_state_save(t, oa, a, NULL, 0), MG_OK);
    tu_flip_bit(w, -9, 2);
    TU_ASSERT_ERR(mg_checkpoint_load(w, b, NULL), MG_ERR_FORMAT, "w.safetensors: checksum mismatch");
    ck_assert(!same_values(a, b));
    tu_flip_bit(t, -9, 2);
    TU_ASSERT_ERR(mg_train_state_load(t, ob, b, NULL), MG_ERR_FORMAT, "t.safetensors: checksum mismatch");
    ck_assert_int_eq(mg_optim_steps(ob), 0);
    /* NaN weights, infinite moments */
    mg_tensor *x = mg_params_at(a, 2);
    x->data[4] = NAN;
    ck_assert_int_eq(mg_checkpoint_save(w, a, false, NULL, 0), MG_OK);
    TU_ASSERT_ERR(mg_checkpoint_load(w, b, NULL), MG_ERR_NONFINITE, "w.safetensors: tensor 'h.0.mlp.c_fc.weight' holds "
                  "NaN at element 4 of 30");
    ck_assert(!isnan(mg_params_at(b, 2)->data[4]));
    mg_optim_state(oa, 1)[mg_params_offset(a, 1) + 2] = INFINITY;
    ck_assert_int_eq(mg_train_state_save(t, oa, a, NULL, 0), MG_OK);
    TU_ASSERT_ERR(mg_train_state_load(t, ob, b, NULL), MG_ERR_NONFINITE, "tensor 'opt.v.h.0.ln_1.bias' holds +inf");
    ck_assert_int_eq(mg_optim_steps(ob), 0);
    fill_grads(a, 3);
    mg_params_at(a, 0)->grad[0] = NAN;
    ck_assert_int_eq(mg_checkpoint_save(path_in("g.safetensors"), a, true, NULL, 0), MG_OK);
    mg_optim_free(oa);
    mg_optim_free(ob);
    mg_params_free(a);
    mg_params_free(b);
}
END_TEST

static Suite *checkpoint_suite(void) {
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("checkpoint");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, weights_round_trip_bit_exact);
    tcase_add_test(tc, gradient_dump_uses_parameter_names);
    tcase_add_test(tc, mismatches_leave_the_store_untouched);
    tcase_add_test(tc, train_state_resumes_exactly);
    tcase_add_test(tc, train_state_needs_the_optimizers_store);
    tcase_add_test(tc, failed_save_keeps_old_checkpoint);
    tcase_add_test(tc, damaged_and_non_finite_files_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(checkpoint_suite)
