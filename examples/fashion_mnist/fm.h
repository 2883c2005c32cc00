/* fashion_mnist: a small CNN on Fashion-MNIST. The data side (IDX files, gzip-compressed, read with
 * zlib) is a small library that the tests link; main.c is the program. */
#ifndef FM_H
#define FM_H

#include "minigrad/base.h"
#include "minigrad/layer.h"
#include "minigrad/params.h"

#include <stdbool.h>
#include <stdint.h>

enum { FM_SIDE = 28, FM_PIXELS = FM_SIDE * FM_SIDE, FM_CLASSES = 10 };

/* Where Debian's package dataset-fashion-mnist puts the files. */
#define FM_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#define FM_PACKAGE_HINT                                                                             \
    "install the Debian package dataset-fashion-mnist (sudo apt-get install dataset-fashion-mnist) " \
    "or pass --data DIR"

extern const char *const fm_class_names[FM_CLASSES];

/* One split: n images of 28x28 bytes (row-major, 0 = background) and their labels 0..9. */
typedef struct fm_set {
    int64_t n;
    uint8_t *images; /* n * FM_PIXELS */
    uint8_t *labels; /* n */
} fm_set;

/* Reads one gzip-compressed (or plain) IDX file of unsigned bytes with `ndim` dims (3 for images,
 * 1 for labels); dims[0] entries are kept, at most `limit` of them when limit > 0 (only those are
 * read). *data is malloc'ed. Errors name the file: missing (with the package to install),
 * not gzip or corrupt (zlib's reason), wrong magic, truncated (how many bytes were expected and
 * found). */
mg_status fm_read_idx(const char *path, int ndim, int64_t limit, uint8_t **data, int64_t dims[3]);

/* The split `which` ("train" or "t10k") from dir: <which>-images-idx3-ubyte.gz and
 * <which>-labels-idx1-ubyte.gz, 28x28 images, equal counts, labels 0..9. limit > 0 keeps the first
 * `limit` examples. */
mg_status fm_load(const char *dir, const char *which, int64_t limit, fm_set *out);
void fm_set_free(fm_set *s);

/* True when both splits' files exist in dir. */
bool fm_present(const char *dir);

/* ---- the model (model.c) ----
 * conv 1->32 3x3 pad 1, relu, maxpool 2; conv 32->64 3x3 pad 1, relu, maxpool 2;
 * linear 3136->128, relu, linear 128->10. Parameters conv1.weight (32,1,3,3), conv1.bias,
 * conv2.weight (64,32,3,3), conv2.bias, fc1.weight (3136,128: minigrad's linear stores [in, out]),
 * fc1.bias, fc2.weight (128,10), fc2.bias. */
typedef struct fm_model {
    mg_params *params;
    mg_layer *conv1, *conv2, *fc1, *fc2;
} fm_model;

/* Declares the layers (allocate m->params with mg_params_alloc before use). */
mg_status fm_model_make(fm_model *m);
void fm_model_free(fm_model *m);
/* x (B,1,28,28) -> logits (B,10) */
mg_tensor *fm_forward(fm_model *m, mg_ctx *ctx, mg_tensor *x);
/* The examples idx[0..B) of s as x (B,1,28,28), pixels scaled to [0, 1], and int32 targets (B). */
void fm_batch(mg_ctx *ctx, const fm_set *s, const int64_t *idx, int64_t B, mg_tensor **x, mg_tensor **y);

#endif
