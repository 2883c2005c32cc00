/* Fashion-MNIST's IDX files: a big-endian header (magic 0x0000 08 NN: unsigned bytes, NN dims,
 * then NN 32-bit sizes) followed by the bytes, the whole file gzip-compressed. */
#include "fm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

const char *const fm_class_names[FM_CLASSES] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

/* What a format error adds when the file is not gzip data: zlib then reads it as it is (so that
 * unpacked IDX files work), and a file that is neither gives messages that would puzzle without it. */
static const char *plain_note(gzFile f) {
    return gzdirect(f) ? " (the file is not gzip data: read as an uncompressed IDX file)" : "";
}

/* Reads exactly n bytes; MG_ERR_FORMAT naming what was being read when the stream ends early or
 * is corrupt. `got` receives the bytes read. */
static mg_status read_all(gzFile f, const char *path, const char *what, void *dst, int64_t n, int64_t *got) {
    *got = 0;
    uint8_t *p = dst;
    while (*got < n) {
        int64_t chunk = n - *got > (1 << 30) ? (1 << 30) : n - *got;
        int r = gzread(f, p + *got, (unsigned)chunk);
        if (r < 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);
            return mg_set_error(MG_ERR_FORMAT, "%s: corrupt gzip data while reading the %s (zlib: %s)", path, what,
                                msg && *msg ? msg : "unknown error");
        }
        if (r == 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);
            if (zerr != Z_OK && zerr != Z_STREAM_END)
                return mg_set_error(MG_ERR_FORMAT, "%s: truncated or corrupt gzip data in the %s (zlib: %s)", path, what,
                                    msg);
            return mg_set_error(MG_ERR_FORMAT, "%s: truncated: %lld bytes of %s expected, the file holds %lld%s", path,
                                (long long)n, what, (long long)*got, plain_note(f));
        }
        *got += r;
    }
    return MG_OK;
}

mg_status fm_read_idx(const char *path, int ndim, int64_t limit, uint8_t **data, int64_t dims[3]) {
    *data = NULL;
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT) return mg_set_error(MG_ERR_IO, "%s not found: " FM_PACKAGE_HINT, path);
        return mg_set_error(MG_ERR_IO, "%s: %s", path, strerror(errno));
    }
    gzFile f = gzopen(path, "rb");
    if (!f) return mg_set_error(MG_ERR_IO, "%s: cannot open: %s", path, strerror(errno ? errno : ENOMEM));
    uint8_t hdr[16];
    int64_t got;
    mg_status s = read_all(f, path, "header", hdr, 4 + 4 * ndim, &got);
    if (s != MG_OK) goto done;
    uint32_t magic = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
    if (magic != (uint32_t)(0x800 | ndim)) {
        s = mg_set_error(MG_ERR_FORMAT, "%s: not an IDX file of unsigned bytes with %d dims (magic 0x%08x, want 0x%08x)%s",
                         path, ndim, magic, (unsigned)(0x800 | ndim), plain_note(f));
        goto done;
    }
    int64_t total = 1;
    for (int d = 0; d < 3; d++) dims[d] = 1;
    for (int d = 0; d < ndim; d++) {
        const uint8_t *q = hdr + 4 + 4 * d;
        dims[d] = (int64_t)((uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3]);
        if (dims[d] > (1 << 24) || (d > 0 && dims[d] > 4096)) {
            s = mg_set_error(MG_ERR_FORMAT, "%s: dim %d is %lld, too large for Fashion-MNIST", path, d, (long long)dims[d]);
            goto done;
        }
    }
    if (limit > 0 && dims[0] > limit) dims[0] = limit;
    for (int d = 0; d < ndim; d++) total *= dims[d];
    *data = malloc((size_t)(total ? total : 1));
    if (!*data) {
        s = mg_set_error(MG_ERR_NOMEM, "%s: cannot allocate %lld bytes", path, (long long)total);
        goto done;
    }
    s = read_all(f, path, ndim == 1 ? "labels" : "images", *data, total, &got);
done:
    gzclose(f);
    if (s != MG_OK) {
        free(*data);
        *data = NULL;
    }
    return s;
}

static void split_path(char *buf, size_t n, const char *dir, const char *which, const char *kind) {
    snprintf(buf, n, "%s/%s-%s-ubyte.gz", dir, which, kind);
}

mg_status fm_load(const char *dir, const char *which, int64_t limit, fm_set *out) {
    memset(out, 0, sizeof *out);
    char ip[4096], lp[4096];
    split_path(ip, sizeof ip, dir, which, "images-idx3");
    split_path(lp, sizeof lp, dir, which, "labels-idx1");
    int64_t idims[3], ldims[3];
    mg_status s = fm_read_idx(ip, 3, limit, &out->images, idims);
    if (s == MG_OK) s = fm_read_idx(lp, 1, limit, &out->labels, ldims);
    if (s != MG_OK) {
        fm_set_free(out);
        return s;
    }
    if (idims[1] != FM_SIDE || idims[2] != FM_SIDE)
        s = mg_set_error(MG_ERR_FORMAT, "%s: images are %lldx%lld, the model needs %dx%d", ip, (long long)idims[1],
                         (long long)idims[2], FM_SIDE, FM_SIDE);
    else if (idims[0] != ldims[0])
        s = mg_set_error(MG_ERR_FORMAT, "%s holds %lld images but %s holds %lld labels", ip, (long long)idims[0], lp,
                         (long long)ldims[0]);
    else if (idims[0] == 0)
        s = mg_set_error(MG_ERR_FORMAT, "%s holds no images", ip);
    for (int64_t i = 0; s == MG_OK && i < ldims[0]; i++)
        if (out->labels[i] >= FM_CLASSES)
            s = mg_set_error(MG_ERR_FORMAT, "%s: label %d at index %lld is not a class 0..%d", lp, out->labels[i],
                             (long long)i, FM_CLASSES - 1);
    if (s != MG_OK) {
        fm_set_free(out);
        return s;
    }
    out->n = idims[0];
    return MG_OK;
}

void fm_set_free(fm_set *s) {
    free(s->images);
    free(s->labels);
    memset(s, 0, sizeof *s);
}

bool fm_present(const char *dir) {
    static const char *const files[] = {"train-images-idx3", "train-labels-idx1", "t10k-images-idx3", "t10k-labels-idx1"};
    for (int i = 0; i < 4; i++) {
        char p[4096];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s-ubyte.gz", dir, files[i]);
        if (stat(p, &st) != 0) return false;
    }
    return true;
}
