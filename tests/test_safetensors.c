/* safetensors: bit-exact round trips, the byte layout checked by an independent parse, every
 * malformed header the reader must refuse (with the message naming the culprit), atomic writes,
 * the validated load, and a deterministic fuzz loop over corrupted files. */
#include "test_util.h"
#include "minigrad/rng.h"
#include "minigrad/safetensors.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* The layout check parses the file with cJSON, independently of the reader. The suite's meson
 * target links only minigrad and Check, so the functions come from the libcjson that libminigrad
 * already loaded (dlsym), not from a link-time dependency. */
typedef struct {
    cJSON *(*parse)(const char *, size_t, const char **, cJSON_bool);
    void (*del)(cJSON *);
    cJSON *(*get)(const cJSON *, const char *);
    int (*size)(const cJSON *);
    cJSON *(*item)(const cJSON *, int);
} cjson_api;

static cjson_api cjson(void) {
    void *h = dlopen("libcjson.so.1", RTLD_NOW);
    ck_assert_msg(h != NULL, "dlopen libcjson.so.1: %s", dlerror());
    cjson_api a;
    *(void **)&a.parse = dlsym(h, "cJSON_ParseWithLengthOpts");
    *(void **)&a.del = dlsym(h, "cJSON_Delete");
    *(void **)&a.get = dlsym(h, "cJSON_GetObjectItemCaseSensitive");
    *(void **)&a.size = dlsym(h, "cJSON_GetArraySize");
    *(void **)&a.item = dlsym(h, "cJSON_GetArrayItem");
    ck_assert(a.parse && a.del && a.get && a.size && a.item);
    return a;
}

/* ---- scratch files ---- */

static char *make_dir(void) {
    char d[512];
    tu_make_tmpdir(d, sizeof d, "mg_st");
    return strdup(d);
}

/* Removes dir (made writable again first: a test takes write access away) and frees the name. */
static void remove_dir(char *dir) {
    chmod(dir, 0700);
    tu_remove_tree(dir);
    free(dir);
}

/* Number of directory entries whose name contains ".tmp." (writer leftovers). */
static int count_temps(const char *dir) { return tu_count_entries(dir, ".tmp."); }

static void join(char *out, size_t cap, const char *dir, const char *name) {
    snprintf(out, cap, "%s/%s", dir, name);
}

/* A file made by hand: 8-byte little-endian length (the header's unless `len` >= 0), the header,
 * then `data_len` bytes 0, 1, 2, ... */
static void craft(const char *path, const char *hdr, size_t hdr_len, long long len,
                  size_t data_len) {
    size_t n = 8 + hdr_len + data_len;
    unsigned char *b = malloc(n);
    uint64_t l = len >= 0 ? (uint64_t)len : hdr_len;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(l >> (8 * i));
    memcpy(b + 8, hdr, hdr_len);
    for (size_t i = 0; i < data_len; i++) b[8 + hdr_len + i] = (unsigned char)i;
    tu_write_bytes(path, b, n);
    free(b);
}

/* Fails the test unless open refuses `path` with `want` and a message holding every needle. */
static void expect_refused(const char *path, mg_status want, ...) {
    mg_st_file *f = (mg_st_file *)&f; /* must be reset to NULL */
    mg_clear_error();
    mg_status st = mg_safetensors_open(path, &f);
    const char *msg = mg_last_error();
    ck_assert_msg(st == want, "status %d (%s), want %d; message: %s", st, mg_status_str(st), want,
                  msg);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(msg, path) != NULL, "message does not name the file: %s", msg);
    va_list ap;
    va_start(ap, want);
    for (const char *needle; (needle = va_arg(ap, const char *));)
        ck_assert_msg(strstr(msg, needle) != NULL, "message lacks \"%s\": %s", needle, msg);
    va_end(ap);
}

static void fill_random(mg_rng *r, float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)mg_rng_next(r); /* any bit pattern: NaN payloads, -0, denormals */
        memcpy(&x[i], &bits, 4);
    }
}

/* ---- round trip ---- */

enum { N_RT = 8 };
/* clang-format off */
static const char *rt_names[N_RT] = {
    "wte.weight", "scalar", "h.0.attn.c_attn.bias", "h.0.attn.c_attn.weight", "four.d",
    "empty",      "quote\"back\\slash\nnewline\ttab", "ünïcödé.权重",
};
static const int rt_ndim[N_RT] = {2, 0, 1, 2, 4, 2, 1, 3};
static const int64_t rt_shape[N_RT][MG_MAX_DIMS] = {
    {65, 33}, {0}, {99}, {33, 99}, {2, 3, 1, 5}, {0, 7}, {1}, {3, 1, 2},
};
/* clang-format on */
static const mg_st_meta rt_meta[] = {
    {"format", "minigrad-gpt"},
    {"vocab", "\n !\"#$%&'()*+,-./0123456789:;<=>?@[\\]^_`{|}~ éàü → 世界 🎵\t\x01"},
    {"n_layer", "1"},
    {"empty", ""},
    {"ключ", "значение"},
};
enum { N_META = sizeof rt_meta / sizeof *rt_meta };

static int64_t numel_of(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

/* Writes the round-trip set to dir/name and returns the data (caller frees each). */
static void write_rt(const char *path, float *data[N_RT]) {
    mg_rng r = mg_rng_make(2024);
    mg_st_entry e[N_RT];
    for (int i = 0; i < N_RT; i++) {
        int64_t n = numel_of(rt_ndim[i], rt_shape[i]);
        data[i] = n ? malloc(sizeof(float) * (size_t)n) : NULL;
        fill_random(&r, data[i], n);
        e[i] = (mg_st_entry){rt_names[i], rt_ndim[i], {0}, data[i]};
        memcpy(e[i].shape, rt_shape[i], sizeof e[i].shape);
    }
    mg_status st = mg_safetensors_write(path, e, N_RT, rt_meta, N_META);
    ck_assert_msg(st == MG_OK, "%s", mg_last_error());
}

/* A device, FIFO or folder at the target is refused, never replaced by the rename (as root,
 * renaming over /dev/null would replace the device node). */
START_TEST(write_refuses_a_target_that_is_not_a_regular_file) {
    char *dir = make_dir(), link[1024];
    float v[2] = {1, 2};
    mg_st_entry e = {.name = "w", .ndim = 1, .shape = {2, 1, 1, 1}, .data = v};
    TU_ASSERT_ERR(mg_safetensors_write(dir, &e, 1, NULL, 0), MG_ERR_IO, "not a regular file");
    struct stat sb;
    if (stat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode)) {
        TU_ASSERT_ERR(mg_safetensors_write("/dev/null", &e, 1, NULL, 0), MG_ERR_IO, "/dev/null: not a regular file");
        join(link, sizeof link, dir, "null.safetensors");
        ck_assert_int_eq(symlink("/dev/null", link), 0);
        TU_ASSERT_ERR(mg_safetensors_write(link, &e, 1, NULL, 0), MG_ERR_IO, "not a regular file");
        ck_assert_int_eq(stat("/dev/null", &sb), 0);
        ck_assert(S_ISCHR(sb.st_mode)); /* still the device */
    }
    ck_assert_int_eq(count_temps(dir), 0);
    remove_dir(dir);
}
END_TEST

START_TEST(round_trip_bit_exact) {
    char *dir = make_dir(), path[1024];
    join(path, sizeof path, dir, "rt.safetensors");
    float *data[N_RT];
    write_rt(path, data);
    ck_assert_int_eq(count_temps(dir), 0);

    mg_st_file *f = NULL;
    ck_assert_msg(mg_safetensors_open(path, &f) == MG_OK, "%s", mg_last_error());
    ck_assert_str_eq(mg_st_path(f), path);
    ck_assert_int_eq(mg_st_count(f), N_RT);
    for (int i = 0; i < N_RT; i++) {
        const mg_st_tensor_info *t = mg_st_info(f, i);
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(t->name, rt_names[i]); /* file order is write order */
        ck_assert_str_eq(t->dtype, "F32");
        ck_assert_int_eq(t->ndim, rt_ndim[i]);
        for (int d = 0; d < MG_MAX_DIMS; d++)
            ck_assert_int_eq(t->shape[d], d < rt_ndim[i] ? rt_shape[i][d] : 1);
        int64_t n = numel_of(rt_ndim[i], rt_shape[i]);
        ck_assert_int_eq(t->numel, n);
        ck_assert_int_eq(mg_st_find(f, rt_names[i]), i);
        float *back = malloc(sizeof(float) * (size_t)(n + 1));
        ck_assert_msg(mg_st_read_f32(f, i, back, n) == MG_OK, "%s", mg_last_error());
        if (n) ck_assert_int_eq(memcmp(back, data[i], sizeof(float) * (size_t)n), 0);
        free(back);
    }
    ck_assert_int_eq(mg_st_find(f, "absent"), -1);
    ck_assert_int_eq(mg_st_find(f, "wte.weigh"), -1);
    ck_assert_int_eq(mg_st_find(f, NULL), -1);
    ck_assert_ptr_null(mg_st_info(f, -1));
    ck_assert_ptr_null(mg_st_info(f, N_RT));

    ck_assert_int_eq(mg_st_meta_count(f), N_META + 1); /* the writer's checksum comes last */
    for (int i = 0; i < N_META; i++) {
        ck_assert_str_eq(mg_st_meta_key(f, i), rt_meta[i].key);
        ck_assert_str_eq(mg_st_meta_value(f, i), rt_meta[i].value);
        ck_assert_str_eq(mg_st_meta_get(f, rt_meta[i].key), rt_meta[i].value);
    }
    ck_assert_str_eq(mg_st_meta_key(f, N_META), MG_ST_CHECKSUM_KEY);
    ck_assert_int_eq(strlen(mg_st_meta_value(f, N_META)), 14);
    TU_OK(mg_st_verify(f));
    ck_assert_ptr_null(mg_st_meta_get(f, "absent"));
    ck_assert_ptr_null(mg_st_meta_key(f, N_META + 1));
    ck_assert_ptr_null(mg_st_meta_value(f, -1));
    mg_st_close(f);
    mg_st_close(NULL);
    for (int i = 0; i < N_RT; i++) free(data[i]);
    remove_dir(dir);
}
END_TEST

/* The file read back with cJSON and plain byte arithmetic, not with the reader under test. */
START_TEST(layout_parsed_independently) {
    char *dir = make_dir(), path[1024];
    join(path, sizeof path, dir, "rt.safetensors");
    float *data[N_RT];
    write_rt(path, data);
    size_t size;
    unsigned char *b = tu_read_file(path, &size);
    ck_assert_uint_ge(size, 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | b[i];
    ck_assert_uint_le(8 + n, size);
    ck_assert_uint_eq((8 + n) % 8, 0); /* data area 8-byte aligned */
    ck_assert_int_eq(b[8], '{');

    cjson_api cj = cjson();
    const char *end = NULL;
    cJSON *root = cj.parse((const char *)b + 8, n, &end, 0);
    ck_assert_ptr_nonnull(root);
    for (const char *p = end; p < (const char *)b + 8 + n; p++) ck_assert_int_eq(*p, ' ');
    ck_assert_int_lt((const char *)b + 8 + n - end, 8); /* padding is the minimum */

    const cJSON *x = root->child;
    ck_assert_str_eq(x->string, "__metadata__");
    int k = 0;
    for (const cJSON *m = x->child; m; m = m->next, k++) {
        ck_assert((m->type & 0xFF) == cJSON_String);
        if (k == N_META) { /* last: the checksum */
            ck_assert_str_eq(m->string, "checksum");
            ck_assert_int_eq(strncmp(m->valuestring, "crc32:", 6), 0);
            ck_assert_uint_eq(strspn(m->valuestring + 6, "0123456789abcdef"), 8);
            continue;
        }
        ck_assert_str_eq(m->string, rt_meta[k].key);
        ck_assert_str_eq(m->valuestring, rt_meta[k].value);
    }
    ck_assert_int_eq(k, N_META + 1);
    uint64_t expect_begin = 0;
    k = 0;
    for (x = x->next; x; x = x->next, k++) {
        ck_assert_int_lt(k, N_RT);
        ck_assert_str_eq(x->string, rt_names[k]);
        ck_assert_str_eq(cj.get(x, "dtype")->valuestring, "F32");
        const cJSON *sh = cj.get(x, "shape");
        ck_assert_int_eq(cj.size(sh), rt_ndim[k]);
        for (int d = 0; d < rt_ndim[k]; d++)
            ck_assert(cj.item(sh, d)->valuedouble == (double)rt_shape[k][d]);
        const cJSON *of = cj.get(x, "data_offsets");
        ck_assert_int_eq(cj.size(of), 2);
        uint64_t begin = (uint64_t)cj.item(of, 0)->valuedouble;
        uint64_t stop = (uint64_t)cj.item(of, 1)->valuedouble;
        size_t bytes = 4 * (size_t)numel_of(rt_ndim[k], rt_shape[k]);
        ck_assert_uint_eq(begin, expect_begin); /* tensors back to back in the given order */
        ck_assert_uint_eq(stop - begin, bytes);
        /* little-endian IEEE bits, byte by byte, whatever the host */
        for (size_t j = 0; j < bytes / 4; j++) {
            uint32_t bits;
            memcpy(&bits, &data[k][j], 4);
            const unsigned char *q = b + 8 + n + begin + 4 * j;
            uint32_t got = q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
            ck_assert_uint_eq(got, bits);
        }
        expect_begin = stop;
    }
    ck_assert_int_eq(k, N_RT);
    ck_assert_uint_eq(8 + n + expect_begin, size); /* nothing after the last tensor */
    cj.del(root);
    free(b);
    for (int i = 0; i < N_RT; i++) free(data[i]);
    remove_dir(dir);
}
END_TEST

/* The exact bytes of a small file, so that an accidental format change shows up. */
START_TEST(golden_bytes) {
    char *dir = make_dir(), path[1024];
    join(path, sizeof path, dir, "g.safetensors");
    const float a[2] = {1.0f, -2.0f}, s = 0.5f;
    mg_st_entry e[2] = {{"a", 1, {2}, a}, {"s", 0, {0}, &s}};
    mg_st_meta m[1] = {{"k", "v"}};
    ck_assert_msg(mg_safetensors_write(path, e, 2, m, 1) == MG_OK, "%s", mg_last_error());
    /* the checksum: CRC-32 of "k\0v\0", "a\0F32\0" "2\0" "0,8\0", "s\0F32\0" "\0" "8,12\0" and the
     * 12 data bytes (computed apart from minigrad, with Python's zlib.crc32) */
    const char *json = "{\"__metadata__\":{\"k\":\"v\",\"checksum\":\"crc32:af1affb2\"},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[8,12]}}";
    size_t jl = strlen(json), hl = (jl + 7) / 8 * 8;
    unsigned char want[512] = {(unsigned char)hl, (unsigned char)(hl >> 8)};
    memcpy(want + 8, json, jl);
    memset(want + 8 + jl, ' ', hl - jl);
    const unsigned char tail[12] = {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 0, 0, 0, 0x3f};
    memcpy(want + 8 + hl, tail, 12);
    size_t size;
    unsigned char *b = tu_read_file(path, &size);
    ck_assert_uint_eq(size, 8 + hl + 12);
    ck_assert_int_eq(memcmp(b, want, size), 0);
    free(b);

    /* no tensors, no metadata: still a valid file */
    ck_assert_msg(mg_safetensors_write(path, NULL, 0, NULL, 0) == MG_OK, "%s", mg_last_error());
    b = tu_read_file(path, &size);
    const char *empty = "{\"__metadata__\":{\"checksum\":\"crc32:00000000\"}}";
    ck_assert_uint_eq(size, 8 + 48);
    ck_assert_int_eq(b[0], 48);
    ck_assert_int_eq(memcmp(b + 8, empty, strlen(empty)), 0);
    free(b);
    mg_st_file *f;
    ck_assert_int_eq(mg_safetensors_open(path, &f), MG_OK);
    ck_assert_int_eq(mg_st_count(f), 0);
    ck_assert_int_eq(mg_st_meta_count(f), 1);
    TU_OK(mg_st_verify(f));
    mg_st_close(f);
    remove_dir(dir);
}
END_TEST

/* Files other writers make: no padding (data area at an odd offset), metadata last, whitespace,
 * a zero-size tensor, keys in another order. */
START_TEST(reads_foreign_layouts) {
    char *dir = make_dir(), path[1024];
    join(path, sizeof path, dir, "foreign.safetensors");
    const char *hdr =
        "{\"b\": {\"data_offsets\": [12, 20], \"shape\": [2], \"dtype\": \"F32\"},\n"
        " \"z\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[12,12]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[3,1],\"data_offsets\":[0,12], \"extra\": 1},"
        "\"__metadata__\":{\"format\":\"minigrad-gpt\"}}\n\t ";
    size_t hl = strlen(hdr);
    ck_assert_uint_ne((8 + hl) % 4, 0);
    unsigned char buf[512];
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, hdr, hl);
    const float vals[5] = {1.5f, -0.0f, 3e-40f, 7.0f, -1e30f};
    for (int i = 0; i < 5; i++) { /* little-endian on disk whatever the host */
        uint32_t bits;
        memcpy(&bits, &vals[i], 4);
        for (int k = 0; k < 4; k++) buf[8 + hl + 4 * i + k] = (unsigned char)(bits >> (8 * k));
    }
    tu_write_bytes(path, buf, 8 + hl + 20);

    mg_st_file *f;
    ck_assert_msg(mg_safetensors_open(path, &f) == MG_OK, "%s", mg_last_error());
    ck_assert_int_eq(mg_st_count(f), 3);
    ck_assert_str_eq(mg_st_info(f, 0)->name, "b");
    ck_assert_int_eq(mg_st_find(f, "a"), 2);
    ck_assert_int_eq(mg_st_find(f, "z"), 1);
    ck_assert_int_eq(mg_st_info(f, 1)->numel, 0);
    ck_assert_str_eq(mg_st_meta_get(f, "format"), "minigrad-gpt");
    float a[3], b[2];
    ck_assert_int_eq(mg_st_read_f32(f, 2, a, 3), MG_OK);
    ck_assert_int_eq(mg_st_read_f32(f, 0, b, 2), MG_OK);
    ck_assert_int_eq(mg_st_read_f32(f, 1, NULL, 0), MG_OK);
    ck_assert_int_eq(memcmp(a, vals, 12), 0);
    ck_assert_int_eq(memcmp(b, vals + 3, 8), 0);
    mg_st_close(f);
    remove_dir(dir);
}
END_TEST

START_TEST(read_errors) {
    char *dir = make_dir(), path[1024];
    join(path, sizeof path, dir, "r.safetensors");
    float x[6] = {1, 2, 3, 4, 5, 6};
    mg_st_entry e[1] = {{"x", 2, {2, 3}, x}};
    ck_assert_int_eq(mg_safetensors_write(path, e, 1, NULL, 0), MG_OK);
    mg_st_file *f;
    ck_assert_int_eq(mg_safetensors_open(path, &f), MG_OK);
    float y[8];
    ck_assert_int_eq(mg_st_read_f32(f, 0, y, 5), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "'x' has 6 elements (2,3)"));
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "holds 5"));
    ck_assert_int_eq(mg_st_read_f32(f, 1, y, 6), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "index 1 out of range"));
    ck_assert_int_eq(mg_st_read_f32(f, 0, NULL, 6), MG_ERR_INVALID);
    ck_assert_int_eq(mg_st_read_f32(NULL, 0, y, 6), MG_ERR_INVALID);
    /* the file shrinks under an open handle: an I/O error, not garbage */
    ck_assert_int_eq(truncate(path, 20), 0);
    ck_assert_int_eq(mg_st_read_f32(f, 0, y, 6), MG_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "'x'"));
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "file ended early"));
    mg_st_close(f);
    ck_assert_int_eq(mg_safetensors_open(path, NULL), MG_ERR_INVALID);
    ck_assert_int_eq(mg_safetensors_open(NULL, &f), MG_ERR_INVALID);
    ck_assert_ptr_null(f);
    remove_dir(dir);
}
END_TEST

/* ---- malformed files ---- */

typedef struct {
    const char *hdr;     /* header bytes */
    size_t hdr_len;      /* 0: strlen(hdr) */
    long long len;       /* the length prefix, -1: the real one */
    size_t data_len;     /* bytes in the data area */
    const char *need[3]; /* substrings the message must hold */
} bad_case;

/* clang-format off */
#define T(x) "{\"t\":{" x "}}"
static const bad_case bad[] = {
    /* the frame */
    {"[1,2]", 0, -1, 0, {"not a JSON object", "'[1,2]'", "offset 8"}},
    {" {}", 0, -1, 0, {"not a JSON object", "offset 8"}},
    {"", 0, -1, 0, {"not a JSON object"}},
    {"{\"t\":\"\xff\"}", 0, -1, 0, {"not valid UTF-8", "0xff", "file offset 14"}},
    {"{\"t\":\"\xc0\x80\"}", 0, -1, 0, {"not valid UTF-8", "0xc0", "file offset 14"}},
    {"{\"t\":\"\xed\xa0\x80\"}", 0, -1, 0, {"not valid UTF-8", "0xed"}},
    {"{\"t\":\"a\0b\"}", 11, -1, 0, {"NUL byte", "file offset 15"}},
    {"{\"t\":{\"dtype\":\"F32\"}} x", 0, -1, 0, {"unexpected data after", "file offset 30"}},
    {"{\"a\":1}{}", 0, -1, 0, {"unexpected data after", "file offset 15"}},
    {"{\"a\":", 0, -1, 0, {"not valid JSON"}},
    {"{\"a\":[1,2}", 0, -1, 0, {"not valid JSON", "file offset 17"}},
    {"{\"a\":nul}", 0, -1, 0, {"not valid JSON"}},
    {"{\"__metadata__\":{\"k\":\"a\\u0000b\"}}", 0, -1, 0, {"escaped NUL", "file offset 31"}},
    {"{\"t\\u0000x\":{}}", 0, -1, 0, {"escaped NUL", "file offset 11"}},
    /* entries */
    {"{\"t\":[1,2]}", 0, -1, 0, {"tensor 't'", "is an array, not an object"}},
    {"{\"t\":null}", 0, -1, 0, {"tensor 't'", "is null, not an object"}},
    {T("\"shape\":[1],\"data_offsets\":[0,4]"), 0, -1, 4, {"tensor 't'", "no \"dtype\""}},
    {T("\"dtype\":\"F32\",\"data_offsets\":[0,4]"), 0, -1, 4, {"tensor 't'", "no \"shape\""}},
    {T("\"dtype\":\"F32\",\"shape\":[1]"), 0, -1, 4, {"tensor 't'", "no \"data_offsets\""}},
    {T("\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]"), 0, -1, 4,
     {"tensor 't'", "\"dtype\" is a number, not a string"}},
    {T("\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]"), 0, -1, 4,
     {"tensor 't'", "unsupported dtype F16"}},
    {T("\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]"), 0, -1, 4,
     {"tensor 't'", "unsupported dtype BF16"}},
    {T("\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]"), 0, -1, 8,
     {"tensor 't'", "unsupported dtype I64"}},
    {T("\"dtype\":\"XYZ\",\"shape\":[1],\"data_offsets\":[0,4]"), 0, -1, 4,
     {"tensor 't'", "unknown dtype \"XYZ\""}},
    {T("\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]"), 0, -1, 4, {"unknown dtype \"f32\""}},
    {T("\"dtype\":\"F32\",\"shape\":\"3\",\"data_offsets\":[0,12]"), 0, -1, 12,
     {"tensor 't'", "\"shape\" is a string, not an array"}},
    {T("\"dtype\":\"F32\",\"shape\":[2,\"x\"],\"data_offsets\":[0,8]"), 0, -1, 8,
     {"tensor 't'", "shape[1] is a string"}},
    {T("\"dtype\":\"F32\",\"shape\":[2,-3],\"data_offsets\":[0,8]"), 0, -1, 8,
     {"tensor 't'", "shape[1] = -3 is not a non-negative integer"}},
    {T("\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]"), 0, -1, 8,
     {"tensor 't'", "shape[0] = 2.5"}},
    {T("\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,8]"), 0, -1, 8,
     {"tensor 't'", "shape[0] = 1e+300", "2^53"}},
    {T("\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]"), 0, -1, 4,
     {"tensor 't'", "shape has 5 dims, at most 4"}},
    {T("\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]"), 0, -1, 4,
     {"tensor 't'", "(4294967296,4294967296) has too many elements"}},
    {T("\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":4"), 0, -1, 4,
     {"tensor 't'", "\"data_offsets\" is a number, not an array"}},
    {T("\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]"), 0, -1, 8,
     {"tensor 't'", "has 3 entries, not 2"}},
    {T("\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]"), 0, -1, 4,
     {"tensor 't'", "has 1 entries, not 2"}},
    {T("\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,\"4\"]"), 0, -1, 4,
     {"tensor 't'", "data_offsets[1] is a string"}},
    {T("\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]"), 0, -1, 4,
     {"tensor 't'", "data_offsets[0] = -4"}},
    {T("\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0.5,4]"), 0, -1, 4,
     {"tensor 't'", "data_offsets[0] = 0.5"}},
    {T("\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]"), 0, -1, 8,
     {"tensor 't'", "[8, 4]: begin > end"}},
    {T("\"dtype\":\"F32\",\"shape\":[100],\"data_offsets\":[0,400]"), 0, -1, 40,
     {"tensor 't'", "end 400 is beyond the data area of 40 bytes"}},
    {T("\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]"), 0, -1, 8,
     {"tensor 't'", "shape (3) of F32 takes 12 bytes", "[0, 8] span 8"}},
    {T("\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,0]"), 0, -1, 0,
     {"tensor 't'", "shape () of F32 takes 4 bytes"}},
    /* across tensors */
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
     0, -1, 12, {"'a' [0, 8)", "'b' [4, 12)", "overlap"}},
    {"{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]},"
     "\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}",
     0, -1, 12, {"'a' [0, 12)", "'b' [4, 12)", "overlap"}},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
     0, -1, 8, {"'a' [0, 8)", "'b' [0, 8)", "overlap"}},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
     0, -1, 12, {"bytes [4, 8) before tensor 'b'", "gaps"}},
    {T("\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]"), 0, -1, 8,
     {"bytes [0, 4) before tensor 't'"}},
    {T("\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]"), 0, -1, 9,
     {"data area has 9 bytes but its tensors end at 4", "5 bytes"}},
    {"{}", 0, -1, 3, {"data area has 3 bytes", "end at 0"}},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
     0, -1, 8, {"tensor name 'a' appears twice"}},
    /* metadata */
    {"{\"__metadata__\":[1]}", 0, -1, 0, {"\"__metadata__\" is an array, not an object"}},
    {"{\"__metadata__\":\"x\"}", 0, -1, 0, {"\"__metadata__\" is a string, not an object"}},
    {"{\"__metadata__\":{\"n_layer\":4}}", 0, -1, 0, {"key 'n_layer' is a number, not a string"}},
    {"{\"__metadata__\":{\"a\":\"1\",\"k\":{}}}", 0, -1, 0, {"key 'k' is an object"}},
    {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, -1, 0, {"key 'k' twice"}},
    {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, -1, 0, {"\"__metadata__\" appears twice"}},
    /* the length prefix */
    {"{}", 0, 1000, 10, {"header length 1000", "runs past the end", "file size 20"}},
    {"{}", 0, 100000001LL, 0, {"header length 100000001", "absurd", "100000000-byte limit"}},
    {"{}", 0, 1LL << 40, 0, {"header length 1099511627776", "absurd"}},
    {"{}", 0, -2, 0, {"header length 18446744073709551614", "absurd"}},
};
#undef T
/* clang-format on */
enum { N_BAD = sizeof bad / sizeof *bad };

START_TEST(refuses_malformed) {
    const bad_case *c = &bad[_i];
    char *dir = make_dir(), path[1024];
    join(path, sizeof path, dir, "bad.safetensors");
    size_t hl = c->hdr_len ? c->hdr_len : strlen(c->hdr);
    /* len -2 stands for an all-ones-but-one prefix that no signed type holds */
    if (c->len == -2) {
        unsigned char b[10] = {0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'};
        tu_write_bytes(path, b, sizeof b);
    } else {
        craft(path, c->hdr, hl, c->len, c->data_len);
    }
    expect_refused(path, MG_ERR_FORMAT, c->need[0], c->need[1], c->need[2], (const char *)NULL);
    remove_dir(dir);
}
END_TEST

/* cJSON's error position is approximate; the reported offset must land on the fault or next to
 * it, counted from the start of the file. */
START_TEST(json_error_offset) {
    char *dir = make_dir(), path[1024];
    join(path, sizeof path, dir, "j.safetensors");
    const char *hdr = "{\"a\":{\"dtype\":\"F32\",,\"shape\":[1]}}";
    size_t fault = (size_t)(strstr(hdr, ",,") - hdr) + 1; /* the second comma */
    craft(path, hdr, strlen(hdr), -1, 4);
    expect_refused(path, MG_ERR_FORMAT, "not valid JSON", (const char *)NULL);
    const char *at = strstr(mg_last_error(), "file offset ");
    ck_assert_ptr_nonnull(at);
    unsigned long off = strtoul(at + strlen("file offset "), NULL, 10);
    ck_assert_msg(off >= 8 + fault && off <= 8 + fault + 1, "offset %lu, fault at %zu: %s", off,
                  8 + fault, mg_last_error());
    /* the excerpt marks the reported position with '|' */
    ck_assert_msg(strstr(mg_last_error(), ",,|\"shape") || strstr(mg_last_error(), ",|,\"shape"),
                  "%s", mg_last_error());
    remove_dir(dir);
}
END_TEST

START_TEST(refuses_short_and_missing_files) {
    char *dir = make_dir(), path[1024];
    join(path, sizeof path, dir, "short.safetensors");
    tu_write_bytes(path, "\x05\0\0\0\0", 5);
    expect_refused(path, MG_ERR_FORMAT, "file is 5 bytes", "too short", (const char *)NULL);
    tu_write_bytes(path, "", 0);
    expect_refused(path, MG_ERR_FORMAT, "file is 0 bytes", (const char *)NULL);
    join(path, sizeof path, dir, "absent.safetensors");
    expect_refused(path, MG_ERR_IO, "cannot open", strerror(ENOENT), (const char *)NULL);
    expect_refused(dir, MG_ERR_IO, "not a regular file", (const char *)NULL);
    remove_dir(dir);
}
END_TEST

/* ---- writer argument checks: refused before any file is created ---- */

START_TEST(write_rejects_bad_arguments) {
    char *dir = make_dir(), path[1024];
    join(path, sizeof path, dir, "w.safetensors");
    float x[4] = {0};
    struct {
        mg_st_entry e[2];
        int n;
        mg_st_meta m[2];
        int n_meta;
        const char *need;
    } cases[] = {
        /* clang-format off */
        {{{"a", 1, {4}, x}, {"a", 1, {4}, x}}, 2, {{0}}, 0, "duplicate tensor name 'a'"},
        {{{"", 1, {4}, x}}, 1, {{0}}, 0, "tensor #0 has an empty name"},
        {{{"a", 1, {4}, x}, {NULL, 1, {4}, x}}, 2, {{0}}, 0, "tensor #1 has no name"},
        {{{"__metadata__", 1, {4}, x}}, 1, {{0}}, 0, "'__metadata__' is reserved"},
        {{{"bad\xff", 1, {4}, x}}, 1, {{0}}, 0, "tensor #0: name is not valid UTF-8"},
        {{{"a", 5, {4}, x}}, 1, {{0}}, 0, "tensor 'a': ndim 5 is not in 0..4"},
        {{{"a", -1, {4}, x}}, 1, {{0}}, 0, "tensor 'a': ndim -1"},
        {{{"a", 2, {4, -1}, x}}, 1, {{0}}, 0, "tensor 'a': shape[1] = -1 is negative"},
        {{{"a", 2, {INT64_MAX, 4}, x}}, 1, {{0}}, 0, "tensor 'a': shape (9223372036854775807,4) is too large"},
        {{{"a", 1, {4}, NULL}}, 1, {{0}}, 0, "tensor 'a': data is NULL"},
        {{{"a", 1, {4}, x}}, 1, {{"k", "1"}, {"k", "2"}}, 2, "duplicate metadata key 'k'"},
        {{{"a", 1, {4}, x}}, 1, {{"k", NULL}}, 1, "metadata #0 has a NULL value"},
        {{{"a", 1, {4}, x}}, 1, {{NULL, "v"}}, 1, "metadata #0 has a NULL key"},
        {{{"a", 1, {4}, x}}, 1, {{"k", "\xc3"}}, 1, "metadata 'k': value is not valid UTF-8"},
        {{{"a", 1, {4}, x}}, 1, {{"k", "1"}, {"checksum", "crc32:00000000"}}, 2, "metadata #1: the key 'checksum' is reserved"},
        /* clang-format on */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mg_clear_error();
        mg_status st =
            mg_safetensors_write(path, cases[i].e, cases[i].n, cases[i].m, cases[i].n_meta);
        ck_assert_msg(st == MG_ERR_INVALID, "case %zu: status %d", i, st);
        ck_assert_msg(strstr(mg_last_error(), cases[i].need) && strstr(mg_last_error(), path),
                      "case %zu: message lacks \"%s\": %s", i, cases[i].need, mg_last_error());
        ck_assert_int_eq(access(path, F_OK), -1);
        ck_assert_int_eq(count_temps(dir), 0);
    }
    ck_assert_int_eq(mg_safetensors_write(path, NULL, 1, NULL, 0), MG_ERR_INVALID);
    ck_assert_int_eq(mg_safetensors_write(path, NULL, -1, NULL, 0), MG_ERR_INVALID);
    ck_assert_int_eq(mg_safetensors_write(NULL, NULL, 0, NULL, 0), MG_ERR_INVALID);
    ck_assert_int_eq(mg_safetensors_write("", NULL, 0, NULL, 0), MG_ERR_INVALID);
    /* zero-size tensors need no data */
    mg_st_entry z[1] = {{"z", 2, {3, 0}, NULL}};
    ck_assert_int_eq(mg_safetensors_write(path, z, 1, NULL, 0), MG_OK);
    remove_dir(dir);
}
END_TEST

/* ---- atomicity ---- */

static void write_small(const char *path, float v, mg_status want) {
    float x[3] = {v, v + 1, v + 2};
    mg_st_entry e[1] = {{"x", 1, {3}, x}};
    mg_st_meta m[1] = {{"format", "minigrad-gpt"}};
    mg_status st = mg_safetensors_write(path, e, 1, m, 1);
    ck_assert_msg(st == want, "status %d, want %d: %s", st, want, mg_last_error());
}

START_TEST(overwrite_replaces_whole_file) {
    char *dir = make_dir(), path[1024];
    join(path, sizeof path, dir, "ck.safetensors");
    float big[1000] = {0};
    mg_st_entry e[1] = {{"big", 1, {1000}, big}};
    ck_assert_int_eq(mg_safetensors_write(path, e, 1, NULL, 0), MG_OK);
    write_small(path, 7, MG_OK); /* shorter than before: no stale tail may remain */
    mg_st_file *f;
    ck_assert_msg(mg_safetensors_open(path, &f) == MG_OK, "%s", mg_last_error());
    float y[3];
    ck_assert_int_eq(mg_st_read_f32(f, mg_st_find(f, "x"), y, 3), MG_OK);
    ck_assert(y[0] == 7 && y[2] == 9);
    mg_st_close(f);
    ck_assert_int_eq(count_temps(dir), 0);
    remove_dir(dir);
}
END_TEST

/* Drops write permission in `dir` for this process: as root, by switching the effective uid to
 * an unprivileged one (permission bits do not stop root). Returns false when that is impossible. */
static bool lose_write_access(const char *dir) {
    ck_assert_int_eq(chmod(dir, 0555), 0);
    if (geteuid() != 0) return true;
    return seteuid(65534) == 0;
}

/* A path in a folder that does not exist: the message says that, not the temporary's name. */
START_TEST(missing_folder_is_named_as_such) {
    char *dir = make_dir(), path[1024];
    join(path, sizeof path, dir, "no/such/ck.safetensors");
    write_small(path, 1, MG_ERR_IO);
    char want[1200];
    snprintf(want, sizeof want, "%s: cannot write: its folder does not exist", path);
    ck_assert_str_eq(mg_last_error(), want);
    remove_dir(dir);
}
END_TEST

START_TEST(unwritable_directory_leaves_old_file) {
    char *dir = make_dir(), path[1024];
    join(path, sizeof path, dir, "ck.safetensors");
    write_small(path, 1, MG_OK);
    size_t n0, n1;
    unsigned char *before = tu_read_file(path, &n0);
    uid_t uid = geteuid();
    if (lose_write_access(dir)) {
        write_small(path, 2, MG_ERR_IO);
        ck_assert_ptr_nonnull(strstr(mg_last_error(), path));
        ck_assert_ptr_nonnull(strstr(mg_last_error(), "cannot create the temporary file"));
        ck_assert_ptr_nonnull(strstr(mg_last_error(), ".tmp."));
        ck_assert_ptr_nonnull(strstr(mg_last_error(), strerror(EACCES)));
        if (uid == 0) ck_assert_int_eq(seteuid(0), 0);
    } else {
        /* no way to lose root's access here: a parent that is not a directory fails the same way */
        if (uid == 0) ck_assert_int_eq(seteuid(0), 0);
        char notdir[1100];
        join(notdir, sizeof notdir, path, "sub.safetensors");
        write_small(notdir, 2, MG_ERR_IO);
        ck_assert_ptr_nonnull(strstr(mg_last_error(), strerror(ENOTDIR)));
    }
    chmod(dir, 0700);
    unsigned char *after = tu_read_file(path, &n1);
    ck_assert_uint_eq(n0, n1);
    ck_assert_int_eq(memcmp(before, after, n0), 0);
    ck_assert_int_eq(count_temps(dir), 0);
    free(before);
    free(after);
    remove_dir(dir);
}
END_TEST

/* A write that fails half-way (file size limit: the same path as a full disk) removes its
 * temporary file and leaves the previous checkpoint as it was. */
START_TEST(failed_write_leaves_old_file) {
    char *dir = make_dir(), path[1024];
    join(path, sizeof path, dir, "ck.safetensors");
    write_small(path, 1, MG_OK);
    size_t n0, n1;
    unsigned char *before = tu_read_file(path, &n0);

    enum { BIG = 1 << 16 };
    float *big = calloc(BIG, sizeof(float));
    mg_st_entry e[2] = {{"x", 1, {3}, big}, {"big", 1, {BIG}, big}};
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 4096;
    signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    mg_status st = mg_safetensors_write(path, e, 2, NULL, 0);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, SIG_DFL);
    ck_assert_int_eq(st, MG_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), path));
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "writing tensor data failed"));
    ck_assert_ptr_nonnull(strstr(mg_last_error(), strerror(EFBIG)));

    unsigned char *after = tu_read_file(path, &n1);
    ck_assert_uint_eq(n0, n1);
    ck_assert_int_eq(memcmp(before, after, n0), 0);
    ck_assert_int_eq(count_temps(dir), 0);
    free(before);
    free(after);
    free(big);
    remove_dir(dir);
}
END_TEST

START_TEST(failed_rename_and_stale_temp) {
    char *dir = make_dir(), path[1024], tmp[1100], inner[1100];
    /* the target is a non-empty directory: refused before anything is written */
    join(path, sizeof path, dir, "ck.safetensors");
    ck_assert_int_eq(mkdir(path, 0700), 0);
    join(inner, sizeof inner, path, "keep");
    tu_write_bytes(inner, "k", 1);
    write_small(path, 1, MG_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "not a regular file"));
    ck_assert_int_eq(count_temps(dir), 0);
    ck_assert_int_eq(access(inner, F_OK), 0);
    ck_assert_int_eq(unlink(inner), 0);
    ck_assert_int_eq(rmdir(path), 0);

    /* a temporary file of the same name exists: refused, and neither file is touched */
    write_small(path, 1, MG_OK);
    size_t n0, n1;
    unsigned char *before = tu_read_file(path, &n0);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    tu_write_bytes(tmp, "stale", 5);
    write_small(path, 2, MG_ERR_IO);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), tmp));
    ck_assert_ptr_nonnull(strstr(mg_last_error(), strerror(EEXIST)));
    unsigned char *after = tu_read_file(path, &n1);
    ck_assert_uint_eq(n0, n1);
    ck_assert_int_eq(memcmp(before, after, n0), 0);
    free(after);
    after = tu_read_file(tmp, &n1);
    ck_assert_uint_eq(n1, 5);
    free(after);
    free(before);
    remove_dir(dir);
}
END_TEST

/* ---- validated load ---- */

enum { N_MODEL = 4 };
static const char *model_names[N_MODEL] = {"wte.weight", "h.3.ln_1.weight", "h.3.ln_1.bias",
                                           "ln_f.weight"};
static const int model_ndim[N_MODEL] = {2, 1, 1, 1};
static const int64_t model_shape[N_MODEL][MG_MAX_DIMS] = {{10, 16}, {256}, {256}, {16}};

/* Writes the model's tensors (value k + i / 1000 in tensor k), plus `extra` when not NULL. */
static void write_model(const char *path, const char *extra) {
    mg_st_entry e[N_MODEL + 1];
    float *buf[N_MODEL + 1];
    int n = 0;
    for (int k = 0; k < N_MODEL; k++, n++) {
        int64_t m = numel_of(model_ndim[k], model_shape[k]);
        buf[k] = malloc(sizeof(float) * (size_t)m);
        for (int64_t i = 0; i < m; i++) buf[k][i] = (float)k + (float)i / 1000;
        e[k] = (mg_st_entry){model_names[k], model_ndim[k], {0}, buf[k]};
        memcpy(e[k].shape, model_shape[k], sizeof e[k].shape);
    }
    if (extra) {
        buf[n] = malloc(sizeof(float) * 2);
        buf[n][0] = buf[n][1] = 42;
        e[n] = (mg_st_entry){extra, 1, {2}, buf[n]};
        n++;
    }
    mg_st_meta m[2] = {{"format", "minigrad-gpt"}, {"n_layer", "4"}};
    ck_assert_msg(mg_safetensors_write(path, e, n, m, 2) == MG_OK, "%s", mg_last_error());
    for (int k = 0; k < n; k++) free(buf[k]);
}

typedef struct {
    mg_st_dest d[N_MODEL + 1];
    float *mem[N_MODEL + 1];
    int n;
} model_dests;

/* Destinations for the model, filled with a sentinel so that any write into them shows. */
static void make_dests(model_dests *md) {
    md->n = N_MODEL;
    for (int k = 0; k < N_MODEL; k++) {
        int64_t m = numel_of(model_ndim[k], model_shape[k]);
        md->mem[k] = malloc(sizeof(float) * (size_t)m * 2); /* room for a larger model shape too */
        memset(md->mem[k], 0xAB, sizeof(float) * (size_t)m * 2);
        md->d[k] = (mg_st_dest){model_names[k], model_ndim[k], {0}, md->mem[k]};
        memcpy(md->d[k].shape, model_shape[k], sizeof md->d[k].shape);
    }
    md->mem[N_MODEL] = NULL;
}

static bool dests_untouched(const model_dests *md) {
    for (int k = 0; k < N_MODEL; k++) {
        const unsigned char *b = (const unsigned char *)md->mem[k];
        size_t bytes = sizeof(float) * (size_t)numel_of(model_ndim[k], model_shape[k]) * 2;
        for (size_t i = 0; i < bytes; i++)
            if (b[i] != 0xAB) return false;
    }
    return true;
}

static void free_dests(model_dests *md) {
    for (int k = 0; k <= N_MODEL; k++) free(md->mem[k]);
}

START_TEST(load_fills_every_dest) {
    char *dir = make_dir(), path[1024];
    join(path, sizeof path, dir, "model.safetensors");
    write_model(path, NULL);
    model_dests md;
    make_dests(&md);
    mg_st_file *meta = NULL;
    ck_assert_msg(mg_safetensors_load(path, md.d, md.n, &meta) == MG_OK, "%s", mg_last_error());
    for (int k = 0; k < N_MODEL; k++) {
        int64_t m = numel_of(model_ndim[k], model_shape[k]);
        for (int64_t i = 0; i < m; i++) ck_assert(md.mem[k][i] == (float)k + (float)i / 1000);
        ck_assert_uint_eq(((unsigned char *)md.mem[k])[4 * m], 0xAB); /* nothing past the end */
    }
    ck_assert_ptr_nonnull(meta);
    ck_assert_str_eq(mg_st_meta_get(meta, "n_layer"), "4");
    mg_st_close(meta);
    ck_assert_int_eq(mg_safetensors_load(path, md.d, md.n, NULL), MG_OK);
    free_dests(&md);
    remove_dir(dir);
}
END_TEST

START_TEST(load_refuses_missing_extra_and_shape) {
    char *dir = make_dir(), path[1024], extra_path[1024];
    join(path, sizeof path, dir, "model.safetensors");
    join(extra_path, sizeof extra_path, dir, "extra.safetensors");
    write_model(path, NULL);
    write_model(extra_path, "foo");
    model_dests md;
    mg_st_file *meta = (mg_st_file *)&meta;

    /* a missing tensor, listed last so a copy-as-you-go load would already have written others */
    make_dests(&md);
    float spare[4] = {0};
    md.d[md.n++] = (mg_st_dest){"wpe.weight", 2, {2, 2}, spare};
    ck_assert_int_eq(mg_safetensors_load(path, md.d, md.n, &meta), MG_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "missing tensor 'wpe.weight'"));
    ck_assert_ptr_nonnull(strstr(mg_last_error(), path));
    ck_assert_ptr_null(meta);
    ck_assert(dests_untouched(&md));
    /* two missing: the first is named and the rest counted */
    md.d[0].name = "wte.weight.x";
    ck_assert_int_eq(mg_safetensors_load(path, md.d, md.n, NULL), MG_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "missing tensor 'wte.weight.x' (and 1 more)"));
    ck_assert(dests_untouched(&md));
    free_dests(&md);

    /* shape mismatch in the last dest */
    make_dests(&md);
    md.d[1].shape[0] = 512;
    ck_assert_int_eq(mg_safetensors_load(path, md.d, md.n, &meta), MG_ERR_FORMAT);
    ck_assert_ptr_nonnull(
        strstr(mg_last_error(), "h.3.ln_1.weight: shape in file (256) vs model (512)"));
    ck_assert_ptr_null(meta);
    ck_assert(dests_untouched(&md));
    md.d[1].shape[0] = 256;
    md.d[3].ndim = 2;
    md.d[3].shape[0] = 4;
    md.d[3].shape[1] = 4;
    ck_assert_int_eq(mg_safetensors_load(path, md.d, md.n, NULL), MG_ERR_FORMAT);
    ck_assert_ptr_nonnull(
        strstr(mg_last_error(), "ln_f.weight: shape in file (16) vs model (4,4)"));
    ck_assert(dests_untouched(&md));
    free_dests(&md);

    /* an extra tensor in the file */
    make_dests(&md);
    ck_assert_int_eq(mg_safetensors_load(extra_path, md.d, md.n, &meta), MG_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "unexpected tensor 'foo' in file"));
    ck_assert_ptr_nonnull(strstr(mg_last_error(), extra_path));
    ck_assert(dests_untouched(&md));
    /* two extras when the model asks for fewer tensors */
    ck_assert_int_eq(mg_safetensors_load(extra_path, md.d, md.n - 1, NULL), MG_ERR_FORMAT);
    ck_assert_ptr_nonnull(
        strstr(mg_last_error(), "unexpected tensor 'ln_f.weight' in file (and 1 more)"));
    ck_assert(dests_untouched(&md));
    /* ... which a partial load accepts */
    mg_st_file *f;
    ck_assert_int_eq(mg_safetensors_open(extra_path, &f), MG_OK);
    ck_assert_int_eq(mg_st_load(f, md.d, md.n, 0), MG_ERR_FORMAT);
    ck_assert(dests_untouched(&md));
    ck_assert_msg(mg_st_load(f, md.d, md.n - 1, MG_ST_ALLOW_EXTRA) == MG_OK, "%s", mg_last_error());
    ck_assert(md.mem[0][17] == 0.017f);
    ck_assert_uint_eq(((unsigned char *)md.mem[3])[0], 0xAB); /* not asked for, not written */
    /* bad requests */
    ck_assert_int_eq(mg_st_load(f, md.d, md.n, 0x80), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "unknown flags 0x80"));
    mg_st_dest twice[2] = {md.d[3], md.d[3]};
    ck_assert_int_eq(mg_st_load(f, twice, 2, MG_ST_ALLOW_EXTRA), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "destinations #0 and #1 are both 'ln_f.weight'"));
    mg_st_dest nodata[1] = {md.d[3]};
    nodata[0].data = NULL;
    ck_assert_int_eq(mg_st_load(f, nodata, 1, MG_ST_ALLOW_EXTRA), MG_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(mg_last_error(), "ln_f.weight: destination data is NULL"));
    ck_assert_int_eq(mg_st_load(NULL, md.d, 1, 0), MG_ERR_INVALID);
    mg_st_close(f);
    free_dests(&md);

    /* open errors pass through */
    join(path, sizeof path, dir, "absent.safetensors");
    make_dests(&md);
    ck_assert_int_eq(mg_safetensors_load(path, md.d, md.n, &meta), MG_ERR_IO);
    ck_assert_ptr_null(meta);
    free_dests(&md);
    remove_dir(dir);
}
END_TEST

/* ---- the checksum and non-finite values ---- */

/* The byte offset of the data area of a file. */
static size_t data_start(const char *path) {
    size_t n;
    unsigned char *b = tu_read_file(path, &n);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | b[i];
    free(b);
    return 8 + (size_t)hl;
}

/* Replaces the first occurrence of `from` in the file's bytes by `to` (same length). */
static void patch_file(const char *path, const char *from, const char *to) {
    size_t n, k = strlen(from);
    char *b = tu_read_file(path, &n);
    ck_assert_uint_eq(strlen(to), k);
    char *at = NULL;
    for (size_t i = 0; i + k <= n && !at; i++)
        if (!memcmp(b + i, from, k)) at = b + i;
    ck_assert_msg(at != NULL, "%s: no '%s'", path, from);
    memcpy(at, to, k);
    tu_write_bytes(path, b, n);
    free(b);
}

/* Loads the model file into fresh dests: the status, and whether the dests stayed untouched. */
static mg_status load_model(const char *path, unsigned flags, bool *untouched) {
    model_dests md;
    make_dests(&md);
    mg_st_file *f;
    mg_status st = mg_safetensors_open(path, &f);
    if (st == MG_OK) {
        st = mg_st_load(f, md.d, md.n, flags);
        mg_st_close(f);
    }
    *untouched = dests_untouched(&md);
    free_dests(&md);
    return st;
}

START_TEST(checksum_refuses_any_change) {
    char *dir = make_dir(), path[1024];
    join(path, sizeof path, dir, "model.safetensors");
    bool untouched;
    write_model(path, NULL);
    TU_OK(load_model(path, 0, &untouched));
    mg_st_file *f;
    TU_OK(mg_safetensors_open(path, &f));
    uint32_t crc;
    TU_OK(mg_st_checksum(f, &crc));
    char want[16];
    snprintf(want, sizeof want, "crc32:%08x", (unsigned)crc);
    ck_assert_str_eq(mg_st_meta_get(f, "checksum"), want);
    TU_OK(mg_st_verify(f));
    mg_st_close(f);

    /* one bit of one weight, anywhere in the data area: refused naming the file, nothing written */
    size_t n, start = data_start(path);
    free(tu_read_file(path, &n));
    mg_rng r = mg_rng_make(77);
    for (int k = 0; k < 20; k++) {
        write_model(path, NULL);
        tu_flip_bit(path, (long)(start + mg_rng_below(&r, (uint32_t)(n - start))), (int)mg_rng_below(&r, 8));
        mg_clear_error();
        ck_assert_int_eq(load_model(path, 0, &untouched), MG_ERR_FORMAT);
        ck_assert(untouched);
        tu_assert_error_has(path);
        tu_assert_error_has("checksum mismatch");
        TU_OK(mg_safetensors_open(path, &f));
        TU_ASSERT_ERR(mg_st_verify(f), MG_ERR_FORMAT, "checksum mismatch", path);
        mg_st_close(f);
    }
    /* a metadata value and a tensor's name in the header, changed so that the header stays valid */
    write_model(path, NULL);
    patch_file(path, "\"n_layer\":\"4\"", "\"n_layer\":\"5\"");
    TU_ASSERT_ERR(load_model(path, 0, &untouched), MG_ERR_FORMAT, "checksum mismatch", path);
    /* two tensors of one shape that swap names: the same names and shapes, other values */
    float px[2] = {1, 2}, py[2] = {3, 4}, gx[2] = {0, 0}, gy[2] = {0, 0};
    mg_st_entry pe[2] = {{"p.x", 1, {2}, px}, {"p.y", 1, {2}, py}};
    ck_assert_int_eq(mg_safetensors_write(path, pe, 2, NULL, 0), MG_OK);
    patch_file(path, "p.x", "p.z");
    patch_file(path, "p.y", "p.x");
    patch_file(path, "p.z", "p.y");
    mg_st_dest pd[2] = {{"p.x", 1, {2}, gx}, {"p.y", 1, {2}, gy}};
    TU_ASSERT_ERR(mg_safetensors_load(path, pd, 2, NULL), MG_ERR_FORMAT, "checksum mismatch");
    ck_assert(gx[0] == 0 && gy[0] == 0);
    tu_strip_checksum(path); /* without the checksum the swap goes unnoticed */
    TU_OK(mg_safetensors_load(path, pd, 2, NULL));
    ck_assert(gx[0] == 3 && gy[0] == 1);
    /* a malformed checksum value */
    write_model(path, NULL);
    TU_OK(mg_safetensors_open(path, &f));
    char sum[32];
    snprintf(sum, sizeof sum, "%s", mg_st_meta_get(f, "checksum"));
    mg_st_close(f);
    char worse[32];
    snprintf(worse, sizeof worse, "crc64:%s", sum + 6);
    patch_file(path, sum, worse);
    TU_ASSERT_ERR(load_model(path, 0, &untouched), MG_ERR_FORMAT, "'crc64:", "is not 'crc32:' and 8 lowercase hex");
    /* a file without a checksum (older versions, other tools) loads unchecked, even when changed */
    write_model(path, NULL);
    tu_strip_checksum(path);
    TU_OK(mg_safetensors_open(path, &f));
    ck_assert_ptr_null(mg_st_meta_get(f, "checksum"));
    TU_OK(mg_st_verify(f));
    mg_st_close(f);
    tu_flip_bit(path, -3, 0);
    TU_OK(load_model(path, 0, &untouched));
    ck_assert(!untouched);
    remove_dir(dir);
}
END_TEST

START_TEST(non_finite_values_are_refused) {
    char *dir = make_dir(), path[1024];
    join(path, sizeof path, dir, "nan.safetensors");
    float w[6] = {1, 2, 3, 4, 5, 6}, b[3] = {0, 0, 0}, odd[2] = {7, 8};
    const float nonfinite[3] = {NAN, INFINITY, -INFINITY};
    const char *names[3] = {"NaN", "+inf", "-inf"};
    for (int k = 0; k < 3; k++) {
        w[4] = nonfinite[k];
        odd[1] = nonfinite[k];
        mg_st_entry e[3] = {{"b", 1, {3}, b}, {"w", 2, {2, 3}, w}, {"unused", 1, {2}, odd}};
        ck_assert_int_eq(mg_safetensors_write(path, e, 3, NULL, 0), MG_OK);
        float wd[6], bd[3];
        memset(wd, 0x5A, sizeof wd);
        mg_st_dest d[2] = {{"b", 1, {3}, bd}, {"w", 2, {2, 3}, wd}};
        mg_st_file *f;
        TU_OK(mg_safetensors_open(path, &f));
        mg_clear_error();
        ck_assert_int_eq(mg_st_load(f, d, 2, MG_ST_ALLOW_EXTRA), MG_ERR_NONFINITE);
        tu_assert_error_has(path);
        tu_assert_error_has("tensor 'w' holds");
        tu_assert_error_has(names[k]);
        tu_assert_error_has("at element 4 of 6");
        for (int i = 0; i < 6; i++) ck_assert_uint_eq(((unsigned char *)wd)[4 * i], 0x5A); /* untouched */
        TU_OK(mg_st_load(f, d, 2, MG_ST_ALLOW_EXTRA | MG_ST_ALLOW_NONFINITE));
        ck_assert(wd[0] == 1 && wd[5] == 6 && !isfinite(wd[4]));
        /* a non-finite value in a tensor not loaded does not matter */
        w[4] = 5;
        e[1].data = w;
        ck_assert_int_eq(mg_safetensors_write(path, e, 3, NULL, 0), MG_OK);
        mg_st_close(f);
        TU_OK(mg_safetensors_open(path, &f));
        TU_OK(mg_st_load(f, d, 2, MG_ST_ALLOW_EXTRA));
        mg_st_dest all[3] = {d[0], d[1], {"unused", 1, {2}, odd}};
        TU_ASSERT_ERR(mg_st_load(f, all, 3, 0), MG_ERR_NONFINITE, "tensor 'unused' holds", "element 1 of 2");
        mg_st_close(f);
        odd[1] = 8;
    }
    remove_dir(dir);
}
END_TEST

/* ---- fuzz ---- */

/* Opens a (possibly corrupt) file and, when it opens, touches every tensor and metadata entry.
 * Returns 1 when it opened, 0 when it was refused with a message naming the file. */
static int open_and_walk(const char *path) {
    mg_st_file *f = NULL;
    mg_clear_error();
    mg_status st = mg_safetensors_open(path, &f);
    if (st != MG_OK) {
        ck_assert_ptr_null(f);
        ck_assert_msg(st == MG_ERR_FORMAT, "status %d: %s", st, mg_last_error());
        ck_assert_ptr_nonnull(strstr(mg_last_error(), path));
        return 0;
    }
    for (int i = 0; i < mg_st_count(f); i++) {
        const mg_st_tensor_info *t = mg_st_info(f, i);
        ck_assert(t->ndim >= 0 && t->ndim <= MG_MAX_DIMS);
        ck_assert_int_eq(mg_st_find(f, t->name), i);
        float *buf = malloc(sizeof(float) * (size_t)(t->numel + 1));
        ck_assert_msg(mg_st_read_f32(f, i, buf, t->numel) == MG_OK, "%s", mg_last_error());
        free(buf);
    }
    for (int i = 0; i < mg_st_meta_count(f); i++)
        ck_assert_ptr_eq(mg_st_meta_get(f, mg_st_meta_key(f, i)), mg_st_meta_value(f, i));
    mg_st_close(f);
    return 1;
}

START_TEST(fuzz_flips_and_truncations) {
    char *dir = make_dir(), path[1024], fuzz[1024];
    join(path, sizeof path, dir, "seed.safetensors");
    join(fuzz, sizeof fuzz, dir, "fuzz.safetensors");
    float a[6] = {1, 2, 3, 4, 5, 6}, s = 9;
    mg_st_entry e[3] = {{"h.0.w", 2, {2, 3}, a}, {"s", 0, {0}, &s}, {"z", 1, {0}, NULL}};
    mg_st_meta m[2] = {{"format", "minigrad-gpt"}, {"vocab", "ab\"c→"}};
    ck_assert_int_eq(mg_safetensors_write(path, e, 3, m, 2), MG_OK);
    size_t n;
    unsigned char *seed = tu_read_file(path, &n);
    unsigned char *b = malloc(n + 16);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | seed[i];
    size_t hdr_end = 8 + (size_t)hl;
    static const unsigned char interesting[] = {'{', '}',  '[',  ']', '"', ',', ':',
                                                '-', '0',  '9',  '.', 'e', ' ', '\\',
                                                0,   0x80, 0xff, 'F', '3', '2'};
    mg_rng r = mg_rng_make(0x5AFE);
    int opened = 0, refused = 0, caught = 0, iters = 4000;
    for (int it = 0; it < iters; it++) {
        memcpy(b, seed, n);
        size_t len = n;
        int kind = (int)mg_rng_below(&r, 4);
        if (kind == 0) { /* truncation anywhere */
            len = mg_rng_below(&r, (uint32_t)n);
        } else { /* 1..4 byte changes, mostly inside the header where the parser works */
            int k = 1 + (int)mg_rng_below(&r, 4);
            for (int j = 0; j < k; j++) {
                size_t at = mg_rng_below(&r, 4) ? mg_rng_below(&r, (uint32_t)hdr_end)
                                                : mg_rng_below(&r, (uint32_t)n);
                if (kind == 1)
                    b[at] ^= (unsigned char)(1u << mg_rng_below(&r, 8));
                else if (kind == 2)
                    b[at] = interesting[mg_rng_below(&r, sizeof interesting)];
                else
                    b[at] = (unsigned char)mg_rng_next(&r);
            }
        }
        /* a fresh file each time: rewriting a truncated one makes ext4 flush it on close */
        unlink(fuzz);
        tu_write_bytes(fuzz, b, len);
        if (open_and_walk(fuzz)) {
            opened++;
            /* a changed value in the data area never passes the checksum */
            bool data_changed = len == n && memcmp(b + hdr_end, seed + hdr_end, n - hdr_end) != 0;
            bool same = len == n && memcmp(b, seed, n) == 0;
            mg_st_file *f;
            ck_assert_int_eq(mg_safetensors_open(fuzz, &f), MG_OK);
            mg_status v = mg_st_verify(f);
            bool has_sum = mg_st_meta_get(f, "checksum") != NULL; /* a changed key name loses it */
            mg_st_close(f);
            if (same) ck_assert_int_eq(v, MG_OK);
            if (data_changed)
                ck_assert_msg(v == MG_ERR_FORMAT || !has_sum,
                              "iteration %d: a changed data area passed the checksum", it);
            caught += data_changed && v == MG_ERR_FORMAT;
        } else {
            refused++;
        }
    }
    ck_assert_int_gt(caught, 10);
    /* flips in the data area or inside strings still open (about 3% here); structural ones are
     * refused. Both counts guard against a loop that exercises only one side. */
    ck_assert_int_gt(opened, iters / 100);
    ck_assert_int_gt(refused, iters / 2);
    free(seed);
    free(b);
    remove_dir(dir);
}
END_TEST

static Suite *safetensors_suite(void) {
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("format");
    tcase_add_test(tc, round_trip_bit_exact);
    tcase_add_test(tc, write_refuses_a_target_that_is_not_a_regular_file);
    tcase_add_test(tc, layout_parsed_independently);
    tcase_add_test(tc, golden_bytes);
    tcase_add_test(tc, reads_foreign_layouts);
    tcase_add_test(tc, read_errors);
    suite_add_tcase(s, tc);

    tc = tcase_create("malformed");
    tcase_add_loop_test(tc, refuses_malformed, 0, N_BAD);
    tcase_add_test(tc, json_error_offset);
    tcase_add_test(tc, refuses_short_and_missing_files);
    tcase_add_test(tc, write_rejects_bad_arguments);
    suite_add_tcase(s, tc);

    tc = tcase_create("atomic");
    tcase_add_test(tc, overwrite_replaces_whole_file);
    tcase_add_test(tc, missing_folder_is_named_as_such);
    tcase_add_test(tc, unwritable_directory_leaves_old_file);
    tcase_add_test(tc, failed_write_leaves_old_file);
    tcase_add_test(tc, failed_rename_and_stale_temp);
    suite_add_tcase(s, tc);

    tc = tcase_create("load");
    tcase_add_test(tc, load_fills_every_dest);
    tcase_add_test(tc, load_refuses_missing_extra_and_shape);
    tcase_add_test(tc, checksum_refuses_any_change);
    tcase_add_test(tc, non_finite_values_are_refused);
    suite_add_tcase(s, tc);

    tc = tcase_create("fuzz");
    tcase_add_test(tc, fuzz_flips_and_truncations);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(safetensors_suite)
