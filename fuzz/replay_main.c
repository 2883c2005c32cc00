/* Replays inputs through a fuzz target without libFuzzer, so that any compiler builds it and the
 * seed corpus (and any crash file a fuzzing run left) runs as an ordinary test, under the
 * sanitizers too:
 *
 *     fuzz_replay_safetensors fuzz/corpus/safetensors crash-1234...
 *
 * Each argument is a file or a folder; a folder's regular files (not its subfolders, not names
 * starting with '.') run in name order. The input is handed over in a buffer of exactly its size,
 * so that reading one byte past it is an error the address sanitizer sees. Exits 0 when every
 * input ran (a broken property or a crash aborts), 2 when an argument cannot be read or no
 * input was found at all. */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "replay: %s: cannot open: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            uint8_t *b = realloc(buf, cap *= 2);
            if (!b) break;
            buf = b;
        }
        size_t r = fread(buf + n, 1, cap - n, fp);
        if (r == 0) break;
        n += r;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (!buf || bad) {
        fprintf(stderr, "replay: %s: %s\n", path, bad ? "read error" : "out of memory");
        free(buf);
        return -1;
    }
    /* an exact-size copy: a read past the end lands outside the allocation */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        fprintf(stderr, "replay: %s: out of memory\n", path);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    printf("replay: %s (%zu bytes)\n", path, n);
    fflush(stdout);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every regular file of dir in name order; returns how many, or -1. */
static long run_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: %s: cannot open the folder: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            char **v = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *v);
            if (!v) break;
            names = v;
        }
        if (!(names[n] = strdup(e->d_name))) break;
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    long ran = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(dir) + strlen(names[i]) + 2;
        char *p = malloc(len);
        struct stat sb;
        if (p) snprintf(p, len, "%s/%s", dir, names[i]);
        if (p && stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) {
            if (run_file(p) != 0) ran = -1;
            if (ran >= 0) ran++;
        }
        free(p);
        free(names[i]);
    }
    free(names);
    return ran;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE_OR_FOLDER...\n  replays each input through the fuzz target once\n", argv[0]);
        return 2;
    }
    long total = 0;
    bool unreadable = false;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            unreadable = true;
            continue;
        }
        long ran = S_ISDIR(sb.st_mode) ? run_dir(argv[i]) : run_file(argv[i]) == 0 ? 1 : -1;
        if (ran < 0)
            unreadable = true;
        else
            total += ran;
    }
    printf("replay: %ld inputs ran\n", total);
    if (unreadable) fprintf(stderr, "replay: some inputs could not be read\n");
    if (total == 0) fprintf(stderr, "replay: no inputs found in the arguments given\n");
    return unreadable || total == 0 ? 2 : 0;
}
