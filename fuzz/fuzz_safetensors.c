/* Fuzz target for the safetensors reader (core/io/safetensors.c).
 *
 * The reader opens files by path, so each input goes into a memory file (memfd) that is opened
 * again through /proc/self/fd: the bytes never touch a disk and the reader sees a regular file.
 * Beyond "no crash, no hang, no leak, no undefined behaviour" it checks, for every input the
 * reader accepts, what its header promises:
 *  - every tensor is found again by its name, and its byte range lies in the data area with the
 *    size its shape needs;
 *  - every tensor reads (the file has not changed since open);
 *  - a strict load of all tensors into buffers of their own shapes succeeds;
 *  - every metadata key is found again and gives its own value.
 * A refused input must leave an error that names the file. */
#include "fuzz_util.h"

#include "minigrad/safetensors.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int memfd = -1;
static char mempath[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (memfd < 0) {
        memfd = memfd_create("fuzz.safetensors", MFD_CLOEXEC);
        fz_expect(memfd >= 0, "memfd_create works");
        snprintf(mempath, sizeof mempath, "/proc/self/fd/%d", memfd);
    }
    fz_expect(ftruncate(memfd, 0) == 0 && (size == 0 || pwrite(memfd, data, size, 0) == (ssize_t)size),
              "the input fits in a memory file");

    mg_st_file *f = NULL;
    if (mg_safetensors_open(mempath, &f) != MG_OK) {
        fz_expect(f == NULL, "a failed open returns no file");
        fz_expect(strncmp(mg_last_error(), mempath, strlen(mempath)) == 0, "an error names the file");
        return 0;
    }
    int n = mg_st_count(f);
    fz_expect(n >= 0, "a count is not negative");
    fz_expect(mg_st_info(f, -1) == NULL && mg_st_info(f, n) == NULL, "out-of-range infos are NULL");
    uint64_t data_start = 8;
    for (int b = 0; b < 8; b++) data_start += (uint64_t)data[b] << (8 * b);
    mg_st_dest *dest = calloc((size_t)n + 1, sizeof *dest);
    fz_expect(dest != NULL, "memory for the destinations");
    for (int i = 0; i < n; i++) {
        const mg_st_tensor_info *t = mg_st_info(f, i);
        fz_expect(t != NULL && t->name != NULL && strcmp(t->dtype, "F32") == 0, "an info per tensor");
        fz_expect(mg_st_find(f, t->name) == i, "a tensor is found by its name");
        fz_expect(t->ndim >= 0 && t->ndim <= MG_MAX_DIMS, "ndim in range");
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
        fz_expect(numel == t->numel, "numel is the product of the shape");
        fz_expect(t->begin <= t->end && t->end - t->begin == (uint64_t)t->numel * 4, "the byte range fits the shape");
        fz_expect(data_start <= size && t->end <= size - data_start, "the byte range lies in the data area");
        dest[i].name = t->name;
        dest[i].ndim = t->ndim;
        memcpy(dest[i].shape, t->shape, sizeof dest[i].shape);
        float *buf = malloc((size_t)t->numel * sizeof(float) + 1);
        fz_expect(buf != NULL, "memory for a tensor");
        fz_expect(mg_st_read_f32(f, i, buf, t->numel) == MG_OK, "every tensor reads");
        if (t->numel > 0) fz_expect(mg_st_read_f32(f, i, buf, t->numel - 1) != MG_OK, "a short destination is refused");
        dest[i].data = buf;
    }
    fz_expect(mg_st_load(f, dest, n, 0) == MG_OK, "a strict load of every tensor succeeds");
    for (int i = 0; i < n; i++) free(dest[i].data);
    free(dest);

    int m = mg_st_meta_count(f);
    for (int i = 0; i < m; i++) {
        const char *k = mg_st_meta_key(f, i), *v = mg_st_meta_value(f, i);
        fz_expect(k != NULL && v != NULL, "metadata entries have a key and a value");
        fz_expect(mg_st_meta_get(f, k) == v, "metadata keys are unique and found again");
    }
    fz_expect(mg_st_meta_key(f, m) == NULL && mg_st_meta_value(f, -1) == NULL, "out-of-range metadata is NULL");
    mg_st_close(f);
    return 0;
}
