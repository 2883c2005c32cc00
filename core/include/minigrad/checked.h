/* minigrad/checked.h: overflow-checked arithmetic for counts and sizes.
 *
 * Every size that comes from outside (a flag, a config key, checkpoint metadata, a file's length)
 * goes through these before it reaches malloc: a product such as batch x block x sizeof(int32_t)
 * that wraps around would allocate a small buffer and then overrun it.
 *
 * The convention is C23's ckd_add / ckd_mul: the exact result is stored in *r when it fits, and the
 * function returns true when it does NOT fit (overflow, or a negative count where one is not
 * allowed), so that the error path reads naturally:
 *
 *     int64_t tokens;
 *     size_t bytes;
 *     if (mg_ckd_mul_i64(&tokens, batch, block) || mg_ckd_bytes(&bytes, tokens, sizeof(int32_t)))
 *         return mg_set_error(MG_ERR_INVALID, "--batch %lld x block %lld is too large", ...);
 *     int32_t *ids = malloc(bytes);
 *
 * All functions are static inline and need nothing but the C library; *r is left unspecified when
 * they return true. */
#ifndef MINIGRAD_CHECKED_H
#define MINIGRAD_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define MG_CKD_BUILTINS_ 1
#endif

/* *r = a + b; true when the sum does not fit an int64_t. */
static inline bool mg_ckd_add_i64(int64_t *r, int64_t a, int64_t b) {
#ifdef MG_CKD_BUILTINS_
    return __builtin_add_overflow(a, b, r);
#else
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return true;
    *r = a + b;
    return false;
#endif
}

/* *r = a * b; true when the product does not fit an int64_t. */
static inline bool mg_ckd_mul_i64(int64_t *r, int64_t a, int64_t b) {
#ifdef MG_CKD_BUILTINS_
    return __builtin_mul_overflow(a, b, r);
#else
    if (a == 0 || b == 0) {
        *r = 0;
        return false;
    }
    if (a > 0 ? (b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a)
              : (b > 0 ? a < INT64_MIN / b : a < INT64_MAX / b))
        return true;
    *r = a * b;
    return false;
#endif
}

/* *r = a + b; true when the sum does not fit a size_t. */
static inline bool mg_ckd_add_size(size_t *r, size_t a, size_t b) {
    if (a > SIZE_MAX - b) return true;
    *r = a + b;
    return false;
}

/* *r = a * b; true when the product does not fit a size_t. */
static inline bool mg_ckd_mul_size(size_t *r, size_t a, size_t b) {
    if (b != 0 && a > SIZE_MAX / b) return true;
    *r = a * b;
    return false;
}

/* *r = a * b * c for counts (each at least 0); true when one is negative or the product does not
 * fit an int64_t. */
static inline bool mg_ckd_count3(int64_t *r, int64_t a, int64_t b, int64_t c) {
    int64_t ab;
    return a < 0 || b < 0 || c < 0 || mg_ckd_mul_i64(&ab, a, b) || mg_ckd_mul_i64(r, ab, c);
}

/* The bytes of `count` elements of `elem` bytes each: true when count is negative or the size does
 * not fit a size_t. */
static inline bool mg_ckd_bytes(size_t *r, int64_t count, size_t elem) {
    if (count < 0 || (uint64_t)count > (uint64_t)SIZE_MAX) return true;
    return mg_ckd_mul_size(r, (size_t)count, elem);
}

#ifdef __cplusplus
}
#endif
#endif
