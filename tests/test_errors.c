/* Every programming-error path: the message names the op and the shapes, nothing crashes, the
 * context stays failed (later ops are harmless no-ops), and the default handler aborts; and the
 * overflow-checked size arithmetic every allocation sized from input goes through. */
#include "test_util.h"
#include "minigrad/minigrad.h"

#include <signal.h>
#include <string.h>

static mg_tensor *randn(mg_ctx *ctx, int ndim, const int64_t *shape) {
    mg_tensor *t = mg_tensor_new(ctx, MG_F32, ndim, shape);
    mg_rng r = mg_rng_make(3);
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = mg_rng_normal(&r);
    return t;
}

#if SANITIZED
/* AddressSanitizer reports a request larger than it can serve and stops; the library's answer
 * (malloc returns NULL) is what impossible_requests_fail_by_name checks. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
#endif

#define EXPECT_MSG(c, text) \
    ck_assert_msg(strstr((c).msg, (text)) != NULL, "message '%s' lacks '%s'", (c).msg, (text))

START_TEST(matmul_shape_mismatch_names_both_shapes) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    mg_tensor *a = randn(ctx, 3, (int64_t[]){2, 128, 256}), *b = randn(ctx, 2, (int64_t[]){512, 256});
    mg_tensor *y = mg_matmul(ctx, a, b);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(c.calls, 1);
    EXPECT_MSG(c, "mg_matmul: a(2,128,256) @ b(512,256): inner dims 256 != 512");
    ck_assert_str_eq(mg_ctx_error(ctx), c.msg);
    /* sticky: later ops do nothing, call no handler again, return a harmless tensor */
    mg_tensor *z = mg_gelu(ctx, mg_add(ctx, y, a), MG_GELU_TANH);
    ck_assert_ptr_nonnull(z);
    ck_assert_int_ge(z->numel, 1);
    mg_backward(ctx, mg_sum(ctx, z));
    ck_assert_int_eq(c.calls, 1);
    /* clearing makes the context usable again */
    mg_ctx_clear_error(ctx);
    mg_ctx_reset(ctx);
    ck_assert_ptr_null(mg_ctx_error(ctx));
    mg_tensor *ok = mg_matmul(ctx, randn(ctx, 2, (int64_t[]){2, 3}), randn(ctx, 2, (int64_t[]){3, 4}));
    ck_assert_int_eq(ok->shape[1], 4);
    ck_assert_ptr_null(mg_ctx_error(ctx));
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(other_shape_errors) {
    tu_trap c;
    struct {
        const char *expect;
        int which;
    } cases[] = {
        {"mg_matmul_nt: a(4,5) @ b^T, b(6,7): inner dims 5 != 7", 0},
        {"mg_matmul: a(2,3,4) @ b(3,4,5): batch dims differ", 1},
        {"mg_add: a(3,4) and b(3) cannot broadcast: dim -1 is 4 vs 3", 2},
        {"mg_mul: a(3,4) and b(5,4) cannot broadcast: dim -2 is 3 vs 5", 3},
        {"mg_layernorm: x(2,8) with weight(7)", 4},
        {"mg_cross_entropy: logits(2,5), targets(3)", 5},
        {"mg_reshape: x(2,6) (12 elements) cannot be viewed as (5,-1)", 6},
        {"mg_split_heads: x(2,3,12), 5 heads", 7},
        {"mg_attention: q(1,2,3,4), k(1,2,3,5)", 8},
        {"mg_rope: x(1,1,2,3)", 9},
        {"mg_dropout: x(4): p = 1", 10},
        {"mg_embedding: weight(5,3) must be (V,C) and ids(4) int32", 11},
        {"mg_backward: loss(2,2) must have exactly one element", 12},
        {"mg_attention: causal with q_pos0 4 and 2 queries needs at least 6 keys, k has 5", 13},
        {"mg_softmax: x(1,2) must be float32", 14},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        mg_ctx *ctx = tu_trapping_ctx(&c, 0);
        mg_rng r = mg_rng_make(1);
        switch (cases[k].which) {
        case 0: mg_matmul_nt(ctx, randn(ctx, 2, (int64_t[]){4, 5}), randn(ctx, 2, (int64_t[]){6, 7})); break;
        case 1: mg_matmul(ctx, randn(ctx, 3, (int64_t[]){2, 3, 4}), randn(ctx, 3, (int64_t[]){3, 4, 5})); break;
        case 2: mg_add(ctx, randn(ctx, 2, (int64_t[]){3, 4}), randn(ctx, 1, (int64_t[]){3})); break;
        case 3: mg_mul(ctx, randn(ctx, 2, (int64_t[]){3, 4}), randn(ctx, 2, (int64_t[]){5, 4})); break;
        case 4: mg_layernorm(ctx, randn(ctx, 2, (int64_t[]){2, 8}), randn(ctx, 1, (int64_t[]){7}), NULL, 1e-5f); break;
        case 5: mg_cross_entropy(ctx, randn(ctx, 2, (int64_t[]){2, 5}), mg_tensor_new(ctx, MG_I32, 1, (int64_t[]){3}), -1); break;
        case 6: mg_reshape(ctx, randn(ctx, 2, (int64_t[]){2, 6}), 2, (int64_t[]){5, -1}); break;
        case 7: mg_split_heads(ctx, randn(ctx, 3, (int64_t[]){2, 3, 12}), 5, 0, 12); break;
        case 8: {
            mg_tensor *q = randn(ctx, 4, (int64_t[]){1, 2, 3, 4}), *kk = randn(ctx, 4, (int64_t[]){1, 2, 3, 5});
            mg_attention(ctx, q, kk, kk, NULL);
            break;
        }
        case 9: mg_rope(ctx, randn(ctx, 4, (int64_t[]){1, 1, 2, 3}), 0, 10000.0f); break;
        case 10: mg_dropout(ctx, randn(ctx, 1, (int64_t[]){4}), 1.0f, &r); break;
        case 11: mg_embedding(ctx, randn(ctx, 2, (int64_t[]){5, 3}), randn(ctx, 1, (int64_t[]){4})); break;
        case 12: {
            mg_tensor *x = randn(ctx, 2, (int64_t[]){2, 2});
            mg_tensor_set_requires_grad(x, true);
            mg_backward(ctx, mg_scale(ctx, x, 2.0f));
            break;
        }
        case 13: {
            mg_tensor *q = randn(ctx, 4, (int64_t[]){1, 1, 2, 4}), *kk = randn(ctx, 4, (int64_t[]){1, 1, 5, 4});
            mg_attention(ctx, q, kk, kk, &(mg_attn_opts){.causal = true, .q_pos0 = 4});
            break;
        }
        case 14: mg_softmax(ctx, mg_tensor_new(ctx, MG_I32, 2, (int64_t[]){1, 2})); break;
        }
        ck_assert_msg(c.calls == 1, "case %zu: %d handler calls", k, c.calls);
        EXPECT_MSG(c, cases[k].expect);
        mg_ctx_free(ctx);
    }
}
END_TEST

START_TEST(token_id_out_of_range) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    mg_tensor *W = randn(ctx, 2, (int64_t[]){10, 4});
    mg_tensor *ids = mg_tensor_new(ctx, MG_I32, 2, (int64_t[]){2, 3});
    for (int i = 0; i < 6; i++) ids->i32[i] = i;
    ids->i32[4] = 10;
    mg_embedding(ctx, W, ids);
    EXPECT_MSG(c, "mg_embedding: token id 10 at flat position 4 of ids(2,3) is out of range [0, 10)");
    mg_ctx_free(ctx);

    ctx = tu_trapping_ctx(&c, 0);
    ids = mg_tensor_new(ctx, MG_I32, 1, (int64_t[]){3});
    ids->i32[0] = 1, ids->i32[1] = -1, ids->i32[2] = -7;
    mg_cross_entropy(ctx, randn(ctx, 2, (int64_t[]){3, 5}), ids, -1);
    EXPECT_MSG(c, "mg_cross_entropy: target -7 at flat position 2 of targets(3) is out of range [0, 5) (ignore_index -1)");
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(arena_exhausted_is_an_error_not_a_null) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 64 * 1024);
    mg_tensor *x = mg_tensor_new(ctx, MG_F32, 2, (int64_t[]){64, 64}); /* 16 KiB */
    ck_assert_ptr_null(mg_ctx_error(ctx));
    mg_tensor *y = mg_matmul(ctx, x, x);
    mg_tensor *z = mg_matmul(ctx, y, x);
    mg_tensor *w = mg_matmul(ctx, z, x); /* the fourth 16 KiB block cannot fit with headers */
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(c.calls, 1);
    EXPECT_MSG(c, "arena exhausted: mg_matmul output (64,64) needs");
    EXPECT_MSG(c, "of the fixed 65536 bytes are in use");
    ck_assert_uint_le(mg_ctx_used_bytes(ctx), 65536);
    /* scratch allocations report the same way */
    mg_ctx_clear_error(ctx);
    ck_assert_ptr_null(mg_ctx_alloc(ctx, 1 << 20, "test scratch"));
    EXPECT_MSG(c, "arena exhausted: test scratch needs 1048576 bytes");
    mg_ctx_free(ctx);
}
END_TEST

/* mg_reshape's ndim outside 0..MG_MAX_DIMS, and a NULL shape, are named as such (not as a shape
 * that does not fit); a shape whose element count overflows is one that does not fit. */
START_TEST(reshape_bad_ndim_or_shape) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    mg_tensor *x = randn(ctx, 2, (int64_t[]){2, 3});
    mg_reshape(ctx, x, 5, (int64_t[]){1, 1, 1, 2, 3});
    EXPECT_MSG(c, "mg_reshape: x(2,3): ndim 5 is out of range 0..4 (MG_MAX_DIMS)");
    mg_ctx_clear_error(ctx);
    mg_reshape(ctx, x, -1, (int64_t[]){6});
    EXPECT_MSG(c, "mg_reshape: x(2,3): ndim -1 is out of range 0..4");
    mg_ctx_clear_error(ctx);
    mg_tensor *y = mg_reshape(ctx, x, 2, NULL);
    ck_assert_ptr_nonnull(y);
    EXPECT_MSG(c, "mg_reshape: x(2,3): shape is NULL for 2 dims");
    mg_ctx_clear_error(ctx);
    mg_reshape(ctx, x, 3, (int64_t[]){INT64_C(1) << 62, 4, 0});
    EXPECT_MSG(c, "mg_reshape: x(2,3) (6 elements) cannot be viewed as (4611686018427387904,4,0)");
    ck_assert_int_eq(c.calls, 4);
    mg_ctx_clear_error(ctx);
    y = mg_reshape(ctx, x, 4, (int64_t[]){1, 1, -1, 1});
    ck_assert(mg_ctx_ok(ctx));
    ck_assert_int_eq(y->shape[2], 6);
    mg_ctx_free(ctx);
}
END_TEST

/* mg_ctx_new with a size that cannot be rounded up to the arena's alignment (it would wrap to a
 * capacity of 0) returns NULL with a message, not a context that can hold nothing. */
START_TEST(ctx_new_too_large) {
    mg_clear_error();
    ck_assert_ptr_null(mg_ctx_new(SIZE_MAX));
    ck_assert_msg(strstr(mg_last_error(), "mg_ctx_new: cannot allocate an arena of 18446744073709551615 bytes"),
                  "%s", mg_last_error());
    mg_clear_error();
    ck_assert_ptr_null(mg_ctx_new(SIZE_MAX - 62));
    ck_assert_msg(strstr(mg_last_error(), "mg_ctx_new: cannot allocate"), "%s", mg_last_error());
}
END_TEST

/* Requests no memory can hold: a failed context naming the request, never a pointer. A request
 * within 63 bytes of SIZE_MAX would wrap around to a small size if rounded up to the 64-byte
 * alignment; it is refused before that. */
START_TEST(impossible_requests_fail_by_name) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    /* the context's scratch: 2^62 bytes cannot be had */
    size_t mark = mg_ctx_scratch_mark(ctx);
    ck_assert_ptr_null(mg_ctx_scratch_alloc(ctx, (size_t)1 << 62, "huge workspace"));
    ck_assert_int_eq(c.calls, 1);
    EXPECT_MSG(c, "out of memory: huge workspace needs 4611686018427387904 bytes of scratch");
    mg_ctx_scratch_release(ctx, mark);
    /* a failed context hands out nothing more, and is usable again once cleared */
    ck_assert_ptr_null(mg_ctx_scratch_alloc(ctx, 64, "after"));
    ck_assert_int_eq(c.calls, 1);
    mg_ctx_clear_error(ctx);
    void *p = mg_ctx_scratch_alloc(ctx, 64, "small");
    ck_assert_ptr_nonnull(p);
    memset(p, 1, 64);
    mg_ctx_scratch_release(ctx, mark);

    for (size_t back = 0; back < 63; back += 31) { /* SIZE_MAX, SIZE_MAX - 31, - 62 */
        mg_ctx_clear_error(ctx);
        ck_assert_ptr_null(mg_ctx_scratch_alloc(ctx, SIZE_MAX - back, "wrapping scratch"));
        EXPECT_MSG(c, "wrapping scratch: a request of ");
        EXPECT_MSG(c, "bytes of scratch is larger than any memory");
        mg_ctx_clear_error(ctx);
        ck_assert_ptr_null(mg_ctx_alloc(ctx, SIZE_MAX - back, "wrapping arena"));
        EXPECT_MSG(c, "wrapping arena: a request of ");
        EXPECT_MSG(c, "bytes of arena memory is larger than any memory");
    }
    /* 64 bytes from the top rounds without wrapping: plainly out of memory */
    mg_ctx_clear_error(ctx);
    ck_assert_ptr_null(mg_ctx_scratch_alloc(ctx, SIZE_MAX - 63, "top scratch"));
    EXPECT_MSG(c, "out of memory: top scratch needs 18446744073709551552 bytes of scratch");
    mg_ctx_clear_error(ctx);
    ck_assert_ptr_null(mg_ctx_alloc(ctx, SIZE_MAX - 63, "top arena"));
    EXPECT_MSG(c, "out of memory: top arena needs 18446744073709551552 bytes more");
    ck_assert_int_eq(c.calls, 9);
    mg_ctx_free(ctx);

    /* the same on a fixed arena (the scratch is served from it) */
    ctx = tu_trapping_ctx(&c, 64 * 1024);
    ck_assert_ptr_null(mg_ctx_scratch_alloc(ctx, SIZE_MAX, "fixed scratch"));
    EXPECT_MSG(c, "fixed scratch: a request of 18446744073709551615 bytes of scratch is larger than any memory");
    mg_ctx_clear_error(ctx);
    ck_assert_ptr_null(mg_ctx_alloc(ctx, SIZE_MAX - 1, "fixed arena"));
    EXPECT_MSG(c, "fixed arena: a request of 18446744073709551614 bytes of arena memory is larger than any memory");
    mg_ctx_free(ctx);
}
END_TEST

/* A shape whose element count (or its bytes) does not fit in 64 bits is refused by name, not
 * wrapped into a small allocation; a zero dimension beside huge ones is an empty tensor. */
START_TEST(shapes_too_large_to_count_fail_by_name) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    const int64_t big = (int64_t)1 << 40;
    mg_tensor *t = mg_tensor_new(ctx, MG_F32, 2, (int64_t[]){big, big}); /* 2^80 elements */
    ck_assert_ptr_nonnull(t);
    EXPECT_MSG(c, "mg_tensor_new: shape (1099511627776,1099511627776) has more elements than any memory holds");
    mg_ctx_clear_error(ctx);
    mg_zeros(ctx, 3, (int64_t[]){(int64_t)1 << 31, (int64_t)1 << 31, 2}); /* 2^63: wraps to negative */
    EXPECT_MSG(c, "has more elements than any memory holds");
    mg_ctx_clear_error(ctx);
    mg_zeros(ctx, 1, (int64_t[]){(int64_t)1 << 62}); /* counts, but its bytes do not */
    EXPECT_MSG(c, "shape (4611686018427387904) has more elements than any memory holds");
    ck_assert_int_eq(c.calls, 3);
    mg_ctx_clear_error(ctx);
    t = mg_tensor_new(ctx, MG_F32, 3, (int64_t[]){big, 0, big});
    ck_assert(mg_ctx_ok(ctx));
    ck_assert_int_eq(t->numel, 0);
    ck_assert_int_eq(c.calls, 3);
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(growing_arena_settles_into_one_block) {
    mg_ctx *ctx = mg_ctx_new(0);
    size_t cap0 = mg_ctx_capacity(ctx);
    for (int step = 0; step < 3; step++) {
        mg_ctx_reset(ctx);
        for (int i = 0; i < 8; i++) mg_zeros(ctx, 2, (int64_t[]){1024, 1024}); /* 32 MiB per step */
        if (step == 0) ck_assert_uint_gt(mg_ctx_capacity(ctx), cap0);
    }
    size_t cap = mg_ctx_capacity(ctx);
    mg_ctx_reset(ctx);
    ck_assert_uint_eq(mg_ctx_capacity(ctx), cap); /* no new block once it has settled */
    ck_assert_uint_ge(mg_ctx_peak_bytes(ctx), (size_t)32 << 20);
    ck_assert_uint_eq(mg_ctx_used_bytes(ctx), 0);
    mg_ctx_free(ctx);
}
END_TEST

/* Steps that each need a little more than the last (generation re-running a context one token
 * longer) get a re-made block with headroom: 20 steps growing by 1% each re-make it at most a few
 * times, not at every reset. */
START_TEST(slowly_growing_steps_rarely_remake_the_arena) {
    mg_ctx *ctx = mg_ctx_new(0);
    ck_assert_ptr_nonnull(ctx);
    size_t cap = mg_ctx_capacity(ctx);
    int remade = 0;
    for (int step = 0; step < 20; step++) {
        mg_ctx_reset(ctx);
        if (mg_ctx_capacity(ctx) != cap) remade++, cap = mg_ctx_capacity(ctx);
        const int64_t rows = 4096 + 41 * step; /* 16 MiB + 1% a step, 1024 floats a row */
        mg_zeros(ctx, 2, (int64_t[]){rows, 1024});
        ck_assert(mg_ctx_ok(ctx));
    }
    ck_assert_int_ge(remade, 1);
    ck_assert_int_le(remade, 3);
    mg_ctx_free(ctx);
}
END_TEST

/* An op without a backward (as a plugin might ship for inference only). */
static const mg_op_def forward_only = {"test_forward_only", NULL};
static mg_tensor *op_forward_only(mg_ctx *ctx, mg_tensor *x) {
    if (!mg_ctx_ok(ctx)) return mg_ctx_dummy(ctx);
    mg_tensor *y = mg_op_output(ctx, "test_forward_only", x->ndim, x->shape);
    if (!mg_ctx_ok(ctx)) return y;
    memcpy(y->data, x->data, (size_t)x->numel * 4);
    mg_op_record(ctx, &forward_only, y, 1, (mg_tensor *[]){x});
    return y;
}

START_TEST(op_without_backward) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    mg_tensor *x = randn(ctx, 1, (int64_t[]){4});
    mg_tensor_set_requires_grad(x, true);
    mg_backward(ctx, mg_sum(ctx, op_forward_only(ctx, x)));
    EXPECT_MSG(c, "mg_backward: op 'test_forward_only' has no backward (its input #0 requires a gradient)");
    /* under no_grad the same op is fine */
    mg_ctx_clear_error(ctx);
    mg_ctx_set_grad_enabled(ctx, false);
    op_forward_only(ctx, x);
    ck_assert_ptr_null(mg_ctx_error(ctx));
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(backward_without_grad_path) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    mg_backward(ctx, mg_sum(ctx, randn(ctx, 1, (int64_t[]){3})));
    EXPECT_MSG(c, "the loss does not depend on anything that requires a gradient");
    mg_ctx_free(ctx);
}
END_TEST

/* A NULL loss, or an int32 one (a tensor of ids marked as needing a gradient), is raised on the
 * context instead of crashing or doing nothing. */
START_TEST(backward_bad_loss) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    mg_backward(ctx, NULL);
    ck_assert_int_eq(c.calls, 1);
    EXPECT_MSG(c, "mg_backward: loss is NULL");
    mg_ctx_clear_error(ctx);
    mg_tensor *ids = mg_tensor_new(ctx, MG_I32, 1, (int64_t[]){1});
    ids->i32[0] = 1;
    mg_tensor_set_requires_grad(ids, true);
    mg_backward(ctx, ids);
    ck_assert_int_eq(c.calls, 2);
    EXPECT_MSG(c, "mg_backward: loss(1) is int32: gradients flow only through float32 tensors");
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(default_handler_aborts) {
    mg_ctx *ctx = mg_ctx_new(0);
    mg_tensor *a = randn(ctx, 2, (int64_t[]){2, 3});
    mg_matmul(ctx, a, a); /* prints the message, then abort(): SIGABRT */
}
END_TEST

START_TEST(bad_tensor_shapes) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    mg_tensor_new(ctx, MG_F32, 5, (int64_t[]){1, 1, 1, 1, 1});
    EXPECT_MSG(c, "mg_tensor_new: 5 dims requested, tensors have 0..4");
    mg_ctx_clear_error(ctx);
    mg_zeros(ctx, 2, (int64_t[]){3, -2});
    EXPECT_MSG(c, "negative dimension -2 at index 1");
    /* an unknown dtype, a NULL shape */
    mg_ctx_clear_error(ctx);
    mg_tensor *t = mg_tensor_new(ctx, (mg_dtype)9, 1, (int64_t[]){2});
    ck_assert_ptr_nonnull(t);
    EXPECT_MSG(c, "mg_tensor_new: unknown dtype 9: expected MG_F32 or MG_I32");
    mg_ctx_clear_error(ctx);
    mg_tensor_wrap(ctx, (mg_dtype)-1, 1, (int64_t[]){2}, (float[2]){0});
    EXPECT_MSG(c, "mg_tensor_wrap: unknown dtype -1");
    mg_ctx_clear_error(ctx);
    t = mg_zeros(ctx, 2, NULL);
    ck_assert_ptr_nonnull(t);
    EXPECT_MSG(c, "mg_zeros: shape is NULL for 2 dims");
    mg_ctx_clear_error(ctx);
    mg_tensor_new(ctx, MG_F32, 1, NULL);
    EXPECT_MSG(c, "mg_tensor_new: shape is NULL for 1 dims");
    ck_assert_int_eq(c.calls, 6);
    /* a scalar needs no shape */
    mg_ctx_clear_error(ctx);
    t = mg_zeros(ctx, 0, NULL);
    ck_assert(mg_ctx_ok(ctx));
    ck_assert_int_eq(t->numel, 1);
    mg_ctx_free(ctx);
}
END_TEST

/* An operand that is NULL, or has elements but no data (a parameter whose store was never
 * allocated, a tensor wrapped around NULL), fails the op naming the op and the operand instead of
 * reaching a kernel. */
START_TEST(missing_operands_and_data_fail_by_name) {
    tu_trap c;
    mg_ctx *ctx = tu_trapping_ctx(&c, 0);
    mg_params *P = mg_params_new();
    mg_tensor *w = mg_params_add(P, "w", 2, (int64_t[]){3, 2}, mg_init_ones(), 0);
    mg_tensor *emb = mg_params_add(P, "emb.weight", 2, (int64_t[]){5, 2}, mg_init_ones(), 0);
    mg_tensor *ln = mg_params_add(P, "ln.weight", 1, (int64_t[]){3}, mg_init_ones(), 0);
    mg_tensor *cw = mg_params_add(P, "conv.weight", 4, (int64_t[]){1, 1, 1, 1}, mg_init_ones(), 0);
    ck_assert_ptr_nonnull(w);
    ck_assert_ptr_nonnull(emb);
    ck_assert_ptr_nonnull(ln);
    ck_assert_ptr_nonnull(cw);
    mg_tensor *x = randn(ctx, 2, (int64_t[]){2, 3});
    mg_tensor *img = randn(ctx, 4, (int64_t[]){1, 1, 3, 3});
    mg_tensor *ids = mg_tensor_new(ctx, MG_I32, 1, (int64_t[]){2});
    ids->i32[0] = 0, ids->i32[1] = 4;
    mg_tensor *hollow = mg_tensor_wrap(ctx, MG_F32, 2, (int64_t[]){2, 3}, NULL);
    struct {
        int which;
        const char *expect;
    } cases[] = {
        {0, "mg_matmul: a is NULL"},
        {1, "mg_add: b is NULL"},
        {2, "mg_matmul: b(3,2) (parameter 'w') has no data: its store is not allocated (call mg_params_alloc first)"},
        {3, "mg_linear: weight(3,2) (parameter 'w') has no data"},
        {4, "mg_embedding: weight(5,2) (parameter 'emb.weight') has no data"},
        {5, "mg_embedding: ids is NULL"},
        {6, "mg_layernorm: weight(3) (parameter 'ln.weight') has no data"},
        {7, "mg_conv2d: weight(1,1,1,1) (parameter 'conv.weight') has no data"},
        {8, "mg_relu: x(2,3) has no data"},
        {9, "mg_cross_entropy: targets is NULL"},
        {10, "mg_narrow: x is NULL"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        mg_tensor *y = NULL;
        switch (cases[k].which) {
        case 0: y = mg_matmul(ctx, NULL, w); break;
        case 1: y = mg_add(ctx, x, NULL); break;
        case 2: y = mg_matmul(ctx, x, w); break;
        case 3: y = mg_linear(ctx, x, w, NULL); break;
        case 4: y = mg_embedding(ctx, emb, ids); break;
        case 5: y = mg_embedding(ctx, x, NULL); break;
        case 6: y = mg_layernorm(ctx, x, ln, NULL, 1e-5f); break;
        case 7: y = mg_conv2d(ctx, img, cw, NULL, NULL); break;
        case 8: y = mg_relu(ctx, hollow); break;
        case 9: y = mg_cross_entropy(ctx, x, NULL, -1); break;
        case 10: y = mg_narrow(ctx, NULL, 0, 0, 1); break;
        }
        ck_assert_ptr_nonnull(y);
        ck_assert_int_eq(c.calls, 1);
        EXPECT_MSG(c, cases[k].expect);
        mg_ctx_clear_error(ctx);
        c.calls = 0;
    }
    /* once allocated, the same calls run */
    ck_assert_int_eq(mg_params_alloc(P, NULL), MG_OK);
    mg_tensor *y = mg_matmul(ctx, x, w);
    ck_assert(mg_ctx_ok(ctx));
    ck_assert_float_eq(y->data[0], x->data[0] + x->data[1] + x->data[2]);
    mg_layernorm(ctx, x, ln, NULL, 1e-5f);
    mg_embedding(ctx, emb, ids);
    mg_conv2d(ctx, img, cw, NULL, NULL);
    ck_assert_int_eq(c.calls, 0);
    mg_params_free(P);
    mg_ctx_free(ctx);
}
END_TEST

START_TEST(set_error_may_quote_the_last_error) {
    mg_set_error(MG_ERR_IO, "inner problem at offset %d", 12);
    mg_set_error(MG_ERR_FORMAT, "outer: %s", mg_last_error());
    ck_assert_str_eq(mg_last_error(), "outer: inner problem at offset 12");
    mg_wrap_error(MG_ERR_FORMAT, "file.bin");
    ck_assert_str_eq(mg_last_error(), "file.bin: outer: inner problem at offset 12");
}
END_TEST

/* minigrad/checked.h: the exact result when it fits, true (and no wrapped value relied on) when
 * it does not, at the edges of int64_t and size_t. */
START_TEST(checked_size_arithmetic) {
    int64_t r;
    size_t z;
    ck_assert(!mg_ckd_add_i64(&r, INT64_MAX - 1, 1) && r == INT64_MAX);
    ck_assert(mg_ckd_add_i64(&r, INT64_MAX, 1));
    ck_assert(mg_ckd_add_i64(&r, INT64_MIN, -1));
    ck_assert(!mg_ckd_add_i64(&r, -5, 3) && r == -2);
    ck_assert(!mg_ckd_mul_i64(&r, (int64_t)1 << 31, (int64_t)1 << 31) && r == (int64_t)1 << 62);
    ck_assert(mg_ckd_mul_i64(&r, (int64_t)1 << 32, (int64_t)1 << 31));
    ck_assert(mg_ckd_mul_i64(&r, 1152921504606846977, 128)); /* the --batch that once wrapped */
    ck_assert(!mg_ckd_mul_i64(&r, -3, 4) && r == -12);
    ck_assert(mg_ckd_mul_i64(&r, INT64_MIN, -1));
    ck_assert(!mg_ckd_mul_i64(&r, 0, INT64_MAX) && r == 0);
    ck_assert(!mg_ckd_add_size(&z, SIZE_MAX - 2, 2) && z == SIZE_MAX);
    ck_assert(mg_ckd_add_size(&z, SIZE_MAX, 1));
    ck_assert(!mg_ckd_mul_size(&z, SIZE_MAX / 3, 3) && z == SIZE_MAX / 3 * 3);
    ck_assert(mg_ckd_mul_size(&z, SIZE_MAX / 2 + 1, 2));
    ck_assert(!mg_ckd_mul_size(&z, 0, SIZE_MAX) && z == 0);
    ck_assert(!mg_ckd_count3(&r, 2, 3, 7) && r == 42);
    ck_assert(mg_ckd_count3(&r, 2, -3, 7));
    ck_assert(mg_ckd_count3(&r, (int64_t)1 << 21, (int64_t)1 << 21, (int64_t)1 << 21));
    ck_assert(!mg_ckd_bytes(&z, 1000, 4) && z == 4000);
    ck_assert(mg_ckd_bytes(&z, -1, 4));
    ck_assert(mg_ckd_bytes(&z, (int64_t)1 << 62, 4)); /* the history that once wrapped to 0 bytes */
    ck_assert(!mg_ckd_bytes(&z, INT64_MAX, 1) && z == (size_t)INT64_MAX);
}
END_TEST

static Suite *errors_suite(void) {
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, matmul_shape_mismatch_names_both_shapes);
    tcase_add_test(tc, other_shape_errors);
    tcase_add_test(tc, reshape_bad_ndim_or_shape);
    tcase_add_test(tc, ctx_new_too_large);
    tcase_add_test(tc, token_id_out_of_range);
    tcase_add_test(tc, arena_exhausted_is_an_error_not_a_null);
    tcase_add_test(tc, impossible_requests_fail_by_name);
    tcase_add_test(tc, shapes_too_large_to_count_fail_by_name);
    tcase_add_test(tc, growing_arena_settles_into_one_block);
    tcase_add_test(tc, slowly_growing_steps_rarely_remake_the_arena);
    tcase_add_test(tc, op_without_backward);
    tcase_add_test(tc, backward_without_grad_path);
    tcase_add_test(tc, backward_bad_loss);
    tcase_add_test_raise_signal(tc, default_handler_aborts, SIGABRT);
    tcase_add_test(tc, bad_tensor_shapes);
    tcase_add_test(tc, missing_operands_and_data_fail_by_name);
    tcase_add_test(tc, set_error_may_quote_the_last_error);
    tcase_add_test(tc, checked_size_arithmetic);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(errors_suite)
