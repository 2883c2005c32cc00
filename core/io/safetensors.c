/* safetensors checkpoint files: the writer, the validating reader and the validated load.
 *
 * The reader trusts nothing in the file: every length, offset and shape is checked against the
 * file size before it is used, and all checks run at open so that later queries cannot fail on
 * content. JSON is parsed by cJSON; its numbers are doubles, hence the 2^53 ceiling on integers.
 */
#include "minigrad/safetensors.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_BIG_ENDIAN 1
#else
#define HOST_BIG_ENDIAN 0
#endif

/* Largest integer a JSON number (a double) holds exactly. */
#define JSON_INT_MAX 9007199254740992.0

typedef unsigned long long ull; /* for printf: uint64_t and %llu without casts in every message */

/* ---- small helpers ---- */

/* Index of the first byte that does not start a well-formed UTF-8 sequence (overlong forms,
 * surrogates and code points above U+10FFFF included), or n when all of s is valid. */
static size_t utf8_invalid_at(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else {
            return i;
        }
        if (n - i < len || s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return i;
        i += len;
    }
    return n;
}

static bool utf8_valid(const char *s) {
    size_t n = strlen(s);
    return utf8_invalid_at((const unsigned char *)s, n) == n;
}

/* "(2,3,4)", "()" for a scalar. */
static const char *fmt_shape(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < ndim && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, d ? ",%lld" : "%lld", (long long)shape[d]);
    if (k < cap) snprintf(buf + k, cap - k, ")");
    return buf;
}

/* numel of a validated shape; false when it (or its byte size) would not fit in 2^53. */
static bool shape_numel(int ndim, const int64_t *shape, int64_t *numel) {
    uint64_t p = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return false;
        if (__builtin_mul_overflow(p, (uint64_t)shape[d], &p)) return false;
    }
    if ((double)p * 4.0 > JSON_INT_MAX) return false;
    *numel = (int64_t)p;
    return true;
}

static const char *json_kind(const cJSON *x) {
    if (cJSON_IsString(x)) return "a string";
    if (cJSON_IsNumber(x)) return "a number";
    if (cJSON_IsArray(x)) return "an array";
    if (cJSON_IsObject(x)) return "an object";
    if (cJSON_IsBool(x)) return "a boolean";
    if (cJSON_IsNull(x)) return "null";
    return "an invalid value";
}

/* A non-negative integral JSON number that a double holds exactly. */
static bool json_uint(const cJSON *x, uint64_t *v) {
    if (!cJSON_IsNumber(x)) return false;
    double d = x->valuedouble;
    if (!(d >= 0 && d <= JSON_INT_MAX) || d != floor(d)) return false;
    *v = (uint64_t)d;
    return true;
}

/* Reads exactly n bytes at off. 0: done; 1: the file ended first; -1: error (errno set). */
static int pread_full(int fd, void *buf, size_t n, uint64_t off) {
    char *p = buf;
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t r = pread(fd, p, chunk, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) return 1;
        p += r;
        off += (uint64_t)r;
        n -= (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t w = write(fd, p, chunk);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void swap32(void *p, size_t n_words) {
    unsigned char *b = p;
    for (size_t i = 0; i < n_words; i++, b += 4) {
        unsigned char t0 = b[0], t1 = b[1];
        b[0] = b[3];
        b[1] = b[2];
        b[2] = t1;
        b[3] = t0;
    }
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* ---- the checksum: CRC-32 (the polynomial of zlib and PNG), slicing by 8 ---- */

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

/* Continues crc (0 to start) over n bytes, as zlib's crc32(crc, p, n) does. */
static uint32_t crc32_update(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    const unsigned char *p = data;
    uint32_t c = ~crc;
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF] ^
            crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^
            crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return ~c;
}

/* A string and its terminating NUL. */
static uint32_t crc_str(uint32_t crc, const char *s) {
    return crc32_update(crc, s, strlen(s) + 1);
}

/* One tensor of the checksummed description: name, dtype, "d0,d1,...", "begin,end", each followed
 * by a NUL. */
static uint32_t crc_tensor(uint32_t crc, const char *name, const char *dtype, int ndim, const int64_t *shape,
                           uint64_t begin, uint64_t end) {
    char buf[32 * (MG_MAX_DIMS + 1)];
    size_t k = 0;
    crc = crc_str(crc_str(crc, name), dtype);
    for (int d = 0; d < ndim; d++) k += (size_t)snprintf(buf + k, sizeof buf - k, d ? ",%lld" : "%lld", (long long)shape[d]);
    buf[k] = 0;
    crc = crc_str(crc, buf);
    snprintf(buf, sizeof buf, "%llu,%llu", (ull)begin, (ull)end);
    return crc_str(crc, buf);
}

/* The value of the checksum key: "crc32:" and 8 lowercase hex digits. */
static void fmt_checksum(char buf[16], uint32_t crc) {
    snprintf(buf, 16, "crc32:%08x", (unsigned)crc);
}

/* ---- writing ---- */

static int64_t numel_of_entry(const mg_st_entry *e) {
    int64_t numel = 1;
    for (int d = 0; d < e->ndim; d++) numel *= e->shape[d];
    return numel;
}

static mg_status check_entries(const char *path, const mg_st_entry *t, int n, const mg_st_meta *m,
                               int n_meta, uint64_t *data_bytes) {
    char sh[128];
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        const char *name = t[i].name;
        if (!name || !name[0])
            return mg_set_error(MG_ERR_INVALID, "%s: tensor #%d has %s name", path, i,
                                name ? "an empty" : "no");
        if (!strcmp(name, "__metadata__"))
            return mg_set_error(MG_ERR_INVALID,
                                "%s: tensor #%d: the name '__metadata__' is reserved for metadata",
                                path, i);
        if (!utf8_valid(name))
            return mg_set_error(MG_ERR_INVALID, "%s: tensor #%d: name is not valid UTF-8", path, i);
        if (t[i].ndim < 0 || t[i].ndim > MG_MAX_DIMS)
            return mg_set_error(MG_ERR_INVALID, "%s: tensor '%.200s': ndim %d is not in 0..%d",
                                path, name, t[i].ndim, MG_MAX_DIMS);
        for (int d = 0; d < t[i].ndim; d++)
            if (t[i].shape[d] < 0)
                return mg_set_error(MG_ERR_INVALID,
                                    "%s: tensor '%.200s': shape[%d] = %lld is negative", path, name,
                                    d, (long long)t[i].shape[d]);
        int64_t numel;
        if (!shape_numel(t[i].ndim, t[i].shape, &numel))
            return mg_set_error(MG_ERR_INVALID, "%s: tensor '%.200s': shape %s is too large", path,
                                name, fmt_shape(sh, sizeof sh, t[i].ndim, t[i].shape));
        if (numel > 0 && !t[i].data)
            return mg_set_error(MG_ERR_INVALID, "%s: tensor '%.200s': data is NULL", path, name);
        total += (uint64_t)numel * 4;
        if ((double)total > JSON_INT_MAX)
            return mg_set_error(MG_ERR_INVALID, "%s: more than 2^53 bytes of tensor data", path);
    }
    for (int i = 0; i < n_meta; i++) {
        if (!m[i].key || !m[i].value)
            return mg_set_error(MG_ERR_INVALID, "%s: metadata #%d has a NULL %s", path, i,
                                m[i].key ? "value" : "key");
        if (!utf8_valid(m[i].key))
            return mg_set_error(MG_ERR_INVALID, "%s: metadata #%d: key is not valid UTF-8", path,
                                i);
        if (!utf8_valid(m[i].value))
            return mg_set_error(MG_ERR_INVALID, "%s: metadata '%.200s': value is not valid UTF-8",
                                path, m[i].key);
        if (!strcmp(m[i].key, MG_ST_CHECKSUM_KEY))
            return mg_set_error(MG_ERR_INVALID,
                                "%s: metadata #%d: the key '" MG_ST_CHECKSUM_KEY
                                "' is reserved (the writer records the file's checksum there)",
                                path, i);
    }

    /* Duplicates, by sorting pointers: a checkpoint may hold thousands of names. */
    int most = n > n_meta ? n : n_meta;
    const char **names = malloc(sizeof *names * (size_t)(most ? most : 1));
    if (!names) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
    mg_status st = MG_OK;
    for (int pass = 0; pass < 2 && st == MG_OK; pass++) {
        int k = pass == 0 ? n : n_meta;
        for (int i = 0; i < k; i++) names[i] = pass == 0 ? t[i].name : m[i].key;
        qsort(names, (size_t)k, sizeof *names, cmp_str_ptr);
        for (int i = 1; i < k; i++)
            if (!strcmp(names[i - 1], names[i])) {
                st = mg_set_error(MG_ERR_INVALID, "%s: duplicate %s '%.200s'", path,
                                  pass == 0 ? "tensor name" : "metadata key", names[i]);
                break;
            }
    }
    free(names);
    *data_bytes = total;
    return st;
}

/* The JSON header, padded with spaces to a multiple of 8 bytes and prefixed by its length. */
static char *build_header(const mg_st_entry *t, int n, const mg_st_meta *m, int n_meta,
                          size_t *out_len) {
    cJSON *root = cJSON_CreateObject();
    bool ok = root != NULL;
    if (ok && n_meta > 0) {
        cJSON *md = cJSON_AddObjectToObject(root, "__metadata__");
        ok = md != NULL;
        for (int i = 0; ok && i < n_meta; i++)
            ok = cJSON_AddStringToObject(md, m[i].key, m[i].value) != NULL;
    }
    uint64_t off = 0;
    for (int i = 0; ok && i < n; i++) {
        cJSON *e = cJSON_AddObjectToObject(root, t[i].name);
        ok = e && cJSON_AddStringToObject(e, "dtype", "F32");
        cJSON *shape = ok ? cJSON_AddArrayToObject(e, "shape") : NULL;
        cJSON *offs = shape ? cJSON_AddArrayToObject(e, "data_offsets") : NULL;
        ok = offs != NULL;
        /* Raw items print integers digit for digit; cJSON's own number printer would switch to
         * exponent notation past 15 digits. */
        char num[32];
        int64_t numel = 1;
        for (int d = 0; ok && d < t[i].ndim; d++) {
            snprintf(num, sizeof num, "%lld", (long long)t[i].shape[d]);
            ok = cJSON_AddItemToArray(shape, cJSON_CreateRaw(num));
            numel *= t[i].shape[d];
        }
        uint64_t end = off + (uint64_t)numel * 4;
        snprintf(num, sizeof num, "%llu", (ull)off);
        ok = ok && cJSON_AddItemToArray(offs, cJSON_CreateRaw(num));
        snprintf(num, sizeof num, "%llu", (ull)end);
        ok = ok && cJSON_AddItemToArray(offs, cJSON_CreateRaw(num));
        off = end;
    }
    char *json = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!json) return NULL;
    size_t len = strlen(json), padded = (len + 7) & ~(size_t)7;
    char *buf = malloc(8 + padded);
    if (buf) {
        for (int b = 0; b < 8; b++) buf[b] = (char)(((uint64_t)padded >> (8 * b)) & 0xFF);
        memcpy(buf + 8, json, len);
        memset(buf + 8 + len, ' ', padded - len);
        *out_len = 8 + padded;
    }
    free(json);
    return buf;
}

/* The checksum of what the file will hold: the metadata pairs, the tensor descriptions with the
 * offsets build_header gives them, then the tensor data as little-endian bytes. */
static uint32_t checksum_of(const mg_st_entry *t, int n, const mg_st_meta *m, int n_meta) {
    uint32_t crc = 0;
    for (int i = 0; i < n_meta; i++) crc = crc_str(crc_str(crc, m[i].key), m[i].value);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        uint64_t bytes = 4 * (uint64_t)numel_of_entry(&t[i]);
        crc = crc_tensor(crc, t[i].name, "F32", t[i].ndim, t[i].shape, off, off + bytes);
        off += bytes;
    }
    float buf[4096];
    for (int i = 0; i < n; i++) {
        int64_t numel = numel_of_entry(&t[i]);
        if (!HOST_BIG_ENDIAN) {
            if (numel > 0) crc = crc32_update(crc, t[i].data, (size_t)numel * 4);
            continue;
        }
        for (int64_t j = 0; j < numel; j += 4096) {
            size_t k = (size_t)(numel - j < 4096 ? numel - j : 4096);
            memcpy(buf, t[i].data + j, k * 4);
            swap32(buf, k);
            crc = crc32_update(crc, buf, k * 4);
        }
    }
    return crc;
}

static int write_floats(int fd, const float *x, int64_t numel) {
    if (!HOST_BIG_ENDIAN) return write_full(fd, x, (size_t)numel * 4);
    float buf[4096];
    for (int64_t i = 0; i < numel; i += 4096) {
        size_t k = (size_t)(numel - i < 4096 ? numel - i : 4096);
        memcpy(buf, x + i, k * 4);
        swap32(buf, k);
        if (write_full(fd, buf, k * 4)) return -1;
    }
    return 0;
}

/* Makes the rename itself durable; a filesystem that cannot sync a directory is not an error. */
static void sync_parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    free(dir);
}

mg_status mg_safetensors_write(const char *path, const mg_st_entry *tensors, int n,
                               const mg_st_meta *meta, int n_meta) {
    if (!path || !path[0]) return mg_set_error(MG_ERR_INVALID, "mg_safetensors_write: no path");
    if (n < 0 || n_meta < 0 || (n > 0 && !tensors) || (n_meta > 0 && !meta))
        return mg_set_error(MG_ERR_INVALID, "%s: bad tensor or metadata list (n %d, n_meta %d)",
                            path, n, n_meta);
    /* The file is written beside the target and renamed over it: a device, FIFO or folder there
     * (even /dev/null, for a root user) would be replaced, so only a regular file or nothing. */
    struct stat target;
    if (stat(path, &target) == 0 && !S_ISREG(target.st_mode))
        return mg_set_error(MG_ERR_IO, "%s: not a regular file: a safetensors file is written beside its path and "
                            "renamed into place, which would replace it", path);
    uint64_t data_bytes = 0;
    mg_status st = check_entries(path, tensors, n, meta, n_meta, &data_bytes);
    if (st != MG_OK) return st;

    /* the caller's metadata, then the checksum of everything */
    mg_st_meta *all = malloc(sizeof *all * (size_t)(n_meta + 1));
    if (!all) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
    if (n_meta > 0) memcpy(all, meta, sizeof *all * (size_t)n_meta);
    char sum[16];
    fmt_checksum(sum, checksum_of(tensors, n, meta, n_meta));
    all[n_meta] = (mg_st_meta){MG_ST_CHECKSUM_KEY, sum};
    size_t hlen = 0;
    char *header = build_header(tensors, n, all, n_meta + 1, &hlen);
    free(all);
    if (!header) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory building the header", path);

    size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    if (!tmp) {
        free(header);
        return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());

    /* O_EXCL: two writers in one process racing on the same path must not share a temp file. */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        if (errno == ENOENT) /* the folder is missing: say so, not the temporary's name */
            st = mg_set_error(MG_ERR_IO, "%s: cannot write: its folder does not exist", path);
        else
            st = mg_set_error(MG_ERR_IO, "%s: cannot create the temporary file %s: %s", path, tmp, strerror(errno));
        free(header);
        free(tmp);
        return st;
    }
    const char *step = "writing the header";
    int fail = write_full(fd, header, hlen);
    for (int i = 0; !fail && i < n; i++) {
        int64_t numel = numel_of_entry(&tensors[i]);
        step = "writing tensor data";
        if (numel > 0) fail = write_floats(fd, tensors[i].data, numel);
    }
    if (!fail) {
        step = "syncing";
        fail = fsync(fd);
    }
    int err = errno;
    if (close(fd) && !fail) {
        err = errno;
        step = "closing";
        fail = -1;
    }
    if (!fail && rename(tmp, path)) {
        err = errno;
        step = "renaming the temporary file over it";
        fail = -1;
    }
    if (fail) {
        unlink(tmp);
        st = mg_set_error(MG_ERR_IO, "%s: %s failed (temporary file %s, %llu bytes of data): %s",
                          path, step, tmp, (ull)data_bytes, strerror(err));
    } else {
        sync_parent_dir(path);
    }
    free(header);
    free(tmp);
    return st;
}

/* ---- reading ---- */

struct mg_st_file {
    char *path;
    int fd;
    uint64_t data_start, data_size; /* the data area: file offset 8 + N, and its length */
    int n;
    mg_st_tensor_info *t;
    int *by_name; /* tensor indices sorted by name, for mg_st_find */
    int n_meta;
    char **meta_key, **meta_val;
};

void mg_st_close(mg_st_file *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    for (int i = 0; i < f->n; i++) free((char *)f->t[i].name);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta_key[i]);
        free(f->meta_val[i]);
    }
    free(f->t);
    free(f->by_name);
    free(f->meta_key);
    free(f->meta_val);
    free(f->path);
    free(f);
}

/* Every dtype name the safetensors format defines, so that a valid file of another dtype is
 * reported as unsupported rather than as corrupt. */
static const char *const known_dtypes[] = {
    "BOOL", "U8",  "I8",   "F8_E5M2", "F8_E4M3", "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "I16",
    "U16",  "F16", "BF16", "I32",     "U32",     "F32",     "F64", "C64",     "I64",     "U64",
};

static mg_status parse_tensor(mg_st_file *f, const cJSON *e, mg_st_tensor_info *t) {
    const char *p = f->path, *name = e->string;
    if (!cJSON_IsObject(e))
        return mg_set_error(MG_ERR_FORMAT, "%s: tensor '%.200s': entry is %s, not an object", p,
                            name, json_kind(e));

    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!dt) return mg_set_error(MG_ERR_FORMAT, "%s: tensor '%.200s': no \"dtype\"", p, name);
    if (!cJSON_IsString(dt))
        return mg_set_error(MG_ERR_FORMAT, "%s: tensor '%.200s': \"dtype\" is %s, not a string", p,
                            name, json_kind(dt));
    if (strcmp(dt->valuestring, "F32")) {
        for (size_t k = 0; k < sizeof known_dtypes / sizeof *known_dtypes; k++)
            if (!strcmp(dt->valuestring, known_dtypes[k]))
                return mg_set_error(MG_ERR_FORMAT,
                                    "%s: tensor '%.200s': unsupported dtype %s (minigrad reads F32 "
                                    "only)",
                                    p, name, known_dtypes[k]);
        return mg_set_error(MG_ERR_FORMAT, "%s: tensor '%.200s': unknown dtype \"%.40s\"", p, name,
                            dt->valuestring);
    }

    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!sh) return mg_set_error(MG_ERR_FORMAT, "%s: tensor '%.200s': no \"shape\"", p, name);
    if (!cJSON_IsArray(sh))
        return mg_set_error(MG_ERR_FORMAT, "%s: tensor '%.200s': \"shape\" is %s, not an array", p,
                            name, json_kind(sh));
    int ndim = cJSON_GetArraySize(sh);
    if (ndim > MG_MAX_DIMS)
        return mg_set_error(MG_ERR_FORMAT,
                            "%s: tensor '%.200s': shape has %d dims, at most %d are supported", p,
                            name, ndim, MG_MAX_DIMS);
    t->ndim = ndim;
    int d = 0;
    for (const cJSON *x = sh->child; x; x = x->next, d++) {
        uint64_t v;
        if (!cJSON_IsNumber(x))
            return mg_set_error(MG_ERR_FORMAT,
                                "%s: tensor '%.200s': shape[%d] is %s, not an integer", p, name, d,
                                json_kind(x));
        if (!json_uint(x, &v))
            return mg_set_error(MG_ERR_FORMAT,
                                "%s: tensor '%.200s': shape[%d] = %.15g is not a non-negative "
                                "integer (at most 2^53)",
                                p, name, d, x->valuedouble);
        t->shape[d] = (int64_t)v;
    }
    for (; d < MG_MAX_DIMS; d++) t->shape[d] = 1;
    char sbuf[128];
    if (!shape_numel(ndim, t->shape, &t->numel))
        return mg_set_error(MG_ERR_FORMAT, "%s: tensor '%.200s': shape %s has too many elements", p,
                            name, fmt_shape(sbuf, sizeof sbuf, ndim, t->shape));

    const cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!of)
        return mg_set_error(MG_ERR_FORMAT, "%s: tensor '%.200s': no \"data_offsets\"", p, name);
    if (!cJSON_IsArray(of))
        return mg_set_error(
            MG_ERR_FORMAT, "%s: tensor '%.200s': \"data_offsets\" is %s, not an array [begin, end]",
            p, name, json_kind(of));
    if (cJSON_GetArraySize(of) != 2)
        return mg_set_error(
            MG_ERR_FORMAT,
            "%s: tensor '%.200s': \"data_offsets\" has %d entries, not 2 [begin, end]", p, name,
            cJSON_GetArraySize(of));
    uint64_t be[2];
    const cJSON *x = of->child;
    for (int k = 0; k < 2; k++, x = x->next) {
        if (!cJSON_IsNumber(x))
            return mg_set_error(MG_ERR_FORMAT,
                                "%s: tensor '%.200s': data_offsets[%d] is %s, not an integer", p,
                                name, k, json_kind(x));
        if (!json_uint(x, &be[k]))
            return mg_set_error(
                MG_ERR_FORMAT,
                "%s: tensor '%.200s': data_offsets[%d] = %.15g is not a non-negative "
                "integer (at most 2^53)",
                p, name, k, x->valuedouble);
    }
    if (be[0] > be[1])
        return mg_set_error(MG_ERR_FORMAT,
                            "%s: tensor '%.200s': data_offsets [%llu, %llu]: begin > end", p, name,
                            (ull)be[0], (ull)be[1]);
    if (be[1] > f->data_size)
        return mg_set_error(MG_ERR_FORMAT,
                            "%s: tensor '%.200s': data_offsets end %llu is beyond the data area of "
                            "%llu bytes (file offset %llu, file size %llu)",
                            p, name, (ull)be[1], (ull)f->data_size, (ull)(f->data_start + be[1]),
                            (ull)(f->data_start + f->data_size));
    if (be[1] - be[0] != (uint64_t)t->numel * 4)
        return mg_set_error(
            MG_ERR_FORMAT,
            "%s: tensor '%.200s': shape %s of F32 takes %llu bytes but data_offsets "
            "[%llu, %llu] span %llu",
            p, name, fmt_shape(sbuf, sizeof sbuf, ndim, t->shape), (ull)t->numel * 4, (ull)be[0],
            (ull)be[1], (ull)(be[1] - be[0]));
    t->begin = be[0];
    t->end = be[1];
    t->dtype = "F32";
    t->name = strdup(name);
    if (!t->name) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", p);
    return MG_OK;
}

static mg_status parse_metadata(mg_st_file *f, const cJSON *md) {
    const char *p = f->path;
    if (!cJSON_IsObject(md))
        return mg_set_error(MG_ERR_FORMAT, "%s: \"__metadata__\" is %s, not an object of strings",
                            p, json_kind(md));
    int k = cJSON_GetArraySize(md);
    f->meta_key = calloc((size_t)k + 1, sizeof *f->meta_key);
    f->meta_val = calloc((size_t)k + 1, sizeof *f->meta_val);
    if (!f->meta_key || !f->meta_val) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", p);
    for (const cJSON *x = md->child; x; x = x->next) {
        if (!cJSON_IsString(x))
            return mg_set_error(MG_ERR_FORMAT,
                                "%s: \"__metadata__\" key '%.200s' is %s, not a string", p,
                                x->string, json_kind(x));
        int i = f->n_meta;
        f->meta_key[i] = strdup(x->string);
        f->meta_val[i] = strdup(x->valuestring);
        f->n_meta++;
        if (!f->meta_key[i] || !f->meta_val[i])
            return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", p);
    }
    const char **keys = malloc(sizeof *keys * (size_t)(k ? k : 1));
    if (!keys) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", p);
    memcpy(keys, f->meta_key, sizeof *keys * (size_t)k);
    qsort(keys, (size_t)k, sizeof *keys, cmp_str_ptr);
    mg_status st = MG_OK;
    for (int i = 1; i < k && st == MG_OK; i++)
        if (!strcmp(keys[i - 1], keys[i]))
            st = mg_set_error(MG_ERR_FORMAT, "%s: \"__metadata__\" has the key '%.200s' twice", p,
                              keys[i]);
    free(keys);
    return st;
}

/* Sort keys carry their index, so ties break by file order whatever qsort does, and no
 * comparison needs a context pointer (qsort_r differs between libcs). */
typedef struct {
    const char *name;
    uint64_t begin, end;
    int idx;
} sort_key;

static int cmp_by_name(const void *a, const void *b) {
    const sort_key *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

static int cmp_by_offset(const void *a, const void *b) {
    const sort_key *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Duplicate names, overlaps, gaps and trailing bytes: everything that needs all tensors at once. */
static mg_status check_layout(mg_st_file *f) {
    const char *p = f->path;
    int n = f->n;
    f->by_name = malloc(sizeof *f->by_name * (size_t)(n ? n : 1));
    sort_key *key = malloc(sizeof *key * (size_t)(n ? n : 1));
    if (!f->by_name || !key) {
        free(key);
        return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", p);
    }
    mg_status st = MG_OK;
    for (int i = 0; i < n; i++) key[i] = (sort_key){f->t[i].name, f->t[i].begin, f->t[i].end, i};
    qsort(key, (size_t)n, sizeof *key, cmp_by_name);
    for (int i = 0; i < n; i++) f->by_name[i] = key[i].idx;
    for (int i = 1; i < n && st == MG_OK; i++)
        if (!strcmp(key[i - 1].name, key[i].name))
            st = mg_set_error(MG_ERR_FORMAT, "%s: tensor name '%.200s' appears twice", p,
                              key[i].name);
    qsort(key, (size_t)n, sizeof *key, cmp_by_offset);
    uint64_t pos = 0;
    int prev = -1;
    for (int k = 0; k < n && st == MG_OK; k++) {
        const mg_st_tensor_info *t = &f->t[key[k].idx];
        if (t->begin < pos) {
            const mg_st_tensor_info *q = &f->t[prev];
            st = mg_set_error(
                MG_ERR_FORMAT,
                "%s: tensors '%.200s' [%llu, %llu) and '%.200s' [%llu, %llu) overlap in "
                "the data area",
                p, q->name, (ull)q->begin, (ull)q->end, t->name, (ull)t->begin, (ull)t->end);
        } else if (t->begin > pos) {
            st =
                mg_set_error(MG_ERR_FORMAT,
                             "%s: data area bytes [%llu, %llu) before tensor '%.200s' belong to no "
                             "tensor (the format forbids gaps)",
                             p, (ull)pos, (ull)t->begin, t->name);
        } else if (t->end > t->begin || prev < 0) {
            pos = t->end;
            prev = key[k].idx;
        }
    }
    if (st == MG_OK && pos != f->data_size)
        st = mg_set_error(
            MG_ERR_FORMAT,
            "%s: the data area has %llu bytes but its tensors end at %llu: %llu bytes "
            "(from file offset %llu) belong to no tensor",
            p, (ull)f->data_size, (ull)pos, (ull)(f->data_size - pos), (ull)(f->data_start + pos));
    free(key);
    return st;
}

/* Header bytes around `pos` for messages, printable ASCII only, with "|" marking `pos`. */
static const char *excerpt(char *buf, const char *hdr, size_t n, size_t pos) {
    size_t k = 0, from = pos > 16 ? pos - 16 : 0;
    for (size_t i = from; i < n && i < pos + 16; i++) {
        if (i == pos && pos > from) buf[k++] = '|';
        buf[k++] = (hdr[i] >= 0x20 && hdr[i] < 0x7F) ? hdr[i] : '?';
    }
    buf[k] = 0;
    return buf;
}

/* cJSON decodes \u0000 into a C string that ends there, which would silently shorten a name or a
 * value; such escapes are refused instead. Only called on valid JSON, so tracking whether we are
 * inside a string is enough. Returns the position of the backslash, or n. */
static size_t escaped_nul_at(const char *h, size_t n) {
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        if (!in_str) {
            in_str = h[i] == '"';
        } else if (h[i] == '"') {
            in_str = false;
        } else if (h[i] == '\\') {
            if (i + 5 < n && h[i + 1] == 'u' && !memcmp(h + i + 2, "0000", 4)) return i;
            i++; /* the escaped character cannot end the string */
        }
    }
    return n;
}

static mg_status parse_header(mg_st_file *f, const char *hdr, size_t n) {
    const char *p = f->path;
    char near[40];
    /* JSON text is UTF-8; NUL is valid UTF-8 but cJSON would silently cut a string at it. */
    const char *nul = memchr(hdr, 0, n);
    size_t bad = utf8_invalid_at((const unsigned char *)hdr, nul ? (size_t)(nul - hdr) : n);
    if (nul && bad == (size_t)(nul - hdr))
        return mg_set_error(MG_ERR_FORMAT, "%s: header holds a NUL byte at file offset %llu", p,
                            (ull)(8 + bad));
    if (bad < n)
        return mg_set_error(MG_ERR_FORMAT,
                            "%s: header is not valid UTF-8: byte 0x%02x at file offset %llu", p,
                            (unsigned char)hdr[bad], (ull)(8 + bad));
    if (n == 0 || hdr[0] != '{')
        return mg_set_error(MG_ERR_FORMAT,
                            "%s: header is not a JSON object: it starts with '%s' at file offset 8 "
                            "(not a safetensors file?)",
                            p, excerpt(near, hdr, n, 0));

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, n, &end, 0);
    if (!root) {
        size_t pos = end && end >= hdr && end <= hdr + n ? (size_t)(end - hdr) : 0;
        return mg_set_error(MG_ERR_FORMAT,
                            "%s: header is not valid JSON: parse error at file offset %llu (header "
                            "byte %llu; cJSON points at or just past the fault): '%s'",
                            p, (ull)(8 + pos), (ull)pos, excerpt(near, hdr, n, pos));
    }
    mg_status st = MG_OK;
    size_t tail = end ? (size_t)(end - hdr) : n;
    for (size_t i = tail; i < n && st == MG_OK; i++)
        if (!strchr(" \t\r\n", hdr[i]))
            st = mg_set_error(MG_ERR_FORMAT,
                              "%s: unexpected data after the header's JSON object at file offset "
                              "%llu: '%s'",
                              p, (ull)(8 + i), excerpt(near, hdr, n, i));
    size_t esc = st == MG_OK ? escaped_nul_at(hdr, tail) : tail;
    if (esc < tail)
        st = mg_set_error(MG_ERR_FORMAT,
                          "%s: header has an escaped NUL (\\u0000) at file offset %llu, which a C "
                          "string cannot hold: '%s'",
                          p, (ull)(8 + esc), excerpt(near, hdr, n, esc));
    if (st == MG_OK && !cJSON_IsObject(root))
        st = mg_set_error(MG_ERR_FORMAT, "%s: header is %s, not a JSON object", p, json_kind(root));

    int n_tensors = 0;
    for (const cJSON *x = st == MG_OK ? root->child : NULL; x; x = x->next)
        n_tensors += strcmp(x->string, "__metadata__") != 0;
    if (st == MG_OK) {
        f->t = calloc((size_t)n_tensors + 1, sizeof *f->t);
        if (!f->t) st = mg_set_error(MG_ERR_NOMEM, "%s: out of memory", p);
    }
    bool seen_meta = false;
    for (const cJSON *x = st == MG_OK ? root->child : NULL; x && st == MG_OK; x = x->next) {
        if (!strcmp(x->string, "__metadata__")) {
            if (seen_meta)
                st = mg_set_error(MG_ERR_FORMAT, "%s: \"__metadata__\" appears twice", p);
            else
                st = parse_metadata(f, x);
            seen_meta = true;
        } else {
            st = parse_tensor(f, x, &f->t[f->n]);
            if (st == MG_OK) f->n++;
        }
    }
    cJSON_Delete(root);
    return st == MG_OK ? check_layout(f) : st;
}

mg_status mg_safetensors_open(const char *path, mg_st_file **out) {
    if (!out) return mg_set_error(MG_ERR_INVALID, "mg_safetensors_open: out is NULL");
    *out = NULL;
    if (!path) return mg_set_error(MG_ERR_INVALID, "mg_safetensors_open: path is NULL");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return mg_set_error(MG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    mg_st_file *f = calloc(1, sizeof *f);
    char *p = f ? strdup(path) : NULL;
    if (!p) {
        free(f);
        close(fd);
        return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
    }
    f->path = p;
    f->fd = fd;

    mg_status st = MG_OK;
    struct stat sb;
    unsigned char len8[8];
    uint64_t size = 0, n = 0;
    if (fstat(fd, &sb)) {
        st = mg_set_error(MG_ERR_IO, "%s: cannot stat: %s", p, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        st = mg_set_error(MG_ERR_IO, "%s: not a regular file", p);
    } else if ((size = (uint64_t)sb.st_size) < 8) {
        st = mg_set_error(MG_ERR_FORMAT,
                          "%s: file is %llu bytes, too short for the 8-byte header length", p,
                          (ull)size);
    } else {
        int r = pread_full(fd, len8, 8, 0);
        if (r)
            st = mg_set_error(MG_ERR_IO, "%s: reading the header length: %s", p,
                              r < 0 ? strerror(errno) : "file ended early");
        for (int b = 7; b >= 0; b--) n = (n << 8) | len8[b];
    }
    if (st == MG_OK && n > MG_ST_MAX_HEADER)
        st = mg_set_error(MG_ERR_FORMAT,
                          "%s: header length %llu (file offset 0) is absurd: over the %llu-byte "
                          "limit (not a safetensors file?)",
                          p, (ull)n, (ull)MG_ST_MAX_HEADER);
    if (st == MG_OK && n > size - 8)
        st = mg_set_error(MG_ERR_FORMAT,
                          "%s: header length %llu (file offset 0) runs past the end of the file: "
                          "8 + %llu > file size %llu",
                          p, (ull)n, (ull)n, (ull)size);
    if (st == MG_OK) {
        char *hdr = malloc((size_t)n + 1);
        if (!hdr) {
            st = mg_set_error(MG_ERR_NOMEM, "%s: out of memory for a %llu-byte header", p, (ull)n);
        } else {
            int r = pread_full(fd, hdr, (size_t)n, 8);
            if (r)
                st = mg_set_error(MG_ERR_IO, "%s: reading the %llu-byte header: %s", p, (ull)n,
                                  r < 0 ? strerror(errno) : "file ended early");
            hdr[n] = 0;
            f->data_start = 8 + n;
            f->data_size = size - 8 - n;
            if (st == MG_OK) st = parse_header(f, hdr, (size_t)n);
            free(hdr);
        }
    }
    if (st != MG_OK) {
        mg_st_close(f);
        return st;
    }
    *out = f;
    return MG_OK;
}

const char *mg_st_path(const mg_st_file *f) {
    return f ? f->path : NULL;
}
int mg_st_count(const mg_st_file *f) {
    return f ? f->n : 0;
}

const mg_st_tensor_info *mg_st_info(const mg_st_file *f, int i) {
    return f && i >= 0 && i < f->n ? &f->t[i] : NULL;
}

int mg_st_find(const mg_st_file *f, const char *name) {
    if (!f || !name) return -1;
    int lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(f->t[f->by_name[mid]].name, name);
        if (!c) return f->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

mg_status mg_st_read_f32(const mg_st_file *f, int i, float *dst, int64_t n_elems) {
    if (!f) return mg_set_error(MG_ERR_INVALID, "mg_st_read_f32: file is NULL");
    if (i < 0 || i >= f->n)
        return mg_set_error(MG_ERR_INVALID, "%s: tensor index %d out of range (file has %d)",
                            f->path, i, f->n);
    const mg_st_tensor_info *t = &f->t[i];
    char sbuf[128];
    if (n_elems != t->numel)
        return mg_set_error(MG_ERR_INVALID,
                            "%s: tensor '%.200s' has %lld elements %s, the destination holds %lld",
                            f->path, t->name, (long long)t->numel,
                            fmt_shape(sbuf, sizeof sbuf, t->ndim, t->shape), (long long)n_elems);
    if (t->numel == 0) return MG_OK;
    if (!dst)
        return mg_set_error(MG_ERR_INVALID, "%s: tensor '%.200s': destination is NULL", f->path,
                            t->name);
    int r = pread_full(f->fd, dst, (size_t)t->numel * 4, f->data_start + t->begin);
    if (r)
        return mg_set_error(
            MG_ERR_IO, "%s: reading tensor '%.200s' (%llu bytes at file offset %llu): %s", f->path,
            t->name, (ull)(t->end - t->begin), (ull)(f->data_start + t->begin),
            r < 0 ? strerror(errno) : "file ended early (changed since it was opened?)");
    if (HOST_BIG_ENDIAN) swap32(dst, (size_t)t->numel);
    return MG_OK;
}

int mg_st_meta_count(const mg_st_file *f) {
    return f ? f->n_meta : 0;
}

const char *mg_st_meta_key(const mg_st_file *f, int i) {
    return f && i >= 0 && i < f->n_meta ? f->meta_key[i] : NULL;
}

const char *mg_st_meta_value(const mg_st_file *f, int i) {
    return f && i >= 0 && i < f->n_meta ? f->meta_val[i] : NULL;
}

const char *mg_st_meta_get(const mg_st_file *f, const char *key) {
    if (!f || !key) return NULL;
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_key[i], key)) return f->meta_val[i];
    return NULL;
}

/* ---- the checksum and the values, read back ---- */

/* Passes over the data area once, tensor by tensor in offset order (the layout checks at open
 * made it gapless). crc, when not NULL, receives the checksum of the file's content: the metadata
 * pairs in file order except the checksum itself, the tensor descriptions in header order, the
 * data area. check, when not NULL, marks the tensors whose values must all be finite: the first
 * value that is not sets *nonfinite to MG_ERR_NONFINITE (with the message) and the pass goes on
 * only as far as the checksum needs, so that a damaged file is reported as damaged. */
static mg_status scan_data(const mg_st_file *f, uint32_t *crc, const bool *check, mg_status *nonfinite) {
    const char *p = f->path;
    uint32_t c = 0;
    const mg_st_tensor_info *bad = NULL;
    uint32_t bad_bits = 0;
    uint64_t bad_at = 0;
    if (nonfinite) *nonfinite = MG_OK;
    if (crc) {
        for (int i = 0; i < f->n_meta; i++)
            if (strcmp(f->meta_key[i], MG_ST_CHECKSUM_KEY) != 0) c = crc_str(crc_str(c, f->meta_key[i]), f->meta_val[i]);
        for (int i = 0; i < f->n; i++)
            c = crc_tensor(c, f->t[i].name, f->t[i].dtype, f->t[i].ndim, f->t[i].shape, f->t[i].begin, f->t[i].end);
    }
    sort_key *key = malloc(sizeof *key * (size_t)(f->n ? f->n : 1));
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    if (!key || !buf) {
        free(key);
        free(buf);
        return mg_set_error(MG_ERR_NOMEM, "%s: out of memory reading the tensor data back", p);
    }
    for (int i = 0; i < f->n; i++) key[i] = (sort_key){f->t[i].name, f->t[i].begin, f->t[i].end, i};
    qsort(key, (size_t)f->n, sizeof *key, cmp_by_offset);
    mg_status st = MG_OK;
    for (int k = 0; k < f->n && st == MG_OK && !(bad && !crc); k++) {
        const mg_st_tensor_info *t = &f->t[key[k].idx];
        bool finite = check && check[key[k].idx];
        if (!crc && !finite) continue;
        for (uint64_t off = t->begin; off < t->end && st == MG_OK;) {
            size_t len = t->end - off < CHUNK ? (size_t)(t->end - off) : CHUNK;
            int r = pread_full(f->fd, buf, len, f->data_start + off);
            if (r) {
                st = mg_set_error(MG_ERR_IO, "%s: reading tensor '%.200s' (%llu bytes at file offset %llu): %s", p,
                                  t->name, (ull)(t->end - t->begin), (ull)(f->data_start + t->begin),
                                  r < 0 ? strerror(errno) : "file ended early (changed since it was opened?)");
                break;
            }
            if (crc) c = crc32_update(c, buf, len);
            for (size_t b = 0; finite && !bad && b < len; b += 4) {
                uint32_t bits = (uint32_t)buf[b] | (uint32_t)buf[b + 1] << 8 | (uint32_t)buf[b + 2] << 16 |
                                (uint32_t)buf[b + 3] << 24;
                if ((bits & 0x7F800000u) != 0x7F800000u) continue;
                bad = t, bad_bits = bits, bad_at = (off - t->begin + b) / 4;
            }
            off += len;
            if (bad && !crc) break;
        }
    }
    free(key);
    free(buf);
    if (st == MG_OK && crc) *crc = c;
    if (st == MG_OK && bad) {
        const char *what = (bad_bits & 0x007FFFFFu) ? "NaN" : (bad_bits >> 31) ? "-inf" : "+inf";
        *nonfinite = mg_set_error(MG_ERR_NONFINITE,
                                  "%s: tensor '%.200s' holds %s at element %llu of %lld: a non-finite weight is "
                                  "refused (the file was saved from a run that diverged, or is damaged)",
                                  p, bad->name, what, (ull)bad_at, (long long)bad->numel);
    }
    return st;
}

mg_status mg_st_checksum(const mg_st_file *f, uint32_t *out) {
    if (!f || !out) return mg_set_error(MG_ERR_INVALID, "mg_st_checksum: file or out is NULL");
    return scan_data(f, out, NULL, NULL);
}

/* The checksum the file records; false (with *has false) when it records none. */
static mg_status stored_checksum(const mg_st_file *f, bool *has, uint32_t *crc) {
    const char *v = mg_st_meta_get(f, MG_ST_CHECKSUM_KEY);
    *has = v != NULL;
    if (!v) return MG_OK;
    bool ok = strncmp(v, "crc32:", 6) == 0 && strlen(v) == 14;
    uint32_t c = 0;
    for (int i = 6; ok && i < 14; i++) {
        int ch = v[i], d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        ok = d >= 0;
        c = c << 4 | (uint32_t)(d < 0 ? 0 : d);
    }
    if (!ok)
        return mg_set_error(MG_ERR_FORMAT,
                            "%s: metadata '" MG_ST_CHECKSUM_KEY "' = '%.40s' is not 'crc32:' and 8 lowercase hex digits",
                            f->path, v);
    *crc = c;
    return MG_OK;
}

static mg_status compare_checksum(const mg_st_file *f, uint32_t want, uint32_t got) {
    if (want == got) return MG_OK;
    return mg_set_error(MG_ERR_FORMAT,
                        "%s: checksum mismatch: the file records crc32:%08x but its content gives crc32:%08x: "
                        "the file is damaged (a changed byte in a weight or in the header) or was edited without "
                        "removing '" MG_ST_CHECKSUM_KEY "'",
                        f->path, (unsigned)want, (unsigned)got);
}

mg_status mg_st_verify(const mg_st_file *f) {
    if (!f) return mg_set_error(MG_ERR_INVALID, "mg_st_verify: file is NULL");
    bool has;
    uint32_t want = 0, got = 0;
    mg_status st = stored_checksum(f, &has, &want);
    if (st != MG_OK || !has) return st;
    if ((st = scan_data(f, &got, NULL, NULL)) != MG_OK) return st;
    return compare_checksum(f, want, got);
}

/* ---- validated load ---- */

mg_status mg_st_load(const mg_st_file *f, const mg_st_dest *dest, int n, unsigned flags) {
    if (!f) return mg_set_error(MG_ERR_INVALID, "mg_st_load: file is NULL");
    const char *p = f->path;
    if (n < 0 || (n > 0 && !dest))
        return mg_set_error(MG_ERR_INVALID, "%s: mg_st_load: bad destination list (n %d)", p, n);
    if (flags & ~(unsigned)(MG_ST_ALLOW_EXTRA | MG_ST_ALLOW_NONFINITE))
        return mg_set_error(MG_ERR_INVALID, "%s: mg_st_load: unknown flags 0x%x", p, flags);

    /* which[j]: the file tensor dest j maps to; claimed[i]: the dest that file tensor i feeds. */
    int *which = malloc(sizeof *which * (size_t)(n ? n : 1));
    int *claimed = malloc(sizeof *claimed * (size_t)(f->n ? f->n : 1));
    if (!which || !claimed) {
        free(which);
        free(claimed);
        return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", p);
    }
    for (int i = 0; i < f->n; i++) claimed[i] = -1;
    mg_status st = MG_OK;
    char a[128], b[128];
    for (int j = 0; j < n && st == MG_OK; j++) {
        const mg_st_dest *d = &dest[j];
        if (!d->name) {
            st = mg_set_error(MG_ERR_INVALID, "%s: destination #%d has no name", p, j);
            break;
        }
        if (d->ndim < 0 || d->ndim > MG_MAX_DIMS) {
            st = mg_set_error(MG_ERR_INVALID, "%s: %.200s: model ndim %d is not in 0..%d", p,
                              d->name, d->ndim, MG_MAX_DIMS);
            break;
        }
        int i = which[j] = mg_st_find(f, d->name);
        if (i < 0) {
            int more = 0;
            for (int k = j + 1; k < n; k++) more += dest[k].name && mg_st_find(f, dest[k].name) < 0;
            if (more)
                st = mg_set_error(MG_ERR_NOT_FOUND, "%s: missing tensor '%.200s' (and %d more)", p,
                                  d->name, more);
            else
                st = mg_set_error(MG_ERR_NOT_FOUND, "%s: missing tensor '%.200s'", p, d->name);
            break;
        }
        if (claimed[i] >= 0) {
            st = mg_set_error(MG_ERR_INVALID, "%s: destinations #%d and #%d are both '%.200s'", p,
                              claimed[i], j, d->name);
            break;
        }
        claimed[i] = j;
        const mg_st_tensor_info *t = &f->t[i];
        bool same = t->ndim == d->ndim;
        for (int k = 0; same && k < d->ndim; k++) same = t->shape[k] == d->shape[k];
        if (!same) {
            st = mg_set_error(MG_ERR_FORMAT, "%s: %.200s: shape in file %s vs model %s", p, d->name,
                              fmt_shape(a, sizeof a, t->ndim, t->shape),
                              fmt_shape(b, sizeof b, d->ndim, d->shape));
            break;
        }
        if (t->numel > 0 && !d->data)
            st = mg_set_error(MG_ERR_INVALID, "%s: %.200s: destination data is NULL", p, d->name);
    }
    if (st == MG_OK && !(flags & MG_ST_ALLOW_EXTRA)) {
        int first = -1, more = 0;
        for (int i = 0; i < f->n; i++)
            if (claimed[i] < 0) {
                if (first < 0)
                    first = i;
                else
                    more++;
            }
        if (first >= 0 && more)
            st = mg_set_error(MG_ERR_FORMAT, "%s: unexpected tensor '%.200s' in file (and %d more)",
                              p, f->t[first].name, more);
        else if (first >= 0)
            st = mg_set_error(MG_ERR_FORMAT, "%s: unexpected tensor '%.200s' in file", p,
                              f->t[first].name);
    }
    /* the checksum and the values are checked before the first value is copied */
    bool has_sum = false;
    uint32_t want = 0, got = 0;
    if (st == MG_OK) st = stored_checksum(f, &has_sum, &want);
    bool *check = NULL;
    if (st == MG_OK && !(flags & MG_ST_ALLOW_NONFINITE)) {
        check = calloc((size_t)(f->n ? f->n : 1), sizeof *check);
        if (!check) st = mg_set_error(MG_ERR_NOMEM, "%s: out of memory", p);
        for (int i = 0; check && i < f->n; i++) check[i] = claimed[i] >= 0;
    }
    mg_status nonfinite = MG_OK;
    if (st == MG_OK && (has_sum || check)) st = scan_data(f, has_sum ? &got : NULL, check, &nonfinite);
    if (st == MG_OK && has_sum) st = compare_checksum(f, want, got);
    if (st == MG_OK) st = nonfinite;
    free(check);
    for (int j = 0; j < n && st == MG_OK; j++)
        st = mg_st_read_f32(f, which[j], dest[j].data, f->t[which[j]].numel);
    free(which);
    free(claimed);
    return st;
}

mg_status mg_safetensors_load(const char *path, const mg_st_dest *dest, int n,
                              mg_st_file **meta_out) {
    if (meta_out) *meta_out = NULL;
    mg_st_file *f;
    mg_status st = mg_safetensors_open(path, &f);
    if (st != MG_OK) return st;
    st = mg_st_load(f, dest, n, 0);
    if (st != MG_OK || !meta_out)
        mg_st_close(f);
    else
        *meta_out = f;
    return st;
}
