/* NumPy/PyTorch broadcasting for the elementwise ops (private to core/ops/).
 *
 * Shapes align at their last dim; a dim of size 1 (or a missing leading dim) stretches to the
 * other operands' size. An mg_bcast plan describes an output of the broadcast shape as `rows`
 * rows of `inner` contiguous elements, with each operand's element stride per dim (0 along the
 * dims it is broadcast over). Size-1 output dims are dropped and dims every operand walks
 * contiguously together are merged, so the plan has as few dims as the broadcast allows. */
#ifndef MG_OPS_BROADCAST_H
#define MG_OPS_BROADCAST_H

#include "internal.h"

#define MG_BC_MAX_OPS 3

typedef struct mg_bcast {
    int n;                                        /* operands */
    int ndim;                                     /* merged dims, >= 1 */
    int64_t shape[MG_MAX_DIMS];                   /* merged output shape */
    int64_t stride[MG_BC_MAX_OPS][MG_MAX_DIMS];   /* operand k's element stride along each dim */
    int64_t numel, inner, rows;                   /* inner = shape[ndim - 1], rows = numel / inner */
} mg_bcast;

/* The broadcast shape of ts[0..n) into *ndim, shape. On a mismatch raises
 * "<op>: a(2,3) and b(4) cannot broadcast: dim -1 is 3 vs 4" (names[k] names ts[k]) and returns
 * false. */
bool mg_broadcast_shape(mg_ctx *ctx, const char *op, int n, const char *const *names, mg_tensor *const *ts,
                        int *ndim, int64_t *shape);

/* The plan for an output of (ndim, shape), the broadcast shape of ts[0..n). */
void mg_bcast_plan(mg_bcast *bc, int ndim, const int64_t *shape, int n, mg_tensor *const *ts);

/* Each operand's offset of the first element of row r. */
static inline void mg_bcast_row(const mg_bcast *bc, int64_t r, int64_t *off) {
    for (int k = 0; k < bc->n; k++) off[k] = 0;
    for (int d = bc->ndim - 2; d >= 0; d--) {
        const int64_t i = r % bc->shape[d];
        r /= bc->shape[d];
        for (int k = 0; k < bc->n; k++) off[k] += i * bc->stride[k][d];
    }
}

/* Output elements per parallel block of the forward loops (blocks are independent: any thread
 * count gives the same bits). */
#define MG_BC_BLOCK 8192

/* Runs SEG(o, len, off) for every segment of the output: o the flat output index of its first
 * element, len elements along the inner dim, off[k] operand k's offset of that element. Blocks of
 * MG_BC_BLOCK elements go to the OpenMP threads when the output is large. */
#define MG_BC_FOR_SEGMENTS(bc, SEG)                                                                \
    do {                                                                                           \
        const mg_bcast *bc_ = (bc);                                                                \
        const int64_t nblk_ = (bc_->numel + MG_BC_BLOCK - 1) / MG_BC_BLOCK;                        \
        _Pragma("omp parallel for schedule(static) if (bc_->numel > 65536)")                       \
        for (int64_t blk_ = 0; blk_ < nblk_; blk_++) {                                             \
            int64_t o = blk_ * MG_BC_BLOCK;                                                        \
            const int64_t o1_ = o + MG_BC_BLOCK < bc_->numel ? o + MG_BC_BLOCK : bc_->numel;       \
            int64_t r_ = o / bc_->inner, j_ = o % bc_->inner;                                      \
            while (o < o1_) {                                                                      \
                int64_t off[MG_BC_MAX_OPS];                                                        \
                mg_bcast_row(bc_, r_, off);                                                        \
                for (int k_ = 0; k_ < bc_->n; k_++) off[k_] += j_ * bc_->stride[k_][bc_->ndim - 1]; \
                const int64_t len = bc_->inner - j_ < o1_ - o ? bc_->inner - j_ : o1_ - o;         \
                SEG;                                                                               \
                o += len, r_++, j_ = 0;                                                            \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* dst (t's shape) += sign * the sum of src (the output shape (ndim, shape), which t broadcasts
 * to) over the dims t is broadcast along. Sums run in double over fixed chunks combined in order:
 * the result depends only on the shapes, never on the thread count. False (an error raised) if
 * the arena is exhausted. */
bool mg_bcast_reduce(mg_ctx *ctx, mg_tensor *t, int ndim, const int64_t *shape, const float *src,
                     float sign, float *dst);

/* The binary ops of binary.c, also the general path of mg_add and mg_mul. */
typedef enum mg_binary_kind { MG_BIN_ADD, MG_BIN_SUB, MG_BIN_MUL, MG_BIN_DIV, MG_BIN_MAX, MG_BIN_MIN } mg_binary_kind;

/* c = a (kind) b over the broadcast shape, recorded with def; errors name def->name. */
mg_tensor *mg_binary_broadcast(mg_ctx *ctx, const mg_op_def *def, mg_binary_kind kind, mg_tensor *a, mg_tensor *b);
/* The backward of a node mg_binary_broadcast recorded. */
void mg_binary_broadcast_backward(mg_ctx *ctx, mg_node *n, mg_binary_kind kind);

#endif
