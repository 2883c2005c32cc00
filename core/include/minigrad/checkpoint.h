/* minigrad/checkpoint.h: saving and restoring a parameter store and its training state.
 *
 * Weights go to one safetensors file, every parameter under its own name (so a GPT's store,
 * whose parameters carry the GPT-2 names, gives a file the wider ecosystem reads), with the
 * caller's metadata. The training state (optimizer moments and step, plus whatever the caller
 * adds, e.g. RNG states and the data position) goes to a second file beside it, tensor names
 * "opt.m.<param>" and "opt.v.<param>". Together they let a run resume exactly.
 *
 * Each write is atomic (temp file + rename, fsync'ed): a failed save never harms the previous file.
 * Writing the two files as one consistent pair is the trainer's business (minigrad/train.h).
 * Loads validate everything (names, shapes, optimizer kind, the file's checksum, finite values)
 * before writing a single value; a NaN or infinite value is MG_ERR_NONFINITE naming the tensor.
 * Ownership: nothing is retained; *file_out, when requested, belongs to the caller (mg_st_close).
 */
#ifndef MINIGRAD_CHECKPOINT_H
#define MINIGRAD_CHECKPOINT_H

#include "minigrad/export.h"

#include "minigrad/optim.h"
#include "minigrad/params.h"
#include "minigrad/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* grads == true writes the gradient slab instead of the values, under the same names
 * (gradient dumps for cross-checking against other frameworks). */
MG_API mg_status mg_checkpoint_save(const char *path, const mg_params *p, bool grads, const mg_st_meta *meta,
                             int n_meta);

/* Every parameter must be in the file with its exact shape, and nothing else may be.
 * file_out (may be NULL) receives the open file for reading its metadata. */
MG_API mg_status mg_checkpoint_load(const char *path, mg_params *p, mg_st_file **file_out);

/* The state of the trainable parameters only (frozen ones and buffers have none); a load needs
 * the file to hold exactly those, so a run resumes with the parameters frozen as they were.
 * p must be the store o was made for (MG_ERR_INVALID otherwise, before any file is touched);
 * meta holds n_meta >= 0 entries (meta may be NULL when n_meta is 0). */
MG_API mg_status mg_train_state_save(const char *path, const mg_optim *o, const mg_params *p,
                              const mg_st_meta *meta, int n_meta);
MG_API mg_status mg_train_state_load(const char *path, mg_optim *o, const mg_params *p, mg_st_file **file_out);

/* Metadata values are strings; these read integers back with errors naming the file and key. */
MG_API mg_status mg_meta_get_u64(const mg_st_file *f, const char *key, uint64_t *out);
MG_API mg_status mg_meta_get_i64(const mg_st_file *f, const char *key, int64_t *out);
/* Decimal text of v in buf (at least 24 bytes); returns buf. */
MG_API char *mg_meta_fmt_u64(char *buf, uint64_t v);
MG_API char *mg_meta_fmt_i64(char *buf, int64_t v);

#ifdef __cplusplus
}
#endif
#endif
