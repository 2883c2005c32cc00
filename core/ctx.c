/* The step context: arena, tape, error state, and mg_backward. */
#include "minigrad/op.h"
#include "minigrad/checked.h"
#include "minigrad/kernels.h"
#include "ops/internal.h" /* mg_bf16_copy, mg_bf16_operand */

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The arena is a list of blocks. Normally there is one; a growing arena may add more during a
 * step, and reset folds them into one block of the peak size plus a quarter, so steady-state
 * steps never malloc. */
typedef struct arena_block {
    struct arena_block *next;
    size_t cap, used;
    char *base;
} arena_block;

struct mg_ctx {
    arena_block *blocks; /* current block first */
    size_t used_total;   /* bytes handed out in this step, all blocks */
    size_t peak;
    bool fixed;
    bool grad_enabled;
    mg_node *tape;       /* last node */
    int64_t tape_len;
    mg_error_handler on_error;
    void *on_error_user;
    mg_backward_hook on_node; /* mg_ctx_set_backward_hook */
    void *on_node_user;
    bool failed;
    char error[1024];
    int scope_depth; /* may exceed MG_SCOPE_DEPTH_MAX: the labels past it are not kept */
    char scope[MG_SCOPE_DEPTH_MAX][MG_SCOPE_LABEL_MAX];
    mg_tensor dummy;
    float dummy_data[16];
    /* Gradient buffers of intermediate results whose backward has run: dead, so mg_grad hands them
     * out again during the rest of the pass (see mg_backward). Cleared at reset. */
    bool in_backward;
    int n_spare;
    struct spare_grad {
        float *p;
        size_t bytes;
    } spare[256];
    mg_precision precision;
    /* bf16 copies of the parameters used this step (mg_bf16_operand), cleared at reset; with
     * keep_bf16 they are malloc'ed instead and kept across resets, and products of few rows read
     * a packed copy instead (mg_bf16_packed), each made at its first use */
    bool keep_bf16;
    int n_bf16;
    unsigned bf16_epoch; /* mg_ctx_refresh_bf16_weights: kept copies made in an older epoch are redone */
    struct bf16_copy {
        const mg_tensor *t;
        const float *data;
        mg_bf16 *bf;
        uint32_t *packed[2]; /* kept only: bf packed for mg_bgemm_packed as B = t, B = t^T */
        unsigned epoch[3];   /* kept only: the epoch bf, packed[0] and packed[1] were made in */
    } bf16[256];
    /* Transient buffers of one op (mg_ctx_scratch_alloc): one block, kept across resets, that a use
     * past its end regrows to the high-water mark once every buffer is released; until then the
     * excess comes from buffers of their own (`over`, newest first). */
    struct scratch {
        char *base;
        size_t cap, used; /* the block; used is also the offset of its allocations */
        size_t need;      /* bytes handed out and not yet released, block and overflow */
        size_t peak;      /* the largest `need` so far */
        struct scratch_over {
            struct scratch_over *next;
            size_t mark; /* `need` before it was handed out */
            void *p;
        } *over;
    } scratch;
};

enum { ALIGN = 64 };
static const size_t GROW_MIN = (size_t)16 << 20;

static arena_block *block_new(size_t cap) {
    arena_block *b = malloc(sizeof *b);
    if (!b) return NULL;
    b->base = mg_aligned_alloc(cap);
    if (!b->base) {
        free(b);
        return NULL;
    }
    b->cap = cap;
    b->used = 0;
    b->next = NULL;
    return b;
}

static void blocks_free(arena_block *b) {
    while (b) {
        arena_block *n = b->next;
        mg_aligned_free(b->base);
        free(b);
        b = n;
    }
}

mg_ctx *mg_ctx_new(size_t arena_bytes) {
    if (arena_bytes > SIZE_MAX - (ALIGN - 1)) { /* rounding it up to whole ALIGN units would wrap to 0 */
        mg_set_error(MG_ERR_NOMEM, "mg_ctx_new: cannot allocate an arena of %zu bytes (more than any memory)",
                     arena_bytes);
        return NULL;
    }
    mg_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        mg_set_error(MG_ERR_NOMEM, "mg_ctx_new: out of memory");
        return NULL;
    }
    ctx->fixed = arena_bytes > 0;
    size_t cap = ctx->fixed ? (arena_bytes + ALIGN - 1) / ALIGN * ALIGN : GROW_MIN;
    ctx->blocks = block_new(cap);
    if (!ctx->blocks) {
        free(ctx);
        mg_set_error(MG_ERR_NOMEM, "mg_ctx_new: cannot allocate an arena of %zu bytes", cap);
        return NULL;
    }
    ctx->grad_enabled = true;
    ctx->dummy.data = ctx->dummy_data;
    ctx->dummy.ndim = 1;
    ctx->dummy.shape[0] = 1;
    ctx->dummy.numel = 1;
    return ctx;
}

static void bf16_cache_clear(mg_ctx *ctx) {
    if (ctx->keep_bf16)
        for (int i = 0; i < ctx->n_bf16; i++) {
            free(ctx->bf16[i].bf);
            mg_aligned_free(ctx->bf16[i].packed[0]);
            mg_aligned_free(ctx->bf16[i].packed[1]);
        }
    ctx->n_bf16 = 0;
}

void mg_ctx_free(mg_ctx *ctx) {
    if (!ctx) return;
    bf16_cache_clear(ctx);
    ctx->scratch.peak = 0; /* frees what a failed op left, without growing the block first */
    mg_ctx_scratch_release(ctx, 0);
    mg_aligned_free(ctx->scratch.base);
    blocks_free(ctx->blocks);
    free(ctx);
}

void mg_ctx_reset(mg_ctx *ctx) {
    if (ctx->blocks->next) {
        /* The arena grew during the step: replace the chain by one block big enough for the peak,
         * plus a quarter. Steps of one size never touch the extra quarter (untouched pages of a
         * large allocation cost no memory); steps that grow a little each time, as generation
         * re-running a longer context does for every token, would otherwise get a new block, and
         * fault in all its pages, at every reset. */
        size_t cap = (ctx->peak + ctx->peak / 4 + ALIGN - 1) / ALIGN * ALIGN;
        arena_block *b = block_new(cap);
        if (b) {
            blocks_free(ctx->blocks);
            ctx->blocks = b;
        } else {
            /* Keep the chain; rewind every block. */
            for (arena_block *x = ctx->blocks; x; x = x->next) x->used = 0;
        }
    }
    ctx->blocks->used = 0;
    ctx->used_total = 0;
    ctx->tape = NULL;
    ctx->tape_len = 0;
    ctx->n_spare = 0;
    if (!ctx->keep_bf16) ctx->n_bf16 = 0;
    mg_ctx_scratch_release(ctx, 0); /* an op that failed half-way may have left some */
}

void mg_ctx_set_precision(mg_ctx *ctx, mg_precision precision) {
    if (precision != MG_PRECISION_FP32 && precision != MG_PRECISION_BF16) { /* the precision stays as it was */
        mg_ctx_fail(ctx, "mg_ctx_set_precision: unknown precision %d: expected MG_PRECISION_FP32 or MG_PRECISION_BF16",
                    (int)precision);
        return;
    }
    ctx->precision = precision;
    bf16_cache_clear(ctx);
}

void mg_ctx_keep_bf16_weights(mg_ctx *ctx, bool keep) {
    bf16_cache_clear(ctx);
    ctx->keep_bf16 = keep;
}

void mg_ctx_refresh_bf16_weights(mg_ctx *ctx) {
    ctx->bf16_epoch++;
}

bool mg_ctx_keeps_bf16_weights(const mg_ctx *ctx) { return ctx->keep_bf16; }

mg_precision mg_ctx_precision(const mg_ctx *ctx) { return ctx->precision; }

const char *mg_precision_name(mg_precision precision) {
    return precision == MG_PRECISION_BF16 ? "bf16" : precision == MG_PRECISION_FP32 ? "fp32" : "unknown";
}

bool mg_precision_parse(const char *name, mg_precision *out) {
    if (!name) return false;
    if (!strcmp(name, "fp32") || !strcmp(name, "float32")) *out = MG_PRECISION_FP32;
    else if (!strcmp(name, "bf16") || !strcmp(name, "bfloat16")) *out = MG_PRECISION_BF16;
    else return false;
    return true;
}

mg_bf16 *mg_bf16_copy(mg_ctx *ctx, const float *src, int64_t n, const char *what) {
    mg_bf16 *d = mg_ctx_alloc(ctx, (size_t)(n > 0 ? n : 1) * sizeof(mg_bf16), what);
    if (d) mg_f32_to_bf16(n, src, d);
    return d;
}

mg_bf16 *mg_bf16_scratch(mg_ctx *ctx, const float *src, int64_t n, const char *what) {
    mg_bf16 *d = mg_ctx_scratch_alloc(ctx, (size_t)(n > 0 ? n : 1) * sizeof(mg_bf16), what);
    if (d) mg_f32_to_bf16(n, src, d);
    return d;
}

/* A parameter's entry in the copies of this step (or, kept, of this call), or NULL. */
static struct bf16_copy *bf16_entry(mg_ctx *ctx, const mg_tensor *t) {
    for (int i = 0; i < ctx->n_bf16; i++)
        if (ctx->bf16[i].t == t && ctx->bf16[i].data == t->data) return &ctx->bf16[i];
    return NULL;
}

static bool bf16_room(const mg_ctx *ctx) {
    return ctx->n_bf16 < (int)(sizeof ctx->bf16 / sizeof ctx->bf16[0]);
}

const mg_bf16 *mg_bf16_operand(mg_ctx *ctx, const mg_tensor *t, const char *what) {
    if (!(t->flags & MG_PARAM)) return mg_bf16_copy(ctx, t->data, t->numel, what);
    struct bf16_copy *e = bf16_entry(ctx, t);
    if (e && e->bf) {
        if (ctx->keep_bf16 && e->epoch[0] != ctx->bf16_epoch) { /* the weights may have changed: again, in place */
            mg_f32_to_bf16(t->numel, t->data, e->bf);
            e->epoch[0] = ctx->bf16_epoch;
        }
        return e->bf;
    }
    if (ctx->keep_bf16 && (e || bf16_room(ctx))) { /* kept: on the heap (e: so far only packed) */
        mg_bf16 *d = malloc((size_t)(t->numel > 0 ? t->numel : 1) * sizeof(mg_bf16));
        if (d) {
            mg_f32_to_bf16(t->numel, t->data, d);
            if (!e) e = &ctx->bf16[ctx->n_bf16++], *e = (struct bf16_copy){t, t->data, NULL, {NULL, NULL}, {0}};
            e->bf = d;
            e->epoch[0] = ctx->bf16_epoch;
            return d;
        }
    }
    mg_bf16 *d = mg_bf16_copy(ctx, t->data, t->numel, what);
    if (d && !ctx->keep_bf16 && bf16_room(ctx)) ctx->bf16[ctx->n_bf16++] = (struct bf16_copy){t, t->data, d, {NULL, NULL}, {0}};
    return d;
}

const uint32_t *mg_bf16_packed(mg_ctx *ctx, const mg_tensor *t, bool trans, int64_t M) {
    if (!ctx->keep_bf16 || !(t->flags & MG_PARAM) || t->ndim != 2 || M > MG_BF16_PACKED_MAX_ROWS ||
        !mg_bgemm_packed_available(M))
        return NULL;
    struct bf16_copy *e = bf16_entry(ctx, t);
    if (!e) {
        if (!bf16_room(ctx)) return NULL;
        e = &ctx->bf16[ctx->n_bf16++];
        *e = (struct bf16_copy){t, t->data, NULL, {NULL, NULL}, {0}};
    }
    const bool made = e->packed[trans] != NULL;
    if (!made || e->epoch[1 + trans] != ctx->bf16_epoch) { /* once per entry and epoch, from the float32 values */
        const int64_t K = trans ? t->shape[1] : t->shape[0], N = trans ? t->shape[0] : t->shape[1];
        if (!made) {
            const size_t words = mg_bgemm_packed_words(K, N);
            e->packed[trans] = mg_aligned_alloc((words ? words : 1) * sizeof(uint32_t));
        }
        if (e->packed[trans]) mg_bgemm_pack_b_f32(trans, K, N, t->data, t->shape[1], e->packed[trans]);
        e->epoch[1 + trans] = ctx->bf16_epoch;
    }
    return e->packed[trans];
}

/* ---- scratch ---- */

size_t mg_ctx_scratch_mark(const mg_ctx *ctx) { return ctx->scratch.need; }

void *mg_ctx_scratch_alloc(mg_ctx *ctx, size_t bytes, const char *what) {
    if (ctx->failed) return NULL;
    if (bytes > SIZE_MAX - (ALIGN - 1)) { /* rounding it up to ALIGN would wrap around to a small size */
        mg_ctx_fail(ctx, "%s: a request of %zu bytes of scratch is larger than any memory", what, bytes);
        return NULL;
    }
    if (ctx->fixed) return mg_ctx_alloc(ctx, bytes, what); /* the fixed bytes bound the whole step */
    struct scratch *s = &ctx->scratch;
    bytes = bytes ? (bytes + ALIGN - 1) / ALIGN * ALIGN : ALIGN;
    void *p = NULL;
    if (!s->over && s->cap - s->used >= bytes) { /* the block: nothing overflowed since its start */
        p = s->base + s->used;
        s->used += bytes;
    } else {
        struct scratch_over *o = malloc(sizeof *o);
        p = o ? mg_aligned_alloc(bytes) : NULL;
        if (!p) {
            free(o);
            mg_ctx_fail(ctx, "out of memory: %s needs %zu bytes of scratch (%zu already in use)", what, bytes,
                        s->need);
            return NULL;
        }
        *o = (struct scratch_over){s->over, s->need, p};
        s->over = o;
    }
    s->need += bytes;
    if (s->need > s->peak) s->peak = s->need;
    return p;
}

void mg_ctx_scratch_release(mg_ctx *ctx, size_t mark) {
    struct scratch *s = &ctx->scratch;
    if (mark >= s->need) return;
    while (s->over && s->over->mark >= mark) {
        struct scratch_over *o = s->over;
        s->over = o->next;
        mg_aligned_free(o->p);
        free(o);
    }
    if (s->used > mark) s->used = mark;
    s->need = mark;
    if (mark == 0 && s->peak > s->cap) { /* all released: one block for the high-water mark */
        char *b = mg_aligned_alloc(s->peak);
        if (b) {
            mg_aligned_free(s->base);
            s->base = b;
            s->cap = s->peak;
        }
    }
}

size_t mg_ctx_scratch_bytes(const mg_ctx *ctx) { return ctx->scratch.peak; }

size_t mg_ctx_used_bytes(const mg_ctx *ctx) { return ctx->used_total; }
size_t mg_ctx_peak_bytes(const mg_ctx *ctx) { return ctx->peak; }
size_t mg_ctx_capacity(const mg_ctx *ctx) {
    size_t c = 0;
    for (arena_block *b = ctx->blocks; b; b = b->next) c += b->cap;
    return c;
}
int64_t mg_ctx_tape_len(const mg_ctx *ctx) { return ctx->tape_len; }

bool mg_ctx_set_grad_enabled(mg_ctx *ctx, bool enabled) {
    bool prev = ctx->grad_enabled;
    ctx->grad_enabled = enabled;
    return prev;
}
bool mg_ctx_grad_enabled(const mg_ctx *ctx) { return ctx->grad_enabled; }

/* ---- errors ---- */
static void default_handler(mg_ctx *ctx, const char *msg, void *user) {
    (void)ctx;
    (void)user;
    fprintf(stderr, "minigrad: error: %s\n", msg);
    fflush(stderr);
    abort();
}

void mg_ctx_set_error_handler(mg_ctx *ctx, mg_error_handler fn, void *user) {
    ctx->on_error = fn;
    ctx->on_error_user = user;
}

void mg_ctx_set_backward_hook(mg_ctx *ctx, mg_backward_hook fn, void *user) {
    ctx->on_node = fn;
    ctx->on_node_user = user;
}

const char *mg_ctx_error(const mg_ctx *ctx) { return ctx->failed ? ctx->error : NULL; }

void mg_ctx_clear_error(mg_ctx *ctx) {
    ctx->failed = false;
    ctx->error[0] = 0;
}

void mg_ctx_fail(mg_ctx *ctx, const char *fmt, ...) {
    if (ctx->failed) return; /* keep the first error: later ones are consequences */
    const char *label = mg_ctx_scope(ctx);
    int off = label && *label ? snprintf(ctx->error, sizeof ctx->error, "%s: ", label) : 0;
    if (off < 0 || (size_t)off >= sizeof ctx->error) off = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->error + off, sizeof ctx->error - (size_t)off, fmt, ap);
    va_end(ap);
    ctx->failed = true;
    (ctx->on_error ? ctx->on_error : default_handler)(ctx, ctx->error, ctx->on_error_user);
}

void mg_ctx_push_scope(mg_ctx *ctx, const char *label) {
    if (ctx->scope_depth < MG_SCOPE_DEPTH_MAX)
        snprintf(ctx->scope[ctx->scope_depth], MG_SCOPE_LABEL_MAX, "%s", label ? label : "");
    if (ctx->scope_depth < INT32_MAX) ctx->scope_depth++;
}

void mg_ctx_pop_scope(mg_ctx *ctx) {
    if (ctx->scope_depth > 0) ctx->scope_depth--;
}

const char *mg_ctx_scope(const mg_ctx *ctx) {
    if (ctx->scope_depth == 0) return NULL;
    return ctx->scope[(ctx->scope_depth < MG_SCOPE_DEPTH_MAX ? ctx->scope_depth : MG_SCOPE_DEPTH_MAX) - 1];
}

int mg_ctx_scope_depth(const mg_ctx *ctx) { return ctx->scope_depth; }

mg_tensor *mg_ctx_dummy(mg_ctx *ctx) {
    /* Reset each time: a caller may have scribbled on it. */
    memset(&ctx->dummy, 0, sizeof ctx->dummy);
    memset(ctx->dummy_data, 0, sizeof ctx->dummy_data);
    ctx->dummy.data = ctx->dummy_data;
    ctx->dummy.ndim = 1;
    ctx->dummy.shape[0] = 1;
    ctx->dummy.numel = 1;
    return &ctx->dummy;
}

/* ---- arena ---- */
static void *arena_alloc(mg_ctx *ctx, size_t bytes) {
    if (bytes > SIZE_MAX - (ALIGN - 1)) return NULL; /* rounding up would wrap around: fail_exhausted says so */
    bytes = (bytes + ALIGN - 1) / ALIGN * ALIGN;
    if (bytes == 0) bytes = ALIGN;
    arena_block *b = ctx->blocks;
    if (b->cap - b->used < bytes) {
        if (ctx->fixed) return NULL;
        size_t cap = b->cap * 2 > bytes ? b->cap * 2 : bytes;
        arena_block *nb = block_new(cap);
        if (!nb) return NULL;
        nb->next = b;
        ctx->blocks = b = nb;
    }
    void *p = b->base + b->used;
    b->used += bytes;
    ctx->used_total += bytes;
    if (ctx->used_total > ctx->peak) ctx->peak = ctx->used_total;
    return p;
}

static void fail_exhausted(mg_ctx *ctx, const char *what, size_t bytes) {
    if (bytes > SIZE_MAX - (ALIGN - 1))
        mg_ctx_fail(ctx, "%s: a request of %zu bytes of arena memory is larger than any memory", what, bytes);
    else if (ctx->fixed)
        mg_ctx_fail(ctx,
                    "arena exhausted: %s needs %zu bytes, but %zu of the fixed %zu bytes are in use "
                    "(make the arena bigger, or pass 0 to mg_ctx_new to let it grow)",
                    what, bytes, ctx->used_total, mg_ctx_capacity(ctx));
    else
        mg_ctx_fail(ctx, "out of memory: %s needs %zu bytes more (arena already holds %zu bytes)",
                    what, bytes, ctx->used_total);
}

void *mg_ctx_alloc(mg_ctx *ctx, size_t bytes, const char *what) {
    if (ctx->failed) return NULL;
    void *p = arena_alloc(ctx, bytes);
    if (!p) fail_exhausted(ctx, what, bytes);
    return p;
}

/* "2,3,4": the dims of a shape for a message, as many as fit in cap. */
static void format_dims(char *buf, size_t cap, int ndim, const int64_t *shape) {
    int off = 0;
    buf[0] = 0;
    for (int i = 0; i < ndim && off < (int)cap - 24; i++)
        off += snprintf(buf + off, cap - (size_t)off, i ? ",%lld" : "%lld", (long long)shape[i]);
}

static bool valid_shape(mg_ctx *ctx, const char *who, int ndim, const int64_t *shape, int64_t *numel) {
    if (ndim < 0 || ndim > MG_MAX_DIMS) {
        mg_ctx_fail(ctx, "%s: %d dims requested, tensors have 0..%d", who, ndim, MG_MAX_DIMS);
        return false;
    }
    if (ndim > 0 && !shape) {
        mg_ctx_fail(ctx, "%s: shape is NULL for %d dims", who, ndim);
        return false;
    }
    int64_t n = 1;
    bool too_big = false, empty = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            mg_ctx_fail(ctx, "%s: negative dimension %lld at index %d", who, (long long)shape[i], i);
            return false;
        }
        empty |= shape[i] == 0;
        too_big |= mg_ckd_mul_i64(&n, n, shape[i]);
    }
    /* the element count, and its bytes (4 each), must be representable; a zero dimension makes
     * the count 0 whatever the others */
    if (empty) n = 0;
    else if (too_big || n > (int64_t)(SIZE_MAX / 4 < INT64_MAX / 4 ? SIZE_MAX / 4 : INT64_MAX / 4)) {
        char dims[160];
        format_dims(dims, sizeof dims, ndim, shape);
        mg_ctx_fail(ctx, "%s: shape (%s) has more elements than any memory holds", who, dims);
        return false;
    }
    *numel = n;
    return true;
}

static mg_tensor *tensor_alloc(mg_ctx *ctx, const char *who, mg_dtype dtype, int ndim,
                               const int64_t *shape, bool with_data) {
    if (ctx->failed) return mg_ctx_dummy(ctx);
    if (dtype != MG_F32 && dtype != MG_I32) {
        mg_ctx_fail(ctx, "%s: unknown dtype %d: expected MG_F32 or MG_I32", who, (int)dtype);
        return mg_ctx_dummy(ctx);
    }
    int64_t numel;
    if (!valid_shape(ctx, who, ndim, shape, &numel)) return mg_ctx_dummy(ctx);
    size_t data_bytes = with_data ? (size_t)numel * 4 : 0;
    mg_tensor *t = arena_alloc(ctx, sizeof(mg_tensor));
    void *data = t && with_data ? arena_alloc(ctx, data_bytes) : NULL;
    if (!t || (with_data && !data)) {
        char dims[160], what[256];
        format_dims(dims, sizeof dims, ndim, shape);
        snprintf(what, sizeof what, "%s output (%s)", who, dims);
        fail_exhausted(ctx, what, data_bytes + sizeof(mg_tensor));
        return mg_ctx_dummy(ctx);
    }
    memset(t, 0, sizeof *t);
    t->data = data;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->numel = numel;
    t->dtype = dtype;
    return t;
}

mg_tensor *mg_tensor_new(mg_ctx *ctx, mg_dtype dtype, int ndim, const int64_t *shape) {
    return tensor_alloc(ctx, "mg_tensor_new", dtype, ndim, shape, true);
}

mg_tensor *mg_op_output(mg_ctx *ctx, const char *op, int ndim, const int64_t *shape) {
    return tensor_alloc(ctx, op, MG_F32, ndim, shape, true);
}

mg_tensor *mg_zeros(mg_ctx *ctx, int ndim, const int64_t *shape) {
    mg_tensor *t = tensor_alloc(ctx, "mg_zeros", MG_F32, ndim, shape, true);
    if (!ctx->failed) memset(t->data, 0, (size_t)t->numel * 4);
    return t;
}

mg_tensor *mg_tensor_wrap(mg_ctx *ctx, mg_dtype dtype, int ndim, const int64_t *shape, void *data) {
    mg_tensor *t = tensor_alloc(ctx, "mg_tensor_wrap", dtype, ndim, shape, false);
    if (!ctx->failed) t->data = data;
    return t;
}

void mg_tensor_set_requires_grad(mg_tensor *t, bool on) {
    if (on)
        t->flags |= MG_REQUIRES_GRAD;
    else
        t->flags &= ~(uint32_t)MG_REQUIRES_GRAD;
}

char *mg_shape_str(const mg_tensor *t, char *buf, size_t n) {
    size_t off = 0;
    off += (size_t)snprintf(buf + off, n - off, "(");
    for (int i = 0; i < t->ndim && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, i ? ",%lld" : "%lld", (long long)t->shape[i]);
    if (off < n) snprintf(buf + off, n - off, ")");
    return buf;
}

bool mg_same_shape(const mg_tensor *a, const mg_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

/* ---- tape ---- */
mg_node *mg_op_record(mg_ctx *ctx, const mg_op_def *def, mg_tensor *out, int n_in, mg_tensor *const *in) {
    if (ctx->failed || !ctx->grad_enabled) return NULL;
    bool need = false;
    for (int i = 0; i < n_in; i++) need |= in[i] && mg_requires_grad(in[i]);
    if (!need) return NULL;
    mg_node *n = mg_ctx_alloc(ctx, sizeof *n, def->name);
    if (!n) return NULL;
    memset(n, 0, sizeof *n);
    n->op = def;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) n->in[i] = in[i];
    n->out = out;
    n->prev = ctx->tape;
    ctx->tape = n;
    ctx->tape_len++;
    out->node = n;
    out->flags |= MG_REQUIRES_GRAD;
    return n;
}

/* The smallest spare gradient buffer that holds `bytes` without wasting more than half of itself
 * (a small gradient must not take a large buffer that a later large one could reuse). */
static float *take_spare(mg_ctx *ctx, size_t bytes) {
    int best = -1;
    for (int i = 0; i < ctx->n_spare; i++) {
        size_t b = ctx->spare[i].bytes;
        if (b >= bytes && b / 2 <= bytes && (best < 0 || b < ctx->spare[best].bytes)) best = i;
    }
    if (best < 0) return NULL;
    float *p = ctx->spare[best].p;
    ctx->spare[best] = ctx->spare[--ctx->n_spare];
    return p;
}

/* Zeroing an activation's gradient is a pass over memory the training step makes once per
 * activation: on every core when it is big enough to pay for waking them. */
static void zero_floats(float *p, int64_t n) {
    enum { CHUNK = 1 << 16 };
    if (n < 4 * CHUNK) {
        memset(p, 0, (size_t)n * sizeof(float));
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < (n + CHUNK - 1) / CHUNK; c++) {
        const int64_t lo = c * CHUNK, hi = lo + CHUNK < n ? lo + CHUNK : n;
        memset(p + lo, 0, (size_t)(hi - lo) * sizeof(float));
    }
}

float *mg_grad_for_write(mg_ctx *ctx, mg_tensor *t, bool *fresh) {
    *fresh = false;
    if (t->grad) return t->grad;
    size_t bytes = (size_t)t->numel * 4;
    float *g = ctx->in_backward ? take_spare(ctx, bytes) : NULL;
    if (!g) g = mg_ctx_alloc(ctx, bytes, "gradient buffer");
    *fresh = g != NULL;
    t->grad = g;
    return g;
}

float *mg_grad(mg_ctx *ctx, mg_tensor *t) {
    bool fresh;
    float *g = mg_grad_for_write(ctx, t, &fresh);
    if (fresh) zero_floats(g, t->numel);
    return g;
}

void mg_retain_grad(mg_tensor *t) { t->flags |= MG_RETAIN_GRAD; }

/* After its node's backward, an intermediate result's gradient is dead: every op that consumed the
 * result was recorded later and so has already run. Its buffer goes to the spares, and the tensor's
 * grad is reset to NULL so that nothing reads a buffer another gradient now owns. */
static void retire_grad(mg_ctx *ctx, mg_tensor *t) {
    if (t->flags & MG_RETAIN_GRAD) return;
    if (ctx->n_spare < (int)(sizeof ctx->spare / sizeof ctx->spare[0]))
        ctx->spare[ctx->n_spare++] = (struct spare_grad){t->grad, (size_t)t->numel * 4};
    t->grad = NULL;
}

void mg_backward(mg_ctx *ctx, mg_tensor *loss) {
    if (ctx->failed) return;
    char s[64];
    if (!loss) {
        mg_ctx_fail(ctx, "mg_backward: loss is NULL");
        return;
    }
    if (loss->dtype != MG_F32) {
        mg_ctx_fail(ctx, "mg_backward: loss%s is int32: gradients flow only through float32 tensors",
                    mg_shape_str(loss, s, sizeof s));
        return;
    }
    if (loss->numel != 1) {
        mg_ctx_fail(ctx, "mg_backward: loss%s must have exactly one element", mg_shape_str(loss, s, sizeof s));
        return;
    }
    if (!mg_requires_grad(loss)) {
        mg_ctx_fail(ctx, "mg_backward: the loss does not depend on anything that requires a gradient "
                         "(no parameter feeds it, or it was computed with gradients disabled)");
        return;
    }
    /* Gradients of intermediate results belong to this pass: a second backward over the same tape
     * must not add the first pass's flow again (only retained ones are still there). Leaves
     * (parameters, inputs) keep accumulating. */
    for (mg_node *n = ctx->tape; n; n = n->prev)
        if (n->out->grad) zero_floats(n->out->grad, n->out->numel);
    float *g = mg_grad(ctx, loss);
    if (!g) return;
    g[0] = 1.0f;
    ctx->in_backward = true;
    for (mg_node *n = ctx->tape; n && !ctx->failed; n = n->prev) {
        if (!n->out->grad) { /* nothing flowed back into this node */
            if (ctx->on_node) ctx->on_node(ctx, n, ctx->on_node_user);
            continue;
        }
        if (!n->op->backward) {
            int k = 0;
            while (k < n->n_in && !(n->in[k] && mg_requires_grad(n->in[k]))) k++;
            mg_ctx_fail(ctx, "mg_backward: op '%s' has no backward (its input #%d requires a gradient)",
                        n->op->name, k);
            break;
        }
        const size_t mark = mg_ctx_scratch_mark(ctx);
        n->op->backward(ctx, n);
        mg_ctx_scratch_release(ctx, mark); /* a backward's scratch dies with it */
        retire_grad(ctx, n->out);
        if (ctx->on_node) ctx->on_node(ctx, n, ctx->on_node_user);
    }
    ctx->in_backward = false;
}

/* ---- shared reduction ---- */
enum { REDUCE_CHUNK = 64 };

void mg_reduce_rows_add(mg_ctx *ctx, const float *src, int64_t R, int64_t N, float *dst) {
    /* Partial sums over fixed chunks of REDUCE_CHUNK rows, then the chunks in order: the order of
     * additions depends only on R, never on the thread count. */
    int64_t nchunk = (R + REDUCE_CHUNK - 1) / REDUCE_CHUNK;
    if (nchunk <= 1) {
        for (int64_t r = 0; r < R; r++)
            for (int64_t j = 0; j < N; j++) dst[j] += src[r * N + j];
        return;
    }
    float *part = mg_ctx_alloc(ctx, (size_t)(nchunk * N) * 4, "row reduction scratch");
    if (!part) return;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nchunk; c++) {
        float *p = part + c * N;
        int64_t r0 = c * REDUCE_CHUNK, r1 = r0 + REDUCE_CHUNK < R ? r0 + REDUCE_CHUNK : R;
        for (int64_t j = 0; j < N; j++) p[j] = 0.0f;
        for (int64_t r = r0; r < r1; r++)
            for (int64_t j = 0; j < N; j++) p[j] += src[r * N + j];
    }
    for (int64_t c = 0; c < nchunk; c++)
        for (int64_t j = 0; j < N; j++) dst[j] += part[c * N + j];
}
