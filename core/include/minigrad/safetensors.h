/* minigrad/safetensors.h: checkpoint files in the safetensors format, so that tools from the wider
 * ecosystem (Python `safetensors`, PyTorch, numpy) read what minigrad writes and the other way
 * round.
 *
 * Layout of a file: an 8-byte little-endian unsigned header length N, N bytes of UTF-8 JSON, then
 * the data area. The JSON object maps each tensor name to
 *   {"dtype": "F32", "shape": [d0, ...], "data_offsets": [begin, end]}
 * (offsets in bytes, relative to the start of the data area, end exclusive) plus an optional
 * "__metadata__" object of string -> string, where minigrad keeps the model config (docs/checkpoint-format.md).
 * Only F32 tensors of 0 to MG_MAX_DIMS dims are supported; values are little-endian on disk.
 *
 * Ownership:
 *  - mg_safetensors_write borrows everything it is given and keeps nothing.
 *  - mg_safetensors_open returns an mg_st_file that the caller frees with mg_st_close. It keeps the
 *    file descriptor open (tensor data is read on demand, nothing is mapped) and owns copies of all
 *    names, shapes and metadata strings: every pointer a query returns stays valid until
 *    mg_st_close and must not be freed.
 *  - mg_st_dest.data is borrowed: loads copy into it and never keep it.
 * Errors: every function that can fail returns an mg_status < 0 and sets mg_last_error() to a
 * message that starts with the file name and names the byte offset, tensor or key at fault.
 * An mg_st_file is read-only after open; reads from several threads at once are safe.
 */
#ifndef MINIGRAD_SAFETENSORS_H
#define MINIGRAD_SAFETENSORS_H

#include "minigrad/export.h"

#include "minigrad/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Headers larger than this are refused as corrupt rather than allocated (same limit as the
 * reference implementation). */
#define MG_ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)

/* ---- writing ---- */

typedef struct mg_st_entry {
    const char *name; /* UTF-8, non-empty, unique, not "__metadata__"; any character is escaped */
    int ndim;         /* 0..MG_MAX_DIMS; a scalar has ndim 0 and one element */
    int64_t shape[MG_MAX_DIMS];
    const float *data; /* product(shape) contiguous values; may be NULL when that product is 0 */
} mg_st_entry;

typedef struct mg_st_meta {
    const char *key;   /* UTF-8, unique */
    const char *value; /* UTF-8 */
} mg_st_meta;

/* The metadata key under which every file minigrad writes records its checksum:
 * "crc32:" and 8 lowercase hex digits, the CRC-32 (zlib's) of the metadata pairs, the tensor
 * descriptions and the tensor data (docs/checkpoint-format.md has the exact byte sequence).
 * Callers cannot set it themselves. */
#define MG_ST_CHECKSUM_KEY "checksum"

/* Writes `n` tensors and `n_meta` metadata pairs to `path`, atomically: the bytes go to
 * "<path>.tmp.<pid>" in the same directory, which is flushed, fsync'ed and renamed over `path`,
 * and the directory is fsync'ed so that the rename itself is durable. On any failure the temporary
 * file is removed and a file already at `path` is left untouched.
 *
 * Layout written: the JSON header holds "__metadata__" first (keys in the order given, then
 * MG_ST_CHECKSUM_KEY), then the tensors in the order given; the data area holds the tensors in
 * that same order, back to back. The header is padded with spaces so that the data area starts at a file
 * offset that is a multiple of 8. A symbolic link at `path` is replaced, not followed; the new file
 * gets mode 0666 less the umask. All arguments are checked before anything is created:
 * MG_ERR_INVALID names the offending entry (empty, duplicate or reserved name or key, bad UTF-8,
 * ndim or shape out of range, NULL data); MG_ERR_IO names the path and the system error. */
MG_API mg_status mg_safetensors_write(const char *path, const mg_st_entry *tensors, int n,
                               const mg_st_meta *meta, int n_meta);

/* ---- reading ---- */

typedef struct mg_st_file mg_st_file;

typedef struct mg_st_tensor_info {
    const char *name;
    const char *dtype; /* always "F32": open refuses any other dtype */
    int ndim;
    int64_t shape[MG_MAX_DIMS]; /* entries past ndim are 1 */
    int64_t numel;              /* product of the shape (1 for a scalar) */
    uint64_t begin, end;        /* byte range in the data area, as in the file */
} mg_st_tensor_info;

/* Opens and validates the whole header up front, so that a file that opens is safe to query and
 * read. The FIRST problem found is reported, in this order: file too short for the length
 * prefix; header length over MG_ST_MAX_HEADER; header longer than the file; NUL byte or invalid
 * UTF-8 in the header (file offset); header not starting with '{'; invalid JSON (file offset of
 * the error); garbage after the object; an escaped NUL (\u0000), which would silently cut a C
 * string short (file offset); then each entry in file order: "__metadata__" not an object
 * of strings (the key), a tensor entry that is not an object, a missing or mistyped
 * "dtype"/"shape"/"data_offsets", a dtype other than F32 ("unsupported" for the other safetensors
 * dtypes, "unknown" otherwise), shape values that are not non-negative integers, more than
 * MG_MAX_DIMS dims, begin > end, end beyond the data area (both sizes), a byte size that is not
 * 4 * product(shape), a duplicate name; then across tensors: two tensors overlapping (both names),
 * a gap between tensors or bytes after the last one (the format forbids unindexed bytes).
 * Numbers in the header are read as JSON doubles: integers up to 2^53 are exact, and an integral
 * value written as 2.0 cannot be told apart from 2 and is accepted.
 * On success *out is a new file the caller closes with mg_st_close; on failure *out is NULL. */
MG_API mg_status mg_safetensors_open(const char *path, mg_st_file **out);
MG_API void mg_st_close(mg_st_file *f); /* NULL is a no-op */

MG_API const char *mg_st_path(const mg_st_file *f);
MG_API int mg_st_count(const mg_st_file *f);                            /* number of tensors */
MG_API const mg_st_tensor_info *mg_st_info(const mg_st_file *f, int i); /* NULL if i is out of range */
MG_API int mg_st_find(const mg_st_file *f, const char *name);           /* index, or -1 if absent */

/* Copies tensor i into dst, which must hold exactly n_elems == numel floats (no alignment needed
 * on either side). MG_ERR_INVALID for a bad index or count; MG_ERR_IO if the file can no longer be
 * read (for instance it was truncated after open). A raw read: neither the checksum nor the values
 * are checked (mg_st_load does both). */
MG_API mg_status mg_st_read_f32(const mg_st_file *f, int i, float *dst, int64_t n_elems);

/* Metadata, in file order. mg_st_meta_get returns NULL when the key is absent. */
MG_API int mg_st_meta_count(const mg_st_file *f);
MG_API const char *mg_st_meta_key(const mg_st_file *f, int i);   /* NULL if i is out of range */
MG_API const char *mg_st_meta_value(const mg_st_file *f, int i); /* NULL if i is out of range */
MG_API const char *mg_st_meta_get(const mg_st_file *f, const char *key);

/* ---- the checksum ---- */

/* The checksum of the file's content as it is now (reads the whole data area), whether or not the
 * file records one: what MG_ST_CHECKSUM_KEY would hold. */
MG_API mg_status mg_st_checksum(const mg_st_file *f, uint32_t *out);

/* Reads the whole data area and compares its checksum with the one the file records:
 * MG_ERR_FORMAT naming the file on a mismatch or a malformed value. A file that records none
 * (written by another tool or by a minigrad from before checksums) passes unchecked. */
MG_API mg_status mg_st_verify(const mg_st_file *f);

/* ---- validated load of a known set of tensors (model checkpoints) ---- */

typedef struct mg_st_dest {
    const char *name;
    int ndim;
    int64_t shape[MG_MAX_DIMS];
    float *data; /* room for product(shape) floats; borrowed */
} mg_st_dest;

enum {
    /* Tensors in the file that no dest names are ignored instead of being an error (partial loads,
     * e.g. inference weights out of a file that also holds something else). */
    MG_ST_ALLOW_EXTRA = 1u << 0,
    /* NaN and infinite values are loaded instead of being refused. */
    MG_ST_ALLOW_NONFINITE = 1u << 1,
};

/* Fills every dest from the open file. Each dest must be present with exactly its shape
 * ("h.3.ln_1.weight: shape in file (256) vs model (512)"), a missing one is an error
 * ("missing tensor 'wte.weight'"), and so is a file tensor that no dest names ("unexpected
 * tensor 'foo' in file") unless flags has MG_ST_ALLOW_EXTRA. Problems are reported in dest order
 * (missing, then shape), then extras in file order. Then the whole data area is read once: a file
 * that records a checksum must match it (MG_ERR_FORMAT, "checksum mismatch", naming the file), and
 * every value of the tensors loaded must be finite (MG_ERR_NONFINITE naming the tensor and the
 * element) unless flags has MG_ST_ALLOW_NONFINITE. Everything is validated before the first byte
 * is copied, so on a validation error no dest has been written to. Only an I/O error during the
 * copy itself (the file changed on disk after open) can leave dests partly written. */
MG_API mg_status mg_st_load(const mg_st_file *f, const mg_st_dest *dest, int n, unsigned flags);

/* Opens `path`, loads every dest strictly (no extras allowed; checksum and values checked as
 * mg_st_load does), and closes the file, or hands it to *meta_out (when meta_out is not NULL) so
 * the caller can read the metadata; the caller then owns it and closes it with mg_st_close. On
 * failure *meta_out is NULL. */
MG_API mg_status mg_safetensors_load(const char *path, const mg_st_dest *dest, int n,
                              mg_st_file **meta_out);

#ifdef __cplusplus
}
#endif
#endif
